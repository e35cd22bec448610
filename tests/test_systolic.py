"""The MXU simulated (chapter 2): a weight-stationary systolic array computes x @ w, cycle by cycle,
in the number of cycles the formula says, and its animation plays offline."""

import dataclasses
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@st.composite
def operands(draw, kind, tiled=False):
    """(x, w, size): x[M, K], w[K, N] with K, N <= size, or up to three tiles of size when `tiled`."""
    size = draw(st.integers(1, 6))
    top = 3 * size if tiled else size
    M, K, N = draw(st.integers(1, 12)), draw(st.integers(1, top)), draw(st.integers(1, top))
    if kind == "int":
        values = st.integers(-1000, 1000)
        dtype = np.int64
    else:
        values = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, allow_subnormal=False)
        dtype = np.float64
    x = np.array(draw(st.lists(values, min_size=M * K, max_size=M * K)), dtype=dtype).reshape(M, K)
    w = np.array(draw(st.lists(values, min_size=K * N, max_size=K * N)), dtype=dtype).reshape(K, N)
    return x, w, size


def _in_order(x, w):
    """x @ w summed over k from 0 up, one product at a time: the order the sums go down the array."""
    total = np.zeros((x.shape[0], w.shape[1]))
    for k in range(x.shape[1]):
        total = total + np.outer(x[:, k], w[k, :])
    return total


# --- the product ---------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(operands("int"))
def test_the_array_computes_x_at_w_exactly_for_integers(case):
    x, w, size = case
    y = sl.systolic_matmul(x, w, size=size)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, x @ w)


@settings(max_examples=80, deadline=None)
@given(operands("float"))
def test_the_array_computes_x_at_w_for_floats_adding_in_the_order_of_its_rows(case):
    x, w, size = case
    y = sl.systolic_matmul(x, w, size=size)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, _in_order(x, w))  # the same floating-point operations, bit for bit
    np.testing.assert_allclose(y, x @ w, rtol=1e-9, atol=1e-9 * (1 + np.abs(x).max() * np.abs(w).max()))


@settings(max_examples=60, deadline=None)
@given(operands("int", tiled=True))
def test_a_larger_k_or_n_is_tiled_and_the_partial_results_accumulated(case):
    x, w, size = case
    np.testing.assert_array_equal(sl.systolic_matmul(x, w, size=size), x @ w)
    trace = sl.systolic_trace(x, w, size=size)
    np.testing.assert_array_equal(trace.result, x @ w)
    np.testing.assert_array_equal(trace.outputs[-1], x @ w)
    (M, K), N = x.shape, w.shape[1]
    passes = {tuple(t) for t in trace.tile}
    assert passes == {(i, j) for i in range(-(-K // size)) for j in range(-(-N // size))}


def test_lists_and_mixed_dtypes_work_and_the_default_size_fits_the_weights():
    y = sl.systolic_matmul([[1, 2, 3]], [[1.5], [0.5], [2.0]])
    assert y.dtype == np.float64 and y.tolist() == [[8.5]]
    assert sl.systolic_trace(np.ones((2, 3)), np.ones((3, 5))).size == 5
    assert sl.systolic_trace(np.ones((2, 7)), np.ones((7, 5))).size == 7
    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    np.testing.assert_array_equal(sl.systolic_matmul(x, x.T.astype(np.uint8)), x @ x.T)


# --- cycles ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(operands("int", tiled=True))
def test_the_cycle_count_is_the_formula_and_the_length_of_the_trace(case):
    x, w, size = case
    (M, K), N = x.shape, w.shape[1]
    trace = sl.systolic_trace(x, w, size=size)
    cycles = sl.systolic_cycles(M, K, N, size=size)
    assert trace.cycles == cycles == len(trace.activations) == len(trace.partial_sums) == len(trace.outputs)
    assert trace.activations.shape[1:] == trace.partial_sums.shape[1:] == (size, size)
    assert trace.outputs.shape[1:] == (M, N)
    TK, TN = -(-K // size), -(-N // size)
    assert cycles == TK * (TN * (M + size - 2) + N)
    if TK == TN == 1:
        assert cycles == (size - 1) + M + (N - 1)  # fill + stream + drain


def test_one_tile_takes_m_plus_k_plus_n_minus_2_cycles_when_k_fills_the_array():
    assert sl.systolic_cycles(4, 4, 4, size=4) == 10
    assert sl.systolic_cycles(8, 128, 128, size=128) == 8 + 128 + 128 - 2
    assert sl.systolic_trace(np.ones((5, 3)), np.ones((3, 2))).cycles == 5 + 3 + 2 - 2
    # a K smaller than the array: the sums still cross all n rows
    assert sl.systolic_cycles(5, 2, 3, size=4) == 5 + 4 + 3 - 2
    # two tiles of K, one of N: two passes, one after the other
    assert sl.systolic_cycles(3, 8, 4, size=4) == 2 * (3 + 4 + 4 - 2)


def test_explain_gives_the_same_number_as_the_plain_call():
    for args, size in (((8, 128, 128), 128), ((3, 300, 200), 128), ((1, 1, 1), 1)):
        d = sl.explain(sl.systolic_cycles, *args, size=size)
        assert d.value == sl.systolic_cycles(*args, size=size)
        assert isinstance(d.value, int) and d.unit == "cycles"
    single = str(sl.explain(sl.systolic_cycles, 8, 128, 128, size=128))
    assert "cycles = (n - 1) + M + (N - 1) = (128 - 1) + 8 + (128 - 1) = 262 cycles" in single
    tiled = str(sl.explain(sl.systolic_cycles, 3, 300, 200, size=128))
    assert "⌈K/n⌉ · (⌈N/n⌉ · (M + n - 2) + N) = 3 · (2 · (3 + 128 - 2) + 200) = 1374 cycles" in tiled


# --- the skew ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(operands("int"))
def test_values_are_where_the_skew_puts_them(case):
    x, w, n = case
    (M, K), N = x.shape, w.shape[1]
    trace = sl.systolic_trace(x, w, size=n)
    # the first output leaves the bottom row after n cycles (index n - 1): Y[0, 0], alone
    assert np.isnan(trace.outputs[: n - 1]).all()
    assert np.count_nonzero(~np.isnan(trace.outputs[n - 1])) == 1
    assert trace.outputs[n - 1][0, 0] == x[0] @ w[:, 0]
    for m in range(M):
        for c in range(N):
            column = trace.outputs[:, m, c]
            assert np.flatnonzero(~np.isnan(column))[0] == m + (n - 1) + c  # Y[m, c] leaves at m + n - 1 + c
            for k in range(K):
                t = m + k + c  # X[m, k] is in PE (k, c) at cycle m + k + c
                assert trace.activations[t, k, c] == x[m, k]
                assert trace.partial_sums[t, k, c] == x[m, : k + 1] @ w[: k + 1, c]


def test_the_trace_is_frozen_and_reads_well():
    trace = sl.systolic_trace(np.eye(3, dtype=int), np.arange(9).reshape(3, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.cycles = 3
    with pytest.raises(ValueError):
        trace.activations[0, 0, 0] = 1.0
    assert repr(trace) == "SystolicTrace(3×3 array, X[3, 3] · W[3, 3], 7 cycles)"
    np.testing.assert_array_equal(trace.result, np.arange(9).reshape(3, 3))


# --- bad input ---------------------------------------------------------------------------

GOOD = np.ones((2, 3))
BAD_CALLS = [
    ((GOOD, np.ones((2, 3))), {}, r"^`w` must have as many rows as `x` has columns \(K = 3\)"),
    ((np.ones(3), np.ones((3, 2))), {}, r"^`x` must be a 2-D array of numbers \(a matrix\), got a 1-D array"),
    ((GOOD, np.ones((3, 2, 1))), {}, r"^`w` must be a 2-D array .*3-D array"),
    ((5.0, np.ones((1, 1))), {}, r"^`x` must be a 2-D array .*0-D"),
    (([[1.0, float("nan")]], np.ones((2, 1))), {}, r"^`x` must hold finite numbers, got NaN"),
    ((GOOD, np.full((3, 1), np.inf)), {}, r"^`w` must hold finite numbers, got an infinity"),
    (([[True, False]], np.ones((2, 1))), {}, r"^`x` must be a 2-D array of numbers \(a matrix\), not of bools"),
    ((GOOD, np.ones((3, 1), dtype=bool)), {}, r"^`w` must be .* not of bools"),
    ((True, np.ones((1, 1))), {}, r"^`x` must be a 2-D array"),
    (([[1, 2], [3]], np.ones((2, 1))), {}, r"^`x` must be a 2-D array .*rows of equal length"),
    (([["a", "b"]], np.ones((2, 1))), {}, r"^`x` must be a 2-D array"),
    ((np.ones((0, 3)), np.ones((3, 1))), {}, r"^`x` must have at least one row and one column"),
    ((None, np.ones((1, 1))), {}, r"^`x` must be a 2-D array"),
    ((GOOD, np.ones((3, 1))), {"size": 0}, r"^`size` must be a whole number >= 1"),
    ((GOOD, np.ones((3, 1))), {"size": 2.5}, r"^`size` must be a whole number"),
    ((GOOD, np.ones((3, 1))), {"size": True}, r"^`size` must be a whole number, got True \(a bool\)"),
    ((GOOD, np.ones((3, 1))), {"size": 1024}, r"^`size` must be at most 256"),
    ((GOOD, np.ones((3, 1))), {"size": "4"}, r"^`size` must be"),
    ((np.full((1, 2), 2**40), np.full((2, 1), 2**40)), {}, r"integers too large for exact 64-bit sums"),
    ((np.full((1, 2), 1e200), np.full((2, 1), 1e200)), {}, r"overflow float64"),
    ((np.zeros((400_000, 2)), np.zeros((2, 2))), {"size": 256}, r"too large to simulate cycle by cycle"),
]


@pytest.mark.parametrize("fn", [sl.systolic_matmul, sl.systolic_trace], ids=lambda f: f.__name__)
@pytest.mark.parametrize("args, kwargs, message", BAD_CALLS)
def test_bad_operands_get_an_error_naming_the_argument(fn, args, kwargs, message):
    with pytest.raises(sl.InvalidValueError, match=message):
        fn(*args, **kwargs)


def test_a_size_smaller_than_k_or_n_tiles_rather_than_fails():
    x, w = np.arange(12).reshape(2, 6), np.arange(30).reshape(6, 5)
    np.testing.assert_array_equal(sl.systolic_matmul(x, w, size=2), x @ w)
    assert sl.systolic_trace(x, w, size=2).cycles == sl.systolic_cycles(2, 6, 5, size=2) == 3 * (3 * 2 + 5)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((0, 4, 4), {"size": 4}, sl.InvalidValueError, r"^`M` must be a whole number >= 1, got 0$"),
    ((4, 4.5, 4), {"size": 4}, sl.InvalidValueError, r"^`K` must be a whole number"),
    ((4, 4, True), {"size": 4}, sl.InvalidValueError, r"^`N` must be a whole number, got True \(a bool\)"),
    ((4, 4, 4), {"size": -1}, sl.InvalidValueError, r"^`size` must be a whole number >= 1"),
    ((4, 4, 4), {}, sl.InvalidCallError, r"systolic_cycles: .*size"),
    ((4, 4, 4, 4), {}, sl.InvalidCallError, r"systolic_cycles: "),
    ((10**20, 10**20, 10**20), {"size": 1}, sl.InvalidValueError, r"more than 2\*\*53 cycles"),
])
def test_bad_shapes_for_the_cycle_count(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        sl.systolic_cycles(*args, **kwargs)


# --- the animation ----------------------------------------------------------------------

#: The animation the chapter shows: a 4 × 4 array, small integers.
X4 = np.array([[1, 0, 2, 1], [3, 1, 0, 2], [0, 2, 1, 1], [2, 1, 3, 0]])
W4 = np.array([[1, 2, 0, 1], [0, 1, 3, 2], [2, 0, 1, 1], [1, 3, 2, 0]])
BUDGET_BYTES = 1_500_000


def test_the_animation_html_plays_offline_and_stays_small():
    trace = sl.systolic_trace(X4, W4)
    html = sl.systolic_animation_html(trace)
    assert re.findall(r"https?://", html) == []  # no stylesheet, script or icon fetched from the network
    assert "<link" not in html and 'class="fa ' not in html and html.count("<svg") == 9  # the buttons' icons
    assert html.count("data:image/png;base64") == 1 + 2 * trace.cycles  # the start, then two frames a cycle
    assert len(html.encode()) < BUDGET_BYTES


def test_animate_systolic_draws_every_frame():
    trace = sl.systolic_trace(X4[:2], W4)
    anim = sl.animate_systolic(trace, interval_ms=300, frames_per_cycle=1)
    frames = list(anim.new_frame_seq())
    assert len(frames) == 1 + trace.cycles
    fig = plt.gcf()
    anim._func(frames[-1])  # draw the last cycle (FuncAnimation's frame function): all of Y is out
    texts = [t.get_text() for t in fig.axes[0].texts if t.get_visible()]
    for value in (X4[:2] @ W4).ravel():
        assert str(value) in texts
    assert "PE 3,3" in texts and "w = 0" in texts  # W[3, 3] = 0
    assert any("4×4 weight-stationary systolic array" in t.get_text() for t in fig.texts)


@pytest.mark.parametrize("fn", [sl.animate_systolic, sl.systolic_animation_html], ids=lambda f: f.__name__)
def test_the_animation_refuses_what_it_cannot_draw(fn):
    small = sl.systolic_trace(np.ones((1, 1)), np.ones((1, 1)))
    with pytest.raises(sl.InvalidValueError, match=r"^`trace` must be a SystolicTrace"):
        fn(X4)
    with pytest.raises(sl.InvalidValueError, match=r"^`trace` is too large to draw legibly: its size is 16, at most 8"):
        fn(sl.systolic_trace(np.ones((2, 16)), np.ones((16, 16))))
    with pytest.raises(sl.InvalidValueError, match=r"^`interval_ms` must be positive"):
        fn(small, interval_ms=0)
    with pytest.raises(sl.InvalidValueError, match=r"^`frames_per_cycle` must be at most 4"):
        fn(small, frames_per_cycle=5)
