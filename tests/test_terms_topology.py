"""Two rules of chapters 2 and 12's hardware model, checked by brute force or by every bad value.

* A GPU cluster's fat tree has the fewest switch levels L whose 2·(k/2)^L ports reach every node port
  (k ports a switch), and at least 2 once the node ports outgrow one switch: found here by counting
  L up from 1 for every cluster size and switch radix, not by the library's logarithm.
* A chip's whole-number figures (cores, ports, domain sizes) must be whole numbers >= 1.
"""

import pytest

import scalelib as sl


def levels_by_counting(ports, k):
    if ports <= k:
        return 1
    L = 1
    while 2 * (k // 2) ** L < ports:
        L += 1
    return max(L, 2)


@pytest.mark.parametrize("k", [8, 16, 32, 64])
def test_the_fat_trees_levels_are_the_fewest_that_reach_every_node(k):
    for nodes in list(range(2, 300)) + [511, 512, 513, 1024, 2048, 4095, 4096, 4097]:
        cluster = sl.gpu_cluster(nodes, "h100", switch_ports=k)
        assert cluster.levels == levels_by_counting(nodes * cluster.ports_per_node, k), (nodes, k)
    assert sl.gpu_cluster(1, "h100", switch_ports=k).levels == 0


@pytest.mark.parametrize("field", ["cores", "scale_up_domain"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_a_chips_whole_number_figures_are_at_least_1(field, value):
    with pytest.raises(sl.InvalidValueError, match=rf"`{field}` must be a whole number >= 1 or None, got"):
        sl.chip("h100").derive("h100-bad", **{field: value})
    assert getattr(sl.chip("h100").derive("h100-one", **{field: 1}), field) == 1
