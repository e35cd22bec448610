"""Collective costs on TPU tori and GPU clusters."""

import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl

V = 2048 * 8192 * 2  # bf16[2048, 8192]: 33.6 MB


def test_allgather_without_wraparound_uses_one_way_links():
    # 4x4 v5e: no wraparound on a 4-chip axis, so W is one link one way: 33.6 MB / 45 GB/s.
    assert sl.allgather_time_s(V, sl.tpu_slice((4, 4), "tpu-v5e"), axes="X") == pytest.approx(V / 4.5e10)


def test_allgather_with_wraparound_uses_both_directions():
    assert sl.allgather_time_s(V, sl.tpu_pod("tpu-v5e"), axes="X") == pytest.approx(V / 9e10)


def test_more_axes_divide_the_time():
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allgather_time_s(V, pod, axes=("X", "Y")) == pytest.approx(sl.allgather_time_s(V, pod, axes="X") / 2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 16), nbytes=st.floats(1e8, 1e11))
def test_allgather_time_is_independent_of_ring_length_once_bandwidth_bound(n, nbytes):
    ring = sl.tpu_slice((n, 16), "tpu-v5e")
    assert sl.allgather_time_s(nbytes, ring, axes="Y") == pytest.approx(nbytes / 9e10)


def test_small_messages_are_latency_bound():
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allgather_time_s(1e3, pod, axes="X") == pytest.approx(8e-6)  # 8 hops of 1 µs around a ring of 16
    assert sl.allgather_time_s(1e3, sl.tpu_slice((16, 16), "tpu-v5e", wraparound=False), axes="X") == pytest.approx(15e-6)


def test_a_small_allreduce_pays_the_ring_latency_twice():
    # AllReduce = ReduceScatter + AllGather: two passes of 8 hops around a ring of 16 on one axis.
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.allreduce_time_s(1e3, pod, axes="X") == pytest.approx(16e-6)
    assert sl.allreduce_time_s(1e3, pod, axes="XY") == pytest.approx(32e-6)
    # On 8 GPUs a ring takes 7 steps per pass: 14 steps of 5 µs.
    assert sl.allreduce_time_s(8.0, sl.gpu_cluster(1, "h100")) == pytest.approx(14 * 5e-6)
    assert sl.alltoall_time_s(1e3, pod, axes="X") == pytest.approx(8e-6)  # one pass


def test_allreduce_is_twice_allgather_and_alltoall_a_quarter():
    pod = sl.tpu_pod("tpu-v5p")
    ag = sl.allgather_time_s(1e10, pod, axes="X")
    assert sl.reducescatter_time_s(1e10, pod, axes="X") == ag
    assert sl.allreduce_time_s(1e10, pod, axes="X") == pytest.approx(2 * ag)
    assert sl.alltoall_time_s(1e10, pod, axes="X") == pytest.approx(ag / 4)


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


def test_derivation_of_a_collective():
    text = str(sl.explain(sl.allgather_time_s, V, sl.tpu_slice((4, 4), "tpu-v5e"), axes="X"))
    assert text.splitlines()[0] == "T_AllGather(X) = max(T_hop · hops, V / W) = max(1 µs · 3, 33.6 MB / 45 GB/s) = 746 µs"
    assert text.splitlines()[1].startswith("  where V: bytes of the whole array")


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
