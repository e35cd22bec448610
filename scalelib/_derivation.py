"""Show your work: a value together with the formula and the numbers that gave it.

Every main calculation takes ``explain=True`` and then returns a
:class:`Derivation` instead of a bare number. It prints as
``T_math = FLOPs / C = 2.2e12 FLOP / 1.97e14 FLOP/s = 11.2 ms`` (with the steps it
depends on above it) and still behaves as a number (``float(d)``, ``d.value``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._units import fmt


@dataclass(frozen=True)
class Derivation:
    """``symbol = formula = substituted = value unit``, after the `steps` it used."""

    symbol: str
    formula: str
    substituted: str
    value: object  # float or numpy array
    unit: str
    steps: tuple["Derivation", ...] = ()

    def lines(self) -> list[str]:
        seen, out = set(), []
        for step in self.steps:
            for line in step.lines():
                if line not in seen:
                    seen.add(line)
                    out.append(line)
        parts = [self.symbol, self.formula]
        if self.substituted and self.substituted != self.formula:
            parts.append(self.substituted)
        parts.append(fmt(self.value, self.unit))
        out.append(" = ".join(parts))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    def __float__(self) -> float:
        return float(self.value)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)


def q(value, unit: str = "") -> str:
    """A number as it appears inside a substituted formula: whole numbers below
    ten million exactly (``8192``), anything else to 3 significant digits."""
    arr = np.asarray(value)
    if not unit and arr.ndim == 0 and float(arr).is_integer() and abs(float(arr)) < 1e7:
        return str(int(arr))
    return fmt(value, unit)


def plain(x):
    """`x` as a float when it is a single number, as a float array otherwise."""
    arr = np.asarray(x, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def value_of(x):
    """The number inside `x`, whether `x` is a Derivation or already a number."""
    return x.value if isinstance(x, Derivation) else x


def result(explain: bool, symbol: str, formula: str, substituted: str, value, unit: str, steps=()):
    """`value` itself, or its Derivation when `explain` is true."""
    if not explain:
        return value
    return Derivation(symbol, formula, substituted, value, unit, tuple(steps))
