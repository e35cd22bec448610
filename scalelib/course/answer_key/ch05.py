"""Chapter 5 exercises: parallelism for training.

Every reference is computed by scalelib from its model and chip registries; the numbers below are
only what each question gives (a batch, a slice's shape, an MFU, a pipeline's stages). Facts and
formulas follow ch. 5 "How to Parallelize a Transformer for Training" of How to Scale Your Model
(Austin et al., 2025) and the ZeRO paper (Rajbhandari et al., 2020); ``book=`` names the book's
question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from ..check import Exercise, register
from ._tools import define, slip
from .ch04 import _letters
from ..._derivation import Derivation, explain, q
from ..._units import fmt
from ..._models import model
from ..._parallelism import (
    cross_slice_critical_batch,
    data_parallel_critical_batch,
    fsdp_tensor_parallel_critical_batch,
)
from ..._plan_search import needs_pipeline
from ..._specs import bytes_per_value
from ..._topology import gpu_cluster, tpu_pod, tpu_slice
from ..._training import zero_state_bytes
from ..._transformer import params, training_state_bytes

#: Exercises 5.4-5.6: the book's Q3 (LLaMA-2 13B on a v5p 16x16x16, worked in the chapter) moved to
#: Gemma 2 27B with 2M tokens per step in 4096-token sequences, where the chapter's thresholds and its
#: cost model agree.
S = dict(model="gemma-2-27b", shape=(16, 16, 16), B=2 * 2**20, seq_len=4096, mfu=0.4)


def _s_slice():
    return tpu_slice(S["shape"], "tpu-v5p")


# 5.1 -------------------------------------------------------------------------

_5_1 = dict(K=8)


def _gqa_13b(gated: bool = True, K: int | None = None) -> Derivation:
    """Reference for 5.1: LLaMA-2 13B's parameters with K key/value heads (grouped-query attention)."""
    m = model("llama-2-13b")
    K = _5_1["K"] if K is None else K
    # the name is what the success text shows: a reader's words, not an internal key
    spec = m.derive(f"LLaMA-2 13B with {K} key/value heads{'' if gated else ', ungated'}", K=K, gated=gated)
    return _letters(explain(params, spec))


register(Exercise(
    id="5.1",
    title="LLaMA-2 13B's parameters with 8 key/value heads",
    reference=_gqa_13b,
    unit="params",
    mistakes={
        slip(_gqa_13b(gated=False), _gqa_13b()):
            "you counted two MLP matrices per layer; LLaMA's gated MLP has three (gate, up and down)",
        slip(_gqa_13b(K=model("llama-2-13b").N), _gqa_13b()):
            "that gives every query head its own keys and values; with grouped-query attention only the K "
            "key/value heads have them",
    },
    book=("Q1",),
))


# 5.2 -------------------------------------------------------------------------

_5_2 = dict(model="llama-2-13b", chips=4096)


def _P(name: str) -> Derivation:
    """A preset's parameter count as one line, its terms left to chapter 4 (``sl.explain(sl.params, name)``)."""
    return Derivation("P", "params(model)", f"params({name})", params(name), "params",
                      where=(f"P: the parameters, counted term by term as in chapter 4 "
                             f"(sl.explain(sl.params, {name!r}) shows each term)",))


def _state_per_chip(**kw) -> Derivation:
    """Reference for 5.2: the training state FSDP leaves on each chip (`kw` applies a slip)."""
    name, n = _5_2["model"], _5_2["chips"]
    sharded = kw.pop("sharded", True)
    per_param = training_state_bytes(name, **kw) / params(name)
    opt = kw.get("optimizer", "adam")
    s = {"adam": 2, "momentum": 1}[opt]
    o = bytes_per_value(kw.get("optimizer_dtype", "f32"))
    g = 0 if kw.get("grad_dtype", "bf16") is None else 2
    P = _P(name)
    divisor = n if sharded else 1
    return define(Derivation("state per chip", "P·(p + g + s·o) / n", f"{q(P.value)}·(2 + {g} + {s}·{q(o)}) / {divisor}",
                             P.value * per_param / divisor, "B", (P,)),
                  {"p, g": "bytes per bf16 weight and per bf16 gradient", "s": "Adam's moments per parameter",
                   "o": "bytes per f32 moment", "n": "chips FSDP shards the state over"})


register(Exercise(
    id="5.2",
    title="LLaMA-2 13B's training state per chip under FSDP",
    reference=_state_per_chip,
    unit="B",
    mistakes={
        slip(_state_per_chip(optimizer_dtype="bf16"), _state_per_chip()):
            "either Adam's moments were counted in bf16 (they are f32 here), or only one moment was counted "
            "where Adam keeps two per parameter",
        slip(_state_per_chip(grad_dtype=None), _state_per_chip()):
            "the gradients are part of the state here: FSDP keeps a bf16 gradient for every weight it holds",
        slip(_state_per_chip(sharded=False), _state_per_chip()):
            "that is the whole state; FSDP splits the weights, the gradients and the optimizer's state over "
            "every chip of the slice",
    },
    book=("Q2",),
))


# 5.3 -------------------------------------------------------------------------

_5_3 = dict(B=16e6)


def _checkpoints(dtype: str = "bf16", widths: str = "D + 2·F") -> Derivation:
    """Reference for 5.3: the outputs of the MLP's three matmuls, per token and layer, kept in bf16."""
    m, B = model("llama-2-13b"), _5_3["B"]
    b = bytes_per_value(dtype)
    per = {"D + 2·F": m.D + 2 * m.F, "D": m.D, "D + F": m.D + m.F}[widths]
    text = {"D + 2·F": f"({m.D} + 2·{m.F})", "D": f"{m.D}", "D + F": f"({m.D} + {m.F})"}[widths]
    d = Derivation("checkpoints", f"b·L·B·({widths})", f"{q(b)}·{m.L}·{q(B)}·{text}", b * m.L * B * per, "B")
    return define(d, {"b": f"bytes per {dtype} value", "L": "layers", "B": "tokens in the batch",
                      "D": "the model width (the down projection's output)",
                      **({"F": "the MLP width (the gate's and the up projection's outputs)"} if "F" in widths else {})})


register(Exercise(
    id="5.3",
    title="Checkpointed MLP activations of a 16M-token batch",
    reference=_checkpoints,
    unit="B",
    mistakes={
        slip(_checkpoints(dtype="int8"), _checkpoints()):
            "each bf16 value takes 2 bytes",
        slip(_checkpoints(widths="D"), _checkpoints()):
            "that keeps only each layer's input or output (D values per token); the gate's and the up "
            "projection's outputs, F values each, are saved too",
        slip(_checkpoints(widths="D + F"), _checkpoints()):
            "a gated MLP has two matmuls going in, each with an output of F values per token",
    },
    book=("Q2",),
))


# 5.4 -------------------------------------------------------------------------

_5_4_CHOICES = ("DP", "FSDP", "FSDP + TP")


def _scheme() -> str:
    """Reference for 5.4: the first scheme, simplest first, that fits in memory and stays compute-bound."""
    cube, m = _s_slice(), model(S["model"])
    per_chip = S["B"] / cube.num_chips
    if training_state_bytes(m, grad_dtype=None) <= cube.spec.hbm_bytes and per_chip > data_parallel_critical_batch(cube):
        return "DP"
    if per_chip > data_parallel_critical_batch(cube):
        return "FSDP"
    if per_chip > fsdp_tensor_parallel_critical_batch(m.F, cube):
        return "FSDP + TP"
    raise AssertionError("no scheme works for exercise 5.4's setting")  # pragma: no cover


def _scheme_reason() -> str:
    cube, m = _s_slice(), model(S["model"])
    state = training_state_bytes(m, grad_dtype=None)
    return (f"Pure DP needs the whole {fmt(state, 'B')} state on each {fmt(cube.spec.hbm_bytes, 'B')} chip; FSDP "
            f"fits, but over all three axes its {S['B'] / cube.num_chips:.0f} tokens per chip fall short of what "
            f"its collectives need to hide behind the arithmetic; with tensor parallelism inside FSDP the tokens "
            f"each chip needs fall with the MLP's width, and this batch clears them.")


register(Exercise(
    id="5.4",
    title="DP, FSDP or FSDP + TP for Gemma 2 27B on a v5p 16x16x16",
    reference=_scheme,
    kind="choice",
    choices=_5_4_CHOICES,
    reason=_scheme_reason(),
    book=("Q3",),
))


# 5.5 -------------------------------------------------------------------------

_5_5 = dict(X=1024)


def _batch_for_width(M_X: float = 2, M_Y: float = 1) -> Derivation:
    """Reference for 5.5: the batch at which the balanced FSDP width is X, from X = sqrt(B/F · M_X/M_Y · n)."""
    m, n, X = model(S["model"]), _s_slice().num_chips, _5_5["X"]
    d = Derivation("B", "X²·F·M_Y / (M_X·n)", f"{X}²·{m.F}·{M_Y:g} / ({M_X:g}·{n})", X**2 * m.F * M_Y / (M_X * n),
                   "tokens", where=("X = sqrt(B/F · M_X/M_Y · n) solved for B",))
    return define(d, {"X": "the FSDP width asked for", "F": f"{S['model']}'s MLP width",
                      "M_X, M_Y": "torus axes FSDP and TP use", "n": "chips"})


register(Exercise(
    id="5.5",
    title="The batch that makes 1024-way FSDP the balanced split",
    reference=_batch_for_width,
    unit="tokens",
    integer=True,
    mistakes={
        slip(_batch_for_width(M_X=1, M_Y=2), _batch_for_width()):
            "M_X and M_Y are swapped: FSDP is the one spread over two of the torus's axes",
        slip(_batch_for_width(M_X=1, M_Y=1), _batch_for_width()):
            "FSDP and TP use different numbers of torus axes here; the ratio M_X / M_Y is not 1",
    },
    book=("Q3",),
))


# 5.6 -------------------------------------------------------------------------

def _step(per_param_token: int = 6, mfu: float | None = None) -> Derivation:
    cube = _s_slice()
    mfu = S["mfu"] if mfu is None else mfu
    P = _P(S["model"])
    C = cube.spec.peak_flops_per_s()
    n, B = cube.num_chips, S["B"]
    d = Derivation("T_step", f"{per_param_token}·P·B / (n·C·MFU)",
                   f"{per_param_token}·{q(P.value)}·{q(B)} / ({n}·{q(C, 'FLOP/s')}·{q(mfu)})",
                   per_param_token * P.value * B / (n * C * mfu), "s", (P,))
    return define(d, {"B": "tokens per step", "n": "chips", "C": "a TPU v5p's peak bf16 rate",
                      "MFU": "the share of the peak the step achieves"})


register(Exercise(
    id="5.6",
    title="Gemma 2 27B's step time at 40% MFU on 4096 v5p chips",
    reference=_step,
    unit="s",
    involves={"flops", "peak"},
    mistakes={
        slip(_step(per_param_token=2), _step()):
            "that counts the forward pass only; a training step is a forward and a backward",
        slip(_step(mfu=1.0), _step()):
            "that is the step at the chips' full peak; at the question's MFU they do only part of it",
        slip(_step(per_param_token=8), _step()):
            "that counts a recomputed forward too; MFU counts the model's FLOPs only",
    },
    book=("Q3",),
))


# 5.7 -------------------------------------------------------------------------

_5_7 = dict(model="llama-3.1-405b", B=8 * 2**20)


def _most_chips(threshold: str = "fsdp+tp") -> Derivation:
    m, pod = model(_5_7["model"]), tpu_pod("tpu-v5p")
    if threshold == "fsdp+tp":
        crit = explain(fsdp_tensor_parallel_critical_batch, m.F, pod)
    elif threshold == "one axis pair":
        crit = explain(fsdp_tensor_parallel_critical_batch, m.F, pod, M_X=1, M_Y=1)
    else:
        crit = explain(data_parallel_critical_batch, pod)
    crit = replace(crit, symbol="B_crit")
    d = Derivation("n_max", "⌊B / B_crit⌋", f"⌊{q(_5_7['B'])} / {q(crit.value)}⌋",
                   float(math.floor(_5_7["B"] / crit.value)), "chips", (crit,))
    return define(d, {"B": "tokens per step"})


register(Exercise(
    id="5.7",
    title="How many v5p chips FSDP + TP can use for LLaMA 3.1-405B at 8M tokens",
    reference=_most_chips,
    unit="chips",
    integer=True,
    mistakes={
        slip(_most_chips("fsdp"), _most_chips()):
            "that is the limit of FSDP alone; with TP alongside, each chip can do with far fewer tokens",
        slip(_most_chips("one axis pair"), _most_chips()):
            "FSDP here spans two of the torus's axes, which the threshold counts (M_X·M_Y is not 1)",
    },
    book=("Ex1",),
))


# 5.8 -------------------------------------------------------------------------

_5_8 = dict(p=16, v=4, target=0.03)


def _microbatches(v: int | None = None, relative: bool = False) -> Derivation:
    """Reference for 5.8: the fewest microbatches m whose bubble (p − 1) / (v·m + p − 1) is below the target."""
    p, f = _5_8["p"], _5_8["target"]
    v = _5_8["v"] if v is None else v
    if relative:  # the bubble taken over the useful time, (p − 1) / (v·m)
        return Derivation("m", "⌈(p − 1) / (v·f)⌉", f"⌈({p} − 1) / ({v}·{f})⌉", float(math.ceil((p - 1) / (v * f))), "")
    exact = (p - 1) * (1 / f - 1) / v
    d = Derivation("m", "⌈(p − 1)·(1/f − 1) / v⌉", f"⌈({p} − 1)·(1/{f} − 1) / {v}⌉", float(math.ceil(exact)), "",
                   where=("(p − 1) / (v·m + p − 1) < f solved for m",))
    return define(d, {"p": "pipeline stages", "f": "the bubble's largest share of the step", "v": "chunks per stage"})


register(Exercise(
    id="5.8",
    title="How many microbatches keep an interleaved pipeline's bubble under 3%",
    reference=_microbatches,
    unit="",
    integer=True,
    rtol=0.001,
    mistakes={
        slip(_microbatches(v=1), _microbatches()):
            "that is for plain 1F1B; with interleaving, each slot of the fill and drain costs only one chunk "
            "of a stage's work",
        slip(_microbatches(relative=True), _microbatches()):
            "that keeps the bubble under 3% of the useful time; the question asks for 3% of the whole step, "
            "bubble included",
    },
))


# 5.9 -------------------------------------------------------------------------

_5_9 = dict(B=8 * 2**20)


def _most_pods() -> Derivation:
    crit = replace(explain(cross_slice_critical_batch, tpu_pod("tpu-v5p")), symbol="B_pod")
    B = _5_9["B"]
    d = Derivation("pods", "⌊B / B_pod⌋", f"⌊{q(B)} / {q(crit.value)}⌋", float(math.floor(B / crit.value)), "pods",
                   (crit,))
    return define(d, {"B": "tokens per step"})


register(Exercise(
    id="5.9",
    title="How many v5p pods data parallelism over DCN can join at 8M tokens",
    reference=_most_pods,
    unit="pods",
    integer=True,
    rtol=0.001,
    involves=frozenset({"bandwidth"}),
    mistakes={
        slip(math.floor(_5_9["B"] / (tpu_pod("tpu-v5p").num_chips * data_parallel_critical_batch(tpu_pod("tpu-v5p")))),
             _most_pods()):
            "that holds every chip to the ICI threshold; between pods the link is DCN, and what counts is each "
            "pod's share of the batch, against what DCN needs per pod",
    },
))


# 5.10 ------------------------------------------------------------------------

_5_10 = dict(model="llama-2-13b", gpus=32)  # not LLaMA 3-8B: its parameter count is exercise 6.1's answer


def _zero(stage: int = 2) -> Derivation:
    name = _5_10["model"]
    d = explain(zero_state_bytes, params(name), _5_10["gpus"], stage=stage)
    return replace(d, where=d.where + (f"Ψ = sl.params({name!r}), counted as in chapter 4",))


register(Exercise(
    id="5.10",
    title="ZeRO stage 2's memory per GPU for LLaMA 2-13B on 32 GPUs",
    reference=_zero,
    unit="B",
    mistakes={
        slip(_zero(1), _zero()): "that is stage 1, which shards only the optimizer's state; stage 2 shards the "
                                 "gradients too",
        slip(_zero(3), _zero()): "that is stage 3, which shards the fp16 weights too; stage 2 keeps them whole",
        slip(_zero(0), _zero()): "that keeps everything on every GPU (plain data parallelism)",
    },
))


# 5.11 ------------------------------------------------------------------------

_5_11 = dict(model="gemma-2-27b", B=4 * 2**20, seq_len=4096, nodes=2048)


@lru_cache(maxsize=1)
def _pipeline_need():
    # the roofline ranking, as chapter 5 teaches it (the bound, which is what needs_pipeline asks by default)
    return needs_pipeline(_5_11["model"], _5_11["B"], gpu_cluster(_5_11["nodes"], "h100"), seq_len=_5_11["seq_len"],
                          rank="roofline")


def _speedup() -> Derivation:
    need = _pipeline_need()
    flat, piped = need.without_pipeline, need.with_pipeline
    return Derivation("speedup", "T_flat / T_PP", f"{q(flat.time_s, 's')} / {q(piped.time_s, 's')}",
                      flat.time_s / piped.time_s, "",
                      where=(f"T_flat: the best plan without a pipeline, {flat.plan!r}",
                             f"T_PP: the best plan of all, {piped.plan!r}"))


register(Exercise(
    id="5.11",
    title="What pipelining buys Gemma 2 27B on 16,384 H100s",
    reference=_speedup,
    unit="",
    rtol=0.02,
))


# 5.12 ------------------------------------------------------------------------

_5_12 = dict(model="llama-3.1-405b", T=131072)


def _ring_chips(both_ways: bool = False, grouped: bool = True) -> Derivation:
    """Reference for 5.12: the most chips Z with T/Z > t_min = 2·α·K/N, each ring step's K/V transfer hidden."""
    m, chip = model(_5_12["model"]), tpu_pod("tpu-v5p").spec
    C, W = chip.bf16_flops_per_s, chip.ici_link_bytes_per_s_bidirectional
    K = m.K if grouped else m.N
    factor = 1 if both_ways else 2
    T = _5_12["T"]
    per_chip = Derivation("t_min", f"{factor}·(C / W)·K / N" if factor > 1 else "(C / W)·K / N",
                          f"{factor}·({q(C, 'FLOP/s')} / {q(W, 'B/s')})·{K} / {m.N}", factor * C / W * K / m.N,
                          "tokens")
    d = Derivation("Z_max", "⌈T / t_min⌉ − 1", f"⌈{q(T)} / {q(per_chip.value)}⌉ − 1",
                   float(math.ceil(T / per_chip.value) - 1), "chips", (per_chip,))
    return define(d, {"C, W": "a v5p's bf16 FLOP/s and one ICI axis's bandwidth, both directions",
                      "K, N": f"{_5_12['model']}'s key/value and query heads",
                      "T": "tokens in the sequence, of which each chip must keep more than t_min"})


register(Exercise(
    id="5.12",
    title="How many v5p chips ring attention can spread a 128k-token sequence over",
    reference=_ring_chips,
    unit="chips",
    integer=True,
    rtol=0.001,
    involves=frozenset({"bandwidth"}),
    mistakes={
        slip(_ring_chips(both_ways=True), _ring_chips()):
            "that sends each K/V block at the axis's full bandwidth; a ring passes it one way, at half of it",
        slip(_ring_chips(grouped=False), _ring_chips()):
            "that counts as many key/value heads as query heads; grouped-query attention sends only K of them",
    },
))
