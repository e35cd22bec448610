"""One family of errors, so a caller can catch everything scalelib raises."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ScalelibError(Exception):
    """Base class of every error scalelib raises on purpose."""


class UnknownNameError(ScalelibError, KeyError):
    """A name (a chip, a dtype, an exercise, ...) that scalelib does not know."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidValueError(ScalelibError, ValueError):
    """An argument with a value outside what the formula accepts."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean 'h100'?' for the closest known names, or ''."""
    close = difflib.get_close_matches(str(name).lower(), list(known), n=2, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown(kind: str, name: object, known: Iterable[str]) -> UnknownNameError:
    """An error naming the unknown `name`, listing the `known` ones, suggesting the closest."""
    known = sorted(known)
    return UnknownNameError(
        f"unknown {kind} {name!r}: expected one of {', '.join(known)}{did_you_mean(str(name), known)}"
    )


def require_positive(**values) -> None:
    """Raise InvalidValueError naming the first argument that is not > 0 (arrays too)."""
    import numpy as np

    for arg, value in values.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise InvalidValueError(f"`{arg}` must be a number, got {value!r}")
        if not np.all(arr > 0):
            raise InvalidValueError(f"`{arg}` must be positive, got {value!r}")


def require_nonnegative(**values) -> None:
    """Raise InvalidValueError naming the first argument that is negative (arrays too)."""
    import numpy as np

    for arg, value in values.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise InvalidValueError(f"`{arg}` must be a number, got {value!r}")
        if not np.all(arr >= 0):
            raise InvalidValueError(f"`{arg}` must not be negative, got {value!r}")
