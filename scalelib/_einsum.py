"""Counting dots (chapter 4): the FLOPs of any two-operand contraction, written as an einsum.

Every output element of a contraction is a sum of products over the dimensions summed away, so
the work is one multiply and one add for each combination of all the distinct dimensions: twice
their product. A dimension shared by both operands and kept in the output (a batch dimension) is
counted once, like any other. Without a summed dimension (an elementwise or outer product) there
are no adds, and the factor 2 goes.
"""

from __future__ import annotations

import math
import re
from typing import Mapping

from ._derivation import Derivation, derivable, explain, q  # noqa: F401  (explain: the examples use it)
from ._errors import InvalidValueError
from ._validate import count, shown

_SPEC = re.compile(r"^\s*([A-Za-z]*)\s*,\s*([A-Za-z]*)\s*(?:->\s*([A-Za-z]*)\s*)?$")


def _parse(subscripts) -> tuple[str, str, str]:
    if not isinstance(subscripts, str):
        raise InvalidValueError(f"`subscripts` must be an einsum string such as 'bd,df->bf', got {shown(subscripts)}")
    match = _SPEC.match(subscripts)
    if match is None:
        raise InvalidValueError(f"`subscripts` must name two operands and the output with letters, as in "
                                f"'bd,df->bf', got {subscripts!r}")
    a, b, out = match.groups()
    if out is None:  # numpy's implicit output: the letters that appear once, in alphabetical order
        out = "".join(sorted(c for c in set(a + b) if (a + b).count(c) == 1))
    for name, letters in (("first operand", a), ("second operand", b), ("output", out)):
        repeated = sorted({c for c in letters if letters.count(c) > 1})
        if repeated:
            raise InvalidValueError(f"`subscripts`: the {name} repeats {', '.join(repeated)} in {subscripts!r}; "
                                    f"a diagonal is not a contraction this counts")
    stray = sorted(set(out) - set(a + b))
    if stray:
        raise InvalidValueError(f"`subscripts`: the output's {', '.join(stray)} appear in neither operand of "
                                f"{subscripts!r}")
    return a, b, out


@derivable
def einsum_flops(subscripts, sizes):
    """FLOPs of the einsum `subscripts` over two operands whose dimensions have the given `sizes`.

    Formula:
        FLOPs = 2 · product of the sizes of all distinct dimensions (no 2 if nothing is summed over)

    Args:
        subscripts: the contraction, as for ``numpy.einsum``: ``"bd,df->bf"`` (two operands; without
            ``->`` the output is numpy's implicit one).
        sizes: each letter's size, a dict ``{"b": 4096, "d": 8192, "f": 16384}`` (whole numbers >= 1).

    Returns:
        FLOP.

    Chapter:
        4 (Transformer math)

    Example:
        >>> einsum_flops("bd,df->bf", {"b": 4096, "d": 8192, "f": 16384}) == 2 * 4096 * 8192 * 16384
        True
        >>> print(explain(einsum_flops, "btnh,bsnh->bnts", {"b": 8, "t": 2048, "s": 2048, "n": 32, "h": 128}))
        FLOPs = 2·b·t·n·h·s = 2·8·2048·32·128·2048 = 2.75e11 FLOP
          where h: summed over (in both operands, not in the output); b, n: in both operands and the output (batch)
    """
    a, b, out = _parse(subscripts)
    if not isinstance(sizes, Mapping):
        raise InvalidValueError(f"`sizes` must be a dict of each letter's size, e.g. {{'b': 8, 'd': 64}}, "
                                f"got {shown(sizes)}")
    letters = list(dict.fromkeys(a + b))
    missing = [c for c in letters if c not in sizes]
    if missing:
        raise InvalidValueError(f"`sizes` has no size for {', '.join(missing)} (of {subscripts!r})")
    value = {c: count(f"sizes['{c}']", sizes[c]) for c in letters}
    summed = [c for c in letters if c not in out]
    batch = [c for c in letters if c in a and c in b and c in out]
    factor = 2 if summed else 1
    flops = factor * math.prod(value[c] for c in letters)
    where = []
    if summed:
        both = all(c in a and c in b for c in summed)
        where.append(f"{', '.join(summed)}: summed over (in {'both operands' if both else 'the operands'}, "
                     f"not in the output)")
    else:
        where.append("nothing is summed over: one multiply per output element, no adds")
    if batch:
        where.append(f"{', '.join(batch)}: in both operands and the output (batch)")
    prefix = "2·" if factor == 2 else ""
    return Derivation("FLOPs", prefix + "·".join(letters), prefix + "·".join(q(value[c]) for c in letters),
                      float(flops), "FLOP", where=("; ".join(where),))

