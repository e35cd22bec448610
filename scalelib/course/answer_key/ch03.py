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
from ..._collectives import allgather_time_s, alltoall_time_s, reducescatter_time_s
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

_3_1 = dict(text="A[I_XY, J]", mesh={"X": 4, "Y": 4}, shape=(4096, 8192), dtype="bf16", chip="h200")


def _shard_read_time(text=_3_1["text"], dtype=_3_1["dtype"], bits=False) -> float:
    s = sharding(text, _3_1["mesh"])
    nbytes = s.shard_bytes(_3_1["shape"], dtype=dtype) * (8 if bits else 1)
    return t_comms_s(nbytes, _3_1["chip"], bandwidth="hbm")


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
    involves=frozenset(),
    mistakes={
        slip(_shard_read_time("A[I_X, J]"), _shard_read_time()):
            "you split I over one mesh axis only; the subscript XY splits it over X and Y together, one block "
            "per GPU",
        slip(_shard_read_time("A[I, J]"), _shard_read_time()):
            "that is the time to read the whole array; each device reads only the block it holds",
        slip(_shard_read_time(dtype="f32"), _shard_read_time()):
            "the array is bf16: check the bytes per value",
        slip(_shard_read_time(dtype="int8"), _shard_read_time()):
            "the array is bf16: check the bytes per value",
        slip(_shard_read_time(bits=True), _shard_read_time()):
            "you counted the block in bits; HBM bandwidth is in bytes per second",
    },
    book=("Pop quiz a",),
))


# 3.2 -------------------------------------------------------------------------

_3_2 = dict(text="A[I_XZ, J]", mesh={"X": 2, "Y": 4, "Z": 4}, shape=(256, 5120), dtype="int8")


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
    per = _named(per, "bytes per device")
    total = replace(total, symbol="bytes in all", steps=(per,))      # the block shown once, under one name
    return _listed("[per device, all devices]", (per, total), "B")


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
            "the array is int8: check the bytes per value",
    },
    book=("Pop quiz b",),
))


# 3.3 -------------------------------------------------------------------------

_3_3 = dict(text="A[I_Z, J, K]", mesh={"X": 8, "Y": 4, "Z": 4}, shape=(2048, 8192, 24), dtype="bf16")


def _3_3_bytes(copies=None) -> float:
    """Bytes all chips hold beyond one copy of A (`copies` replaces the true count of copies)."""
    s = sharding(_3_3["text"], _3_3["mesh"])
    one = s.total_bytes(_3_3["shape"], dtype=_3_3["dtype"]) / s.copies()
    return ((s.copies() if copies is None else copies) - 1) * one


def _3_3_reference() -> Derivation:
    """Reference for 3.3: one copy per position along the mesh axes that split no dimension of A, less one."""
    s = sharding(_3_3["text"], _3_3["mesh"])
    idle = [a for a in s.mesh if a not in s._used]
    copies = Derivation("copies", " · ".join(f"|{a}|" for a in idle), " · ".join(str(s.mesh[a]) for a in idle),
                        s.copies(), "", where=(f"{', '.join(idle)}: the mesh axes that split no dimension of "
                                               f"{s} (|X| is the number of devices along X)",))
    one = s.total_bytes(_3_3["shape"], dtype=_3_3["dtype"]) / s.copies()
    array = Derivation("V_A", "I · J · K · bytes per value",
                       f"{' · '.join(map(str, _3_3['shape']))} · {bytes_per_value(_3_3['dtype']):g}", one, "B",
                       where=("I, J, K: the sides of A; bf16 values, 2 bytes each",))
    return Derivation("extra bytes", "(copies − 1) · V_A", f"({q(copies.value)} − 1) · {q(one, 'B')}",
                      _3_3_bytes(), "B", (copies, array))


register(Exercise(
    id="3.3",
    title="What replication costs: the bytes held beyond one copy",
    reference=_3_3_reference,
    unit="B",
    mistakes={
        slip(_3_3_bytes() + sharding(_3_3["text"], _3_3["mesh"]).total_bytes(_3_3["shape"], dtype=_3_3["dtype"])
             / sharding(_3_3["text"], _3_3["mesh"]).copies(), _3_3_bytes()):
            "that is everything the chips hold; the question asks only for what they hold beyond one copy",
        slip(_3_3_bytes(copies=sharding(_3_3["text"], _3_3["mesh"]).num_devices), _3_3_bytes()):
            "you counted one copy per chip; the chips along Z hold one block each of the same copy, "
            "so count only the positions along the axes that do not split A",
        slip(_3_3_bytes(copies=_3_3["mesh"]["Z"]), _3_3_bytes()):
            "you counted copies along the axis that splits A; the copies come from the axes that split nothing",
    },
    book=("Q1",),
))


# 3.4 and 3.5 -----------------------------------------------------------------

_V5E_8x4 = tpu_slice((8, 4), "tpu-v5e")          # neither axis spans the pod's 16 chips: no wraparound
_V5E_16x8 = tpu_slice((16, 8), "tpu-v5e")        # X spans the pod: a ring; Y: a line of 8
_LAYOUTS = {"X": "[E_X, F] -> [E, F]", "Y": "[E_Y, F] -> [E, F]", "XY": "[E_XY, F] -> [E, F]"}
_3_4 = dict(sizes={"E": 4096, "F": 6144}, topology=_V5E_8x4)
_3_5 = dict(sizes={"E": 128, "F": 128}, topology=_V5E_16x8)


def _only_step(expr, sizes, topology):
    """The one collective (a :class:`Collective`, with its V and derivation) `plan_reshard` finds for `expr`."""
    (step,) = plan_reshard(expr, sizes, topology).steps
    return step


def _gather_times(case) -> dict:
    """The AllGather back to the whole [E, F] from E split over X, over Y, or over both: axes -> time."""
    return {axes: plan_reshard(e, case["sizes"], case["topology"]).time_s for axes, e in _LAYOUTS.items()}


def _one_meaning(derivation: Derivation, axes: str) -> Derivation:
    """A gather's derivation whose letters keep one meaning beside the other layouts' gathers: its hop count
    named for its axes (``hops_X``), and a ring's both-ways W apart from a line's one-way W (``W_ring``,
    ``W_line``; over both kinds of axis, their sum written out instead of Σ W)."""
    import re

    def hops(text: str) -> str:
        return re.sub(r"(?<![\w])hops(?![\w])", f"hops_{axes}", text)

    parts = [part for line in derivation.where for part in line.split("; ")]
    kinds = [kind for kind, lead in (("ring", "W: both ways"), ("line", "W: one way")) if any(p.startswith(lead) for p in parts)]
    formula = hops(derivation.formula)
    if len(kinds) == 1:
        formula = re.sub(r"(?<![\w])W(?![\w])", f"W_{kinds[0]}", formula)
    elif kinds:
        formula = formula.replace("Σ W", "(" + " + ".join(f"W_{kind}" for kind in kinds) + ")")
    where = []
    for line in derivation.where:
        kept = []
        for part in line.split("; "):
            if part.startswith("Σ W:"):
                if len(kinds) > 1:
                    continue
                part = f"Σ W_{kinds[0]}" + part[3:]
            if part.startswith("W: both ways"):
                part = "W_ring" + part[1:]
            elif part.startswith("W: one way"):
                part = "W_line" + part[1:]
            kept.append(hops(part))
        where.append("; ".join(kept))
    return replace(derivation, formula=formula, where=tuple(where))


def _fastest_gather(case) -> Derivation:
    """The fastest of the three layouts' gathers: each gather's derivation, then their minimum."""
    parts = [_one_meaning(_named(_only_step(e, case["sizes"], case["topology"]).derivation, f"T_{axes}"), axes)
             for axes, e in _LAYOUTS.items()]
    best = min(parts, key=lambda p: p.value)
    return Derivation("T_fastest", "min(T_X, T_Y, T_XY)", "min(" + ", ".join(q(p.value, "s") for p in parts) + ")",
                      best.value, "s", tuple(parts),
                      where=("T_X, T_Y, T_XY: the gather with E split over X, over Y, over both",))


def _one_way(nbytes: float, topology) -> float:
    """`nbytes` over one ICI link, one way: a line's end chip receiving the whole array, its own shard included."""
    return nbytes / topology.spec.ici_link_bytes_per_s_one_way


def _3_4_fastest() -> float:
    return min(_gather_times(_3_4).values())


_3_4_V = _only_step(_LAYOUTS["XY"], _3_4["sizes"], _V5E_8x4).nbytes

register(Exercise(
    id="3.4",
    title="Which layout of an array gathers fastest on a TPU v5e 8x4",
    reference=lambda: _fastest_gather(_3_4),
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_gather_times(_3_4)["Y"], _3_4_fastest()):
            "that is the gather of the layout split over Y alone; for an array this large the bytes set the time, "
            "and another layout brings them into each chip over more links",
        slip(_gather_times(_3_4)["X"], _3_4_fastest()):
            "that is the gather of the layout split over X alone, the slowest of the three for this array",
        slip(allgather_time_s(_3_4_V, tpu_pod("tpu-v5e"), axes="XY"), _3_4_fastest()):
            "you used a ring's formula and bidirectional bandwidth; an axis of a v5e slice wraps around only when "
            "it spans the pod's full 16 chips, so here the shards reach the end chips over single links, one way",
        slip(allgather_time_s(_3_4_V * 2, _V5E_8x4, axes="XY"), _3_4_fastest()):
            "the array is bf16: check the bytes per value",
        slip(_one_way(_3_4_V, _V5E_8x4) / 2, _3_4_fastest()):
            "the end chip already holds its own shard: its links bring it only the shards of the other chips",
    },
    book=("Pop quiz 2",),
))


def _3_5_fastest() -> float:
    return min(_gather_times(_3_5).values())


register(Exercise(
    id="3.5",
    title="Which layout of a small array gathers fastest on a TPU v5e 16x8",
    reference=lambda: _fastest_gather(_3_5),
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_gather_times(_3_5)["XY"], _3_5_fastest()):
            "that is the gather over both axes; for so few bytes the hops, about 1 µs each, set the time, and a "
            "gather over both axes crosses the hops of both",
        slip(_gather_times(_3_5)["X"], _3_5_fastest()):
            "that is the gather over the 16-chip ring; count the hops of each layout again: X wraps around, Y does not",
        slip(allgather_time_s(_only_step(_LAYOUTS["Y"], _3_5["sizes"], _V5E_16x8).nbytes, _V5E_16x8, axes="Y",
                              latency_s=0), _3_5_fastest()):
            "that is the bandwidth term alone; for so few bytes the hops' latency is what takes the time",
    },
    book=("Pop quiz 2",),
))


# 3.6 -------------------------------------------------------------------------

_V5P_4x4x12 = tpu_slice((4, 4, 12), "tpu-v5p")    # whole 4x4x4 cubes: every axis wraps around
_3_6 = dict(sizes={"B": 768}, layouts={"Z": "[B_Z] -> [B]", "XY": "[B_XY] -> [B]"})


def _3_6_times(slice_: TpuSlice = _V5P_4x4x12, latency_s=None) -> dict:
    """The gather back to the whole vector from each layout: axes -> time."""
    V = _only_step(_3_6["layouts"]["Z"], _3_6["sizes"], _V5P_4x4x12).nbytes
    return {axes: allgather_time_s(V, slice_, axes=axes, latency_s=latency_s) for axes in _3_6["layouts"]}


def _3_6_reference() -> Derivation:
    """Reference for 3.6: the faster of the two layouts' gathers."""
    parts = [_one_meaning(_named(_only_step(e, _3_6["sizes"], _V5P_4x4x12).derivation, f"T_{axes}"), axes)
             for axes, e in _3_6["layouts"].items()]
    assert [p.value for p in parts] == list(_3_6_times().values())
    return define(Derivation("T_faster", "min(T_Z, T_XY)", "min(" + ", ".join(q(p.value, "s") for p in parts) + ")",
                             min(p.value for p in parts), "s", tuple(parts),
                             where=("T_Z, T_XY: the gather with B split over Z, over X and Y together",)), _N_AXES)


_3_6_BEST = min(_3_6_times().values())
_3_6_LINES = tpu_slice((4, 4, 12), "tpu-v5p", wraparound=False)

# Choosing Z, or counting the hops of X and Y along lines, gives the same time: one text names both.
assert abs(_3_6_times()["Z"] / _3_6_times(_3_6_LINES)["XY"] - 1) < 1e-9

register(Exercise(
    id="3.6",
    title="Which layout of a small vector gathers faster on a TPU v5p 4x4x12",
    reference=_3_6_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_6_times()["Z"], _3_6_BEST):
            "either that is the gather of the layout split over Z, the slower one, or you counted the hops of X and "
            "Y along lines: a v5p slice of whole 4x4x4 cubes wraps around every axis, so shards travel both ways "
            "round each ring",
        slip(_3_6_times(_3_6_LINES)["Z"], _3_6_BEST):
            "you counted the hops of Z along a line; a v5p slice of whole 4x4x4 cubes wraps around every axis",
        slip(_3_6_times(latency_s=0)["XY"], _3_6_BEST):
            "that is the bandwidth term alone; a kilobyte or so crosses a link in far less than the "
            "microsecond each hop costs",
    },
    book=("Q3",),
))


# 3.7 -------------------------------------------------------------------------

_V4P_CUBE = tpu_slice((4, 4, 4), "tpu-v4p")      # a whole cube: wraparound on every axis
_3_7 = dict(sizes={"B": 3072, "D": 5120},
            exprs=("[B_X, D_Y] -> [B, D_Y]", "[B_X, D_Y] -> [B, D]", "[B_X, D_Y]{U_Z} -> [B_X, D_Y]"))


def _3_7_times() -> np.ndarray:
    return np.array([plan_reshard(e, _3_7["sizes"], _V4P_CUBE).time_s for e in _3_7["exprs"]])


def _3_7_reference() -> Derivation:
    names = ("T_AG_X", "T_AG_XY", "T_AR_Z")
    parts = [_one_meaning(_named(_only_step(e, _3_7["sizes"], _V4P_CUBE).derivation, n), n.rsplit("_", 1)[1])
             for e, n in zip(_3_7["exprs"], names)]
    return define(_listed("[AllGather_X, AllGather_XY, AllReduce_Z]", parts, "s"), _N_AXES)


#: The hint for the exact ring formula, (n − 1)/n · V / W, where the question drops (n − 1)/n as the chapter does.
_RING_EXACT = ("that keeps the ring's (n − 1)/n factor; the question drops it on a ring, as the chapter does, "
               "so take the approximate form")


def _ring_share(n: int) -> float:
    """(n − 1)/n: what the exact ring formula keeps and the chapter's approximation drops."""
    return (n - 1) / n


def _3_7_slip(index: int, wrong: float) -> tuple[float, ...]:
    times = _3_7_times()
    times_wrong = times.copy()
    times_wrong[index] = wrong
    return slip(times_wrong, times)


def _3_7_bytes(index: int) -> float:
    return _only_step(_3_7["exprs"][index], _3_7["sizes"], _V4P_CUBE).nbytes


register(Exercise(
    id="3.7",
    title="Three reshardings on a TPU v4p 4x4x4, described in words",
    reference=_3_7_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_7_times() * np.array([_ring_share(_V4P_CUBE.shape[0]),
                                      _ring_share(_V4P_CUBE.shape[0] * _V4P_CUBE.shape[1]),
                                      _ring_share(_V4P_CUBE.shape[2])]), _3_7_times()): _RING_EXACT,
        _3_7_slip(0, allgather_time_s(_3_7_bytes(1), _V4P_CUBE, axes="X")):
            "for the first, the devices of each Y position gather only their own block: D stays split "
            "over Y, so V is not the whole array",
        _3_7_slip(1, allgather_time_s(_3_7_bytes(1), _V4P_CUBE, axes="X")):
            "gathering over X and Y at once uses the links of both axes, not of one",
        _3_7_slip(2, reducescatter_time_s(_3_7_bytes(2), _V4P_CUBE, axes="Z")):
            "an AllReduce is a ReduceScatter followed by an AllGather: two passes over the data, not one",
        slip(_3_7_times() * 2, _3_7_times()):
            "every axis of the cube is a ring: shards go both ways round, so a chip receives over both "
            "directions of its links (the bidirectional bandwidth)",
    },
    book=("Q2",),
))


# 3.8 -------------------------------------------------------------------------

_V5E_4x4 = tpu_slice((4, 4), "tpu-v5e")
# I is the unknown: any multiple of 4 plans the same collective (its bytes do not depend on I).
_3_8 = dict(expr="A[I_X, J] · B[J_X, K_Y] -> C[I_X, K_Y]", sizes={"I": 2048, "J": 8192, "K": 28672})


def _3_8_step():
    """The one collective the layout needs (an AllGather of B over X), planned by plan_matmul."""
    (step,) = plan_matmul(_3_8["expr"], _3_8["sizes"], _V5E_4x4).steps
    return step


def _3_8_batch(t_comms=None, flops_per_mac=2, split_k=True, split_i=True) -> int:
    """The smallest batch I (a multiple of |X|) at which a chip's arithmetic takes at least `t_comms`.
    The arguments are the slips: a wrong collective time, a multiply-add counted as one FLOP, K or I not split."""
    X, Y = _V5E_4x4.mesh["X"], _V5E_4x4.mesh["Y"]
    t = _3_8_step().time_s if t_comms is None else t_comms
    J, K = _3_8["sizes"]["J"], _3_8["sizes"]["K"]
    rows = t * _V5E_4x4.spec.bf16_flops_per_s / (flops_per_mac * J * (K / Y if split_k else K))
    if not split_i:                                  # each chip's arithmetic taken on the whole batch
        rows = rows / X
    return X * int(np.ceil(rows - 1e-9))


def _3_8_reference() -> Derivation:
    """Reference for 3.8: the gather's time, then the rows per chip whose matmul takes as long."""
    step = _3_8_step()
    X, Y = _V5E_4x4.mesh["X"], _V5E_4x4.mesh["Y"]
    J, K = _3_8["sizes"]["J"], _3_8["sizes"]["K"]
    C = _V5E_4x4.spec.bf16_flops_per_s
    comms = _named(step.derivation, "T_comms")
    rows = comms.value * C / (2 * J * K / Y)
    value = _3_8_batch()
    assert value == X * int(np.ceil(rows - 1e-9))
    # the plan at that batch: the same collective, and the arithmetic now at least as long
    at = plan_matmul(_3_8["expr"], {**_3_8["sizes"], "I": value}, _V5E_4x4)
    assert [s.kind for s in at.steps] == [step.kind] and at.t_math_s >= step.time_s
    assert plan_matmul(_3_8["expr"], {**_3_8["sizes"], "I": value - X}, _V5E_4x4).t_math_s < step.time_s
    # r is rounded up where it is computed, so the line shows the whole number the next one uses
    r = Derivation("r", "⌈T_comms · C / (2 · J · K/N_Y)⌉",
                   f"⌈{q(comms.value, 's')} · {q(C, 'FLOP/s')} / (2 · {J} · {K}/{Y})⌉ = ⌈{rows:.1f}⌉",
                   float(value // X), "rows", (comms,),
                   where=("C: a TPU v5e's peak bf16 rate; J, K: B's rows and columns; N_Y: the chips along Y; "
                          "r: the fewest whole rows of A whose local matmul with B[J, K/N_Y] takes at least T_comms",))
    return Derivation("I_min", "N_X · r", f"{X} · {value // X}", value, "tokens", (r,),
                      where=("N_X: the chips along X",))


_3_8_V = _3_8_step().nbytes

register(Exercise(
    id="3.8",
    title="The batch that hides a training-style matmul's collective on a TPU v5e 4x4",
    reference=_3_8_reference,
    unit="tokens",
    integer=True,
    involves=frozenset(),
    mistakes={
        slip(_3_8_batch(allgather_time_s(_3_8_V, tpu_pod("tpu-v5e"), axes="X")), _3_8_batch()):
            "the collective's time is off: you used a ring's formula and bidirectional bandwidth, but a v5e slice "
            "this small has no wraparound links",
        slip(_3_8_batch(allgather_time_s(_3_8_V * _V5E_4x4.mesh["Y"], _V5E_4x4, axes="X")), _3_8_batch()):
            "the collective's time is off: B keeps K split over Y, so the chips of each Y position gather only "
            "their own columns",
        slip(_3_8_batch(allgather_time_s(_3_8_V / _V5E_4x4.mesh["X"], _V5E_4x4, axes="X")), _3_8_batch()):
            "the collective's time is off: V is the gathered array, not the block one chip starts with",
        slip(_3_8_batch(_one_way(_3_8_V, _V5E_4x4)), _3_8_batch()):
            "the collective's time is off: the end chip already holds its own block, so its link brings it only "
            "the blocks of the other chips",
        slip(_3_8_batch(flops_per_mac=1), _3_8_batch()):
            "a multiply-add is two FLOPs, not one",
        slip(_3_8_batch(split_k=False), _3_8_batch()):
            "a chip's arithmetic is off: either you took all of K (after the gather B is still split over Y) or "
            "all of the batch (A's rows are split over X)",
    },
    book=("Q6",),
))


# 3.9 -------------------------------------------------------------------------

_V5E_8x8 = tpu_slice((8, 8), "tpu-v5e")         # axes of 8 chips: lines, no wraparound
_3_9 = dict(expr="A[I, J_X] · B[J_X, K] -> C[I, K_X]", sizes={"I": 6144, "J": 16384, "K": 6144})


def _3_9_step():
    """The one collective plan_matmul picks for the partial sums (a ReduceScatter over X)."""
    (step,) = plan_matmul(_3_9["expr"], _3_9["sizes"], _V5E_8x8).steps
    return step


def _3_9_reference() -> Derivation:
    """Reference for 3.9: the cheapest way from C[I, K]{U_X} to a C the next layer takes (a ReduceScatter)."""
    return _3_9_step().derivation


def _3_9_time(kind="ReduceScatter", topology=_V5E_8x8) -> float:
    V = _3_9_step().nbytes
    return (2 if kind == "AllReduce" else 1) * reducescatter_time_s(V, topology, axes="X")


register(Exercise(
    id="3.9",
    title="Partial sums into a sharded result: the collective and its time",
    reference=_3_9_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_9_time("AllReduce"), _3_9_time()):
            "either you chose an AllReduce, which leaves every device the whole C though the next layer takes a "
            "split C too, or the bytes per value are off (the arrays are bf16)",
        slip(_3_9_time(topology=tpu_pod("tpu-v5e")), _3_9_time()):
            "you used a ring's formula and bidirectional bandwidth; an 8-chip axis of a v5e slice is a line "
            "without wraparound",
        slip(_one_way(_3_9_step().nbytes, _V5E_8x8), _3_9_time()):
            "each device keeps its own share of the partial sums: its link carries only the other devices' shares",
        slip(_3_9_time() / 2, _3_9_time()):
            "either the bytes per value (the arrays are bf16) or the bandwidth (the end chip of a line "
            "exchanges over one link, one way) is off",
    },
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


_3_10 = {"B": 6144, "D": 2048, "F": 8192}


def _3_10_times(comms_factor=(1.0, 1.0), add=False, math_factor=1.0) -> np.ndarray:
    plans = _q4_strategies(_3_10)
    combine = (lambda a, b: a + b) if add else max
    return np.array([combine(p.t_math_s * math_factor, p.t_comms_s * c) for p, c in zip(plans, comms_factor)])


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
    involves=frozenset(),
    mistakes={
        slip(_3_10_times(comms_factor=(_ring_share(8), _ring_share(8))), _3_10_times()): _RING_EXACT,
        slip(_3_10_times(comms_factor=(1.0, 0.5)), _3_10_times()):
            "the AllReduce after the local matmul makes two passes (a ReduceScatter, then an AllGather), "
            "not one",
        slip(_3_10_times(add=True), _3_10_times()):
            "you added T_math and T_comms; the question asks for the time with full overlap, their maximum",
        slip(_3_10_times(math_factor=0.5), _3_10_times()):
            "a multiply-add is two FLOPs, not one",
        slip(_3_10_times(comms_factor=(2.0, 2.0)), _3_10_times()):
            "X is a ring with wraparound: shards go both ways round, so a chip receives over both directions "
            "of its links (the bidirectional bandwidth)",
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

_V5P_CUBE = tpu_slice((4, 4, 4), "tpu-v5p")      # a whole cube: wraparound on every axis
_3_12 = dict(sizes={"I": 16384, "J": 16384, "K": 16384},
             options=("A[I_XYZ, J] · B[J, K] -> C[I, K]", "A[I, J] · B[J, K_XYZ] -> C[I, K]",
                      "A[I, J_XYZ] · B[J_XYZ, K] -> C[I, K]", "A[I, J] · B[J, K] -> C[I, K]"))


def _3_12_times() -> dict:
    return {e: plan_matmul(e, _3_12["sizes"], _V5P_CUBE).time_s for e in _3_12["options"]}


def _3_12_reference() -> Derivation:
    """Reference for 3.12: the fastest of the book's four shardings for a replicated result."""
    times = _3_12_times()
    best = min(times, key=times.get)
    return define(explain(plan_matmul, best, _3_12["sizes"], _V5P_CUBE),
                  {"C": "a TPU v5p's peak bf16 rate", **_T_MATMUL, **_N_AXES})


register(Exercise(
    id="3.12",
    title="The fastest way to a replicated result on a TPU v5p 4x4x4",
    reference=_3_12_reference,
    unit="s",
    involves=frozenset(),
    rtol=0.005,  # the exact ring formula, 63/64 of the answer, is refused and named
    mistakes={
        slip(min(_3_12_times().values()) * _ring_share(_V5P_CUBE.num_chips), min(_3_12_times().values())):
            _RING_EXACT,
        slip(_3_12_times()[_3_12["options"][2]], min(_3_12_times().values())):
            "either the sharding (splitting the contracting dimension J leaves partial sums of the whole C on "
            "every chip, and summing them takes more communication than another sharding needs) or the "
            "bandwidth (every axis of the cube is a ring: a chip receives over both directions of its links)",
        slip(_3_12_times()[_3_12["options"][3]], min(_3_12_times().values())):
            "with nothing sharded every chip does the whole matmul; at this size splitting the work costs a "
            "collective that takes less time than the arithmetic it saves",
    },
    book=("Q5",),
))


# 3.13 ------------------------------------------------------------------------

_V5E_2x4 = tpu_slice((2, 4), "tpu-v5e")       # lines of 2 and 4 chips: no wraparound
_3_13 = dict(sizes={"B": 512, "D": 8192, "F": 32768},
             first="In[B, D_XY] · Win[D, F_XY] -> H[B, F_XY]", second="H[B, F_XY] · Wout[F_XY, D] -> Out[B, D_XY]")


def _3_13_plans():
    return (plan_matmul(_3_13["first"], _3_13["sizes"], _V5E_2x4),
            plan_matmul(_3_13["second"], _3_13["sizes"], _V5E_2x4))


def _3_13_reference() -> Derivation:
    """Reference for 3.13: the AllGather before the first matmul and the ReduceScatter after the second."""
    steps = [s for p in _3_13_plans() for s in p.steps]
    total = sum(s.time_s for s in steps)
    return Derivation("T_comms", " + ".join(f"T_{s.kind}" for s in steps),
                      " + ".join(q(s.time_s, "s") for s in steps), total, "s", tuple(s.derivation for s in steps))


def _3_13_wrong(kind_after="ReduceScatter", axes="XY") -> float:
    first, second = _3_13_plans()
    gather, scatter = first.steps[0], second.steps[0]
    t = allgather_time_s(gather.nbytes, _V5E_2x4, axes=axes)
    if kind_after is None:
        return t
    after = reducescatter_time_s(scatter.nbytes, _V5E_2x4, axes=axes)
    return t + (2 * after if kind_after == "AllReduce" else after)


def _3_13_whole_over_links() -> float:
    """Both collectives moving all of V into a chip over the links of X and Y (its own share counted too)."""
    links = _V5E_2x4.axis_bytes_per_s("X") + _V5E_2x4.axis_bytes_per_s("Y")
    return sum(s.nbytes for p in _3_13_plans() for s in p.steps) / links


# On a 2x4 the two slips of the second hint give the same time: one text names both.
assert abs(_3_13_whole_over_links() / _3_13_wrong(axes="X") - 1) < 1e-9


register(Exercise(
    id="3.13",
    title="Communication of a tensor-parallel MLP on a TPU v5e 2x4",
    reference=_3_13_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_13_wrong(kind_after="AllReduce"), _3_13_wrong()):
            "Out is to be split like In, [B, D_XY], so its partial sums need only a ReduceScatter, "
            "not an AllReduce",
        slip(_3_13_wrong(axes="X"), _3_13_wrong()):
            "either the collectives ran over one axis (they run over X and Y together, with the links of both), "
            "or you moved all of V over a chip's links (each chip already holds its own share of V)",
        slip(_3_13_wrong(axes="Y"), _3_13_wrong()):
            "the collectives run over X and Y together, with the links of both axes, not over one",
        slip(_3_13_wrong(kind_after=None), _3_13_wrong()):
            "either a collective is missing (the second matmul contracts F, which both operands split, and "
            "leaves partial sums of Out to combine) or the bandwidth is off (this slice has no wraparound: "
            "a chip receives over each link one way)",
        slip(_3_13_wrong() * 2, _3_13_wrong()):
            "the activations are bf16: check the bytes per value",
    },
    book=("Q7",),
))


# 3.14 ------------------------------------------------------------------------

_3_14 = dict(sizes={"N": 2048, "M": 28672, "K": 6144}, mesh={"X": 16},
             gather="A[N, M_X] · B[M, K] -> C[N, K]", scatter="A[N, M_X] · B[M_X, K] -> C[N_X, K]")


def _3_14_bytes(collective: str) -> float:
    """Bytes each device sends: gathering A first, or reducing C after (ReduceScatter or AllReduce)."""
    if collective == "gather":
        return plan_matmul(_3_14["gather"], _3_14["sizes"], _3_14["mesh"]).moved_bytes
    target = "C[N_X, K]" if collective == "reducescatter" else "C[N, K]"
    return plan_matmul(f"A[N, M_X] · B[M_X, K] -> {target}", _3_14["sizes"], _3_14["mesh"]).moved_bytes


def _3_14_values(scatter="reducescatter", share=1.0) -> np.ndarray:
    """[gather first, combine after] bytes sent per device; `share` scales both (a slip in the fraction sent)."""
    return np.array([_3_14_bytes("gather"), _3_14_bytes(scatter)]) * share


def _3_14_reference() -> Derivation:
    """Reference for 3.14: what each device sends in the one collective of each plan."""
    parts = []
    for key, symbol, array in (("gather", "S_gather", "A"), ("scatter", "S_scatter", "C")):
        (step,) = plan_matmul(_3_14[key], _3_14["sizes"], _3_14["mesh"]).steps
        n = step.group
        parts.append(Derivation(symbol, f"V_{array} · (n − 1)/n", f"{q(step.nbytes, 'B')} · {n - 1}/{n}",
                                step.moved_bytes, "B",
                                where=(f"V_{array}: the bytes of {step.before} ({step.kind} over X)"
                                       + ("; n: the devices along X" if not parts else ""),)))
    return _listed("[bytes sent: gather first, combine after]", parts, "B")


_X_3_14 = _3_14["mesh"]["X"]

register(Exercise(
    id="3.14",
    title="Gather first or combine partial sums after: the bytes each device sends",
    reference=_3_14_reference,
    unit="B",
    mistakes={
        slip(_3_14_values("allreduce"), _3_14_values()):
            "you reduced into a replicated C with an AllReduce; the result may stay sharded over N, which a "
            "ReduceScatter gives for less",
        slip(_3_14_values(share=_X_3_14 / (_X_3_14 - 1)), _3_14_values()):
            "a device never sends the share of the array it keeps (or already holds)",
        slip(_3_14_values(share=1 / (_X_3_14 - 1)), _3_14_values()):
            "that is one device's own block; over the whole collective it sends the blocks of every other "
            "device's share too",
    },
    book=("Q9",),
))


# 3.15 and 3.16 ---------------------------------------------------------------

_Q10 = dict(N=3072, dtype="bf16", one_way_ring=12, bidirectional_ring=8)
_Q10_BYTES = _Q10["N"] ** 2 * bytes_per_value(_Q10["dtype"])


def _q10(bidirectional: bool, alltoall_as_gather=False, halve_both=False) -> np.ndarray:
    V, D = _Q10_BYTES, _Q10["bidirectional_ring" if bidirectional else "one_way_ring"]
    gather = ring_link_bytes(V, D, collective="allgather", bidirectional=bidirectional)
    if alltoall_as_gather:
        return np.array([gather, gather])
    if halve_both:
        one_way = ring_link_bytes(V, D, collective="alltoall", bidirectional=False)
        return np.array([gather, one_way / 2])
    return np.array([gather, ring_link_bytes(V, D, collective="alltoall", bidirectional=bidirectional)])


def _q10_reference(bidirectional: bool) -> Derivation:
    D = _Q10["bidirectional_ring" if bidirectional else "one_way_ring"]
    parts = tuple(explain(ring_link_bytes, _Q10_BYTES, D, collective=c, bidirectional=bidirectional)
                  for c in ("allgather", "alltoall"))
    return _listed("[AllGather, AllToAll]", parts, "B")


def _q10_one_way_on(D: int) -> np.ndarray:
    """The one-way loads on a ring of `D` devices (the bidirectional question's ring, one way)."""
    return np.array([ring_link_bytes(_Q10_BYTES, D, collective=c, bidirectional=False) for c in ("allgather", "alltoall")])


register(Exercise(
    id="3.15",
    title="Bytes per link on a one-way ring: AllGather against AllToAll",
    reference=lambda: _q10_reference(False),
    unit="B",
    involves=frozenset(),
    mistakes={
        slip(_q10(False, alltoall_as_gather=True), _q10(False)):
            "in an AllToAll each block goes only as far as its own destination, not round the whole ring "
            "as a gathered shard does",
        slip(_q10(False) * _Q10["one_way_ring"] / (_Q10["one_way_ring"] - 1), _q10(False)):
            "no shard or block crosses every link of the ring: a shard stops one device short of where it "
            "started, since the device it came from already has it",
    },
    book=("Q10",),
))

register(Exercise(
    id="3.16",
    title="Bytes per link on a bidirectional ring",
    reference=lambda: _q10_reference(True),
    unit="B",
    involves=frozenset(),
    mistakes={
        slip(_q10_one_way_on(_Q10["bidirectional_ring"]), _q10(True)):
            "those are the one-way loads; with links in both directions each link carries less",
        slip(_q10(True, halve_both=True), _q10(True)):
            "for the AllToAll, going the shorter way round does more than split the traffic between the two "
            "directions: no block travels more than halfway round",
    },
    book=("Q10",),
))


# 3.17 ------------------------------------------------------------------------

_V6E_POD = tpu_pod("tpu-v6e")
_3_17 = dict(axes="XY", D=8192, dtype="bf16")


def _3_17_batch(latency_axes=_3_17["axes"], bandwidth_axes=_3_17["axes"], dtype=_3_17["dtype"]) -> int:
    """The largest batch B whose [B, D] gather over the pod takes as long for its hops as for its bytes, or longer;
    a slip in one of the two terms or in the bytes per value changes it."""
    latency = allgather_time_s(0.0, _V6E_POD, axes=latency_axes)
    W = sum(_V6E_POD.axis_bytes_per_s(a) for a in bandwidth_axes)
    return int(np.floor(latency * W / (_3_17["D"] * bytes_per_value(dtype))))


def _3_17_reference() -> Derivation:
    """Reference for 3.17: the array whose gather over both axes takes as long as its hops, in tokens of [B, D]."""
    hops = explain(allgather_time_s, 0.0, _V6E_POD, axes=_3_17["axes"])
    W = sum(_V6E_POD.axis_bytes_per_s(a) for a in _3_17["axes"])
    crossover = Derivation("V*", "T_latency · ΣW", f"{q(hops.value, 's')} · {q(W, 'B/s')}", hops.value * W, "B",
                           (hops,), where=("T_latency: the gather's hops alone (an empty array); ΣW: a chip's "
                                           "bidirectional bandwidth over both axes together",))
    assert abs(crossover.value / latency_bound_bytes(_V6E_POD, axes=_3_17["axes"]) - 1) < 1e-9
    b = bytes_per_value(_3_17["dtype"])
    value = _3_17_batch()
    assert value == int(np.floor(crossover.value / (_3_17["D"] * b)))
    return define(Derivation("B_max", "⌊V* / (D · b)⌋", f"⌊{q(crossover.value, 'B')} / ({_3_17['D']} · {b:g})⌋",
                             value, "tokens", (crossover,),
                             where=("V*: the gathered array whose bytes take as long as the hops; D: the activations' "
                                    "width; b: bytes per bf16 value",)), _N_AXES)


# Summing only one of the two terms over both axes, or taking 4-byte values, gives the same batch: one text
# names them all.
assert _3_17_batch(latency_axes="X") == _3_17_batch(bandwidth_axes="X") == _3_17_batch(dtype="f32")

register(Exercise(
    id="3.17",
    title="Below what batch an AllGather of activations over a whole TPU v6e pod is latency-bound",
    reference=_3_17_reference,
    unit="tokens",
    integer=True,
    involves=frozenset(),
    mistakes={
        slip(_3_17_batch(latency_axes="X", bandwidth_axes="X"), _3_17_batch()):
            "that is the crossover of a gather along one axis; this one runs over X and Y together, so the hops "
            "of both rings add up and so do the bandwidths of both axes",
        slip(_3_17_batch(latency_axes="X"), _3_17_batch()):
            "either one of the two terms is short (over both axes the hops of both rings add up, and so do the "
            "bandwidths of both axes) or the bytes per value are off (the activations are bf16)",
        slip(_3_17_batch(dtype="int8"), _3_17_batch()):
            "the activations are bf16: check the bytes per value",
    },
))


# 3.18 ------------------------------------------------------------------------

_3_18 = ("A[I_XY, J_Z]", "A[I_Z, J]{U_XY}", "A[I_XY, J_Y]", "A[I, J_XZ]{U_Y}")
_3_18_MESH = {"X": 4, "Y": 2, "Z": 2}


def _3_18_reference() -> str:
    refused = []
    for text in _3_18:
        try:
            sharding(text, _3_18_MESH)
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
    reason="A mesh axis splits at most one dimension of an array (or holds its partial sums): in A[I_XY, J_Y] "
           "the devices along Y would each need a different block of I and of J at once, which no layout gives. "
           "Partial sums over axes that split nothing, as in A[I_Z, J]{U_XY}, are allowed.",
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
    involves=frozenset(),
    mistakes={
        slip(_v5e_allgather_time(1e8, 16, True) * 2, _v5e_allgather_time(1e8, 16, True)):
            "round a ring with wraparound, either the bandwidth is off (shards go both ways, so a chip receives "
            "over both directions of its links) or the hops are (the farthest shard is only halfway round)",
        slip(_one_way(1e8, tpu_slice((4, 1), "tpu-v5e")), _v5e_allgather_time(1e8, 4, False)):
            "along a line the end chip already holds its own shard: its link brings it only the others'",
        slip(allgather_time_s(1e8, tpu_pod("tpu-v5e"), axes="X"), _v5e_allgather_time(1e8, 4, False)):
            "without wraparound the axis is a line, not a ring: the end chip receives over one link, one way",
        slip(_v5e_allgather_time(1e8, 4, False) / 2, _v5e_allgather_time(1e8, 4, False)):
            "the bandwidth is off: the end chip of a line receives over one link, one way, while a chip of a "
            "ring receives over both directions of its links",
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


# 3.20 ------------------------------------------------------------------------

_V5P_16x8x8 = tpu_slice((16, 8, 8), "tpu-v5p")            # every axis a ring: whole 4x4x4 cubes
_3_20 = dict(T=2**20, D=7168, dtype="bf16")
_3_20_V = _3_20["T"] * _3_20["D"] * bytes_per_value(_3_20["dtype"])


def _3_20_time(cut_axis="X", links_per_ring=2, per_direction="one-way", crossing=1 / 4) -> float:
    """An AllToAll's bandwidth-bound time by the cut: `crossing` · V bytes each way over the links that cross a
    cut across `cut_axis` (links_per_ring per ring along it), each carrying one direction's bandwidth (or, as a
    slip, both)."""
    N = _V5P_16x8x8.num_chips
    links = links_per_ring * N // _V5P_16x8x8.mesh[cut_axis]
    W = (_V5P_16x8x8.spec.ici_link_bytes_per_s_one_way if per_direction == "one-way"
         else _V5P_16x8x8.spec.ici_link_bytes_per_s_bidirectional)
    return crossing * _3_20_V / (links * W)


def _3_20_reference() -> Derivation:
    """Reference for 3.20: the AllToAll over the whole slice, the book's V · max(n) / (4 · N · W)."""
    derivation = explain(alltoall_time_s, _3_20_V, _V5P_16x8x8, axes="XYZ")
    assert abs(derivation.value / _3_20_time() - 1) < 1e-12    # the cut across X, counted link by link
    return derivation


register(Exercise(
    id="3.20",
    title="An AllToAll over a whole TPU v5p slice, by the cut",
    reference=_3_20_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_20_time(cut_axis="Y"), _3_20_time()):
            "either the cut runs across a shorter axis (the one that binds runs across the longest axis, which "
            "the fewest links cross) or each crossing link was given both directions' bandwidth (each direction "
            "of a link carries only the traffic going that way)",
        slip(_3_20_time(links_per_ring=1), _3_20_time()):
            "either the cut crosses each ring only once (a plane across a ring with wraparound cuts it twice, "
            "in the middle and at the wraparound) or too many bytes cross it (each chip sends the other half "
            "only half of its data)",
        slip(_3_20_time(crossing=1), _3_20_time()):
            "not all of the array crosses the cut: each chip keeps what is bound for its own half, and each "
            "direction carries only what one half sends the other",
        slip(alltoall_time_s(_3_20_V, _V5P_16x8x8, axes="X"), _3_20_time()):
            "that is the AllToAll round a single ring; over the whole slice the cut crosses every ring that "
            "runs along the axis it cuts",
        slip(allgather_time_s(_3_20_V, _V5P_16x8x8, axes="XYZ"), _3_20_time()):
            "that is an AllGather over the three axes: in an AllToAll each piece goes only to its own "
            "destination, so much less crosses the slice",
    },
))


# 3.21 ------------------------------------------------------------------------

_V5E_POD = tpu_pod("tpu-v5e")                             # its X axis: a ring of 16
_3_21 = dict(expr="A[I_X, J] · B[J, K_X]", sizes={"I": 16384, "J": 8192, "K": 16384})


def _3_21_blocks():
    """(n, t_c, t_x): the ring's chips, one block's product and one block's hop, one way (s)."""
    plan = plan_matmul(_3_21["expr"], _3_21["sizes"], _V5E_POD)
    (gather,) = plan.steps                               # AllGather_X of A: its blocks go round the ring
    n = _V5E_POD.mesh["X"]
    return n, plan.t_math_s / n, gather.nbytes / n / _V5E_POD.spec.ici_link_bytes_per_s_one_way


def _3_21_time(overlap=True, both_ways=False, blocks_moved=None, block_compute=None) -> float:
    """The collective matmul's time, one way round the ring; each option is a slip."""
    n, t_c, t_x = _3_21_blocks()
    t_x = t_x / 2 if both_ways else t_x
    t_c = t_c * n if block_compute == "whole" else t_c
    moved = n - 1 if blocks_moved is None else blocks_moved
    if not overlap:
        return moved * t_x + n * t_c
    return moved * max(t_c, t_x) + t_c


def _3_21_reference() -> Derivation:
    """Reference for 3.21: (n − 1) steps of a block's hop or product, whichever is longer, then the last product."""
    plan = plan_matmul(_3_21["expr"], _3_21["sizes"], _V5E_POD)
    (gather,) = plan.steps
    n, t_c, t_x = _3_21_blocks()
    W = _V5E_POD.spec.ici_link_bytes_per_s_one_way
    math_step = Derivation("t_c", "T_math / n", f"{q(plan.t_math_s, 's')} / {n}", t_c, "s",
                           where=("T_math: the chip's whole product A[I, J] · B[J, K/n] at the peak bf16 rate "
                                  "(plan_matmul); n: the chips of the ring",))
    hop_step = Derivation("t_x", "V / n / W", f"{q(gather.nbytes, 'B')} / {n} / {q(W, 'B/s')}", t_x, "s",
                          where=("V: the gathered A; W: one direction of a link",))
    value = _3_21_time()
    assert abs(value - ((n - 1) * max(t_c, t_x) + t_c)) < 1e-15
    return Derivation("T", "(n − 1) · max(t_c, t_x) + t_c",
                      f"{n - 1} · max({q(t_c, 's')}, {q(t_x, 's')}) + {q(t_c, 's')}", value, "s",
                      (math_step, hop_step))


register(Exercise(
    id="3.21",
    title="A gather hidden behind its matmul on a TPU v5e pod's axis",
    reference=_3_21_reference,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_3_21_time(overlap=False), _3_21_time()):
            "that is the time without overlap, all the transfers and then all the products: here each block is "
            "multiplied while the next one travels",
        slip(_3_21_time(both_ways=True), _3_21_time()):
            "the blocks go one way round the ring: each step moves a block over one direction of one link",
        slip(_3_21_time(blocks_moved=_V5E_POD.mesh["X"]), _3_21_time()):
            "a chip's own block never crosses a link: only the other chips' blocks arrive, one per step",
        slip(_3_21_time(block_compute="whole"), _3_21_time()):
            "a block's product is one n-th of the chip's arithmetic: one block of A's rows times the chip's own "
            "columns of B",
    },
))
