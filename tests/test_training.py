"""The training cost model against the book's thresholds and the ZeRO paper's memory figures."""

import math

import numpy as np

import pytest

import scalelib as sl

POD = sl.tpu_pod("tpu-v5p")
CUBE = sl.tpu_slice((16, 16, 16), "tpu-v5p")


# --- the thresholds of chapter 5, as the book publishes them -------------------------------------


def test_fsdp_with_tensor_parallelism_needs_about_2550_squared_over_2F_tokens_per_chip():
    assert sl.fsdp_tensor_parallel_critical_batch(32768, POD) == pytest.approx(99, rel=0.01)   # the book: ≈ 99
    assert sl.fsdp_tensor_parallel_critical_batch(13824, CUBE) == pytest.approx(235, rel=0.01)  # ch. 5 Q3: ≈ 235
    assert sl.fsdp_tensor_parallel_critical_batch(28672, POD) == pytest.approx(113, rel=0.01)  # ch. 6: ≈ 113


def test_optimal_fsdp_width_matches_the_books_worked_figures():
    assert sl.optimal_fsdp_degree(48 * 1024, 32768, sl.tpu_slice((4, 4, 4), "tpu-v5p")) == pytest.approx(13.9, abs=0.05)
    assert sl.optimal_fsdp_degree(3e6, 13824, CUBE) == pytest.approx(1333, rel=0.01)  # ch. 5 Q3
    assert sl.optimal_fsdp_degree(4 * 2**20, 28672, POD) == pytest.approx(1618, rel=0.01)  # ch. 6 Text Q9


def test_data_parallelism_across_pods_needs_73440_tokens_per_pod():
    assert sl.cross_slice_critical_batch(POD) == pytest.approx(73440)
    with pytest.raises(sl.InvalidValueError, match=r"^`topology` must be a TpuSlice"):
        sl.cross_slice_critical_batch(sl.gpu_cluster(2, "h100"))


def test_the_cost_models_fsdp_turns_communication_bound_at_850_tokens_per_chip_on_a_whole_v5p_pod():
    # With short sequences the step is the book's MLP stack: FSDP over the whole 3D torus binds below C / 3W.
    def bound(tokens_per_chip):
        B = tokens_per_chip * POD.num_chips
        cost = sl.training_cost("llama-3-70b", B, sl.ParallelPlan(fsdp=POD.num_chips, remat="none"), POD, seq_len=128)
        return cost.bound["FSDP"]

    assert bound(800) == "communication-bound"
    assert bound(900) == "hidden under compute"


def test_the_cost_models_dcn_binds_below_c_over_w_dcn_per_slice():
    # 8 slices: each chip's gradient shard crosses DCN twice ((s - 1)/s of it each way): B_slice > C/W · 7/8,
    # some 7% more for LLaMA-3 8B, whose input embedding (6.5% of its weights) is synced but does no matmul.
    cube = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    edge = 73440 * 7 / 8
    bound = lambda per_slice: sl.training_cost(  # noqa: E731
        "llama-3-8b", per_slice * 8, sl.ParallelPlan(fsdp=64, slices=8, remat="none"), cube, seq_len=128).bound["DCN"]
    assert bound(edge * 0.97) == "communication-bound"
    assert bound(edge * 1.1) == "hidden under compute"


# --- memory: Adam's state, ZeRO's stages -------------------------------------------------------------


def test_zero_stages_match_the_zero_papers_7_5b_model_on_64_chips():
    # Rajbhandari et al. (2020), Figure 1: 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per device.
    got = [sl.zero_state_bytes(7.5e9, 64, stage=k) / 1e9 for k in range(4)]
    assert got == pytest.approx([120, 31.4, 16.6, 1.875], rel=0.005)


def test_mixed_precision_adam_is_16_bytes_per_parameter_and_the_books_count_is_10_without_gradients():
    assert sl.zero_state_bytes(1e9, 1, stage=0) == 16e9
    assert sl.zero_state_bytes(1e9, 1, stage=0, master_dtype=None, grad_dtype="bf16") == 12e9
    # The book (ch. 5 Q2): bf16 weights and two f32 moments, 10 bytes per parameter, 130 GB for LLaMA-2 13B.
    plan = sl.ParallelPlan(fsdp=8)
    cost = sl.training_cost("llama-2-13b", 8 * 4096, plan, sl.gpu_cluster(1, "h100"), seq_len=4096)
    per_param = (cost.memory_bytes["parameters"] + cost.memory_bytes["optimizer state"]) * 8 / sl.params("llama-2-13b")
    assert per_param == pytest.approx(10)
    assert per_param * sl.params("llama-2-13b") == pytest.approx(130e9, rel=0.01)


def test_full_remat_keeps_one_bf16_vector_of_width_D_per_token_and_layer():
    m = sl.model("llama-3-8b")
    plan = sl.ParallelPlan(fsdp=8, remat="full")
    B = 8 * 8192
    acts = sl.training_cost(m, B, plan, sl.gpu_cluster(1, "h100"), seq_len=8192).memory_bytes["activations"]
    kept = 2 * m.D * m.L * B / 8
    assert acts > kept and acts - kept < kept / m.L * 20  # plus one layer's full activations to recompute into


GPT3 = sl.ModelSpec(name="gpt-3-175b", L=96, D=12288, F=49152, N=96, K=96, H=128, V=51200, gated=False,
                    tied_embeddings=True, source="Brown et al. 2020, Table 2.1")


@pytest.mark.parametrize("flash", [False, True])
def test_activation_memory_under_each_remat_policy_is_korthikantis_table_2(flash):
    # Korthikanti et al. 2022, Table 2, tensor and sequence parallelism, bytes per layer (16-bit activations):
    # no recomputation s·b·h·(34/t + 5·a·s/(h·t)), selective (the attention core recomputed) 34·s·b·h/t,
    # full 2·s·b·h (the layer's input; divided by t too here, the input being sequence-parallel). GPT-3 175B,
    # s = 2048, b = 1 (one sequence per microbatch), h = 12288, a = 96, t = 8; PP 8 with 1F1B over 64
    # microbatches: 96 / 8 = 12 layers a stage, the first stage holding 8 microbatches at once.
    s_, b, h, a, t = 2048, 1, 12288, 96, 8
    layers, in_flight = 12, 8
    none = s_ * b * h * (34 + 5 * a * s_ / h) / t
    selective = 34 * s_ * b * h / t
    full = 2 * s_ * b * h / t
    assert (none, selective, full) == (358_612_992, 106_954_752, 6_291_456)  # 358.6, 107.0 and 6.3 MB a layer
    if flash:  # a fused kernel stores no scores, only the softmax's statistics: one value per head and token
        none = selective + 2 * a * s_ * b / t
    topology = sl.gpu_cluster(8, "a100")
    got = {r: sl.training_cost(GPT3, 64 * s_, sl.ParallelPlan(tensor=t, pipeline=8, microbatches=64, remat=r),
                               topology, seq_len=s_, flash_attention=flash).memory_bytes["activations"]
           for r in ("none", "selective", "full", "dot_product")}
    assert got["none"] == pytest.approx(none * layers * in_flight, rel=1e-12)
    assert got["selective"] == pytest.approx(selective * layers * in_flight, rel=1e-12)
    # full: every layer's input, and one layer's whole working set while the backward recomputes it
    assert got["full"] == pytest.approx(full * layers * in_flight + none, rel=1e-12)
    # JAX's dot_product policy keeps only the weight matmuls' outputs: Q, K, V (3h), the two output projections'
    # (2h) and the MLP's first (4h), 9 values of 2 bytes a token where selective keeps 17
    assert got["dot_product"] == pytest.approx(2 * 9 * s_ * b * h / t * layers * in_flight, rel=1e-12)
    # selective recomputes the same FLOPs as dot_product: QKᵀ and AV
    assert sl.train_flops(GPT3, seq_len=s_, remat="selective") == sl.train_flops(GPT3, seq_len=s_, remat="dot_product")


def test_tensor_parallelism_divides_the_activations_and_the_state():
    base = sl.training_cost("llama-3-8b", 8 * 4096, sl.ParallelPlan(data=8, remat="dot_product"),
                            sl.gpu_cluster(1, "h100"), seq_len=4096)
    tp = sl.training_cost("llama-3-8b", 8 * 4096, sl.ParallelPlan(data=4, tensor=2, remat="dot_product"),
                          sl.gpu_cluster(1, "h100"), seq_len=4096)
    assert tp.memory_bytes["parameters"] == pytest.approx(base.memory_bytes["parameters"] / 2)
    assert tp.memory_bytes["activations"] == pytest.approx(base.memory_bytes["activations"])  # 2x tokens, / 2


def test_mfu_of_a_compute_bound_step_is_the_model_flops_over_the_hardware_flops():
    cost = sl.training_cost("llama-3-8b", 64 * 4096, sl.ParallelPlan(fsdp=64, remat="full"),
                            sl.tpu_slice((4, 4, 4), "tpu-v5p"), seq_len=4096)
    assert cost.bound == {"FSDP": "hidden under compute"}
    model, hardware = (sl.train_flops("llama-3-8b", seq_len=4096, remat=r) for r in ("none", "full"))
    assert cost.mfu == pytest.approx(model / hardware)
    assert sl.model_flops_utilization("llama-3-8b", 64 * 4096, cost.time_s, sl.tpu_slice((4, 4, 4), "tpu-v5p"),
                                      seq_len=4096) == pytest.approx(cost.mfu)


def test_the_step_time_is_explained_and_tabled():
    args = ("llama-3-8b", 64 * 4096, sl.ParallelPlan(data=8, fsdp=4, tensor=2), sl.tpu_slice((4, 4, 4), "tpu-v5p"))
    cost = sl.training_cost(*args, seq_len=4096)
    d = sl.explain(sl.training_cost, *args, seq_len=4096)
    assert d.value == cost.time_s and str(d).startswith("T_step(DP 8 × FSDP 4 × TP 2) = ")
    assert cost.table().count("\n") >= 8 and "| **step** |" in cost.table()


def test_pipelines_stretch_the_step_by_their_bubble():
    topo = sl.gpu_cluster(1, "h100")
    flat = sl.training_cost("llama-3-8b", 16 * 4096, sl.ParallelPlan(data=8, microbatches=2, remat="full"), topo,
                            seq_len=4096)
    piped = sl.training_cost("llama-3-8b", 16 * 4096, sl.ParallelPlan(data=2, pipeline=4, microbatches=8,
                                                                      remat="full"), topo, seq_len=4096)
    assert piped.bubble_fraction == pytest.approx(3 / 11)
    assert piped.time_s > flat.time_s / (1 - piped.bubble_fraction) * 0.99


# --- clear errors for impossible plans -----------------------------------------------------------


def test_axes_must_multiply_to_the_chip_count():
    with pytest.raises(sl.InvalidValueError, match=r"^`plan`: data·fsdp·tensor·pipeline = 1·64·2·1 = 128 chips, but "
                                                   r"TpuSlice\(tpu-v5p, X=4↻, Y=4↻, Z=4↻; 64 chips\) has 64; the axes "
                                                   r"must multiply to its chip count$"):
        sl.training_cost("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=64, tensor=2), sl.tpu_slice((4, 4, 4), "tpu-v5p"),
                         seq_len=4096)


def test_a_pipeline_cannot_have_more_stages_than_layers():
    with pytest.raises(sl.InvalidValueError, match=r"^`plan`: a pipeline of 64 stages × 1 chunks needs at least "
                                                   r"that many layers; llama-3-8b has 32$"):
        sl.training_cost("llama-3-8b", 2**20, sl.ParallelPlan(pipeline=64), sl.gpu_cluster(8, "h100"), seq_len=4096)


def test_tensor_parallelism_takes_whole_heads_and_experts_need_an_moe():
    with pytest.raises(sl.InvalidValueError, match=r"tensor = 3 must divide the 32 query heads"):
        sl.training_cost("llama-3-8b", 2**20, sl.ParallelPlan(tensor=3), _three_gpus(), seq_len=4096)
    with pytest.raises(sl.InvalidValueError, match=r"expert = 2 needs a mixture of experts"):
        sl.training_cost("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=8, expert=2), sl.gpu_cluster(1, "h100"),
                         seq_len=4096)


def _three_gpus():
    spec = sl.chip("h100").derive("h100-x3", scale_up_domain=3)
    return sl.GpuCluster(spec, 1)


def test_plans_refuse_what_cannot_be():
    with pytest.raises(sl.InvalidValueError, match=r"^`expert`: expert parallelism is carved out of the FSDP axis"):
        sl.ParallelPlan(fsdp=4, expert=8)
    with pytest.raises(sl.InvalidValueError, match=r"^`virtual_stages`: only the interleaved schedule"):
        sl.ParallelPlan(pipeline=4, virtual_stages=2)
    with pytest.raises(sl.UnknownNameError, match=r"^`remat`: unknown remat policy 'some'"):
        sl.ParallelPlan(remat="some")
    with pytest.raises(sl.InvalidValueError, match=r"shorter|less than one sequence"):
        sl.training_cost("llama-3-8b", 8 * 4096, sl.ParallelPlan(data=8, microbatches=2), sl.gpu_cluster(1, "h100"),
                         seq_len=4096)
    assert repr(sl.ParallelPlan(data=2, pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2)) == (
        "ParallelPlan(DP 2 × PP 4; interleaved v=2 m=8, remat full)")
    assert math.isclose(sl.ParallelPlan(fsdp=4, tensor=2).num_chips, 8)


def test_an_efficiency_below_one_slows_the_compute_and_the_mfu_in_proportion_when_compute_binds():
    args = ("llama-3-8b", 64 * 4096, sl.ParallelPlan(fsdp=64, remat="none"), sl.tpu_slice((4, 4, 4), "tpu-v5p"))
    full, part = (sl.training_cost(*args, seq_len=4096, efficiency=e) for e in (1.0, 0.6))
    assert part.time_s == pytest.approx(full.time_s / 0.6) and part.mfu == pytest.approx(0.6 * full.mfu)
    with pytest.raises(sl.InvalidValueError, match=r"^`efficiency` must be <= 1, got 1.5$"):
        sl.training_cost(*args, seq_len=4096, efficiency=1.5)


def test_a_plan_with_more_replicas_than_tokens_is_refused():
    cluster = sl.gpu_cluster(256, "h100")  # 2048 GPUs
    with pytest.raises(sl.InvalidValueError, match="2048 replicas .* is more than the batch's 1024 tokens"):
        sl.training_cost("llama-3-8b", 1024, sl.ParallelPlan(data=2048), cluster, seq_len=512)
    # as many replicas as tokens is allowed: one token each
    assert sl.training_cost("llama-3-8b", 2048, sl.ParallelPlan(data=2048), cluster, seq_len=1).time_s > 0


def test_a_pipeline_may_have_one_layer_per_stage():
    # 32 stages for LLaMA 3-8B's 32 layers: each stage one layer; 33 is refused
    cost = sl.training_cost("llama-3-8b", 32 * 4096, sl.ParallelPlan(pipeline=32, microbatches=32),
                            sl.gpu_cluster(4, "h100"), seq_len=4096)
    assert cost.bubble_fraction == pytest.approx(31 / 63)
    with pytest.raises(sl.InvalidValueError, match=r"needs at least that many layers; llama-3-8b has 32$"):
        sl.training_cost("llama-3-8b", 64 * 4096, sl.ParallelPlan(pipeline=16, microbatches=16,
                                                                  schedule="interleaved", virtual_stages=4),
                         sl.gpu_cluster(2, "h100"), seq_len=4096)


@pytest.mark.parametrize("schedule", ["gpipe", "interleaved"])
def test_a_schedule_other_than_1f1b_needs_a_pipeline(schedule):
    with pytest.raises(sl.InvalidValueError, match=rf"^`schedule`: '{schedule}' .*orders the stages of a pipeline, "
                                                   r"and this plan has none \(pipeline=1\)"):
        sl.ParallelPlan(fsdp=8, schedule=schedule)
    assert sl.ParallelPlan(pipeline=4, microbatches=4, schedule=schedule).schedule == schedule
    assert sl.ParallelPlan(fsdp=8).schedule == "1f1b"


def test_the_binding_names_the_pipeline_bubble_when_it_costs_most():
    cost = sl.training_cost("llama-3-8b", 16 * 4096, sl.ParallelPlan(data=2, pipeline=4, microbatches=8),
                            sl.gpu_cluster(1, "h100"), seq_len=4096, )
    assert cost.bubble_fraction == pytest.approx(3 / 11)
    assert cost.binding == "the pipeline bubble idles 27.3% of the step"


def test_mfu_refuses_a_step_shorter_than_the_peak_allows_and_accepts_exactly_that_step():
    topo = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    flops = sl.train_flops("llama-3-8b", seq_len=4096, tokens=64 * 4096)
    fastest = flops / (64 * 4.59e14)
    assert sl.model_flops_utilization("llama-3-8b", 64 * 4096, fastest, topo, seq_len=4096) == pytest.approx(1.0)
    assert sl.model_flops_utilization("llama-3-8b", 64 * 4096, 2 * fastest, topo, seq_len=4096) == pytest.approx(0.5)
    with pytest.raises(sl.InvalidValueError, match=r"^`step_time_s`: a step of .* s is shorter than the smallest "
                                                   r"possible"):
        sl.model_flops_utilization("llama-3-8b", 64 * 4096, 0.99 * fastest, topo, seq_len=4096)


def test_binding_names_an_axis_that_bound_calls_communication_bound():
    # the case: TP moves the most bytes but hides under both passes; DP's AllReduce outlasts the backward
    best = sl.search_plans("llama-3-8b", 3 * 2**20, sl.tpu_slice((16, 16, 16), "tpu-v5p"), seq_len=8192,
                           slices=4).best
    assert best.bound["DP"] == "communication-bound" and best.bound["TP"] == "hidden under compute"
    assert best.comms_s["TP"] > best.comms_s["DP"]
    assert best.binding.startswith("communication-bound on DP: ") and best.binding.endswith("in the backward pass")
    # and over a whole search: whenever `binding` names an axis, `bound` says that axis is communication-bound
    found = sl.search_plans("llama-3-70b", 4 * 2**20, sl.gpu_cluster(256, "h100"), seq_len=4096)
    for i in range(0, found.step_times_s.size, 97):
        if not np.isfinite(found.step_times_s[i]):
            continue
        cost = sl.training_cost("llama-3-70b", 4 * 2**20, found.plan_at(i), sl.gpu_cluster(256, "h100"), seq_len=4096)
        if cost.fits and cost.binding.startswith("communication-bound on "):
            axis = cost.binding.split()[2].rstrip(":")
            assert cost.bound[axis] == "communication-bound", (cost.plan, cost.binding, cost.bound)
