"""Chapter 9 exercises: profiling.

Every reference is computed by scalelib: layouts and HLO modules by its HLO
reader (``hlo_array``, ``hlo_summary``), predicted times by chapter 1's
rooflines. The numbers below are only what each question gives: shapes, and the
figures of the book's example profile (one TPU v2 TensorCore at 23e12 bf16
FLOP/s, 1.2e11 B/s of bidirectional ICI), from ch. 9 "How to Profile TPU
Programs" of How to Scale Your Model (Austin et al., 2025). ``book=`` names the
book's item an exercise answers (its list: scalelib/course/book_items.py).
Nothing here imports JAX: the HLO of exercise 9.7 is kept as text (tests check
it against a fresh compile).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, slip
from ..._derivation import Derivation, explain, q
from ..._einsum import einsum_flops
from ..._profile import hlo_array, hlo_summary
from ..._roofline import matmul_bytes, matmul_flops, roofline, t_comms_s, t_math_s
from ..._specs import ChipSpec, bytes_per_value

#: One TensorCore of the TPU v2-8 in the book's example profile, with the figures the book gives for it.
TPU_V2_CORE = ChipSpec(
    name="tpu-v2-core", family="tpu",
    source="How to Scale Your Model, ch. 9 (the example profile): one TPU v2 TensorCore at 23e12 bf16 FLOP/s, "
           "1.2e11 B/s of ICI counting both directions",
    bf16_flops_per_s=23e12, ici_link_bytes_per_s_bidirectional=1.2e11)


# 9.1 -------------------------------------------------------------------------

#: Router logits, one row of 10 scores per token, and the two layouts XLA may give them (exercise 9.1).
_9_1_LAYOUTS = {"row-major": "bf16[3000,10]{1,0:T(8,128)(2,1)}", "column-major": "bf16[3000,10]{0,1:T(8,128)(2,1)}"}


def _padded(layout: str) -> Derivation:
    a = hlo_array(_9_1_LAYOUTS[layout])
    dims = " · ".join(map(str, a.padded_shape))
    return Derivation(f"bytes({layout})", "b · Π(padded dims)", f"{q(bytes_per_value(a.dtype))} · {dims}",
                      a.padded_nbytes, "B")


def _better_layout_bytes() -> Derivation:
    """Reference for 9.1: the padded bytes of each layout, then the smaller."""
    row, col = _padded("row-major"), _padded("column-major")
    best = Derivation("bytes", "min(bytes(row-major), bytes(column-major))", f"min({q(row.value, 'B')}, "
                      f"{q(col.value, 'B')})", min(row.value, col.value), "B", (row, col))
    return define(best, {"b": "bytes per bf16 value",
                         "padded dims": "the dimensions in memory order (minor last), rounded up to whole (8, 128) "
                                        "tiles: [3000, 10] row-major, [10, 3000] column-major"})


_9_1_REF = hlo_array(_9_1_LAYOUTS["column-major"]).padded_nbytes

register(Exercise(
    id="9.1",
    title="The layout that wastes less of its tiles",
    reference=_better_layout_bytes,
    unit="B",
    integer=True,
    mistakes={
        slip(hlo_array(_9_1_LAYOUTS["row-major"]).padded_nbytes, _9_1_REF):
            "that is the layout that wastes more: either you kept the 10-wide dimension minor, where each row fills "
            "a 128-wide tile, or you paired the tile the wrong way round (its last size goes with the minor "
            "dimension)",
        slip(hlo_array(_9_1_LAYOUTS["row-major"]).nbytes, _9_1_REF):
            "that is the bytes of the values alone; the tiling stores whole tiles, so both tiled dimensions are "
            "rounded up first",
        slip(2 * 10 * 3072, _9_1_REF):
            "you padded only the minor dimension; the tile also rounds the second-minor dimension up to a whole "
            "number of its rows",
        slip(2 * 16 * 3000, _9_1_REF):
            "you padded only the second-minor dimension; the minor dimension is rounded up to a whole number of "
            "tile columns too",
    },
))


# 9.2 -------------------------------------------------------------------------

_9_2 = dict(B=512, D=2048, F=8192)


def _kernel_bytes(fused: bool) -> Derivation:
    """Bytes of the layer gelu(x @ w + b) in f32: two kernels (h makes a round trip) or one (bias and GELU fused)."""
    B, D, F = _9_2.values()
    v = bytes_per_value("f32")
    matmul = replace(explain(matmul_bytes, B, D, F, dtype="f32"), symbol="bytes(matmul)")
    if fused:
        return Derivation("bytes(one kernel)", "bytes(matmul) + v·F", f"{q(matmul.value, 'B')} + {int(v)}·{F}",
                          matmul.value + v * F, "B", (matmul,))
    tail = Derivation("bytes(bias + GELU)", "v · (B·F + F + B·F)", f"{q(v)} · ({B}·{F} + {F} + {B}·{F})",
                      v * (2 * B * F + F), "B")
    return Derivation("bytes(two kernels)", "bytes(matmul) + bytes(bias + GELU)",
                      f"{q(matmul.value, 'B')} + {q(tail.value, 'B')}", matmul.value + tail.value, "B",
                      (matmul, tail))


def _two_and_one_kernel_bytes() -> Derivation:
    """Reference for 9.2: [bytes of the CPU's two kernels, bytes of one fused kernel]."""
    two, one = _kernel_bytes(False), _kernel_bytes(True)
    both = Derivation("[two kernels, one kernel]", "[bytes(two kernels), bytes(one kernel)]", "",
                      np.array([two.value, one.value]), "B", (two, one))
    return define(both, {"B, D, F": "the sides of the layer's input [B, D] and weights [D, F], whose product h "
                                     "is [B, F]",
                         "v": "bytes per f32 value"})


_9_2_REF = _two_and_one_kernel_bytes().value

register(Exercise(
    id="9.2",
    title="Bytes the compiled layer moves: two kernels, then one",
    reference=_two_and_one_kernel_bytes,
    unit="B",
    mistakes={
        slip([_kernel_bytes(True).value, _9_2_REF[1]], _9_2_REF):
            "that counts one kernel's traffic; on the CPU the matmul's output h goes back to memory, and the "
            "second kernel reads it again (with b) before writing the result",
        slip([_9_2_REF[0], _9_2_REF[0]], _9_2_REF):
            "fused, the bias and GELU are applied to h while it is still in the kernel: h is never written or "
            "read back, only the final result is written",
    },
))


# 9.3 and 9.4 ------------------------------------------------------------------

def _score_counts(B, T, S, N, H, scores_written: bool = True):
    """(FLOPs, bytes) of scores = einsum('btnh,bsnh->bnts', q, k) in bf16: q and k read, the scores written."""
    b = bytes_per_value("bf16")
    flops = einsum_flops("btnh,bsnh->bnts", {"b": B, "t": T, "s": S, "n": N, "h": H})
    return flops, b * (B * T * N * H + B * S * N * H + (B * N * T * S if scores_written else 0))


_9_3 = dict(B=1024, T=1, S=8192, N=16, H=128)
_9_4 = dict(B=1, T=8192, S=8192, N=32, H=128)

register(Exercise(
    id="9.3",
    title="Compute- or memory-bound: attention scores for a large generation batch",
    reference=lambda: roofline(*_score_counts(**_9_3), "tpu-v5e", dtype="bf16").bound,
    kind="choice",
    choices=("compute", "memory"),
    reason="A batch raises a matmul's intensity because every sequence shares the weights; here nothing is "
           "shared: each sequence reads its own keys, once, for a single query, so the einsum does about one FLOP "
           "per byte at any batch, far below TPU v5e's critical intensity of about 240 FLOP/B.",
))


def _scores_time(scores_written: bool = True) -> Derivation:
    """The einsum's predicted time on TPU v5e, with or without the [B, N, T, S] scores written to HBM."""
    return explain(roofline, *_score_counts(**_9_4, scores_written=scores_written), "tpu-v5e", dtype="bf16")


def _scores_times() -> Derivation:
    """Reference for 9.4: [scores written to HBM, scores kept on chip]."""
    written = _scores_time(True)
    t_math = written.steps[0]
    comms = replace(explain(t_comms_s, _score_counts(**_9_4, scores_written=False)[1], "tpu-v5e"),
                    symbol="T_comms'", formula="nbytes' / W")
    kept = Derivation("T_lower'", "max(T_math, T_comms')", f"max({q(t_math.value, 's')}, {q(comms.value, 's')})",
                      max(t_math.value, comms.value), "s", (comms,))
    both = Derivation("[written, kept on chip]", "[T_lower, T_lower']", "",
                      np.array([written.value, kept.value]), "s", (written, kept))
    return define(both, {"C": "TPU v5e's peak bf16 rate", "W": "its HBM bandwidth",
                         "nbytes'": "the bytes of q and k alone, the scores never reaching HBM"})


_9_4_REF = _scores_times().value


def _scores_pair(value_bytes: int = 2, flops_per_mac: int = 2, peak: str = "bf16", bound: str = "t_lower_s"):
    """[written, kept on chip] computed with these figures: a slip of 9.4 is one of them changed."""
    B, T, S, N, H = _9_4.values()
    flops = flops_per_mac / 2 * _score_counts(**_9_4)[0]
    qk, scores = value_bytes * (B * T * N * H + B * S * N * H), value_bytes * B * N * T * S
    return [getattr(roofline(flops, nbytes, "tpu-v5e", dtype=peak), bound) for nbytes in (qk + scores, qk)]


register(Exercise(
    id="9.4",
    title="Attention scores of an 8192-token prompt on TPU v5e, written to HBM or kept on chip",
    reference=_scores_times,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip([_scores_time(False).value, _9_4_REF[1]], _9_4_REF):
            "the first time leaves out the bytes of the scores: the einsum writes a [B, N, T, S] array of bf16 to "
            "HBM, and at this size moving it takes longer than the arithmetic",
        slip([_9_4_REF[0], _scores_pair(bound="t_comms_s")[1]], _9_4_REF):
            "kept on chip, only q and k come from HBM, which takes less time than the arithmetic: the bound is "
            "the larger of the two",
        slip(_scores_pair(bound="t_upper_s"), _9_4_REF):
            "you added T_math and T_comms, the pessimistic bound; the prediction is max(T_math, T_comms)",
        slip(_scores_pair(value_bytes=4), _9_4_REF):
            "check the bytes per value: q, k and the scores are bf16",
        slip(_scores_pair(flops_per_mac=1), _9_4_REF):
            "either you counted a multiply-add as one FLOP (it is two), or halved the scores for the causal mask "
            "(the einsum computes every entry, masked or not), or took the chip's int8 peak for bf16 arithmetic",
    },
))


# 9.5 -------------------------------------------------------------------------

#: The unreduced output of the down-projection on each core: bf16[8, 1024, 8192] (batch 32 over 4-way DP).
_9_5_SHAPE = (8, 1024, 8192)


def _reduce_scatter_time(shape=_9_5_SHAPE, dtype="bf16", bandwidth="ici_bidirectional", spec=TPU_V2_CORE):
    V = int(np.prod(shape)) * bytes_per_value(dtype)
    return explain(t_comms_s, V, spec, bandwidth=bandwidth)


register(Exercise(
    id="9.5",
    title="The ReduceScatter of the book's example profile, predicted",
    reference=lambda: define(_reduce_scatter_time(), {"W": "the ICI bandwidth between the two cores, "
                                                           "both directions together (1.2e11 B/s)"}),
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_reduce_scatter_time((8, 1024, 4096)), _reduce_scatter_time()):
            "a ReduceScatter's time goes with its unreduced input, the whole partial sum on each core, not with "
            "the reduced part it keeps",
        slip(_reduce_scatter_time(dtype="f32"), _reduce_scatter_time()):
            "either you counted the bytes per value of f32 (the partial sum is bf16), or you took the link's "
            "figure for one direction only (the figure given already counts both directions, and the two cores "
            "send both ways at once)",
        slip(_reduce_scatter_time((32, 1024, 8192)), _reduce_scatter_time()):
            "you counted the whole global array; each ReduceScatter runs within one pair of model-parallel cores, "
            "on their own data-parallel shard",
    },
    book=("Ex1",),
))


# 9.6 -------------------------------------------------------------------------

#: Per core: x bf16[8·1024, 8192] against W_Q's shard bf16[8192, 16 heads · 256] (32 heads over 2-way MP).
_9_6 = dict(B=8 * 1024, D=8192, heads=16, H=256)


def _q_projection_time(B=_9_6["B"], heads=_9_6["heads"]) -> Derivation:
    flops = replace(explain(matmul_flops, B, _9_6["D"], heads * _9_6["H"]), where=())
    time = explain(t_math_s, flops.value, TPU_V2_CORE, dtype="bf16")
    return replace(time, steps=(flops, *time.steps))


register(Exercise(
    id="9.6",
    title="The Q projection of the book's example profile, predicted",
    reference=lambda: define(_q_projection_time(), {
        "B, D, F": "one core's shard: [8·1024 tokens, d_model] x [d_model, 16 heads · 256]",
        "C": "one TPU v2 TensorCore's bf16 rate, 23e12 FLOP/s"}),
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_q_projection_time().value / 2, _q_projection_time()):
            "you counted a multiply-add as one FLOP; a matmul does two FLOPs per multiply-add",
        slip(_q_projection_time(heads=32), _q_projection_time()):
            "you multiplied by all the heads; Megatron sharding splits the heads over the model-parallel cores",
        slip(_q_projection_time(B=32 * 1024), _q_projection_time()):
            "you took the global batch; with data parallelism each core sees only its own share of the sequences",
        slip(_q_projection_time(B=32 * 1024, heads=32), _q_projection_time()):
            "that is the whole global projection on one core; each core has its share of the batch (data "
            "parallelism) and of the heads (model parallelism)",
    },
    book=("Ex2",),
))


# 9.7 -------------------------------------------------------------------------

#: The entry computation XLA (JAX 0.10.2, CPU) compiled for exercise 9.7's program on 8 simulated devices,
#: metadata left out (``hlo_summary(text).listing()``); tests/test_profile.py compiles it afresh and compares.
Q1_HLO = """\
ENTRY %main.0_spmd (param.1: f32[1024,512], param.2: f32[512,1024], param: f32[8,512]) -> f32[8,512] {
  %param = f32[8,512]{1,0} parameter(2), sharding={devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}
  %param.1 = f32[1024,512]{1,0} parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  %param.2 = f32[512,1024]{1,0} parameter(1), sharding={devices=[1,4,2]<=[8] last_tile_dim_replicate}
  %ynn_fusion.1 = f32[8,1024]{1,0} fusion(%param, %param.1), kind=kCustom, calls=%fused_computation.1
  %ynn_fusion = f32[8,512]{1,0} fusion(%ynn_fusion.1, %param.2), kind=kCustom, calls=%fused_computation
  ROOT %all-reduce = f32[8,512]{1,0} all-reduce(%ynn_fusion), channel_id=1, replica_groups={{0,2,4,6},{1,3,5,7}}, use_global_device_ids=true, to_apply=%add.clone
}
"""


def _global_shapes(hlo: str = Q1_HLO) -> np.ndarray:
    """[B, D, F] read from the parameters' sharding annotations: x is parameter 2, w1 [F, D] parameter 0."""
    params = {op.operands[0]: op for op in hlo_summary(hlo).parameters}
    (B, D), F = params["2"].global_shape, params["0"].global_shape[0]
    return np.array([B, D, F], dtype=float)


def _global_shapes_derivation() -> Derivation:
    params = {op.operands[0]: op for op in hlo_summary(Q1_HLO).parameters}
    x, w1 = params["2"], params["0"]
    value = _global_shapes()
    return Derivation("[B, D, F]", "per-device shape × pieces per dimension",
                      f"x: {list(x.shape)} × {list(x.tiles)}, w1: {list(w1.shape)} × {list(w1.tiles)}",
                      value, "",
                      where=("pieces per dimension: read off each parameter's sharding annotation; the all-reduce's "
                             "groups of 4 split F, and its 2 groups split the batch",))


_PER_DEVICE = np.array([8, 512, 1024], dtype=float)

register(Exercise(
    id="9.7",
    title="The true shapes behind a sharded module's HLO",
    reference=_global_shapes_derivation,
    integer=True,
    mistakes={
        slip(_PER_DEVICE, _global_shapes()):
            "those are the per-device shapes the HLO prints; the replica groups tell how many devices share "
            "each dimension",
        slip(_PER_DEVICE * [4, 1, 2], _global_shapes()):
            "you swapped the two axes: the all-reduce sums over the devices of each group, which hold different "
            "pieces of the contracting dimension F; the different groups hold different examples",
    },
    book=("Q1",),
))


# 9.8 -------------------------------------------------------------------------

#: The residual block of the chapter's memory profile, y = x + gelu(norm(x) @ W1) @ W2 in f32, on new sizes.
_9_8 = dict(B=640, D=1280, F=5120)


def _planned_bytes(*, temporaries: bool = True, in_place: bool = True) -> Derivation:
    """Reference for 9.8: arguments + output + temporaries of the block, as XLA plans its buffers."""
    B, D, F = _9_8.values()
    v = bytes_per_value("f32")
    args = Derivation("arguments", "v·(B·D + 2·D·F)", f"{int(v)}·({B}·{D} + 2·{D}·{F})", v * (B * D + 2 * D * F), "B")
    out = Derivation("output", "v·B·D", f"{int(v)}·{B}·{D}", v * B * D, "B")
    hidden = (1 if in_place else 2) * temporaries
    temp = Derivation("temporaries", "v·B·F" if in_place else "2·v·B·F", f"{hidden}·{int(v)}·{B}·{F}" if hidden != 1
                      else f"{int(v)}·{B}·{F}", hidden * v * B * F, "B")
    total = Derivation("bytes planned", "arguments + output + temporaries",
                       f"{q(args.value, 'B')} + {q(out.value, 'B')} + {q(temp.value, 'B')}",
                       args.value + out.value + temp.value, "B", (args, out, temp))
    return define(total, {"B, D, F": "tokens, the model width and the hidden width: x is [B, D], W1 [D, F], W2 [F, D]",
                          "v": "bytes per f32 value",
                          "temporaries": "the hidden [B, F] activation, held between the two matmuls; the "
                                         "normalised x and the second matmul's result fit in the output's buffer, "
                                         "and GELU overwrites its input in place"})


_9_8_REF = _planned_bytes().value

register(Exercise(
    id="9.8",
    title="The memory a compiled residual block plans for",
    reference=_planned_bytes,
    unit="B",
    integer=True,
    mistakes={
        slip(_planned_bytes(temporaries=False), _9_8_REF):
            "that leaves the temporaries out: the hidden [B, F] activation must be held between the two matmuls",
        slip(_planned_bytes(in_place=False), _9_8_REF):
            "that gives GELU a buffer of its own; its loop fusion reads each element once and can write the "
            "result over its input, so one [B, F] buffer serves both",
    },
))
