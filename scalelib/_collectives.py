"""Collective costs (chapters 2, 3 and 12): one function per collective.

Every function takes `nbytes`, the size V of the whole array the collective is
about (the gathered output of an AllGather, the unreduced input of a
ReduceScatter or AllReduce, the array being transposed by an AllToAll), the
topology, and which part of it takes part: `axes` of a :class:`TpuSlice` (``"X"``, ``"XY"``, ``("X", "Y")``), or a
`group` of GPUs of a :class:`GpuCluster`.

On a TPU slice (How to Scale Your Model, ch. 3), an axis of n chips is a ring
when it has wraparound links and a line when it does not. With W the bandwidth
a chip has along the axis (bidirectional per link on a ring, one way on a line),
T_hop ≈ 1 µs per hop and hops = n // 2 round a ring, n − 1 along a line:

    T_AllGather = T_ReduceScatter = max(T_hop · hops, V / W)              on a ring (the book's form)
                                  = max(T_hop · hops, (n − 1)/n · V / W)  on a line
    over several axes the rates add: V / (N_axes · W) on rings; with a line among them
    (N − 1)/N · V / Σ W, N the chips over all the axes (what an end chip must take in)
    T_AllReduce = 2 · T_AllGather (a ReduceScatter then an AllGather: bytes and hops both twice)
    T_AllToAll  = max(T_hop · hops, V · max(n) / (4 · N · W))  over N chips (V / (4 · W) on one ring)

On a ring whole shards travel both ways, n // 2 hops each, so each direction of a
link carries half of V: V / W with W bidirectional, as the book writes it. A line
has no way round: the one link into an end chip brings it all but its own 1/n
of V, one way, which is the book's 3 · 8.4 MB / 4.5e10 B/s ≈ 560 µs for pop quiz 2.
Either way, once bandwidth-bound, the time hardly depends on the axis' length.
The AllToAll is the book's bisection bound: each half of the chips sends the
other a quarter of V, across the cut through the longest axis (two links per
ring, one per line). :func:`ring_link_bytes` counts what each link of a ring
carries, one way or both (the book's Q10).

On GPUs (ch. 12), inside a node V·(N−1)/(N·W_gpu) with W_gpu a GPU's NVLink bandwidth;
across M nodes of n GPUs, level by level: V·(n−1)/(n·W_gpu) inside each node and
V·(M−1)/(M·W_node) through the node's egress (divided by the fat tree's
oversubscription), and the larger of the two binds; AllToAll inside a
node V·(N−1)/(N²·W_gpu), about V / (8·W_gpu) for N = 8.

A collective-permute is point to point: each device sends its whole block of B
bytes (not an array V shared out) to the one device that needs it, so
:func:`collective_permute_time_s` takes B. On a TPU slice the block crosses
`hops` links, and when every device sends at once each link on the way may carry
up to `hops` blocks one way (a shift sends them all the same way round):
T = max(T_hop · hops, hops · B / W₁), W₁ one link's one-way bandwidth (half the
ring's W). On GPUs a block goes straight through the NVLink switch, B / W_gpu,
and across nodes all n GPUs of a node send theirs out through its egress,
n · B / W_node.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ._derivation import Derivation, derivable, plain, q
from ._errors import InvalidValueError
from ._topology import ICI_HOP_LATENCY_S, GpuCluster, TpuSlice
from ._validate import count, nonnegative, shown

#: Latency of one step of a collective between GPUs (NVLink or InfiniBand), a few µs.
GPU_STEP_LATENCY_S = 5e-6


def _zero(name, V, what):
    return Derivation(f"T_{name}", f"0 (one {what}: nothing to move)", "", plain(0.0 * V), "s")


def _axis_modes(topo: TpuSlice, used) -> list[tuple[str, int, str, float]]:
    """(axis, n, mode, W) per axis used: mode "ring" (wraparound) or "line" (none); W the bandwidth
    a chip has along it (B/s), both directions of a link on a ring, one on a line."""
    return [(a, topo.mesh[a], "ring" if topo.wraparound[topo.axis_names.index(a)] else "line",
             topo.axis_bytes_per_s(a)) for a in used]


# Which W an axis uses, and why, by collective (gathers and reductions; AllToAlls).
_WHERE_W = {
    ("gather", "ring"): "W: both ways of a link on a ring with wraparound (shards go both ways round: the book's V / W)",
    ("gather", "line"): "W: one way on a line without wraparound (the link into an end chip brings it (n − 1)/n of V)",
    ("alltoall", "ring"): "W: both ways of a link on a ring with wraparound (a cut across it crosses 2 links per ring)",
    ("alltoall", "line"): "W: one way on a line without wraparound (a cut across it crosses 1 link per line)",
}
_WHERE_HOPS = {"ring": "n // 2 round a ring", "line": "n − 1 along a line"}


def _torus(name: str, nbytes, V, topo: TpuSlice, axes, hop_latency_s: float) -> Derivation:
    names = topo.axes(axes)
    used = [a for a in names if topo.mesh[a] > 1]
    axes_text = "".join(names)
    if not used:
        return _zero(name, V, "chip")
    rows = _axis_modes(topo, used)
    hops = sum(n // 2 if mode == "ring" else n - 1 for _, n, mode, _ in rows)
    # AllReduce is a ReduceScatter then an AllGather: twice the bytes and twice the hops.
    passes = 2 if name == "AllReduce" else 1
    latency = passes * hops * hop_latency_s
    pre = "2 · " if passes == 2 else ""
    Ws = [W for *_, W in rows]
    same_W = all(W == Ws[0] for W in Ws)
    if name == "AllToAll":
        bandwidth_s, text, subs = _alltoall_terms(nbytes, V, rows, same_W)
    else:
        bandwidth_s, text, subs = _gather_terms(nbytes, V, rows, same_W, passes)
    value = plain(np.maximum(latency, bandwidth_s))
    modes = list(dict.fromkeys(mode for _, _, mode, _ in rows))
    kind = "alltoall" if name == "AllToAll" else "gather"
    where = ["V: bytes of the whole array"] + [_WHERE_W[kind, m] for m in modes]
    if "Σ W" in text:
        where.append("Σ W: the bandwidth a chip has over all the axes used (their rates add)")
    if re.search(r"\bn\b", text) or re.search(r"\bN\b", text):
        where.append("n: chips along an axis" + ("; N: chips over all the axes used" if re.search(r"\bN\b", text) else ""))
    # an equation, so that n (and N) read as used where the hops count them
    where.append(f"hops = {', '.join(_WHERE_HOPS[m] for m in modes)}, summed over the axes used ({''.join(used)}); "
                 f"T_hop: one hop's latency")
    return Derivation(
        f"T_{name}({axes_text})", f"max({pre}T_hop · hops, {text})",
        lambda: f"max({pre}{q(hop_latency_s, 's')} · {hops}, {subs()})",
        value, "s", where=("; ".join(where),),
    )


def _gather_terms(nbytes, V, rows, same_W, passes):
    """An AllGather's (ReduceScatter's; AllReduce's, twice) bandwidth term over the axes `rows`."""
    # Every chip must take in all but its own 1/N of V through the links it has on the axes used: W per
    # axis (both ways of a ring's link, one way of a line's). On rings the book drops (N − 1)/N, giving
    # V / (N_axes · W); as soon as one axis is a line its end chips bind and (N − 1)/N stays.
    N = math.prod(n for _, n, _, _ in rows)
    total_W = sum(W for *_, W in rows)
    rings = all(mode == "ring" for _, _, mode, _ in rows)
    value = passes * V / total_W * (1 if rings else (N - 1) / N)
    pre = "2 · " if passes == 2 else ""
    (_, n, mode, W) = rows[0]
    if len(rows) == 1 and mode == "ring":
        return value, f"{pre}V / W", lambda: f"{pre}{q(nbytes, 'B')} / {q(W, 'B/s')}"
    if len(rows) == 1:
        return value, f"{pre}(n − 1)/n · V / W", lambda: f"{pre}{n - 1}/{n} · {q(nbytes, 'B')} / {q(W, 'B/s')}"
    if rings and same_W:
        return value, f"{pre}V / (N_axes · W)", lambda: f"{pre}{q(nbytes, 'B')} / ({len(rows)} · {q(W, 'B/s')})"
    if rings:
        return value, f"{pre}V / Σ W", lambda: f"{pre}{q(nbytes, 'B')} / ({' + '.join(q(w, 'B/s') for *_, w in rows)})"
    return value, f"{pre}(N − 1)/N · V / Σ W", lambda: (
        f"{pre}{N - 1}/{N} · {q(nbytes, 'B')} / ({' + '.join(q(w, 'B/s') for *_, w in rows)})")


def _alltoall_terms(nbytes, V, rows, same_W):
    """An AllToAll's bandwidth term over the axes `rows`: the book's V · max(n) / (4 · N · W), axis by axis."""
    N = math.prod(n for _, n, _, _ in rows)
    # The cut across an axis of n splits the N chips in two halves, each sending the other a quarter of V,
    # over N/n rings' 2 links each way (W both ways) or N/n lines' 1 link (W one way): V · n / (4 · N · W).
    terms = [V * n / (4 * N * W) for _, n, _, W in rows]
    value = np.maximum.reduce([np.asarray(t, dtype=float) for t in terms])
    if len(rows) == 1:
        W = rows[0][3]
        return value, "V / (4 · W)", lambda: f"{q(nbytes, 'B')} / (4 · {q(W, 'B/s')})"
    m = max(n for _, n, _, _ in rows)
    if same_W:
        W = rows[0][3]
        return value, "V · max(n) / (4 · N · W)", lambda: f"{q(nbytes, 'B')} · {m} / (4 · {N} · {q(W, 'B/s')})"
    return value, "max over axes of V · n / (4 · N · W)", lambda: (
        "max(" + ", ".join(f"{q(nbytes, 'B')} · {n} / (4 · {N} · {q(W, 'B/s')})" for _, n, _, W in rows) + ")")


def _gpu(name: str, nbytes, V, topo: GpuCluster, group, step_latency_s: float) -> Derivation:
    N = topo.num_gpus if group is None else count("group", group)
    if N > topo.num_gpus:
        raise InvalidValueError(f"`group` of {N} GPUs is larger than {topo!r}; at most {topo.num_gpus}")
    if N == 1:
        return _zero(name, V, "GPU")
    per_node = topo.gpus_per_node
    if N > per_node and N % per_node:
        raise InvalidValueError(f"`group`: a group spanning nodes must be whole nodes of {per_node} GPUs, got {N}")
    W_gpu = topo.nvlink_bytes_per_s_per_gpu
    passes = 2 if name == "AllReduce" else 1
    # Over NVLink a GPU exchanges only with the n GPUs of its own node (n = N inside one node);
    # what crosses nodes goes through the node's NICs, the egress term below.
    n = min(N, per_node)
    n_text = "N" if N <= per_node else "n"
    if name == "AllToAll":
        # Each GPU sends V/N² to every other GPU: to the n − 1 of its node through NVLink.
        nvlink_bytes, nvlink_text = V * (n - 1) / N**2, f"V·({n_text}−1)/(N²·W_gpu)"
    else:
        # Inside its node a GPU receives (AllGather) or sends (ReduceScatter) all but its node's own
        # 1/n share of the array: a ring of n over NVLink (per level of a hierarchical collective).
        nvlink_bytes, nvlink_text = (passes * V * (n - 1) / n,
                                     f"{'2·' if passes == 2 else ''}V·({n_text}−1)/({n_text}·W_gpu)")
    terms, texts, subs = [nvlink_bytes / W_gpu], [nvlink_text], [(nvlink_bytes, W_gpu)]
    # A ring takes N − 1 steps per pass; an AllToAll sends to everyone at once through the switches.
    steps = 1 if name == "AllToAll" else passes * (N - 1)
    where = ["V: bytes of the whole array; N: GPUs in the group; W_gpu: a GPU's NVLink bandwidth, one way"]
    if N > per_node:
        M = N // per_node
        W_node = topo.egress_bytes_per_s_per_node(level="spine")
        if name == "AllToAll":
            # Each node sends all but its own share of its V/M out through its egress.
            node_bytes, node_text = V * (M - 1) / M**2, "V·(M−1)/(M²·W_node)"
        else:
            node_bytes, node_text = passes * V * (M - 1) / M, f"{'2·' if passes == 2 else ''}V·(M−1)/(M·W_node)"
        terms.append(node_bytes / W_node)
        texts.append(node_text)
        subs.append((node_bytes, W_node))
        steps = 1 if name == "AllToAll" else passes * (M - 1 + per_node - 1)
        where.append("n: GPUs per node; M: nodes in the group; W_node: a node's egress through the spine, one way")
    latency = steps * step_latency_s
    value = plain(np.maximum(latency, np.maximum.reduce([np.asarray(t, dtype=float) for t in terms])))
    counts = f"N = {N}" + (f", M = {N // per_node} nodes" if N > per_node else "")
    where.append("T_step: latency of one step of the ring")
    return Derivation(
        f"T_{name}({N} GPUs)", f"max(steps · T_step, {', '.join(texts)})",
        lambda: f"max({steps} · {q(step_latency_s, 's')}, {_transfers(subs)}) with {counts}",
        value, "s", where=tuple(where),
    )


def _transfers(subs) -> str:
    return ", ".join(f"{q(nbytes, 'B')} / {q(W, 'B/s')}" for nbytes, W in subs)


def _checked_latency(latency_s, topology, group):
    """`latency_s` validated (one number of seconds, or None), and `group` refused on a TPU slice."""
    if latency_s is not None:
        latency_s = nonnegative("latency_s", latency_s)
        if np.ndim(latency_s):
            raise InvalidValueError(f"`latency_s` must be a single number of seconds, got {shown(latency_s)}")
    if isinstance(topology, TpuSlice) and group is not None:
        raise InvalidValueError("`group`: a TPU slice takes `axes` (e.g. axes='X' or axes='XY'), not `group`")
    return latency_s


def _collective(name: str, nbytes, topology, axes, group, latency_s) -> Derivation:
    V = np.asarray(nonnegative("nbytes", nbytes))
    latency_s = _checked_latency(latency_s, topology, group)
    if isinstance(topology, TpuSlice):
        return _torus(name, nbytes, V, topology, axes, ICI_HOP_LATENCY_S if latency_s is None else latency_s)
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("`axes`: a GPU cluster takes `group` (a number of GPUs), not `axes`")
        return _gpu(name, nbytes, V, topology, group, GPU_STEP_LATENCY_S if latency_s is None else latency_s)
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {shown(topology)}"
    )


def _permute_torus(B, topo: TpuSlice, axes, hops, hop_latency_s) -> Derivation:
    names = topo.axes(axes)
    used = [a for a in names if topo.mesh[a] > 1]
    if not used:
        return _zero("CollectivePermute", B, "chip")
    rows = _axis_modes(topo, used)
    farthest = sum(n // 2 if mode == "ring" else n - 1 for _, n, mode, _ in rows)
    if hops is None:
        hops = farthest
    elif hops > farthest:
        raise InvalidValueError(f"`hops`: no block travels more than {farthest} links over {''.join(used)} of "
                                f"{topo!r} (the shortest way round each axis), got {hops}")
    # one link's one-way bandwidth: half a ring's W (both directions), a line's W itself; the slowest axis binds
    one_way = min(W / 2 if mode == "ring" else W for _, _, mode, W in rows)
    value = plain(np.maximum(hop_latency_s * hops, hops * B / one_way))
    return Derivation(
        f"T_CollectivePermute({''.join(used)})", "max(T_hop · hops, hops · B / W₁)",
        lambda: f"max({q(hop_latency_s, 's')} · {hops}, {hops} · {q(np.asarray(B), 'B')} / {q(one_way, 'B/s')})",
        value, "s",
        where=("B: bytes of the block each device sends; hops: links the farthest block crosses (each may carry "
               "that many blocks one way when all go the same way round); W₁: one link's one-way bandwidth "
               "(half a ring's bidirectional W; the slowest axis); T_hop: one hop's latency",))


def _permute_gpu(B, topo: GpuCluster, group, step_latency_s) -> Derivation:
    N = topo.num_gpus if group is None else count("group", group)
    if N > topo.num_gpus:
        raise InvalidValueError(f"`group` of {N} GPUs is larger than {topo!r}; at most {topo.num_gpus}")
    if N == 1:
        return _zero("CollectivePermute", B, "GPU")
    per_node = topo.gpus_per_node
    if N > per_node and N % per_node:
        raise InvalidValueError(f"`group`: a group spanning nodes must be whole nodes of {per_node} GPUs, got {N}")
    W_gpu = topo.nvlink_bytes_per_s_per_gpu
    subs, texts = [(B, W_gpu)], ["B / W_gpu"]
    where = ["B: bytes of the block each GPU sends; W_gpu: a GPU's NVLink bandwidth, one way"]
    terms = [B / W_gpu]
    if N > per_node:
        W_node = topo.egress_bytes_per_s_per_node(level="spine")
        terms.append(per_node * B / W_node)
        subs.append((per_node * np.asarray(B), W_node))
        texts.append("n · B / W_node")
        where.append("n: GPUs per node, each sending its block out of the node; W_node: a node's egress through "
                     "the spine, one way")
    where.append("T_step: latency of one transfer")
    value = plain(np.maximum(step_latency_s, np.maximum.reduce([np.asarray(t, dtype=float) for t in terms])))
    return Derivation(
        f"T_CollectivePermute({N} GPUs)", f"max(T_step, {', '.join(texts)})",
        lambda: f"max({q(step_latency_s, 's')}, {_transfers(subs)})", value, "s", where=tuple(where))


@derivable
def collective_permute_time_s(nbytes, topology, *, axes=None, group=None, hops=None, latency_s=None):
    """Time of a collective-permute: every device sends its block of `nbytes` straight to the device that needs it.

    Unlike the other collectives, `nbytes` is what one device sends (its whole
    block, B), not an array shared out among the group: what XLA's
    ``collective-permute`` moves, and what :func:`plan_reshard` uses to put
    an array's blocks on other devices without gathering them (``A[I_XY, J] ->
    A[I_YX, J]``). On a TPU slice a block crosses `hops` links; when every
    device sends at once, each link on the way may carry up to `hops` blocks one
    way (a shift sends them all the same way round). One hop is the book's
    ppermute to a neighbour, B / W₁ (chapter 10's collective matmul).

    Formula:
        torus: max(T_hop · hops, hops · B / W₁), W₁ one link's one-way bandwidth (W / 2 on a ring, W on a line);
        GPUs: max(T_step, B / W_gpu) inside a node, and n · B / W_node as well across nodes (n GPUs per node)

    Args:
        nbytes: B, bytes of the block each device sends (B), >= 0.
        topology: a :class:`TpuSlice` or a :class:`GpuCluster`.
        axes: on a TPU slice, the axes the blocks move along (all by default).
        group: on a GPU cluster, the GPUs taking part (all by default).
        hops: on a TPU slice, the links the farthest block crosses, >= 1; by default the farthest any can
            (n // 2 round each ring, n − 1 along each line).
        latency_s: latency of one hop (TPU) or of the transfer (GPU), s; 1 µs and 5 µs by default.

    Returns:
        seconds (s).

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX), 12 (GPUs)

    Example:
        >>> from scalelib import tpu_slice, gpu_cluster, fmt
        >>> fmt(collective_permute_time_s(2**20, tpu_slice((16, 16), "tpu-v5e"), axes="X", hops=1), "s")
        '23.3 µs'
        >>> fmt(collective_permute_time_s(2**24, gpu_cluster(1, "h100"), group=8), "s")
        '37.3 µs'
    """
    B = np.asarray(nonnegative("nbytes", nbytes))
    latency_s = _checked_latency(latency_s, topology, group)
    if isinstance(topology, TpuSlice):
        if hops is not None:
            hops = count("hops", hops)
        return _permute_torus(B, topology, axes, hops, ICI_HOP_LATENCY_S if latency_s is None else latency_s)
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("`axes`: a GPU cluster takes `group` (a number of GPUs), not `axes`")
        if hops is not None:
            raise InvalidValueError("`hops`: a GPU cluster's switches connect every pair of GPUs directly; "
                                    "leave `hops` out (it is for a TPU slice)")
        return _permute_gpu(B, topology, group, GPU_STEP_LATENCY_S if latency_s is None else latency_s)
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {shown(topology)}"
    )


@derivable
def allgather_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to AllGather an array of `nbytes` in total (the gathered size).

    On a TPU axis with wraparound (a ring) this is the book's V / W with W the
    bidirectional bandwidth; on an axis without it (a line) the link into an end
    chip carries (n − 1)/n of V one way, so W is one-way and the (n − 1)/n stays.
    Small arrays are latency-bound: about 1 µs per hop.

    Formula:
        torus: max(T_hop · hops, V / W) on a ring (W bidirectional, n // 2 hops),
        max(T_hop · hops, (n − 1)/n · V / W) on a line (W one way, n − 1 hops),
        V / (N_axes · W) over several rings (rates W·n/(n − 1) of lines add);
        GPUs: max(steps · T_step, V·(n−1)/(n·W_gpu), V·(M−1)/(M·W_node)) with n GPUs in each of M nodes

    Args:
        nbytes: V, bytes of the whole (gathered) array (B), >= 0.
        topology: a :class:`TpuSlice` or a :class:`GpuCluster`.
        axes: on a TPU slice, the axes the collective runs over (all by default).
        group: on a GPU cluster, the GPUs taking part (all by default).
        latency_s: latency of one hop (TPU) or ring step (GPU), s; 1 µs and 5 µs by default.

    Returns:
        seconds (s).

    Chapter:
        3 (Sharded matrices), 12 (GPUs)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(allgather_time_s(2048 * 8192 * 2, tpu_slice((16, 16), "tpu-v5e"), axes="X"), "s")
        '373 µs'
        >>> fmt(allgather_time_s(2048 * 8192 * 2, tpu_slice({"X": 8, "Y": 4}, "tpu-v5e"), axes="Y"), "s")  # a line
        '559 µs'
    """
    return _collective("AllGather", nbytes, topology, axes, group, latency_s)


@derivable
def reducescatter_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to ReduceScatter an unreduced array of `nbytes` (per chip): the transpose of AllGather, at the same cost.

    Formula:
        T_ReduceScatter = T_AllGather (the same bytes cross the same links, the other way)

    Args:
        nbytes: V, bytes of the unreduced array each chip holds (B), >= 0.
        topology, axes, group, latency_s: as in :func:`allgather_time_s`.

    Returns:
        seconds (s).

    Chapter:
        3 (Sharded matrices), 12 (GPUs)

    Example:
        >>> from scalelib import gpu_cluster, fmt
        >>> fmt(reducescatter_time_s(1e9, gpu_cluster(1, "h100")), "s")
        '1.94 ms'
    """
    return _collective("ReduceScatter", nbytes, topology, axes, group, latency_s)


@derivable
def allreduce_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to AllReduce an array of `nbytes`: a ReduceScatter then an AllGather, twice the cost of either.

    Formula:
        T_AllReduce = T_ReduceScatter + T_AllGather = 2 · T_AllGather (bandwidth and latency terms both doubled):
        torus max(2 · T_hop · hops, 2 · V / W) on a ring, max(2 · T_hop · hops, 2 · (n − 1)/n · V / W) on a line

    Args:
        nbytes: V, bytes of the array (B), >= 0.
        topology, axes, group, latency_s: as in :func:`allgather_time_s`.

    Returns:
        seconds (s).

    Chapter:
        3 (Sharded matrices), 12 (GPUs)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(allreduce_time_s(2048 * 8192 * 2, tpu_slice((16, 16), "tpu-v5e"), axes="X"), "s")
        '746 µs'
    """
    return _collective("AllReduce", nbytes, topology, axes, group, latency_s)


@derivable
def alltoall_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to AllToAll an array of `nbytes` in total.

    On a TPU slice this is the book's bisection bound: each half of the N chips sends
    the other a quarter of V across the cut through the longest axis, over two links
    per ring (one per line) for each of the N / n rings or lines it cuts. Round one
    ring that is a quarter of an AllGather.

    Formula:
        torus: max(T_hop · hops, V · max(n) / (4 · N · W)) over N chips, V / (4 · W) on one
        axis (W bidirectional on a ring, one way on a line);
        GPUs: V·(N−1)/(N²·W_gpu) ≈ V/(8·W_gpu) for N = 8

    Args:
        nbytes: V, bytes of the whole array (B), >= 0.
        topology, axes, group, latency_s: as in :func:`allgather_time_s`.

    Returns:
        seconds (s).

    Chapter:
        3 (Sharded matrices), 12 (GPUs)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(alltoall_time_s(2048 * 8192 * 2, tpu_slice((16, 16), "tpu-v5e"), axes="X"), "s")
        '93.2 µs'
        >>> pod = tpu_slice((16, 16), "tpu-v5e")
        >>> fmt(alltoall_time_s(2**30, pod, axes="X"), "s"), fmt(alltoall_time_s(2**30, pod, axes="XY"), "s")
        ('2.98 ms', '186 µs')
    """
    return _collective("AllToAll", nbytes, topology, axes, group, latency_s)
