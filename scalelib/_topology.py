"""Topologies as data with behaviour (chapters 2 and 12).

* :class:`TpuSlice`: chips on a 2D or 3D grid joined by ICI links to their
  neighbours, with wraparound links on the axes that span the whole pod (a torus
  on those axes, a mesh on the others), hosts of a few chips, DCN between slices.
* :class:`GpuCluster`: GPUs in nodes (an NVLink/NVSwitch domain of 8, or 72 for
  GB200 NVL72), nodes joined by a non-blocking InfiniBand fat tree of leaf and
  spine switches, grouped in scalable units.

Each knows its size, its whole-system totals, and what collectives need:
per-axis bandwidths, hop counts, node egress. Figures come from the chip registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._derivation import plain, q, result
from ._errors import InvalidValueError, require_nonnegative, require_positive
from ._specs import ChipSpec, chip as _chip
from ._units import fmt

AXIS_NAMES = ("X", "Y", "Z")
#: Latency of one ICI hop, about 1 µs (How to Scale Your Model, ch. 2).
ICI_HOP_LATENCY_S = 1e-6


def _whole_positive_ints(name: str, values) -> tuple[int, ...]:
    try:
        items = tuple(values)
    except TypeError:
        raise InvalidValueError(f"`{name}` must be a sequence of whole numbers, got {values!r}") from None
    if not items or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in items):
        raise InvalidValueError(f"`{name}` must be whole numbers >= 1, got {values!r}")
    return tuple(int(v) for v in items)


class _Totals:
    """Whole-system totals of a topology with `num_chips` chips of `spec` (chapters 2 and 12)."""

    def total_flops_per_s(self, dtype: str = "bf16", *, explain: bool = False):
        """Peak FLOP/s of all chips together: chips · C."""
        C = self.spec.flops_per_s(dtype)
        return result(explain, f"C_total({dtype})", "chips · C", f"{self.num_chips} · {q(C, 'FLOP/s')}",
                      self.num_chips * C, "FLOP/s")

    def total_hbm(self, *, explain: bool = False):
        """HBM of all chips together: chips · HBM per chip (bytes)."""
        per_chip = self.spec.hbm_bytes
        return result(explain, "HBM_total", "chips · HBM per chip", f"{self.num_chips} · {q(per_chip, 'B')}",
                      self.num_chips * per_chip, "B")

    @property
    def total_hbm_bytes(self) -> float:
        return self.total_hbm()


@dataclass(frozen=True)
class TpuSlice(_Totals):
    """A slice of a TPU pod: `shape` chips along axes X, Y (, Z), with ICI links between neighbours.

    Build one with :func:`tpu_slice` (which checks the shape against the pod).
    ``wraparound[i]`` says whether axis i closes into a ring.
    """

    spec: ChipSpec
    shape: tuple[int, ...]
    wraparound: tuple[bool, ...]

    def __repr__(self) -> str:
        axes = ", ".join(f"{n}={s}{'↻' if w else ''}" for n, s, w in zip(AXIS_NAMES, self.shape, self.wraparound))
        return f"TpuSlice({self.spec.name}, {axes}; {self.num_chips} chips)"

    @property
    def num_chips(self) -> int:
        return math.prod(self.shape)

    @property
    def axis_names(self) -> tuple[str, ...]:
        return AXIS_NAMES[: len(self.shape)]

    @property
    def num_hosts(self) -> int:
        """Hosts (CPU machines) driving the slice; a slice smaller than a host still needs one."""
        return max(1, math.ceil(self.num_chips / math.prod(self.spec.host_shape)))

    def axis_index(self, axis) -> int:
        """Index of `axis` given by name ("X", "Y", "Z") or index."""
        if isinstance(axis, str) and axis.upper() in self.axis_names:
            return self.axis_names.index(axis.upper())
        if isinstance(axis, (int, np.integer)) and 0 <= axis < len(self.shape):
            return int(axis)
        raise InvalidValueError(
            f"unknown axis {axis!r} of {self!r}: expected one of {', '.join(self.axis_names)} "
            f"(or an index 0..{len(self.shape) - 1})"
        )

    def axes(self, axes=None) -> tuple[int, ...]:
        """Indices of `axes` (all when None), each at most once."""
        if axes is None:
            return tuple(range(len(self.shape)))
        if isinstance(axes, (str, int, np.integer)):
            axes = (axes,)
        indices = [self.axis_index(a) for a in axes]
        for i in set(indices):
            if indices.count(i) > 1:
                raise InvalidValueError(f"axis {self.axis_names[i]!r} is given twice in {tuple(axes)!r}; use each axis at most once")
        return tuple(indices)

    def axis_bytes_per_s(self, axis) -> float:
        """Bandwidth one chip has along `axis` for a collective: bidirectional per link
        (both ring directions) with wraparound, one-way per link without it."""
        i = self.axis_index(axis)
        if self.shape[i] == 1:
            return 0.0
        if self.wraparound[i]:
            return self.spec.ici_link_bytes_per_s_bidirectional
        return self.spec.ici_link_bytes_per_s_one_way

    # --- routing -------------------------------------------------------------
    def _coords(self, name: str, coords) -> tuple[int, ...]:
        try:
            coords = tuple(coords)
        except TypeError:
            raise InvalidValueError(f"`{name}` must be {len(self.shape)} coordinates within {self.shape}, got {coords!r}") from None
        if len(coords) != len(self.shape) or not all(
            isinstance(c, (int, np.integer)) and 0 <= c < s for c, s in zip(coords, self.shape)
        ):
            raise InvalidValueError(
                f"`{name}` must be {len(self.shape)} coordinates within {self.shape}, got {coords!r}"
            )
        return tuple(int(c) for c in coords)

    def hops(self, a, b) -> int:
        """ICI hops between chips `a` and `b` (coordinates): per axis |Δ|, or
        min(|Δ|, n − |Δ|) on an axis with wraparound. Wraparound never adds hops."""
        a, b = self._coords("a", a), self._coords("b", b)
        total = 0
        for x, y, n, wrap in zip(a, b, self.shape, self.wraparound):
            d = abs(x - y)
            total += min(d, n - d) if wrap else d
        return total

    def route(self, a, b) -> list[tuple[int, ...]]:
        """The chips a shortest dimension-ordered route visits from `a` to `b`, both included."""
        a, b = self._coords("a", a), self._coords("b", b)
        path, here = [a], list(a)
        for i, (n, wrap) in enumerate(zip(self.shape, self.wraparound)):
            if wrap:
                forward = (b[i] - here[i]) % n
                steps, step = (forward, 1) if forward <= n - forward else (n - forward, -1)
            else:
                steps, step = abs(b[i] - here[i]), (1 if b[i] >= here[i] else -1)
            for _ in range(steps):
                here[i] = (here[i] + step) % n
                path.append(tuple(here))
        return path

    def max_hops(self) -> int:
        """The diameter: the most hops between any two chips."""
        return sum(n // 2 if w else n - 1 for n, w in zip(self.shape, self.wraparound))

    def p2p_time_s(self, nbytes, a, b, hop_latency_s: float = ICI_HOP_LATENCY_S, *, explain: bool = False):
        """Time to send `nbytes` from chip `a` to chip `b`: hops × T_hop + bytes / W_link (one-way)."""
        require_nonnegative(nbytes=nbytes)
        h = self.hops(a, b)
        W = self.spec.ici_link_bytes_per_s_one_way
        value = h * hop_latency_s + np.asarray(nbytes, dtype=float) / W if h else 0.0 * np.asarray(nbytes, dtype=float)
        value = plain(value)
        return result(explain, "T_p2p", "hops · T_hop + bytes / W_link",
                      f"{h} · {q(hop_latency_s, 's')} + {q(nbytes, 'B')} / {q(W, 'B/s')}", value, "s")

    # --- totals (and total_flops_per_s, total_hbm from _Totals) ---------------
    @property
    def total_hbm_bytes_per_s(self) -> float:
        return self.num_chips * self.spec.hbm_bytes_per_s

    @property
    def bisection_bytes_per_s(self) -> float:
        """Bandwidth across the worst cut into two halves (cutting the longest axis),
        counting both directions of every cut link: rings × (2 with wraparound) × W_bidirectional."""
        best = math.inf
        for n, wrap in zip(self.shape, self.wraparound):
            if n == 1:
                continue
            links = (self.num_chips // n) * (2 if wrap else 1)
            best = min(best, links * self.spec.ici_link_bytes_per_s_bidirectional)
        return 0.0 if best == math.inf else best

    @property
    def dcn_bytes_per_s(self) -> float:
        """The slice's bandwidth to other slices over the data-center network."""
        if self.spec.dcn_bytes_per_s_per_chip is None:
            raise InvalidValueError(f"{self.spec.name} has no published DCN bandwidth")
        return self.num_chips * self.spec.dcn_bytes_per_s_per_chip

    def summary(self) -> str:
        return (f"{self!r}: {fmt(self.total_flops_per_s(), 'FLOP/s')} bf16, {fmt(self.total_hbm_bytes, 'B')} HBM, "
                f"bisection {fmt(self.bisection_bytes_per_s, 'B/s')}, {self.num_hosts} host(s)")


def tpu_slice(chip: str | ChipSpec, shape, wraparound=None) -> TpuSlice:
    """A slice of `shape` chips (e.g. ``(4, 4)`` of TPU v5e, ``(4, 4, 8)`` of v5p). Chapter 2.

    On 2D pods (v5e, v6e) an axis has wraparound links when it spans the pod's
    whole axis (16 chips). On 3D pods built of 4x4x4 cubes joined by optical
    switches (v4p, v5p, TPU7x) a slice made of whole cubes wraps on every axis and a
    smaller one on none (How to Scale Your Model, ch. 2). Pass `wraparound` (one
    bool per axis) to turn links off. A slice cannot outgrow the pod on any axis.

    >>> tpu_slice("tpu-v5e", (16, 16))
    TpuSlice(tpu-v5e, X=16↻, Y=16↻; 256 chips)
    """
    spec = _chip(chip)
    if spec.family != "tpu":
        raise InvalidValueError(f"`chip` must be a TPU for a slice, got {spec.name} ({spec.family}); use gpu_cluster for GPUs")
    shape = _whole_positive_ints("shape", shape)
    pod = spec.pod_shape
    if len(shape) != len(pod):
        raise InvalidValueError(f"a {spec.name} slice has {len(pod)} axes (its pod is {'x'.join(map(str, pod))}), got shape {shape}")
    for name, n, full in zip(AXIS_NAMES, shape, pod):
        if n > full:
            raise InvalidValueError(
                f"axis {name} of a {spec.name} slice can have at most {full} chips (the pod is "
                f"{'x'.join(map(str, pod))}), got {n}"
            )
    cube = spec.wraparound_cube
    if cube:  # optical switches close the rings of any slice made of whole cubes
        whole_cubes = all(n % cube == 0 for n in shape)
        can_wrap = tuple(whole_cubes and n > 2 for n in shape)
    else:
        can_wrap = tuple(n == full and n > 2 for n, full in zip(shape, pod))
    if wraparound is None:
        wrap = can_wrap
    else:
        scalar = isinstance(wraparound, (bool, np.bool_))
        wrap = (bool(wraparound),) * len(shape) if scalar else tuple(bool(w) for w in wraparound)
        if len(wrap) != len(shape):
            raise InvalidValueError(f"`wraparound` needs one bool per axis ({len(shape)}), got {wraparound!r}")
        for name, w, ok, n, full in zip(AXIS_NAMES, wrap, can_wrap, shape, pod):
            if w and not ok:
                need = (f"a slice of whole {cube}x{cube}x{cube} cubes (every axis a multiple of {cube}), "
                        f"got {'x'.join(map(str, shape))}" if cube else f"the full axis of {full}")
                raise InvalidValueError(f"axis {name} of {n} chips cannot wrap around: wraparound needs {need}")
    return TpuSlice(spec, shape, wrap)


def tpu_pod(chip: str | ChipSpec) -> TpuSlice:
    """The whole pod of `chip`: ``tpu_pod("tpu-v5p").num_chips == 8960``. Chapter 2."""
    spec = _chip(chip)
    if spec.family != "tpu":
        raise InvalidValueError(f"`chip` must be a TPU for a pod, got {spec.name} ({spec.family})")
    return tpu_slice(spec, spec.pod_shape)


# --- GPUs ---------------------------------------------------------------------

#: InfiniBand NDR port: 400 Gb/s = 50e9 bytes/s per direction (NVIDIA Quantum-2 data sheet).
IB_PORT_BYTES_PER_S = 50e9
#: Ports of an InfiniBand NDR switch (NVIDIA Quantum-2 QM9700: 64 ports of 400 Gb/s).
IB_SWITCH_PORTS = 64
#: Nodes in a scalable unit of an NVIDIA DGX SuperPOD, by GPUs per node: 32 nodes of 8 GPUs
#: (256 GPUs, 8 leaf switches; DGX H100 SuperPOD reference architecture), or 8 racks of 72
#: GPUs (576 GPUs; DGX GB200 SuperPOD reference architecture).
NODES_PER_SCALABLE_UNIT = {8: 32, 72: 8}


@dataclass(frozen=True)
class GpuCluster(_Totals):
    """GPUs in nodes (NVLink/NVSwitch domains) joined by a fat tree of InfiniBand switches.

    Build one with :func:`gpu_cluster`. A node is one scale-up domain: 8 GPUs for
    A100/H100/H200/B200 servers, 72 for GB200 NVL72. The fat tree is non-blocking
    (as in NVIDIA's SuperPOD designs) unless `oversubscription` > 1, which divides
    the bandwidth leaving each leaf switch upwards.
    """

    spec: ChipSpec
    num_nodes: int
    switch_ports: int = IB_SWITCH_PORTS
    port_bytes_per_s: float = IB_PORT_BYTES_PER_S
    oversubscription: float = 1.0

    def __repr__(self) -> str:
        return f"GpuCluster({self.spec.name}, {self.num_nodes} node(s) x {self.gpus_per_node} GPUs = {self.num_gpus} GPUs)"

    @property
    def gpus_per_node(self) -> int:
        return self.spec.scale_up_domain

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def num_chips(self) -> int:
        return self.num_gpus

    @property
    def nvlink_bytes_per_s_per_gpu(self) -> float:
        """NVLink bandwidth of one GPU into its NVSwitch domain, one direction."""
        return self.spec.scale_up_bytes_per_s_per_gpu

    @property
    def node_egress_bytes_per_s(self) -> float:
        """InfiniBand bandwidth out of one node, one direction."""
        if self.spec.scale_out_bytes_per_s_per_node is None:
            raise InvalidValueError(f"{self.spec.name} has no published scale-out (node egress) bandwidth")
        return self.spec.scale_out_bytes_per_s_per_node

    @property
    def ports_per_node(self) -> int:
        """InfiniBand ports a node needs for its egress (8 for an H100 node: one per GPU, a 'rail' each)."""
        return math.ceil(self.node_egress_bytes_per_s / self.port_bytes_per_s)

    @property
    def nodes_per_scalable_unit(self) -> int:
        return NODES_PER_SCALABLE_UNIT.get(self.gpus_per_node, 32)

    @property
    def num_scalable_units(self) -> int:
        return math.ceil(self.num_nodes / self.nodes_per_scalable_unit)

    @property
    def levels(self) -> int:
        """Switch levels of the fat tree: 0 for one node, else the fewest levels L with
        2·(k/2)^L ≥ node ports (k ports per switch)."""
        if self.num_nodes == 1:
            return 0
        ports, half = self.num_nodes * self.ports_per_node, self.switch_ports // 2
        levels = 1
        while 2 * half**levels < ports:
            levels += 1
        return max(levels, 2) if ports > self.switch_ports else levels

    @property
    def num_leaf_switches(self) -> int:
        if self.levels == 0:
            return 0
        ports = self.num_nodes * self.ports_per_node
        return math.ceil(ports / (self.switch_ports // 2)) if self.levels > 1 else 1

    @property
    def num_spine_switches(self) -> int:
        """Switches above the leaves (spine, and core in a three-level tree)."""
        if self.levels < 2:
            return 0
        ports = self.num_nodes * self.ports_per_node
        top = math.ceil(ports / self.switch_ports)
        middle = math.ceil(ports / (self.switch_ports // 2)) * (self.levels - 2)
        return top + middle

    def egress_bytes_per_s_per_node(self, level: str = "spine") -> float:
        """Bandwidth per node, one direction, through the `level` ("leaf" or "spine") of the tree."""
        if level not in ("leaf", "spine"):
            raise InvalidValueError(f"`level` must be 'leaf' or 'spine', got {level!r}")
        egress = self.node_egress_bytes_per_s
        return egress if level == "leaf" else egress / self.oversubscription

    @property
    def bisection_bytes_per_s(self) -> float:
        """Bandwidth across the worst cut into two halves, both directions: inside one node
        the NVSwitches give every GPU its full NVLink bandwidth; across nodes the
        non-blocking tree gives every node its egress (divided by the oversubscription)."""
        if self.num_nodes == 1:
            return self.gpus_per_node * self.nvlink_bytes_per_s_per_gpu
        return self.num_nodes * self.egress_bytes_per_s_per_node("spine")

    def summary(self) -> str:
        return (f"{self!r}: {fmt(self.total_flops_per_s(), 'FLOP/s')} bf16, {fmt(self.total_hbm_bytes, 'B')} HBM, "
                f"{self.num_leaf_switches} leaf and {self.num_spine_switches} spine switches, "
                f"bisection {fmt(self.bisection_bytes_per_s, 'B/s')}")


def gpu_cluster(chip: str | ChipSpec, num_nodes: int = 1, *, switch_ports: int = IB_SWITCH_PORTS,
                port_bytes_per_s: float = IB_PORT_BYTES_PER_S, oversubscription: float = 1.0) -> GpuCluster:
    """`num_nodes` GPU nodes of `chip` joined by an InfiniBand fat tree. Chapter 12.

    >>> gpu_cluster("h100", 32)   # one scalable unit of a DGX H100 SuperPOD
    GpuCluster(h100, 32 node(s) x 8 GPUs = 256 GPUs)
    """
    spec = _chip(chip)
    if spec.family != "gpu":
        raise InvalidValueError(f"`chip` must be a GPU for a GPU cluster, got {spec.name} ({spec.family}); use tpu_slice for TPUs")
    if spec.scale_up_domain is None:
        raise InvalidValueError(f"{spec.name} has no published NVLink domain; known for: "
                                f"{', '.join(n for n in ('a100', 'h100', 'h200', 'b200', 'gb200-nvl72'))}")
    if not isinstance(num_nodes, (int, np.integer)) or num_nodes < 1:
        raise InvalidValueError(f"`num_nodes` must be a whole number >= 1, got {num_nodes!r}")
    require_positive(switch_ports=switch_ports, port_bytes_per_s=port_bytes_per_s)
    if oversubscription < 1:
        raise InvalidValueError(f"`oversubscription` must be >= 1 (1 means non-blocking), got {oversubscription!r}")
    return GpuCluster(spec, int(num_nodes), int(switch_ports), float(port_bytes_per_s), float(oversubscription))
