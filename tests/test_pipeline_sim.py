"""An independent, explicit event simulation of pipeline schedules, against scalelib's closed forms.

scalelib's own `pipeline_schedule` simulates op by op too, and `test_pipeline.py` holds it to the
closed forms; this file does not use it. It builds each stage's op order from the schedules'
definitions (GPipe: all forwards, then all backwards; 1F1B: stage s warms up with p − s − 1
forwards, then alternates; interleaved 1F1B as Megatron-LM's `forward_backward_pipelining_with_
interleaving` orders it), times every op as an event (an op starts when its stage is free and its
input has arrived), and reads off

* the step's time, hence the bubble: idle stage-time over all stage-time, and
* the peak activations a stage holds: a forward's activations are held from its start until its
  backward ends, so a stage's count at any moment is (forwards begun − backwards done) in its own
  order; it depends on the order alone, not on the timing.

Both are compared with scalelib's closed forms (`pipeline_bubble_fraction`,
`pipeline_peak_activations`) and with what `training_cost` charges for them (the step's stretch and
the activation memory per chip) over many (stages, microbatches, chunks).
"""

import heapq

import pytest

import scalelib as sl


def stage_orders(p, m, schedule, v=1):
    """Each stage's ops in program order: (kind, microbatch, virtual stage) with virtual stage = chunk·p + s."""
    orders = []
    for s in range(p):
        if schedule == "gpipe":
            orders.append([("F", i, s) for i in range(m)] + [("B", i, s) for i in range(m)])
            continue
        if schedule == "1f1b":
            warm = min(m, p - s - 1)
            fwd = [("F", i, s) for i in range(m)]
            bwd = [("B", i, s) for i in range(m)]
        else:  # interleaved (Megatron-LM): microbatches go through each chunk in groups of p
            total = m * v
            chunk_f = lambda k: (k % (p * v)) // p  # noqa: E731
            mb = lambda k: (k // (p * v)) * p + k % p  # noqa: E731
            fwd = [("F", mb(k), chunk_f(k) * p + s) for k in range(total)]
            bwd = [("B", mb(k), (v - 1 - chunk_f(k)) * p + s) for k in range(total)]
            warm = min(total, (p - s - 1) * 2 + (v - 1) * p)
        order, f, b = list(fwd[:warm]), warm, 0
        while f < len(fwd):  # steady state: one forward, one backward
            order += [fwd[f], bwd[b]]
            f, b = f + 1, b + 1
        order += bwd[b:]
        orders.append(order)
    return orders


def simulate(p, m, schedule, v=1, t_f=1.0, t_b=2.0):
    """Discrete-event simulation: returns (step time, {op: (start, end)}).

    A forward of microbatch i on virtual stage c·p + s needs that microbatch's forward on the virtual
    stage before it; a backward needs the backward on the virtual stage after it (the last one: its own
    forward). Each op takes t_f / v or t_b / v; transfers are free; a stage runs one op at a time, in order.
    """
    orders = stage_orders(p, m, schedule, v)
    last = p * v - 1
    end = {}
    nxt = [0] * p
    free = [0.0] * p
    events = [(0.0, s) for s in range(p)]  # (time a stage may look at its next op, stage)
    waiting = {}  # dependency -> stages waiting on it
    while events:
        now, s = heapq.heappop(events)
        while nxt[s] < len(orders[s]):
            kind, i, vs = orders[s][nxt[s]]
            dep = (("F", i, vs - 1) if vs else None) if kind == "F" else (("B", i, vs + 1) if vs < last else ("F", i, vs))
            if dep is not None and dep not in end:
                waiting.setdefault(dep, []).append(s)
                break
            start = max(free[s], end[dep][1] if dep else 0.0)
            finish = start + (t_f if kind == "F" else t_b) / v
            end[(kind, i, vs)] = (start, finish)
            free[s] = finish
            nxt[s] += 1
            for w in waiting.pop((kind, i, vs), []):
                heapq.heappush(events, (finish, w))
    assert all(n == len(o) for n, o in zip(nxt, orders)), "the schedule deadlocked"
    assert len(end) == 2 * p * m * v
    return max(e for _, e in end.values()), end


def peak_held(p, m, schedule, v=1):
    """Most microbatches' activations any stage holds (a chunk's count 1/v of a stage's), from the order alone."""
    best = 0
    for order in stage_orders(p, m, schedule, v):
        held = 0
        for kind, _, _ in order:
            held += 1 if kind == "F" else -1
            best = max(best, held)
    return best / v


CASES = [(p, m, "gpipe", 1) for p in (1, 2, 3, 4, 8) for m in (1, 2, 3, 5, 8, 16)]
CASES += [(p, m, "1f1b", 1) for p in (1, 2, 3, 4, 5, 8) for m in (1, 2, 3, 4, 7, 8, 12, 32)]
CASES += [(p, g * p, "interleaved", v) for p in (2, 3, 4, 8) for g in (1, 2, 3) for v in (2, 3, 4)]


@pytest.mark.parametrize("p, m, schedule, v", CASES)
def test_the_event_simulation_gives_the_closed_forms_bubble_and_peak_activations(p, m, schedule, v):
    t_f, t_b = 1.0, 2.0
    time, _ = simulate(p, m, schedule, v, t_f, t_b)
    bubble = 1 - m * (t_f + t_b) / time
    assert sl.pipeline_bubble_fraction(p, m, virtual_stages=v) == pytest.approx(bubble, abs=1e-12)
    assert sl.pipeline_peak_activations(p, m, schedule=schedule, virtual_stages=v) == pytest.approx(
        peak_held(p, m, schedule, v), abs=1e-12)


def test_the_simulated_step_is_the_ideal_plus_p_minus_1_stage_slots_over_v():
    # By hand: the first microbatch needs p − 1 forwards and backwards before the last stage is busy,
    # so the step is m·(t_f + t_b) + (p − 1)·(t_f + t_b)/v, whatever the ratio t_b / t_f.
    for p, m, schedule, v in ((4, 8, "gpipe", 1), (4, 8, "1f1b", 1), (4, 8, "interleaved", 2), (8, 16, "1f1b", 1)):
        for t_b in (1.0, 2.0, 3.0):
            time, _ = simulate(p, m, schedule, v, 1.0, t_b)
            assert time == pytest.approx((m + (p - 1) / v) * (1.0 + t_b))


def test_gpipe_holds_every_microbatch_1f1b_only_the_pipes_depth():
    assert peak_held(4, 16, "gpipe") == 16 and peak_held(4, 16, "1f1b") == 4
    assert peak_held(4, 2, "1f1b") == 2  # fewer microbatches than stages: all of them
    # Korthikanti et al. (2022): interleaving holds p·(1 + (p − 1)/(p·v)) = 4 + 3/2 for p = 4, v = 2
    assert peak_held(4, 8, "interleaved", 2) == pytest.approx(5.5)


def test_every_op_of_the_simulation_waits_for_its_input_and_its_stage():
    p, m, v = 4, 8, 2
    _, ops = simulate(p, m, "interleaved", v)
    for (kind, i, vs), (start, finish) in ops.items():
        if kind == "F" and vs:
            assert start >= ops[("F", i, vs - 1)][1]
        if kind == "B":
            assert start >= ops[("B", i, vs + 1)][1] if vs < p * v - 1 else start >= ops[("F", i, vs)][1]
    for s in range(p):  # one op at a time per stage
        spans = sorted(span for (_, _, vs), span in ops.items() if vs % p == s)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:]))


# --- what the training cost model charges for a pipeline ------------------------------------------------

NODE = sl.gpu_cluster(1, "h100")
M = sl.model("llama-3-8b")


def _cost(schedule, m, remat="full", v=1, pipeline=8, B=None):
    plan = sl.ParallelPlan(pipeline=pipeline, microbatches=m, schedule=schedule, virtual_stages=v, remat=remat)
    return sl.training_cost(M, B or m * 4096, plan, NODE, seq_len=4096)


@pytest.mark.parametrize("schedule, v, m", [("gpipe", 1, 4), ("gpipe", 1, 16), ("1f1b", 1, 4), ("1f1b", 1, 16),
                                            ("1f1b", 1, 32), ("interleaved", 2, 8), ("interleaved", 4, 16)])
def test_the_step_is_stretched_by_the_simulated_bubble(schedule, v, m):
    cost = _cost(schedule, m, v=v)
    time, _ = simulate(8, m, schedule, v)
    assert cost.bubble_fraction == pytest.approx(1 - 3 * m / time, abs=1e-12)
    # no collective binds on one node here, so the step is the two passes' compute stretched by the bubble
    assert cost.time_s == pytest.approx(cost.compute_s * time / (3 * m), rel=1e-12)


@pytest.mark.parametrize("schedule, v, m", [("gpipe", 1, 16), ("1f1b", 1, 4), ("1f1b", 1, 16), ("1f1b", 1, 32),
                                            ("interleaved", 2, 16), ("interleaved", 4, 32)])
def test_activation_memory_is_the_simulated_peak_of_microbatches_held(schedule, v, m):
    # Full remat keeps one bf16 vector of width D per token and layer of the stage, for every microbatch
    # the stage holds, plus one layer's full activations to recompute into (the same for every schedule,
    # so it cancels in the difference with a one-stage-deep hold). By hand: the stage has L / p = 4 layers,
    # a microbatch 4096 tokens.
    B = m * 4096
    cost = _cost(schedule, m, v=v, B=B)
    held = peak_held(8, m, schedule, v)
    per_microbatch = 2 * M.D * 4096 * (M.L // 8)  # bytes: bf16 · D · tokens · layers of the stage
    gpipe_one = _cost("gpipe", 1, B=4096).memory_bytes["activations"]  # one microbatch held
    assert cost.memory_bytes["activations"] - gpipe_one == pytest.approx((held - 1) * per_microbatch, rel=1e-12)


def test_1f1b_holds_p_microbatches_where_gpipe_holds_all_m_in_the_cost_model():
    gpipe, one = _cost("gpipe", 32), _cost("1f1b", 32)
    per_microbatch = 2 * M.D * 4096 * (M.L // 8)
    assert gpipe.memory_bytes["activations"] - one.memory_bytes["activations"] == pytest.approx(
        (32 - 8) * per_microbatch, rel=1e-12)
    assert gpipe.time_s == pytest.approx(one.time_s)  # the same bubble
