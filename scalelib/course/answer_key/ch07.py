"""Chapter 7 exercises: inference.

Every reference is computed by scalelib (its step times, memory limits and collective costs); the numbers
below are only what each question gives (a parameter count, a context, a slice, a batch). Facts and formulas
follow ch. 7 "All About Transformer Inference" of How to Scale Your Model (Austin et al., 2025); ``book=``
names the book's question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

from dataclasses import replace

from ..check import Exercise, register
from ._tools import define, slip
from .ch04 import _letters
from ..._collectives import allgather_time_s
from ..._derivation import Derivation, explain, q
from ..._inference import (
    generate_step_time_s,
    max_batch_size,
    speculative_time_per_token_s,
    weight_load_time_s,
    weight_stationary_crossover_chips,
)
from ..._models import ModelSpec, model
from ..._roofline import critical_batch_size
from ..._sharding import latency_bound_bytes
from ..._topology import tpu_pod, tpu_slice
from ..._transformer import kv_cache_bytes, moe_critical_batch_size, params

#: The book's invented model of its worked problems: LLaMA 2-13B reshaped, input and output tables shared.
BOOK_MODEL = ModelSpec(name="book-ch7", source="How to Scale Your Model, ch. 7, worked problems",
                       L=64, D=4096, F=16384, N=32, K=8, H=256, V=32128, tied_embeddings=True)
#: The same model as a mixture of experts (the book's Q5): E = 16 experts per layer, k = 2 per token.
BOOK_MOE = BOOK_MODEL.derive("book-ch7-moe", E=16, k=2)


def _v5e(shape=(4, 4)):
    return tpu_slice(shape, "tpu-v5e")


# 7.1, 7.2 ---------------------------------------------------------------------

def _pop_quiz(batch: int, **changes) -> Derivation:
    """Reference for 7.1 and 7.2: the general step time of a 30B int8 model with 100 kB of KV per token."""
    kw = dict(batch=batch, context=8192, weight_dtype="int8", kv_bytes_per_token=100e3, check_memory=False)
    return explain(generate_step_time_s, 30e9, _v5e(), **{**kw, **changes})


def _memory_only(batch: int) -> float:
    """What the small-batch bound gives: every byte read once, the FLOPs left out."""
    return (batch * 8192 * 100e3 + 30e9) / (16 * _v5e().spec.hbm_bytes_per_s)


register(Exercise(
    id="7.1",
    title="The floor of a generate step at batch 4",
    reference=lambda: _pop_quiz(4),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(weight_load_time_s(30e9, _v5e(), weight_dtype="int8"), _pop_quiz(4)):
            "that is the weights alone; each of the 4 sequences also reads its own 8192-token KV cache every step",
        slip(_pop_quiz(4, weight_dtype="bf16", kv_dtype="int8"), _pop_quiz(4)):
            "the weights are int8: 1 byte per parameter, not 2",
        slip(16 * _pop_quiz(4).value, _pop_quiz(4)):
            "that is one chip's time for everything; the weights and caches are spread over all 16 chips, "
            "each reading its share at its own bandwidth",
    },
    book=("Pop quiz",),
))

register(Exercise(
    id="7.2",
    title="The same step at batch 256",
    reference=lambda: _pop_quiz(256),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_memory_only(256), _pop_quiz(256)):
            "at this batch the matmuls are no longer bound by reading the weights: compare 2·B·P / C with "
            "P_bytes / W, and take the larger",
        slip(_pop_quiz(256, kv_bytes_per_token=0.0), _pop_quiz(256)):
            "the KV caches are still read every step, whatever the matmuls do: 256 sequences of 8192 tokens",
    },
    book=("Pop quiz",),
))


# 7.3 ---------------------------------------------------------------------------

def _llama2_batch() -> Derivation:
    return _letters(explain(max_batch_size, "llama-2-13b", _v5e((4, 2)), context=8192))


register(Exercise(
    id="7.3",
    title="LLaMA 2-13B's largest batch on eight v5e chips",
    reference=_llama2_batch,
    unit="sequences",
    integer=True,
    mistakes={
        slip(8 * 16e9 // kv_cache_bytes("llama-2-13b", tokens=8192), _llama2_batch()):
            "the weights take HBM too: only what they leave is free for KV caches",
    },
    book=("Ex1",),
))


# 7.4, 7.5 ------------------------------------------------------------------------

def _book_params(**changes) -> Derivation:
    spec = BOOK_MODEL if not changes else replace(BOOK_MODEL, name="book-ch7-variant", **changes)
    return _letters(explain(params, spec))


register(Exercise(
    id="7.4",
    title="Parameters of the book's worked-problem model",
    reference=_book_params,
    unit="params",
    mistakes={
        slip(_book_params(K=32), _book_params()):
            "the K and V projections have only K = 8 heads; only Q and O have all N = 32",
    },
    book=("Q1",),
))


def _book_kv(**changes) -> Derivation:
    kw = {"dtype": "int8", **changes}
    return _letters(explain(kv_cache_bytes, BOOK_MODEL, **kw))


register(Exercise(
    id="7.5",
    title="KV bytes per token of the book's model, in int8",
    reference=_book_kv,
    unit="B",
    mistakes={
        slip(_book_kv(dtype="bf16"), _book_kv()):
            "the cache is int8: 1 byte per value",
        slip(kv_cache_bytes(replace(BOOK_MODEL, name="book-ch7-mha", K=32), dtype="int8"), _book_kv()):
            "only the K = 8 key/value heads are cached, not all N = 32 query heads",
        slip(kv_cache_bytes(BOOK_MODEL, dtype="int8") / 2, _book_kv()):
            "each layer caches a key and a value for every key/value head: 2 vectors, not 1",
    },
    book=("Q1",),
))


# 7.6, 7.7 ------------------------------------------------------------------------

def _q2(spec: ModelSpec = BOOK_MODEL, kv_dtype: str = "int8") -> Derivation:
    d = explain(max_batch_size, spec, _v5e(), context=128_000, weight_dtype="int8", kv_dtype=kv_dtype)
    return _letters(d)


def _q2_no_weights(spec: ModelSpec) -> float:
    return 16 * 16e9 // kv_cache_bytes(spec, tokens=128_000, dtype="int8")


ONE_HEAD = BOOK_MODEL.derive("book-ch7-one-kv-head", K=1)

register(Exercise(
    id="7.6",
    title="The largest batch at a 128k context",
    reference=_q2,
    unit="sequences",
    integer=True,
    mistakes={
        slip(_q2(kv_dtype="bf16"), _q2()):
            "everything is int8 here, the KV cache too: 1 byte per value",
    },
    book=("Q2",),
))

register(Exercise(
    id="7.7",
    title="The same with one key/value head",
    reference=lambda: _q2(ONE_HEAD),
    unit="sequences",
    integer=True,
    mistakes={
        slip(_q2_no_weights(ONE_HEAD), _q2(ONE_HEAD)):
            "the weights still take their share of the HBM: only what they leave holds caches",
        slip(_q2(), _q2(ONE_HEAD)):
            "that is the batch with 8 key/value heads; with one the cache per token is 8 times smaller",
    },
    book=("Q2",),
))


# 7.8 -----------------------------------------------------------------------------

def _q3(**changes) -> Derivation:
    kw = {"weight_dtype": "int8", **changes}
    return _letters(explain(weight_load_time_s, BOOK_MODEL, _v5e(), **kw))


register(Exercise(
    id="7.8",
    title="The weight-loading floor of a decode step",
    reference=_q3,
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_q3(weight_dtype="bf16"), _q3()):
            "the parameters are int8: 1 byte each",
        slip(explain(weight_load_time_s, BOOK_MODEL, "tpu-v5e", weight_dtype="int8", num_chips=1), _q3()):
            "the weights are sharded over all 16 chips, and each reads only its share",
    },
    book=("Q3",),
))


# 7.9, 7.10 -----------------------------------------------------------------------

def _moe_active() -> Derivation:
    return _letters(explain(params, BOOK_MOE, active=True))


register(Exercise(
    id="7.9",
    title="Parameters a token of the MoE version uses",
    reference=_moe_active,
    unit="params",
    mistakes={
        slip(params(BOOK_MOE), _moe_active()):
            "that counts all 16 experts; a token goes through only k = 2 of them (the rest of the model is shared)",
        slip(params(BOOK_MODEL), _moe_active()):
            "that is the dense model: each token now uses two experts, each as large as the dense MLP",
    },
    book=("Q5",),
))


def _moe_batch(**kw) -> Derivation:
    d = explain(moe_critical_batch_size, BOOK_MOE, "tpu-v5e", **kw)
    return define(d, {"C": "a TPU v5e's peak rate (bf16)", "W": "its HBM bandwidth"})


register(Exercise(
    id="7.10",
    title="The batch the MoE version needs to be compute-bound",
    reference=_moe_batch,
    unit="tokens",
    mistakes={
        slip(critical_batch_size("tpu-v5e"), _moe_batch()):
            "that is a dense layer's threshold; each expert sees only k/E of the batch",
        slip(_moe_batch(weight_dtype="int8"), _moe_batch()):
            "the question keeps weights and arithmetic in bf16: 2 bytes per weight",
    },
    book=("Q5",),
))


# 7.11 ----------------------------------------------------------------------------

def _crossover(axes: int = 3) -> Derivation:
    m = model("llama-3-70b")
    d = explain(weight_stationary_crossover_chips, m.D, m.F, axes=axes)
    return define(d, {"F": "LLaMA-3-70B's MLP width", "D": "its model width",
                      "axes": "the mesh axes 1D sharding's collectives run over"})


register(Exercise(
    id="7.11",
    title="Where 2D weight-stationary sharding starts to win for LLaMA-3-70B",
    reference=_crossover,
    unit="chips",
    mistakes={
        slip(_crossover(axes=1), _crossover()):
            "1D sharding's gather and scatter run over all three axes of the torus at once, which divides "
            "their time by 3",
        slip(72.0, _crossover()):
            "72 chips is the answer for F = 4D; this model's F is 3.5 D",
    },
    book=("Q7",),
))


# 7.12 ----------------------------------------------------------------------------

def _latency_batch(bytes_per_value: float = 1.0, per: str = "array") -> Derivation:
    ring = tpu_pod("tpu-v5e")
    V = explain(latency_bound_bytes, ring, axes="X", per=per)
    D = 8192
    V = define(V, {"T": "a time (T per byte: the collective's time per byte moved)"})
    return Derivation("B*", "V* / (D·x)", f"{q(V.value, 'B')} / ({D}·{q(bytes_per_value)})",
                      V.value / (D * bytes_per_value), "tokens", (V,),
                      where=("D: the model width; x: bytes per activation (int8)",))


register(Exercise(
    id="7.12",
    title="The batch below which model-parallel gathers are latency-bound",
    reference=_latency_batch,
    unit="tokens",
    involves={"bandwidth", "dtype"},
    mistakes={
        slip(_latency_batch(2.0), _latency_batch()):
            "the activations are int8 here: 1 byte per value",
        slip(_latency_batch(per="shard"), _latency_batch()):
            "45 kB is what each chip's shard may hold; the gathered array is 16 shards",
    },
))


# 7.13 ----------------------------------------------------------------------------

def _speculative(k: int = 4) -> Derivation:
    return _letters(explain(speculative_time_per_token_s, "llama-3-70b", _v5e(), draft="llama-3-8b", k=k,
                            acceptance=0.75, batch=1, context=4096, weight_dtype="int8"))


register(Exercise(
    id="7.13",
    title="Time per token with a drafter",
    reference=_speculative,
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_speculative(0), _speculative()):
            "that is plain decoding; with a drafter each checking step yields (1 − a^(k+1)) / (1 − a) tokens",
    },
))
