"""Planning a sharded matmul (chapter 3): which of the book's four cases, which collectives, what they cost.

Write the matmul in the book's notation, ``"A[I_X, J] · B[J, K_Y]"`` (``*`` or
``@`` work too): a dimension named in both operands is contracted. Optionally
ask for the result's sharding with ``"-> C[I, K]"``. :func:`plan_matmul` gives a
:class:`MatmulPlan`: the cases that apply, the collectives in order (each a
:class:`Collective` with its axes, the shardings before and after, the bytes it
moves per device and its time on the topology), the result's sharding, and the
other strategies with their costs. The four cases:

1. no contracting dimension sharded: multiply the local blocks, no communication;
2. one operand's contracting dimension sharded (or the two sharded differently):
   AllGather it first, or (when the other operand leaves that axis free) slice
   the other operand locally, multiply, and AllReduce or ReduceScatter after;
3. both sharded on the contracting dimension along the same axes: multiply
   locally into partial sums ``{U_X}``, then AllReduce (or ReduceScatter);
4. both sharded along the same mesh axis on non-contracting dimensions:
   AllGather one of them first.

Times come from :func:`allgather_time_s`, :func:`reducescatter_time_s`,
:func:`allreduce_time_s` and :func:`alltoall_time_s` (``axes=`` on a TPU slice,
``group=`` of the axes' devices on a GPU cluster).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import re
from dataclasses import dataclass, field

from ._collectives import (
    allgather_time_s,
    allreduce_time_s,
    alltoall_time_s,
    collective_permute_time_s,
    reducescatter_time_s,
)
from ._derivation import Derivation, derivable, explain, q
from ._errors import InvalidValueError
from ._sharding import Sharding, _mesh, _parse
from ._specs import bytes_per_value, dtype_name
from ._topology import GpuCluster, TpuSlice
from ._units import fmt
from ._validate import count, shown

_TIME = {"AllGather": allgather_time_s, "ReduceScatter": reducescatter_time_s, "AllReduce": allreduce_time_s,
         "AllToAll": alltoall_time_s, "CollectivePermute": collective_permute_time_s}


@dataclass(frozen=True)
class Collective:
    """One collective of a plan: its `kind` over mesh `axes`, taking `before` to `after`.

    `nbytes` is V as the collective functions take it (the gathered array of an
    AllGather, the unreduced array of a ReduceScatter or AllReduce, the whole
    array of an AllToAll, each over the devices taking part); `moved_bytes` is
    what each device sends (and receives): V·(N−1)/N for AllGather and
    ReduceScatter, twice that for AllReduce, V·(N−1)/N² for AllToAll, over N
    devices; a CollectivePermute's `nbytes` and `moved_bytes` are both the block
    each device sends (straight to the one device that needs it). `time_s` is None on a bare mesh. `shape_before` and `shape_after` are
    the per-device shapes (what a compiled program's collective takes and gives).

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> from scalelib import plan_reshard
        >>> print(plan_reshard("A[I_X, J] -> A[I, J]", {"I": 1024, "J": 1024}, {"X": 4}).steps[0])
        AllGather_X: A[I_X, J] → A[I, J], V = 2.1 MB, 1.57 MB sent per device
    """

    kind: str
    axes: tuple[str, ...]
    before: Sharding
    after: Sharding
    group: int
    nbytes: float
    moved_bytes: float
    time_s: float | None
    shape_before: tuple[int, ...]
    shape_after: tuple[int, ...]
    derivation: Derivation | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        text = (f"{self.kind}_{''.join(self.axes) if all(len(a) == 1 for a in self.axes) else ','.join(self.axes)}: "
                f"{self.before} → {self.after}, V = {fmt(self.nbytes, 'B')}, "
                f"{fmt(self.moved_bytes, 'B')} sent per device")
        return text + (f", {fmt(self.time_s, 's')}" if self.time_s is not None else "")


def _topology(topology, mesh):
    """(mesh dict, topology or None) from a TpuSlice, a GpuCluster with `mesh`, or a bare mesh dict."""
    if isinstance(topology, TpuSlice):
        if mesh is not None:
            raise InvalidValueError("`mesh`: a TPU slice names its own axes (X, Y, Z); leave `mesh` out")
        return topology.mesh, topology
    if isinstance(topology, GpuCluster):
        if mesh is None:
            raise InvalidValueError("`mesh` is needed with a GPU cluster: name its axes, e.g. mesh={'X': 8}")
        m = _mesh(mesh)
        if math.prod(m.values()) > topology.num_gpus:
            raise InvalidValueError(f"`mesh` {m} has {math.prod(m.values())} devices, more than the "
                                    f"{topology.num_gpus} GPUs of {topology!r}")
        return m, topology
    if isinstance(topology, dict):
        if mesh is not None:
            raise InvalidValueError("`mesh`: the topology is already a bare mesh; leave `mesh` out")
        return _mesh(topology, "topology"), None
    raise InvalidValueError(f"`topology` must be a TpuSlice, a GpuCluster (with mesh=...) or a bare mesh such as "
                            f"{{'X': 8, 'Y': 4}} (no times), got {shown(topology)}")


def _step(kind, axes, before, after, sizes, topo, dtype) -> Collective:
    b = bytes_per_value(dtype)
    if kind == "CollectivePermute":  # the axes along which some block moves
        pairs = _permute_pairs(before, after)
        axes = tuple(a for a in before.mesh if any(src[a] != dst[a] for src, dst in pairs))
    group = math.prod(before.mesh[a] for a in axes)
    shape_before, shape_after = _block(before, sizes), _block(after, sizes)
    local_before = math.prod(shape_before) * b
    local_after = math.prod(shape_after) * b
    if kind == "AllGather":
        V, moved = local_after, local_after * (group - 1) / group
    elif kind == "ReduceScatter":
        V, moved = local_before, local_before * (group - 1) / group
    elif kind == "AllReduce":
        V, moved = local_before, 2 * local_before * (group - 1) / group
    elif kind == "AllToAll":  # the whole array over the group, each device sending all but its own share of its block
        V, moved = local_before * group, local_before * (group - 1) / group
    else:  # CollectivePermute: each device receives its whole block from the one device holding it
        V, moved = local_after, local_after
    derivation = None
    if topo is not None:
        options = {"axes": axes} if isinstance(topo, TpuSlice) else {"group": group}
        if kind == "CollectivePermute" and isinstance(topo, TpuSlice):
            options["hops"] = _permute_hops(before, after, topo)
        derivation = explain(_TIME[kind], V, topo, **options)
    return Collective(kind, tuple(axes), before, after, group, float(V), float(moved),
                      None if derivation is None else float(derivation.value), shape_before, shape_after, derivation)


def _block_index(s: Sharding, at: dict) -> tuple[int, ...]:
    """Which block of `s` the device at coordinates `at` holds: per dimension, its axes read major first."""
    index = []
    for ax in s.axes:
        i = 0
        for a in ax:
            i = i * s.mesh[a] + at[a]
        index.append(i)
    return tuple(index)


def _permute_pairs(before: Sharding, after: Sharding) -> list[tuple[dict, dict]]:
    """(source, target) coordinates of a collective-permute from `before` to `after` (each block of `after` inside
    one of `before`'s): each device takes its block of `after` from the device holding it under `before` that
    differs from it only along the axes of the dimensions that change (so along the partial sums' axes nothing
    moves)."""
    mesh = before.mesh
    names = list(mesh)
    found = []
    for coords in itertools.product(*(range(mesh[a]) for a in names)):
        at = dict(zip(names, coords))
        want = _block_index(after, at)
        source = dict(at)
        for i, ax, was, now in zip(want, before.axes, before.axes, after.axes):
            i = i * math.prod(before.mesh[a] for a in was) // math.prod(before.mesh[a] for a in now)
            for a in reversed(ax):
                source[a], i = i % mesh[a], i // mesh[a]
        if source != at:
            found.append((source, at))
    return found


def _permute_hops(before: Sharding, after: Sharding, topo: TpuSlice) -> int:
    """The links the farthest block of a collective-permute crosses on `topo`: the shortest way round each
    axis with wraparound, straight along one without."""
    far = 0
    for source, at in _permute_pairs(before, after):
        hops = 0
        for a in source:
            d, n = abs(source[a] - at[a]), topo.mesh[a]
            hops += min(d, n - d) if topo.wraparound[topo.axis_names.index(a)] else d
        far = max(far, hops)
    return max(far, 1)


def _local(s: Sharding, sizes: dict) -> tuple[int, ...]:
    """`s`'s block shape, from sizes that may name other arrays' dimensions too."""
    return s.shard_shape({d: sizes[d] for d in s.dims})


def _block(s: Sharding, sizes: dict) -> tuple[int, ...]:
    """`s`'s block shape, unchecked: for the states between two checked shardings (each of their axes
    a leading part of the source's or the target's, so each splits its dimension evenly)."""
    return tuple(sizes[d] // math.prod(s.mesh[a] for a in ax) for d, ax in zip(s.dims, s.axes))


def _prefix(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _reshard(src: Sharding, dst: Sharding, sizes, topo, dtype) -> tuple[list[Collective], Sharding]:
    """Collectives taking `src` to `dst` (same dimensions), the fewest bytes per device; slicing is free.

    The moves: a ReduceScatter of partial sums onto the next axes a dimension takes, an AllReduce of
    partial sums, one AllGather of the trailing axes of any dimensions (over all of them at once),
    one AllToAll moving the trailing axes of one dimension onto the next axes another takes (over the
    product of those axes), and one CollectivePermute giving each device its block whole from another
    device, onto another arrangement of the axes with as many blocks per dimension (or a multiple). After each, every dimension whose axes lead its target's takes the next
    free ones by slicing its block. A search over these finds the plan moving the fewest bytes per
    device (then the fewest collectives); the state it ends in is checked against `dst`.
    """
    bad = [u for u in dst.unreduced if u not in src.unreduced]
    if bad:
        raise InvalidValueError(f"`expr`: {src} cannot become {dst}: partial sums over {', '.join(bad)} appear "
                                f"from nowhere; drop {{U_{''.join(bad)}}} from the result")
    shape = tuple(sizes[d] for d in src.dims)
    path = _search(src.axes, src.unreduced, dst.axes, dst.unreduced, tuple(src.mesh.items()), shape)
    steps: list[Collective] = []
    state = src._with(axes=_sliced(src.axes, src.unreduced, dst.axes), unreduced=src.unreduced)
    for kind, axes, after_axes, after_unreduced in path:
        after = state._with(axes=after_axes, unreduced=after_unreduced)
        steps.append(_step(kind, axes, state, after, sizes, topo, dtype))
        state = after._with(axes=_sliced(after.axes, after.unreduced, dst.axes))
    if state.axes != dst.axes or set(state.unreduced) != set(dst.unreduced):
        raise RuntimeError(f"scalelib internal error: the plan from {src} to {dst} ends at {state}; "
                           f"please report it")
    _local(dst, sizes)
    return steps, dst


def _sliced(axes, unreduced, target) -> tuple[tuple[str, ...], ...]:
    """`axes` after each dimension whose axes lead its target's took the next free axes: a free slice."""
    axes = list(axes)
    used = {a for ax in axes for a in ax} | set(unreduced)
    changed = True
    while changed:
        changed = False
        for i, (have, want) in enumerate(zip(axes, target)):
            if len(have) < len(want) and want[:len(have)] == have and want[len(have)] not in used:
                axes[i] = have + (want[len(have)],)
                used.add(want[len(have)])
                changed = True
    return tuple(axes)


@functools.lru_cache(maxsize=4096)
def _arrangements(free, mesh_items, counts) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Every way to split each dimension by axes of `free`, in order, into `counts` blocks or a multiple of them
    (no axis twice)."""
    mesh = dict(mesh_items)
    found = []
    for owner in itertools.product(range(len(counts) + 1), repeat=len(free)):  # len(counts): the axis is unused
        on = [[a for a, o in zip(free, owner) if o == d] for d in range(len(counts))]
        if any(math.prod(mesh[a] for a in ax) % n for ax, n in zip(on, counts)):
            continue
        found += itertools.product(*(itertools.permutations(ax) for ax in on))
    return tuple(found)


@functools.lru_cache(maxsize=4096)
def _search(axes, unreduced, target, target_unreduced, mesh_items, shape):
    """The cheapest path of collectives from (`axes`, `unreduced`) to (`target`, `target_unreduced`).

    Each step is (kind, mesh axes, axes after, unreduced after). Costs are exact integers: what a device
    sends, in values times the devices of the mesh (so that every (N − 1)/N is whole).
    """
    mesh = dict(mesh_items)
    total = math.prod(mesh.values())
    size = lambda ax: math.prod(mesh[a] for a in ax)  # noqa: E731
    block = lambda state: math.prod(n // size(ax) for n, ax in zip(shape, state))  # noqa: E731

    def sent(values, group):  # values · (N − 1)/N, times the mesh's devices
        return values * (group - 1) * (total // group)

    def moves(state, unred):
        lead = [_prefix(have, want) for have, want in zip(state, target)]
        ready = [len(p) == len(have) for p, have in zip(lead, state)]  # its axes lead the target's
        pending = [u for u in unred if u not in target_unreduced]
        # partial sums: ReduceScatter onto the next axes a dimension takes; or AllReduce some of them
        for i, want in enumerate(target):
            if not ready[i]:
                continue
            nxt = want[len(state[i]):]
            for k in range(1, len(nxt) + 1):
                if not set(nxt[:k]) <= set(pending):
                    break
                after = tuple(ax + nxt[:k] if j == i else ax for j, ax in enumerate(state))
                yield ("ReduceScatter", nxt[:k], after, tuple(u for u in unred if u not in nxt[:k]),
                       sent(block(state), size(nxt[:k])))
        for k in range(1, len(pending) + 1):
            for group in itertools.combinations(pending, k):
                yield ("AllReduce", group, state, tuple(u for u in unred if u not in group),
                       2 * sent(block(state), size(group)))
        # one AllGather of the trailing axes of any dimensions (never of the axes leading the target's)
        spare = [range(len(have) - len(p) + 1) for p, have in zip(lead, state)]
        for cut in itertools.product(*spare):
            if any(cut):
                after = tuple(have[:len(have) - k] for have, k in zip(state, cut))
                gathered = tuple(a for have, k in zip(state, cut) for a in have[len(have) - k:])
                yield "AllGather", gathered, after, unred, sent(block(after), size(gathered))
        # one AllToAll: the trailing axes of dimension i become the next axes dimension j takes
        for i, have in enumerate(state):
            for k in range(1, len(have) - len(lead[i]) + 1):
                moving = have[len(have) - k:]
                for j, want in enumerate(target):
                    nxt = want[len(state[j]):len(state[j]) + k]
                    if j != i and ready[j] and len(nxt) == k and set(nxt) == set(moving):
                        after = tuple(ax[:len(ax) - k] if m == i else ax + nxt if m == j else ax
                                      for m, ax in enumerate(state))
                        yield "AllToAll", nxt, after, unred, sent(block(state), size(moving))
        # one CollectivePermute: each device takes its block whole, straight from a device holding it, onto any
        # other arrangement of the axes splitting each dimension into as many blocks or a multiple (each new
        # block inside one old one), each dimension's axes leading its target's or led by them (what gathers
        # and slices then finish)
        counts = tuple(size(ax) for ax in state)
        free = tuple(a for a in mesh if mesh[a] > 1 and a not in unred)
        for after in _arrangements(free, mesh_items, counts) if not pending else ():  # partial sums reduce first
            if after != state and all(_prefix(have, want) in (have, want) for have, want in zip(after, target)):
                if all(have[:len(was)] == was for have, was in zip(after, state)):  # nothing would move
                    continue
                moved = {a for have, was in zip(after, state) if have != was for a in was + have}
                changed = tuple(a for a in mesh if a in moved)
                yield "CollectivePermute", changed, after, unred, block(after) * total

    def slice_(state, unred):
        return _sliced(state, unred, target)

    start = (slice_(axes, unreduced), unreduced)
    goal = (target, frozenset(target_unreduced))
    heap = [(0, 0, 0, start, ())]
    best = {start: (0, 0)}
    counter = itertools.count(1)
    while heap:
        cost, n, _, (state, unred), path = heapq.heappop(heap)
        if (state, frozenset(unred)) == goal:
            return path
        if best.get((state, unred), (math.inf, math.inf)) < (cost, n):
            continue
        for kind, group, after, unred_after, price in moves(state, unred):
            nxt = (slice_(after, unred_after), unred_after)
            key = (cost + price, n + 1)
            if key < best.get(nxt, (math.inf, math.inf)):
                best[nxt] = key
                heapq.heappush(heap, (*key, next(counter), nxt, path + ((kind, group, after, unred_after),)))
    raise RuntimeError(f"scalelib internal error: no plan found from {axes}{{U{unreduced}}} to {target}; "
                       f"please report it")


# --- the matmul ------------------------------------------------------------------------------

_ARROW = re.compile(r"->|→")
_TIMES = re.compile(r"\s*(?:·|\*|@)\s*")


def _sizes(sizes, dims) -> dict[str, int]:
    if not isinstance(sizes, dict):
        raise InvalidValueError(f"`sizes` must give each dimension's size, e.g. {{'I': 1024, 'J': 4096, 'K': 8192}}, "
                                f"got {shown(sizes)}")
    missing = [d for d in dims if d not in sizes]
    extra = [k for k in sizes if k not in dims]
    if missing:
        raise InvalidValueError(f"`sizes` has no size for {', '.join(missing)}; give every dimension of the "
                                f"expression ({', '.join(dims)})")
    if extra:
        raise InvalidValueError(f"`sizes` gives {', '.join(map(str, extra))}, which no operand names "
                                f"(the dimensions are {', '.join(dims)})")
    return {d: count("sizes", sizes[d]) for d in dims}


def _operands(expr, mesh):
    if not isinstance(expr, str):
        raise InvalidValueError(f"`expr` must be a matmul such as 'A[I_X, J] · B[J, K_Y]' (optionally "
                                f"'-> C[I_X, K_Y]'), got {shown(expr)}")
    parts = _ARROW.split(expr)
    if len(parts) > 2:
        raise InvalidValueError(f"`expr`: {expr!r} has more than one arrow; write 'A[...] · B[...] -> C[...]'")
    factors = [f for f in _TIMES.split(parts[0].strip())]
    if len(factors) != 2 or not all(f.strip() for f in factors):
        raise InvalidValueError(f"`expr`: {expr!r} must multiply two operands, 'A[I, J] · B[J, K]' (· or * or @)")
    try:
        a, b = (_parse(f, mesh) for f in factors)
        out = _parse(parts[1], mesh) if len(parts) == 2 else None
    except InvalidValueError as err:
        raise InvalidValueError(str(err).replace("`text`", "`expr`", 1)) from None
    for s, which in ((a, "first"), (b, "second")):
        if s.unreduced:
            raise InvalidValueError(f"`expr`: the {which} operand {s} holds partial sums; AllReduce or "
                                    f"ReduceScatter it before multiplying")
    return a, b, out


@dataclass(frozen=True)
class MatmulPlan:
    """How to multiply two sharded matrices: the book's `cases`, the `steps`, the `result`, their costs.

    `strategy` says in words what the plan does; `steps` are the collectives in
    order (before and after the local matmul), `result` the product's sharding;
    `flops` the local matmul's FLOPs per device; `moved_bytes` what each device
    sends in all. On a topology, `t_math_s` = flops / C, `t_comms_s` = the
    collectives' times added, and `time_s` = max(T_math, T_comms) (they may
    overlap); all None on a bare mesh. `options` lists every strategy considered
    (this one first), each with its own costs and result; :attr:`cheapest` picks
    the least communication among those reaching the same result.

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> p = plan_matmul("A[I_X, J] · B[J, K_Y]", {"I": 64, "J": 64, "K": 64}, {"X": 2, "Y": 2})
        >>> p.cases, p.steps, str(p.result)
        ((1,), (), 'C[I_X, K_Y]')
    """

    expr: str
    cases: tuple[int, ...]
    strategy: str
    a: Sharding
    b: Sharding
    steps: tuple[Collective, ...]
    result: Sharding
    flops: float
    moved_bytes: float
    t_math_s: float | None
    t_comms_s: float | None
    time_s: float | None
    options: tuple["MatmulPlan", ...] = field(default=(), repr=False)
    derivation: Derivation | None = field(default=None, repr=False, compare=False)

    @property
    def cheapest(self) -> "MatmulPlan":
        """The option reaching the same result with the least communication (time, or bytes on a bare mesh)."""
        same = [o for o in self.options if o.result == self.result] or [self]
        best = min(same, key=_cost)
        head = self.options[0] if self.options else self
        return self if best is head else best

    def __str__(self) -> str:
        cases = " and ".join(map(str, self.cases))
        lines = [f"{self.expr}: case {cases}; {self.strategy}"]
        lines += [f"  {s}" for s in self.steps]
        lines.append(f"  result {self.result}; {fmt(self.flops, 'FLOP')} per device, {fmt(self.moved_bytes, 'B')} "
                     f"sent per device" + (f"; T_math {fmt(self.t_math_s, 's')}, T_comms {fmt(self.t_comms_s, 's')}"
                                           if self.time_s is not None else ""))
        return "\n".join(lines)


def _cost(plan: MatmulPlan) -> float:
    return plan.t_comms_s if plan.t_comms_s is not None else plan.moved_bytes


def _build(a, b, out, sizes, topo, dtype, *, reduce_after: bool, gather_from: str | None, scatter_onto: str | None,
           batch: tuple[str, ...] = ()):
    """One strategy: input collectives, the local matmul, output collectives."""
    contracted = [d for d in a.dims if d in b.dims and d not in batch]
    words = []
    a_axes = {d: a._axes_of(d) for d in a.dims}
    b_axes = {d: b._axes_of(d) for d in b.dims}
    # a batch dimension: both operands need the same blocks of it. Reshard the smaller operand to the
    # other's axes when they are free on it (a free slice if its own axes lead them), else keep the axes
    # both lead with (gathering the rest)
    smaller_first = ((b_axes, a_axes, b), (a_axes, b_axes, a))
    if math.prod(sizes[d] for d in a.dims) < math.prod(sizes[d] for d in b.dims):
        smaller_first = smaller_first[::-1]
    for d in batch:
        if a_axes[d] == b_axes[d]:
            continue
        free = [(mine, other, mine_s) for mine, other, mine_s in smaller_first
                if not set(other[d]) & {x for e, ax in mine.items() if e != d for x in ax}]
        free.sort(key=lambda c: c[1][d][:len(c[0][d])] != c[0][d])  # a free slice first
        for mine, other, mine_s in free[:1]:
            how = "slice" if other[d][:len(mine[d])] == mine[d] else "reshard"
            mine[d] = other[d]
            words.append(f"{how} {mine_s.name or 'an operand'} along {d} to match the other"
                         + (" locally (no communication)" if how == "slice" else ""))
        if not free:
            common = _prefix(a_axes[d], b_axes[d])
            a_axes[d], b_axes[d] = common, common
    for j in contracted:
        common = _prefix(a_axes[j], b_axes[j])
        if a_axes[j] == b_axes[j]:
            continue
        if reduce_after:
            # slice the operand with fewer axes on j to match the other, if the extra axes are free there
            for mine, other, other_s in ((a_axes, b_axes, b), (b_axes, a_axes, a)):
                extra = mine[j][len(common):]
                if other[j] == common and extra and not (set(extra) & other_s._used):
                    other[j] = mine[j]
                    words.append(f"slice {other_s.name or 'the other operand'} along {j} locally (no communication)")
                    break
        common = _prefix(a_axes[j], b_axes[j])
        a_axes[j], b_axes[j] = common, common
    # case 4: an axis splitting a kept dimension of both operands
    a_kept = [d for d in a.dims if d not in contracted and d not in batch]
    b_kept = [d for d in b.dims if d not in contracted and d not in batch]
    clash = {x for d in a_kept for x in a_axes[d]} & {x for d in b_kept for x in b_axes[d]}
    if clash:
        side = a_axes if gather_from == "A" else b_axes
        for d in (a_kept if gather_from == "A" else b_kept):
            side[d] = tuple(x for x in side[d] if x not in clash)
    if out is not None and set(out.dims) == set(a_kept + b_kept + list(batch)):
        # a result asked narrower than the operands give: narrow the operand first, for free, and do less work
        for d, side, s in [(d, a_axes, a) for d in a_kept] + [(d, b_axes, b) for d in b_kept]:
            want, have = out._axes_of(d), side[d]
            busy = {x for axes in (a_axes, b_axes) for ax in axes.values() for x in ax}
            if len(want) > len(have) and want[:len(have)] == have and not set(want[len(have):]) & busy:
                side[d] = want
                words.append(f"slice {s.name or 'an operand'} along {d} locally (no communication)")
    steps: list[Collective] = []
    ready = []
    for s, axes in ((a, a_axes), (b, b_axes)):
        target = s._with(axes=tuple(axes[d] for d in s.dims))
        # dropping an axis the operand uses is a gather; adding one it does not use is a free slice
        st, target = _reshard(s, target, sizes, topo, dtype)
        steps += st
        ready.append(target)
    a2, b2 = ready
    unreduced = tuple(x for j in contracted for x in a2._axes_of(j))
    dims = tuple(out.dims) if out is not None else tuple(a_kept + b_kept)
    kept_axes = {**{d: a2._axes_of(d) for d in a_kept + list(batch)}, **{d: b2._axes_of(d) for d in b_kept}}
    local = Sharding(dims, tuple(kept_axes[d] for d in dims), a.mesh, unreduced, out.name if out is not None else "C")
    _local(local, sizes)
    flops = 2.0 * math.prod(_local(a2, sizes)) * math.prod(_local(b2, sizes)[i] for i, d in enumerate(b2.dims)
                                                          if d not in contracted and d not in batch)
    if out is not None:
        target = out
    elif scatter_onto is not None:
        target = local._with(axes=tuple(ax + (unreduced if d == scatter_onto else ()) for d, ax in
                                        zip(local.dims, local.axes)), unreduced=())
    else:
        target = local._with(unreduced=())
    st, result = _reshard(local, target, sizes, topo, dtype)
    steps += st
    if not steps:
        words.append("multiply the local blocks: no communication")
    else:
        words.append(", then ".join(f"{s.kind}_{''.join(s.axes)} {s.before}" for s in steps))
    return steps, result, flops, "; ".join(words)


def _plan(a, b, out, sizes, topo, dtype, **choice) -> MatmulPlan:
    steps, result, flops, strategy = _build(a, b, out, sizes, topo, dtype, **choice)
    moved = sum(s.moved_bytes for s in steps)
    t_math = t_comms = time = None
    derivation = None
    if topo is not None:
        C = explain(topo.spec.peak_flops_per_s, dtype=dtype)
        t_math = flops / C.value
        t_comms = sum(s.time_s for s in steps)
        time = max(t_math, t_comms)
        parts = [s.derivation for s in steps]
        derivation = Derivation(
            "T_matmul", "max(T_math, T_comms) = max(FLOPs per device / C, Σ T_collective)",
            lambda: f"max({q(flops, 'FLOP')} / {q(C.value, 'FLOP/s')}, "
                    f"{' + '.join(q(s.time_s, 's') for s in steps) or '0'})",
            time, "s", tuple(parts),
            where=(f"FLOPs per device: 2 · the local operands' sizes ({dtype_name(dtype)}); "
                   f"T_collective: each collective's time",))
    else:
        derivation = Derivation("bytes sent per device", "Σ over the collectives",
                                lambda: " + ".join(q(s.moved_bytes, "B") for s in steps) if len(steps) > 1 else "",
                                moved, "B")
    cases = _cases(a, b, choice.get("batch", ()))
    expr = f"{a} · {b} → {result}"
    return MatmulPlan(expr, cases, strategy, a, b, tuple(steps), result, flops, moved, t_math, t_comms, time,
                      (), derivation)


def _cases(a: Sharding, b: Sharding, batch: tuple[str, ...] = ()) -> tuple[int, ...]:
    contracted = [d for d in a.dims if d in b.dims and d not in batch]
    found = {2 for d in batch if a._axes_of(d) != b._axes_of(d)}  # a batch dimension sharded differently
    for j in contracted:
        aj, bj = a._axes_of(j), b._axes_of(j)
        if aj != bj:
            found.add(2)
            if _prefix(aj, bj):
                found.add(3)
        elif aj:
            found.add(3)
    kept_a = {x for d in a.dims if d not in contracted and d not in batch for x in a._axes_of(d)}
    kept_b = {x for d in b.dims if d not in contracted and d not in batch for x in b._axes_of(d)}
    if kept_a & kept_b:
        found.add(4)
    return tuple(sorted(found)) or (1,)


@derivable
def plan_matmul(expr, sizes, topology, *, dtype="bf16", mesh=None):
    """Plan a sharded matmul: which of the book's four cases applies, which collectives it needs, what they cost.

    `expr` is the matmul in the book's notation, ``"A[I_X, J] · B[J, K_Y]"``; the
    dimensions named in both operands are contracted. Add ``"-> C[...]"`` to ask
    for the result's sharding (collectives after the matmul reach it; narrowing
    a block is free). Without it the result keeps the operands' kept-dimension
    shardings, fully reduced. A dimension named in both operands and in the
    result is a batch dimension (``"A[B_X, I, J] · B[B_X, J, K] -> C[B_X, I, K]"``):
    sharded alike on both it needs no communication; sharded differently, one
    operand is resharded to the other's axes (a free slice where it can be) and
    the case is 2. The plan follows the book's rules: AllGather an
    operand whose contracting dimension is sharded differently (case 2), AllReduce
    partial sums (case 3), AllGather the operand whose gather moves fewer bytes
    when both split a kept dimension along one axis (case 4). `options` gives
    every alternative with its cost: in case 2 the local matmul with an AllReduce
    or ReduceScatter after (the "AllGather first versus reduce after" choice), in
    case 3 a ReduceScatter onto each result dimension, in case 4 gathering the
    other operand.

    Formula:
        T = max(T_math, T_comms), T_math = FLOPs per device / C, T_comms = Σ T_collective

    Args:
        expr: e.g. ``"A[I_X, J] · B[J, K_Y]"`` or ``"A[I, J_X] · B[J_X, K] -> C[I, K_X]"`` (· or * or @),
            or batched, ``"A[B_X, I, J] · B[B_X, J, K] -> C[B_X, I, K]"``.
        sizes: each dimension's global size, ``{"I": 1024, "J": 4096, "K": 8192}``.
        topology: a :class:`TpuSlice` (its axes are the mesh), a :class:`GpuCluster`
            (with `mesh`), or a bare mesh ``{"X": 8, "Y": 4}`` (no times).
        dtype: the values' type (sizes in bytes, and C for T_math).
        mesh: the mesh's named axes on a GPU cluster, ``{"X": 8}``; a collective
            over axes runs over a group of their sizes' product.

    Returns:
        A :class:`MatmulPlan` (times in s, bytes in B); ``explain(plan_matmul, ...)``
        derives its `time_s` (its bytes sent per device, on a bare mesh).

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> from scalelib import tpu_slice
        >>> p = plan_matmul("A[I, J_X] · B[J_X, K]", {"I": 1024, "J": 4096, "K": 8192}, tpu_slice((4, 4, 4), "tpu-v4p"))
        >>> p.cases, [str(s) for s in p.steps]
        ((3,), ['AllReduce_X: C[I, K]{U_X} → C[I, K], V = 16.8 MB, 25.2 MB sent per device, 373 µs'])
    """
    mesh_, topo = _topology(topology, mesh)
    bytes_per_value(dtype)  # checks the dtype
    a, b, out = _operands(expr, mesh_)
    batch = tuple(d for d in a.dims if d in b.dims and out is not None and d in out.dims)
    contracted = [d for d in a.dims if d in b.dims and d not in batch]
    if not contracted and batch and sorted(out.dims) != sorted(dict.fromkeys(a.dims + b.dims)):
        batch, contracted = (), list(batch)  # not a batched einsum: the result's dimensions are checked below
    if not contracted and batch:
        raise InvalidValueError(f"`expr`: the result {out} keeps every dimension {a} and {b} share "
                                f"({', '.join(batch)}), so nothing is contracted; leave the contracting dimension "
                                f"out of the result, e.g. 'A[B, I, J] · B[B, J, K] -> C[B, I, K]'")
    if not contracted:
        raise InvalidValueError(f"`expr`: {a} and {b} share no dimension, so nothing is contracted; name the "
                                f"contracting dimension the same in both, e.g. 'A[I, J] · B[J, K]'")
    if out is not None and out.unreduced:
        raise InvalidValueError(f"`expr`: ask for a result without partial sums; {out} keeps {{U_...}}")
    kept = [d for d in a.dims if d not in contracted] + [d for d in b.dims if d not in contracted and d not in batch]
    if out is not None and sorted(out.dims) != sorted(kept):
        raise InvalidValueError(f"`expr`: the result {out} must have the dimensions {', '.join(kept)} "
                                f"(those not contracted), got {', '.join(out.dims)}")
    dims = list(dict.fromkeys(list(a.dims) + list(b.dims)))
    sizes = _sizes(sizes, dims)
    _local(a, sizes), _local(b, sizes)
    cases = _cases(a, b, batch)
    # the book's rule first (gather before), then the local matmul with a reduction after; in case 4
    # either operand may be gathered; without a requested result, ReduceScatter onto each dimension too
    options: list[tuple[MatmulPlan, bool]] = []
    seen = set()

    def consider(choice, book):
        try:
            plan = _plan(a, b, out, sizes, topo, dtype, **choice)
        except InvalidValueError:
            if book and choice["gather_from"] in (None, "A"):
                raise
            return None
        if (plan.steps, plan.result) not in seen:
            seen.add((plan.steps, plan.result))
            options.append((plan, book))
        return plan

    for reduce_after in (False, True):
        for g in (["A", "B"] if 4 in cases else [None]):
            choice = dict(reduce_after=reduce_after, gather_from=g, scatter_onto=None, batch=batch)
            plan = consider(choice, not reduce_after)
            if plan is not None and out is None and any(st.before.unreduced for st in plan.steps):
                for d in plan.result.dims:
                    consider({**choice, "scatter_onto": d}, False)
    headline = min((p for p, book in options if book), key=_cost)
    options = [p for p, _ in options]
    ordered = (headline,) + tuple(o for o in options if o is not headline)
    final = MatmulPlan(headline.expr, cases, headline.strategy, a, b, headline.steps, headline.result, headline.flops,
                       headline.moved_bytes, headline.t_math_s, headline.t_comms_s, headline.time_s, ordered,
                       headline.derivation)
    return Derivation(final.derivation.symbol, final.derivation.formula, final.derivation.substituted,
                      final.derivation.value, final.derivation.unit, final.derivation.steps,
                      final.derivation.where, returns=final)


@dataclass(frozen=True)
class Reshard:
    """The collectives taking an array from one sharding to another, with their total cost.

    `steps` are :class:`Collective` records in order; `moved_bytes` what each
    device sends in all; `time_s` their times added (None on a bare mesh).

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> r = plan_reshard("A[I, J]{U_X} -> A[I_X, J]", {"I": 8, "J": 8}, {"X": 2})
        >>> [s.kind for s in r.steps]
        ['ReduceScatter']
    """

    source: Sharding
    target: Sharding
    steps: tuple[Collective, ...]
    moved_bytes: float
    time_s: float | None

    def __str__(self) -> str:
        return "\n".join([f"{self.source} → {self.target}"] + [f"  {s}" for s in self.steps])


@derivable
def plan_reshard(expr, sizes, topology, *, dtype="bf16", mesh=None):
    """The collectives that change an array's sharding: ``"A[I_X, J] -> A[I, J]"`` is an AllGather over X.

    Partial sums are ReduceScattered onto the dimension that takes their axis
    (AllReduced if none does); axes leaving one dimension for another are one
    AllToAll over their product when they are the next to split that dimension;
    axes dropped are one AllGather over all of them; blocks that only change
    devices (``A[I_XY, J] -> A[I_YX, J]``: the same blocks, the axes in another
    order) are one CollectivePermute, each device sending its block whole to the
    device that needs it (:func:`collective_permute_time_s`); an axis added only
    narrows each device's block, which needs no communication. Of the sequences of these
    that reach the target, the plan is the one sending the fewest bytes per
    device (then the fewest collectives), and it always ends at the target.

    Formula:
        T = Σ T_collective over the steps

    Args:
        expr: ``"SOURCE -> TARGET"`` in the book's notation, the same dimensions on both sides.
        sizes: each dimension's global size.
        topology: a :class:`TpuSlice`, a :class:`GpuCluster` (with `mesh`), or a bare mesh (no times).
        dtype: the values' type.
        mesh: the mesh's named axes on a GPU cluster.

    Returns:
        A :class:`Reshard` (times in s, bytes in B); ``explain(plan_reshard, ...)``
        derives its `time_s` (its bytes sent per device, on a bare mesh).

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> v4p = tpu_slice((4, 4, 4), "tpu-v4p")
        >>> fmt(plan_reshard("[B_X, D_Y] -> [B, D_Y]", {"B": 1024, "D": 4096}, v4p).time_s, "s")
        '23.3 µs'
    """
    mesh_, topo = _topology(topology, mesh)
    bytes_per_value(dtype)
    if not isinstance(expr, str) or len(_ARROW.split(expr)) != 2:
        raise InvalidValueError(f"`expr` must be 'SOURCE -> TARGET', e.g. 'A[I_X, J] -> A[I, J]', got {shown(expr)}")
    try:
        src, dst = (_parse(t, mesh_) for t in _ARROW.split(expr))
    except InvalidValueError as err:
        raise InvalidValueError(str(err).replace("`text`", "`expr`", 1)) from None
    if src.dims != dst.dims:
        raise InvalidValueError(f"`expr`: {src} and {dst} must name the same dimensions in the same order")
    sizes = _sizes(sizes, list(src.dims))
    _local(src, sizes)
    steps, _ = _reshard(src, dst, sizes, topo, dtype)
    moved = sum(s.moved_bytes for s in steps)
    if topo is not None:
        time = sum(s.time_s for s in steps)
        d = Derivation("T_reshard", "Σ T_collective", lambda: " + ".join(q(s.time_s, "s") for s in steps) or "0",
                       float(time), "s", tuple(s.derivation for s in steps))
    else:
        time = None
        d = Derivation("bytes sent per device", "Σ over the collectives",
                       lambda: " + ".join(q(s.moved_bytes, "B") for s in steps) if len(steps) > 1 else "",
                       float(moved), "B")
    result = Reshard(src, dst, tuple(steps), float(moved), None if time is None else float(time))
    return Derivation(d.symbol, d.formula, d.substituted, d.value, d.unit, d.steps, d.where, returns=result)
