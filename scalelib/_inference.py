"""Inference (chapter 7): how long a prefill and a generate step take, and how many tokens a chip serves.

A generate step pushes one token per sequence through the whole model: it reads every weight once
(``P_bytes``), every sequence's KV cache once (``B·S·kv`` bytes for B sequences of S cached tokens), and
does ``2·P`` FLOPs per token. Attention on the cache is always bound by memory bandwidth; the matmuls are
bound by memory until the batch passes the critical batch, then by compute. Over N chips of peak rate C
and HBM bandwidth W, with everything sharded (How to Scale Your Model, ch. 7):

    T_step = B·S·kv / (N·W)  +  max(2·B·P / (N·C),  P_bytes / (N·W))

A prefill is a forward pass over the whole prompt, like training's, and compute-bound past a few hundred
tokens. Every function takes the model as a name (``"llama-3-70b"``), a :class:`~scalelib.ModelSpec`, or a
plain parameter count (the book's "a 30B dense model"), which then needs ``kv_bytes_per_token``; and the
hardware as a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip with ``num_chips``.
A batch and a context may be numpy arrays (a sweep is one call); ``explain`` shows the derivation.
The fleet (smallest slices, requests per chip, prefill and generate pools, cost) is in :mod:`._serving`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError
from ._calibration import INFERENCE_LOSSES
from ._models import ModelSpec, model as _model
from ._specs import ChipSpec, bytes_per_value, chip as _chip, dtype_name
from ._topology import GpuCluster, TpuSlice
from ._transformer import forward_flops, kv_cache_bytes, params as _params
from ._units import fmt
from ._validate import broadcast, count, flag, name, nonnegative, number, positive, share, shown

#: How a decode step's attention kernel reads the KV cache (:func:`estimated_generate_step_time_s`).
ATTENTION_KERNELS = ("grouped", "per_query_head")


# --- what is served, and on what ------------------------------------------------------------------


def _hardware(topology, num_chips, *, arg="topology") -> tuple[ChipSpec, int, str]:
    """(chip spec, chips, text) of a slice, a cluster, or `num_chips` chips of one kind (`arg`: the caller's name)."""
    if isinstance(topology, (TpuSlice, GpuCluster)):
        if num_chips is not None:
            raise InvalidValueError(f"`num_chips`: {topology!r} already has {topology.num_chips} chips; give "
                                    f"`num_chips` only with a chip name (e.g. 'h100', num_chips=2)")
        return topology.spec, topology.num_chips, repr(topology)
    if isinstance(topology, (str, ChipSpec)):
        spec = _chip(topology, arg=arg)
        n = 1 if num_chips is None else count("num_chips", num_chips)
        return spec, n, f"{n} x {spec.name}"
    raise InvalidValueError(f"`{arg}` must be a TpuSlice (tpu_slice(...)), a GpuCluster (gpu_cluster(...)) or "
                            f"a chip name such as 'h100' (with num_chips=...), got {shown(topology)}")


@functools.lru_cache(maxsize=256)
def _model_derivations(spec: ModelSpec, kv_dtype) -> tuple[Derivation, Derivation, Derivation]:
    """(total parameters, active parameters, KV bytes per token) of `spec`: the derivations :class:`_Served` holds."""
    total = explain(_params, spec)
    active = explain(_params, spec, active=True) if spec.is_moe else total
    return total, active, explain(kv_cache_bytes, spec, dtype=kv_dtype)


class _Served:
    """A model as inference sees it: parameter counts, and the KV bytes one token adds."""

    def __init__(self, model, kv_bytes_per_token, kv_dtype, *, arg="model", kv_arg="kv_bytes_per_token"):
        if isinstance(model, (str, ModelSpec)):
            self.spec = _model(model, arg=arg)
            self.name = self.spec.name
            if kv_bytes_per_token is not None:
                raise InvalidValueError(f"`{kv_arg}`: {self.name}'s KV cache follows from its shape and "
                                        f"`kv_dtype`; give `{kv_arg}` only with a parameter count as `{arg}`")
            if kv_dtype is None or type(kv_dtype) is str:  # the usual case: derived once per model and dtype
                self.total, self.active, self.kv = _model_derivations(self.spec, kv_dtype)
            else:
                self.total, self.active, self.kv = _model_derivations.__wrapped__(self.spec, kv_dtype)
            return
        if isinstance(model, (bool, np.bool_)) or not isinstance(model, (int, float, np.integer, np.floating)):
            raise InvalidValueError(f"`{arg}` must be a model name (e.g. 'llama-3-70b'), a ModelSpec or a parameter "
                                    f"count (e.g. 30e9), got {shown(model)}")
        count_ = number(arg, model, positive=True)
        self.spec, self.name = None, f"the {fmt(count_, '')}-parameter model"
        if kv_bytes_per_token is None:
            raise InvalidValueError(f"`{kv_arg}`: a model given as a parameter count (`{arg}` = {shown(model)}) "
                                    f"needs the bytes its KV cache stores per token (0 to leave the cache out)")
        kv = nonnegative(kv_arg, kv_bytes_per_token)
        if np.ndim(kv):
            raise InvalidValueError(f"`{kv_arg}` must be one number of bytes, got {shown(kv_bytes_per_token)}")
        # the same meanings as the step's and the weights' own lines: one symbol, one meaning in a derivation
        self.total = self.active = Derivation("P", "given", "", count_, "params",
                                              where=(f"P: parameters of {self.name}",))
        self.kv = Derivation("kv", "given", "", kv, "B", where=("kv: KV bytes per token",))

    def weight_bytes(self, weight_dtype) -> Derivation:
        w = bytes_per_value(weight_dtype)
        return Derivation(f"P_bytes ({dtype_name(weight_dtype)})", "P · w", f"{q(self.total.value)} · {q(w)}",
                          self.total.value * w, "B", (self.total,),
                          where=(f"P: parameters of {self.name}; w: bytes per weight",))


def _dtypes(weight_dtype, kv_dtype, compute_dtype, spec: ChipSpec | None = None):
    """The dtypes' names; `compute_dtype` checked to have a peak rate on `spec` (when given: the arithmetic runs there)."""
    w = dtype_name(weight_dtype, arg="weight_dtype")
    kv = w if kv_dtype is None else dtype_name(kv_dtype, arg="kv_dtype")
    if spec is None:
        c = dtype_name(compute_dtype, arg="compute_dtype")
    else:
        c = spec._rate_dtype(compute_dtype, arg="compute_dtype")
    return w, kv, c


def _check_weights_fit(served: _Served, weights: Derivation, spec: ChipSpec, n: int, where: str) -> float:
    hbm = spec._require("hbm_bytes", "fitting a model in memory") * n
    if weights.value > hbm:
        need = math.ceil(weights.value / spec.hbm_bytes)
        raise InvalidValueError(
            f"{served.name} does not fit on {where}: its weights take {fmt(weights.value, 'B')}, the chips have "
            f"{fmt(hbm, 'B')} of HBM in all; it needs at least {need} {spec.name} chips (or smaller weights: "
            f"weight_dtype='int8' halves bf16's)")
    return hbm


def _batch_and_context(batch, context):
    B = positive("batch", batch)
    S = nonnegative("context", context)
    B, S = broadcast(batch=B, context=S)
    return plain(B), plain(S)


# --- one chip's (or one slice's) floors -----------------------------------------------------------


@derivable
def weight_load_time_s(model, topology, *, weight_dtype="bf16", num_chips=None):
    """Time to stream every weight from HBM once, over all the chips: the floor of a generate step.

    However small the batch, each generate step reads all the parameters; with them sharded over N
    chips, each chip reads its 1/N at its own HBM bandwidth. For an MoE every expert is counted
    (a large batch touches them all).

    Formula:
        T_weights = P · w / (N · W_hbm)

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count.
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        weight_dtype: the dtype the weights are stored in (w bytes each).
        num_chips: with a chip name, how many chips share the weights (1 by default).

    Returns:
        seconds (s).

    Chapter:
        7 (Inference)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(weight_load_time_s(18.4e9, tpu_slice((4, 4), "tpu-v5e"), weight_dtype="int8"), "s")   # the book's Q3
        '1.4 ms'
    """
    spec, n, where = _hardware(topology, num_chips)
    served = _Served(model, 0.0 if not isinstance(model, (str, ModelSpec)) else None, "bf16")
    weights = served.weight_bytes(dtype_name(weight_dtype, arg="weight_dtype"))
    W = explain(spec.bytes_per_s, bandwidth="hbm")
    return Derivation("T_weights", "P_bytes / (N · W_hbm)",
                      lambda: f"{q(weights.value, 'B')} / ({n} · {q(W.value, 'B/s')})",
                      weights.value / (n * W.value), "s", (weights,),
                      where=(f"N: {n} {spec.name} chips ({where}); W_hbm: one chip's HBM bandwidth",))


def _step(model, topology, batch, context, weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token,
          tokens_per_step, num_chips, check_memory, symbol="T_step", model_arg="model",
          kv_arg="kv_bytes_per_token") -> Derivation:
    spec, n, where = _hardware(topology, num_chips)
    w, kvd, c = _dtypes(weight_dtype, kv_dtype, compute_dtype, spec)
    served = _Served(model, kv_bytes_per_token, kvd, arg=model_arg, kv_arg=kv_arg)
    B, S = _batch_and_context(batch, context)
    t = count("tokens_per_step", tokens_per_step)
    check_memory = flag("check_memory", check_memory)
    weights = served.weight_bytes(w)
    hbm = _check_weights_fit(served, weights, spec, n, where)
    kv_bytes = np.asarray(B) * np.asarray(S) * served.kv.value
    if check_memory and np.any(weights.value + kv_bytes > hbm):
        Bs, Ss = np.broadcast_arrays(np.asarray(B), np.asarray(S))
        bad = np.flatnonzero(np.ravel(weights.value + kv_bytes > hbm))[0]
        b_bad, s_bad = float(np.ravel(Bs)[bad]), float(np.ravel(Ss)[bad])
        largest = int(np.floor((hbm - weights.value) / (s_bad * served.kv.value)))
        raise InvalidValueError(
            f"batch {q(b_bad)} at context {q(s_bad)} does not fit on {where}: its KV caches take "
            f"{fmt(b_bad * s_bad * served.kv.value, 'B')} beside {fmt(weights.value, 'B')} of weights, and the chips "
            f"have {fmt(hbm, 'B')} of HBM; the largest batch that fits is {largest} (max_batch_size). Pass "
            f"check_memory=False for the time such a batch would take on chips with more memory")
    W = explain(spec.bytes_per_s, bandwidth="hbm")
    C = explain(spec.peak_flops_per_s, dtype=c)
    t_kv = kv_bytes / (n * W.value)
    t_flops = 2 * np.asarray(B) * t * served.active.value / (n * C.value)
    t_weights = weights.value / (n * W.value)
    value = plain(t_kv + np.maximum(t_flops, t_weights))
    tokens = "B" if t == 1 else f"B·{t}"
    steps = (weights, served.kv) + ((served.active,) if served.active is not served.total else ())
    return Derivation(
        symbol, f"B·S·kv / (N·W) + max(2·{tokens}·P_active / (N·C), P_bytes / (N·W))",
        lambda: (f"{q(B)}·{q(S)}·{q(served.kv.value, 'B')} / ({n}·{q(W.value, 'B/s')}) + max(2·{q(B)}"
                 + (f"·{t}" if t > 1 else "") + f"·{q(served.active.value)} / ({n}·{q(C.value, 'FLOP/s')}), "
                 f"{q(weights.value, 'B')} / ({n}·{q(W.value, 'B/s')}))"),
        value, "s", steps,
        where=(f"B: sequences in the batch; S: tokens cached per sequence; kv: KV bytes per token"
               + (f" ({kvd})" if served.spec is not None else "") + "; "
               f"N: {n} {spec.name} chips ({where}); W: a chip's HBM bandwidth; C: its {c} peak; P_active: "
               f"parameters a token uses" + (f"; {t} tokens per sequence per step" if t > 1 else ""),))


@derivable
def generate_step_time_s(model, topology, *, batch, context, weight_dtype="bf16", kv_dtype=None,
                         compute_dtype="bf16", kv_bytes_per_token=None, tokens_per_step=1, num_chips=None,
                         check_memory=True):
    """Time of one generate (decode) step: each of `batch` sequences adds a token, over a cache of `context` tokens.

    Reading the KV caches is always memory-bound; the matmuls take the longer of their FLOPs and
    reading the weights (the book's general estimate, everything fully sharded and perfectly overlapped,
    communication left out; see :func:`generate_comms_time_s`). ``tokens_per_step`` > 1 scores several
    tokens per sequence in one pass (verifying drafted tokens in speculative decoding): more FLOPs, the
    same bytes.

    Formula:
        T_step = B·S·kv / (N·W) + max(2·B·P_active / (N·C), P·w / (N·W))

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count (then give `kv_bytes_per_token`).
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        batch: B, sequences generating together (> 0; an array for a sweep).
        context: S, tokens in each sequence's KV cache (>= 0).
        weight_dtype: dtype of the weights (w bytes each).
        kv_dtype: dtype of the KV cache; defaults to `weight_dtype`.
        compute_dtype: dtype of the arithmetic, which sets C (int8 weights are often multiplied in bf16).
        kv_bytes_per_token: the KV bytes per token, for a model given as a parameter count.
        tokens_per_step: tokens each sequence puts through the model in one step (1 when decoding).
        num_chips: with a chip name, how many chips share the model.
        check_memory: raise if the weights and the KV caches do not fit in HBM (the weights must always fit).

    Returns:
        seconds (s).

    Chapter:
        7 (Inference)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> v5e = tpu_slice((4, 4), "tpu-v5e")      # the book's pop quiz: 30B params, int8, 100 kB per token
        >>> fmt(generate_step_time_s(30e9, v5e, batch=4, context=8192, weight_dtype="int8",
        ...                          kv_bytes_per_token=100e3), "s")
        '2.54 ms'
    """
    return _step(model, topology, batch, context, weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token,
                 tokens_per_step, num_chips, check_memory)


@derivable
def tokens_per_s_per_chip(model, topology, *, batch, context, weight_dtype="bf16", kv_dtype=None,
                          compute_dtype="bf16", kv_bytes_per_token=None, num_chips=None, check_memory=True):
    """Generation throughput per chip: the batch's new tokens per step, over the step time and the chips.

    It grows with the batch until the matmuls turn compute-bound (the critical batch), then flattens,
    or falls where the KV caches dominate the bytes read.

    Formula:
        tokens/s/chip = B / (T_step · N)

    Args:
        model, topology, batch, context: as in :func:`generate_step_time_s`.
        weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token, num_chips, check_memory: as there too.

    Returns:
        tokens/s per chip.

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice
        >>> round(tokens_per_s_per_chip("llama-3-70b", tpu_slice((4, 2), "tpu-v5e"), batch=32, context=8192,
        ...                             weight_dtype="int8"))
        231
    """
    step = _step(model, topology, batch, context, weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token, 1,
                 num_chips, check_memory)
    spec, n, _ = _hardware(topology, num_chips)
    B = positive("batch", batch)
    return Derivation("tokens/s/chip", "B / (T_step · N)", lambda: f"{q(B)} / ({q(step.value, 's')} · {n})",
                      plain(np.asarray(B) / (np.asarray(step.value) * n)), "tokens/s", (step,))


@derivable
def prefill_time_s(model, topology, *, tokens, batch=1, weight_dtype="bf16", compute_dtype="bf16",
                   efficiency=1.0, attention=None, num_chips=None):
    """Time to prefill `batch` prompts of `tokens` tokens each: one forward pass, usually compute-bound.

    The FLOPs are the book's 2 per parameter per token (the active ones for an MoE), plus causal
    dot-product attention when the model's shape is known (``attention=None`` or True; False gives the
    book's 2·P·T alone). The weights must still be read once, which binds only for very short prompts.
    `efficiency` is the share of the peak the arithmetic reaches (the book assumes 40% for prefill).

    Formula:
        T_prefill = max((2·P_active·B·T + F_attention) / (efficiency · N · C), P·w / (N · W))

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count.
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        tokens: T, tokens per prompt (>= 1; an array for a sweep).
        batch: B, prompts prefilled together (> 0).
        weight_dtype: dtype of the weights (w bytes each).
        compute_dtype: dtype of the arithmetic (sets C).
        efficiency: share of the peak FLOP/s reached, in (0, 1] (the MFU).
        attention: count causal dot-product attention's FLOPs (None: when the shape is known).
        num_chips: with a chip name, how many chips share the work.

    Returns:
        seconds (s).

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(prefill_time_s(70e9, tpu_slice((4, 4), "tpu-v5e"), tokens=8192, efficiency=0.4), "s")  # the book
        '910 ms'
    """
    spec, n, where = _hardware(topology, num_chips)
    served = _Served(model, 0.0 if not isinstance(model, (str, ModelSpec)) else None, "bf16")
    T = number("tokens", tokens, positive=True, at_least=1)
    B = positive("batch", batch)
    w, _, c = _dtypes(weight_dtype, None, compute_dtype, spec)
    eff = share("efficiency", efficiency)
    if attention is None:
        attention = served.spec is not None
    attention = flag("attention", attention)
    if attention and served.spec is None:
        raise InvalidValueError(f"`attention`: a model given as a parameter count (`model` = {shown(model)}) has no "
                                f"shape to count attention with; pass attention=False (the book's 2·P·T) or give the "
                                f"model's name")
    weights = served.weight_bytes(w)
    _check_weights_fit(served, weights, spec, n, where)
    W = explain(spec.bytes_per_s, bandwidth="hbm")
    C = explain(spec.peak_flops_per_s, dtype=c)
    matmul = 2 * served.active.value * np.asarray(B) * np.asarray(T)
    steps = [weights, served.active]
    if attention:
        att = explain(forward_flops, served.spec, seq_len=T, tokens=np.asarray(B) * np.asarray(T),
                      component="dot_product", causal=True)
        steps.append(att)
        flops, formula = matmul + np.asarray(att.value), "(2·P_active·B·T + F_attention)"
    else:
        flops, formula = matmul, "2·P_active·B·T"
    t_math = flops / (eff * n * C.value)
    t_weights = weights.value / (n * W.value)
    denominator = f"({q(eff)}·{n}·{q(C.value, 'FLOP/s')})" if eff != 1 else f"({n}·{q(C.value, 'FLOP/s')})"
    formula_math = f"{formula} / (efficiency·N·C)" if eff != 1 else f"{formula} / (N·C)"
    return Derivation(
        "T_prefill", f"max({formula_math}, P_bytes / (N·W))",
        lambda: f"max({q(flops, 'FLOP')} / {denominator}, {q(weights.value, 'B')} / ({n}·{q(W.value, 'B/s')}))",
        plain(np.maximum(t_math, t_weights)), "s", tuple(steps),
        where=(f"B: prompts; T: tokens per prompt; N: {n} {spec.name} chips ({where}); C: a chip's {c} peak; "
               f"W: its HBM bandwidth" + ("; F_attention: causal dot-product attention's FLOPs" if attention else ""),))


@derivable
def max_batch_size(model, topology, *, context, weight_dtype="bf16", kv_dtype=None, kv_bytes_per_token=None,
                   reserve_bytes=0.0, num_chips=None):
    """The largest batch of sequences of `context` tokens whose KV caches fit in HBM beside the weights.

    Everything is assumed sharded over all the chips (the KV cache too), and `reserve_bytes` (in all) are
    kept for activations and the runtime. A model whose weights do not fit is an error.

    Formula:
        B_max = floor((N·HBM − P·w − reserve) / (S·kv))

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count (then give `kv_bytes_per_token`).
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        context: S, tokens cached per sequence (> 0; an array for a sweep).
        weight_dtype: dtype of the weights (w bytes each).
        kv_dtype: dtype of the KV cache; defaults to `weight_dtype`.
        kv_bytes_per_token: the KV bytes per token, for a model given as a parameter count.
        reserve_bytes: HBM kept free for everything else, over all the chips (B, >= 0).
        num_chips: with a chip name, how many chips.

    Returns:
        sequences (a whole number).

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice
        >>> max_batch_size(18.4e9, tpu_slice((4, 4), "tpu-v5e"), context=128_000, weight_dtype="int8",
        ...                kv_bytes_per_token=262e3)            # the book's Q2
        7.0
    """
    spec, n, where = _hardware(topology, num_chips)
    w, kvd, _ = _dtypes(weight_dtype, kv_dtype, "bf16")
    served = _Served(model, kv_bytes_per_token, kvd)
    S = positive("context", context)
    reserve = nonnegative("reserve_bytes", reserve_bytes)
    if np.ndim(reserve):
        raise InvalidValueError(f"`reserve_bytes` must be one number of bytes, got {shown(reserve_bytes)}")
    weights = served.weight_bytes(w)
    hbm = _check_weights_fit(served, weights, spec, n, where)
    free = hbm - weights.value - reserve
    if free < 0:
        raise InvalidValueError(f"`reserve_bytes`: {fmt(reserve, 'B')} kept free leaves no room beside the "
                                f"{fmt(weights.value, 'B')} of weights in {fmt(hbm, 'B')} of HBM on {where}")
    if served.kv.value == 0:
        raise InvalidValueError("max_batch_size: a KV cache of 0 bytes per token never fills the memory; "
                                "give the model's KV bytes per token")
    per_sequence = np.asarray(S) * served.kv.value
    value = plain(np.floor(free / per_sequence))
    reserve_text = f" − {q(reserve, 'B')}" if reserve else ""
    return Derivation("B_max", "floor((N·HBM − P_bytes" + (" − reserve" if reserve else "") + ") / (S·kv))",
                      lambda: f"floor(({n}·{q(spec.hbm_bytes, 'B')} − {q(weights.value, 'B')}{reserve_text}) / "
                              f"({q(S)}·{q(served.kv.value, 'B')}))",
                      value, "sequences", (weights, served.kv),
                      where=(f"N: {n} {spec.name} chips ({where}); HBM: a chip's memory; S: tokens cached per "
                             f"sequence; kv: KV bytes per token ({kvd})",))


@derivable
def max_batch_within_latency(model, topology, *, latency_s, context, weight_dtype="bf16", kv_dtype=None,
                             compute_dtype="bf16", kv_bytes_per_token=None, num_chips=None):
    """The largest batch whose generate step takes at most `latency_s` and whose KV caches fit in HBM.

    A step's time grows with the batch (:func:`generate_step_time_s`), so a latency target per token
    caps the batch; so does memory (:func:`max_batch_size`). The answer is the smaller cap: the batch
    that gives the most tokens per second while every sequence still gets a token every `latency_s`.
    Since ``T_step = max(B·(a + b), B·a + c)`` with a = S·kv/(N·W), b = 2·P_active/(N·C) and
    c = P_bytes/(N·W), both terms must stay under the target.

    Formula:
        B = min(floor(L / (a + b)), floor((L − c) / a), B_max)

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count (then give `kv_bytes_per_token`).
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        latency_s: L, the longest a generate step may take (s, > 0): the time between a sequence's tokens.
        context: S, tokens cached per sequence (> 0).
        weight_dtype: dtype of the weights.
        kv_dtype: dtype of the KV cache; defaults to `weight_dtype`.
        compute_dtype: dtype of the arithmetic, which sets C.
        kv_bytes_per_token: the KV bytes per token, for a model given as a parameter count.
        num_chips: with a chip name, how many chips share the model.

    Returns:
        sequences (a whole number, at least 1).

    Chapter:
        7 (Inference), 11 (Capstone)

    Example:
        >>> from scalelib import tpu_slice
        >>> max_batch_within_latency("llama-3-70b", tpu_slice((4, 4), "tpu-v5e"), latency_s=0.05,
        ...                          context=4096, weight_dtype="int8", kv_dtype="bf16")   # memory binds first
        138.0
    """
    spec, n, where = _hardware(topology, num_chips)
    w, kvd, c = _dtypes(weight_dtype, kv_dtype, compute_dtype, spec)
    served = _Served(model, kv_bytes_per_token, kvd)
    L = positive("latency_s", latency_s)
    S = positive("context", context)
    if np.ndim(L) or np.ndim(S):
        raise InvalidValueError(f"max_batch_within_latency takes one `latency_s` and one `context`, got "
                                f"{shown(latency_s)} and {shown(context)}")
    memory = explain(max_batch_size, model, topology, context=S, weight_dtype=w, kv_dtype=kvd,
                     kv_bytes_per_token=kv_bytes_per_token, num_chips=num_chips)
    weights = served.weight_bytes(w)
    W = spec.bytes_per_s(bandwidth="hbm")
    C = spec.peak_flops_per_s(dtype=c)
    a = S * served.kv.value / (n * W)
    b = 2 * served.active.value / (n * C)
    floor_s = weights.value / (n * W)
    one = explain(generate_step_time_s, model, topology, batch=1, context=S, weight_dtype=w, kv_dtype=kvd,
                  compute_dtype=c, kv_bytes_per_token=kv_bytes_per_token, num_chips=num_chips, check_memory=False)
    if one.value > L or memory.value < 1:
        why = (f"even a batch of 1 takes {fmt(one.value, 's')} a step" if one.value > L else
               f"not one sequence of {q(S)} tokens fits beside the weights")
        raise InvalidValueError(f"`latency_s`: no batch meets {fmt(L, 's')} on {where}: {why}; use more chips, "
                                f"smaller weights or a longer target")
    by_compute = math.floor(L / (a + b) * (1 + 1e-12))
    by_memory_reads = math.floor((L - floor_s) / a * (1 + 1e-12)) if a > 0 else math.inf
    value = float(min(by_compute, by_memory_reads, memory.value))
    return Derivation(
        "B_latency", "min(floor(L / (a + b)), floor((L − P_bytes/(N·W)) / a), B_max)",
        lambda: (f"min(floor({q(L, 's')} / ({q(a, 's')} + {q(b, 's')})), floor(({q(L, 's')} − "
                 f"{q(floor_s, 's')}) / {q(a, 's')}), {q(memory.value)})"),
        value, "sequences", (weights, served.kv, memory, one),
        where=(f"L: the step-time target; a: S·kv/(N·W), the time to read one sequence's KV cache; b: "
               f"2·P_active/(N·C), the time of one sequence's matmuls; N: {n} {spec.name} chips ({where}); W: HBM "
               f"bandwidth; C: the {c} peak",))


# --- model parallelism during generation -----------------------------------------------------------


@derivable
def generate_comms_time_s(model, topology, *, batch, axes=None, dtype="bf16", tokens_per_step=1):
    """ICI time of one generate step under 1D model (Megatron) parallelism, latency included.

    Each layer's attention block and MLP block gathers the activations In[B, D] over the model axes
    before its first matmul and reduce-scatters Out[B, D] after its last: four collectives of
    V = B·D·x bytes per layer. Each costs what :func:`~scalelib.allgather_time_s` says, at least the
    hops' latency (about 1 µs each), so small batches are latency-bound: the book's 45 kB per shard on
    TPU v5e. Compare the result with :func:`weight_load_time_s` to see whether more chips still help.

    Formula:
        T_ici = L · 2 · (T_AllGather(V) + T_ReduceScatter(V)),   V = B·D·x

    Args:
        model: a model name or a :class:`~scalelib.ModelSpec`.
        topology: a :class:`~scalelib.TpuSlice` (or a :class:`~scalelib.GpuCluster`: the collectives run over all its GPUs).
        batch: B, sequences in the step (> 0).
        axes: on a TPU slice, the axes the model is sharded over (all by default).
        dtype: dtype of the activations (x bytes each).
        tokens_per_step: tokens per sequence in the step (1 when decoding).

    Returns:
        seconds (s).

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(generate_comms_time_s("llama-3-70b", tpu_slice((4, 4), "tpu-v5e"), batch=32), "s")
        '1.92 ms'
    """
    from ._collectives import allgather_time_s, reducescatter_time_s

    m = _model(model)
    B = positive("batch", batch)
    t = count("tokens_per_step", tokens_per_step)
    x = bytes_per_value(dtype_name(dtype))
    if not isinstance(topology, (TpuSlice, GpuCluster)):
        raise InvalidValueError(f"`topology` must be a TpuSlice or a GpuCluster (the collectives need its links), "
                                f"got {shown(topology)}")
    if isinstance(topology, GpuCluster) and axes is not None:
        raise InvalidValueError(f"`axes`: a GPU cluster takes no `axes`: the collectives run over all its GPUs, "
                                f"got {shown(axes)}")
    V = np.asarray(B) * t * m.D * x
    kw = {"axes": axes} if isinstance(topology, TpuSlice) else {}
    gather = explain(allgather_time_s, V, topology, **kw)
    scatter = explain(reducescatter_time_s, V, topology, **kw)
    value = plain(m.L * 2 * (np.asarray(gather.value) + np.asarray(scatter.value)))
    return Derivation("T_ici", "L · 2 · (T_AllGather + T_ReduceScatter)",
                      lambda: f"{m.L} · 2 · ({q(gather.value, 's')} + {q(scatter.value, 's')})", value, "s",
                      (gather, scatter),
                      where=(f"V = B·D·x = {q(B)}" + (f"·{t}" if t > 1 else "") + f"·{m.D}·{q(x)} bytes of activations; "
                             f"L: {m.L} layers, each with an attention and an MLP block",))


@derivable
def generate_model_parallel_max_degree(model, topology, *, batch, weight_dtype="bf16", dtype="bf16", axes=None):
    """Model-parallel degree beyond which a generate step's matmuls wait on ICI rather than on HBM.

    While generation is bound by reading the weights, more chips keep helping (each reads a smaller
    shard) until moving the activations over ICI takes longer than reading the shard: for a [D, F]
    weight split Y ways, x·B·D / W_ici against w·D·F / (Y·W_hbm). With bf16 throughout this is the
    book's Y = F / (B·β), β = W_hbm / W_ici (about 9 on TPU v5e); larger batches allow fewer chips.
    Latency is left out (see :func:`generate_comms_time_s` for that regime).

    Formula:
        Y* = w·F·W_ici / (x·B·W_hbm)

    Args:
        model: a model name or a :class:`~scalelib.ModelSpec` (its F).
        topology: a :class:`~scalelib.TpuSlice` or :class:`~scalelib.GpuCluster` (its link and HBM bandwidths).
        batch: B, tokens in the step (> 0).
        weight_dtype: dtype of the weights (w bytes each).
        dtype: dtype of the activations moved (x bytes each).
        axes: on a TPU slice, the axes the model is sharded over (all by default).

    Returns:
        chips (a degree; not rounded).

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice
        >>> round(generate_model_parallel_max_degree("llama-3-70b", tpu_slice((4, 8), "tpu-v5e"), batch=64))
        49
    """
    from ._parallelism import _link_bandwidth

    m = _model(model)
    B = positive("batch", batch)
    w = bytes_per_value(dtype_name(weight_dtype, arg="weight_dtype"))
    x = bytes_per_value(dtype_name(dtype))
    if isinstance(topology, (TpuSlice, GpuCluster)) and topology.num_chips == 1:
        raise InvalidValueError(f"`topology`: {topology!r} is one chip: there is no model axis to parallelise "
                                f"over; give a slice or cluster of several chips")
    W_ici, name, where = _link_bandwidth(topology, axes)
    W = explain(topology.spec.bytes_per_s, bandwidth="hbm")
    return Derivation("Y*", f"w·F·{name} / (x·B·W_hbm)",
                      lambda: f"{q(w)}·{m.F}·{q(W_ici, 'B/s')} / ({q(x)}·{q(B)}·{q(W.value, 'B/s')})",
                      plain(w * m.F * W_ici / (x * np.asarray(B) * W.value)), "chips",
                      where=(f"w, x: bytes per weight and per activation; F: {m.name}'s MLP width; B: tokens; "
                             f"W_hbm: a chip's HBM bandwidth", *where))


def _ws_bandwidth(chip):
    spec = _chip(chip)
    if spec.ici_link_bytes_per_s_bidirectional is None:
        raise InvalidValueError(f"`chip`: {spec.name} has no ICI links on record; weight-stationary sharding here "
                                f"runs over a TPU's ICI torus: give a TPU such as 'tpu-v5p'")
    return explain(spec.bytes_per_s, bandwidth="ici_bidirectional")


@derivable
def weight_stationary_comms_time_s(B, D, F, num_chips, chip, *, layout="1d", X=None, axes=3, dtype="bf16"):
    """ICI time of one MLP under 1D or 2D weight-stationary sharding over `num_chips` chips (the book's Q7).

    1D (Megatron): the weights are split over F on every chip; In[B, D] is gathered and Out[B, D]
    reduce-scattered over the `axes` mesh axes. 2D: the weights are split over D along X and over F along
    YZ = N / X; In is gathered over YZ, the hidden Tmp[B, F] all-reduced over X, Out reduce-scattered
    over YZ. Without `X` the 2D layout takes the best one, X = sqrt(N·D / (2F)) (sqrt(N/8) for F = 4D).
    W is a link's bidirectional ICI bandwidth; latency is left out.

    Formula:
        1d: T = 2·x·B·D / (axes·W);   2d: T = x·B·D / (X·W) + 2·x·B·F / (YZ·W), YZ = N / X

    Args:
        B: tokens in the batch (> 0).
        D, F: the model and MLP widths (> 0).
        num_chips: N, chips the MLP is split over (a whole number >= 1).
        chip: a TPU name or ChipSpec (its ICI link bandwidth).
        layout: ``"1d"`` or ``"2d"``.
        X: for ``"2d"``, the chips D is split over: a whole number dividing N (None: the best, X = sqrt(N·D / (2F)),
            not rounded).
        axes: for ``"1d"``, the mesh axes the collectives run over (3 on a 3D torus).
        dtype: dtype of the activations (x bytes each).

    Returns:
        seconds (s).

    Chapter:
        7 (Inference)

    Example:
        >>> from scalelib import fmt
        >>> fmt(weight_stationary_comms_time_s(64, 8192, 32768, 256, "tpu-v5p", layout="2d"), "s")
        '2.06 µs'
    """
    B_, D_, F_ = positive("B", B), positive("D", D), positive("F", F)
    N = number("num_chips", num_chips, integer=True, at_least=1)
    x = bytes_per_value(dtype_name(dtype))
    W = _ws_bandwidth(chip)
    if not isinstance(layout, str) or layout not in ("1d", "2d"):
        raise InvalidValueError(f"`layout` must be '1d' or '2d', got {shown(layout)}")
    M = count("axes", axes)  # checked with either layout, though only 1D uses it
    if layout == "1d":
        if X is not None:
            raise InvalidValueError("`X` is the D split of the 2D layout; leave it out with layout='1d'")
        return Derivation("T_1D", "2·x·B·D / (axes·W)", lambda: f"2·{q(x)}·{q(B)}·{q(D)} / ({M}·{q(W.value, 'B/s')})",
                          plain(2 * x * np.asarray(B_) * np.asarray(D_) / (M * W.value)), "s", (W,),
                          where=(f"x: bytes per activation; W: a link's ICI bandwidth, both ways; an AllGather of "
                                 f"In[B, D] and a ReduceScatter of Out[B, D] over {M} axes",))
    if X is None:
        X_ = np.sqrt(np.asarray(N) * np.asarray(D_) / (2 * np.asarray(F_)))
        x_text = "X = sqrt(N·D / (2F)), the best split"
    else:
        X_ = np.asarray(number("X", X, integer=True, at_least=1))
        if np.any(X_ > np.asarray(N)) or np.any(np.asarray(N) % X_):
            raise InvalidValueError(f"`X` must divide `num_chips` = {shown(num_chips)} (D is split over X chips, F "
                                    f"over the N / X others), got {shown(X)}")
        x_text = "X: chips D is split over"
    YZ = np.asarray(N) / X_
    value = x * np.asarray(B_) * np.asarray(D_) / (X_ * W.value) + 2 * x * np.asarray(B_) * np.asarray(F_) / (YZ * W.value)
    return Derivation("T_2D", "x·B·D / (X·W) + 2·x·B·F / (YZ·W)",
                      lambda: f"{q(x)}·{q(B)}·{q(D)} / ({q(X_)}·{q(W.value, 'B/s')}) + 2·{q(x)}·{q(B)}·{q(F)} / "
                              f"({q(YZ)}·{q(W.value, 'B/s')})",
                      plain(value), "s", (W,),
                      where=(f"{x_text}; YZ = N / X; x: bytes per activation; W: a link's ICI bandwidth, both ways",))


@derivable
def weight_stationary_crossover_chips(D, F, *, axes=3):
    """Chips beyond which 2D weight-stationary sharding moves less over ICI than 1D (the book's 72 for F = 4D).

    Setting the 1D time 2·x·B·D / (axes·W) equal to the best 2D time 2·x·B·sqrt(2·D·F / N) / W.

    Formula:
        N* = 2 · F · axes² / D

    Args:
        D, F: the model and MLP widths (> 0).
        axes: the mesh axes 1D sharding's collectives run over (3 on a 3D torus).

    Returns:
        chips.

    Chapter:
        7 (Inference)

    Example:
        >>> weight_stationary_crossover_chips(8192, 4 * 8192)
        72.0
    """
    D_, F_ = positive("D", D), positive("F", F)
    M = count("axes", axes)
    return Derivation("N*", "2·F·axes² / D", lambda: f"2·{q(F)}·{M}² / {q(D)}",
                      plain(2 * np.asarray(F_) * M**2 / np.asarray(D_)), "chips")


# --- speculative decoding ---------------------------------------------------------------------------


def _acceptance(acceptance):
    a = number("acceptance", acceptance, nonnegative=True, at_most=1)
    return a


@derivable
def speculative_tokens_per_step(k, acceptance):
    """Tokens a speculative-decoding step yields on average: k drafted, each accepted with probability a.

    The target model checks k drafted tokens in one pass; the accepted prefix is kept and the target
    adds one token of its own (a correction, or the next token when all k pass), so a step yields
    between 1 and k + 1 tokens (Leviathan et al., 2023, with independent acceptances).

    Formula:
        E[tokens] = (1 − a^(k+1)) / (1 − a)   (k + 1 when a = 1)

    Args:
        k: tokens drafted per step (a whole number >= 0).
        acceptance: a, the chance that the target accepts a drafted token, in [0, 1] (an array for a sweep).

    Returns:
        tokens per step.

    Chapter:
        7 (Inference)

    Example:
        >>> round(speculative_tokens_per_step(4, 0.8), 2)
        3.36
    """
    k_ = count("k", k, minimum=0)
    a = np.asarray(_acceptance(acceptance), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(a < 1, (1 - a ** (k_ + 1)) / np.where(a < 1, 1 - a, 1), k_ + 1.0)
    return Derivation("E[tokens]", "(1 − a^(k+1)) / (1 − a)", lambda: f"(1 − {q(acceptance)}^{k_ + 1}) / (1 − {q(acceptance)})",
                      plain(value), "tokens", where=("a: chance a drafted token is accepted; k: tokens drafted",))


@derivable
def speculative_time_per_token_s(model, topology, *, draft, k, acceptance, batch, context, weight_dtype="bf16",
                                 kv_dtype=None, compute_dtype="bf16", kv_bytes_per_token=None,
                                 draft_kv_bytes_per_token=None, num_chips=None):
    """Time per generated token with speculative decoding: k draft steps and one checking step, over the tokens won.

    The drafter (a small model on the same chips) generates k tokens one by one; the target model then
    scores all k + 1 positions of every sequence in one step, which reads the weights and the KV caches
    once, as a plain step does, and does k + 1 times the FLOPs. While that step stays memory-bound the
    check is nearly free, so each accepted token is a step saved.

    Formula:
        T_token = (k · T_step(draft) + T_step(target, k + 1 tokens)) / E[tokens]

    Args:
        model: the target model (a name, a ModelSpec or a parameter count).
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        draft: the drafter (a name, a ModelSpec or a parameter count; a count's KV cache is
            `draft_kv_bytes_per_token`, 0 by default).
        k: tokens drafted per step (>= 0; 0 is plain decoding).
        acceptance: chance that the target accepts a drafted token, in [0, 1].
        batch, context, weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token, num_chips:
            as in :func:`generate_step_time_s` (both models use the same dtypes).
        draft_kv_bytes_per_token: the drafter's KV bytes per token, when it is a parameter count.

    Returns:
        seconds per token, per sequence (s).

    Chapter:
        7 (Inference)

    Example:
        >>> from scalelib import tpu_slice, fmt
        >>> fmt(speculative_time_per_token_s(70e9, tpu_slice((4, 4), "tpu-v5e"), draft=4e9, k=3,
        ...     acceptance=0.8, batch=1, context=2048, kv_bytes_per_token=0), "s")
        '4.23 ms'
    """
    k_ = count("k", k, minimum=0)
    tokens = explain(speculative_tokens_per_step, k_, acceptance)
    target = _step(model, topology, batch, context, weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token,
                   k_ + 1, num_chips, True, symbol="T_check")
    if not isinstance(draft, (str, ModelSpec)) and draft_kv_bytes_per_token is None:
        draft_kv_bytes_per_token = 0.0
    drafted = _step(draft, topology, batch, context, weight_dtype, kv_dtype, compute_dtype,
                    draft_kv_bytes_per_token, 1, num_chips, True, symbol="T_draft", model_arg="draft",
                    kv_arg="draft_kv_bytes_per_token")
    value = plain((k_ * np.asarray(drafted.value) + np.asarray(target.value)) / np.asarray(tokens.value))
    return Derivation("T_token", "(k·T_draft + T_check) / E[tokens]",
                      lambda: f"({k_}·{q(drafted.value, 's')} + {q(target.value, 's')}) / {q(tokens.value)}",
                      value, "s", (drafted, target, tokens))


# --- the calibrated estimates beside the rooflines (chapter 8) --------------------------------------------------


def _tp_allreduce_s(nbytes, topology, spec: ChipSpec, n: int):
    """One AllReduce of `nbytes` over the n chips serving the model, on its network tier, latency included."""
    from ._collectives import allreduce_time_s
    from ._calibration import constants

    if n == 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    if isinstance(topology, TpuSlice):
        return np.asarray(allreduce_time_s(nbytes, topology), dtype=float)
    c = constants()
    if spec.family == "gpu":
        domain = spec.scale_up_domain or 1
        if n <= domain and spec.scale_up_bytes_per_s_per_gpu:
            W, lat = spec.scale_up_bytes_per_s_per_gpu * c["nvlink"]["achieved"], c["nvlink"]["latency_s"]
        else:
            node = spec._require("scale_out_bytes_per_s_per_node", "a tensor-parallel group across nodes")
            W, lat = node / domain * c["infiniband"]["achieved"], c["infiniband"]["latency_s"]
    else:
        link = spec._require("ici_link_bytes_per_s_one_way", "tensor parallelism over ICI")
        W, lat = 2.0 * link * c["ici"]["achieved"], c["ici"]["hop_latency_s"] * n / 2
    return 2.0 * lat + 2.0 * (n - 1) / n * np.asarray(nbytes, dtype=float) / W


def _wave_flops(M, N, K, spec: ChipSpec):
    """FLOPs a GPU spends on an [M, K] × [K, N] matmul when it runs in whole waves of output tiles.

    The output splits into tiles of ``[matmul_waves] tile`` (estimate.toml), one per SM at a time, so a
    matmul of few tiles leaves SMs idle (NVIDIA's wave quantization): it takes as long as one that fills
    ceil(tiles / SMs) whole waves. Those FLOPs never fall as M grows and are never below 2·M·N·K. A TPU
    (or a chip without an SM count) runs the matmul's own 2·M·N·K.
    """
    from ._calibration import constants

    f = 2.0 * np.asarray(M, dtype=float) * N * K
    if spec.family != "gpu" or not spec.cores:
        return f
    tm, tn = constants()["matmul_waves"]["tile"]
    tiles = np.ceil(np.asarray(M, dtype=float) / tm) * np.ceil(N / tn)
    waves = np.ceil(tiles / spec.cores)
    return np.maximum(f, waves * spec.cores * 2.0 * tm * tn * K)


def _attention_wave_flops(flops, batch, T, heads, head_dim, spec: ChipSpec):
    """FLOPs of one layer's causal attention kernel on one chip (`flops`: its QK^T and PV), in whole waves on a GPU.

    Each of the `heads` (query heads on the chip) of each of `batch` sequences multiplies [T, head_dim] by
    [head_dim, T] and [T, T] by [T, head_dim]; under a causal mask only the tiles on or below the diagonal run,
    ceil(T/tm)·(ceil(T/tn) + 1)/2 of them per head and product, each a tile of ``[matmul_waves] tile``.
    """
    from ._calibration import constants

    f = np.asarray(flops, dtype=float)
    if spec.family != "gpu" or not spec.cores:
        return f
    tm, tn = constants()["matmul_waves"]["tile"]
    rows = np.ceil(np.asarray(T, dtype=float) / tm)
    tiles = 2.0 * np.asarray(batch, dtype=float) * heads * rows * (np.ceil(np.asarray(T, dtype=float) / tn) + 1) / 2
    waves = np.ceil(tiles / spec.cores)
    return np.maximum(f, waves * spec.cores * 2.0 * tm * tn * head_dim)


def _add_collectives(value, comms, overlapped: bool):
    """A pass with its collectives: after its kernels, or overlapped with them (the longer of the two)."""
    return np.maximum(value, comms) if overlapped else value + comms


def _waterfall(roofline, charged, order, terms):
    """(value, {loss: seconds}): `terms(on)` gives the time with the losses in `on`; each loss is the time with
    it switched on less the time before it, in `order` (so they add up to the estimate less the roofline)."""
    prev, on, out = roofline, set(), {}
    for name in order:
        if name not in charged:
            continue
        on.add(name)
        now = terms(frozenset(on))
        out[name] = now - prev
        prev = now
    return prev, out


def _estimate_derivation(symbol, roofline: Derivation, value, losses, sources):
    names = list(losses)
    return Derivation(
        symbol, "T_roofline + " + (" + ".join(names) if names else "nothing"),
        lambda: " + ".join([q(roofline.value, "s")] + [q(losses[k], "s") for k in names]),
        plain(value), "s", (roofline,), where=tuple(f"{k}: {sources[k]}" for k in names))


@derivable
def estimated_generate_step_time_s(model, topology, *, batch, context, weight_dtype="bf16", kv_dtype=None,
                                   compute_dtype="bf16", kv_bytes_per_token=None, tokens_per_step=1, num_chips=None,
                                   check_memory=True, attention_kernel="grouped", losses=INFERENCE_LOSSES):
    """The calibrated estimate of one generate step: :func:`generate_step_time_s`'s roofline plus named losses.

    ``kernel_efficiency``: each layer's weights and KV cache are read at the share of HBM bandwidth a
    kernel moving that many bytes reaches (on GPUs, where that table was measured), its matmuls at the
    efficiency their size allows (the constants of ``scalelib/data/estimate.toml``, with sources);
    ``kernel_overhead``: a fixed cost per layer on GPUs (fitted, see there; a TPU runs the step as
    one compiled program), and with ``attention_kernel="per_query_head"`` the KV cache is read once per
    query head, N/K times (a decode kernel that runs one thread block per query head, as TensorRT-LLM's masked
    multi-head attention did before its grouped-query XQA kernels: its docs, ``gpt_attention.md``, v0.6);
    ``tensor_collectives``: two AllReduces
    of the step's [tokens, D] activations per layer over the chips (Megatron-style tensor parallelism),
    on their network tier with its latency, after the kernels on GPUs and TPUs alike (each layer waits for
    its AllReduce, and a decode step's matmuls are too small to hide it).
    ``losses=()`` gives the roofline.

    Formula:
        T_est = T_KV / e_hbm + max(T_FLOPs / e_mm, T_weights / e_hbm) + L · t_layer + L · 2 · T_AR(B·t·D·2 B)

    Args:
        model, topology, batch, context: as in :func:`generate_step_time_s`.
        weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token, tokens_per_step, num_chips, check_memory:
            as there too.
        attention_kernel: ``"grouped"`` (the default: each KV head read once per step, as grouped-query
            kernels such as XQA or FlashAttention's do) or ``"per_query_head"`` (each KV head read by each of
            the N/K query heads that share it; charged under ``kernel_efficiency``, never below the grouped read).
        losses: the losses charged, names from ``scalelib.INFERENCE_LOSSES`` (default: all).

    Returns:
        seconds (s).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import fmt
        >>> fmt(estimated_generate_step_time_s("llama-3-70b", "h100", num_chips=2, batch=1, context=5250,
        ...                                    weight_dtype="fp8", compute_dtype="fp8"), "s")  # NIM: 18.58 ms
        '18.7 ms'
    """
    from ._calibration import INFERENCE_LOSS_SOURCES, _hbm_efficiency, _matmul_efficiency, check_inference_losses, \
        constants, table_size

    charged = check_inference_losses(losses)
    attention_kernel = name("attention_kernel", attention_kernel, ATTENTION_KERNELS, "decode attention kernel")
    roof = explain(generate_step_time_s, model, topology, batch=batch, context=context, weight_dtype=weight_dtype,
                   kv_dtype=kv_dtype, compute_dtype=compute_dtype, kv_bytes_per_token=kv_bytes_per_token,
                   tokens_per_step=tokens_per_step, num_chips=num_chips, check_memory=check_memory)
    spec, n, _ = _hardware(topology, num_chips)
    w, kvd, c = _dtypes(weight_dtype, kv_dtype, compute_dtype, spec)
    served = _Served(model, kv_bytes_per_token, kvd)
    B, S = _batch_and_context(batch, context)
    t = int(tokens_per_step)
    W = spec.bytes_per_s(bandwidth="hbm")
    C = spec.peak_flops_per_s(dtype=c)
    L = served.spec.L if served.spec is not None else 1
    weights = served.weight_bytes(w).value
    kv_bytes = np.asarray(B) * np.asarray(S) * served.kv.value
    flops = 2 * np.asarray(B) * t * served.active.value
    k = constants()
    scale = k["kernel"]["matmul_scale"] * (k["inference"]["fp8_matmul_scale"] if c == "fp8" else 1.0)
    size = table_size(C)   # the [matmul] table's sizes are an A100's: a faster chip's kernel is "smaller"
    gpu = spec.family == "gpu"
    overhead = k["inference"]["layer_overhead_s"] if gpu else 0.0  # fitted on GPUs (kernel launches)
    rereads = 1.0
    if attention_kernel == "per_query_head":
        if served.spec is None:
            raise InvalidValueError('`attention_kernel`: "per_query_head" needs the model\'s heads (a name or a '
                                    'ModelSpec), not a parameter count with kv_bytes_per_token')
        rereads = served.spec.N / served.spec.K   # each KV head read by the N/K query heads that share it

    def terms(on):
        e_w = e_kv = e_mm = 1.0
        kv_read = kv_bytes
        if "kernel_efficiency" in on:  # a layer's four weight matrices, its KV cache, its matmuls on one chip
            if gpu:  # the HBM table was measured on GPUs
                e_w = _hbm_efficiency(weights / (4 * L * n) / 1e6)
                e_kv = _hbm_efficiency(kv_bytes / (L * n) / 1e6)
            e_mm = _matmul_efficiency(flops / (4 * L * n) / 1e9 * size) * scale
            kv_read = kv_bytes * rereads
        value = kv_read / (n * W * e_kv) + np.maximum(flops / (n * C * e_mm), weights / (n * W * e_w))
        if "kernel_overhead" in on:
            value = value + L * overhead
        if "tensor_collectives" in on and served.spec is not None:
            V = np.asarray(B) * t * served.spec.D * 2.0
            # never overlapped, on a TPU either: each layer's AllReduce waits for its matmul and the next layer
            # for the AllReduce, and a decode step's small memory-bound matmuls leave a collective matmul
            # nothing to hide it under (chapters 7 and 11 and chapter 8's worked problem add them too)
            value = _add_collectives(value, L * 2 * _tp_allreduce_s(V, topology, spec, n), False)
        return value

    value, parts = _waterfall(np.asarray(roof.value, dtype=float), charged, INFERENCE_LOSSES, terms)
    return _estimate_derivation("T_step_est", roof, value, parts, INFERENCE_LOSS_SOURCES)


@derivable
def estimated_prefill_time_s(model, topology, *, tokens, batch=1, weight_dtype="bf16", compute_dtype="bf16",
                             efficiency=None, attention=None, num_chips=None,
                             losses=INFERENCE_LOSSES):
    """The calibrated estimate of a prefill: :func:`prefill_time_s`'s roofline plus named losses.

    ``kernel_efficiency``: each matmul of a layer (the projections, the MLP, and the attention scores
    per head) runs at the efficiency its size on one chip allows (``scalelib/data/estimate.toml``), or
    at `efficiency` when one is given (a share of peak assumed for all of them, as the book's 40%); on a
    GPU each runs in whole waves of 128 × 128 output tiles over the SMs (a short prompt's few tiles leave
    most SMs idle: NVIDIA's wave quantization) and no faster than its weights (attention: its K and V)
    stream in at the HBM share of their size;
    ``kernel_overhead``: a fixed cost per layer on GPUs (fitted, see ``estimate.toml``);
    ``tensor_collectives``: two AllReduces of [B·T, D] per layer over the chips, on their network tier
    (after the kernels on GPUs; overlapped with them by XLA on TPUs).
    ``losses=()`` gives the roofline at full peak.

    Formula:
        T_est = max(Σ_ops max(FLOPs_op,waves / (e_op · C), bytes_op / (e_hbm · W)), P_bytes / (N·W)) + L · t_layer
        + L · 2 · T_AR(B·T·D·2 B)

    Args:
        model, topology, tokens, batch, weight_dtype, compute_dtype, attention, num_chips: as in
            :func:`prefill_time_s`.
        efficiency: None (the default): each matmul at the efficiency of its size; a share of peak in (0, 1]:
            every matmul at that.
        losses: the losses charged, names from ``scalelib.INFERENCE_LOSSES`` (default: all).

    Returns:
        seconds (s).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import fmt
        >>> fmt(estimated_prefill_time_s("llama-3-70b", "h100", num_chips=2, tokens=5000, weight_dtype="fp8",
        ...                              compute_dtype="fp8"), "s")   # NIM: 407 ms
        '417 ms'
    """
    from ._calibration import INFERENCE_LOSS_SOURCES, _hbm_efficiency, _matmul_efficiency, \
        check_inference_losses, constants, model_shape, table_size

    charged = check_inference_losses(losses)
    eff = None if efficiency is None else share("efficiency", efficiency)
    roof = explain(prefill_time_s, model, topology, tokens=tokens, batch=batch, weight_dtype=weight_dtype,
                   compute_dtype=compute_dtype, efficiency=1.0, attention=attention, num_chips=num_chips)
    spec, n, _ = _hardware(topology, num_chips)
    served = _Served(model, 0.0 if not isinstance(model, (str, ModelSpec)) else None, "bf16")
    w, _, c = _dtypes(weight_dtype, None, compute_dtype, spec)
    W = spec.bytes_per_s(bandwidth="hbm")
    C = spec.peak_flops_per_s(dtype=c)
    T = np.asarray(number("tokens", tokens, positive=True, at_least=1))
    Bn = np.asarray(positive("batch", batch))
    weights = served.weight_bytes(w).value
    attention = served.spec is not None if attention is None else attention
    m = served.spec
    k = constants()
    scale = k["kernel"]["matmul_scale"] * (k["inference"]["fp8_matmul_scale"] if c == "fp8" else 1.0)
    size = table_size(C)   # the [matmul] table's sizes are an A100's: a faster chip's kernel is "smaller"
    gpu = spec.family == "gpu"
    overhead = k["inference"]["layer_overhead_s"] * (m.L if m is not None else 1) if gpu else 0.0
    w_bytes = bytes_per_value(w)
    flops_att = (np.asarray(forward_flops(m, seq_len=T, tokens=Bn * T, component="dot_product", causal=True))
                 if attention else 0.0)
    flops_mm = 2 * served.active.value * Bn * T

    def terms(on):
        if "kernel_efficiency" in on:
            if eff is not None:
                t_math = (flops_mm + flops_att) / (eff * n * C)
            elif m is not None:
                D, F, N, K, H, V, cc = model_shape(m)
                tok = Bn * T
                t_math = 0.0
                # column-parallel (QKV, up) split N over the chips, row-parallel (O, down) split K (Megatron-LM)
                for k_, n_, cols in ((D, (N + 2 * K) * H, True), (N * H, D, False), (D, (cc - 1) * F, True),
                                     (F, D, False)):
                    n_loc, k_loc = (n_ / n, k_) if cols else (n_, k_ / n)
                    f = _wave_flops(tok, n_loc, k_loc, spec)   # one layer's matmul on one chip, in whole waves
                    t_f = f / (C * _matmul_efficiency(f / 1e9 * size) * scale)
                    if gpu:  # and no faster than its weights stream in at the HBM share of their size
                        b = k_loc * n_loc * w_bytes
                        t_f = np.maximum(t_f, b / (W * _hbm_efficiency(b / 1e6)))
                    t_math = t_math + m.L * t_f
                f_un = 2.0 * tok * D * V / n
                t_math = t_math + f_un / (C * _matmul_efficiency(f_un / 1e9 * size) * scale)
                if attention:  # attention's own kernel: QK^T and PV per head, a small matmul each
                    per_layer = flops_att / (m.L * n)
                    f_att = _attention_wave_flops(per_layer, Bn, T, N / n, H, spec)
                    t_att = f_att / (C * _matmul_efficiency(f_att / 1e9 / 2 * size) * scale)
                    if gpu:  # and no faster than it reads the layer's K and V (2 bytes a value)
                        kv = 2.0 * Bn * T * K * H * 2.0 / n
                        t_att = np.maximum(t_att, kv / (W * _hbm_efficiency(kv / 1e6)))
                    t_math = t_math + m.L * t_att
            else:
                f = flops_mm / n
                t_math = f / (C * _matmul_efficiency(f / 1e9 * size) * scale)
        else:
            t_math = (flops_mm + flops_att) / (n * C)
        value = np.maximum(t_math, weights / (n * W))
        if "kernel_overhead" in on:
            value = value + overhead
        if "tensor_collectives" in on and m is not None:
            # on a TPU a prefill's large compute-bound matmuls hide them (XLA's collective matmul, chapter 3)
            value = _add_collectives(value, m.L * 2 * _tp_allreduce_s(Bn * T * m.D * 2.0, topology, spec, n),
                                     spec.family != "gpu")
        return value

    value, parts = _waterfall(np.asarray(roof.value, dtype=float), charged, INFERENCE_LOSSES, terms)
    return _estimate_derivation("T_prefill_est", roof, value, parts, INFERENCE_LOSS_SOURCES)
