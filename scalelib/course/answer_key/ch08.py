"""Chapter 8 exercises: serving LLaMA 3.

The chapter serves LLaMA 3-70B on TPU v5e; its exercises transfer each of its steps to new inputs (LLaMA
3.1-405B's cache, LLaMA 3-70B on TPU v6e, another batch, context or prompt), so that each answer is worked
out rather than read off the chapter. Every reference is computed by scalelib (KV sizes, slices, step times,
requests per chip, pools, prices); the numbers below are only what each question gives. Facts and formulas
follow ch. 8 "Serving LLaMA 3-70B on TPUs" of How to Scale Your Model (Austin et al., 2025); ``book=`` names
the book's question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import after, define, once, rename, slip
from .ch04 import _letters as _book_letters
from .ch04 import _used
from .ch07 import _letters, _short
from ..._derivation import Derivation, explain, q
from ..._estimate import INFERENCE_LOSSES
from ..._estimate import constants as estimate_constants
from ..._inference import (
    estimated_generate_step_time_s,
    generate_model_parallel_max_degree,
    generate_step_time_s,
    max_batch_size,
    prefill_time_s,
    tokens_per_s_per_chip,
    weight_load_time_s,
)
from ..._models import model
from ..._parallelism import tensor_parallel_max_degree
from ..._roofline import critical_batch_size, critical_intensity
from ..._serving import (
    _sizes,
    cost_per_million_tokens,
    kv_tokens_freed_per_step,
    min_chips,
    prefill_to_generate_ratio,
    requests_per_s_per_chip,
)
from ..._specs import chip
from ..._topology import tpu_slice
from ..._transformer import kv_cache_bytes, param_bytes, params

LLAMA = "llama-3-70b"
BIG = "llama-3.1-405b"
SMALL = "llama-3-8b"
V5E = "tpu-v5e"
V6E = "tpu-v6e"


def _v5e(shape):
    return tpu_slice(shape, V5E)


def _v6e(shape):
    return tpu_slice(shape, V6E)


#: What the symbols of this chapter's derivations stand for, where a step leaves one undefined.
MEANINGS = {"B": "sequences in the batch", "S": "tokens cached per sequence", "kv": "KV bytes per token",
            "P": "the model's parameters", "w": "bytes per weight", "W": "a chip's HBM bandwidth",
            "C": "the chip's peak rate in the arithmetic's dtype", "P_active": "parameters a token uses",
            "T_prefill": "one prefill's time on a prefill server",
            "T_step": "one generate step's time on a generate server"}


def _defined_in(d: Derivation, symbol: str) -> bool:
    here = any(symbol in [n.strip() for part in line.split(";") for n in part.split(":")[0].split(",")]
               for line in d.where)
    return here or any(_defined_in(step, symbol) for step in d.steps)


def _all(d: Derivation, meanings=MEANINGS) -> Derivation:
    """`d` with the book's letters and every other symbol of `meanings` it uses defined (chapter 11 uses it too)."""
    d = _book_letters(d)
    return define(d, {k: v for k, v in meanings.items() if _used(d, k) and not _defined_in(d, k)})


def _shown(d: Derivation, meanings=None) -> Derivation:
    """What a correct answer shows: `d` with its parameter counts collapsed to their result (chapter 4 derives
    them), each symbol defined once, and no letter given a second meaning (N is chips wherever a step says so;
    `meanings` gives a symbol the one meaning that covers all its lines, where it takes two values)."""
    d = _letters(_short(d))
    d = define(d, {k: v for k, v in MEANINGS.items() if _used(d, k) and not _defined_in(d, k)})
    return once(d, meanings or {})


def _value(d) -> float:
    return d.value if isinstance(d, Derivation) else d


# 8.1, 8.2 ----------------------------------------------------------------------

def _kv(dtype="int8", spec=BIG) -> Derivation:
    m = model(spec) if isinstance(spec, str) else spec
    d = explain(kv_cache_bytes, spec, dtype=dtype)
    return define(d, {"L": f"layers ({m.L})", "K": f"key/value heads ({m.K})", "H": f"the head dimension ({m.H})"})


register(Exercise(
    id="8.1",
    title="KV bytes per token of LLaMA 3.1-405B in int8",
    reference=_kv,
    unit="B",
    mistakes={
        slip(kv_cache_bytes(model(BIG).derive("llama-3.1-405b-mha", K=model(BIG).N), dtype="int8"), _kv()):
            "only the key/value heads are cached; the query heads are not",
        slip(_kv().value / 2, _kv()): "each layer caches a key and a value for every key/value head",
    },
    book=("Text Q1",),
))


def _kv_chips(dtype="int8", hbm=None) -> Derivation:
    kv = explain(kv_cache_bytes, BIG, tokens=240 * 32768, dtype=dtype)
    hbm = chip(V5E).hbm_bytes if hbm is None else hbm
    return Derivation("chips", "⌈B·S·kv / HBM⌉", f"⌈{q(kv.value, 'B')} / {q(hbm, 'B')}⌉",
                      float(math.ceil(kv.value / hbm)), "chips", (kv,),
                      where=("B: 240 sequences; S: 32,768 tokens each; kv: LLaMA 3.1-405B's KV bytes per token "
                             "(int8); HBM: a TPU v5e's memory",))


register(Exercise(
    id="8.2",
    title="Chips just to hold 240 caches of 32k tokens of LLaMA 3.1-405B",
    reference=lambda: _shown(_kv_chips()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_kv_chips("bf16"), _kv_chips()): "the cache is int8, not bf16: check its bytes per value",
        slip(_kv_chips(hbm=16 * 2**30), _kv_chips()): "a v5e has 16 GB (16e9 bytes) of HBM, not 16 GiB",
    },
    book=("Text Q1",),
))


# 8.3, 8.4 ----------------------------------------------------------------------

BATCH, CONTEXT = 48, 16384  # 8.3 to 8.6: LLaMA 3-70B, int8 weights and cache, on TPU v6e


def _memory(weight_dtype="int8", kv_dtype="int8", with_kv=True) -> Derivation:
    w = explain(param_bytes, LLAMA, dtype=weight_dtype)
    kv = explain(kv_cache_bytes, LLAMA, tokens=BATCH * CONTEXT, dtype=kv_dtype)
    total = w.value + (kv.value if with_kv else 0)
    return Derivation("memory", "P·w + B·S·kv", f"{q(w.value, 'B')} + {q(kv.value, 'B')}", total, "B", (w, kv),
                      where=(f"B: {BATCH} sequences; S: {CONTEXT} tokens each; kv: KV bytes per token (int8); "
                             "w: 1 byte per int8 weight",))


register(Exercise(
    id="8.3",
    title="Memory at batch 48 and a 16k context, int8",
    reference=lambda: _shown(_memory()),
    unit="B",
    mistakes={
        slip(_memory(with_kv=False), _memory()): "that is the weights alone; the 48 caches come on top",
        slip(_memory(kv_dtype="bf16"), _memory()): "the KV cache is int8 too, not bf16: check its bytes per value",
        slip(_memory(weight_dtype="bf16"), _memory()): "the weights are int8, not bf16: check their bytes per value",
    },
    book=("Text Q2",),
))


def _min_chips(weight_dtype="int8") -> Derivation:
    return explain(min_chips, LLAMA, V6E, weight_dtype=weight_dtype, batch=BATCH, context=CONTEXT)


def _chips_worth(total, hbm_chip=V6E) -> float:
    """What rounding the chips' worth of bytes up to a whole chip gives (not a slice size offered)."""
    return float(math.ceil(total / chip(hbm_chip).hbm_bytes))


def _headroom(weight_dtype="int8", chips=None) -> Derivation:
    """Reference for 8.4: how many more 16k-token sequences than the 48 the smallest v6e slice holds."""
    slice_ = _min_chips(weight_dtype)
    n = slice_.value if chips is None else chips
    kv = kv_cache_bytes(LLAMA, tokens=CONTEXT, dtype="int8")
    most = (n * chip(V6E).hbm_bytes - param_bytes(LLAMA, dtype=weight_dtype)) // kv
    weights = q(param_bytes(LLAMA, dtype=weight_dtype), "B")
    fits = Derivation("B_max", "floor((N·HBM − P_bytes) / (S·kv))",
                      f"floor(({q(n)}·{q(chip(V6E).hbm_bytes, 'B')} − {weights}) / "
                      f"({CONTEXT}·{q(kv / CONTEXT, 'B')}))",
                      float(most), "sequences", (slice_,), where=("N: the chips of that slice",))
    return Derivation("more", "B_max − B", f"{q(most)} − {BATCH}", float(most - BATCH), "sequences", (fits,))


register(Exercise(
    id="8.4",
    title="The smallest v6e slice for that, and the sequences it has room for beyond the 48",
    reference=lambda: _shown(_headroom()),
    unit="sequences",
    integer=True,
    mistakes={
        slip(_headroom(chips=_chips_worth(_memory().value)), _headroom()):
            "that many chips hold it, but it is not a slice size offered: round up to the next size there is",
        slip(_headroom("bf16"), _headroom()): "the weights are int8, not bf16: check their bytes per value",
    },
    book=("Text Q2",),
))


# 8.5, 8.6 ----------------------------------------------------------------------

def _step(shape=(4, 2), hbm_chip=V6E, **changes) -> Derivation:
    kw = dict(batch=BATCH, context=CONTEXT, weight_dtype="int8", **changes)
    return explain(generate_step_time_s, LLAMA, tpu_slice(shape, hbm_chip), **kw)


register(Exercise(
    id="8.5",
    title="A decode step on the v6e 4x2",
    reference=lambda: _shown(_step()),
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(weight_load_time_s(LLAMA, _v6e((4, 2)), weight_dtype="int8"), _step()):
            "that is the weights alone; the 48 caches are read every step too",
        slip(8 * _step().value, _step()):
            "the chips read their shares at the same time: the slice's bandwidth is all of theirs together",
        slip(_step().value * chip(V6E).hbm_bytes_per_s / chip(V5E).hbm_bytes_per_s, _step()):
            "that is a v5e's HBM bandwidth; a v6e chip reads faster (`sl.chip(\"tpu-v6e\").hbm_bytes_per_s`)",
    },
    book=("Text Q3",),
))


def _same_latency(batch_only=False) -> Derivation:
    """Reference for 8.6: tokens/s per chip on a v6e 4x4 at the largest batch whose step is no longer than 8.5's."""
    kw = dict(context=CONTEXT, weight_dtype="int8")
    target = _step()
    big = _v6e((4, 4))
    batches = np.arange(1, int(max_batch_size(LLAMA, big, **kw)) + 1)
    steps = np.asarray(generate_step_time_s(LLAMA, big, batch=batches, **kw))
    B = int(batches[steps <= target.value * (1 + 1e-12)][-1]) if not batch_only else BATCH
    step = explain(generate_step_time_s, LLAMA, big, batch=B, **kw)
    pick = Derivation("B", "the largest batch with T_step(4x4) <= T_step(4x2, 48)", f"{B}: {q(step.value, 's')}",
                      float(B), "sequences", (target, step))
    return Derivation("tokens/s/chip", "B / (T_step · N)", f"{B} / ({q(step.value, 's')} · {big.num_chips})",
                      B / (step.value * big.num_chips), "tokens/s", (pick,), where=("N: the 4x4's 16 chips",))


register(Exercise(
    id="8.6",
    title="Twice the chips at the same latency: tokens per second per chip on a v6e 4x4",
    reference=lambda: _shown(_same_latency(), {"N": "the chips of the slice (8 tpu-v6e chips on the 4x2, 16 on "
                                                    "the 4x4)"}),
    unit="tokens/s",
    mistakes={
        slip(_same_latency(batch_only=True), _same_latency()):
            "that keeps the batch of 48, which on twice the chips takes only half the step; the question lets the "
            "batch grow until the step is as long as the 4x2's",
        slip(16 * _same_latency().value, _same_latency()): "that is the whole slice's rate; a chip makes its share",
    },
    book=("Text Q3",),
))


# 8.7 ---------------------------------------------------------------------------

V4P = "tpu-v4p"
_CASES = [("bf16", "bf16"), ("bf16", "int8"), ("int8", "int8")]  # (arithmetic, weights)


def _critical() -> Derivation:
    values = np.array([critical_batch_size(V4P, dtype=c, weight_dtype=w) for c, w in _CASES])
    ridge = define(explain(critical_intensity, V4P), {"C": "a TPU v4p's bf16 peak (its int8 rate is the same)",
                                                       "W": "its HBM bandwidth"})
    return Derivation("[B_crit]", "I_crit · w / 2 for each (weights, arithmetic)",
                      f"{q(ridge.value)} · [2, 1, 1] / 2", values, "tokens", (ridge,),
                      where=("w: bytes per weight (bf16/bf16, int8/bf16, int8/int8); 2: FLOPs per weight and token; "
                             "C, and so I_crit, is the same in all three",))


register(Exercise(
    id="8.7",
    title="The critical batch by precision on TPU v4p",
    reference=_critical,
    unit="tokens",
    mistakes={
        (1.0, 2.0, 1.0): "int8 weights with bf16 arithmetic read half the bytes for the same FLOPs: the threshold "
                         "falls, it does not stay where bf16 has it",
        (1.0, 1.0, 2.0): "int8 arithmetic raises the peak only on a chip that computes int8 faster than bf16: "
                         "check this chip's int8 rate (`sl.chip(\"tpu-v4p\").int8_ops_per_s`)",
    },
    book=("Text Q4",),
))


# 8.8, 8.9, 8.10 ------------------------------------------------------------------

_PRECISIONS = ("bf16", "int8", "int4")


def _room(whole_chips=False) -> Derivation:
    """Reference for 8.8: the HBM the smallest v6e slice leaves beside the weights, in bf16, int8 and int4."""
    hbm = chip(V6E).hbm_bytes
    values = []
    for w in _PRECISIONS:
        n = math.ceil(param_bytes(LLAMA, dtype=w) / hbm) if whole_chips else min_chips(LLAMA, V6E, weight_dtype=w)
        values.append(n * hbm - param_bytes(LLAMA, dtype=w))
    d = explain(min_chips, LLAMA, V6E, weight_dtype="int4")
    return Derivation("[free]", "N·HBM − P·w on the smallest slice, for w = 2, 1, 0.5", "[bf16, int8, int4]",
                      np.array(values), "B", (d,), where=("N: the chips of each smallest slice",))


register(Exercise(
    id="8.8",
    title="The HBM left for caches on the smallest v6e slice, in bf16, int8 and int4",
    reference=lambda: _shown(_room()),
    unit="B",
    mistakes={
        slip(_room(whole_chips=True), _room()):
            "those chips hold the weights, but they are not slice sizes offered: round each up to the next size",
    },
    book=("Text Q5",),
))


SHORT = 4096  # 8.9 to 8.16: sequences of 4096 tokens on the v6e slices


def _largest(context=SHORT, with_weights=True, kv_dtypes=_PRECISIONS) -> Derivation:
    """Reference for 8.9: the 4096-token sequences each smallest v6e slice holds, the cache in the weights' dtype."""
    values = []
    for w, kv in zip(_PRECISIONS, kv_dtypes):
        topo = _v6e(_slice_shape(w))
        room = topo.total_hbm_bytes() - (param_bytes(LLAMA, dtype=w) if with_weights else 0)
        values.append(room // kv_cache_bytes(LLAMA, tokens=context, dtype=kv))
    d = explain(max_batch_size, LLAMA, _v6e(_slice_shape("int4")), context=context, weight_dtype="int4")
    return Derivation("[B_max]", "floor(free / (S·kv)) on each smallest slice, cache in the weights' precision",
                      "[bf16, int8, int4]", np.array(values, dtype=float), "sequences", (d,),
                      where=("free: the HBM exercise 8.8 found",))


def _slice_shape(dtype: str) -> tuple:
    n = min_chips(LLAMA, V6E, weight_dtype=dtype)
    return dict((size, shape) for size, shape in _sizes(chip(V6E)))[n]


register(Exercise(
    id="8.9",
    title="The largest batch on each smallest v6e slice",
    reference=lambda: _shown(_largest()),
    unit="sequences",
    integer=True,
    mistakes={
        slip(_largest(with_weights=False), _largest()): "the weights take HBM too: only what they leave holds caches",
        slip(_largest(kv_dtypes=("int8", "int8", "int4")), _largest()):
            "the bf16 slice keeps its cache in bf16 too: check its bytes per value",
        slip(_largest(context=8192), _largest()): "the sequences here are 4096 tokens long, not the chapter's 8192",
    },
    book=("Text Q5",),
))


def _full_step(with_kv=True, shape=(4, 2), dtype="bf16") -> Derivation:
    B = max_batch_size(LLAMA, _v6e(shape), context=SHORT, weight_dtype=dtype)  # 8.9's bf16 batch
    return explain(generate_step_time_s, LLAMA, _v6e(shape), batch=B, context=SHORT if with_kv else 0,
                   weight_dtype=dtype)


register(Exercise(
    id="8.10",
    title="A step with the memory full",
    reference=lambda: _shown(_full_step()),
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_full_step(with_kv=False), _full_step()):
            "that is the weights alone; with the memory full the caches are almost half the bytes read",
        slip(8 * _full_step().value, _full_step()):
            "the chips read their shares at the same time: the slice's bandwidth is all of theirs together",
    },
    book=("Text Q6",),
))


# 8.11, 8.12 --------------------------------------------------------------------

def _qps(shape=(2, 2), dtype="int8", batch=None, per_chip=True, steps=512) -> Derivation:
    B = max_batch_size(LLAMA, _v6e(shape), context=SHORT, weight_dtype=dtype) if batch is None else batch
    d = explain(requests_per_s_per_chip, LLAMA, _v6e(shape), batch=B, context=SHORT, output_tokens=steps,
                weight_dtype=dtype)
    return d if per_chip else Derivation("QPS", "slice", "", d.value * _v6e(shape).num_chips, "requests/s", (d,))


register(Exercise(
    id="8.11",
    title="Requests per second per chip, int8 on its v6e slice",
    reference=lambda: _shown(_qps()),
    unit="requests/s",
    mistakes={
        slip(_qps(per_chip=False), _qps()): "that is the slice's rate; a chip finishes its share of it",
        slip(_qps(steps=1), _qps()): "a request holds its place in the batch for all the tokens it generates, "
                                     "one per step",
    },
    book=("Text Q7",),
))


def _doubled(batch=None) -> Derivation:
    return _qps((4, 4), "bf16", batch=batch)


register(Exercise(
    id="8.12",
    title="Twice the chips in bf16: requests per second per chip on a v6e 4x4",
    reference=lambda: _shown(_doubled()),
    unit="requests/s",
    mistakes={
        slip(_qps((4, 2), "bf16"), _doubled()):
            "that keeps the 4x2's batch (or is the 4x2's rate); the 4x4's extra HBM all goes to caches (the "
            "weights are already held), so work out the batch that fits on it, and its step, again",
    },
    book=("Text Q8",),
))


# 8.13 --------------------------------------------------------------------------

MP_SLICE = (8, 16)


def _mp_batch(weight_dtype="int8", axes=None) -> Derivation:
    """Reference for 8.13: the largest batch at which all 128 chips of a v6e 8x16 still shorten a decode step."""
    topo = _v6e(MP_SLICE)
    kw = dict(weight_dtype=weight_dtype, axes=axes)
    B = 1
    while generate_model_parallel_max_degree(LLAMA, topo, batch=B + 1, **kw) >= topo.num_chips:
        B += 1
    at = explain(generate_model_parallel_max_degree, LLAMA, topo, batch=B, weight_dtype=weight_dtype, axes=axes)
    return Derivation("B*", "the largest batch with Y*(B) >= N", f"{B}: Y* = {q(at.value)}", float(B), "tokens",
                      (at,), where=("N: the 128 chips of the 8x16",))


register(Exercise(
    id="8.13",
    title="The largest batch at which all of a v6e 8x16 still speeds up a decode step",
    reference=_mp_batch,
    unit="tokens",
    integer=True,
    mistakes={
        slip(_mp_batch("bf16"), _mp_batch()):
            "a factor of 2 in the bytes: either the weights were taken as bf16 (they are int8: each shard reads "
            "fewer bytes, so the ICI time catches up with it sooner), or the activations as int8 (they are bf16)",
        slip(_mp_batch(axes="Y"), _mp_batch()):
            "a chip moves activations over both axes of the slice at once: add the two axes' bandwidths",
        slip(_mp_batch(axes="X"), _mp_batch()):
            "a chip moves activations over both axes of the slice at once: add the two axes' bandwidths",
    },
    book=("Text Q9",),
))


# 8.14 --------------------------------------------------------------------------

PROMPT = 16384


def _prefill(efficiency=0.4, factor=1.0, compute_dtype="bf16") -> Derivation:
    d = explain(prefill_time_s, LLAMA, _v6e((4, 2)), tokens=PROMPT, weight_dtype="int8", efficiency=efficiency,
                attention=False, compute_dtype=compute_dtype)
    if factor == 1:
        return d
    return Derivation("T", "", "", d.value * factor, "s", (d,))


register(Exercise(
    id="8.14",
    title="A 16k-token prefill on a v6e 4x2 at 40% MFU",
    reference=lambda: _shown(_prefill()),
    unit="s",
    mistakes={
        slip(_prefill(efficiency=1.0), _prefill()): "that is at the full peak; the kernels reach only part of it",
        slip(_prefill(factor=3), _prefill()): "that counts training's FLOPs per token (forward and backward); a "
                                              "prefill is a forward pass alone",
        slip(_prefill(compute_dtype="int8"), _prefill()):
            "the arithmetic is bf16: use the chip's bf16 peak, not its int8 rate",
    },
    book=("Text Q10",),
))


# 8.15, 8.16 --------------------------------------------------------------------

ANSWER_TOKENS = 512


def _generate_batch() -> int:
    """The generate server of 8.11: the int8 v6e slice with its memory full of 4096-token sequences."""
    return int(max_batch_size(LLAMA, _v6e((2, 2)), context=SHORT, weight_dtype="int8"))


def _freed(prompt=SHORT) -> Derivation:
    """Reference for 8.15, the prompt's tokens written T as in 8.14 and 8.16 (P is the parameters elsewhere)."""
    return rename(explain(kv_tokens_freed_per_step, _generate_batch(), prompt, ANSWER_TOKENS), {"P": "T"})


register(Exercise(
    id="8.15",
    title="KV tokens freed per generate step",
    reference=_freed,
    unit="tokens",
    mistakes={
        slip(_freed(prompt=0), _freed()): "a finished sequence frees its prompt's tokens too, not only those it "
                                          "generated",
        slip(_generate_batch() / ANSWER_TOKENS, _freed()):
            "that is sequences finished per step; each frees its whole cache",
        slip(_generate_batch() / ANSWER_TOKENS * SHORT, _freed()):
            "the batch is sized with caches of the prompt's length, but a sequence frees everything its cache holds "
            "when it finishes, not the prompt's length",
    },
    book=("Text Q11",),
))


def _ratio(batch=None, efficiency=0.4, with_kv=True, inverse=False) -> Derivation:
    v6e = _v6e((2, 2))
    B = _generate_batch() if batch is None else batch
    prefill = prefill_time_s(LLAMA, v6e, tokens=SHORT, weight_dtype="int8", efficiency=efficiency, attention=False)
    t_prefill = Derivation("T_prefill", "2·P·T / (efficiency·N·C)",
                           f"2·{q(params(LLAMA))}·{SHORT} / ({q(efficiency)}·{v6e.num_chips}·"
                           f"{q(v6e.spec.bf16_flops_per_s, 'FLOP/s')})", prefill, "s",
                           where=("T: tokens per prompt; efficiency: the share of the peak reached; N: chips; "
                                  "C: a chip's bf16 peak",))
    t_step = explain(generate_step_time_s, LLAMA, v6e, batch=_generate_batch(), context=SHORT if with_kv else 0,
                     weight_dtype="int8")
    d = explain(prefill_to_generate_ratio, t_prefill.value, t_step.value, batch=B, output_tokens=ANSWER_TOKENS)
    # the servers' ratio named in words (the library's P/G), so G is the answer's tokens as in 8.11 and 8.15
    d = rename(after(replace(d, symbol="servers_prefill / servers_generate"), t_step, t_prefill), {"G_tokens": "G"})
    return d if not inverse else Derivation("G/P", "", "", 1 / d.value, "servers", (d,))


register(Exercise(
    id="8.16",
    title="Prefill servers per generate server",
    reference=lambda: _shown(_ratio()),
    unit="servers",
    mistakes={
        slip(_ratio(batch=1), _ratio()):
            "a generate server finishes its whole batch of requests every answer's worth of steps, not one",
        slip(_ratio(efficiency=1.0), _ratio()):
            "the prefill servers reach only the share of the peak the question gives, not all of it",
        slip(_ratio(with_kv=False), _ratio()):
            "the generate step reads the caches too, not only the weights: with the memory full they are a large "
            "part of it",
        slip(_ratio(inverse=True), _ratio()): "that is generate servers per prefill server",
    },
    book=("Text Q12",),
))


# 8.17, 8.18, 8.19 --------------------------------------------------------------

FORWARD_TOKENS = 4096


def _forward(per=2.0, compute="bf16") -> Derivation:
    topo = _v6e((8, 8))
    p = explain(params, BIG)
    peak = chip(V6E).bf16_flops_per_s if compute == "bf16" else chip(V6E).int8_ops_per_s
    flops = Derivation("FLOPs", f"{q(per)}·P·T", f"{q(per)}·{q(p.value)}·{FORWARD_TOKENS}",
                       per * p.value * FORWARD_TOKENS, "FLOP", (p,),
                       where=("P: LLaMA 3.1-405B's parameters; T: the prompt's tokens; a multiply and an add per "
                              "weight and token",))
    return Derivation("T_forward", "FLOPs / (N·C)",
                      f"{q(flops.value, 'FLOP')} / ({topo.num_chips}·{q(peak, 'FLOP/s')})",
                      flops.value / (topo.num_chips * peak), "s", (flops,),
                      where=("N: the 64 chips of the v6e 8x8; C: a v6e's bf16 peak",))


register(Exercise(
    id="8.17",
    title="LLaMA 3.1-405B's forward pass of 4096 tokens on a v6e 8x8, bound by FLOPs",
    reference=lambda: _shown(_forward()),
    unit="s",
    mistakes={
        slip(_forward(6.0), _forward()): "that counts the backward pass too; serving runs the forward pass alone",
        slip(_forward(compute="int8"), _forward()): "the arithmetic is bf16: use the chip's bf16 peak, not its int8 "
                                                    "rate; or you counted one FLOP per weight and token, where a "
                                                    "multiply and an add make two",
    },
    book=("Q1",),
))


LONG = 32768


def _llama8_slice(batch=240) -> Derivation:
    return explain(min_chips, SMALL, V6E, weight_dtype="int8", batch=batch, context=LONG)


def _llama8(batch=240, chips=None) -> Derivation:
    """Reference for 8.18: how many 32k-token sequences the smallest v6e slice that holds 240 of them holds at most."""
    slice_ = _llama8_slice(batch)
    n = slice_.value if chips is None else chips
    kv = kv_cache_bytes(SMALL, tokens=LONG, dtype="int8")
    most = (n * chip(V6E).hbm_bytes - param_bytes(SMALL, dtype="int8")) // kv
    weights = q(param_bytes(SMALL, dtype="int8"), "B")
    return Derivation("B_max", "floor((N·HBM − P_bytes) / (S·kv))",
                      f"floor(({q(n)}·{q(chip(V6E).hbm_bytes, 'B')} − {weights}) / ({LONG}·{q(kv / LONG, 'B')}))",
                      float(most), "sequences", (slice_,), where=("N: the chips of that slice",))


register(Exercise(
    id="8.18",
    title="LLaMA 3-8B at batch 240 and a 32k context: what the smallest v6e slice holds",
    reference=lambda: _shown(_llama8()),
    unit="sequences",
    integer=True,
    mistakes={
        slip(_llama8(batch=0), _llama8()): "the weights fit on one chip, but 240 caches of 32k tokens do not",
        slip(_llama8(chips=_chips_worth(param_bytes(SMALL, dtype="int8")
                                        + kv_cache_bytes(SMALL, tokens=240 * LONG, dtype="int8"))), _llama8()):
            "that many chips hold it, but it is not a slice size offered: round up to the next size there is",
    },
    book=("Q2",),
))


def _fewest_for_latency(limit_s=0.015, weights_only_fit=False, hbm_chip=V6E) -> Derivation:
    for n, shape in _sizes(chip(hbm_chip)):
        topo = tpu_slice(shape, hbm_chip)
        if param_bytes(BIG, dtype="int8") > topo.total_hbm_bytes():
            continue
        t = weight_load_time_s(BIG, topo, weight_dtype="int8")
        if weights_only_fit or t <= limit_s:
            d = explain(weight_load_time_s, BIG, topo, weight_dtype="int8")
            return Derivation("chips", "smallest slice with P_bytes / (N·W_hbm) <= T_max",
                              f"{'x'.join(map(str, shape))}: {q(t, 's')}", float(n), "chips", (d,),
                              where=("T_max: the 15 ms limit",), returns=topo)
    raise AssertionError("no slice reads the weights in time")


def _batch_in_time(hbm_chip=V6E, limit_s=0.015, any_time=False) -> Derivation:
    """Reference for 8.19: the largest batch of 8k-token sequences within 15 ms on the fewest chips that can."""
    slice_ = _fewest_for_latency(hbm_chip=hbm_chip)
    topo = slice_.returns
    kw = dict(context=8192, weight_dtype="int8")
    fits = np.arange(1, max_batch_size(BIG, topo, **kw) + 1)
    steps = np.asarray(generate_step_time_s(BIG, topo, batch=fits, **kw))
    B = int(fits[-1] if any_time else fits[steps <= limit_s][-1])
    step = explain(generate_step_time_s, BIG, topo, batch=B, **kw)
    return Derivation("B", "the largest batch with T_step <= T_max", f"{B}: {q(step.value, 's')}", float(B),
                      "sequences", (slice_, step))


register(Exercise(
    id="8.19",
    title="LLaMA 3.1-405B within 15 ms per token on TPU v6e: the largest batch",
    reference=lambda: _shown(_batch_in_time()),
    unit="sequences",
    integer=True,
    mistakes={
        slip(_batch_in_time(any_time=True), _batch_in_time()):
            "that batch fits in the HBM, but its step takes longer than the limit",
        slip(_batch_in_time(hbm_chip=V5E), _batch_in_time()):
            "that is TPU v5e's answer; a v6e chip has more HBM and reads it faster",
    },
    book=("Q3",),
))


# 8.20 --------------------------------------------------------------------------

def _cost(per_slice=False) -> Derivation:
    rate = explain(tokens_per_s_per_chip, LLAMA, _v5e((4, 4)), batch=64, context=4096, weight_dtype="int8")
    r = rate.value * (16 if per_slice else 1)
    return after(explain(cost_per_million_tokens, r, V5E), rate)


register(Exercise(
    id="8.20",
    title="What a million generated tokens cost on a v5e 4x4 at batch 64",
    reference=lambda: _shown(_cost()),
    unit="USD",
    involves={"dtype"},
    mistakes={
        slip(_cost(per_slice=True), _cost()): "the price is per chip-hour: use one chip's tokens per second",
    },
))


# 8.21 --------------------------------------------------------------------------

def _weight_floor(chips=None) -> Derivation:
    """Reference for 8.21: LLaMA 3.1-405B's int8 weights read once from the HBM of a v6e 8x8 (or of `chips`)."""
    if chips is None:
        return explain(weight_load_time_s, BIG, _v6e((8, 8)), weight_dtype="int8")
    return explain(weight_load_time_s, BIG, V6E, weight_dtype="int8", num_chips=chips)


register(Exercise(
    id="8.21",
    title="LLaMA 3.1-405B's forward pass on a v6e 8x8, bound by reading its weights",
    reference=lambda: _shown(_weight_floor()),
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_weight_floor(chips=1), _weight_floor()):
            "that is one chip reading all the weights; the 64 chips each read their own share at the same time",
    },
    book=("Q1",),
))


# 8.22 --------------------------------------------------------------------------

TRT_BATCH, TRT_CHIPS = 64, 4  # 8.22: TensorRT-LLM 0.5's Llama 2 70B at batch 64, tensor parallelism 4 (trtllm-h100x4-b64)


def _llama2():
    """Llama 2 70B: LLaMA 3-70B's shape with Llama 2's vocabulary (as the inference validation table has it)."""
    return model(LLAMA).derive("Llama 2 70B", V=32000)


def _charged_allreduces() -> float:
    """What the calibrated estimate charges for a generate step's TP AllReduces: the step with every loss less the
    step without `tensor_collectives` (the first of the 128 steps, cache of the 128-token prompt; the AllReduces
    do not depend on the context)."""
    kw = dict(num_chips=TRT_CHIPS, batch=TRT_BATCH, context=128, weight_dtype="fp8", kv_dtype="fp8",
              compute_dtype="fp8")
    every = estimated_generate_step_time_s(_llama2(), "h100", **kw)
    return float(every - estimated_generate_step_time_s(_llama2(), "h100", losses=INFERENCE_LOSSES[:2], **kw))


def _allreduces(per_layer=2, latencies=2, value_bytes=2, batch=TRT_BATCH, achieved=True, ring=True,
                bytes_phases=2) -> Derivation:
    """Reference for 8.22 (and, with other arguments, its slips): L · 2 AllReduces of [B, D] in bf16 over NVLink,
    each 2α + 2·(n − 1)/n · V / (e·W_nvlink) (W alone is a chip's HBM bandwidth in this chapter's other texts)."""
    m, n, k = _llama2(), TRT_CHIPS, estimate_constants()
    W, e, alpha = chip("h100").scale_up_bytes_per_s_per_gpu, k["nvlink"]["achieved"] if achieved else 1.0, \
        k["nvlink"]["latency_s"]
    V = batch * m.D * value_bytes
    share = (n - 1) / n if ring else 1.0
    one = latencies * alpha + bytes_phases * share * V / (e * W)
    ar = Derivation("T_AR", "2·α + 2·(n − 1)/n · V / (e·W_nvlink)",
                    f"2·{q(alpha, 's')} + 2·({n} − 1)/{n} · {q(V, 'B')} / ({q(e)}·{q(W, 'B/s')})", one, "s",
                    where=(f"V: the activations [B, D] = {batch}·{m.D} values of {value_bytes} B (bf16); n: the {n} "
                           f"GPUs; W_nvlink: an H100's NVLink bandwidth, one direction; e: the share of it a collective "
                           f"achieves; α: the latency of each phase (a reduce-scatter, then an all-gather)",))
    value = m.L * per_layer * one
    if (per_layer, latencies, value_bytes, batch, achieved, ring, bytes_phases) == (2, 2, 2, TRT_BATCH, True, True, 2):
        assert abs(value / _charged_allreduces() - 1) < 1e-9, "8.22's reference no longer matches the estimate"
    return Derivation("T_collectives", "L · 2 · T_AR", f"{m.L} · 2 · {q(one, 's')}", value, "s", (ar,),
                      where=("L: layers; two AllReduces per layer, after attention and after the MLP",))


register(Exercise(
    id="8.22",
    title="The tensor-parallel AllReduces of one TensorRT-LLM generate step: Llama 2 70B at batch 64 on 4 H100s",
    reference=_allreduces,
    unit="s",
    mistakes={
        slip(_allreduces(latencies=1), _allreduces()):
            "an AllReduce here is a reduce-scatter and then an all-gather, and each phase pays its own latency",
        slip(_allreduces(latencies=0), _allreduces()):
            "each collective also pays a fixed latency to start, whatever its size: at this batch it is most of "
            "the time",
        slip(_allreduces(per_layer=1), _allreduces()):
            "a layer sums its partial outputs twice, after attention and after the MLP: two AllReduces per layer",
        slip(_allreduces(per_layer=4), _allreduces()):
            "on GPUs the chapter charges two AllReduces per layer, one after attention and one after the MLP, "
            "not four collectives",
        slip(_allreduces(bytes_phases=1), _allreduces()):
            "your bandwidth term is too small: the activations stay bf16 whatever the weights, both phases move "
            "(n − 1)/n of them, and W is one direction's NVLink bandwidth",
        slip(_allreduces(achieved=False), _allreduces()):
            "collectives reach only part of NVLink's data-sheet bandwidth: use the achieved share the chapter states",
        slip(_allreduces(ring=False), _allreduces()):
            "each phase moves (n − 1)/n of the activations through a GPU's links, not all of them",
        slip(_allreduces(batch=1), _allreduces()):
            "the AllReduce carries the activations of the whole batch, [B, D], not one sequence's",
    },
))
