"""Collective costs on TPU tori and GPU clusters.

The published figures below are the book's (How to Scale Your Model, Austin et al., 2025, ch. 3
"Sharded Matrices and How to Multiply Them": pop quiz 2, questions 2, 3 and 10, the note on ICI
latency and the AllToAll section); each test names the item it reproduces. As the book does, V is the size of the array
the collective is about as one group of devices sees it: for AllGather_X([B_X, D_Y]) the gathered
[B, D_Y], 1/Y of the whole [B, D] (the Y groups gather at once, each its own part).
"""

import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl

V = 2048 * 8192 * 2  # bf16[2048, 8192]: 33.6 MB
BF16 = 2
V4P = sl.tpu_slice({"X": 4, "Y": 4, "Z": 4}, "tpu-v4p")  # a whole cube: wraparound on every axis
B, D = 1024, 4096  # the book's Q2 sizes


# --- one axis: a ring with wraparound, a line without -----------------------------------------------


def test_pop_quiz_2a_an_axis_without_wraparound_gathers_three_quarters_of_v_one_way():
    # Pop quiz 2(a): v5e {X: 8, Y: 4}, AllGather_Y([E_Y, F]) → [E, F], E = 2048, F = 8192, bf16. The length-4
    # axis has no wraparound: 3 shards of 8.4 MB reach an end chip over its one link at 4.5e10 B/s, ≈ 560 µs.
    v5e = sl.tpu_slice({"X": 8, "Y": 4}, "tpu-v5e")
    assert v5e.wraparound == (False, False)
    t = sl.allgather_time_s(V, v5e, axes="Y")
    assert t == pytest.approx(560e-6, rel=0.01)
    assert t == pytest.approx(3 * 8.4e6 / 4.5e10, rel=0.01)
    assert sl.reducescatter_time_s(V, v5e, axes="Y") == t


def test_pop_quiz_2b_small_shards_are_latency_bound_three_hops_along_a_line_of_four():
    # Pop quiz 2(b): E = F = 256: shards of 64 · 256 · 2 = 32 kB take 0.7 µs a hop, under the 1 µs hop
    # latency, so 3 hops ≈ 3 µs.
    v5e = sl.tpu_slice({"X": 8, "Y": 4}, "tpu-v5e")
    assert sl.allgather_time_s(256 * 256 * BF16, v5e, axes="Y") == pytest.approx(3e-6)
    assert 256 * 256 * BF16 / 4 < sl.latency_bound_bytes(v5e, axes="Y", per="shard")


def test_allgather_with_wraparound_uses_both_directions():
    # The book's ring: V / W with W bidirectional (pop quiz 2's first estimate, 34 MB / 9e10 B/s ≈ 377 µs).
    assert sl.allgather_time_s(V, sl.tpu_pod("tpu-v5e"), axes="X") == pytest.approx(V / 9e10)
    assert sl.allgather_time_s(V, sl.tpu_pod("tpu-v5e"), axes="X") == pytest.approx(377e-6, rel=0.02)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 15), nbytes=st.floats(1e8, 1e11))
def test_a_line_of_n_chips_brings_an_end_chip_all_but_its_own_shard_one_way(n, nbytes):
    line = sl.tpu_slice((n, 16), "tpu-v5e")
    assert line.wraparound[0] is False
    assert sl.allgather_time_s(nbytes, line, axes="X") == pytest.approx((n - 1) / n * nbytes / 4.5e10)
    assert sl.allreduce_time_s(nbytes, line, axes="X") == pytest.approx(2 * (n - 1) / n * nbytes / 4.5e10)


def test_turning_wraparound_off_costs_the_ring_its_second_direction():
    pod, flat = sl.tpu_pod("tpu-v5e"), sl.tpu_slice((16, 16), "tpu-v5e", wraparound=False)
    assert sl.allgather_time_s(V, flat, axes="X") / sl.allgather_time_s(V, pod, axes="X") == pytest.approx(2 * 15 / 16)


# --- the latency-bound regime ---------------------------------------------------------------------


def test_v5e_hops_carrying_under_45_kb_are_latency_bound_on_a_ring_and_on_a_line():
    # The book's latency note: T = max(T_min · Σ hops, V / (W · N_axes)), T_min ≈ 1 µs; on v5e (4.5e10 B/s
    # one way) a hop carrying under 4.5e10 · 1e-6 = 45 kB is latency-bound. latency_bound_bytes gives the
    # crossing per shard (a 1D gather's per-hop message); a line of n crosses there too, not at (n − 1)/n of it.
    for topology in (sl.tpu_pod("tpu-v5e"), sl.tpu_slice((4, 16), "tpu-v5e"), sl.tpu_slice((8, 16), "tpu-v5e")):
        assert sl.latency_bound_bytes(topology, axes="X", per="shard") == pytest.approx(45e3)
        n = topology.mesh["X"]
        floor = sl.allgather_time_s(1.0, topology, axes="X")  # the hops alone
        assert floor == pytest.approx((n // 2 if topology.wraparound[0] else n - 1) * 1e-6)
        assert sl.allgather_time_s(0.9 * 45e3 * n, topology, axes="X") == pytest.approx(floor)
        assert sl.allgather_time_s(1.1 * 45e3 * n, topology, axes="X") == pytest.approx(1.1 * floor)


def test_q2_two_axes_have_a_latency_floor_of_four_hops():
    # Q2(2): gathering over X and Y of a 4x4x4 v4p is "far from the latency bound of 4 µs (1 µs per hop)".
    assert sl.allgather_time_s(1.0, V4P, axes="XY") == pytest.approx(4e-6)
    assert sl.allgather_time_s(1.0, V4P, axes="XYZ") == pytest.approx(6e-6)  # Σ |X_i| / 2


def test_q3_a_tiny_gather_round_a_ring_of_four_takes_two_hops():
    # Q3: AllGather_X([B_X]), B = 128 in bf16 on a 4x4x4 v4p: 256 bytes, latency-bound, 2 hops ≈ 2 µs.
    assert sl.allgather_time_s(128 * BF16, V4P, axes="X") == pytest.approx(2e-6)


# --- several axes; AllReduce ---------------------------------------------------------------------


def test_q2_allgathers_and_allreduce_on_a_v4p_cube():
    # Q2 on a 4x4x4 v4p (wraparound on every axis, 9e10 B/s bidirectional), B = 1024, D = 4096, bf16.
    X = Y = 4
    # AllGather_X([B_X, D_Y]): every Y column gathers its own [B, D_Y], V = 2BD / Y: 2BD / (Y · W) ≈ 23 µs.
    assert sl.allgather_time_s(BF16 * B * D / Y, V4P, axes="X") == pytest.approx(23e-6, rel=0.02)
    # AllGather_XY([B_X, D_Y]) → [B, D]: V = 2BD over two axes' links, 2BD / (2 · W) ≈ 46 µs.
    assert sl.allgather_time_s(BF16 * B * D, V4P, axes="XY") == pytest.approx(46e-6, rel=0.02)
    # AllReduce_Z([B_X, D_Y]{U_Z}): each shard 2BD / (X · Y), twice an AllGather: 4BD / (X · Y · W) ≈ 11.6 µs.
    assert sl.allreduce_time_s(BF16 * B * D / (X * Y), V4P, axes="Z") == pytest.approx(11.6e-6, rel=0.01)


def test_more_axes_divide_the_time():
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allgather_time_s(V, pod, axes=("X", "Y")) == pytest.approx(sl.allgather_time_s(V, pod, axes="X") / 2)
    assert sl.allgather_time_s(V, V4P, axes="XYZ") == pytest.approx(V / (3 * 9e10))


def test_a_ring_and_a_line_together_add_their_rates():
    # v5e 8x16: X is a line of 8 (4.5e10 B/s in, one way), Y a ring of 16 (9e10 B/s in, both ways); an end chip
    # of the line takes in 127/128 of V over both.
    s = sl.tpu_slice((8, 16), "tpu-v5e")
    assert sl.allgather_time_s(V, s, axes="XY") == pytest.approx(127 / 128 * V / (4.5e10 + 9e10))
    assert sl.explain(sl.allgather_time_s, V, s, axes="XY").formula == "max(T_hop · hops, (N − 1)/N · V / Σ W)"


@pytest.mark.parametrize("topology, axes", [(sl.tpu_pod("tpu-v5e"), "X"), (sl.tpu_pod("tpu-v5e"), "XY"),
                                            (sl.tpu_slice((4, 4), "tpu-v5e"), "X"), (V4P, "YZ")])
@pytest.mark.parametrize("nbytes", [1e3, 1e6, 1e10])
def test_allreduce_is_a_reducescatter_then_an_allgather(topology, axes, nbytes):
    # The book: AllReduce = ReduceScatter + AllGather, so twice either, latency included (two passes of hops).
    rs = sl.reducescatter_time_s(nbytes, topology, axes=axes)
    ag = sl.allgather_time_s(nbytes, topology, axes=axes)
    assert sl.allreduce_time_s(nbytes, topology, axes=axes) == pytest.approx(rs + ag) == pytest.approx(2 * ag)


# --- AllToAll ------------------------------------------------------------------------------------


def test_alltoall_is_a_quarter_of_an_allgather_round_one_ring():
    pod = sl.tpu_pod("tpu-v5p")
    ag = sl.allgather_time_s(1e10, pod, axes="X")
    assert sl.alltoall_time_s(1e10, pod, axes="X") == pytest.approx(ag / 4)
    assert sl.alltoall_time_s(1e10, pod, axes="X") == pytest.approx(1e10 / (4 * 1.8e11))  # V / (4 · W)


@pytest.mark.parametrize("topology, axes, sizes, W", [
    (sl.tpu_pod("tpu-v5e"), "XY", (16, 16), 9e10),
    (sl.tpu_slice({"X": 4, "Y": 4, "Z": 8}, "tpu-v5p"), "XYZ", (4, 4, 8), 1.8e11),
    (V4P, "XZ", (4, 4), 9e10),
])
def test_an_alltoall_over_several_axes_is_the_books_bisection_bound(topology, axes, sizes, W):
    # The book: V · max(A, B, C, …) / (4 · N · W) on an N-chip mesh (W bidirectional); per device, holding
    # V / N bytes, (V / N) · max(A, B, …) / (4 · W). It shrinks as the mesh grows, unlike an AllGather.
    N = 1
    for n in sizes:
        N *= n
    t = sl.alltoall_time_s(1e10, topology, axes=axes)
    assert t == pytest.approx(1e10 * max(sizes) / (4 * N * W))
    assert t == pytest.approx((1e10 / N) * max(sizes) / (4 * W))


def test_q10_round_a_ring_alltoall_costs_a_quarter_of_an_allgather_as_its_links_carry():
    # Q10: on a bidirectional ring an AllToAll costs about ¼ of an AllGather (½ on one-way links, where each
    # link carries N²(1 − 1/D) scalars for the AllGather and half that for the AllToAll). The times here agree
    # with what ring_link_bytes counts on each link of a ring of 16, one way, at 4.5e10 B/s a direction.
    ring, D, N = sl.tpu_pod("tpu-v5e"), 16, 4096
    nbytes = N * N * BF16
    ag, a2a = (f(nbytes, ring, axes="X") for f in (sl.allgather_time_s, sl.alltoall_time_s))
    assert a2a / ag == pytest.approx(1 / 4)
    assert a2a == pytest.approx(sl.ring_link_bytes(nbytes, D, collective="alltoall") / 4.5e10)  # V/8 per direction
    # The book's V / W for the gather sends whole shards each way; halving every shard would save 1/D more.
    assert ag * (D - 1) / D == pytest.approx(sl.ring_link_bytes(nbytes, D) / 4.5e10)
    # One way, each link carries the AllToAll's (N²/2)(1 − 1/D) against the AllGather's N²(1 − 1/D): half.
    one_way = {c: sl.ring_link_bytes(N * N, D, collective=c, bidirectional=False) for c in ("allgather", "alltoall")}
    assert one_way["alltoall"] / one_way["allgather"] == pytest.approx(1 / 2)
    assert one_way["allgather"] == pytest.approx(N**2 * (1 - 1 / D))


def test_a_line_gathers_at_the_pace_of_one_link_carrying_all_but_one_shard():
    # Along a line the link into an end chip carries (n − 1)/n of V one way: what each link of a one-way ring of
    # n carries (ring_link_bytes), not the 1/2 of it each direction of a ring's links carries with wraparound.
    for n in (2, 4, 8):
        line = sl.tpu_slice((n, 16), "tpu-v5e")
        assert sl.allgather_time_s(1e9, line, axes="X") == pytest.approx(
            sl.ring_link_bytes(1e9, n, bidirectional=False) / 4.5e10)


def test_an_alltoall_across_a_line_is_bound_by_its_middle_link():
    # A line of 4 without wraparound: the two chips of each half send half their V/4 over the one middle
    # link, one way: V / 4 at 4.5e10 B/s.
    assert sl.alltoall_time_s(1e10, sl.tpu_slice((4, 4), "tpu-v5e"), axes="X") == pytest.approx(1e10 / (4 * 4.5e10))
    mixed = sl.tpu_slice((8, 16), "tpu-v5e")  # a line of 8 and a ring of 16: the slower cut binds
    assert sl.alltoall_time_s(1e10, mixed, axes="XY") == pytest.approx(
        max(1e10 * 8 / (4 * 128 * 4.5e10), 1e10 * 16 / (4 * 128 * 9e10)))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 16), nbytes=st.floats(1e8, 1e11))
def test_allgather_time_is_independent_of_ring_length_once_bandwidth_bound(n, nbytes):
    ring = sl.tpu_slice((n, 16), "tpu-v5e")
    assert sl.allgather_time_s(nbytes, ring, axes="Y") == pytest.approx(nbytes / 9e10)


def test_small_messages_are_latency_bound():
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allgather_time_s(1e3, pod, axes="X") == pytest.approx(8e-6)  # 8 hops of 1 µs around a ring of 16
    assert sl.allgather_time_s(1e3, sl.tpu_slice((16, 16), "tpu-v5e", wraparound=False), axes="X") == pytest.approx(15e-6)
    assert sl.alltoall_time_s(1e3, pod, axes="XY") == pytest.approx(16e-6)  # 8 + 8 hops


def test_a_small_allreduce_pays_the_ring_latency_twice():
    # AllReduce = ReduceScatter + AllGather: two passes of 8 hops around a ring of 16 on one axis.
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allreduce_time_s(1e3, pod, axes="X") == pytest.approx(16e-6)
    assert sl.allreduce_time_s(1e3, pod, axes="XY") == pytest.approx(32e-6)
    # On 8 GPUs a ring takes 7 steps per pass: 14 steps of 5 µs.
    assert sl.allreduce_time_s(8.0, sl.gpu_cluster(1, "h100")) == pytest.approx(14 * 5e-6)
    assert sl.alltoall_time_s(1e3, pod, axes="X") == pytest.approx(8e-6)  # one pass


def test_gpu_collectives_inside_a_node():
    node = sl.gpu_cluster(1, "h100")
    assert sl.allgather_time_s(1e9, node) == pytest.approx(1e9 * 7 / 8 / 450e9)
    assert sl.allreduce_time_s(1e9, node) == pytest.approx(2 * 1e9 * 7 / 8 / 450e9)
    assert sl.alltoall_time_s(1e9, node) == pytest.approx(1e9 * 7 / 64 / 450e9)
    assert sl.alltoall_time_s(1e9, node) == pytest.approx(1e9 / (8 * 450e9), rel=0.15)  # about B / 8W


def test_gpu_collectives_across_nodes_are_bound_by_node_egress():
    cluster = sl.gpu_cluster(16, "h100")  # 128 GPUs
    assert sl.allgather_time_s(1e10, cluster) == pytest.approx(1e10 * 15 / 16 / 400e9)  # egress binds, not NVLink
    thin = sl.gpu_cluster(16, "h100", oversubscription=2)
    assert sl.allgather_time_s(1e10, thin) == pytest.approx(2 * sl.allgather_time_s(1e10, cluster))
    # Two nodes (book ch. 12, Quiz 4 Q5): a ring of 8 inside each node moves 7/8 of V over NVLink,
    # V/514e9 s; a ring of 2 nodes moves half of V through each node's egress, V/800e9 s: NVLink binds,
    # and the pair costs no more than one node.
    assert sl.allgather_time_s(1e10, cluster, group=16) == pytest.approx(1e10 * 7 / 8 / 450e9)
    assert sl.allgather_time_s(1e10, cluster, group=16) == sl.allgather_time_s(1e10, cluster, group=8)
    # AllToAll across nodes: NVLink carries only what stays in the node, V·(n−1)/N².
    assert "V·(n−1)/(N²·W_gpu)" in sl.explain(sl.alltoall_time_s, 1e10, cluster).formula


def test_a_group_inside_one_node_uses_nvlink_only():
    node = sl.gpu_cluster(1, "h100")
    assert sl.allgather_time_s(1e9, node, group=4) == pytest.approx(1e9 * 3 / 4 / 450e9)
    assert sl.alltoall_time_s(1e9, node, group=4) == pytest.approx(1e9 * 3 / 16 / 450e9)


def test_an_alltoall_across_nodes_is_bound_by_each_node_sending_the_others_their_share():
    # 16 H100 nodes: each node sends 15/16 of its 1/16 of V out through 400 GB/s of egress.
    cluster = sl.gpu_cluster(16, "h100")
    assert sl.alltoall_time_s(1e10, cluster) == pytest.approx(1e10 * 15 / 256 / 400e9)


def test_a_small_message_across_two_nodes_pays_one_step_per_gpu_and_node_hop():
    # A ring over 2 nodes of 8: (M − 1) + (GPUs per node − 1) = 8 steps of 5 µs.
    assert sl.allgather_time_s(16.0, sl.gpu_cluster(2, "h100")) == pytest.approx(8 * 5e-6)


def test_a_small_reducescatter_on_gpus_takes_a_ring_of_steps():
    assert sl.reducescatter_time_s(8.0, sl.gpu_cluster(1, "h100")) == pytest.approx(7 * 5e-6)


def test_a_single_chip_moves_nothing():
    one = sl.tpu_slice((1, 1), "tpu-v5e")
    assert sl.allgather_time_s(1e9, one) == 0 and sl.allreduce_time_s(1e9, one, axes="X") == 0
    assert sl.allgather_time_s(1e9, sl.gpu_cluster(1, "h100"), group=1) == 0


def test_derivations_of_gpu_collectives_name_their_passes():
    node = sl.gpu_cluster(1, "h100")
    assert sl.explain(sl.allgather_time_s, 1e9, node).formula == "max(steps · T_step, V·(N−1)/(N·W_gpu))"
    assert sl.explain(sl.allreduce_time_s, 1e9, node).formula == "max(steps · T_step, 2·V·(N−1)/(N·W_gpu))"


def test_derivations_say_which_form_applies_and_why():
    line = str(sl.explain(sl.allgather_time_s, V, sl.tpu_slice((4, 4), "tpu-v5e"), axes="X")).splitlines()
    assert line[0] == ("T_AllGather(X) = max(T_hop · hops, (n − 1)/n · V / W) "
                       "= max(1 µs · 3, 3/4 · 33.6 MB / 45 GB/s) = 559 µs")
    assert line[1].startswith("  where V: bytes of the whole array; W: one way on a line without wraparound "
                              "(the link into an end chip brings it (n − 1)/n of V)")
    ring = str(sl.explain(sl.allgather_time_s, V, sl.tpu_pod("tpu-v5e"), axes="X")).splitlines()
    assert ring[0] == "T_AllGather(X) = max(T_hop · hops, V / W) = max(1 µs · 8, 33.6 MB / 90 GB/s) = 373 µs"
    assert "W: both ways of a link on a ring with wraparound (shards go both ways round: the book's V / W)" in ring[1]
    two = sl.explain(sl.allgather_time_s, V, V4P, axes="XY")
    assert two.formula == "max(T_hop · hops, V / (N_axes · W))"
    a2a = sl.explain(sl.alltoall_time_s, V, sl.tpu_pod("tpu-v5e"), axes="XY")
    assert a2a.formula == "max(T_hop · hops, V · max(n) / (4 · N · W))"
    assert "= max(1 µs · 16, 33.6 MB · 16 / (4 · 256 · 90 GB/s)) = 16 µs" in str(a2a)  # latency-bound
    assert sl.explain(sl.allreduce_time_s, V, V4P, axes="Z").formula == "max(2 · T_hop · hops, 2 · V / W)"


def test_bad_collective_arguments_are_explained():
    cluster = sl.gpu_cluster(2, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`group` of 32 GPUs is larger than GpuCluster\(h100, 2 node\(s\) x 8 GPUs = 16 GPUs\); at most 16$"):
        sl.allgather_time_s(1e9, cluster, group=32)
    with pytest.raises(sl.InvalidValueError, match=r"^`group`: a group spanning nodes must be whole nodes of 8 GPUs, got 12$"):
        sl.allgather_time_s(1e9, cluster, group=12)
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: a GPU cluster takes `group`"):
        sl.allgather_time_s(1e9, cluster, axes="X")
    with pytest.raises(sl.InvalidValueError, match=r"^`group`: a TPU slice takes `axes`"):
        sl.allgather_time_s(1e9, sl.tpu_pod("tpu-v5e"), group=4)
    with pytest.raises(sl.InvalidValueError, match=r"^`topology` must be a TpuSlice"):
        sl.allgather_time_s(1e9, "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^`nbytes` must not be negative, got -1$"):
        sl.allreduce_time_s(-1, cluster)
    with pytest.raises(sl.InvalidValueError, match=r"axis 'Y' is given twice"):
        sl.allgather_time_s(1e9, sl.tpu_pod("tpu-v5e"), axes=("Y", "Y"))
    with pytest.raises(sl.InvalidValueError, match=r"^`latency_s` must not be negative, got -1e-06$"):
        sl.allgather_time_s(1e9, cluster, latency_s=-1e-6)
    with pytest.raises(sl.InvalidValueError, match=r"^`group` must be a whole number >= 1, got 0$"):
        sl.allgather_time_s(1e9, cluster, group=0)


def test_a_small_alltoall_through_nvswitches_costs_one_step_of_latency():
    assert sl.alltoall_time_s(1.0, sl.gpu_cluster(1, "gb200-nvl72")) == pytest.approx(5e-6)
    assert sl.allgather_time_s(1.0, sl.gpu_cluster(1, "gb200-nvl72")) == pytest.approx(71 * 5e-6)  # a ring: N − 1 steps


def test_a_gather_over_two_lines_is_bound_by_what_an_end_chip_can_take_in():
    # v5e 2x2: no wraparound; each chip has one 45 GB/s (one-way) link in per axis and must take in 3/4 of V,
    # so no schedule beats 3/4 · V / 90 GB/s = V / 120 GB/s (adding each line's own rate would claim V / 180 GB/s).
    pod = sl.tpu_slice((2, 2), "tpu-v5e")
    V = 1e9
    assert sl.allgather_time_s(V, pod, axes="XY") == pytest.approx(0.75 * V / (2 * 4.5e10))
    assert sl.reducescatter_time_s(V, pod, axes="XY") == pytest.approx(0.75 * V / (2 * 4.5e10))
    assert sl.allreduce_time_s(V, pod, axes="XY") == pytest.approx(2 * 0.75 * V / (2 * 4.5e10))
    # a ring among the axes does not lift the bound of the line's end chips: (N − 1)/N · V / ΣW
    mixed = sl.tpu_slice((16, 4), "tpu-v5e")
    assert sl.allgather_time_s(V, mixed, axes="XY") == pytest.approx(63 / 64 * V / (9e10 + 4.5e10))
