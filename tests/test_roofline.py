"""Rooflines: published thresholds, the formulas' properties, derivations and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl

dims = st.integers(min_value=1, max_value=2**16)


# Published numbers, from "How to Scale Your Model" ch. 1 and the vendors' data sheets.
def test_tpu_v5e_bf16_critical_intensity_is_about_240():
    assert sl.critical_intensity("tpu-v5e", dtype="bf16") == pytest.approx(240, abs=1)


def test_h100_bf16_critical_intensity_is_about_295():
    assert sl.critical_intensity("h100", dtype="bf16") == pytest.approx(295, abs=1)


def test_v5e_matmul_turns_compute_bound_past_240_tokens_in_bf16():
    assert sl.critical_batch_size("tpu-v5e", dtype="bf16") == pytest.approx(240, abs=1)
    assert sl.matmul_roofline(200, 8192, 8192, "tpu-v5e").bound == "memory"
    assert sl.matmul_roofline(300, 8192, 8192, "tpu-v5e").bound == "compute"


def test_int8_weights_halve_the_threshold_and_all_int8_keeps_it():
    assert sl.critical_batch_size("tpu-v5e", weight_dtype="int8") == pytest.approx(120, abs=1)
    assert sl.critical_batch_size("tpu-v5e", dtype="int8") == pytest.approx(240, abs=1)


def test_exact_threshold_with_int8_weights_by_hand():
    # I·w·D·F / (2·D·F − I·(x·D + x·F)) with I = C/W of v5e in bf16, w = 1 (int8), x = 2 (bf16).
    I, D, F = 1.97e14 / 8.2e11, 8192, 8192
    expected = I * 1 * D * F / (2 * D * F - I * (2 * D + 2 * F))
    assert sl.critical_batch_size("tpu-v5e", weight_dtype="int8", D=D, F=F) == pytest.approx(expected, rel=1e-12)
    # and at that batch the matmul sits exactly on the ridge
    intensity = sl.matmul_intensity(expected, D, F, weight_dtype="int8")
    assert intensity == pytest.approx(I, rel=1e-9)


def test_exact_threshold_exceeds_the_large_matrix_limit():
    limit = sl.critical_batch_size("tpu-v5e")
    exact = sl.critical_batch_size("tpu-v5e", D=8192, F=8192)
    assert limit < exact < 1.1 * limit
    assert sl.matmul_intensity(exact, 8192, 8192) == pytest.approx(sl.critical_intensity("tpu-v5e"))


def test_small_matrices_never_become_compute_bound():
    # 2DF / (2D + 2F) = 32 < 240 for D = F = 64: no batch reaches the ridge.
    assert sl.critical_batch_size("tpu-v5e", D=64, F=64) == np.inf


def test_matmul_flops_and_bytes_by_hand():
    assert sl.matmul_flops(2, 3, 5) == 2 * 2 * 3 * 5
    assert sl.matmul_bytes(2, 3, 5) == 2 * (2 * 3 + 3 * 5 + 2 * 5)
    assert sl.matmul_bytes(2, 3, 5, dtype="bf16", weight_dtype="int8", out_dtype="f32") == 2 * 6 + 1 * 15 + 4 * 10


def test_time_bounds_of_a_v5e_matmul_by_hand():
    r = sl.matmul_roofline(1024, 8192, 8192, "tpu-v5e")
    flops, nbytes = 2 * 1024 * 8192 * 8192, 2 * (1024 * 8192 * 2 + 8192 * 8192)
    assert r.t_math_s == pytest.approx(flops / 1.97e14)
    assert r.t_comms_s == pytest.approx(nbytes / 8.2e11)
    assert r.t_lower_s == pytest.approx(max(flops / 1.97e14, nbytes / 8.2e11))
    assert r.t_upper_s == pytest.approx(flops / 1.97e14 + nbytes / 8.2e11)
    assert r.bound == "compute"


def test_ici_roofline_calls_the_binding_resource_communication():
    # Half of a [B, D] x [D, F] matmul per chip; partial sums of B·F bf16 values cross one ICI link.
    B, D, F = 1024, 4096, 8192
    r = sl.roofline(sl.matmul_flops(B, D, F) / 2, 2 * B * F, "tpu-v5e", bandwidth="ici")
    assert r.bound == "communication"
    assert r.critical_intensity == pytest.approx(1.97e14 / 4.5e10)


@settings(max_examples=60, deadline=None)
@given(B=dims, D=dims, F=dims)
def test_intensity_grows_with_batch_and_saturates(B, D, F):
    small, large = sl.matmul_intensity(B, D, F), sl.matmul_intensity(B + 1, D, F)
    assert large >= small
    saturation = D * F / (D + F)  # limit of 2BDF / (2BD + 2DF + 2BF) as B grows
    assert small < saturation


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 2**10), D_over_B=st.integers(100, 2**10), F_over_B=st.integers(100, 2**10))
def test_intensity_is_about_batch_when_batch_is_small(B, D_over_B, F_over_B):
    # Every example reaches the assertion: D and F are drawn at least 100 times B.
    D, F = B * D_over_B, B * F_over_B
    assert sl.matmul_intensity(B, D, F) == pytest.approx(B, rel=0.03)


@settings(max_examples=80, deadline=None)
@given(flops=st.floats(1, 1e20), nbytes=st.floats(1, 1e15), chip=st.sampled_from(sl.chips("tpu") + ("h100", "b200")))
def test_bounds_bracket_each_other(flops, nbytes, chip):
    r = sl.roofline(flops, nbytes, chip)
    assert r.t_math_s <= r.t_lower_s <= r.t_upper_s <= 2 * r.t_lower_s
    assert r.t_comms_s <= r.t_lower_s
    assert (r.bound == "compute") == (r.intensity >= r.critical_intensity * (1 - 1e-12)) or np.isclose(
        r.intensity, r.critical_intensity
    )
    assert r.attainable_flops_per_s <= sl.chip(chip).bf16_flops_per_s * (1 + 1e-12)


# Published points of the v5e roof (1.97e14 FLOP/s, 8.2e11 B/s): half the ridge gets half the peak.
@pytest.mark.parametrize("intensity, rate", [(1, 8.2e11), (120.12, 9.85e13), (240.24, 1.97e14), (1e4, 1.97e14)])
def test_attainable_rate_at_published_points_of_the_v5e_roof(intensity, rate):
    assert sl.attainable_flops_per_s(intensity, "tpu-v5e") == pytest.approx(rate, rel=1e-3)


@settings(max_examples=40, deadline=None)
@given(low=st.floats(1e-3, 1e6), factor=st.floats(1.0, 100.0))
def test_attainable_rate_never_falls_with_intensity_nor_passes_the_peak(low, factor):
    a, b = sl.attainable_flops_per_s(low, "h100"), sl.attainable_flops_per_s(low * factor, "h100")
    assert a <= b <= sl.chip("h100").bf16_flops_per_s


def test_a_sweep_is_one_call():
    B = np.array([16, 256, 4096])
    r = sl.matmul_roofline(B, 8192, 8192, "h100")
    assert r.t_lower_s.shape == (3,)
    assert list(r.bound) == ["memory", "memory", "compute"]
    assert np.all(np.diff(sl.matmul_intensity(B, 8192, 8192)) > 0)


def test_derivation_shows_the_numbers_substituted():
    d = sl.explain(sl.critical_intensity, "tpu-v5e")
    assert str(d) == "I_crit(tpu-v5e, bf16, hbm) = C / W = 1.97e14 FLOP/s / 820 GB/s = 240 FLOP/B"
    assert float(d) == sl.critical_intensity("tpu-v5e") == pytest.approx(240.24, abs=0.01)
    lines = sl.explain(sl.matmul_roofline, 1024, 8192, 8192, "tpu-v5e").lines()
    assert lines[-3:] == [
        "T_math = FLOPs / C = 1.37e11 FLOP / 1.97e14 FLOP/s = 698 µs",
        "T_comms = nbytes / W = 168 MB / 820 GB/s = 205 µs",
        "T_lower = max(T_math, T_comms) = max(698 µs, 205 µs) = 698 µs",
    ]
    assert str(sl.explain(sl.matmul_flops, 4, 8, 16)).splitlines()[0] == "FLOPs = 2·B·D·F = 2·4·8·16 = 1024 FLOP"


def test_intensity_derivation_lists_its_steps_once():
    text = str(sl.explain(sl.matmul_intensity, 256, 8192, 8192))
    assert text.splitlines()[0].startswith("FLOPs = 2·B·D·F = 2·256·8192·8192")
    assert text.splitlines()[-1] == "I = FLOPs / nbytes = 3.44e10 FLOP / 143 MB = 241 FLOP/B"
    assert len([line for line in text.splitlines() if line.startswith("FLOPs =")]) == 1


def test_results_are_numbers_whatever_the_options():
    for value in (sl.critical_intensity("tpu-v5e"), sl.t_math_s(1e12, "h100", dtype="fp8"),
                  sl.critical_batch_size("tpu-v5e", weight_dtype="int8")):
        assert type(value) is float
        assert value + 1 > 1 and f"{value:.1f}" and round(value) >= 0


def test_negative_or_zero_sizes_are_named():
    with pytest.raises(sl.InvalidValueError, match=r"^`B` must be positive \(> 0\), got -1$"):
        sl.matmul_flops(-1, 8, 8)
    with pytest.raises(sl.InvalidValueError, match=r"^`nbytes` must be positive \(> 0\), got 0$"):
        sl.arithmetic_intensity(10, 0)
    with pytest.raises(sl.InvalidValueError, match=r"^`flops` must not be negative"):
        sl.t_math_s(-5, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`D` must be a number, got 'big'$"):
        sl.matmul_bytes(1, "big", 2)
    with pytest.raises(sl.InvalidValueError, match=r"^`flops` must be a number, got True \(a bool\)$"):
        sl.roofline(True, 1e9, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`flops` must be a number, got '1e9'$"):
        sl.roofline("1e9", 1e9, "h100")


def test_options_are_keyword_only_and_say_so():
    with pytest.raises(sl.InvalidCallError, match=r"critical_intensity: .*called as critical_intensity\(chip, \*, "
                       r"dtype='bf16', bandwidth='hbm'\)"):
        sl.critical_intensity("tpu-v5e", "hbm")


def test_threshold_needs_both_dimensions_or_neither():
    with pytest.raises(sl.InvalidValueError, match=r"give both `D` and `F`"):
        sl.critical_batch_size("tpu-v5e", D=8192)


def test_roofline_of_an_unknown_dtype_or_bandwidth_is_named():
    with pytest.raises(sl.UnknownNameError, match=r"^`dtype`: unknown dtype 'int16'"):
        sl.critical_intensity("tpu-v5e", dtype="int16")
    with pytest.raises(sl.UnknownNameError, match=r"^`bandwidth`: unknown bandwidth 'hmb'.*did you mean 'hbm'"):
        sl.roofline(1, 1, "tpu-v5e", bandwidth="hmb")


def test_weights_streamed_over_pcie_need_a_far_larger_batch():
    # A v6e reading its weights from host memory over PCIe (3.2e10 B/s) instead of HBM (1.6e12 B/s).
    pcie = sl.critical_batch_size("tpu-v6e", bandwidth="pcie")
    assert pcie == pytest.approx(9.2e14 / 3.2e10)
    assert pcie / sl.critical_batch_size("tpu-v6e") == pytest.approx(1.6e12 / 3.2e10)


def test_a_realistic_share_of_the_peak_stretches_the_compute_time():
    # 1e12 FLOPs on an H100: 1.01 ms at the 9.9e14 peak, 1.19 ms at 85% of it (How to Scale Your Model, ch. 1).
    assert sl.t_math_s(1e12, "h100") == pytest.approx(1.01e-3, rel=0.01)
    assert sl.t_math_s(1e12, "h100", efficiency=0.85) == pytest.approx(1e12 / (0.85 * 9.9e14))
    r = sl.roofline(1e12, 1e6, "h100", efficiency=0.85)
    assert r.t_math_s == sl.t_math_s(1e12, "h100", efficiency=0.85) and r.critical_intensity == pytest.approx(
        0.85 * 9.9e14 / 3.35e12)
    assert "efficiency" in str(sl.explain(sl.t_math_s, 1e12, "h100", efficiency=0.85))
    with pytest.raises(sl.InvalidValueError, match=r"^`efficiency` must be <= 1, got 1.2$"):
        sl.t_math_s(1e12, "h100", efficiency=1.2)


def test_a_matmul_from_vmem_turns_compute_bound_at_a_small_batch():
    # Book ch. 2 Q4: int8 [B, 4096] x [4096, 16384] on a v5e; from VMEM (22x HBM) the ridge is about B = 11.
    hbm = sl.matmul_roofline(16, 4096, 16384, "tpu-v5e", dtype="int8")
    vmem = sl.matmul_roofline(16, 4096, 16384, "tpu-v5e", dtype="int8", bandwidth="vmem")
    assert hbm.bound == "memory" and vmem.bound == "compute"
    assert vmem.t_comms_s == pytest.approx(hbm.t_comms_s * 8.2e11 / 1.804e13)


def test_a_derivation_shows_its_numbers_only_when_they_differ_from_its_formula():
    assert str(sl.Derivation("x", "a + b", "1 + 2", 3.0, "")) == "x = a + b = 1 + 2 = 3"
    assert str(sl.Derivation("x", "b", "a", 3.0, "")) == "x = b = a = 3"
    assert str(sl.Derivation("x", "a", "a", 3.0, "")) == "x = a = 3"
    assert str(sl.Derivation("x", "a", "", 3.0, "s")) == "x = a = 3 s"
