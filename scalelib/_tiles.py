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
search over a model rather than a guess.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ._derivation import plain, q, result
from ._errors import InvalidValueError, require_positive
from ._specs import ChipSpec, bytes_per_value, chip as _chip
from ._units import fmt

TILE_SIZES = (16, 32, 64, 128, 256)
K_STEPS = (16, 32, 64, 128)
STAGES = (2, 3, 4)
ACCUMULATOR_BYTES = 4  # fp32 accumulation
#: Share of the register file the accumulator may take; the rest holds operands and addresses.
REGISTER_SHARE = 0.5


def tile_intensity(bm, bn, dtype: str = "bf16", K=None, out_dtype: str | None = None, *, explain: bool = False):
    """Arithmetic intensity (FLOP/B) of a bm × bn output tile: 2·bm·bn / ((bm + bn)·b) for long K. Chapter 12.

    With `K` given, the output write (bm·bn·b_out) counts too.

    >>> tile_intensity(128, 128)
    64.0
    """
    require_positive(bm=bm, bn=bn)
    b = bytes_per_value(dtype)
    bm_, bn_ = np.asarray(bm, dtype=float), np.asarray(bn, dtype=float)
    if K is None:
        value = 2 * bm_ * bn_ / ((bm_ + bn_) * b)
        value = plain(value)
        return result(explain, "I_tile", "2·bm·bn / ((bm + bn)·b)", f"2·{q(bm)}·{q(bn)} / (({q(bm)} + {q(bn)})·{q(b)})",
                      value, "FLOP/B")
    require_positive(K=K)
    o = bytes_per_value(out_dtype or dtype)
    K_ = np.asarray(K, dtype=float)
    value = 2 * bm_ * bn_ * K_ / ((bm_ + bn_) * K_ * b + bm_ * bn_ * o)
    value = plain(value)
    return result(explain, "I_tile", "2·bm·bn·K / ((bm + bn)·K·b + bm·bn·o)",
                  f"2·{q(bm)}·{q(bn)}·{q(K)} / (({q(bm)} + {q(bn)})·{q(K)}·{q(b)} + {q(bm)}·{q(bn)}·{q(o)})", value, "FLOP/B")


def tile_smem_bytes(bm, bn, bk, dtype: str = "bf16", stages: int = 2, *, explain: bool = False):
    """Shared memory a tile's pipeline needs: stages · (bm + bn) · bk · b bytes. Chapter 12."""
    require_positive(bm=bm, bn=bn, bk=bk, stages=stages)
    b = bytes_per_value(dtype)
    value = stages * (np.asarray(bm) + np.asarray(bn)) * np.asarray(bk) * b
    value = plain(value)
    return result(explain, "SMEM", "stages·(bm + bn)·bk·b", f"{q(stages)}·({q(bm)} + {q(bn)})·{q(bk)}·{q(b)}", value, "B")


@dataclass(frozen=True)
class Tile:
    """One candidate tile and what the roofline predicts for it on a given problem."""

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


def search_tiles(M: int, N: int, K: int, chip: str | ChipSpec, dtype: str = "bf16",
                 sizes=TILE_SIZES, k_steps=K_STEPS, stages=STAGES) -> list[Tile]:
    """Every tile (bm, bn, bk, stages) from the grids that fits one SM, best first. Chapter 12.

    Fits: SMEM ≤ the SM's shared memory and the fp32 accumulator bm·bn·4 ≤ half its
    register file; tiles larger than the matrix needs (bm beyond the smallest size
    covering M, bn beyond that covering N) are skipped, as they only pad. The tiles run in waves of one tile per SM. A wave's tiles sit
    in a near-square block of the output (the usual "swizzled" launch order), so
    they share their A rows and B columns through L2: a wave reads its g_m·bm
    rows of A and g_n·bn columns of B from HBM once. A wave then takes
    max(2·bm·bn·K / (C / SMs), (g_m·bm + g_n·bn)·K·b / W_hbm). Among the tiles
    within 2% of the fastest, the one with the highest intensity comes first (it
    leans least on L2), then the rest by time.
    """
    spec = _chip(chip)
    for name, value in (("M", M), ("N", N), ("K", K)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidValueError(f"`{name}` must be a whole number >= 1, got {value!r}")
    if spec.family != "gpu" or spec.fast_mem_bytes_per_core is None or spec.cores is None:
        raise InvalidValueError(f"tile search needs a GPU with SMEM and SM figures, got {spec.name}")
    smem_limit, registers = spec.fast_mem_bytes_per_core, spec.registers_bytes_per_core or math.inf
    C_sm = spec.flops_per_s(dtype) / spec.cores
    W = spec.hbm_bytes_per_s
    b = bytes_per_value(dtype)
    # A tile taller (wider) than the smallest grid size covering M (N) only pads with zeros.
    max_bm = min([t for t in sizes if t >= M] or [max(sizes)])
    max_bn = min([t for t in sizes if t >= N] or [max(sizes)])
    tiles = []
    for bm, bn, bk, s in itertools.product(sizes, sizes, k_steps, stages):
        if bm > max_bm or bn > max_bn:
            continue
        smem = tile_smem_bytes(bm, bn, bk, dtype, s)
        if smem > smem_limit or bm * bn * ACCUMULATOR_BYTES > registers * REGISTER_SHARE:
            continue
        rows, cols = math.ceil(M / bm), math.ceil(N / bn)
        count = rows * cols
        waves = math.ceil(count / spec.cores)
        t_math = 2 * bm * bn * K / C_sm
        total, memory_bound = 0.0, 0
        for wave in range(waves):
            in_wave = min(spec.cores, count - wave * spec.cores)
            g_m = min(rows, max(1, round(math.sqrt(in_wave))))
            g_n = min(cols, math.ceil(in_wave / g_m))
            g_m = min(rows, math.ceil(in_wave / g_n))
            t_mem = ((g_m * bm + g_n * bn) * K * b + in_wave * bm * bn * b) / W
            total += max(t_math, t_mem)
            memory_bound += t_mem > t_math
        tiles.append(Tile(bm, bn, bk, s, smem, float(tile_intensity(bm, bn, dtype, K)), count, waves, total,
                          "memory" if 2 * memory_bound > waves else "compute"))
    if not tiles:
        raise InvalidValueError(f"no tile of the grid fits {spec.name}'s {fmt(smem_limit, 'B')} of SMEM")
    tiles.sort(key=lambda t: (t.time_s, t.smem_bytes, -t.bk))
    # Within 2% of the fastest, prefer the most intense tile: it leans least on L2.
    near = [t for t in tiles if t.time_s <= 1.02 * tiles[0].time_s]
    best = max(near, key=lambda t: (t.intensity, -t.smem_bytes))
    return [best] + [t for t in tiles if t is not best]


def best_tile(M: int, N: int, K: int, chip: str | ChipSpec, dtype: str = "bf16", **grids) -> Tile:
    """The fastest tile :func:`search_tiles` finds for C[M, N] = A[M, K] · B[K, N] on `chip`. Chapter 12."""
    return search_tiles(M, N, K, chip, dtype, **grids)[0]
