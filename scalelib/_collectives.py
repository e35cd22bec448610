"""Collective costs (chapters 2, 3 and 12): one function per collective.

Every function takes `nbytes`, the size V of the whole array the collective is
about (the gathered output of an AllGather, the unreduced input of a
ReduceScatter or AllReduce, the array being transposed by an AllToAll), the
topology, and which part of it takes part: `axes` of a :class:`TpuSlice` (``"X"``, ``"XY"``, ``("X", "Y")``), or a
`group` of GPUs of a :class:`GpuCluster`.

On a TPU torus (How to Scale Your Model, ch. 3), with W the bandwidth a chip
has along an axis (bidirectional per link with wraparound, one-way without):

    T_AllGather = T_ReduceScatter = max(T_hop · hops, V / ΣW)   over the axes used
    T_AllReduce = 2 · T_AllGather          T_AllToAll = T_AllGather / 4

so once bandwidth-bound the time does not depend on the ring's length. On GPUs
(ch. 12), inside a node V·(N−1)/(N·W_gpu) with W_gpu a GPU's NVLink bandwidth;
across M nodes of n GPUs, level by level: V·(n−1)/(n·W_gpu) inside each node and
V·(M−1)/(M·W_node) through the node's egress (divided by the fat tree's
oversubscription), and the larger of the two binds; AllToAll inside a
node V·(N−1)/(N²·W_gpu), about V / (8·W_gpu) for N = 8.
"""

from __future__ import annotations

import numpy as np

from ._derivation import Derivation, derivable, plain, q
from ._errors import InvalidValueError
from ._topology import ICI_HOP_LATENCY_S, GpuCluster, TpuSlice
from ._validate import count, nonnegative, shown

#: Latency of one step of a collective between GPUs (NVLink or InfiniBand), a few µs.
GPU_STEP_LATENCY_S = 5e-6

_FACTOR = {"AllGather": 1.0, "ReduceScatter": 1.0, "AllReduce": 2.0, "AllToAll": 0.25}


def _zero(name, V, what):
    return Derivation(f"T_{name}", f"0 (one {what}: nothing to move)", "", plain(0.0 * V), "s")


def _torus(name: str, nbytes, V, topo: TpuSlice, axes, hop_latency_s: float) -> Derivation:
    names = topo.axes(axes)
    used = [a for a in names if topo.shape[topo.axis_names.index(a)] > 1]
    axes_text = "".join(names)
    if not used:
        return _zero(name, V, "chip")
    W = sum(topo.axis_bytes_per_s(a) for a in used)
    hops = sum(n // 2 if w else n - 1 for a, n, w in zip(topo.axis_names, topo.shape, topo.wraparound) if a in used)
    factor = _FACTOR[name]
    # AllToAll's latency is that of one pass; AllReduce makes two passes.
    passes = 2 if name == "AllReduce" else 1
    latency = passes * hops * hop_latency_s
    value = plain(np.maximum(latency, factor * V / W))
    prefix = {1.0: "", 2.0: "2 · ", 0.25: "¼ · "}[factor]
    hop_prefix = "2 · " if passes == 2 else ""
    return Derivation(
        f"T_{name}({axes_text})", f"max({hop_prefix}T_hop · hops, {prefix}V / W)",
        lambda: f"max({hop_prefix}{q(hop_latency_s, 's')} · {hops}, {prefix}{q(nbytes, 'B')} / {q(W, 'B/s')})",
        value, "s",
        where=(f"V: bytes of the whole array; W: bandwidth a chip has over the axes used ({''.join(used)}); "
               f"hops: ring lengths' worth of hops",),
    )


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


def _collective(name: str, nbytes, topology, axes, group, latency_s) -> Derivation:
    V = np.asarray(nonnegative("nbytes", nbytes))
    if latency_s is not None:
        latency_s = nonnegative("latency_s", latency_s)
        if np.ndim(latency_s):
            raise InvalidValueError(f"`latency_s` must be a single number of seconds, got {shown(latency_s)}")
    if isinstance(topology, TpuSlice):
        if group is not None:
            raise InvalidValueError("`group`: a TPU slice takes `axes` (e.g. axes='X' or axes='XY'), not `group`")
        return _torus(name, nbytes, V, topology, axes, ICI_HOP_LATENCY_S if latency_s is None else latency_s)
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("`axes`: a GPU cluster takes `group` (a number of GPUs), not `axes`")
        return _gpu(name, nbytes, V, topology, group, GPU_STEP_LATENCY_S if latency_s is None else latency_s)
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {shown(topology)}"
    )


@derivable
def allgather_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to AllGather an array of `nbytes` in total (the gathered size).

    Formula:
        torus: max(T_hop · hops, V / ΣW) over the axes used;
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
    """
    return _collective("AllGather", nbytes, topology, axes, group, latency_s)


@derivable
def reducescatter_time_s(nbytes, topology, *, axes=None, group=None, latency_s=None):
    """Time to ReduceScatter an unreduced array of `nbytes` (per chip): the transpose of AllGather, at the same cost.

    Formula:
        T_ReduceScatter = T_AllGather

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
        T_AllReduce = 2 · T_AllGather (bandwidth and latency terms both doubled)

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

    Formula:
        torus: T_AllGather / 4 (bidirectional ring); GPUs: V·(N−1)/(N²·W_gpu) ≈ V/(8·W_gpu) for N = 8

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
    """
    return _collective("AllToAll", nbytes, topology, axes, group, latency_s)
