"""Collective costs (chapters 2, 3 and 12): one function per collective.

Every function takes `nbytes`, the size V of the whole array the collective is
about (the gathered output of an AllGather, the unreduced input of a
ReduceScatter or AllReduce, the array being transposed by an AllToAll), the
topology, and which part of it takes part: `axes` of a :class:`TpuSlice`, or a
`group` of GPUs of a :class:`GpuCluster`.

On a TPU torus (How to Scale Your Model, ch. 3), with W the bandwidth a chip
has along an axis (bidirectional per link with wraparound, one-way without):

    T_AllGather = T_ReduceScatter = max(T_hop · hops, V / ΣW)   over the axes used
    T_AllReduce = 2 · T_AllGather          T_AllToAll = T_AllGather / 4

so once bandwidth-bound the time does not depend on the ring's length. On GPUs
(ch. 12), inside a node V·(N−1)/(N·W_gpu) with W_gpu a GPU's NVLink bandwidth;
across M nodes also V·(M−1)/(M·W_node), the node's egress (divided by the fat
tree's oversubscription), and the larger of the two binds; AllToAll inside a
node V·(N−1)/(N²·W_gpu), about V / (8·W_gpu) for N = 8.
"""

from __future__ import annotations

import numpy as np

from ._derivation import plain, q, result
from ._errors import InvalidValueError, require_nonnegative
from ._topology import ICI_HOP_LATENCY_S, GpuCluster, TpuSlice

#: Latency of one step of a collective between GPUs (NVLink or InfiniBand), a few µs.
GPU_STEP_LATENCY_S = 5e-6

_FACTOR = {"AllGather": 1.0, "ReduceScatter": 1.0, "AllReduce": 2.0, "AllToAll": 0.25}


def _torus(name: str, nbytes, topo: TpuSlice, axes, hop_latency_s: float, explain: bool):
    indices = topo.axes(axes)
    used = [i for i in indices if topo.shape[i] > 1]
    V = np.asarray(nbytes, dtype=float)
    axes_text = "".join(topo.axis_names[i] for i in indices)
    if not used:
        value = float(0.0 * V) if V.ndim == 0 else 0.0 * V
        return result(explain, f"T_{name}", "0 (one chip: nothing to move)", "", value, "s")
    W = sum(topo.axis_bytes_per_s(i) for i in used)
    hops = sum(topo.shape[i] // 2 if topo.wraparound[i] else topo.shape[i] - 1 for i in used)
    factor = _FACTOR[name]
    # AllToAll's latency is that of one pass; AllReduce makes two passes.
    latency = hops * hop_latency_s * (2 if name == "AllReduce" else 1)
    bandwidth = factor * V / W
    value = np.maximum(latency, bandwidth)
    value = plain(value)
    prefix = {1.0: "", 2.0: "2 · ", 0.25: "¼ · "}[factor]
    hop_prefix = "2 · " if name == "AllReduce" else ""
    return result(
        explain, f"T_{name}({axes_text})", f"max({hop_prefix}T_hop · hops, {prefix}V / W)",
        f"max({hop_prefix}{q(hop_latency_s, 's')} · {hops}, {prefix}{q(nbytes, 'B')} / {q(W, 'B/s')})",
        value, "s",
    )


def _gpu(name: str, nbytes, topo: GpuCluster, group, step_latency_s: float, explain: bool):
    N = topo.num_gpus if group is None else group
    if not isinstance(N, (int, np.integer)) or N < 1:
        raise InvalidValueError(f"`group` must be a whole number of GPUs >= 1, got {group!r}")
    if N > topo.num_gpus:
        raise InvalidValueError(f"`group` of {N} GPUs is larger than {topo!r}; at most {topo.num_gpus}")
    V = np.asarray(nbytes, dtype=float)
    if N == 1:
        value = float(0.0 * V) if V.ndim == 0 else 0.0 * V
        return result(explain, f"T_{name}", "0 (one GPU: nothing to move)", "", value, "s")
    per_node = topo.gpus_per_node
    if N > per_node and N % per_node:
        raise InvalidValueError(f"a `group` spanning nodes must be whole nodes of {per_node} GPUs, got {N}")
    W_gpu = topo.nvlink_bytes_per_s_per_gpu
    passes = 2 if name == "AllReduce" else 1
    if name == "AllToAll":
        # Each GPU keeps 1/N of its V/N and sends the rest: V·(N−1)/N² through its NVLink.
        nvlink_bytes, nvlink_text = V * (N - 1) / N**2, "V·(N−1)/(N²·W_gpu)"
    else:
        # Every GPU receives (for AllGather) or sends (ReduceScatter) all but its own 1/N share.
        nvlink_bytes, nvlink_text = passes * V * (N - 1) / N, f"{'2·' if passes == 2 else ''}V·(N−1)/(N·W_gpu)"
    terms, texts, subs = [nvlink_bytes / W_gpu], [nvlink_text], [f"{q(nvlink_bytes, 'B')} / {q(W_gpu, 'B/s')}"]
    # A ring takes N − 1 steps per pass; an AllToAll sends to everyone at once through the switches.
    steps = 1 if name == "AllToAll" else passes * (N - 1)
    if N > per_node:
        M = N // per_node
        W_node = topo.egress_bytes_per_s_per_node("spine")
        if name == "AllToAll":
            # Each node sends all but its own share of its V/M out through its egress.
            node_bytes, node_text = V * (M - 1) / M**2, "V·(M−1)/(M²·W_node)"
        else:
            node_bytes, node_text = passes * V * (M - 1) / M, f"{'2·' if passes == 2 else ''}V·(M−1)/(M·W_node)"
        terms.append(node_bytes / W_node)
        texts.append(node_text)
        subs.append(f"{q(node_bytes, 'B')} / {q(W_node, 'B/s')}")
        steps = 1 if name == "AllToAll" else passes * (M - 1 + per_node - 1)
    latency = steps * step_latency_s
    value = np.maximum(latency, np.maximum.reduce([np.asarray(t, dtype=float) for t in terms]))
    value = plain(value)
    counts = f"N = {N}" + (f", M = {N // per_node} nodes" if N > per_node else "")
    return result(
        explain, f"T_{name}({N} GPUs)", f"max(steps · T_step, {', '.join(texts)})",
        f"max({steps} · {q(step_latency_s, 's')}, {', '.join(subs)}) with {counts}", value, "s",
    )


def _collective(name: str, nbytes, topology, axes, group, latency_s, explain):
    require_nonnegative(nbytes=nbytes)
    if isinstance(topology, TpuSlice):
        if group is not None:
            raise InvalidValueError("a TPU slice takes `axes` (e.g. axes='X' or ('X', 'Y')), not `group`")
        return _torus(name, nbytes, topology, axes, ICI_HOP_LATENCY_S if latency_s is None else latency_s, explain)
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("a GPU cluster takes `group` (a number of GPUs), not `axes`")
        return _gpu(name, nbytes, topology, group, GPU_STEP_LATENCY_S if latency_s is None else latency_s, explain)
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {type(topology).__name__}"
    )


def allgather_time(nbytes, topology, axes=None, group=None, *, latency_s=None, explain: bool = False):
    """Seconds to AllGather an array of `nbytes` in total (the gathered size). Chapters 3 and 12.

    On a torus: max(T_hop · hops, V / ΣW) over the `axes` used (all by default).
    On GPUs: V·(N−1)/(N·W_gpu) in a node; across M nodes the larger of that and
    V·(M−1)/(M·W_node).

    >>> from scalelib import tpu_slice, fmt
    >>> fmt(allgather_time(2048 * 8192 * 2, tpu_slice("tpu-v5e", (16, 16)), axes="X"), "s")
    '373 µs'
    """
    return _collective("AllGather", nbytes, topology, axes, group, latency_s, explain)


def reducescatter_time(nbytes, topology, axes=None, group=None, *, latency_s=None, explain: bool = False):
    """Seconds to ReduceScatter an unreduced array of `nbytes` (per chip): the transpose of
    AllGather, at the same cost. Chapters 3 and 12."""
    return _collective("ReduceScatter", nbytes, topology, axes, group, latency_s, explain)


def allreduce_time(nbytes, topology, axes=None, group=None, *, latency_s=None, explain: bool = False):
    """Seconds to AllReduce an array of `nbytes`: a ReduceScatter then an AllGather,
    twice the cost of either. Chapters 3 and 12."""
    return _collective("AllReduce", nbytes, topology, axes, group, latency_s, explain)


def alltoall_time(nbytes, topology, axes=None, group=None, *, latency_s=None, explain: bool = False):
    """Seconds to AllToAll an array of `nbytes` in total: a quarter of an AllGather on a
    bidirectional ring; V·(N−1)/(N²·W_gpu) ≈ V/(8·W_gpu) inside an 8-GPU node. Chapters 3 and 12."""
    return _collective("AllToAll", nbytes, topology, axes, group, latency_s, explain)
