"""Chapter 4 exercises: Transformer math.

Every reference is computed by scalelib from its model registry (``models.toml``) and chip registry;
the numbers below are only what each question gives (a model's shape, a batch, a mesh, a published
figure). Facts and formulas follow ch. 4 "All the Transformer Math You Need to Know" of How to Scale
Your Model (Austin et al., 2025); ``book=`` names the book's question an exercise answers (its list:
scalelib/course/book_items.py).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import _uses, define, rename, slip, weights_only
from ..._derivation import Derivation, explain, q
from ..._einsum import einsum_flops
from ..._models import ModelSpec, model
from ..._specs import chip
from ..._topology import tpu_slice
from ..._training import ParallelPlan, training_memory_bytes
from ..._roofline import critical_intensity, matmul_flops
from ..._transformer import (
    param_bytes,
    attention_crossover_seq_len,
    attention_intensity,
    forward_flops,
    kv_cache_bytes,
    moe_critical_batch_size,
    params,
    train_flops,
    training_state_bytes,
)

#: The book's Q1 model: D = 4096, F = 4D, V = 32,000, L = 64, N·H = D with multi-head attention.
Q1_MODEL = ModelSpec(name="the 64-layer model", source="How to Scale Your Model, ch. 4, Q1",
                     L=64, D=4096, F=4 * 4096, N=32, K=32, H=128, V=32000)

#: The book's letters, each defined under the first formula of a derivation that uses it.
LETTERS = {"L": "layers", "D": "the model width", "F": "the MLP width (each expert's, in an MoE)",
           "N": "query heads", "K": "key/value heads", "H": "the head size", "V": "the vocabulary"}


def _letters(derivation: Derivation) -> Derivation:
    """`derivation` with each of the book's letters it uses defined; the FLOP counts of its parts named
    FLOPs_... (the library's F_mlp, ...), since F is the MLP width in this chapter."""
    derivation = rename(derivation, {f"F_{part}": f"FLOPs_{part}"
                                     for part in ("mlp", "attention", "dot_product", "embeddings")})
    return define(derivation, {s: meaning for s, meaning in LETTERS.items() if _used(derivation, s)})


def _used(derivation: Derivation, symbol: str) -> bool:
    return _uses(derivation.formula, symbol) or any(_used(step, symbol) for step in derivation.steps)


# 4.1 -------------------------------------------------------------------------

register(Exercise(
    id="4.1",
    title="Parameters of the book's 64-layer model",
    reference=lambda: _letters(explain(params, Q1_MODEL)),
    unit="params",
    integer=True,  # a count is exact: one shared embedding table (0.75% fewer) is refused, not credited
    mistakes={
        slip(params(replace(Q1_MODEL, tied_embeddings=True)), params(Q1_MODEL)):
            "the question says the input embedding and the output layer are separate tables: count both",
        slip(params(replace(Q1_MODEL, gated=False)), params(Q1_MODEL)):
            "you counted two MLP matrices per layer; a gated MLP has three (two going in, one going out)",
    },
    book=("Q1",),
))


# 4.2 -------------------------------------------------------------------------

def _attention_share() -> Derivation:
    """Reference for 4.2: attention's parameters over all of them."""
    attention = replace(explain(params, Q1_MODEL, component="attention"), symbol="P_attention")
    total = Derivation("P", "every parameter, as counted in exercise 4.1", "", params(Q1_MODEL), "params")
    share = Derivation("attention share", "P_attention / P", f"{q(attention.value)} / {q(total.value)}",
                       attention.value / total.value, "", (attention, total))
    return _letters(share)


def _layer_share() -> float:
    """The share within the layers' weight matrices only (the book's 1/4)."""
    attention = params(Q1_MODEL, component="attention")
    return attention / (attention + params(Q1_MODEL, component="mlp"))


register(Exercise(
    id="4.2",
    title="Attention's share of the parameters",
    reference=_attention_share,
    unit="",
    rtol=0.005,
    mistakes={
        slip(_layer_share(), _attention_share()):
            "that is attention's share of the layers' weight matrices (the book's answer); the question counts "
            "every parameter in the total, the embeddings and norms as well",
        slip(params(Q1_MODEL, component="attention") / params(replace(Q1_MODEL, gated=False)), _attention_share()):
            "the total is too small by one MLP matrix per layer: a gated MLP has three",
    },
    book=("Q1",),
))


# 4.3 -------------------------------------------------------------------------

def _cache_tokens(weight_dtype="bf16", kv_dtype="int8", spec=Q1_MODEL) -> float:
    """Tokens whose KV cache takes as many bytes as the weights."""
    return param_bytes(spec, dtype=weight_dtype) / kv_cache_bytes(spec, dtype=kv_dtype)


def _cache_tokens_reference() -> Derivation:
    """Reference for 4.3: the bf16 weights over one token's int8 KV cache."""
    per_token = explain(kv_cache_bytes, Q1_MODEL, dtype="int8")
    n = params(Q1_MODEL)
    weights = Derivation("weights", "P · bytes per bf16 value", f"{q(n, 'params')} · 2", param_bytes(Q1_MODEL), "B",
                         where=("P: the model's parameters (exercise 4.1)",))
    d = Derivation("cache length", "weights / KV cache per token", f"{q(weights.value, 'B')} / {q(per_token.value, 'B')}",
                   _cache_tokens(), "tokens", (weights, per_token))
    return _letters(d)


register(Exercise(
    id="4.3",
    title="How many tokens of int8 KV cache weigh as much as the book's model",
    reference=_cache_tokens_reference,
    unit="tokens",
    mistakes={
        slip(_cache_tokens(kv_dtype="bf16"), _cache_tokens()):
            "either the cache's bytes per value are off (it is int8) or the weights' are (they are bf16)",
        slip(_cache_tokens() * 2, _cache_tokens()):
            "either you cached one vector per head and layer (each key/value head caches a key and a value) or "
            "the weights' bytes per value are off (they are bf16)",
        slip(param_bytes(Q1_MODEL) / kv_cache_bytes(replace(Q1_MODEL, L=1), dtype="int8"), _cache_tokens()):
            "you divided by one layer's share of a token's cache; every layer caches its own keys and values",
    },
    book=("Q1",),
))


# 4.4 -------------------------------------------------------------------------

_4_4 = dict(model="llama-3.1-405b", T=16384, dtype="int8", chip="tpu-v5p", chips=16)


def _fitting_sequences(weight_dtype=_4_4["dtype"], kv_dtype=_4_4["dtype"], weights=True, **changes) -> int:
    """Whole sequences of T tokens whose KV cache fits in the slice's HBM beside the weights."""
    spec = model(_4_4["model"]) if not changes else model(_4_4["model"]).derive("variant", **changes)
    free = _4_4["chips"] * chip(_4_4["chip"]).hbm_bytes - (param_bytes(_4_4["model"], dtype=weight_dtype) if weights else 0)
    return int(free // kv_cache_bytes(spec, tokens=_4_4["T"], dtype=kv_dtype))


def _fitting_sequences_reference() -> Derivation:
    """Reference for 4.4: the HBM left after the int8 weights, over one sequence's int8 cache, rounded down."""
    hbm = _4_4["chips"] * chip(_4_4["chip"]).hbm_bytes
    n = params(_4_4["model"])
    weights = Derivation("weights", "P · bytes per int8 value", f"{q(n, 'params')} · 1", param_bytes(
        _4_4["model"], dtype=_4_4["dtype"]), "B", where=("P: LLaMA-3.1-405B's parameters, counted as in chapter 4",))
    cache = explain(kv_cache_bytes, _4_4["model"], tokens=_4_4["T"], dtype=_4_4["dtype"])
    value = _fitting_sequences()
    d = Derivation("sequences", "⌊(HBM − weights) / KV cache⌋",
                   f"⌊({q(hbm, 'B')} − {q(weights.value, 'B')}) / {q(cache.value, 'B')}⌋", value, "sequences",
                   (weights, cache), where=(f"HBM: the {_4_4['chips']} chips' memory together",))
    return _letters(d)


register(Exercise(
    id="4.4",
    title="How many long LLaMA-3.1-405B sequences a TPU v5p slice can cache",
    reference=_fitting_sequences_reference,
    unit="sequences",
    integer=True,
    mistakes={
        slip(_fitting_sequences(K=model(_4_4["model"]).N), _fitting_sequences()):
            "you cached every query head; grouped-query attention caches only the key/value heads",
        slip(_fitting_sequences(kv_dtype="bf16"), _fitting_sequences()):
            "the cache is int8: check its bytes per value",
        slip(_fitting_sequences(weight_dtype="bf16"), _fitting_sequences()):
            "the weights are int8: check their bytes per value",
        slip(_fitting_sequences(weights=False), _fitting_sequences()):
            "the weights take their share of the HBM first; only what is left holds the caches",
    },
))


# 4.5 -------------------------------------------------------------------------

_4_5 = dict(B=24576, D=8192, F=32768)
_4_5_MESH = {"X": 4, "Y": 8, "Z": 4}


def _sharded_matmul_flops(duplicated: bool = True, per_chip_over: tuple[str, ...] = ("X", "Y")) -> Derivation:
    """[FLOPs the chips execute in all, FLOPs per chip] of A[B_X, D_Y] · W[D_Y, F] on the mesh."""
    flops = explain(matmul_flops, *_4_5.values())
    copies = _4_5_MESH["Z"] if duplicated else 1
    split = int(np.prod([_4_5_MESH[a] for a in per_chip_over]))
    value = np.array([flops.value * copies, flops.value / split])
    d = Derivation("[FLOPs executed, FLOPs per chip]", "[2·B·D·F·Z, 2·B·D·F / (X·Y)]",
                   f"[{q(flops.value, 'FLOP')}·{_4_5_MESH['Z']}, {q(flops.value, 'FLOP')} / "
                   f"({_4_5_MESH['X']}·{_4_5_MESH['Y']})]", value, "FLOP", (flops,))
    return define(d, {"X, Y, Z": "the mesh's axes (4, 8 and 4 chips); nothing is sharded over Z, so each of its "
                                 "4 rows of chips computes the whole product"})


register(Exercise(
    id="4.5",
    title="FLOPs of a matmul sharded over two of three mesh axes",
    reference=_sharded_matmul_flops,
    unit="FLOP",
    mistakes={
        slip(_sharded_matmul_flops(duplicated=False), _sharded_matmul_flops()):
            "that total is the product's nominal FLOPs; but nothing is sharded over Z, so each group of chips "
            "along it computes the whole product again",
        slip(_sharded_matmul_flops(per_chip_over=("X", "Y", "Z")), _sharded_matmul_flops()):
            "you shared the work among all the chips; only X and Y split it, and the chips along Z repeat it",
    },
    book=("Q2",),
))


# 4.6 -------------------------------------------------------------------------

def _contraction_flops(subscripts, sizes):
    """Reference for 4.6: scalelib's einsum count."""
    return einsum_flops(subscripts, sizes)


register(Exercise(
    id="4.6",
    title="FLOPs of any two-operand einsum, as a function",
    reference=lambda: _contraction_flops,
    unit="FLOP",
    kind="function",
    cases=(
        dict(subscripts="ijkl,ijmno->klmno", sizes=dict(i=8, j=16, k=4, l=32, m=8, n=2, o=64)),
        dict(subscripts="bd,df->bf", sizes=dict(b=4096, d=8192, f=28672)),
        dict(subscripts="btd,dnh->btnh", sizes=dict(b=8, t=2048, d=4096, n=32, h=128)),
        dict(subscripts="btnh,bsnh->bnts", sizes=dict(b=4, t=1024, s=1024, n=16, h=64)),
        dict(subscripts="bd,bdf->bf", sizes=dict(b=1024, d=4096, f=4096)),
        dict(subscripts="btkgh,bskh->bkgts", sizes=dict(b=2, t=512, s=512, k=8, g=4, h=128)),
        dict(subscripts="i,j->ij", sizes=dict(i=1000, j=3000)),
    ),
    formula="FLOPs = 2 × the product of the sizes of every distinct letter (a batch or contracted letter counted "
            "once); without a summed letter (an outer or elementwise product) there are no adds, so no factor 2",
    book=("Q3",),
))


# 4.7 -------------------------------------------------------------------------

_4_7 = dict(model="llama-3-8b", chip="h100")


def _4_7_G() -> int:
    spec = model(_4_7["model"])
    return spec.N // spec.K


def _prefill_threshold(G: int | None = None) -> Derivation:
    """Reference for 4.7: T·G/(G + 1) = C/W, solved for T (bf16, S = T)."""
    G = _4_7_G() if G is None else G
    ridge = explain(critical_intensity, _4_7["chip"], dtype="bf16")
    value = ridge.value * (G + 1) / G
    assert abs(attention_intensity(value, value, G=G) / ridge.value - 1) < 1e-9
    d = Derivation("T_min", "I_crit · (G + 1) / G", f"{q(ridge.value)} · ({G} + 1) / {G}", value, "tokens", (ridge,))
    return define(d, {"C": "an H100's peak bf16 rate", "W": "its HBM bandwidth",
                      "G": "query heads per key/value head, N / K; prefill's attention intensity is T·G / (G + 1) "
                           "in bf16"})


register(Exercise(
    id="4.7",
    title="When LLaMA-3-8B's prefill attention becomes compute-bound on an H100",
    reference=_prefill_threshold,
    unit="tokens",
    mistakes={
        slip(_prefill_threshold(G=1), _prefill_threshold()):
            "that is multi-head attention's threshold; LLaMA-3-8B's key/value heads each serve several query "
            "heads, so each K and V byte read does more work",
        slip(critical_intensity(_4_7["chip"]), _prefill_threshold()):
            "you took attention's intensity to be T, like a matmul's B; it also reads Q and writes the output, "
            "which count against it",
        slip(_prefill_threshold(G=model(_4_7["model"]).N), _prefill_threshold()):
            "G is the number of query heads per key/value head, not the number of query heads",
    },
    book=("Q4",),
))


# 4.8 -------------------------------------------------------------------------

_4_8 = dict(model="llama-3.1-405b", T=4, S=16384)


def _decode_intensity(G: float | None = None, T: int | None = None) -> Derivation:
    spec = model(_4_8["model"])
    return explain(attention_intensity, _4_8["T"] if T is None else T, _4_8["S"],
                   G=spec.N // spec.K if G is None else G)


register(Exercise(
    id="4.8",
    title="Attention's intensity while LLaMA-3.1-405B verifies drafted tokens (warm-up)",
    reference=_decode_intensity,
    unit="FLOP/B",
    involves={"dtype"},
    mistakes={
        slip(_decode_intensity(G=1), _decode_intensity()):
            "that is multi-head attention's; LLaMA-3.1-405B shares each key/value head among several query "
            "heads, and each K and V value it reads serves all of them",
        slip(_decode_intensity(G=model(_4_8["model"]).N), _decode_intensity()):
            "G is the number of query heads per key/value head, N / K, not N",
        slip(_decode_intensity(T=1), _decode_intensity()):
            "that is the intensity for one new token; here several drafted tokens per sequence are checked in "
            "the same pass, and each K and V value read serves all of them",
        slip(_decode_intensity().value / 2, _decode_intensity()):
            "a factor of 2: either the FLOPs were halved for a causal mask (the question counts every drafted "
            "query against every cached key), or the bytes were counted as f32 values (bf16 takes half as many)",
    },
    book=("Q4",),
))


# 4.9 -------------------------------------------------------------------------

#: the book's Q5 shape (multi-head attention, N·H = D, F = 4D), with D = 6144 in place of the book's 4096
Q5_MODEL = ModelSpec(name="the question's model", source="How to Scale Your Model, ch. 4, Q5 (D changed)",
                     L=1, D=6144, F=4 * 6144, N=48, K=48, H=128, V=32000)


def _projection_match(causal: bool = False, against=("attention",)) -> Derivation:
    """Reference for 4.9: the T at which dot-product attention's FLOPs equal the projections' (both per token)."""
    projections = [explain(train_flops, Q5_MODEL, seq_len=1, component=c) for c in against]
    per_position = explain(train_flops, Q5_MODEL, seq_len=1, component="dot_product", causal=causal)
    total = sum(p.value for p in projections)
    d = Derivation("T_match", "FLOPs_train(projections) / FLOPs_train(dot_product, T = 1)",
                   f"{q(total, 'FLOP')} / {q(per_position.value, 'FLOP')}", total / per_position.value, "tokens",
                   (*projections, per_position),
                   where=("both per token; attention's FLOPs per token grow in proportion to T",))
    return _letters(d)


register(Exercise(
    id="4.9",
    title="Where attention costs as much as the Q, K, V, O projections",
    reference=_projection_match,
    unit="tokens",
    mistakes={
        slip(_projection_match(against=("attention", "mlp")), _projection_match()):
            "that is where attention catches up with all of the layer's matmuls, the MLP's included; the "
            "question compares it with the four projections alone",
        slip(_projection_match(causal=True), _projection_match()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
    },
    book=("Q5",),
))


# 4.10 ------------------------------------------------------------------------

#: Qwen2.5-7B, from its published configuration (Qwen/Qwen2.5-7B, config.json on Hugging Face): a model
#: the chapter's crossover table does not list.
QWEN_7B = ModelSpec(name="qwen2.5-7b", source="Qwen/Qwen2.5-7B config.json (Hugging Face)",
                    L=28, D=3584, F=18944, N=28, K=4, H=128, V=152064)


def _crossover_with(spec: ModelSpec = QWEN_7B, matmuls=("mlp", "attention", "embeddings"), causal=False) -> float:
    """T at which dot-product attention's training FLOPs equal those of `matmuls` (all per token)."""
    per_position = train_flops(spec, seq_len=1, component="dot_product", causal=causal)
    return sum(train_flops(spec, seq_len=1, component=c) for c in matmuls) / per_position


def _crossover() -> Derivation:
    """Reference for 4.10: the crossover with every matmul, the unembedding included."""
    parts = [explain(train_flops, QWEN_7B, seq_len=1, component=c) for c in ("mlp", "attention", "embeddings")]
    per_position = explain(train_flops, QWEN_7B, seq_len=1, component="dot_product")
    total = sum(p.value for p in parts)
    value = _crossover_with()
    assert abs(total / per_position.value / value - 1) < 1e-12
    d = Derivation("T*", "FLOPs_train(matmuls, unembedding included) / FLOPs_train(dot_product, T = 1)",
                   f"{q(total, 'FLOP')} / {q(per_position.value, 'FLOP')}", value, "tokens", (*parts, per_position),
                   where=("both per token; attention's FLOPs per token grow in proportion to T",))
    return _letters(d)


register(Exercise(
    id="4.10",
    title="Where Qwen2.5-7B's attention overtakes all its matmuls, the unembedding included",
    reference=_crossover,
    unit="tokens",
    mistakes={
        slip(_crossover_with(matmuls=("mlp", "attention")), _crossover_with()):
            "that leaves out the unembedding, the one matmul outside the layers; the question counts it",
        slip(8 * QWEN_7B.D, _crossover_with()):
            "that is the book's rule of thumb, which assumes F = 4D, N·H = D and K = N and no unembedding; work "
            "from this model's own widths and head counts",
        slip(_crossover_with(causal=True), _crossover_with()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
        slip(_crossover_with(replace(QWEN_7B, K=QWEN_7B.N)), _crossover_with()):
            "you gave the keys and values as many heads as the queries; this model's K and V projections have "
            "only its key/value heads",
        slip(_crossover_with(replace(QWEN_7B, gated=False)), _crossover_with()):
            "a gated MLP has three matrices per layer, not two",
    },
))


# 4.11 ------------------------------------------------------------------------

_4_11 = dict(model="llama-3.1-405b", sequences=512, T=4096)


def _recomputed(name: str = _4_11["model"], **changes) -> Derivation:
    """Reference for 4.11: the forward pass of dot-product attention, done once more in the backward pass."""
    spec = model(name) if not changes else model(name).derive("variant", **changes)
    tokens = _4_11["sequences"] * _4_11["T"]
    again = explain(forward_flops, spec, seq_len=_4_11["T"], tokens=tokens, component="dot_product")
    extra = train_flops(spec, seq_len=_4_11["T"], tokens=tokens, remat="dot_product") - train_flops(
        spec, seq_len=_4_11["T"], tokens=tokens)
    assert abs(extra / again.value - 1) < 1e-9
    return _letters(replace(again, symbol="extra FLOPs"))


register(Exercise(
    id="4.11",
    title="What saving only the big matmuls' outputs costs",
    reference=_recomputed,
    unit="FLOP",
    mistakes={
        slip(train_flops(_4_11["model"], seq_len=_4_11["T"], tokens=_4_11["sequences"] * _4_11["T"],
                         component="dot_product"), _recomputed()):
            "that is attention's whole training cost; the backward pass needs only its two forward products "
            "again (QKᵀ and the product with V), not its own gradient products, which it does anyway",
        slip(_recomputed(N=model(_4_11["model"]).K), _recomputed()):
            "you used the key/value heads; attention's products run over every query head",
        slip(_recomputed(L=1), _recomputed()):
            "that is one layer's; every layer recomputes its own attention",
        slip(_recomputed().value / 2, _recomputed()):
            "a factor of 2: either the causal mask was taken to halve the products (the book counts the full "
            "T×T scores: the matmuls run over every entry, masked or not), or a multiply-add was counted as 1 FLOP",
    },
    book=("Q6",),
))


# 4.12 ------------------------------------------------------------------------

_4_12 = dict(seq_len=8192, tokens=15e12, chip="tpu-v5p", chips=4096, mfu=0.45)


def _training_time_s(flops: float | None = None, mfu: float = _4_12["mfu"]) -> float:
    flops = train_flops("llama-3-8b", seq_len=_4_12["seq_len"], tokens=_4_12["tokens"]) if flops is None else flops
    return flops / (_4_12["chips"] * chip(_4_12["chip"]).bf16_flops_per_s * mfu)


def _training_time() -> Derivation:
    """Reference for 4.12: the training FLOPs, attention included, over the chips' useful rate."""
    flops = _letters(explain(train_flops, "llama-3-8b", seq_len=_4_12["seq_len"], tokens=_4_12["tokens"]))
    C = chip(_4_12["chip"]).bf16_flops_per_s
    d = Derivation("training time", "FLOPs_train / (chips · C · MFU)",
                   f"{q(flops.value, 'FLOP')} / ({_4_12['chips']} · {q(C, 'FLOP/s')} · {_4_12['mfu']})",
                   _training_time_s(), "s", (flops,),
                   where=("C: a TPU v5p's peak bf16 rate; MFU: the share of it the run achieves",))
    return d


register(Exercise(
    id="4.12",
    title="Training LLaMA-3-8B on 15T tokens, attention included: how long on 4096 TPU v5p",
    reference=_training_time,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_training_time_s(6 * params("llama-3-8b") * _4_12["tokens"]), _training_time_s()):
            "that is the parameters-times-tokens rule, which leaves out dot-product attention: at this sequence "
            "length it adds a sizeable share",
        slip(_training_time_s(forward_flops("llama-3-8b", seq_len=_4_12["seq_len"], tokens=_4_12["tokens"])),
             _training_time_s()):
            "that is about a forward pass alone; training adds the backward pass, which costs more than the "
            "forward pass",
        slip(_training_time_s(train_flops("llama-3-8b", seq_len=_4_12["seq_len"], tokens=_4_12["tokens"],
                                          causal=True)), _training_time_s()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
        slip(_training_time_s(mfu=1.0), _training_time_s()):
            "that is at the chips' peak; the run achieves only part of it",
    },
))


# 4.13 ------------------------------------------------------------------------

#: Mixtral 8x22B, from its published configuration (mistralai/Mixtral-8x22B-v0.1, config.json on Hugging
#: Face); Mistral quotes 141B parameters, 39B active. The chapter works Mixtral 8x7B.
MIXTRAL_8X22B = ModelSpec(name="mixtral-8x22b", source="mistralai/Mixtral-8x22B-v0.1 config.json (Hugging Face)",
                          L=56, D=6144, F=16384, N=48, K=8, H=128, V=32768, E=8, k=2,
                          published_params=141e9, published_active_params=39e9)


def _mixtral_counts(**changes) -> np.ndarray:
    spec = replace(MIXTRAL_8X22B, **changes)
    used = params(spec, active=True)
    return np.array([used, params(spec) - used], dtype=float)


def _mixtral_active() -> Derivation:
    """Reference for 4.13: the parameters a token uses, and those it leaves unused (each counted exactly)."""
    used = replace(explain(params, MIXTRAL_8X22B, active=True), symbol="P_used")
    total = replace(explain(params, MIXTRAL_8X22B), symbol="P")
    both = Derivation("answer", "[P_used, P − P_used]", f"[{q(used.value)}, {q(total.value)} − {q(used.value)}]",
                      np.array([used.value, total.value - used.value]), "params", (used, total),
                      where=(f"a token uses P_used / P = {used.value / total.value:.1%} of the parameters",))
    return _letters(both)


_4_13_ROUTERS = MIXTRAL_8X22B.L * MIXTRAL_8X22B.D * MIXTRAL_8X22B.E  # a D x E router per layer
_4_13_NORMS = (2 * MIXTRAL_8X22B.L + 1) * MIXTRAL_8X22B.D            # two norms per layer and the final one

register(Exercise(
    id="4.13",
    title="The parameters of Mixtral 8x22B a token uses, and those it leaves unused",
    reference=_mixtral_active,
    unit="params",
    integer=True,  # counted exactly, so the router and the norms (0.01% of the counts) show
    mistakes={
        slip([MIXTRAL_8X22B.k / MIXTRAL_8X22B.E * _mixtral_counts().sum(),
              (1 - MIXTRAL_8X22B.k / MIXTRAL_8X22B.E) * _mixtral_counts().sum()], _mixtral_counts()):
            "that is the share of the experts a token uses, applied to every parameter; attention, the router, "
            "the norms and the embeddings serve every token",
        slip(_mixtral_counts(gated=False), _mixtral_counts()):
            "each expert is a gated MLP of three matrices, not two",
        slip(_mixtral_counts() - [_4_13_ROUTERS, 0], _mixtral_counts()):
            "the router is a matrix too, of D x E in every layer, and every token goes through it",
        slip(_mixtral_counts() - [_4_13_NORMS, 0], _mixtral_counts()):
            "the norms hold parameters too: D values each, two per layer and a final one",
    },
))


# 4.14 ------------------------------------------------------------------------

_4_14 = dict(gpu_hours=2.79e6, tokens=14.8e12, sparse_fp8_flops_per_s=3.026e15)


def _utilisation(per_param_token: int = 6, sparse: bool = False, active: bool = True) -> Derivation:
    """Reference for 4.14 (the book's Q7): the FLOPs the run needed over what the GPUs could do in that time."""
    spec = model("deepseek-v3")
    P = spec.published_active_params if active else spec.published_params
    C = _4_14["sparse_fp8_flops_per_s"] / (1 if sparse else 2)
    needed = per_param_token * P * _4_14["tokens"]
    available = _4_14["gpu_hours"] * 3600 * C
    d = Derivation("utilisation", f"{per_param_token}·P·n / (h·3600·C)",
                   f"{per_param_token}·{q(P)}·{q(_4_14['tokens'])} / ({q(_4_14['gpu_hours'])}·3600·{q(C)})",
                   needed / available, "")
    return define(d, {"P": "the 37e9 parameters each token uses", "n": "the tokens trained on",
                      "h": "the H800-hours (3600 s each)", "C": "an H800's dense fp8 rate, half the data sheet's "
                                                                "figure with sparsity"})


register(Exercise(
    id="4.14",
    title="DeepSeek-V3's FLOPs utilisation",
    reference=_utilisation,
    unit="",
    mistakes={
        slip(_utilisation(sparse=True), _utilisation()):
            "you used the data sheet's figure, which assumes 2:4 structured sparsity; dense matmuls do not get it",
        slip(_utilisation(per_param_token=2), _utilisation()):
            "that counts the forward pass only; training adds the backward pass",
        slip(_utilisation(active=False), _utilisation()):
            "you used all the parameters; a token goes through only its experts, the activated parameters",
    },
    book=("Q7",),
))


# 4.15 ------------------------------------------------------------------------

_4_15 = dict(model="mixtral-8x7b", chip="tpu-v5p", weight_dtype="int8")


def _moe_batch(weight_dtype: str = _4_15["weight_dtype"], dense: bool = False, chip: str = _4_15["chip"]) -> Derivation:
    d = explain(moe_critical_batch_size, _4_15["model"], chip, weight_dtype=weight_dtype)
    if dense:
        return d.steps[0]
    return weights_only(define(d, {"C": "TPU v5p's peak bf16 rate (the arithmetic runs in bf16)", "W": "its HBM bandwidth"}))


register(Exercise(
    id="4.15",
    title="The batch Mixtral 8x7B's experts need to be compute-bound on TPU v5p (warm-up)",
    reference=_moe_batch,
    unit="tokens",
    mistakes={
        slip(_moe_batch(dense=True), _moe_batch()):
            "that is a dense matmul's critical batch; each expert sees only its share of the tokens, so the "
            "whole batch must be larger",
        slip(_moe_batch(weight_dtype="bf16"), _moe_batch()):
            "either the weights were counted as bf16 (they are int8: each byte loaded serves twice the FLOPs), "
            "or each expert was given 1/E of the tokens (each token goes to k experts: an expert sees k/E of them)",
        slip(_moe_batch(chip="tpu-v5e"), _moe_batch()):
            "the question is about a TPU v5p: use its peak FLOP/s and HBM bandwidth",
    },
    book=("Q8",),
))


# 4.16 ------------------------------------------------------------------------

_4_16 = dict(model="llama-3.1-405b", chip="tpu-v5p", grad_dtype="f32")


def _state_chips(**options) -> int:
    opts = {"grad_dtype": _4_16["grad_dtype"], **options}
    return int(np.ceil(training_state_bytes(_4_16["model"], **opts) / chip(_4_16["chip"]).hbm_bytes))


def _training_state_chips() -> Derivation:
    """Reference for 4.16: the training state, over one TPU v5p's HBM, rounded up."""
    n = params(_4_16["model"])
    count = Derivation("P", "the parameter count of chapter 4's table", "", n, "params",
                       where=("P: LLaMA-3.1-405B's parameters (sl.params shows each term)",))
    state = explain(training_state_bytes, _4_16["model"], grad_dtype=_4_16["grad_dtype"])
    state = replace(state, steps=(count,), formula=state.formula.replace("params", "P"),
                    substituted=state.numbers.replace(q(n), q(n, "params"), 1))
    hbm = chip(_4_16["chip"]).hbm_bytes
    chips = Derivation("chips", "⌈training state / HBM per chip⌉", f"⌈{q(state.value, 'B')} / {q(hbm, 'B')}⌉",
                       _state_chips(), "chips", (state,), where=("HBM per chip: the memory of one TPU v5p",))
    return chips


assert _state_chips(grad_dtype=None) == _state_chips(optimizer="momentum")

register(Exercise(
    id="4.16",
    title="The fewest TPU v5p chips that hold LLaMA-3.1-405B's training state",
    reference=_training_state_chips,
    unit="chips",
    integer=True,
    mistakes={
        slip(_state_chips(grad_dtype="bf16"), _state_chips()):
            "the gradients are kept in f32 here, not bf16",
        slip(_state_chips(grad_dtype=None), _state_chips()):
            "either you left out the gradients (they stay in memory until the optimizer has used them) or you "
            "kept one optimizer value per parameter (Adam keeps two, the first and second moments)",
    },
))


# 4.17 ------------------------------------------------------------------------

_4_17 = dict(model="llama-3-8b", tokens=2**21, T=8192)


def _kept_bytes(remat: str = "dot_product", spec: ModelSpec | None = None) -> float:
    """Activation bytes a step keeps under `remat`: training_memory_bytes on one chip, less the training state."""
    spec = model(_4_17["model"]) if spec is None else spec
    total = training_memory_bytes(spec, _4_17["tokens"], ParallelPlan(remat=remat), tpu_slice((1, 1, 1), "tpu-v5p"),
                                  seq_len=_4_17["T"])
    return total - training_state_bytes(spec)


def _kept() -> Derivation:
    """Reference for 4.17: the seven big matmuls' outputs, 2 bytes a value, for every token and layer."""
    m = model(_4_17["model"])
    by_hand = 2 * ((m.N + 2 * m.K) * m.H + 2 * m.D + 2 * m.F) * _4_17["tokens"] * m.L
    assert abs(by_hand / _kept_bytes() - 1) < 1e-9
    d = Derivation("activations", "2·((N + 2·K)·H + 2·D + 2·F)·tokens·L",
                   f"2·(({m.N} + 2·{m.K})·{m.H} + 2·{m.D} + 2·{m.F})·{_4_17['tokens']}·{m.L}", _kept_bytes(), "B",
                   where=("(N + 2·K)·H: Q, K and V; 2·D: the outputs of the attention's output projection and of the "
                          "MLP; 2·F: the MLP's two input matmuls; 2: bytes per bf16 value",))
    return _letters(d)


register(Exercise(
    id="4.17",
    title="The activations LLaMA-3-8B keeps when it saves only the seven big matmuls",
    reference=_kept,
    unit="B",
    mistakes={
        slip(_kept_bytes("none"), _kept()):
            "that keeps every activation of the layer (the norms' inputs and outputs, attention's output, the gated "
            "product); the question keeps only the outputs of the seven big matmuls",
        slip(2 * 7 * model(_4_17["model"]).D * _4_17["tokens"] * model(_4_17["model"]).L, _kept()):
            "you gave each of the seven outputs the width D; the MLP's two input matmuls give F values per token, "
            "and K and V have only the key/value heads",
        slip(_kept_bytes(spec=model(_4_17["model"]).derive("variant", K=model(_4_17["model"]).N)), _kept()):
            "you gave K and V as many heads as Q; this model has fewer key/value heads",
    },
))
