"""When parallelism stays compute-bound (chapters 5 and 12): rooflines of DP, FSDP, TP and PP.

Data parallelism (and FSDP) moves the weights' gradients (and, for FSDP, the
weights) once per step while each chip computes on its own tokens, so a chip is
compute-bound once its tokens per step exceed C / W, W being the bandwidth a chip
(or, across GPU nodes, a node's egress shared by its GPUs' tokens) has for the
collective. Tensor parallelism over Y chips moves activations instead and stays
compute-bound while F / Y exceeds C / W: Y ≤ F · W / C.
"""

from __future__ import annotations

import numpy as np

from ._derivation import plain, q, result
from ._errors import InvalidValueError, require_positive
from ._topology import GpuCluster, TpuSlice


def _link_bandwidth(topology, axes) -> tuple[float, str]:
    """The bandwidth a chip has for a collective over `axes` (TPU) or over the whole cluster (GPU)."""
    if isinstance(topology, TpuSlice):
        used = [i for i in topology.axes(axes) if topology.shape[i] > 1]
        if not used:
            raise InvalidValueError(f"{topology!r} has one chip along {axes!r}: there is nothing to parallelise over")
        return sum(topology.axis_bytes_per_s(i) for i in used), "W_ici"
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("a GPU cluster takes no `axes`: it parallelises over all its GPUs")
        if topology.num_nodes == 1:
            return topology.nvlink_bytes_per_s_per_gpu, "W_gpu"
        # Across nodes the collective has an NVLink stage and an egress stage; the slower binds.
        W_gpu, W_node = topology.nvlink_bytes_per_s_per_gpu, topology.egress_bytes_per_s_per_node("spine")
        return min(W_gpu, W_node), "min(W_gpu, W_node)"
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {type(topology).__name__}"
    )


def data_parallel_critical_batch(topology, dtype: str = "bf16", axes=None, *, explain: bool = False):
    """Tokens per chip above which data parallelism (or FSDP) is compute-bound: C / W. Chapters 5 and 12.

    W is the bidirectional ICI bandwidth summed over the `axes` used on a TPU
    slice (v5p, one axis: 4.59e14 / 1.8e11 ≈ 2550; three axes ≈ 850), a GPU's
    NVLink bandwidth inside one node (H100: 9.9e14 / 4.5e11 = 2200), and across
    nodes the slower of NVLink and the node's egress (H100: 9.9e14 / 4e11 ≈ 2475
    tokens per GPU; on GB200 NVL72 the NVLink stage binds).

    >>> from scalelib import gpu_cluster
    >>> round(data_parallel_critical_batch(gpu_cluster("h100")))
    2200
    """
    W, name = _link_bandwidth(topology, axes)
    C = topology.spec.flops_per_s(dtype)
    return result(explain, "B_crit per chip", f"C / {name}", f"{q(C, 'FLOP/s')} / {q(W, 'B/s')}", C / W, "tokens")


def tensor_parallel_max_degree(F, topology, dtype: str = "bf16", axes=None, *, explain: bool = False):
    """Largest tensor-parallel degree Y that stays compute-bound for an MLP of width F: F · W / C. Chapters 5 and 12.

    >>> from scalelib import gpu_cluster
    >>> round(tensor_parallel_max_degree(28672, gpu_cluster("h100")), 1)
    13.0
    """
    require_positive(F=F)
    W, name = _link_bandwidth(topology, axes)
    C = topology.spec.flops_per_s(dtype)
    value = np.asarray(F, dtype=float) * W / C
    value = plain(value)
    return result(explain, "Y_max", f"F · {name} / C", f"{q(F)} · {q(W, 'B/s')} / {q(C, 'FLOP/s')}", value, "chips")


def pipeline_bubble_fraction(stages, microbatches, *, explain: bool = False):
    """Share of a GPipe or 1F1B step that pipeline stages sit idle: (p − 1) / (m + p − 1). Chapters 5 and 12."""
    require_positive(stages=stages, microbatches=microbatches)
    p, m = np.asarray(stages, dtype=float), np.asarray(microbatches, dtype=float)
    value = (p - 1) / (m + p - 1)
    value = plain(value)
    return result(explain, "bubble", "(p − 1) / (m + p − 1)", f"({q(stages)} − 1) / ({q(microbatches)} + {q(stages)} − 1)",
                  value, "")
