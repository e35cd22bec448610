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

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError
from ._topology import GpuCluster, TpuSlice
from ._validate import count, positive, shown


def _link_bandwidth(topology, axes) -> tuple[float, str, tuple[str, ...]]:
    """The bandwidth a chip has for a collective over `axes` (TPU) or over the whole cluster (GPU)."""
    if isinstance(topology, TpuSlice):
        used = [a for a in topology.axes(axes) if topology.shape[topology.axis_names.index(a)] > 1]
        if not used:
            raise InvalidValueError(f"`axes`: {topology!r} has one chip along {shown(axes)}: there is nothing to "
                                    f"parallelise over")
        return (sum(topology.axis_bytes_per_s(a) for a in used), "W_ici",
                (f"W_ici: ICI bandwidth a chip has over axes {''.join(used)} (both directions on a ring)",))
    if isinstance(topology, GpuCluster):
        if axes is not None:
            raise InvalidValueError("`axes`: a GPU cluster takes no `axes`: it parallelises over all its GPUs")
        gpu = "W_gpu: a GPU's NVLink bandwidth, one way"
        if topology.num_nodes == 1:
            return topology.nvlink_bytes_per_s_per_gpu, "W_gpu", (gpu,)
        # Across nodes the collective has an NVLink stage and an egress stage; the slower binds.
        W_gpu, W_node = topology.nvlink_bytes_per_s_per_gpu, topology.egress_bytes_per_s_per_node(level="spine")
        return min(W_gpu, W_node), "min(W_gpu, W_node)", (gpu, "W_node: a node's egress through the spine, one way")
    raise InvalidValueError(
        f"`topology` must be a TpuSlice (tpu_slice(...)) or a GpuCluster (gpu_cluster(...)), got {shown(topology)}"
    )


@derivable
def data_parallel_critical_batch(topology, *, dtype="bf16", axes=None):
    """Tokens per chip above which data parallelism (or FSDP) is compute-bound.

    W is the bidirectional ICI bandwidth summed over the `axes` used on a TPU
    slice (v5p, one axis: 4.59e14 / 1.8e11 ≈ 2550; three axes ≈ 850), a GPU's
    NVLink bandwidth inside one node (H100: 9.9e14 / 4.5e11 = 2200), and across
    nodes the slower of NVLink and the node's egress (H100: 9.9e14 / 4e11 ≈ 2475
    tokens per GPU; on GB200 NVL72 the NVLink stage binds).

    Formula:
        B_crit per chip = C / W

    Args:
        topology: a :class:`TpuSlice` or :class:`GpuCluster`.
        dtype: the dtype of the arithmetic (sets C).
        axes: on a TPU slice, the axes data parallelism runs over (all by default).

    Returns:
        tokens per chip.

    Chapter:
        5 (Parallelism for training), 12 (GPUs)

    Example:
        >>> from scalelib import gpu_cluster
        >>> round(data_parallel_critical_batch(gpu_cluster(1, "h100")))
        2200
    """
    W, name, where = _link_bandwidth(topology, axes)
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    return Derivation("B_crit per chip", f"C / {name}", lambda: f"{q(C.value, 'FLOP/s')} / {q(W, 'B/s')}",
                      C.value / W, "tokens", where=("C: a chip's peak FLOP/s", *where))


@derivable
def tensor_parallel_max_degree(F, topology, *, dtype="bf16", axes=None):
    """Largest tensor-parallel degree Y that stays compute-bound for an MLP of width F.

    Formula:
        Y_max = F · W / C

    Args:
        F: the MLP's hidden width (> 0).
        topology: a :class:`TpuSlice` or :class:`GpuCluster`.
        dtype: the dtype of the arithmetic (sets C).
        axes: on a TPU slice, the axes tensor parallelism runs over (all by default).

    Returns:
        chips (a degree; not rounded).

    Chapter:
        5 (Parallelism for training), 12 (GPUs)

    Example:
        >>> from scalelib import gpu_cluster
        >>> round(tensor_parallel_max_degree(28672, gpu_cluster(1, "h100")), 1)
        13.0
    """
    F_ = positive("F", F)
    W, name, where = _link_bandwidth(topology, axes)
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    return Derivation("Y_max", f"F · {name} / C", lambda: f"{q(F)} · {q(W, 'B/s')} / {q(C.value, 'FLOP/s')}",
                      plain(np.asarray(F_) * W / C.value), "chips",
                      where=("F: the MLP's hidden width", "C: a chip's peak FLOP/s", *where))


@derivable
def pipeline_bubble_fraction(stages, microbatches):
    """Share of a GPipe or 1F1B step that pipeline stages sit idle.

    Formula:
        bubble = (p − 1) / (m + p − 1)

    Args:
        stages: p, pipeline stages (a whole number >= 1).
        microbatches: m, microbatches per step (a whole number >= 1).

    Returns:
        a fraction between 0 and 1 (dimensionless).

    Chapter:
        5 (Parallelism for training), 12 (GPUs)

    Example:
        >>> pipeline_bubble_fraction(4, 16)
        0.15789473684210525
    """
    p, m = count("stages", stages), count("microbatches", microbatches)
    return Derivation("bubble", "(p − 1) / (m + p − 1)", lambda: f"({p} − 1) / ({m} + {p} − 1)",
                      (p - 1) / (m + p - 1), "", where=("p: pipeline stages; m: microbatches per step",))
