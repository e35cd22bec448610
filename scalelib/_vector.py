"""Vector units (chapters 1, 2, 12): the rate of a chip's elementwise arithmetic, and its roofline.

Matmuls run on a TPU's MXUs or a GPU's tensor cores; everything elementwise (adds,
activations, dot products, reductions) runs on the vector units: a TPU TensorCore's
VPU, a GPU SM's CUDA cores. Their peak rate is a count of ALUs times a clock:

    C_vec = cores · ALUs per core · f_clock · k

with k the FLOPs one ALU is credited per cycle (1 for one operation, 2 when a fused
multiply-add counts as two, as GPU data sheets count it). It is one or two orders of
magnitude below the matmul rate, so the vector units' critical intensity C_vec / W
is a few FLOP/B where the MXU's is a few hundred (How to Scale Your Model, ch. 1 and 2).
"""

from __future__ import annotations

import numpy as np

from ._derivation import Derivation, derivable, explain, q
from ._errors import InvalidValueError
from ._roofline import _bandwidth
from ._specs import chip as _chip
from ._units import fmt  # noqa: F401  (the examples use it)
from ._validate import name as _name, number, shown

#: What a rate is counted for: the whole chip, or one TensorCore (TPU) / SM (GPU).
PER = ("chip", "core")
#: Which clock: the boost (highest sustained) clock, or the base clock.
CLOCKS = {"boost": "clock_ghz_boost", "base": "clock_ghz_base"}


@derivable
def vector_flops_per_s(chip, *, per="chip", flops_per_cycle=1, clock="boost"):
    """Peak rate of a chip's vector units (a TPU's VPUs, a GPU's CUDA cores): ALUs × clock.

    The book counts one operation per ALU per cycle (a v5p TensorCore's VPU: about
    7e12 FLOP/s); NVIDIA's data sheets count a fused multiply-add as 2 FLOPs
    (``flops_per_cycle=2``), which doubles the figure.

    Formula:
        C_vec = n · ALUs · f · k   (n = cores per chip for ``per="chip"``, 1 for ``per="core"``)

    Args:
        chip: a chip name or a ChipSpec with ``vector_alus_per_core`` and a clock.
        per: ``"chip"`` (default) or ``"core"`` (one TPU TensorCore, one GPU SM).
        flops_per_cycle: the FLOPs credited to one ALU per cycle, k > 0: 1 (default)
            counts each operation, 2 counts a multiply-add as two.
        clock: ``"boost"`` (default) or ``"base"``: which of the chip's clocks.

    Returns:
        FLOP/s.

    Chapter:
        1 (Rooflines), 2 (TPUs), 12 (GPUs)

    Example:
        >>> fmt(vector_flops_per_s("tpu-v5p", per="core"), "FLOP/s")
        '7.17e12 FLOP/s'
        >>> fmt(vector_flops_per_s("h100", flops_per_cycle=2), "FLOP/s")
        '6.69e13 FLOP/s'
    """
    spec = _chip(chip)
    per = _name("per", per, PER, "unit of count")
    clock = _name("clock", clock, CLOCKS, "clock")
    k = number("flops_per_cycle", flops_per_cycle, positive=True)
    if np.ndim(k):
        raise InvalidValueError(f"`flops_per_cycle` must be a single number, got {shown(flops_per_cycle)}")
    what = f"the vector rate of {spec.name}"
    alus = spec._require("vector_alus_per_core", what)
    ghz = spec._require(CLOCKS[clock], what)
    n = 1 if per == "core" else spec._require("cores", what)
    value = n * alus * ghz * 1e9 * k
    core = "TensorCore" if spec.family == "tpu" else "SM" if spec.family == "gpu" else "core"
    where = (f"ALUs: vector ALUs per {core}; f: the {clock} clock; k: FLOPs credited to an ALU per cycle",)
    if per == "core":
        return Derivation(f"C_vec({spec.name}, per {core})", "ALUs · f · k",
                          lambda: f"{alus} · {q(ghz * 1e9, 'Hz')} · {q(k)}", value, "FLOP/s", where=where)
    return Derivation(f"C_vec({spec.name})", "n · ALUs · f · k",
                      lambda: f"{n} · {alus} · {q(ghz * 1e9, 'Hz')} · {q(k)}", value, "FLOP/s",
                      where=(f"n: {core}s per chip; " + where[0],))


@derivable
def vector_critical_intensity(chip, *, per="chip", bandwidth="hbm", flops_per_cycle=1, clock="boost"):
    """The critical intensity of a chip's vector units: above it elementwise work is compute-bound.

    A few FLOP/B (a v5p TensorCore's VPU against the chip's HBM: about 2.6, the book's
    "around 3"), where the matmul units need a few hundred: an elementwise operation
    such as a dot product (about 0.5 FLOP/B in bf16) is memory-bound even here.

    Formula:
        I_vec = C_vec / W

    Args:
        chip: a chip name or a ChipSpec with ``vector_alus_per_core`` and a clock.
        per: ``"chip"`` (default; every core's vector units) or ``"core"`` (one
            TensorCore or SM against the chip's whole bandwidth, as the book counts it).
        bandwidth: which W: ``"hbm"`` (default), ``"vmem"``, ``"ici"``, ...
        flops_per_cycle, clock: as in :func:`vector_flops_per_s`.

    Returns:
        FLOP/B.

    Chapter:
        1 (Rooflines), 2 (TPUs), 12 (GPUs)

    Example:
        >>> round(vector_critical_intensity("tpu-v5p", per="core"), 2)
        2.56
        >>> print(explain(vector_critical_intensity, "tpu-v5p", per="core"))
        C_vec(tpu-v5p, per TensorCore) = ALUs · f · k = 4096 · 1.75 GHz · 1 = 7.17e12 FLOP/s
          where ALUs: vector ALUs per TensorCore; f: the boost clock; k: FLOPs credited to an ALU per cycle
        I_vec(tpu-v5p, hbm) = C_vec / W = 7.17e12 FLOP/s / 2.8 TB/s = 2.56 FLOP/B
          where W: the whole chip's bandwidth (hbm)
    """
    spec = _chip(chip)
    bandwidth = _bandwidth(bandwidth)
    C = explain(vector_flops_per_s, spec, per=per, flops_per_cycle=flops_per_cycle, clock=clock)
    W = explain(spec.bytes_per_s, bandwidth=bandwidth)
    return Derivation(f"I_vec({spec.name}, {bandwidth})", "C_vec / W",
                      lambda: f"{q(C.value, 'FLOP/s')} / {q(W.value, 'B/s')}", C.value / W.value, "FLOP/B", (C,),
                      where=(f"W: the whole chip's bandwidth ({bandwidth})",))

