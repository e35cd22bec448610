"""Serving a fleet (chapters 7 and 8): slices, requests per chip, prefill and generate pools, cost per token.

Built on the step times of :mod:`._inference`: the smallest slice that holds a model at a precision,
requests per second per chip for a given output length, how many prefill servers feed one generate
server when the two run apart (disaggregated serving), what a million tokens costs at a chip's hourly
price, and the latency-throughput curves that trade one for the other. Chip prices live in
``scalelib/data/prices.toml``, each with its source and date.
"""

from __future__ import annotations

import math
import tomllib
from functools import lru_cache
from importlib import resources

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError, unknown
from ._inference import _Served, _dtypes, _hardware, generate_step_time_s, max_batch_size, tokens_per_s_per_chip
from ._models import ModelSpec
from ._specs import ChipSpec, chip as _chip
from ._topology import TpuSlice, tpu_slice
from ._units import fmt
from ._validate import broadcast, nonnegative, number, positive, shown


# --- slices -----------------------------------------------------------------------------------------

#: Slice shapes offered on 2D TPU pods (v5e, v6e) and 3D ones (v4p, v5p, TPU7x), smallest first.
SLICES_2D = ((1, 1), (2, 2), (4, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
SLICES_3D = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8), (8, 8, 16),
             (8, 16, 16), (16, 16, 16))


def _sizes(spec: ChipSpec) -> list[tuple[int, tuple[int, ...] | None]]:
    """(chips, shape) the chip is offered in, smallest first: TPU slice shapes, or GPU counts."""
    if spec.family == "tpu":
        shapes = SLICES_2D if len(spec.pod_shape or ()) == 2 else SLICES_3D
        pod = math.prod(spec.pod_shape or (1 << 30,))
        return [(math.prod(s), s) for s in shapes if math.prod(s) <= pod]
    domain = spec.scale_up_domain or 8
    sizes = [2**i for i in range(int(math.log2(domain)) + 1) if 2**i <= domain]
    return [(n, None) for n in sizes] + [(domain * k, None) for k in (2, 4, 8, 16, 32, 64, 128, 256, 512)]


@derivable
def min_chips(model, chip, *, weight_dtype="bf16", kv_dtype=None, batch=0, context=0, kv_bytes_per_token=None,
              reserve_bytes=0.0):
    """The fewest chips, in a size the chip is offered in, whose HBM holds the weights and `batch` KV caches.

    TPUs come in slices (v5e: 1, 4, 8, 16, 32, ... chips), GPUs in powers of two up to a node, then
    whole nodes. With ``batch=0`` only the weights count (the book's smallest topology per precision).

    Formula:
        chips = the smallest size >= (P·w + B·S·kv + reserve) / HBM

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec`, or a parameter count (then give `kv_bytes_per_token`).
        chip: a chip name or ChipSpec.
        weight_dtype: dtype of the weights (w bytes each).
        kv_dtype: dtype of the KV cache; defaults to `weight_dtype`.
        batch: B, sequences whose KV caches must fit too (>= 0).
        context: S, tokens cached per sequence (>= 0).
        kv_bytes_per_token: the KV bytes per token, for a model given as a parameter count.
        reserve_bytes: memory kept for everything else, in all (B, >= 0).

    Returns:
        chips (a whole number).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> min_chips("llama-3-70b", "tpu-v5e", weight_dtype="int8", batch=32, context=8192)   # the book: a 4x2
        8
    """
    spec = _chip(chip)
    w, kvd, _ = _dtypes(weight_dtype, kv_dtype, "bf16")
    if not isinstance(model, (str, ModelSpec)) and kv_bytes_per_token is None:
        kv_bytes_per_token = 0.0
    served = _Served(model, kv_bytes_per_token, kvd)
    B, S = nonnegative("batch", batch), nonnegative("context", context)
    reserve = nonnegative("reserve_bytes", reserve_bytes)
    for arg, value in (("batch", B), ("context", S), ("reserve_bytes", reserve)):
        if np.ndim(value):
            raise InvalidValueError(f"`{arg}` must be one number here, got {shown(value)}")
    hbm = spec._require("hbm_bytes", "fitting a model in memory")
    weights = served.weight_bytes(w)
    need = weights.value + B * S * served.kv.value + reserve
    raw = need / hbm
    sizes = _sizes(spec)
    fitting = [(n, shape) for n, shape in sizes if n >= raw - 1e-9]
    if not fitting:
        raise InvalidValueError(f"{served.name} needs {fmt(need, 'B')}, more than the largest {spec.name} size "
                                f"offered here ({sizes[-1][0]} chips) holds")
    n, shape = fitting[0]
    offered = ", ".join(("x".join(map(str, s)) if s else str(m)) for m, s in sizes[:8])
    return Derivation("chips", "smallest size >= (P_bytes + B·S·kv + reserve) / HBM",
                      lambda: f"({q(weights.value, 'B')} + {q(B)}·{q(S)}·{q(served.kv.value, 'B')} + "
                              f"{q(reserve, 'B')}) / {q(hbm, 'B')} = {raw:.3g} → the next size offered",
                      n, "chips", (weights,),
                      where=(f"HBM: one {spec.name}'s memory; B: sequences; S: tokens cached per sequence; "
                             f"kv: KV bytes per token ({kvd}); sizes offered: {offered}, ...",))


def smallest_slice(model, chip, *, weight_dtype="bf16", kv_dtype=None, batch=0, context=0, kv_bytes_per_token=None,
                   reserve_bytes=0.0) -> TpuSlice:
    """The smallest TPU slice that holds the model (and `batch` KV caches): :func:`min_chips` as a slice.

    Args:
        model, chip, weight_dtype, kv_dtype, batch, context, kv_bytes_per_token, reserve_bytes: as in
            :func:`min_chips` (`chip` must be a TPU).

    Returns:
        a :class:`~scalelib.TpuSlice`.

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> [smallest_slice("llama-3-70b", "tpu-v5e", weight_dtype=d).shape for d in ("bf16", "int8", "int4")]
        [(4, 4), (4, 2), (2, 2)]
    """
    spec = _chip(chip)
    if spec.family != "tpu":
        raise InvalidValueError(f"`chip` must be a TPU for a slice, got {spec.name} ({spec.family}); use min_chips "
                                f"for GPUs")
    n = min_chips(model, spec, weight_dtype=weight_dtype, kv_dtype=kv_dtype, batch=batch, context=context,
                  kv_bytes_per_token=kv_bytes_per_token, reserve_bytes=reserve_bytes)
    shape = dict(_sizes(spec))[n]
    return tpu_slice(shape, spec)


# --- requests, pools, evictions ---------------------------------------------------------------------


@derivable
def requests_per_s_per_chip(model, topology, *, batch, context, output_tokens, weight_dtype="bf16", kv_dtype=None,
                            compute_dtype="bf16", kv_bytes_per_token=None, num_chips=None, check_memory=True):
    """Requests a chip finishes per second when `batch` sequences generate `output_tokens` tokens each.

    A request holds a slot of the batch for `output_tokens` steps, so a slice finishes B requests every
    output_tokens · T_step seconds (prefill left out: it runs elsewhere, or is counted apart).

    Formula:
        requests/s/chip = B / (T_step · output_tokens · N)

    Args:
        model, topology, batch, context: as in :func:`~scalelib.generate_step_time_s`.
        weight_dtype, kv_dtype, compute_dtype, kv_bytes_per_token, num_chips, check_memory: as there too.
        output_tokens: G, tokens each request generates (> 0).

    Returns:
        requests/s per chip.

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice
        >>> round(requests_per_s_per_chip("llama-3-70b", tpu_slice((4, 4), "tpu-v5e"), batch=42, context=8192,
        ...                               output_tokens=512), 3)         # the book: 0.27 in bf16
        0.265
    """
    step = explain(generate_step_time_s, model, topology, batch=batch, context=context, weight_dtype=weight_dtype,
                   kv_dtype=kv_dtype, compute_dtype=compute_dtype, kv_bytes_per_token=kv_bytes_per_token,
                   num_chips=num_chips, check_memory=check_memory)
    _, n, _ = _hardware(topology, num_chips)
    B, G = positive("batch", batch), positive("output_tokens", output_tokens)
    return Derivation("requests/s/chip", "B / (T_step · G · N)",
                      lambda: f"{q(B)} / ({q(step.value, 's')} · {q(G)} · {n})",
                      plain(np.asarray(B) / (np.asarray(step.value) * np.asarray(G) * n)), "requests/s", (step,),
                      where=("G: tokens each request generates; N: chips",))


@derivable
def prefill_to_generate_ratio(prefill_time_s, step_time_s, *, batch, output_tokens, prefills_per_pass=1):
    """Prefill servers needed per generate server for neither pool to wait (disaggregated serving).

    A prefill server turns out `prefills_per_pass` prompts every `prefill_time_s`; a generate server
    running `batch` sequences frees a slot every step_time · output_tokens / batch seconds. Matching
    the two rates gives the ratio of servers (the book's P ≈ 3G for LLaMA 3-70B).

    Formula:
        P / G = B · T_prefill / (T_step · output_tokens · prefills_per_pass)

    Args:
        prefill_time_s: time of one prefill pass on a prefill server (s, > 0).
        step_time_s: time of one generate step on a generate server (s, > 0).
        batch: B, sequences a generate server runs at once (> 0).
        output_tokens: tokens each request generates (> 0).
        prefills_per_pass: prompts one prefill pass handles (a whole number >= 1).

    Returns:
        prefill servers per generate server.

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> round(prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512), 1)
        3.0
    """
    Tp, Ts = positive("prefill_time_s", prefill_time_s), positive("step_time_s", step_time_s)
    B, G = positive("batch", batch), positive("output_tokens", output_tokens)
    k = number("prefills_per_pass", prefills_per_pass, integer=True, at_least=1)
    shaped = broadcast(batch=B, prefill_time_s=Tp, step_time_s=Ts, output_tokens=G, prefills_per_pass=k)
    value = shaped[0] * shaped[1] / (shaped[2] * shaped[3] * shaped[4])
    several = bool(np.any(np.asarray(k) != 1))  # k shown only when some pass takes more than one prompt
    return Derivation("P/G", "B · T_prefill / (T_step · G_tokens" + (" · k)" if several else ")"),
                      lambda: f"{q(B)} · {q(Tp, 's')} / ({q(Ts, 's')} · {q(G)}" + (f" · {q(k)})" if several else ")"),
                      plain(value), "servers",
                      where=("B: a generate server's batch; G_tokens: tokens per request"
                             + ("; k: prompts per prefill pass" if several else ""),))


@derivable
def kv_tokens_freed_per_step(batch, prompt_tokens, output_tokens):
    """KV-cache tokens freed per generate step, on average, as requests finish and leave the batch.

    Each step a sequence finishes with chance 1 / G, freeing its P + G cached tokens.

    Formula:
        freed per step = B · (P + G) / G

    Args:
        batch: B, sequences generating (> 0).
        prompt_tokens: P, tokens of a prompt (>= 0).
        output_tokens: G, tokens generated per request (> 0).

    Returns:
        tokens per step.

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> kv_tokens_freed_per_step(32, 8192, 4096)
        96.0
    """
    B, P, G = positive("batch", batch), nonnegative("prompt_tokens", prompt_tokens), positive("output_tokens", output_tokens)
    return Derivation("freed/step", "B · (P + G) / G", lambda: f"{q(B)} · ({q(P)} + {q(G)}) / {q(G)}",
                      plain(np.asarray(B) * (np.asarray(P) + np.asarray(G)) / np.asarray(G)), "tokens",
                      where=("B: sequences; P, G: tokens of a prompt and of an answer",))


# --- prices -----------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _prices() -> dict:
    text = resources.files("scalelib").joinpath("data/prices.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@derivable
def usd_per_chip_hour(chip):
    """A chip's on-demand price per hour, as published on the date its source gives.

    Formula:
        price = the published on-demand price of one chip for one hour

    Args:
        chip: a chip name or ChipSpec with a price in ``scalelib/data/prices.toml``
            (tpu-v5e, tpu-v5p, h100, b200).

    Returns:
        US dollars per chip-hour (USD).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> usd_per_chip_hour("tpu-v5e")
        1.2
        >>> print(explain(usd_per_chip_hour, "h100"))  # doctest: +ELLIPSIS
        price(h100) = ... (How to Scale Your Model (Austin et al., 2025), ch. 8 ..., 2025-02) = 10.8 USD
    """
    spec = _chip(chip)
    row = _prices().get(spec.name)
    if row is None:
        raise unknown("chip with a price", spec.name, _prices(), arg="chip")
    return Derivation(f"price({spec.name})", "published on-demand price per chip-hour",
                      f"({row['source']}, {row['date']})", float(row["usd_per_chip_hour"]), "USD")


def _price(chip, usd):
    if usd is None:
        return explain(usd_per_chip_hour, chip)
    value = positive("usd_per_chip_hour", usd)
    if np.ndim(value):
        raise InvalidValueError(f"`usd_per_chip_hour` must be one price, got {shown(usd)}")
    return Derivation("price", "given", "", value, "USD")


@derivable
def flops_per_usd(chip, *, dtype="bf16", usd_per_chip_hour=None):
    """Peak FLOPs a dollar buys on `chip` for an hour: the book's first test of what to serve on.

    Formula:
        FLOPs/USD = C · 3600 / price per hour

    Args:
        chip: a chip name or ChipSpec.
        dtype: the dtype of the arithmetic (sets C).
        usd_per_chip_hour: a price of your own (USD per hour); by default the published one.

    Returns:
        FLOP per US dollar (FLOP/USD).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> fmt(flops_per_usd("tpu-v5e"), "FLOP/USD")
        '5.91e17 FLOP/USD'
    """
    spec = _chip(chip)
    price = _price(spec, usd_per_chip_hour)
    C = explain(spec.peak_flops_per_s, dtype=dtype)
    return Derivation("FLOPs/USD", "C · 3600 / price", lambda: f"{q(C.value, 'FLOP/s')} · 3600 / {q(price.value)}",
                      C.value * 3600 / price.value, "FLOP/USD", (price,))


@derivable
def cost_per_million_tokens(tokens_per_s_per_chip, chip, *, usd_per_chip_hour=None):
    """What a million tokens cost on `chip` at a throughput of `tokens_per_s_per_chip`.

    Formula:
        USD per 1e6 tokens = price per hour / 3600 / (tokens/s/chip) · 1e6

    Args:
        tokens_per_s_per_chip: tokens a chip produces per second (> 0; an array for a sweep).
        chip: a chip name or ChipSpec.
        usd_per_chip_hour: a price of your own (USD per hour); by default the published one.

    Returns:
        US dollars per million tokens (USD).

    Chapter:
        8 (Serving LLaMA 3)

    Example:
        >>> round(cost_per_million_tokens(235, "tpu-v5e"), 2)
        1.42
    """
    rate = positive("tokens_per_s_per_chip", tokens_per_s_per_chip)
    price = _price(chip, usd_per_chip_hour)
    return Derivation("USD/1e6 tokens", "price / 3600 / (tokens/s/chip) · 1e6",
                      lambda: f"{q(price.value)} / 3600 / {q(tokens_per_s_per_chip)} · 1e6",
                      plain(price.value / 3600 / np.asarray(rate) * 1e6), "USD", (price,))


# --- the latency-throughput trade-off ---------------------------------------------------------------


def plot_latency_throughput(model, topologies, *, context, batches=None, weight_dtype="bf16", kv_dtype=None,
                            compute_dtype="bf16", num_chips=None, ax=None):
    """Latency against throughput per chip as the batch grows, one curve per slice, each ending where memory does.

    Each point is one batch size: its generate step time (x, ms per token) and its tokens per second per
    chip (y). A curve rises steeply while the step is bound by reading the weights (bigger batches are
    nearly free), bends at the critical batch, and stops at the largest batch the slice's HBM holds,
    marked with a cross.

    Args:
        model: a model name, a :class:`~scalelib.ModelSpec` (a parameter count needs a KV size: use a spec).
        topologies: a list of :class:`~scalelib.TpuSlice` / :class:`~scalelib.GpuCluster` / chip names.
        context: S, tokens cached per sequence (> 0; one number: the plot sweeps `batches`).
        batches: the batch sizes to draw (default: 1 to 1024, on a log scale).
        weight_dtype, kv_dtype, compute_dtype: as in :func:`~scalelib.generate_step_time_s`.
        num_chips: with chip names, how many chips each (one count for all).
        ax: a matplotlib Axes to draw on (a new figure by default).

    Returns:
        the matplotlib Axes.

    Chapter:
        7 (Inference), 8 (Serving LLaMA 3)

    Example:
        >>> from scalelib import tpu_slice
        >>> ax = plot_latency_throughput("llama-3-70b", [tpu_slice((4, 4), "tpu-v5e")], context=2048,
        ...                              weight_dtype="int8")
        >>> ax.get_xlabel()
        'latency per generate step (ms)'
    """
    from ._diagrams import _axes

    if isinstance(topologies, (TpuSlice, str, ChipSpec)) or not hasattr(topologies, "__iter__"):
        topologies = [topologies]
    topologies = list(topologies)
    if not topologies:
        raise InvalidValueError("`topologies` must name at least one slice, cluster or chip")
    if batches is None:
        batches = np.unique(np.round(np.logspace(0, 10, 60, base=2)))
    B = np.asarray(positive("batches", batches), dtype=float)
    if np.ndim(positive("context", context)):
        raise InvalidValueError(f"`context` must be one number of tokens (the plot sweeps `batches`), got "
                                f"{shown(context)}")
    for topo in topologies:
        _hardware(topo, num_chips, arg="topologies")
    created = ax is None
    ax = _axes(ax, figsize=(7, 4.5))
    for topo in topologies:
        spec, n, where = _hardware(topo, num_chips)
        limit = max_batch_size(model, topo, context=context, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                               num_chips=num_chips)
        fits = B[B <= limit]
        label = where if isinstance(topo, str) or isinstance(topo, ChipSpec) else \
            f"{spec.name} {'x'.join(map(str, topo.shape))}" if isinstance(topo, TpuSlice) else where
        if fits.size == 0:
            ax.plot([], [], label=f"{label}: no batch fits")
            continue
        if limit >= 1 and limit not in fits:
            fits = np.append(fits, limit)
        kw = dict(context=context, weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                  num_chips=num_chips)
        t = np.asarray(generate_step_time_s(model, topo, batch=fits, **kw))
        rate = np.asarray(tokens_per_s_per_chip(model, topo, batch=fits, **kw))
        (line,) = ax.plot(t * 1e3, rate, marker=".", label=f"{label} (memory full at batch {int(limit)})")
        ax.plot(t[-1] * 1e3, rate[-1], marker="x", markersize=10, color=line.get_color())
    ax.set_xlabel("latency per generate step (ms)")
    ax.set_ylabel("throughput (tokens/s per chip)")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(f"Generation, context {context} tokens: latency against throughput")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if created:  # text legible on the site (>= 9.5 px at 1280 px)
        from ._plot import _legible

        _legible(ax.figure, relayout=True)
    return ax
