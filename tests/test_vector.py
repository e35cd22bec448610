"""Vector units: the book's VPU and CUDA-core figures, the derivation, and bad input."""

import pytest

import scalelib as sl


# Published numbers: How to Scale Your Model, ch. 1 (footnote on the dot product), ch. 2 (pop quiz
# "Calculating VPU throughput"), ch. 12 (quiz 1, "Vector FLOPs calculation"); NVIDIA's H100 SXM data sheet.
def test_a_v5p_tensorcore_vpu_does_about_7e12_flops_per_s():
    # 8 sublanes x 128 lanes x 4 ALUs, one op per cycle, at 1.75 GHz
    assert sl.vector_flops_per_s("tpu-v5p", per="core") == pytest.approx(8 * 128 * 4 * 1.75e9)
    assert sl.vector_flops_per_s("tpu-v5p", per="core") == pytest.approx(7e12, rel=0.03)


def test_a_v5p_chip_has_two_tensorcores_of_vpu():
    assert sl.vector_flops_per_s("tpu-v5p") == pytest.approx(2 * sl.vector_flops_per_s("tpu-v5p", per="core"))


def test_the_v5p_vpu_critical_intensity_is_around_3_per_core_against_hbm():
    assert sl.vector_critical_intensity("tpu-v5p", per="core") == pytest.approx(7.168e12 / 2.8e12)
    assert 2 < sl.vector_critical_intensity("tpu-v5p", per="core") < 3.5


def test_the_vpu_is_about_30_times_slower_than_the_mxu_on_v5p():
    ratio = sl.chip("tpu-v5p").bf16_flops_per_s / sl.vector_flops_per_s("tpu-v5p")
    assert 25 < ratio < 40


def test_h100_cuda_cores_give_the_book_figures_at_base_and_boost_clock():
    assert sl.vector_flops_per_s("h100", clock="base") == pytest.approx(26.9e12, rel=0.005)
    assert sl.vector_flops_per_s("h100", clock="boost") == pytest.approx(33.5e12, rel=0.005)


def test_counting_a_multiply_add_as_two_gives_the_h100_data_sheet_fp32_rate():
    assert sl.vector_flops_per_s("h100", flops_per_cycle=2) == pytest.approx(67e12, rel=0.01)


def test_the_derivation_defines_every_symbol():
    text = str(sl.explain(sl.vector_critical_intensity, "tpu-v5p", per="core"))
    assert "4096 · 1.75 GHz · 1 = 7.17e12 FLOP/s" in text
    for symbol in ("ALUs:", "f:", "k:", "W:"):
        assert symbol in text
    assert "n: SMs per chip" in str(sl.explain(sl.vector_flops_per_s, "h100"))


def test_a_chip_without_the_figure_says_which_and_how_to_add_it():
    with pytest.raises(sl.InvalidValueError) as err:
        sl.vector_flops_per_s("tpu-v5e")
    assert str(err.value) == ("the vector rate of tpu-v5e needs `vector_alus_per_core`, and chip 'tpu-v5e' has none; "
                              "give it one with chip('tpu-v5e').derive('new-name', vector_alus_per_core=...)")
    with pytest.raises(sl.InvalidValueError, match="needs `clock_ghz_base`"):
        sl.vector_flops_per_s("tpu-v5p", clock="base")


@pytest.mark.parametrize("kwargs, message", [
    ({"per": "sm"}, "`per`"),
    ({"clock": "turbo"}, "`clock`"),
    ({"flops_per_cycle": 0}, "`flops_per_cycle` must be positive (> 0), got 0"),
    ({"flops_per_cycle": [1, 2]}, "`flops_per_cycle` must be a single number, got [1, 2]"),
])
def test_bad_options_are_refused_by_name(kwargs, message):
    with pytest.raises(sl.ScalelibError) as err:
        sl.vector_flops_per_s("h100", **kwargs)
    assert message in str(err.value)


def test_a_derived_chip_works():
    mine = sl.chip("tpu-v5e").derive("v5e-with-vpu", vector_alus_per_core=4096)
    assert sl.vector_flops_per_s(mine) == pytest.approx(4096 * 1.5e9)
