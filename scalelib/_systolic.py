"""A TPU's MXU, simulated (chapter 2): a weight-stationary systolic array, cycle by cycle.

The MXU is a square grid of n × n processing elements (PEs; n = 128 on most
TPUs). To compute Y[M, N] = X[M, K] · W[K, N] it works like this:

* the weights stay put: before the first cycle PE (k, c) receives W[k, c];
* the rows of X stream in from the left, one per cycle, and skewed: row k of the
  array starts one cycle after row k - 1, so X[m, k] enters PE (k, 0) at cycle m + k
  (counting cycles from 0);
* every cycle, every PE multiplies the activation it holds by its weight, adds the
  partial sum that arrives from the PE above (0 in the top row), hands the sum to
  the PE below and the activation to the PE on its right;
* so X[m, k] reaches column c at cycle m + k + c, where the sum for Y[m, c] has
  collected the terms 0 .. k - 1 from the rows above, and Y[m, c] leaves the bottom
  row at cycle m + (n - 1) + c: the outputs come out skewed too.

So n - 1 cycles fill the array before the first sum reaches its bottom row; then
the rows of Y leave it one a cycle, M cycles of stream; and the last column
leaves N - 1 cycles after the first, the drain::

    cycles = (n - 1) + M + (N - 1) = M + n + N - 2        (K <= n, N <= n)

A larger K or N is cut into n × n tiles of W; each tile is one pass of X through
the array (its partial results added to Y), and the passes run one after another,
so ⌈K/n⌉ · (⌈N/n⌉ · (M + n - 2) + N) cycles in all. Loading a tile's weights is not
counted: the MXU loads the next tile's weights while the current one streams.

:func:`systolic_matmul` gives the product the simulation computes,
:func:`systolic_trace` what every PE holds at every cycle, :func:`systolic_cycles`
the count above (with its derivation), and :func:`animate_systolic` /
:func:`systolic_animation_html` draw the trace. matplotlib is imported only
when drawing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError
from ._validate import count, number, shown

#: The largest array side simulated (the MXU is 128 × 128 on most TPUs, 256 × 256 on v6e).
MAX_SIZE = 256
#: The most work systolic_matmul simulates: cycles × size² PE-steps.
MAX_PE_CYCLES = 10**8
#: The most a trace records: cycles × size² PE-states (three float arrays of that many values).
MAX_TRACE_PE_CYCLES = 5 * 10**6
#: The largest trace the drawing functions accept: array side, rows of X, columns of W, cycles.
MAX_ANIMATED_SIZE, MAX_ANIMATED_ROWS, MAX_ANIMATED_COLUMNS, MAX_ANIMATED_CYCLES = 8, 8, 8, 120
_INT64_MAX = 2**63 - 1


# --- checking the operands -------------------------------------------------------


def _matrix(arg: str, value) -> np.ndarray:
    """`value` as a 2-D array of finite numbers (ints kept as ints), or the error naming `arg`."""
    what = "a 2-D array of numbers (a matrix)"
    if value is None or isinstance(value, (bool, np.bool_, str, bytes, dict, set)):
        raise InvalidValueError(f"`{arg}` must be {what}, got {shown(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):  # ragged rows, objects numpy cannot hold
        raise InvalidValueError(f"`{arg}` must be {what} with rows of equal length, got {shown(value)}") from None
    if arr.dtype.kind == "b":
        raise InvalidValueError(f"`{arg}` must be {what}, not of bools, got {shown(value)}")
    if arr.dtype.kind not in "iuf":
        raise InvalidValueError(f"`{arg}` must be {what}, got {shown(value)}")
    if arr.ndim != 2:
        raise InvalidValueError(f"`{arg}` must be {what}, got a {arr.ndim}-D array of shape {arr.shape}: "
                                f"{shown(value)}")
    if 0 in arr.shape:
        raise InvalidValueError(f"`{arg}` must have at least one row and one column, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = "NaN" if np.any(np.isnan(arr)) else "an infinity"
        raise InvalidValueError(f"`{arg}` must hold finite numbers, got {bad} in {shown(value)}")
    number(arg, arr)  # the one validation layer agrees: numbers, finite, not bools
    return arr


def _largest(arr: np.ndarray) -> int:
    """max |arr| of an integer array, as a Python int (no overflow for the most negative int64)."""
    return max(abs(int(arr.max())), abs(int(arr.min())))


def _operands(x, w, size):
    """(X, W, n) checked: X[M, K] and W[K, N] as int64 (both integer) or float64 arrays, n the array side."""
    X, W = _matrix("x", x), _matrix("w", w)
    (M, K), (K2, N) = X.shape, W.shape
    if K2 != K:
        raise InvalidValueError(f"`w` must have as many rows as `x` has columns (K = {K}), got `w` of shape "
                                f"{W.shape} for `x` of shape {X.shape}")
    if size is None:
        n = min(max(K, N), MAX_SIZE)
    else:
        n = count("size", size)
        if n > MAX_SIZE:
            raise InvalidValueError(f"`size` must be at most {MAX_SIZE} (a 256 × 256 MXU; larger K or N are "
                                    f"tiled), got {shown(size)}")
    if X.dtype.kind in "iu" and W.dtype.kind in "iu":
        if _largest(X) > _INT64_MAX or _largest(W) > _INT64_MAX or K * _largest(X) * _largest(W) > _INT64_MAX:
            raise InvalidValueError("`x` and `w` hold integers too large for exact 64-bit sums of K products "
                                    "(K · max|x| · max|w| must stay below 2**63); pass floats instead")
        return X.astype(np.int64), W.astype(np.int64), n
    return X.astype(np.float64), W.astype(np.float64), n


def _tiles(K: int, N: int, n: int) -> tuple[int, int]:
    """(⌈K/n⌉, ⌈N/n⌉): the n × n tiles W[K, N] is cut into."""
    return -(-K // n), -(-N // n)


def _count_cycles(M: int, K: int, N: int, n: int) -> int:
    TK, TN = _tiles(K, N, n)
    return TK * (TN * (M + n - 2) + N)


# --- the simulation ----------------------------------------------------------------


def _simulate(X: np.ndarray, W: np.ndarray, n: int, record: bool):
    """Run the array; (Y, per-cycle records or None). Records: activations, partial sums, outputs, tile."""
    M, K = X.shape
    N = W.shape[1]
    TK, TN = _tiles(K, N, n)
    total = _count_cycles(M, K, N, n)
    Y = np.zeros((M, N), dtype=X.dtype)
    emitted = np.zeros((M, N), dtype=bool)
    if record:
        acts = np.full((total, n, n), np.nan)
        sums = np.full((total, n, n), np.nan)
        outs = np.full((total, M, N), np.nan)
        tile = np.zeros((total, 2), dtype=np.int64)
    rows, cols = np.arange(n), np.arange(n)
    t_all = 0
    for j in range(TN):  # the tiles of W: columns c0 .. c0 + Nj - 1 ...
        c0, Nj = j * n, min(n, N - j * n)
        for i in range(TK):  # ... and rows k0 .. k0 + Ki - 1
            k0, Ki = i * n, min(n, K - i * n)
            Wt = np.zeros((n, n), dtype=W.dtype)
            Wt[:Ki, :Nj] = W[k0:k0 + Ki, c0:c0 + Nj]
            Xt = np.zeros((M, n), dtype=X.dtype)
            Xt[:, :Ki] = X[:, k0:k0 + Ki]
            act = np.zeros((n, n), dtype=X.dtype)  # the activation each PE holds
            act_on = np.zeros((n, n), dtype=bool)  # whether it holds one (not a bubble or padding)
            psum = np.zeros((n, n), dtype=X.dtype)  # the partial sum each PE holds
            for t in range(M + n + Nj - 2):  # one pass: fill, stream, drain
                m_in = t - rows  # row k of the array takes X[t - k, k] this cycle
                entering = (m_in >= 0) & (m_in < M) & (rows < Ki)
                new_act = np.empty_like(act)
                new_act[:, 1:] = act[:, :-1]  # activations move one PE to the right
                new_act[:, 0] = np.where(entering, Xt[np.clip(m_in, 0, M - 1), rows], 0)
                new_on = np.empty_like(act_on)
                new_on[:, 1:] = act_on[:, :-1]
                new_on[:, 0] = entering
                inflow = np.zeros_like(psum)
                inflow[1:] = psum[:-1]  # sums move one PE down; the top row starts from 0
                m_at = t - rows[:, None] - cols[None, :]  # PE (k, c) works on row m = t - k - c of X
                busy = (m_at >= 0) & (m_at < M) & (cols[None, :] < Nj)
                psum = np.where(busy, inflow + np.where(new_on, new_act, 0) * Wt, 0)
                act, act_on = new_act, new_on
                m_out = t - (n - 1) - cols[:Nj]  # the bottom row hands Y[t - (n - 1) - c, c] out
                done = (m_out >= 0) & (m_out < M)
                Y[m_out[done], c0 + cols[:Nj][done]] += psum[n - 1, :Nj][done]
                emitted[m_out[done], c0 + cols[:Nj][done]] = True
                if record:
                    acts[t_all] = np.where(act_on, act, np.nan)
                    sums[t_all] = np.where(busy, psum, np.nan)
                    outs[t_all] = np.where(emitted, Y, np.nan)
                    tile[t_all] = (i, j)
                t_all += 1
    assert t_all == total and emitted.all()
    return Y, ((acts, sums, outs, tile) if record else None)


def _run(fn_name: str, x, w, size, record: bool, limit: int):
    X, W, n = _operands(x, w, size)
    (M, K), N = X.shape, W.shape[1]
    work = _count_cycles(M, K, N, n) * n * n
    if work > limit:
        what = "simulates" if not record else "records"
        raise InvalidValueError(f"{fn_name}: this product is too large to simulate cycle by cycle: "
                                f"{fn_name} {what} at most {limit:.0e} PE-cycles (cycles × size²), these "
                                f"operands need {work:.2e}; use `x @ w` for the numbers")
    try:
        with np.errstate(over="raise", invalid="raise"):
            Y, records = _simulate(X, W, n, record)
    except FloatingPointError:
        raise InvalidValueError(f"{fn_name}: the sums of `x` · `w` overflow float64; scale the inputs down") from None
    return X, W, n, Y, records


def systolic_matmul(x, w, *, size=None):
    """The product x @ w, computed by simulating a TPU MXU: a weight-stationary systolic array, cycle by cycle.

    Each of the size × size PEs holds one weight; the rows of `x` stream through
    from the left, skewed one cycle per row of the array; each PE adds its
    activation times its weight to the sum coming from above, and the sums leave
    the bottom row as the rows of the result. A `w` larger than the array is cut
    into size × size tiles, one pass each, the partial results accumulated.

    Formula:
        Y[m, c] = Σ_k x[m, k] · w[k, c], summed down column c of the array

    Args:
        x: the activations X[M, K], a 2-D array of finite numbers.
        w: the weights W[K, N], a 2-D array of finite numbers.
        size: the array's side n (the MXU is 128 on most TPUs); default max(K, N), at most 256.

    Returns:
        the product Y[M, N] as a numpy array (int64 when `x` and `w` are both integer, float64 otherwise).

    Chapter:
        2 (TPUs)

    Example:
        >>> x = np.array([[1, 2, 3], [4, 5, 6]])
        >>> w = np.array([[1, 0], [0, 1], [1, 1]])
        >>> systolic_matmul(x, w)
        array([[ 4,  5],
               [10, 11]])
        >>> np.array_equal(systolic_matmul(x, w, size=2), x @ w)  # K = 3 > 2: two tiles of w
        True
    """
    return _run("systolic_matmul", x, w, size, False, MAX_PE_CYCLES)[3]


@dataclass(frozen=True, eq=False)
class SystolicTrace:
    """What every PE of a systolic array holds at every cycle of ``x @ w``: made by :func:`systolic_trace`.

    Index t of the per-cycle arrays is the (t + 1)-th cycle; the arrays are read-only,
    floats, with NaN where there is nothing (a bubble, padding, an output not yet out).

    Attributes:
        x, w: the operands X[M, K] and W[K, N] (int64 or float64).
        size: the array's side n.
        cycles: the number of cycles, :func:`systolic_cycles` of the shapes.
        activations: (cycles, n, n): the activation PE (k, c) holds after cycle t.
        partial_sums: (cycles, n, n): the partial sum PE (k, c) holds after cycle t (passed down next cycle).
        outputs: (cycles, M, N): Y as far as it has left the array after cycle t.
        tile: (cycles, 2): the tile of W in the array, (i, j) for rows i·n .. and columns j·n ...
        result: the product Y[M, N] (int64 or float64), equal to ``x @ w``.

    Chapter:
        2 (TPUs)

    Example:
        >>> tr = systolic_trace(np.ones((2, 2)), np.eye(2))
        >>> tr.cycles, tr.activations.shape, tr.outputs.shape
        (4, (4, 2, 2), (4, 2, 2))
    """

    x: np.ndarray
    w: np.ndarray
    size: int
    cycles: int
    activations: np.ndarray
    partial_sums: np.ndarray
    outputs: np.ndarray
    tile: np.ndarray
    result: np.ndarray

    def __repr__(self) -> str:
        (M, K), N = self.x.shape, self.w.shape[1]
        return (f"SystolicTrace({self.size}×{self.size} array, X[{M}, {K}] · W[{K}, {N}], "
                f"{self.cycles} cycles)")


def systolic_trace(x, w, *, size=None) -> SystolicTrace:
    """Every PE's activation and partial sum, and the outputs so far, at every cycle of ``x @ w`` on a systolic array.

    The same simulation as :func:`systolic_matmul`, recorded: what the animation
    (:func:`animate_systolic`) draws, and what a reader can index to follow one
    value through the array.

    Formula:
        X[m, k] is in PE (k, c) at cycle m + k + c of a pass (from 0); Y[m, c] leaves at cycle m + (n - 1) + c

    Args:
        x: the activations X[M, K], a 2-D array of finite numbers.
        w: the weights W[K, N], a 2-D array of finite numbers.
        size: the array's side n; default max(K, N). At most 5e6 PE-cycles (cycles × n²) are recorded.

    Returns:
        A :class:`SystolicTrace` (per-cycle numpy arrays, ``cycles``, ``result``).

    Chapter:
        2 (TPUs)

    Example:
        >>> tr = systolic_trace(np.array([[1, 2], [3, 4]]), np.array([[5, 6], [7, 8]]))
        >>> tr.cycles, tr.result.tolist()
        (4, [[19, 22], [43, 50]])
        >>> tr.outputs[1]  # after cycle 2 (n = 2): Y[0, 0] has left the bottom row
        array([[19., nan],
               [nan, nan]])
    """
    X, W, n, Y, (acts, sums, outs, tile) = _run("systolic_trace", x, w, size, True, MAX_TRACE_PE_CYCLES)
    for arr in (X, W, Y, acts, sums, outs, tile):
        arr.setflags(write=False)
    return SystolicTrace(X, W, n, len(acts), acts, sums, outs, tile, Y)


@derivable
def systolic_cycles(M, K, N, *, size):
    """The cycles a size × size weight-stationary systolic array takes for X[M, K] · W[K, N].

    Fill, stream, drain: the first sum crosses the n rows of the array, the M
    rows of X follow one per cycle, and the last output column leaves N - 1
    cycles after the first. A K or N above n takes ⌈K/n⌉ · ⌈N/n⌉ passes, one per
    n × n tile of W, one after the other; weight loading is not counted.

    Formula:
        cycles = (n - 1) + M + (N - 1)  (K, N <= n);  ⌈K/n⌉ · (⌈N/n⌉ · (M + n - 2) + N) in general

    Args:
        M: rows of X (tokens in the batch), >= 1.
        K: the contracting dimension, >= 1.
        N: columns of W, >= 1.
        size: the array's side n (128 for most TPU MXUs), >= 1.

    Returns:
        cycles (a whole number).

    Chapter:
        2 (TPUs)

    Example:
        >>> systolic_cycles(4, 4, 4, size=4)
        10
        >>> import scalelib as sl
        >>> print(sl.explain(systolic_cycles, 8, 128, 128, size=128))
        cycles = (n - 1) + M + (N - 1) = (128 - 1) + 8 + (128 - 1) = 262 cycles
          where n - 1 cycles fill the array before the first sum reaches its bottom row, M stream the rows of Y out
          (one a cycle), N - 1 drain the skew (column N - 1 leaves N - 1 cycles after column 0)
    """
    M, K, N, n = count("M", M), count("K", K), count("N", N), count("size", size)
    TK, TN = _tiles(K, N, n)
    value = _count_cycles(M, K, N, n)
    if value > 2**53:
        raise InvalidValueError(f"systolic_cycles: these shapes take more than 2**53 cycles, too many to count "
                                f"exactly, got M = {shown(M)}, K = {shown(K)}, N = {shown(N)}, size = {shown(size)}")
    if TK == TN == 1:
        return Derivation("cycles", "(n - 1) + M + (N - 1)", f"({n} - 1) + {M} + ({N} - 1)", value, "cycles",
                          where=("n - 1 cycles fill the array before the first sum reaches its bottom row, M "
                                 "stream the rows of Y out (one a cycle), N - 1 drain the skew (column N - 1 leaves "
                                 "N - 1 cycles after column 0)",))
    return Derivation("cycles", "⌈K/n⌉ · (⌈N/n⌉ · (M + n - 2) + N)", f"{TK} · ({TN} · ({M} + {n} - 2) + {N})",
                      value, "cycles",
                      where=(f"⌈K/n⌉ · ⌈N/n⌉ = {TK} · {TN} passes, one per {n} × {n} tile of W, one after the "
                             f"other; a pass over a tile of N_j columns takes (n - 1) + M + (N_j - 1) cycles",))


# --- drawing ------------------------------------------------------------------------

_ACT, _ACT_BG = "#2F5D9B", "#DCE8F7"
_SUM, _SUM_BG = "#B5541C", "#FBE3D2"
_OUT, _OUT_BG = "#2E7D46", "#D5EFDC"
_PE_BG, _PAD_BG, _EDGE, _MUTED, _INK = "#F4F6F8", "#E4E7EB", "#8A96A3", "#5F6B77", "#222222"
_STAGED = 3  # waiting activations drawn per row, left of the array
_INCH_PER_PE, _TITLE_INCH, _LEGEND_DY = 0.78, 1.05, 0.42
# Where things sit inside PE (k, c), the square [c, c + 1] x [-k - 1, -k]: the activation on the left
# (moving right), the partial sum on the right (moving down), the label and the weight at the top left.
_ACT_DX, _ACT_DY, _SUM_DX, _SUM_DY = 0.28, 0.72, 0.74, 0.6


def _animation_args(trace, interval_ms, frames_per_cycle):
    if not isinstance(trace, SystolicTrace):
        raise InvalidValueError(f"`trace` must be a SystolicTrace (from systolic_trace(x, w)), got {shown(trace)}")
    interval = number("interval_ms", interval_ms, positive=True, at_most=60_000)
    if np.ndim(interval):
        raise InvalidValueError(f"`interval_ms` must be a single number, got {shown(interval_ms)}")
    per_cycle = count("frames_per_cycle", frames_per_cycle)
    if per_cycle > 4:
        raise InvalidValueError(f"`frames_per_cycle` must be at most 4, got {shown(frames_per_cycle)}")
    (M, K), N = trace.x.shape, trace.w.shape[1]
    for what, value, limit in (("size", trace.size, MAX_ANIMATED_SIZE), ("M (rows of x)", M, MAX_ANIMATED_ROWS),
                               ("N (columns of w)", N, MAX_ANIMATED_COLUMNS),
                               ("number of cycles", trace.cycles, MAX_ANIMATED_CYCLES)):
        if value > limit:
            raise InvalidValueError(f"`trace` is too large to draw legibly: its {what} is {value}, at most {limit} "
                                    f"are drawn; trace a smaller product, e.g. on a 4 × 4 array")
    return float(interval), per_cycle


def _text(value, integer: bool) -> str:
    return str(int(value)) if integer else f"{value:.3g}"


def _frames(trace: SystolicTrace, per_cycle: int):
    """(t, phase) of every frame: the state before the first cycle, then `per_cycle` frames a cycle."""
    return [(-1, 1.0)] + [(t, (s + 1) / per_cycle) for t in range(trace.cycles) for s in range(per_cycle)]


class _Drawing:
    """A figure of a trace, redrawn for each frame by ``draw((t, phase))``.

    t = -1 is the state before the first cycle; phase in (0, 1] is how far cycle t
    has got: below 1 the values are on their way to the next PE, at 1 every PE has
    done its multiply-add. The figure's artists are made once; a frame only moves
    them, changes their text or hides them (drawing is the slow part).
    """

    def __init__(self, trace: SystolicTrace, dpi: int):
        import matplotlib.pyplot as plt
        from matplotlib.patches import FancyArrowPatch, Rectangle

        self.tr = tr = trace
        self.n = n = trace.size
        (self.M, self.K), self.N = trace.x.shape, trace.w.shape[1]
        M, N = self.M, self.N
        self.integer = trace.result.dtype.kind in "iu"
        self.TK, self.TN = _tiles(self.K, N, n)
        starts, self.local = [], np.zeros(trace.cycles, dtype=int)  # each cycle's number within its pass
        for t in range(trace.cycles):
            if t == 0 or tuple(trace.tile[t]) != tuple(trace.tile[t - 1]):
                starts.append(t)
            self.local[t] = t - starts[-1]
        # Y sits under the array and the legend under Y, so that the frame stays narrow: shown in a phone's
        # 358 px column, its text is still at least 7 px (and 9 px in a 1280 px window's 676 px column).
        self.cell = s = min(0.8, (n + 0.15) / N)  # side of a cell of Y
        self.y0, y_top = 0.0, -n - 0.85  # left and top edges of Y
        legend_y = y_top - M * s - 0.45
        x_lo, x_hi, y_lo, y_hi = -_STAGED - 0.75, max(n + 0.15, 4.15), legend_y - 2 * _LEGEND_DY - 0.35, 0.45
        width, height = (x_hi - x_lo) * _INCH_PER_PE, (y_hi - y_lo) * _INCH_PER_PE
        title = _TITLE_INCH + (0.2 if self.TK * self.TN > 1 else 0.0)  # a line more to name the tile
        self.fig = fig = plt.figure(figsize=(width, height + title), dpi=dpi)
        self.ax = ax = fig.add_axes((0, 0, 1, height / (height + title)))
        ax.set_axis_off()
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        token = dict(ha="center", va="center", fontsize=10 if self.integer else 9, weight="bold", zorder=4,
                     visible=False)

        def box(color, face):
            return dict(boxstyle="round,pad=0.25", facecolor=face, edgecolor=color, linewidth=0.9)

        # the PEs: a square each, its name and its weight
        self.pe_boxes, self.weights = {}, {}
        for k in range(n):
            for c in range(n):
                self.pe_boxes[k, c] = ax.add_artist(Rectangle((c + 0.04, -k - 0.96), 0.92, 0.92, facecolor=_PE_BG,
                                                              edgecolor=_EDGE, linewidth=1.0, zorder=1))
                ax.text(c + 0.09, -k - 0.15, f"PE {k},{c}", fontsize=9, color=_MUTED, va="center", zorder=2)
                self.weights[k, c] = ax.text(c + 0.09, -k - 0.38, "", fontsize=9.5, color=_INK, va="center", zorder=2)
            ax.text(-0.05, -k - _ACT_DY, "→", fontsize=10, color=_ACT, ha="right", va="center")
        for c in range(n):
            ax.text(c + 0.5, 0.2, f"col {c}", ha="center", va="center", fontsize=9.5, color=_MUTED)
        self.exits = [ax.add_artist(FancyArrowPatch((c + _SUM_DX, -n - 0.02), (c + _SUM_DX, -n - 0.3),
                                                    arrowstyle="-|>", mutation_scale=9, color=_OUT, linewidth=1.0))
                      for c in range(n)]
        ax.text(-_STAGED - 0.7, 0.2, "X, skewed: row k\nstarts k cycles late", fontsize=9.5, color=_ACT,
                va="center", linespacing=1.1)
        ax.text(-0.1, -n - 0.45, "Y leaves the\nbottom row ↓", fontsize=9.5, color=_OUT, ha="right", va="center",
                linespacing=1.1)
        # the values: a pool of tokens for each kind, shown, moved and relabelled frame by frame
        self.acts = [ax.text(0, 0, "", color=_ACT, bbox=box(_ACT, _ACT_BG), **token) for _ in range(n * n)]
        self.waiting = [ax.text(0, 0, "", color=_ACT, bbox=box(_ACT, "white"), **token) for _ in range(n * _STAGED)]
        self.more = [ax.text(-_STAGED - 0.45, -k - _ACT_DY, "…", fontsize=11, color=_ACT, ha="center", va="center",
                             visible=False) for k in range(n)]
        self.sums = [ax.text(0, 0, "", color=_SUM, bbox=box(_SUM, _SUM_BG), **token) for _ in range(n * n)]
        # Y, filled in as its entries leave the array
        ax.text(-0.1, y_top - 0.3, "Y = X · W", fontsize=10, color=_OUT, ha="right", va="center", weight="bold")
        self.cells, self.values = {}, {}
        for m in range(M):
            for c in range(N):
                x, y = self.y0 + c * s, y_top - (m + 1) * s
                self.cells[m, c] = ax.add_artist(Rectangle((x, y), s, s, facecolor="white", edgecolor=_EDGE,
                                                           linewidth=0.7))
                self.values[m, c] = ax.text(x + s / 2, y + s / 2, "", ha="center", va="center",
                                            fontsize=10 if s >= 0.6 else 9, color=_INK)
        legend = (("x", "activation, moves right", _ACT, _ACT_BG), ("sum", "partial sum, moves down", _SUM, _SUM_BG),
                  ("y", "output, leaves the array", _OUT, _OUT_BG))
        for row, (key, label, color, face) in enumerate(legend):  # one entry a line, under Y
            x, y = x_lo + 0.25 + 0.1 * len(key), legend_y - row * _LEGEND_DY
            ax.text(x, y, key, color=color, bbox=box(color, face), **{**token, "visible": True})
            ax.text(x + 0.25 + 0.1 * len(key), y, label, fontsize=9.5, color=_INK, va="center")
        top = 1 - 0.12 / (height + title)
        fig.text(0.01, top, f"A {n}×{n} weight-stationary systolic array (an MXU)\n"
                            f"computes Y[{M}×{N}] = X[{M}×{self.K}] · W[{self.K}×{N}]", fontsize=10, weight="bold",
                 va="top", linespacing=1.25)
        self.caption = fig.text(0.01, top - 0.5 / (height + title), "", fontsize=9.5, va="top", linespacing=1.3,
                                wrap=True)
        self.shown_tile = None

    def _place(self, pool, items, color=None, face=None):
        for artist, (x, y, text) in zip(pool, items):
            artist.set_position((x, y))
            artist.set_text(text)
            artist.set_visible(True)
            if color is not None:
                artist.set_color(color)
                artist.get_bbox_patch().set_edgecolor(color)
                artist.get_bbox_patch().set_facecolor(face)
        for artist in pool[len(items):]:
            artist.set_visible(False)

    def draw(self, frame):
        t, phase = frame
        tr, n, M, N = self.tr, self.n, self.M, self.N
        i, j = (int(v) for v in tr.tile[max(t, 0)])
        k0, c0 = i * n, j * n
        Ki, Nj = min(n, self.K - k0), min(n, N - c0)
        tl = self.local[t] if t >= 0 else -1
        tau = tl - (1 - phase)  # the time shown, within the pass: tl - 1 < tau <= tl
        settled = phase == 1

        if self.shown_tile != (i, j):  # the weights of this tile of W
            self.shown_tile = (i, j)
            for (k, c), label in self.weights.items():
                used = k < Ki and c < Nj
                label.set_text(f"w = {_text(tr.w[k0 + k, c0 + c], self.integer)}" if used else "w = 0")
                self.pe_boxes[k, c].set_facecolor(_PE_BG if used else _PAD_BG)
            for c, arrow in enumerate(self.exits):
                arrow.set_visible(c < Nj)

        # activations in the array (from the trace), moving in from the left while phase < 1
        acts = tr.activations[t] if t >= 0 else np.full((n, n), np.nan)
        self._place(self.acts, [(c + _ACT_DX - (1 - phase), -k - _ACT_DY, _text(acts[k, c], self.integer))
                                for k, c in zip(*np.nonzero(~np.isnan(acts)))])
        # ... and those still waiting: X[m, k] enters row k at cycle m + k of the pass
        waiting = []
        for k in range(Ki):
            later = [m for m in range(M) if m + k > tl]
            near = [m for m in later if tau - m - k >= -_STAGED]
            waiting += [(tau - m - k + _ACT_DX, -k - _ACT_DY, _text(tr.x[m, k0 + k], self.integer)) for m in near]
            self.more[k].set_visible(len(near) < len(later))
        for k in range(Ki, n):
            self.more[k].set_visible(False)
        self._place(self.waiting, waiting)

        # partial sums: in their PE after a cycle, on their way one PE down while phase < 1
        if t >= 0 and settled:
            sums, shift = tr.partial_sums[t], 0.0
        elif t >= 1 and tl >= 1:
            sums, shift = tr.partial_sums[t - 1], phase
        else:
            sums, shift = np.full((n, n), np.nan), 0.0
        items = [(c + _SUM_DX, -k - _SUM_DY - shift, _text(sums[k, c], self.integer), k == n - 1 and shift > 0)
                 for k, c in zip(*np.nonzero(~np.isnan(sums)))]
        for artist, (x, y, text, leaving) in zip(self.sums, items):
            self._place([artist], [(x, y, text)], _OUT if leaving else _SUM, _OUT_BG if leaving else _SUM_BG)
        for artist in self.sums[len(items):]:
            artist.set_visible(False)

        # Y as far as it has left the array; the entries that left this cycle highlighted
        out = tr.outputs[t] if t >= 0 and settled else (tr.outputs[t - 1] if t >= 1 else np.full((M, N), np.nan))
        fresh = np.zeros((M, N), dtype=bool)
        if t >= 0 and settled:
            m_out = tl - (n - 1) - np.arange(Nj)
            ok = (m_out >= 0) & (m_out < M)
            fresh[m_out[ok], c0 + np.arange(Nj)[ok]] = True
        for (m, c), label in self.values.items():
            label.set_text("" if np.isnan(out[m, c]) else _text(out[m, c], self.integer))
            label.set_color(_OUT if fresh[m, c] else _INK)
            label.set_weight("bold" if fresh[m, c] else "normal")
            self.cells[m, c].set_facecolor(_OUT_BG if fresh[m, c] else "white")
            self.cells[m, c].set_edgecolor(_OUT if fresh[m, c] else _EDGE)
            self.cells[m, c].set_linewidth(1.5 if fresh[m, c] else 0.7)

        if t < 0:
            step = "Before cycle 1: W is loaded, one weight per PE; the rows of X wait, skewed."
        elif not settled:
            step = f"Cycle {t + 1} of {tr.cycles}: activations move one PE right, partial sums one PE down."
        else:
            step = f"Cycle {t + 1} of {tr.cycles}: every PE adds x · w to the sum from above"
            left = [f"Y[{m},{c}]" for m, c in zip(*np.nonzero(fresh))]
            step += f"; {', '.join(left)} {'leaves' if len(left) == 1 else 'leave'} the array." if left else "."
        if self.TK * self.TN > 1:
            step += (f"\nPass {j * self.TK + i + 1} of {self.TK * self.TN}: the tile of W with rows "
                     f"{k0}–{k0 + Ki - 1}, columns {c0}–{c0 + Nj - 1}.")
        self.caption.set_text(step)
        return []


def _writing_rc():
    import matplotlib

    return matplotlib.rc_context({"savefig.bbox": "standard", "savefig.transparent": False})


def _animation(trace, interval_ms, frames_per_cycle, dpi):
    from matplotlib.animation import FuncAnimation

    interval, per_cycle = _animation_args(trace, interval_ms, frames_per_cycle)
    drawing = _Drawing(trace, dpi)
    frames = _frames(trace, per_cycle)
    anim = FuncAnimation(drawing.fig, drawing.draw, frames=frames, init_func=lambda: drawing.draw(frames[0]),
                         interval=interval / per_cycle, repeat=True, cache_frame_data=False)
    return drawing, anim, interval / per_cycle


def animate_systolic(trace, *, interval_ms=600, frames_per_cycle=2):
    """An animation of a systolic array at work: the PEs and their weights, the values moving, Y filling in.

    Every cycle is drawn in `frames_per_cycle` frames: the activations moving one
    PE right and the partial sums one PE down, then every PE's multiply-add. The
    rows of X wait on the left, skewed; Y fills in below the array as its entries
    leave the bottom row. For a web page or a notebook that must play offline,
    use :func:`systolic_animation_html`.

    Args:
        trace: a :class:`SystolicTrace` from :func:`systolic_trace`, at most 8 × 8 PEs, 8 rows of x,
            8 columns of w and 120 cycles.
        interval_ms: milliseconds per cycle (> 0, at most 60000).
        frames_per_cycle: frames drawn per cycle, 1 to 4 (1: only the state after each cycle).

    Returns:
        A matplotlib ``FuncAnimation`` (its figure shows the first frame).

    Chapter:
        2 (TPUs)

    Example:
        >>> anim = animate_systolic(systolic_trace(np.eye(2), np.ones((2, 2))))
        >>> len(list(anim.new_frame_seq()))  # the start, then 2 frames for each of the 4 cycles
        9
    """
    drawing, anim, _ = _animation(trace, interval_ms, frames_per_cycle, 72)
    drawing.fig.canvas.draw()  # shows the first frame; the animation starts when the figure is shown
    return anim


#: Icons for the player's buttons, drawn inline (matplotlib's template would fetch Font Awesome from a CDN).
_ICON_PATHS = {
    "fa fa-minus": "M2 7h12v2H2z",
    "fa fa-plus": "M7 2h2v5h5v2H9v5H7V9H2V7h5z",
    "fa fa-fast-backward": "M2 2h2v12H2zM9 8l5-6v12zM4 8l5-6v12z",
    "fa fa-step-backward": "M3 2h2v12H3zM5 8l8-6v12z",
    "fa fa-play fa-flip-horizontal": "M13 2v12L3 8z",
    "fa fa-pause": "M3 2h4v12H3zM9 2h4v12H9z",
    "fa fa-play": "M3 2v12l10-6z",
    "fa fa-step-forward": "M11 2h2v12h-2zM11 8L3 2v12z",
    "fa fa-fast-forward": "M12 2h2v12h-2zM7 8L2 2v12zM12 8L7 2v12z",
}


def _offline(html: str) -> str:
    """matplotlib's player without its one network fetch: the Font Awesome stylesheet becomes inline SVG icons."""
    html = re.sub(r'<link rel="stylesheet"\s+href="https?://[^"]*"\s*/?>', "", html)

    def icon(match):
        path = _ICON_PATHS.get(match.group(1))
        if path is None:
            return match.group(0)
        return (f'<svg width="14" height="14" viewBox="0 0 16 16" aria-hidden="true" '
                f'style="vertical-align:middle"><path fill="currentColor" d="{path}"/></svg>')

    return re.sub(r'<i class="([^"]*)"></i>', icon, html)


def systolic_animation_html(trace, *, interval_ms=600, frames_per_cycle=2, dpi=72):
    """The animation of :func:`animate_systolic` as one self-contained HTML player that needs no network.

    The frames are embedded as base64 PNGs (matplotlib's ``HTMLWriter``, as in
    ``to_jshtml()``), and the player's button icons are inline SVG, so the page
    plays offline; show it in a notebook with ``IPython.display.HTML(...)``. A 4 × 4
    array at the defaults is well under 1.5 MB.

    Args:
        trace: a :class:`SystolicTrace` from :func:`systolic_trace` (at most 8 × 8 PEs, 8 rows of x,
            8 columns of w, 120 cycles).
        interval_ms: milliseconds per cycle (> 0, at most 60000).
        frames_per_cycle: frames per cycle, 1 to 4.
        dpi: the frames' resolution, 40 to 200 dots per inch.

    Returns:
        The HTML text (str).

    Chapter:
        2 (TPUs)

    Example:
        >>> html = systolic_animation_html(systolic_trace(np.eye(2), np.eye(2)), frames_per_cycle=1)
        >>> html.count("data:image/png;base64"), "http" in html
        (5, False)
    """
    import tempfile
    from pathlib import Path

    import matplotlib.pyplot as plt
    from matplotlib.animation import HTMLWriter

    resolution = count("dpi", dpi, minimum=40)
    if resolution > 200:
        raise InvalidValueError(f"`dpi` must be at most 200, got {shown(dpi)}")
    interval, per_cycle = _animation_args(trace, interval_ms, frames_per_cycle)
    drawing = _Drawing(trace, resolution)
    writer = HTMLWriter(fps=1000 * per_cycle / interval, embed_frames=True, default_mode="loop")
    try:
        with tempfile.TemporaryDirectory() as folder, _writing_rc():
            path = Path(folder, "systolic.html")
            with writer.saving(drawing.fig, str(path), resolution):
                for frame in _frames(trace, per_cycle):  # what FuncAnimation.to_jshtml() does, each frame drawn once
                    drawing.draw(frame)
                    writer.grab_frame(metadata={"Software": None})
            html = path.read_text()
    finally:
        plt.close(drawing.fig)
    return _offline(html)

