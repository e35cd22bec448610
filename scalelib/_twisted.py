"""Twisted tori (chapter 2): a shift in the wraparound links shortens routes on a non-square torus.

On a torus every axis closes into a ring, so along an axis of n chips no chip is
more than n // 2 hops away. When the axes differ in length, the long axis sets the
longest route: on a 4 x 8 torus it is 2 + 4 = 6 hops. A **twisted** torus moves
where the wraparound links of a short axis land: leaving the last chip of X at
(3, y) arrives at (0, y + s) instead of (0, y). With s half the long axis, a route
that wraps around X also travels half-way round Y for free, and the far corners
come closer: on a 4 x 8 torus twisted by 4 the longest route is 4 hops.

TPU v4 slices whose sides are k x 2k, k x k x 2k or k x 2k x 2k chips can be wired
as twisted tori by the optical switches (Google Cloud TPU documentation, "TPU v4",
twisted tori; Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer",
ISCA 2023); How to Scale Your Model (Austin et al., 2025), ch. 2, mentions them as
a way to shorten the average distance. The twist is given here as a mapping, axis
-> {axis it shifts: shift}: ``{"X": {"Y": 4}}``. The exact wiring Google uses is
its own; this module computes what a given twist does.

A torus, twisted or not, looks the same from every chip (it is the Cayley graph of
a finite abelian group), so one breadth-first search from chip 0 gives the hops to
every other chip; the tests check that against searches from every chip.
"""

from __future__ import annotations

import math

import numpy as np

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError, unknown
from ._validate import counts, number, shown

AXIS_NAMES = ("X", "Y", "Z")
#: The most chips searched (a TPU v5p pod has 8960, a TPU7x pod 9216).
MAX_CHIPS = 2**16


def _shape(shape) -> tuple[int, ...]:
    dims = counts("shape", shape)
    if len(dims) > len(AXIS_NAMES):
        raise InvalidValueError(f"`shape` must have 1 to {len(AXIS_NAMES)} axes (X, Y, Z), got {shown(shape)}")
    if math.prod(dims) > MAX_CHIPS:
        raise InvalidValueError(f"`shape` must have at most {MAX_CHIPS} chips in all, got {shown(shape)} "
                                f"({math.prod(dims)} chips)")
    return dims


def _twist(twist, dims: tuple[int, ...]) -> dict[int, dict[int, int]]:
    """{wrapping axis: {shifted axis: shift modulo its length}} from ``{"X": {"Y": 4}}``, checked."""
    if twist is None:
        return {}
    names = AXIS_NAMES[: len(dims)]
    example = "e.g. {'X': {'Y': 4}}: leaving X at its last chip arrives 4 chips further along Y"
    if not isinstance(twist, dict):
        raise InvalidValueError(f"`twist` must be None or a mapping of axis -> {{axis: shift}}, got "
                                f"{shown(twist)}; {example}")
    out: dict[int, dict[int, int]] = {}
    for axis, shifts in twist.items():
        if not isinstance(axis, str) or axis not in names:
            raise unknown("axis", axis, names, arg="twist")
        if not isinstance(shifts, dict) or not shifts:
            raise InvalidValueError(f"`twist`: axis {axis} must map to {{axis: shift}}, got {shown(shifts)}; "
                                    f"{example}")
        i = names.index(axis)
        for other, shift in shifts.items():
            if not isinstance(other, str) or other not in names:
                raise unknown("axis", other, names, arg="twist")
            if other == axis:
                raise InvalidValueError(f"`twist`: axis {axis} cannot shift itself; its wraparound links may "
                                        f"shift the other axes only, got {shown(twist)}")
            if isinstance(shift, (list, tuple, np.ndarray)):
                raise InvalidValueError(f"`twist`: the shift of {other} must be one whole number, got {shown(shift)}")
            s = number(f"twist[{axis!r}][{other!r}]", shift, integer=True)
            j = names.index(other)
            out.setdefault(i, {})[j] = int(s) % dims[j]
    chained = sorted({names[j] for shifts in out.values() for j in shifts} & {names[i] for i in out})
    if chained:
        raise InvalidValueError(f"`twist`: an axis that is shifted cannot be twisted itself (axis "
                                f"{', '.join(chained)}), got {shown(twist)}; twist the short axes along a long one")
    return out


def _distances(dims: tuple[int, ...], shifts: dict[int, dict[int, int]]) -> np.ndarray:
    """Hops from chip 0 to every chip (flat index, C order), by breadth-first search over the links."""
    size = math.prod(dims)
    coords = np.stack(np.unravel_index(np.arange(size), dims), axis=1)
    neighbours = []
    for i, n in enumerate(dims):
        for step in (1, -1):
            c = coords.copy()
            c[:, i] += step
            wrapped = (c[:, i] < 0) | (c[:, i] >= n)
            c[:, i] %= n
            for j, s in shifts.get(i, {}).items():  # a wraparound link of axis i lands shifted along j
                c[:, j] = np.where(wrapped, (c[:, j] + step * s) % dims[j], c[:, j])
            neighbours.append(np.ravel_multi_index(tuple(c.T), dims))
    table = np.stack(neighbours, axis=1)
    hops = np.full(size, -1, dtype=np.int64)
    hops[0] = 0
    frontier, level = np.array([0]), 0
    while frontier.size:
        level += 1
        reached = np.unique(table[frontier].ravel())
        frontier = reached[hops[reached] < 0]
        hops[frontier] = level
    return hops


def _described(dims, twist) -> str:
    shape = " x ".join(map(str, dims))
    return f"{shape} torus" + (f", twist {twist}" if twist else "")


@derivable
def torus_max_hops(shape, *, twist=None):
    """The longest shortest route, in hops, between two chips of a torus, twisted or not.

    Every axis wraps around. Without a twist this is Σ n // 2 over the axes (the
    same as ``tpu_slice(...).max_hops()`` for a slice that wraps on every axis);
    a twist that shifts a short axis's wraparound links along a long axis makes it
    shorter.

    Formula:
        max hops = max over chips b of hops(0, b), the fewest links from chip 0 to b (breadth-first search)

    Args:
        shape: chips along each axis X, Y (, Z): 1 to 3 whole numbers >= 1, at most 65536 chips in all.
        twist: None (a plain torus), or {axis: {other axis: shift}}: the wraparound link leaving the
            last chip of `axis` lands `shift` chips further along `other` (``{"X": {"Y": 4}}``). A shifted
            axis cannot be twisted itself.

    Returns:
        hops (a whole number).

    Chapter:
        2 (TPUs)

    Example:
        >>> torus_max_hops((4, 8)), torus_max_hops((4, 8), twist={"X": {"Y": 4}})
        (6, 4)
        >>> torus_max_hops((4, 4, 8), twist={"X": {"Z": 4}, "Y": {"Z": 4}})
        6
    """
    dims = _shape(shape)
    shifts = _twist(twist, dims)
    value = int(_distances(dims, shifts).max())
    return Derivation("max hops", "max over chips b of hops(0, b)",
                      lambda: f"max over the {math.prod(dims)} chips of the {_described(dims, twist)}", value, "hops",
                      where=("b: any chip; hops(0, b): the fewest ICI links from chip 0 to chip b (a torus looks "
                             "the same from every chip)",))


@derivable
def torus_mean_hops(shape, *, twist=None):
    """The average shortest route, in hops, between two distinct chips of a torus, twisted or not.

    The average distance sets how much of the links' bandwidth an all-to-all
    spends in transit: every byte crosses that many links on average.

    Formula:
        mean hops = Σ over chips b ≠ 0 of hops(0, b) / (chips − 1)

    Args:
        shape: chips along each axis X, Y (, Z): 1 to 3 whole numbers >= 1, at most 65536 chips in all.
        twist: None, or {axis: {other axis: shift}} as in :func:`torus_max_hops`.

    Returns:
        hops (a number; 0 for a single chip).

    Chapter:
        2 (TPUs)

    Example:
        >>> round(torus_mean_hops((4, 8)), 3), round(torus_mean_hops((4, 8), twist={"X": {"Y": 4}}), 3)
        (3.097, 2.71)
    """
    dims = _shape(shape)
    shifts = _twist(twist, dims)
    hops = _distances(dims, shifts)
    chips = hops.size
    value = float(hops.sum() / (chips - 1)) if chips > 1 else 0.0
    return Derivation("mean hops", "Σ hops(0, b) / (chips − 1)",
                      lambda: f"{int(hops.sum())} / ({chips} − 1)" if chips > 1 else "a single chip",
                      value, "hops",
                      where=(f"b: any chip but chip 0; hops(0, b): the fewest ICI links from chip 0 to chip b, on "
                             f"the {_described(dims, twist)} (a torus looks the same from every chip)",))
