"""Pictures of the hardware (chapters 2 and 12): a TPU slice's torus, a GPU node,
a fat tree of GPU nodes, one chip's block diagram, and the spec comparison.

Every figure shown comes from the chip registry or a topology and is printed
through :func:`fmt`. matplotlib is imported only inside the functions.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ._errors import InvalidValueError, unknown
from ._plot import _legible
from ._specs import ChipSpec, chip as _chip, chips as _chips
from ._topology import GpuCluster, TpuSlice, gpu_cluster
from ._units import fmt
from ._validate import shown

#: NVSwitch chips in one NVLink domain (node). Sources: NVIDIA HGX A100 data sheet (6 NVSwitches),
#: DGX H100 / HGX H100 and H200 data sheets (4 NVSwitches), DGX B200 / HGX B200 data sheet
#: (2 NVLink 5 switch chips), GB200 NVL72 data sheet (9 switch trays of 2 = 18 NVSwitch chips).
NVSWITCHES_PER_NODE = {"a100": 6, "h100": 4, "h200": 4, "b200": 2, "gb200-nvl72": 18}

#: Fields `plot_spec_comparison` can draw: field -> (what it is, unit for fmt, unit in the axis label).
SPEC_FIELDS = {
    "bf16_flops_per_s": ("peak bf16", "FLOP/s", "FLOP/s"),
    "fp16_flops_per_s": ("peak fp16", "FLOP/s", "FLOP/s"),
    "f32_flops_per_s": ("peak f32", "FLOP/s", "FLOP/s"),
    "fp8_flops_per_s": ("peak fp8", "FLOP/s", "FLOP/s"),
    "fp4_flops_per_s": ("peak fp4", "FLOP/s", "FLOP/s"),
    "int8_ops_per_s": ("peak int8", "OP/s", "OP/s"),
    "hbm_bytes": ("HBM capacity", "B", "bytes"),
    "hbm_bytes_per_s": ("HBM bandwidth", "B/s", "bytes/s"),
    "ici_link_bytes_per_s_one_way": ("ICI per link, one-way", "B/s", "bytes/s"),
    "ici_link_bytes_per_s_bidirectional": ("ICI per link, bidirectional", "B/s", "bytes/s"),
    "dcn_bytes_per_s_per_chip": ("DCN per chip", "B/s", "bytes/s"),
    "pcie_bytes_per_s": ("PCIe to host", "B/s", "bytes/s"),
    "scale_up_bytes_per_s_per_gpu": ("NVLink per GPU, one direction", "B/s", "bytes/s"),
    "scale_out_bytes_per_s_per_node": ("scale-out egress per node", "B/s", "bytes/s"),
    "fast_mem_bytes_per_core": ("VMEM per TensorCore / SMEM per SM", "B", "bytes"),
    "l2_bytes": ("L2 cache", "B", "bytes"),
}

FAMILY_STYLE = {"tpu": {"color": "#4C72B0", "hatch": ""}, "gpu": {"color": "#55A868", "hatch": "//"}}
LINK_COLOR, WRAP_COLOR, ROUTE_COLOR = "#9AA5B1", "#E08E0B", "#C0392B"
MAX_BOXES = 16  # boxes drawn per level of a fat tree before eliding the middle



# --- helpers ------------------------------------------------------------------

def _axes(ax, figsize):
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    elif not isinstance(ax, Axes):
        raise InvalidValueError(f"`ax` must be a matplotlib Axes or None, got {shown(ax)}")
    return ax


def _shown(ax, created: bool):
    """`ax`, its figure's text raised to a legible size on the site when this module drew the figure."""
    if created:
        _legible(ax.figure)
    return ax


def _box(ax, x, y, w, h, text="", color="#DDE6F0", gid=None, fontsize=8, edge="#333333", **text_kw):
    """A rectangle with its lower-left corner at (x, y) and `text` in its centre."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor=edge, linewidth=0.8, gid=gid))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                gid=f"{gid}-label" if gid else None, **text_kw)


def _schematic(ax, xlim, ylim, title):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=10)


_PREFIX_POWER = {"": 0, "k": 1, "M": 2, "G": 3, "T": 4, "Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4}


def _bytes(value) -> str:
    """Bytes as the data sheet says them: decimal when exact (``256 kB``), else binary when exact (``128 MiB``)."""
    for binary, base in ((False, 1000), (True, 1024)):
        number, unit = fmt(value, "B", binary=binary).split()
        if math.isclose(float(number) * base ** _PREFIX_POWER.get(unit[:-1], 0), value, rel_tol=1e-9):
            return f"{number} {unit}"
    return fmt(value, "B")


def _chip_list(chips, default) -> list[ChipSpec]:
    """`chips` (one name or ChipSpec, or several) as specs; `default` when None."""
    if chips is None:
        chips = default
    if isinstance(chips, (str, ChipSpec)):
        chips = (chips,)
    if not isinstance(chips, Iterable):
        raise InvalidValueError(f"`chips` must be a chip name, a ChipSpec, or a sequence of them, got {shown(chips)}")
    specs = [_chip(c, arg="chips") for c in chips]
    if not specs:
        raise InvalidValueError("`chips` must name at least one chip, got none")
    return specs


def _gpu_spec(chip, what: str) -> ChipSpec:
    spec = _chip(chip)
    if spec.family != "gpu":
        raise InvalidValueError(f"`chip` must be a GPU for {what}, got {spec.name} ({spec.family}); "
                                f"use draw_chip or draw_torus for TPUs")
    return spec


# --- chapter 2: the torus -----------------------------------------------------

def draw_torus(topology: TpuSlice, *, route=None, ax=None):
    """The chips of a TPU slice and their ICI links; optionally a route between two chips.

    Chips are dots on a grid (X to the right, Y upwards). A 3D slice is drawn as
    its Z layers side by side, each labelled ``Z = k``; a Z link joins each chip
    to the chip at the same (x, y) in the next layer. On an axis with wraparound
    every ring's closing link is drawn as two dashed stubs, one leaving each edge
    (gid ``"wraparound"``); axes without wraparound have none. With
    ``route=(a, b)`` the chips of ``topology.route(a, b)`` are highlighted
    (gid ``"route-chips"``) and the path is drawn in red (label ``"route"``),
    a wraparound hop as a line leaving one edge and re-entering the opposite one;
    the title gives the hop count.

    Args:
        topology: a :class:`TpuSlice` (from :func:`tpu_slice` or :func:`tpu_pod`).
        route: a pair ``(a, b)`` of chip coordinates, or None.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        2 (TPUs)

    Example:
        >>> from scalelib import tpu_slice
        >>> ax = draw_torus(tpu_slice((4, 4), "tpu-v5e"), route=((0, 0), (3, 1)))
        >>> ax.get_title()
        'tpu-v5e 4x4 slice: 4 hops from (0, 0) to (3, 1)'
    """
    from matplotlib.collections import LineCollection

    if not isinstance(topology, TpuSlice):
        hint = "; use draw_fat_tree for a GpuCluster" if isinstance(topology, GpuCluster) else ""
        raise InvalidValueError(f"`topology` must be a TpuSlice (from tpu_slice or tpu_pod), got {topology!r}{hint}")
    path = None
    if route is not None:
        if (isinstance(route, str) or not hasattr(route, "__len__") or len(route) != 2
                or not all(hasattr(end, "__len__") for end in route)):
            raise InvalidValueError(f"`route` must be a pair of chip coordinates (a, b), got {route!r}")
        path = topology.route(*route)  # checks both ends lie in the slice

    shape = tuple(topology.shape) + (1,) * (3 - len(topology.shape))
    X, Y, Z = shape
    wrap = tuple(topology.wraparound) + (False,) * (3 - len(topology.wraparound))
    gap = 2.2 if Z > 1 else 0  # room between layers for stubs and labels
    # layers per row of panels: all of them up to 4, else a grid of panels about 1.5 times wider than tall
    cols = Z if Z <= 4 else max(1, round(math.sqrt(Z * (Y + gap) / (X + gap) * 1.5)))
    rows = math.ceil(Z / cols)
    cols = math.ceil(Z / rows)

    def at(c):
        c = tuple(c) + (0,) * (3 - len(c))
        return np.array([(c[2] % cols) * (X - 1 + gap) + c[0], -(c[2] // cols) * (Y - 1 + gap + 0.6) + c[1]], float)

    width = cols * (X - 1) + (cols - 1) * gap + 2
    height = rows * (Y - 1) + (rows - 1) * (gap + 0.6) + 2
    step_in = min(0.6, 6.8 / width)  # inches per grid step: at most 8 inches wide
    created = ax is None
    ax = _axes(ax, figsize=(1.2 + step_in * width, min(10, 1.6 + step_in * height)))
    box = ax.get_position()
    fig_w, fig_h = ax.figure.get_size_inches()
    cell_pt = 72 * min(fig_w * box.width / (width + 0.4), fig_h * box.height / (height + 0.6))  # one grid step
    stub = 0.7  # length of a wraparound stub, in grid steps

    coords = [(x, y, z) for z in range(Z) for y in range(Y) for x in range(X)]
    links, stubs = [], []
    for x, y, z in coords:
        here = at((x, y, z))
        if x + 1 < X:
            links.append([here, at((x + 1, y, z))])
        if y + 1 < Y:
            links.append([here, at((x, y + 1, z))])
        if wrap[0] and x in (0, X - 1):
            stubs.append([here, here + (stub if x == X - 1 else -stub, 0)])
        if wrap[1] and y in (0, Y - 1):
            stubs.append([here, here + (0, stub if y == Y - 1 else -stub)])
    lw = max(0.4, min(2.0, cell_pt / 25))
    ax.add_collection(LineCollection(links, colors=LINK_COLOR, linewidths=lw, zorder=1, gid="ici", label="ICI link"))
    if stubs:
        ax.add_collection(LineCollection(stubs, colors=WRAP_COLOR, linewidths=lw * 1.2, linestyles=(0, (2, 1.5)),
                                         zorder=1, gid="wraparound",
                                         label="wraparound link (leaves one edge, re-enters the opposite one)"))
    points = np.array([at(c) for c in coords])
    size = (0.42 * cell_pt) ** 2
    ax.scatter(points[:, 0], points[:, 1], s=size, marker="s", color="#34495E", zorder=2, gid="chips", label="chip")

    if Z > 1:
        for z in range(Z):
            corner = at((0, Y - 1, z))
            ax.annotate(f"Z = {z}", (corner[0] + (X - 1) / 2, corner[1] + (stub if wrap[1] else 0.4)), xytext=(0, 2), ha="center",
                        va="bottom", textcoords="offset points", fontsize=8 if cell_pt > 6 else 6)
    origin, ox, oy = at((0, 0, 0)), (-1.15 if wrap[0] else -0.75), (-1.15 if wrap[1] else -0.75)
    ax.annotate("", origin + (min(X - 1, 2) + 0.3, oy), origin + (-0.3, oy),
                arrowprops=dict(arrowstyle="->", color="#555555"))
    ax.text(origin[0] + min(X - 1, 2) + 0.45, origin[1] + oy, "X", va="center", fontsize=8, color="#555555")
    if Y > 1:
        ax.annotate("", origin + (ox, min(Y - 1, 2) + 0.3), origin + (ox, -0.3),
                    arrowprops=dict(arrowstyle="->", color="#555555"))
        ax.text(origin[0] + ox, origin[1] + min(Y - 1, 2) + 0.45, "Y", ha="center", fontsize=8, color="#555555")

    name = f"{topology.spec.name} {'x'.join(map(str, topology.shape))} slice"
    wrapped = [n for n, w in zip(topology.axis_names, topology.wraparound) if w]
    if path is None:
        title = f"{name}: {topology.num_chips} chips, " + (
            f"wraparound on {' and '.join(wrapped)}" if wrapped else "no wraparound")
    else:
        hops = len(path) - 1
        title = f"{name}: {hops} hop{'' if hops == 1 else 's'} from {path[0]} to {path[-1]}"
        _draw_route(ax, path, at, lambda z1, z2: abs(z1 - z2) == 1 and z1 // cols == z2 // cols, Z,
                    stub, lw, cell_pt, label_ends=max(X, Y) <= 8)
    if Z > 1:
        title += "\nZ links join each chip to the same (x, y) in the next layer" + (
            f"; layer {Z - 1} wraps around to layer 0" if wrap[2] else "")
    ax.legend(loc="upper left", bbox_to_anchor=(0, 0), fontsize=7, frameon=False, ncol=2, markerscale=0.6)
    _schematic(ax, (points[:, 0].min() - 1.4, points[:, 0].max() + 1.0),
               (points[:, 1].min() - 1.4, points[:, 1].max() + (1.3 if Z > 1 else 0.8)), title)
    return _shown(ax, created)


def _draw_route(ax, path, at, side_by_side, n_z, stub, lw, cell_pt, label_ends):
    """The route as one red line (broken where a hop leaves one edge and re-enters another)
    and its chips highlighted. `side_by_side(z1, z2)`: whether two layers are drawn next to each other."""
    line = [at(path[0])]  # the route's points; NaN where it leaves one edge and re-enters another
    for p, q in zip(path, path[1:]):
        p3, q3 = tuple(p) + (0,) * (3 - len(p)), tuple(q) + (0,) * (3 - len(q))
        axis = next(i for i in range(3) if p3[i] != q3[i])
        a, b = at(p), at(q)
        if abs(p3[axis] - q3[axis]) == 1 and axis < 2:
            line += [b]
        elif axis < 2:  # a wraparound hop: leave the edge, re-enter the opposite one
            out = np.zeros(2)
            out[axis] = stub if q3[axis] < p3[axis] else -stub
            line += [a + out, np.full(2, np.nan), b - out, b]
        elif side_by_side(p3[2], q3[2]):  # a Z hop to the next layer drawn beside: a curve
            mid = (a + b) / 2 + (0, 0.35 + 0.05 * np.linalg.norm(b - a))
            t = np.linspace(0, 1, 30)[1:, None]
            line += list((1 - t) ** 2 * a + 2 * (1 - t) * t * mid + t**2 * b)
        else:  # a Z hop to a layer drawn elsewhere: leave up-right (+Z) or down-left (-Z), enter opposite
            forward = (q3[2] - p3[2]) % n_z == 1
            out = np.array([0.5, 0.5]) * (1 if forward else -1)  # ends in the gap between four chips
            line += [a + out, np.full(2, np.nan), b - out, b]
    xs, ys = np.array(line).T
    ax.plot(xs, ys, color=ROUTE_COLOR, linewidth=max(1.5, lw * 2.2), zorder=3, gid="route", label="route",
            solid_capstyle="round")
    points = np.array([at(c) for c in path])
    ax.scatter(points[:, 0], points[:, 1], s=(0.55 * cell_pt) ** 2, marker="s", facecolor=ROUTE_COLOR,
               edgecolor="white", zorder=4, gid="route-chips")
    for c, (x, y), dy in ((path[0], points[0], -1), (path[-1], points[-1], 1)) if label_ends else ():
        ax.annotate(str(tuple(c)), (x, y), textcoords="offset points", xytext=(0, dy * 0.45 * cell_pt + dy * 4),
                    ha="center", va="top" if dy < 0 else "bottom", fontsize=7, color=ROUTE_COLOR, zorder=5,
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))


# --- chapter 12: a GPU node and a fat tree -----------------------------------

def draw_gpu_node(chip: str | ChipSpec, *, ax=None):
    """One GPU node (one NVLink domain): its GPUs, NVSwitches, NVLinks and NICs.

    Every GPU links to every NVSwitch (gid ``"nvlink"``); for the 72 GPUs of
    GB200 NVL72 the links are drawn as one NVLink spine. Each NIC (gid ``"nic"``)
    takes one InfiniBand port of the node's egress. GPUs have gid ``"gpu"``,
    NVSwitches ``"nvswitch"``. Labels give the NVLink bandwidth per GPU and the
    node's egress from the registry; the NVSwitch counts come from
    ``NVSWITCHES_PER_NODE`` (NVIDIA's HGX/DGX data sheets).

    Args:
        chip: a GPU name or ChipSpec with an NVLink domain (a100, h100, h200, b200, gb200-nvl72).
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        12 (GPUs)

    Example:
        >>> ax = draw_gpu_node("h100")
        >>> ax.get_title()
        'h100 node: 8 GPUs joined by 4 NVSwitches'
    """
    from matplotlib.collections import LineCollection

    spec = _gpu_spec(chip, "a node diagram")
    if spec.name not in NVSWITCHES_PER_NODE:
        raise InvalidValueError(f"no NVSwitch count for {spec.name}; known for: {', '.join(NVSWITCHES_PER_NODE)}")
    node = gpu_cluster(1, spec)
    n_gpu, n_switch = node.gpus_per_node, NVSWITCHES_PER_NODE[spec.name]
    egress = spec.scale_out_bytes_per_s_per_node
    n_nic = node.ports_per_node if egress is not None else 0
    created = ax is None
    ax = _axes(ax, figsize=(8, 5.0 if n_gpu <= 8 else 6.0))
    W = 12.0  # width of the drawing; labels go to the right of it
    nvlink = fmt(node.nvlink_bytes_per_s_per_gpu, "B/s")

    if n_gpu <= 16:
        gw, gh, y_gpu, y_sw = W / n_gpu * 0.8, 1.0, 2.0, 5.4
        gpu_x = [W / n_gpu * (i + 0.1) for i in range(n_gpu)]
        for i, x in enumerate(gpu_x):
            _box(ax, x, y_gpu, gw, gh, f"GPU {i}\n{fmt(spec.hbm_bytes, 'B')}", color="#CFE8D5", gid="gpu", fontsize=7)
        sw_w = min(2.2, W / n_switch * 0.7)
        sw_x = [W / n_switch * (j + 0.5) - sw_w / 2 for j in range(n_switch)]
        for j, x in enumerate(sw_x):
            name = f"NVSwitch {j}" if n_switch <= 4 else f"NVSwitch\n{j}"
            _box(ax, x, y_sw, sw_w, 0.7, name, color="#F6D7A7", gid="nvswitch", fontsize=7)
        lines = [[(gx + gw / 2, y_gpu + gh), (sx + sw_w / 2, y_sw)] for gx in gpu_x for sx in sw_x]
        ax.add_collection(LineCollection(lines, colors="#76B041", linewidths=0.7, alpha=0.8, gid="nvlink"))
        gpu_label_y, nvlink_label_y, top = y_gpu + gh / 2, y_gpu + (y_sw - y_gpu) * 0.58, y_sw + 0.7
        nic_under = gpu_x if n_nic == n_gpu else None
    else:  # NVL72: 18 compute trays of 4 GPUs, 18 NVSwitch chips, an NVLink spine between them
        trays, per_tray = n_gpu // 4, 4
        step = W / trays
        gw, gh = step * 0.8, 0.36
        for t in range(trays):
            for r in range(per_tray):
                _box(ax, step * (t + 0.1), 0.9 + r * 0.45, gw, gh, color="#CFE8D5", gid="gpu")
        y_bus, y_sw = 3.25, 4.45
        sw_step = W / n_switch
        for j in range(n_switch):
            _box(ax, sw_step * (j + 0.1), y_sw, sw_step * 0.8, 0.6, color="#F6D7A7", gid="nvswitch")
        _box(ax, 0, y_bus, W, 0.22, color="#76B041", gid="nvlink-spine", edge="none")
        lines = [[(step * (t + 0.5), 0.9 + 3 * 0.45 + gh), (step * (t + 0.5), y_bus)] for t in range(trays)]
        lines += [[(sw_step * (j + 0.5), y_bus + 0.22), (sw_step * (j + 0.5), y_sw)] for j in range(n_switch)]
        ax.add_collection(LineCollection(lines, colors="#76B041", linewidths=1.0, gid="nvlink"))
        gpu_label_y, nvlink_label_y, top, y_gpu = 1.6, y_bus + 0.1, y_sw + 0.6, 0.9
        nic_under = None

    label = dict(fontsize=8, va="center", ha="left")
    ax.text(W + 0.3, (y_sw + 0.35), f"{n_switch} NVSwitches", **label)
    ax.text(W + 0.3, nvlink_label_y, f"NVLink {nvlink} per GPU\n(one direction),\n"
            "every GPU to every switch", **label)
    in_trays = f"\nin {n_gpu // 4} trays of 4" if n_gpu > 16 else ""
    ax.text(W + 0.3, gpu_label_y, f"{n_gpu} GPUs{in_trays},\n{fmt(spec.hbm_bytes, 'B')} HBM each", **label)

    bottom = y_gpu - (2.6 if n_nic else 1.4)
    if n_nic:
        y_nic = y_gpu - 1.1
        port = fmt(node.port_bytes_per_s, "B/s")
        if nic_under is not None:
            for i, x in enumerate(nic_under):
                _box(ax, x + gw * 0.15, y_nic, gw * 0.7, 0.45, "NIC", color="#E3DDF2", gid="nic", fontsize=7)
            ax.add_collection(LineCollection([[(x + gw / 2, y_nic + 0.45), (x + gw / 2, y_gpu)] for x in nic_under],
                                             colors="#555555", linewidths=0.8))
            nic_text = f"{n_nic} NICs × {port}\n(one per GPU, over PCIe)"
        else:
            _box(ax, W * 0.25, y_nic - 0.1, W * 0.5, 0.6, f"{n_nic} NICs × {port}", color="#E3DDF2", gid="nic")
            ax.plot([W / 2, W / 2], [y_nic + 0.5, y_gpu], color="#555555", linewidth=0.8)
            nic_text = "one InfiniBand port\nper GPU" if n_nic == n_gpu else f"{n_nic} InfiniBand ports"
        ax.text(W + 0.3, y_nic + 0.2, nic_text, **label)
        _box(ax, 0, bottom, W, 0.6, "InfiniBand network (fat tree, see draw_fat_tree)", color="#EEEEEE", fontsize=8)
        drops = [x + gw / 2 for x in nic_under] if nic_under is not None else [W * f for f in (0.3, 0.5, 0.7)]
        ax.add_collection(LineCollection([[(x, bottom + 0.6), (x, y_nic - (0 if nic_under is not None else 0.1))]
                                          for x in drops], colors="#555555", linewidths=1.0))
        ax.text(W + 0.3, bottom + 0.3, f"egress {fmt(egress, 'B/s')}\nper node", **label)
    else:
        _box(ax, 0, bottom, W, 0.6, f"network: no node egress figure for {spec.name} in the registry",
             color="#EEEEEE", fontsize=8)
    _schematic(ax, (-0.2, W + 4.2), (bottom - 0.2, top + 0.2),
               f"{spec.name} node: {n_gpu} GPUs joined by {n_switch} NVSwitches")
    return _shown(ax, created)


def draw_fat_tree(topology: GpuCluster, *, ax=None):
    """The InfiniBand fat tree of a GPU cluster: nodes, leaf switches, spine switches.

    Each level is a row of boxes (gids ``"node"``, ``"leaf"``, ``"spine"``) with its
    count beside it; a level of more than 16 is drawn as its first and last boxes
    around an ellipsis (gid ``"elided"``). Nodes link to the leaves of their
    scalable unit (one rail per port, as in NVIDIA's SuperPOD), every leaf to every
    spine. Labels give each node's ports and egress and the bandwidth per node
    through the spine.

    Args:
        topology: a :class:`GpuCluster` (from :func:`gpu_cluster`).
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        12 (GPUs)

    Example:
        >>> ax = draw_fat_tree(gpu_cluster(128, "h100"))
        >>> len([p for p in ax.patches if p.get_gid() == "spine"]) > 0
        True
    """
    from matplotlib.collections import LineCollection

    if not isinstance(topology, GpuCluster):
        hint = "; use draw_torus for a TpuSlice" if isinstance(topology, TpuSlice) else ""
        raise InvalidValueError(f"`topology` must be a GpuCluster (from gpu_cluster), got {topology!r}{hint}")
    created = ax is None
    ax = _axes(ax, figsize=(8, 4.4))
    W, height = 12.0, 0.55
    n_su = topology.num_scalable_units
    levels = [("node", topology.num_nodes, 0.0), ("leaf", topology.num_leaf_switches, 2.4),
              ("spine", topology.num_spine_switches, 4.6)]
    centres = {}
    for gid, count, y in levels:
        if count == 0:
            continue
        shown = list(range(count)) if count <= MAX_BOXES else list(range(MAX_BOXES - 3)) + [None, count - 2, count - 1]
        step = min(W / len(shown), W / 8)
        left = (W - step * len(shown)) / 2  # a short row is centred
        colour = {"node": "#CFE8D5", "leaf": "#F6D7A7", "spine": "#F2B8A2"}[gid]
        centres[gid] = {}
        for slot, i in enumerate(shown):
            x = left + step * slot + step * 0.1
            if i is None:
                ax.text(x + step * 0.4, y + height / 2, "…", ha="center", va="center", fontsize=12, gid="elided")
                continue
            _box(ax, x, y, step * 0.8, height, str(i), color=colour, gid=gid, fontsize=7 if count < 100 else 6)
            centres[gid][i] = (x + step * 0.4, y)

    per_su_leaves = math.ceil(topology.num_leaf_switches / n_su) if topology.num_leaf_switches else 0
    up, down = [], []
    for n, (nx, ny) in centres.get("node", {}).items():
        su = n // topology.nodes_per_scalable_unit
        for leaf, (lx, ly) in centres.get("leaf", {}).items():
            if topology.levels == 1 or leaf // per_su_leaves == su:
                down.append([(nx, ny + height), (lx, ly)])
    for (lx, ly) in centres.get("leaf", {}).values():
        for (sx, sy) in centres.get("spine", {}).values():
            up.append([(lx, ly + height), (sx, sy)])
    ax.add_collection(LineCollection(down, colors="#76B041", linewidths=0.5, alpha=0.6, zorder=0, gid="node-links"))
    ax.add_collection(LineCollection(up, colors="#C0392B", linewidths=0.5, alpha=0.5, zorder=0, gid="spine-links"))

    label = dict(fontsize=8, va="center", ha="left")
    nodes_text = f"{topology.num_nodes} node{'s' if topology.num_nodes > 1 else ''} × {topology.gpus_per_node} GPUs"
    if n_su > 1:
        nodes_text += f"\n({n_su} scalable units of {topology.nodes_per_scalable_unit})"
    ax.text(W + 0.3, height / 2, nodes_text, **label)
    egress = fmt(topology.node_egress_bytes_per_s, "B/s")
    if topology.levels == 0:
        ax.text(W / 2, 2.0, "one node: no InfiniBand switches\n(its GPUs talk over NVLink)", ha="center", fontsize=9)
        top = 3.0
    else:
        ax.text(W + 0.3, 2.4 + height / 2, f"{topology.num_leaf_switches} leaf switch"
                f"{'es' if topology.num_leaf_switches > 1 else ''}", **label)
        ax.text(W + 0.3, 1.45, f"{topology.ports_per_node} ports × {fmt(topology.port_bytes_per_s, 'B/s')}\n"
                f"= egress {egress} per node", **label)
        top = 2.4 + height
    if topology.levels >= 2:
        spine_text = f"{topology.num_spine_switches} spine switches"
        if topology.levels > 2:
            spine_text = f"{topology.num_spine_switches} spine + core switches\n({topology.levels}-level tree, drawn as one level)"
        ax.text(W + 0.3, 4.6 + height / 2, spine_text, **label)
        through = fmt(topology.egress_bytes_per_s_per_node(level="spine"), "B/s")
        kind = "non-blocking" if topology.oversubscription == 1 else f"{fmt(topology.oversubscription)}:1 oversubscribed"
        ax.text(W + 0.3, 3.75, f"{kind}: {through}\nper node through the spine", **label)
        top = 4.6 + height
    title = (f"{topology.spec.name} cluster: {topology.num_nodes} node{'s' if topology.num_nodes > 1 else ''}, "
             f"{topology.num_gpus} GPUs, {topology.levels}-level InfiniBand fat tree")
    _schematic(ax, (-0.2, W + 4.4), (-0.4, top + 0.3), title)
    return _shown(ax, created)


# --- chapters 2 and 12: one chip --------------------------------------------

def draw_chip(chip: str | ChipSpec, *, ax=None):
    """A block diagram of one chip, every figure from the registry.

    A TPU: its TensorCore(s) (gid ``"tensorcore"``), each with its MXUs
    (``mxu_size`` × ``mxu_size`` systolic arrays), VPU and VMEM (size when the
    registry has it); HBM (size and bandwidth), ICI links (count and bandwidth)
    and PCIe to the host. A GPU: its grid of SMs (gid ``"sm"``, one square each),
    one SM enlarged (tensor cores, registers, SMEM, TMEM on Blackwell), L2, HBM
    and NVLink. Counts the registry lacks (MXUs per TensorCore, tensor cores per
    SM) are drawn as a group without a number.

    Args:
        chip: a TPU or GPU name, or a ChipSpec.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        2 (TPUs), 12 (GPUs)

    Example:
        >>> ax = draw_chip("tpu-v5e")
        >>> "tpu-v5e" in ax.get_title()
        True
    """
    spec = _chip(chip)
    if spec.family == "tpu":
        return _shown(_draw_tpu_chip(spec, _axes(ax, figsize=(8, 4.8))), ax is None)
    if spec.family == "gpu":
        return _shown(_draw_gpu_chip(spec, _axes(ax, figsize=(8, 4.8))), ax is None)
    raise InvalidValueError(f"`chip` must be a TPU or a GPU for a block diagram, got {spec.name} ({spec.family})")


def _rate(spec: ChipSpec) -> str:
    for dtype, field in (("bf16", "bf16_flops_per_s"), ("fp16", "fp16_flops_per_s"), ("f32", "f32_flops_per_s")):
        if getattr(spec, field) is not None:
            return f"{fmt(getattr(spec, field), 'FLOP/s')} {dtype}"
    return "no published peak"


def _arrow(ax, start, end, text="", both=True, **text_kw):
    ax.annotate("", end, start, arrowprops=dict(arrowstyle="<->" if both else "->", color="#444444", lw=1.2))
    if text:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(*mid, text, fontsize=7.5, bbox=dict(facecolor="white", edgecolor="none", pad=1), **text_kw)


def _draw_tpu_chip(spec: ChipSpec, ax):
    cores = spec.cores or 1
    die_x, die_y, die_w, die_h = 0.0, 1.6, 9.0, 5.2
    _box(ax, die_x, die_y, die_w, die_h, color="#F4F6F8")
    ax.text(die_x + 0.15, die_y + die_h - 0.2, f"{spec.name} chip", fontsize=9, va="top", weight="bold")
    core_w = (die_w - 0.4 - 0.3 * (cores - 1)) / cores
    mxu = f"{spec.mxu_size}×{spec.mxu_size}" if spec.mxu_size else "systolic"
    vmem = f"VMEM\n{_bytes(spec.fast_mem_bytes_per_core)}" if spec.fast_mem_bytes_per_core else "VMEM"
    for k in range(cores):
        x = die_x + 0.2 + k * (core_w + 0.3)
        _box(ax, x, die_y + 0.2, core_w, die_h - 0.75, color="#DDE6F0", gid="tensorcore")
        ax.text(x + 0.12, die_y + die_h - 0.7, "TensorCore" + (f" {k}" if cores > 1 else ""), fontsize=8, va="center")
        inner_w = core_w - 0.3
        _box(ax, x + 0.15, die_y + 2.35, inner_w, 1.75, f"MXUs\n{mxu} systolic arrays\n(matmuls)", color="#B9D3EE",
             gid="mxu", fontsize=7.5)
        half = (inner_w - 0.15) / 2
        _box(ax, x + 0.15, die_y + 0.4, half, 1.75, "VPU\n(vector\nunit)", color="#C8E6C9", gid="vpu", fontsize=7.5)
        _box(ax, x + 0.3 + half, die_y + 0.4, half, 1.75, vmem, color="#FFE0B2", gid="vmem", fontsize=7.5)

    _box(ax, 10.6, die_y + 1.6, 2.6, 2.0, f"HBM\n{fmt(spec.hbm_bytes, 'B')}", color="#F8D7DA", gid="hbm", fontsize=8)
    _arrow(ax, (die_x + die_w, die_y + 2.6), (10.6, die_y + 2.6))
    ax.text(9.8, die_y + 2.75, fmt(spec.hbm_bytes_per_s, "B/s"), fontsize=7.5, ha="center", va="bottom")

    if spec.ici_links_per_chip:
        ici = (f"ICI: {spec.ici_links_per_chip} links × {fmt(spec.ici_link_bytes_per_s_one_way, 'B/s')} one-way\n"
               f"({fmt(spec.ici_link_bytes_per_s_bidirectional, 'B/s')} bidirectional) to neighbour chips")
        for f in np.linspace(0.1, 0.9, spec.ici_links_per_chip):  # one arrow per link
            ax.annotate("", (die_x + die_w * f, die_y + die_h + 0.55), (die_x + die_w * f, die_y + die_h),
                        arrowprops=dict(arrowstyle="<->", color="#E08E0B", lw=1.2))
        ax.text(die_x + die_w / 2, die_y + die_h + 0.65, ici, ha="center", va="bottom", fontsize=8, gid="ici")
    host = f"PCIe {fmt(spec.pcie_bytes_per_s, 'B/s')}" if spec.pcie_bytes_per_s else "PCIe"
    _box(ax, die_x + die_w / 2 - 1.5, 0.0, 3.0, 0.7, "host CPU", color="#EEEEEE", gid="host", fontsize=8)
    _arrow(ax, (die_x + die_w / 2, 0.7), (die_x + die_w / 2, die_y))
    ax.text(die_x + die_w / 2 + 0.15, 1.15, host, fontsize=7.5, va="center")
    core_word = "TensorCore" if cores == 1 else "TensorCores"
    _schematic(ax, (-0.2, 13.4), (-0.2, die_y + die_h + 1.6),
               f"{spec.name}: {cores} {core_word}, {_rate(spec)}")
    return ax


def _draw_gpu_chip(spec: ChipSpec, ax):
    n_sm = spec.cores or 1
    die_x, die_w = 0.0, 8.2
    # the SMs: a grid in two halves around the L2, as on the die
    cols = math.ceil(math.sqrt(n_sm * 2.2))
    rows = math.ceil(n_sm / cols)
    top_rows = math.ceil(rows / 2)
    cell = min((die_w - 0.4) / cols, 3.6 / rows)
    grid_w = cell * cols
    x0 = die_x + (die_w - grid_w) / 2
    l2_y, l2_h = 0.3 + (rows - top_rows) * cell + 0.1, 0.7
    die_h = l2_y + l2_h + 0.1 + top_rows * cell + 0.7
    _box(ax, die_x, 0.0, die_w, die_h, color="#F4F6F8")
    ax.text(die_x + 0.15, die_h - 0.15, f"{spec.name} die: {n_sm} SMs", fontsize=9, va="top", weight="bold")
    for i in range(n_sm):
        r, c = divmod(i, cols)
        y = l2_y + l2_h + 0.1 + (top_rows - 1 - r) * cell if r < top_rows else l2_y - 0.1 - (r - top_rows + 1) * cell
        _box(ax, x0 + c * cell + cell * 0.08, y + cell * 0.08, cell * 0.84, cell * 0.84, color="#CFE8D5", gid="sm",
             edge="#5B8C5A")
    l2 = f"L2 cache {_bytes(spec.l2_bytes)}" if spec.l2_bytes else "L2 cache"
    _box(ax, x0, l2_y, grid_w, l2_h, l2, color="#FFE0B2", gid="l2", fontsize=8)

    # one SM, enlarged
    sx, sw, sh = 9.4, 3.4, 4.0
    sy = die_h - sh
    _box(ax, sx, sy, sw, sh, color="#E8F5E9", edge="#5B8C5A")
    ax.text(sx + 0.12, sy + sh - 0.12, f"one SM (of {n_sm})", fontsize=8, va="top", weight="bold")
    parts = [("tensor cores\n(matmuls)", "#B9D3EE"), ("CUDA cores\n(vector, scalar)", "#C8E6C9")]
    parts.append((f"registers {_bytes(spec.registers_bytes_per_core)}" if spec.registers_bytes_per_core
                  else "registers", "#E3DDF2"))
    parts.append((f"SMEM / L1 {_bytes(spec.fast_mem_bytes_per_core)}" if spec.fast_mem_bytes_per_core
                  else "SMEM / L1", "#FFE0B2"))
    if spec.tmem_bytes_per_core:
        parts.append((f"TMEM {_bytes(spec.tmem_bytes_per_core)}", "#F8D7DA"))
    h = (sh - 0.65) / len(parts)
    for k, (text, colour) in enumerate(parts):
        _box(ax, sx + 0.15, sy + sh - 0.5 - (k + 1) * h + 0.08, sw - 0.3, h - 0.12, text, color=colour, fontsize=7.5)
    corner = (x0 + cell * cols, l2_y + l2_h + 0.1 + top_rows * cell)
    ax.plot([corner[0] - cell * 0.1, sx], [corner[1] - cell * 0.9, sy + sh], color="#5B8C5A", lw=0.7, ls=":")
    ax.plot([corner[0] - cell * 0.1, sx], [corner[1] - cell * 0.1, sy + sh], color="#5B8C5A", lw=0.7, ls=":")

    # HBM below, NVLink to the side
    _box(ax, die_x + 1.0, -2.0, die_w - 2.0, 0.8, f"HBM {fmt(spec.hbm_bytes, 'B')}", color="#F8D7DA", gid="hbm")
    _arrow(ax, (die_w / 2, -1.2), (die_w / 2, 0.0))
    ax.text(die_w / 2 + 0.15, -0.6, fmt(spec.hbm_bytes_per_s, "B/s"), fontsize=7.5, va="center")
    if spec.scale_up_bytes_per_s_per_gpu:
        nvlink = f"NVLink {fmt(spec.scale_up_bytes_per_s_per_gpu, 'B/s')}\n(one direction) to NVSwitches"
    else:
        nvlink = "no NVLink figure\nin the registry"
    _arrow(ax, (die_w, 0.4), (die_w + 1.0, 0.4), both=True)
    ax.text(die_w + 1.15, 0.4, nvlink, fontsize=7.5, va="center", gid="nvlink")
    _schematic(ax, (-0.2, 13.2), (-2.2, die_h + 0.2), f"{spec.name}: {n_sm} SMs, {_rate(spec)}")
    return ax


# --- chapters 2 and 12: the spec comparison ---------------------------------

def plot_spec_comparison(chips: Iterable[str | ChipSpec] | None = None, *,
                         fields: Sequence[str] = ("bf16_flops_per_s", "hbm_bytes_per_s", "hbm_bytes"), ax=None):
    """Bars of each chip's figures, one panel per field, on log y axes.

    TPUs are blue, GPUs green and hatched; a chip without a figure for a field
    (V100 has no bf16) gets no bar and an "n/a" (gid ``"missing"``). Each bar is
    labelled with its value through :func:`fmt`.

    Args:
        chips: chip names or ChipSpecs; every TPU and GPU of the registry when None.
        fields: ChipSpec fields to compare, any of ``SPEC_FIELDS``.
        ax: an Axes (one field) or a sequence of Axes (one per field); a new figure when None.

    Returns:
        The Axes when there is one field, else the Figure holding one panel per field.

    Chapter:
        2 (TPUs), 12 (GPUs)

    Example:
        >>> ax = plot_spec_comparison(["tpu-v5e", "h100"], fields="hbm_bytes_per_s")
        >>> ax.get_ylabel().splitlines()
        ['HBM bandwidth', '(bytes/s)']
    """
    import matplotlib.pyplot as plt

    if isinstance(fields, str):
        fields = (fields,)
    if not isinstance(fields, (list, tuple)) or not fields:
        raise InvalidValueError(f"`fields` must be one or more of {', '.join(SPEC_FIELDS)}, got {shown(fields)}")
    for field in fields:
        if not isinstance(field, str) or field not in SPEC_FIELDS:
            raise unknown("spec field", field, SPEC_FIELDS, arg="fields")
    specs = _chip_list(chips, default=tuple(_chips("tpu")) + tuple(_chips("gpu")))
    if ax is None:
        fig, axes = plt.subplots(len(fields), 1, figsize=(6.2, 2.6 * len(fields)), sharex=True, squeeze=False)
        axes = list(axes[:, 0])
    else:
        from matplotlib.axes import Axes

        axes = [ax] if not isinstance(ax, (list, tuple, np.ndarray)) else list(np.ravel(ax))
        if not all(isinstance(a, Axes) for a in axes):
            raise InvalidValueError(f"`ax` must be a matplotlib Axes (or one per field), got {shown(ax)}")
        if len(axes) != len(fields):
            raise InvalidValueError(f"`ax` must be one Axes per field ({len(fields)}), got {len(axes)}")
        fig = axes[0].figure

    x = np.arange(len(specs))
    for panel, field in zip(axes, fields):
        what, unit, axis_unit = SPEC_FIELDS[field]
        values = [getattr(s, field) for s in specs]
        known = [v for v in values if v is not None]
        for family, style in FAMILY_STYLE.items():
            idx = [i for i, (s, v) in enumerate(zip(specs, values)) if s.family == family and v is not None]
            if idx:
                panel.bar(x[idx], [values[i] for i in idx], color=style["color"], hatch=style["hatch"],
                          edgecolor="white", label=family.upper(), gid=field)
        panel.set_yscale("log")
        if known:
            panel.set_ylim(min(known) / 4, max(known) * 12)
        for i, v in enumerate(values):
            if v is None:
                panel.text(x[i], 0.04, "n/a", transform=panel.get_xaxis_transform(), ha="center", fontsize=7,
                           color="#888888", gid="missing")
            else:
                text = fmt(v, unit) if unit in ("B", "B/s") else fmt(v)
                panel.text(x[i], v * 1.15, text, ha="center", va="bottom", fontsize=6.5, rotation=90)
        panel.set_ylabel(f"{what}\n({axis_unit})", fontsize=8)
        panel.grid(True, axis="y", which="major", alpha=0.3)
        panel.tick_params(axis="y", labelsize=7)
    axes[-1].set_xticks(x, [s.name for s in specs], rotation=40, ha="right", fontsize=8)
    for panel in axes[:-1]:
        panel.tick_params(axis="x", labelbottom=False)
    handles = {}
    for panel in axes:
        for h, label in zip(*panel.get_legend_handles_labels()):
            handles.setdefault(label, h)
    axes[0].legend(handles.values(), handles.keys(), fontsize=8, loc="upper left")
    families = " and ".join(f.upper() for f in FAMILY_STYLE if any(s.family == f for s in specs)) or "chip"
    axes[0].set_title(f"{families} generations, per chip" if len(fields) > 1
                      else f"{SPEC_FIELDS[fields[0]][0]} per chip", fontsize=10)
    if ax is None:
        fig.tight_layout()
    if ax is None:
        _legible(fig)
    return axes[0] if len(fields) == 1 else fig
