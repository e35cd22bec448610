"""Topologies as data with behaviour (chapters 2 and 12).

* :class:`TpuSlice`: chips on a 2D or 3D grid joined by ICI links to their
  neighbours, with wraparound links on the axes that span the whole pod (a torus
  on those axes, a mesh on the others), hosts of a few chips, DCN between slices.
  Its axes are named as in a JAX mesh: ``tpu_slice({"X": 16, "Y": 16}, "tpu-v5e")``,
  and collectives take ``axes="X"``, ``axes="XY"`` or ``axes=("X", "Y")``.
* :class:`GpuCluster`: GPUs in nodes (an NVLink/NVSwitch domain of 8, or 72 for
  GB200 NVL72), nodes joined by a non-blocking InfiniBand fat tree of leaf and
  spine switches, grouped in scalable units.

Facts of the shape (``num_chips``, ``num_hosts``, ``levels``, figures looked up
from the chip) are attributes; quantities computed from them (totals, bisection,
times) are methods, and :func:`~scalelib.explain` gives their derivation.
Everything is checked when the topology is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError
from ._specs import ChipSpec, chip as _chip, dtype_name
from ._units import fmt
from ._validate import count, counts, flag, nonnegative, number, positive, shown

AXIS_NAMES = ("X", "Y", "Z")
#: Latency of one ICI hop, about 1 µs (How to Scale Your Model, ch. 2).
ICI_HOP_LATENCY_S = 1e-6


class _Totals:
    """Whole-system totals of a topology with `num_chips` chips of `spec` (chapters 2 and 12)."""

    @derivable
    def total_flops_per_s(self, *, dtype="bf16"):
        """Peak FLOP/s of all chips together.

        Formula:
            C_total = chips · C

        Returns:
            FLOP/s.

        Chapter:
            2 (TPUs), 12 (GPUs)

        Example:
            >>> fmt(tpu_pod("tpu-v5e").total_flops_per_s(), "FLOP/s")
            '5.04e16 FLOP/s'
        """
        C = explain(self.spec.peak_flops_per_s, dtype=dtype)
        return Derivation(f"C_total({dtype_name(dtype)})", "chips · C", lambda: f"{self.num_chips} · {q(C.value, 'FLOP/s')}",
                          self.num_chips * C.value, "FLOP/s")

    @derivable
    def total_hbm_bytes(self):
        """HBM of all chips together.

        Formula:
            HBM_total = chips · HBM per chip

        Returns:
            bytes (B).

        Chapter:
            2 (TPUs), 12 (GPUs)

        Example:
            >>> fmt(tpu_pod("tpu-v5e").total_hbm_bytes(), "B")
            '4.1 TB'
        """
        per_chip = self.spec._require("hbm_bytes", "the total HBM")
        return Derivation("HBM_total", "chips · HBM per chip", lambda: f"{self.num_chips} · {q(per_chip, 'B')}",
                          self.num_chips * per_chip, "B")

    @derivable
    def total_hbm_bytes_per_s(self):
        """HBM bandwidth of all chips together.

        Formula:
            W_total = chips · W_hbm

        Returns:
            B/s.

        Chapter:
            2 (TPUs), 12 (GPUs)

        Example:
            >>> fmt(tpu_slice((4, 4), "tpu-v5e").total_hbm_bytes_per_s(), "B/s")
            '13.1 TB/s'
        """
        W = self.spec._require("hbm_bytes_per_s", "the total HBM bandwidth")
        return Derivation("W_hbm_total", "chips · W_hbm", lambda: f"{self.num_chips} · {q(W, 'B/s')}",
                          self.num_chips * W, "B/s")


def _shape(shape) -> tuple[int, ...]:
    """A slice's shape from a tuple ``(16, 16)`` or a JAX-style mesh ``{"X": 16, "Y": 16}``."""
    if isinstance(shape, dict):
        names = tuple(str(k).upper() for k in shape)
        if names != AXIS_NAMES[: len(names)]:
            raise InvalidValueError(
                f"`shape`: a mesh names its axes {', '.join(AXIS_NAMES[:max(len(names), 2)])} in that order, "
                f"got {shown(shape)}; e.g. {{'X': 16, 'Y': 16}}")
        return counts("shape", shape.values())
    return counts("shape", shape)


def _of_family(spec: ChipSpec, family: str, arg: str) -> ChipSpec:
    """`spec`, checked to be a TPU (``family="tpu"``: a slice) or a GPU (a cluster); `arg` is the caller's name for it."""
    if spec.family != family:
        what, other = ("a TPU for a slice", "gpu_cluster for GPUs") if family == "tpu" else (
            "a GPU for a GPU cluster", "tpu_slice for TPUs")
        raise InvalidValueError(f"`{arg}` must be {what}, got {spec.name} ({spec.family}); use {other}")
    return spec


@dataclass(frozen=True)
class TpuSlice(_Totals):
    """A slice of a TPU pod: `shape` chips along axes X, Y (, Z), with ICI links between neighbours.

    Build one with :func:`tpu_slice` or :func:`tpu_pod`. ``wraparound[i]`` says
    whether axis i closes into a ring. The shape is checked against the pod, and
    wraparound against what the pod's wiring allows.

    Chapter:
        2 (TPUs)

    Example:
        >>> from scalelib import chip
        >>> TpuSlice(chip("tpu-v5e"), (4, 16), (False, True))
        TpuSlice(tpu-v5e, X=4, Y=16↻; 64 chips)
    """

    spec: ChipSpec
    shape: tuple[int, ...]
    wraparound: tuple[bool, ...]

    def __post_init__(self):
        spec = _of_family(_chip(self.spec, arg="spec"), "tpu", "spec")
        pod = spec._require("pod_shape", "a TPU slice")
        shape = _shape(self.shape)
        if len(shape) != len(pod):
            raise InvalidValueError(f"`shape`: a {spec.name} slice has {len(pod)} axes (its pod is "
                                    f"{'x'.join(map(str, pod))}), got shape {shape}")
        for name, n, full in zip(AXIS_NAMES, shape, pod):
            if n > full:
                raise InvalidValueError(f"`shape`: axis {name} of a {spec.name} slice can have at most {full} chips "
                                        f"(the pod is {'x'.join(map(str, pod))}), got {n}")
        can_wrap = _can_wrap(spec, shape)
        if isinstance(self.wraparound, (str, bytes)) or not hasattr(self.wraparound, "__len__"):
            raise InvalidValueError(f"`wraparound` must be one True/False per axis, got {shown(self.wraparound)}")
        wrap = tuple(flag("wraparound", w) for w in self.wraparound)
        if len(wrap) != len(shape):
            raise InvalidValueError(f"`wraparound` needs one True/False per axis ({len(shape)}), got {shown(self.wraparound)}")
        cube = spec.wraparound_cube
        for name, w, ok, n, full in zip(AXIS_NAMES, wrap, can_wrap, shape, pod):
            if w and not ok:
                need = (f"a slice of whole {cube}x{cube}x{cube} cubes (every axis a multiple of {cube}), "
                        f"got {'x'.join(map(str, shape))}" if cube else f"the full axis of {full}")
                raise InvalidValueError(f"`wraparound`: axis {name} of {n} chips cannot wrap around: wraparound needs {need}")
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "wraparound", wrap)

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
    def mesh(self) -> dict[str, int]:
        """The slice as a JAX-style mesh: ``{"X": 16, "Y": 16}``."""
        return dict(zip(self.axis_names, self.shape))

    @property
    def num_hosts(self) -> int:
        """Hosts (CPU machines) driving the slice; a slice smaller than a host still needs one."""
        host = self.spec._require("host_shape", "the number of hosts")
        return max(1, math.ceil(self.num_chips / math.prod(host)))

    def axes(self, axes=None) -> tuple[str, ...]:
        """The axis names `axes` stands for, each at most once: ``None`` (all), ``"X"``, ``"XY"``, ``("X", "Y")``.

        Returns:
            a tuple of axis names.

        Chapter:
            2 (TPUs), 3 (Sharded matrices)

        Example:
            >>> tpu_slice((16, 16), "tpu-v5e").axes("YX")
            ('Y', 'X')
        """
        if axes is None:
            return self.axis_names
        items = list(axes) if isinstance(axes, str) else axes
        if isinstance(items, (list, tuple)) and items and all(isinstance(a, str) for a in items):
            names = [a.upper() for a in items]
            bad = [a for a in names if a not in self.axis_names]
            if not bad:
                for a in set(names):
                    if names.count(a) > 1:
                        raise InvalidValueError(f"`axes`: axis {a!r} is given twice in {shown(axes)}; "
                                                f"use each axis at most once")
                return tuple(names)
        raise InvalidValueError(
            f"`axes` must name axes of {self!r}: one of {', '.join(self.axis_names)}, or several as "
            f"{''.join(self.axis_names)!r} or {self.axis_names!r}; got {shown(axes)}"
        )

    def axis_bytes_per_s(self, axis) -> float:
        """Bandwidth one chip has along `axis` for a collective: bidirectional per link (both
        ring directions) with wraparound, one-way per link without it; 0 on an axis of 1 chip.

        Returns:
            B/s.

        Chapter:
            2 (TPUs), 3 (Sharded matrices)

        Example:
            >>> tpu_pod("tpu-v5e").axis_bytes_per_s("X"), tpu_slice((4, 4), "tpu-v5e").axis_bytes_per_s("X")
            (90000000000.0, 45000000000.0)
        """
        if not (isinstance(axis, str) and axis.upper() in self.axis_names):
            raise InvalidValueError(f"`axis` must be one axis name of {self!r} ({', '.join(self.axis_names)}), "
                                    f"got {shown(axis)}")
        i = self.axis_names.index(axis.upper())
        if self.shape[i] == 1:
            return 0.0
        if self.wraparound[i]:
            return self.spec._require("ici_link_bytes_per_s_bidirectional", "a collective on a torus")
        return self.spec._require("ici_link_bytes_per_s_one_way", "a collective on a mesh")

    # --- routing -------------------------------------------------------------
    def _coords(self, name: str, coords) -> tuple[int, ...]:
        try:
            items = tuple(coords)
        except TypeError:
            items = None
        if (items is None or len(items) != len(self.shape) or not all(
                isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and 0 <= c < s
                for c, s in zip(items, self.shape))):
            raise InvalidValueError(
                f"`{name}` must be {len(self.shape)} whole coordinates within {self.shape}, got {shown(coords)}")
        return tuple(int(c) for c in items)

    @derivable
    def hops(self, a, b):
        """ICI hops between chips `a` and `b` (coordinates); wraparound never adds hops.

        Formula:
            hops = Σ over axes of |Δ|, or min(|Δ|, n − |Δ|) on an axis with wraparound

        Returns:
            hops (a whole number).

        Chapter:
            2 (TPUs)

        Example:
            >>> tpu_pod("tpu-v5e").hops((0, 0), (15, 0))
            1
        """
        a, b = self._coords("a", a), self._coords("b", b)
        total = 0
        for x, y, n, wrap in zip(a, b, self.shape, self.wraparound):
            d = abs(x - y)
            total += min(d, n - d) if wrap else d
        return Derivation("hops", "Σ |Δ| per axis (the shorter way round a ring)", lambda: f"{a} → {b}", total, "")

    def route(self, a, b) -> list[tuple[int, ...]]:
        """The chips a shortest dimension-ordered route visits from `a` to `b`, both included.

        Returns:
            a list of chip coordinates, one more than :meth:`hops`.

        Chapter:
            2 (TPUs)

        Example:
            >>> tpu_pod("tpu-v5e").route((0, 0), (15, 1))
            [(0, 0), (15, 0), (15, 1)]
        """
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

    @derivable
    def max_hops(self):
        """The diameter: the most hops between any two chips.

        Formula:
            Σ over axes of n // 2 with wraparound, n − 1 without

        Returns:
            hops.

        Chapter:
            2 (TPUs)

        Example:
            >>> tpu_pod("tpu-v5e").max_hops(), tpu_slice((16, 16), "tpu-v5e", wraparound=False).max_hops()
            (16, 30)
        """
        value = sum(n // 2 if w else n - 1 for n, w in zip(self.shape, self.wraparound))
        return Derivation("max hops", "Σ (n // 2 with wraparound, n − 1 without)", lambda: repr(self), value, "")

    @derivable
    def p2p_time_s(self, nbytes, a, b, *, hop_latency_s=ICI_HOP_LATENCY_S):
        """Time to send `nbytes` from chip `a` to chip `b` over one link at a time.

        Formula:
            T_p2p = hops · T_hop + nbytes / W_link (one-way); 0 from a chip to itself

        Args:
            nbytes: bytes to send (B), >= 0.
            a, b: the chips' coordinates.
            hop_latency_s: latency of one hop (s), >= 0.

        Returns:
            seconds (s).

        Chapter:
            2 (TPUs)

        Example:
            >>> fmt(tpu_slice((4, 4), "tpu-v5e").p2p_time_s(45e6, (0, 0), (3, 3)), "s")
            '1.01 ms'
        """
        N = nonnegative("nbytes", nbytes)
        latency = nonnegative("hop_latency_s", hop_latency_s)
        if np.ndim(latency):
            raise InvalidValueError(f"`hop_latency_s` must be a single number, got {shown(hop_latency_s)}")
        h = explain(self.hops, a, b).value
        W = self.spec._require("ici_link_bytes_per_s_one_way", "a point-to-point transfer")
        value = plain(h * latency + np.asarray(N) / W if h else 0.0 * np.asarray(N))
        return Derivation("T_p2p", "hops · T_hop + nbytes / W_link",
                          lambda: f"{h} · {q(latency, 's')} + {q(nbytes, 'B')} / {q(W, 'B/s')}", value, "s")

    @derivable
    def bisection_bytes_per_s(self):
        """Bandwidth across the worst cut into two halves, counting both directions of every cut link.

        Formula:
            min over axes of (chips / n) · (2 with wraparound, 1 without) · W_link,bidirectional

        Returns:
            B/s (0 for one chip).

        Chapter:
            2 (TPUs)

        Example:
            >>> fmt(tpu_pod("tpu-v5e").bisection_bytes_per_s(), "B/s")
            '2.88 TB/s'
        """
        W = self.spec._require("ici_link_bytes_per_s_bidirectional", "the bisection bandwidth")
        best, text = math.inf, ""
        for name, n, wrap in zip(self.axis_names, self.shape, self.wraparound):
            if n == 1:
                continue
            links = (self.num_chips // n) * (2 if wrap else 1)
            if links * W < best:
                best, text = links * W, f"{self.num_chips // n} · {2 if wrap else 1} · {q(W, 'B/s')} (cut across {name})"
        if best == math.inf:
            return Derivation("W_bisection", "0 (one chip)", "", 0.0, "B/s")
        return Derivation("W_bisection", "rings cut · links per ring · W_link", lambda: text, best, "B/s")

    @derivable
    def dcn_bytes_per_s(self):
        """The slice's bandwidth to other slices over the data-center network.

        Formula:
            W_dcn = chips · W_dcn per chip

        Returns:
            B/s.

        Chapter:
            2 (TPUs)

        Example:
            >>> fmt(tpu_pod("tpu-v5e").dcn_bytes_per_s(), "B/s")
            '800 GB/s'
        """
        per_chip = self.spec._require("dcn_bytes_per_s_per_chip", "the DCN bandwidth of a slice")
        return Derivation("W_dcn", "chips · W_dcn per chip", lambda: f"{self.num_chips} · {q(per_chip, 'B/s')}",
                          self.num_chips * per_chip, "B/s")

    def summary(self) -> str:
        """One line: size, peak FLOP/s, HBM, bisection bandwidth, hosts.

        Returns:
            str.

        Chapter:
            2 (TPUs)

        Example:
            >>> tpu_slice((4, 4), "tpu-v5e").summary()
            'TpuSlice(tpu-v5e, X=4, Y=4; 16 chips): 3.15e15 FLOP/s bf16, 256 GB HBM, bisection 360 GB/s, 2 host(s)'
        """
        return (f"{self!r}: {fmt(self.total_flops_per_s(), 'FLOP/s')} bf16, {fmt(self.total_hbm_bytes(), 'B')} HBM, "
                f"bisection {fmt(self.bisection_bytes_per_s(), 'B/s')}, {self.num_hosts} host(s)")


def _can_wrap(spec: ChipSpec, shape) -> tuple[bool, ...]:
    """Which axes of a slice of `shape` the pod's wiring can close into rings (How to Scale Your Model, ch. 2)."""
    cube = spec.wraparound_cube
    if cube:  # optical switches close the rings of any slice made of whole cubes
        whole_cubes = all(n % cube == 0 for n in shape)
        return tuple(whole_cubes and n > 2 for n in shape)
    return tuple(n == full and n > 2 for n, full in zip(shape, spec.pod_shape))


def tpu_slice(shape, chip, *, wraparound=None) -> TpuSlice:
    """A slice of `shape` chips of a TPU pod, e.g. ``(4, 4)`` of v5e or ``{"X": 4, "Y": 4, "Z": 8}`` of v5p.

    On 2D pods (v5e, v6e) an axis has wraparound links when it spans the pod's
    whole axis (16 chips). On 3D pods built of 4x4x4 cubes joined by optical
    switches (v4p, v5p, TPU7x) a slice made of whole cubes wraps on every axis and a
    smaller one on none (How to Scale Your Model, ch. 2). Pass `wraparound` (True,
    False, or one per axis) to turn links off. A slice cannot outgrow the pod.

    Args:
        shape: chips per axis, as a tuple or a mesh dict with axes X, Y (, Z).
        chip: a TPU name or ChipSpec.
        wraparound: None for the pod's wiring, or True/False (one, or one per axis).

    Returns:
        A :class:`TpuSlice`.

    Chapter:
        2 (TPUs)

    Example:
        >>> tpu_slice((16, 16), "tpu-v5e")
        TpuSlice(tpu-v5e, X=16↻, Y=16↻; 256 chips)
        >>> tpu_slice({"X": 4, "Y": 4, "Z": 8}, "tpu-v5p")
        TpuSlice(tpu-v5p, X=4↻, Y=4↻, Z=8↻; 128 chips)
    """
    spec = _of_family(_chip(chip), "tpu", "chip")
    pod = spec._require("pod_shape", "a TPU slice")
    dims = _shape(shape)
    if wraparound is None:
        wrap = _can_wrap(spec, dims) if len(dims) == len(pod) else (False,) * len(dims)
    elif isinstance(wraparound, (bool, np.bool_)):
        wrap = (bool(wraparound),) * len(dims)
    else:
        wrap = wraparound
    return TpuSlice(spec, dims, wrap)


def tpu_pod(chip) -> TpuSlice:
    """The whole pod of a TPU `chip`, with the pod's wraparound.

    Returns:
        A :class:`TpuSlice`.

    Chapter:
        2 (TPUs)

    Example:
        >>> tpu_pod("tpu-v5p").num_chips
        8960
    """
    spec = _chip(chip)
    if spec.family != "tpu":
        raise InvalidValueError(f"`chip` must be a TPU for a pod, got {spec.name} ({spec.family})")
    return tpu_slice(spec._require("pod_shape", "a TPU pod"), spec)


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

    Chapter:
        12 (GPUs)

    Example:
        >>> from scalelib import chip
        >>> GpuCluster(chip("h100"), 4)
        GpuCluster(h100, 4 node(s) x 8 GPUs = 32 GPUs)
    """

    spec: ChipSpec
    num_nodes: int
    switch_ports: int = IB_SWITCH_PORTS
    port_bytes_per_s: float = IB_PORT_BYTES_PER_S
    oversubscription: float = 1.0

    def __post_init__(self):
        spec = _of_family(_chip(self.spec, arg="spec"), "gpu", "spec")
        spec._require("scale_up_domain", "a GPU cluster")
        spec._require("scale_up_bytes_per_s_per_gpu", "a GPU cluster")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("spec", spec)
        set_("num_nodes", count("num_nodes", self.num_nodes))
        ports = count("switch_ports", self.switch_ports, minimum=4)
        if ports % 2:
            raise InvalidValueError(f"`switch_ports` must be even (half the ports face down, half up), got {ports}")
        set_("switch_ports", ports)
        set_("port_bytes_per_s", positive("port_bytes_per_s", self.port_bytes_per_s))
        set_("oversubscription", number("oversubscription", self.oversubscription, at_least=1))
        if np.ndim(self.port_bytes_per_s) or np.ndim(self.oversubscription):
            raise InvalidValueError("`port_bytes_per_s` and `oversubscription` must be single numbers")
        if self.num_nodes > 1:
            spec._require("scale_out_bytes_per_s_per_node", "a GPU cluster of several nodes")

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
        """NVLink bandwidth of one GPU into its NVSwitch domain, one direction (B/s)."""
        return self.spec.scale_up_bytes_per_s_per_gpu

    @property
    def node_egress_bytes_per_s(self) -> float:
        """InfiniBand bandwidth out of one node, one direction (B/s)."""
        return self.spec._require("scale_out_bytes_per_s_per_node", "the node egress")

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
        2·(k/2)^L ≥ node ports (k ports per switch), and at least 2 once the ports outgrow one switch."""
        if self.num_nodes == 1:
            return 0
        ports, half = self.num_nodes * self.ports_per_node, self.switch_ports // 2
        levels = 1 if ports <= 2 * half else math.ceil(math.log(ports / 2) / math.log(half))
        # Correct the logarithm's rounding in either direction: one step at most.
        while levels > 1 and 2 * half ** (levels - 1) >= ports:
            levels -= 1
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

    @derivable
    def egress_bytes_per_s_per_node(self, *, level="spine"):
        """Bandwidth per node, one direction, through the `level` ("leaf" or "spine") of the tree.

        Formula:
            W_node = node egress (leaf); node egress / oversubscription (spine)

        Returns:
            B/s.

        Chapter:
            12 (GPUs)

        Example:
            >>> fmt(gpu_cluster(4, "h100", oversubscription=2).egress_bytes_per_s_per_node(), "B/s")
            '200 GB/s'
        """
        if not isinstance(level, str) or level not in ("leaf", "spine"):
            raise InvalidValueError(f"`level` must be 'leaf' or 'spine', got {shown(level)}")
        egress = self.node_egress_bytes_per_s
        if level == "leaf":
            return Derivation("W_node(leaf)", "node egress", "", egress, "B/s")
        return Derivation("W_node(spine)", "node egress / oversubscription",
                          lambda: f"{q(egress, 'B/s')} / {q(self.oversubscription)}", egress / self.oversubscription, "B/s")

    @derivable
    def bisection_bytes_per_s(self):
        """Bandwidth across the worst cut into two halves, both directions.

        Inside one node the NVSwitches give every GPU its full NVLink bandwidth;
        across nodes the non-blocking tree gives every node its egress (divided by
        the oversubscription).

        Formula:
            GPUs · W_gpu in one node; nodes · W_node across nodes

        Returns:
            B/s.

        Chapter:
            12 (GPUs)

        Example:
            >>> fmt(gpu_cluster(32, "h100").bisection_bytes_per_s(), "B/s")
            '12.8 TB/s'
        """
        if self.num_nodes == 1:
            W = self.nvlink_bytes_per_s_per_gpu
            return Derivation("W_bisection", "GPUs · W_gpu", lambda: f"{self.gpus_per_node} · {q(W, 'B/s')}",
                              self.gpus_per_node * W, "B/s")
        W = explain(self.egress_bytes_per_s_per_node, level="spine")
        return Derivation("W_bisection", "nodes · W_node", lambda: f"{self.num_nodes} · {q(W.value, 'B/s')}",
                          self.num_nodes * W.value, "B/s", (W,))

    def summary(self) -> str:
        """One line: size, peak FLOP/s, HBM, switches, bisection bandwidth.

        Returns:
            str.

        Chapter:
            12 (GPUs)

        Example:
            >>> gpu_cluster(32, "h100").summary()
            'GpuCluster(h100, 32 node(s) x 8 GPUs = 256 GPUs): 2.53e17 FLOP/s bf16, 20.5 TB HBM, 8 leaf and 4 spine switches, bisection 12.8 TB/s'
        """
        return (f"{self!r}: {fmt(self.total_flops_per_s(), 'FLOP/s')} bf16, {fmt(self.total_hbm_bytes(), 'B')} HBM, "
                f"{self.num_leaf_switches} leaf and {self.num_spine_switches} spine switches, "
                f"bisection {fmt(self.bisection_bytes_per_s(), 'B/s')}")


def gpu_cluster(num_nodes, chip, *, switch_ports=IB_SWITCH_PORTS, port_bytes_per_s=IB_PORT_BYTES_PER_S,
                oversubscription=1.0) -> GpuCluster:
    """`num_nodes` GPU nodes of `chip` joined by an InfiniBand fat tree.

    Args:
        num_nodes: nodes (scale-up domains: 8 GPUs, or 72 for GB200 NVL72), >= 1.
        chip: a GPU name or ChipSpec.
        switch_ports: ports per InfiniBand switch (even, >= 4; 64 for Quantum-2).
        port_bytes_per_s: bandwidth of one port, one direction (B/s).
        oversubscription: >= 1; 1 is a non-blocking tree.

    Returns:
        A :class:`GpuCluster`.

    Chapter:
        12 (GPUs)

    Example:
        >>> gpu_cluster(32, "h100")   # one scalable unit of a DGX H100 SuperPOD
        GpuCluster(h100, 32 node(s) x 8 GPUs = 256 GPUs)
    """
    return GpuCluster(_of_family(_chip(chip), "gpu", "chip"), num_nodes, switch_ports, port_bytes_per_s,
                      oversubscription)
