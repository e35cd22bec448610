"""Twisted tori: the longest and the average route, checked against a plain search from every chip,
the untwisted torus against the per-axis formula, and bad twists refused with their reason."""

import collections
import itertools

import pytest

import scalelib as sl


def _neighbours(chip, shape, twist):
    """The chips one link away on a torus whose wraparound links of axis i shift axis j by twist[i][j]."""
    out = []
    for i, n in enumerate(shape):
        for step in (1, -1):
            c = list(chip)
            c[i] += step
            if 0 <= c[i] < n:
                out.append(tuple(c))
                continue
            c[i] %= n
            for j, s in twist.get(i, {}).items():
                c[j] = (c[j] + step * s) % shape[j]
            out.append(tuple(c))
    return out


def _all_distances(shape, twist=None):
    """Hops between every ordered pair of chips, one plain breadth-first search per chip."""
    twist = twist or {}
    chips = list(itertools.product(*map(range, shape)))
    result = {}
    for a in chips:
        dist, todo = {a: 0}, collections.deque([a])
        while todo:
            here = todo.popleft()
            for there in _neighbours(here, shape, twist):
                if there not in dist:
                    dist[there] = dist[here] + 1
                    todo.append(there)
        assert len(dist) == len(chips)  # every chip reachable
        result[a] = dist
    return result


NAMED = {0: "X", 1: "Y", 2: "Z"}
CASES = [((4, 8), {0: {1: 4}}), ((3, 6), {0: {1: 3}}), ((4, 4, 8), {0: {2: 4}, 1: {2: 4}}),
         ((2, 4, 4), {0: {1: 2, 2: 2}}), ((5, 7), {0: {1: 2}}), ((4, 8), {})]


def _named(twist):
    return {NAMED[i]: {NAMED[j]: s for j, s in shifts.items()} for i, shifts in twist.items()} or None


@pytest.mark.parametrize("shape, twist", CASES)
def test_longest_and_average_route_agree_with_a_search_from_every_chip(shape, twist):
    dist = _all_distances(shape, twist)
    longest = max(max(d.values()) for d in dist.values())
    pairs = [h for d in dist.values() for h in d.values()]
    mean = sum(pairs) / (len(pairs) - len(dist))  # ordered pairs of distinct chips
    assert sl.torus_max_hops(shape, twist=_named(twist)) == longest
    assert sl.torus_mean_hops(shape, twist=_named(twist)) == pytest.approx(mean)
    # the torus looks the same from every chip: the sum of distances is the same from each
    assert len({sum(d.values()) for d in dist.values()}) == 1


@pytest.mark.parametrize("shape", [(16, 16), (4, 4, 8), (16, 20, 28), (7,), (4, 4, 576)])
def test_an_untwisted_torus_is_half_of_each_ring(shape):
    assert sl.torus_max_hops(shape) == sum(n // 2 for n in shape)


def test_the_untwisted_torus_agrees_with_a_slice_that_wraps_on_every_axis():
    for piece in (sl.tpu_pod("tpu-v5e"), sl.tpu_slice((4, 4, 8), "tpu-v4p"), sl.tpu_pod("tpu-v5p")):
        assert all(piece.wraparound)
        assert sl.torus_max_hops(piece.shape) == piece.max_hops()


def test_the_untwisted_mean_is_the_sum_of_the_rings_means():
    # over all chips b (chip 0 included) the hops add axis by axis: Σ_i (chips / n_i) · Σ_x min(x, n_i − x)
    shape = (4, 8, 6)
    chips = 4 * 8 * 6
    total = sum(chips // n * sum(min(x, n - x) for x in range(n)) for n in shape)
    assert sl.torus_mean_hops(shape) == pytest.approx(total / (chips - 1))


def test_a_half_twist_shortens_the_longest_route_of_a_k_by_2k_torus_by_a_third():
    # k x 2k: k/2 + k hops untwisted, k twisted (the book's "twisted torus"; TPU v4 slices of 4x8-like shapes)
    for k in (2, 4, 6, 8):
        assert sl.torus_max_hops((k, 2 * k)) == k // 2 + k
        assert sl.torus_max_hops((k, 2 * k), twist={"X": {"Y": k}}) == k


def test_a_twist_shortens_the_average_route_too():
    plain, twisted = sl.torus_mean_hops((4, 8)), sl.torus_mean_hops((4, 8), twist={"X": {"Y": 4}})
    assert plain == pytest.approx(96 / 31) and twisted == pytest.approx(84 / 31)


def test_a_shift_is_taken_modulo_the_axis_and_zero_is_no_twist():
    assert sl.torus_max_hops((4, 8), twist={"X": {"Y": 12}}) == sl.torus_max_hops((4, 8), twist={"X": {"Y": 4}})
    assert sl.torus_max_hops((4, 8), twist={"X": {"Y": -4}}) == 4
    assert sl.torus_max_hops((4, 8), twist={"X": {"Y": 0}}) == sl.torus_max_hops((4, 8)) == 6


def test_the_derivation_says_what_was_searched():
    text = str(sl.explain(sl.torus_max_hops, (4, 8), twist={"X": {"Y": 4}}))
    assert text.startswith("max hops = max over chips b of hops(0, b) = max over the 32 chips of the 4 x 8 torus, "
                           "twist {'X': {'Y': 4}} = 4 hops\n  where b: any chip;")
    assert str(sl.explain(sl.torus_mean_hops, (4, 8))).startswith(
        "mean hops = Σ hops(0, b) / (chips − 1) = 96 / (32 − 1) = 3.1 hops")


def test_a_single_chip_is_zero_hops_from_itself():
    assert sl.torus_max_hops((1, 1)) == 0 and sl.torus_mean_hops((1,)) == 0.0


@pytest.mark.parametrize("twist, message", [
    ({"X": {"X": 1}}, r"^`twist`: axis X cannot shift itself; its wraparound links may shift the other axes only"),
    ({"X": {"Y": 2}, "Y": {"X": 1}}, r"^`twist`: an axis that is shifted cannot be twisted itself \(axis X, Y\)"),
    ({"Z": {"Y": 1}}, r"^`twist`: unknown axis 'Z': expected one of X, Y"),
    ({"X": {"Y": 1.5}}, r"^`twist\['X'\]\['Y'\]` must be a whole number, got 1.5$"),
    ({"X": {"Y": True}}, r"^`twist\['X'\]\['Y'\]` must be a whole number, got True \(a bool\)$"),
    ({"X": {"Y": (1, 2)}}, r"^`twist`: the shift of Y must be one whole number, got \(1, 2\)$"),
    ({"X": {}}, r"^`twist`: axis X must map to \{axis: shift\}, got \{\}"),
    ("X", r"^`twist` must be None or a mapping of axis -> \{axis: shift\}, got 'X'"),
])
def test_a_bad_twist_is_refused_with_its_reason(twist, message):
    with pytest.raises(sl.ScalelibError, match=message):
        sl.torus_max_hops((4, 8), twist=twist)


@pytest.mark.parametrize("shape, message", [
    ((4, 4, 4, 4), r"^`shape` must have 1 to 3 axes \(X, Y, Z\), got \(4, 4, 4, 4\)$"),
    ((256, 256, 2), r"^`shape` must have at most 65536 chips in all, got \(256, 256, 2\) \(131072 chips\)$"),
    ((4, 0), r"^`shape` must be a sequence of whole numbers >= 1, got \(4, 0\)$"),
    (8, r"^`shape` must be a sequence of whole numbers >= 1, got 8$"),
])
def test_a_bad_shape_is_refused_with_its_reason(shape, message):
    with pytest.raises(sl.InvalidValueError, match=message):
        sl.torus_mean_hops(shape)
