"""TPU slices and GPU clusters: shapes, wraparound, hops, routes, totals, and bad input."""


import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl


# Published whole-system figures (How to Scale Your Model ch. 2; Google Cloud TPU docs).
def test_v5e_pod_has_256_chips_about_5e16_flops_and_4_tb_of_hbm():
    pod = sl.tpu_pod("tpu-v5e")
    assert pod.num_chips == 256
    assert pod.total_flops_per_s() == pytest.approx(5e16, rel=0.02)
    assert pod.total_hbm_bytes() == pytest.approx(4e12, rel=0.03)


def test_v5p_pod_has_8960_chips_and_about_4e18_flops():
    pod = sl.tpu_pod("tpu-v5p")
    assert pod.num_chips == 8960
    assert pod.total_flops_per_s() == pytest.approx(4e18, rel=0.03)


def test_ironwood_pod_has_9216_chips():
    assert sl.tpu_pod("tpu7x").num_chips == 9216


def test_weight_loading_bounds_sampling_on_32_v4p_chips_at_about_10_ms():
    # A 200B-parameter bf16 model spread over 32 TPU v4p chips: each streams 1/32 of 400 GB.
    assert sl.t_comms_s(2 * 200e9 / 32, "tpu-v4p") == pytest.approx(10e-3, rel=0.05)


def test_wraparound_only_on_full_axes():
    assert sl.tpu_slice((16, 16), "tpu-v5e").wraparound == (True, True)
    assert sl.tpu_slice((4, 16), "tpu-v5e").wraparound == (False, True)
    assert sl.tpu_slice((16, 16), "tpu-v5e", wraparound=False).wraparound == (False, False)


def test_hops_with_and_without_wraparound():
    torus = sl.tpu_slice((16, 16), "tpu-v5e")
    mesh = sl.tpu_slice((16, 16), "tpu-v5e", wraparound=(False, False))
    assert mesh.hops((0, 0), (15, 0)) == 15
    assert torus.hops((0, 0), (15, 0)) == 1  # one hop over the wraparound link
    assert torus.hops((0, 0), (8, 8)) == 16
    assert torus.max_hops() == 16 and mesh.max_hops() == 30


slices = st.sampled_from([("tpu-v5e", (16, 16)), ("tpu-v5e", (4, 8)), ("tpu-v4p", (16, 16, 16)), ("tpu-v5p", (4, 4, 8))])


@settings(max_examples=60, deadline=None)
@given(slices, st.data())
def test_wraparound_never_adds_hops_and_routes_are_shortest(which, data):
    name, shape = which
    torus = sl.tpu_slice(shape, name)
    mesh = sl.tpu_slice(shape, name, wraparound=False)
    point = st.tuples(*[st.integers(0, n - 1) for n in shape])
    a, b = data.draw(point), data.draw(point)
    assert torus.hops(a, b) <= mesh.hops(a, b)
    for topo in (torus, mesh):
        path = topo.route(a, b)
        assert path[0] == a and path[-1] == b
        assert len(path) - 1 == topo.hops(a, b)
        assert all(topo.hops(p, q) == 1 for p, q in zip(path, path[1:]))


def test_point_to_point_time_adds_a_microsecond_per_hop():
    s = sl.tpu_slice((4, 4), "tpu-v5e")
    t = s.p2p_time_s(45e9 * 1e-3, (0, 0), (3, 3))  # 45 MB over a 45 GB/s link: 1 ms, plus 6 hops
    assert t == pytest.approx(1e-3 + 6e-6)
    assert str(sl.explain(s.p2p_time_s, 0, (0, 0), (0, 1))) == (
        "T_p2p = hops · T_hop + nbytes / W_link = 1 · 1 µs + 0 B / 45 GB/s = 1 µs"
    )
    assert s.p2p_time_s(1e6, (1, 1), (1, 1)) == 0  # to itself: nothing to send


def test_hop_latency_must_not_be_negative():
    with pytest.raises(sl.InvalidValueError, match=r"^`hop_latency_s` must not be negative, got -1$"):
        sl.tpu_slice((4, 4), "tpu-v5e").p2p_time_s(1e6, (0, 0), (1, 1), hop_latency_s=-1)


def test_hosts_and_bisection_of_slices():
    assert sl.tpu_slice((4, 4), "tpu-v5e").num_hosts == 2  # hosts of 4x2 chips
    assert sl.tpu_slice((2, 2), "tpu-v5e").num_hosts == 1
    v5e = sl.chip("tpu-v5e")
    # 16x16 torus: cutting X in half cuts 2 links in each of 16 rings.
    assert sl.tpu_pod("tpu-v5e").bisection_bytes_per_s() == 16 * 2 * v5e.ici_link_bytes_per_s_bidirectional
    # 4x16: the worst cut halves the 16-chip axis, cutting 2 links in each of its 4 rings.
    assert sl.tpu_slice((4, 16), "tpu-v5e").bisection_bytes_per_s() == 4 * 2 * v5e.ici_link_bytes_per_s_bidirectional
    assert sl.tpu_slice((4, 4), "tpu-v5e").dcn_bytes_per_s() == 16 * 3.125e9


def test_bad_slices_are_explained():
    with pytest.raises(sl.InvalidValueError, match=r"^`shape`: axis Y of a tpu-v5e slice can have at most 16 chips \(the pod is 16x16\), got 32$"):
        sl.tpu_slice((4, 32), "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^`shape`: a tpu-v5p slice has 3 axes \(its pod is 16x20x28\), got shape \(4, 4\)$"):
        sl.tpu_slice((4, 4), "tpu-v5p")
    with pytest.raises(sl.InvalidValueError, match=r"^`wraparound`: axis X of 4 chips cannot wrap around: wraparound needs the full axis of 16$"):
        sl.tpu_slice((4, 4), "tpu-v5e", wraparound=(True, False))
    with pytest.raises(sl.InvalidValueError, match=r"^`shape` must be a sequence of whole numbers >= 1, got \(0, 4\)$"):
        sl.tpu_slice((0, 4), "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"must be a TPU for a slice, got h100 \(gpu\)"):
        sl.tpu_slice((2, 2), "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`b` must be 2 whole coordinates within \(4, 4\), got \(4, 0\)$"):
        sl.tpu_slice((4, 4), "tpu-v5e").hops((0, 0), (4, 0))


def test_an_axis_used_twice_is_named():
    s = sl.tpu_slice((4, 4), "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: axis 'X' is given twice in \('X', 'x'\); use each axis at most once$"):
        s.axes(("X", "x"))
    with pytest.raises(sl.InvalidValueError, match=r"^`axes` must name axes of TpuSlice\(tpu-v5e, X=4, Y=4; 16 chips\): one of X, Y, or several as 'XY' or \('X', 'Y'\); got 'Z'$"):
        s.axes("Z")
    with pytest.raises(sl.InvalidValueError, match=r"^`axes` must name axes .*; got True$"):
        s.axes(True)
    with pytest.raises(sl.InvalidValueError, match=r"^`axes` must name axes .*; got 0$"):
        s.axes(0)


def test_axes_are_named_as_in_a_jax_mesh():
    s = sl.tpu_slice({"X": 4, "Y": 16}, "tpu-v5e")
    assert s.shape == (4, 16) and s.mesh == {"X": 4, "Y": 16}
    assert s.axes("XY") == ("X", "Y") == s.axes(("x", "y")) and s.axes() == ("X", "Y")
    with pytest.raises(sl.InvalidValueError, match=r"^`shape`: a mesh names its axes X, Y in that order"):
        sl.tpu_slice({"Y": 4, "X": 4}, "tpu-v5e")


# NVIDIA DGX H100 SuperPOD reference architecture: a scalable unit is 32 nodes
# (256 GPUs) on 8 leaf switches; 4 units (1024 GPUs) use 32 leaf and 16 spine switches.
def test_h100_superpod_switch_counts():
    su = sl.gpu_cluster(32, "h100")
    assert (su.num_gpus, su.num_leaf_switches, su.levels, su.num_scalable_units) == (256, 8, 2, 1)
    pod = sl.gpu_cluster(128, "h100")
    assert (pod.num_leaf_switches, pod.num_spine_switches, pod.num_scalable_units) == (32, 16, 4)


def test_node_figures_come_from_the_registry():
    node = sl.gpu_cluster(1, "h100")
    assert node.gpus_per_node == 8 and node.ports_per_node == 8  # one 400 Gb/s NIC per GPU
    assert node.nvlink_bytes_per_s_per_gpu == 450e9
    nvl = sl.gpu_cluster(2, "gb200-nvl72")
    assert nvl.gpus_per_node == 72 and nvl.num_gpus == 144
    assert nvl.node_egress_bytes_per_s / 72 == pytest.approx(50e9)  # 400 Gb/s per GPU, as on H100


def test_oversubscription_divides_the_spine_bandwidth_per_node():
    tree = sl.gpu_cluster(64, "h100", oversubscription=2)
    assert tree.egress_bytes_per_s_per_node(level="leaf") == 400e9
    assert tree.egress_bytes_per_s_per_node(level="spine") == 200e9
    assert tree.bisection_bytes_per_s() == 64 * 200e9


def test_cluster_totals():
    c = sl.gpu_cluster(4, "h100")
    assert c.total_flops_per_s() == 32 * 9.9e14
    assert c.total_hbm_bytes() == 32 * 80e9


def test_bad_clusters_are_explained():
    with pytest.raises(sl.InvalidValueError, match=r"^`num_nodes` must be a whole number >= 1, got 0$"):
        sl.gpu_cluster(0, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`chip` must be a GPU for a GPU cluster, got tpu-v5e \(tpu\)"):
        sl.gpu_cluster(1, "tpu-v5e")
    with pytest.raises(sl.InvalidValueError, match=r"^a GPU cluster needs `scale_up_domain`, and chip 'v100' has none"):
        sl.gpu_cluster(1, "v100")
    with pytest.raises(sl.InvalidValueError, match=r"^`oversubscription` must be >= 1, got 0.5$"):
        sl.gpu_cluster(2, "h100", oversubscription=0.5)
    with pytest.raises(sl.InvalidValueError, match=r"^`level` must be 'leaf' or 'spine', got 'core'$"):
        sl.gpu_cluster(2, "h100").egress_bytes_per_s_per_node(level="core")
    for ports in (3, 2, 2.5, True):
        with pytest.raises(sl.InvalidValueError, match=r"^`switch_ports` must be"):
            sl.gpu_cluster(4, "h100", switch_ports=ports)


def test_slices_of_whole_cubes_wrap_on_every_axis_through_the_optical_switches():
    # How to Scale Your Model, ch. 2: v4p/v5p pods are 4x4x4 cubes joined by optical switches.
    assert sl.tpu_slice((4, 4, 4), "tpu-v5p").wraparound == (True, True, True)
    assert sl.tpu_slice((4, 8, 16), "tpu-v4p").wraparound == (True, True, True)
    assert sl.tpu_slice((2, 2, 4), "tpu-v5p").wraparound == (False, False, False)
    with pytest.raises(sl.InvalidValueError, match=r"^`wraparound`: axis X of 2 chips cannot wrap around: wraparound needs a slice of whole "
                       r"4x4x4 cubes \(every axis a multiple of 4\), got 2x4x4$"):
        sl.tpu_slice((2, 4, 4), "tpu-v5p", wraparound=True)


def test_wraparound_accepts_numpy_booleans():
    import numpy as np

    assert sl.tpu_slice((16, 16), "tpu-v5e", wraparound=np.False_).wraparound == (False, False)


def test_a_coordinate_that_is_not_a_sequence_is_named():
    with pytest.raises(sl.InvalidValueError, match=r"^`a` must be 2 whole coordinates within \(4, 4\), got 0$"):
        sl.tpu_slice((4, 4), "tpu-v5e").route(0, (1, 1))


def test_scalable_units_of_nvl72_racks_hold_eight_racks():
    # NVIDIA DGX GB200 SuperPOD: a scalable unit is 8 NVL72 racks (576 GPUs).
    assert sl.gpu_cluster(32, "gb200-nvl72").num_scalable_units == 4
    assert sl.gpu_cluster(33, "h100").num_scalable_units == 2


def test_vmem_roofline_of_a_v5e():
    # VMEM feeds the MXUs about 22 times faster than HBM (ch. 2), so its ridge sits near 11 FLOP/B.
    assert sl.critical_intensity("tpu-v5e", bandwidth="vmem") == pytest.approx(240 / 22, rel=0.02)


def test_totals_show_their_derivation_for_slices_and_clusters():
    assert str(sl.explain(sl.tpu_pod("tpu-v5e").total_flops_per_s)) == (
        "C_total(bf16) = chips · C = 256 · 1.97e14 FLOP/s = 5.04e16 FLOP/s")
    assert str(sl.explain(sl.gpu_cluster(4, "h100").total_hbm_bytes)) == (
        "HBM_total = chips · HBM per chip = 32 · 80 GB = 2.56 TB")


def test_bisection_without_wraparound_cuts_one_link_per_ring():
    v5e = sl.chip("tpu-v5e")
    mesh = sl.tpu_slice((16, 16), "tpu-v5e", wraparound=False)
    assert mesh.bisection_bytes_per_s() == 16 * 1 * v5e.ici_link_bytes_per_s_bidirectional
    assert sl.tpu_slice((16, 16), "tpu-v5e").bisection_bytes_per_s() == 2 * mesh.bisection_bytes_per_s()
    assert sl.tpu_slice((1, 1), "tpu-v5e").bisection_bytes_per_s() == 0


@pytest.mark.parametrize("bad", ["no", 1, (True,), ("yes", "no")])
def test_wraparound_must_be_true_or_false(bad):
    with pytest.raises(sl.InvalidValueError, match=r"^`wraparound`"):
        sl.tpu_slice((16, 16), "tpu-v5e", wraparound=bad)


def _levels_by_search(ports, k):
    """The fewest switch levels L with 2·(k/2)^L ≥ ports, found by counting up (the definition)."""
    levels = 1
    while 2 * (k // 2) ** levels < ports:
        levels += 1
    return max(levels, 2) if ports > k else levels


@pytest.mark.parametrize("k", [4, 8, 16, 64, 128])
def test_fat_tree_levels_in_closed_form_match_the_definition(k):
    for nodes in [2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 127, 128, 129, 511, 512, 513, 2048, 4097, 10**5]:
        cluster = sl.gpu_cluster(nodes, "h100", switch_ports=k)
        assert cluster.levels == _levels_by_search(nodes * cluster.ports_per_node, k), (nodes, k)


def test_two_nodes_of_one_port_each_need_one_switch():
    thin = sl.chip("h100").derive("h100-one-nic", scale_out_bytes_per_s_per_node=50e9)
    pair = sl.gpu_cluster(2, thin)
    assert (pair.ports_per_node, pair.levels, pair.num_leaf_switches, pair.num_spine_switches) == (1, 1, 1, 0)


def test_huge_clusters_answer_at_once():
    assert sl.gpu_cluster(10**9, "h100").levels == 7  # 2·32^7 ≥ 8e9 ports > 2·32^6
    assert "GpuCluster(h100" in sl.gpu_cluster(4, "h100", switch_ports=4).summary()


def test_topologies_are_frozen():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        sl.tpu_pod("tpu-v5e").shape = (4, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sl.gpu_cluster(2, "h100").num_nodes = 3


def test_several_nodes_need_a_scale_out_figure():
    island = sl.ChipSpec("island-gpu", "gpu", "a test", bf16_flops_per_s=1e15, hbm_bytes_per_s=3e12,
                         scale_up_bytes_per_s_per_gpu=4e11, scale_up_domain=8)
    assert sl.gpu_cluster(1, island).num_gpus == 8
    with pytest.raises(sl.InvalidValueError, match=r"^a GPU cluster of several nodes needs `scale_out_bytes_per_s_per_node`"):
        sl.gpu_cluster(2, island)


def test_more_review_cases_of_clusters_and_meshes():
    assert sl.gpu_cluster(72, "gb200-nvl72").num_scalable_units == 9  # 8 racks per scalable unit
    with pytest.raises(sl.InvalidValueError, match=r"^`switch_ports` must be even"):
        sl.gpu_cluster(4, "h100", switch_ports=5)
    with pytest.raises(sl.InvalidValueError, match=r"^`shape`: a mesh names its axes X, Y in that order"):
        sl.tpu_slice({"A": 4, "B": 4}, "tpu-v5e")


def test_a_three_level_tree_counts_its_spine_and_core_switches():
    # 512 H100 nodes (4096 GPUs, 4096 ports of 400 Gb/s): beyond what two levels of 64-port switches
    # serve (2 x 32^2 = 2048 ports), so a core layer: 128 spine and 64 core switches, as in NVIDIA's
    # design for 4096 GPUs (How to Scale Your Model, ch. 12, Quiz 3 Q2).
    big = sl.gpu_cluster(512, "h100")
    assert (big.levels, big.num_leaf_switches, big.num_spine_switches) == (3, 128, 128 + 64)


def test_the_worst_cut_may_be_across_the_first_axis():
    # 16x4 v5e: cutting the 16-chip ring axis cuts 4 rings x 2 links; the 4-chip axis (no wraparound)
    # would cut 16 links: the first axis gives the bisection, 8 x 90 GB/s.
    assert sl.tpu_slice((16, 4), "tpu-v5e").bisection_bytes_per_s() == 8 * 9e10


def test_a_small_alltoall_across_nodes_is_one_step():
    assert sl.alltoall_time_s(1.0, sl.gpu_cluster(2, "h100")) == pytest.approx(5e-6)
