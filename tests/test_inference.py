"""Inference and serving (chapters 7 and 8): step times, memory, model parallelism, speculative decoding, fleets
and cost, against the book's worked numbers (How to Scale Your Model, ch. 7 'All About Transformer Inference' and
ch. 8 'Serving LLaMA 3-70B on TPUs'), properties of the model, and clear errors for impossible configurations."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl

V5E_4X4 = sl.tpu_slice((4, 4), "tpu-v5e")
V5E_4X2 = sl.tpu_slice((4, 2), "tpu-v5e")
V5E_4X8 = sl.tpu_slice((4, 8), "tpu-v5e")

#: The book's invented model of ch. 7's worked problems: LLaMA 2-13B reshaped, embeddings tied.
BOOK_MODEL = sl.ModelSpec(name="ch7-worked-model", L=64, D=4096, F=16384, N=32, K=8, H=256, V=32128,
                          tied_embeddings=True, source="How to Scale Your Model, ch. 7, worked problems")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# --- chapter 7: the book's worked numbers ----------------------------------------------------------


def test_pop_quiz_batch_4_is_bound_by_reading_weights_and_caches():
    # (4 · 819e6 + 30e9) / (16 · 8.2e11) ≈ 2.5 ms
    t = sl.generate_step_time_s(30e9, V5E_4X4, batch=4, context=8192, weight_dtype="int8", kv_bytes_per_token=100e3)
    assert t == pytest.approx(2.5e-3, rel=0.02)


def test_pop_quiz_batch_256_turns_the_matmuls_compute_bound():
    # 256 · 819e6 / (16 · 8.2e11) + 2 · 256 · 30e9 / (16 · 1.97e14) ≈ 21 ms
    t = sl.generate_step_time_s(30e9, V5E_4X4, batch=256, context=8192, weight_dtype="int8",
                                kv_bytes_per_token=100e3, check_memory=False)
    assert t == pytest.approx(21e-3, rel=0.02)


@pytest.mark.parametrize("batch, step_ms, tokens_per_s", [(1, 4.98, 200.61), (8, 12.13, 659.30),
                                                          (16, 20.30, 787.99), (64, 69.33, 923.13),
                                                          (240, 249.09, 963.53)])
def test_llama_2_13b_throughput_table_on_eight_v5e(batch, step_ms, tokens_per_s):
    # The book's Ex1 table (26 GB of bf16 weights, 6.7 GB of KV per 8k sequence, 8 v5e chips).
    kw = dict(batch=batch, context=8192, check_memory=False)
    assert sl.generate_step_time_s("llama-2-13b", V5E_4X2, **kw) * 1e3 == pytest.approx(step_ms, rel=0.01)
    assert sl.tokens_per_s_per_chip("llama-2-13b", V5E_4X2, **kw) * 8 == pytest.approx(tokens_per_s, rel=0.01)


def test_llama_2_13b_runs_out_of_memory_past_batch_16():
    # The book: "We OOM beyond batch size 16" (its 128 GiB; the chips' 128 GB decimal hold 15).
    assert sl.max_batch_size("llama-2-13b", V5E_4X2, context=8192) in (15, 16)


def test_q1_parameters_and_int8_kv_bytes_per_token():
    assert sl.params(BOOK_MODEL) == pytest.approx(18.4e9, rel=0.005)
    assert sl.kv_cache_bytes(BOOK_MODEL, dtype="int8") == pytest.approx(262e3, rel=0.001)


def test_q2_largest_batch_at_128k_context_is_7_and_56_with_one_kv_head():
    assert sl.max_batch_size(BOOK_MODEL, V5E_4X4, context=128_000, weight_dtype="int8") == 7
    one_head = BOOK_MODEL.derive("ch7-one-kv-head", K=1)
    assert sl.max_batch_size(one_head, V5E_4X4, context=128_000, weight_dtype="int8") == 56


def test_q3_weight_loading_floor_is_1_4_ms():
    assert sl.weight_load_time_s(BOOK_MODEL, V5E_4X4, weight_dtype="int8") == pytest.approx(1.4e-3, rel=0.02)


def test_q5_moe_needs_e_over_k_times_the_batch():
    moe = BOOK_MODEL.derive("ch7-moe", E=16, k=2)
    # The book counts L·D·(3EF + 2H(N+K)) + DV ≈ 212e9 (no router); scalelib adds the router's D·E per layer.
    assert sl.params(moe) == pytest.approx(212e9, rel=0.005)
    assert sl.params(moe, active=True) == pytest.approx(31.2e9, rel=0.005)
    assert sl.moe_critical_batch_size(moe, "tpu-v5e") == pytest.approx(1920, rel=0.01)


def test_q7_2d_weight_stationary_beats_1d_past_72_chips():
    D = 8192
    assert sl.weight_stationary_crossover_chips(D, 4 * D) == 72
    # At its best split the 2D time is √128 · B·D / (√N · W) with bf16 activations (x = 2 bytes, 2BD in the book).
    W = sl.chip("tpu-v5p").bytes_per_s(bandwidth="ici_bidirectional")
    B, N = 64, 512
    t2 = sl.weight_stationary_comms_time_s(B, D, 4 * D, N, "tpu-v5p", layout="2d")
    assert t2 == pytest.approx(np.sqrt(128) * B * D / (np.sqrt(N) * W), rel=1e-9)
    t1 = sl.weight_stationary_comms_time_s(B, D, 4 * D, N, "tpu-v5p", layout="1d")
    assert t1 == pytest.approx(4 * B * D / (3 * W), rel=1e-9)
    for n in (64, 72, 80):
        t1 = sl.weight_stationary_comms_time_s(B, D, 4 * D, n, "tpu-v5p")
        t2 = sl.weight_stationary_comms_time_s(B, D, 4 * D, n, "tpu-v5p", layout="2d")
        assert (t2 < t1) == (n > 72) or n == 72 and t1 == pytest.approx(t2)


def test_latency_bound_collectives_below_45_kb_per_shard():
    # Appendix C: an 8-way model-parallel gather of [16, 8192] int8 activations (131 kB < 360 kB) is latency-bound.
    ring = sl.tpu_slice((8, 16), "tpu-v5e")
    small = sl.allgather_time_s(16 * 8192, ring, axes="X")
    assert small == pytest.approx(7e-6)    # a line of 8 (no wraparound): 7 hops of 1 µs; the bytes alone take 2.5 µs
    assert sl.latency_bound_bytes(sl.tpu_pod("tpu-v5e"), axes="X", per="shard") == pytest.approx(45e3)


# --- chapter 8: the book's worked numbers ----------------------------------------------------------


def test_text_q1_llama_3_70b_int8_kv_is_160_kb_per_token():
    assert sl.kv_cache_bytes("llama-3-70b", dtype="int8") == pytest.approx(160e3, rel=0.03)


def test_text_q2_112_gb_at_batch_32_needs_a_4x2():
    weights = sl.param_bytes("llama-3-70b", dtype="int8")
    kv = sl.kv_cache_bytes("llama-3-70b", tokens=32 * 8192, dtype="int8")
    assert weights + kv == pytest.approx(112e9, rel=0.02)
    assert sl.min_chips("llama-3-70b", "tpu-v5e", weight_dtype="int8", batch=32, context=8192) == 8
    assert sl.smallest_slice("llama-3-70b", "tpu-v5e", weight_dtype="int8", batch=32, context=8192).shape == (4, 2)


def test_text_q3_17_ms_and_235_tokens_per_second_per_chip_on_a_4x2():
    kw = dict(batch=32, context=8192, weight_dtype="int8")
    assert sl.generate_step_time_s("llama-3-70b", V5E_4X2, **kw) == pytest.approx(17e-3, rel=0.03)
    assert sl.tokens_per_s_per_chip("llama-3-70b", V5E_4X2, **kw) == pytest.approx(235, rel=0.03)
    # On a 4x4 the step halves (8.5 ms) and the throughput per chip stays.
    assert sl.generate_step_time_s("llama-3-70b", V5E_4X4, **kw) == pytest.approx(8.5e-3, rel=0.03)
    assert sl.tokens_per_s_per_chip("llama-3-70b", V5E_4X4, **kw) == pytest.approx(
        sl.tokens_per_s_per_chip("llama-3-70b", V5E_4X2, **kw))


def test_text_q4_critical_batch_240_120_240():
    got = [sl.critical_batch_size("tpu-v5e"), sl.critical_batch_size("tpu-v5e", weight_dtype="int8"),
           sl.critical_batch_size("tpu-v5e", dtype="int8")]
    assert got == pytest.approx([240, 120, 240], rel=0.01)


@pytest.mark.parametrize("dtype, shape", [("bf16", (4, 4)), ("int8", (4, 2)), ("int4", (2, 2))])
def test_text_q5_smallest_slice_per_precision(dtype, shape):
    assert sl.smallest_slice("llama-3-70b", "tpu-v5e", weight_dtype=dtype).shape == shape


@pytest.mark.parametrize("dtype, shape, qps", [("bf16", (4, 4), 0.27), ("int8", (4, 2), 0.55), ("int4", (2, 2), 1.11)])
def test_text_q6_q7_full_memory_steps_take_19_ms_and_give_the_books_queries_per_chip(dtype, shape, qps):
    topo = sl.tpu_slice(shape, "tpu-v5e")
    batch = sl.max_batch_size("llama-3-70b", topo, context=8192, weight_dtype=dtype)
    assert batch in (42, 43)
    step = sl.generate_step_time_s("llama-3-70b", topo, batch=batch, context=8192, weight_dtype=dtype)
    assert step == pytest.approx(16e9 / 8.2e11, rel=0.01)  # a whole chip's HBM read once per step
    rate = sl.requests_per_s_per_chip("llama-3-70b", topo, batch=batch, context=8192, output_tokens=512,
                                      weight_dtype=dtype)
    assert rate == pytest.approx(qps, rel=0.05)


def test_text_q9_4x8_times_of_one_matmul_at_batch_64():
    # T_ici = 2BD / W_ici ≈ 11 µs, T_hbm = 2DF / (Y·W_hbm) ≈ 18 µs, T_math = 2BDF / (Y·C) ≈ 4.8 µs.
    B, D, F, Y = 64, 8192, 28672, 32
    assert sl.t_comms_s(2 * B * D, "tpu-v5e", bandwidth="ici_bidirectional") == pytest.approx(11.6e-6, rel=0.01)
    assert sl.t_comms_s(2 * D * F / Y, "tpu-v5e") == pytest.approx(17.9e-6, rel=0.01)
    assert sl.t_math_s(2 * B * D * F / Y, "tpu-v5e") == pytest.approx(4.77e-6, rel=0.01)


def test_text_q9_model_parallelism_past_the_flops_bound_while_hbm_bound():
    # The book: at batch 64 a 4x8 is still HBM-bound (T_ici ≈ 11 µs < T_hbm ≈ 18 µs per matmul), and the bound
    # Y ≈ F / (β·B) with β = W_hbm / W_ici ≈ 9 on v5e lies well beyond 32 chips.
    y = sl.generate_model_parallel_max_degree("llama-3-70b", V5E_4X8, batch=64)
    assert y == pytest.approx(28672 / (64 * 8.2e11 / 9e10), rel=1e-6) and y > 32
    # At that degree the ICI time of one matmul's activations equals its HBM weight time.
    t_ici = sl.t_comms_s(2 * 64 * 8192, "tpu-v5e", bandwidth="ici_bidirectional")
    assert t_ici == pytest.approx(sl.t_comms_s(2 * 8192 * 28672 / y, "tpu-v5e"), rel=1e-9)
    # int8 weights halve the weight read, and so the useful degree.
    assert sl.generate_model_parallel_max_degree("llama-3-70b", V5E_4X8, batch=64, weight_dtype="int8") == \
        pytest.approx(y / 2)


def test_text_q10_prefill_of_8192_tokens_at_40_percent_takes_0_91_s():
    t = sl.prefill_time_s("llama-3-70b", V5E_4X4, tokens=8192, efficiency=0.4, attention=False)
    assert t == pytest.approx(0.91, rel=0.01)
    # Causal attention adds about 7% at 8k tokens.
    with_attention = sl.prefill_time_s("llama-3-70b", V5E_4X4, tokens=8192, efficiency=0.4)
    assert 1.05 < with_attention / t < 1.1


def test_text_q11_q12_evictions_and_the_prefill_generate_ratio():
    assert sl.kv_tokens_freed_per_step(32, 8192, 4096) == 96
    assert sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512) == pytest.approx(3.0, rel=0.01)


def test_serving_cost_table_flops_per_dollar():
    # Feb 2025 list prices: H100 3.3e17, v5p 3.9e17, v5e 5.8e17 FLOPs per dollar.
    for chip, expected in (("h100", 3.3e17), ("tpu-v5p", 3.9e17), ("tpu-v5e", 5.8e17)):
        assert sl.flops_per_usd(chip) == pytest.approx(expected, rel=0.02)


def test_every_price_names_its_source_and_date():
    from scalelib._serving import _prices

    for name, row in _prices().items():
        sl.chip(name)
        assert row["usd_per_chip_hour"] > 0 and len(row["source"]) > 20 and row["date"][:2] == "20"


def test_cost_per_million_tokens_follows_price_and_throughput():
    assert sl.cost_per_million_tokens(1e6 / 3600, "tpu-v5e") == pytest.approx(1.2)
    assert sl.cost_per_million_tokens(100, "h100", usd_per_chip_hour=2.0) == pytest.approx(2.0 / 3600 / 100 * 1e6)


# --- speculative decoding ---------------------------------------------------------------------------


def test_speculative_tokens_per_step_matches_its_series():
    a, k = 0.7, 5
    assert sl.speculative_tokens_per_step(k, a) == pytest.approx(sum(a**i for i in range(k + 1)))
    assert sl.speculative_tokens_per_step(3, 1.0) == 4
    assert sl.speculative_tokens_per_step(0, 0.5) == 1


def test_the_speculative_derivation_shows_k_plus_1_drafted_powers():
    assert str(sl.explain(sl.speculative_tokens_per_step, 4, 0.8)).startswith(
        "E[tokens] = (1 − a^(k+1)) / (1 − a) = (1 − 0.8^5) / (1 − 0.8) = 3.36 tokens")
    # a = 1 (every draft accepted) is k + 1 exactly, and just below it the series tends there
    assert sl.speculative_tokens_per_step(4, np.array([1.0, 1 - 1e-9])) == pytest.approx([5.0, 5.0])


def test_speculation_wins_while_memory_bound_and_loses_past_the_critical_batch():
    kw = dict(draft=4e9, acceptance=0.8, context=2048, kv_bytes_per_token=0)
    plain = sl.generate_step_time_s(70e9, V5E_4X4, batch=1, context=2048, kv_bytes_per_token=0)
    assert sl.speculative_time_per_token_s(70e9, V5E_4X4, k=0, batch=1, **kw) == pytest.approx(plain)
    assert sl.speculative_time_per_token_s(70e9, V5E_4X4, k=3, batch=1, **kw) < 0.6 * plain
    big = sl.generate_step_time_s(70e9, V5E_4X4, batch=1024, context=2048, kv_bytes_per_token=0)
    assert sl.speculative_time_per_token_s(70e9, V5E_4X4, k=3, batch=1024, **kw) > big


# --- properties -------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 4096), context=st.integers(0, 200_000),
       dtype=st.sampled_from(["bf16", "int8", "int4"]), shape=st.sampled_from([(4, 4), (4, 8), (8, 8), (16, 16)]))
def test_step_time_is_never_below_the_weight_loading_time(batch, context, dtype, shape):
    topo = sl.tpu_slice(shape, "tpu-v5e")
    step = sl.generate_step_time_s("llama-3-70b", topo, batch=batch, context=context, weight_dtype=dtype,
                                   check_memory=False)
    assert step >= sl.weight_load_time_s("llama-3-70b", topo, weight_dtype=dtype) * (1 - 1e-12)


@pytest.mark.parametrize("weight_dtype", ["bf16", "int8"])
def test_throughput_rises_then_saturates_past_the_critical_batch(weight_dtype):
    batches = np.arange(1, 2049)
    rate = sl.tokens_per_s_per_chip("llama-3-70b", sl.tpu_slice((16, 16), "tpu-v5e"), batch=batches, context=0,
                                    weight_dtype=weight_dtype)
    assert np.all(np.diff(rate) >= -1e-9)
    crit = sl.critical_batch_size("tpu-v5e", weight_dtype=weight_dtype)
    past = rate[batches >= crit]
    assert past.max() == pytest.approx(past.min(), rel=1e-9)       # flat: compute-bound
    assert rate[int(crit / 2) - 1] == pytest.approx(past[0] / 2, rel=0.02)   # half way there below it


def test_a_longer_context_only_lowers_throughput():
    rate = sl.tokens_per_s_per_chip("llama-3-70b", V5E_4X8, batch=16, context=np.array([1024, 4096, 16384]))
    assert np.all(np.diff(rate) < 0)


def test_max_batch_fills_memory_and_one_more_does_not_fit():
    b = sl.max_batch_size("llama-3-70b", V5E_4X4, context=8192)
    sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=b, context=8192)
    with pytest.raises(sl.InvalidValueError, match=r"batch 43 at context 8192 does not fit .* the largest batch "
                                                   r"that fits is 42 \(max_batch_size\)"):
        sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=b + 1, context=8192)


def test_gpus_are_served_by_count():
    one = sl.generate_step_time_s("llama-3-70b", "h100", num_chips=2, batch=1, context=0)
    assert one == pytest.approx(sl.param_bytes("llama-3-70b") / (2 * 3.35e12))
    node = sl.generate_step_time_s("llama-3-70b", sl.gpu_cluster(1, "h100"), batch=1, context=0)
    assert node == pytest.approx(one / 4)
    assert sl.min_chips("llama-3-70b", "h100") == 2 and sl.min_chips("llama-3-70b", "b200") == 1


def test_model_parallel_comms_are_latency_bound_at_small_batches():
    # On a 4x4 (lines, no wraparound) each of the 4·L collectives is at least 6 hops of 1 µs.
    t = sl.generate_comms_time_s("llama-3-70b", V5E_4X4, batch=1)
    assert t == pytest.approx(80 * 4 * 6e-6)
    assert sl.generate_comms_time_s("llama-3-70b", V5E_4X4, batch=1024) > 10 * t


# --- errors -----------------------------------------------------------------------------------------


def test_a_model_that_does_not_fit_is_refused_with_the_chips_it_needs():
    with pytest.raises(sl.InvalidValueError, match=r"llama-3-70b does not fit on 1 x tpu-v5e: its weights take "
                                                   r"141 GB, the chips have 16 GB of HBM in all; it needs at least "
                                                   r"9 tpu-v5e chips"):
        sl.generate_step_time_s("llama-3-70b", "tpu-v5e", batch=1, context=1024)
    with pytest.raises(sl.InvalidValueError, match="does not fit"):
        sl.max_batch_size("llama-3.1-405b", V5E_4X4, context=1024)


def test_a_batch_of_zero_is_refused():
    with pytest.raises(sl.InvalidValueError, match=r"`batch` must be positive \(> 0\), got 0"):
        sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=0, context=8192)


def test_a_parameter_count_needs_its_kv_size_and_a_named_model_refuses_one():
    with pytest.raises(sl.InvalidValueError, match="`kv_bytes_per_token`: a model given as a parameter count"):
        sl.generate_step_time_s(30e9, V5E_4X4, batch=1, context=10)
    with pytest.raises(sl.InvalidValueError, match="`kv_bytes_per_token`: llama-3-70b's KV cache follows"):
        sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=1, context=10, kv_bytes_per_token=1e5)
    with pytest.raises(sl.InvalidValueError, match="`attention`: a model given as a parameter count"):
        sl.prefill_time_s(30e9, V5E_4X4, tokens=100, attention=True)


def test_other_bad_inputs_name_their_argument():
    with pytest.raises(sl.InvalidValueError, match="`num_chips`: TpuSlice"):
        sl.weight_load_time_s("llama-3-70b", V5E_4X4, num_chips=4)
    with pytest.raises(sl.InvalidValueError, match="`topology` must be a TpuSlice"):
        sl.weight_load_time_s("llama-3-70b", 16)
    with pytest.raises(sl.InvalidValueError, match="`acceptance` must be <= 1"):
        sl.speculative_tokens_per_step(3, 1.5)
    with pytest.raises(sl.InvalidValueError, match="`layout` must be '1d' or '2d'"):
        sl.weight_stationary_comms_time_s(1, 2, 3, 4, "tpu-v5p", layout="3d")
    with pytest.raises(sl.UnknownNameError, match="unknown chip with a price 'h200'"):
        sl.usd_per_chip_hour("h200")
    with pytest.raises(sl.InvalidValueError, match="`chip` must be a TPU for a slice"):
        sl.smallest_slice("llama-3-70b", "h100")


def test_explain_shows_the_books_general_formula():
    text = str(sl.explain(sl.generate_step_time_s, 30e9, V5E_4X4, batch=4, context=8192, weight_dtype="int8",
                          kv_bytes_per_token=100e3))
    assert "B·S·kv / (N·W) + max(2·B·P_active / (N·C), P_bytes / (N·W))" in text
    assert "= 2.54 ms" in text


def test_the_latency_throughput_plot_marks_where_memory_ends():
    ax = sl.plot_latency_throughput("llama-3-70b", [V5E_4X4, V5E_4X8], context=2048, weight_dtype="int8")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    limit = sl.max_batch_size("llama-3-70b", V5E_4X4, context=2048, weight_dtype="int8")
    assert labels[0] == f"tpu-v5e 4x4 (memory full at batch {int(limit)})"
    assert ax.get_xlabel().endswith("(ms)") and ax.get_ylabel().endswith("per chip)")


def test_the_latency_throughput_curve_is_each_batchs_step_in_ms_and_tokens_per_chip_up_to_memory():
    ax = sl.plot_latency_throughput("llama-3-70b", [V5E_4X4], context=2048, weight_dtype="int8")
    line = ax.get_lines()[0]
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    limit = sl.max_batch_size("llama-3-70b", V5E_4X4, context=2048, weight_dtype="int8")
    # the default sweep: 60 points spread evenly in log2 from batch 1 to 1024, rounded, those that fit, and the limit
    batches = [b for b in np.unique(np.round(2.0 ** np.linspace(0, 10, 60))) if b <= limit] + [limit]
    assert x == pytest.approx([1e3 * sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=b, context=2048,
                                                              weight_dtype="int8") for b in batches])
    assert y == pytest.approx([sl.tokens_per_s_per_chip("llama-3-70b", V5E_4X4, batch=b, context=2048,
                                                        weight_dtype="int8") for b in batches])
    # the legend is drawn at 8 pt and raised until the figure reads at 7 px or more in a phone's 358 px column
    from scalelib._plot import PHONE_COLUMN_PX, PHONE_MIN_TEXT_PX, _smallest_text_px

    assert all(t.get_fontsize() > 8 for t in ax.get_legend().get_texts())
    assert _smallest_text_px(ax.figure, PHONE_COLUMN_PX, default_pt=10) >= PHONE_MIN_TEXT_PX
    assert tuple(ax.figure.get_size_inches()) == (7.0, 4.5)
    ticks = ax.xaxis.get_major_locator().tick_values(1, 100)  # milliseconds marked at 1, 2, 5 of each decade
    assert {1, 2, 5, 10, 20, 50, 100} <= {round(float(v), 6) for v in ticks}
    cross = ax.get_lines()[1]  # the cross where memory ends
    assert (cross.get_xdata()[0], cross.get_ydata()[0]) == (pytest.approx(x[-1]), pytest.approx(y[-1]))


@pytest.mark.parametrize("chip, shapes", [
    # the slice shapes Google offers: 2D pods (v5e, 16x16), 3D ones (v5p, 16x20x28)
    ("tpu-v5e", [(1, 1), (2, 2), (4, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)]),
    ("tpu-v5p", [(2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8), (8, 8, 16),
                 (8, 16, 16), (16, 16, 16)]),
])
def test_smallest_slices_follow_the_offered_shapes(chip, shapes):
    # bf16 weights with nothing else: a model just too big for one shape lands on the next one
    hbm = {"tpu-v5e": 16e9, "tpu-v5p": 96e9}[chip]
    previous = 0
    for shape in shapes:
        chips = math.prod(shape)
        for fill in (previous + 0.01, chips - 0.01):  # just above the previous size, just below this one
            assert sl.smallest_slice(fill * hbm / 2, chip).shape == shape
        previous = chips


def test_a_sweep_that_runs_out_of_memory_names_its_first_batch_that_does_not_fit():
    with pytest.raises(sl.InvalidValueError, match=r"^batch 500 at context 8192 does not fit on .* the largest batch "
                                                   r"that fits is 138 \(max_batch_size\)"):
        sl.generate_step_time_s("llama-3-70b", V5E_4X4, batch=np.array([1, 138, 500, 1000]), context=8192,
                                weight_dtype="int8")


def test_a_model_given_as_a_parameter_count_must_be_positive():
    with pytest.raises(sl.InvalidValueError, match=r"^`model` must be positive \(> 0\), got 0$"):
        sl.generate_step_time_s(0, "tpu-v5e", batch=4, context=8192, kv_bytes_per_token=100e3, num_chips=16)


@pytest.mark.parametrize("context, fits", [(32000, 1), (64000, 0)])
def test_a_batch_of_one_is_served_when_exactly_one_sequence_fits_beside_the_weights(context, fits):
    # Llama 3 70B on 2 H100 (2 x 80 GB): 70.55e9 bf16 weights take 141.1 GB, leaving 18.9 GB; a token's K and V
    # are 2 · 80 layers · 8 KV heads · 128 · 2 bytes = 327,680 B: 32,000 tokens take 10.5 GB (one sequence
    # fits, not two) and 64,000 take 21.0 GB (none)
    import tomllib
    from pathlib import Path

    data = Path(sl.__file__).parent / "data"
    m = tomllib.loads((data / "models.toml").read_text())["llama-3-70b"]
    hbm = 2 * tomllib.loads((data / "chips.toml").read_text())["h100"]["hbm_bytes"]
    left = hbm - 2 * sl.params("llama-3-70b")
    assert math.floor(left / (context * 2 * m["L"] * m["K"] * m["H"] * 2)) == fits
    assert sl.max_batch_size("llama-3-70b", "h100", context=context, num_chips=2) == fits
    if fits:
        assert sl.max_batch_within_latency("llama-3-70b", "h100", latency_s=1.0, context=context, num_chips=2) == 1
    else:
        with pytest.raises(sl.InvalidValueError, match="not one sequence of 64000 tokens fits"):
            sl.max_batch_within_latency("llama-3-70b", "h100", latency_s=1.0, context=context, num_chips=2)


@pytest.mark.parametrize("t", [1, 3])
def test_a_decode_steps_derivation_substitutes_the_tokens_per_step_where_its_formula_names_them(t):
    d = str(sl.explain(sl.generate_step_time_s, "llama-3-8b", "h100", batch=4, context=1024, tokens_per_step=t))
    step = next(line for line in d.splitlines() if line.startswith("T_step"))
    formula, numbers = step.split(" = ")[1:3]
    assert ("2·B·3·P_active" if t == 3 else "2·B·P_active") in formula
    assert ("max(2·4·3·8.03e9 " if t == 3 else "max(2·4·8.03e9 ") in numbers


@pytest.mark.parametrize("layout", ["1d", "2d"])
def test_weight_stationary_comms_refuse_zero_chips_by_name(layout):
    with pytest.raises(sl.InvalidValueError, match=r"^`num_chips` must be >= 1, got 0$"):
        sl.weight_stationary_comms_time_s(64, 8192, 32768, 0, "tpu-v5p", layout=layout)


def test_a_batch_that_does_not_fit_is_refused_with_its_cache_size_worked_out():
    # 64 sequences × 32,000 tokens × 327,680 B of K and V per token (Llama 3 70B, bf16) = 671 GB
    kv = 64 * 32000 * 2 * 80 * 8 * 128 * 2
    assert round(kv / 1e9) == 671
    with pytest.raises(sl.InvalidValueError, match="its KV caches take 671 GB beside 141 GB of weights, and the "
                                                   "chips have 160 GB of HBM; the largest batch that fits is 1 "):
        sl.generate_step_time_s("llama-3-70b", "h100", batch=64, context=32000, num_chips=2)
