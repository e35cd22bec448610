"""Parallelism rooflines against the thresholds published in How to Scale Your Model (ch. 5 and 12)."""

import pytest

import scalelib as sl


def test_v5p_data_parallel_threshold_is_about_2550_tokens_per_chip_on_one_axis():
    assert sl.data_parallel_critical_batch(sl.tpu_pod("tpu-v5p"), axes="X") == pytest.approx(2550, rel=0.01)


def test_v5p_threshold_is_about_850_using_all_three_axes():
    assert sl.data_parallel_critical_batch(sl.tpu_pod("tpu-v5p")) == pytest.approx(850, rel=0.01)


def test_h100_threshold_is_about_2200_in_a_node_and_2475_across_nodes():
    assert sl.data_parallel_critical_batch(sl.gpu_cluster(1, "h100")) == pytest.approx(2200, rel=0.01)
    assert sl.data_parallel_critical_batch(sl.gpu_cluster(16, "h100")) == pytest.approx(2475, rel=0.01)


def test_tensor_parallel_limit_is_f_over_the_threshold():
    node = sl.gpu_cluster(1, "h100")
    assert sl.tensor_parallel_max_degree(28672, node) == pytest.approx(28672 / 2200, rel=0.01)
    pod = sl.tpu_pod("tpu-v5p")
    assert sl.tensor_parallel_max_degree(28672, pod, axes="Y") == pytest.approx(28672 / 2550, rel=0.01)


def test_pipeline_bubble_by_hand():
    assert sl.pipeline_bubble_fraction(4, 1) == 0.75  # one microbatch: 3 of 4 stage-slots idle
    assert sl.pipeline_bubble_fraction(16, 16) == pytest.approx(15 / 31)
    assert sl.pipeline_bubble_fraction(8, 1000) < 0.01
    assert str(sl.explain(sl.pipeline_bubble_fraction, 4, 4)).splitlines()[0] == (
        "bubble = (p − 1) / (m + p − 1) = (4 − 1) / (4 + 4 − 1) = 0.429")


def test_bad_parallelism_arguments():
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: a GPU cluster takes no `axes`"):
        sl.data_parallel_critical_batch(sl.gpu_cluster(1, "h100"), axes="X")
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: TpuSlice\(tpu-v5e, X=4, Y=1; 4 chips\) has one chip along 'Y': there is nothing to parallelise over; name axes of more than one chip$"):
        sl.data_parallel_critical_batch(sl.tpu_slice((4, 1), "tpu-v5e"), axes="Y")
    # no axes named: the whole slice is one chip, so the fault is the topology's, not an axis called None
    with pytest.raises(sl.InvalidValueError, match=r"^`topology`: TpuSlice\(tpu-v5e, X=1, Y=1; 1 chips\) is one chip"):
        sl.data_parallel_critical_batch(sl.tpu_slice((1, 1), "tpu-v5e"))
    with pytest.raises(sl.InvalidValueError, match=r"^`microbatches` must be a whole number >= 1, got 0$"):
        sl.pipeline_bubble_fraction(4, 0)
    with pytest.raises(sl.InvalidValueError, match=r"^`stages` must be a whole number, got 0.5$"):
        sl.pipeline_bubble_fraction(0.5, 1)


def test_across_nvl72_racks_the_nvlink_stage_binds_data_parallelism():
    # Each rack's egress (3.6e12 B/s) beats one GPU's NVLink (9e11 B/s): C / W_gpu binds.
    racks = sl.gpu_cluster(4, "gb200-nvl72")
    assert sl.data_parallel_critical_batch(racks) == pytest.approx(2.3e15 / 9e11)


def test_the_thresholds_are_the_chips_published_rates_divided_exactly():
    # By hand from scalelib/data/chips.toml, two-sided: C / W per chip, W one axis's or all axes' ICI
    # (a 16x20x28 v5p pod has wraparound on every axis: 2 links x 9e10 B/s per axis), NVLink or node egress.
    import tomllib
    from pathlib import Path

    chips = tomllib.loads((Path(sl.__file__).parent / "data" / "chips.toml").read_text())
    v5p, h100, v5e = chips["tpu-v5p"], chips["h100"], chips["tpu-v5e"]
    axis = v5p["ici_link_bytes_per_s_bidirectional"]
    pod = sl.tpu_pod("tpu-v5p")
    assert sl.data_parallel_critical_batch(pod) == pytest.approx(v5p["bf16_flops_per_s"] / (3 * axis), rel=1e-12)
    assert sl.data_parallel_critical_batch(pod, axes="XY") == pytest.approx(
        v5p["bf16_flops_per_s"] / (2 * axis), rel=1e-12)
    node, nodes = sl.gpu_cluster(1, "h100"), sl.gpu_cluster(16, "h100")
    assert sl.data_parallel_critical_batch(node) == pytest.approx(
        h100["bf16_flops_per_s"] / h100["scale_up_bytes_per_s_per_gpu"], rel=1e-12)
    assert sl.data_parallel_critical_batch(nodes) == pytest.approx(
        h100["bf16_flops_per_s"] / h100["scale_out_bytes_per_s_per_node"], rel=1e-12)
    assert sl.data_parallel_critical_batch(node, dtype="fp8") == pytest.approx(
        h100["fp8_flops_per_s"] / h100["scale_up_bytes_per_s_per_gpu"], rel=1e-12)
    v5e_slice = sl.tpu_slice((16, 16), "tpu-v5e")
    assert sl.data_parallel_critical_batch(v5e_slice, dtype="int8") == pytest.approx(
        v5e["int8_ops_per_s"] / (2 * v5e["ici_link_bytes_per_s_bidirectional"]), rel=1e-12)
    # TP's largest degree: F · W / C
    assert sl.tensor_parallel_max_degree(28672, node) == pytest.approx(
        28672 * h100["scale_up_bytes_per_s_per_gpu"] / h100["bf16_flops_per_s"], rel=1e-12)
    # FSDP + TP: α² / (M_X·M_Y·F) with α = C / W of one axis; X_opt = sqrt(B/F · M_X/M_Y · N)
    alpha = v5p["bf16_flops_per_s"] / axis
    assert sl.fsdp_tensor_parallel_critical_batch(32768, pod) == pytest.approx(alpha**2 / (2 * 32768), rel=1e-12)
    assert sl.fsdp_tensor_parallel_critical_batch(32768, pod, M_X=1, M_Y=2) == pytest.approx(
        alpha**2 / (2 * 32768), rel=1e-12)
    assert sl.fsdp_tensor_parallel_critical_batch(32768, pod, M_X=2, M_Y=2) == pytest.approx(
        alpha**2 / (4 * 32768), rel=1e-12)
    cube = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    assert sl.optimal_fsdp_degree(49152, 32768, cube) == pytest.approx((49152 / 32768 * 2 / 1 * 64) ** 0.5, rel=1e-12)
    assert sl.optimal_fsdp_degree(49152, 32768, cube, M_X=1, M_Y=2) == pytest.approx(
        (49152 / 32768 * 1 / 2 * 64) ** 0.5, rel=1e-12)
    # DCN: C over one chip's DCN bandwidth, per slice
    assert sl.cross_slice_critical_batch(pod) == pytest.approx(
        v5p["bf16_flops_per_s"] / v5p["dcn_bytes_per_s_per_chip"], rel=1e-12)


def test_the_interleaved_bubble_by_hand():
    # v chunks per stage: the p − 1 idle slots are 1/v of a stage's work each, over v·m slots of work
    for p, m, v in ((4, 8, 2), (8, 16, 4), (2, 2, 3)):
        assert sl.pipeline_bubble_fraction(p, m, virtual_stages=v) == pytest.approx((p - 1) / (v * m + p - 1))
    assert sl.pipeline_bubble_fraction(1, 5) == 0.0


def test_the_tensor_parallel_limit_counts_the_activation_bytes_of_its_dtype():
    # 2·B·D·F/(Y·C) >= x·B·D/W  =>  Y <= 2·F·W/(x·C): int8 arithmetic doubles C (a v5e's 394 against 197
    # TFLOP/s) and int8 activations halve x, so the limit is bf16's, F·W/C_bf16, not half of it
    F, v5e = 16384, sl.tpu_slice((4, 4), "tpu-v5e")
    W = 45e9          # a 4x4 has no wraparound: its X axis is a line of 4 chips, 45 GB/s one way (chapter 7)
    C_bf16, C_int8 = 1.97e14, 3.94e14
    assert sl.tensor_parallel_max_degree(F, v5e, axes="X") == pytest.approx(F * W / C_bf16, rel=1e-9)
    int8 = sl.tensor_parallel_max_degree(F, v5e, dtype="int8", axes="X")
    assert int8 == pytest.approx(2 * F * W / (1 * C_int8), rel=1e-9) and round(float(int8), 2) == 3.74
    bf16_acts = sl.tensor_parallel_max_degree(F, v5e, dtype="int8", axes="X", activation_dtype="bf16")
    assert bf16_acts == pytest.approx(F * W / C_int8, rel=1e-9) and round(float(bf16_acts), 2) == 1.87
    with pytest.raises(sl.UnknownNameError, match=r"^`activation_dtype`: unknown dtype .int3."):
        sl.tensor_parallel_max_degree(F, v5e, activation_dtype="int3")
