"""The calibrated estimate's data (chapters 5, 6, 8): its named losses, their sources, its constants.

The names of the losses the training and inference estimates charge, where each comes from, the
constants of ``scalelib/data/estimate.toml`` and the two efficiency tables read from it. Data only:
the roofline (:mod:`scalelib._training`, :mod:`scalelib._inference`) checks its ``losses=`` keyword
against these names, the estimate (:mod:`scalelib._estimate`) prices them, and neither this module nor
the roofline imports the estimate, which sits above them.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

import numpy as np

from ._errors import InvalidValueError

#: The losses the estimate charges, in the order its breakdown switches them on.
LOSSES = ("matmul_efficiency", "memory_bound_ops", "tensor_collectives", "recompute", "pipeline_send_receive",
          "data_parallel_exposed", "optimizer_step")

#: Where each loss's formula and constants come from.
LOSS_SOURCES = {
    "matmul_efficiency": "matmul efficiency by size: calculon's A100 table (Isaev et al., SC 2023), linear between "
                         "its points; operand reads at the HBM's achieved bandwidth",
    "memory_bound_ops": "elementwise tensors of Korthikanti et al. 2022 (arXiv:2205.05198) section 4, read and "
                        "written at 90% of HBM bandwidth (calculon's A100 figure)",
    "tensor_collectives": "Megatron-LM's TP collectives (Shoeybi et al. 2019; Korthikanti et al. 2022), NVLink at "
                          "80% (nccl-tests #212, #149) or InfiniBand at 90% (nccl-tests #119), latencies from "
                          "calculon",
    "recompute": "the recomputed forward's elementwise kernels and collectives (Korthikanti et al. 2022, section 5)",
    "pipeline_send_receive": "one send of [tokens, D/t] per chunk, microbatch and pass (Narayanan et al. 2021, "
                             "section 4.1, scatter-gather), InfiniBand at 90% with 20 us latency",
    "data_parallel_exposed": "the gradient AllReduce after the pipeline flush (Narayanan et al. 2021, section 2.2), "
                             "at the tier's achieved bandwidth",
    "optimizer_step": "Adam's update (Kingma and Ba 2015) read and written at 90% of HBM bandwidth",
}


@lru_cache(maxsize=None)
def constants() -> dict:
    """The estimate's constants, read from ``scalelib/data/estimate.toml`` (each section with its source)."""
    text = resources.files("scalelib").joinpath("data/estimate.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _loss_names(losses, known: tuple, kind: str) -> frozenset:
    """`losses` as a frozenset of names from `known`, or an error naming the argument and the names it takes."""
    if isinstance(losses, str):
        losses = (losses,)
    try:
        names = tuple(losses)
    except TypeError:
        raise InvalidValueError(f"`losses` must be a collection of loss names ({', '.join(known)}), "
                                f"got {losses!r}") from None
    for n in names:
        if not isinstance(n, str) or n not in known:
            raise InvalidValueError(f"`losses`: unknown loss {n!r}; the {kind} are {', '.join(known)} "
                                    f"(losses=() gives the roofline)")
    return frozenset(names)


def check_losses(losses) -> frozenset:
    """`losses` as a frozenset of loss names (the `losses=` keyword of the estimates), or a clear error."""
    return _loss_names(losses, LOSSES, "losses")


def _interpolated(x, points, values):
    """A table's efficiency at `x`: each value holds from its point on, as the table gives it, and between two
    points the efficiency rises linearly from one to the next (the last value beyond the largest point).

    Linear in `x` between points, so that the time, x / efficiency, never falls as x grows (a step table would
    run a kernel just above a step faster than a smaller one just below it): between points a and b the time's
    slope has the sign of e(a) − a·(e(b) − e(a))/(b − a), positive for every table of ``estimate.toml``
    (tests/test_estimate.py checks it).
    """
    order = np.argsort(points)
    return np.interp(np.asarray(x, dtype=float), np.asarray(points, dtype=float)[order],
                     np.asarray(values, dtype=float)[order])


def _matmul_efficiency(gflop):
    """A matmul's efficiency by its size (GFLOP on one chip): the [matmul] table of estimate.toml, interpolated."""
    c = constants()["matmul"]
    return _interpolated(gflop, c["gflop"], c["efficiency"])


def table_size(peak_flops_per_s) -> float:
    """The factor that turns a kernel's GFLOP on a chip of peak `peak_flops_per_s` into the [matmul] table's sizes.

    The table was measured on an A100 (``[matmul] reference_chip``, at its bf16 peak in chips.toml). What costs a
    small kernel its efficiency (its launch, filling the pipeline, the last partial wave) takes a time, not a
    number of FLOPs, so a kernel of f FLOPs at peak C runs as the table's kernel that takes as long on the A100:
    f · C_A100 / C. 1 on an A100 in bf16, about 0.16 on an H100 in fp8. Used by the inference estimates
    (chapter 8); the training estimate reads the table at a kernel's own GFLOP (see estimate.toml).
    """
    from ._specs import chip

    ref = constants()["matmul"].get("reference_chip")
    return 1.0 if not ref else chip(ref).peak_flops_per_s(dtype="bf16") / peak_flops_per_s


def _hbm_efficiency(mb):
    """A memory-bound kernel's share of HBM bandwidth by the MB it moves: the [hbm] table, interpolated."""
    c = constants()["hbm"]
    return _interpolated(mb, c["mb"], c["efficiency"])


def model_shape(m):
    """(D, F_eff, N, K, H, V, c) of a model for the per-layer kernels (F_eff: the MLP width a token uses)."""
    c = 3 if m.gated else 2
    F = m.F * (m.k or 1) if m.is_moe else m.F
    return m.D, F, m.N, m.K, m.H, m.V, c


#: The losses of the inference estimates, in the order their breakdown switches them on.
INFERENCE_LOSSES = ("kernel_efficiency", "kernel_overhead", "tensor_collectives")

INFERENCE_LOSS_SOURCES = {
    "kernel_efficiency": "per-layer matmuls at calculon's A100 efficiency by size (scaled as fitted for training; "
                         "a kernel read at the size that takes as long on the A100) and weight and KV-cache reads at "
                         "its HBM efficiency by transfer size (Isaev et al. 2023), the cache once per query head "
                         "with a per-query-head decode kernel (TensorRT-LLM's gpt_attention docs); "
                         "a GPU prefill's matmuls and attention kernel in whole waves of 128 x 128 tiles over the SMs "
                         "(NVIDIA, Matrix Multiplication Background User's Guide, ch. 3)",
    "kernel_overhead": "a fixed cost per layer per forward pass (kernel launches and gaps), fitted on NIM's two "
                       "H100 figures",
    "tensor_collectives": "two AllReduces of [tokens, D] per layer over the tensor-parallel chips (Shoeybi et al. "
                          "2019), NVLink at 80% with 10 us latency (nccl-tests #212; calculon), ICI by "
                          "allreduce_time_s",
}


def check_inference_losses(losses) -> frozenset:
    """`losses` of an inference estimate as a frozenset of names, or a clear error."""
    return _loss_names(losses, INFERENCE_LOSSES, "inference losses")


#: The parallel axes whose degrees the training validation covers (what :func:`validation_coverage` reads).
VALIDATED_AXES = ("data", "fsdp", "tensor", "pipeline", "expert")


@lru_cache(maxsize=None)
def validation_coverage() -> tuple[dict, ...]:
    """Every run of the training validation (``scalelib/data/training_runs.toml``, its ``[[run]]``,
    ``[[step_run]]`` and ``[[multislice_run]]`` tables): its name, chip, the degree of each of
    :data:`VALIDATED_AXES` (1 where the run has none; data parallelism counts the slices a run joins over DCN)
    and its reported utilisation (MFU or HFU; None for a run measured as a step time). Data only: the search
    (:func:`~scalelib.search_plans`) compares the plan it recommends with these.
    """
    text = resources.files("scalelib").joinpath("data/training_runs.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    runs = []
    for table in ("run", "step_run", "multislice_run"):
        for r in data.get(table, ()):
            util = r["reported"] if r.get("quantity") in ("mfu", "hfu") else None
            degrees = {a: int(r.get(a, 1)) for a in VALIDATED_AXES}
            degrees["data"] *= int(r.get("slices", 1))
            runs.append({"name": r["name"], "chip": r["chip"], "utilisation": util, **degrees})
    return tuple(runs)

