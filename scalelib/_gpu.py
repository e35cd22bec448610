"""GPU-specific formulas (chapter 12): what a GPU's many small cores add up to, and how its network
charges a collective level by level.

* **Vector units.** A GPU's SMs each hold four quadrants of 32 fp32 ALUs ("CUDA cores"), run as
  warps of 32 threads (SIMT): :func:`vector_alus`, :func:`vector_clock_hz`, and the roofline of
  the simplest elementwise kernel, :func:`vector_add_time_s` (measured with JAX by
  :func:`measure_vector_add_time_s`).
* **The network, level by level.** A node joins its GPUs through NVSwitches
  (:func:`node_bandwidth_bytes_per_s`); a fat tree of InfiniBand leaf and spine switches joins the
  nodes (:func:`fat_tree_level_bytes_per_s`). A collective runs as a ring at every level of the
  tree at once, so the slowest level sets its time, each level with its own (D − 1)/D
  (:func:`hierarchical_allgather_time_s`, :func:`hierarchical_allreduce_time_s`, with in-switch
  SHARP reductions as an option; the bytes a switch carries: :func:`switch_bytes`). An array
  already sharded along an inner axis of Y GPUs spreads each level's traffic over Y times as many
  links once Y spans that level.
* **Rooflines that follow.** Data parallelism priced level by level
  (:func:`hierarchical_data_parallel_critical_batch`) and for an MoE (:func:`moe_data_parallel_critical_batch`,
  × E/k); the narrowest expert that expert parallelism keeps compute-bound
  (:func:`expert_parallel_critical_width`); pipeline traffic (:func:`pipeline_comms_time_s`);
  ragged (top-k) AllToAlls (:func:`ragged_alltoall_time_s`); ring against tree latency
  (:func:`allreduce_latency_s`); a Grace CPU's memory over NVLink-C2C (:func:`host_transfer_time_s`).

Facts and formulas follow ch. 12 ("How to Think About GPUs") of How to Scale Your Model
(Austin et al., 2025), NVIDIA's DGX SuperPOD reference architectures and its Grace Hopper data
sheet, as named where each figure is used.
"""

from __future__ import annotations

import math

import numpy as np

from ._collectives import GPU_STEP_LATENCY_S, alltoall_time_s
from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError, unknown
from ._parallelism import data_parallel_critical_batch
from ._specs import bytes_per_value, chip as _chip, dtype_name
from ._topology import GpuCluster, gpu_cluster  # noqa: F401  (the examples use gpu_cluster)
from ._units import fmt  # noqa: F401  (the examples use it)
from ._validate import count, flag, name as _name, nonnegative, number, positive, shown
from ._vector import vector_flops_per_s

#: One-way bandwidth of the link between a GPU and its host CPU's memory (B/s): NVLink-C2C joins a
#: Grace CPU to its Hopper or Blackwell GPU at 900 GB/s both ways together (NVIDIA Grace Hopper
#: Superchip data sheet), 450 GB/s each way, what the GPU's NVLink gives it to another GPU; a
#: PCIe 5.0 x16 slot carries about 64 GB/s each way (NVIDIA H100 data sheet: 128 GB/s in all).
HOST_LINKS = {"nvlink-c2c": 450e9, "pcie-gen5": 64e9}

_COLLECTIVES = ("allgather", "allreduce")
_SWITCHES = ("node", "leaf")
_ROUTINGS = ("fixed", "random")
_ALGORITHMS = ("ring", "tree")


def _cluster(topology) -> GpuCluster:
    if not isinstance(topology, GpuCluster):
        raise InvalidValueError(f"`topology` must be a GpuCluster (e.g. gpu_cluster(1, 'h100') for one node), "
                                f"got {shown(topology)}")
    return topology


def _single(arg: str, value, **kw) -> float:
    x = number(arg, value, **kw)
    if np.ndim(x):
        raise InvalidValueError(f"`{arg}` must be a single number, got {shown(value)}")
    return x


# --- vector units ----------------------------------------------------------------------------


@derivable
def vector_alus(chip):
    """The fp32 ALUs of a chip's vector units: a GPU's CUDA cores, a TPU's VPU ALUs.

    An H100 SM has four quadrants of 32 CUDA cores each (128), 132 SMs in all; a TPU
    v5p TensorCore's VPU is 8 × 128 lanes of 4 ALUs (4096), two TensorCores per chip.
    On a GPU the 32 cores of a quadrant execute one warp's instruction together: the
    threads of a warp may branch apart (SIMT), but then the quadrant runs each branch in
    turn with the other threads idle (warp divergence).

    Formula:
        ALUs = cores · ALUs per core

    Args:
        chip: a chip name or ChipSpec with ``cores`` and ``vector_alus_per_core``.

    Returns:
        ALUs (a count).

    Chapter:
        12 (GPUs)

    Example:
        >>> vector_alus("h100"), vector_alus("b200"), vector_alus("tpu-v5p")
        (16896.0, 18944.0, 8192.0)
    """
    spec = _chip(chip)
    cores = spec._require("cores", "counting vector ALUs")
    per_core = spec._require("vector_alus_per_core", "counting vector ALUs")
    core = "SM" if spec.family == "gpu" else "TensorCore" if spec.family == "tpu" else "core"
    alus = "fp32 CUDA cores" if spec.family == "gpu" else "vector ALUs"
    return Derivation(f"ALUs({spec.name})", "cores · ALUs per core", f"{cores} · {per_core}",
                      float(cores * per_core), "ALUs",
                      where=(f"cores: {core}s per chip; ALUs per core: {alus} per {core}",))


@derivable
def vector_clock_hz(flops_per_s, chip, *, flops_per_cycle=2):
    """The clock at which a chip's vector units reach `flops_per_s`: the rate over ALUs × FLOPs per cycle.

    NVIDIA quotes vector rates counting a fused multiply-add as 2 FLOPs, hence the default.

    Formula:
        f = C_vec / (ALUs · k)

    Args:
        flops_per_s: C_vec, the vector rate quoted (FLOP/s, > 0).
        chip: a chip name or ChipSpec with ``cores`` and ``vector_alus_per_core``.
        flops_per_cycle: k, FLOPs credited to one ALU per cycle (> 0): 2 counts an FMA as two.

    Returns:
        Hz.

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(vector_clock_hz(80e12, "b200"), "Hz")    # NVIDIA's 80 TFLOP/s of fp32 on a B200
        '2.11 GHz'
    """
    C = positive("flops_per_s", flops_per_s)
    k = _single("flops_per_cycle", flops_per_cycle, positive=True)
    alus = explain(vector_alus, chip)
    return Derivation("f", "C_vec / (ALUs · k)", lambda: f"{q(C, 'FLOP/s')} / ({q(alus.value)} · {q(k)})",
                      plain(np.asarray(C) / (alus.value * k)), "Hz", (alus,),
                      where=("C_vec: the vector rate quoted; k: FLOPs credited to an ALU per cycle",))


@derivable
def vector_add_time_s(N, chip, *, dtype="f32", flops_per_cycle=1, clock="boost"):
    """Roofline time of ``z = x + y`` over vectors of N values on one chip's vector units.

    N FLOPs against 3·N values moved (two read, one written): an intensity of 1/12 FLOP/B
    in f32, far below any chip's vector critical intensity, so HBM sets the time. Fewer
    values than ALUs leave ALUs idle, so the arithmetic never takes less than one pass
    of all of them.

    Formula:
        T = max(T_math, T_comms),  T_math = max(N, ALUs) / C_vec,  T_comms = 3 · N · b / W_hbm

    Args:
        N: values per vector (> 0; an array gives a sweep).
        chip: a chip name or ChipSpec with vector ALUs, a clock and an HBM bandwidth.
        dtype: the values' dtype (b bytes each), ``"f32"`` by default.
        flops_per_cycle, clock: as in :func:`~scalelib.vector_flops_per_s` (one op per ALU per cycle,
            the boost clock, by default).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(vector_add_time_s(1024**3, "h100"), "s")
        '3.85 ms'
        >>> print(explain(vector_add_time_s, 1024**3, "h100"))   # doctest: +ELLIPSIS
        ALUs(h100) = cores · ALUs per core = 132 · 128 = 1.69e4 ALUs
        ...
        T_add = max(T_math, T_comms) = max(32.1 µs, 3.85 ms) = 3.85 ms
    """
    n = positive("N", N)
    spec = _chip(chip)
    b = bytes_per_value(dtype)
    C = explain(vector_flops_per_s, spec, flops_per_cycle=flops_per_cycle, clock=clock)
    alus = explain(vector_alus, spec)
    W = explain(spec.bytes_per_s, bandwidth="hbm")
    t_math = np.maximum(np.asarray(n), alus.value) / C.value
    t_comms = 3 * np.asarray(n) * b / W.value
    math_d = Derivation("T_math", "max(N, ALUs) / C_vec", lambda: f"max({q(N)}, {q(alus.value)}) / {q(C.value, 'FLOP/s')}",
                        plain(t_math), "s", (alus, C), where=("N: values per vector (one add each)",))
    comms_d = Derivation("T_comms", "3 · N · b / W", lambda: f"3 · {q(N)} · {q(b)} / {q(W.value, 'B/s')}",
                         plain(t_comms), "s", (W,),
                         where=(f"b: bytes per {dtype_name(dtype)} value (two vectors read, one written); "
                                f"W: HBM bandwidth",))
    return Derivation("T_add", "max(T_math, T_comms)",
                      lambda: f"max({q(math_d.value, 's')}, {q(comms_d.value, 's')})",
                      plain(np.maximum(t_math, t_comms)), "s", (math_d, comms_d))


@derivable
def measure_vector_add_time_s(N, *, dtype="f32", repeats=5):
    """Best wall time of the jitted ``x + y`` over two vectors of N values, on the device JAX uses.

    That is the accelerator JAX sees (a GPU or TPU) where there is one, the CPU otherwise;
    the derivation names it. One warm-up run compiles first.

    Formula:
        T = min over runs of the wall time of x + y

    Args:
        N: values per vector (a whole number >= 1; the three vectors together at most 4 GiB).
        dtype: ``"f32"``, ``"bf16"`` or ``"fp16"``.
        repeats: timed runs (>= 1).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> measure_vector_add_time_s(2**20) > 0        # doctest: +SKIP
        True
    """
    from ._probe import _JNP_DTYPES, _best_time, _cap, _repeats

    n = count("N", N)
    repeats = _repeats(repeats)
    name = dtype_name(dtype)
    if name not in _JNP_DTYPES:
        raise unknown("dtype for a measured add", name, _JNP_DTYPES, arg="dtype")
    _cap("N", 3 * n * bytes_per_value(name))
    import jax
    import jax.numpy as jnp

    jdtype = getattr(jnp, _JNP_DTYPES[name])
    x = jnp.ones((n,), dtype=jdtype)
    y = jnp.full((n,), 2, dtype=jdtype)
    value = _best_time(jax.jit(jnp.add), x, y, repeats=repeats)
    device = x.devices().pop() if hasattr(x, "devices") else jax.devices()[0]
    return Derivation("T_add (measured)", f"best of {repeats} runs of x + y over {n} {name} values "
                      f"on {device.platform} ({device.device_kind})", "", value, "s")


# --- a node and the fat tree -------------------------------------------------------------------


@derivable
def node_bandwidth_bytes_per_s(switches, ports_per_switch, port_bytes_per_s, topology):
    """Total bandwidth of a node's NVLink fabric, one direction: the switches' or the GPUs', whichever is less.

    An H100 node has 4 NVSwitches of 64 NVLink ports at 25 GB/s each way (6.4 TB/s), but its 8
    GPUs can put only 450 GB/s each into them (3.6 TB/s).

    Formula:
        W_node_total = min(switches · ports · W_port, GPUs · W_gpu)

    Args:
        switches: NVSwitches in the node (a whole number >= 1).
        ports_per_switch: NVLink ports of one switch (a whole number >= 1).
        port_bytes_per_s: W_port, bandwidth of one port, one direction (B/s, > 0).
        topology: a :class:`GpuCluster`; its node's GPUs and their NVLink bandwidth are used.

    Returns:
        B/s (one direction, the whole node).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(node_bandwidth_bytes_per_s(4, 64, 25e9, gpu_cluster(1, "h100")), "B/s")
        '3.6 TB/s'
    """
    S = count("switches", switches)
    P = count("ports_per_switch", ports_per_switch)
    w = _single("port_bytes_per_s", port_bytes_per_s, positive=True)
    topo = _cluster(topology)
    n, W_gpu = topo.gpus_per_node, topo.nvlink_bytes_per_s_per_gpu
    switch = Derivation("W_switches", "switches · ports · W_port", lambda: f"{S} · {P} · {q(w, 'B/s')}",
                        S * P * w, "B/s", where=("W_port: one NVLink port's bandwidth, one way",))
    gpus = Derivation("W_GPUs", "GPUs · W_gpu", lambda: f"{n} · {q(W_gpu, 'B/s')}", n * W_gpu, "B/s",
                      where=("W_gpu: a GPU's NVLink bandwidth, one way",))
    return Derivation("W_node total", "min(W_switches, W_GPUs)",
                      lambda: f"min({q(switch.value, 'B/s')}, {q(gpus.value, 'B/s')})",
                      min(switch.value, gpus.value), "B/s", (switch, gpus))


@derivable
def fat_tree_level_bytes_per_s(topology, *, level="leaf"):
    """Bandwidth one level of the fat tree gives the nodes below it, one direction, all switches together.

    Each leaf switch gives half its ports to nodes and half to the level above; the spine
    layer carries what the leaves send up (divided by any oversubscription). Equal to
    nodes × node egress at both levels: that is full bisection bandwidth.

    Formula:
        leaf: leaves · (ports / 2) · W_port;  spine: leaves · (ports / 2) · W_port / oversubscription

    Args:
        topology: a :class:`GpuCluster` of at least two nodes (for ``"spine"``, a two-level tree or more).
        level: ``"leaf"`` (default) or ``"spine"``.

    Returns:
        B/s.

    Chapter:
        12 (GPUs)

    Example:
        >>> superpod = gpu_cluster(128, "h100")          # the 1024-GPU DGX H100 SuperPOD
        >>> fmt(fat_tree_level_bytes_per_s(superpod, level="spine"), "B/s")
        '51.2 TB/s'
    """
    topo = _cluster(topology)
    level = _name("level", level, ("leaf", "spine"), "fat-tree level")
    if topo.levels == 0:
        raise InvalidValueError(f"`topology`: {topo!r} is one node, with no fat tree above it")
    if level == "spine" and topo.levels < 2:
        raise InvalidValueError(f"`level`: {topo!r} fits under one leaf switch and has no spine")
    leaves, ports, w = topo.num_leaf_switches, topo.switch_ports, topo.port_bytes_per_s
    down = ports // 2 if topo.levels > 1 else ports
    if level == "leaf":
        # A lone leaf (one level) uses only the ports its nodes need.
        used = min(leaves * down, topo.num_nodes * topo.ports_per_node)
        return Derivation("W_leaf", "ports facing the nodes · W_port", lambda: f"{used} · {q(w, 'B/s')}",
                          used * w, "B/s",
                          where=(f"{leaves} leaf switch(es) of {ports} ports, {down} of each facing the nodes; "
                                 f"W_port: one InfiniBand port, one way",))
    over = topo.oversubscription
    return Derivation("W_spine", "leaves · (ports / 2) · W_port / oversubscription",
                      lambda: f"{leaves} · {ports // 2} · {q(w, 'B/s')} / {q(over)}", leaves * down * w / over, "B/s",
                      where=("leaves: leaf switches; W_port: one InfiniBand port, one way",))


# --- collectives level by level ------------------------------------------------------------------


def _levels(topo: GpuCluster, group, inner):
    """The group's size G, the inner axis Y and, for every level the collective crosses,
    (level, D, S, w): the level's ring degree, the GPUs sharing each child's link traffic
    (max(Y, GPUs below one child)) and the per-GPU bandwidth of that link."""
    G = topo.num_gpus if group is None else count("group", group)
    if G > topo.num_gpus:
        raise InvalidValueError(f"`group` of {G} GPUs is larger than {topo!r}; at most {topo.num_gpus}")
    n = topo.gpus_per_node
    su = n * topo.nodes_per_scalable_unit
    if G > n and G % n:
        raise InvalidValueError(f"`group`: a group spanning nodes must be whole nodes of {n} GPUs, got {G}")
    if G > su and G % su:
        raise InvalidValueError(f"`group`: a group spanning scalable units must be whole units of {su} GPUs, got {G}")
    Y = count("inner", inner)
    if G % Y:
        raise InvalidValueError(f"`inner`: the inner axis must divide the group of {G} GPUs (`group`), got {Y}")
    spans = [("node", 1, n, lambda: topo.nvlink_bytes_per_s_per_gpu, "a GPU's NVLink")]
    spans.append(("leaf", n, su, lambda: topo.egress_bytes_per_s_per_node(level="leaf") / n,
                  "a GPU's share of its node's egress to the leaf"))
    spans.append(("spine", su, G, lambda: topo.egress_bytes_per_s_per_node(level="spine") / n,
                  "a GPU's share of its node's egress through the spine"))
    levels = []
    for level, below, size, bandwidth, what in spans:
        below, size = min(below, G), min(size, G)
        if size <= below:
            continue
        for S in (below, size):
            if S % Y and Y % S:
                raise InvalidValueError(f"`inner`: an inner axis of {Y} GPUs splits the {S}-GPU units of "
                                        f"{topo!r} unevenly; use a divisor or a multiple of {S}")
        D = max(1, size // Y) // max(1, below // Y)
        if D > 1:
            levels.append((level, D, max(Y, below), bandwidth(), what))
    return G, Y, levels


def _level_steps(V, levels, *, sharp=False, passes=1):
    """One derivation per level: V·(D−1)/(D·S·w) per pass (V/(S·w) with SHARP)."""
    steps = []
    for level, D, S, w, what in levels:
        if sharp:
            steps.append(Derivation(f"T_{level}", "V / (S · w)", lambda S=S, w=w: f"{q(V, 'B')} / ({S} · {q(w, 'B/s')})",
                                    plain(np.asarray(V) / (S * w)), "s", where=(f"w: {what}, one way",)))
        else:
            pre, pre_text = (2, "2 · ") if passes == 2 else (1, "")
            steps.append(Derivation(
                f"T_{level}", f"{pre_text}V · (D − 1) / (D · S · w)",
                lambda D=D, S=S, w=w: f"{pre_text}{q(V, 'B')} · ({D} − 1) / ({D} · {S} · {q(w, 'B/s')})",
                plain(pre * np.asarray(V) * (D - 1) / (D * S * w)), "s", where=(f"w: {what}, one way",)))
    return steps


def _hierarchical(name, nbytes, topology, group, inner, *, sharp=False, passes=1) -> Derivation:
    V = nonnegative("nbytes", nbytes)
    topo = _cluster(topology)
    G, Y, levels = _levels(topo, group, inner)
    symbol = f"T_{name}({G} GPUs{', inner ' + str(Y) if Y > 1 else ''}{', SHARP' if sharp else ''})"
    if not levels:
        return Derivation(symbol, "0 (each GPU already holds all it needs: nothing to move)", "",
                          plain(0.0 * np.asarray(V)), "s")
    steps = _level_steps(V, levels, sharp=sharp, passes=passes)
    value = np.maximum.reduce([np.asarray(s.value, dtype=float) for s in steps])
    ring = "" if sharp else "D: the ring's degree at that level (children taking part); "
    if Y > 1:  # S = max(Y, GPUs below one child) as an equation, so that Y is read as used
        where = (f"V: bytes of the whole array; {ring}S: GPUs whose traffic shares one child's link, "
                 f"S = max(Y, GPUs below one child); Y: GPUs of the inner axis the array is also sharded over",)
    else:
        where = (f"V: bytes of the whole array; {ring}S: GPUs whose traffic shares one child's link, the GPUs "
                 f"below one child",)
    names = ", ".join(s.symbol for s in steps)
    return Derivation(symbol, f"max({names})" if len(steps) > 1 else steps[0].symbol,
                      lambda: f"max({', '.join(q(s.value, 's') for s in steps)})" if len(steps) > 1 else "",
                      plain(value), "s", tuple(steps), where=where)


@derivable
def hierarchical_allgather_time_s(nbytes, topology, *, group=None, inner=1):
    """Time to AllGather an array of `nbytes` through a GPU fat tree, each level a ring of its own.

    The levels run at once, so the slowest sets the time, each with its own degree D: 8 GPUs
    in an H100 node over NVLink, up to 32 nodes under a scalable unit's leaves, scalable
    units under the spine. Over exactly two H100 nodes the node level binds (7/8 · V at
    450 GB/s against 1/2 · V at 400 GB/s). When the array is also sharded over an inner axis of
    Y GPUs, each level's traffic is spread over max(Y, GPUs below one child) GPUs' links. The
    bandwidth term only (no latency); ``allgather_time_s`` instead charges (N − 1)/N over the
    whole group on NVLink.

    Formula:
        T = V · max over levels (D − 1) / (D · max(Y, S_below) · w)

    Args:
        nbytes: V, bytes of the whole gathered array (B), >= 0.
        topology: a :class:`GpuCluster`.
        group: the GPUs taking part (all by default): one node or less, whole nodes, or whole
            scalable units.
        inner: Y, GPUs of an inner axis the array is also sharded over (1 by default; a divisor
            or a multiple of the node and of the scalable unit).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> print(explain(hierarchical_allgather_time_s, 1e9, gpu_cluster(2, "h100")))
        T_node = V · (D − 1) / (D · S · w) = 1 GB · (8 − 1) / (8 · 1 · 450 GB/s) = 1.94 ms
          where w: a GPU's NVLink, one way
        T_leaf = V · (D − 1) / (D · S · w) = 1 GB · (2 − 1) / (2 · 8 · 50 GB/s) = 1.25 ms
          where w: a GPU's share of its node's egress to the leaf, one way
        T_AllGather(16 GPUs) = max(T_node, T_leaf) = max(1.94 ms, 1.25 ms) = 1.94 ms
          where V: bytes of the whole array; D: the ring's degree at that level (children taking part); S: GPUs whose traffic shares one child's link, the GPUs below one child
    """
    return _hierarchical("AllGather", nbytes, topology, group, inner)


@derivable
def hierarchical_allreduce_time_s(nbytes, topology, *, group=None, inner=1, sharp=False):
    """Time to AllReduce an array of `nbytes` through a GPU fat tree, level by level; optionally with SHARP.

    Without in-network reduction it is a ReduceScatter and an AllGather, twice
    :func:`hierarchical_allgather_time_s`. With SHARP the switches add up what the GPUs send
    and multicast the sum back, so every GPU sends and receives V once: V / w per level, exactly,
    with no (D − 1)/D. (NCCL measures only about 30% more bandwidth with SHARP, not the 75% this
    predicts for 8 GPUs.)

    Formula:
        ring: T = 2 · V · max over levels (D − 1) / (D · S · w);  SHARP: T = V · max over levels 1 / (S · w)

    Args:
        nbytes: V, bytes of the array (B), >= 0.
        topology, group, inner: as in :func:`hierarchical_allgather_time_s`.
        sharp: True to reduce in the switches (SHARP).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> node = gpu_cluster(1, "h100")
        >>> fmt(hierarchical_allreduce_time_s(1e9, node), "s"), fmt(hierarchical_allreduce_time_s(1e9, node, sharp=True), "s")
        ('3.89 ms', '2.22 ms')
    """
    sharp = flag("sharp", sharp)
    return _hierarchical("AllReduce", nbytes, topology, group, inner, sharp=sharp, passes=1 if sharp else 2)


@derivable
def hierarchical_data_parallel_critical_batch(topology, *, group=None, inner=1, dtype="bf16"):
    """Tokens per GPU above which data parallelism (or FSDP) stays compute-bound, levels priced one by one.

    A step's arithmetic per GPU grows with its tokens; the gradient (or weight) collectives
    move each weight's bytes once whatever the batch, at the pace of the slowest level. With
    model parallelism of Y GPUs inside each replica (tensor and pipeline parallelism, the inner
    axis) each GPU holds 1/Y of the weights, which divides the traffic of every level that Y spans.
    ``data_parallel_critical_batch`` gives the book's approximations C / W_gpu and C / W_node.

    Formula:
        B_crit per GPU = C · max over levels (D − 1) / (D · max(Y, S_below) · w)

    Args:
        topology: a :class:`GpuCluster`.
        group: the GPUs of the whole job (all by default), as in :func:`hierarchical_allgather_time_s`.
        inner: Y, the model-parallel GPUs of one replica (1: pure data parallelism).
        dtype: the dtype of the arithmetic (sets C).

    Returns:
        tokens per GPU.

    Chapter:
        12 (GPUs)

    Example:
        >>> round(hierarchical_data_parallel_critical_batch(gpu_cluster(2, "h100")))   # two nodes: NVLink binds
        1925
        >>> round(hierarchical_data_parallel_critical_batch(gpu_cluster(512, "h100"), inner=64))
        232
    """
    topo = _cluster(topology)
    G, Y, levels = _levels(topo, group, inner)
    if not levels:
        raise InvalidValueError(f"`inner`: with {Y} model-parallel GPUs in a group of {G} there is one replica: "
                                f"nothing is data-parallel")
    C = explain(topo.spec.peak_flops_per_s, dtype=dtype)
    per_byte = max((D - 1) / (D * S * w) for _, D, S, w, _ in levels)
    terms = ", ".join(f"({D} − 1)/({D} · {S} · {q(w, 'B/s')})" for _, D, S, w, _ in levels)
    crossed = ", ".join(level for level, *_ in levels)
    where = (f"C: a GPU's peak FLOP/s; one term per level the data-parallel rings cross ({crossed})",)
    if Y > 1:  # S = max(Y, GPUs below one child) as an equation, so that Y is read as used
        where += ("D: the ring's degree at that level; S: GPUs whose traffic shares one child's link, "
                  "S = max(Y, GPUs below one child); Y: model-parallel GPUs per replica; w: that link's bandwidth "
                  "per GPU, one way",)
    else:
        where += ("D: the ring's degree at that level; S: GPUs whose traffic shares one child's link, the GPUs "
                  "below one child; w: that link's bandwidth per GPU, one way",)
    return Derivation("B_crit per GPU", "C · max over levels (D − 1) / (D · S · w)",
                      lambda: f"{q(C.value, 'FLOP/s')} · max({terms})" if len(levels) > 1
                      else f"{q(C.value, 'FLOP/s')} · {terms}",
                      C.value * per_byte, "tokens", where=where)


@derivable
def switch_bytes(nbytes, topology, *, switch="node", collective="allgather", direction="egress", sharp=False,
                 inner=1):
    """Bytes that go into (``direction="ingress"``) or out of one switch level during a collective.

    AllGather of V bytes over the whole `topology` (M nodes of N GPUs): the node's NVSwitches
    take in the node's V/M from its GPUs and V(M − 1)/M from above (V in all) and send V/M up and
    V − V/(MN) down to each GPU (N·V in all); the leaf layer above M nodes takes in V and sends
    out V(M − 1). AllReduce inside one node: with SHARP each GPU sends its share of the sum's
    parts and gets its slice back, then sends the slice and gets the rest (N·V/Y each way, for
    an array sharded over an inner axis of Y); without, a ring ReduceScatter then AllGather.

    Formula:
        AllGather: node in = N·V/(MN) + V(M−1)/M, out = [M > 1]·V/M + N·(V − V/(MN)); leaf in = V, out = V(M−1);
        AllReduce (one node, X = N/Y): SHARP in = out = N·V/Y; ring in = out = 2·N·(V/Y)(X−1)/X

    Args:
        nbytes: V, bytes of the whole array (B), >= 0.
        topology: a :class:`GpuCluster` (for the leaf, at least two nodes under one scalable unit;
            for an AllReduce, one node).
        switch: ``"node"`` (the node's NVSwitches) or ``"leaf"`` (the InfiniBand leaves above the nodes).
        collective: ``"allgather"`` or ``"allreduce"``.
        direction: ``"ingress"`` or ``"egress"``.
        sharp: for an AllReduce, True to reduce in the switches.
        inner: Y, for an AllReduce: GPUs of an inner axis the array is also sharded over (divides N).

    Returns:
        bytes (B).

    Chapter:
        12 (GPUs)

    Example:
        >>> su = gpu_cluster(32, "h100")
        >>> switch_bytes(1.0, su, switch="leaf", direction="egress")      # V(M − 1) for V = 1 byte
        31.0
        >>> switch_bytes(1.0, gpu_cluster(1, "h100"), collective="allreduce", sharp=True)
        8.0
    """
    V = nonnegative("nbytes", nbytes)
    topo = _cluster(topology)
    switch = _name("switch", switch, _SWITCHES, "switch level")
    collective = _name("collective", collective, _COLLECTIVES, "collective")
    direction = _name("direction", direction, ("ingress", "egress"), "direction")
    sharp = flag("sharp", sharp)
    Y = count("inner", inner)
    M, N = topo.num_nodes, topo.gpus_per_node
    arr = np.asarray(V, dtype=float)
    where = ("V: bytes of the whole array; M: nodes; N: GPUs per node",)
    if collective == "allgather":
        if sharp or Y != 1:
            raise InvalidValueError("`sharp` and `inner` apply to an AllReduce; an AllGather takes neither")
        if switch == "leaf":
            if M < 2 or M > topo.nodes_per_scalable_unit:
                raise InvalidValueError(f"`topology`: the leaf level joins 2 to {topo.nodes_per_scalable_unit} nodes "
                                        f"of one scalable unit, got {M}")
            if direction == "ingress":
                return Derivation("leaf in", "M · V/M", lambda: f"{M} · {q(V, 'B')}/{M}", plain(arr), "B", where=where)
            return Derivation("leaf out", "M · V(M − 1)/M", lambda: f"{M} · {q(V, 'B')}·({M} − 1)/{M}",
                              plain(arr * (M - 1)), "B", where=where)
        if direction == "ingress":
            return Derivation("node switch in", "N · V/(MN) + V(M − 1)/M",
                              lambda: f"{N} · {q(V, 'B')}/({M}·{N}) + {q(V, 'B')}·({M} − 1)/{M}",
                              plain(N * arr / (M * N) + arr * (M - 1) / M), "B", where=where)
        up = arr / M if M > 1 else 0.0 * arr
        return Derivation("node switch out", "[M > 1]·V/M + N · (V − V/(MN))",
                          lambda: f"{'1' if M > 1 else '0'}·{q(V, 'B')}/{M} + {N} · ({q(V, 'B')} − {q(V, 'B')}/({M}·{N}))",
                          plain(up + N * (arr - arr / (M * N))), "B", where=where)
    if switch != "node" or M != 1:
        raise InvalidValueError(f"`topology`: switch_bytes prices an AllReduce inside one node; got "
                                f"switch={switch!r} on {topo!r}")
    if N % Y:
        raise InvalidValueError(f"`inner`: the inner axis must divide the node's {N} GPUs, got {Y}")
    X = N // Y
    what = "in" if direction == "ingress" else "out"
    where = ("V: bytes of the whole array; N: GPUs in the node; Y: GPUs of the inner axis; "
             "X = N/Y: GPUs reducing each slice",)
    if sharp:
        return Derivation(f"switch {what} (SHARP)", "N · V / Y", lambda: f"{N} · {q(V, 'B')} / {Y}",
                          plain(N * arr / Y), "B", where=where)
    return Derivation(f"switch {what} (ring)", "2 · N · (V/Y) · (X − 1)/X",
                      lambda: f"2 · {N} · ({q(V, 'B')}/{Y}) · ({X} − 1)/{X}",
                      plain(2 * N * (arr / Y) * (X - 1) / X), "B", where=where)


@derivable
def ragged_alltoall_time_s(nbytes, k, topology, *, group=None, routing="fixed"):
    """Time of a ragged (top-k) AllToAll: each row goes to only k of the N GPUs, not to all of them.

    An MoE dispatch sends each token to its k experts. With ``routing="fixed"`` exactly k of N
    destinations hold data (the dense cost × min(k/N, 1)); with ``"random"`` each of the k picks a
    GPU independently, so on average 1 − ((N − 1)/N)^k of the destinations are hit. The bandwidth
    term of :func:`~scalelib.alltoall_time_s` (latency left out).

    Formula:
        T = T_AllToAll(V, dense) · share,  share = min(k/N, 1) (fixed) or 1 − ((N − 1)/N)^k (random)

    Args:
        nbytes: V, bytes of the array if it were dense (every row sent to every GPU) (B), >= 0.
        k: destinations each row is sent to (a whole number >= 1).
        topology: a :class:`GpuCluster`.
        group: N, the GPUs taking part (all by default).
        routing: ``"fixed"`` or ``"random"``.

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> node = gpu_cluster(1, "h100")
        >>> round(ragged_alltoall_time_s(1e9, 4, node) / alltoall_time_s(1e9, node), 3)   # 4 of 8: half the time
        0.5
    """
    kk = count("k", k)
    routing = _name("routing", routing, _ROUTINGS, "routing")
    topo = _cluster(topology)
    dense = explain(alltoall_time_s, nbytes, topo, group=group, latency_s=0)
    N = topo.num_gpus if group is None else count("group", group)
    if routing == "fixed":
        share, text, numbers = min(kk / N, 1.0), "min(k/N, 1)", f"min({kk}/{N}, 1)"
    else:
        share, text, numbers = 1 - ((N - 1) / N) ** kk, "1 − ((N − 1)/N)^k", f"1 − (({N} − 1)/{N})^{kk}"
    return Derivation(f"T_AllToAll(top-{kk} of {N})", f"T_dense · {text}",
                      lambda: f"{q(dense.value, 's')} · {numbers}", plain(np.asarray(dense.value) * share), "s",
                      (dense,), where=("T_dense: the dense AllToAll's time; k: destinations per row; N: GPUs in the group",))


@derivable
def allreduce_latency_s(N, *, algorithm="ring", step_latency_s=GPU_STEP_LATENCY_S):
    """Latency floor of an AllReduce over N GPUs: a ring's 2(N − 1) steps or a tree's 2⌈log₂ N⌉.

    A tree reduces pairs, then pairs of pairs, and broadcasts back the same way: fewer
    steps for a small array, the same bytes per GPU for a large one.

    Formula:
        ring: 2 · (N − 1) · T_step;  tree: 2 · ⌈log₂ N⌉ · T_step

    Args:
        N: GPUs (a whole number >= 1).
        algorithm: ``"ring"`` (default) or ``"tree"``.
        step_latency_s: T_step, the latency of one step (s, >= 0; 5 µs by default).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(allreduce_latency_s(1024), "s"), fmt(allreduce_latency_s(1024, algorithm="tree"), "s")
        ('10.2 ms', '100 µs')
    """
    n = count("N", N)
    algorithm = _name("algorithm", algorithm, _ALGORITHMS, "algorithm")
    t = _single("step_latency_s", step_latency_s, nonnegative=True)
    steps = 2 * (n - 1) if algorithm == "ring" else 2 * math.ceil(math.log2(n))
    formula = "2 · (N − 1) · T_step" if algorithm == "ring" else "2 · ⌈log₂ N⌉ · T_step"
    return Derivation(f"T_latency({algorithm}, {n} GPUs)", formula, lambda: f"{steps} · {q(t, 's')}", steps * t, "s",
                      where=("T_step: latency of one step",))


# --- rooflines of parallelism --------------------------------------------------------------------


@derivable
def moe_data_parallel_critical_batch(E, k, topology, *, dtype="bf16", axes=None):
    """Tokens per chip above which data parallelism of an MoE layer stays compute-bound: E/k times a dense one's.

    The gradients of all E experts cross the network, but each token uses only k of them.

    Formula:
        B_crit per chip = (E / k) · C / W

    Args:
        E: experts (a whole number >= 1).
        k: experts each token uses (a whole number, 1 <= k <= E).
        topology: a :class:`TpuSlice` or :class:`GpuCluster`, as in :func:`~scalelib.data_parallel_critical_batch`.
        dtype, axes: as in :func:`~scalelib.data_parallel_critical_batch`.

    Returns:
        tokens per chip.

    Chapter:
        12 (GPUs)

    Example:
        >>> round(moe_data_parallel_critical_batch(128, 4, gpu_cluster(16, "h100")))
        79200
    """
    e, kk = count("E", E), count("k", k)
    if kk > e:
        raise InvalidValueError(f"`k`: a token uses at most the E = {e} experts, got k = {kk}")
    dense = explain(data_parallel_critical_batch, topology, dtype=dtype, axes=axes)
    return Derivation("B_crit per chip (MoE)", "(E / k) · B_crit", lambda: f"({e} / {kk}) · {q(dense.value, 'tokens')}",
                      e / kk * dense.value, "tokens", (dense,), where=("E: experts; k: experts per token",))


@derivable
def expert_parallel_critical_width(Z, k, topology, *, dtype="bf16"):
    """The narrowest expert (MLP width F) that expert parallelism over Z GPUs keeps compute-bound.

    Per MoE layer's forward pass each GPU does 4·B·k·D·F/Z FLOPs; the two AllToAlls (to the
    experts and back) send each token to the distinct units among its k experts, of which a
    share (M − 1)/M lies outside its own unit, at the unit's bandwidth. A unit is a node over
    InfiniBand once Z spans nodes (W_node, shared by its n GPUs), a GPU over NVLink inside one
    node. With k ≥ M this is the book's F > (C/W)(Z − 8)/k; with k ≪ M, F > 8·C/W · (Z − 8)/Z.

    Formula:
        F_crit = (C / W) · n · min(k, M) · (M − 1) / (M · k),  M = Z / n units

    Args:
        Z: GPUs expert parallelism spans (a whole number >= 1: within a node, or whole nodes).
        k: experts each token is sent to (a whole number >= 1).
        topology: a :class:`GpuCluster` with at least Z GPUs.
        dtype: the dtype of the arithmetic (sets C).

    Returns:
        values (an MLP width; not rounded).

    Chapter:
        12 (GPUs)

    Example:
        >>> round(expert_parallel_critical_width(64, 8, gpu_cluster(8, "h100")))   # book: 2475 · 56 / 8
        17325
    """
    z, kk = count("Z", Z), count("k", k)
    topo = _cluster(topology)
    n = topo.gpus_per_node
    if z > topo.num_gpus:
        raise InvalidValueError(f"`Z`: {z} GPUs is more than {topo!r} has")
    C = explain(topo.spec.peak_flops_per_s, dtype=dtype)
    if z > n:
        if z % n:
            raise InvalidValueError(f"`Z`: expert parallelism across nodes spans whole nodes of {n} GPUs, got {z}")
        unit, W, where = n, topo.egress_bytes_per_s_per_node(level="spine"), "W: a node's egress, one way; n: GPUs per node"
    else:
        unit, W, where = 1, topo.nvlink_bytes_per_s_per_gpu, "W: a GPU's NVLink bandwidth, one way; n = 1 (one GPU)"
    M = z // unit
    value = C.value / W * unit * min(kk, M) * (M - 1) / (M * kk)
    return Derivation("F_crit (EP)", "(C / W) · n · min(k, M) · (M − 1) / (M · k)",
                      lambda: f"({q(C.value, 'FLOP/s')} / {q(W, 'B/s')}) · {unit} · min({kk}, {M}) · ({M} − 1) / ({M} · {kk})",
                      value, "", where=("C: a GPU's peak FLOP/s; " + where + "; M: units the experts span, Z / n; "
                                        "k: experts per token",))


@derivable
def pipeline_comms_time_s(B, D, stages, microbatches, topology, *, dtype="bf16"):
    """Time a pipeline spends passing activations between stages in one step (forward).

    Each hop carries one microbatch's activations, b·B·D/m bytes, over the link between
    stages (a node's egress when the stages sit on different nodes, a GPU's NVLink inside one
    node), and a step makes m + p − 2 hops on its critical path. Divided by the layers, it is
    about 1.5 · b·B·D / (W · layers) per layer: tiny next to the other collectives.

    Formula:
        T = (b · B · D / (m · W)) · (m + p − 2)

    Args:
        B: tokens per step through one pipeline (> 0).
        D: model width (> 0).
        stages: p, pipeline stages (a whole number >= 1).
        microbatches: m, microbatches per step (a whole number >= 1).
        topology: a :class:`GpuCluster`: one node (stages over NVLink) or several (over InfiniBand).
        dtype: the activations' dtype (b bytes per value).

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(pipeline_comms_time_s(4e6, 8192, 8, 32, gpu_cluster(8, "h100")), "s")
        '195 ms'
    """
    tokens, width = positive("B", B), positive("D", D)
    p, m = count("stages", stages), count("microbatches", microbatches)
    topo = _cluster(topology)
    b = bytes_per_value(dtype)
    if topo.num_nodes > 1:
        W, what = topo.egress_bytes_per_s_per_node(level="spine"), "a node's egress, one way"
    else:
        W, what = topo.nvlink_bytes_per_s_per_gpu, "a GPU's NVLink bandwidth, one way"
    value = b * np.asarray(tokens) * np.asarray(width) / (m * W) * (m + p - 2)
    return Derivation("T_PP comms", "(b · B · D / (m · W)) · (m + p − 2)",
                      lambda: f"({q(b)} · {q(B)} · {q(D)} / ({m} · {q(W, 'B/s')})) · ({m} + {p} − 2)",
                      plain(value), "s",
                      where=(f"b: bytes per {dtype_name(dtype)} value; B: tokens per step; D: model width; "
                             f"m: microbatches; p: stages; W: {what}",))


@derivable
def host_transfer_time_s(nbytes, *, link="nvlink-c2c"):
    """Time to move `nbytes` between a GPU and its host CPU's memory, one way.

    On a GH200 or GB200 superchip the Grace CPU sits on NVLink-C2C, as fast as another
    GPU's HBM over NVLink; a GPU on PCIe 5.0 reaches host memory about 7 times slower.

    Formula:
        T = V / W_link

    Args:
        nbytes: V, bytes to move (B), >= 0.
        link: ``"nvlink-c2c"`` (Grace superchips, default) or ``"pcie-gen5"``.

    Returns:
        seconds (s).

    Chapter:
        12 (GPUs)

    Example:
        >>> fmt(host_transfer_time_s(80e9), "s"), fmt(host_transfer_time_s(80e9, link="pcie-gen5"), "s")
        ('178 ms', '1.25 s')
    """
    V = nonnegative("nbytes", nbytes)
    link = _name("link", link, HOST_LINKS, "host link")
    W = HOST_LINKS[link]
    return Derivation(f"T_host({link})", "V / W_link", lambda: f"{q(V, 'B')} / {q(W, 'B/s')}",
                      plain(np.asarray(V) / W), "s", where=(f"W_link: the {link} link, one way",))

