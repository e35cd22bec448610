"""The checker behind every exercise: ``check("1.3", answer)``.

An exercise is registered once, in ``scalelib/course/answer_key/chNN.py``, with a
reference that scalelib computes (never a number typed in). :func:`check` compares
a learner's answer with it and prints one verdict:

* correct: a confirmation with its reasoning (the derivation of a number, the
  reason for a choice, the formula of a function);
* wrong: which way the answer is off and roughly how far (a few percent, tens of
  percent, twice to ten times, orders of magnitude), and, when a slip applied to the
  reference computation gives the answer (one the exercise registers, by the value
  its wrong method computes; or a common one about a quantity the exercise
  involves, ``involves=``, or about the answer's unit), which slip it probably
  was, every slip of that same value named. It never prints a figure derived from
  the reference, so the feedback cannot be turned back into the answer; a list is
  checked value by value;
* a count (``integer=True``) is checked exactly, a whole number only; a range the
  question states (``accept=(low, high)``) replaces the tolerance; a choice is read
  without regard to case, spaces, hyphens, underscores or "+" versus "and";
* ``None`` (or a function that still raises NotImplementedError): "not attempted".

It never raises on a bad answer, so a learner's notebook always runs to the end.
In a notebook the verdict is also attached as JSON to the output's metadata
(under :data:`VERDICT_KEY`).
"""

from __future__ import annotations

import importlib
import itertools
import math
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .._derivation import Derivation
from .._errors import InvalidValueError, unknown
from .._units import fmt
from .i18n import N_, _, translate
from .verdict import (  # noqa: F401 - re-exported: notebooks and tests import them from here
    CORRECT, GRADING_ENV, INCORRECT, NOT_ATTEMPTED, VERDICT_KEY, Verdict, cut as _cut,
)

#: Units that are bytes: the only ones that get bits-versus-bytes and binary-prefix hints.
BYTE_UNITS = frozenset({"B", "B/s"})
#: Units that take SI prefixes (k, M, G, T or m, µ, n, p): the only ones that get a 1000ⁿ hint.
PREFIXED_UNITS = frozenset({"s", "B", "B/s", "FLOP", "FLOP/s"})
#: Units that count FLOPs: the only ones that get "a multiply-add is 2 FLOPs".
FLOP_UNITS = frozenset({"FLOP", "FLOP/s", "FLOP/B"})

#: How close a ratio must be to 1.024ⁿ to be put down to binary versus decimal prefixes.
BINARY_PREFIX_TOLERANCE = 0.002


#: What a generic slip can be about, beyond the unit an answer is written in. An exercise names the ones its
#: question involves (``Exercise(involves={"dtype", "flops"})``); one that names none gets them from its unit
#: (:data:`INVOLVES_BY_UNIT`). A slip about a quantity is named only for an exercise that involves it.
QUANTITIES = {
    "flops": "the answer counts FLOPs (a multiply-add is 2 of them), or is a time or rate computed from such a count",
    "dtype": "the answer depends on a precision through bytes per value",
    "peak": "the answer depends on a chip's peak FLOP/s at a precision (bf16, fp8, int8, dense or sparse)",
    "bandwidth": "the answer uses an interconnect bandwidth that is quoted one way or bidirectional",
}
#: What an exercise that declares no `involves` involves, from its unit: a FLOP count counts multiply-adds, a
#: FLOP rate is a peak at a precision, a byte count has a bytes per value, a bandwidth a direction. A time or an
#: intensity involves what its question uses, so its exercise declares it.
INVOLVES_BY_UNIT: Mapping[str, frozenset] = {
    "FLOP": frozenset({"flops"}), "FLOP/s": frozenset({"peak"}), "FLOP/B": frozenset({"flops"}),
    "B": frozenset({"dtype"}), "B/s": frozenset({"bandwidth"}),
}


def involved(exercise: "Exercise") -> frozenset:
    """The quantities `exercise` involves: those it declares, else those of its unit."""
    if exercise.involves is not None:
        return frozenset(exercise.involves)
    return INVOLVES_BY_UNIT.get(exercise.unit, frozenset())


@dataclass(frozen=True)
class Slip:
    """A common slip: an answer `factor` times too large or too small.

    A slip about a quantity (`about`, one of :data:`QUANTITIES`, or a set of them that must
    all be involved) is named for an exercise that involves it and none of `unless`,
    whatever its unit; only as `factor` (answer / reference), not its inverse, unless
    `both_ways`; one about how the answer is written (SI or
    binary prefixes, bits for bytes, a percentage) for answers in `units`: a set of unit
    strings, or ``"fraction"`` for a dimensionless answer between 0 and 1 (unit "").
    `tolerance` overrides the exercise's own when set.
    """

    factor: float
    text: str
    units: frozenset | str | None = None
    tolerance: float | None = None
    about: str | frozenset | None = None
    unless: frozenset = frozenset()
    both_ways: bool = True
    template: str = ""  # the English template `text` was formatted from, with `args` (for translation)
    args: tuple = ()

    def shown(self) -> str:
        """`text` in the learner's language."""
        if self.template:
            return translate(self.template).format(**dict(self.args))
        return translate(self.text)

    def applies_to(self, unit: str, reference, exercise: "Exercise | None" = None) -> bool:
        if self.about is not None:
            if exercise is None:
                return False
            needs = frozenset([self.about]) if isinstance(self.about, str) else frozenset(self.about)
            return needs <= involved(exercise) and not (self.unless & involved(exercise))
        if self.units == "fraction":
            ref = np.abs(np.asarray(reference, dtype=float))
            return unit == "" and bool(np.all((ref > 0) & (ref <= 1)))
        return unit in self.units


def _si_slips() -> list[Slip]:
    templates = {1: N_("a factor of {factor}: units, one SI prefix apart ({a} versus {b})"),
                 2: N_("a factor of {factor}: units, two SI prefixes apart ({a} versus {b})"),
                 3: N_("a factor of {factor}: units, three SI prefixes apart ({a} versus {b})"),
                 4: N_("a factor of {factor}: units, four SI prefixes apart ({a} versus {b})")}
    up, down = "kMGT", "mµnp"
    slips = []
    for n in (1, 2, 3, 4):
        for units, a, b in (({"s"}, f"{down[n - 1]}s", "s"), ({"B", "B/s"}, f"{up[n - 1]}B", "B"),
                            ({"FLOP", "FLOP/s"}, f"{up[n - 1]}FLOP", "FLOP")):
            args = (("factor", f"{1000**n:,}"), ("a", a), ("b", b))
            slips.append(Slip(1000.0**n, templates[n].format(**dict(args)), frozenset(units),
                              template=templates[n], args=args))
    return slips


#: The slips every exercise is checked for: each about a quantity, named only where the exercise involves
#: it, or about how the answer is written, named only in the units where it can happen.
COMMON_SLIPS: tuple[Slip, ...] = (
    Slip(0.5, N_("a factor of 2: a multiply-add is 2 FLOPs (a [B, D] x [D, F] matmul does 2·B·D·F)"), about="flops",
         both_ways=False),
    Slip(2.0, N_("a factor of 2: check the bytes per value at the question's precision"), about="dtype",
         unless=frozenset({"peak"})),
    Slip(2.0, N_("a factor of 2: check the chip's peak FLOP/s at the question's precision"), about="peak",
         unless=frozenset({"dtype"})),
    Slip(2.0, N_("a factor of 2: check the bytes per value at the question's precision, or the peak FLOP/s at that "
                 "precision"), about=frozenset({"dtype", "peak"})),
    Slip(2.0, N_("a factor of 2: a bandwidth is quoted one way or bidirectional; check which one applies"),
         about="bandwidth"),
    Slip(8.0, N_("a factor of 8: bits versus bytes (a byte is 8 bits)"), BYTE_UNITS),
    Slip(100.0, N_("a factor of 100: a percentage versus a fraction"), "fraction"),
    *_si_slips(),
    Slip(1024.0, N_("a factor of 1024: units, KiB versus B"), BYTE_UNITS),
    Slip(1024.0**2, N_("a factor of 1024²: units, MiB versus B"), BYTE_UNITS),
    Slip(1024.0**3, N_("a factor of 1024³: units, GiB versus B"), BYTE_UNITS),
    Slip(1.024, N_("binary versus decimal prefixes (KiB versus kB)"), BYTE_UNITS, BINARY_PREFIX_TOLERANCE),
    Slip(1.024**2, N_("binary versus decimal prefixes (MiB versus MB)"), BYTE_UNITS, BINARY_PREFIX_TOLERANCE),
    Slip(1.024**3, N_("binary versus decimal prefixes (GiB versus GB)"), BYTE_UNITS, BINARY_PREFIX_TOLERANCE),
    Slip(1.024**4, N_("binary versus decimal prefixes (TiB versus TB)"), BYTE_UNITS, BINARY_PREFIX_TOLERANCE),
)


def generic_slips(exercise: "Exercise", reference=None) -> tuple[Slip, ...]:
    """The :data:`COMMON_SLIPS` that can be named for `exercise` (its reference value decides "fraction")."""
    if reference is None and exercise.unit == "":
        return tuple(s for s in COMMON_SLIPS if s.about is not None and s.applies_to("", 0.5, exercise))
    return tuple(s for s in COMMON_SLIPS if s.applies_to(exercise.unit, reference, exercise))


#: factor -> text of the first common slip with that factor (kept for code that looks slips up by factor).
#: English text -> common slip (to say a diagnosis in the learner's language).
_SLIP_BY_TEXT: Mapping[str, Slip] = {slip.text: slip for slip in COMMON_SLIPS}

COMMON_MISTAKES: Mapping[float, str] = {}
for _slip in COMMON_SLIPS:
    COMMON_MISTAKES.setdefault(_slip.factor, _slip.text)  # type: ignore[attr-defined]
del _slip


@dataclass(frozen=True)
class Exercise:
    """One auto-graded exercise.

    Args:
        id: ``"<chapter>.<number>"``, e.g. ``"1.3"``.
        title: a few words on what it asks.
        reference: computes the reference answer with scalelib (a number, an
            array, a Derivation, a string for a multiple-choice question, or,
            for ``kind="function"``, a function to compare the learner's with;
            for ``kind="jax"``, a NumPy function of the whole input arrays).
        unit: unit of the answer, used when printing and to pick the common slips
            that can happen in it.
        rtol: relative tolerance of a numeric answer (an answer exactly at it is correct).
        choices: accepted strings of a multiple-choice exercise.
        cases: keyword arguments to call both functions with (``kind="function"``);
            for ``kind="jax"``, runs described by a mesh, arrays in the book's
            notation, their sizes and a seed (see :mod:`scalelib.course.jax_check`).
        mistakes: ratio -> explanation, checked before :data:`COMMON_SLIPS`. The ratio
            is wrong answer / reference, computed with scalelib from the wrong method:
            above 1 the slip makes the answer too large, below 1 too small, and it is
            only named for an answer off in that direction. For a list answer the key
            may be a tuple, one ratio per value (1 where the slip leaves the value alone).
        points: what a correct answer is worth in the gradebook.
        reason: for a choice, the one-line reason shown with a correct answer.
        formula: for a function, the formula shown with a correct answer.
        rule: for ``kind="jax"``, a :class:`~scalelib.course.jax_check.CollectiveRule`:
            what the compiled program may and must communicate.
        wrong: for ``kind="jax"``, common wrong methods: pairs (a NumPy function of the
            same inputs as the reference, computing what the method gives; the text
            naming the slip), checked when the learner's values are wrong.
        per_learner: the reference (and the mistakes' ratios) follow the current capstone
            brief (:mod:`scalelib.course.capstone`): chapter 11, where each learner plans
            a different job. Checked only once the learner has made their brief.
        integer: the answer is a count (chips, sequences, a batch, slices, servers, steps,
            cycles): only a whole number is accepted, and only the reference itself (or a
            whole number inside `accept`), never within `rtol`; the reference must be a
            whole number. A value of 80.5 is refused as "not a whole number".
        accept: a range the question states, ``(low, high)``, both ends included: any
            answer inside it is correct and `rtol` is not used; for a list answer, one
            ``(low, high)`` per value. The reference must lie inside it.
        involves: the quantities the question involves, among :data:`QUANTITIES`
            (``{"flops", "dtype", "bandwidth"}``): a common slip about one of them (a
            multiply-add counted as 1 FLOP, the bytes per value or the peak at the wrong
            precision, one-way for bidirectional bandwidth) is named only when the
            exercise involves it. None: those of its unit (:data:`INVOLVES_BY_UNIT`:
            FLOP units involve flops, B dtype, B/s bandwidth, any other unit nothing).
    """

    id: str
    title: str
    reference: Callable[[], Any]
    unit: str = ""
    rtol: float = 0.01
    kind: str = "number"  # "number", "choice", "function" or "jax"
    choices: tuple[str, ...] = ()
    cases: tuple[Mapping[str, Any], ...] = ()
    mistakes: Mapping[float | tuple[float, ...], str] = field(default_factory=dict)
    points: float = 1.0
    reason: str = ""
    formula: str = ""
    book: tuple[str, ...] = ()  # the book's items it answers, e.g. ("Q3",) or ("Quiz 1 Q2",): see book_items.py
    rule: Any = None  # kind="jax": a jax_check.CollectiveRule (or None: numerics only)
    wrong: tuple[tuple[Callable[..., Any], str], ...] = ()  # kind="jax": (what a wrong method gives, its name)
    per_learner: bool = False  # the reference depends on the learner's capstone brief (chapter 11; see capstone.py)
    integer: bool = False  # a count: whole numbers only, the exact reference (or inside `accept`)
    accept: tuple | None = None  # (low, high) the question states (one pair per value of a list), ends included
    involves: frozenset | None = None  # quantities of QUANTITIES the question involves; None: from the unit


_REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add `exercise` to the registry (used by the ``answer_key`` modules)."""
    if exercise.id in _REGISTRY:
        raise InvalidValueError(f"exercise {exercise.id!r} is registered twice")
    if exercise.kind not in ("number", "choice", "function", "jax"):
        raise InvalidValueError(f"exercise {exercise.id!r}: `kind` must be number, choice, function or jax, "
                                f"got {exercise.kind!r}")
    if exercise.kind == "jax":
        from .jax_check import CollectiveRule, check_case

        if not exercise.cases:
            raise InvalidValueError(f"exercise {exercise.id!r}: a jax exercise needs `cases` to run on")
        for i, case in enumerate(exercise.cases, 1):
            check_case(case, f"exercise {exercise.id!r}: case {i}")
        if exercise.rule is not None and not isinstance(exercise.rule, CollectiveRule):
            raise InvalidValueError(f"exercise {exercise.id!r}: `rule` must be a CollectiveRule, got {exercise.rule!r}")
        if not all(isinstance(w, tuple) and len(w) == 2 and callable(w[0]) and isinstance(w[1], str)
                   for w in exercise.wrong):
            raise InvalidValueError(f"exercise {exercise.id!r}: `wrong` must hold pairs (a NumPy function of the "
                                    f"inputs, the text naming the slip), got {exercise.wrong!r}")
        if not all(isinstance(r, (int, float)) and r > 0 for r in exercise.mistakes):
            raise InvalidValueError(f"exercise {exercise.id!r}: a jax exercise's mistakes are keyed by a positive "
                                    f"ratio of the whole result, got {list(exercise.mistakes)!r}")
    for key in exercise.mistakes:
        ratios = key if isinstance(key, tuple) else (key,)
        if not ratios or not all(isinstance(r, (int, float)) and r > 0 and math.isfinite(r) for r in ratios) \
                or all(abs(r - 1) <= (1e-12 if exercise.integer else exercise.rtol) for r in ratios):
            raise InvalidValueError(f"exercise {exercise.id!r}: a mistake's key must be a ratio wrong / reference "
                                    f"(positive, not 1), or a tuple of them, got {key!r}")
    _check_answer_form(exercise)
    if isinstance(exercise.book, str) or not all(isinstance(b, str) and b for b in exercise.book):
        raise InvalidValueError(f"exercise {exercise.id!r}: `book` must be a tuple of the book's item ids, "
                                f"e.g. ('Q3',), got {exercise.book!r}")
    _REGISTRY[exercise.id] = exercise
    return exercise


def _whole(values) -> bool:
    """True where `values` are whole numbers (up to the last bits of floating point)."""
    values = np.asarray(values, dtype=float)
    # the last bits of a float64 computation: a few dozen units in the last place, never half a unit of the count
    slack = np.maximum(1e-9, 64 * np.finfo(float).eps * np.abs(values))
    return bool(np.all(np.isfinite(values) & (np.abs(values - np.round(values)) <= slack)))


def _accept_ranges(accept, n: int | None) -> list[tuple[float, float]]:
    """`accept` as one (low, high) per value (one pair for a single number)."""
    pairs = [accept] if accept and not isinstance(accept[0], (tuple, list)) else list(accept)
    if n is not None and len(pairs) == 1:
        pairs = pairs * n
    return [(float(lo), float(hi)) for lo, hi in pairs]


def _check_answer_form(exercise: Exercise) -> None:
    """`integer`, `accept`, `involves` and `choices` of `exercise` make sense (an error in the answer key if not)."""
    eid = exercise.id
    if exercise.involves is not None:
        involves = frozenset([exercise.involves] if isinstance(exercise.involves, str) else exercise.involves)
        if not involves <= set(QUANTITIES):
            raise InvalidValueError(f"exercise {eid!r}: `involves` takes quantities among {sorted(QUANTITIES)}, "
                                    f"got {sorted(involves - set(QUANTITIES))}")
        object.__setattr__(exercise, "involves", involves)
    if exercise.kind == "choice":
        normal = [_normal_choice(c) for c in exercise.choices]
        if len(set(normal)) != len(normal):
            raise InvalidValueError(f"exercise {eid!r}: two choices read the same once case, spaces, hyphens, "
                                    f"underscores and '+'/'and' are set aside: {exercise.choices!r}")
    if (exercise.integer or exercise.accept is not None) and exercise.kind not in ("number", "function"):
        raise InvalidValueError(f"exercise {eid!r}: `integer` and `accept` are for number and function exercises")
    if exercise.accept is not None:
        try:
            pairs = _accept_ranges(exercise.accept, None)
            assert pairs and all(lo <= hi for lo, hi in pairs)
        except Exception:
            raise InvalidValueError(f"exercise {eid!r}: `accept` must be (low, high), or one such pair per value, "
                                    f"got {exercise.accept!r}") from None
    if exercise.kind != "number" or exercise.per_learner or not (exercise.integer or exercise.accept is not None):
        return
    want = np.asarray(_value(exercise.reference()), dtype=float)
    if exercise.integer and not _whole(want):
        raise InvalidValueError(f"exercise {eid!r}: `integer=True` but the reference is not a whole number: {want}")
    if exercise.accept is not None:
        pairs = _accept_ranges(exercise.accept, want.size if want.ndim else None)
        if len(pairs) != max(want.size, 1) or not all(lo <= w <= hi for (lo, hi), w in zip(pairs, want.ravel())):
            raise InvalidValueError(f"exercise {eid!r}: the reference {want} is not inside `accept` {exercise.accept!r}")


def _load_chapter(chapter: int) -> None:
    try:
        importlib.import_module(f"scalelib.course.answer_key.ch{chapter:02d}")
    except ModuleNotFoundError as err:
        if err.name != f"scalelib.course.answer_key.ch{chapter:02d}":
            raise


def _exercise_id(exercise_id) -> str:
    if not isinstance(exercise_id, str):
        hint = " (a float drops trailing zeros: 1.10 reads as 1.1)" if isinstance(exercise_id, float) else ""
        raise InvalidValueError(f"`exercise_id` must be a string such as '1.10', got {exercise_id!r}{hint}")
    return exercise_id.strip()


def get_exercise(exercise_id: str) -> Exercise:
    """The registered exercise `exercise_id` (``"1.3"``).

    Returns:
        an :class:`Exercise`.

    Chapter:
        every chapter's exercises

    Example:
        >>> get_exercise("1.1").title
        'Critical intensity of an H100 in fp8 (warm-up)'
    """
    exercise_id = _exercise_id(exercise_id)
    chapter = exercise_id.split(".")[0]
    if chapter.isdigit():
        _load_chapter(int(chapter))
    if exercise_id not in _REGISTRY:
        raise unknown("exercise", exercise_id, _REGISTRY)
    return _REGISTRY[exercise_id]


def exercises(chapter: int | None = None) -> tuple[str, ...]:
    """Ids of the registered exercises, of one `chapter` or of every chapter that has any.

    Returns:
        a tuple of ids, in order.

    Chapter:
        every chapter's exercises

    Example:
        >>> exercises(1)[:3]
        ('1.1', '1.2', '1.3')
    """
    if chapter is not None and (isinstance(chapter, bool) or not isinstance(chapter, int) or chapter < 1):
        raise InvalidValueError(f"`chapter` must be a chapter number (1 to 12), got {chapter!r}")
    for c in [chapter] if chapter is not None else range(1, 13):
        _load_chapter(c)
    ids = [i for i in _REGISTRY if chapter is None or i.split(".")[0] == str(chapter)]
    return tuple(sorted(ids, key=lambda i: tuple(int(p) for p in i.split("."))))


def _value(x):
    return x.value if isinstance(x, Derivation) else x


# ---------------------------------------------------------------------------
# reading an answer


def _shown(x, limit: int = 60) -> str:
    """`x` as the learner wrote it (its repr), cut short; never raises.

    An array, and a NumPy number inside a list, show as the plain list and number they hold, so that an answer
    reads the same in the notebook and in the grader (which reads a recorded list back as an array).
    """
    def plain(v, depth=0):
        if isinstance(v, np.ndarray) and v.dtype.kind in "iuf" and v.size <= 1000:
            return v.tolist()
        if isinstance(v, np.generic) and v.dtype.kind in "iuf":
            return v.item()
        if isinstance(v, (list, tuple)) and depth < 32 and len(v) <= 1000:
            items = [plain(i, depth + 1) for i in v]
            return items if isinstance(v, list) else tuple(items)
        return v
    try:
        text = repr(plain(x))
    except Exception:  # a learner's object with a broken __repr__
        text = f"<{type(x).__name__} object>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _kind_of(x) -> str:
    """How to name what the learner gave: ``str '1000'``, ``a function``, ``bool True``."""
    if callable(x) and not isinstance(x, type):
        return _("a function ({name})").format(name=getattr(x, '__name__', type(x).__name__))
    shown = _shown(x)
    if shown.startswith("<") and " at 0x" in shown:  # the default repr says nothing more than the type
        return _("an object of type {name}").format(name=type(x).__name__)
    return f"{type(x).__name__} {shown}"


class _NotANumber(Exception):
    """Raised while reading an answer that is not a number (or a list of them); the message says why.

    `what` (when given) is what the learner gave instead, the message being "got <what>": a reader
    that expected something else says so around it.
    """

    def __init__(self, text: str | None = None, *, what: str | None = None):
        self.what = what
        super().__init__(text if text is not None else _("got {what}").format(what=what))


def _scalar(x) -> float:
    """One number of an answer as a float, or :class:`_NotANumber` saying what it is instead."""
    x = _value(x)
    if isinstance(x, (bool, np.bool_)):
        raise _NotANumber(what=_("bool {value} (True and False are not numbers)").format(value=repr(x)))
    if isinstance(x, (str, bytes)):  # numpy would read "1e3" as a number
        raise _NotANumber(what=_("{kind}; write the number without quotes").format(kind=_kind_of(x)))
    if x is None or x is Ellipsis:
        raise _NotANumber(what=repr(x))
    if isinstance(x, (complex, np.complexfloating)):
        raise _NotANumber(what=_("a complex number {shown}").format(shown=_shown(x)))
    if callable(x):
        raise _NotANumber(what=_("{kind}; call it and pass the number it returns").format(kind=_kind_of(x)))
    if isinstance(x, (list, tuple, dict, set, frozenset)) or not (
            isinstance(x, (int, float, np.number)) or hasattr(type(x), "__float__") or hasattr(x, "__array__")):
        raise _NotANumber(what=_kind_of(x))
    try:
        if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
            arr = np.asarray(x)
            if arr.ndim != 0:
                raise _NotANumber(what=_("{count} values where one number goes").format(count=arr.size))
            if arr.dtype.kind == "b":
                raise _NotANumber(what=_("bool {value} (True and False are not numbers)").format(
                    value=repr(bool(arr))))
            if arr.dtype.kind not in "iuf":
                return _scalar(arr.item())
            return float(arr)
        return float(x)
    except _NotANumber:
        raise
    except OverflowError:
        raise _NotANumber(what=_("a number too large to compute with")) from None
    except Exception as err:  # whatever a learner's object raises when read as a number
        raise _NotANumber(what=_("{kind}, which cannot be read as a number ({error})").format(
            kind=_kind_of(x), error=f"{type(err).__name__}: {_cut(err)}")) from None


def _is_sequence(x) -> bool:
    if isinstance(x, (list, tuple)):
        return True
    if isinstance(x, (str, bytes, dict)) or callable(x):
        return False
    try:
        return (isinstance(x, np.ndarray) or hasattr(x, "__array__")) and np.ndim(x) > 0
    except Exception:
        return False


def _numbers(answer, n: int | None) -> np.ndarray:
    """The answer as floats: shape () when `n` is None (one number expected), else shape (n,)."""
    answer = _value(answer)
    if not _is_sequence(answer):
        if n is not None:
            try:
                shown = _("one number, {value}").format(value=fmt(_scalar(answer)))
            except _NotANumber as err:
                shown = err.what if err.what is not None else str(err)
            example = f"[{', '.join('xyzw'[:n]) if n <= 4 else '...'}]"
            template = (_("expected 1 value (a list such as {example}), got {what}") if n == 1 else
                        _("expected {n} values (a list such as {example}), got {what}"))
            raise _NotANumber(template.format(n=n, example=example, what=shown))
        return np.asarray(_scalar(answer))
    try:
        items = list(answer) if isinstance(answer, (list, tuple)) else list(np.asarray(answer))
    except Exception as err:
        raise _NotANumber(what=_("{kind}, which cannot be read as numbers ({error})").format(
            kind=_kind_of(answer), error=type(err).__name__)) from None
    if n is None and len(items) == 1 and _is_sequence(_value(items[0])):  # [[3.0]], np.array([[3.0]]): one number
        return _numbers(items[0], None)
    if any(_is_sequence(_value(item)) for item in items):
        template = (_("expected one number, got a nested list {shown}") if not n else
                    _("expected a flat list of 1 number, got a nested list {shown}") if n == 1 else
                    _("expected a flat list of {n} numbers, got a nested list {shown}"))
        raise _NotANumber(template.format(n=n, shown=_shown(answer)))
    if n is None:
        if len(items) != 1:
            raise _NotANumber(_("expected one number, got {count} values {shown}").format(
                count=len(items), shown=_shown(answer)))
        return np.asarray(_scalar(items[0]))
    if len(items) != n:
        template = (_("expected 1 value, got {count}: {shown}") if n == 1 else
                    _("expected {n} values, got {count}: {shown}"))
        raise _NotANumber(template.format(n=n, count=len(items), shown=_shown(answer)))
    values = []
    for i, item in enumerate(items, 1):
        try:
            values.append(_scalar(item))
        except _NotANumber as err:
            raise _NotANumber(_("value {index} of your answer: {error}").format(index=i, error=err)) from None
    return np.asarray(values, dtype=float)


# ---------------------------------------------------------------------------
# judging a number


def within(got, want, rtol: float):
    """True where `got` is within `rtol` of `want` (relative; absolute where `want` is 0).

    The edge is decided the same way everywhere: an answer exactly at `rtol` is
    correct, whatever the last bits of floating point say.
    """
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    scale = np.where(want == 0, 1.0, np.abs(want))
    return np.abs(got - want) / scale <= rtol * (1 + 1e-9) + 1e-15


def _rel_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    scale = np.where(want == 0, 1.0, np.abs(want))
    return np.abs(got - want) / scale


def _how_far(ratio: float) -> str:
    """A coarse bucket for answer / reference > 0, with no figure in it.

    The buckets follow each other without a gap or a jump in wording: under 1% ("less than a percent", an
    answer the question asks more precisely), a few percent, tens of percent (up to twice), twice to ten times,
    orders of magnitude; the same below 1 for the inverse. Words, not figures: no number in the feedback.
    """
    if ratio > 1:
        if ratio <= 1.01:
            return N_("less than a percent too large")
        if ratio <= 1.1:
            return N_("a few percent too large")
        if ratio < 2:
            return N_("tens of percent too large")
        return N_("twice to ten times too large") if ratio < 10 else N_("orders of magnitude too large")
    if ratio >= 1 / 1.01:
        return N_("less than a percent too small")
    if ratio >= 0.9:
        return N_("a few percent too small")
    if ratio > 0.5:
        return N_("tens of percent too small")
    return N_("twice to ten times too small") if ratio > 0.1 else N_("orders of magnitude too small")


def _slip_tolerance(exercise: Exercise) -> float:
    return max(exercise.rtol, 0.005)


def _matches(ratio: float, factor: float, tolerance: float) -> bool:
    return abs(ratio / factor - 1) <= tolerance * (1 + 1e-9)


#: Two slips whose values are this close (relative) give the same answer: both are named.
SAME_VALUE = 1e-3


def _same(a: float, b: float) -> bool:
    return abs(a / b - 1) <= SAME_VALUE


def _reproduces(key: tuple, ratios, exercise: Exercise, reference=None) -> bool:
    """True when the list slip `key` (one ratio per value) gives every value of the answer (`ratios`)."""
    if ratios is None or len(ratios) != len(key):
        return True
    tolerance = _slip_tolerance(exercise)
    for j, (k, r) in enumerate(zip(key, ratios)):
        if abs(k - 1) <= (1e-12 if exercise.integer else tolerance):  # a value the slip leaves alone must be right
            if not abs(r - 1) <= (0 if exercise.integer else exercise.rtol) * (1 + 1e-9) + 1e-12:
                return False
        elif not (r > 0 and math.isfinite(r) and (
                _rounds_to(r, k, reference, j) if exercise.integer and reference is not None
                else _matches(r, k, tolerance))):
            return False
    return True


def _rounds_to(ratio: float, key: float, reference, index: int | None) -> bool:
    """For a count: True when the answer is the slip's value rounded down or up to a whole number (a count's
    slip is matched so, never within a tolerance)."""
    want = np.asarray(_value(reference), dtype=float).ravel()
    if not want.size:
        return False
    w = float(want[index or 0] if want.size > 1 else want[0])
    wrong, got = key * w, round(ratio * w)
    return got in (math.floor(wrong + 1e-9), math.ceil(wrong - 1e-9)) and got != round(w)


def _slip_causes(ratio: float, exercise: Exercise, reference, index: int | None = None,
                 ratios=None) -> list[str]:
    """Every slip that reproduces answer / reference = `ratio` (of value `index` of a list), best first.

    A registered slip is the value its wrong method gives (its key: wrong / reference), named
    only in its own direction, and a list slip only where it gives every value of the answer
    (`ratios`, answer / reference value by value); a common slip (:func:`generic_slips`: about
    a quantity the exercise involves, or about the answer's unit) in either direction unless it
    says otherwise (a multiply-add counted as 1 FLOP only makes an answer too small). The slip
    closest to the answer is named, with every other slip of the same value (:data:`SAME_VALUE`).
    Registered slips come first: a common slip is named only where no registered one reproduces
    the answer, and a common slip about a quantity of the question only where it gives every value
    of a list answer (a precision or a FLOP count changes them alike).
    """
    if not (ratio > 0 and math.isfinite(ratio)):
        return []
    tolerance = _slip_tolerance(exercise)
    found: list[tuple[float, str, bool]] = []  # (value as a ratio, text, registered)
    whole: list[bool] = []  # per registered slip found: it gives every value of the answer
    for key, why in exercise.mistakes.items():
        per_value = isinstance(key, tuple)  # a list slip: one ratio per value
        full = key if per_value or ratios is None or len(ratios) < 2 else (key,) * len(ratios)
        if isinstance(key, tuple):
            if index is None or index >= len(key):
                continue
            key = key[index]
        if abs(key - 1) <= (1e-12 if exercise.integer else tolerance):  # this slip leaves this value alone
            continue  # (a count's slip is matched by rounding: one a fraction of a percent off still counts)
        if _rounds_to(ratio, key, reference, index) if exercise.integer else _matches(ratio, key, tolerance):
            gives_all = not isinstance(full, tuple) or _reproduces(full, ratios, exercise, reference)
            if not gives_all and not per_value:
                continue  # a slip of every value that does not give every value of the answer
            found.append((float(key), why, True))
            whole.append(gives_all)
    if any(whole) and not all(whole):  # a list slip that gives the whole answer beats one that gives this value only
        found = [f for f, w in zip(found, whole) if w]
    if not found:  # a registered slip comes first: a common one is named only where none reproduces the answer
        for slip in generic_slips(exercise, reference):
            tol = slip.tolerance if slip.tolerance is not None else tolerance
            for factor in (slip.factor, 1 / slip.factor) if slip.both_ways else (slip.factor,):
                if not _matches(ratio, factor, tol):
                    continue
                if slip.about is not None and ratios is not None and len(ratios) > 1 and not all(
                        r > 0 and math.isfinite(r) and _matches(r, factor, tol) for r in ratios):
                    continue  # a slip about a quantity of the question changes every value of a list alike
                found.append((factor, slip.text, False))
    if not found:
        return []
    best = min(found, key=lambda f: abs(math.log(ratio / f[0])))[0]
    texts: list[str] = []
    for value, text, _registered in found:
        if _same(value, best) and text not in texts:
            texts.append(text)
    return texts


#: Between two slips of the same value, both named: "Likely cause: <one>. Or: <the other>."
OR = ". Or: "


def _diagnose(ratio: float, exercise: Exercise, reference, index: int | None = None, ratios=None) -> str | None:
    """The slip(s) behind answer / reference = `ratio` (of value `index` of a list), if any reproduce it.

    Two or more slips of the same value are all named, joined by :data:`OR`.
    """
    return OR.join(_slip_causes(ratio, exercise, reference, index, ratios)) or None


def _off(subject: tuple, got: float, want: float, exercise: Exercise, reference, index=None,
         ratios=None) -> tuple[str, str | None, tuple | None]:
    """How one wrong value is off (text without a figure from the reference), its likely slip, and its bucket.

    `subject` is ``("answer", shown)`` for a single answer or ``("value", number)`` for a value of a list. The
    bucket (None, ``("zero",)`` or ``("how", <English how-far text>)``) lets a list whose every value is off
    the same way say so once.
    """
    kind, what = subject
    answer = kind == "answer"
    if want != 0 and got != 0 and (got < 0) != (want < 0):
        template = (_("your answer {shown} has the wrong sign") if answer else
                    _("value {index} has the wrong sign"))
        return template.format(shown=what, index=what), None, None
    if got == 0:
        template = (_("your answer {shown} is zero, and the answer is not") if answer else
                    _("value {index} is zero, and the answer is not"))
        return template.format(shown=what, index=what), None, ("zero",)
    if want == 0:
        template = _("your answer {shown} should be zero") if answer else _("value {index} should be zero")
        return template.format(shown=what, index=what), None, None
    ratio = got / want
    if exercise.integer and 0.99 <= ratio <= 1.01:  # "a few percent" would mislead: a count is exact or wrong
        how = N_("close but too large: a count is exact") if ratio > 1 else N_("close but too small: a count is exact")
    else:
        how = _how_far(ratio)
    template = _("your answer {shown} is {how}") if answer else _("value {index} is {how}")
    return (template.format(shown=what, index=what, how=translate(how)),
            _diagnose(ratio, exercise, reference, index, ratios), ("how", how))


def _cause_text(diagnosis: str) -> str:
    """A diagnosis (English slip texts joined by :data:`OR`) in the learner's language."""
    def one(text: str) -> str:
        slip = _SLIP_BY_TEXT.get(text)
        return slip.shown() if slip is not None else translate(text)

    return _(". Or: ").join(one(text) for text in diagnosis.split(OR))


def _count_text(got: np.ndarray, unit: str | None) -> str:
    """A count in full (13136 tokens, not 1.31e4 tokens); a list in brackets."""
    def one(g) -> str:
        return f"{int(round(float(g)))}{' ' + unit if unit else ''}"

    return one(got) if got.ndim == 0 else "[" + ", ".join(one(g) for g in got.ravel()) + "]"


def _wrong_order(got: np.ndarray, want: np.ndarray, rtol: float) -> bool:
    """True when the values of `got` are those of `want`, in another order."""
    if got.size > 6:
        return False
    for perm in itertools.permutations(range(got.size)):
        if list(perm) != list(range(got.size)) and np.all(within(got[list(perm)], want, rtol)):
            return True
    return False


def _wrong(eid: str, body: str, call: str | None) -> str:
    """The ❌ line of an answer that is not the kind of answer asked for (`body` ends with its full stop); for a
    function, `call` names the call whose result it was."""
    if call is None:
        return _("❌ Exercise {eid}: {text}").format(eid=eid, text=body)
    return _("❌ Exercise {eid}: called with {call}, your function's result does not fit: {text}").format(
        eid=eid, call=call, text=body)


def _not_quite(eid: str, text: str, call: str | None) -> str:
    if call is None:
        return _("❌ Exercise {eid}: not quite — {text}.").format(eid=eid, text=text)
    return _("❌ Exercise {eid}: not quite for {call} — {text}.").format(eid=eid, call=call, text=text)


def _compare_numbers(exercise: Exercise, answer, reference, *, call: str | None = None,
                     causes: bool = True) -> Verdict:
    """The Verdict on a number (or list) `answer`; `call` (a function's case) and `causes` (name the likely slip
    in the message) shape a function exercise's message."""
    eid, unit = exercise.id, exercise.unit
    want = np.asarray(_value(reference), dtype=float)
    n = want.size if want.ndim else None
    try:
        got = _numbers(answer, n)
    except _NotANumber as err:
        text = str(err)
        if err.what is not None:
            if not n:
                template = _("expected a number in {unit}, got {what}") if unit else _("expected a number, got {what}")
            elif n == 1:
                template = _("expected 1 number in {unit}, got {what}") if unit else _("expected 1 number, got {what}")
            else:
                template = (_("expected {n} numbers in {unit}, got {what}") if unit else
                            _("expected {n} numbers, got {what}"))
            text = template.format(n=n, unit=unit, what=err.what)
        return Verdict(eid, INCORRECT, _wrong(eid, f"{text}.", call))
    if not np.all(np.isfinite(got)):
        if n is None:
            return Verdict(eid, INCORRECT, _wrong(eid, _("your answer {shown} is not a finite number.").format(
                shown=fmt(float(got), unit)), call))
        bad = int(np.flatnonzero(~np.isfinite(got))[0])
        return Verdict(eid, INCORRECT, _wrong(eid, _("value {index} of your answer ({shown}) is not a finite "
                                                     "number.").format(index=bad + 1, shown=fmt(float(got[bad]), unit)),
                                              call))
    rel_error = float(np.max(_rel_errors(got, want)))
    if exercise.integer:
        if not _whole(want):
            raise InvalidValueError(f"exercise {eid!r}: `integer=True` but the reference is not a whole number: {want}")
        if not _whole(got):
            if n is None:
                body = _("your answer {shown} is not a whole number; a count is a whole number (round it the way "
                         "the question asks).").format(shown=f"{float(got):.10g}{' ' + unit if unit else ''}")
                return Verdict(eid, INCORRECT, _wrong(eid, body, call), rel_error)
            bad = int(np.flatnonzero([not _whole(g) for g in got])[0])
            body = _("value {index} of your answer ({shown}) is not a whole number; a count is a whole number "
                     "(round it the way the question asks).").format(
                index=bad + 1, shown=f"{float(got[bad]):.10g}{' ' + unit if unit else ''}")
            return Verdict(eid, INCORRECT, _wrong(eid, body, call), rel_error)
        got = np.round(got)
    if exercise.accept is not None:
        pairs = _accept_ranges(exercise.accept, n)
        ok = np.array([lo - 1e-12 * abs(lo) <= g <= hi + 1e-12 * abs(hi)
                       for (lo, hi), g in zip(pairs, np.atleast_1d(got))]).reshape(got.shape)
        within_what = _("inside the range the question allows")
    elif exercise.integer:
        ok = got == np.round(want)
        within_what = _("exactly")
    else:
        ok = within(got, want, exercise.rtol)
        within_what = _("within {percent}% of the reference").format(percent=fmt(exercise.rtol * 100))
    if np.all(ok):
        shown = _count_text(got, unit) if exercise.integer else fmt(got if got.ndim else float(got), unit)
        return Verdict(eid, CORRECT, _("✅ Exercise {eid}: correct — {shown} ({within}).").format(
            eid=eid, shown=shown, within=within_what), rel_error)
    if n is None:
        mine = _count_text(got, unit) if exercise.integer else fmt(float(got), unit)
        text, diagnosis, _bucket = _off(("answer", mine), float(got), float(want), exercise, reference)
        message = _not_quite(eid, text, call)
        if diagnosis and causes:
            message += "\n   " + _("Likely cause: {cause}.").format(cause=_cause_text(diagnosis))
        return Verdict(eid, INCORRECT, message, rel_error, diagnosis)
    shown = _count_text(got, unit) if exercise.integer else fmt(got, unit)
    if _wrong_order(got, want, 0.0 if exercise.integer else exercise.rtol):
        return Verdict(eid, INCORRECT, _not_quite(eid, _("your answer {shown} has the right values in the wrong "
                                                         "order").format(shown=shown), call),
                       rel_error, "the right values in the wrong order")
    parts, buckets, found = [], [], {}
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = [float(g / w) if w else math.nan for g, w in zip(got, want)]
    for i, (g, w, good) in enumerate(zip(got, want, ok)):
        if good:
            parts.append(_("value {index} is right").format(index=i + 1))
            buckets.append(None)
            continue
        text, why, bucket = _off(("value", i + 1), float(g), float(w), exercise, reference, i, ratios)
        parts.append(text)
        buckets.append(bucket)
        if why:
            found.setdefault(why, []).append(i + 1)
    if len(parts) > 1 and not np.any(ok) and None not in buckets and len(set(buckets)) == 1:
        bucket = buckets[0]
        parts = [_("every value is zero, and the answer is not") if bucket == ("zero",) else
                 _("every value is {how}").format(how=translate(bucket[1]))]
    message = _not_quite(eid, _("your answer {shown}: {parts}").format(shown=shown, parts=", ".join(parts)), call)
    wrong = int(np.sum(~ok))
    for why, values in found.items() if causes else ():
        cause = _cause_text(why)
        if len(values) == wrong:
            line = _("Likely cause: {cause}.").format(cause=cause)
        elif len(values) == 1:
            line = _("Likely cause (value {values}): {cause}.").format(values=values[0], cause=cause)
        else:
            line = _("Likely cause (values {values}): {cause}.").format(values=", ".join(map(str, values)),
                                                                        cause=cause)
        message += "\n   " + line
    diagnosis = "; ".join(found) or None
    return Verdict(eid, INCORRECT, message, rel_error, diagnosis)


# ---------------------------------------------------------------------------
# choices and functions


def _normal_choice(text: str) -> str:
    """`text` as a choice is compared: case, spaces, hyphens and underscores set aside, "and" / "&" / "/" read as
    "+", the parts of a combination in any order, a trailing "bound" or "axis" dropped, LaTeX's braces around a
    subscript dropped.

    "FSDP + TP", "fsdp+tp", "FSDP and TP", "TP + FSDP" and "FSDP/TP" read the same; so do "Reduce-Scatter",
    "ReduceScatter" and "reduce scatter", "A[I_X,J_X]", "A[I_X, J_X]" and "A[I_{X}, J_X]", "compute" and
    "compute-bound", "Y" and "Y axis".
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"_\{(\w+)\}", r"_\1", text)  # A[I_{XY}, J_Y], as LaTeX writes a subscript
    text = re.sub(r"\s+(?:and|&)\s+|&|/", "+", text)
    text = re.sub(r"[\s\-_‐‑–]+", "", text)
    text = re.sub(r"(?<=\w)(?:bound|axis)$", "", text)  # "compute-bound", "Y axis"
    if "+" in text and "[" not in text:  # "TP + FSDP" is "FSDP + TP": a combination has no order
        text = "+".join(sorted(text.split("+")))
    return text


def _compare_choice(exercise: Exercise, answer, reference) -> Verdict:
    eid = exercise.id
    choices = ", ".join(map(repr, exercise.choices))
    if not isinstance(answer, str):
        return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: expected one of {choices}, got {kind}.").format(
            eid=eid, choices=choices, kind=_kind_of(answer)))
    given = _normal_choice(answer)
    if exercise.choices and given not in [_normal_choice(c) for c in exercise.choices]:
        return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: {answer} is not one of the choices {choices}.").format(
            eid=eid, answer=_shown(answer), choices=choices))
    if given == _normal_choice(str(reference)):
        message = _("✅ Exercise {eid}: correct — {answer}.").format(eid=eid, answer=repr(reference))
        if exercise.reason:
            message += f"\n   {translate(exercise.reason)}"
        return Verdict(eid, CORRECT, message)
    return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: not quite — {answer} is not the right choice.").format(
        eid=eid, answer=_shown(answer)))


def _same_slip_everywhere(exercise: Exercise, answer, reference, cases, diagnosis: str) -> bool:
    """True when the learner's function is off by the slip `diagnosis` names on every case: a slip of the method
    reproduces the whole function, not one call of it (a constant, or a function that ignores an argument,
    matches a slip on one case by chance)."""
    for case in cases:
        try:
            got = answer(**dict(case))
            other = _compare_numbers(exercise, got, reference(**dict(case)))
        except Exception:
            return False
        if other.diagnosis != diagnosis:
            return False
    return True


def _compare_function(exercise: Exercise, answer, reference, cases=None) -> Verdict:
    eid = exercise.id
    if not callable(answer) or isinstance(answer, type):
        return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: expected a function (the function itself, not a call to "
                                         "it), got {kind}.").format(eid=eid, kind=_kind_of(answer)))
    cases = exercise.cases if cases is None else tuple(cases)
    worst = 0.0
    for case in cases:
        call = ", ".join(f"{k}={v!r}" for k, v in case.items())
        try:
            got = answer(**dict(case))
        except NotImplementedError:
            return Verdict(eid, NOT_ATTEMPTED, _("⬜ Exercise {eid}: not attempted (your function still raises "
                                                 "NotImplementedError).").format(eid=eid))
        except Exception as err:  # a learner's bug must not stop the notebook
            return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: your function raised {error}: {message} when "
                                             "called with {call}.").format(eid=eid, error=type(err).__name__,
                                                                          message=_cut(err), call=call))
        if got is None:
            return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: your function returned None for {call}; did it "
                                             "forget `return`?").format(eid=eid, call=call))
        want = reference(**dict(case))
        verdict = _compare_numbers(exercise, got, want)
        if verdict.status != CORRECT:
            keep = bool(verdict.diagnosis) and _same_slip_everywhere(exercise, answer, reference, cases,
                                                                     verdict.diagnosis)
            shown = _compare_numbers(exercise, got, want, call=call, causes=keep)
            return Verdict(eid, INCORRECT, shown.message, verdict.rel_error, verdict.diagnosis if keep else None)
        worst = max(worst, verdict.rel_error or 0.0)
    message = _("✅ Exercise {eid}: correct — your function agrees with the reference on all {count} cases.").format(
        eid=eid, count=len(cases))
    if exercise.formula:
        message += f"\n   {translate(exercise.formula)}"
    return Verdict(eid, CORRECT, message, worst)


def verdict(exercise_id: str, answer, *, cases=None) -> Verdict:
    """The Verdict on `answer` to exercise `exercise_id`, without printing it.

    For a function exercise, `cases` (keyword arguments, one dict per call) replaces
    the registered cases: the grader passes the registered ones plus cases drawn at
    grading time. A jax exercise runs the learner's function here, on a mesh of
    simulated devices (see ``scalelib.course.jax_check``).

    Returns:
        a :class:`Verdict` (``.status`` is "correct", "incorrect" or "not attempted").

    Chapter:
        every chapter's exercises

    Example:
        >>> verdict("1.1", None).status
        'not attempted'
    """
    exercise = get_exercise(exercise_id)
    if answer is None or answer is Ellipsis:
        return Verdict(exercise.id, NOT_ATTEMPTED, _("⬜ Exercise {eid}: not attempted.").format(eid=exercise.id))
    if exercise.per_learner:
        from .capstone_core import current

        if current() is None:
            return Verdict(exercise.id, NOT_ATTEMPTED, _("⬜ Exercise {eid}: make your capstone brief first (brief = "
                                                         "sl.capstone_brief('your name')); this exercise is checked "
                                                         "against it.").format(eid=exercise.id))
    if exercise.kind == "jax":
        if not callable(answer) or isinstance(answer, type):
            return Verdict(exercise.id, INCORRECT, _("❌ Exercise {eid}: expected a function of JAX arrays (the function "
                                                     "itself, not a call to it), got {kind}.").format(
                eid=exercise.id, kind=_kind_of(answer)))
        from .jax_check import run_and_judge

        return run_and_judge(exercise, answer, cases)
    reference = exercise.reference()
    if exercise.kind == "function":
        return _compare_function(exercise, answer, reference, cases)
    if exercise.kind == "choice":
        return _compare_choice(exercise, answer, reference)
    result = _compare_numbers(exercise, answer, reference)
    if result.status == CORRECT and isinstance(reference, Derivation):
        message = result.message + "\n" + "\n".join("   " + line for line in reference.lines())
        result = Verdict(result.exercise, result.status, message, result.rel_error)
    return result


def check(exercise_id: str, answer) -> None:
    """Check `answer` to exercise `exercise_id` and print the verdict. Never raises on a bad answer.

    Returns:
        None; the verdict is printed (in a notebook, displayed).

    Chapter:
        every chapter's exercises

    Example:
        >>> check("1.1", None)
        ⬜ Exercise 1.1: not attempted.
    """
    if os.environ.get(GRADING_ENV) == "1":  # a grading run: record the answer, judge nothing here
        from .record import record

        record(exercise_id, answer)
        return
    result = verdict(exercise_id, answer)
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python
        get_ipython = lambda: None  # noqa: E731
    if get_ipython() is None:
        print(result.message)
        return
    from IPython.display import display

    shown = {k: v for k, v in result.to_json().items() if k != "rel_error"}  # the exact error gives the reference away
    display({"text/plain": result.message}, metadata={VERDICT_KEY: shown}, raw=True)
