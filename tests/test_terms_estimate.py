"""Each loss of the calibrated estimate, against a derivation by hand (as test_terms_training.py does for the roofline).

The estimate is the layer above the roofline: each test takes the roofline's own numbers (its compute per
pass, its collectives per axis: held by hand in test_terms_training.py) and derives one loss from first
principles: the model's shape from scalelib/data/models.toml, the chips' figures from chips.toml, the
estimate's constants from estimate.toml, read here as files, not through scalelib. Each loss is switched
on alone (``losses={name}``), on a plan where it lands on the pass's serial path, and held two-sided to
1e-9, so a term halved, doubled, dropped or put on the wrong network tier fails here. The inference losses
(kernel efficiency and kernel overhead) follow at the end.
"""

import tomllib
from pathlib import Path

import pytest

import scalelib as sl

DATA = Path(sl.__file__).parent / "data"
MODELS = tomllib.loads((DATA / "models.toml").read_text())
CHIPS = tomllib.loads((DATA / "chips.toml").read_text())
K = tomllib.loads((DATA / "estimate.toml").read_text())

H100 = CHIPS["h100"]
HBM = H100["hbm_bytes_per_s"] * K["hbm"]["achieved"]                        # an elementwise kernel's bandwidth
NVLINK = H100["scale_up_bytes_per_s_per_gpu"] * K["nvlink"]["achieved"]     # a GPU's achieved NVLink, one way
IB = H100["scale_out_bytes_per_s_per_node"] / 8 * K["infiniband"]["achieved"]  # one GPU's share of its node's NIC
M8 = MODELS["llama-3-8b"]
L8, D8, F8, N8, KV8, H8 = (M8[k] for k in "LDFNKH")
BF16 = 2
NODE, TWO = sl.gpu_cluster(1, "h100"), sl.gpu_cluster(2, "h100")


def alone(name, plan, B, topology=NODE, seq_len=4096, **kw):
    """(roofline cost, the step with `name` the only loss charged)."""
    cost = sl.training_cost("llama-3-8b", B, plan, topology, seq_len=seq_len, **kw)
    one = sl.training_cost("llama-3-8b", B, plan, topology, seq_len=seq_len, losses={name}, **kw)
    assert list(one.losses_s) == [name]
    return cost, one.estimated_time_s


def compute_bound(cost):
    """The roofline's passes are their compute: a loss on the serial path adds to the step as it is."""
    assert cost.forward_s + cost.backward_s == pytest.approx(cost.compute_s, rel=1e-12)


# --- memory-bound kernels: Korthikanti et al. 2022's elementwise tensors, read and written at 90% of HBM ---------


@pytest.mark.parametrize("plan", [sl.ParallelPlan(fsdp=8, remat="none"), sl.ParallelPlan(fsdp=4, tensor=2,
                                                                                           remat="none")],
                         ids=lambda p: p.label)
def test_memory_bound_ops_are_the_elementwise_bytes_of_each_layer_at_achieved_hbm_bandwidth(plan):
    B, t = 8 * 4 * 4096, plan.tensor
    cost, est = alone("memory_bound_ops", plan, B)
    compute_bound(cost)
    tokens = B / plan.replicas          # one replica's tokens (one microbatch)
    # per token and layer, bytes: two layernorms (read + write D bf16 values: 4·D each), two residual adds (read
    # two, write one: 6·D each), two dropouts (read and write D values and write a 1-byte mask: 5·D each) =
    # 30·D, split over t by sequence parallelism; SwiGLU reads two F-wide halves and writes one, 3·F bf16
    # values, split over t by tensor parallelism
    per_layer = (30 * D8 / t + 3 * BF16 * F8 / t) * tokens / HBM
    assert est - cost.time_s == pytest.approx(L8 * per_layer * (1 + 2), rel=1e-9)  # the backward: twice


# --- matmul efficiency: each matmul at the lower of `efficiency` and its size's, plus its operand reads ------------


def test_matmul_efficiency_honours_a_lower_efficiency_as_every_matmuls_ceiling():
    plan, B, T = sl.ParallelPlan(fsdp=8, remat="none"), 8 * 4 * 4096, 4096
    cost, est = alone("matmul_efficiency", plan, B, efficiency=0.5)
    compute_bound(cost)
    tm = B / 8
    # one layer's matmuls on one chip (m, k, n, batch, input read, output written): QKV, O, the two gated MLP
    # matmuls; then Q·Kᵀ and P·V per head with flash attention (the scores never leave the chip)
    ops = [(tm, D8, (N8 + 2 * KV8) * H8, 1, 1, 1), (tm, N8 * H8, D8, 1, 1, 1), (tm, D8, 2 * F8, 1, 1, 1),
           (tm, F8, D8, 1, 1, 1), (T, H8, T, tm / T * N8, 1, 0), (T, T, H8, tm / T * N8, 0, 1)]
    flops = [2 * m * k * n * b for m, k, n, b, _, _ in ops]
    assert min(flops) > 128e9  # every one past the table's last point: calculon's 0.95 x the fitted 0.83 > 0.5
    assert min(K["matmul"]["efficiency"][K["matmul"]["gflop"].index(128.0)] * K["kernel"]["matmul_scale"],
               1.0) > 0.5
    C = 0.5 * H100["bf16_flops_per_s"]
    reads = sum(BF16 * (a * m * k + k * n + o * m * n) * b for m, k, n, b, a, o in ops)
    factor = (sum(flops) / C + reads / HBM) / (sum(flops) / C)
    assert est == pytest.approx(factor * cost.time_s, rel=1e-9)
    assert 1 < factor < 1.1


# --- tensor parallelism's collectives: none hidden on a GPU, NVLink inside a node -----------------------------


def test_tensor_collectives_are_two_allgathers_and_two_reducescatters_per_layer_and_pass_on_nvlink():
    plan, B = sl.ParallelPlan(fsdp=4, tensor=2, remat="none"), 8 * 4 * 4096
    cost, est = alone("tensor_collectives", plan, B)
    compute_bound(cost)
    t, tokens = 2, B / 4
    one = K["nvlink"]["latency_s"] + (t - 1) / t * BF16 * tokens * D8 / NVLINK   # an AllGather of [tokens, D]
    assert est - cost.time_s == pytest.approx(2 * L8 * 4 * one, rel=1e-9)         # forward and backward


@pytest.mark.parametrize("plan", [sl.ParallelPlan(fsdp=8, remat="none"), sl.ParallelPlan(data=2, fsdp=4, remat="none")],
                         ids=lambda p: p.label)
def test_without_tensor_parallelism_no_tensor_collective_is_charged_not_even_its_latency(plan):
    # TP 1: no AllGather or ReduceScatter runs, so not even the NVLink latency of one is charged
    cost, est = alone("tensor_collectives", plan, 8 * 4 * 4096)
    assert est == cost.time_s


@pytest.mark.parametrize("remat", ["selective", "dot_product"])
def test_recomputing_the_attention_core_repeats_its_softmax_and_dropout_without_flash_attention(remat):
    # without flash attention the scores go through HBM: the softmax reads and writes each bf16 score (2 + 2
    # bytes), the dropout reads it and writes it and a 1-byte mask (2 + 2 + 1): 9 bytes per score, T scores per
    # token and query head, the heads split over t. Recomputing the core repeats them once per layer in the
    # backward; without sequence parallelism no AllGather is repeated
    plan, B, T = sl.ParallelPlan(fsdp=4, tensor=2, remat=remat), 8 * 4 * 4096, 4096
    cost, est = alone("recompute", plan, B, sequence_parallel=False, flash_attention=False)
    compute_bound(cost)
    tokens = B / 4
    assert est - cost.time_s == pytest.approx(L8 * 9 * tokens * T * N8 / 2 / HBM, rel=1e-9)


# --- pipeline sends: [tokens, D/t] per chunk, microbatch and pass, on the tier the stages' groups reach -------------


def test_pipeline_sends_cross_nodes_when_the_data_fsdp_and_tensor_axes_fill_a_node():
    # TP 2 × FSDP 2 × DP 2 fill a node of 8 GPUs, so the two stages sit in different nodes: InfiniBand
    plan = sl.ParallelPlan(data=2, fsdp=2, tensor=2, pipeline=2, microbatches=4, remat="none")
    B = 64 * 4096
    cost, est = alone("pipeline_send_receive", plan, B, TWO)
    compute_bound(cost)
    tm = B / 4 / 4                        # one microbatch of one replica
    send = K["infiniband"]["latency_s"] + BF16 * tm * D8 / 2 / IB
    stretch = (4 + 2 - 1) / 4
    assert est - cost.time_s == pytest.approx(2 * 4 * send * stretch, rel=1e-9)
    # on NVLink it would be some 7 times less
    assert est - cost.time_s > 5 * 2 * 4 * (K["nvlink"]["latency_s"] + BF16 * tm * D8 / 2 / NVLINK) * stretch


def test_pipeline_sends_leave_an_nvl72_domain_when_a_stages_chips_fill_it_all():
    # GB200 NVL72, 2 domains of 72: FSDP 9 × TP 8 fill a domain, so the two stages sit in different domains and
    # each GPU sends on its share of its domain's InfiniBand (a group of 9 + 8 chips would fit in one, twice)
    nvl72 = CHIPS["gb200-nvl72"]
    ib = nvl72["scale_out_bytes_per_s_per_node"] / nvl72["scale_up_domain"] * K["infiniband"]["achieved"]
    plan = sl.ParallelPlan(fsdp=9, tensor=8, pipeline=2, microbatches=4, remat="none")
    B = 9 * 4 * 4096 * 4
    cost = sl.training_cost("llama-3-70b", B, plan, sl.gpu_cluster(2, "gb200-nvl72"), seq_len=4096)
    one = sl.training_cost("llama-3-70b", B, plan, sl.gpu_cluster(2, "gb200-nvl72"), seq_len=4096,
                           losses={"pipeline_send_receive"})
    compute_bound(cost)
    tm = B / 9 / 4                        # one microbatch of one replica
    send = K["infiniband"]["latency_s"] + BF16 * tm * MODELS["llama-3-70b"]["D"] / 8 / ib
    assert one.estimated_time_s - cost.time_s == pytest.approx(2 * 4 * send * (4 + 2 - 1) / 4, rel=1e-9)


# --- the data-parallel AllReduce and FSDP's gathers at achieved bandwidth -------------------------------------------


def test_fsdps_gathers_and_scatters_run_at_the_networks_achieved_bandwidth():
    plan, B = sl.ParallelPlan(fsdp=16, remat="none"), 16 * 1024
    cost, est = alone("data_parallel_exposed", plan, B, TWO, seq_len=1024)
    assert cost.bound == {"FSDP": "communication-bound"}
    assert cost.time_s == pytest.approx(cost.comms_s["FSDP"], rel=1e-12)   # both passes wait on FSDP
    assert est == pytest.approx(cost.comms_s["FSDP"] / K["infiniband"]["achieved"], rel=1e-9)


def test_with_a_pipeline_the_data_parallel_allreduce_runs_exposed_after_the_flush():
    plan = sl.ParallelPlan(data=2, fsdp=2, tensor=2, pipeline=2, microbatches=4, remat="none")
    B = 64 * 4096
    cost, est = alone("data_parallel_exposed", plan, B, TWO)
    compute_bound(cost)
    # each stage's gradient shard, P / (t·p·f), AllReduced over d = 2 inside a node (the roofline's NVLink at the
    # data sheet's bandwidth, at the network's achieved share), plus twice InfiniBand's latency
    dp = 2 * (2 - 1) / 2 * BF16 * sl.params("llama-3-8b") / (2 * 2 * 2) / H100["scale_up_bytes_per_s_per_gpu"]
    assert cost.comms_s["DP"] == pytest.approx(dp, rel=1e-9)
    exposed = dp / K["infiniband"]["achieved"] + 2 * K["infiniband"]["latency_s"]
    assert est - cost.time_s == pytest.approx(exposed, rel=1e-9)


def test_with_a_pipeline_across_slices_the_dcn_allreduce_runs_exposed_after_the_flush_on_a_tpu():
    # two v5p slices of 4x4x4, each FSDP 8 × TP 4 × PP 2: each stage's gradient shard, P / (t·p·f) bf16 values,
    # is AllReduced between the 2 slices over each chip's DCN (the roofline's term, at the data sheet's rate;
    # ICI's achieved share is 1), after the flush, plus twice the DCN latency
    plan = sl.ParallelPlan(slices=2, fsdp=8, tensor=4, pipeline=2, microbatches=4, remat="none")
    v5p = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    cost = sl.training_cost("llama-3-8b", 2**20, plan, v5p, seq_len=4096)
    one = sl.training_cost("llama-3-8b", 2**20, plan, v5p, seq_len=4096, losses={"data_parallel_exposed"})
    compute_bound(cost)
    dcn = 2 * (2 - 1) / 2 * BF16 * sl.params("llama-3-8b") / (4 * 2 * 8) / CHIPS["tpu-v5p"]["dcn_bytes_per_s_per_chip"]
    assert cost.comms_s["DCN"] == pytest.approx(dcn, rel=1e-9)
    assert K["ici"]["achieved"] == 1.0
    assert one.estimated_time_s - cost.time_s == pytest.approx(dcn + 2 * K["ici"]["dcn_latency_s"], rel=1e-9)


def test_on_a_tpu_each_tensor_collective_pays_one_ici_hop_per_step_of_a_ring_half_the_axis_long():
    # Llama 3 8B on a v5p 4x4x4 slice, FSDP 4 × TP 16, 4 sequences of 4096 tokens: TP's collectives are the
    # roofline's step (they outlast the compute). On a TPU the estimate charges them beyond the pass's compute only
    # (XLA overlaps them), at ICI's data-sheet rate (its achieved share is 1: the roofline's own bandwidth term),
    # plus a latency: an AllGather or ReduceScatter over a bidirectional ring of t chips takes t/2 steps of one hop,
    # 1 us each (the book, ch. 2). Per layer and pass, four of them (two AllGathers and two ReduceScatters, or two
    # AllReduces of two each); the forward pass once, the backward twice (no remat).
    t = 16
    plan = sl.ParallelPlan(fsdp=4, tensor=t, remat="none")
    cost = sl.training_cost("llama-3-8b", 4 * 4096, plan, sl.tpu_slice((4, 4, 4), "tpu-v5p"), seq_len=4096,
                            losses={"tensor_collectives"})
    assert cost.time_s == pytest.approx(cost.comms_s["TP"], rel=1e-12) and cost.time_s > cost.compute_s
    assert K["ici"]["achieved"] == 1.0
    hops = t / 2
    latency = (1 + 2) * L8 * 4 * hops * K["ici"]["hop_latency_s"]
    assert cost.estimated_time_s - cost.time_s == pytest.approx(latency, rel=1e-9)


# --- the optimizer step: Adam, memory-bound -------------------------------------------------------------------------


def test_the_optimizer_step_reads_and_writes_weights_and_state_and_reads_gradients():
    plan, B = sl.ParallelPlan(fsdp=8, remat="none"), 8 * 4 * 4096
    cost, est = alone("optimizer_step", plan, B, master_dtype="f32")
    local = sl.params("llama-3-8b") / 8
    # weights (2 B) read and written, gradients (2 B) read, two f32 moments and an f32 master copy (12 B) read
    # and written
    assert est - cost.time_s == pytest.approx(local * (2 * 2 + 2 + 2 * 12) / HBM, rel=1e-9)


# --- the inference losses -------------------------------------------------------------------------------------------


def test_kernel_overhead_is_charged_per_layer_on_gpus_and_not_on_a_tpu():
    kw = dict(batch=8, context=2048)
    gpu = sl.estimated_generate_step_time_s("llama-3-8b", "h100", num_chips=1, losses=["kernel_overhead"], **kw)
    roof = sl.generate_step_time_s("llama-3-8b", "h100", num_chips=1, **kw)
    assert gpu - roof == pytest.approx(L8 * K["inference"]["layer_overhead_s"], rel=1e-9)
    v5e = sl.tpu_slice((2, 2), "tpu-v5e")
    for losses in (["kernel_overhead"], ["kernel_efficiency", "kernel_overhead"]):
        with_ = sl.estimated_generate_step_time_s("llama-3-8b", v5e, losses=losses, **kw)
        without = sl.estimated_generate_step_time_s("llama-3-8b", v5e, losses=[x for x in losses
                                                                                if x != "kernel_overhead"], **kw)
        assert with_ == without  # a TPU runs the step as one compiled program
    prefill = sl.estimated_prefill_time_s("llama-3-8b", v5e, tokens=2048, losses=["kernel_overhead"])
    assert prefill == sl.prefill_time_s("llama-3-8b", v5e, tokens=2048)


def _table_share(table, size_key, size):
    """A size -> efficiency table of estimate.toml, linear between its points (by hand, as its docstring says)."""
    pts = sorted(zip(K[table][size_key], K[table]["efficiency"]))
    for (a, ea), (b, eb) in zip(pts, pts[1:]):
        if a <= size <= b:
            return ea + (eb - ea) * (size - a) / (b - a)
    return pts[-1][1]


def _hbm_share(mb):
    """The [hbm] table: the share of the HBM bandwidth a transfer of `mb` MB reaches."""
    return _table_share("hbm", "mb", mb)


def test_each_chip_reads_its_share_of_a_layers_weights_at_the_hbm_share_that_transfer_size_reaches():
    # batch 1: the step reads the weights; their kernel: a quarter of a layer's weights (four matrices), on one
    # of the n chips. The KV cache and the matmuls are charged too; the weights' term is the one that binds.
    n, kw = 8, dict(batch=1, context=128, weight_dtype="bf16")
    est = sl.estimated_generate_step_time_s("llama-3-70b", "h100", num_chips=n, losses=["kernel_efficiency"], **kw)
    weights = BF16 * sl.params("llama-3-70b")
    L = MODELS["llama-3-70b"]["L"]
    mb = weights / (4 * L * n) / 1e6
    assert 100 < mb * n and mb < 100         # the mutant that forgets n would read them at 90%
    m = MODELS["llama-3-70b"]
    kv_bytes = 128 * 2 * L * m["K"] * m["H"] * BF16      # K and V, every layer, kv heads × head dim, 128 tokens
    kv = kv_bytes / (n * H100["hbm_bytes_per_s"] * _hbm_share(kv_bytes / (L * n) / 1e6))
    w_time = weights / (n * H100["hbm_bytes_per_s"] * _hbm_share(mb))
    assert est == pytest.approx(kv + w_time, rel=1e-9)


def test_a_decode_kernel_per_query_head_reads_each_kv_head_once_for_each_query_head_sharing_it():
    # as the test above, with the cache read N/K = 64/8 = 8 times (TensorRT-LLM's masked MHA before XQA: one
    # thread block per query head), each read at the HBM share of one layer's cache on one chip
    n, kw = 8, dict(batch=1, context=128, weight_dtype="bf16")
    m, L = MODELS["llama-3-70b"], MODELS["llama-3-70b"]["L"]
    weights = BF16 * sl.params("llama-3-70b")
    kv_bytes = 128 * 2 * L * m["K"] * m["H"] * BF16
    kv = kv_bytes / (n * H100["hbm_bytes_per_s"] * _hbm_share(kv_bytes / (L * n) / 1e6))
    w_time = weights / (n * H100["hbm_bytes_per_s"] * _hbm_share(weights / (4 * L * n) / 1e6))
    est = sl.estimated_generate_step_time_s("llama-3-70b", "h100", num_chips=n, losses=["kernel_efficiency"],
                                            attention_kernel="per_query_head", **kw)
    assert est == pytest.approx(m["N"] // m["K"] * kv + w_time, rel=1e-9)
    # a model with one query head per KV head (Llama 2 13B) reads its cache once either way
    one = {a: sl.estimated_generate_step_time_s("llama-2-13b", "h100", num_chips=1, attention_kernel=a, **kw)
           for a in ("grouped", "per_query_head")}
    assert one["grouped"] == one["per_query_head"]
    # the roofline knows no kernel: with no loss charged the re-read is not charged either
    assert (sl.estimated_generate_step_time_s("llama-3-70b", "h100", num_chips=n, losses=(),
                                              attention_kernel="per_query_head", **kw)
            == sl.generate_step_time_s("llama-3-70b", "h100", num_chips=n, **kw))
    with pytest.raises(sl.UnknownNameError, match="`attention_kernel`.*grouped, per_query_head"):
        sl.estimated_generate_step_time_s("llama-3-70b", "h100", num_chips=n, attention_kernel="xqa", **kw)
    with pytest.raises(sl.InvalidValueError, match="`attention_kernel`"):
        sl.estimated_generate_step_time_s(7e10, "h100", num_chips=n, kv_bytes_per_token=1e5,
                                          attention_kernel="per_query_head", **kw)


def _matmul_share(gflop):
    """The [matmul] table, at the table's own sizes: the share of the peak a matmul of `gflop` GFLOP reaches."""
    return _table_share("matmul", "gflop", gflop)


def test_a_matmul_is_read_in_the_table_at_the_size_that_takes_as_long_on_the_tables_a100():
    # a 100M-parameter model (a plain count: one matmul of 2·P·T FLOPs) prefilling 256 tokens on one H100 in fp8:
    # 51.2 GFLOP, which at the H100's fp8 peak takes as long as 51.2 · 310/2000 = 7.94 GFLOP at the A100's bf16
    # peak (chips.toml), so it runs at the table's share for 7.94 GFLOP (0.6 at 1, 0.9 at 16: 0.739), not 51.2's
    assert K["matmul"]["reference_chip"] == "a100"
    f = 2 * 1e8 * 256
    size = f / 1e9 * CHIPS["a100"]["bf16_flops_per_s"] / H100["fp8_flops_per_s"]
    assert 1 < size < 16 and 16 < f / 1e9 < 128
    scale = K["kernel"]["matmul_scale"] * K["inference"]["fp8_matmul_scale"]
    t_math = f / (H100["fp8_flops_per_s"] * _matmul_share(size) * scale)
    assert t_math > 1e8 / H100["hbm_bytes_per_s"]          # compute-bound: the weights stream in sooner
    est = sl.estimated_prefill_time_s(1e8, "h100", tokens=256, weight_dtype="fp8", compute_dtype="fp8",
                                      losses=["kernel_efficiency"])
    assert est == pytest.approx(t_math, rel=1e-9)
    # on the table's own chip and dtype a kernel is read at its own size
    a100 = sl.estimated_prefill_time_s(1e8, "a100", tokens=256, losses=["kernel_efficiency"])
    assert a100 == pytest.approx(f / (CHIPS["a100"]["bf16_flops_per_s"] * _matmul_share(f / 1e9)
                                      * K["kernel"]["matmul_scale"]), rel=1e-9)


@pytest.mark.parametrize("n, tier", [(8, "nvlink"), (16, "infiniband")])
def test_a_prefills_tensor_allreduces_run_on_nvlink_inside_a_node_and_on_each_gpus_share_of_infiniband_across(n, tier):
    # two AllReduces of [B·T, D] bf16 per layer, after the kernels on a GPU; each a ReduceScatter and an
    # AllGather: 2·latency + 2·(n-1)/n·bytes / W, W one GPU's achieved NVLink inside a node of 8, else its
    # share of the node's InfiniBand
    m = MODELS["llama-3-70b"]
    kw = dict(tokens=2048, batch=2, num_chips=n)
    roof = sl.estimated_prefill_time_s("llama-3-70b", "h100", losses=(), **kw)
    est = sl.estimated_prefill_time_s("llama-3-70b", "h100", losses=["tensor_collectives"], **kw)
    W = NVLINK if tier == "nvlink" else IB
    nbytes = 2 * 2048 * m["D"] * BF16
    one = 2 * K[tier]["latency_s"] + 2 * (n - 1) / n * nbytes / W
    assert est - roof == pytest.approx(m["L"] * 2 * one, rel=1e-9)


# --- the waterfall: each loss is the step with it less the step before it, so they add up ---------------------------


@pytest.mark.parametrize("plan, topology", [
    (sl.ParallelPlan(fsdp=8, tensor=8, pipeline=2, microbatches=8), sl.gpu_cluster(16, "h100")),
    (sl.ParallelPlan(slices=2, fsdp=8, tensor=4, pipeline=2, microbatches=4), sl.tpu_slice((4, 4, 4), "tpu-v5p")),
], ids=["h100", "tpu-v5p"])
def test_the_training_losses_add_up_to_the_estimate_less_the_roofline(plan, topology):
    cost = sl.training_cost("llama-3-70b", 2**21, plan, topology, seq_len=4096)
    assert len(cost.losses_s) == len(sl.LOSSES) and sum(cost.losses_s.values()) > 0.2 * cost.time_s
    assert cost.time_s + sum(cost.losses_s.values()) == pytest.approx(cost.estimated_time_s, rel=1e-12)


_UNIT = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


@pytest.mark.parametrize("estimate, kw", [
    (sl.estimated_generate_step_time_s, dict(batch=64, context=2048)),
    (sl.estimated_prefill_time_s, dict(tokens=2048, batch=2)),
], ids=["generate", "prefill"])
def test_the_inference_losses_shown_add_up_to_the_estimate(estimate, kw):
    d = sl.explain(estimate, "llama-3-70b", "h100", num_chips=8, **kw)
    assert d.formula == "T_roofline + kernel_efficiency + kernel_overhead + tensor_collectives"
    terms = [float(v) * _UNIT[u] for v, u in (t.split() for t in d.numbers.split(" + "))]
    assert len(terms) == 4 and min(terms) > 0
    assert sum(terms) == pytest.approx(d.value, rel=5e-3)    # each shown to 3 significant digits
