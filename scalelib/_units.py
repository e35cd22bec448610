"""The one formatter for quantities with units: ``fmt(1.39e-3, "s") == "1.39 ms"``.

Everything scalelib prints goes through :func:`fmt`, so a time, a size or a rate
reads the same in a derivation, a checker verdict, a table and a plot label.
"""

from __future__ import annotations

import math

import numpy as np

_SI = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]

#: Units printed in scientific notation rather than with an SI prefix (the book's habit).
SCIENTIFIC_UNITS = {"FLOP", "FLOP/s", "OP/s", "FLOPs"}
#: Units printed with SI prefixes (decimal) or, on request, binary prefixes.
PREFIXED_UNITS = {"B", "B/s", "s", "Hz", "bit/s", "b/s"}


def _trim(mantissa: float, sig: int) -> str:
    """`mantissa` (already rounded) without float noise, exponent or trailing zeros."""
    return np.format_float_positional(_round_sig(mantissa, sig), precision=sig + 3, trim="-")


def _round_sig(x: float, sig: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, sig - 1 - int(math.floor(math.log10(abs(x)))))


def _scientific(x: float, sig: int) -> str:
    if float(x).is_integer() and abs(x) < 1e4:  # small whole numbers exactly: 8192, 1024
        return str(int(x))
    x = _round_sig(x, sig)
    exponent = int(math.floor(math.log10(abs(x))))
    if -3 <= exponent < 4:
        return _trim(x, sig)
    mantissa = x / 10**exponent
    return f"{_trim(mantissa, sig)}e{exponent}"


def _prefixed(x: float, unit: str, sig: int, binary: bool) -> str:
    if binary and unit in ("B", "B/s"):
        index = 0
        while abs(x) >= 1024 and index < len(_BINARY) - 1:
            x /= 1024
            index += 1
        return f"{_trim(_round_sig(x, sig), sig)} {_BINARY[index]}{unit}"
    if unit == "s" and abs(x) >= 60:
        for size, name in ((86400 * 365.25, "years"), (86400, "days"), (3600, "h"), (60, "min")):
            if abs(x) >= size:
                return f"{_trim(_round_sig(x / size, sig), sig)} {name}"
    x = _round_sig(x, sig)
    exponent = int(math.floor(math.log10(abs(x)) / 3)) * 3
    exponent = max(min(exponent, max(_SI)), min(_SI))
    mantissa = _round_sig(x / 10**exponent, sig)
    if abs(mantissa) >= 1000 and exponent < max(_SI):
        exponent += 3
        mantissa /= 1000
    text = _trim(mantissa, sig)
    if "e" in text:  # beyond the largest or smallest prefix
        return f"{_scientific(x, sig)} {unit}"
    return f"{text} {_SI[exponent]}{unit}"


def fmt(value, unit: str = "", *, sig: int = 3, binary: bool = False) -> str:
    """Format `value` with `unit`, rounded to `sig` significant digits.

    Times, bytes and bandwidths take SI prefixes (``1.39 ms``, ``34.4 MB``,
    ``820 GB/s``; ``binary=True`` gives ``KiB``/``MiB``); long times read as
    minutes, hours, days or years; FLOPs and FLOP/s read in scientific notation
    (``1.97e14 FLOP/s``); anything else is a plain number followed by its unit.
    Whole numbers below 10,000 that take no prefix print exactly (``8192``).
    Arrays are formatted element by element. Every number scalelib prints goes through it.

    Returns:
        the text (str).

    Chapter:
        1 (Rooflines)

    Example:
        >>> fmt(1.3899e-3, "s")
        '1.39 ms'
        >>> fmt(1.97e14, "FLOP/s")
        '1.97e14 FLOP/s'
        >>> fmt(163840, "B", binary=True)
        '160 KiB'
    """
    from ._errors import InvalidValueError

    if isinstance(value, (str, bytes)) or value is None:
        raise InvalidValueError(f"`value` must be a number or an array of numbers, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InvalidValueError(f"`value` must be a number or an array of numbers, got {value!r}") from None
    if not isinstance(unit, str):
        raise InvalidValueError(f"`unit` must be a string such as 's' or 'B/s', got {unit!r}")
    if isinstance(sig, bool) or not isinstance(sig, (int, np.integer)) or not 1 <= sig <= 17:
        raise InvalidValueError(f"`sig` must be a whole number of significant digits from 1 to 17, got {sig!r}")
    if not isinstance(binary, (bool, np.bool_)):
        raise InvalidValueError(f"`binary` must be True or False, got {binary!r}")
    if arr.ndim > 0:
        return "[" + ", ".join(fmt(v, unit, sig=sig, binary=binary) for v in arr.ravel()) + "]"
    x = float(arr)
    space = " " if unit else ""
    if x == 0:
        return f"0{space}{unit}"
    if not math.isfinite(x):
        return f"{x}{space}{unit}"
    if unit in PREFIXED_UNITS:
        return _prefixed(x, unit, sig, binary)
    if unit in SCIENTIFIC_UNITS:
        return f"{_scientific(x, sig)}{space}{unit}"
    return f"{_scientific(x, sig)}{space}{unit}"
