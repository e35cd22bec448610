"""Capstone 11.12, the sharding as a choice, confirmed against compiled HLO for one layer.

11.12's answer is read from chapter 5's plan search (FSDP alone when a plan without tensor or pipeline
parallelism reaches the best step on 11.3's slice, FSDP + TP otherwise). Here one layer of each of two briefs'
models (one whose answer is FSDP, one whose answer is FSDP + TP) is compiled by XLA for 8 simulated CPU
devices under that sharding, FSDP over X (and tensor parallelism over Y), and the collectives read from the
optimised HLO are set against what the training cost model charges a layer under the same plan:

- FSDP: each weight matrix of the layer gathered over X, the layer's parameters / t in all (the cost model's
  gathered-weights buffer, ``memory_bytes["gathered weights"]``, is two such layers: the one computing and the
  next being fetched);
- TP: an AllGather of the [tokens, D] activations before attention and before the MLP, and a ReduceScatter
  after each, over Y: 4 · (t − 1)/t · [tokens, D] sent per device per layer and pass (none under FSDP alone).

The layer is its weight matmuls (attention's four projections and the gated MLP's three) at the model's own
width, in bf16, compiled from shapes only (nothing runs); attention's core acts head by head and moves nothing
under these shardings, so a stand-in that multiplies each head's q, k and v takes its place. Two things differ
from a TPU, and the checks say so: CPU XLA carries bf16 operands as f32, so every compiled buffer has twice the
planned bytes; and it compiles a ReduceScatter as an all-reduce followed by a slice.

JAX fixes its device count when it starts, and other test files start it with one device, so the compiling runs
in a fresh Python process, as in tests/test_jax_bridge.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import scalelib as sl
from scalelib.course import capstone
from scalelib.course.answer_key import ch11

TOKENS = 4096  # tokens of the simulated batch: 8 sequences of 512
SEQ = 512
DEVICES = 8

SCRIPT = textwrap.dedent("""
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import json, sys
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import scalelib as sl

    def layer_collectives(D, F, NH, KH, H, tokens, X, Y):
        mesh = sl.simulated_mesh((X, Y))
        c = jax.lax.with_sharding_constraint
        S = lambda *spec: NamedSharding(mesh, P(*spec))
        rows = ("X", "Y")                     # tokens between blocks: over X and, sequence-parallel, over Y
        block_in = lambda x: c(x, S("X", None))      # TP: AllGather over Y of the block's input
        block_out = lambda y: c(y, S(rows, None))    # TP: ReduceScatter over Y of the partial sums
        wide = lambda w: c(w, S(None, "Y"))          # W[D_X, out_Y]: FSDP gathers D over X
        narrow = lambda w: c(w, S("Y", None))        # W[in_Y, D_X]: FSDP gathers D over X

        def layer(x, wq, wk, wv, wo, wg, wu, wd):
            h = block_in(x)
            q, k, v = h @ wide(wq), h @ wide(wk), h @ wide(wv)
            T, K = q.shape[0], KH // H
            a = (q.reshape(T, K, -1, H) * (k * v).reshape(T, K, 1, H)).reshape(T, NH)  # per head: no collective
            x = x + block_out(a @ narrow(wo))
            h = block_in(x)
            g = jax.nn.silu(h @ wide(wg)) * (h @ wide(wu))
            return x + block_out(g @ narrow(wd))

        bf = jnp.bfloat16
        args = [jax.ShapeDtypeStruct((tokens, D), bf, sharding=S(rows, None))]
        for shape, spec in [((D, NH), ("X", "Y")), ((D, KH), ("X", "Y")), ((D, KH), ("X", "Y")),
                            ((NH, D), ("Y", "X")), ((D, F), ("X", "Y")), ((D, F), ("X", "Y")), ((F, D), ("Y", "X"))]:
            args.append(jax.ShapeDtypeStruct(shape, bf, sharding=S(*spec)))
        return sl.compiled_collectives(layer, *args)

    out = {}
    for name, sizes in json.loads(sys.argv[1]).items():
        out[name] = [[c.kind, list(c.axes) if c.axes is not None else None, list(c.shape), c.dtype, c.nbytes]
                     for c in layer_collectives(*sizes)]
    print(json.dumps(out))
""")


def _two_briefs():
    """The first of 300 learners whose 11.12 answer is FSDP, and the first whose answer is FSDP + TP."""
    found = {}
    for i in range(300):
        b = capstone.brief_for(f"Learner {i:03d}")
        found.setdefault(ch11._sharding(b), (f"Learner {i:03d}", b))
        if len(found) == 2:
            return found
    raise AssertionError(f"300 learners give only {sorted(found)}")


def _mesh(b, answer) -> tuple[int, int]:
    """(X, Y) of the 8 simulated devices: FSDP over all 8, or the search's tensor degree (up to 4) over Y."""
    if answer == "FSDP":
        return DEVICES, 1
    n, topo, k, best, days = ch11._training_slice(b)
    m = sl.model(b.model)
    t = max(y for y in (2, 4) if best.plan.tensor % y == 0 and m.K % y == 0)
    return DEVICES // t, t


@pytest.fixture(scope="module")
def layers():
    briefs = _two_briefs()
    cases, meta = {}, {}
    for answer, (name, b) in briefs.items():
        m = sl.model(b.model)
        X, Y = _mesh(b, answer)
        cases[answer] = [m.D, m.F, m.N * m.H, m.K * m.H, m.H, TOKENS, X, Y]
        meta[answer] = (name, b, m, X, Y)
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    compiled = json.loads(run.stdout.strip().splitlines()[-1])
    return {answer: (*meta[answer], compiled[answer]) for answer in cases}


def _predicted(m, X, Y):
    """What the training cost model charges one layer under FSDP X × TP Y on 8 chips (bf16): (the gathered
    weights of a layer, B; the TP collectives' bytes sent per device and pass, B; the axes it prices)."""
    plan = sl.ParallelPlan(fsdp=X, tensor=Y, remat="none")
    cost = sl.training_cost(m, TOKENS, plan, sl.tpu_slice((2, 2, 2), "tpu-v5p"), seq_len=SEQ)
    gathered = cost.memory_bytes["gathered weights"] / 2  # two layers' buffers: one in use, one fetched
    tokens = TOKENS / X  # tokens per replica: FSDP splits the batch over X
    tp = 4 * (Y - 1) / Y * 2 * tokens * m.D  # the cost model's TP term: AG + RS of [tokens, D] around 2 blocks
    return gathered, tp, set(cost.comms_s)


def test_the_two_briefs_answers_are_what_the_plan_search_shows():
    for answer, (name, b) in _two_briefs().items():
        best, plain = ch11._sharding_times(b)
        n, topo, k, chosen, days = ch11._training_slice(b)
        if answer == "FSDP":  # a plan with neither TP nor a pipeline reaches the best step
            assert plain <= best * (1 + 1e-9), name
        else:  # only a plan with tensor parallelism does
            assert plain > best * (1 + 1e-9) and chosen.plan.tensor > 1, (name, chosen.plan.label)


@pytest.mark.parametrize("answer", ["FSDP", "FSDP + TP"])
def test_one_layer_compiles_to_the_collectives_the_cost_model_charges(layers, answer):
    name, b, m, X, Y, compiled = layers[answer]
    gathered, tp, axes = _predicted(m, X, Y)
    assert axes == ({"FSDP"} if answer == "FSDP" else {"FSDP", "TP"}), (name, axes)
    f32 = 2  # CPU XLA carries the bf16 operands as f32: twice the bytes of a TPU's buffers
    assert all(dtype == "f32" for _, _, _, dtype, _ in compiled), compiled
    # FSDP: one AllGather over X per weight matrix, together the layer's parameters over t
    over_x = [c for c in compiled if c[1] == ["X"]]
    assert [k for k, *_ in over_x] == ["all-gather"] * 7, (name, compiled)
    per_layer = (sl.params(m, component="mlp") + sl.params(m, component="attention")) / m.L
    assert sum(c[4] for c in over_x) == f32 * gathered == f32 * 2 * per_layer / Y, name
    # TP: around each of the two blocks, an AllGather of [tokens / X, D] before it and a ReduceScatter after it
    # (on CPU: an all-reduce, then each device keeps its slice)
    over_y = [c for c in compiled if c[1] == ["Y"]]
    assert len(over_x) + len(over_y) == len(compiled), (name, compiled)
    if answer == "FSDP":
        assert not over_y and tp == 0
        return
    assert sorted(k for k, *_ in over_y) == ["all-gather", "all-gather", "all-reduce", "all-reduce"], compiled
    assert all(shape == [TOKENS // X, m.D] for _, _, shape, _, _ in over_y), compiled
    sent = sum((Y - 1) / Y * nbytes for *_, nbytes in over_y)  # each moves (t − 1)/t of its [tokens, D] array
    assert sent == pytest.approx(f32 * tp, rel=1e-12), (name, sent, tp)
