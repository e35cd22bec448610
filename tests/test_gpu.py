"""GPU formulas (chapter 12) against the book's own numbers: How to Scale Your Model, ch. 12 "How to
Think About GPUs" (quizzes 1 to 5, pop quizzes 1 to 3, the cross-node collectives' precise derivation),
NVIDIA's DGX H100 SuperPOD reference architecture; and the errors bad input gets."""

import math

import numpy as np
import pytest

import scalelib as sl

NODE = sl.gpu_cluster(1, "h100")
SU = sl.gpu_cluster(32, "h100")             # one scalable unit: 32 nodes, 256 GPUs
SUPERPOD = sl.gpu_cluster(128, "h100")      # the 1024-GPU DGX H100 SuperPOD


# --- vector units (quiz 1) -----------------------------------------------------------------------

def test_cuda_core_counts_are_the_books_quiz_1_question_1():
    assert sl.vector_alus("h100") == 132 * 4 * 32 == 16896
    assert sl.vector_alus("b200") == 18944
    assert sl.vector_alus("tpu-v5p") == 2 * 4 * 8 * 128 == 8192


def test_the_b200_clock_from_its_80_tflops_of_fp32_is_about_2_1_ghz():
    assert sl.vector_clock_hz(80e12, "b200") == pytest.approx(80e12 / (18944 * 2))
    assert sl.vector_clock_hz(80e12, "b200") == pytest.approx(2.1e9, rel=0.01)


def test_counting_one_flop_per_cycle_doubles_the_clock_the_same_rate_needs():
    assert sl.vector_clock_hz(80e12, "b200", flops_per_cycle=1) == pytest.approx(2 * sl.vector_clock_hz(80e12, "b200"))


def test_adding_two_gib_of_fp32_on_an_h100_is_hbm_bound_at_about_3_84_ms():
    N = 1024**3
    assert sl.vector_add_time_s(N, "h100") == pytest.approx(12 * N / 3.35e12)
    assert sl.vector_add_time_s(N, "h100") == pytest.approx(3.84e-3, rel=0.005)


def test_a_vector_shorter_than_the_alus_still_takes_one_pass_of_them():
    d = sl.explain(sl.vector_add_time_s, 1024, "h100")
    t_math = next(s for s in d.steps if s.symbol == "T_math")
    assert t_math.value == pytest.approx(16896 / sl.vector_flops_per_s("h100"))


def test_vector_add_time_is_linear_in_n_once_memory_bound_and_takes_a_sweep():
    t = sl.vector_add_time_s(np.array([2**24, 2**25]), "h100")
    assert t[1] == pytest.approx(2 * t[0])


# --- a node, the fat tree (quizzes 2 and 3) --------------------------------------------------------

def test_an_h100_nodes_switches_offer_6_4_tb_s_but_its_gpus_cap_it_at_3_6():
    d = sl.explain(sl.node_bandwidth_bytes_per_s, 4, 64, 25e9, NODE)
    assert [s.value for s in d.steps] == [6.4e12, 3.6e12]
    assert d.value == 3.6e12


def test_the_h100_node_bisection_counting_both_directions_is_3_6_tb_s():
    assert NODE.bisection_bytes_per_s() == pytest.approx(8 * 450e9)


def test_every_level_of_the_superpod_gives_each_node_400_gb_s():
    leaf = sl.fat_tree_level_bytes_per_s(SUPERPOD)
    spine = sl.fat_tree_level_bytes_per_s(SUPERPOD, level="spine")
    assert leaf / SUPERPOD.num_scalable_units == pytest.approx(12.8e12)   # 32 ports · 400 Gb/s · 8 leaves
    assert spine == pytest.approx(16 * 3.2e12)                             # 16 spines of 64 ports at 50 GB/s
    assert leaf / 128 == spine / 128 == pytest.approx(400e9)


def test_an_oversubscribed_spine_carries_less_than_the_leaves():
    tree = sl.gpu_cluster(128, "h100", oversubscription=2)
    assert sl.fat_tree_level_bytes_per_s(tree, level="spine") == pytest.approx(25.6e12)


# --- collectives level by level (the precise derivation, pop quizzes, quiz 4) ----------------------

def test_per_level_allgather_bandwidths_are_514_413_and_17100_gb_s():
    V = 1e9
    assert V / sl.hierarchical_allgather_time_s(V, NODE) == pytest.approx(450e9 * 8 / 7)
    assert V / sl.hierarchical_allgather_time_s(V, SU) == pytest.approx(400e9 * 32 / 31)
    d = sl.explain(sl.hierarchical_allgather_time_s, V, SUPERPOD)
    spine = next(s for s in d.steps if s.symbol == "T_spine")
    assert V / spine.value == pytest.approx(12.8e12 * 4 / 3)
    assert V / d.value == pytest.approx(400e9 * 32 / 31)                  # the leaf level binds: 413 GB/s


def test_the_books_in_node_allgather_of_bf16_4096_by_65536_takes_1_04_ms():
    V = 4096 * 65536 * 2
    assert sl.hierarchical_allgather_time_s(V, NODE) == pytest.approx(V * 7 / (8 * 450e9))
    assert sl.hierarchical_allgather_time_s(V, NODE) == pytest.approx(1.04e-3, rel=0.01)


def test_pop_quiz_1_allgather_of_bf16_1024_by_16384_takes_about_65_us():
    assert sl.hierarchical_allgather_time_s(2 * 1024 * 16384, NODE) == pytest.approx(65e-6, rel=0.03)


def test_over_exactly_two_nodes_the_node_level_binds():
    # Quiz 4 question 5: B/514e9 at the node against B/800e9 across the two nodes.
    V = 1e9
    d = sl.explain(sl.hierarchical_allgather_time_s, V, sl.gpu_cluster(2, "h100"))
    node, leaf = d.steps
    assert V / node.value == pytest.approx(514e9, rel=0.001) and V / leaf.value == pytest.approx(800e9)
    assert d.value == node.value
    # and the two-level form agrees: 7/8 of V over NVLink, 3.39 ms for the 405B MLP weight
    W = 16384 * 53248 * 2
    assert sl.hierarchical_allgather_time_s(W, sl.gpu_cluster(2, "h100")) == pytest.approx(3.39e-3, rel=0.005)
    assert sl.allgather_time_s(W, sl.gpu_cluster(2, "h100"), latency_s=0) == pytest.approx(
        sl.hierarchical_allgather_time_s(W, sl.gpu_cluster(2, "h100")))


def test_inside_one_node_the_two_allgather_forms_agree():
    assert sl.hierarchical_allgather_time_s(1e9, NODE) == pytest.approx(sl.allgather_time_s(1e9, NODE, latency_s=0))


@pytest.mark.parametrize("Y", [1, 2, 4, 8])
def test_pop_quiz_3_an_inner_axis_within_the_node_leaves_the_leaf_bound_time_alone(Y):
    D, F = 8192, 32768
    assert sl.hierarchical_allgather_time_s(2 * D * F, SU, inner=Y) == pytest.approx(2 * D * F * 31 / (32 * 400e9))


@pytest.mark.parametrize("Y", [16, 32, 64, 128])
def test_pop_quiz_3_an_inner_axis_across_nodes_divides_the_time_by_y(Y):
    D, F, X = 8192, 32768, 256 // Y
    expected = 2 * D * F / (Y * 50e9) * (X - 1) / X                      # the book's 2DF/(Y · 50 GB/s), exactly
    assert sl.hierarchical_allgather_time_s(2 * D * F, SU, inner=Y) == pytest.approx(expected)


def test_an_inner_axis_over_the_whole_group_leaves_nothing_to_gather():
    assert sl.hierarchical_allgather_time_s(1e9, SU, inner=256) == 0.0


def test_allreduce_is_two_allgathers_without_sharp_and_one_exact_pass_with_it():
    V = 1e9
    assert sl.hierarchical_allreduce_time_s(V, SU) == pytest.approx(2 * sl.hierarchical_allgather_time_s(V, SU))
    assert sl.hierarchical_allreduce_time_s(V, NODE, sharp=True) == pytest.approx(V / 450e9)   # quiz 4 question 2


def test_quiz_4_question_3_a_sharp_allreduce_inside_a_node_shrinks_with_y():
    D, F = 8192, 28672
    for Y in (1, 2, 4):
        assert sl.hierarchical_allreduce_time_s(2 * D * F, NODE, inner=Y, sharp=True) == pytest.approx(
            2 * D * F / (Y * 450e9))
    # beyond one node the node must send all its bytes out, not 1/Y of them
    two = sl.gpu_cluster(2, "h100")
    assert sl.hierarchical_allreduce_time_s(2 * D * F, two, inner=8, sharp=True) == pytest.approx(2 * D * F / 400e9)


def test_quiz_4_question_4_a_sharp_allreduce_at_the_spine_runs_at_12_8_tb_s():
    D, F = 8192, 28672
    assert sl.hierarchical_allreduce_time_s(2 * D * F, SUPERPOD, inner=256, sharp=True) == pytest.approx(
        2 * D * F / 12.8e12)


def test_quiz_4_question_1_an_su_allgather_through_the_node_and_leaf_switches():
    B = 1.0
    get = lambda switch, direction: sl.switch_bytes(B, SU, switch=switch, direction=direction)  # noqa: E731
    assert (get("node", "ingress"), get("node", "egress")) == pytest.approx((B, 8 * B))
    assert (get("leaf", "ingress"), get("leaf", "egress")) == pytest.approx((B, 31 * B))


def test_quiz_4_question_2_a_sharp_allreduce_moves_bn_through_the_switch_each_way():
    for direction in ("ingress", "egress"):
        assert sl.switch_bytes(1.0, NODE, collective="allreduce", sharp=True, direction=direction) == 8.0
    assert sl.switch_bytes(1.0, NODE, collective="allreduce", sharp=True, inner=4) == 2.0
    assert sl.switch_bytes(1.0, NODE, collective="allreduce") == pytest.approx(2 * 8 * 7 / 8)


def test_pop_quiz_2_a_ragged_alltoall_with_4_of_8_destinations_takes_half_the_time():
    V = 2 * 4096 * 8192
    dense = sl.alltoall_time_s(V, NODE, latency_s=0)
    assert dense == pytest.approx(V * 7 / (64 * 450e9))
    assert sl.ragged_alltoall_time_s(V, 4, NODE) == pytest.approx(dense / 2)
    assert sl.ragged_alltoall_time_s(V, 4, NODE, routing="random") == pytest.approx(dense * (1 - (7 / 8) ** 4))


def test_random_routing_is_close_to_fixed_routing_for_many_gpus():
    big = sl.gpu_cluster(64, "h100")
    fixed, random = (sl.ragged_alltoall_time_s(1e9, 8, big, routing=r) for r in ("fixed", "random"))
    assert random == pytest.approx(fixed, rel=0.02) and random < fixed


def test_a_tree_allreduce_needs_log_steps_where_a_ring_needs_linear():
    assert sl.allreduce_latency_s(8, algorithm="ring", step_latency_s=1.0) == 14
    assert sl.allreduce_latency_s(8, algorithm="tree", step_latency_s=1.0) == 6
    assert sl.allreduce_latency_s(1, algorithm="tree") == 0


# --- rooflines (data, expert and pipeline parallelism, quiz 5) ---------------------------------------

def test_two_node_data_parallelism_is_about_1925_tokens_per_gpu_not_the_books_1237():
    # The book's 1237 halves 2475 for the cross-node stage and forgets the NVLink stage, 990e12 · 7/(8 · 450e9).
    assert sl.hierarchical_data_parallel_critical_batch(sl.gpu_cluster(2, "h100")) == pytest.approx(990e12 * 7 / (8 * 450e9))
    assert round(sl.hierarchical_data_parallel_critical_batch(sl.gpu_cluster(2, "h100"))) == 1925


def test_many_nodes_of_data_parallelism_approach_the_books_2475():
    assert sl.hierarchical_data_parallel_critical_batch(SUPERPOD) == pytest.approx(2475 * 31 / 32)


def test_model_parallelism_inside_a_node_does_not_help_data_parallelism():
    base = sl.hierarchical_data_parallel_critical_batch(SUPERPOD)
    assert sl.hierarchical_data_parallel_critical_batch(SUPERPOD, inner=8) == pytest.approx(base)


def test_llama_3_70b_with_8_way_tp_and_8_way_pp_needs_about_300_tokens_per_gpu():
    # Quiz 5 question 2: 64 GPUs of model parallelism span 8 nodes: 8 · 400 GB/s, 990e12 / 3.2e12 ≈ 309.
    four_k = sl.gpu_cluster(512, "h100")
    assert sl.hierarchical_data_parallel_critical_batch(four_k, inner=64) == pytest.approx(990e12 / 3.2e12 * 3 / 4)
    assert 4e6 / 4096 > sl.hierarchical_data_parallel_critical_batch(four_k, inner=64)
    assert 4e6 / 4096 < sl.hierarchical_data_parallel_critical_batch(four_k, inner=8)   # ZeRO-3 with 8-way TP: no


def test_megatron_70b_and_314b_model_parallelism_halves_and_eighths_the_threshold():
    # Quiz 5 question 3: TP 8 x PP 2 spans 2 nodes, TP 8 x PP 8 spans 8: "2x and 8x better throughput".
    eight = sl.hierarchical_data_parallel_critical_batch(sl.gpu_cluster(96, "h100"), inner=8)
    assert sl.hierarchical_data_parallel_critical_batch(sl.gpu_cluster(96, "h100"), inner=16) == pytest.approx(
        eight / 2, rel=0.04)
    big = sl.hierarchical_data_parallel_critical_batch(sl.gpu_cluster(384, "h100"), inner=64)
    assert big == pytest.approx(990e12 / (64 * 50e9) * 3 / 4)


def test_moe_data_parallelism_needs_e_over_k_more_tokens():
    assert sl.moe_data_parallel_critical_batch(128, 4, sl.gpu_cluster(16, "h100")) == pytest.approx(32 * 2475)


def test_expert_parallelism_across_nodes_follows_the_books_two_regimes():
    alpha = 990e12 / 400e9
    cluster = sl.gpu_cluster(64, "h100")
    assert sl.expert_parallel_critical_width(64, 8, cluster) == pytest.approx(alpha * (64 - 8) / 8)   # k >= Z/8
    assert sl.expert_parallel_critical_width(512, 2, cluster) == pytest.approx(8 * alpha * (512 - 8) / 512)  # Z >> k
    assert sl.expert_parallel_critical_width(1, 8, cluster) == 0.0


def test_pipeline_traffic_is_the_books_formula_and_tiny_per_layer():
    B, D, p, m = 4e6, 8192, 8, 32
    W = 400e9
    assert sl.pipeline_comms_time_s(B, D, p, m, sl.gpu_cluster(8, "h100")) == pytest.approx(2 * B * D / (W * m) * (m + p - 2))
    per_layer = sl.pipeline_comms_time_s(B, D, p, m, sl.gpu_cluster(8, "h100")) / 80
    assert per_layer < sl.t_math_s(2 * 70e9 / 80 * B / 64, "h100")


def test_gb200_nvl72_cross_rack_rooflines_are_about_4x_the_h100s():
    h100 = 990e12 / sl.gpu_cluster(2, "h100").node_egress_bytes_per_s
    nvl = sl.chip("gb200-nvl72")
    gb200 = nvl.bf16_flops_per_s / sl.gpu_cluster(2, "gb200-nvl72").node_egress_bytes_per_s
    assert 3.5 < h100 / gb200 < 4.5


def test_grace_memory_over_nvlink_c2c_is_as_fast_as_another_gpus_nvlink():
    assert sl.host_transfer_time_s(450e9) == pytest.approx(1.0)
    assert sl.host_transfer_time_s(1e9, link="pcie-gen5") / sl.host_transfer_time_s(1e9) == pytest.approx(450 / 64)


# --- the derivations and bad input -------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: sl.explain(sl.hierarchical_allgather_time_s, 1e9, SU, inner=4),
    lambda: sl.explain(sl.hierarchical_data_parallel_critical_batch, sl.gpu_cluster(512, "h100"), inner=64),
    lambda: sl.explain(sl.vector_add_time_s, 2**20, "h100"),
    lambda: sl.explain(sl.expert_parallel_critical_width, 64, 8, SUPERPOD),
    lambda: sl.explain(sl.switch_bytes, 1e9, SU, switch="leaf"),
])
def test_derivations_define_their_symbols(call):
    text = str(call())
    assert "where" in text
    assert "nan" not in text and "inf" not in text


def test_the_per_level_derivation_names_each_level():
    text = str(sl.explain(sl.hierarchical_allgather_time_s, 1e9, SUPERPOD))
    assert "T_node" in text and "T_leaf" in text and "T_spine" in text


def test_errors_name_the_argument_and_what_would_do():
    with pytest.raises(sl.InvalidValueError, match=r"^`inner`: an inner axis of 3 GPUs splits the 8-GPU units"):
        sl.hierarchical_allgather_time_s(1e9, sl.gpu_cluster(3, "h100"), inner=3)
    with pytest.raises(sl.InvalidValueError, match=r"^`group`: a group spanning scalable units must be whole units"):
        sl.hierarchical_allgather_time_s(1e9, sl.gpu_cluster(48, "h100"))
    with pytest.raises(sl.InvalidValueError, match=r"^`topology` must be a GpuCluster"):
        sl.hierarchical_allgather_time_s(1e9, sl.tpu_pod("tpu-v5e"))
    with pytest.raises(sl.InvalidValueError, match=r"^`k`: a token uses at most the E = 8 experts, got k = 9$"):
        sl.moe_data_parallel_critical_batch(8, 9, SU)
    with pytest.raises(sl.InvalidValueError, match=r"^`inner`: with 256 model-parallel GPUs in a group of 256"):
        sl.hierarchical_data_parallel_critical_batch(SU, inner=256)
    with pytest.raises(sl.UnknownNameError, match=r"`link`"):
        sl.host_transfer_time_s(1e9, link="pcie5")
    with pytest.raises(sl.InvalidValueError, match=r"^`topology`: the leaf level joins 2 to 32 nodes"):
        sl.switch_bytes(1e9, NODE, switch="leaf")
    with pytest.raises(sl.InvalidValueError, match=r"^`Z`: expert parallelism across nodes spans whole nodes"):
        sl.expert_parallel_critical_width(12, 2, SU)


def test_measured_vector_add_runs_on_the_device_jax_uses():
    d = sl.explain(sl.measure_vector_add_time_s, 2**12, repeats=1)
    import jax

    assert d.value > 0 and jax.devices()[0].platform in d.formula
    assert math.isfinite(d.value)
