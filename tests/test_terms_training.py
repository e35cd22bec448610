"""Each communication and memory term of the training cost model, against a derivation by hand.

Every expected value here is worked out from first principles in the test: the model's shape read
from scalelib/data/models.toml, the chips' figures from scalelib/data/chips.toml, and the collective
costs of How to Scale Your Model ch. 3 and 5: over an axis of n chips with bandwidth W per chip, an
AllGather or a ReduceScatter of V bytes takes (n − 1)/n · V / W, an AllReduce twice that, an AllToAll
(n − 1)/n · V / W. None calls the helper the library computes the term with; each is held two-sided,
to 1e-9, so a term halved, doubled or dropped fails here.

The terms (training_cost's ``comms_s`` per axis and ``memory_bytes`` per part):
DP's gradient AllReduce, TP's AllGathers and ReduceScatters, FSDP's weight gathers and gradient
ReduceScatters and its gathered weight buffers, EP's AllToAlls, the pipeline's stage-to-stage
hops, DCN's AllReduce across slices; and a threshold found by brute force (scanning the batch
until compute covers the DP AllReduce) against its closed form.
"""

import math
import tomllib
from pathlib import Path

import pytest

import scalelib as sl

DATA = Path(sl.__file__).parent / "data"
MODELS = tomllib.loads((DATA / "models.toml").read_text())
CHIPS = tomllib.loads((DATA / "chips.toml").read_text())

H100 = CHIPS["h100"]
NVLINK = H100["scale_up_bytes_per_s_per_gpu"]          # 450 GB/s per GPU, one way
NODE_EGRESS = H100["scale_out_bytes_per_s_per_node"]   # 400 GB/s per 8-GPU node
V5P = CHIPS["tpu-v5p"]
BF16 = 2  # bytes


def dense_params(name):
    """Parameters of a dense LLaMA-style model, by hand: embeddings, attention, gated MLP, two norms a layer."""
    m = MODELS[name]
    L, D, F, N, K, H, V = (m[k] for k in "LDFNKHV")
    attention = D * N * H + 2 * D * K * H + N * H * D          # W_Q, W_K, W_V, W_O
    mlp = 3 * D * F                                            # gated: two in, one out
    embeddings = V * D * (1 if m["tied_embeddings"] else 2)
    return embeddings + L * (attention + mlp + 2 * D) + D, attention, mlp


def mixtral_params():
    """Mixtral-8x7B by hand: total, and the routed experts' part (E experts' gated MLPs in every layer)."""
    m = MODELS["mixtral-8x7b"]
    L, D, F, N, K, H, V, E = (m[k] for k in "LDFNKHVE")
    experts = L * E * 3 * D * F
    total = 2 * V * D + L * (D * N * H + 2 * D * K * H + N * H * D + D * E + 2 * D) + experts + D
    return total, experts


P8, ATT8, MLP8 = dense_params("llama-3-8b")
L8, D8 = MODELS["llama-3-8b"]["L"], MODELS["llama-3-8b"]["D"]
NODE = sl.gpu_cluster(1, "h100")


def cost(plan, B, topology=NODE, model="llama-3-8b", seq_len=4096, **kw):
    return sl.training_cost(model, B, plan, topology, seq_len=seq_len, **kw)


def test_the_hand_parameter_counts_are_the_publishers():
    assert P8 == 8_030_261_248 and P8 == pytest.approx(MODELS["llama-3-8b"]["published_params"], rel=1e-3)
    total, _ = mixtral_params()
    assert total == pytest.approx(MODELS["mixtral-8x7b"]["published_params"], rel=2e-3)


# --- data parallelism: an AllReduce of every gradient, once per step, in the backward pass -------------


@pytest.mark.parametrize("d", [2, 4, 8])
def test_dp_allreduce_is_twice_n_minus_1_over_n_gradient_bytes_over_nvlink(d):
    spec = sl.chip("h100").derive(f"h100-x{d}", scale_up_domain=d)
    c = cost(sl.ParallelPlan(data=d, remat="none"), d * 4096, sl.GpuCluster(spec, 1))
    by_hand = 2 * (d - 1) / d * BF16 * P8 / NVLINK
    assert c.comms_s["DP"] == pytest.approx(by_hand, rel=1e-9)
    assert c.comms_s == {"DP": pytest.approx(by_hand, rel=1e-9)}


def test_dp_allreduce_of_a_tensor_parallel_shard_across_nodes_shares_the_nodes_egress():
    # DP 4 across 4 nodes, TP 8 inside each: a GPU all-reduces its 1/8 of the gradients; the node's 8 GPUs
    # send theirs through its one 400 GB/s egress, 50 GB/s each.
    c = cost(sl.ParallelPlan(data=4, tensor=8, remat="none"), 4 * 4096, sl.gpu_cluster(4, "h100"))
    assert c.comms_s["DP"] == pytest.approx(2 * 3 / 4 * BF16 * P8 / 8 / (NODE_EGRESS / 8), rel=1e-9)
    # without TP each GPU's reduced traffic leaves at the slower of NVLink and the egress: 400 GB/s
    c = cost(sl.ParallelPlan(data=32, remat="none"), 32 * 4096, sl.gpu_cluster(4, "h100"))
    assert c.comms_s["DP"] == pytest.approx(2 * 31 / 32 * BF16 * P8 / min(NVLINK, NODE_EGRESS), rel=1e-9)


def test_dp_allreduce_on_a_tpu_slice_uses_its_share_of_the_torus():
    # 4x4x4 v5p, DP 8 x FSDP 8: the DP axis of 8 chips gets log 8 / log 64 = 1/2 of a chip's ICI bandwidth,
    # which is 3 axes x 1.8e11 B/s (two links each way, wraparound): 2.7e11 B/s. It reduces its 1/8 FSDP shard.
    w_ici = 3 * V5P["ici_link_bytes_per_s_bidirectional"]
    c = cost(sl.ParallelPlan(data=8, fsdp=8, remat="none"), 64 * 4096, sl.tpu_slice((4, 4, 4), "tpu-v5p"))
    assert c.comms_s["DP"] == pytest.approx(2 * 7 / 8 * BF16 * P8 / 8 / (w_ici / 2), rel=1e-9)


def test_dp_allreduce_runs_in_the_backward_pass_and_hides_under_it_past_the_threshold():
    d = 8
    allreduce = 2 * (d - 1) / d * BF16 * P8 / NVLINK
    small = cost(sl.ParallelPlan(data=d, remat="none"), d * 512, seq_len=512)
    assert small.backward_s == pytest.approx(allreduce, rel=1e-9)   # comms-bound: the pass lasts the AllReduce
    assert small.forward_s < allreduce and small.bound["DP"] == "communication-bound"


def test_the_dp_threshold_found_by_scanning_the_batch_is_the_closed_form():
    # Brute force: the smallest batch (in steps of 8 tokens) whose backward compute covers the AllReduce.
    d, T = 8, 128
    allreduce = 2 * (d - 1) / d * BF16 * P8 / NVLINK
    found = None
    for per_chip in range(16, 4000, 8):  # from 128 tokens in all: one sequence
        c = cost(sl.ParallelPlan(data=d, remat="none"), d * per_chip, seq_len=T)
        bwd_compute = c.compute_s * 2 / 3  # the backward is twice the forward without remat
        if bwd_compute >= allreduce:
            assert c.bound["DP"] == "hidden under compute"
            found = per_chip
            break
        assert c.bound["DP"] == "communication-bound"
    # Closed form: 2·F_tok·B/(N·C) = 2·(d − 1)/d · 2·P / W, with F_tok the forward FLOPs of a token:
    # B/N = C/W · (d − 1)/d · 2P / F_tok, the book's C / W (2200 on H100 NVLink) up to (d − 1)/d and F_tok ≈ 2P.
    f_tok = sl.forward_flops("llama-3-8b", seq_len=T, tokens=1)
    closed = H100["bf16_flops_per_s"] / NVLINK * (d - 1) / d * 2 * P8 / f_tok
    assert closed - 8 < found <= closed + 8
    assert sl.data_parallel_critical_batch(NODE) == pytest.approx(H100["bf16_flops_per_s"] / NVLINK, rel=1e-12)


# --- tensor parallelism: gather and scatter the activations around both blocks of every layer -----------


@pytest.mark.parametrize("remat, backward_passes", [("none", 2), ("dot_product", 2), ("full", 3)])
def test_tp_is_four_collectives_of_the_activations_per_layer_and_pass(remat, backward_passes):
    # Per layer and pass: an AllGather before and a ReduceScatter after attention and the MLP, each of a
    # [tokens, D] bf16 array: 4 · (t − 1)/t · 2·tokens·D / W. The backward does it twice (once per matmul
    # of the forward's), three times when full remat reruns the forward.
    t, B = 8, 4 * 4096
    c = cost(sl.ParallelPlan(tensor=t, remat=remat), B)
    per_pass = L8 * 4 * (t - 1) / t * BF16 * B * D8 / NVLINK
    assert c.comms_s["TP"] == pytest.approx(per_pass * (1 + backward_passes), rel=1e-9)


# --- FSDP: weights gathered in each pass, gradients reduce-scattered, two layers' weights in memory ------


@pytest.mark.parametrize("f, mb", [(8, 1), (8, 2), (4, 1)])
def test_fsdp_gathers_the_weights_twice_and_scatters_the_gradients_once_per_microbatch(f, mb):
    spec = sl.chip("h100").derive(f"h100-x{f}", scale_up_domain=f)
    B = f * mb * 4096
    c = cost(sl.ParallelPlan(fsdp=f, microbatches=mb, remat="full"), B, sl.GpuCluster(spec, 1))
    one = (f - 1) / f * BF16 * P8 / NVLINK  # one AllGather (or ReduceScatter) of all the bf16 weights
    assert c.comms_s["FSDP"] == pytest.approx(3 * mb * one, rel=1e-9)


def test_fsdps_gathered_buffers_are_two_layers_of_weights_split_by_tp():
    layer = ATT8 + MLP8  # one layer's matmul weights, norms aside
    for plan, t in ((sl.ParallelPlan(fsdp=8), 1), (sl.ParallelPlan(fsdp=4, tensor=2), 2)):
        assert cost(plan, 8 * 4096).memory_bytes["gathered weights"] == pytest.approx(2 * BF16 * layer / t, rel=1e-9)
    assert cost(sl.ParallelPlan(data=8), 8 * 4096).memory_bytes["gathered weights"] == 0


def test_the_state_is_sharded_over_fsdp_tensor_and_pipeline_but_not_data():
    parts = {"parameters": BF16, "gradients": BF16, "optimizer state": 2 * 4}  # Adam: two f32 moments
    for plan, shards in ((sl.ParallelPlan(data=8), 1), (sl.ParallelPlan(fsdp=8), 8),
                         (sl.ParallelPlan(data=2, tensor=2, pipeline=2, microbatches=2), 4)):
        mem = cost(plan, 8 * 4096 * plan.microbatches).memory_bytes
        for part, b in parts.items():
            assert mem[part] == pytest.approx(b * P8 / shards, rel=1e-9)


# --- expert parallelism: AllToAlls of the routed tokens, on FSDP's links -------------------------------


def test_ep_sends_k_copies_of_each_token_by_alltoall_twice_per_pass():
    m = MODELS["mixtral-8x7b"]
    total, experts = mixtral_params()
    f = e = 8
    B = 8 * 4096
    tokens = B / f  # per replica
    # per MoE layer and AllToAll: each of the token's k copies of D bf16 values, 7/8 of them leaving the chip;
    # dispatch and combine, forward and backward: 4 AllToAlls per layer (no remat)
    a2a = BF16 * tokens * m["k"] * m["D"] * (e - 1) / e * m["L"] / NVLINK
    ep = cost(sl.ParallelPlan(fsdp=f, expert=e, remat="none"), B, model="mixtral-8x7b")
    # the experts are split whole, one per chip, so FSDP gathers only the rest of the weights
    gather = (f - 1) / f * BF16 * (total - experts) / NVLINK
    assert ep.comms_s["FSDP"] == pytest.approx(3 * gather + 4 * a2a, rel=1e-9)
    # full remat reruns the forward, its two AllToAlls too
    full = cost(sl.ParallelPlan(fsdp=f, expert=e, remat="full"), B, model="mixtral-8x7b")
    assert full.comms_s["FSDP"] == pytest.approx(3 * gather + 6 * a2a, rel=1e-9)
    # without EP every chip gathers every expert, and no token moves
    flat = cost(sl.ParallelPlan(fsdp=f, remat="none"), B, model="mixtral-8x7b")
    assert flat.comms_s["FSDP"] == pytest.approx(3 * (f - 1) / f * BF16 * total / NVLINK, rel=1e-9)


# --- pipeline: each stage passes its activations on; DCN: the gradients cross slices ------------------


@pytest.mark.parametrize("p, v", [(2, 1), (8, 1), (2, 2), (8, 2)])
def test_a_pipeline_stage_sends_each_tokens_d_values_once_per_chunk_and_pass(p, v):
    B = 16 * 4096
    schedule = "interleaved" if v > 1 else "1f1b"
    c = cost(sl.ParallelPlan(data=8 // p, pipeline=p, microbatches=16 // (8 // p), schedule=schedule,
                             virtual_stages=v), B)
    B = B / (8 // p)  # tokens per replica
    hop = v * BF16 * B * D8 / NVLINK
    assert c.comms_s["PP"] == pytest.approx(2 * hop, rel=1e-9)


def test_dcn_allreduces_each_chips_gradient_shard_with_the_other_slices():
    s = 4
    c = cost(sl.ParallelPlan(fsdp=64, slices=s, remat="none"), 64 * s * 4096, sl.tpu_slice((4, 4, 4), "tpu-v5p"))
    by_hand = 2 * (s - 1) / s * BF16 * P8 / 64 / V5P["dcn_bytes_per_s_per_chip"]
    assert c.comms_s["DCN"] == pytest.approx(by_hand, rel=1e-9)


# --- compute and utilisation -------------------------------------------------------------------------


def test_a_compute_bound_step_is_three_forwards_at_peak_and_its_mfu_is_below_one():
    # fsdp 64 on a v5p cube at 4096 tokens per chip: every collective hides, the step is 3 forward passes'
    # FLOPs at the 64 chips' peak, and MFU = model FLOPs / (step · N · C) <= 1.
    B = 64 * 4096
    c = cost(sl.ParallelPlan(fsdp=64, remat="none"), B, sl.tpu_slice((4, 4, 4), "tpu-v5p"))
    f = sl.forward_flops("llama-3-8b", seq_len=4096, tokens=B)
    assert c.time_s == pytest.approx(3 * f / (64 * V5P["bf16_flops_per_s"]), rel=1e-9)
    assert c.mfu == pytest.approx(1.0, rel=1e-9)
    assert math.isclose(c.tokens_per_chip, 4096)


# --- activations: what each remat policy keeps per token and layer ---------------------------------------


def test_activation_memory_is_what_each_remat_policy_keeps_per_token_and_layer():
    # One replica's 4096 tokens on one chip's stage of all 32 layers, one microbatch held, bf16 values. By hand,
    # per token and layer, for a LLaMA layer (gated MLP, grouped-query attention):
    m = MODELS["llama-3-8b"]
    L, D, F, N, K, H = (m[k] for k in "LDFNKH")
    dot_product = 2 * D + (N + 2 * K) * H + 2 * F   # the two blocks' inputs, Q, K and V, the gate and up outputs
    none = dot_product + 3 * D + N * H + F + N      # plus residual sums and W_O's, AV's and the MLP's outputs,
    full = D                                        # and the softmax's row statistics; full remat: the layer input
    tokens = 4096
    plan = lambda remat: sl.ParallelPlan(data=8, remat=remat)  # noqa: E731
    acts = {r: cost(plan(r), 8 * tokens).memory_bytes["activations"] for r in ("none", "dot_product", "full")}
    assert acts["dot_product"] == pytest.approx(BF16 * dot_product * tokens * L, rel=1e-12)
    assert acts["none"] == pytest.approx(BF16 * none * tokens * L, rel=1e-12)
    # full remat keeps one vector a layer, and recomputes one layer at a time into a full layer's worth
    assert acts["full"] == pytest.approx(BF16 * full * tokens * L + BF16 * none * tokens, rel=1e-12)
    # tensor parallelism splits them (sequence parallelism): TP 2 halves every kind
    tp = cost(sl.ParallelPlan(data=4, tensor=2, remat="dot_product"), 4 * tokens).memory_bytes["activations"]
    assert tp == pytest.approx(acts["dot_product"] / 2, rel=1e-12)


def test_training_memory_bytes_is_the_cost_models_memory_per_chip():
    # FSDP 8 on one node: (2 + 2 + 8) bytes of state per parameter over 8 chips, two layers' gathered weights,
    # full remat's activations (one vector a layer, plus one layer's worth to recompute into)
    m = MODELS["llama-3-8b"]
    L, D, F, N, K, H = (m[k] for k in "LDFNKH")
    tokens = 4096
    none = 2 * D + (N + 2 * K) * H + 2 * F + 3 * D + N * H + F + N
    by_hand = 12 * P8 / 8 + 2 * BF16 * (ATT8 + MLP8) + BF16 * (D * tokens * L + none * tokens)
    plan = sl.ParallelPlan(fsdp=8)
    got = sl.training_memory_bytes("llama-3-8b", 8 * tokens, plan, NODE, seq_len=4096)
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == cost(plan, 8 * tokens).memory_bytes["total"]
