"""Test inputs and timings for JAX programs on a mesh of devices (chapter 10).

:func:`sharded_inputs` makes the arrays a sharded program runs on from their
description in the book's notation: ``"A[S_X, D_Y]"`` with ``{"S": 64, "D": 32}``
is a float32 array of shape [64, 32] split over mesh axes X and Y. Its values are
drawn by NumPy from a seed, array by array, so the same description gives the same
numbers on every machine, with JAX or without it (:func:`input_values` is that half
alone); then each array is placed on the JAX mesh with its sharding.
:func:`measure_jax_time_s` times a compiled function on its arguments, and
:func:`collective_matmul_time_s` is the model of what such a program would take on
a TPU: a matmul whose input is gathered over a ring, first or step by step.

JAX is imported inside the functions only.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._derivation import Derivation, derivable, explain, q
from ._errors import InvalidValueError
from ._sharding import Sharding, _mesh, sharding
from ._specs import DTYPES, chip as _chip, dtype_name
from ._validate import count, flag, name as _name, positive, shown

#: The most values :func:`sharded_inputs` draws for all its arrays together.
MAX_INPUT_VALUES = 2**26
#: The most timed runs :func:`measure_jax_time_s` makes.
MAX_REPEATS = 1000


def _mesh_dict(mesh) -> dict[str, int]:
    """``{axis: devices}`` of a JAX mesh or of a dict such as ``{"X": 2, "Y": 4}``."""
    if hasattr(mesh, "axis_names") and hasattr(mesh, "devices"):
        return {str(a): int(n) for a, n in zip(mesh.axis_names, np.shape(mesh.devices))}
    return _mesh(mesh)


def _layouts(arrays, sizes, mesh: dict, integers) -> list[tuple[Sharding, tuple[int, ...], int | None]]:
    """(sharding, global shape, bound of integer values or None) for each array of `arrays`, all checked."""
    if isinstance(arrays, str):
        arrays = [arrays]
    if not isinstance(arrays, (list, tuple)) or not arrays:
        raise InvalidValueError(f"`arrays` must be a list of arrays in the book's notation, such as "
                                f"['A[S_X, D_Y]', 'W[D, F_Y]'], got {shown(arrays)}")
    if not isinstance(sizes, dict) or not sizes:
        raise InvalidValueError(f"`sizes` must give each dimension's size, such as {{'S': 64, 'D': 32}}, "
                                f"got {shown(sizes)}")
    sizes = {str(k): count(f"sizes[{k!r}]", v) for k, v in sizes.items()}
    if integers is None:
        integers = {}
    if not isinstance(integers, dict):
        raise InvalidValueError(f"`integers` must map an array's name to the bound of its values, such as "
                                f"{{'B': 'E'}} (integers from 0 to E - 1), got {shown(integers)}")
    layouts, names, total = [], [], 0
    for text in arrays:
        try:
            s = sharding(text, mesh)
        except InvalidValueError as err:
            raise InvalidValueError("`arrays`: " + str(err).removeprefix("`text`: ")) from None
        if not s.name:
            raise InvalidValueError(f"`arrays`: give each array a name, as in 'A[S_X, D_Y]', got {text!r}")
        if s.unreduced:
            raise InvalidValueError(f"`arrays`: {text!r} holds partial sums ({{U_...}}); an input holds values")
        if s.name in names:
            raise InvalidValueError(f"`arrays`: the name {s.name!r} is given to two arrays; name each its own")
        names.append(s.name)
        missing = [d for d in s.dims if d not in sizes]
        if missing:
            raise InvalidValueError(f"`sizes` has no size for {missing[0]!r}, which {text!r} uses; "
                                    f"add it, e.g. {{{missing[0]!r}: 64}}")
        shape = tuple(sizes[d] for d in s.dims)
        for dim, n, axes in zip(s.dims, shape, s.axes):
            parts = math.prod(mesh[a] for a in axes)
            if n % parts:
                raise InvalidValueError(f"`sizes`: {dim} = {n} does not split into {parts} equal blocks over "
                                        f"{''.join(axes)} in {text!r}; choose a multiple of {parts}")
        high = integers.get(s.name)
        if high is not None:
            high = sizes.get(high) if isinstance(high, str) else high
            if high is None:
                raise InvalidValueError(f"`integers`: the bound of {s.name!r} names a dimension that `sizes` "
                                        f"lacks, got {shown(integers[s.name])}")
            high = count(f"integers[{s.name!r}]", high)
        layouts.append((s, shape, high))
        total += math.prod(shape)
    unknown = [k for k in integers if k not in names]
    if unknown:
        raise InvalidValueError(f"`integers` names {unknown[0]!r}, which is none of the arrays "
                                f"({', '.join(names)})")
    if total > MAX_INPUT_VALUES:
        raise InvalidValueError(f"`sizes`: these arrays hold {total:,} values together; test inputs hold at most "
                                f"{MAX_INPUT_VALUES:,}")
    return layouts


def _seed(seed) -> int:
    return count("seed", seed, minimum=0)


def input_values(arrays, sizes, mesh, *, seed=0, integers=None) -> list[np.ndarray]:
    """The values :func:`sharded_inputs` places on the mesh, as NumPy arrays (no JAX needed).

    Array k of `arrays` is drawn by ``np.random.default_rng([seed, k])``: standard
    normal float32 values, or int32 values from 0 to n - 1 for an array that
    `integers` bounds by n.

    Args:
        arrays: the arrays in the book's notation, ``["A[S_X, D_Y]", "W[D, F_Y]"]``
            (one text for a single array).
        sizes: each dimension's size, ``{"S": 64, "D": 32, "F": 48}``.
        mesh: the mesh, ``{"X": 2, "Y": 4}`` or a JAX mesh (it names the axes the
            texts may use; every split dimension must divide evenly).
        seed: a whole number >= 0.
        integers: array name -> the bound n of its integer values (a number, or
            the name of a dimension in `sizes`), e.g. ``{"B": "E"}``.

    Returns:
        a list of NumPy arrays, one per entry of `arrays`, whole (unsharded).

    Chapter:
        10 (Programming with JAX)

    Example:
        >>> a, b = input_values(["A[S_X, D]", "B[S_X]"], {"S": 4, "D": 2, "E": 3}, {"X": 2},
        ...                     seed=7, integers={"B": "E"})
        >>> a.shape, a.dtype, b.tolist()
        ((4, 2), dtype('float32'), [2, 2, 2, 0])
    """
    mesh = _mesh_dict(mesh)
    seed = _seed(seed)
    out = []
    for k, (_, shape, high) in enumerate(_layouts(arrays, sizes, mesh, integers)):
        rng = np.random.default_rng([seed, k])
        if high is None:
            out.append(rng.standard_normal(shape, dtype=np.float32))
        else:
            out.append(rng.integers(0, high, size=shape, dtype=np.int32))
    return out


def sharded_inputs(arrays, sizes, mesh, *, seed=0, integers=None) -> tuple:
    """Test arrays written in the book's notation, drawn from a seed and placed on a JAX mesh.

    ``"A[S_X, D_Y]"`` with ``sizes={"S": 64, "D": 32}`` is a float32 array of
    shape [64, 32] whose rows are split over mesh axis X and columns over Y (each
    device holds a [64/X, 32/Y] block). The values are those of
    :func:`input_values` (the same on every machine for the same seed); an array
    bounded by `integers` holds int32 values from 0 to n - 1 (routing choices, say).

    Args:
        arrays: the arrays in the book's notation, ``["A[S_X, D_Y]", "W[D, F_Y]"]``.
        sizes: each dimension's size, ``{"S": 64, "D": 32, "F": 48}``.
        mesh: a JAX mesh (such as :func:`simulated_mesh`'s), or a dict such as
            ``{"X": 2, "Y": 4}`` for a simulated mesh of that shape.
        seed: a whole number >= 0.
        integers: array name -> the bound n of its integer values (a number or a
            dimension's name), e.g. ``{"B": "E"}``.

    Returns:
        a tuple of JAX arrays, one per entry of `arrays`, each sharded as written.

    Chapter:
        10 (Programming with JAX)

    Example:
        >>> (a,) = sharded_inputs(["A[S, D]"], {"S": 4, "D": 2}, {"X": 1})
        >>> a.shape, str(a.dtype)
        ((4, 2), 'float32')
        >>> a, w = sharded_inputs(["A[S_X, D_Y]", "W[D_Y, F]"], {"S": 64, "D": 32, "F": 48},
        ...                       {"X": 2, "Y": 4})   # 8 devices  # doctest: +SKIP
        >>> a.sharding.spec                                      # doctest: +SKIP
        PartitionSpec('X', 'Y')
    """
    from ._jax_bridge import simulated_mesh

    is_jax_mesh = hasattr(mesh, "axis_names") and hasattr(mesh, "devices")
    layout = _mesh_dict(mesh)
    values = input_values(arrays, sizes, layout, seed=seed, integers=integers)
    if not is_jax_mesh:
        mesh = simulated_mesh(layout)
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    texts = [arrays] if isinstance(arrays, str) else arrays
    placed = []
    for text, value in zip(texts, values):
        spec = PartitionSpec(*sharding(text, layout).partition_spec())  # checked by input_values
        placed.append(jax.device_put(value, NamedSharding(mesh, spec)))
    return tuple(placed)


def measure_jax_time_s(fn, *args, repeats=5, statistic="min") -> float:
    """Wall time of ``jax.jit(fn)(*args)`` on this machine: the best (or the median) of `repeats` runs after a warm-up.

    The function is compiled once (not timed), run once, then timed `repeats`
    times, each run waited for (``block_until_ready``). ``statistic="min"`` gives
    the fastest run, the one least disturbed by other programs; ``"median"`` the
    typical one, which, with several repeats, says how much the runs spread. On simulated CPU devices
    every device shares this machine's cores and its memory, so a time measured
    here says nothing about links between chips: it counts the copies a
    collective makes in memory, and the arithmetic of all devices in turn.

    Args:
        fn: a function of JAX arrays (jitted or not) returning an array or a pytree of them.
        *args: its arguments.
        repeats: timed runs (1 to 1000).
        statistic: ``"min"`` (default) or ``"median"`` of the timed runs.

    Returns:
        seconds (s).

    Chapter:
        10 (Programming with JAX)

    Example:
        >>> import jax.numpy as jnp
        >>> measure_jax_time_s(jnp.sin, jnp.ones(8), repeats=2) > 0     # doctest: +SKIP
        True
    """
    if not callable(fn):
        raise InvalidValueError(f"`fn` must be a function of JAX arrays, got {shown(fn)}")
    repeats = count("repeats", repeats)
    if repeats > MAX_REPEATS:
        raise InvalidValueError(f"`repeats` must be at most {MAX_REPEATS}, got {repeats}")
    statistic = _name("statistic", statistic, ("min", "median"), "statistic")
    import jax

    try:
        compiled = jax.jit(fn).lower(*args).compile()
        jax.block_until_ready(compiled(*args))
    except Exception as err:  # tracing, compiling or running failed: say so in scalelib's words
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise InvalidValueError(f"`args`: jax.jit(fn) could not run on these arguments "
                                f"({type(err).__name__}: {first[:200]})") from None
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return float(min(times) if statistic == "min" else np.median(times))


#: The schedules :func:`collective_matmul_time_s` prices.
SCHEDULES = ("gather first", "one way", "both ways", "unsplit")
#: (formula, rule of Y, T_blk, T_mm) per schedule, on a ring (Y has a link between its ends) and on a line.
_SCHEDULE_FORMULA = {
    (True, "gather first"): ("(Y − 1)·T_blk / 2 + Y·T_mm", lambda n, tb, tm: (n - 1) * tb / 2 + n * tm),
    (True, "one way"): ("(Y − 1)·max(T_blk, T_mm) + T_mm", lambda n, tb, tm: (n - 1) * max(tb, tm) + tm),
    (True, "both ways"): ("(Y − 1)·max(T_blk / 2, T_mm) + T_mm", lambda n, tb, tm: (n - 1) * max(tb / 2, tm) + tm),
    (True, "unsplit"): ("Y·T_mm", lambda n, tb, tm: n * tm),
    (False, "gather first"): ("(Y − 1)·T_blk + Y·T_mm", lambda n, tb, tm: (n - 1) * tb + n * tm),
    (False, "one way"): ("(Y − 1)·max(T_blk, T_mm) + T_mm", lambda n, tb, tm: (n - 1) * max(tb, tm) + tm),
    (False, "both ways"): ("(Y − 1)·max(T_blk, T_mm) + T_mm", lambda n, tb, tm: (n - 1) * max(tb, tm) + tm),
    (False, "unsplit"): ("Y·T_mm", lambda n, tb, tm: n * tm),
}
#: Integer dtypes a matmul may take that have no published matrix-unit peak: bytes per value.
_NO_PEAK_DTYPES = {"int32": 4}


def _split(arg: str, size: int, parts: int, axis: str) -> int:
    if size % parts:
        raise InvalidValueError(f"`{arg}` = {size} does not split into {parts} equal blocks over {axis}; "
                                f"choose a multiple of {parts}")
    return size // parts


@derivable
def collective_matmul_time_s(B, D, F, chip, *, mesh, schedule="one way", dtype="bf16", flops_per_s=None,
                             wraparound=True):
    """Modelled time of A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y] over mesh axis Y, by one of four schedules.

    Each device holds a [B/X, D/Y] block of A and needs its whole rows, [B/X, D].
    One block crosses one ICI link one way in T_blk; one block times the matching
    D/Y rows of the device's F/Y columns of W takes T_mm. ``"gather first"``
    AllGathers A over Y (both directions of a ring with a link between its ends)
    and then multiplies; ``"one way"`` is the collective matmul, each of Y − 1
    steps passing a block to the neighbour while the block held is multiplied;
    ``"both ways"`` sends half of each block each way; ``"unsplit"`` is the same
    matmul with D not split at all (no communication). Every transfer and every
    multiplication runs at its peak, and overlapped ones fully overlap (the
    roofline bound, chapter 10; the book measures 311, 244 and 224 µs for three
    of them on a TPU v5e 2x4 with int32 arrays).

    Without the link between Y's ends (``wraparound=False``, a line), the
    AllGather's bytes reach an end chip over one link, one way, so it takes
    twice the ring's time; the block a one-way step sends from one end to the
    other travels back along the line in the direction no other block uses
    (forwarded without waiting, hop latency left out), so one way costs what it
    does on a ring; and sending both ways gains nothing, each direction of
    every link then carrying a whole block per step.

    Formula:
        T_blk = b·(B/X)·(D/Y) / W,  T_mm = 2·(B/X)·(D/Y)·(F/Y) / C;
        on a ring: gather first = (Y − 1)·T_blk/2 + Y·T_mm;  one way = (Y − 1)·max(T_blk, T_mm) + T_mm;
        both ways = (Y − 1)·max(T_blk/2, T_mm) + T_mm;  unsplit = Y·T_mm;
        on a line: gather first = (Y − 1)·T_blk + Y·T_mm;  both ways = one way

    Args:
        B: rows of A (tokens), a whole number divisible by X.
        D: the contracted dimension, divisible by Y.
        F: columns of W, divisible by Y.
        chip: a chip name or a ChipSpec (W is its one-way ICI link bandwidth).
        mesh: the mesh, ``{"X": 2, "Y": 4}``.
        schedule: ``"gather first"``, ``"one way"`` (default), ``"both ways"`` or ``"unsplit"``.
        dtype: the arrays' dtype: it sets the bytes per value b and the arithmetic
            rate C, the chip's published peak for it. ``"int32"`` has no matrix-unit
            peak (a TPU's MXU multiplies bf16 and int8, not int32): give its rate as
            `flops_per_s`.
        flops_per_s: the arithmetic rate C (FLOP/s), in place of the chip's peak;
            needed for ``"int32"``.
        wraparound: True (default) if Y is a ring, with a link between its ends;
            False for a line (a TPU v5e slice smaller than the pod, such as 2x4).

    Returns:
        seconds (s).

    Chapter:
        10 (Programming with JAX)

    Example:
        >>> from scalelib import fmt
        >>> fmt(collective_matmul_time_s(1024, 2048, 8192, "tpu-v5e", mesh={"X": 2, "Y": 4}), "s")
        '40.4 µs'
        >>> fmt(collective_matmul_time_s(1024, 2048, 8192, "tpu-v5e", mesh={"X": 2, "Y": 4},
        ...                              schedule="both ways"), "s")
        '22.9 µs'
        >>> fmt(collective_matmul_time_s(1024, 2048, 8192, "tpu-v5e", mesh={"X": 2, "Y": 4},
        ...                              schedule="gather first", wraparound=False), "s")
        '56.8 µs'
    """
    layout = _mesh_dict(mesh)
    if set(layout) != {"X", "Y"}:
        raise InvalidValueError(f"`mesh` must name the two axes X and Y, such as {{'X': 2, 'Y': 4}}, "
                                f"got {shown(mesh)}")
    X, Y = layout["X"], layout["Y"]
    rows = _split("B", count("B", B), X, "X")
    depth = _split("D", count("D", D), Y, "Y")
    cols = _split("F", count("F", F), Y, "Y")
    schedule = _name("schedule", schedule, SCHEDULES, "schedule")
    ring = flag("wraparound", wraparound)
    if isinstance(dtype, str) and dtype.lower() in ("int32", "s32"):
        dtype, b = "int32", _NO_PEAK_DTYPES["int32"]
    else:
        dtype = dtype_name(dtype)
        b = DTYPES[dtype][1]
    spec = _chip(chip)
    if flops_per_s is not None:
        rate = positive("flops_per_s", flops_per_s)
        if np.ndim(rate):
            raise InvalidValueError(f"`flops_per_s` must be one number (FLOP/s), got {shown(flops_per_s)}")
        C = Derivation("C", "flops_per_s", "", rate, "FLOP/s")
    elif dtype in _NO_PEAK_DTYPES:
        raise InvalidValueError(f"`flops_per_s`: {spec.name} publishes no {dtype} matmul rate (its matrix units "
                                f"multiply narrower types); give the rate you assume, e.g. flops_per_s=2e13")
    else:
        C = explain(spec.peak_flops_per_s, dtype=dtype)
    W = explain(spec.bytes_per_s, bandwidth="ici")
    v_blk = b * rows * depth
    flops = 2 * rows * depth * cols
    t_blk = Derivation("T_blk", "b·(B/X)·(D/Y) / W",
                       lambda: f"{b:g}·{rows}·{depth} B / {q(W.value, 'B/s')}", v_blk / W.value, "s", (W,))
    t_mm = Derivation("T_mm", "2·(B/X)·(D/Y)·(F/Y) / C",
                      lambda: f"2·{rows}·{depth}·{cols} FLOP / {q(C.value, 'FLOP/s')}", flops / C.value, "s", (C,))
    formula, rule = _SCHEDULE_FORMULA[ring, schedule]
    total = rule(Y, t_blk.value, t_mm.value)
    return Derivation(f"T({schedule}, {dtype}, {'ring' if ring else 'line'})", formula,
                      lambda: formula.replace("Y", str(Y)).replace("T_blk", q(t_blk.value, "s"))
                      .replace("T_mm", q(t_mm.value, "s")), total, "s", (t_blk, t_mm))
