"""Chapter 7 exercises: inference.

Every reference is computed by scalelib (its step times, memory limits and collective costs); the numbers
below are only what each question gives (a parameter count, a context, a slice, a batch). Facts and formulas
follow ch. 7 "All About Transformer Inference" of How to Scale Your Model (Austin et al., 2025); ``book=``
names the book's question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, slip
from .ch04 import LETTERS, _used
from ..._derivation import Derivation, explain, q
from ..._inference import (
    generate_step_time_s,
    max_batch_size,
    speculative_time_per_token_s,
    weight_load_time_s,
    weight_stationary_crossover_chips,
)
from ..._models import ModelSpec, model
from ..._specs import chip
from ..._roofline import critical_batch_size, critical_intensity
from ..._sharding import latency_bound_bytes
from ..._topology import ICI_HOP_LATENCY_S, tpu_pod, tpu_slice
from ..._transformer import kv_cache_bytes, param_bytes, params

#: The book's invented model of its worked problems: LLaMA 2-13B reshaped, input and output tables shared.
BOOK_MODEL = ModelSpec(name="the worked problems' model", source="How to Scale Your Model, ch. 7, worked problems",
                       L=64, D=4096, F=16384, N=32, K=8, H=256, V=32128, tied_embeddings=True)
#: The same model as a mixture of experts (the book's Q5): E = 16 experts per layer, k = 2 per token.
BOOK_MOE = BOOK_MODEL.derive("its mixture of experts", E=16, k=2)


def _v5e(shape=(4, 4)):
    return tpu_slice(shape, "tpu-v5e")


def _defined_in(d: Derivation, symbol: str) -> bool:
    """True when a ``where`` line of `d` or of one of its steps already defines `symbol`."""
    here = any(symbol in [n.strip() for part in line.split(";") for n in part.split(":")[0].split(",")]
               for line in d.where)
    return here or any(_defined_in(step, symbol) for step in d.steps)


def _letters(d: Derivation) -> Derivation:
    """`d` with each of the book's letters it uses defined, unless a step already gives it a meaning (N chips)."""
    return define(d, {s: m for s, m in LETTERS.items() if _used(d, s) and not _defined_in(d, s)})


def _short(d: Derivation) -> Derivation:
    """`d` with each parameter count collapsed to its result (chapter 4 derives it): the step asked stays in view."""
    if d.symbol.startswith("params("):
        return Derivation(d.symbol, "counted as in chapter 4", "", d.value, d.unit)
    return replace(d, steps=tuple(_short(step) for step in d.steps))


# 7.1, 7.2 ---------------------------------------------------------------------

def _pop_quiz(batch: int, **changes) -> Derivation:
    """Reference for 7.1 and 7.2: the general step time of a 30B int8 model with 100 kB of KV per token."""
    kw = dict(batch=batch, context=8192, weight_dtype="int8", kv_bytes_per_token=100e3, check_memory=False)
    return explain(generate_step_time_s, 30e9, _v5e(), **{**kw, **changes})


def _all_overlapped(batch: int) -> float:
    """max(all bytes / W, FLOPs / C): the caches' reads overlapped with the matmuls' arithmetic too."""
    v5e = _v5e()
    every_byte = (batch * 8192 * 100e3 + 30e9) / v5e.total_hbm_bytes_per_s()
    return max(every_byte, 2 * batch * 30e9 / v5e.total_flops_per_s())


register(Exercise(
    id="7.1",
    title="The floor of a generate step at batch 4",
    reference=lambda: _pop_quiz(4),
    unit="s",
    mistakes={
        slip(weight_load_time_s(30e9, _v5e(), weight_dtype="int8"), _pop_quiz(4)):
            "that is the weights alone; each of the 4 sequences also reads its own 8192-token KV cache every step",
        slip(_pop_quiz(4, weight_dtype="bf16", kv_dtype="int8"), _pop_quiz(4)):
            "the weights are int8, not bf16: check the bytes per parameter",
        slip(16 * _pop_quiz(4).value, _pop_quiz(4)):
            "that is one chip's time for everything; the weights and caches are spread over all the chips, "
            "each reading its share at its own bandwidth at the same time",
    },
    book=("Pop quiz",),
))

register(Exercise(
    id="7.2",
    title="The same step at batch 256",
    reference=lambda: _pop_quiz(256),
    unit="s",
    mistakes={
        slip(_all_overlapped(256), _pop_quiz(256)):
            # the int8 peak gives nearly the same step (the matmuls' FLOPs halved, just above the weight read)
            "either that reads every byte at full bandwidth with all the arithmetic hidden under it (in the "
            "question's model the cache reads add to the matmuls' time, and at this batch the matmuls take longer "
            "on their FLOPs than on their weight reads), or the matmuls ran at the int8 peak (the weights are int8, "
            "the arithmetic is bf16)",
        slip(_pop_quiz(256, kv_bytes_per_token=0.0), _pop_quiz(256)):
            "the KV caches are still read every step, whatever the matmuls do: 256 sequences of 8192 tokens",
    },
    book=("Pop quiz",),
))


# 7.3 ---------------------------------------------------------------------------

def _v6e_batch(hbm_chip: str = "tpu-v6e", with_weights: bool = True) -> Derivation:
    """Reference for 7.3: LLaMA 2-13B's largest bf16 batch on a TPU v6e 4x2 (the chapter works eight v5e chips)."""
    if hbm_chip == "tpu-v6e" and with_weights:
        return _letters(_short(explain(max_batch_size, "llama-2-13b", tpu_slice((4, 2), "tpu-v6e"), context=8192)))
    free = 8 * chip(hbm_chip).hbm_bytes - (param_bytes("llama-2-13b") if with_weights else 0)
    return Derivation("B", "", "", float(free // kv_cache_bytes("llama-2-13b", tokens=8192)), "sequences")


register(Exercise(
    id="7.3",
    title="LLaMA 2-13B's largest batch on eight v6e chips",
    reference=_v6e_batch,
    unit="sequences",
    integer=True,
    mistakes={
        slip(_v6e_batch(with_weights=False), _v6e_batch()):
            "the weights take HBM too: only what they leave is free for KV caches",
        slip(_v6e_batch("tpu-v5e"), _v6e_batch()):
            "that is what eight v5e chips hold; a v6e chip has its own HBM size (`sl.chip(\"tpu-v6e\").hbm_bytes`)",
    },
    book=("Ex1",),
))


# 7.4, 7.5 ------------------------------------------------------------------------

def _book_params_and_table(**changes) -> Derivation:
    """Reference for 7.4: all the parameters, and those outside the MLPs (a table counted twice shows there)."""
    spec = BOOK_MODEL if not changes else replace(BOOK_MODEL, name="book-ch7-variant", **changes)
    total = explain(params, spec)
    outside = total.value - params(spec, component="mlp") - params(spec, component="norms")
    return _letters(Derivation("answer", "[P, P_attention + P_embeddings]", "[P, P_attention + P_embeddings]",
                               np.array([total.value, outside]), "params", (total,),
                               where=("P: all of them, params(the worked problems' model) above",)))


register(Exercise(
    id="7.4",
    title="Parameters of the book's worked-problem model, and those outside its MLPs",
    reference=_book_params_and_table,
    unit="params",
    rtol=0.001,  # a count: the shared table counted twice is 0.7% too many in all, 2.4% outside the MLPs
    mistakes={
        slip(_book_params_and_table(K=32), _book_params_and_table()):
            "the K and V projections have only K = 8 heads; only Q and O have all N = 32",
        slip(_book_params_and_table(tied_embeddings=False), _book_params_and_table()):
            "the input and the output layer share one V x D table here: count it once",
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
            "the cache is int8, not bf16: check the bytes per value",
        slip(kv_cache_bytes(replace(BOOK_MODEL, name="book-ch7-mha", K=32), dtype="int8"), _book_kv()):
            "only the key/value heads are cached, not the query heads",
        slip(kv_cache_bytes(BOOK_MODEL, dtype="int8") / 2, _book_kv()):
            "each layer caches a key and a value for every key/value head",
    },
    book=("Q1",),
))


# 7.6, 7.7 ------------------------------------------------------------------------

#: The context of 7.6 and 7.7: the book's Q2 asks at 128k, where leaving the weights out, or taking 16 GiB chips,
#: gives the same whole batch; at 80k each of those slips gives another count.
Q2_CONTEXT = 80_000


def _q2(spec: ModelSpec = BOOK_MODEL, kv_dtype: str = "int8") -> Derivation:
    d = explain(max_batch_size, spec, _v5e(), context=Q2_CONTEXT, weight_dtype="int8", kv_dtype=kv_dtype)
    return _letters(_short(d))


def _q2_no_weights(spec: ModelSpec) -> float:
    return _v5e().total_hbm_bytes() // kv_cache_bytes(spec, tokens=Q2_CONTEXT, dtype="int8")


def _q2_with(spec: ModelSpec, *, hbm_bytes: float | None = None, weights_of: ModelSpec | None = None) -> float:
    """The batch with another HBM size per chip, or another model's int8 weights, in the HBM."""
    hbm = _v5e().num_chips * (hbm_bytes or chip("tpu-v5e").hbm_bytes)
    return (hbm - params(weights_of or spec)) // kv_cache_bytes(spec, tokens=Q2_CONTEXT, dtype="int8")


ONE_HEAD = BOOK_MODEL.derive("the same with one key/value head", K=1)

register(Exercise(
    id="7.6",
    title="The largest batch at an 80k context",
    reference=_q2,
    unit="sequences",
    integer=True,
    mistakes={
        slip(_q2(kv_dtype="bf16"), _q2()):
            "everything is int8 here, the KV cache too: check its bytes per value",
        # leaving the weights out and taking 16 GiB chips give the same count here
        slip(_q2_no_weights(BOOK_MODEL), _q2()):
            "either the weights were left out (they take their share of the HBM: only what they leave holds "
            "caches), or the chips were taken as 16 GiB (a v5e chip holds 16 GB, 16e9 bytes: `hbm_bytes`)",
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
            "that is exercise 7.6's batch; with a single key/value head the cache per token shrinks "
            "(and the weights a little)",
        slip(_q2_with(ONE_HEAD, weights_of=BOOK_MODEL), _q2(ONE_HEAD)):
            "the weights shrink too: with one key/value head the K and V projections are smaller",
        slip(8 * _q2().value, _q2(ONE_HEAD)):
            "the caches are 8 times smaller, but the weights shrink too, which frees room for more than 8 times "
            "exercise 7.6's batch",
        slip(_q2_with(ONE_HEAD, hbm_bytes=16 * 2**30), _q2(ONE_HEAD)):
            "a v5e chip holds 16 GB (16e9 bytes, `hbm_bytes`), not 16 GiB",
    },
    book=("Q2",),
))


# 7.8 -----------------------------------------------------------------------------


def _q3(**changes) -> Derivation:
    kw = {"weight_dtype": "int8", **changes}
    return _short(explain(weight_load_time_s, BOOK_MODEL, _v5e(), **kw))


register(Exercise(
    id="7.8",
    title="The weight-loading floor of a decode step",
    reference=_q3,
    unit="s",
    involves={"dtype"},
    rtol=0.002,  # the one table of V·D is 0.7% of the weights: a 1% tolerance would credit it left out or doubled
    mistakes={
        slip(_q3(weight_dtype="bf16"), _q3()):
            "the parameters are int8, not bf16: check the bytes per parameter",
        slip(explain(weight_load_time_s, BOOK_MODEL, "tpu-v5e", weight_dtype="int8", num_chips=1), _q3()):
            "the weights are sharded over all the chips, and each reads only its share, at the same time",
    },
    book=("Q3",),
))


# 7.9, 7.10 -----------------------------------------------------------------------

def _moe_active() -> Derivation:
    return _letters(explain(params, BOOK_MOE, active=True))


def _moe_sizes() -> Derivation:
    """Reference for 7.9: the MoE version's parameters in all, and those one token uses."""
    total, active = _letters(explain(params, BOOK_MOE)), _moe_active()
    return Derivation("answer", "[P, P_active]", "[P, P_active]", np.array([total.value, active.value]), "params",
                      (total, active), where=("P: all 16 experts of every layer; P_active: the k = 2 a token uses",))


register(Exercise(
    id="7.9",
    title="Parameters of the MoE version, in all and per token",
    reference=_moe_sizes,
    unit="params",
    # each within 0.01%, as the question says: the shared table, left out or counted twice, moves the total by
    # 0.06% and a token's count by 0.4%, which a 1% tolerance would credit; the norms it leaves out, 0.002%, stay in
    rtol=1e-4,
    mistakes={
        slip([params(BOOK_MOE), params(BOOK_MOE)], _moe_sizes()):
            "the second count is all 16 experts again; a token goes through only k = 2 of them (the rest of the "
            "model is shared)",
        slip([params(BOOK_MOE), params(BOOK_MODEL)], _moe_sizes()):
            "the second count is the dense model: each token now uses two experts, each as large as the dense MLP",
        slip([BOOK_MOE.E * params(BOOK_MODEL), _moe_active().value], _moe_sizes()):
            "only the MLPs are copied 16 times; attention and the embedding table stay single",
    },
    book=("Q5",),
))


def _moe_batch(weight_dtype: str = "int8", experts: bool = True) -> Derivation:
    """Reference for 7.10: the MoE's critical batch with int8 weights and bf16 arithmetic on a TPU v5e."""
    ridge = define(explain(critical_intensity, "tpu-v5e"), {"C": "a TPU v5e's bf16 peak", "W": "its HBM bandwidth"})
    w = {"int8": 1, "bf16": 2}[weight_dtype]
    dense = Derivation("B_dense", "I_crit · w / 2", f"{q(ridge.value)} · {w} / 2", ridge.value * w / 2, "tokens",
                       (ridge,), where=(f"w: bytes per weight ({weight_dtype}); 2: FLOPs per weight and token "
                                        "(a multiply and an add)",))
    if not experts:
        return dense
    E, k = BOOK_MOE.E, BOOK_MOE.k
    return Derivation("B_crit", "B_dense · E / k", f"{q(dense.value)} · {E} / {k}", dense.value * E / k, "tokens",
                      (dense,), where=("E: experts per layer; k: experts a token uses (each expert sees k/E of "
                                       "the batch)",))


register(Exercise(
    id="7.10",
    title="The batch the MoE version needs to be compute-bound, with int8 weights",
    reference=_moe_batch,
    unit="tokens",
    mistakes={
        slip(_moe_batch(experts=False), _moe_batch()):
            "that is a dense layer's threshold; each expert sees only k/E of the batch",
        slip(critical_batch_size("tpu-v5e"), _moe_batch()):
            "that is a dense bf16 layer's threshold; each expert sees only k/E of the batch, and the weights are int8",
        slip(_moe_batch("bf16"), _moe_batch()):
            "the weights are int8, not bf16: the same FLOPs read fewer bytes, which lowers the threshold",
    },
    book=("Q5",),
))


# 7.11 ----------------------------------------------------------------------------

BIG = "llama-3.1-405b"


def _crossover(axes: int = 3, two: float = 2.0) -> Derivation:
    """Reference for 7.11: LLaMA 3.1-405B's 2D-versus-1D crossover on a 3D torus, and its best X on 512 chips."""
    m = model(BIG)
    n_star = define(explain(weight_stationary_crossover_chips, m.D, m.F, axes=axes),
                    {"F": "LLaMA 3.1-405B's MLP width", "D": "its model width",
                     "axes": "the torus axes 1D sharding's collectives run over"})
    N = 512
    x_best = Derivation("X_best", "sqrt(N·D / (2·F))", f"sqrt({N}·{m.D} / ({q(two)}·{m.F}))",
                        math.sqrt(N * m.D / (two * m.F)), "chips", (),
                        where=("N: the 512 chips of the v5p 8x8x8 (the minimum of D/X + 2·F·X/N)",))
    return Derivation("answer", "[N*, X_best]", "[N*, X_best]", np.array([n_star.value, x_best.value]), "chips",
                      (n_star, x_best))


register(Exercise(
    id="7.11",
    title="Where 2D weight-stationary sharding starts to win for LLaMA 3.1-405B, and its best split",
    reference=_crossover,
    unit="chips",
    mistakes={
        slip(_crossover(axes=1), _crossover()):
            "1D sharding's gather and scatter run over all three axes of the torus at once, which divides "
            "their time by the number of axes",
        slip(_crossover(two=1.0), _crossover()):
            "the 2D cost's second term carries 2·F (two collectives over the chips that split F); keep the 2 when "
            "you minimise over X",
    },
    book=("Q7",),
))


# 7.12 ----------------------------------------------------------------------------

def _latency_batch(bytes_per_value: float = 2.0, per: str = "array", one_way: bool = False) -> Derivation:
    """Reference for 7.12: below what batch LLaMA 3.1-405B's bf16 activation gathers are latency-bound."""
    ring = tpu_pod("tpu-v5e")
    n = ring.shape[0]
    W = ring.spec.ici_link_bytes_per_s_bidirectional
    V_value = latency_bound_bytes(ring, axes="X", per=per) / (2 if one_way else 1)
    V = Derivation("V*", "T_hop · (n/2) · W", f"{q(ICI_HOP_LATENCY_S, 's')} · {n // 2} · {q(W, 'B/s')}",
                   V_value, "B",
                   where=("T_hop: one hop's latency; n: the 16 chips of the ring (n/2 hops each way round); "
                          "W: a link's bandwidth, both directions",))
    D = model(BIG).D
    return Derivation("B*", "V* / (D·x)", f"{q(V.value, 'B')} / ({D}·{q(bytes_per_value)})",
                      V.value / (D * bytes_per_value), "tokens", (V,),
                      where=("D: LLaMA 3.1-405B's model width; x: bytes per activation (bf16)",))


register(Exercise(
    id="7.12",
    title="The batch below which model-parallel gathers are latency-bound",
    reference=_latency_batch,
    unit="tokens",
    # "below what batch": the bound itself (within 1%), or the largest whole batch below it
    accept=(math.floor(_latency_batch().value), _latency_batch().value * 1.01),
    mistakes={
        slip(_latency_batch(1.0), _latency_batch()):
            "a factor of 2: either the activations were taken as int8 (they are bf16: check the bytes per value), "
            "or the gather was charged n hops (a ring's shards go both ways round: n/2 hops, as the question says)",
        slip(_latency_batch(one_way=True), _latency_batch()):
            "a ring gather sends shards both ways round: use a link's bandwidth in both directions",
        slip(_latency_batch(per="shard"), _latency_batch()):
            "that is what one chip's shard may hold; the batch is set by the whole gathered array",
    },
))


# 7.13 ----------------------------------------------------------------------------

SPEC = dict(draft="llama-3-8b", acceptance=0.6, batch=32, context=4096, weight_dtype="int8")
KS = range(1, 9)


def _speculative(k: int | None = None) -> Derivation:
    """Reference for 7.13: the time per token at the best k of 1 to 8 (batch 32, acceptance 0.6)."""
    if k is None:
        k = min(KS, key=lambda j: speculative_time_per_token_s("llama-3-70b", _v5e(), k=j, **SPEC))
    d = explain(speculative_time_per_token_s, "llama-3-70b", _v5e(), k=k, **SPEC)
    said = {"T_draft": "a generate step of the drafter at batch 32 (the step model of chapter 7)",
            "T_check": f"a step of the large model checking {k + 1} positions per sequence (the same step model)"}
    steps = tuple(Derivation(st.symbol, said[st.symbol], "", st.value, st.unit) if st.symbol in said else st
                  for st in d.steps)
    return replace(d, steps=steps, where=d.where + (f"k = {k} gives the lowest time per token of k = 1 to 8",))


def _tokens_per_check(k: int) -> float:
    """The tokens a checking step yields on average with k drafted: 1 + a + ... + a^k."""
    a = SPEC["acceptance"]
    return (1 - a ** (k + 1)) / (1 - a)


_WITHOUT_OWN_TOKEN = ("the tokens a checking step yields count the large model's own token too: with k drafted, up to "
                      "k + 1 come out of one step")

register(Exercise(
    id="7.13",
    title="Time per token with a drafter, at the best k",
    reference=_speculative,
    unit="s",
    mistakes={
        slip(_speculative(0), _speculative()):
            "that is plain decoding; with a drafter each checking step yields (1 − a^(k+1)) / (1 − a) tokens",
        slip(_speculative(4), _speculative()):
            # k = 2 with the large model's own token left out of each checking step's yield gives nearly the same
            "either that k is the best for a single sequence (at this batch the checking step's k + 1 tokens per "
            "sequence soon push the matmuls past the critical batch, where extra positions stop being free), or "
            "a step's yield left out the large model's own token (up to k + 1 tokens come out of each check)",
        slip(_speculative(8), _speculative()):
            "the most drafted tokens is not the fastest here: try every k from 1 to 8 and keep the lowest time",
        slip(min(_speculative(k).value * _tokens_per_check(k) / _tokens_per_check(k - 1) for k in KS), _speculative()):
            _WITHOUT_OWN_TOKEN,
    },
))


# 7.14, 7.15 ----------------------------------------------------------------------

PROMPT = 4096


def _moe_prefill_flops(active: bool = True, per_param: int = 2) -> Derivation:
    """Reference for 7.14: the matmul FLOPs of the MoE version's forward pass over a 4096-token prompt."""
    P = _moe_active() if active else _letters(explain(params, BOOK_MOE))
    return Derivation("FLOPs", f"{per_param} · P_active · T", f"{per_param} · {q(P.value)} · {PROMPT}",
                      per_param * P.value * PROMPT, "FLOP", (P,),
                      where=(f"P_active: the parameters a token uses{'' if active else ' (here, wrongly, all of them)'}; "
                             f"T: the prompt's {PROMPT} tokens; {per_param}: FLOPs per parameter and token "
                             "(a multiply and an add)",))


register(Exercise(
    id="7.14",
    title="FLOPs of the MoE version's forward pass over a prompt",
    reference=_moe_prefill_flops,
    unit="FLOP",
    rtol=1e-3,  # the shared table is 0.4% of a token's parameters: a 1% tolerance would credit it left out or doubled
    mistakes={
        slip(_moe_prefill_flops(active=False), _moe_prefill_flops()):
            "that multiplies by all 16 experts; each token's arithmetic uses only the k = 2 it is sent to",
        slip(_moe_prefill_flops(per_param=6), _moe_prefill_flops()):
            "6 per parameter and token counts the backward pass too (training); a forward pass is 2",
    },
    book=("Q5",),
))


def _moe_prompt_kv(scale: float = 1.0) -> Derivation:
    """Reference for 7.15: the int8 KV cache the MoE version's 4096-token prompt fills (experts leave it alone)."""
    d = _letters(explain(kv_cache_bytes, BOOK_MOE, tokens=PROMPT, dtype="int8"))
    return d if scale == 1.0 else Derivation("KV", "", "", d.value * scale, "B")


register(Exercise(
    id="7.15",
    title="The KV cache of the MoE version's prompt",
    reference=_moe_prompt_kv,
    unit="B",
    mistakes={
        slip(_moe_prompt_kv(BOOK_MOE.E), _moe_prompt_kv()):
            "the experts are MLPs: attention, and so the KV cache, is the dense model's, not E times it",
        slip(_moe_prompt_kv(2), _moe_prompt_kv()):
            "the cache is int8 here, one byte per value; and the k = 2 experts a token uses are MLPs, which cache "
            "nothing",
    },
    book=("Q5",),
))
