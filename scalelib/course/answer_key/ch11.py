"""Chapter 11 exercises: the capstone, one brief per learner.

Every reference is computed by scalelib from the learner's brief (:mod:`scalelib.course.capstone`):
the brief made last in the learner's kernel, or, in the grader, the brief of the name the notebook
used. Nothing here is a number of its own but the rules the questions state (the slice sizes a chip
is offered in, one prompt per prefill pass at the brief's utilisation, 11.10's 4x2 mesh and 4,096 tokens).

The chapter works the sample brief; the exercises ask for the decisions it leaves to the learner, and
none of them is a figure the chapter's cells compute for a brief (tests/test_capstone.py re-runs the
chapter with other learners' briefs to hold that): which training chip meets the deadline for the
least money, the chips it needs, the smallest slice whose best plan (chapter 5's plan search) meets the
deadline and what the run costs on it, whether FSDP alone reaches that slice's best step (a choice,
graded against the search's grid), the tokens the budget buys, the other serving chip's batch and
cost (GPU against TPU at the brief's prices), the prefill and generate pools of disaggregated serving,
one FSDP gather named by chapter 3's plan and confirmed against the compiled HLO, and a generate step's
collectives set against the latency target. The book's chapter 11 is a reading list and asks no
questions, so no exercise names a book item.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from .. import capstone_core as capstone
from ..capstone_core import cheapest_chip, chips_for_deadline, sample, training_cost_usd, training_flops
from ..check import Exercise, register
from ._tools import rename, slip
from ..._derivation import Derivation, explain, q
from ..._errors import ScalelibError
from ..._inference import generate_comms_time_s, generate_step_time_s, max_batch_size, max_batch_within_latency, prefill_time_s
from ..._models import model as _model
from ..._serving import SLICES_2D, cost_per_million_tokens, smallest_slice, usd_per_chip_hour
from ..._specs import chip
from ..._matmul_plan import plan_matmul
from ..._topology import gpu_cluster, tpu_slice
from ..._plan_search import search_plans
from ..._transformer import params, train_flops


class _PerBrief(Mapping):
    """Mistakes whose ratios follow the current brief: ``{ratio: text}`` computed when read.

    A slip that makes no difference in this brief (its ratio, or every ratio of a list slip, within
    twice the tolerance of 1), or that this brief cannot tell from an earlier one, is left out.
    """

    def __init__(self, make, rtol):
        self._make, self._apart = make, 2 * max(rtol, 0.005) * 1.01

    @staticmethod
    def _dist(a, b) -> float:
        a = a if isinstance(a, tuple) else (a,)
        b = b if isinstance(b, tuple) else (b,) * len(a)
        return max(abs(x / y - 1) for x, y in zip(a, b))

    def _now(self) -> dict:
        kept: dict = {}
        for ratio, text in self._make().items():
            if self._dist(ratio, 1.0) <= self._apart:
                continue
            if all(type(k) is not type(ratio) or self._dist(ratio, k) > self._apart for k in kept):
                kept[ratio] = text
        return kept

    def __getitem__(self, key):
        return self._now()[key]

    def __iter__(self):
        return iter(self._now())

    def __len__(self):
        return len(self._now())

    # Read whole, the mistakes are computed once (Mapping's own items() and values() compute them again for
    # every key): what the checker does with each verdict that is not correct
    def items(self):
        return self._now().items()

    def values(self):
        return self._now().values()


#: How the model's own derivations are shown: one line each, with the chapter that derives them, so that
#: no letter of the model (L layers, N heads, T sequence length) meets the same letter in another meaning.
_COLLAPSED = {"P_bytes (": ("P_bytes", "the weights in bytes, parameters times bytes per weight (chapter 4)", "B"),
              "params(": ("P", "parameters of the model (chapter 4)", "params"),
              "KV cache(": ("kv", "cache bytes per token (chapter 4)", "B"),
              "FLOPs_fwd(": ("F_attention", "forward FLOPs of causal attention (chapter 4)", "FLOP"),
              "FLOPs_train(": ("F", "training FLOPs of the run, attention included (chapter 4)", "FLOP")}


def _short(d: Derivation) -> Derivation:
    """`d` with each model derivation inside it collapsed to its result and a pointer to its chapter."""
    for prefix, (symbol, text, unit) in _COLLAPSED.items():
        if d.symbol.startswith(prefix):
            return Derivation(symbol, text, text, d.value, unit)
    steps = tuple(_short(s) for s in d.steps)
    return replace(d, steps=steps)


def _flops(b=None, *, attention=True) -> Derivation:
    b = b or sample()
    if not attention:
        n = params(b.model)
        return Derivation("F", "6·P·D", f"6·{q(n)}·{q(b.train_tokens)}", 6 * n * b.train_tokens, "FLOP",
                          where=("P: the model's parameters; D: the training tokens",))
    return _short(explain(train_flops, b.model, seq_len=b.seq_len, tokens=b.train_tokens, causal=True))


def _chosen(b=None) -> str:
    b = b or sample()
    return cheapest_chip(training_flops(b.model, b.train_tokens, b.seq_len), b.available, b.deadline_days, b.mfu)


# 11.1 ----------------------------------------------------------------------

register(Exercise(
    id="11.1",
    title="The cheapest chip that meets the deadline",
    reference=lambda: _chosen(),
    kind="choice",
    choices=("tpu-v5e", "tpu-v5p", "h100", "b200"),
    reason=("A run's cost is its chip-hours times the price, and its chip-hours are FLOPs / (C·MFU) whatever "
            "the count: so the cheapest chip is the one with the most FLOP/s per dollar, among those the "
            "cloud lends enough of to finish in time."),
    per_learner=True,
))


# 11.2 ----------------------------------------------------------------------

def _chips(b=None, *, mfu=None, attention=True, rounded=False, forward_only=False) -> Derivation:
    b = b or sample()
    name = _chosen(b)
    f = _flops(b, attention=attention)
    flops = f.value / 3 if forward_only else f.value
    m = b.mfu if mfu is None else mfu
    c = chip(name).peak_flops_per_s()
    exact = flops / (c * m * b.deadline_days * 86400)
    n = chips_for_deadline(flops, name, b.deadline_days, m) if rounded else exact
    ceil = ("⌈", "⌉") if rounded else ("", "")
    return Derivation("chips", f"{ceil[0]}F / (C·MFU·T_d){ceil[1]}",
                      f"{ceil[0]}{q(flops, 'FLOP')} / ({q(c, 'FLOP/s')}·{m:g}·{b.deadline_days:g}·86400 s){ceil[1]}",
                      float(n), "chips", (f,),
                      where=(f"C: a {name}'s bf16 peak; MFU: {b.mfu:.0%}, the utilisation the brief plans with; "
                             f"T_d: the deadline in seconds",))


register(Exercise(
    id="11.2",
    title="Chips to finish by the deadline",
    reference=lambda: _chips(),
    unit="chips",
    # the count before rounding, as the question asks: rounded, a slip of a few percent (6·P·D without attention)
    # lands on the same whole number of chips, and a small brief (3 B200s) would credit it
    rtol=0.005,
    mistakes=_PerBrief(lambda: {
        slip(_chips(rounded=True), _chips()): "that is rounded up; the question asks for the count before rounding",
        slip(_chips(mfu=1.0), _chips()): "the chips run at the brief's MFU, not at their peak",
        slip(_chips(attention=False), _chips()): "6·P·D leaves out attention's own FLOPs (chapter 4)",
        slip(_chips(forward_only=True), _chips()): "training runs the backward pass too, twice the forward's FLOPs",
    }, 0.005),
    per_learner=True,
))


# 11.3 ----------------------------------------------------------------------

def _offered(name: str, need: int, lent: int):
    """(chips, [(topology, slices joined over DCN), ...]) the chip is offered in, from `need` chips up to `lent`.

    GPUs: whole 8-GPU nodes. TPU v5p (and other 3D pods): boxes of whole 4x4x4 cubes that fit in the pod.
    TPU v5e (and other 2D pods): the slice shapes of chapter 8 up to a pod, then whole pods over DCN.
    """
    spec = chip(name)
    if spec.family != "tpu":
        for k in range(max(1, math.ceil(need / 8)), lent // 8 + 1):
            yield 8 * k, [(gpu_cluster(k, name), 1)]
    elif len(spec.pod_shape) == 3:
        X, Y, Z = (s // 4 for s in sorted(spec.pod_shape))
        for m in range(max(1, math.ceil(need / 64)), lent // 64 + 1):
            boxes = [(4 * a, 4 * b, 4 * c) for a in range(1, X + 1) for b in range(a, Y + 1)
                     for c in range(b, Z + 1) if a * b * c == m]
            if boxes:
                yield 64 * m, [(tpu_slice(s, name), 1) for s in boxes]
    else:
        pod = math.prod(spec.pod_shape)
        for s in SLICES_2D:
            if need <= math.prod(s) <= min(pod, lent):
                yield math.prod(s), [(tpu_slice(s, name), 1)]
        for k in range(max(2, math.ceil(need / pod)), lent // pod + 1):
            yield k * pod, [(tpu_slice(spec.pod_shape, name), k)]


def _training_slice(b=None, *, mfu=None):
    """(chips, topology, slices, best plan, days) for `b` (the current brief by default); see :func:`_search`."""
    return _search(_training_key(b or sample()), mfu)


def _training_key(b):
    """`b` with its serving half blanked: the search reads the training half only, and briefs that share it share
    the search."""
    return replace(b, learner="", variant=0, budget_usd=0.0, serve_chip="", serve_chips=0, weight_dtype="",
                   kv_dtype="", context=0, latency_s=0.0, daily_output_tokens=0.0, gpu_price_factor=1.0)


@functools.lru_cache(maxsize=512)
def _search(b, mfu):
    """(chips, topology, slices, best plan, days): the first offered slice whose best plan meets the deadline.

    The search grows from the deadline's chip count (11.2) and stops at the largest slice the cloud
    lends, met or not (the question says so). `b` is a brief with its serving half blanked.
    """
    name = _chosen(b)
    m = b.mfu if mfu is None else mfu
    need = chips_for_deadline(training_flops(b.model, b.train_tokens, b.seq_len), name, b.deadline_days, b.mfu)
    last = None
    for n, tops in _offered(name, need, b.chips_available[name]):
        for topo, k in tops:
            try:
                # ranked by the roofline: the brief's MFU stands in for every loss, so it scales the bound
                best = search_plans(b.model, b.batch_tokens, topo, seq_len=b.seq_len, slices=k, rank="roofline").best
            except ScalelibError:  # no plan fits this slice's memory
                continue
            days = b.train_tokens / b.batch_tokens * best.time_s / m / 86400
            last = (n, topo, k, best, days)
            if days <= b.deadline_days:
                return last
    if last is None:
        raise ScalelibError(f"capstone brief ({b.model} on {b.cloud}): no slice of {name} holds a plan")
    return last


def _slice(b=None, *, mfu=None) -> Derivation:
    b = b or sample()
    n, topo, k, best, days = _training_slice(b, mfu=mfu)
    m = b.mfu if mfu is None else mfu
    where = (f"T_step: the best plan's step at peak (chapter 5's cost model), slowed to the brief's MFU; "
             f"steps: {q(b.train_tokens)} tokens / {b.batch_tokens:,.0f} tokens a step",)
    slice_text = f"{topo!r}" + (f" x {k} joined over DCN" if k > 1 else "")
    return Derivation("chips", "the smallest offered slice whose best plan takes steps·T_step/MFU ≤ the deadline",
                      f"{slice_text}: {best.plan.label}, {q(best.time_s, 's')} / {m:g} a step, "
                      f"{days:.1f} days against {b.deadline_days:g}", float(n), "chips", where=where)


register(Exercise(
    id="11.3",
    title="The slice and its sharding, checked by the plan search",
    reference=lambda: _slice(),
    unit="chips",
    integer=True,
    mistakes=_PerBrief(lambda: {
        slip(_chips(rounded=True), _slice()): "that is the deadline formula's count; the slice must come in a size the chip "
                                  "is offered in, and its best searched plan must meet the deadline",
        slip(_slice(mfu=1.0), _slice()): "the plan search prices a step at peak; the brief plans at its MFU",
    }, 0.005),
    per_learner=True,
))


# 11.4 ----------------------------------------------------------------------

def _affordable(b=None, *, attention=True, mfu=None) -> Derivation:
    b = b or sample()
    name = _chosen(b)
    m = b.mfu if mfu is None else mfu
    per_token = (explain(train_flops, b.model, seq_len=b.seq_len, tokens=1, causal=True) if attention else
                 Derivation("F_token", "6·P", f"6·{q(params(b.model))}", 6 * params(b.model), "FLOP"))
    per_token = Derivation("F_token", "training FLOPs of one token, attention included (chapter 4)" if attention
                           else "6·P", "" if attention else per_token.numbers, per_token.value, "FLOP")
    price = usd_per_chip_hour(name)
    c = chip(name).peak_flops_per_s()
    value = b.budget_usd / price * 3600 * c * m / per_token.value
    return Derivation("tokens", "budget / price · 3600 · C·MFU / F_token",
                      f"{b.budget_usd:,.0f} USD / {price:g} USD · 3600 · {q(c, 'FLOP/s')}·{m:g} / "
                      f"{q(per_token.value, 'FLOP')}", value, "tokens", (per_token,),
                      where=(f"C: a {name}'s bf16 peak; price: USD per chip-hour",))


register(Exercise(
    id="11.4",
    title="Tokens the budget buys",
    reference=lambda: _affordable(),
    unit="tokens",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_affordable(attention=False), _affordable()): "a token's training FLOPs include its attention, not "
                                                           "only the parameters' matmuls",
        slip(_affordable(mfu=1.0), _affordable()): "at the brief's MFU a chip-hour does less than its peak",
    }, 0.02),
    per_learner=True,
))


# 11.5 ----------------------------------------------------------------------

def _slice_cost(b=None, *, billed_to_deadline=False) -> Derivation:
    b = b or sample()
    n, topo, k, best, days = _training_slice(b)
    name = _chosen(b)
    price = usd_per_chip_hour(name)
    t = b.deadline_days if billed_to_deadline else days
    return Derivation("cost", "chips · days · 24 · price", f"{n:,} · {t:.2f} · 24 · {price:g} USD",
                      n * t * 24 * price, "USD",
                      where=(f"chips, days: 11.3's slice and the days its best plan takes at the brief's MFU; "
                             f"price: USD per {name} chip-hour",))


def _formula_cost(b=None) -> float:
    b = b or sample()
    name = _chosen(b)
    return training_cost_usd(training_flops(b.model, b.train_tokens, b.seq_len), name, b.mfu)


register(Exercise(
    id="11.5",
    title="What the planned run costs",
    reference=lambda: _slice_cost(),
    unit="USD",
    rtol=0.002,  # the same sum as the reference; billing to a deadline a day later is off by more
    mistakes=_PerBrief(lambda: {
        slip(_formula_cost(), _slice_cost()): "that prices the deadline formula's FLOPs on the chips it needs; "
                                              "bill the slice of 11.3 for the days its plan takes",
        slip(_slice_cost(billed_to_deadline=True), _slice_cost()): "the slice is billed for the days the run "
                                                                   "takes, not until the deadline",
    }, 0.002),
    per_learner=True,
))


# 11.6, 11.7, 11.8: the other serving chip ----------------------------------

def _serve(b, name: str) -> dict:
    n = b.serve_chips if name == b.serve_chip else b.other_serve_chips
    return dict(num_chips=n, context=b.context, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype)


def _batch(b=None, name=None) -> Derivation:
    b = b or sample()
    return _batch_of(b, name or b.other_serve_chip)


@functools.lru_cache(maxsize=512)
def _batch_of(b, name: str) -> Derivation:
    """:func:`_batch` of brief `b` on chip `name`, derived once (11.6 to 11.11 and their slips ask it many times)."""
    return _without_one_step(_short(explain(max_batch_within_latency, b.model, name, latency_s=b.latency_s,
                                            **_serve(b, name))))


def _without_one_step(d: Derivation) -> Derivation:
    """The latency-capped batch without the library's check step (a step's time at batch 1, which reads like an
    answer), its target named T_target (L is the layers elsewhere), and the parameters a token uses defined."""
    steps = tuple(step for step in d.steps if step.symbol != "T_step")
    where = tuple(line.replace("W: HBM bandwidth", "W: a chip's HBM bandwidth")
                  .replace("a: S·kv/(N·W), the time to read one sequence's KV cache",
                           "a: the time to read one sequence's KV cache (a = S·kv/(N·W))")
                  .replace("b: 2·P_active/(N·C), the time of one sequence's matmuls",
                           "b: the time of one sequence's matmuls (b = 2·P_active/(N·C))")
                  + ("; P_active: parameters a token uses" if "P_active" in line else "") for line in d.where)
    return rename(replace(d, steps=steps, where=where), {"L": "T_target"})


def _memory_batch(b=None) -> Derivation:
    b = b or sample()
    return explain(max_batch_size, b.model, b.other_serve_chip, **_serve(b, b.other_serve_chip))


register(Exercise(
    id="11.6",
    title="The largest batch that meets the latency target, on the other chip",
    reference=lambda: _batch(),
    unit="sequences",
    integer=True,
    mistakes=_PerBrief(lambda: {
        slip(_memory_batch(), _batch()): "that batch fits in memory, but a step over it takes longer than the "
                                         "latency target",
        slip(_batch(name=sample().serve_chip), _batch()): "that is the batch of the brief's own serving slice; "
                                                           "this asks the other chip, on its own slice",
    }, 0.005),
    per_learner=True,
))


def _usd_per_million(b=None, name=None, *, per_slice=False) -> Derivation:
    b = b or sample()
    name = name or b.other_serve_chip
    kw = _serve(b, name)
    batch = _batch(b, name)
    step = _short(explain(generate_step_time_s, b.model, name, batch=batch.value, **kw))
    n = kw["num_chips"]
    per_chip = batch.value / step.value / (1 if per_slice else n)
    rate = Derivation("r", "B / T_step" + ("" if per_slice else " / n"),
                      f"{q(batch.value)} / {q(step.value, 's')}" + ("" if per_slice else f" / {n}"),
                      per_chip, "tokens/s", (step,),
                      where=(f"the batch B is the largest within the target on this slice; n: {n} {name} chips in "
                             f"the slice",))
    price = b.serve_price(name)
    usd = price / 3600 / per_chip * 1e6
    return Derivation("USD per 1e6 tokens", "price / 3600 / r · 1e6", f"{price:g} / 3600 / {q(per_chip)} · 1e6",
                      usd, "USD", (rate,), where=(f"price: USD per {name} chip-hour, the brief's; r: tokens/s per "
                                                  f"chip",))


register(Exercise(
    id="11.7",
    title="Cost of a million generated tokens, on the other chip",
    reference=lambda: _usd_per_million(),
    unit="USD",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_usd_per_million(per_slice=True), _usd_per_million()): "the slice's tokens per second are shared "
                                                                     "by all its chips, each billed by the hour",
        slip(_usd_per_million(name=sample().serve_chip), _usd_per_million()): "that is the brief's own serving "
                                                                               "chip; this asks the other chip, on "
                                                                               "its own slice",
    }, 0.02),
    per_learner=True,
))


def _cheaper(b=None) -> str:
    b = b or sample()
    return min((b.serve_chip, b.other_serve_chip), key=lambda name: _usd_per_million(b, name).value)


register(Exercise(
    id="11.8",
    title="GPU or TPU for serving, at the brief's prices",
    reference=lambda: _cheaper(),
    kind="choice",
    choices=("tpu-v5e", "h100"),
    reason=("Each chip serves at the largest batch its own slice allows within the target; what a million "
            "tokens cost is its price per chip-hour over the tokens a chip makes in that hour."),
    per_learner=True,
))


# 11.9: prefill and generate pools ------------------------------------------

def _pools(b=None, *, efficiency=None, in_chips=False, one_pool=False):
    """[prefill slices, generate slices] on the brief's serving chip, and their derivation."""
    b = b or sample()
    name, kw = b.serve_chip, _serve(b, b.serve_chip)
    eff = b.mfu if efficiency is None else efficiency
    pre = _short(explain(prefill_time_s, b.model, name, tokens=b.prompt_tokens, batch=1,
                         weight_dtype=b.weight_dtype, efficiency=eff, num_chips=kw["num_chips"]))
    batch = _batch(b, name)
    step = generate_step_time_s(b.model, name, batch=batch.value, **kw)
    requests = b.daily_output_tokens / b.output_tokens
    prefill = math.ceil(requests * pre.value / 86400)
    generate = math.ceil(b.daily_output_tokens * step / (86400 * batch.value))
    n = kw["num_chips"]
    if one_pool:  # generate slices that also prefill: the prompts' time added to the generate pool's
        generate = math.ceil((b.daily_output_tokens * step / batch.value + requests * pre.value) / 86400)
        prefill = 0
    scale = n if in_chips else 1
    return Derivation(
        "[prefill, generate] slices",
        "[⌈R·T_prefill / 86400⌉, ⌈tokens/day · T_step / (86400·B_gen)⌉]",
        f"[⌈{q(requests)}·{q(pre.value, 's')} / 86400⌉, ⌈{q(b.daily_output_tokens)}·{q(step, 's')} / "
        f"(86400·{q(batch.value)})⌉]",
        [float(prefill * scale), float(generate * scale)], "slices", (pre,),
        where=(f"R: requests a day, tokens/day / {b.output_tokens:,}; T_prefill: one {b.prompt_tokens:,}-token "
               f"prompt on a slice of {n} {name} at {eff:.0%} of peak; P_active: parameters a token uses; "
               f"T_step: the generate step at B_gen; B_gen: the largest batch within the latency target",))


register(Exercise(
    id="11.9",
    title="Prefill and generate pools for the daily load",
    reference=lambda: _pools(),
    unit="slices",
    integer=True,
    mistakes=_PerBrief(lambda: {
        slip(_pools(efficiency=1.0), _pools()): "a prefill runs at the brief's utilisation, not at peak",
        slip(_pools(in_chips=True), _pools()): "the pools are counted in slices like the brief's, not in chips",
    }, 0.005),
    per_learner=True,
))


# 11.10: a sharding named, and confirmed against the compiled HLO -----------------

GATHER_EXPR = "In[B_X, D] · W[D_X, F_Y] -> Out[B_X, F_Y]"
GATHER_MESH = (4, 2)  # X: FSDP, Y: tensor parallelism, 8 devices (chapters 3 and 10 simulate them on CPU)
GATHER_TOKENS = 4096


def _gathered(b=None, *, part="sent") -> Derivation:
    """Bytes one device sends in the FSDP AllGather of the MLP's in-projection W[D_X, F_Y] on the 4x2 mesh."""
    b = b or sample()
    spec = _model(b.model)
    plan = plan_matmul(GATHER_EXPR, dict(B=GATHER_TOKENS, D=spec.D, F=spec.F), tpu_slice(GATHER_MESH, "tpu-v5e"))
    (gather,) = plan.steps
    X, Y = GATHER_MESH
    value = {"sent": gather.moved_bytes, "V": gather.nbytes, "V_f32": 2 * gather.nbytes,
             "over_XY": (X * Y - 1) / (X * Y) * gather.nbytes * Y}[part]
    return Derivation("sent", "(X − 1)/X · V,  V = D·F/Y · 2 bytes",
                      f"{X - 1}/{X} · {spec.D}·{spec.F}/{Y} · 2 bytes", value, "B",
                      where=(f"D, F: {b.model}'s model width and MLP width; X, Y: the mesh axes of FSDP ({X} devices) "
                             f"and tensor parallelism ({Y}); V: the bytes of W[D, F_Y] a gather over X assembles "
                             f"(bf16); chapter 3's case 2: the contracting dimension D of W is split, so W is "
                             f"gathered over X before the matmul",))


register(Exercise(
    id="11.10",
    title="A sharding named, and confirmed by the compiler",
    reference=lambda: _gathered(),
    unit="B",
    rtol=0.01,
    mistakes=_PerBrief(lambda: {
        slip(_gathered(part="V"), _gathered()): "a device keeps its own block of W and sends only that block to "
                                                "the other devices of its X group",
        slip(_gathered(part="V_f32"), _gathered()): "the compiled HLO on CPU carries bf16 as f32, so its bytes are "
                                                    "not a TPU's; or the whole weight was counted, though Y splits "
                                                    "it",
        slip(_gathered(part="over_XY"), _gathered()): "the gather runs over X only: each device keeps its own "
                                                      "part of F along Y",
    }, 0.01),
    per_learner=True,
))


# 11.11: collectives inside the latency budget ------------------------------------

def _v5e_slice(b):
    """The brief's TPU v5e serving slice (its own or the other), shaped as chapter 8's smallest slice."""
    return smallest_slice(b.model, "tpu-v5e", weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype,
                          batch=capstone.SERVE_SLICE_SEQUENCES, context=b.context)


def _one_size_up(topo):
    """The v5e slice of chapter 8's next shape after `topo`'s: twice the chips."""
    shapes = [tuple(s) for s in SLICES_2D]
    return tpu_slice(shapes[shapes.index(tuple(topo.shape)) + 1], "tpu-v5e")


def _with_collectives(b=None, *, comms=1.0, layers=True, bigger=True) -> Derivation:
    """The generate step, its collectives added, on the v5e slice one size up from the brief's smallest, at the
    batch the smallest slice allows within the target without collectives (the chapter works the smallest slice
    only: this asks what doubling it does)."""
    b = b or sample()
    small = _v5e_slice(b)
    topo = _one_size_up(small) if bigger else small
    kw = dict(context=b.context, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype)
    batch = max_batch_within_latency(b.model, small, latency_s=b.latency_s, **kw)
    step = _short(explain(generate_step_time_s, b.model, topo, batch=batch, **kw))
    ici = explain(generate_comms_time_s, b.model, topo, batch=int(batch))
    text = "one collective of the activations over all the axes of the slice (chapter 3)"
    shown = [Derivation(s.symbol, text, text, s.value, "s") for s in ici.steps]
    ici = replace(ici, steps=tuple(shown))
    t_ici = ici.value * comms / (1 if layers else _model(b.model).L)
    return Derivation("T", "T_step + T_ici", f"{q(step.value, 's')} + {q(t_ici, 's')}", step.value + t_ici, "s",
                      (step, ici), where=(f"the batch, {batch:.0f} sequences, is the largest within the "
                                          f"{q(b.latency_s, 's')} target without collectives on the smallest "
                                          f"slice {small!r}, here on {topo!r}",))


register(Exercise(
    id="11.11",
    title="Collectives inside the latency budget, on a slice twice as large",
    reference=lambda: _with_collectives(),
    unit="s",
    rtol=0.02,
    mistakes=_PerBrief(lambda: {
        slip(_with_collectives(comms=0.0), _with_collectives()): "the step's collectives come on top of its HBM "
                                                                 "and FLOP time here: nothing overlaps them",
        slip(_with_collectives(comms=0.5), _with_collectives()): "both blocks of a layer, attention and MLP, "
                                                                 "gather their input and reduce-scatter their output",
        slip(_with_collectives(layers=False), _with_collectives()): "every layer runs its own collectives",
        slip(_with_collectives(bigger=False), _with_collectives()): "that is the smallest slice; the question asks "
                                                                    "about the slice one size up, twice the chips",
    }, 0.02),
    per_learner=True,
))


# 11.12: the sharding, as a choice -------------------------------------------------

#: The shardings 11.12 names: FSDP alone (data parallelism and DCN replicas allowed, no tensor or pipeline
#: parallelism), or FSDP with tensor parallelism.
SHARDINGS = ("FSDP", "FSDP + TP")


@functools.lru_cache(maxsize=512)
def _plans(b, mfu):
    """Chapter 5's search on 11.3's slice, every plan priced (`b` with its serving half blanked)."""
    n, topo, k, best, days = _search(b, mfu)
    return search_plans(b.model, b.batch_tokens, topo, seq_len=b.seq_len, slices=k, rank="roofline", runners_up=0)


def _sharding_times(b=None) -> tuple[float, float]:
    """(the best plan's step, the best step of a plan with neither tensor nor pipeline parallelism) on 11.3's
    slice, both at peak, among the plans that fit (inf if none without them fits)."""
    b = b or sample()
    key = _training_key(b)
    search = _plans(key, None)
    g, t, memory = search.grid, search.step_times_s, search.memory_bytes
    fits = np.isfinite(t) & (memory <= chip(_chosen(b)).hbm_bytes)
    plain = fits & (g["tensor"] == 1) & (g["pipeline"] == 1)
    return search.best.time_s, float(t[plain].min()) if plain.any() else math.inf


def _sharding(b=None) -> str:
    """11.12's reference: FSDP if a plan without tensor or pipeline parallelism reaches the best step on 11.3's
    slice, FSDP + TP if only a plan with tensor parallelism does."""
    b = b or sample()
    best, plain = _sharding_times(b)
    if plain <= best * (1 + 1e-9):
        return "FSDP"
    n, topo, k, chosen, days = _training_slice(b)
    if chosen.plan.tensor == 1:  # the two names would not cover this brief (a bug in the brief's lists)
        raise ScalelibError(f"capstone brief ({b.model} on {b.cloud}): the best plan {chosen.plan.label} needs a "
                            f"pipeline, not tensor parallelism")
    return "FSDP + TP"


register(Exercise(
    id="11.12",
    title="The sharding of the slice, FSDP alone or with tensor parallelism",
    reference=lambda: _sharding(),
    kind="choice",
    choices=SHARDINGS,
    reason=("On a slice the batch fills, FSDP alone is compute-bound while each chip's share of the batch is at "
            "least C / W over the axes it uses (chapter 5) and the activations fit without recomputing too much; "
            "where either fails, tensor parallelism shrinks each FSDP gather and each chip's activations, and "
            "chapter 5's search prices the difference."),
    per_learner=True,
))
