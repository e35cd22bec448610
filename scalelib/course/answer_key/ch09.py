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

_9_1 = "bf16[6,300]{1,0:T(8,128)(2,1)}"


def _padded_bytes(text: str = _9_1) -> Derivation:
    """Reference for 9.1: the bytes of the array once its (8, 128) tiles pad it."""
    a = hlo_array(text)
    b = bytes_per_value(a.dtype)
    dims = " · ".join(map(str, a.padded_shape))
    return define(Derivation("padded bytes", "b · Π(padded dims)", f"{q(b)} · {dims}", a.padded_nbytes, "B"),
                  {"b": "bytes per bf16 value",
                   "padded dims": f"{list(a.physical_shape)} rounded up to whole (8, 128) tiles"})


register(Exercise(
    id="9.1",
    title="Bytes of a tiled array, padding included",
    reference=_padded_bytes,
    unit="B",
    mistakes={
        slip(hlo_array(_9_1).nbytes, hlo_array(_9_1).padded_nbytes):
            "that is the bytes of the values alone; the tiling stores whole (8, 128) tiles, "
            "so both dimensions are rounded up first",
        slip(2 * 6 * 384, hlo_array(_9_1).padded_nbytes):
            "you padded only the minor dimension; a (8, 128) tile also rounds the second-minor dimension up to 8",
        slip(2 * 128 * 304, hlo_array(_9_1).padded_nbytes):
            "you paired the tile the wrong way round: the tile's last size (128) goes with the minor dimension",
    },
))


# 9.2 -------------------------------------------------------------------------

_9_2 = dict(B=256, D=512, F=1024)


def _two_kernel_bytes(with_round_trip: bool = True) -> Derivation:
    """Reference for 9.2: the matmul kernel's bytes, then the elementwise kernel's (it reads h and b, writes y)."""
    B, D, F = _9_2.values()
    matmul = explain(matmul_bytes, B, D, F, dtype="f32")
    v = bytes_per_value("f32")
    tail_bytes = v * (2 * B * F + F)
    tail = Derivation("bytes(bias + GELU)", "v · (B·F + F + B·F)", f"{q(v)} · ({B}·{F} + {F} + {B}·{F})",
                      tail_bytes, "B")
    if not with_round_trip:
        return matmul
    total = Derivation("bytes", "bytes(matmul) + bytes(bias + GELU)",
                       f"{q(matmul.value, 'B')} + {q(tail_bytes, 'B')}", matmul.value + tail_bytes, "B",
                       (matmul, tail))
    return total


register(Exercise(
    id="9.2",
    title="Bytes the compiled program moves, kernel by kernel",
    reference=lambda: define(_two_kernel_bytes(), {"B, D, F": "the sides of x [B, D] and w [D, F]; h = x @ w is "
                                                              "[B, F]", "v": "bytes per f32 value"}),
    unit="B",
    mistakes={
        slip(_two_kernel_bytes(False), _two_kernel_bytes()):
            "you counted the matmul's kernel only; its output h goes back to memory, and the second kernel "
            "reads it again (with b) and writes the result",
    },
))


# 9.3 and 9.4 ------------------------------------------------------------------

def _score_counts(B, T, S, N, H):
    """(FLOPs, bytes) of scores = einsum('btnh,bsnh->bnts', q, k) in bf16: q and k read, the scores written."""
    b = bytes_per_value("bf16")
    flops = einsum_flops("btnh,bsnh->bnts", {"b": B, "t": T, "s": S, "n": N, "h": H})
    return flops, b * (B * T * N * H + B * S * N * H + B * N * T * S)


_9_3 = dict(B=32, T=1, S=4096, N=32, H=128)
_9_4 = dict(B=1, T=2048, S=2048, N=32, H=128)

register(Exercise(
    id="9.3",
    title="Compute- or memory-bound: attention scores while generating",
    reference=lambda: roofline(*_score_counts(**_9_3), "tpu-v5e", dtype="bf16").bound,
    kind="choice",
    choices=("compute", "memory"),
    reason="Each key is read for a single query, so the einsum does about one FLOP per byte, "
           "far below TPU v5e's critical intensity of about 240 FLOP/B: HBM sets its time.",
))


def _scores_time(count_scores: bool = True) -> Derivation:
    flops, nbytes = _score_counts(**_9_4)
    if not count_scores:
        B, T, S, N, H = _9_4.values()
        nbytes = bytes_per_value("bf16") * (B * T * N * H + B * S * N * H)
    return explain(roofline, flops, nbytes, "tpu-v5e", dtype="bf16")


register(Exercise(
    id="9.4",
    title="Predicted time of the attention scores of a 2048-token prompt on TPU v5e",
    reference=lambda: define(_scores_time(), {"C": "TPU v5e's peak bf16 rate", "W": "its HBM bandwidth"}),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_scores_time(False), _scores_time()):
            "you gave the arithmetic time, or left out the bytes of the scores: the einsum writes a "
            "[B, N, T, S] array of bf16 to memory, and at this size moving it takes longer than the arithmetic",
        slip(roofline(*_score_counts(**_9_4), "tpu-v5e").t_upper_s, _scores_time()):
            "you added T_math and T_comms, the pessimistic bound; the prediction is max(T_math, T_comms)",
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
    involves={"bandwidth"},
    mistakes={
        slip(_reduce_scatter_time((8, 1024, 4096)), _reduce_scatter_time()):
            "half the reference: a ReduceScatter's time goes with its unreduced input, bf16[8, 1024, 8192] on "
            "each core, not with the reduced output it keeps",
        slip(_reduce_scatter_time(dtype="f32"), _reduce_scatter_time()):
            "twice the reference: either you counted 4 bytes per value (bf16 takes 2), or you used half the link's "
            "figure (1.2e11 B/s already counts both directions, and the two cores send both ways at once)",
        slip(_reduce_scatter_time((32, 1024, 8192)), _reduce_scatter_time()):
            "you counted the whole global array; each ReduceScatter runs within one pair of model-parallel cores, "
            "on their data-parallel shard bf16[8, 1024, 8192]",
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
    involves={"dtype", "flops"},
    mistakes={
        slip(_q_projection_time(heads=32), _q_projection_time()):
            "you multiplied by all 32 heads; Megatron sharding splits the heads over the 2 model-parallel cores, "
            "16 each",
        slip(_q_projection_time(B=32 * 1024), _q_projection_time()):
            "you took the global batch; with 4-way data parallelism each core sees 8 of the 32 sequences",
        slip(_q_projection_time(B=32 * 1024, heads=32), _q_projection_time()):
            "that is the whole global projection on one core; each core does 1/8 of it",
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
            "you swapped the two axes: the all-reduce sums over the 4 devices of each group, which hold different "
            "pieces of the contracting dimension F; the 2 groups hold different examples",
    },
    book=("Q1",),
))
