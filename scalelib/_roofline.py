"""Rooflines (chapter 1): how long an operation takes at best and at worst.

An operation that does ``FLOPs`` of arithmetic and moves ``bytes`` over a link
of bandwidth W on a chip of peak rate C needs

    T_math = FLOPs / C            T_comms = bytes / W
    T_lower = max(T_math, T_comms)    (computation and transfer overlap fully)
    T_upper = T_math + T_comms        (they do not overlap at all)

Its arithmetic intensity FLOPs / bytes against the chip's critical intensity
C / W says which of the two binds. Every function takes numpy arrays, so a sweep
is one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._derivation import Derivation, plain, q, result
from ._errors import InvalidValueError, require_nonnegative, require_positive
from ._specs import ChipSpec, bytes_per_value, chip as _chip
from ._units import fmt


def arithmetic_intensity(flops, bytes_moved, *, explain: bool = False):
    """Arithmetic intensity = FLOPs / bytes (FLOP/B). Chapter 1.

    Args:
        flops: floating-point operations done (FLOP).
        bytes_moved: bytes read and written over the link that matters (B).

    >>> arithmetic_intensity(2 * 1024**3, 3 * 2 * 1024**2)
    341.33...
    """
    require_nonnegative(flops=flops)
    require_positive(bytes_moved=bytes_moved)
    value = plain(np.asarray(flops, dtype=float) / np.asarray(bytes_moved, dtype=float))
    return result(explain, "intensity", "FLOPs / bytes", f"{q(flops, 'FLOP')} / {q(bytes_moved, 'B')}", value, "FLOP/B")


def critical_intensity(chip: str | ChipSpec, dtype: str = "bf16", bandwidth: str = "hbm", *, explain: bool = False):
    """A chip's critical intensity = C / W (FLOP/B): above it an operation is compute-bound. Chapter 1.

    Args:
        chip: a chip name (``"tpu-v5e"``) or a ChipSpec.
        dtype: the dtype of the arithmetic, which sets C (``"bf16"``, ``"int8"``, ``"fp8"``, ...).
        bandwidth: which W: ``"hbm"`` (default), ``"ici"``, ``"pcie"``, ``"dcn"``, ``"nvlink"``.

    >>> round(critical_intensity("tpu-v5e"))
    240
    """
    spec = _chip(chip)
    C, W = spec.flops_per_s(dtype), spec.bandwidth(bandwidth)
    return result(
        explain, f"I_crit({spec.name}, {dtype}, {bandwidth})", "C / W",
        f"{q(C, 'FLOP/s')} / {q(W, 'B/s')}", C / W, "FLOP/B",
    )


def t_math(flops, chip: str | ChipSpec, dtype: str = "bf16", *, explain: bool = False):
    """T_math = FLOPs / C (seconds): the time the arithmetic alone takes. Chapter 1."""
    require_nonnegative(flops=flops)
    spec = _chip(chip)
    C = spec.flops_per_s(dtype)
    value = plain(np.asarray(flops, dtype=float) / C)
    return result(explain, "T_math", "FLOPs / C", f"{q(flops, 'FLOP')} / {q(C, 'FLOP/s')}", value, "s")


def t_comms(bytes_moved, chip: str | ChipSpec, bandwidth: str = "hbm", *, explain: bool = False):
    """T_comms = bytes / W (seconds): the time the data movement alone takes. Chapter 1."""
    require_nonnegative(bytes_moved=bytes_moved)
    spec = _chip(chip)
    W = spec.bandwidth(bandwidth)
    value = plain(np.asarray(bytes_moved, dtype=float) / W)
    return result(explain, "T_comms", "bytes / W", f"{q(bytes_moved, 'B')} / {q(W, 'B/s')}", value, "s")


@dataclass(frozen=True)
class Roofline:
    """The roofline of one operation (or of a sweep, with arrays) on one chip."""

    spec: ChipSpec
    dtype: str
    bandwidth: str
    flops: object
    bytes_moved: object
    t_math_s: object
    t_comms_s: object
    intensity: object
    critical_intensity: float

    @property
    def chip(self) -> str:
        return self.spec.name

    @property
    def t_lower_s(self):
        """Optimistic bound: computation and communication overlap, max(T_math, T_comms)."""
        return plain(np.maximum(self.t_math_s, self.t_comms_s))

    @property
    def t_upper_s(self):
        """Pessimistic bound: no overlap at all, T_math + T_comms."""
        return plain(np.add(self.t_math_s, self.t_comms_s))

    @property
    def bound(self):
        """Which resource binds: ``"compute"``, or ``"memory"`` (HBM, VMEM) / ``"communication"`` (a link)."""
        other = "memory" if self.bandwidth in ("hbm", "vmem") else "communication"
        labels = np.where(np.asarray(self.t_math_s) >= np.asarray(self.t_comms_s), "compute", other)
        return str(labels) if labels.ndim == 0 else labels

    @property
    def flops_per_s(self):
        """Achieved rate at the optimistic bound, FLOPs / T_lower (FLOP/s)."""
        return plain(np.asarray(self.flops, dtype=float) / self.t_lower_s)

    def explain(self) -> Derivation:
        """The derivation of the optimistic bound, with T_math and T_comms spelled out."""
        math_ = t_math(self.flops, self.spec, self.dtype, explain=True)
        comms = t_comms(self.bytes_moved, self.spec, self.bandwidth, explain=True)
        return Derivation(
            "T_lower", "max(T_math, T_comms)", f"max({q(self.t_math_s, 's')}, {q(self.t_comms_s, 's')})",
            self.t_lower_s, "s", (math_, comms),
        )

    def __str__(self) -> str:
        return (
            f"{self.chip} ({self.dtype}, {self.bandwidth}): T_math = {fmt(self.t_math_s, 's')}, "
            f"T_comms = {fmt(self.t_comms_s, 's')}, bound by {self.bound}; "
            f"time between {fmt(self.t_lower_s, 's')} and {fmt(self.t_upper_s, 's')}; "
            f"intensity {fmt(self.intensity, 'FLOP/B')} vs critical {fmt(self.critical_intensity, 'FLOP/B')}"
        )


def roofline(flops, bytes_moved, chip: str | ChipSpec, dtype: str = "bf16", bandwidth: str = "hbm") -> Roofline:
    """The roofline of an operation doing `flops` FLOPs and moving `bytes_moved` bytes. Chapter 1.

    >>> r = roofline(2 * 4096**3, 3 * 2 * 4096**2, "tpu-v5e")
    >>> r.bound, fmt(r.t_lower_s, "s")
    ('compute', '698 µs')
    """
    spec = _chip(chip)
    flops, bytes_moved = (plain(a) for a in np.broadcast_arrays(np.asarray(flops, dtype=float),
                                                                np.asarray(bytes_moved, dtype=float)))
    return Roofline(
        spec=spec,
        dtype=dtype,
        bandwidth=bandwidth,
        flops=flops,
        bytes_moved=bytes_moved,
        t_math_s=t_math(flops, spec, dtype),
        t_comms_s=t_comms(bytes_moved, spec, bandwidth),
        intensity=arithmetic_intensity(flops, bytes_moved),
        critical_intensity=critical_intensity(spec, dtype, bandwidth),
    )


def attainable_flops_per_s(intensity, chip: str | ChipSpec, dtype: str = "bf16", bandwidth: str = "hbm"):
    """The roof: min(C, intensity x W) in FLOP/s for operations of the given intensity. Chapter 1."""
    require_nonnegative(intensity=intensity)
    spec = _chip(chip)
    return plain(np.minimum(spec.flops_per_s(dtype), np.asarray(intensity, dtype=float) * spec.bandwidth(bandwidth)))


def matmul_flops(B, D, F, *, explain: bool = False):
    """FLOPs of the matmul [B, D] x [D, F] = 2·B·D·F (one multiply and one add per term). Chapter 1."""
    require_positive(B=B, D=D, F=F)
    value = plain(2 * np.asarray(B, dtype=float) * np.asarray(D, dtype=float) * np.asarray(F, dtype=float))
    return result(explain, "FLOPs", "2·B·D·F", f"2·{q(B)}·{q(D)}·{q(F)}", value, "FLOP")


def matmul_bytes(B, D, F, dtype: str = "bf16", weight_dtype: str | None = None, out_dtype: str | None = None, *, explain: bool = False):
    """Bytes a matmul [B, D] x [D, F] -> [B, F] reads and writes: B·D·x + D·F·w + B·F·o. Chapter 1.

    Args:
        dtype: dtype of the input activations [B, D] (x bytes each).
        weight_dtype: dtype of the weights [D, F] (w bytes); defaults to `dtype`.
        out_dtype: dtype of the output [B, F] (o bytes); defaults to `dtype`.
    """
    require_positive(B=B, D=D, F=F)
    x = bytes_per_value(dtype)
    w = bytes_per_value(weight_dtype or dtype)
    o = bytes_per_value(out_dtype or dtype)
    B_, D_, F_ = (np.asarray(v, dtype=float) for v in (B, D, F))
    value = plain(x * B_ * D_ + w * D_ * F_ + o * B_ * F_)
    return result(
        explain, "bytes", "x·B·D + w·D·F + o·B·F",
        f"{q(x)}·{q(B)}·{q(D)} + {q(w)}·{q(D)}·{q(F)} + {q(o)}·{q(B)}·{q(F)}", value, "B",
    )


def matmul_intensity(B, D, F, dtype: str = "bf16", weight_dtype: str | None = None, out_dtype: str | None = None, *, explain: bool = False):
    """Arithmetic intensity of the matmul [B, D] x [D, F]: 2BDF / bytes; about B for bf16 when B << D, F. Chapter 1."""
    flops = matmul_flops(B, D, F, explain=True)
    nbytes = matmul_bytes(B, D, F, dtype, weight_dtype, out_dtype, explain=True)
    value = plain(np.asarray(flops.value) / np.asarray(nbytes.value))
    return result(explain, "intensity", "FLOPs / bytes", f"{q(flops.value, 'FLOP')} / {q(nbytes.value, 'B')}",
                  value, "FLOP/B", (flops, nbytes))


def matmul_roofline(B, D, F, chip: str | ChipSpec, dtype: str = "bf16", weight_dtype: str | None = None,
                    out_dtype: str | None = None, compute_dtype: str | None = None) -> Roofline:
    """The HBM roofline of the matmul [B, D] x [D, F] on `chip`. Chapter 1.

    `compute_dtype` (which sets C) defaults to `dtype`; with int8 weights and bf16
    activations the arithmetic runs in bf16.
    """
    return roofline(matmul_flops(B, D, F), matmul_bytes(B, D, F, dtype, weight_dtype, out_dtype),
                    chip, compute_dtype or dtype)


def critical_batch_size(chip: str | ChipSpec, dtype: str = "bf16", weight_dtype: str | None = None,
                        D=None, F=None, *, bandwidth: str = "hbm", explain: bool = False):
    """The batch B above which a matmul [B, D] x [D, F] is compute-bound on `chip`. Chapter 1.

    With D and F large (the default, ``D=F=None``), the weight bytes w·D·F dominate
    and intensity ≈ 2·B / w, so B_crit = I_crit · w / 2: about 240 on TPU v5e in
    bf16, half that with int8 weights and bf16 arithmetic. With D and F given, the
    activation bytes count too: B_crit = I·w·D·F / (2·D·F − I·(x·D + x·F)).
    `dtype` is that of the activations (input and output) and of the
    arithmetic; `weight_dtype` defaults to it. `bandwidth` names the link the
    weights stream over: HBM by default, ``"pcie"`` for weights kept in host memory.

    >>> round(critical_batch_size("tpu-v5e"))
    240
    """
    ci = critical_intensity(chip, dtype, bandwidth, explain=True)
    I = ci.value
    x = bytes_per_value(dtype)
    w = bytes_per_value(weight_dtype or dtype)
    if D is None and F is None:
        value = I * w / 2
        return result(explain, "B_crit", "I_crit · w / 2", f"{q(I)} · {q(w)} / 2", value, "tokens", (ci,))
    if D is None or F is None:
        raise InvalidValueError("give both `D` and `F` (or neither, for the large-matrix limit)")
    require_positive(D=D, F=F)
    D_, F_ = np.asarray(D, dtype=float), np.asarray(F, dtype=float)
    denominator = 2 * D_ * F_ - I * (x * D_ + x * F_)
    value = plain(np.where(denominator > 0, I * w * D_ * F_ / np.where(denominator > 0, denominator, 1), np.inf))
    return result(explain, "B_crit", "I·w·D·F / (2·D·F − I·(x·D + x·F))",
                  f"{q(I)}·{q(w)}·{q(D)}·{q(F)} / (2·{q(D)}·{q(F)} − {q(I)}·({q(x)}·{q(D)} + {q(x)}·{q(F)}))",
                  value, "tokens", (ci,))
