"""Chapter 11's capstone briefs, as drawn: what a brief holds and how a number becomes one.

The name a learner gives is turned into a brief by :mod:`scalelib.course.capstone`, which redraws the
rare brief whose answers the chapter's own cells would compute by chance; this module is the layer
below it (the answer key and the checker import it, and it imports neither).

A brief is a small planning job: train a given model on a given number of tokens before a deadline,
choosing among the chips a cloud can lend, and then serve it under a latency target and a daily load of
requests (a prompt and the tokens it generates), weighing the brief's serving chip against another (a GPU
against a TPU, at the brief's prices: a GPU at its list price or at a discount).
:func:`scalelib.course.capstone.capstone_brief` draws a learner's brief from their name (a hash of it picks the model, the
amount of training, the deadline, the cloud, the serving chip, the precision, the context, the target
and the load), so the same name always gives the same brief, on the learner's machine and in the
grader. Figures that follow from others (the budget, the serving slice) are computed by scalelib,
never typed in.

The exercises of chapter 11 (``answer_key/ch11.py``) are checked against the brief made last in the
learner's kernel (:func:`current`); the grader judges each answer against the brief of the name the
notebook used and reports, in the gradebook, a name that is not the submission's learner.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Iterator

from .._errors import InvalidValueError
from .._models import model as _model
from .._serving import min_chips, usd_per_chip_hour
from .._specs import chip as _chip
from .._transformer import params, train_flops
from .._units import fmt
from .i18n import _, using_language

#: What a brief is drawn from. Each tuple is one choice of the brief; the learner's hash picks one entry
#: of each (see :func:`scalelib.course.capstone.capstone_brief`). Models are the course's presets (scalelib/data/models.toml).
MODELS = ("llama-3-8b", "llama-2-13b", "gemma-2-27b", "llama-3-70b")
#: Training tokens per parameter (the Chinchilla optimum is about 20; LLaMA 3 went far past it).
TOKENS_PER_PARAM = (20, 100, 200)
SEQ_LENS = (4096, 8192)
DEADLINE_DAYS = (21, 45, 90)
#: The clouds: how many chips of each kind one will lend for the training run.
CLOUDS = (
    ("Cloud A", (("tpu-v5e", 2048), ("tpu-v5p", 2048), ("h100", 1024))),
    ("Cloud B", (("tpu-v5p", 4096), ("h100", 2048), ("b200", 256))),
    ("Cloud C", (("tpu-v5e", 4096), ("h100", 512), ("b200", 1024))),
)
#: The budget as a multiple of the cheapest plan that meets the deadline (rounded to 2 significant figures).
BUDGET_FACTORS = (0.6, 1.5)
SERVE_CHIPS = ("tpu-v5e", "h100")
WEIGHT_DTYPES = ("int8", "bf16")
CONTEXTS = (4096, 16384)
#: Latency targets per output token. Each lies above a batch of one's step and below the step with the memory
#: full, on both serving chips of every serving draw (tests/test_capstone.py), so the target binds every brief.
LATENCIES_S = (0.013, 0.017)
DAILY_OUTPUT_TOKENS = (2e9, 3e10)
#: Utilisation every brief assumes for training (the book's planning figure in ch. 6).
MFU = 0.4
#: The serving slice holds the weights and this many sequences' KV caches at the brief's context.
SERVE_SLICE_SEQUENCES = 64
#: Tokens per training step (batch), for the sharding part.
BATCH_TOKENS = 4 * 2**20
#: Tokens each request generates; its prompt fills the rest of the brief's context (see ``prompt_tokens``).
OUTPUT_TOKENS = 1024
#: The serving chip a brief weighs against its own (GPU against TPU at the brief's prices).
OTHER_SERVE_CHIP = {"tpu-v5e": "h100", "h100": "tpu-v5e"}
#: What the brief's cloud charges for a serving GPU, as a share of its list price: the list price, or a
#: committed-use discount. At list price an H100 makes a generated token for about twice a v5e's cost; at the
#: discount, most briefs' H100 is the cheaper: so "GPU or TPU" (11.8) goes both ways across learners.
GPU_SERVE_PRICE_FACTORS = (1.0, 0.4)

_CHOICES = (MODELS, TOKENS_PER_PARAM, SEQ_LENS, DEADLINE_DAYS, CLOUDS, BUDGET_FACTORS, SERVE_CHIPS,
            WEIGHT_DTYPES, CONTEXTS, LATENCIES_S, DAILY_OUTPUT_TOKENS)
#: How many different briefs there are.
VARIANTS = math.prod(len(c) for c in _CHOICES)


def _significant(x: float, digits: int = 2) -> float:
    return float(f"{x:.{digits - 1}e}")


@dataclass(frozen=True)
class CapstoneBrief:
    """One learner's capstone: what to train, by when, where; what to serve, how fast, how much.

    Chapter:
        11 (Capstone)
    """

    learner: str = field(compare=False)  # as the learner wrote it; briefs compare by content
    variant: int
    model: str
    train_tokens: float
    seq_len: int
    deadline_days: float
    cloud: str
    available: tuple[tuple[str, int], ...]
    budget_usd: float
    mfu: float
    batch_tokens: float
    serve_chip: str
    serve_chips: int
    weight_dtype: str
    kv_dtype: str
    context: int
    latency_s: float
    daily_output_tokens: float
    gpu_price_factor: float = 1.0

    def serve_price(self, chip: str) -> float:
        """USD per chip-hour the brief's cloud charges to serve on `chip`: the list price, a GPU's times the brief's
        factor (rounded to 2 significant figures)."""
        price = usd_per_chip_hour(chip)
        return _significant(price * self.gpu_price_factor, 2) if _chip(chip).family != "tpu" else price

    @property
    def other_serve_chip(self) -> str:
        """The serving chip the brief weighs against its own: an H100 for a TPU v5e brief, and back."""
        return OTHER_SERVE_CHIP[self.serve_chip]

    @property
    def other_serve_chips(self) -> int:
        """The other serving chip's slice: the smallest that holds the weights and the same caches as the brief's."""
        return _other_serve_chips(self.model, self.other_serve_chip, self.weight_dtype, self.kv_dtype, self.context)

    @property
    def output_tokens(self) -> int:
        """Tokens each request generates."""
        return OUTPUT_TOKENS

    @property
    def prompt_tokens(self) -> int:
        """Tokens of each request's prompt: the context less the tokens it generates."""
        return self.context - OUTPUT_TOKENS

    @property
    def chips_available(self) -> dict[str, int]:
        """Chip name -> how many the brief's cloud lends for training."""
        return dict(self.available)

    def rows(self) -> list[tuple[str, str]]:
        """The brief as (item, value) rows, in the order a reader meets them (in English; see :meth:`shown_rows`)."""
        with using_language("en"):
            return self.shown_rows()

    def shown_rows(self) -> list[tuple[str, str]]:
        """:meth:`rows` in the learner's language (what the notebook shows)."""
        def price(name: str, usd: float) -> str:
            return _("{name} (USD {usd}/chip-hour)").format(name=name, usd=f"{usd:.2f}")

        fleet = ", ".join(f"{n:,} " + price(name, usd_per_chip_hour(name)) for name, n in self.available)
        return [
            (_("Learner"), self.learner),
            (_("Model"), f"{self.model} ({fmt(params(self.model), 'params')})"),
            (_("Training tokens"), fmt(self.train_tokens, "tokens")),
            (_("Sequence length"), _("{count} tokens").format(count=f"{self.seq_len:,}")),
            (_("Deadline"), _("{days} days of training").format(days=f"{self.deadline_days:g}")),
            (_("Chips the cloud lends"), f"{self.cloud}: {fleet}"),
            (_("Budget for training"), f"USD {self.budget_usd:,.0f}"),
            (_("Utilisation to plan with (MFU)"), f"{self.mfu:.0%}"),
            (_("Batch"), _("{count} tokens per step").format(count=f"{self.batch_tokens:,.0f}")),
            (_("Serving slice"), f"{self.serve_chips} " + price(self.serve_chip, self.serve_price(self.serve_chip))),
            (_("Serving precision"), _("weights {weights}, KV cache {kv}").format(weights=self.weight_dtype,
                                                                                 kv=self.kv_dtype)),
            (_("Tokens cached per sequence"), f"{self.context:,}"),
            (_("Latency target"), _("{latency} per output token (one generate step)").format(
                latency=fmt(self.latency_s, "s"))),
            (_("Requests"), _("prompts of {prompt} tokens, each generating {output} tokens").format(
                prompt=f"{self.prompt_tokens:,}", output=f"{self.output_tokens:,}")),
            (_("Load"), _("{tokens} generated per day").format(tokens=fmt(self.daily_output_tokens, "tokens"))),
            (_("Serving slice to weigh against"), f"{self.other_serve_chips} "
                                                  + price(self.other_serve_chip,
                                                          self.serve_price(self.other_serve_chip))),
        ]

    def _repr_markdown_(self) -> str:
        lines = [_("**Capstone brief {variant}**").format(variant=self.variant), "", _("| Item | Value |"), "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.shown_rows()]
        return "\n".join(lines)

    def __str__(self) -> str:
        rows = self.shown_rows()
        width = max(len(k) for k, _v in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def normalize_name(name: str) -> str:
    """A learner's name as the brief reads it: case, accents aside, spaces and punctuation ignored."""
    return re.sub(r"[\W_]+", "", name.casefold())


def drawn_variant(name: str) -> int:
    """The brief number (0 to VARIANTS - 1) a learner's name draws first (before any redraw; see
    :func:`scalelib.course.capstone.variant_of`)."""
    key = normalize_name(name)
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % VARIANTS


def _pick(variant: int) -> tuple:
    picks = []
    for choice in _CHOICES:
        variant, index = divmod(variant, len(choice))
        picks.append(choice[index])
    return tuple(picks)


def training_flops(model: str, tokens: float, seq_len: int) -> float:
    """FLOPs of training `model` on `tokens` tokens in sequences of `seq_len` (causal attention included)."""
    return float(train_flops(model, seq_len=seq_len, tokens=tokens, causal=True))


def chips_for_deadline(flops: float, chip: str, days: float, mfu: float) -> int:
    """The fewest chips of `chip` that do `flops` in `days` at utilisation `mfu`."""
    return math.ceil(flops / (_chip(chip).peak_flops_per_s() * mfu * days * 86400) * (1 - 1e-12))


def training_cost_usd(flops: float, chip: str, mfu: float) -> float:
    """What `flops` of training cost on `chip` at `mfu`: chip-hours at the published price."""
    return flops / (_chip(chip).peak_flops_per_s() * mfu) / 3600 * usd_per_chip_hour(chip)


def cheapest_chip(flops: float, available, days: float, mfu: float) -> str:
    """The chip of `available` (name, count) pairs that meets the deadline for the least money."""
    feasible = [name for name, n in available if chips_for_deadline(flops, name, days, mfu) <= n]
    if not feasible:
        raise InvalidValueError("no chip the cloud lends meets the deadline")
    return min(feasible, key=lambda name: training_cost_usd(flops, name, mfu))


def same_learner(name: str, learner: str) -> bool:
    """Whether a brief made for `name` is the brief of `learner`: the same name once case, spacing and
    punctuation are set aside (``"Ada Lovelace"`` is ``ada_lovelace``'s; ``"Ada"`` or ``"Lovelace"`` is not).

    >>> same_learner("Ada Lovelace", "ada_lovelace"), same_learner("Lovelace", "Ada Lovelace")
    (True, False)
    """
    key = normalize_name(name)
    return bool(key) and key == normalize_name(str(learner))


def _make(name: str, number: int) -> CapstoneBrief:
    (model, per_param, seq_len, days, (cloud, available), budget_factor, serve_chip, weight_dtype, context,
     latency_s, daily) = _pick(number)
    # A draw no chip of the cloud can meet is made feasible: a later deadline first, then fewer tokens.
    ratios = [r for r in TOKENS_PER_PARAM if r <= per_param][::-1]
    deadlines = [d for d in DEADLINE_DAYS if d >= days]
    for per_param, days in [(r, d) for r in ratios for d in deadlines]:
        tokens = _significant(per_param * params(model), 2)
        flops = training_flops(model, tokens, seq_len)
        try:
            best = cheapest_chip(flops, available, days, MFU)
            break
        except InvalidValueError:
            continue
    else:
        raise InvalidValueError(f"capstone brief {number}: no chip meets any deadline (a bug in the brief's lists)")
    budget = _significant(training_cost_usd(flops, best, MFU) * budget_factor, 2)
    slice_chips = int(min_chips(_model(model), serve_chip, weight_dtype=weight_dtype, kv_dtype="bf16",
                                batch=SERVE_SLICE_SEQUENCES, context=context))
    return CapstoneBrief(name, number, model, tokens, seq_len, float(days), cloud, available, budget, MFU,
                         float(BATCH_TOKENS), serve_chip, slice_chips, weight_dtype, "bf16", context,
                         latency_s, daily, _gpu_price_factor(number))


def _gpu_price_factor(number: int) -> float:
    """The brief's GPU serving price factor, drawn from the brief's number by a hash of its own: independent of
    every other choice (the other choices are the number's digits, and adding one would redraw every brief)."""
    digest = hashlib.sha256(f"gpu serving price {number}".encode()).digest()
    return GPU_SERVE_PRICE_FACTORS[digest[0] % len(GPU_SERVE_PRICE_FACTORS)]


_CURRENT: CapstoneBrief | None = None


def make_current(brief: CapstoneBrief) -> CapstoneBrief:
    """Make `brief` the current one (what :func:`scalelib.course.capstone.capstone_brief` does)."""
    global _CURRENT
    _CURRENT = brief
    return brief


def current() -> CapstoneBrief | None:
    """The brief made last in this process (None before any)."""
    return _CURRENT


def sample() -> CapstoneBrief:
    """The brief the course's solved notebook works: the current one if any, else the sample learner's."""
    return _CURRENT if _CURRENT is not None else _make(SAMPLE_LEARNER, drawn_variant(SAMPLE_LEARNER))


#: The learner whose brief the chapter and the solved notebook work (their brief is the first draw, never
#: redrawn: the chapter publishes it whole).
SAMPLE_LEARNER = "Grace Hopper"


@contextlib.contextmanager
def using(brief: CapstoneBrief | None) -> Iterator[CapstoneBrief | None]:
    """Make `brief` the current one inside the block (the grader judges each learner's answers so)."""
    global _CURRENT
    saved, _CURRENT = _CURRENT, brief
    try:
        yield brief
    finally:
        _CURRENT = saved


@functools.lru_cache(maxsize=1024)
def _other_serve_chips(model: str, chip: str, weight_dtype: str, kv_dtype: str, context: int) -> int:
    """:attr:`CapstoneBrief.other_serve_chips`, computed once per brief's serving choices (the answer key and the
    chapter's draw ask it many times a brief)."""
    return int(min_chips(_model(model), chip, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                         batch=SERVE_SLICE_SEQUENCES, context=context))
