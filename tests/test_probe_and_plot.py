"""The local-machine probe (real JAX timings, kept small) and the roofline plot."""

import matplotlib

matplotlib.use("Agg")

import pytest

import scalelib as sl


def test_probe_returns_a_chip_like_spec_the_rooflines_accept():
    local = sl.measure_machine(matmul_sizes=(256,), nbytes=2**22, repeats=2)
    assert local.family == "cpu"
    assert 1e8 < local.f32_flops_per_s < 1e14  # a CPU: more than 0.1 GFLOP/s, far below a TPU
    assert 1e8 < local.hbm_bytes_per_s < 1e13
    assert "measured by scalelib.measure_machine()" in local.source
    r = sl.matmul_roofline(64, 256, 256, local, dtype="f32")
    assert r.t_lower_s > 0
    assert sl.critical_intensity(local, dtype="f32") == pytest.approx(local.f32_flops_per_s / local.hbm_bytes_per_s)


def test_a_measured_matmul_never_beats_physics():
    # 2·B·D·F FLOPs in the measured time must stay below 1e13 FLOP/s on a CPU.
    t = sl.measure_matmul_time_s(128, 256, 256, dtype="f32", repeats=2)
    assert 0 < t < 10
    assert 2 * 128 * 256 * 256 / t < 1e13


def test_probe_rejects_bad_sizes_and_dtypes():
    with pytest.raises(sl.InvalidValueError, match=r"^`B` must be a whole number >= 1, got 0$"):
        sl.measure_matmul_time_s(0, 8, 8)
    with pytest.raises(sl.UnknownNameError, match=r"^`dtype`: unknown dtype for a measured matmul 'int8'"):
        sl.measure_matmul_time_s(8, 8, 8, dtype="int8")
    with pytest.raises(sl.InvalidValueError, match=r"^`B, D, F`: this measurement would allocate [0-9.]+ GiB; .* at most 4 GiB$"):
        sl.measure_matmul_time_s(10**6, 10**6, 8)
    with pytest.raises(sl.InvalidValueError, match=r"^`nbytes`: this measurement would allocate"):
        sl.measure_copy_time_s(1e12)


def test_roofline_plot_is_labelled_and_marks_each_ridge():
    ax = sl.plot_roofline(["tpu-v5e", "h100"], points=[{"intensity": [10, 100], "flops_per_s": [1e12, 1e13], "label": "ops"}])
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/byte)"
    assert ax.get_ylabel() == "attainable throughput (FLOP/s)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["tpu-v5e (bf16): ridge at 240 FLOP/B", "h100 (bf16): ridge at 296 FLOP/B", "ops"]
    ridges = [line.get_xydata()[0].tolist() for line in ax.lines if line.get_gid() == "ridge"]
    assert ridges == [[pytest.approx(1.97e14 / 8.2e11), 1.97e14], [pytest.approx(9.9e14 / 3.35e12), 9.9e14]]


def test_no_label_sits_on_the_data():
    # Chapter 1's plot: close ridges (v5p, H100, B200) used to stack their labels on the markers.
    ax = sl.plot_roofline(["tpu-v5e", "tpu-v5p", "h100", "b200"])
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    plot_area = ax.get_window_extent(renderer)
    assert legend.x0 >= plot_area.x1  # the legend is beside the axes, not over them
    assert [t for t in ax.texts] == []  # no free-floating labels inside the axes


def test_roofline_plot_takes_one_dtype_per_chip():
    ax = sl.plot_roofline(["tpu-v5e", "tpu-v5e"], dtype=["bf16", "int8"])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "tpu-v5e (bf16): ridge at 240 FLOP/B", "tpu-v5e (int8): ridge at 480 FLOP/B"]
