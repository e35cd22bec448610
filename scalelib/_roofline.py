"""Rooflines (chapter 1): how long an operation takes at best and at worst.

An operation that does ``FLOPs`` of arithmetic and moves ``nbytes`` bytes over a
link of bandwidth W on a chip of peak rate C needs

    T_math = FLOPs / C            T_comms = nbytes / W
    T_lower = max(T_math, T_comms)    (computation and transfer overlap fully)
    T_upper = T_math + T_comms        (they do not overlap at all)

Its arithmetic intensity FLOPs / nbytes against the chip's critical intensity
C / W says which of the two binds. Every function takes numpy arrays, so a sweep
is one call; every one returns numbers, and :func:`~scalelib.explain` gives the
derivation of any of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError
from ._specs import BANDWIDTHS, ChipSpec, bytes_per_value, chip as _chip, dtype_name
from ._units import fmt
from ._validate import name as _name, nonnegative, positive, share


def _bandwidth(bandwidth) -> str:
    return _name("bandwidth", bandwidth, BANDWIDTHS, "bandwidth")


def _rates(chip, dtype, bandwidth):
    """(spec, dtype, bandwidth, C derivation, W derivation), every argument checked."""
    spec = _chip(chip)
    dtype = dtype_name(dtype)
    bandwidth = _bandwidth(bandwidth)
    return (spec, dtype, bandwidth, explain(spec.peak_flops_per_s, dtype=dtype),
            explain(spec.bytes_per_s, bandwidth=bandwidth))


def _broadcastable(**arrays) -> None:
    """Nothing when the arguments' shapes broadcast together (numpy's rule), else an error naming each and its shape.

    Shared by the formula functions that take several arrays for a sweep (here and in scalelib._tiles).
    """
    shapes = {k: np.shape(v) for k, v in arrays.items() if v is not None}
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        named = [f"`{k}` has shape {s}" for k, s in shapes.items() if s != ()]
        raise InvalidValueError(f"{', '.join(named[:-1])} and {named[-1]}: these arrays do not broadcast together; "
                                f"give them one shape (or shapes numpy broadcasts, e.g. (3, 1) and (4,)), or single "
                                f"numbers") from None


@derivable
def arithmetic_intensity(flops, nbytes):
    """Arithmetic intensity of an operation: FLOPs / bytes moved.

    Formula:
        I = FLOPs / nbytes

    Args:
        flops: floating-point operations done (FLOP), >= 0.
        nbytes: bytes read and written over the link that matters (B), > 0.

    Returns:
        FLOP/B.

    Chapter:
        1 (Rooflines)

    Example:
        >>> round(arithmetic_intensity(2 * 1024**3, 3 * 2 * 1024**2), 1)
        341.3
    """
    F, N = nonnegative("flops", flops), positive("nbytes", nbytes)
    _broadcastable(flops=F, nbytes=N)
    return Derivation("I", "FLOPs / nbytes", lambda: f"{q(flops, 'FLOP')} / {q(nbytes, 'B')}",
                      plain(np.asarray(F) / np.asarray(N)), "FLOP/B")


@derivable
def critical_intensity(chip, *, dtype="bf16", bandwidth="hbm"):
    """A chip's critical intensity: above it an operation is compute-bound.

    Formula:
        I_crit = C / W

    Args:
        chip: a chip name (``"tpu-v5e"``) or a ChipSpec.
        dtype: the dtype of the arithmetic, which sets C (``"bf16"``, ``"int8"``, ``"fp8"``, ...).
        bandwidth: which W: ``"hbm"`` (default), ``"ici"``, ``"pcie"``, ``"dcn"``, ``"nvlink"``, ``"vmem"``.

    Returns:
        FLOP/B.

    Chapter:
        1 (Rooflines)

    Example:
        >>> round(critical_intensity("tpu-v5e"))
        240
        >>> round(critical_intensity("h100", dtype="fp8"))
        597
    """
    spec, dtype, bandwidth, C, W = _rates(chip, dtype, bandwidth)
    return Derivation(f"I_crit({spec.name}, {dtype}, {bandwidth})", "C / W",
                      lambda: f"{q(C.value, 'FLOP/s')} / {q(W.value, 'B/s')}", C.value / W.value, "FLOP/B")


@derivable
def t_math_s(flops, chip, *, dtype="bf16", efficiency=1.0):
    """The time the arithmetic alone takes at the chip's peak rate (or a share of it).

    Real kernels reach about 80–85% of the data-sheet peak on H100 and B200 and about
    95% on TPUs (How to Scale Your Model, ch. 1); pass that share as `efficiency`
    where a question asks for a realistic time.

    Formula:
        T_math = FLOPs / (efficiency · C)

    Args:
        flops: FLOPs to do (FLOP), >= 0.
        chip: a chip name or a ChipSpec.
        dtype: the dtype of the arithmetic, which sets C.
        efficiency: the share of the peak rate reached, in (0, 1]; 1 is the peak.

    Returns:
        seconds (s).

    Chapter:
        1 (Rooflines)

    Example:
        >>> fmt(t_math_s(2 * 4096**3, "tpu-v5e"), "s")
        '698 µs'
    """
    F = nonnegative("flops", flops)
    eff = _efficiency(efficiency)
    C = explain(_chip(chip).peak_flops_per_s, dtype=dtype)
    if eff == 1:
        return Derivation("T_math", "FLOPs / C", lambda: f"{q(flops, 'FLOP')} / {q(C.value, 'FLOP/s')}",
                          plain(np.asarray(F) / C.value), "s")
    return Derivation("T_math", "FLOPs / (efficiency · C)",
                      lambda: f"{q(flops, 'FLOP')} / ({q(eff)} · {q(C.value, 'FLOP/s')})",
                      plain(np.asarray(F) / (eff * C.value)), "s")


def _efficiency(efficiency) -> float:
    return share("efficiency", efficiency)


@derivable
def t_comms_s(nbytes, chip, *, bandwidth="hbm"):
    """The time the data movement alone takes at the link's bandwidth.

    Formula:
        T_comms = nbytes / W

    Args:
        nbytes: bytes to move (B), >= 0.
        chip: a chip name or a ChipSpec.
        bandwidth: which W: ``"hbm"`` (default), ``"ici"`` (one way per link), ``"pcie"``, ...

    Returns:
        seconds (s).

    Chapter:
        1 (Rooflines)

    Example:
        >>> fmt(t_comms_s(140e9, "h200"), "s")
        '29.2 ms'
    """
    N = nonnegative("nbytes", nbytes)
    W = explain(_chip(chip).bytes_per_s, bandwidth=bandwidth)
    return Derivation("T_comms", "nbytes / W", lambda: f"{q(nbytes, 'B')} / {q(W.value, 'B/s')}",
                      plain(np.asarray(N) / W.value), "s")


@dataclass(frozen=True)
class Roofline:
    """The roofline of one operation (or of a sweep, with arrays) on one chip.

    Its fields and properties are plain numbers (or arrays): times in seconds,
    intensities in FLOP/B, rates in FLOP/s. Build one with :func:`roofline` or
    :func:`matmul_roofline`.
    """

    spec: ChipSpec
    dtype: str
    bandwidth: str
    flops: object
    nbytes: object
    t_math_s: object
    t_comms_s: object
    intensity: object
    critical_intensity: float  # efficiency · C / W: where the roof's two parts meet
    efficiency: float = 1.0

    @property
    def chip(self) -> str:
        return self.spec.name

    @property
    def t_lower_s(self):
        """Optimistic bound: computation and communication overlap, max(T_math, T_comms) (s)."""
        return plain(np.maximum(self.t_math_s, self.t_comms_s))

    @property
    def t_upper_s(self):
        """Pessimistic bound: no overlap at all, T_math + T_comms (s)."""
        return plain(np.add(self.t_math_s, self.t_comms_s))

    @property
    def bound(self):
        """Which resource binds: ``"compute"``, or ``"memory"`` (HBM, VMEM) / ``"communication"`` (a link)."""
        other = "memory" if self.bandwidth in ("hbm", "vmem") else "communication"
        labels = np.where(np.asarray(self.t_math_s) >= np.asarray(self.t_comms_s), "compute", other)
        return str(labels) if labels.ndim == 0 else labels

    @property
    def attainable_flops_per_s(self):
        """Rate reached at the optimistic bound, FLOPs / T_lower (FLOP/s)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return plain(np.where(np.asarray(self.t_lower_s) > 0,
                                  np.asarray(self.flops, dtype=float) / np.asarray(self.t_lower_s), 0.0))

    def __str__(self) -> str:
        return (
            f"{self.chip} ({self.dtype}, {self.bandwidth}): T_math = {fmt(self.t_math_s, 's')}, "
            f"T_comms = {fmt(self.t_comms_s, 's')}, bound by {self.bound}; "
            f"time between {fmt(self.t_lower_s, 's')} and {fmt(self.t_upper_s, 's')}; "
            f"intensity {fmt(self.intensity, 'FLOP/B')} vs critical {fmt(self.critical_intensity, 'FLOP/B')}"
        )


def _roofline(flops, nbytes, chip, dtype, bandwidth, steps=(), efficiency=1.0) -> Derivation:
    F = nonnegative("flops", flops)
    N = nonnegative("nbytes", nbytes)
    _broadcastable(flops=F, nbytes=N)
    eff = _efficiency(efficiency)
    spec, dtype, bandwidth, C, W = _rates(chip, dtype, bandwidth)
    F, N = (plain(a) for a in np.broadcast_arrays(np.asarray(F, dtype=float), np.asarray(N, dtype=float)))
    math_ = explain(t_math_s, F, spec, dtype=dtype, efficiency=eff)
    comms = explain(t_comms_s, N, spec, bandwidth=bandwidth)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = plain(np.where(np.asarray(N) > 0, np.asarray(F) / np.where(np.asarray(N) > 0, N, 1), np.inf))
    result = Roofline(spec, dtype, bandwidth, F, N, math_.value, comms.value, intensity, eff * C.value / W.value, eff)
    return Derivation("T_lower", "max(T_math, T_comms)",
                      lambda: f"max({q(result.t_math_s, 's')}, {q(result.t_comms_s, 's')})",
                      result.t_lower_s, "s", (*steps, math_, comms), returns=result)


@derivable
def roofline(flops, nbytes, chip, *, dtype="bf16", bandwidth="hbm", efficiency=1.0) -> Roofline:
    """The roofline of an operation doing `flops` FLOPs and moving `nbytes` bytes on `chip`.

    Formula:
        T_lower = max(FLOPs / C, nbytes / W),   T_upper = FLOPs / C + nbytes / W

    Args:
        flops: FLOPs (FLOP), >= 0.
        nbytes: bytes moved over the link (B), >= 0.
        chip: a chip name or a ChipSpec.
        dtype: the dtype of the arithmetic (sets C).
        bandwidth: which W (``"hbm"`` by default).
        efficiency: the share of the peak rate the arithmetic reaches, in (0, 1].

    Returns:
        A :class:`Roofline` (times in s); ``explain(roofline, ...)`` derives its T_lower.

    Chapter:
        1 (Rooflines)

    Example:
        >>> r = roofline(2 * 4096**3, 3 * 2 * 4096**2, "tpu-v5e")
        >>> r.bound, fmt(r.t_lower_s, "s")
        ('compute', '698 µs')
    """
    return _roofline(flops, nbytes, chip, dtype, bandwidth, efficiency=efficiency)


@derivable
def attainable_flops_per_s(intensity, chip, *, dtype="bf16", bandwidth="hbm"):
    """The roof: the highest rate an operation of the given intensity can reach on `chip`.

    Formula:
        min(C, I · W)

    Args:
        intensity: arithmetic intensity (FLOP/B), >= 0.
        chip: a chip name or a ChipSpec.
        dtype: the dtype of the arithmetic (sets C).
        bandwidth: which W (``"hbm"`` by default).

    Returns:
        FLOP/s.

    Chapter:
        1 (Rooflines)

    Example:
        >>> fmt(attainable_flops_per_s(100, "tpu-v5e"), "FLOP/s")
        '8.2e13 FLOP/s'
    """
    I = nonnegative("intensity", intensity)
    spec, dtype, bandwidth, C, W = _rates(chip, dtype, bandwidth)
    return Derivation("C_attainable", "min(C, I · W)",
                      lambda: f"min({q(C.value, 'FLOP/s')}, {q(intensity, 'FLOP/B')} · {q(W.value, 'B/s')})",
                      plain(np.minimum(C.value, np.asarray(I) * W.value)), "FLOP/s")


@derivable
def matmul_flops(B, D, F):
    """FLOPs of the matmul [B, D] x [D, F]: one multiply and one add per term.

    Formula:
        FLOPs = 2 · B · D · F

    Args:
        B, D, F: the matrix sides (> 0; arrays for a sweep).

    Returns:
        FLOP.

    Chapter:
        1 (Rooflines)

    Example:
        >>> matmul_flops(4096, 8192, 8192)
        549755813888.0
    """
    B_, D_, F_ = positive("B", B), positive("D", D), positive("F", F)
    _broadcastable(B=B_, D=D_, F=F_)
    return Derivation("FLOPs", "2·B·D·F", lambda: f"2·{q(B)}·{q(D)}·{q(F)}",
                      plain(2 * np.asarray(B_) * np.asarray(D_) * np.asarray(F_)), "FLOP",
                      where=("B, D, F: the sides of [B, D] x [D, F]",))


def _matmul_dtypes(dtype, weight_dtype, out_dtype):
    x = dtype_name(dtype)
    w = x if weight_dtype is None else dtype_name(weight_dtype, arg="weight_dtype")
    o = x if out_dtype is None else dtype_name(out_dtype, arg="out_dtype")
    return x, w, o


@derivable
def matmul_bytes(B, D, F, *, dtype="bf16", weight_dtype=None, out_dtype=None):
    """Bytes the matmul [B, D] x [D, F] -> [B, F] reads and writes (each array once).

    Formula:
        nbytes = x·B·D + w·D·F + o·B·F

    Args:
        B, D, F: the matrix sides (> 0).
        dtype: dtype of the input activations [B, D] (x bytes each).
        weight_dtype: dtype of the weights [D, F] (w bytes); defaults to `dtype`.
        out_dtype: dtype of the output [B, F] (o bytes); defaults to `dtype`.

    Returns:
        bytes (B).

    Chapter:
        1 (Rooflines)

    Example:
        >>> fmt(matmul_bytes(4096, 8192, 8192), "B")
        '268 MB'
    """
    B_, D_, F_ = positive("B", B), positive("D", D), positive("F", F)
    _broadcastable(B=B_, D=D_, F=F_)
    xd, wd, od = _matmul_dtypes(dtype, weight_dtype, out_dtype)
    x, w, o = bytes_per_value(xd), bytes_per_value(wd), bytes_per_value(od)
    B_, D_, F_ = np.asarray(B_), np.asarray(D_), np.asarray(F_)
    return Derivation(
        "nbytes", "x·B·D + w·D·F + o·B·F",
        lambda: f"{q(x)}·{q(B)}·{q(D)} + {q(w)}·{q(D)}·{q(F)} + {q(o)}·{q(B)}·{q(F)}",
        plain(x * B_ * D_ + w * D_ * F_ + o * B_ * F_), "B",
        where=(f"x, w, o: bytes per value of the input ({xd}), weights ({wd}) and output ({od})",),
    )


@derivable
def matmul_intensity(B, D, F, *, dtype="bf16", weight_dtype=None, out_dtype=None):
    """Arithmetic intensity of the matmul [B, D] x [D, F]; about B for bf16 when B << D, F.

    Formula:
        I = 2·B·D·F / (x·B·D + w·D·F + o·B·F)

    Args:
        B, D, F: the matrix sides (> 0).
        dtype, weight_dtype, out_dtype: as in :func:`matmul_bytes`.

    Returns:
        FLOP/B.

    Chapter:
        1 (Rooflines)

    Example:
        >>> round(matmul_intensity(256, 8192, 8192), 1)
        240.9
    """
    flops = explain(matmul_flops, B, D, F)
    nbytes = explain(matmul_bytes, B, D, F, dtype=dtype, weight_dtype=weight_dtype, out_dtype=out_dtype)
    return Derivation("I", "FLOPs / nbytes", lambda: f"{q(flops.value, 'FLOP')} / {q(nbytes.value, 'B')}",
                      plain(np.asarray(flops.value) / np.asarray(nbytes.value)), "FLOP/B", (flops, nbytes))


@derivable
def matmul_roofline(B, D, F, chip, *, dtype="bf16", weight_dtype=None, out_dtype=None,
                    compute_dtype=None, bandwidth="hbm", efficiency=1.0) -> Roofline:
    """The roofline of the matmul [B, D] x [D, F] on `chip`, its arrays read from HBM (or VMEM, ...).

    Formula:
        T_lower = max(2·B·D·F / (efficiency · C), (x·B·D + w·D·F + o·B·F) / W)

    Args:
        B, D, F: the matrix sides (> 0).
        chip: a chip name or a ChipSpec.
        dtype, weight_dtype, out_dtype: as in :func:`matmul_bytes`.
        compute_dtype: the dtype of the arithmetic (sets C); defaults to `dtype`.
            With int8 weights and bf16 activations the arithmetic runs in bf16.
        bandwidth: the memory the arrays stream from: ``"hbm"`` (default), ``"vmem"`` on a TPU.
        efficiency: the share of the peak rate the arithmetic reaches, in (0, 1].

    Returns:
        A :class:`Roofline`; ``explain(matmul_roofline, ...)`` derives its T_lower.

    Chapter:
        1 (Rooflines)

    Example:
        >>> r = matmul_roofline(128, 4096, 16384, "tpu-v5e")
        >>> r.bound, fmt(r.t_lower_s, "s")
        ('memory', '170 µs')
    """
    flops = explain(matmul_flops, B, D, F)
    nbytes = explain(matmul_bytes, B, D, F, dtype=dtype, weight_dtype=weight_dtype, out_dtype=out_dtype)
    compute = dtype if compute_dtype is None else _chip(chip)._rate_dtype(compute_dtype, arg="compute_dtype")
    return _roofline(flops.value, nbytes.value, chip, compute, bandwidth, (flops, nbytes), efficiency)


@derivable(allow_inf=True)
def critical_batch_size(chip, *, dtype="bf16", weight_dtype=None, D=None, F=None, bandwidth="hbm"):
    """The batch B above which the matmul [B, D] x [D, F] is compute-bound on `chip`.

    With D and F large (the default, ``D=F=None``), the weight bytes w·D·F dominate
    and intensity ≈ 2·B / w, so B_crit = I_crit · w / 2: about 240 on TPU v5e in
    bf16, half that with int8 weights and bf16 arithmetic. With D and F given, the
    activation bytes count too; where no batch is compute-bound the result is inf.

    Formula:
        B_crit = I_crit · w / 2;  with D, F:  B_crit = I·w·D·F / (2·D·F − I·(x·D + x·F))

    Args:
        chip: a chip name or a ChipSpec.
        dtype: dtype of the activations (input and output) and of the arithmetic.
        weight_dtype: dtype of the weights; defaults to `dtype`.
        D, F: the weight matrix's sides, or None for the large-matrix limit (both or neither).
        bandwidth: the link the weights stream over: ``"hbm"`` by default, ``"pcie"``
            for weights kept in host memory.

    Returns:
        tokens (rows of the batch).

    Chapter:
        1 (Rooflines)

    Example:
        >>> round(critical_batch_size("tpu-v5e"))
        240
        >>> round(critical_batch_size("tpu-v5e", weight_dtype="int8"))
        120
    """
    ci = explain(critical_intensity, chip, dtype=dtype, bandwidth=bandwidth)
    I = ci.value
    xd, wd, _ = _matmul_dtypes(dtype, weight_dtype, None)
    x, w = bytes_per_value(xd), bytes_per_value(wd)
    where = (f"w, x: bytes per value of the weights ({wd}) and of the activations ({xd})",)
    if D is None and F is None:
        return Derivation("B_crit", "I_crit · w / 2", lambda: f"{q(I)} · {q(w)} / 2", I * w / 2, "tokens", (ci,),
                          where)
    if D is None or F is None:
        raise InvalidValueError("give both `D` and `F` (or neither, for the large-matrix limit)")
    D_, F_ = np.asarray(positive("D", D)), np.asarray(positive("F", F))
    _broadcastable(D=D_, F=F_)
    denominator = 2 * D_ * F_ - I * (x * D_ + x * F_)
    # Where no batch reaches the ridge the denominator is not positive: the answer is inf (never).
    reachable = np.where(denominator > 0, denominator, np.nan)
    value = plain(np.where(denominator > 0, I * w * D_ * F_ / reachable, np.inf))
    return Derivation("B_crit", "I·w·D·F / (2·D·F − I·(x·D + x·F))",
                      lambda: f"{q(I)}·{q(w)}·{q(D)}·{q(F)} / (2·{q(D)}·{q(F)} − {q(I)}·({q(x)}·{q(D)} + {q(x)}·{q(F)}))",
                      value, "tokens", (ci,), where)
