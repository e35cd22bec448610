"""Bytes per link of a ring during a collective (chapter 3, the book's Q10): against the book's published
counts, and against a simulation that routes every block of the collective around a ring and counts what
each link carries."""

import itertools

import numpy as np
import pytest

import scalelib as sl


def simulated_link_loads(D, collective, bidirectional, V=1.0):
    """Bytes crossing each directed link of a ring of D, routing every piece hop by hop (independent of scalelib).

    AllGather: each device's shard (V/D) is passed around the ring, every device keeping a copy as it goes by;
    on a bidirectional ring half of it goes each way round. AllToAll: device s sends the block (V/D²) meant for
    device t forward (one-way), or the shorter way (bidirectional; half each way at exactly D/2).
    """
    load = np.zeros((D, 2))  # load[i, 0]: link i -> i+1; load[i, 1]: link i -> i-1

    def send(source, steps, direction, nbytes):
        here = source
        for _ in range(steps):
            load[here, direction] += nbytes
            here = (here + (1 if direction == 0 else -1)) % D

    if collective == "allgather":
        for s in range(D):
            if bidirectional:
                send(s, D - 1, 0, V / (2 * D))
                send(s, D - 1, 1, V / (2 * D))
            else:
                send(s, D - 1, 0, V / D)
        return load
    for s, t in itertools.permutations(range(D), 2):
        ahead, block = (t - s) % D, V / D**2
        if not bidirectional or ahead < D - ahead:
            send(s, ahead, 0, block)
        elif ahead > D - ahead:
            send(s, D - ahead, 1, block)
        else:
            send(s, ahead, 0, block / 2)
            send(s, ahead, 1, block / 2)
    return load


@pytest.mark.parametrize("D", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("collective", ["allgather", "alltoall"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_formula_matches_a_simulated_ring_on_its_busiest_link(D, collective, bidirectional):
    load = simulated_link_loads(D, collective, bidirectional)
    busiest = load.max()
    assert sl.ring_link_bytes(1.0, D, collective=collective, bidirectional=bidirectional) == pytest.approx(busiest)
    used = load[:, 0] if not bidirectional else load.ravel()
    assert np.allclose(used, busiest)  # every link used carries the same load


def test_the_books_q10_counts_on_a_one_way_ring():
    # How to Scale Your Model, ch. 3, Q10: an N x N array on D devices; per link, one-way,
    # AllGather N²(1 − 1/D) scalars and AllToAll (N²/2)(1 − 1/D): the AllToAll is half the AllGather.
    N, D = 4096, 16
    gather = sl.ring_link_bytes(N * N, D, collective="allgather", bidirectional=False)
    alltoall = sl.ring_link_bytes(N * N, D, collective="alltoall", bidirectional=False)
    assert gather == N**2 * (1 - 1 / D)
    assert alltoall == N**2 / 2 * (1 - 1 / D)


def test_bidirectional_links_halve_the_allgather_and_quarter_the_alltoall():
    # The book's Q10 (4)-(6): the AllGather's load halves; the AllToAll's sum of distances drops from about
    # D²/2 to D²/8 blocks of N²/D², so AllToAll costs about a quarter of an AllGather on a bidirectional ring.
    V, D = 1e9, 1024
    one_way = {c: sl.ring_link_bytes(V, D, collective=c, bidirectional=False) for c in ("allgather", "alltoall")}
    two_way = {c: sl.ring_link_bytes(V, D, collective=c) for c in ("allgather", "alltoall")}
    assert two_way["allgather"] == one_way["allgather"] / 2
    assert two_way["alltoall"] == pytest.approx(one_way["alltoall"] / 4, rel=2 / D)
    assert two_way["alltoall"] == V / 8  # D even: exactly D²/4 block-hops over 2·D² in both directions
    assert two_way["allgather"] / two_way["alltoall"] == pytest.approx(4, rel=1e-3)
    assert one_way["allgather"] / one_way["alltoall"] == 2


def test_reducescatter_loads_the_links_like_allgather_and_allreduce_twice():
    for bidirectional in (False, True):
        gather = sl.ring_link_bytes(3e6, 8, bidirectional=bidirectional)
        assert sl.ring_link_bytes(3e6, 8, collective="reducescatter", bidirectional=bidirectional) == gather
        assert sl.ring_link_bytes(3e6, 8, collective="allreduce", bidirectional=bidirectional) == 2 * gather


def test_one_device_has_no_link_and_a_sweep_over_bytes_is_one_call():
    assert sl.ring_link_bytes(1e9, 1, collective="alltoall") == 0.0
    sweep = sl.ring_link_bytes(np.array([1e3, 1e6]), 4, bidirectional=False)
    np.testing.assert_allclose(sweep, [750.0, 750e3])


def test_the_derivation_names_the_collective_and_the_ring():
    text = str(sl.explain(sl.ring_link_bytes, 2**20, 16, collective="alltoall"))
    assert text.startswith("V_link(AllToAll, bidirectional ring of 16) = Σ_k min(k, D−k) · V / (2·D²) = "
                           "64 · 1.05 MB / 512 = 131 kB")
    text = str(sl.explain(sl.ring_link_bytes, 2**20, 16, bidirectional=False))
    assert text.startswith("V_link(AllGather, one-way ring of 16) = V·(D−1)/D = 1.05 MB·15/16 = 983 kB")


@pytest.mark.parametrize("call, message", [
    (lambda: sl.ring_link_bytes(-1, 4), "`nbytes` must not be negative, got -1"),
    (lambda: sl.ring_link_bytes(1e6, 0), "`devices` must be a whole number >= 1, got 0"),
    (lambda: sl.ring_link_bytes(1e6, 4, collective="broadcast"),
     "`collective` must be one of allgather, reducescatter, allreduce, alltoall, got 'broadcast'"),
    (lambda: sl.ring_link_bytes(1e6, 4, bidirectional="yes"), "`bidirectional` must be True or False, got 'yes'"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(sl.InvalidValueError) as err:
        call()
    assert str(err.value) == message
