"""GPU matmul tiles: intensity, shared memory, and the search under the SMEM limit."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl


def test_tile_intensity_by_hand():
    assert sl.tile_intensity(128, 128) == 2 * 128 * 128 / (256 * 2)  # 64 FLOP/B in bf16
    assert sl.tile_intensity(128, 256, dtype="fp8") == 2 * 128 * 256 / (384 * 1)
    with_output = sl.tile_intensity(128, 128, K=4096)
    assert with_output == 2 * 128 * 128 * 4096 / (256 * 4096 * 2 + 128 * 128 * 2)


def test_an_fp32_output_lowers_the_intensity_of_a_short_k_tile():
    # 2·bm·bn·K / ((bm + bn)·K·b + bm·bn·o): bf16 inputs (b = 2), f32 output (o = 4), K = 256.
    expected = 2 * 128 * 128 * 256 / (256 * 256 * 2 + 128 * 128 * 4)
    assert sl.tile_intensity(128, 128, K=256, out_dtype="f32") == pytest.approx(expected, rel=1e-12)
    assert sl.tile_intensity(128, 128, K=256, out_dtype="f32") < sl.tile_intensity(128, 128, K=256)
    assert sl.tile_intensity(128, 128, out_dtype="f32") == 64  # the long-K limit ignores the output


def test_square_tiles_are_the_most_intense_for_their_area():
    assert sl.tile_intensity(128, 128) > sl.tile_intensity(64, 256) > sl.tile_intensity(16, 1024)


def test_smem_by_hand():
    assert sl.tile_smem_bytes(128, 256, 64, stages=4) == 4 * (128 + 256) * 64 * 2


sizes = st.sampled_from([16, 64, 100, 512, 1024, 4096, 8192])


@settings(max_examples=25, deadline=None)
@given(M=sizes, N=sizes, K=sizes, chip=st.sampled_from(["v100", "a100", "h100", "b200"]))
def test_tile_search_never_exceeds_the_smem_limit(M, N, K, chip):
    spec = sl.chip(chip)
    dtype = "fp16" if chip == "v100" else "bf16"
    tiles = sl.search_tiles(M, N, K, chip, dtype=dtype)
    assert all(t.smem_bytes <= spec.fast_mem_bytes_per_core for t in tiles)
    assert all(t.bm * t.bn * 4 <= spec.registers_bytes_per_core / 2 for t in tiles)
    # No tile beats the chip's roofline for the whole matmul: its FLOPs at peak, its inputs read once.
    floor = max(2 * M * N * K / spec.peak_flops_per_s(dtype=dtype),
                (M * K + K * N) * sl.bytes_per_value(dtype) / spec.hbm_bytes_per_s)
    assert min(t.time_s for t in tiles) >= floor * (1 - 1e-9)


def test_big_matmuls_get_big_tiles_and_skinny_ones_stay_memory_bound():
    big = sl.best_tile(4096, 4096, 4096, "h100")
    assert big.bm * big.bn >= 128 * 128 and big.bound == "compute"
    skinny = sl.best_tile(16, 4096, 4096, "h100")
    assert skinny.bound == "memory"


def test_a_smaller_smem_rules_out_deep_pipelines():
    # V100 has 96 kB of SMEM per SM: 4 stages of 256x256x128 bf16 tiles (512 kB) cannot fit.
    deep = [t for t in sl.search_tiles(4096, 4096, 4096, "v100", dtype="fp16") if (t.bm, t.bn, t.bk, t.stages) == (256, 256, 128, 4)]
    assert deep == []


def test_tile_search_explains_bad_input():
    with pytest.raises(sl.InvalidValueError, match=r"^`K` must be a whole number >= 1, got 0$"):
        sl.search_tiles(64, 64, 0, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`chip`: tile search needs a GPU with SMEM and SM figures, got tpu-v5e$"):
        sl.search_tiles(64, 64, 64, "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^`sizes`: no tile of the grid fits h100's 256 KiB of SMEM$"):
        sl.search_tiles(64, 64, 64, "h100", sizes=(4096,))


def test_tiles_larger_than_the_matrix_are_not_considered():
    tiles = sl.search_tiles(16, 4096, 4096, "h100")
    assert {t.bm for t in tiles} == {16}
    assert max(t.bm for t in sl.search_tiles(100, 4096, 4096, "h100")) == 128


SMEM_WHEN_CAPTURED = {"v100": 96e3, "a100": 192e3, "h100": 256e3, "h200": 256e3, "b200": 256e3}
GOLDEN = json.loads((Path(__file__).parent / "data" / "tile_search_golden.json").read_text())


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['chip']}-{c['M']}x{c['N']}x{c['K']}")
def test_tile_search_agrees_with_the_wave_by_wave_loop_it_replaced(case):
    # The golden file holds what the per-wave Python loop found (tests/data/tile_search_golden.json).
    # The golden file was made when the registry stored SMEM in decimal kB; the search is compared on those figures.
    chip = sl.chip(case["chip"]).derive(f"{case['chip']}-as-captured",
                                        fast_mem_bytes_per_core=SMEM_WHEN_CAPTURED[case["chip"]])
    tiles = sl.search_tiles(case["M"], case["N"], case["K"], chip, dtype=case["dtype"])
    assert len(tiles) == case["count"]
    best = tiles[0]
    assert [best.bm, best.bn, best.bk, best.stages] == case["top"][0][:4]
    by_shape = {(t.bm, t.bn, t.bk, t.stages): t for t in tiles}
    for bm, bn, bk, stages, num_tiles, waves, time_s, bound, smem, intensity in case["top"]:
        t = by_shape[(bm, bn, bk, stages)]
        assert (t.num_tiles, t.waves, t.bound, t.smem_bytes) == (num_tiles, waves, bound, smem)
        assert math.isclose(t.time_s, time_s, rel_tol=1e-12) and math.isclose(t.intensity, intensity, rel_tol=1e-12)


def test_a_compute_bound_tile_time_by_hand():
    # 4096³ on an H100, tile 256x128: 16·32 = 512 tiles in ceil(512 / 132) = 4 waves, each wave as long as
    # one tile's 2·256·128·4096 FLOPs on one SM's share of the peak (9.9e14 / 132 FLOP/s).
    t = next(t for t in sl.search_tiles(4096, 4096, 4096, "h100") if (t.bm, t.bn) == (256, 128))
    assert (t.num_tiles, t.waves, t.bound) == (512, 4, "compute")
    assert t.time_s == pytest.approx(4 * 2 * 256 * 128 * 4096 / (9.9e14 / 132), rel=1e-12)


def test_a_million_row_search_fills_whole_waves_of_the_132_sms():
    # How fast: `make bench` times this search (a timed assert would pass or fail with the machine's load).
    best = sl.best_tile(2**20, 8192, 8192, "h100")
    assert best.waves == math.ceil(best.num_tiles / 132)


def test_the_best_tile_explains_its_time():
    d = sl.explain(sl.best_tile, 4096, 4096, 4096, "h100")
    assert d.value == sl.best_tile(4096, 4096, 4096, "h100").time_s
    assert "3 full wave(s) of 132 tiles + 1 wave of 116" in str(d)
    assert "T_math per tile 35.8 µs" in str(d)  # 2·128·256·4096 FLOPs on 9.9e14 / 132 FLOP/s


def test_one_tile_more_than_the_sms_takes_a_second_wave():
    # 133 tiles of 16x16 on an H100's 132 SMs: one full wave and a wave of one tile.
    (tile,) = sl.search_tiles(16 * 133, 16, 64, "h100", sizes=(16,), k_steps=(16,), stages=(2,))
    assert (tile.num_tiles, tile.waves) == (133, 2)


def test_two_stages_by_default():
    assert sl.tile_smem_bytes(128, 128, 64) == 2 * (128 + 128) * 64 * 2


def test_a_single_tile_by_hand():
    # One 16x16 tile of a [16, 4096] x [4096, 16] bf16 matmul on an H100 runs on one SM, at 1/132 of the
    # peak: its 2·16·16·4096 FLOPs outlast reading (16 + 16) rows of K values and writing 16x16 outputs.
    (tile,) = sl.search_tiles(16, 16, 4096, "h100", sizes=(16,), k_steps=(16,), stages=(2,))
    t_math = 2 * 16 * 16 * 4096 / (9.9e14 / 132)
    t_memory = ((16 + 16) * 4096 * 2 + 16 * 16 * 2) / 3.35e12
    assert (tile.num_tiles, tile.waves, tile.bound) == (1, 1, "compute") and t_memory < t_math
    assert tile.time_s == pytest.approx(t_math, rel=1e-12)
