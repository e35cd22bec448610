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


class InvalidCallError(ScalelibError, TypeError):
    """Arguments that do not fit a function's signature (too many positional ones, an unknown keyword)."""


class OutsideValidationWarning(UserWarning):
    """A forecast asked for beyond what its validation covers (a plan whose parallelism, chip or utilisation no
    validated run had): the number is an extrapolation, to read with that in mind."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean 'h100'?' for the closest known names, or ''."""
    close = difflib.get_close_matches(str(name).lower(), list(known), n=2, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown(kind: str, name: object, known: Iterable[str], *, arg: str | None = None,
            extra: Iterable[str] = ()) -> UnknownNameError:
    """An error naming the unknown `name` (passed as `arg`), listing the `known` ones, suggesting the closest.

    `extra` are further accepted spellings (aliases): they count for suggestions
    and are listed after the known names.
    """
    known, extra = sorted(known), sorted(set(extra) - set(known))
    listed = ", ".join(known) + (f" (also: {', '.join(extra)})" if extra else "")
    where = f"`{arg}`: " if arg else ""
    return UnknownNameError(
        f"{where}unknown {kind} {name!r}: expected one of {listed}{did_you_mean(str(name), known + extra)}"
    )
