"""Chapter 11 exercises: the capstone, one brief per learner.

Every reference is computed by scalelib from the learner's brief (:mod:`scalelib.course.capstone`):
the brief made last in the learner's kernel, or, in the grader, the brief of the name the notebook
used. Nothing here is a number of its own but the brief's assumptions stated in the questions (bf16
parameters and gradients with Adam's moments in f32). The book's chapter 11 is a reading list and
asks no questions, so no exercise names a book item.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..capstone import cheapest_chip, chips_for_deadline, sample, training_cost_usd, training_flops
from ..check import Exercise, register
from ._tools import after, slip
from .ch08 import _all as _defined
from ..._derivation import Derivation, explain, q
from ..._inference import max_batch_size, max_batch_within_latency, tokens_per_s_per_chip
from ..._serving import cost_per_million_tokens, usd_per_chip_hour
from ..._specs import chip
from ..._transformer import params, train_flops, training_state_bytes


class _PerBrief(Mapping):
    """Mistakes whose ratios follow the current brief: ``{ratio: text}`` computed when read.

    A slip that makes no difference in this brief (its ratio within twice the tolerance of 1), or that
    this brief cannot tell from an earlier one, is left out.
    """

    def __init__(self, make, rtol):
        self._make, self._apart = make, 2 * max(rtol, 0.005) * 1.01

    def _now(self) -> dict:
        kept: dict = {}
        for ratio, text in self._make().items():
            if abs(ratio - 1) > self._apart and all(abs(ratio / k - 1) > self._apart for k in kept):
                kept[ratio] = text
        return kept

    def __getitem__(self, key):
        return self._now()[key]

    def __iter__(self):
        return iter(self._now())

    def __len__(self):
        return len(self._now())


#: What the symbols of this chapter's derivations stand for, where a step leaves one undefined.
MEANINGS = {"B": "sequences in the batch", "S": "tokens cached per sequence", "kv": "KV bytes per token",
            "P": "the model's parameters", "w": "bytes per weight", "W": "a chip's HBM bandwidth",
            "C": "the chip's bf16 peak", "P_active": "parameters a token uses", "D": "training tokens"}


def _all(d: Derivation) -> Derivation:
    """`d` with the model's letters and every other symbol of :data:`MEANINGS` it uses defined."""
    return _defined(d, MEANINGS)


def _flops(b=None, *, causal=True, attention=True) -> Derivation:
    b = b or sample()
    if not attention:
        n = params(b.model)
        return Derivation("F", "6·P·D", f"6·{q(n)}·{q(b.train_tokens)}", 6 * n * b.train_tokens, "FLOP")
    return explain(train_flops, b.model, seq_len=b.seq_len, tokens=b.train_tokens, causal=causal)


def _chosen(b=None) -> str:
    b = b or sample()
    return cheapest_chip(training_flops(b.model, b.train_tokens, b.seq_len), b.available, b.deadline_days, b.mfu)


def _where(b, name) -> str:
    return (f"F: the training FLOPs; C: a {name}'s bf16 peak; MFU: {b.mfu:.0%}, the utilisation the brief "
            f"plans with")


# 11.1 ----------------------------------------------------------------------

register(Exercise(
    id="11.1",
    title="FLOPs to train your brief's model",
    reference=lambda: _all(_flops()),
    unit="FLOP",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_flops(attention=False), _flops()): "6·P·D counts the parameters' matmuls only; at this sequence "
                                                  "length attention adds FLOPs of its own (chapter 4)",
        slip(_flops(causal=False), _flops()): "with causal attention each token attends only to the tokens before "
                                               "it: about half the attention FLOPs of full attention",
        slip(_flops().value / 3, _flops()): "that is one forward pass; training adds the backward pass, twice as "
                                            "much again",
    }, 0.02),
    per_learner=True,
))


# 11.2, 11.3 -----------------------------------------------------------------

register(Exercise(
    id="11.2",
    title="The cheapest chip that meets the deadline",
    reference=lambda: _chosen(),
    kind="choice",
    choices=("tpu-v5e", "tpu-v5p", "h100", "b200"),
    reason=("A run's cost is its chip-hours times the price, and its chip-hours are FLOPs / (C·MFU): so the "
            "cheapest chip is the one with the most FLOP/s per dollar, among those the cloud lends enough of "
            "to finish in time."),
    per_learner=True,
))


def _chips(b=None, *, mfu=None) -> Derivation:
    b = b or sample()
    name = _chosen(b)
    f = _flops(b)
    m = b.mfu if mfu is None else mfu
    c = chip(name).peak_flops_per_s()
    n = chips_for_deadline(f.value, name, b.deadline_days, m)
    return Derivation("chips", "⌈F / (C·MFU·T)⌉",
                      f"⌈{q(f.value, 'FLOP')} / ({q(c, 'FLOP/s')}·{m:g}·{b.deadline_days:g}·86400 s)⌉",
                      float(n), "chips", (f,), where=(_where(b, name) + "; T: the deadline in seconds",))


register(Exercise(
    id="11.3",
    title="Chips to finish by the deadline",
    reference=lambda: _all(_chips()),
    unit="chips",
    rtol=0.005,
    mistakes=_PerBrief(lambda: {
        slip(_chips(mfu=1.0), _chips()): "the chips run at the brief's MFU, not at their peak",
    }, 0.005),
    per_learner=True,
))


# 11.4, 11.5 -----------------------------------------------------------------

def _cost(b=None, *, mfu=None) -> Derivation:
    b = b or sample()
    name = _chosen(b)
    f = _flops(b)
    m = b.mfu if mfu is None else mfu
    price = usd_per_chip_hour(name)
    c = chip(name).peak_flops_per_s()
    return Derivation("cost", "F / (C·MFU) / 3600 · price",
                      f"{q(f.value, 'FLOP')} / ({q(c, 'FLOP/s')}·{m:g}) / 3600 · {price:g} USD",
                      training_cost_usd(f.value, name, m), "USD", (f,),
                      where=(_where(b, name) + f"; price: USD {price:g} per chip-hour",))


def _billed_for_deadline(b=None) -> float:
    b = b or sample()
    return _chips(b).value * b.deadline_days * 24 * usd_per_chip_hour(_chosen(b))


register(Exercise(
    id="11.4",
    title="What the training run costs",
    reference=lambda: _all(_cost()),
    unit="USD",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_cost(mfu=1.0), _cost()): "at the brief's MFU the run takes longer (and costs more) than at peak",
        slip(_billed_for_deadline(), _cost()): "that pays for the chips until the deadline; the run needs only "
                                               "its chip-hours, F / (C·MFU)",
    }, 0.02),
    per_learner=True,
))


def _affordable(b=None, *, attention=True) -> Derivation:
    b = b or sample()
    name = _chosen(b)
    per_token = (explain(train_flops, b.model, seq_len=b.seq_len, tokens=1, causal=True) if attention else
                 Derivation("F_token", "6·P", f"6·{q(params(b.model))}", 6 * params(b.model), "FLOP"))
    price = usd_per_chip_hour(name)
    c = chip(name).peak_flops_per_s()
    value = b.budget_usd / price * 3600 * c * b.mfu / per_token.value
    return Derivation("tokens", "budget / price · 3600 · C·MFU / F_token",
                      f"{b.budget_usd:,.0f} USD / {price:g} USD · 3600 · {q(c, 'FLOP/s')}·{b.mfu:g} / "
                      f"{q(per_token.value, 'FLOP')}", value, "tokens", (per_token,),
                      where=(f"F_token: training FLOPs per token; C: a {name}'s bf16 peak; price: per chip-hour",))


register(Exercise(
    id="11.5",
    title="Tokens the budget buys",
    reference=lambda: _all(_affordable()),
    unit="tokens",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_affordable(attention=False), _affordable()): "a token's training FLOPs include its attention, not "
                                                           "only 6·P",
    }, 0.02),
    per_learner=True,
))


# 11.6 -----------------------------------------------------------------------

def _state_chips(b=None, *, grad_dtype="bf16", optimizer_dtype="f32", param_dtype="bf16") -> Derivation:
    b = b or sample()
    name = _chosen(b)
    state = explain(training_state_bytes, b.model, param_dtype=param_dtype, grad_dtype=grad_dtype,
                    optimizer_dtype=optimizer_dtype)
    hbm = chip(name).hbm_bytes
    return Derivation("chips", "⌈state / HBM⌉", f"⌈{q(state.value, 'B')} / {q(hbm, 'B')}⌉",
                      float(math.ceil(state.value / hbm)), "chips", (state,),
                      where=(f"state: parameters, gradients and Adam's two moments; HBM: a {name}'s memory",))


register(Exercise(
    id="11.6",
    title="Chips just to hold the training state",
    reference=lambda: _all(_state_chips()),
    unit="chips",
    rtol=0.005,
    mistakes=_PerBrief(lambda: {
        slip(_state_chips(grad_dtype=None), _state_chips()): "the gradients take memory too (bf16, like the "
                                                             "parameters)",
        slip(_state_chips(grad_dtype="f32", param_dtype="f32"), _state_chips()): "parameters and gradients are "
                                                                                  "bf16 here: 2 bytes each",
    }, 0.005),
    per_learner=True,
))


# 11.7, 11.8, 11.9 -----------------------------------------------------------

def _serve_kwargs(b) -> dict:
    return dict(num_chips=b.serve_chips, context=b.context, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype)


def _batch(b=None) -> Derivation:
    b = b or sample()
    return explain(max_batch_within_latency, b.model, b.serve_chip, latency_s=b.latency_s, **_serve_kwargs(b))


def _memory_batch(b=None) -> Derivation:
    b = b or sample()
    return explain(max_batch_size, b.model, b.serve_chip, **_serve_kwargs(b))


register(Exercise(
    id="11.7",
    title="The largest batch that meets the latency target",
    reference=lambda: _all(_batch()),
    unit="sequences",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_memory_batch(), _batch()): "that batch fits in memory, but a step over it takes longer than the "
                                         "latency target",
    }, 0.02),
    per_learner=True,
))


def _throughput(b=None) -> Derivation:
    b = b or sample()
    return explain(tokens_per_s_per_chip, b.model, b.serve_chip, batch=_batch(b).value, **_serve_kwargs(b))


def _usd_per_million(b=None) -> Derivation:
    b = b or sample()
    rate = _throughput(b)
    return after(explain(cost_per_million_tokens, rate.value, b.serve_chip), rate)


register(Exercise(
    id="11.8",
    title="Cost of a million generated tokens",
    reference=lambda: _all(_usd_per_million()),
    unit="USD",
    rtol=0.03,
    mistakes=_PerBrief(lambda: {
        slip(explain(cost_per_million_tokens, _throughput().value * sample().serve_chips, sample().serve_chip),
             _usd_per_million()): "the slice's tokens per second are shared by all its chips, each billed by the "
                                  "hour",
    }, 0.03),
    per_learner=True,
))


def _fleet(b=None) -> Derivation:
    b = b or sample()
    per_slice = _throughput(b).value * b.serve_chips
    slices = math.ceil(b.daily_output_tokens / (86400 * per_slice))
    return Derivation("chips", "⌈tokens per day / (86400 · tokens/s per slice)⌉ · N",
                      f"⌈{q(b.daily_output_tokens)} / (86400 · {q(per_slice)})⌉ · {b.serve_chips}",
                      float(slices * b.serve_chips), "chips", (_throughput(b),),
                      where=(f"N: {b.serve_chips} {b.serve_chip} chips in a slice",))


register(Exercise(
    id="11.9",
    title="Chips to serve the daily load",
    reference=lambda: _all(_fleet()),
    unit="chips",
    rtol=0.02,
    per_learner=True,
))

