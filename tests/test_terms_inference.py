"""Each term of the inference and serving models, against a derivation by hand.

The expected values are worked out here from the model's shape (scalelib/data/models.toml) and the
chip's figures (scalelib/data/chips.toml), with the book's ch. 7 formulas written out in the test:
the KV cache is 2·L·K·H values per token; a generate step reads every weight and every cached token
once and does 2·P FLOPs per token; a prefill does 2·P FLOPs per token but still reads every weight
once. Each is held two-sided (to 1e-9, or to the exact whole number), so a default dtype changed, a
floor or a cap dropped, or a term left out fails here.
"""

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

import scalelib as sl

DATA = Path(sl.__file__).parent / "data"
MODELS = tomllib.loads((DATA / "models.toml").read_text())
CHIPS = tomllib.loads((DATA / "chips.toml").read_text())
BYTES = {"bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
V5E = CHIPS["tpu-v5e"]
H100 = CHIPS["h100"]


def params(name):
    """A dense LLaMA-style model's parameters, by hand (embeddings, attention, gated MLP, two norms a layer)."""
    m = MODELS[name]
    L, D, F, N, K, H, V = (m[k] for k in "LDFNKHV")
    return V * D * (1 if m["tied_embeddings"] else 2) + L * (2 * D * N * H + 2 * D * K * H + 3 * D * F + 2 * D) + D


def kv_per_token(name, dtype):
    m = MODELS[name]
    return 2 * m["L"] * m["K"] * m["H"] * BYTES[dtype]


P70 = params("llama-3-70b")


def test_the_hand_count_is_the_publishers():
    assert P70 == pytest.approx(MODELS["llama-3-70b"]["published_params"], rel=1e-3)


# --- the KV cache -------------------------------------------------------------------------------------


def test_the_kv_cache_is_bf16_by_default():
    # 2 (key and value) · L · K · H values of 2 bytes: 128 KiB a token for LLaMA 3-8B, 320 KiB for 70B.
    assert sl.kv_cache_bytes("llama-3-8b") == kv_per_token("llama-3-8b", "bf16") == 131072
    assert sl.kv_cache_bytes("llama-3-70b") == kv_per_token("llama-3-70b", "bf16") == 327680
    assert sl.kv_cache_bytes("llama-3-70b", tokens=8192) == 8192 * 327680
    assert sl.kv_cache_bytes("llama-3-70b", dtype="int8") == 163840


def test_the_kv_cache_of_a_served_model_follows_the_weights_dtype_unless_given():
    v5e = sl.tpu_slice((4, 4), "tpu-v5e")
    n, W, hbm = 16, V5E["hbm_bytes_per_s"], V5E["hbm_bytes"]
    for weights, kv in (("bf16", None), ("int8", None), ("int8", "bf16")):
        b = kv_per_token("llama-3-70b", kv or weights)
        assert sl.max_batch_size("llama-3-70b", v5e, context=4096, weight_dtype=weights, kv_dtype=kv) == (
            math.floor((n * hbm - P70 * BYTES[weights]) / (4096 * b)))


# --- a generate step ----------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, context", [(1, 128), (4, 8192), (32, 8192), (256, 2048), (1024, 512)])
def test_a_generate_step_reads_the_caches_plus_the_longer_of_the_matmuls_and_the_weight_reads(batch, context):
    n, W, C = 8, V5E["hbm_bytes_per_s"], V5E["bf16_flops_per_s"]
    kv = kv_per_token("llama-3-70b", "int8")
    by_hand = batch * context * kv / (n * W) + max(2 * batch * P70 / (n * C), P70 * 1 / (n * W))
    got = sl.generate_step_time_s("llama-3-70b", sl.tpu_slice((4, 2), "tpu-v5e"), batch=batch, context=context,
                                  weight_dtype="int8", check_memory=False)
    assert got == pytest.approx(by_hand, rel=1e-9)
    assert sl.tokens_per_s_per_chip("llama-3-70b", sl.tpu_slice((4, 2), "tpu-v5e"), batch=batch, context=context,
                                    weight_dtype="int8", check_memory=False) == pytest.approx(batch / (by_hand * n))


def test_the_weight_load_floor_is_the_weights_over_the_chips_bandwidth():
    for dtype in ("bf16", "int8", "int4"):
        assert sl.weight_load_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), weight_dtype=dtype) == (
            pytest.approx(P70 * BYTES[dtype] / (16 * V5E["hbm_bytes_per_s"]), rel=1e-9))


def test_fp8_on_h100s_uses_the_fp8_peak_and_the_fp8_cache():
    kv = kv_per_token("llama-3-70b", "fp8")
    n, W, C = 2, H100["hbm_bytes_per_s"], H100["fp8_flops_per_s"]
    B, S = 64, 1000
    by_hand = B * S * kv / (n * W) + max(2 * B * P70 / (n * C), P70 / (n * W))
    assert sl.generate_step_time_s("llama-3-70b", "h100", num_chips=2, batch=B, context=S, weight_dtype="fp8",
                                   compute_dtype="fp8") == pytest.approx(by_hand, rel=1e-9)


# --- a prefill: its FLOPs, but never less than one read of the weights -----------------------------------


@pytest.mark.parametrize("tokens", [1, 8, 64, 256, 4096])
def test_a_prefill_takes_its_flops_or_one_read_of_the_weights_whichever_is_longer(tokens):
    n, W, C = 16, V5E["hbm_bytes_per_s"], V5E["bf16_flops_per_s"]
    got = sl.prefill_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), tokens=tokens, weight_dtype="int8",
                            attention=False)
    by_hand = max(2 * P70 * tokens / (n * C), P70 * 1 / (n * W))
    assert got == pytest.approx(by_hand, rel=1e-9)


def test_a_one_token_prefill_is_bound_by_reading_the_weights():
    # 2·P FLOPs at 1.97e14 take 0.045 ms on 16 chips; reading 70.6 GB of int8 weights at 16 × 8.2e11 B/s: 5.4 ms
    got = sl.prefill_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), tokens=1, weight_dtype="int8")
    assert got == pytest.approx(P70 / (16 * V5E["hbm_bytes_per_s"]), rel=1e-9)
    assert got > 100 * 2 * P70 / (16 * V5E["bf16_flops_per_s"])


def test_prefill_efficiency_slows_only_the_arithmetic():
    n, C = 16, V5E["bf16_flops_per_s"]
    got = sl.prefill_time_s(70e9, sl.tpu_slice((4, 4), "tpu-v5e"), tokens=8192, efficiency=0.4, weight_dtype="int8")
    assert got == pytest.approx(2 * 70e9 * 8192 / (0.4 * n * C), rel=1e-9)  # the book's 0.91 s


# --- memory: the largest batch, the fewest chips --------------------------------------------------------


def test_max_batch_size_is_the_memory_left_beside_the_weights_and_the_reserve_over_a_sequences_cache():
    v5e = sl.tpu_slice((4, 4), "tpu-v5e")
    kv = kv_per_token("llama-3-70b", "bf16")
    for reserve in (0.0, 20e9, 100e9):
        got = sl.max_batch_size("llama-3-70b", v5e, context=8192, weight_dtype="int8", kv_dtype="bf16",
                                reserve_bytes=reserve)
        assert got == math.floor((16 * V5E["hbm_bytes"] - P70 - reserve) / (8192 * kv))


def test_a_batch_that_exactly_fills_memory_fits_and_one_more_does_not():
    # 30B bf16 parameters (60 GB) and 20,000 caches of 1000 tokens at 1 kB: exactly an H100's 80 GB
    kw = dict(context=1000, kv_bytes_per_token=1000)
    assert 60e9 + 20000 * 1000 * 1000 == H100["hbm_bytes"]
    assert sl.generate_step_time_s(30e9, "h100", batch=20000, **kw) > 0
    assert sl.max_batch_size(30e9, "h100", **kw) == 20000
    with pytest.raises(sl.InvalidValueError, match=r"^batch 20001 at context 1000 does not fit"):
        sl.generate_step_time_s(30e9, "h100", batch=20001, **kw)


def test_impossible_memory_and_latency_questions_say_why():
    with pytest.raises(sl.InvalidValueError, match=r"^max_batch_size: a KV cache of 0 bytes per token never fills "
                                                   r"the memory"):
        sl.max_batch_size(30e9, "h100", context=10, kv_bytes_per_token=0)
    # 1 ms is below reading the int8 weights once (5.4 ms on 16 v5e chips)
    with pytest.raises(sl.InvalidValueError, match=r"^`latency_s`: no batch meets 1 ms on .*: even a batch of 1 "
                                                   r"takes 5.43 ms a step"):
        sl.max_batch_within_latency("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), latency_s=0.001, context=4096,
                                    weight_dtype="int8")
    for bad in ([1], None, True):
        with pytest.raises(sl.InvalidValueError, match=r"^`model` must be a model name \(e.g. 'llama-3-70b'\), a "
                                                       r"ModelSpec or a parameter count"):
            sl.generate_step_time_s(bad, "h100", batch=1, context=1, kv_bytes_per_token=0)


def test_nothing_is_reserved_unless_asked():
    d = sl.explain(sl.max_batch_size, "llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), context=8192,
                   weight_dtype="int8")
    assert d.formula == "floor((N·HBM − P_bytes) / (S·kv))"
    assert d.value == (16 * V5E["hbm_bytes"] - P70) // (8192 * kv_per_token("llama-3-70b", "int8"))
    # a model given as a parameter count has no KV cache in min_chips unless its size per token is given
    assert sl.min_chips(70e9, "h100", batch=1000, context=1e8) == 2
    assert sl.min_chips(70e9, "h100", batch=1000, context=1e8, kv_bytes_per_token=1) == 4


@pytest.mark.parametrize("reserve, chips", [(0.0, 8), (50e9, 8), (60e9, 16), (200e9, 32)])
def test_min_chips_counts_the_reserve(reserve, chips):
    # int8 LLaMA 3-70B (70.6 GB) on 16 GB v5e chips, slices of 1, 4, 8, 16, 32 ... chips:
    # 70.6 GB needs 4.4 chips -> 8; with 60 GB more, 130.6 GB needs 8.2 -> 16.
    need = (P70 + reserve) / V5E["hbm_bytes"]
    assert min(n for n in (1, 4, 8, 16, 32, 64) if n >= need) == chips
    assert sl.min_chips("llama-3-70b", "tpu-v5e", weight_dtype="int8", reserve_bytes=reserve) == chips


def test_min_chips_reserves_nothing_by_default():
    d = str(sl.explain(sl.min_chips, "llama-3-70b", "tpu-v5e", weight_dtype="int8"))
    assert "= (70.6 GB + 0·0·164 kB + 0 B) / 16 GB = 4.41 → the next size offered = 8 chips" in d


def test_min_chips_counts_the_kv_caches_of_the_batch():
    # the book: 32 sequences of 8192 int8 tokens (160 KiB each) beside 70.6 GB of int8 weights: 113.5 GB, a 4x2
    need = P70 + 32 * 8192 * kv_per_token("llama-3-70b", "int8")
    assert 7 < need / V5E["hbm_bytes"] <= 8
    assert sl.min_chips("llama-3-70b", "tpu-v5e", weight_dtype="int8", batch=32, context=8192) == 8
    assert sl.min_chips("llama-3-70b", "tpu-v5e", weight_dtype="int8", batch=32, context=8192,
                        reserve_bytes=16e9) == 16
    # on GPUs: powers of two up to a node, then whole nodes; 2 x 80 GB hold bf16 70B only without a cache
    assert sl.min_chips("llama-3-70b", "h100") == 2
    assert sl.min_chips("llama-3-70b", "h100", reserve_bytes=20e9) == 4


# --- the largest batch within a latency target ----------------------------------------------------------


def _latency_caps(L, S, n=16):
    """By hand: a = one sequence's cache read, b = one sequence's matmuls, c = reading the weights."""
    W, C = V5E["hbm_bytes_per_s"], V5E["bf16_flops_per_s"]
    a = S * kv_per_token("llama-3-70b", "bf16") / (n * W)
    b = 2 * P70 / (n * C)
    c = P70 * 1 / (n * W)
    memory = math.floor((n * V5E["hbm_bytes"] - P70) / (S * kv_per_token("llama-3-70b", "bf16")))
    return math.floor(L / (a + b)), math.floor((L - c) / a), memory


@pytest.mark.parametrize("L, S, binding", [(0.008, 4096, 1), (0.010, 4096, 1), (0.050, 4096, 2), (0.030, 1024, 0),
                                           (0.012, 1024, 0)])
def test_max_batch_within_latency_is_the_smallest_of_its_three_caps(L, S, binding):
    caps = _latency_caps(L, S)
    assert caps[binding] == min(caps) and sorted(caps)[0] < sorted(caps)[1]  # the case tests the cap it names
    v5e = sl.tpu_slice((4, 4), "tpu-v5e")
    got = sl.max_batch_within_latency("llama-3-70b", v5e, latency_s=L, context=S, weight_dtype="int8",
                                      kv_dtype="bf16")
    assert got == min(caps)
    # and by brute force over the step time itself: that batch meets the target, one more does not (or
    # does not fit)
    step = lambda B: sl.generate_step_time_s("llama-3-70b", v5e, batch=B, context=S, weight_dtype="int8",  # noqa: E731
                                             kv_dtype="bf16", check_memory=False)
    assert step(got) <= L * (1 + 1e-12)
    assert step(got + 1) > L or got + 1 > caps[2]


def test_the_kv_read_cap_binds_just_above_the_weight_floor():
    # A target 10% above reading the weights leaves room for only a few sequences' caches, while the
    # matmuls alone would allow many more.
    v5e = sl.tpu_slice((4, 4), "tpu-v5e")
    floor_s = P70 / (16 * V5E["hbm_bytes_per_s"])
    by_compute, by_reads, _ = _latency_caps(1.1 * floor_s, 8192)
    got = sl.max_batch_within_latency("llama-3-70b", v5e, latency_s=1.1 * floor_s, context=8192,
                                      weight_dtype="int8", kv_dtype="bf16")
    assert got == by_reads < by_compute / 5


# --- serving: requests, pools, evictions -------------------------------------------------------------------


def test_requests_per_chip_is_the_batch_over_a_requests_steps():
    v5e = sl.tpu_slice((4, 4), "tpu-v5e")
    step = 42 * 8192 * kv_per_token("llama-3-70b", "bf16") / (16 * V5E["hbm_bytes_per_s"]) + max(
        2 * 42 * P70 / (16 * V5E["bf16_flops_per_s"]), 2 * P70 / (16 * V5E["hbm_bytes_per_s"]))
    got = sl.requests_per_s_per_chip("llama-3-70b", v5e, batch=42, context=8192, output_tokens=512)
    assert got == pytest.approx(42 / (step * 512 * 16), rel=1e-9)


def test_the_prefill_pool_matches_the_rate_generate_servers_free_slots():
    # a generate server frees B slots every G steps; a prefill server fills k every T_prefill
    assert sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512) == pytest.approx(
        0.91 / (0.019 * 512 / 32))
    assert sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512, prefills_per_pass=2) == (
        pytest.approx(0.91 / (0.019 * 512 / 32) / 2))
    assert sl.kv_tokens_freed_per_step(32, 8192, 4096) == pytest.approx(32 * (8192 + 4096) / 4096)
    # the derivation shows k only when a pass takes more than one prompt
    one = str(sl.explain(sl.prefill_to_generate_ratio, 0.91, 0.019, batch=32, output_tokens=512))
    two = str(sl.explain(sl.prefill_to_generate_ratio, 0.91, 0.019, batch=32, output_tokens=512, prefills_per_pass=2))
    assert one.startswith("P/G = B · T_prefill / (T_step · G_tokens) = 32 · 910 ms / (19 ms · 512) = 2.99 servers")
    assert two.startswith("P/G = B · T_prefill / (T_step · G_tokens · k) = 32 · 910 ms / (19 ms · 512 · 2) = 1.5")


def test_a_sweep_is_the_scalar_formula_elementwise():
    B = np.array([1, 16, 64, 256])
    got = sl.generate_step_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), batch=B, context=2048,
                                  weight_dtype="int8", check_memory=False)
    for b, t in zip(B, got):
        assert t == pytest.approx(sl.generate_step_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"),
                                                          batch=int(b), context=2048, weight_dtype="int8",
                                                          check_memory=False), rel=1e-12)


def test_2d_weight_stationary_sharding_may_split_d_over_every_chip():
    # X = N: D split over all 256 chips, F over none (YZ = 1): x·B·D / (X·W) + 2·x·B·F / (1·W)
    W = CHIPS["tpu-v5p"]["ici_link_bytes_per_s_bidirectional"]
    got = sl.weight_stationary_comms_time_s(64, 8192, 32768, 256, "tpu-v5p", layout="2d", X=256)
    assert got == pytest.approx(2 * 64 * 8192 / (256 * W) + 2 * 2 * 64 * 32768 / W, rel=1e-12)
    with pytest.raises(sl.InvalidValueError, match=r"`X`"):
        sl.weight_stationary_comms_time_s(64, 8192, 32768, 256, "tpu-v5p", layout="2d", X=512)


def test_the_model_parallel_comms_derivation_shows_the_bytes_moved():
    for t, text in ((1, "V = B·D·x = 32·8192·2 bytes"), (3, "V = B·D·x = 32·3·8192·2 bytes")):
        d = str(sl.explain(sl.generate_comms_time_s, "llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), batch=32,
                           tokens_per_step=t))
        assert text in d
