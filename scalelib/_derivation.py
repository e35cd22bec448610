"""Show your work: every quantity scalelib computes comes with its derivation, one call away.

Every function (and topology method) that computes a quantity returns a plain
number, or a numpy array for a sweep, whatever its options. Its derivation, the
formula with the numbers that went in, is :func:`explain`'s job, the same way for
every one of them::

    >>> import scalelib as sl
    >>> sl.critical_intensity("tpu-v5e")
    240.2439024390244
    >>> print(sl.explain(sl.critical_intensity, "tpu-v5e"))
    I_crit(tpu-v5e, bf16, hbm) = C / W = 1.97e14 FLOP/s / 820 GB/s = 240 FLOP/B

A :class:`Derivation` prints as ``symbol = formula = numbers = value unit``, after
the steps it used; ``float(d)`` and ``d.value`` give its number.
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ._errors import InvalidCallError, InvalidValueError, ScalelibError
from ._units import fmt


@dataclass(frozen=True)
class Derivation:
    """``symbol = formula = substituted = value unit``, after the `steps` it used.

    `substituted` may be a function returning the text, so that a derivation costs
    nothing until it is printed. `where` defines symbols the formula uses.
    """

    symbol: str
    formula: str
    substituted: str | Callable[[], str]
    value: Any  # float or numpy array
    unit: str
    steps: tuple["Derivation", ...] = ()
    where: tuple[str, ...] = ()
    returns: Any = field(default=None, repr=False, compare=False)  # what the public call returns, if not `value`

    @property
    def numbers(self) -> str:
        """The formula with the numbers put in."""
        return self.substituted() if callable(self.substituted) else self.substituted

    def lines(self) -> list[str]:
        seen, out = set(), []
        for step in self.steps:
            for line in step.lines():
                if line not in seen:
                    seen.add(line)
                    out.append(line)
        parts = [self.symbol, self.formula]
        numbers = self.numbers
        if numbers and numbers != self.formula:
            parts.append(numbers)
        parts.append(fmt(self.value, self.unit))
        out.append(" = ".join(parts))
        out.extend(f"  where {w}" for w in self.where)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    def __float__(self) -> float:
        return float(np.asarray(self.value, dtype=float))

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


def _signature_text(fn, sig: inspect.Signature) -> str:
    """``name(chip, *, dtype='bf16', bandwidth='hbm')``: the signature without annotations or `self`."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]
    return f"{fn.__name__}{inspect.Signature(params)}"


def _run(public, impl, sig: inspect.Signature, args, kwargs, allow_inf: bool) -> Derivation:
    # Arguments that do not fit the signature: Python refuses the call before `impl` runs a line (`sig` is
    # `impl`'s own signature), so they are told apart from a TypeError inside `impl` only when one is raised.
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            derivation = impl(*args, **kwargs)
    except ScalelibError:
        raise
    except (FloatingPointError, ZeroDivisionError, OverflowError) as err:
        raise InvalidValueError(f"{public.__name__}: these inputs are out of the range it can compute with ({err})") from None
    except TypeError:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as err:
            raise InvalidCallError(
                f"{public.__name__}: {err}; it is called as {_signature_text(public, sig)} "
                f"(quantities first, then the chip or topology, options by keyword)"
            ) from None
        raise
    value = derivation.value
    if not allow_inf:
        if type(value) is float:
            if not math.isfinite(value):
                raise InvalidValueError(f"{public.__name__}: these inputs give a result too large to compute with")
        elif isinstance(value, (float, int, np.ndarray, np.floating)):
            if not np.all(np.isfinite(value)):
                raise InvalidValueError(f"{public.__name__}: these inputs give a result too large to compute with")
    return derivation


def derivable(impl=None, *, allow_inf: bool = False):
    """Turn `impl`, which returns a :class:`Derivation`, into a function returning the plain result.

    The derivation stays one call away through :func:`explain`. Arguments that do
    not fit the signature raise :class:`~scalelib.InvalidCallError`; arithmetic
    that overflows raises :class:`~scalelib.InvalidValueError`.
    """
    if impl is None:
        return functools.partial(derivable, allow_inf=allow_inf)
    sig = inspect.signature(impl)

    @functools.wraps(impl)
    def public(*args, **kwargs):
        derivation = _run(public, impl, sig, args, kwargs, allow_inf)
        return derivation.value if derivation.returns is None else derivation.returns

    public.__derive__ = lambda *args, **kwargs: _run(public, impl, sig, args, kwargs, allow_inf)
    return public


def explain(fn, /, *args, **kwargs) -> Derivation:
    """The :class:`Derivation` of ``fn(*args, **kwargs)``: its formula, numbers, result and steps.

    Works for every scalelib function and topology method that computes a
    quantity; the result's number is ``float(explain(...))`` or ``.value``, and
    equals ``fn(*args, **kwargs)`` (for functions that return a bundle, such as
    :func:`~scalelib.roofline` or :func:`~scalelib.best_tile`, the derivation is
    of its headline time).

    Returns:
        a :class:`Derivation`.

    Chapter:
        1 (Rooflines), and every chapter after it

    Example:
        >>> import scalelib as sl
        >>> print(sl.explain(sl.t_math_s, 2 * 4096**3, "tpu-v5e"))
        T_math = FLOPs / C = 1.37e11 FLOP / 1.97e14 FLOP/s = 698 µs
        >>> d = sl.explain(sl.tpu_slice((4, 4), "tpu-v5e").bisection_bytes_per_s)
        >>> d.value == sl.tpu_slice((4, 4), "tpu-v5e").bisection_bytes_per_s()
        True
    """
    target = getattr(fn, "__func__", fn)  # a bound method: explain the function with its object
    derive = getattr(target, "__derive__", None)
    if derive is None:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise InvalidCallError(
            f"explain: {name} has no derivation; pass a scalelib function or topology method that computes "
            f"a quantity, e.g. explain(sl.critical_intensity, 'tpu-v5e')"
        )
    if fn is not target:
        return derive(fn.__self__, *args, **kwargs)
    return derive(*args, **kwargs)
