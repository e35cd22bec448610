"""Measure the machine this runs on (chapter 1): its peak matmul rate and memory bandwidth.

:func:`measure_machine` returns a :class:`ChipSpec` whose ``f32_flops_per_s`` and
``hbm_bytes_per_s`` are measured with JAX on the device it uses (an accelerator
where JAX sees one, else the CPU and its main memory), so every roofline function
accepts it like a TPU or a GPU.
JAX is imported only when these functions run.
"""

from __future__ import annotations

import platform
import time

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError, unknown
from ._specs import ChipSpec, dtype_name
from ._validate import count, counts, positive

_JNP_DTYPES = {"f32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: The most memory a measurement may allocate (bytes), so that a typo cannot exhaust the machine.
MAX_MEASURE_BYTES = 4 * 2**30
#: The most timed runs a measurement makes.
MAX_REPEATS = 1000


def _best_time(fn, *args, repeats: int) -> float:
    fn(*args).block_until_ready()  # compile and warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def _repeats(repeats) -> int:
    repeats = count("repeats", repeats)
    if repeats > MAX_REPEATS:
        raise InvalidValueError(f"`repeats` must be at most {MAX_REPEATS}, got {repeats}")
    return repeats


def _cap(arg: str, nbytes: float) -> None:
    if nbytes > MAX_MEASURE_BYTES:
        raise InvalidValueError(f"`{arg}`: this measurement would allocate {nbytes / 2**30:.1f} GiB; "
                                f"scalelib measures with at most {MAX_MEASURE_BYTES / 2**30:.0f} GiB")


@derivable
def measure_matmul_time_s(B, D, F, *, dtype="f32", repeats=5):
    """Best wall time of the jitted matmul [B, D] x [D, F] on this machine, over `repeats` runs.

    Formula:
        T = min over runs of the wall time (after one warm-up run that compiles)

    Args:
        B, D, F: the matrix sides (whole numbers >= 1).
        dtype: ``"f32"``, ``"bf16"`` or ``"fp16"``.
        repeats: timed runs (>= 1).

    Returns:
        seconds (s).

    Chapter:
        1 (Rooflines), 9 (Profiling)

    Example:
        >>> measure_matmul_time_s(256, 256, 256) > 0     # doctest: +SKIP
        True
    """
    B, D, F = count("B", B), count("D", D), count("F", F)
    repeats = _repeats(repeats)
    name = dtype_name(dtype)
    if name not in _JNP_DTYPES:
        raise unknown("dtype for a measured matmul", name, _JNP_DTYPES, arg="dtype")
    _cap("B, D, F", (B * D + D * F + B * F) * 4)
    import jax
    import jax.numpy as jnp

    jdtype = getattr(jnp, _JNP_DTYPES[name])
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (B, D), dtype=jdtype)
    w = jax.random.normal(kw, (D, F), dtype=jdtype)
    value = _best_time(jax.jit(jnp.matmul), x, w, repeats=repeats)
    return Derivation("T_matmul (measured)", f"best of {repeats} runs of [{B}, {D}] x [{D}, {F}] in {name}", "",
                      value, "s")


@derivable
def measure_copy_time_s(nbytes, *, repeats=5):
    """Best wall time of reading an f32 array of `nbytes` and writing its double, on this machine.

    The output reuses the input's buffer (donated), so the time is of memory
    traffic (2 × `nbytes`), not of the operating system handing out fresh pages.

    Formula:
        T = min over runs of the wall time; bandwidth ≈ 2 · nbytes / T

    Args:
        nbytes: size of the array (B), at least 4.
        repeats: timed runs (>= 1).

    Returns:
        seconds (s).

    Chapter:
        1 (Rooflines), 9 (Profiling)

    Example:
        >>> measure_copy_time_s(2**24) > 0     # doctest: +SKIP
        True
    """
    nbytes = positive("nbytes", nbytes, at_least=4)
    repeats = _repeats(repeats)
    _cap("nbytes", 2 * nbytes)
    import jax
    import jax.numpy as jnp

    double = jax.jit(lambda a: a * 2.0, donate_argnums=0)
    x = double(jnp.ones((int(nbytes // 4),), dtype=jnp.float32))  # compile and warm up
    x.block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        x = double(x)
        x.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return Derivation("T_copy (measured)", f"best of {repeats} runs over {int(nbytes // 4) * 4} bytes", "", best, "s")


def measure_machine(*, matmul_sizes=(1024, 2048), nbytes=2**29, repeats=5) -> ChipSpec:
    """Measure this machine's peak f32 matmul rate and memory bandwidth with JAX, as a ChipSpec.

    The rate is the best of square matmuls with the sides `matmul_sizes` (2·N³ FLOPs each);
    the bandwidth from an elementwise op over `nbytes` bytes, which reads
    and writes each byte once (2 × `nbytes` moved). Takes a few seconds.

    Formula:
        C = max over N of 2·N³ / T_matmul(N);  W = 2 · nbytes / T_copy

    Args:
        matmul_sizes: sides of the square matmuls to time.
        nbytes: size of the array the bandwidth is measured on (B).
        repeats: timed runs of each (>= 1).

    Returns:
        A :class:`ChipSpec` of the family of the device JAX uses (``"cpu"``, or ``"gpu"``/``"tpu"``
        where JAX sees one), with ``f32_flops_per_s`` and ``hbm_bytes_per_s`` (main memory on a CPU).

    Chapter:
        1 (Rooflines)

    Example:
        >>> local = measure_machine()                        # doctest: +SKIP
        >>> critical_intensity(local, dtype="f32") > 0       # doctest: +SKIP
        True
    """
    sizes = counts("matmul_sizes", matmul_sizes)
    nbytes = positive("nbytes", nbytes, at_least=4)
    repeats = _repeats(repeats)
    for n in sizes:
        _cap("matmul_sizes", 3 * n * n * 4)
    _cap("nbytes", 2 * nbytes)
    import jax

    flops_per_s = max(2 * n**3 / measure_matmul_time_s(n, n, n, dtype="f32", repeats=repeats) for n in sizes)
    bytes_per_s = 2 * nbytes / measure_copy_time_s(nbytes, repeats=repeats)
    device = jax.devices()[0]
    family = device.platform if device.platform in ("gpu", "tpu") else "cpu"
    return ChipSpec(
        name="local-" + device.platform,
        family=family,
        source=(f"measured by scalelib.measure_machine() with JAX {jax.__version__} on "
                f"{platform.machine()} ({jax.device_count()} JAX device(s), {device.device_kind})"),
        f32_flops_per_s=flops_per_s,
        hbm_bytes_per_s=bytes_per_s,
        notes="hbm_bytes_per_s is main-memory bandwidth; f32 matmul peak: the best of a few square matmuls",
    )
