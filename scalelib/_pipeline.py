"""Pipeline schedules (chapter 5): GPipe, 1F1B and interleaved 1F1B, simulated op by op and drawn.

A pipeline of p stages splits the layers into p consecutive groups, one per stage (or, interleaved,
v smaller chunks per stage, stage s holding chunks s, s + p, s + 2p, ...). A step's batch is cut
into m microbatches; each goes forward through every stage and then backward in reverse order. A
stage can only work on a microbatch once the stage before it (after it, going backward) is done
with it, so stages sit idle at the start and at the end of every step: the bubble.

* **GPipe** runs all m forwards, then all m backwards: it keeps all m microbatches' activations.
* **1F1B** runs p − s − 1 forwards on stage s to fill the pipe, then alternates one forward and one
  backward, so stage 0 never holds more than p microbatches' activations; the bubble is GPipe's.
* **Interleaved 1F1B** (Narayanan et al., 2021, "Efficient Large-Scale Language Model Training on
  GPU Clusters Using Megatron-LM") gives each stage v chunks, so a bubble slot costs 1/v of a
  stage's work: the bubble shrinks v times, for v times as many stage-to-stage transfers and a
  little more activation memory.

:func:`pipeline_schedule` simulates a schedule and returns every op's start and end;
:func:`pipeline_bubble_fraction` (in :mod:`scalelib._parallelism`) and
:func:`pipeline_peak_activations` are the closed forms the simulation is tested against;
:func:`plot_pipeline_schedule` draws the Gantt chart.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError
from ._validate import count, name as _name, positive, shown

#: The schedules a pipeline can run.
SCHEDULES = ("gpipe", "1f1b", "interleaved")


@dataclass(frozen=True)
class PipelineOp:
    """One forward ("F") or backward ("B") pass of microbatch `microbatch` through chunk `chunk` of `stage`."""

    stage: int
    kind: str
    microbatch: int
    chunk: int
    start: float
    end: float


@dataclass(frozen=True)
class PipelineSchedule:
    """A simulated pipeline step: its ops, how long it took, how idle the stages were, their peak memory.

    ``time`` and op times are in units of one microbatch's forward pass through one whole stage.
    ``bubble_fraction`` is the share of stage-time spent idle; ``peak_activations`` the most
    microbatches' activations (in whole-stage units: a chunk counts 1/v) any stage holds at once.
    """

    schedule: str
    stages: int
    microbatches: int
    virtual_stages: int
    backward_ratio: float
    ops: tuple[PipelineOp, ...]
    time: float
    bubble_fraction: float
    peak_activations: float

    def __repr__(self) -> str:
        return (f"PipelineSchedule({self.schedule}, p={self.stages}, m={self.microbatches}"
                + (f", v={self.virtual_stages}" if self.virtual_stages > 1 else "")
                + f": bubble {self.bubble_fraction:.3f}, peak {self.peak_activations:g} microbatches)")


def _schedule_args(stages, microbatches, schedule, virtual_stages):
    p, m = count("stages", stages), count("microbatches", microbatches)
    schedule = _name("schedule", schedule, SCHEDULES, "pipeline schedule")
    v = count("virtual_stages", virtual_stages)
    if schedule != "interleaved" and v != 1:
        raise InvalidValueError(f"`virtual_stages`: only the interleaved schedule splits a stage into chunks; "
                                f"{schedule!r} takes virtual_stages=1, got {v}")
    if schedule == "interleaved" and m % p:
        raise InvalidValueError(f"`microbatches`: the interleaved schedule runs microbatches in groups of p = {p} "
                                f"(one group per chunk in turn; p: `stages`), so m must be a multiple of {p}, got {m}")
    return p, m, schedule, v


def _orders(p: int, m: int, schedule: str, v: int) -> list[list[tuple[str, int, int]]]:
    """Each stage's ops in the order it runs them: (kind, microbatch, chunk)."""
    orders = []
    for s in range(p):
        if schedule == "gpipe":
            orders.append([("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)])
            continue
        total = m * v
        # The k-th forward (backward) of a stage: microbatches go through a chunk in groups of p.
        fwd = [("F", (k // (p * v)) * p + k % p, (k // p) % v) for k in range(total)]
        bwd = [("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v) for k in range(total)]
        warm = min(total, (p - s - 1) * 2 + (v - 1) * p if v > 1 else p - s - 1)
        order = fwd[:warm]
        f, b = warm, 0
        while f < total:
            order.append(fwd[f])
            f += 1
            order.append(bwd[b])
            b += 1
        order += bwd[b:]
        orders.append(order)
    return orders


def _simulate(p: int, m: int, schedule: str, v: int, backward_ratio: float) -> PipelineSchedule:
    orders = _orders(p, m, schedule, v)
    cost = {"F": 1.0 / v, "B": backward_ratio / v}
    done: dict[tuple[str, int, int], float] = {}  # (kind, microbatch, virtual stage) -> end time
    free, nxt, ops = [0.0] * p, [0] * p, []
    last = p * v - 1
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, i, c = orders[s][nxt[s]]
                vs = c * p + s  # the op's place in the chain of p·v virtual stages
                need = (("F", i, vs - 1) if vs else None) if kind == "F" else (
                    ("B", i, vs + 1) if vs < last else ("F", i, vs))
                if need is not None and need not in done:
                    break
                start = max(free[s], done[need] if need is not None else 0.0)
                end = start + cost[kind]
                done[(kind, i, vs)] = end
                free[s] = end
                ops.append(PipelineOp(s, kind, i, c, start, end))
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover (every order above is deadlock-free; this guards the loop)
            raise InvalidValueError(f"pipeline_schedule: the {schedule} order deadlocks for p = {p}, m = {m}, v = {v}")
    time = max(op.end for op in ops)
    busy = m * (1.0 + backward_ratio)
    peak = 0.0
    for s in range(p):
        # A forward's activations are held from its end until its backward's end (ties: hold first).
        events = sorted((op.end, -1 if op.kind == "F" else 1) for op in ops if op.stage == s)
        held = 0
        for _, step in events:
            held -= step
            peak = max(peak, held / v)
    return PipelineSchedule(schedule, p, m, v, backward_ratio, tuple(sorted(ops, key=lambda o: (o.stage, o.start))),
                            time, 1.0 - busy / time, peak)


def pipeline_schedule(stages, microbatches, *, schedule="1f1b", virtual_stages=1, backward_ratio=2.0):
    """Simulate one step of a pipeline schedule, op by op, and measure its bubble and peak memory.

    Each stage runs its ops in the schedule's order, each as soon as its input is ready: a
    forward once the previous virtual stage has done that microbatch's forward, a backward once
    the next one has done its backward (the last: once its own forward is done). Transfers take
    no time. A forward through a whole stage takes 1, a backward `backward_ratio` (2: two
    matmuls for each of the forward's), a chunk 1/v of either.

    Args:
        stages: p, pipeline stages (a whole number >= 1).
        microbatches: m, microbatches per step (a whole number >= 1; a multiple of p when interleaved).
        schedule: ``"gpipe"``, ``"1f1b"`` or ``"interleaved"``.
        virtual_stages: v, chunks per stage (interleaved only; 1 otherwise).
        backward_ratio: a backward's time over a forward's (> 0).

    Returns:
        a :class:`PipelineSchedule` (times in units of one microbatch's forward through a stage).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> pipeline_schedule(4, 8)
        PipelineSchedule(1f1b, p=4, m=8: bubble 0.273, peak 4 microbatches)
        >>> round(pipeline_schedule(4, 8, schedule="interleaved", virtual_stages=2).bubble_fraction, 4)
        0.1579
    """
    p, m, schedule, v = _schedule_args(stages, microbatches, schedule, virtual_stages)
    ratio = positive("backward_ratio", backward_ratio)
    if not isinstance(ratio, float):
        raise InvalidValueError(f"`backward_ratio` must be one number, got {shown(backward_ratio)}")
    if p * m * v > 20000:
        raise InvalidValueError(f"`microbatches`: pipeline_schedule simulates every op: p·m·v = {p * m * v} ops per "
                                f"pass (`stages`·`microbatches`·`virtual_stages`) is more than it draws (20000); use "
                                f"pipeline_bubble_fraction for the closed form")
    return _simulate(p, m, schedule, v, ratio)


@derivable
def pipeline_peak_activations(stages, microbatches, *, schedule="1f1b", virtual_stages=1):
    """Most microbatches' activations a pipeline stage holds at once (the first stage, which waits longest).

    GPipe keeps every microbatch until the backwards start; 1F1B at most p (the pipe's depth);
    interleaved 1F1B a little more: its first stage warms up with 2(p − 1) + (v − 1)·p chunks, each
    1/v of a stage, and holds one more before the first backward frees one: p + (p − 1)/v stages' worth,
    p·(1 + (p − 1)/(p·v)) as Korthikanti et al. (2022, "Reducing Activation Recomputation in Large
    Transformer Models") write it.

    Formula:
        GPipe: m;  1F1B: min(m, p);  interleaved: min(m, p + (p − 1) / v)

    Args:
        stages: p, pipeline stages (a whole number >= 1).
        microbatches: m, microbatches per step (a whole number >= 1; a multiple of p when interleaved).
        schedule: ``"gpipe"``, ``"1f1b"`` or ``"interleaved"``.
        virtual_stages: v, chunks per stage (interleaved only).

    Returns:
        microbatches (whole-stage activations of one microbatch each).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> pipeline_peak_activations(8, 32), pipeline_peak_activations(8, 32, schedule="gpipe")
        (8.0, 32.0)
        >>> pipeline_peak_activations(8, 32, schedule="interleaved", virtual_stages=2)
        11.5
    """
    p, m, schedule, v = _schedule_args(stages, microbatches, schedule, virtual_stages)
    if schedule == "gpipe":
        return Derivation("peak activations", "m", f"{m}", float(m), "microbatches",
                          where=("m: microbatches; GPipe holds them all until the backwards start",))
    if schedule == "1f1b" or v == 1:
        return Derivation("peak activations", "min(m, p)", f"min({m}, {p})", float(min(m, p)), "microbatches",
                          where=("m: microbatches; p: stages (the first stage's forwards in flight)",))
    value = min(float(m), p + (p - 1) / v)
    return Derivation("peak activations", "min(m, p + (p − 1) / v)", f"min({m}, {p} + ({p} − 1) / {v})", value,
                      "microbatches",
                      where=("m: microbatches; p: stages; v: chunks per stage, each 1/v of a stage's activations",))


def plot_pipeline_schedule(stages, microbatches, *, schedule="1f1b", virtual_stages=1, backward_ratio=2.0, ax=None):
    """Gantt chart of one pipeline step: a row per stage, a box per forward or backward, idle time blank.

    Forwards are pale, backwards dark, each box coloured by its microbatch and labelled with its
    number (and chunk, interleaved); the title gives the bubble fraction.

    Args:
        stages, microbatches, schedule, virtual_stages, backward_ratio: as in :func:`pipeline_schedule`.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> ax = plot_pipeline_schedule(4, 8, schedule="gpipe")
        >>> ax.get_xlabel()
        'time (forward passes of one microbatch through one stage)'
    """
    from matplotlib import colormaps

    from ._diagrams import _axes

    sched = pipeline_schedule(stages, microbatches, schedule=schedule, virtual_stages=virtual_stages,
                              backward_ratio=backward_ratio)
    p, m, v = sched.stages, sched.microbatches, sched.virtual_stages
    created = ax is None
    # At most 9.5 in wide: the site shows a wider figure scaled down, its labels too small to read.
    ax = _axes(ax, figsize=(min(9.5, 3.0 + 0.35 * sched.time * v ** 0.5), 0.7 + 0.5 * p))
    cmap = colormaps["tab20"]
    labels = []
    for op in sched.ops:
        colour = cmap((2 * op.microbatch) % 20 + (0 if op.kind == "B" else 1))
        ax.barh(op.stage, op.end - op.start, left=op.start, height=0.8, color=colour, edgecolor="black",
                linewidth=0.4)
        width = op.end - op.start
        label = f"{op.microbatch}" + (f".{op.chunk}" if v > 1 else "")
        labels.append((ax.text(op.start + width / 2, op.stage, label, ha="center", va="center", fontsize=9),
                       op.start, op.end))
    ax.set_yticks(range(p), [f"stage {s}" for s in range(p)])
    ax.invert_yaxis()
    ax.set_xlim(0, sched.time)
    ax.set_xlabel("time (forward passes of one microbatch through one stage)")
    ax.set_ylabel("pipeline stage")
    name = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved 1F1B (v = {v})"}[sched.schedule]
    ax.set_title(f"{name}: p = {p}, m = {m}; pale = forward, dark = backward; bubble {sched.bubble_fraction:.1%}")
    ax.figure.tight_layout()
    if created:
        from ._plot import _legible

        _legible(ax.figure, relayout=True)
    # A box's number only where it fits inside the box (no label running into the next one).
    renderer = ax.figure.canvas.get_renderer()
    for text, start, end in labels:
        left, right = (ax.transData.transform((x, 0))[0] for x in (start, end))
        text.set_visible(text.get_window_extent(renderer).width <= 0.92 * (right - left))
    return ax
