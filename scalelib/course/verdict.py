"""What every part of the course machinery shares: verdicts, and reading back a recorded answer.

The lowest layer of ``scalelib.course``: it imports nothing else from it, and the
checker (:mod:`~scalelib.course.check`), the learner's recorder
(:mod:`~scalelib.course.record`), the JAX judge (:mod:`~scalelib.course.jax_check`),
the sandbox (:mod:`~scalelib.course.sandbox`) and the grader
(:mod:`~scalelib.course.grade`) all import from it, so that their imports form
layers (``verdict`` < ``record`` < ``jax_check`` < ``check`` < ``sandbox`` < ``grade``)
and none reaches for another's private names.

* :class:`Verdict` and its statuses :data:`CORRECT`, :data:`INCORRECT`,
  :data:`NOT_ATTEMPTED`; :data:`VERDICT_KEY`, where a notebook's output carries one;
* :data:`GRADING_ENV`, the variable that tells a kernel it is grading;
* :func:`decode_number` and :func:`decode`, which read back the plain JSON that
  :func:`scalelib.course.record.describe` wrote, raising :class:`Malformed` on
  anything ``sl.check`` cannot have written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

#: Key of the verdict in a check output's metadata (the output's data is plain text only,
#: so every notebook front end and the book show it as they show any printed text).
VERDICT_KEY = "scalelib/verdict"

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"

#: Environment variable set (to "1") in the kernels ``scalelib grade`` runs submissions in: there
#: :func:`scalelib.check` only records the answer (see :mod:`scalelib.course.record`);
#: the grader judges it.
GRADING_ENV = "SCALELIB_GRADING"

#: Most values a list answer may hold; a longer one is recorded as unreadable.
MAX_VALUES = 100_000


@dataclass(frozen=True)
class Verdict:
    """What :func:`scalelib.check` concluded about one answer."""

    exercise: str
    status: str  # CORRECT, INCORRECT or NOT_ATTEMPTED
    message: str
    rel_error: float | None = None
    diagnosis: str | None = None

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict:
        return asdict(self)


def cut(obj, limit: int = 200) -> str:
    """str(`obj`) cut short; never raises (a learner's exception may have a broken __str__).

    >>> cut("x" * 300, 5)
    'xxxx…'
    """
    try:
        text = str(obj)
    except Exception:  # noqa: BLE001
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Malformed(ValueError):
    """An answer record that ``sl.check`` cannot have written (written by hand?)."""


def decode_number(text) -> float:
    """The float :func:`scalelib.course.record.encode_number` wrote; raises ValueError on anything else.

    >>> decode_number("0.25"), decode_number("inf")
    (0.25, inf)
    """
    if not isinstance(text, str) or len(text) > 40:
        shown = repr(text)
        raise ValueError(f"not an encoded number: {shown if len(shown) <= 60 else shown[:57] + '...'}")
    return float(text)


def decode(answer: dict):
    """The Python value a recorded (non-function) answer stands for: None, a float, an array or a text.

    Raises:
        Malformed: a record ``sl.check`` cannot have written (an unknown kind, values that do not fill
            their shape, a number that is not one, ...).

    >>> decode({"kind": "numbers", "shape": [2], "values": ["1.0", "2.5"]})
    array([1. , 2.5])
    """
    if not isinstance(answer, dict):
        raise Malformed("not a record")
    kind = answer.get("kind")
    try:
        if kind == "none":
            return None
        if kind == "number":
            return decode_number(answer["value"])
        if kind == "numbers":
            shape, values = answer["shape"], answer["values"]
            if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                    for n in shape) and isinstance(values, list)):
                raise Malformed("bad shape or values")
            if len(values) > MAX_VALUES or int(np.prod(shape)) != len(values):
                raise Malformed("the values do not fill the shape")
            return np.array([decode_number(v) for v in values], dtype=float).reshape(shape)
        if kind == "text":
            if not isinstance(answer["value"], str):
                raise Malformed("text that is not a string")
            return answer["value"]
    except (KeyError, ValueError, TypeError) as err:
        if isinstance(err, Malformed):
            raise
        raise Malformed(str(err)) from None
    raise Malformed(f"unknown kind {kind!r}")
