"""GPU matmul tiles: intensity, shared memory, and the search under the SMEM limit."""

import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl


def test_tile_intensity_by_hand():
    assert sl.tile_intensity(128, 128) == 2 * 128 * 128 / (256 * 2)  # 64 FLOP/B in bf16
    assert sl.tile_intensity(128, 256, "fp8") == 2 * 128 * 256 / (384 * 1)
    with_output = sl.tile_intensity(128, 128, K=4096)
    assert with_output == 2 * 128 * 128 * 4096 / (256 * 4096 * 2 + 128 * 128 * 2)


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
    tiles = sl.search_tiles(M, N, K, chip, dtype)
    assert all(t.smem_bytes <= spec.fast_mem_bytes_per_core for t in tiles)
    assert all(t.bm * t.bn * 4 <= spec.registers_bytes_per_core / 2 for t in tiles)
    best = tiles[0]
    assert best.time_s <= 1.02 * min(t.time_s for t in tiles)
    # No tile beats the chip's roofline for the whole matmul.
    assert best.time_s >= 2 * M * N * K / spec.flops_per_s(dtype) * (1 - 1e-9)


def test_big_matmuls_get_big_tiles_and_skinny_ones_stay_memory_bound():
    big = sl.best_tile(4096, 4096, 4096, "h100")
    assert big.bm * big.bn >= 128 * 128 and big.bound == "compute"
    skinny = sl.best_tile(16, 4096, 4096, "h100")
    assert skinny.bound == "memory"


def test_a_smaller_smem_rules_out_deep_pipelines():
    # V100 has 96 kB of SMEM per SM: 4 stages of 256x256x128 bf16 tiles (512 kB) cannot fit.
    deep = [t for t in sl.search_tiles(4096, 4096, 4096, "v100", "fp16") if (t.bm, t.bn, t.bk, t.stages) == (256, 256, 128, 4)]
    assert deep == []


def test_tile_search_explains_bad_input():
    with pytest.raises(sl.InvalidValueError, match=r"^`K` must be a whole number >= 1, got 0$"):
        sl.search_tiles(64, 64, 0, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^tile search needs a GPU with SMEM and SM figures, got tpu-v5e$"):
        sl.search_tiles(64, 64, 64, "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^no tile of the grid fits"):
        sl.search_tiles(64, 64, 64, "h100", sizes=(4096,))


def test_tiles_larger_than_the_matrix_are_not_considered():
    tiles = sl.search_tiles(16, 4096, 4096, "h100")
    assert {t.bm for t in tiles} == {16}
    assert max(t.bm for t in sl.search_tiles(100, 4096, 4096, "h100")) == 128
