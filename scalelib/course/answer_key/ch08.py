"""Chapter 8 exercises: serving LLaMA 3-70B.

Every reference is computed by scalelib (KV sizes, slices, step times, requests per chip, pools, prices);
the numbers below are only what each question gives (a batch, a context, a slice, a precision). Facts and
formulas follow ch. 8 "Serving LLaMA 3-70B on TPUs" of How to Scale Your Model (Austin et al., 2025);
``book=`` names the book's question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

import math

import numpy as np

from ..check import Exercise, register
from ._tools import after, define, slip
from .ch04 import _letters, _used
from ..._derivation import Derivation, explain, q
from ..._inference import (
    generate_model_parallel_max_degree,
    generate_step_time_s,
    max_batch_size,
    prefill_time_s,
    tokens_per_s_per_chip,
    weight_load_time_s,
)
from ..._models import model
from ..._parallelism import tensor_parallel_max_degree
from ..._roofline import critical_batch_size
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
V5E = "tpu-v5e"


def _v5e(shape):
    return tpu_slice(shape, V5E)


def _kv_letters(d: Derivation) -> Derivation:
    return define(d, {"L": "layers (80)", "K": "key/value heads (8)", "H": "the head dimension (128)"})


#: What the symbols of this chapter's derivations stand for, where a step leaves one undefined.
MEANINGS = {"B": "sequences in the batch", "S": "tokens cached per sequence", "kv": "KV bytes per token",
            "P": "the model's parameters", "w": "bytes per weight", "W": "a chip's HBM bandwidth",
            "C": "the chip's peak rate in the arithmetic's dtype", "P_active": "parameters a token uses",
            "T_prefill": "one prefill's time on a prefill server",
            "T_step": "one generate step's time on a generate server"}


def _all(d: Derivation, meanings=MEANINGS) -> Derivation:
    """`d` with the book's letters and every other symbol of `meanings` it uses defined."""
    d = _letters(d)
    return define(d, {k: v for k, v in meanings.items() if _used(d, k) and not _defined_in(d, k)})


def _defined_in(d: Derivation, symbol: str) -> bool:
    here = any(symbol in [n.strip() for part in line.split(";") for n in part.split(":")[0].split(",")]
               for line in d.where)
    return here or any(_defined_in(step, symbol) for step in d.steps)


# 8.1, 8.2 ----------------------------------------------------------------------

def _kv(dtype="int8", spec=LLAMA) -> Derivation:
    return _kv_letters(explain(kv_cache_bytes, spec, dtype=dtype))


register(Exercise(
    id="8.1",
    title="KV bytes per token of LLaMA 3-70B in int8",
    reference=_kv,
    unit="B",
    mistakes={
        slip(_kv("bf16"), _kv()): "the cache is int8 here: 1 byte per value, not bf16's 2",
        slip(kv_cache_bytes(model(LLAMA).derive("llama-3-70b-mha", K=64), dtype="int8"), _kv()):
            "only the K = 8 key/value heads are cached; the N = 64 query heads are not",
        slip(_kv().value / 2, _kv()): "each layer caches a key and a value per head: 2 vectors per head, not 1",
    },
    book=("Text Q1",),
))


def _kv_chips(dtype="int8", hbm=None) -> Derivation:
    kv = explain(kv_cache_bytes, LLAMA, tokens=240 * 32768, dtype=dtype)
    hbm = chip(V5E).hbm_bytes if hbm is None else hbm
    return Derivation("chips", "⌈B·S·kv / HBM⌉", f"⌈{q(kv.value, 'B')} / {q(hbm, 'B')}⌉",
                      float(math.ceil(kv.value / hbm)), "chips", (kv,),
                      where=("B: 240 sequences; S: 32,768 tokens each; kv: KV bytes per token (int8); "
                             "HBM: a TPU v5e's memory",))


register(Exercise(
    id="8.2",
    title="Chips just to hold 240 caches of 32k tokens",
    reference=lambda: _all(_kv_chips()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_kv_chips("bf16"), _kv_chips()): "the cache is int8: 1 byte per value",
        slip(_kv_chips(hbm=16 * 2**30), _kv_chips()): "a v5e has 16 GB (16e9 bytes) of HBM, not 16 GiB",
    },
    book=("Text Q1",),
))


# 8.3, 8.4 ----------------------------------------------------------------------

def _memory(kv_dtype="int8", with_kv=True) -> Derivation:
    w = explain(param_bytes, LLAMA, dtype="int8")
    kv = explain(kv_cache_bytes, LLAMA, tokens=32 * 8192, dtype=kv_dtype)
    total = w.value + (kv.value if with_kv else 0)
    return Derivation("memory", "P·w + B·S·kv", f"{q(w.value, 'B')} + {q(kv.value, 'B')}", total, "B", (w, kv),
                      where=("B: 32 sequences; S: 8192 tokens each; kv: KV bytes per token (int8); "
                             "w: 1 byte per int8 weight",))


register(Exercise(
    id="8.3",
    title="Memory at batch 32 and 8k context, int8",
    reference=lambda: _all(_memory()),
    unit="B",
    mistakes={
        slip(_memory(with_kv=False), _memory()): "that is the weights alone; 32 caches of 8192 tokens come on top",
        slip(_memory("bf16"), _memory()): "the KV cache is int8 too: 1 byte per value",
    },
    book=("Text Q2",),
))


def _min_chips(weight_dtype="int8", batch=32) -> Derivation:
    return explain(min_chips, LLAMA, V5E, weight_dtype=weight_dtype, batch=batch, context=8192)


register(Exercise(
    id="8.4",
    title="The smallest v5e slice for that",
    reference=lambda: _all(_min_chips()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_min_chips("bf16"), _min_chips()): "the weights are int8: 70 GB, not bf16's 141 GB",
        slip(7.0, _min_chips()): "7 chips hold it, but v5e comes in slices of 1, 4, 8, 16, ... chips",
    },
    book=("Text Q2",),
))


# 8.5, 8.6 ----------------------------------------------------------------------

def _step(shape=(4, 2), **changes) -> Derivation:
    kw = dict(batch=32, context=8192, weight_dtype="int8", **changes)
    return explain(generate_step_time_s, LLAMA, _v5e(shape), **kw)


register(Exercise(
    id="8.5",
    title="A decode step on the 4x2",
    reference=lambda: _all(_step()),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(weight_load_time_s(LLAMA, _v5e((4, 2)), weight_dtype="int8"), _step()):
            "that is the weights alone; the 32 caches are read every step too",
        slip(8 * _step().value, _step()): "the 8 chips read their shares at the same time: divide by 8 bandwidths",
    },
    book=("Text Q3",),
))


def _per_chip(shape=(4, 4)) -> Derivation:
    return explain(tokens_per_s_per_chip, LLAMA, _v5e(shape), batch=32, context=8192, weight_dtype="int8")


register(Exercise(
    id="8.6",
    title="Tokens per second per chip on a 4x4",
    reference=lambda: _all(_per_chip()),
    unit="tokens/s",
    mistakes={
        slip(16 * _per_chip().value, _per_chip()): "that is the whole slice's rate; divide by its 16 chips",
        slip(_per_chip((4, 2)).value * 2, _per_chip()): "twice the chips halve the step, but the tokens per step "
                                                        "stay 32, shared by twice as many chips",
    },
    book=("Text Q3",),
))


# 8.7, 8.8 ----------------------------------------------------------------------

def _critical(hbm_only=False) -> Derivation:
    cases = [("bf16", "bf16"), ("bf16", "int8"), ("int8", "int8")]
    values = np.array([critical_batch_size(V5E, dtype=c, weight_dtype=w) for c, w in cases])
    d0 = explain(critical_batch_size, V5E, dtype="bf16", weight_dtype="int8")
    return Derivation("[B_crit]", "(C / W) · w / x for each (weights, arithmetic)",
                      "[bf16/bf16, int8/bf16, int8/int8]", values, "tokens", (d0,),
                      where=("C: the peak rate of the arithmetic's dtype; w: bytes per weight; x: bytes per value "
                             "the arithmetic reads (2 in bf16)",))


register(Exercise(
    id="8.7",
    title="The critical batch by precision",
    reference=lambda: _all(_critical()),
    unit="tokens",
    mistakes={
        (1.0, 2.0, 1.0): "int8 weights with bf16 arithmetic read half the bytes for the same FLOPs: the threshold "
                         "halves, it does not stay at 240",
        (1.0, 1.0, 0.5): "int8 arithmetic doubles C as well as halving the bytes: back to 240",
    },
    book=("Text Q4",),
))


_PRECISIONS = ("bf16", "int8", "int4")


def _chips_worth() -> np.ndarray:
    """What 8.8's slip gives: the weights over one chip's HBM, not rounded up to a slice."""
    return np.array([param_bytes(LLAMA, dtype=w) / chip(V5E).hbm_bytes for w in _PRECISIONS])


def _slices() -> Derivation:
    values = np.array([min_chips(LLAMA, V5E, weight_dtype=w) for w in _PRECISIONS], dtype=float)
    d = explain(min_chips, LLAMA, V5E, weight_dtype="int4")
    return Derivation("[chips]", "smallest slice >= P·w / HBM for w = 2, 1, 0.5", "[bf16, int8, int4]", values,
                      "chips", (d,))


register(Exercise(
    id="8.8",
    title="The smallest slice in bf16, int8 and int4",
    reference=lambda: _all(_slices()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_chips_worth(), _slices()):
            "those are the chips' worth of bytes; v5e comes in slices of 1, 4, 8, 16, 32 chips",
    },
    book=("Text Q5",),
))


# 8.9, 8.10 ---------------------------------------------------------------------

def _largest(shape=(4, 4), dtype="bf16") -> Derivation:
    return explain(max_batch_size, LLAMA, _v5e(shape), context=8192, weight_dtype=dtype)


register(Exercise(
    id="8.9",
    title="The largest batch on the bf16 slice",
    reference=lambda: _all(_largest()),
    unit="sequences",
    integer=True,
    mistakes={
        slip(16 * 16e9 // kv_cache_bytes(LLAMA, tokens=8192, dtype="bf16"), _largest()):
            "the weights take 141 GB of the 256 GB: only the rest holds caches",
        slip(_largest(dtype="int8"), _largest()): "everything is bf16 here, the cache too: 2 bytes per value",
    },
    book=("Text Q5",),
))


def _full_step(with_kv=True) -> Derivation:
    B = max_batch_size(LLAMA, _v5e((4, 4)), context=8192, weight_dtype="bf16")
    return explain(generate_step_time_s, LLAMA, _v5e((4, 4)), batch=B, context=8192 if with_kv else 0,
                   weight_dtype="bf16")


register(Exercise(
    id="8.10",
    title="A step with the memory full",
    reference=lambda: _all(_full_step()),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_full_step(with_kv=False), _full_step()):
            "that is the weights alone; with the memory full the caches are almost half the bytes read",
    },
    book=("Text Q6",),
))


# 8.11, 8.12 --------------------------------------------------------------------

def _qps(shape=(4, 2), dtype="int8", batch=None, per_chip=True) -> Derivation:
    B = max_batch_size(LLAMA, _v5e(shape), context=8192, weight_dtype=dtype) if batch is None else batch
    d = explain(requests_per_s_per_chip, LLAMA, _v5e(shape), batch=B, context=8192, output_tokens=512,
                weight_dtype=dtype)
    return d if per_chip else Derivation("QPS", "slice", "", d.value * _v5e(shape).num_chips, "requests/s", (d,))


register(Exercise(
    id="8.11",
    title="Requests per second per chip, int8 on a 4x2",
    reference=lambda: _all(_qps()),
    unit="requests/s",
    mistakes={
        slip(_qps(per_chip=False), _qps()): "that is the slice's rate; divide by its 8 chips",
        slip(_qps().value * 512, _qps()): "a request holds its slot for 512 steps, not one",
    },
    book=("Text Q7",),
))


def _doubled(batch=None) -> Derivation:
    return _qps((4, 8), "bf16", batch=batch)


register(Exercise(
    id="8.12",
    title="Twice the chips in bf16: requests per second per chip on a 4x8",
    reference=lambda: _all(_doubled()),
    unit="requests/s",
    mistakes={
        slip(_doubled(batch=max_batch_size(LLAMA, _v5e((4, 4)), context=8192, weight_dtype="bf16")), _doubled()):
            "that keeps the 4x4's batch (or is the 4x4's rate); the 4x8's extra 256 GB all go to caches, so "
            "the batch grows about 3.2-fold while the step grows much less",
    },
    book=("Text Q8",),
))


# 8.13 --------------------------------------------------------------------------

def _mp_degree() -> Derivation:
    return explain(generate_model_parallel_max_degree, LLAMA, _v5e((4, 8)), batch=64)


register(Exercise(
    id="8.13",
    title="How many chips model parallelism can use at batch 64",
    reference=_mp_degree,
    unit="chips",
    mistakes={
        slip(tensor_parallel_max_degree(model(LLAMA).F, _v5e((4, 8))), _mp_degree()):
            "that is the compute-bound limit of prefill and training (F·W / C); a decode step is bound by HBM, "
            "so compare the ICI time with the time to read the weight shard instead",
    },
    book=("Text Q9",),
))


# 8.14 --------------------------------------------------------------------------

def _prefill(efficiency=0.4, factor=1) -> Derivation:
    d = explain(prefill_time_s, LLAMA, _v5e((4, 4)), tokens=8192, weight_dtype="int8", efficiency=efficiency,
                attention=False)
    if factor == 1:
        return d
    return Derivation("T", "", "", d.value * factor, "s", (d,))


register(Exercise(
    id="8.14",
    title="An 8192-token prefill on a 4x4 at 40% MFU",
    reference=lambda: _all(_prefill()),
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_prefill(efficiency=1.0), _prefill()): "that is at the full peak; the kernels reach only 40% of it",
        slip(_prefill(factor=3), _prefill()): "6·P FLOPs per token is training's; a forward pass alone is 2·P",
    },
    book=("Text Q10",),
))


# 8.15, 8.16 --------------------------------------------------------------------

def _freed(prompt=8192) -> Derivation:
    return explain(kv_tokens_freed_per_step, 32, prompt, 4096)


register(Exercise(
    id="8.15",
    title="KV tokens freed per generate step",
    reference=_freed,
    unit="tokens",
    mistakes={
        slip(_freed(prompt=0), _freed()): "a finished sequence frees its prompt's 8192 tokens too, not only the "
                                          "4096 it generated",
        slip(32 / 4096, _freed()): "that is sequences finished per step; each frees its whole cache",
    },
    book=("Text Q11",),
))


def _ratio(batch=43) -> Derivation:
    return explain(prefill_to_generate_ratio, 0.91, 0.019, batch=batch, output_tokens=512)


register(Exercise(
    id="8.16",
    title="Prefill servers per generate server",
    reference=lambda: _all(_ratio()),
    unit="servers",
    mistakes={
        slip(_ratio(batch=1), _ratio()): "a generate server finishes 43 requests every 512 steps, not one",
        slip(_ratio(batch=32), _ratio()): "the 19 ms step is that of a batch of 43, not 32",
    },
    book=("Text Q12",),
))


# 8.17, 8.18, 8.19 --------------------------------------------------------------

def _forward(per=2) -> Derivation:
    p = explain(params, "llama-3.1-405b")
    return Derivation("FLOPs/token", f"{per}·P", f"{per}·{q(p.value)}", per * p.value, "FLOP", (p,),
                      where=("P: LLaMA 3.1-405B's parameters; a multiply and an add per weight",))


register(Exercise(
    id="8.17",
    title="LLaMA 3-405B's FLOPs per token",
    reference=lambda: _all(_forward()),
    unit="FLOP",
    mistakes={
        slip(_forward(6), _forward()): "6·P counts the backward pass too; serving runs the forward pass alone",
    },
    book=("Q1",),
))


def _llama8(batch=240) -> Derivation:
    return explain(min_chips, "llama-3-8b", V5E, weight_dtype="int8", batch=batch, context=8192)


register(Exercise(
    id="8.18",
    title="LLaMA 3-8B at batch 240: the smallest slice",
    reference=lambda: _all(_llama8()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_llama8(batch=0), _llama8()): "8 GB of weights fit on one chip, but 240 caches of 8192 tokens do not",
        slip(explain(min_chips, "llama-3-8b", V5E, weight_dtype="int8", kv_dtype="bf16", batch=240, context=8192),
             _llama8()): "the cache is int8 too: 1 byte per value",
    },
    book=("Q2",),
))


def _fewest_for_latency(limit_s=0.015, weights_only_fit=False) -> Derivation:
    for n, shape in _sizes(chip(V5E)):
        topo = _v5e(shape)
        if param_bytes("llama-3.1-405b", dtype="int8") > topo.total_hbm_bytes():
            continue
        t = weight_load_time_s("llama-3.1-405b", topo, weight_dtype="int8")
        if weights_only_fit or t <= limit_s:
            d = explain(weight_load_time_s, "llama-3.1-405b", topo, weight_dtype="int8")
            return Derivation("chips", "smallest slice with P·w / (N·W_hbm) <= T_max",
                              f"{'x'.join(map(str, shape))}: {q(t, 's')}", float(n), "chips", (d,),
                              where=("T_max: the 15 ms limit; W_hbm: a chip's HBM bandwidth; N: chips",))
    raise AssertionError("no v5e slice reads the weights in time")


register(Exercise(
    id="8.19",
    title="LLaMA 3-405B within 15 ms per token",
    reference=lambda: _all(_fewest_for_latency()),
    unit="chips",
    integer=True,
    mistakes={
        slip(_fewest_for_latency(weights_only_fit=True), _fewest_for_latency()):
            "that slice holds the weights, but reading them once already takes more than 15 ms",
    },
    book=("Q3",),
))


# 8.20 --------------------------------------------------------------------------

def _cost(per_slice=False) -> Derivation:
    rate = explain(tokens_per_s_per_chip, LLAMA, _v5e((4, 2)), batch=32, context=8192, weight_dtype="int8")
    r = rate.value * (8 if per_slice else 1)
    return after(explain(cost_per_million_tokens, r, V5E), rate)


register(Exercise(
    id="8.20",
    title="What a million generated tokens cost on the 4x2",
    reference=lambda: _all(_cost()),
    unit="USD",
    mistakes={
        slip(_cost(per_slice=True), _cost()): "the price is per chip-hour: use one chip's tokens per second",
    },
))
