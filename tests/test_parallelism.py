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
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: TpuSlice\(tpu-v5e, X=4, Y=1; 4 chips\) has one chip along 'Y': there is nothing to parallelise over$"):
        sl.data_parallel_critical_batch(sl.tpu_slice((4, 1), "tpu-v5e"), axes="Y")
    with pytest.raises(sl.InvalidValueError, match=r"^`microbatches` must be a whole number >= 1, got 0$"):
        sl.pipeline_bubble_fraction(4, 0)
    with pytest.raises(sl.InvalidValueError, match=r"^`stages` must be a whole number, got 0.5$"):
        sl.pipeline_bubble_fraction(0.5, 1)


def test_across_nvl72_racks_the_nvlink_stage_binds_data_parallelism():
    # Each rack's egress (3.6e12 B/s) beats one GPU's NVLink (9e11 B/s): C / W_gpu binds.
    racks = sl.gpu_cluster(4, "gb200-nvl72")
    assert sl.data_parallel_critical_batch(racks) == pytest.approx(2.3e15 / 9e11)
