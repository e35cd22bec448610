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
from ._tools import _uses, define, slip
from ..._derivation import Derivation, explain, q
from ..._einsum import einsum_flops
from ..._models import ModelSpec, model
from ..._roofline import critical_intensity, matmul_flops
from ..._transformer import (
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
Q1_MODEL = ModelSpec(name="book-q1", source="How to Scale Your Model, ch. 4, Q1",
                     L=64, D=4096, F=4 * 4096, N=32, K=32, H=128, V=32000)

#: The book's letters, each defined under the first formula of a derivation that uses it.
LETTERS = {"L": "layers", "D": "the model width", "F": "the MLP width (each expert's, in an MoE)",
           "N": "query heads", "K": "key/value heads", "H": "the head size", "V": "the vocabulary"}


def _letters(derivation: Derivation) -> Derivation:
    """`derivation` with each of the book's letters it uses defined."""
    return define(derivation, {s: meaning for s, meaning in LETTERS.items() if _used(derivation, s)})


def _used(derivation: Derivation, symbol: str) -> bool:
    return _uses(derivation.formula, symbol) or any(_used(step, symbol) for step in derivation.steps)


# 4.1 -------------------------------------------------------------------------

register(Exercise(
    id="4.1",
    title="Parameters of the book's 64-layer model",
    reference=lambda: _letters(explain(params, Q1_MODEL)),
    unit="params",
    mistakes={
        slip(params(replace(Q1_MODEL, gated=False)), params(Q1_MODEL)):
            "you counted two MLP matrices per layer; a gated MLP has three (two going in, one going out): 3·D·F",
    },
    book=("Q1",),
))


# 4.2 -------------------------------------------------------------------------

def _attention_share() -> Derivation:
    """Reference for 4.2: attention's parameters over all of them."""
    attention = replace(explain(params, Q1_MODEL, component="attention"), symbol="P_attention")
    total = replace(explain(params, Q1_MODEL), symbol="P")
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
            "that is attention's share of the layers' weight matrices (the book's 1/4); the question counts "
            "every parameter in the total, the embeddings and norms as well",
        slip(params(Q1_MODEL, component="attention") / params(replace(Q1_MODEL, gated=False)), _attention_share()):
            "the total is too small by one MLP matrix per layer: a gated MLP has three, 3·D·F",
    },
    book=("Q1",),
))


# 4.3 -------------------------------------------------------------------------

register(Exercise(
    id="4.3",
    title="KV cache per token of the book's model, in int8",
    reference=lambda: _letters(explain(kv_cache_bytes, Q1_MODEL, dtype="int8")),
    unit="B",
    mistakes={
        slip(kv_cache_bytes(Q1_MODEL, dtype="int8") / 2, kv_cache_bytes(Q1_MODEL, dtype="int8")):
            "you cached one vector per head and layer; each key/value head caches a key and a value",
        slip(kv_cache_bytes(Q1_MODEL, dtype="bf16"), kv_cache_bytes(Q1_MODEL, dtype="int8")):
            "a factor of 2: the cache is in int8, 1 byte per value",
        slip(kv_cache_bytes(replace(Q1_MODEL, L=1), dtype="int8"), kv_cache_bytes(Q1_MODEL, dtype="int8")):
            "that is one layer's share; every layer caches its own keys and values",
    },
    book=("Q1",),
))


# 4.4 -------------------------------------------------------------------------

_4_4 = dict(tokens=32768, dtype="bf16")

register(Exercise(
    id="4.4",
    title="KV cache of one long LLaMA-3-70B sequence",
    reference=lambda: _letters(explain(kv_cache_bytes, "llama-3-70b", **_4_4)),
    unit="B",
    mistakes={
        slip(kv_cache_bytes(model("llama-3-70b").derive("llama-3-70b-mha", K=64), **_4_4),
             kv_cache_bytes("llama-3-70b", **_4_4)):
            "you cached all N = 64 query heads; grouped-query attention caches only the K = 8 key/value heads",
    },
))


# 4.5 -------------------------------------------------------------------------

_4_5 = dict(B=16384, D=8192, F=32768)
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
            "the total is the nominal 2·B·D·F; but nothing is sharded over Z, so its 4 groups of chips each "
            "compute the whole product again",
        slip(_sharded_matmul_flops(per_chip_over=("X", "Y", "Z")), _sharded_matmul_flops()):
            "you shared the work among all 128 chips; only X and Y split it, and the chips along Z repeat it",
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

def _prefill_threshold(G: int = 1) -> Derivation:
    """Reference for 4.7: T·G/(G + 1) = C/W, solved for T (bf16, S = T)."""
    ridge = explain(critical_intensity, "tpu-v5e", dtype="bf16")
    value = ridge.value * (G + 1) / G
    assert abs(attention_intensity(value, value, G=G) / ridge.value - 1) < 1e-9
    d = Derivation("T_min", "I_crit · (G + 1) / G", f"{q(ridge.value)} · ({G} + 1) / {G}", value, "tokens", (ridge,))
    return define(d, {"C": "TPU v5e's peak bf16 rate", "W": "its HBM bandwidth",
                      "G": "query heads per key/value head (1 for multi-head attention); prefill's attention "
                           "intensity is T·G / (G + 1) in bf16"})


register(Exercise(
    id="4.7",
    title="When prefill's attention becomes compute-bound",
    reference=_prefill_threshold,
    unit="tokens",
    mistakes={
        slip(critical_intensity("tpu-v5e"), _prefill_threshold()):
            "you took attention's intensity to be T, like a matmul's B; it also reads Q and writes the output, "
            "as large as K and V, so in prefill it is T·G / (G + 1): T / 2 for multi-head attention",
    },
    book=("Q4",),
))


# 4.8 -------------------------------------------------------------------------

_4_8 = dict(T=1, S=8192)


def _decode_intensity(G: float | None = None) -> Derivation:
    spec = model("llama-3-70b")
    return explain(attention_intensity, _4_8["T"], _4_8["S"], G=spec.N // spec.K if G is None else G)


register(Exercise(
    id="4.8",
    title="Attention's intensity while generating with LLaMA-3-70B",
    reference=_decode_intensity,
    unit="FLOP/B",
    mistakes={
        slip(_decode_intensity(G=1), _decode_intensity()):
            "that is multi-head attention's (G = 1); LLaMA-3-70B shares each key/value head among N / K = 8 "
            "query heads, and each K and V value it reads serves all 8",
        slip(_decode_intensity(G=model("llama-3-70b").N), _decode_intensity()):
            "G is the number of query heads per key/value head, N / K, not N",
    },
    book=("Q4",),
))


# 4.9 -------------------------------------------------------------------------

#: the book's Q5: multi-head attention with D = 4096 (N·H = D)
Q5_MODEL = ModelSpec(name="book-q5", source="How to Scale Your Model, ch. 4, Q5",
                     L=1, D=4096, F=4 * 4096, N=32, K=32, H=128, V=32000)


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
            "that is where attention catches up with all of the layer's matmuls, the MLP's included (8D); the "
            "question compares it with the four projections alone",
        slip(_projection_match(causal=True), _projection_match()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
    },
    book=("Q5",),
))


# 4.10 ------------------------------------------------------------------------

def _crossover(name: str = "llama-3-70b", causal: bool = False) -> Derivation:
    return _letters(explain(attention_crossover_seq_len, name, causal=causal))


register(Exercise(
    id="4.10",
    title="Where LLaMA-3-70B's attention overtakes its matmuls",
    reference=_crossover,
    unit="tokens",
    mistakes={
        slip(8 * model("llama-3-70b").D, _crossover()):
            "that is the book's rule T = 8D, which assumes F = 4D, N·H = D and K = N; LLaMA-3-70B's MLP is "
            "narrower (F = 3.5D) and its keys and values use only 8 heads, so its matmuls are fewer",
        slip(_crossover(causal=True), _crossover()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
    },
))


# 4.11 ------------------------------------------------------------------------

_4_11 = dict(sequences=512, T=4096)


def _recomputed(name: str = "llama-3-70b", **changes) -> Derivation:
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
        slip(train_flops("llama-3-70b", seq_len=_4_11["T"], tokens=_4_11["sequences"] * _4_11["T"],
                         component="dot_product"), _recomputed()):
            "that is attention's whole training cost; the backward pass needs only its two forward products "
            "again (QKᵀ and the product with V), not its own gradient products, which it does anyway",
        slip(_recomputed(N=model("llama-3-70b").K), _recomputed()):
            "you used the K = 8 key/value heads; attention's products run over all N = 64 query heads",
        slip(_recomputed(L=1), _recomputed()):
            "that is one layer's; every layer recomputes its own attention",
    },
    book=("Q6",),
))


# 4.12 ------------------------------------------------------------------------

_4_12 = dict(seq_len=8192, tokens=15e12)


def _training_flops(causal: bool = False) -> Derivation:
    return _letters(explain(train_flops, "llama-3-8b", causal=causal, **_4_12))


register(Exercise(
    id="4.12",
    title="Training LLaMA-3-8B on 15T tokens, attention included",
    reference=_training_flops,
    unit="FLOP",
    mistakes={
        slip(6 * params("llama-3-8b") * _4_12["tokens"], _training_flops()):
            "that is 6·params·tokens, which leaves out dot-product attention: at T = 8192 it adds a sizeable share",
        slip(2 * params("llama-3-8b") * _4_12["tokens"], _training_flops()):
            "that is about a forward pass; the backward pass does twice as much again, so training is about "
            "6 FLOPs per parameter per token, not 2",
        slip(_training_flops(causal=True), _training_flops()):
            "you halved attention, as a causal kernel would; the question counts the whole T x T product",
    },
))


# 4.13 ------------------------------------------------------------------------

def _mixtral_active(**changes) -> Derivation:
    spec = model("mixtral-8x7b") if not changes else model("mixtral-8x7b").derive("variant", **changes)
    return _letters(explain(params, spec, active=True))


register(Exercise(
    id="4.13",
    title="Parameters a Mixtral 8x7B token uses",
    reference=_mixtral_active,
    unit="params",
    mistakes={
        slip(params("mixtral-8x7b"), _mixtral_active()):
            "you counted all 8 experts; each token goes through only k = 2 of them (attention and the "
            "embeddings it uses in full)",
        slip(_mixtral_active(gated=False), _mixtral_active()):
            "each expert is a gated MLP of three matrices, 3·D·F",
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
            "you used the data sheet's 3,026 TFLOPS, which assumes 2:4 structured sparsity; dense matmuls get half",
        slip(_utilisation(per_param_token=2), _utilisation()):
            "2 FLOPs per parameter per token is the forward pass; training (forward and backward) is 6",
        slip(_utilisation(active=False), _utilisation()):
            "you used all 671B parameters; a token goes through only its experts, 37B parameters",
    },
    book=("Q7",),
))


# 4.15 ------------------------------------------------------------------------

def _moe_batch(weight_dtype: str = "int8", dense: bool = False) -> Derivation:
    d = explain(moe_critical_batch_size, "deepseek-v3", "tpu-v5e", weight_dtype=weight_dtype)
    if dense:
        return d.steps[0]
    return define(d, {"C": "TPU v5e's peak bf16 rate (the arithmetic runs in bf16)", "W": "its HBM bandwidth"})


register(Exercise(
    id="4.15",
    title="The batch DeepSeek-V3's experts need to be compute-bound",
    reference=_moe_batch,
    unit="tokens",
    mistakes={
        slip(_moe_batch(dense=True), _moe_batch()):
            "that is a dense matmul's critical batch; each expert sees only k/E of the tokens, so the batch "
            "must be E/k times larger",
        slip(_moe_batch(weight_dtype="bf16"), _moe_batch()):
            "a factor of 2: the weights are in int8, 1 byte each, so each byte loaded serves twice the FLOPs "
            "of a bf16 weight",
    },
    book=("Q8",),
))


# 4.16 ------------------------------------------------------------------------

def _training_state(**options) -> Derivation:
    return _letters(explain(training_state_bytes, "llama-3-70b", **options))


register(Exercise(
    id="4.16",
    title="Memory for LLaMA-3-70B's training state",
    reference=_training_state,
    unit="B",
    mistakes={
        slip(_training_state(grad_dtype=None), _training_state()):
            "you left out the gradients (the book's 10 bytes per parameter does); they take 2 bytes per "
            "parameter in bf16",
        slip(_training_state(optimizer="momentum"), _training_state()):
            "Adam keeps two f32 values per parameter (the first and second moments): 8 bytes, not 4",
    },
))
