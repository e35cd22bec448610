"""Chapter 3 exercises: sharded matrices.

Every reference is computed by scalelib: shard sizes by :func:`~scalelib.sharding`,
collectives and their times by :func:`~scalelib.plan_matmul`,
:func:`~scalelib.plan_reshard` and the collective functions on a TPU slice,
per-link loads by :func:`~scalelib.ring_link_bytes`. The numbers below are only
what each question gives (shapes, meshes, slices). Facts and formulas follow
ch. 3 "Sharded Matrices and How to Multiply Them" of How to Scale Your Model
(Austin et al., 2025); ``book=`` names the book's item an exercise answers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, slip
from ..._collectives import allgather_time_s, reducescatter_time_s
from ..._derivation import Derivation, explain, q
from ..._errors import InvalidValueError
from ..._matmul_plan import plan_matmul, plan_reshard
from ..._ring import ring_link_bytes
from ..._roofline import t_comms_s
from ..._sharding import latency_bound_bytes, sharding
from ..._specs import bytes_per_value
from ..._topology import ICI_HOP_LATENCY_S, TpuSlice, tpu_pod, tpu_slice
from ..._twisted import torus_max_hops


_N_AXES = {"N_axes": "the number of mesh axes the collective runs over"}
_T_MATMUL = {"T_math, T_comms": "the local matmul's time (its FLOPs over C) and the collectives' times added"}


def _listed(symbol: str, parts, unit: str) -> Derivation:
    """A list answer: one derivation per value, shown in order."""
    parts = tuple(parts)
    return Derivation(symbol, "[" + ", ".join(p.symbol for p in parts) + "]", "",
                      np.array([float(p.value) for p in parts]), unit, parts)


def _named(derivation: Derivation, symbol: str) -> Derivation:
    return replace(derivation, symbol=symbol)


# 3.1 -------------------------------------------------------------------------

_3_1 = dict(text="A[I_XY, J]", mesh={"X": 4, "Y": 8}, shape=(4096, 8192), dtype="bf16", chip="h200")


def _shard_read_time(text=_3_1["text"], dtype=_3_1["dtype"]) -> float:
    s = sharding(text, _3_1["mesh"])
    return t_comms_s(s.shard_bytes(_3_1["shape"], dtype=dtype), _3_1["chip"], bandwidth="hbm")


def _shard_read() -> Derivation:
    """Reference for 3.1: the block each device holds, read once from an H200's HBM."""
    s = sharding(_3_1["text"], _3_1["mesh"])
    block = explain(s.shard_bytes, _3_1["shape"], dtype=_3_1["dtype"])
    t = explain(t_comms_s, block.value, _3_1["chip"], bandwidth="hbm")
    return define(replace(t, steps=(block,)), {"W": "an H200's HBM bandwidth", "nbytes": "the block one device holds"})


register(Exercise(
    id="3.1",
    title="Reading one device's block from HBM",
    reference=_shard_read,
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_shard_read_time("A[I_X, J]"), _shard_read_time()):
            "you split I over X only; the subscript XY splits I over X and Y together, into X·Y blocks",
        slip(_shard_read_time("A[I, J]"), _shard_read_time()):
            "that is the time to read the whole array; each device reads only the block it holds",
        slip(_shard_read_time(dtype="f32"), _shard_read_time()):
            "a factor of 2: a bf16 value takes 2 bytes",
    },
    book=("Pop quiz a",),
))


# 3.2 -------------------------------------------------------------------------

_3_2 = dict(text="A[I_XZ, J]", mesh={"X": 2, "Y": 4, "Z": 4}, shape=(256, 4096), dtype="int8")


def _memory(text=_3_2["text"], dtype=_3_2["dtype"], total_as_one_copy=False) -> np.ndarray:
    s = sharding(text, _3_2["mesh"])
    per = s.shard_bytes(_3_2["shape"], dtype=dtype)
    total = per * s.num_devices / (s.copies() if total_as_one_copy else 1)
    return np.array([per, total])


def _replicated_memory() -> Derivation:
    """Reference for 3.2: one block per device, and every device's block counted."""
    s = sharding(_3_2["text"], _3_2["mesh"])
    per = explain(s.shard_bytes, _3_2["shape"], dtype=_3_2["dtype"])
    total = explain(s.total_bytes, _3_2["shape"], dtype=_3_2["dtype"])
    return _listed("[per device, all devices]", (_named(per, "bytes per device"), _named(total, "bytes in all")), "B")


register(Exercise(
    id="3.2",
    title="Memory per device and in all, for an array replicated along one axis",
    reference=_replicated_memory,
    unit="B",
    mistakes={
        slip(_memory(total_as_one_copy=True), _memory()):
            "the total counts every device's block: Y does not split A, so each position along Y holds "
            "a whole copy of it",
        slip(_memory("A[I_XYZ, J]"), _memory()):
            "you divided by every device; only X and Z split A, and the devices along Y hold the same blocks",
        slip(_memory(dtype="bf16"), _memory()):
            "a factor of 2: an int8 value takes 1 byte",
    },
    book=("Pop quiz b",),
))


# 3.3 -------------------------------------------------------------------------

_3_3 = sharding("A[I_Z, J, K]", {"X": 8, "Y": 4, "Z": 4})


def _3_3_reference() -> Derivation:
    """Reference for 3.3: one copy per position along the mesh axes that split no dimension of A."""
    idle = [a for a in _3_3.mesh if a not in _3_3._used]
    return Derivation("copies", " · ".join(f"|{a}|" for a in idle), " · ".join(str(_3_3.mesh[a]) for a in idle),
                      _3_3.copies(), "", where=(f"{', '.join(idle)}: the mesh axes that split no dimension of "
                                                f"{_3_3} (|X| is the number of devices along X)",))

register(Exercise(
    id="3.3",
    title="How many copies of a partly sharded array the chips hold",
    reference=_3_3_reference,
    unit="",
    integer=True,
    mistakes={
        slip(_3_3.num_devices, _3_3.copies()):
            "you counted one copy per device; the devices along Z hold one block each of the same copy, "
            "so count only the positions along the axes that do not split A",
    },
    book=("Q1",),
))


# 3.4 -------------------------------------------------------------------------

_V5E_8x4 = tpu_slice((8, 4), "tpu-v5e")          # neither axis spans the pod's 16 chips: no wraparound
_3_4 = dict(expr="[E_Y, F] -> [E, F]", sizes={"E": 4096, "F": 4096})


def _only_step(expr, sizes, topology):
    """The one collective (a :class:`Collective`, with its V and derivation) `plan_reshard` finds for `expr`."""
    (step,) = plan_reshard(expr, sizes, topology).steps
    return step


def _3_4_reference() -> Derivation:
    """Reference for 3.4: the AllGather over Y of a v5e 8x4 slice, planned by plan_reshard."""
    return _only_step(_3_4["expr"], _3_4["sizes"], _V5E_8x4).derivation


def _3_4_bytes() -> float:
    return _only_step(_3_4["expr"], _3_4["sizes"], _V5E_8x4).nbytes


register(Exercise(
    id="3.4",
    title="An AllGather along an axis without wraparound (TPU v5e 8x4)",
    reference=_3_4_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(allgather_time_s(_3_4_bytes(), tpu_pod("tpu-v5e"), axes="Y"), _3_4_reference().value):
            "you used a ring's bidirectional bandwidth; an axis of a v5e slice wraps around only when it "
            "spans the pod's full 16 chips, so here the shards reach the end chips over a single link, one way",
        slip(allgather_time_s(_3_4_bytes() / _V5E_8x4.mesh["Y"], _V5E_8x4, axes="Y"), _3_4_reference().value):
            "V is the whole gathered array [E, F], not the block one device starts with",
    },
    book=("Pop quiz 2",),
))


# 3.5 -------------------------------------------------------------------------

_3_5 = dict(expr="[E_X, F] -> [E, F]", sizes={"E": 128, "F": 128})


def _3_5_reference() -> Derivation:
    return _only_step(_3_5["expr"], _3_5["sizes"], _V5E_8x4).derivation


def _3_5_bytes() -> float:
    return _only_step(_3_5["expr"], _3_5["sizes"], _V5E_8x4).nbytes


register(Exercise(
    id="3.5",
    title="A small AllGather along an 8-chip line: latency-bound",
    reference=_3_5_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(allgather_time_s(_3_5_bytes(), _V5E_8x4, axes="X", latency_s=0), _3_5_reference().value):
            "that is the bandwidth term alone; for so few bytes the hops' latency, about 1 µs each, is "
            "what takes the time",
        slip(torus_max_hops((_V5E_8x4.mesh["X"],)) * ICI_HOP_LATENCY_S, _3_5_reference().value):
            "you counted the hops round a ring (n/2); this axis has no wraparound, so a shard from one end "
            "crosses every link of the line to reach the other end",
    },
    book=("Pop quiz 2",),
))


# 3.6 -------------------------------------------------------------------------

_V5P_4x4x8 = tpu_slice((4, 4, 8), "tpu-v5p")      # whole 4x4x4 cubes: every axis wraps around
_3_6 = dict(expr="[B_Z] -> [B]", sizes={"B": 512})


def _3_6_reference() -> Derivation:
    return _only_step(_3_6["expr"], _3_6["sizes"], _V5P_4x4x8).derivation


def _3_6_time(slice_: TpuSlice, latency_s=None) -> float:
    V = _only_step(_3_6["expr"], _3_6["sizes"], _V5P_4x4x8).nbytes
    return allgather_time_s(V, slice_, axes="Z", latency_s=latency_s)


register(Exercise(
    id="3.6",
    title="A latency-bound AllGather on a TPU v5p 4x4x8",
    reference=_3_6_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_3_6_time(tpu_slice((4, 4, 8), "tpu-v5p", wraparound=False)), _3_6_time(_V5P_4x4x8)):
            "you counted the hops along a line (n − 1); a v5p slice of whole 4x4x4 cubes wraps around "
            "every axis, so shards travel both ways and the farthest is n/2 hops away",
        slip(_3_6_time(_V5P_4x4x8, latency_s=0), _3_6_time(_V5P_4x4x8)):
            "that is the bandwidth term alone; a few hundred bytes cross a link in far less than the "
            "microsecond each hop costs",
    },
    book=("Q3",),
))


# 3.7 -------------------------------------------------------------------------

_V4P_CUBE = tpu_slice((4, 4, 4), "tpu-v4p")      # a whole cube: wraparound on every axis
_3_7 = dict(sizes={"B": 2048, "D": 8192},
            exprs=("[B_X, D_Y] -> [B, D_Y]", "[B_X, D_Y] -> [B, D]", "[B_X, D_Y]{U_Z} -> [B_X, D_Y]"))


def _3_7_times() -> np.ndarray:
    return np.array([plan_reshard(e, _3_7["sizes"], _V4P_CUBE).time_s for e in _3_7["exprs"]])


def _3_7_reference() -> Derivation:
    names = ("T_AG_X", "T_AG_XY", "T_AR_Z")
    parts = [_named(_only_step(e, _3_7["sizes"], _V4P_CUBE).derivation, n) for e, n in zip(_3_7["exprs"], names)]
    return define(_listed("[AllGather_X, AllGather_XY, AllReduce_Z]", parts, "s"), _N_AXES)


def _3_7_slip(index: int, wrong: float) -> tuple[float, ...]:
    times = _3_7_times()
    times_wrong = times.copy()
    times_wrong[index] = wrong
    return slip(times_wrong, times)


def _3_7_bytes(index: int) -> float:
    return _only_step(_3_7["exprs"][index], _3_7["sizes"], _V4P_CUBE).nbytes


register(Exercise(
    id="3.7",
    title="Two AllGathers and an AllReduce on a TPU v4p 4x4x4",
    reference=_3_7_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        _3_7_slip(0, allgather_time_s(_3_7_bytes(1), _V4P_CUBE, axes="X")):
            "for the first, the devices of each Y position gather their own [B, D/Y] block: D stays split "
            "over Y, so V is a quarter of the whole array",
        _3_7_slip(1, allgather_time_s(_3_7_bytes(1), _V4P_CUBE, axes="X")):
            "gathering over X and Y at once uses the links of both axes: twice the bandwidth of one",
        _3_7_slip(2, reducescatter_time_s(_3_7_bytes(2), _V4P_CUBE, axes="Z")):
            "an AllReduce is a ReduceScatter followed by an AllGather: twice the time of either",
    },
    book=("Q2",),
))


# 3.8 -------------------------------------------------------------------------

_V5E_4x4 = tpu_slice((4, 4), "tpu-v5e")
_3_8 = dict(expr="A[I_X, J] · B[J_X, K_Y] -> C[I_X, K_Y]", sizes={"I": 2048, "J": 8192, "K": 32768})


def _3_8_plan():
    return plan_matmul(_3_8["expr"], _3_8["sizes"], _V5E_4x4)


def _3_8_reference() -> Derivation:
    """Reference for 3.8: the one collective the plan needs (an AllGather of B over X), its time."""
    (step,) = _3_8_plan().steps
    return step.derivation


def _3_8_time(nbytes_factor: float = 1.0, topology=_V5E_4x4) -> float:
    (step,) = _3_8_plan().steps
    return allgather_time_s(step.nbytes * nbytes_factor, topology, axes="X")


register(Exercise(
    id="3.8",
    title="The collective of a training-style matmul on TPU v5e 4x4, and its time",
    reference=_3_8_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_3_8_time(topology=tpu_pod("tpu-v5e")), _3_8_time()):
            "you used a ring's bidirectional bandwidth; a 4x4 v5e slice has no wraparound links",
        slip(_3_8_time(_V5E_4x4.mesh["Y"]), _3_8_time()):
            "B[J_X, K_Y] keeps K split over Y: the devices of each Y position gather only their K/Y columns",
        slip(_3_8_time(1 / _V5E_4x4.mesh["X"]), _3_8_time()):
            "V is the gathered array, not the block one device starts with",
        slip(_3_8_time(bytes_per_value("int8") / bytes_per_value("bf16")), _3_8_time()):
            "a factor of 2: a bf16 value takes 2 bytes",
    },
    book=("Q6",),
))


# 3.9 -------------------------------------------------------------------------

_COLLECTIVES = ("none", "AllGather", "ReduceScatter", "AllReduce", "AllToAll")
_3_9 = dict(expr="A[I, J_X] · B[J_X, K] -> C[I, K_X]", sizes={"I": 1024, "J": 4096, "K": 8192})


def _3_9_reference() -> str:
    steps = plan_matmul(_3_9["expr"], _3_9["sizes"], {"X": 8}).steps
    return " + ".join(s.kind for s in steps) or "none"


register(Exercise(
    id="3.9",
    title="Partial sums into a sharded result: which collective",
    reference=_3_9_reference,
    kind="choice",
    choices=_COLLECTIVES,
    reason="Each device's local product is a partial sum over its slice of J, C[I, K]{U_X}; summing them and "
           "keeping only your own K/X columns is a ReduceScatter, half the traffic of an AllReduce that would "
           "leave every device the whole C.",
    book=("Q9",),
))


# 3.10 and 3.11 ---------------------------------------------------------------

_V5P_8x4x4 = tpu_slice((8, 4, 4), "tpu-v5p")
_Q4_EXPR = "In[B, D] · W[D_X, F]"


def _q4_strategies(sizes) -> tuple:
    """(gather W first, multiply the local shards and AllReduce after): the two plans of the book's Q4."""
    p = plan_matmul(_Q4_EXPR, sizes, _V5P_8x4x4)
    after = next(o for o in p.options if o.strategy.startswith("slice In") and str(o.result) == str(p.result))
    return p, after


_3_10 = {"B": 8192, "D": 2048, "F": 8192}


def _3_10_times(comms_factor=(1.0, 1.0), add=False) -> np.ndarray:
    plans = _q4_strategies(_3_10)
    combine = (lambda a, b: a + b) if add else max
    return np.array([combine(p.t_math_s, p.t_comms_s * c) for p, c in zip(plans, comms_factor)])


def _3_10_reference() -> Derivation:
    gather, after = _q4_strategies(_3_10)
    parts = (_named(gather.derivation, "T_1"), _named(after.derivation, "T_2"))
    return define(_listed("[gather first, reduce after]", parts, "s"),
                  {"C": "a TPU v5p's peak bf16 rate", **_T_MATMUL})


register(Exercise(
    id="3.10",
    title="AllGather the weights first, or multiply and AllReduce after: both times",
    reference=_3_10_reference,
    unit="s",
    involves={"bandwidth", "dtype", "flops"},
    mistakes={
        slip(_3_10_times(comms_factor=(1.0, 0.5)), _3_10_times()):
            "the AllReduce after the local matmul makes two passes (a ReduceScatter, then an AllGather): "
            "twice an AllGather of the same array",
        slip(_3_10_times(add=True), _3_10_times()):
            "you added T_math and T_comms; the question asks for the time with full overlap, their maximum",
    },
    book=("Q4",),
))

_3_11 = {"B": 1024, "D": 8192, "F": 28672}


def _3_11_reference() -> str:
    gather, after = _q4_strategies(_3_11)
    return "gather first" if gather.time_s <= after.time_s else "reduce after"


register(Exercise(
    id="3.11",
    title="Gather first or reduce after, for a large model at a small batch",
    reference=_3_11_reference,
    kind="choice",
    choices=("gather first", "reduce after"),
    reason="Gathering W moves 2·D·F bytes, the AllReduce of the result 2 · 2·B·F: with D > 2B the reduction "
           "moves less, and with the FLOPs split X ways as well, it finishes first.",
    book=("Q4",),
))


# 3.12 ------------------------------------------------------------------------

_3_12 = dict(sizes={"I": 8192, "J": 8192, "K": 8192},
             options=("A[I_XYZ, J] · B[J, K] -> C[I, K]", "A[I, J] · B[J, K_XYZ] -> C[I, K]",
                      "A[I, J_XYZ] · B[J_XYZ, K] -> C[I, K]", "A[I, J] · B[J, K] -> C[I, K]"))


def _3_12_times() -> dict:
    return {e: plan_matmul(e, _3_12["sizes"], _V4P_CUBE).time_s for e in _3_12["options"]}


def _3_12_reference() -> Derivation:
    """Reference for 3.12: the fastest of the book's four shardings for a replicated result."""
    times = _3_12_times()
    best = min(times, key=times.get)
    return define(explain(plan_matmul, best, _3_12["sizes"], _V4P_CUBE),
                  {"C": "a TPU v4p's peak bf16 rate", **_T_MATMUL, **_N_AXES})


register(Exercise(
    id="3.12",
    title="The fastest way to a replicated result on a TPU v4p 4x4x4",
    reference=_3_12_reference,
    unit="s",
    involves={"bandwidth", "dtype", "flops"},
    mistakes={
        slip(_3_12_times()[_3_12["options"][2]], min(_3_12_times().values())):
            "sharding the contracting dimension J leaves partial sums of the whole C on every chip: an AllReduce, "
            "twice the AllGather of a C sharded over I or K",
        slip(_3_12_times()[_3_12["options"][3]], min(_3_12_times().values())):
            "with nothing sharded every chip does the whole matmul; sharding I (or K) over all 64 chips "
            "divides the FLOPs by 64 for the price of one AllGather of C",
    },
    book=("Q5",),
))


# 3.13 ------------------------------------------------------------------------

_V5E_2x2 = tpu_slice((2, 2), "tpu-v5e")
_3_13 = dict(sizes={"B": 512, "D": 8192, "F": 32768},
             first="In[B, D_XY] · Win[D, F_XY] -> H[B, F_XY]", second="H[B, F_XY] · Wout[F_XY, D] -> Out[B, D_XY]")


def _3_13_plans():
    return (plan_matmul(_3_13["first"], _3_13["sizes"], _V5E_2x2),
            plan_matmul(_3_13["second"], _3_13["sizes"], _V5E_2x2))


def _3_13_reference() -> Derivation:
    """Reference for 3.13: the AllGather before the first matmul and the ReduceScatter after the second."""
    steps = [s for p in _3_13_plans() for s in p.steps]
    total = sum(s.time_s for s in steps)
    return Derivation("T_comms", " + ".join(f"T_{s.kind}" for s in steps),
                      " + ".join(q(s.time_s, "s") for s in steps), total, "s", tuple(s.derivation for s in steps))


def _3_13_wrong(kind_after="ReduceScatter", axes="XY") -> float:
    first, second = _3_13_plans()
    gather, scatter = first.steps[0], second.steps[0]
    t = allgather_time_s(gather.nbytes, _V5E_2x2, axes=axes)
    after = reducescatter_time_s(scatter.nbytes, _V5E_2x2, axes=axes)
    return t + (2 * after if kind_after == "AllReduce" else after)


register(Exercise(
    id="3.13",
    title="Communication of a tensor-parallel MLP on a TPU v5e 2x2",
    reference=_3_13_reference,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_3_13_wrong(kind_after="AllReduce"), _3_13_wrong()):
            "Out is to be split like In, [B, D_XY], so its partial sums need only a ReduceScatter, "
            "half the time of an AllReduce",
        slip(_3_13_wrong(axes="X"), _3_13_wrong()):
            "both collectives run over X and Y together, so they have the links of both axes, "
            "twice the bandwidth of one",
    },
    book=("Q7",),
))


# 3.14 ------------------------------------------------------------------------

_3_14 = dict(sizes={"N": 4096, "M": 16384, "K": 4096}, mesh={"X": 8},
             gather="A[N, M_X] · B[M, K] -> C[N, K]", scatter="A[N, M_X] · B[M_X, K] -> C[N_X, K]")


def _3_14_bytes(collective: str) -> float:
    """Bytes each device sends: gathering A first, or reducing C after (ReduceScatter or AllReduce)."""
    if collective == "gather":
        return plan_matmul(_3_14["gather"], _3_14["sizes"], _3_14["mesh"]).moved_bytes
    target = "C[N_X, K]" if collective == "reducescatter" else "C[N, K]"
    return plan_matmul(f"A[N, M_X] · B[M_X, K] -> {target}", _3_14["sizes"], _3_14["mesh"]).moved_bytes


def _3_14_reference() -> Derivation:
    """Reference for 3.14: what each device sends in the one collective of each plan, and their ratio."""
    parts = []
    for key, symbol, array in (("gather", "S_gather", "A"), ("scatter", "S_scatter", "C")):
        (step,) = plan_matmul(_3_14[key], _3_14["sizes"], _3_14["mesh"]).steps
        n = step.group
        parts.append(Derivation(symbol, f"V_{array} · (X − 1)/X", f"{q(step.nbytes, 'B')} · {n - 1}/{n}",
                                step.moved_bytes, "B", where=(f"V_{array}: the bytes of {step.before}; X: the devices "
                                                              f"along X ({step.kind})",)))
    gather, scatter = parts
    return Derivation("ratio", "S_gather / S_scatter", f"{q(gather.value, 'B')} / {q(scatter.value, 'B')}",
                      gather.value / scatter.value, "", (gather, scatter))


register(Exercise(
    id="3.14",
    title="Gather first or reduce-scatter after: the ratio of bytes sent",
    reference=_3_14_reference,
    unit="",
    mistakes={
        slip(_3_14_bytes("gather") / _3_14_bytes("allreduce"), _3_14_bytes("gather") / _3_14_bytes("reducescatter")):
            "you compared with an AllReduce of C; with a sharded result a ReduceScatter does, half the bytes",
        slip(_3_14_bytes("reducescatter") / _3_14_bytes("gather"), _3_14_bytes("gather") / _3_14_bytes("reducescatter")):
            "you divided the other way round: the question asks how many times more the AllGather sends",
    },
    book=("Q9",),
))


# 3.15 and 3.16 ---------------------------------------------------------------

_Q10 = dict(N=2048, D=16, dtype="bf16")
_Q10_BYTES = _Q10["N"] ** 2 * bytes_per_value(_Q10["dtype"])


def _q10(bidirectional: bool, alltoall_as_gather=False, halve_both=False) -> np.ndarray:
    V, D = _Q10_BYTES, _Q10["D"]
    gather = ring_link_bytes(V, D, collective="allgather", bidirectional=bidirectional)
    if alltoall_as_gather:
        return np.array([gather, gather])
    if halve_both:
        one_way = ring_link_bytes(V, D, collective="alltoall", bidirectional=False)
        return np.array([gather, one_way / 2])
    return np.array([gather, ring_link_bytes(V, D, collective="alltoall", bidirectional=bidirectional)])


def _q10_reference(bidirectional: bool) -> Derivation:
    parts = tuple(explain(ring_link_bytes, _Q10_BYTES, _Q10["D"], collective=c, bidirectional=bidirectional)
                  for c in ("allgather", "alltoall"))
    return _listed("[AllGather, AllToAll]", parts, "B")


register(Exercise(
    id="3.15",
    title="Bytes per link on a one-way ring: AllGather against AllToAll",
    reference=lambda: _q10_reference(False),
    unit="B",
    mistakes={
        slip(_q10(False, alltoall_as_gather=True), _q10(False)):
            "in an AllToAll each block goes only as far as its own destination, not round the whole ring "
            "as a gathered shard does",
        slip(_q10(False) * _Q10["D"] / (_Q10["D"] - 1), _q10(False)):
            "no shard or block crosses all D links: a shard stops after D − 1, the device it came from "
            "already has it",
    },
    book=("Q10",),
))

register(Exercise(
    id="3.16",
    title="Bytes per link on a bidirectional ring",
    reference=lambda: _q10_reference(True),
    unit="B",
    mistakes={
        slip(_q10(False), _q10(True)):
            "those are the one-way loads; with links in both directions each link carries less",
        slip(_q10(True, halve_both=True), _q10(True)):
            "for the AllToAll, going the shorter way round does more than split the traffic in two: "
            "no block travels more than D/2 links",
    },
    book=("Q10",),
))


# 3.17 ------------------------------------------------------------------------

_V6E_POD = tpu_pod("tpu-v6e")


def _3_17_reference() -> Derivation:
    """Reference for 3.17: where the hops' latency and the bytes' time meet, per chip (latency_bound_bytes)."""
    n, W = _V6E_POD.mesh["X"], _V6E_POD.axis_bytes_per_s("X")
    latency = allgather_time_s(0.0, _V6E_POD, axes="X")
    value = latency_bound_bytes(_V6E_POD, axes="X", per="shard")
    return Derivation("V*_shard", "T_latency · W / n", f"{q(latency, 's')} · {q(W, 'B/s')} / {n}", value, "B",
                      where=("T_latency: the AllGather's hops, n/2 round a ring of n chips at about 1 µs each; "
                             "W: a chip's bidirectional bandwidth along the ring (the gather takes V / W); "
                             "n: chips along the axis",))

register(Exercise(
    id="3.17",
    title="Where an AllGather on a TPU v6e ring stops being latency-bound",
    reference=_3_17_reference,
    unit="B",
    involves={"bandwidth"},
    mistakes={
        slip(latency_bound_bytes(_V6E_POD, axes="X"), latency_bound_bytes(_V6E_POD, axes="X", per="shard")):
            "that is the whole gathered array; the question asks for each device's shard of it",
    },
))


# 3.18 ------------------------------------------------------------------------

_3_18 = ("A[I_XY, J]", "A[I_Y, J_X]", "A[I_X, J_X]", "A[I, J]{U_X}")


def _3_18_reference() -> str:
    refused = []
    for text in _3_18:
        try:
            sharding(text, {"X": 4, "Y": 2})
        except InvalidValueError:
            refused.append(text)
    (bad,) = refused
    return bad


register(Exercise(
    id="3.18",
    title="The sharding that is not allowed (warm-up)",
    reference=_3_18_reference,
    kind="choice",
    choices=_3_18,
    reason="A mesh axis splits at most one dimension of an array: in A[I_X, J_X] the devices along X would each "
           "need a different block of I and of J at once, which no layout gives.",
))


# 3.19 ------------------------------------------------------------------------


def _v5e_allgather_time(V, n, wraparound):
    """Reference for 3.19: an AllGather of V bytes over an axis of n TPU v5e chips."""
    axis = tpu_slice((n, 1), "tpu-v5e", wraparound=(wraparound, False))
    return allgather_time_s(V, axis, axes="X")


register(Exercise(
    id="3.19",
    title="AllGather time along one TPU v5e axis, as a function",
    reference=lambda: _v5e_allgather_time,
    unit="s",
    kind="function",
    mistakes={
        slip(_v5e_allgather_time(1e8, 16, True) * 2, _v5e_allgather_time(1e8, 16, True)):
            "a factor of 2: round a ring with wraparound the shards go both ways, so a chip receives over "
            "both directions of its links: the bidirectional bandwidth",
    },
    cases=(
        dict(V=1e8, n=16, wraparound=True),
        dict(V=1e8, n=4, wraparound=False),
        dict(V=3e7, n=8, wraparound=False),
        dict(V=5e8, n=16, wraparound=False),
        dict(V=2e4, n=16, wraparound=True),
        dict(V=1e3, n=2, wraparound=False),
    ),
    formula="T = max(T_hop · hops, bandwidth term): round a ring with wraparound (n = 16 on v5e) n/2 hops and "
            "V / W_bidirectional; along a line n − 1 hops and (n − 1)/n · V / W_one-way; T_hop ≈ 1 µs",
))
