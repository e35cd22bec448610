"""Chapter 11's capstone briefs: one per learner, so that two learners' capstones differ.

A learner's name draws a brief (:mod:`scalelib.course.capstone_core` says what a brief holds and how a
number becomes one). The chapter works a sample brief, and a learner may re-run it with their own name:
it then redoes its arithmetic for their brief, and its numbers must not answer their exercises. None of
them is an answer's own computation, but among some forty numbers a brief's answer can land on one by
chance (a plan's FSDP degree of 576 next to 575.99 chips before rounding), or on the sum of two. Such a
brief is redrawn, by construction: :func:`chance_matches` checks a brief's answers against the numbers
the chapter computes for it (:func:`chapter_numbers`, the chapter's cells computed again here, and held
to them by tests/test_capstone.py); :func:`write_redraws` runs that check on every brief and writes the
numbers of those it fails to ``scalelib/data/capstone_redraws.toml``; and :func:`variant_of`, when a
name draws one of them, draws again from the name with a counter until a brief is clear. The same name
always gives the same brief, on the learner's machine, in the grading kernel (which cannot import the
answer key the check needs, but reads the list) and in the grader.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import re
import tomllib
from importlib import resources
from pathlib import Path

from .._errors import InvalidValueError
from .._inference import generate_comms_time_s, generate_step_time_s, max_batch_size, max_batch_within_latency
from .._inference import prefill_time_s, tokens_per_s_per_chip
from .._models import model as _model
from .._parallelism import data_parallel_critical_batch
from .._plan_search import search_plans
from .._serving import smallest_slice
from .._specs import chip as _chip
from .._topology import tpu_slice
from .._transformer import kv_cache_bytes, param_bytes, params, train_flops, training_state_bytes
from .._serving import usd_per_chip_hour
from .i18n import _
from .capstone_core import (BATCH_TOKENS, BUDGET_FACTORS, CLOUDS, CONTEXTS, DAILY_OUTPUT_TOKENS, DEADLINE_DAYS,
                            GPU_SERVE_PRICE_FACTORS, LATENCIES_S, MFU, MODELS, OTHER_SERVE_CHIP, OUTPUT_TOKENS,
                            SAMPLE_LEARNER, SEQ_LENS, SERVE_CHIPS, SERVE_SLICE_SEQUENCES, TOKENS_PER_PARAM,
                            VARIANTS, WEIGHT_DTYPES, CapstoneBrief, _CHOICES, _gpu_price_factor, _make, _pick,
                            _significant, cheapest_chip, chips_for_deadline, current, drawn_variant, make_current,
                            normalize_name, same_learner, sample, training_cost_usd, training_flops, using)

__all__ = ["BATCH_TOKENS", "BUDGET_FACTORS", "CLOUDS", "CONTEXTS", "DAILY_OUTPUT_TOKENS", "DEADLINE_DAYS",
           "GPU_SERVE_PRICE_FACTORS", "LATENCIES_S", "MFU", "MODELS", "OTHER_SERVE_CHIP", "OUTPUT_TOKENS",
           "SAMPLE_LEARNER", "SEQ_LENS", "SERVE_CHIPS", "SERVE_SLICE_SEQUENCES", "TOKENS_PER_PARAM", "VARIANTS",
           "WEIGHT_DTYPES", "CapstoneBrief", "brief_for", "capstone_brief", "chapter_numbers", "cheapest_chip",
           "chips_for_deadline", "current", "drawn_variant", "normalize_name", "same_learner", "sample",
           "training_cost_usd", "training_flops", "using", "variant_of", "_CHOICES", "_gpu_price_factor", "_make",
           "_pick", "_significant"]

#: The slice the chapter's step 3 searches for the sample's chip, whatever the brief (book/ch11_capstone.ipynb).
CHAPTER_SLICE = ((12, 16, 12), "tpu-v5p")
#: How many times a name is drawn again before the draw gives up (a clear brief comes within two or three).
MAX_REDRAWS = 50


_PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "µ": 1e-6, "n": 1e-9}


def _text_numbers(text: str) -> list[float]:
    """The numbers of a printed text, an SI prefix of their unit applied ("8.85 GB" is 8.85e9)."""
    found = re.findall(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)(?:\s?([kMGTPmµn])(?=[A-Za-z/]))?", text)
    return [float(n.replace(",", "")) * _PREFIX[p] for n, p in found]


def _forms(x: float) -> set[float]:
    """`x` and what a page may print for it: rounded to a whole number, or to three significant figures."""
    return {x, float(round(x)), float(f"{x:.3g}")}


@functools.lru_cache(maxsize=64)
def _chapter_search(model: str, seq_len: int, batch_tokens: float):
    shape, name = CHAPTER_SLICE
    return search_plans(_model(model), batch_tokens, tpu_slice(shape, name), seq_len=seq_len, rank="roofline")


def chapter_numbers(brief: CapstoneBrief) -> tuple[list[float], list[float]]:
    """The numbers chapter 11's cells compute for `brief`, before rounding: (held, shown).

    `held` are the values its cells keep in named variables (what a learner re-running the chapter can read
    back); `shown` the others it prints (the search's table, the plan's degrees, the per-chip costs). The
    chapter's cells are computed again here in the same order; tests/test_capstone.py runs the chapter for
    300 names and checks that every number it holds is in `held` and every number of 100 or more it prints is
    within 0.5% of one of these.

    Chapter:
        11 (Capstone)
    """
    b = brief
    m = _model(b.model)
    held: list[float] = []
    shown: list[float] = []
    # step 1
    flops = float(train_flops(m, seq_len=b.seq_len, tokens=b.train_tokens, causal=True))
    six_pd = 6 * params(m) * b.train_tokens
    held += [flops, six_pd]
    shown += [float(params(m)), 100 * abs(six_pd / flops - 1)]
    # step 2: the run on each chip the cloud lends
    for name, lent in b.available:
        C, price = _chip(name).peak_flops_per_s(), usd_per_chip_hour(name)
        cost = flops / (C * b.mfu) / 3600 * price
        shown += [C, price, C * b.mfu * 3600 / price, cost]
    held += [C, price, cost, float(lent)]
    # step 3: the sample's chip, on the chapter's slice
    shape, sample_chip = CHAPTER_SLICE
    spec = _chip(sample_chip)
    state = float(training_state_bytes(m))
    topo = tpu_slice(shape, sample_chip)
    held.append(state)
    shown += [float(math.ceil(state / spec.hbm_bytes)), b.batch_tokens / topo.num_chips,
              float(data_parallel_critical_batch(topo))]
    search = _chapter_search(b.model, b.seq_len, b.batch_tokens)
    best = search.best
    steps = b.train_tokens / b.batch_tokens
    days = steps * best.time_s / b.mfu / 86400
    searched = steps * best.time_s * best.mfu * topo.num_chips * spec.peak_flops_per_s()
    noncausal = float(train_flops(m, seq_len=b.seq_len, tokens=b.train_tokens))
    step2_cost = flops / (spec.peak_flops_per_s() * b.mfu) / 3600 * usd_per_chip_hour(sample_chip)
    cost_ratio = topo.num_chips * days * 24 * usd_per_chip_hour(sample_chip) / step2_cost
    held += [steps, days, searched, noncausal, step2_cost, cost_ratio]
    shown += [best.time_s / b.mfu, searched / flops, noncausal / flops, step2_cost / 1e6]
    shown += _text_numbers(best.plan.label) + _text_numbers(search.table())
    # step 5: serving on the brief's slice
    kw = dict(num_chips=b.serve_chips, context=b.context, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype)
    shown += [float(param_bytes(m, dtype=b.weight_dtype)), float(kv_cache_bytes(m, dtype=b.kv_dtype))]
    B = max_batch_within_latency(m, b.serve_chip, latency_s=b.latency_s, **kw)
    fits = max_batch_size(m, b.serve_chip, **kw)
    step = generate_step_time_s(m, b.serve_chip, batch=B, **kw)
    held += [float(B), float(fits), float(step)]
    if B < fits:
        shown.append(float(generate_step_time_s(m, b.serve_chip, batch=B + 1, **kw)))
    serve = dict(context=b.context, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype)
    on_tpu = _chip(b.serve_chip).family == "tpu"
    batches = list(range(1, int(fits) + 1))
    times = [float(t) for t in generate_step_time_s(m, b.serve_chip, batch=batches, **kw)]
    if on_tpu:
        serve_topo = smallest_slice(m, b.serve_chip, batch=64, **serve)
        V = 64 * m.D * 2
        axes = [n for n in serve_topo.shape if n > 1]
        hops = sum(n - 1 for n in axes)
        sum_W = len(axes) * _chip(b.serve_chip).ici_link_bytes_per_s_one_way
        T_ag = max(hops * 1e-6, (serve_topo.num_chips - 1) / serve_topo.num_chips * V / sum_W)
        T_ici = m.L * 2 * (T_ag + T_ag)
        lib = generate_comms_time_s(m, serve_topo, batch=64)
        held += [float(V), float(hops), float(sum_W), T_ag, T_ici, float(lib)]
        shown += [float(n) for n in serve_topo.shape] + [float(serve_topo.num_chips),
                                                         float(generate_step_time_s(m, b.serve_chip, batch=64, **kw))]
        ici = [float(t) for t in generate_comms_time_s(m, serve_topo, batch=batches)]
    else:
        ici = [0.0] * len(times)
    B_plan = max(n for n, t, c in zip(batches, times, ici) if t + c <= b.latency_s)
    step_ici = ici[B_plan - 1]
    rate = tokens_per_s_per_chip(m, b.serve_chip, batch=B, **kw)
    price = b.serve_price(b.serve_chip)
    usd = price / 3600 / rate * 1e6
    slice_rate = B_plan / (times[B_plan - 1] + step_ici)
    usd_ici = b.serve_chips * price / 3600 / slice_rate * 1e6
    held += [float(B_plan), step_ici, float(rate), price, usd, slice_rate, usd_ici]
    # prefill and generation apart
    T_prefill = prefill_time_s(m, b.serve_chip, tokens=b.prompt_tokens, weight_dtype=b.weight_dtype,
                               efficiency=1.0, num_chips=b.serve_chips)
    held.append(float(T_prefill))
    shown += sorted(givens(b))  # the brief's own numbers, which the chapter prints too
    return held, shown


def givens(brief: CapstoneBrief) -> set[float]:
    """The brief's own numbers (what the cloud lends, the context, ...): inputs, never an answer given away."""
    values = {float(n) for _chip_name, n in brief.available}
    values |= {float(v) for v in vars(brief).values() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return values | {float(brief.prompt_tokens), float(brief.output_tokens), float(brief.other_serve_chips)}


def _answers(brief: CapstoneBrief) -> list[tuple[str, float, bool]]:
    """(exercise, value, whether a count) for every number chapter 11's exercises ask of `brief`."""
    from .check import exercises, get_exercise  # the checker loads the answer key (import scalelib does not)

    out = []
    with using(brief):
        for eid in exercises(11):
            exercise = get_exercise(eid)
            if exercise.kind == "choice":  # a name, never a number the chapter prints
                continue
            ref = exercise.reference()
            value = getattr(ref, "value", ref)
            if isinstance(value, str):
                continue
            for v in (value if isinstance(value, (list, tuple)) else [value]):
                out.append((eid, float(v), bool(exercise.integer)))
    return out


def chance_matches(brief: CapstoneBrief) -> list[tuple[str, float]]:
    """The answers of `brief` that a number the chapter computes for it lands on by chance, or a sum of two.

    A number of 100 or more (what the chapter shows for every brief, its sample's run included, aside): a count
    equal to a number the chapter shows or holds (as it is, or rounded to a whole number or to three significant
    figures), any other with the same three significant figures as one of those. Any non-count:
    within 0.1% of the sum of two numbers the chapter holds, each at least 5% of it.

    Chapter:
        11 (Capstone)
    """
    held, shown = chapter_numbers(brief)
    given = givens(brief)
    # what the chapter prints for every brief (the sample's run prints it too) answers nobody's brief in particular
    numbers = [abs(x) for x in held if x and x not in given] + [abs(x) for x in shown if x and x not in _sample_shown()]
    rounded = {form for x in numbers for form in _forms(x)}
    bins = {f"{x:.2e}" for x in rounded}
    pool = sorted({abs(x) for x in held if x and x not in given})
    found = []
    for eid, value, count in _answers(brief):
        value = abs(value)
        if value >= 100 and (value in rounded if count else f"{value:.2e}" in bins):
            found.append((eid, value))
            continue
        if not count and any(min(x, y) >= 0.05 * value and abs((x + y) / value - 1) <= 1e-3
                             for x, y in itertools.combinations(pool, 2)):
            found.append((f"{eid} (a sum)", value))
    return found


@functools.lru_cache(maxsize=1)
def _sample_shown() -> frozenset:
    return frozenset(chapter_numbers(_make(SAMPLE_LEARNER, drawn_variant(SAMPLE_LEARNER)))[1])


#: The package's list of the briefs the chapter would answer by chance (see :func:`write_redraws`).
REDRAWS = "data/capstone_redraws.toml"


@functools.lru_cache(maxsize=1)
def _unclear() -> frozenset[int]:
    text = resources.files("scalelib").joinpath(REDRAWS).read_text(encoding="utf-8")
    return frozenset(tomllib.loads(text)["unclear"])


def _clear(number: int) -> bool:
    """Whether brief `number` is clear of chance matches: read from the package's list, which
    :func:`write_redraws` computes with :func:`chance_matches` for every brief. A list, not the check itself,
    because the check needs the answer key, which a grading kernel cannot import: the learner's machine, the
    grading kernel and the grader must draw the same brief from a name."""
    return number not in _unclear()


def _is_unclear(number: int) -> bool:
    return bool(chance_matches(_make("", number)))


def unclear_variants(*, workers: int = 1) -> list[int]:
    """Every brief number whose answers the chapter computes by chance (:func:`chance_matches`), ascending.

    Runs the check on all VARIANTS briefs (some 15 CPU-minutes, shared among `workers` processes).
    """
    numbers = range(VARIANTS)
    if workers > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            flags = pool.map(_is_unclear, numbers, chunksize=64)
    else:
        flags = [_is_unclear(n) for n in numbers]
    return [n for n, bad in zip(numbers, flags) if bad]


def write_redraws(path: str | Path | None = None, *, workers: int = 1) -> Path:
    """Compute :func:`unclear_variants` and write the package's list of them (``scalelib/data/capstone_redraws.toml``).

    Run it again whenever chapter 11's cells (and so :func:`chapter_numbers`) or its answer key change:
    ``python -c "from scalelib.course.capstone import write_redraws; write_redraws(workers=2)"``.
    tests/test_capstone.py checks the list against the check for 300 names.
    """
    path = Path(path) if path is not None else Path(__file__).resolve().parents[1] / REDRAWS
    unclear = unclear_variants(workers=workers)
    lines = ["# Capstone briefs (numbers, out of " + f"{VARIANTS:,}" + ") whose answers chapter 11's own cells compute by",
             "# chance, run for that brief: a name that draws one draws again (scalelib.course.capstone.variant_of).",
             "# Written by scalelib.course.capstone.write_redraws(); do not edit by hand.",
             f"variants = {VARIANTS}", "unclear = ["]
    lines += ["    " + ", ".join(str(n) for n in unclear[i:i + 12]) + "," for i in range(0, len(unclear), 12)]
    lines.append("]")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _unclear.cache_clear()
    variant_of.cache_clear()
    return path


def _draw(key: str, attempt: int) -> int:
    text = key if attempt == 0 else f"{key}#{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % VARIANTS


@functools.lru_cache(maxsize=8192)
def variant_of(name: str) -> int:
    """The brief number (0 to VARIANTS - 1) a learner's name draws: its first draw
    (:func:`scalelib.course.capstone_core.drawn_variant`), or, where the chapter's numbers would land on one of
    that brief's answers by chance (:func:`chance_matches`, as listed by :func:`write_redraws`), the first
    clear draw of the name followed by #1, #2, ... The sample learner's brief is the chapter's own worked
    example and is never redrawn.
    """
    key = normalize_name(name)
    if key == normalize_name(SAMPLE_LEARNER):
        return drawn_variant(name)
    for attempt in range(MAX_REDRAWS):
        number = _draw(key, attempt)
        if _clear(number):
            return number
    raise InvalidValueError(f"capstone brief for {name!r}: no clear brief in {MAX_REDRAWS} draws (a bug in the "
                            f"brief's lists or the chapter)")


def capstone_brief(learner: str | None = None, *, variant: int | None = None) -> CapstoneBrief:
    """The capstone brief of `learner` (their name or student id, as the instructor grades them).

    The same name always gives the same brief; two names most likely give different ones (there are
    ``scalelib.course.capstone.VARIANTS`` of them). The brief becomes the current one: chapter 11's
    checks use it.

    Args:
        learner: your name or student id (a non-empty string; case, spaces and punctuation do not matter).
        variant: instead of a name, a brief's number (0 to VARIANTS - 1), for instructors looking briefs over.

    Returns:
        a :class:`CapstoneBrief`.

    Chapter:
        11 (Capstone)

    Example:
        >>> brief = capstone_brief("Ada Lovelace")
        >>> brief == capstone_brief("ada lovelace")
        True
    """
    if (learner is None) == (variant is None):
        raise InvalidValueError(_("capstone_brief: give your name (capstone_brief('Ada Lovelace')) or, for "
                                  "instructors, variant=<a number from 0 to {last}>, one of the two").format(
            last=VARIANTS - 1))
    if learner is not None:
        if not isinstance(learner, str) or not normalize_name(learner):
            raise InvalidValueError(_("`learner` must be your name or student id (letters or digits), got "
                                      "{learner}").format(learner=repr(learner)))
        name = " ".join(learner.split())
        number = variant_of(name)
    else:
        if isinstance(variant, bool) or not isinstance(variant, int) or not 0 <= variant < VARIANTS:
            raise InvalidValueError(f"`variant` must be a whole number from 0 to {VARIANTS - 1}, got {variant!r}")
        name, number = f"variant {variant}", variant
    return make_current(_make(name, number))


def brief_for(learner: str) -> CapstoneBrief:
    """The brief of `learner`, without making it the current one (the grader's view); see :func:`capstone_brief`."""
    name = " ".join(learner.split())
    return _make(name, variant_of(name))

