"""Measure the machine this runs on (chapter 1): its peak matmul rate and memory bandwidth.

:func:`measure_machine` returns a :class:`ChipSpec` of family ``"cpu"`` whose
``f32_flops_per_s`` and ``hbm_bytes_per_s`` (here: main memory) are measured
with JAX, so every roofline function accepts it like a TPU or a GPU.
JAX is imported only when these functions run.
"""

from __future__ import annotations

import platform
import time

from ._errors import require_positive, unknown
from ._specs import ChipSpec

_JNP_DTYPES = {"f32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _best_time(fn, *args, repeats: int) -> float:
    fn(*args).block_until_ready()  # compile and warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def time_matmul(B: int, D: int, F: int, dtype: str = "f32", repeats: int = 5) -> float:
    """Best wall time in seconds of the jitted matmul [B, D] x [D, F] over `repeats` runs."""
    import jax
    import jax.numpy as jnp

    require_positive(B=B, D=D, F=F, repeats=repeats)
    if dtype not in _JNP_DTYPES:
        raise unknown("dtype for a measured matmul", dtype, _JNP_DTYPES)
    jdtype = getattr(jnp, _JNP_DTYPES[dtype])
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (B, D), dtype=jdtype)
    w = jax.random.normal(kw, (D, F), dtype=jdtype)
    return _best_time(jax.jit(jnp.matmul), x, w, repeats=repeats)


def time_copy(n_bytes: float, repeats: int = 5) -> float:
    """Best wall time in seconds of reading an f32 array of `n_bytes` and writing its double.

    The output reuses the input's buffer (donated), so the time is of memory
    traffic (2 × `n_bytes`), not of the operating system handing out fresh pages.
    """
    import jax
    import jax.numpy as jnp

    require_positive(n_bytes=n_bytes, repeats=repeats)
    double = jax.jit(lambda a: a * 2.0, donate_argnums=0)
    x = double(jnp.ones((int(n_bytes // 4),), dtype=jnp.float32))  # compile and warm up
    x.block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        x = double(x)
        x.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def measure_machine(matmul_sizes=(1024, 2048), copy_bytes: float = 2**29, repeats: int = 5) -> ChipSpec:
    """Measure this machine's peak f32 matmul rate and memory bandwidth with JAX.

    The rate is the best of square matmuls with the sides `matmul_sizes` (2·N³ FLOPs each);
    the bandwidth from an elementwise op over `copy_bytes` bytes, which reads
    and writes each byte once (2 × `copy_bytes` moved). Takes a few seconds.

    >>> local = measure_machine()            # doctest: +SKIP
    >>> critical_intensity(local, "f32")     # doctest: +SKIP
    """
    import jax

    flops_per_s = max(2 * n**3 / time_matmul(n, n, n, "f32", repeats) for n in map(int, matmul_sizes))
    bytes_per_s = 2 * copy_bytes / time_copy(copy_bytes, repeats)
    device = jax.devices()[0]
    return ChipSpec(
        name="local-" + device.platform,
        family="cpu",
        source=(f"measured by scalelib.measure_machine() with JAX {jax.__version__} on "
                f"{platform.machine()} ({jax.device_count()} JAX device(s), {device.device_kind})"),
        f32_flops_per_s=flops_per_s,
        hbm_bytes_per_s=bytes_per_s,
        notes="hbm_bytes_per_s is main-memory bandwidth; f32 matmul peak: the best of a few square matmuls",
    )

