"""Transformer math (chapter 4): the presets' parameter counts against the publishers' own, FLOP counts against
XLA's cost analysis of a small JAX Transformer, the book's figures, properties of the counts, and clear errors."""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl
from scalelib import _models

# --- the presets against the publishers' parameter counts ---------------------------------------

#: The publishers' counts are stored in models.toml with their sources; these are the ones the course
#: leans on, checked to 1% (the published figures are themselves rounded to two or three digits).
PUBLISHED = ["llama-3-8b", "llama-3-70b", "llama-3.1-405b", "mixtral-8x7b", "deepseek-v3", "llama-2-13b",
             "gemma-2-27b"]


@pytest.fixture(autouse=True)
def keep_the_registry():
    before = dict(_models._USER)
    yield
    _models._USER.clear()
    _models._USER.update(before)
    plt.close("all")


@pytest.mark.parametrize("name", PUBLISHED)
def test_preset_parameter_counts_match_the_publishers_within_1_percent(name):
    spec = sl.model(name)
    assert spec.published_params is not None and spec.source_of("published_params") != spec.source
    assert sl.params(spec) == pytest.approx(spec.published_params, rel=0.01)


def test_llama_3_8b_is_counted_to_the_parameter():
    # 8,030,261,248: the sum of the tensor sizes in Meta's released safetensors files.
    assert sl.params("llama-3-8b") == 8_030_261_248


def test_mixtral_active_parameters_match_mistral_within_1_percent():
    assert sl.params("mixtral-8x7b", active=True) == pytest.approx(12.9e9, rel=0.01)
    assert sl.model("mixtral-8x7b").published_active_params == 12.9e9


def test_deepseek_v3_active_parameters_match_its_report_within_2_percent():
    # "37B activated": counting both embedding tables gives 37.6e9, without the input lookup 36.6e9;
    # the report does not say which it counts, so the test allows 2%.
    spec = sl.model("deepseek-v3")
    assert sl.params(spec, active=True) == pytest.approx(spec.published_active_params, rel=0.02)


def test_every_preset_names_a_source_and_documents_its_shape():
    for name in sl.models():
        spec = sl.model(name)
        assert "config" in spec.source.lower() or "report" in spec.source.lower(), name
        assert spec.published_params is not None, name


def test_deepseek_v3_layout_follows_its_config():
    spec = sl.model("deepseek-v3")
    assert (spec.dense_layers, spec.dense_F, spec.moe_layers, spec.E, spec.k, spec.shared_experts) == (
        3, 18432, 58, 256, 8, 1)
    assert (spec.mla.q_lora_rank, spec.mla.kv_lora_rank, spec.mla.qk_nope_head_dim, spec.mla.qk_rope_head_dim,
            spec.mla.v_head_dim) == (1536, 512, 128, 64, 128)


def test_components_add_up_to_the_total():
    for name in sl.models():
        parts = sum(sl.params(name, component=c) for c in ("mlp", "attention", "embeddings", "norms"))
        assert parts == pytest.approx(sl.params(name))


def test_tied_embeddings_count_one_table():
    untied = sl.model("llama-3-8b")
    tied = untied.derive("llama-3-8b-tied", tied_embeddings=True)
    assert sl.params(untied) - sl.params(tied) == untied.V * untied.D
    assert sl.params("gemma-2-27b", component="embeddings") == 256000 * 4608


def test_a_plain_mlp_has_two_matrices_and_a_gated_one_three():
    gated = sl.ModelSpec(L=2, D=64, F=256, N=4, K=4, H=16, V=100)
    plain = sl.ModelSpec(L=2, D=64, F=256, N=4, K=4, H=16, V=100, gated=False)
    assert sl.params(gated, component="mlp") == 2 * 3 * 64 * 256
    assert sl.params(plain, component="mlp") == 2 * 2 * 64 * 256


# --- the book's figures --------------------------------------------------------------------------

BOOK_Q1 = sl.ModelSpec(name="book-q1", L=64, D=4096, F=4 * 4096, N=32, K=32, H=128, V=32000)


def test_book_q1_parameter_count_attention_share_and_kv_cache():
    L, D, F, V = 64, 4096, 4 * 4096, 32000
    book = L * (3 * D * F + 4 * D * D + 2 * D) + 2 * D * V  # the book's formula (no final norm)
    assert sl.params(BOOK_Q1) == book + D
    share = sl.params(BOOK_Q1, component="attention") / (sl.params(BOOK_Q1, component="attention")
                                                         + sl.params(BOOK_Q1, component="mlp"))
    assert share == pytest.approx(1 / 4)
    assert sl.kv_cache_bytes(BOOK_Q1, dtype="int8") == 512 * 1024


def test_llama_3_70b_int8_kv_cache_is_160_kib_per_token():
    assert sl.kv_cache_bytes("llama-3-70b", dtype="int8") == 160 * 1024
    assert sl.kv_cache_bytes("llama-3-70b", dtype="bf16", tokens=8192) == 2 * 8192 * 160 * 1024


def test_book_kv_cache_of_8_gib_for_8k_context():
    spec = sl.ModelSpec(L=64, D=8192, F=4 * 8192, N=64, K=64, H=128, V=32000)
    assert sl.kv_cache_bytes(spec, tokens=8192, dtype="int8") == 8 * 1024**3


def test_deepseek_v3s_latent_attention_is_counted_matrix_by_matrix():
    # per layer, by hand from its config: W_DQ D x r_q, W_UQ r_q x N·(d_nope + d_rope), W_DKV D x (r_kv + d_rope)
    # (the latent and the shared positional key), W_UK and W_UV r_kv x N·(d_nope + d_v), W_O N·d_v x D
    D, N, r_q, r_kv, d_nope, d_rope, d_v = 7168, 128, 1536, 512, 128, 64, 128
    per_layer = (D * r_q + r_q * N * (d_nope + d_rope) + D * (r_kv + d_rope) + r_kv * N * (d_nope + d_v)
                 + N * d_v * D)
    assert per_layer == 187_105_280
    assert sl.params("deepseek-v3", component="attention") == 61 * per_layer


def test_each_optimizer_keeps_its_number_of_f32_values_per_parameter():
    # bf16 weights and gradients (2 + 2 bytes) plus Adam's two f32 moments, momentum's one, plain SGD's none
    P = sl.params("llama-3-8b")
    for optimizer, values in (("adam", 2), ("momentum", 1), ("sgd", 0)):
        assert sl.training_state_bytes("llama-3-8b", optimizer=optimizer) == pytest.approx((4 + 4 * values) * P)


def test_an_unknown_optimizer_is_named_as_given():
    with pytest.raises(sl.UnknownNameError, match=r"^`optimizer`: unknown optimizer 'adamw': expected one of adam, "
                                                  r"momentum, sgd; did you mean 'adam'\?$"):
        sl.training_state_bytes("llama-3-8b", optimizer="adamw")
    with pytest.raises(sl.UnknownNameError, match=r"^`optimizer`: unknown optimizer '3': expected one of adam, "
                                                  r"momentum, sgd$"):
        sl.training_state_bytes("llama-3-8b", optimizer=3)


def test_the_training_flops_derivation_brackets_only_a_sum_of_components():
    one = str(sl.explain(sl.train_flops, "llama-3-8b", seq_len=2048, tokens=2048, component="mlp"))
    assert "\nFLOPs_train(llama-3-8b, mlp) = 3·F_mlp = 3·2.31e13 FLOP = 6.93e13 FLOP" in one
    every = sl.explain(sl.train_flops, "llama-3-8b", seq_len=2048, tokens=2048, remat="full")
    assert every.formula == "3·(F_mlp + F_attention + F_dot_product + F_embeddings) + F_mlp + F_attention + F_dot_product"
    assert "FLOPs_train(llama-3-8b) = 3·(" in str(every)


def test_the_list_of_models_shows_each_ones_aliases():
    text = repr(sl.models())
    assert "'llama-3-8b' (llama3-8b, meta-llama-3-8b)" in text and "'mixtral-8x7b' (mixtral)" in text


def test_the_flop_counts_take_their_options_by_keyword():
    import inspect

    for f in (sl.train_flops, sl.forward_flops):
        params = inspect.signature(f).parameters
        assert [p.kind for p in params.values()][1:] == [inspect.Parameter.KEYWORD_ONLY] * (len(params) - 1)
    with pytest.raises(TypeError):
        sl.train_flops("llama-3-8b", 4096)


def test_deepseek_v3_caches_576_values_per_token_per_layer():
    assert sl.kv_cache_bytes("deepseek-v3", dtype="int8") == 61 * (512 + 64)


def test_attention_catches_up_with_the_matmuls_at_8d_and_the_projections_at_2d():
    for D in (1024, 4096, 8192):
        spec = sl.ModelSpec(L=4, D=D, F=4 * D, N=D // 128, K=D // 128, H=128, V=1000)
        assert sl.attention_crossover_seq_len(spec) == pytest.approx(8 * D)
        assert sl.attention_crossover_seq_len(spec, causal=True) == pytest.approx(16 * D)
        T = 2 * D  # the book's Q5: dot-product attention equals the Q, K, V, O projections at T = 2D
        assert sl.train_flops(spec, seq_len=T, component="dot_product") == pytest.approx(
            sl.train_flops(spec, seq_len=T, component="attention"))
        T = sl.attention_crossover_seq_len(spec)
        matmuls = sum(sl.train_flops(spec, seq_len=T, component=c) for c in ("mlp", "attention"))
        assert sl.train_flops(spec, seq_len=T, component="dot_product") == pytest.approx(matmuls)


def test_book_per_layer_training_flops():
    # 18BTDF for a gated MLP, 12BTD(N+K)H for the projections, 12BT²NH for attention, 6BTDV for the unembedding.
    spec = sl.ModelSpec(L=1, D=2048, F=5632, N=16, K=4, H=128, V=50000)
    B, T = 8, 1024
    got = {c: sl.train_flops(spec, seq_len=T, tokens=B * T, component=c) for c in sl._transformer.FLOP_COMPONENTS}
    assert got == pytest.approx({"mlp": 18 * B * T * 2048 * 5632, "attention": 12 * B * T * 2048 * 20 * 128,
                                 "dot_product": 12 * B * T**2 * 16 * 128, "embeddings": 6 * B * T * 2048 * 50000})


def test_training_is_about_6_params_tokens_and_8_with_block_remat():
    for name in ("llama-3-8b", "llama-3-70b", "llama-3.1-405b"):
        p = sl.params(name)
        assert sl.train_flops(name, seq_len=2048) / p == pytest.approx(6, rel=0.08)
        assert sl.train_flops(name, seq_len=2048, remat="full") / p == pytest.approx(8, rel=0.08)
    moe = "mixtral-8x7b"
    assert sl.train_flops(moe, seq_len=2048) / sl.params(moe, active=True) == pytest.approx(6, rel=0.08)


def test_remat_of_the_dot_product_adds_4_bt2nh():
    # The book's Q6: saving the seven big matmul outputs, the backward pass recomputes QKᵀ and its product with V.
    spec = sl.model("llama-3-70b")
    B, T = 4, 4096
    extra = sl.train_flops(spec, seq_len=T, tokens=B * T, remat="dot_product") - sl.train_flops(
        spec, seq_len=T, tokens=B * T)
    assert extra == pytest.approx(spec.L * 4 * B * T**2 * spec.N * spec.H)


def test_deepseek_moe_critical_batch_is_3840_tokens():
    assert sl.moe_critical_batch_size("deepseek-v3", "tpu-v5e", weight_dtype="int8") == pytest.approx(3840, rel=2e-3)


def test_deepseek_v3_utilisation_from_its_report_is_about_22_percent():
    # The book's Q7: 2.79M H800-hours, 14.8T tokens, 6·37e9·14.8e12 FLOPs at 1.513e15 FLOP/s.
    used = 6 * 37e9 * 14.8e12
    assert used / (2.79e6 * 3600 * 1.513e15) == pytest.approx(0.217, abs=0.002)
    assert 6 * sl.params("deepseek-v3", active=True) * 14.8e12 == pytest.approx(used, rel=0.02)


def test_training_state_is_10_bytes_per_parameter_in_the_books_rule():
    p = sl.params("llama-3-70b")
    assert sl.training_state_bytes("llama-3-70b", grad_dtype=None) == 10 * p
    assert sl.training_state_bytes("llama-3-70b") == 12 * p
    assert sl.training_state_bytes("llama-3-70b", optimizer="sgd", grad_dtype="f32", param_dtype="f32") == 8 * p
    assert sl.param_bytes("mixtral-8x7b", dtype="int4", active=True) == sl.params("mixtral-8x7b", active=True) / 2


def test_einsum_flops_follow_the_books_counting_rule():
    # The book's Q3: I and J contracted, no batch dimension: 2·I·J·K·L·M·N·O.
    sizes = dict(i=2, j=3, k=5, l=7, m=11, n=13, o=17)
    assert sl.einsum_flops("ijkl,ijmno->klmno", sizes) == 2 * math.prod(sizes.values())
    assert sl.einsum_flops("bd,df->bf", {"b": 64, "d": 128, "f": 256}) == sl.matmul_flops(64, 128, 256)
    assert sl.einsum_flops("btd,dnh->btnh", {"b": 2, "t": 3, "d": 5, "n": 7, "h": 11}) == 2 * 2 * 3 * 5 * 7 * 11
    assert sl.einsum_flops("ij,ij->ij", {"i": 4, "j": 8}) == 32  # elementwise: no adds, no factor 2
    assert sl.einsum_flops("i,j", {"i": 4, "j": 8}) == 32  # numpy's implicit output 'ij': an outer product
    assert sl.einsum_flops("ij,jk", {"i": 4, "j": 8, "k": 2}) == 2 * 64  # implicit output 'ik'


def test_the_einsum_derivation_shows_the_factor_2_only_when_something_is_summed():
    summed = str(sl.explain(sl.einsum_flops, "bd,df->bf", {"b": 4, "d": 8, "f": 2}))
    assert summed.startswith("FLOPs = 2·b·d·f = 2·4·8·2 = 128 FLOP")
    elementwise = str(sl.explain(sl.einsum_flops, "ij,ij->ij", {"i": 4, "j": 8}))
    assert elementwise.startswith("FLOPs = i·j = 4·8 = 32 FLOP")
    assert "nothing is summed over" in elementwise
    assert "where d: summed over (in both operands, not in the output)" in summed
    one_side = str(sl.explain(sl.einsum_flops, "btd,df->bf", {"b": 4, "t": 3, "d": 8, "f": 2}))
    assert "where t, d: summed over (in the operands, not in the output)" in one_side  # t is in one operand only


def test_einsum_flops_agree_with_numpy_s_own_count():
    # numpy's einsum_path reports the naive FLOP count of a contraction: the same rule.
    cases = [("bd,df->bf", dict(b=3, d=5, f=7)), ("ijkl,ijmno->klmno", dict(i=2, j=3, k=2, l=3, m=2, n=3, o=2)),
             ("btnh,bsnh->bnts", dict(b=2, t=3, s=5, n=2, h=7)), ("bkgts,bskh->btkgh", dict(b=2, k=2, g=3, t=4,
                                                                                              s=4, h=5))]
    for subscripts, sizes in cases:
        a, b = subscripts.split("->")[0].split(",")
        x, y = (np.ones([sizes[c] for c in side]) for side in (a, b))
        report = np.einsum_path(subscripts, x, y, optimize="greedy")[1]
        naive = float(re.search(r"Naive FLOP count:\s+([\d.e+]+)", report).group(1))
        assert sl.einsum_flops(subscripts, sizes) == naive


def test_einsum_flops_refuse_what_they_cannot_count():
    with pytest.raises(sl.InvalidValueError, match=r"^`subscripts` must name two operands and the output"):
        sl.einsum_flops("ab,bc,cd->ad", {"a": 1, "b": 1, "c": 1, "d": 1})
    with pytest.raises(sl.InvalidValueError, match=r"^`sizes` has no size for f \(of 'bd,df->bf'\)$"):
        sl.einsum_flops("bd,df->bf", {"b": 8, "d": 8})
    with pytest.raises(sl.InvalidValueError, match=r"the output's x appear in neither operand"):
        sl.einsum_flops("bd,df->bx", {"b": 8, "d": 8, "f": 8, "x": 8})
    with pytest.raises(sl.InvalidValueError, match=r"^`sizes\['d'\]` must be a whole number >= 1, got 0$"):
        sl.einsum_flops("bd,df->bf", {"b": 8, "d": 0, "f": 8})


def test_attention_intensity_is_the_books_tsg_over_tg_plus_s():
    for T, S, G in [(4096, 4096, 1), (4096, 4096, 8), (1, 8192, 8), (512, 32768, 4)]:
        assert sl.attention_intensity(T, S, G=G) == pytest.approx(T * S * G / (T * G + S))
    assert sl.attention_intensity(4096, 4096) == 2048  # prefill, multi-head: T / 2
    assert sl.attention_intensity(1, 1e9, G=8) == pytest.approx(8, rel=1e-6)  # generation: at most G
    assert sl.attention_intensity(1, 8192, G=8, dtype="int8") == 2 * sl.attention_intensity(1, 8192, G=8)


# --- properties ----------------------------------------------------------------------------------

NAMES = st.sampled_from(list(_models._builtin()))


@settings(max_examples=40, deadline=None)
@given(name=NAMES, B=st.integers(1, 512), T=st.integers(1, 1 << 17), c=st.integers(2, 9))
def test_flops_are_linear_in_the_batch(name, B, T, c):
    for f in (sl.forward_flops, sl.train_flops):
        assert f(name, seq_len=T, tokens=c * B * T) == pytest.approx(c * f(name, seq_len=T, tokens=B * T))


@settings(max_examples=40, deadline=None)
@given(name=NAMES, B=st.integers(1, 64), T=st.integers(1, 1 << 16), c=st.integers(2, 8), causal=st.booleans())
def test_attention_is_quadratic_in_the_sequence_and_the_rest_linear(name, B, T, c, causal):
    dp = lambda t: sl.train_flops(name, seq_len=t, tokens=B * t, component="dot_product", causal=causal)  # noqa: E731
    mlp = lambda t: sl.train_flops(name, seq_len=t, tokens=B * t, component="mlp")  # noqa: E731
    assert dp(c * T) == pytest.approx(c**2 * dp(T))
    assert mlp(c * T) == pytest.approx(c * mlp(T))


@settings(max_examples=30, deadline=None)
@given(name=NAMES, T=st.integers(1, 1 << 17))
def test_causal_halves_attention_and_remat_only_adds(name, T):
    full = sl.forward_flops(name, seq_len=T, component="dot_product")
    assert sl.forward_flops(name, seq_len=T, component="dot_product", causal=True) == pytest.approx(full / 2)
    none, some, every = (sl.train_flops(name, seq_len=T, remat=r) for r in ("none", "dot_product", "full"))
    assert none < some < every < 4 / 3 * none
    assert sl.train_flops(name, seq_len=T) == pytest.approx(3 * sl.forward_flops(name, seq_len=T))


def test_sweeps_are_one_call():
    T = np.array([1024, 4096, 16384])
    swept = sl.train_flops("llama-3-8b", seq_len=T, tokens=8 * T)
    assert list(swept) == [sl.train_flops("llama-3-8b", seq_len=int(t), tokens=8 * int(t)) for t in T]
    assert sl.kv_cache_bytes("llama-3-8b", tokens=T).shape == (3,)


def test_the_derivation_shows_each_component():
    text = str(sl.explain(sl.params, "llama-3-70b"))
    assert "P_mlp = L·3·D·F = 80·3·8192·28672" in text
    assert "P_attention = L·2·D·(N+K)·H = 80·2·8192·(64+8)·128" in text
    text = str(sl.explain(sl.train_flops, "llama-3-70b", seq_len=4096, remat="full"))
    assert "remat 'full' recomputes F_mlp, F_attention, F_dot_product" in text
    assert str(sl.explain(sl.kv_cache_bytes, "llama-3-70b", dtype="int8")).endswith(
        "= 2·80·8·128 · 1 · 1 = 164 kB\n  where b: bytes per int8 value")


# --- errors ----------------------------------------------------------------------------------------

def test_k_must_divide_n():
    with pytest.raises(sl.InvalidValueError, match=r"^ModelSpec 'custom': `K` must divide `N` \(each key/value head "
                                                   r"serves N / K query heads\), got N = 32, K = 5$"):
        sl.ModelSpec(L=2, D=64, F=256, N=32, K=5, H=16, V=100)


@pytest.mark.parametrize("field, value", [("L", -1), ("D", 0), ("F", -4096), ("H", 2.5), ("V", True), ("N", "8")])
def test_sizes_must_be_positive_whole_numbers(field, value):
    shape = dict(L=2, D=64, F=256, N=4, K=4, H=16, V=100)
    shape[field] = value
    with pytest.raises(sl.InvalidValueError, match=rf"^ModelSpec 'custom': `{field}` must be a whole number >= 1, "
                                                   rf"got {value!r}$"):
        sl.ModelSpec(**shape)


@pytest.mark.parametrize("field", ["published_params", "published_active_params"])
@pytest.mark.parametrize("value", [0, -7e9, float("nan"), float("inf"), True, "8e9"])
def test_a_published_count_must_be_a_positive_number(field, value):
    shape = dict(L=2, D=64, F=256, N=4, K=4, H=16, V=100, E=4, k=2)
    with pytest.raises(sl.InvalidValueError, match=rf"^ModelSpec 'custom': `{field}` must be a positive number or "
                                                   rf"None, got"):
        sl.ModelSpec(**shape, **{field: value})
    assert getattr(sl.ModelSpec(**shape, **{field: 7}), field) == 7.0


def test_impossible_mixtures_of_experts_are_refused():
    shape = dict(L=4, D=64, F=256, N=4, K=4, H=16, V=100)
    with pytest.raises(sl.InvalidValueError, match=r"`k` must be at most E: a token uses k of the E experts, "
                                                   r"got E = 4, k = 8$"):
        sl.ModelSpec(**shape, E=4, k=8)
    with pytest.raises(sl.InvalidValueError, match=r"a mixture of experts needs `k`"):
        sl.ModelSpec(**shape, E=4)
    with pytest.raises(sl.InvalidValueError, match=r"`k` belongs to a mixture of experts; give `E`"):
        sl.ModelSpec(**shape, k=2)
    with pytest.raises(sl.InvalidValueError, match=r"`dense_layers` must be at most L = 4, got 5"):
        sl.ModelSpec(**shape, E=4, k=1, dense_layers=5, dense_F=128)
    with pytest.raises(sl.InvalidValueError, match=r"`dense_layers` = 2 needs `dense_F`"):
        sl.ModelSpec(**shape, E=4, k=1, dense_layers=2)
    with pytest.raises(sl.InvalidValueError, match=r"`shared_experts` must be a whole number >= 0, got -1"):
        sl.ModelSpec(**shape, E=4, k=1, shared_experts=-1)


def test_bad_latent_attention_is_refused():
    shape = dict(L=4, D=64, F=256, N=4, K=4, H=16, V=100)
    with pytest.raises(sl.InvalidValueError, match=r"^LatentAttention: `kv_lora_rank` must be a whole number >= 1, "
                                                   r"got 0$"):
        sl.ModelSpec(**shape, mla=dict(kv_lora_rank=0, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8))
    with pytest.raises(sl.InvalidValueError, match=r"`mla` .*missing 1 required keyword-only argument: 'v_head_dim'"):
        sl.ModelSpec(**shape, mla=dict(kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8))


def test_an_unknown_model_lists_the_known_ones_and_suggests_the_closest():
    with pytest.raises(sl.UnknownNameError, match=r"^`model`: unknown model 'llama-3-7b': expected one of "
                                                  r"deepseek-v3, gemma-2-27b, .*; did you mean 'llama-3-70b'"):
        sl.model("llama-3-7b")
    with pytest.raises(sl.UnknownNameError, match=r"^`model`: unknown model 'gpt-5'"):
        sl.params("gpt-5")


def test_a_component_a_count_does_not_have_is_explained():
    with pytest.raises(sl.InvalidValueError, match=r"dot-product attention has no parameters"):
        sl.params("llama-3-8b", component="dot_product")
    with pytest.raises(sl.InvalidValueError, match=r"norms do no matmuls"):
        sl.train_flops("llama-3-8b", seq_len=4096, component="norms")
    with pytest.raises(sl.UnknownNameError, match=r"^`remat`: unknown remat policy 'block'"):
        sl.train_flops("llama-3-8b", seq_len=4096, remat="block")
    with pytest.raises(sl.InvalidValueError, match=r"^`seq_len` must be positive \(> 0\), got -5$"):
        sl.forward_flops("llama-3-8b", seq_len=-5)
    with pytest.raises(sl.InvalidValueError, match=r"^`model`: llama-3-8b is dense"):
        sl.moe_critical_batch_size("llama-3-8b", "tpu-v5e")


def test_the_registry_refuses_a_preset_in_disguise_and_a_second_registration():
    changed = sl.ModelSpec(**{**{k: getattr(sl.model("llama-3-8b"), k) for k in "LDFNKHV"}, "name": "llama-3-8b",
                              "F": 4096})
    with pytest.raises(sl.InvalidValueError, match=r"differ from the registered 'llama-3-8b'; give the variant"):
        sl.params(changed)
    with pytest.raises(sl.InvalidValueError, match=r"'mixtral' is a preset \(mixtral-8x7b\)"):
        sl.register_model({"name": "mixtral", "L": 1, "D": 8, "F": 8, "N": 1, "K": 1, "H": 8, "V": 8})
    sl.register_model(BOOK_Q1)
    assert sl.model("book-q1") is BOOK_Q1 and "book-q1" in sl.models()
    with pytest.raises(sl.InvalidValueError, match=r"already registered \(book-q1\); pass replace=True"):
        sl.register_model(BOOK_Q1)
    with pytest.raises(sl.UnknownNameError, match=r"unknown ModelSpec field 'layers'"):
        sl.model("llama-3-8b").derive("x", layers=3)


# --- the breakdown chart ---------------------------------------------------------------------------

def test_breakdown_chart_has_a_bar_per_model_and_length_adding_to_100_percent():
    ax_p, ax_f = sl.plot_model_breakdown(["llama-3-8b", "deepseek-v3"], seq_lens=[4096, 65536])
    assert ax_p.get_xlabel() == "share of parameters (%)"
    assert [t.get_text() for t in ax_f.get_yticklabels()] == [
        "llama-3-8b, T = 4,096", "llama-3-8b, T = 65,536", "deepseek-v3, T = 4,096", "deepseek-v3, T = 65,536"]
    widths = np.zeros(4)
    for patch in ax_f.patches:
        widths[round(patch.get_y() + patch.get_height() / 2)] += patch.get_width()
    assert widths == pytest.approx(100)
    attention = sorted((p.get_y(), p.get_width()) for p in ax_f.patches if p.get_gid() == "dot_product")
    assert attention[0][1] > attention[1][1]  # deepseek-v3 at 64k (bottom) spends more on attention than at 4k
    legend = [t.get_text() for t in ax_f.figure.legends[0].get_texts()]
    assert legend == ["MLP", "attention projections", "dot-product attention", "embeddings / unembedding", "norms"]


# --- XLA's cost analysis of a small JAX Transformer -----------------------------------------------
#
# The model below is built from a ModelSpec: embedding lookup, then per layer RMSNorm, attention (grouped-query
# or latent), RMSNorm, MLP (dense, gated or plain, or a mixture of experts with shared experts), then the final
# norm and the unembedding. XLA counts every FLOP it compiles; scalelib counts the matmuls and dot-product
# attention only. What XLA adds (softmax, norms, the activation and gating, the residual adds, the cross-entropy,
# the scatter-adds of the embedding's and the experts' gradients) is a few FLOPs per value, small next to the
# matmuls when D, F and H are a few hundred: the shapes are sized for that. The mask is applied with a `where`,
# so XLA computes the whole T x T product: the counts compare with causal=False.

SHAPES = {
    "gqa-gated": (sl.ModelSpec(L=2, D=256, F=768, N=8, K=2, H=64, V=512), 2, 128),
    "mha-plain-tied": (sl.ModelSpec(L=1, D=384, F=1536, N=6, K=6, H=64, V=768, gated=False, tied_embeddings=True),
                       1, 256),
    "long-sequence": (sl.ModelSpec(L=1, D=256, F=1024, N=4, K=4, H=64, V=256), 1, 1024),
    "moe-shared-dense": (sl.ModelSpec(L=2, D=256, F=384, N=4, K=2, H=64, V=512, E=8, k=2, shared_experts=1,
                                      dense_layers=1, dense_F=1024), 2, 64),
    "mla": (sl.ModelSpec(L=1, D=384, F=1024, N=6, K=6, H=64, V=512,
                         mla=dict(q_lora_rank=192, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32,
                                  v_head_dim=64)), 2, 128),
}


def _init(spec, key):
    import jax

    keys = iter(jax.random.split(key, 64 * (spec.L + 2)))

    def w(*shape):
        return jax.random.normal(next(keys), shape) * shape[-2] ** -0.5

    def mlp(width, experts=None):
        lead = () if experts is None else (experts,)
        up = {"w_in": w(*lead, spec.D, width), "w_out": w(*lead, width, spec.D)}
        if spec.gated:
            up["w_gate"] = w(*lead, spec.D, width)
        return up

    layers = []
    for i in range(spec.L):
        if spec.mla is None:
            attn = {"wq": w(spec.D, spec.N * spec.H), "wk": w(spec.D, spec.K * spec.H),
                    "wv": w(spec.D, spec.K * spec.H), "wo": w(spec.N * spec.H, spec.D)}
        else:
            a = spec.mla
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            attn = {"wq_a": w(spec.D, a.q_lora_rank), "wq_b": w(a.q_lora_rank, spec.N * qk),
                    "wkv_a": w(spec.D, a.kv_lora_rank + a.qk_rope_head_dim),
                    "wkv_b": w(a.kv_lora_rank, spec.N * (a.qk_nope_head_dim + a.v_head_dim)),
                    "wo": w(spec.N * a.v_head_dim, spec.D)}
        if spec.is_moe and i >= spec.dense_layers:
            ffn = {"router": w(spec.D, spec.E), "experts": mlp(spec.F, spec.E)}
            if spec.shared_experts:
                ffn["shared"] = mlp(spec.F * spec.shared_experts)
        else:
            ffn = {"dense": mlp(spec.dense_F if spec.is_moe else spec.F)}
        layers.append({"attn": attn, "ffn": ffn})
    params = {"embed": w(spec.V, spec.D), "layers": layers}
    if not spec.tied_embeddings:
        params["unembed"] = w(spec.D, spec.V)
    return params


def _rms(x):
    import jax

    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6)


def _attend(q, k, v):
    """q [B, T, N, d], k [B, T, K, d], v [B, T, K, dv] -> [B, T, N·dv], causal (masked, not skipped)."""
    import jax
    import jax.numpy as jnp

    B, T, N, d = q.shape
    K = k.shape[2]
    q = q.reshape(B, T, K, N // K, d)
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k) / d**0.5
    scores = jnp.where(jnp.tril(jnp.ones((T, T), bool)), scores, -1e9)
    out = jnp.einsum("bkgts,bskd->btkgd", jax.nn.softmax(scores, axis=-1), v)
    return out.reshape(B, T, -1)


def _attention(spec, p, x):
    import jax.numpy as jnp

    B, T, _ = x.shape
    if spec.mla is None:
        q = (x @ p["wq"]).reshape(B, T, spec.N, spec.H)
        k = (x @ p["wk"]).reshape(B, T, spec.K, spec.H)
        v = (x @ p["wv"]).reshape(B, T, spec.K, spec.H)
        return _attend(q, k, v) @ p["wo"]
    a = spec.mla
    q = (_rms(x @ p["wq_a"]) @ p["wq_b"]).reshape(B, T, spec.N, -1)
    latent = x @ p["wkv_a"]
    kv = (_rms(latent[..., :a.kv_lora_rank]) @ p["wkv_b"]).reshape(B, T, spec.N, -1)
    k_nope, v = kv[..., :a.qk_nope_head_dim], kv[..., a.qk_nope_head_dim:]
    k_rope = jnp.broadcast_to(latent[..., None, a.kv_lora_rank:], (B, T, spec.N, a.qk_rope_head_dim))
    return _attend(q, jnp.concatenate([k_nope, k_rope], -1), v) @ p["wo"]


def _mlp(spec, p, x, experts=False):
    import jax
    import jax.numpy as jnp

    mm = (lambda a, w: jnp.einsum("ecd,edf->ecf", a, w)) if experts else (lambda a, w: a @ w)  # noqa: E731
    up = mm(x, p["w_in"])
    h = jax.nn.silu(mm(x, p["w_gate"])) * up if spec.gated else jax.nn.gelu(up)
    return mm(h, p["w_out"])


def _moe(spec, p, x):
    """Each token goes to k experts, spread evenly: expert e gets exactly tokens·k / E of them."""
    import jax
    import jax.numpy as jnp

    n = x.shape[0]
    assert (n * spec.k) % spec.E == 0
    slots = np.arange(n * spec.k)
    pairs = sorted((int(s % spec.E), int(s // spec.k)) for s in slots)  # slot s = token·k + j goes to expert s mod E
    token = np.array([t for _, t in pairs]).reshape(spec.E, -1)        # [E, capacity]
    gates = jax.nn.softmax(x @ p["router"], axis=-1)                   # [tokens, E]
    y = _mlp(spec, p["experts"], x[token], experts=True)               # [E, capacity, D]
    y = y * gates[token, np.arange(spec.E)[:, None]][..., None]
    out = jnp.zeros_like(x).at[token.reshape(-1)].add(y.reshape(-1, x.shape[1]))
    if "shared" in p:
        out = out + _mlp(spec, p["shared"], x)
    return out


def _forward(spec, params, tokens):
    x = params["embed"][tokens]
    B, T, D = x.shape
    for layer in params["layers"]:
        x = x + _attention(spec, layer["attn"], _rms(x))
        h = _rms(x).reshape(B * T, D)
        ffn = layer["ffn"]
        h = _mlp(spec, ffn["dense"], h) if "dense" in ffn else _moe(spec, ffn, h)
        x = x + h.reshape(B, T, D)
    unembed = params["embed"].T if spec.tied_embeddings else params["unembed"]
    return _rms(x) @ unembed


def _loss(spec, params, tokens):
    import jax

    logits = _forward(spec, params, tokens)
    return -jax.numpy.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], -1).mean()


def _xla_flops(fn, *args) -> float:
    import jax

    # XLA's cost analysis of the lowered module, before optimisation: within 0.1% of the compiled one's
    # count for these shapes, and 15 times quicker (no compile).
    cost = jax.jit(fn).lower(*args).cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


@pytest.fixture(scope="module")
def xla_counts():
    """name -> (forward FLOPs, training-step FLOPs) as XLA counts them, compiled once for the module."""
    jax = pytest.importorskip("jax")
    counts = {}
    for name, (spec, B, T) in SHAPES.items():
        # Shapes are all a FLOP count needs: the weights are traced, never drawn.
        params = jax.eval_shape(lambda: _init(spec, jax.random.PRNGKey(0)))
        tokens = jax.ShapeDtypeStruct((B, T), jax.numpy.int32)
        forward = _xla_flops(lambda p, t: _forward(spec, p, t), params, tokens)
        step = _xla_flops(jax.value_and_grad(lambda p, t: _loss(spec, p, t)), params, tokens)
        counts[name] = (forward, step)
    return counts


@pytest.mark.parametrize("name", SHAPES)
def test_forward_flops_match_xla_cost_analysis(name, xla_counts):
    spec, B, T = SHAPES[name]
    predicted = sl.forward_flops(spec, seq_len=T, tokens=B * T)
    assert xla_counts[name][0] == pytest.approx(predicted, rel=0.03)
    assert xla_counts[name][0] >= predicted  # XLA only adds (softmax, norms, activations) to the matmuls


@pytest.mark.parametrize("name", SHAPES)
def test_training_step_flops_match_xla_cost_analysis(name, xla_counts):
    spec, B, T = SHAPES[name]
    predicted = sl.train_flops(spec, seq_len=T, tokens=B * T)
    assert xla_counts[name][1] == pytest.approx(predicted, rel=0.03)
    assert xla_counts[name][1] >= predicted


def test_the_moe_counts_only_the_experts_a_token_uses(xla_counts):
    spec, B, T = SHAPES["moe-shared-dense"]
    every_expert = spec.derive("every-expert", k=spec.E)
    assert xla_counts["moe-shared-dense"][0] < 0.8 * sl.forward_flops(every_expert, seq_len=T, tokens=B * T)


def test_xla_with_block_remat_recomputes_most_of_the_forward_pass():
    # jax.checkpoint on each layer: the backward pass recomputes the layer, except what no gradient needs
    # (the layer's own output: its last matmul, the MLP's down projection), so XLA lands just under remat="full".
    jax = pytest.importorskip("jax")
    spec, B, T = SHAPES["gqa-gated"]
    params = jax.eval_shape(lambda: _init(spec, jax.random.PRNGKey(0)))  # shapes only: nothing is drawn
    tokens = jax.ShapeDtypeStruct((B, T), jax.numpy.int32)

    def remat_loss(p, t):
        x = p["embed"][t]

        def layer(x, lp):
            x = x + _attention(spec, lp["attn"], _rms(x))
            return x + _mlp(spec, lp["ffn"]["dense"], _rms(x).reshape(B * T, -1)).reshape(x.shape)

        for lp in p["layers"]:
            x = jax.checkpoint(layer)(x, lp)
        logits = _rms(x) @ p["unembed"]
        return -jax.numpy.take_along_axis(jax.nn.log_softmax(logits), t[..., None], -1).mean()

    measured = _xla_flops(jax.value_and_grad(remat_loss), params, tokens)
    none, full = (sl.train_flops(spec, seq_len=T, tokens=B * T, remat=r) for r in ("none", "full"))
    assert none < measured < full * 1.02
    assert (measured - none) / (full - none) > 0.6
    down_projections = spec.L * 2 * B * T * spec.F * spec.D  # forward FLOPs of each layer's last matmul
    assert measured == pytest.approx(full - down_projections, rel=0.01)
    assert math.isfinite(measured)
