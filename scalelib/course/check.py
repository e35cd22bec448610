"""The checker behind every exercise: ``check("1.3", answer)``.

An exercise is registered once, in ``scalelib/course/answer_key/chNN.py``, with a
reference that scalelib computes (never a number typed in). :func:`check` compares
a learner's answer with it and prints one verdict:

* correct: a confirmation with the derivation of the reference, when there is one;
* wrong: how far off the answer is and, when the ratio matches a common slip
  (a factor of 2, of 8, of a power of 1000 or 1024), which slip it probably was;
* ``None`` (or a function that still raises NotImplementedError): "not attempted".

It never raises on a bad answer, so a learner's notebook always runs to the end.
In a notebook the verdict is also attached as JSON to the output's metadata
(under :data:`VERDICT_KEY`), which ``scalelib grade`` reads back.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .._derivation import Derivation
from .._errors import InvalidValueError, unknown
from .._units import fmt

#: MIME type of the machine-readable verdict a check cell displays.
#: Key of the verdict in a check output's metadata (the output's data is plain text only,
#: so every notebook front end and the book show it as they show any printed text).
VERDICT_KEY = "scalelib/verdict"

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"

#: ratio (answer / reference) -> the slip it usually means. Exercises may add their own.
COMMON_MISTAKES: Mapping[float, str] = {
    2.0: "a factor of 2: a multiply-add is 2 FLOPs (2·B·D·F), and bandwidth is quoted one-way or bidirectional; check which one you used",
    8.0: "a factor of 8: bits versus bytes (1 byte = 8 bits)",
    1e3: "a factor of 1000: units (one SI prefix: s vs ms, GB vs MB, ...)",
    1e6: "a factor of 10^6: units (two SI prefixes: s vs µs, GB vs kB, ...)",
    1e9: "a factor of 10^9: units (three SI prefixes: s vs ns, GB vs B, ...)",
    1e12: "a factor of 10^12: units (TFLOP/s vs FLOP/s, TB vs B, ...)",
    1024.0: "a factor of 1024: units (KiB vs B, or binary vs decimal prefixes)",
    1024.0**2: "a factor of 1024^2: units (MiB vs B)",
    1024.0**3: "a factor of 1024^3: units (GiB vs B)",
    1.024: "2.4%: binary versus decimal prefixes (KiB = 1024 B, kB = 1000 B)",
    1.024**2: "4.9%: binary versus decimal prefixes (MiB versus MB)",
    1.024**3: "7.4%: binary versus decimal prefixes (GiB versus GB)",
    1.024**4: "10%: binary versus decimal prefixes (TiB versus TB)",
}


@dataclass(frozen=True)
class Exercise:
    """One auto-graded exercise.

    Args:
        id: ``"<chapter>.<number>"``, e.g. ``"1.3"``.
        title: a few words on what it asks.
        reference: computes the reference answer with scalelib (a number, an
            array, a Derivation, a string for a multiple-choice question, or,
            for ``kind="function"``, a function to compare the learner's with).
        unit: unit of the answer, used when printing.
        rtol: relative tolerance of a numeric answer.
        choices: accepted strings of a multiple-choice exercise.
        cases: keyword arguments to call both functions with (``kind="function"``).
        mistakes: factor -> explanation, checked before :data:`COMMON_MISTAKES`; a
            factor f matches answers f times too large or f times too small.
        points: what a correct answer is worth in the gradebook.
        reason: for a choice, the one-line reason shown with a correct answer.
        formula: for a function, the formula shown with a correct answer.
    """

    id: str
    title: str
    reference: Callable[[], Any]
    unit: str = ""
    rtol: float = 0.01
    kind: str = "number"  # "number", "choice" or "function"
    choices: tuple[str, ...] = ()
    cases: tuple[Mapping[str, Any], ...] = ()
    mistakes: Mapping[float, str] = field(default_factory=dict)
    points: float = 1.0
    reason: str = ""
    formula: str = ""


#: Environment variable set (to "1") in the kernels ``scalelib grade`` runs submissions in: there
#: :func:`check` only records the answer (see :mod:`scalelib.course.record`); the grader judges it.
GRADING_ENV = "SCALELIB_GRADING"


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` concluded about one answer."""

    exercise: str
    status: str  # CORRECT, INCORRECT or NOT_ATTEMPTED
    message: str
    rel_error: float | None = None
    diagnosis: str | None = None

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict:
        return asdict(self)


_REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add `exercise` to the registry (used by the ``_exercises`` modules)."""
    if exercise.id in _REGISTRY:
        raise InvalidValueError(f"exercise {exercise.id!r} is registered twice")
    if exercise.kind not in ("number", "choice", "function"):
        raise InvalidValueError(f"exercise {exercise.id!r}: `kind` must be number, choice or function, got {exercise.kind!r}")
    _REGISTRY[exercise.id] = exercise
    return exercise


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
        'Critical intensity of an H100 in fp8'
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


def _diagnose(ratio: float, exercise: Exercise) -> str | None:
    """The slip whose factor (or its inverse) matches `ratio`, if any."""
    if not (ratio > 0 and math.isfinite(ratio)):
        return None
    tolerance = max(exercise.rtol, 0.005)
    table = {**exercise.mistakes, **{k: v for k, v in COMMON_MISTAKES.items() if k not in exercise.mistakes}}
    for factor, why in table.items():
        factor = factor if factor >= 1 else 1 / factor  # a slip shows up in either direction
        for f, direction in ((factor, "too large"), (1 / factor, "too small")):
            if abs(ratio / f - 1) <= tolerance:
                return f"{why} (your answer is {direction} by that factor)"
    return None


def _ratio_text(ratio: float) -> str:
    if ratio >= 1:
        return f"{fmt(ratio, sig=3)}× the reference"
    return f"1/{fmt(1 / ratio, sig=3)} of the reference"


def _compare_numbers(exercise: Exercise, answer, reference) -> Verdict:
    eid, unit = exercise.id, exercise.unit
    try:
        # numpy would read "1e3" as a number and True as 1
        if isinstance(answer, (str, bytes, bool, np.bool_)) or (
                isinstance(answer, np.ndarray) and answer.dtype.kind == "b"):
            raise TypeError(answer)
        got = np.asarray(answer, dtype=float)
    except (TypeError, ValueError, OverflowError):
        kind = "numbers" if np.ndim(reference) else "a number"
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected {kind}{' in ' + unit if unit else ''}, "
                       f"got {type(answer).__name__} {answer!r}.")
    want = np.asarray(reference, dtype=float)
    if got.shape != want.shape and got.size != 1:
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected {want.size} values (shape {want.shape}), got shape {got.shape}.")
    got = np.broadcast_to(got.reshape(()) if got.size == 1 else got, want.shape)  # [x] for x too
    if not np.all(np.isfinite(got)):
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: your answer {fmt(got, unit)} is not a finite number.")
    scale = np.where(want == 0, 1.0, np.abs(want))
    errors = np.abs(got - want) / scale
    rel_error = float(np.max(errors))
    if rel_error <= exercise.rtol:
        lines = [f"✅ Exercise {eid}: correct — {fmt(got if got.ndim else float(got), unit)} "
                 f"(within {fmt(exercise.rtol * 100)}% of the reference)."]
        return Verdict(eid, CORRECT, "\n".join(lines), rel_error)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = got / want
    ratio = float(np.median(ratios))
    consistent = bool(np.all(np.abs(ratios / ratio - 1) <= exercise.rtol)) if ratio else False
    diagnosis = _diagnose(ratio, exercise) if consistent else None
    shown = fmt(got if got.ndim else float(got), unit)
    if ratio < 0:
        text = f"your answer {shown} has the wrong sign"
    elif ratio == 0:
        text = f"your answer {shown} is zero, the reference is not"
    elif consistent:
        text = f"your answer {shown} is {_ratio_text(ratio)}"
        if 0.5 < ratio < 2:  # a percentage reads better than a ratio for near misses
            text += f" (off by {fmt(abs(ratio - 1) * 100)}%)"
    else:
        text = f"your answer {shown} is off by up to {fmt(rel_error * 100)}% (element by element)"
    message = f"❌ Exercise {eid}: not quite — {text}."
    if diagnosis:
        message += f"\n   Likely cause: {diagnosis}."
    return Verdict(eid, INCORRECT, message, rel_error, diagnosis)


def _compare_choice(exercise: Exercise, answer, reference) -> Verdict:
    eid = exercise.id
    if not isinstance(answer, str):
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected one of {', '.join(map(repr, exercise.choices))}, "
                       f"got {type(answer).__name__} {answer!r}.")
    given = answer.strip().lower()
    if exercise.choices and given not in [c.lower() for c in exercise.choices]:
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: {answer!r} is not one of the choices "
                       f"{', '.join(map(repr, exercise.choices))}.")
    if given == str(reference).lower():
        return Verdict(eid, CORRECT, f"✅ Exercise {eid}: correct — {reference!r}.")
    return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: not quite — {answer!r} is not the right choice.")


def _compare_function(exercise: Exercise, answer, reference, cases=None) -> Verdict:
    eid = exercise.id
    if not callable(answer):
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected a function, got {type(answer).__name__} {answer!r}.")
    cases = exercise.cases if cases is None else tuple(cases)
    for case in cases:
        call = ", ".join(f"{k}={v!r}" for k, v in case.items())
        try:
            got = answer(**case)
        except NotImplementedError:
            return Verdict(eid, NOT_ATTEMPTED, f"⬜ Exercise {eid}: not attempted (your function still raises NotImplementedError).")
        except Exception as err:  # a learner's bug must not stop the notebook
            return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: your function raised {type(err).__name__}: {err} "
                           f"when called with {call}.")
        verdict = _compare_numbers(exercise, _value(got), _value(reference(**case)))
        if verdict.status != CORRECT:
            return Verdict(eid, INCORRECT, verdict.message.replace("not quite —", f"not quite for {call} —", 1),
                           verdict.rel_error, verdict.diagnosis)
    return Verdict(eid, CORRECT, f"✅ Exercise {eid}: correct — your function agrees with the reference "
                   f"on all {len(cases)} cases.")


def verdict(exercise_id: str, answer, *, cases=None) -> Verdict:
    """The Verdict on `answer` to exercise `exercise_id`, without printing it.

    For a function exercise, `cases` (keyword arguments, one dict per call) replaces
    the registered cases: the grader passes the registered ones plus cases drawn at
    grading time.

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
        return Verdict(exercise.id, NOT_ATTEMPTED, f"⬜ Exercise {exercise.id}: not attempted.")
    reference = exercise.reference()
    if exercise.kind == "function":
        return _compare_function(exercise, answer, reference, cases)
    if exercise.kind == "choice":
        return _compare_choice(exercise, answer, reference)
    result = _compare_numbers(exercise, _value(answer), _value(reference))
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

    display({"text/plain": result.message}, metadata={VERDICT_KEY: result.to_json()}, raw=True)
