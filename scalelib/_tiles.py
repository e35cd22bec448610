"""Matmul tiles on a GPU (chapter 12): intensity, shared memory, and a search for the best one.

A kernel computes C[M, N] = A[M, K] · B[K, N] in tiles: each thread block owns a
bm × bn block of C, walks K in steps of bk, and streams the A and B blocks it
needs through shared memory (SMEM), `stages` steps ahead. Per tile:

    FLOPs = 2 · bm · bn · K           bytes ≈ (bm + bn) · K · b_in + bm · bn · b_out
    intensity → 2 · bm · bn / ((bm + bn) · b_in) for long K (bk does not enter)
    SMEM = stages · (bm + bn) · bk · b_in          accumulator = bm · bn · 4 bytes (registers)

:func:`search_tiles` tries every tile of a small grid that fits the SM's SMEM and
register file and ranks them by the time the roofline predicts, counting the
waves of tiles over the SMs: the idea behind automatic kernel generation, a
search over a model rather than a guess. Every full wave costs the same, so a
candidate's time is a closed form (full waves, plus the last, partial one): the
search takes the same time for a matrix of 2**20 rows as for one of 2**10.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ._derivation import Derivation, derivable, plain, q
from ._errors import InvalidValueError
from ._roofline import _broadcastable
from ._specs import bytes_per_value, chip as _chip, dtype_name
from ._units import fmt
from ._validate import count, counts, positive

TILE_SIZES = (16, 32, 64, 128, 256)
K_STEPS = (16, 32, 64, 128)
STAGES = (2, 3, 4)
ACCUMULATOR_BYTES = 4  # fp32 accumulation
#: Share of the register file the accumulator may take; the rest holds operands and addresses.
REGISTER_SHARE = 0.5


@derivable
def tile_intensity(bm, bn, *, K=None, dtype="bf16", out_dtype=None):
    """Arithmetic intensity of a bm × bn output tile of a matmul; for long K the output write does not count.

    Formula:
        I_tile = 2·bm·bn / ((bm + bn)·b);  with K:  2·bm·bn·K / ((bm + bn)·K·b + bm·bn·o)

    Args:
        bm, bn: the tile's sides (> 0).
        K: the contracting dimension, or None for the long-K limit.
        dtype: dtype of the inputs (b bytes each).
        out_dtype: dtype of the output (o bytes); defaults to `dtype`. Counts only with K.

    Returns:
        FLOP/B.

    Chapter:
        12 (GPUs)

    Example:
        >>> tile_intensity(128, 128)
        64.0
        >>> round(tile_intensity(128, 128, K=4096, out_dtype="f32"), 1)
        62.1
    """
    bm_, bn_ = np.asarray(positive("bm", bm)), np.asarray(positive("bn", bn))
    _broadcastable(bm=bm_, bn=bn_, K=None if K is None else positive("K", K))
    b = bytes_per_value(dtype)
    if K is None:
        return Derivation("I_tile", "2·bm·bn / ((bm + bn)·b)", lambda: f"2·{q(bm)}·{q(bn)} / (({q(bm)} + {q(bn)})·{q(b)})",
                          plain(2 * bm_ * bn_ / ((bm_ + bn_) * b)), "FLOP/B",
                          where=(f"b: bytes per input value ({dtype_name(dtype)})",))
    K_ = np.asarray(positive("K", K))
    o = bytes_per_value(dtype if out_dtype is None else dtype_name(out_dtype, arg="out_dtype"))
    return Derivation(
        "I_tile", "2·bm·bn·K / ((bm + bn)·K·b + bm·bn·o)",
        lambda: f"2·{q(bm)}·{q(bn)}·{q(K)} / (({q(bm)} + {q(bn)})·{q(K)}·{q(b)} + {q(bm)}·{q(bn)}·{q(o)})",
        plain(2 * bm_ * bn_ * K_ / ((bm_ + bn_) * K_ * b + bm_ * bn_ * o)), "FLOP/B",
        where=("b, o: bytes per input and per output value",),
    )


@derivable
def tile_smem_bytes(bm, bn, bk, *, dtype="bf16", stages=2):
    """Shared memory a tile's software pipeline needs: `stages` buffers of an A block and a B block.

    Formula:
        SMEM = stages · (bm + bn) · bk · b

    Args:
        bm, bn: the tile's sides; bk: the K step (> 0).
        dtype: dtype of the inputs (b bytes each).
        stages: buffers in flight (a whole number >= 1).

    Returns:
        bytes (B).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(tile_smem_bytes(128, 256, 64, stages=4), "B")
        '197 kB'
    """
    bm_, bn_, bk_ = (np.asarray(positive(n, v)) for n, v in (("bm", bm), ("bn", bn), ("bk", bk)))
    _broadcastable(bm=bm_, bn=bn_, bk=bk_)
    s = count("stages", stages)
    b = bytes_per_value(dtype)
    return Derivation("SMEM", "stages·(bm + bn)·bk·b", lambda: f"{s}·({q(bm)} + {q(bn)})·{q(bk)}·{q(b)}",
                      plain(s * (bm_ + bn_) * bk_ * b), "B")


@dataclass(frozen=True)
class Tile:
    """One candidate tile and what the roofline predicts for it on a given problem (times in s)."""

    bm: int
    bn: int
    bk: int
    stages: int
    smem_bytes: float
    intensity: float  # FLOP/B of one tile over the whole K
    num_tiles: int
    waves: int  # rounds of one tile per SM
    time_s: float
    bound: str  # "compute" or "memory"

    def __str__(self) -> str:
        return (f"{self.bm}x{self.bn}x{self.bk} ({self.stages} stages): {fmt(self.smem_bytes, 'B')} SMEM, "
                f"intensity {fmt(self.intensity, 'FLOP/B')}, {self.num_tiles} tiles in {self.waves} wave(s), "
                f"{fmt(self.time_s, 's')} ({self.bound}-bound)")


def _wave_s(in_wave: int, rows: int, cols: int, bm: int, bn: int, K: int, b: float, W: float) -> float:
    """HBM time of one wave of `in_wave` tiles laid out in a near-square block of the output."""
    g_m = min(rows, max(1, round(math.sqrt(in_wave))))
    g_n = min(cols, math.ceil(in_wave / g_m))
    g_m = min(rows, math.ceil(in_wave / g_n))
    return ((g_m * bm + g_n * bn) * K * b + in_wave * bm * bn * b) / W


def _search(M, N, K, chip, dtype, sizes, k_steps, stages) -> tuple[list[Tile], dict]:
    spec = _chip(chip)
    M, N, K = count("M", M), count("N", N), count("K", K)
    sizes, k_steps, stages = counts("sizes", sizes), counts("k_steps", k_steps), counts("stages", stages)
    if spec.family != "gpu" or spec.fast_mem_bytes_per_core is None or spec.cores is None:
        raise InvalidValueError(f"`chip`: tile search needs a GPU with SMEM and SM figures, got {spec.name}")
    dtype = dtype_name(dtype)
    smem_limit, registers = spec.fast_mem_bytes_per_core, spec.registers_bytes_per_core or math.inf
    SMs = spec.cores
    C_sm = spec.peak_flops_per_s(dtype=dtype) / SMs
    W = spec._require("hbm_bytes_per_s", "a tile search")
    b = bytes_per_value(dtype)
    # A tile taller (wider) than the smallest grid size covering M (N) only pads with zeros.
    max_bm = min([t for t in sizes if t >= M] or [max(sizes)])
    max_bn = min([t for t in sizes if t >= N] or [max(sizes)])
    tiles = []
    for bm, bn, bk, s in itertools.product(sorted(set(sizes)), sorted(set(sizes)), sorted(set(k_steps)),
                                           sorted(set(stages))):
        if bm > max_bm or bn > max_bn:
            continue
        smem = s * (bm + bn) * bk * b
        if smem > smem_limit or bm * bn * ACCUMULATOR_BYTES > registers * REGISTER_SHARE:
            continue
        rows, cols = -(-M // bm), -(-N // bn)
        num = rows * cols
        full, last = divmod(num, SMs)
        t_math = 2 * bm * bn * K / C_sm
        # Every full wave has SMs tiles and costs the same; the last one has the rest.
        t_full = _wave_s(SMs, rows, cols, bm, bn, K, b, W) if full else 0.0
        t_last = _wave_s(last, rows, cols, bm, bn, K, b, W) if last else 0.0
        total = full * max(t_math, t_full) + (max(t_math, t_last) if last else 0.0)
        memory_waves = full * (t_full > t_math) + (last > 0 and t_last > t_math)
        waves = full + (last > 0)
        intensity = 2 * bm * bn * K / ((bm + bn) * K * b + bm * bn * b)
        tiles.append(Tile(bm, bn, bk, s, float(smem), float(intensity), num, waves, total,
                          "memory" if 2 * memory_waves > waves else "compute"))
    if not tiles:
        raise InvalidValueError(f"`sizes`: no tile of the grid fits {spec.name}'s {fmt(smem_limit, 'B', binary=True)} of SMEM")
    # Times equal but for float rounding (compute-bound tiles: waves · T_math) tie, then the smaller SMEM wins.
    tiles.sort(key=lambda t: (float(f"{t.time_s:.12e}"), t.smem_bytes, -t.bk))
    # Within 2% of the fastest, prefer the most intense tile: it leans least on L2.
    near = [t for t in tiles if t.time_s <= 1.02 * tiles[0].time_s]
    best = max(near, key=lambda t: (t.intensity, -t.smem_bytes))
    context = dict(spec=spec, C_sm=C_sm, W=W, b=b, K=K, SMs=SMs)
    return [best] + [t for t in tiles if t is not best], context


def _tile_derivation(tile: Tile, ctx: dict, returns) -> Derivation:
    full, last = divmod(tile.num_tiles, ctx["SMs"])
    return Derivation(
        f"T({tile.bm}x{tile.bn}x{tile.bk})", "Σ over waves of max(2·bm·bn·K / C_sm, HBM bytes of the wave / W)",
        lambda: (f"{full} full wave(s) of {ctx['SMs']} tiles" + (f" + 1 wave of {last}" if last else "")
                 + f", T_math per tile {q(2 * tile.bm * tile.bn * ctx['K'] / ctx['C_sm'], 's')}"),
        tile.time_s, "s", returns=returns,
        where=(f"C_sm: one SM's share of {ctx['spec'].name}'s peak, {q(ctx['C_sm'], 'FLOP/s')}; "
               f"W: HBM bandwidth, {q(ctx['W'], 'B/s')}; a wave's tiles share their A rows and B columns through L2",),
    )


@derivable
def search_tiles(M, N, K, chip, *, dtype="bf16", sizes=TILE_SIZES, k_steps=K_STEPS, stages=STAGES) -> list[Tile]:
    """Every tile (bm, bn, bk, stages) from the grids that fits one SM, best first.

    Fits: SMEM ≤ the SM's shared memory and the fp32 accumulator bm·bn·4 ≤ half its
    register file; tiles larger than the matrix needs (bm beyond the smallest size
    covering M, bn beyond that covering N) are skipped, as they only pad. The tiles
    run in waves of one tile per SM. A wave's tiles sit in a near-square block of
    the output (the usual "swizzled" launch order), so they share their A rows and
    B columns through L2: a wave reads its g_m·bm rows of A and g_n·bn columns of B
    from HBM once. Among the tiles within 2% of the fastest, the one with the
    highest intensity comes first (it leans least on L2), then the rest by time.

    Formula:
        T = Σ over waves of max(2·bm·bn·K / (C / SMs), ((g_m·bm + g_n·bn)·K·b + n·bm·bn·b) / W_hbm)

    Args:
        M, N, K: the matmul C[M, N] = A[M, K] · B[K, N] (whole numbers >= 1).
        chip: a GPU name or ChipSpec with SM and SMEM figures.
        dtype: dtype of the inputs and the arithmetic.
        sizes, k_steps, stages: the grids of tile sides, K steps and pipeline stages to try.

    Returns:
        A list of :class:`Tile`, best first; ``explain(search_tiles, ...)`` derives the best one's time.

    Chapter:
        12 (GPUs)

    Example:
        >>> tiles = search_tiles(4096, 4096, 4096, "h100")
        >>> (tiles[0].bm, tiles[0].bn), tiles[0].bound
        ((128, 256), 'compute')
    """
    tiles, ctx = _search(M, N, K, chip, dtype, sizes, k_steps, stages)
    return _tile_derivation(tiles[0], ctx, tiles)


@derivable
def best_tile(M, N, K, chip, *, dtype="bf16", sizes=TILE_SIZES, k_steps=K_STEPS, stages=STAGES) -> Tile:
    """The tile :func:`search_tiles` ranks first for C[M, N] = A[M, K] · B[K, N] on `chip`.

    Formula:
        as :func:`search_tiles`

    Args:
        M, N, K, chip, dtype, sizes, k_steps, stages: as in :func:`search_tiles`.

    Returns:
        A :class:`Tile`; ``explain(best_tile, ...)`` derives its time.

    Chapter:
        12 (GPUs)

    Example:
        >>> t = best_tile(2**20, 8192, 8192, "h100")
        >>> t.bm, t.bn, t.bound
        (128, 256, 'compute')
    """
    tiles, ctx = _search(M, N, K, chip, dtype, sizes, k_steps, stages)
    return _tile_derivation(tiles[0], ctx, tiles[0])
