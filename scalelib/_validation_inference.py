"""Published inference figures, and scalelib's predictions of them (chapter 8's validation table).

``scalelib/data/inference_results.toml`` holds published figures for serving LLaMA-sized models: the
book's own worked estimates and vendors' measurements (NVIDIA's NIM and TensorRT-LLM tables), each with
the exact configuration (batch or concurrency, prompt and output lengths, precision, chips) and its
source. :func:`predict_inference_result` predicts one with the step times of :mod:`._inference`;
:func:`closed_loop_throughput` is the throughput of a benchmark that keeps a fixed number of requests
in flight. scalelib is a roofline: its times are lower bounds and its throughputs upper bounds, so a
measurement should sit on the far side of its prediction.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError, unknown
from ._inference import _hardware, generate_step_time_s, prefill_time_s
from ._models import model as _model
from ._topology import tpu_slice
from ._validate import count, flag, share, shown

QUANTITIES = {"decode_step_s": "s", "prefill_s": "s", "output_tokens_per_s": "tokens/s"}


@dataclass(frozen=True)
class InferenceResult:
    """One published inference figure: what was reported, on what configuration, and where.

    `quantity` is ``"decode_step_s"``, ``"prefill_s"`` or ``"output_tokens_per_s"`` (see
    :func:`predict_inference_result`); `measured` is False for a figure worked out by hand (the
    book's), True for a measurement on real hardware. `vocab` and `shape` (pairs of a letter and its
    value) change the preset `model` into the one served, named `model_name`; `attention_kernel` is how
    the engine's decode attention read the KV cache (see :func:`~scalelib.estimated_generate_step_time_s`).
    """

    name: str
    title: str
    quantity: str
    reported: float
    measured: bool
    model: str
    chip: str
    weight_dtype: str
    compute_dtype: str
    batch: int
    config: str
    source: str
    url: str
    date: str
    kv_dtype: str | None = None
    vocab: int | None = None
    slice: tuple[int, ...] | None = None
    num_chips: int | None = None
    context: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    efficiency: float = 1.0
    attention_kernel: str = "grouped"
    shape: tuple[tuple[str, int], ...] | None = None
    model_name: str | None = None

    @property
    def unit(self) -> str:
        """The unit of `reported`: ``"s"`` or ``"tokens/s"``."""
        return QUANTITIES[self.quantity]

    @property
    def chips(self) -> int:
        """How many chips the figure was taken on."""
        return int(np.prod(self.slice)) if self.slice else int(self.num_chips)


@lru_cache(maxsize=None)
def _load(table: str = "result") -> tuple[InferenceResult, ...]:
    text = resources.files("scalelib").joinpath("data/inference_results.toml").read_text(encoding="utf-8")
    rows = []
    for row in tomllib.loads(text)[table]:
        row = dict(row)
        if "slice" in row:
            row["slice"] = tuple(row["slice"])
        if "shape" in row:
            row["shape"] = tuple(sorted(row["shape"].items()))
        rows.append(InferenceResult(**row))
    return tuple(rows)


def inference_results(*, held_out=False) -> tuple[InferenceResult, ...]:
    """The published inference figures chapter 8 predicts, each with its configuration and source.

    Args:
        held_out: also the figures held out from the table (TensorRT-LLM's other figures: A100s, Llama 2 7B,
            short prompts, long generations, batches up to 1,280: how far the calibrated estimate carries),
            after it.

    Returns:
        a tuple of :class:`InferenceResult`, the book's estimates first.

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> r = inference_results()[0]
        >>> r.quantity, r.reported, r.unit
        ('decode_step_s', 0.017, 's')
    """
    return _load() + (_load("held_out") if flag("held_out", held_out) else ())


def _result(result) -> InferenceResult:
    if isinstance(result, InferenceResult):
        return result
    known = {r.name: r for r in _load() + _load("held_out")}
    if isinstance(result, str) and result in known:
        return known[result]
    if isinstance(result, str):
        raise unknown("published inference result", result, known, arg="result")
    raise InvalidValueError(f"`result` must be an InferenceResult (from inference_results()) or its name, such as "
                            f"'nim-h100x2-itl', got {shown(result)}")


@derivable
def closed_loop_throughput(model, topology, *, concurrency, prompt_tokens, output_tokens, weight_dtype="bf16",
                             kv_dtype=None, compute_dtype="bf16", prefill_efficiency=1.0, num_chips=None,
                             check_memory=True):
    """Generated tokens per second when `concurrency` requests are always in flight: prefill, then decode.

    A benchmark client that keeps c requests open (or a static batch of c) has the chips prefill
    c prompts of P tokens and then run G generate steps for the c sequences, whose caches grow
    from P to P + G − 1 tokens; c·G tokens come out per round. Each part is the roofline step time
    of :func:`~scalelib.prefill_time_s` and :func:`~scalelib.generate_step_time_s`, so the result is
    an upper bound: real servers also lose time to scheduling, kernels below peak and communication.

    Formula:
        tokens/s = c·G / (T_prefill(c prompts of P) + Σ_{g=0}^{G−1} T_step(c, P + g))

    Args:
        model: a model name or a :class:`~scalelib.ModelSpec`.
        topology: a :class:`~scalelib.TpuSlice`, a :class:`~scalelib.GpuCluster`, or a chip name (with `num_chips`).
        concurrency: c, requests in flight (a whole number > 0).
        prompt_tokens: P, tokens of each prompt (a whole number > 0).
        output_tokens: G, tokens each request generates (a whole number > 0).
        weight_dtype, kv_dtype, compute_dtype: as in :func:`~scalelib.generate_step_time_s`.
        prefill_efficiency: share of the peak FLOP/s prefill reaches, in (0, 1].
        num_chips: with a chip name, how many chips.
        check_memory: raise if the weights and c caches of P + G tokens do not fit.

    Returns:
        generated tokens per second, over all the chips (tokens/s).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> round(closed_loop_throughput("llama-3-70b", "h100", num_chips=2, concurrency=1, prompt_tokens=5000,
        ...       output_tokens=500, weight_dtype="fp8", compute_dtype="fp8"))
        91
    """
    c = count("concurrency", concurrency)
    P = count("prompt_tokens", prompt_tokens)
    G = count("output_tokens", output_tokens)
    _hardware(topology, num_chips)
    prefill_efficiency = share("prefill_efficiency", prefill_efficiency)
    check_memory = flag("check_memory", check_memory)
    kw = dict(weight_dtype=weight_dtype, compute_dtype=compute_dtype, num_chips=num_chips)
    prefill = explain(prefill_time_s, model, topology, tokens=P, batch=c, efficiency=prefill_efficiency, **kw)
    if check_memory:
        generate_step_time_s(model, topology, batch=c, context=P + G, kv_dtype=kv_dtype, **kw)
    steps = generate_step_time_s(model, topology, batch=c, context=P + np.arange(G), kv_dtype=kv_dtype,
                                 check_memory=False, **kw)
    decode_s = float(np.sum(steps))
    decode = Derivation("T_decode", "Σ_{g=0}^{G−1} T_step(c, P + g)",
                        lambda: f"{G} steps from {q(float(np.ravel(steps)[0]), 's')} to "
                                f"{q(float(np.ravel(steps)[-1]), 's')}",
                        decode_s, "s", where=("T_step: one generate step of all c sequences",))
    value = c * G / (prefill.value + decode_s)
    return Derivation("tokens/s", "c·G / (T_prefill + T_decode)",
                      lambda: f"{c}·{G} / ({q(prefill.value, 's')} + {q(decode_s, 's')})",
                      plain(value), "tokens/s", (prefill, decode),
                      where=("c: requests in flight; G: tokens each generates; P: tokens of each prompt",))


def _served_model(r: InferenceResult):
    m = _model(r.model)
    changes = dict(r.shape or ())
    if r.vocab is not None:
        changes["V"] = r.vocab
    if not changes:
        return m
    return m.derive(r.model_name or f"{m.name} (V = {r.vocab})", **changes)


def _topology(r: InferenceResult):
    if r.slice:
        return tpu_slice(r.slice, r.chip), {}
    return r.chip, {"num_chips": r.num_chips}


@derivable
def predict_inference_result(result):
    """scalelib's prediction of a published inference figure, from its configuration alone.

    A decode step (inter-token latency) is :func:`~scalelib.generate_step_time_s`; a prefill (time to
    first token) is :func:`~scalelib.prefill_time_s`; a benchmark's throughput is
    :func:`closed_loop_throughput`. Each uses the chips' peak rates, so a prediction of a time is a
    lower bound on a measurement and one of a throughput an upper bound.

    Formula:
        the roofline of the reported quantity, at the reported configuration

    Args:
        result: an :class:`InferenceResult` from :func:`inference_results`, or its name.

    Returns:
        the predicted value, in the result's unit (s or tokens/s).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import fmt
        >>> fmt(predict_inference_result("nim-h100x2-itl"), "s")   # reported: 18.58 ms
        '10.7 ms'
    """
    r, m, topo, kw, dtypes = _configuration(result)
    if r.quantity == "decode_step_s":
        return explain(generate_step_time_s, m, topo, batch=r.batch, context=r.context, kv_dtype=r.kv_dtype,
                       **dtypes, **kw)
    if r.quantity == "prefill_s":
        return explain(prefill_time_s, m, topo, tokens=r.prompt_tokens, batch=r.batch, efficiency=r.efficiency,
                       **dtypes, **kw)
    return explain(closed_loop_throughput, m, topo, concurrency=r.batch, prompt_tokens=r.prompt_tokens,
                   output_tokens=r.output_tokens, kv_dtype=r.kv_dtype, prefill_efficiency=r.efficiency,
                   **dtypes, **kw)


@derivable
def prediction_error(result):
    """The relative error of scalelib's prediction of a published figure: predicted / reported − 1.

    Negative for a time means the measurement took longer than the roofline; positive for a
    throughput means it delivered less.

    Formula:
        error = predicted / reported − 1

    Args:
        result: an :class:`InferenceResult` or its name.

    Returns:
        a ratio (0.1 is 10% above the reported value).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> round(prediction_error("book-v5e-4x2-step"), 3)
        0.018
    """
    r = _result(result)
    predicted = explain(predict_inference_result, r)
    return Derivation("error", "predicted / reported − 1",
                      lambda: f"{q(predicted.value, r.unit)} / {q(r.reported, r.unit)} − 1",
                      float(predicted.value) / r.reported - 1, "", (predicted,),
                      where=(f"reported: {r.source}",))


def _estimated_closed_loop(m, topo, r: InferenceResult, kw) -> Derivation:
    """closed_loop_throughput's rounds, each part at its calibrated estimate."""
    from ._inference import estimated_generate_step_time_s, estimated_prefill_time_s

    c, P, G = r.batch, r.prompt_tokens, r.output_tokens
    dtypes = dict(weight_dtype=r.weight_dtype, compute_dtype=r.compute_dtype)
    prefill = explain(estimated_prefill_time_s, m, topo, tokens=P, batch=c, **dtypes, **kw)
    steps = estimated_generate_step_time_s(m, topo, batch=c, context=P + np.arange(G), kv_dtype=r.kv_dtype,
                                           check_memory=False, attention_kernel=r.attention_kernel, **dtypes, **kw)
    decode_s = float(np.sum(steps))
    value = c * G / (float(prefill.value) + decode_s)
    return Derivation("tokens/s (estimate)", "c·G / (T_prefill_est + Σ T_step_est)",
                      lambda: f"{c}·{G} / ({q(prefill.value, 's')} + {q(decode_s, 's')})", value, "tokens/s",
                      (prefill,), where=("c: requests in flight; G: tokens each generates; P: tokens of each prompt",))


def _configuration(result):
    """A published figure, its model, its chips, their keyword arguments and its dtypes, ready to price."""
    r = _result(result)
    topo, kw = _topology(r)
    return r, _served_model(r), topo, kw, dict(weight_dtype=r.weight_dtype, compute_dtype=r.compute_dtype)


@derivable
def estimate_inference_result(result):
    """The calibrated estimate of a published inference figure, from its configuration alone.

    As :func:`predict_inference_result`, with :func:`~scalelib.estimated_generate_step_time_s` and
    :func:`~scalelib.estimated_prefill_time_s` in place of the rooflines (a prefill figure whose
    efficiency the source assumed, as the book's 40%, keeps it).

    Formula:
        the calibrated estimate of the reported quantity, at the reported configuration

    Args:
        result: an :class:`InferenceResult` from :func:`inference_results`, or its name.

    Returns:
        the estimated value, in the result's unit (s or tokens/s).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import fmt
        >>> fmt(estimate_inference_result("nim-h100x2-itl"), "s")   # reported: 18.58 ms
        '18.7 ms'
    """
    from ._inference import estimated_generate_step_time_s, estimated_prefill_time_s

    r, m, topo, kw, dtypes = _configuration(result)
    if r.quantity == "decode_step_s":
        return explain(estimated_generate_step_time_s, m, topo, batch=r.batch, context=r.context,
                       kv_dtype=r.kv_dtype, attention_kernel=r.attention_kernel, **dtypes, **kw)
    if r.quantity == "prefill_s":
        eff = None if r.efficiency == 1.0 else r.efficiency
        return explain(estimated_prefill_time_s, m, topo, tokens=r.prompt_tokens, batch=r.batch, efficiency=eff,
                       **dtypes, **kw)
    return _estimated_closed_loop(m, topo, r, kw)


@derivable
def inference_estimate_error(result):
    """The calibrated estimate's relative error on a published inference figure: estimated / reported − 1.

    Formula:
        error = estimated / reported − 1

    Args:
        result: an :class:`InferenceResult` or its name.

    Returns:
        a ratio (0.1 is 10% above the reported value).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> round(inference_estimate_error("nim-h100x2-itl"), 2)
        0.01
    """
    r = _result(result)
    estimated = explain(estimate_inference_result, r)
    return Derivation("error", "estimated / reported − 1",
                      lambda: f"{q(estimated.value, r.unit)} / {q(r.reported, r.unit)} − 1",
                      float(estimated.value) / r.reported - 1, "", (estimated,), where=(f"reported: {r.source}",))
