"""Pictures of the hardware: what each diagram draws (chips, links, switches, labels), and bad input.

Expected counts are worked out here from the shapes and from published figures,
not read back from scalelib.
"""

import matplotlib

matplotlib.use("Agg")


import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.patches import Rectangle

import scalelib as sl


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def by_gid(ax, gid):
    """Every artist of `ax` (patches, lines, collections, texts) whose gid is `gid`."""
    return [a for a in ax.get_children() if a.get_gid() == gid]


def segments(ax, gid):
    found = by_gid(ax, gid)
    return sum(len(c.get_segments()) for c in found)


def points(ax, gid):
    (collection,) = by_gid(ax, gid)
    return [tuple(p) for p in collection.get_offsets()]


def texts(ax):
    return " | ".join(t.get_text() for t in ax.texts)


# --- draw_torus ----------------------------------------------------------------

def test_a_4x4_v5e_slice_has_16_chips_24_links_and_no_wraparound():
    ax = sl.draw_torus(sl.tpu_slice((4, 4), "tpu-v5e"))
    assert len(points(ax, "chips")) == 16
    assert segments(ax, "ici") == 2 * 4 * (4 - 1)  # 4 rows and 4 columns of 3 links each
    assert by_gid(ax, "wraparound") == []
    assert ax.get_title() == "tpu-v5e 4x4 slice: 16 chips, no wraparound"
    assert not ax.axison


def test_a_16x16_v5e_slice_wraps_around_on_both_axes():
    ax = sl.draw_torus(sl.tpu_slice((16, 16), "tpu-v5e"))
    assert len(points(ax, "chips")) == 256
    # each of the 16 rings along X and the 16 along Y closes with one link, drawn as a stub at each edge
    assert segments(ax, "wraparound") == 2 * (16 + 16)
    assert segments(ax, "ici") == 2 * 16 * 15
    assert ax.get_title() == "tpu-v5e 16x16 slice: 256 chips, wraparound on X and Y"
    assert "wraparound link" in [t.get_text() for t in ax.get_legend().get_texts()][1]


def test_wraparound_is_drawn_only_on_the_axes_that_wrap():
    # A 4x4x4 cube of tpu7x is whole cubes: optical switches close all three axes.
    ax = sl.draw_torus(sl.tpu_slice((4, 4, 4), "tpu7x"))
    assert len(points(ax, "chips")) == 64
    layers = [t.get_text() for t in ax.texts if t.get_text().startswith("Z = ")]
    assert layers == ["Z = 0", "Z = 1", "Z = 2", "Z = 3"]
    # 16 rings on X and 16 on Y drawn as edge stubs; the Z rings are named in the title.
    assert segments(ax, "wraparound") == 2 * (4 * 4 + 4 * 4)
    small = sl.draw_torus(sl.tpu_slice((2, 2, 4), "tpu-v4p"))  # less than a cube: no wraparound
    assert by_gid(small, "wraparound") == []
    half = sl.draw_torus(sl.tpu_slice((4, 16), "tpu-v5e"))  # only the full 16-chip axis wraps
    assert segments(half, "wraparound") == 2 * 4


def test_a_route_highlights_hops_plus_one_chips_and_the_title_says_the_hops():
    ax = sl.draw_torus(sl.tpu_slice((4, 4), "tpu-v5e"), route=((0, 0), (3, 1)))
    # no wraparound on a 4x4 slice: 3 hops along X, 1 along Y
    assert ax.get_title() == "tpu-v5e 4x4 slice: 4 hops from (0, 0) to (3, 1)"
    assert sorted(points(ax, "route-chips")) == [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
    (line,) = [l for l in ax.lines if l.get_label() == "route"]
    assert "route" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not np.isnan(line.get_xdata()).any()  # one unbroken path


def test_a_route_through_the_wraparound_leaves_one_edge_and_reenters_the_other():
    ax = sl.draw_torus(sl.tpu_slice((16, 16), "tpu-v5e"), route=((0, 0), (15, 0)))
    assert ax.get_title() == "tpu-v5e 16x16 slice: 1 hop from (0, 0) to (15, 0)"
    assert len(points(ax, "route-chips")) == 2
    (line,) = [l for l in ax.lines if l.get_label() == "route"]
    x = np.asarray(line.get_xdata(), float)
    assert np.isnan(x).sum() == 1  # broken once, where it leaves the grid
    assert np.nanmin(x) < 0 and np.nanmax(x) > 15  # out past both edges


def test_a_3d_route_across_layers_highlights_its_chips():
    topology = sl.tpu_slice((4, 4, 16), "tpu-v4p")  # Z spans the pod: it wraps
    ax = sl.draw_torus(topology, route=((0, 0, 1), (1, 1, 15)))
    assert ax.get_title().startswith("tpu-v4p 4x4x16 slice: 4 hops from (0, 0, 1) to (1, 1, 15)")
    assert "layer 15 wraps around to layer 0" in ax.get_title()
    assert len(points(ax, "route-chips")) == 5


def test_draw_torus_rejects_what_is_not_a_slice_and_routes_outside_it():
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_torus(sl.gpu_cluster(2, "h100"))
    assert str(err.value) == ("`topology` must be a TpuSlice (from tpu_slice or tpu_pod), got "
                              "GpuCluster(h100, 2 node(s) x 8 GPUs = 16 GPUs); use draw_fat_tree for a GpuCluster")
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_torus("tpu-v5e")
    assert str(err.value) == "`topology` must be a TpuSlice (from tpu_slice or tpu_pod), got 'tpu-v5e'"
    slice_4x4 = sl.tpu_slice((4, 4), "tpu-v5e")
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_torus(slice_4x4, route=((0, 0), (4, 0)))
    assert str(err.value) == "`b` must be 2 whole coordinates within (4, 4), got (4, 0)"
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_torus(slice_4x4, route=((0, 0),))
    assert str(err.value) == "`route` must be a pair of chip coordinates (a, b), got ((0, 0),)"
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_torus(slice_4x4, route=(0, 3))
    assert str(err.value) == "`route` must be a pair of chip coordinates (a, b), got (0, 3)"


# --- draw_gpu_node -------------------------------------------------------------

def test_an_h100_node_has_8_gpus_4_nvswitches_and_450_gb_s_nvlink():
    ax = sl.draw_gpu_node("h100")
    assert len(by_gid(ax, "gpu")) == 8
    assert len(by_gid(ax, "nvswitch")) == 4  # NVIDIA DGX H100: 4 third-generation NVSwitches
    assert segments(ax, "nvlink") == 8 * 4  # every GPU to every switch
    assert len(by_gid(ax, "nic")) == 8  # 8 x 400 Gb/s ConnectX-7, one per GPU
    assert "NVLink 450 GB/s per GPU" in texts(ax)  # H100 SXM: 900 GB/s bidirectional
    assert "egress 400 GB/s" in texts(ax)  # 8 x 400 Gb/s = 400 GB/s
    assert ax.get_title() == "h100 node: 8 GPUs joined by 4 NVSwitches"


def test_a100_b200_and_nvl72_nodes_have_their_published_switch_counts():
    a100 = sl.draw_gpu_node("a100")
    assert (len(by_gid(a100, "gpu")), len(by_gid(a100, "nvswitch"))) == (8, 6)
    assert "NVLink 300 GB/s per GPU" in texts(a100)  # 600 GB/s bidirectional
    b200 = sl.draw_gpu_node("b200")
    assert (len(by_gid(b200, "gpu")), len(by_gid(b200, "nvswitch"))) == (8, 2)
    nvl72 = sl.draw_gpu_node("gb200-nvl72")
    assert (len(by_gid(nvl72, "gpu")), len(by_gid(nvl72, "nvswitch"))) == (72, 18)
    assert "NVLink 900 GB/s per GPU" in texts(nvl72)
    assert "72 NICs × 50 GB/s" in texts(nvl72) and "egress 3.6 TB/s" in texts(nvl72)


def test_draw_gpu_node_rejects_tpus_and_gpus_without_an_nvswitch_count():
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_gpu_node("tpu-v5e")
    assert str(err.value) == ("`chip` must be a GPU for a node diagram, got tpu-v5e (tpu); "
                              "use draw_chip or draw_torus for TPUs")
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_gpu_node("v100")
    assert str(err.value) == "no NVSwitch count for v100; known for: a100, h100, h200, b200, gb200-nvl72"


# --- draw_fat_tree -------------------------------------------------------------

def test_one_h100_superpod_scalable_unit_has_8_leaf_and_4_spine_switches():
    # DGX H100 SuperPOD reference architecture: 32 nodes per SU, 8 leaf switches per SU
    ax = sl.draw_fat_tree(sl.gpu_cluster(32, "h100"))
    assert len(by_gid(ax, "leaf")) == 8
    assert len(by_gid(ax, "spine")) == 4
    assert segments(ax, "spine-links") == 8 * 4  # every leaf to every spine
    assert "8 leaf switches" in texts(ax) and "4 spine switches" in texts(ax)
    assert "32 nodes × 8 GPUs" in texts(ax)
    assert "= egress 400 GB/s per node" in texts(ax)
    assert "non-blocking: 400 GB/s" in texts(ax)
    # 32 nodes are more than a row shows: the first 13 and the last 2 around an ellipsis
    nodes = [t.get_text() for t in by_gid(ax, "node-label")]
    assert nodes == [str(i) for i in range(13)] + ["30", "31"]
    assert len(by_gid(ax, "elided")) == 1
    assert ax.get_title() == "h100 cluster: 32 nodes, 256 GPUs, 2-level InfiniBand fat tree"


def test_a_few_nodes_share_one_leaf_and_one_node_needs_no_switch():
    small = sl.draw_fat_tree(sl.gpu_cluster(4, "h100"))  # 32 ports fit one 64-port switch
    assert (len(by_gid(small, "leaf")), len(by_gid(small, "spine")), len(by_gid(small, "node"))) == (1, 0, 4)
    one = sl.draw_fat_tree(sl.gpu_cluster(1, "h100"))
    assert by_gid(one, "leaf") == [] and "no InfiniBand switches" in texts(one)


def test_a_large_cluster_is_summarised_with_its_counts():
    ax = sl.draw_fat_tree(sl.gpu_cluster(128, "h100"))  # 4 SUs: 32 leaf, 16 spine switches
    assert len(by_gid(ax, "leaf")) == 15 and len(by_gid(ax, "spine")) == 16
    assert "32 leaf switches" in texts(ax) and "(4 scalable units of 32)" in texts(ax)


def test_draw_fat_tree_rejects_a_tpu_slice():
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_fat_tree(sl.tpu_slice((4, 4), "tpu-v5e"))
    assert str(err.value) == ("`topology` must be a GpuCluster (from gpu_cluster), got "
                              "TpuSlice(tpu-v5e, X=4, Y=4; 16 chips); use draw_torus for a TpuSlice")


# --- draw_chip -----------------------------------------------------------------

def test_a_v5e_chip_shows_one_tensorcore_its_vmem_hbm_ici_and_pcie():
    ax = sl.draw_chip("tpu-v5e")
    assert len(by_gid(ax, "tensorcore")) == 1
    shown = texts(ax)
    for label in ("VMEM\n128 MiB", "HBM\n16 GB", "820 GB/s", "128×128", "4 links × 45 GB/s one-way",
                  "90 GB/s bidirectional", "PCIe 16 GB/s"):
        assert label in shown
    assert ax.get_title() == "tpu-v5e: 1 TensorCore, 1.97e14 FLOP/s bf16"


def test_a_v5p_chip_has_two_tensorcores_and_a_v6e_a_256_wide_mxu():
    assert len(by_gid(sl.draw_chip("tpu-v5p"), "tensorcore")) == 2
    assert "256×256" in texts(sl.draw_chip("tpu-v6e"))


def test_an_h100_shows_132_sms_its_l2_hbm_and_nvlink():
    ax = sl.draw_chip("h100")
    assert len(by_gid(ax, "sm")) == 132  # H100 SXM5: 132 SMs
    shown = texts(ax)
    for label in ("L2 cache 50 MiB", "HBM 80 GB", "3.35 TB/s", "NVLink 450 GB/s", "SMEM / L1 256 KiB"):
        assert label in shown
    assert "TMEM" not in shown  # tensor memory arrived with Blackwell
    assert "TMEM 256 KiB" in texts(sl.draw_chip("b200"))
    assert ax.get_title() == "h100: 132 SMs, 9.9e14 FLOP/s bf16"


def test_draw_chip_rejects_a_cpu():
    cpu = sl.ChipSpec(name="local", family="cpu", source="measured")
    with pytest.raises(sl.InvalidValueError) as err:
        sl.draw_chip(cpu)
    assert str(err.value) == "`chip` must be a TPU or a GPU for a block diagram, got local (cpu)"


# --- plot_spec_comparison ------------------------------------------------------

def test_the_spec_comparison_has_one_bar_per_chip_with_a_figure_on_log_axes():
    fig = sl.plot_spec_comparison()
    names = sl.chips("tpu") + sl.chips("gpu")
    flops, bandwidth, capacity = fig.axes
    bars = lambda ax: [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars(flops)) == len(names) - 1  # the V100 has no bf16 tensor cores
    assert [t.get_text() for t in flops.texts].count("n/a") == 1
    assert len(bars(bandwidth)) == len(bars(capacity)) == len(names)
    assert [ax.get_yscale() for ax in fig.axes] == ["log"] * 3
    assert [ax.get_ylabel() for ax in fig.axes] == ["peak bf16\n(FLOP/s)", "HBM bandwidth\n(bytes/s)",
                                                    "HBM capacity\n(bytes)"]
    assert [t.get_text() for t in capacity.get_xticklabels()] == list(names)
    assert [t.get_text() for t in flops.get_legend().get_texts()] == ["TPU", "GPU"]
    assert flops.get_title() == "TPU and GPU generations, per chip"
    colours = {p.get_facecolor() for p in bars(capacity)}
    assert len(colours) == 2  # TPUs and GPUs told apart
    assert "820 GB/s" in [t.get_text() for t in bandwidth.texts]  # TPU v5e HBM
    assert "3.35 TB/s" in [t.get_text() for t in bandwidth.texts]  # H100 HBM


def test_one_field_gives_one_axes():
    ax = sl.plot_spec_comparison(["tpu-v5e", "h100"], fields=("hbm_bytes",))
    assert ax.get_ylabel() == "HBM capacity\n(bytes)"
    assert sorted(p.get_height() for p in ax.patches) == [16e9, 80e9]  # v5e 16 GB, H100 80 GB
    tpus = sl.plot_spec_comparison(sl.chips("tpu"), fields=("bf16_flops_per_s", "hbm_bytes"))
    assert tpus.axes[0].get_title() == "TPU generations, per chip"


def test_plot_spec_comparison_names_an_unknown_field_and_suggests_one():
    with pytest.raises(sl.UnknownNameError) as err:
        sl.plot_spec_comparison(fields=("bf16_flops",))
    message = str(err.value)
    assert message.startswith("`fields`: unknown spec field 'bf16_flops': expected one of bf16_flops_per_s, ")
    assert message.endswith("; did you mean 'bf16_flops_per_s' or 'fp16_flops_per_s'?")


# --- light import ----------------------------------------------------------------

def test_every_picture_returns_something_to_show():
    for picture in (sl.draw_torus(sl.tpu_pod("tpu-v5e")), sl.draw_gpu_node("h100"), sl.draw_chip("b200"),
                    sl.draw_fat_tree(sl.gpu_cluster(64, "b200"))):
        assert picture.get_title()
    from matplotlib.figure import Figure

    assert isinstance(sl.plot_spec_comparison(), Figure)
