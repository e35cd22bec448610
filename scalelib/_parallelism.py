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
from ._specs import bytes_per_value, dtype_name
from ._topology import GpuCluster, TpuSlice
from ._validate import count, number, positive, shown


def _link_bandwidth(topology, axes) -> tuple[float, str, tuple[str, ...]]:
    """The bandwidth a chip has for a collective over `axes` (TPU) or over the whole cluster (GPU)."""
    if isinstance(topology, TpuSlice):
        used = [a for a in topology.axes(axes) if topology.shape[topology.axis_names.index(a)] > 1]
        if not used:
            if axes is None:
                raise InvalidValueError(f"`topology`: {topology!r} is one chip: there is nothing to parallelise "
                                        f"over; give a slice with more than one chip along some axis")
            raise InvalidValueError(f"`axes`: {topology!r} has one chip along {shown(axes)}: there is nothing to "
                                    f"parallelise over; name axes of more than one chip")
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
def tensor_parallel_max_degree(F, topology, *, dtype="bf16", axes=None, activation_dtype=None):
    """Largest tensor-parallel degree Y that stays compute-bound for an MLP of width F.

    Each chip multiplies its [B, D] activations by its F/Y columns, 2·B·D·F/Y FLOPs at C, while the
    [B, D] activations, x bytes a value, cross the links at W: compute-bound while
    2·B·D·F/(Y·C) ≥ x·B·D/W. In bf16 (x = 2) that is the book's F·W/C; int8 arithmetic doubles C and,
    with int8 activations, halves x, so the limit stays where bf16 puts it.

    Formula:
        Y_max = F · W / C · 2 / x   (x: bytes per activation value; bf16: F · W / C)

    Args:
        F: the MLP's hidden width (> 0).
        topology: a :class:`TpuSlice` or :class:`GpuCluster`.
        dtype: the dtype of the arithmetic (sets C).
        axes: on a TPU slice, the axes tensor parallelism runs over (all by default).
        activation_dtype: the dtype of the activations the collectives move (sets x); None (the default):
            the arithmetic's `dtype`.

    Returns:
        chips (a degree; not rounded).

    Chapter:
        5 (Parallelism for training), 7 (Inference), 12 (GPUs)

    Example:
        >>> from scalelib import gpu_cluster
        >>> round(tensor_parallel_max_degree(28672, gpu_cluster(1, "h100")), 1)
        13.0
        >>> round(tensor_parallel_max_degree(28672, gpu_cluster(1, "h100"), dtype="fp8"), 1)   # 2x C, 1/2 x
        12.9
    """
    F_ = positive("F", F)
    W, name, where = _link_bandwidth(topology, axes)
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    act = dtype_name(dtype if activation_dtype is None else activation_dtype, arg="activation_dtype")
    x = bytes_per_value(act)
    if x == 2:
        return Derivation("Y_max", f"F · {name} / C", lambda: f"{q(F)} · {q(W, 'B/s')} / {q(C.value, 'FLOP/s')}",
                          plain(np.asarray(F_) * W / C.value), "chips",
                          where=("F: the MLP's hidden width", "C: a chip's peak FLOP/s", *where))
    return Derivation("Y_max", f"F · {name} / C · 2 / x",
                      lambda: f"{q(F)} · {q(W, 'B/s')} / {q(C.value, 'FLOP/s')} · 2 / {q(x)}",
                      plain(np.asarray(F_) * W / C.value * 2.0 / x), "chips",
                      where=("F: the MLP's hidden width", "C: a chip's peak FLOP/s",
                             f"x: bytes per activation value ({act})", *where))


@derivable
def pipeline_bubble_fraction(stages, microbatches, *, virtual_stages=1):
    """Share of a GPipe or 1F1B step that pipeline stages sit idle; interleaved, v chunks per stage.

    With v chunks per stage (interleaved 1F1B) a slot of the bubble costs a chunk, 1/v of a stage,
    so the idle time shrinks v times (the simulation :func:`~scalelib.pipeline_schedule` agrees).

    Formula:
        bubble = (p − 1) / (v·m + p − 1)   (v = 1: GPipe and 1F1B)

    Args:
        stages: p, pipeline stages (a whole number >= 1).
        microbatches: m, microbatches per step (a whole number >= 1).
        virtual_stages: v, chunks per stage of an interleaved schedule (1: GPipe, 1F1B).

    Returns:
        a fraction between 0 and 1 (dimensionless).

    Chapter:
        5 (Parallelism for training), 12 (GPUs)

    Example:
        >>> pipeline_bubble_fraction(4, 16)
        0.15789473684210525
        >>> round(pipeline_bubble_fraction(4, 16, virtual_stages=2), 4)
        0.0857
    """
    p, m = count("stages", stages), count("microbatches", microbatches)
    v = count("virtual_stages", virtual_stages)
    if v == 1:
        return Derivation("bubble", "(p − 1) / (m + p − 1)", lambda: f"({p} − 1) / ({m} + {p} − 1)",
                          (p - 1) / (m + p - 1), "", where=("p: pipeline stages; m: microbatches per step",))
    return Derivation("bubble", "(p − 1) / (v·m + p − 1)", lambda: f"({p} − 1) / ({v}·{m} + {p} − 1)",
                      (p - 1) / (v * m + p - 1), "",
                      where=("p: pipeline stages; m: microbatches per step; v: chunks per stage (interleaved)",))


def _one_axis_bandwidth(topology) -> tuple[float, str]:
    """W of one mesh axis: a TPU slice's fastest axis (bidirectional on a ring), a GPU's NVLink (one way)."""
    if isinstance(topology, TpuSlice):
        W = max(topology.axis_bytes_per_s(a) for a in topology.axis_names)
        if W == 0:
            raise InvalidValueError(f"`topology`: {topology!r} is one chip: there is nothing to parallelise over")
        return W, "W: the ICI bandwidth of one axis, both directions"
    W, _, where = _link_bandwidth(topology, None)
    return W, where[0].replace("W_gpu", "W") if len(where) == 1 else "W: the slower of NVLink and a node's egress"


def _axis_counts(M_X, M_Y):
    mx, my = number("M_X", M_X, positive=True), number("M_Y", M_Y, positive=True)
    if np.ndim(mx) or np.ndim(my):
        raise InvalidValueError("`M_X` and `M_Y` must be single numbers (mesh axes used by FSDP and by TP)")
    return mx, my


@derivable
def fsdp_tensor_parallel_critical_batch(F, topology, *, M_X=2, M_Y=1, dtype="bf16"):
    """Tokens per chip above which FSDP combined with tensor parallelism stays compute-bound.

    With the FSDP width X chosen optimally (:func:`optimal_fsdp_degree`), FSDP's weight traffic
    and TP's activation traffic balance, and the step stays compute-bound down to α²/(M_X·M_Y·F)
    tokens per chip, α = C / W for one axis: on TPU v5p with F = 32,768 and M_X·M_Y = 2 about
    2550² / (2·32768) ≈ 99, some 8x below what FSDP alone needs (850 on three axes).

    Formula:
        B / N > α² / (M_X · M_Y · F),  α = C / W

    Args:
        F: the MLP's hidden width (> 0).
        topology: a :class:`TpuSlice` (W: one axis's ICI bandwidth) or a :class:`GpuCluster`.
        M_X: mesh axes (of the torus) FSDP runs over (> 0).
        M_Y: mesh axes tensor parallelism runs over (> 0).
        dtype: the dtype of the arithmetic (sets C).

    Returns:
        tokens per chip.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import tpu_pod
        >>> round(fsdp_tensor_parallel_critical_batch(32768, tpu_pod("tpu-v5p")), 1)
        99.2
    """
    F_ = positive("F", F)
    mx, my = _axis_counts(M_X, M_Y)
    W, where = _one_axis_bandwidth(topology)
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    alpha = C.value / W
    return Derivation("B_crit per chip (FSDP + TP)", "α² / (M_X · M_Y · F)",
                      lambda: f"{q(alpha)}² / ({q(mx)} · {q(my)} · {q(F)})", plain(alpha**2 / (mx * my * np.asarray(F_))),
                      "tokens", where=(f"α = C / W = {q(C.value, 'FLOP/s')} / {q(W, 'B/s')}, the tokens per chip data "
                                       f"parallelism needs over one axis",
                                       f"C: a chip's peak FLOP/s; {where}",
                                       "M_X, M_Y: mesh axes FSDP and TP use; F: the MLP's hidden width"))


@derivable
def optimal_fsdp_degree(B, F, topology, *, M_X=2, M_Y=1):
    """The FSDP width X that balances FSDP's and TP's communication, for N = X·Y chips.

    FSDP over X chips moves weights, a cost falling with Y; TP over Y chips moves activations, a
    cost falling with X; their sum is least where X = sqrt(B/F · M_X/M_Y · N) (the book: B = 48k
    tokens, F = 32,768, N = 64, M_X/M_Y = 2 gives about 13.9, so X = 16, Y = 4). Round to a
    divisor of N in practice.

    Formula:
        X_opt = sqrt(B / F · M_X / M_Y · N)

    Args:
        B: tokens per step (the global batch, > 0).
        F: the MLP's hidden width (> 0).
        topology: a :class:`TpuSlice` or :class:`GpuCluster` (N: its chips).
        M_X: mesh axes FSDP runs over (> 0).
        M_Y: mesh axes tensor parallelism runs over (> 0).

    Returns:
        chips (the FSDP degree; not rounded).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import tpu_slice
        >>> round(optimal_fsdp_degree(3e6, 13824, tpu_slice((16, 16, 16), "tpu-v5p")))
        1333
    """
    B_, F_ = positive("B", B), positive("F", F)
    mx, my = _axis_counts(M_X, M_Y)
    if not isinstance(topology, (TpuSlice, GpuCluster)):
        raise InvalidValueError(f"`topology` must be a TpuSlice or a GpuCluster, got {shown(topology)}")
    n = topology.num_chips
    return Derivation("X_opt", "sqrt(B / F · M_X / M_Y · N)", lambda: f"sqrt({q(B)} / {q(F)} · {q(mx)} / {q(my)} · {n})",
                      plain(np.sqrt(np.asarray(B_) / np.asarray(F_) * mx / my * n)), "chips",
                      where=("B: tokens per step; F: the MLP's hidden width; M_X, M_Y: mesh axes FSDP and TP use; "
                             "N: chips",))


@derivable
def cross_slice_critical_batch(topology, *, dtype="bf16"):
    """Tokens per slice (per pod) above which data parallelism across slices over DCN stays compute-bound.

    Each slice reduces its gradients inside itself first, so every chip sends only its shard over
    the data-center network; what a chip computes grows with its slice's share of the batch. On
    TPU v5p: 4.59e14 / 6.25e9 ≈ 73,440 tokens per slice.

    Formula:
        B_slice > C / W_dcn   (W_dcn: a chip's DCN bandwidth)

    Args:
        topology: a :class:`TpuSlice` (one of the slices).
        dtype: the dtype of the arithmetic (sets C).

    Returns:
        tokens per slice.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import tpu_pod
        >>> round(cross_slice_critical_batch(tpu_pod("tpu-v5p")))
        73440
    """
    if not isinstance(topology, TpuSlice):
        raise InvalidValueError(f"`topology` must be a TpuSlice (slices of TPU pods join over DCN), got {shown(topology)}")
    W = topology.spec._require("dcn_bytes_per_s_per_chip", "data parallelism over DCN")
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    return Derivation("B_crit per slice (DCN)", "C / W_dcn", lambda: f"{q(C.value, 'FLOP/s')} / {q(W, 'B/s')}",
                      C.value / W, "tokens", where=("C: a chip's peak FLOP/s; W_dcn: a chip's DCN bandwidth, one way",))
