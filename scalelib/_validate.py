"""The one validation layer: every public entry checks its arguments here.

Each checker takes the argument's name as the caller wrote it, so an error reads
``"`nbytes` must not be negative, got -1"``. Numbers are ints, floats, numpy
scalars or arrays (a sweep); bools, strings, None, NaN and (unless allowed)
infinities are refused, whatever numpy would make of them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ._errors import InvalidValueError, unknown


def shown(value, limit: int = 60) -> str:
    """`value`'s repr, shortened to `limit` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refuse(arg: str, what: str, value) -> InvalidValueError:
    return InvalidValueError(f"`{arg}` must be {what}, got {shown(value)}")


#: Scalar types a plain float stands for exactly (the fast path of :func:`number`).
_PLAIN_FLOATS = (float, np.float64)


def number(arg: str, value, *, positive: bool = False, nonnegative: bool = False, integer: bool = False,
           allow_inf: bool = False, at_least: float | None = None, at_most: float | None = None):
    """`value` as a float (or a float array for a sweep), after checking it.

    >>> number("B", 8)
    8.0
    >>> number("B", -1, positive=True)
    Traceback (most recent call last):
    ...
    scalelib._errors.InvalidValueError: `B` must be positive (> 0), got -1
    """
    if type(value) in _PLAIN_FLOATS or (type(value) is int and -2**53 <= value <= 2**53):
        # The common case, a plain scalar, checked without numpy (the same checks, the same result)
        x = float(value)
        if (x == x and (allow_inf or x - x == 0) and (not integer or x - x != 0 or x == int(x))
                and (not positive or x > 0) and (not nonnegative or x >= 0)
                and (at_least is None or x >= at_least) and (at_most is None or x <= at_most)):
            return x
    kind = "a whole number" if integer else "a number"
    if isinstance(value, (bool, np.bool_)):
        raise InvalidValueError(f"`{arg}` must be {kind}, got {value!r} (a bool)")
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise _refuse(arg, kind, value)
    if isinstance(value, int):  # Python ints may be too large for numpy's integers
        try:
            arr = np.asarray(float(value))
        except OverflowError:
            raise InvalidValueError(f"`{arg}` is too large to compute with, got {shown(value)}") from None
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            raise _refuse(arg, f"{kind} or an array of numbers", value) from None
        if arr.dtype.kind not in "iuf":
            raise _refuse(arg, f"{kind} or an array of numbers", value)
        if arr.size == 0:
            raise InvalidValueError(f"`{arg}` must hold at least one number, got an empty {type(value).__name__}")
        arr = arr.astype(float)
    if np.any(np.isnan(arr)):
        raise _refuse(arg, kind, value)
    if not allow_inf and np.any(np.isinf(arr)):
        raise _refuse(arg, f"finite ({kind})", value)
    if integer and not np.all(arr == np.round(arr)):
        raise _refuse(arg, kind, value)
    if positive and not np.all(arr > 0):
        raise _refuse(arg, "positive (> 0)", value)
    if nonnegative and not np.all(arr >= 0):
        raise InvalidValueError(f"`{arg}` must not be negative, got {shown(value)}")
    if at_least is not None and not np.all(arr >= at_least):
        raise _refuse(arg, f">= {at_least:g}", value)
    if at_most is not None and not np.all(arr <= at_most):
        raise _refuse(arg, f"<= {at_most:g}", value)
    return float(arr) if arr.ndim == 0 else arr


def positive(arg: str, value, **kw):
    """`value` checked to be > 0 (a float or an array)."""
    return number(arg, value, positive=True, **kw)


def nonnegative(arg: str, value, **kw):
    """`value` checked to be >= 0 (a float or an array)."""
    return number(arg, value, nonnegative=True, **kw)


def count(arg: str, value, *, minimum: int = 1) -> int:
    """`value` as an int, checked to be a single whole number >= `minimum`."""
    if isinstance(value, (list, tuple, np.ndarray)):
        raise _refuse(arg, f"a single whole number >= {minimum}", value)
    x = number(arg, value, integer=True)
    if np.ndim(x) or x < minimum:
        raise _refuse(arg, f"a whole number >= {minimum}", value)
    return int(x)


def counts(arg: str, values, *, minimum: int = 1) -> tuple[int, ...]:
    """A non-empty sequence of whole numbers >= `minimum`, as a tuple of ints."""
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Iterable):
        raise _refuse(arg, f"a sequence of whole numbers >= {minimum}", values)
    items = tuple(values)
    if not items:
        raise _refuse(arg, f"a non-empty sequence of whole numbers >= {minimum}", values)
    try:
        return tuple(count(arg, v, minimum=minimum) for v in items)
    except InvalidValueError:
        raise _refuse(arg, f"a sequence of whole numbers >= {minimum}", values) from None


def flag(arg: str, value) -> bool:
    """`value` checked to be True or False (not 'no', not 1)."""
    if not isinstance(value, (bool, np.bool_)):
        raise _refuse(arg, "True or False", value)
    return bool(value)


def name(arg: str, value, known: Iterable[str], kind: str, *, extra: Iterable[str] = ()) -> str:
    """`value` checked to be one of the `known` names (or an `extra` spelling)."""
    known = tuple(known)
    if not isinstance(value, str):
        raise _refuse(arg, f"a {kind} name (one of {', '.join(known)})", value)
    if value not in known and value not in tuple(extra):
        raise unknown(kind, value, known, arg=arg, extra=extra)
    return value


def share(arg: str, value) -> float:
    """`value` checked to be one share of a peak rate, in (0, 1] (an efficiency), as a float."""
    x = number(arg, value, positive=True, at_most=1)
    if np.ndim(x):
        raise _refuse(arg, "a single share of the peak in (0, 1]", value)
    return float(x)


def broadcast(**arrays):
    """The named numbers or arrays (already checked) broadcast to one shape, as float arrays in the order given.

    Sweeps over several arguments must have shapes that broadcast; the error names them all.
    """
    try:
        return np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in arrays.values()))
    except ValueError:
        names = ", ".join(f"`{k}`" for k in arrays)
        shapes = ", ".join(str(np.shape(v)) for v in arrays.values())
        raise InvalidValueError(f"{names} must have shapes that broadcast (one number, or arrays of matching "
                                f"shapes), got {shapes}") from None


def finite_result(fn_name: str, value):
    """`value` if every element is a finite number; else the error that the inputs are out of range."""
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise InvalidValueError(f"{fn_name}: these inputs give a result that is not a finite number "
                                f"(too large or too small to compute with)")
    return value

