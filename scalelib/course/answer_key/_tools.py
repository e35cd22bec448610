"""What the chapter modules share: a slip's ratio, and derivations whose every symbol is defined."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping

import numpy as np

from ..._derivation import Derivation


def slip(wrong, reference) -> float | tuple[float, ...]:
    """The key of a mistake: `wrong` / `reference`, both computed by scalelib.

    `wrong` is what the wrong method gives, so the ratio keeps its direction (above 1
    the slip makes the answer too large). For a list answer, one ratio per value.
    """
    value = lambda x: x.value if isinstance(x, Derivation) else x  # noqa: E731
    ratio = np.asarray(value(wrong), dtype=float) / np.asarray(value(reference), dtype=float)
    return float(ratio) if ratio.ndim == 0 else tuple(float(r) for r in ratio)


def _uses(formula: str, symbols: str) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(s.strip())}(?![A-Za-z0-9_])", formula)
               for s in symbols.split(","))


def define(derivation: Derivation, meanings: Mapping[str, str]) -> Derivation:
    """`derivation` with a ``where`` line for each symbol of `meanings` (``{"C, W": "..."}``).

    Each definition goes under the first line (in printed order: steps first) whose
    formula uses the symbol, so it is read before or right after its first use.
    A definition that no formula uses is an error in the answer key.
    """
    placed: set[str] = set()

    def visit(node: Derivation) -> Derivation:
        steps = tuple(visit(step) for step in node.steps)
        used = [symbols for symbols in meanings if symbols not in placed and _uses(node.formula, symbols)]
        placed.update(used)
        where = node.where + (("; ".join(f"{symbols}: {meanings[symbols]}" for symbols in used),) if used else ())
        return replace(node, steps=steps, where=where)

    out = visit(derivation)
    unused = [symbols for symbols in meanings if symbols not in placed]
    if unused:
        raise ValueError(f"define: no formula of {derivation.symbol!r} uses {', '.join(unused)}")
    return out


def rename(derivation: Derivation, names: Mapping[str, str]) -> Derivation:
    """`derivation` with its symbols renamed (``{"F_mlp": "FLOPs_mlp"}``) in every line, its steps' included: the
    symbol, the formula and the ``where`` lines, so that a letter keeps one meaning beside another text's."""
    def sub(text: str) -> str:
        for old, new in names.items():
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, text)
        return text

    def visit(node: Derivation) -> Derivation:
        return replace(node, symbol=sub(node.symbol), formula=sub(node.formula),
                       where=tuple(sub(w) for w in node.where), steps=tuple(visit(s) for s in node.steps))

    return visit(derivation)


def after(derivation: Derivation, *steps: Derivation) -> Derivation:
    """`derivation` shown after `steps` (a figure it was given as a number, now derived before it)."""
    return replace(derivation, steps=(*steps, *derivation.steps))


#: critical_batch_size's definition of both its byte sizes, where the formula it shows uses only the weights'.
_BOTH_SIZES = re.compile(r"w, x: bytes per value of the weights \(([\w-]+)\) and of the activations \([\w-]+\)")


def weights_only(derivation: Derivation) -> Derivation:
    """`derivation` with its ``where`` lines defining x (bytes per activation) dropped wherever no formula uses x:
    a critical batch's B = I_crit · w / 2 counts the weights' bytes only (every symbol shown is one used)."""
    def formulas(node: Derivation) -> str:
        return " ".join([node.formula] + [formulas(s) for s in node.steps])

    if _uses(formulas(derivation), "x"):
        return derivation

    def visit(node: Derivation) -> Derivation:
        where = tuple(_BOTH_SIZES.sub(r"w: bytes per value of the weights (\1)", w) for w in node.where)
        return replace(node, steps=tuple(visit(s) for s in node.steps), where=where)

    return visit(derivation)


def once(derivation: Derivation, meanings: Mapping[str, str] = {}) -> Derivation:
    """`derivation` with each symbol defined once: where a later ``where`` line (in printed order: steps first)
    defines a symbol again, that definition is dropped, and a line left empty goes. `meanings` replaces a
    symbol's first definition, for a symbol that stands for the same kind of thing at two values (N: the chips of
    either slice), so that one meaning covers every line that uses it."""
    defined: set[str] = set()

    def head(part: str) -> list[str]:
        match = re.match(r"([^:]{1,25}):\s", part)
        return [s.strip() for s in match.group(1).split(",")] if match else []

    def parts(line: str) -> list[str]:  # split at "; " outside brackets ("N: 8 chips (TpuSlice(...; 8 chips))")
        out, depth, start = [], 0, 0
        for i, c in enumerate(line):
            depth += (c in "([") - (c in ")]")
            if depth == 0 and line.startswith("; ", i):
                out.append(line[start:i])
                start = i + 2
        return out + [line[start:]]

    def visit(node: Derivation) -> Derivation:
        steps = tuple(visit(step) for step in node.steps)
        where = []
        for line in node.where:
            kept = []
            for part in parts(line):
                symbols = head(part)
                if symbols and all(s in defined for s in symbols):
                    continue
                if len(symbols) == 1 and symbols[0] in meanings:
                    part = f"{symbols[0]}: {meanings[symbols[0]]}"
                defined.update(symbols)
                kept.append(part)
            if kept:
                where.append("; ".join(kept))
        return replace(node, steps=steps, where=tuple(where))

    return visit(derivation)
