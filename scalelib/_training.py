"""The training cost model (chapter 5): a step's time, memory per chip and MFU for a parallel plan.

A :class:`ParallelPlan` splits N chips into axes: ``data`` (replicas that all-reduce their
gradients), ``fsdp`` (ZeRO-3: weights, gradients and optimizer state sharded, weights gathered for
each use), ``tensor`` (Megatron-style, with sequence parallelism: activations gathered and
reduce-scattered around every block), ``pipeline`` (stages of consecutive layers, run with a
schedule over microbatches), ``expert`` (an MoE's experts spread over part of the FSDP axis, tokens
sent to them by AllToAll) and ``slices`` (replicas in different TPU slices, over DCN).

What :func:`training_cost` assumes, so that every number can be checked by hand:

* **Compute** is the FLOPs of :func:`~scalelib.train_flops` (with the plan's rematerialisation)
  spread evenly over the chips at peak C (or the share `efficiency` of it); a pipeline stage with
  more layers than L/p (L not a multiple of p·v) slows every stage to its pace.
* **Communication overlaps compute pass by pass.** A step is a forward pass and a backward pass;
  each collective runs under the compute of the pass it belongs to (FSDP's weight gathers in both;
  its gradient reduce-scatter, and the data-parallel and DCN all-reduces, in the backward), so a
  pass lasts max(its compute, the busiest axis's collectives). Different axes use different links
  and run at once; one axis's collectives run one after another. A collective of V bytes over n
  chips takes (n − 1)/n · V / W (an AllReduce twice that); an AllToAll (n − 1)/n · V / W.
* **Bandwidth per axis.** On a TPU slice the axes share the torus: an axis of n chips gets the share
  log n / log N of every chip's ICI bandwidth (all of it for FSDP over the whole slice: the book's
  850 tokens per chip on a v5p); across slices each chip has its DCN bandwidth. On GPUs the axes
  nest, tensor innermost, then FSDP, data and pipeline: an axis inside one node runs at a GPU's
  NVLink bandwidth; one that crosses nodes at the slower of NVLink and the node's egress shared by
  the GPUs whose traffic crosses it (reduced inside the node first, as NCCL does).
* **Pipelines.** The two passes over all microbatches are stretched by the bubble,
  (v·m + p − 1)/(v·m); FSDP re-gathers weights for every microbatch.
* **Memory per chip** is the chip's share of parameters, gradients and optimizer state, two layers'
  gathered weights under FSDP, and the activations the remat policy keeps for the microbatches a
  stage holds at once (:func:`~scalelib.pipeline_peak_activations`), sharded by tensor parallelism
  with sequence parallelism, as Korthikanti et al. (2022, Table 2) count them per layer in 16 bits:
  s·b·h·(34 + 5·a·s/h)/t without recomputation (``"none"``; 34·s·b·h/t and the softmax's statistics
  with flash attention, which stores no scores), 34·s·b·h/t under their selective recomputation
  (``"selective"``: the attention core recomputed), 2·s·b·h/t under full (``"full"``: each layer's
  input, plus one layer's working set while the backward recomputes it). ``"dot_product"`` (JAX's
  policy saving only the weight matmuls' outputs) keeps less than selective: those outputs alone.

Not modelled: the optimizer's update, attention across sequence shards, the embedding tables'
place in a pipeline, latency of small collectives, imperfect overlap. Facts and formulas follow
ch. 5 of How to Scale Your Model (Austin et al., 2025); ZeRO from Rajbhandari et al. (2020).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError, unknown
from ._calibration import LOSS_SOURCES, LOSSES, check_losses
from ._models import ModelSpec, model as _model
from ._pipeline import SCHEDULES
from ._specs import bytes_per_value, dtype_name
from ._topology import GpuCluster, TpuSlice
from ._transformer import OPTIMIZER_STATES, REMAT, _mlp_params, forward_flops, params, train_flops
from ._units import fmt
from ._validate import count, flag, name as _name, number, positive, share, shown

#: The schedule a plan without a pipeline keeps (it orders nothing there).
DEFAULT_SCHEDULE = "1f1b"


def _schedule_ok(pipeline, default_schedule):
    """The rule for a pipeline schedule: one other than the default needs a pipeline (numbers or arrays).

    Shared by :class:`ParallelPlan` and the plan search's rules.
    """
    return (pipeline > 1) | default_schedule


def _split_ok(B, T, replicas, microbatches):
    """The one rule for cutting a step's batch, shared by :func:`training_cost` and the plan search (numbers or arrays).

    The B tokens of a step are split over the replicas (data·fsdp·slices) in space, then each replica's
    share over its microbatches in time. A sequence may be split in space: a replica may hold part of
    one (its tokens sharded along the sequence, the book's tokens per chip), at least one token. A
    sequence is never split in time: with more than one microbatch each holds at least one whole
    sequence of T tokens. (The batch itself holds at least one sequence: :func:`_setup` checks B >= T.)
    """
    return (replicas <= B) & ((microbatches == 1) | (B / replicas / microbatches >= T))


#: The axes of a plan, in the order they nest on GPUs (innermost first), and their short names.
AXES = ("tensor", "fsdp", "data", "pipeline", "slices")
SHORT = {"data": "DP", "fsdp": "FSDP", "tensor": "TP", "pipeline": "PP", "expert": "EP", "slices": "DCN"}


@dataclass(frozen=True, kw_only=True)
class ParallelPlan:
    """How a training step is split over chips: the degree of every axis, the pipeline's schedule, remat.

    ``data·fsdp·tensor·pipeline`` chips make one slice (a TPU slice or a whole GPU cluster);
    ``slices`` copies of it join over DCN. ``expert`` experts' groups are carved out of the FSDP axis
    (it divides ``fsdp``). ``microbatches`` cut each replica's batch (pipeline microbatches, or
    gradient accumulation without a pipeline; more than one must each hold a whole sequence); ``schedule``
    is ``"gpipe"``, ``"1f1b"`` or ``"interleaved"`` (with ``virtual_stages`` chunks per stage), and a
    plan without a pipeline keeps the default ``"1f1b"`` with one chunk; ``remat`` is what the backward
    recomputes: ``"none"``, ``"dot_product"``, ``"full"`` or ``"selective"`` (see :func:`~scalelib.train_flops`).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> plan = ParallelPlan(fsdp=1024, tensor=4)
        >>> plan, plan.num_chips
        (ParallelPlan(FSDP 1024 × TP 4; remat full), 4096)
    """

    data: int = 1
    fsdp: int = 1
    tensor: int = 1
    pipeline: int = 1
    expert: int = 1
    slices: int = 1
    microbatches: int = 1
    schedule: str = DEFAULT_SCHEDULE
    virtual_stages: int = 1
    remat: str = "full"

    def __post_init__(self):
        for key in ("data", "fsdp", "tensor", "pipeline", "expert", "slices", "microbatches", "virtual_stages"):
            object.__setattr__(self, key, count(key, getattr(self, key)))
        _name("schedule", self.schedule, SCHEDULES, "pipeline schedule")
        _name("remat", self.remat, REMAT, "remat policy")
        if self.fsdp % self.expert:
            raise InvalidValueError(f"`expert`: expert parallelism is carved out of the FSDP axis, so it must divide "
                                    f"fsdp = {self.fsdp}, got {self.expert}")
        if self.virtual_stages > 1 and self.schedule != "interleaved":
            raise InvalidValueError(f"`virtual_stages`: only the interleaved schedule splits a stage into chunks; "
                                    f"{self.schedule!r} takes virtual_stages=1, got {self.virtual_stages}")
        if not _schedule_ok(self.pipeline, self.schedule == DEFAULT_SCHEDULE):
            chunks = f" with virtual_stages={self.virtual_stages}" if self.virtual_stages > 1 else ""
            raise InvalidValueError(f"`schedule`: {self.schedule!r}{chunks} orders the stages of a pipeline, and this "
                                    f"plan has none (pipeline=1); leave `schedule` and `virtual_stages` at their "
                                    f"defaults ({DEFAULT_SCHEDULE!r}, 1) or set pipeline > 1")
        if self.schedule == "interleaved" and self.microbatches % self.pipeline:
            raise InvalidValueError(f"`microbatches`: the interleaved schedule needs a multiple of pipeline = "
                                    f"{self.pipeline}, got {self.microbatches}")

    @property
    def chips_per_slice(self) -> int:
        return self.data * self.fsdp * self.tensor * self.pipeline

    @property
    def num_chips(self) -> int:
        return self.chips_per_slice * self.slices

    @property
    def replicas(self) -> int:
        """How many ways the batch is split: data · fsdp · slices."""
        return self.data * self.fsdp * self.slices

    @property
    def label(self) -> str:
        """``'DP 2 × FSDP 256 × TP 8'``: the axes used (all 1: ``'1 chip'``)."""
        parts = [f"{SHORT[a]} {getattr(self, a)}" for a in ("slices", "data", "fsdp", "expert", "tensor", "pipeline")
                 if getattr(self, a) > 1]
        return " × ".join(parts) or "1 chip"

    @property
    def family(self) -> str:
        """The kinds of parallelism used, without their degrees: ``'FSDP + TP'``."""
        return " + ".join(SHORT[a] for a in ("slices", "data", "fsdp", "expert", "tensor", "pipeline")
                          if getattr(self, a) > 1) or "1 chip"

    def __repr__(self) -> str:
        extra = []
        if self.pipeline > 1:
            name = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved v={self.virtual_stages}"}
            extra.append(f"{name[self.schedule]} m={self.microbatches}")
        elif self.microbatches > 1:
            extra.append(f"{self.microbatches} microbatches")
        extra.append(f"remat {self.remat}")
        return f"ParallelPlan({self.label}; {', '.join(extra)})"


@dataclass(frozen=True)
class TrainingCost:
    """What :func:`training_cost` predicts for one plan: times in seconds, memory in bytes per chip.

    ``comms_s`` maps each axis in use to its collectives' time per step (forward + backward);
    ``bound`` says for each whether it hides under compute; ``memory_bytes`` breaks a chip's
    memory down; ``binding`` names what costs the most beyond compute (a communication-bound axis is
    one ``bound`` calls so: the one whose collectives outlast their passes' compute the most, not the one
    moving the most bytes). All of these are the roofline's. Beside them, the calibrated estimate (computed when first read):
    ``estimated_time_s`` and ``estimated_mfu``, the named losses ``losses_s`` (seconds, adding up to
    estimated_time_s − time_s), their ``loss_sources``, and ``estimate_table()``, the waterfall.
    """

    plan: ParallelPlan
    time_s: float
    compute_s: float
    forward_s: float
    backward_s: float
    bubble_fraction: float
    comms_s: dict = field(repr=False)
    bound: dict = field(repr=False)
    memory_bytes: dict = field(repr=False)
    hbm_bytes: float = field(repr=False)
    mfu: float = 0.0
    tokens_per_chip: float = field(default=0.0, repr=False)
    recompute_s: float = field(default=0.0, repr=False)
    _estimator: object = field(default=None, repr=False, compare=False)
    # {axis: (forward s, backward s)} of the collectives and (forward, backward) compute s: which pass an axis binds
    _passes: dict = field(default=None, repr=False, compare=False)
    _pass_compute: tuple = field(default=None, repr=False, compare=False)

    @cached_property
    def _estimate(self) -> tuple:
        return self._estimator() if self._estimator is not None else ({}, self.time_s)

    @property
    def losses_s(self) -> dict:
        """The calibrated estimate's losses beyond the roofline, {name: seconds per step}, in the order the
        estimate charges them (switched on one at a time, so they add up to estimated_time_s − time_s)."""
        return dict(self._estimate[0])

    @property
    def estimated_time_s(self) -> float:
        """The calibrated estimate of the step (s): the roofline ``time_s`` plus every loss in ``losses_s``."""
        return float(self._estimate[1])

    @property
    def estimated_mfu(self) -> float:
        """MFU at the estimated step time (a fraction of peak)."""
        return self.mfu * self.time_s / self.estimated_time_s

    @property
    def loss_sources(self) -> dict:
        """{loss name: where its formula and constants come from}, for the losses in ``losses_s``."""
        return {k: LOSS_SOURCES[k] for k in self.losses_s}

    def estimate_table(self) -> str:
        """A Markdown waterfall: the roofline step, each loss with its source, the calibrated estimate."""
        rows = ["| from the roofline to the estimate | per step | source |", "|---|---|---|",
                f"| roofline (the bound) | {fmt(self.time_s, 's')} | MFU {self.mfu:.1%} |"]
        for k, t in self.losses_s.items():
            rows.append(f"| + {k.replace('_', ' ')} | {fmt(t, 's')} | {LOSS_SOURCES[k]} |")
        rows.append(f"| **calibrated estimate** | **{fmt(self.estimated_time_s, 's')}** | MFU "
                    f"{self.estimated_mfu:.1%} |")
        return "\n".join(rows)

    @property
    def fits(self) -> bool:
        return self.memory_bytes["total"] <= self.hbm_bytes

    @property
    def binding(self) -> str:
        """What slows this plan most beyond pure compute, in words."""
        return _binding(self)

    def __repr__(self) -> str:
        return (f"TrainingCost({self.plan.label}: step {fmt(self.time_s, 's')}, MFU {self.mfu:.1%}, "
                f"{fmt(self.memory_bytes['total'], 'B')} per chip)")

    def table(self) -> str:
        """A Markdown table: compute, each axis's communication and whether it hides, bubble, memory."""
        rows = ["| term | per step | |", "|---|---|---|",
                f"| compute (forward + backward) | {fmt(self.compute_s, 's')} | |"]
        for axis, t in self.comms_s.items():
            rows.append(f"| {axis} collectives | {fmt(t, 's')} | {self.bound[axis]} |")
        rows.append(f"| pipeline bubble | {self.bubble_fraction:.1%} of the step | |")
        rows.append(f"| **step** | **{fmt(self.time_s, 's')}** | MFU {self.mfu:.1%} |")
        for part, b in self.memory_bytes.items():
            if part != "total" and b:
                rows.append(f"| memory: {part} | {fmt(b, 'B')} per chip | |")
        verdict = "fits" if self.fits else "does NOT fit"
        rows.append(f"| **memory** | **{fmt(self.memory_bytes['total'], 'B')}** per chip | {verdict} in "
                    f"{fmt(self.hbm_bytes, 'B')} |")
        return "\n".join(rows)


def _binding(cost: TrainingCost) -> str:
    if not cost.fits:
        return f"does not fit: {fmt(cost.memory_bytes['total'], 'B')} per chip > {fmt(cost.hbm_bytes, 'B')} of HBM"
    core = cost.forward_s + cost.backward_s
    options = []
    if cost.comms_s and core > cost.compute_s:
        # the axis that binds is one ``bound`` calls communication-bound: the one whose collectives outlast their
        # passes' compute the most (not the one with the most traffic, which may hide under a longer pass)
        options.append(_comm_binding(cost))
    if cost.time_s > core:
        options.append((cost.time_s - core, f"the pipeline bubble idles {cost.bubble_fraction:.1%} of the step"))
    if cost.recompute_s:
        options.append((cost.recompute_s, f"recomputes {fmt(cost.recompute_s, 's')} of forward work "
                                          f"(remat {cost.plan.remat!r}) to save memory"))
    if not options:
        return "compute-bound on every axis, nothing recomputed"
    return max(options)[1]


def _comm_binding(cost: TrainingCost) -> tuple:
    """(seconds beyond compute, words) for the communication-bound axis that outlasts its passes' compute most."""
    passes, (fwd_c, bwd_c) = cost._passes, cost._pass_compute
    over = {a: max(x - fwd_c, 0.0) + max(y - bwd_c, 0.0) for a, (x, y) in passes.items()}
    worst = max(over, key=over.get)
    x, y = passes[worst]
    if x > fwd_c and y > bwd_c or (x <= fwd_c and y <= bwd_c):
        return over[worst], (f"communication-bound on {worst}: its collectives take {fmt(x + y, 's')} against "
                             f"{fmt(fwd_c + bwd_c, 's')} of compute")
    comm, compute, name = (x, fwd_c, "forward") if x > fwd_c else (y, bwd_c, "backward")
    return over[worst], (f"communication-bound on {worst}: its collectives take {fmt(comm, 's')} against "
                         f"{fmt(compute, 's')} of compute in the {name} pass")


#: The most chips per slice (or GPU cluster) the cost model and the search take.
MAX_CHIPS = 2**22


def _divisors(n: int) -> list[int]:
    """The divisors of n, in increasing order."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


# --- the model's numbers, computed once per search ------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    """Everything the cost of a plan needs besides the plan: model, batch and hardware, as plain numbers."""

    model: ModelSpec
    B: float
    T: float
    P: float            # parameters
    P_exp: float        # routed experts' parameters
    P_layer: float      # one layer's parameters (for FSDP's gathered buffers)
    fwd_flops: float    # forward FLOPs of the whole batch
    recompute: tuple    # FLOPs the backward recomputes, by remat policy (REMAT order)
    act_values: tuple   # activation values kept per token per layer, by remat policy
    L: int
    L_moe: int
    D: int
    k: int
    heads: int
    E: int
    b_param: float
    b_grad: float
    b_state: float      # optimizer state (and master copy) bytes per parameter
    b_act: float
    C: float            # the rate the matmuls run at: peak · efficiency
    peak: float         # a chip's peak FLOP/s (MFU is relative to it)
    hbm: float
    gpu: bool
    chips: int          # chips per slice
    g: int              # GPUs per node (GPU)
    w_gpu: float
    w_node: float
    w_ici: float        # a TPU chip's ICI bandwidth over all axes
    log_chips: float
    logs: dict          # n -> log n for the divisors of `chips`
    w_dcn: float
    hbm_bw: float = 0.0             # a chip's HBM bandwidth (B/s), for the estimate
    sequence_parallel: bool = True  # the estimate: Megatron's sequence parallelism with TP
    flash_attention: bool = True    # attention scores neither stored nor read from HBM
    losses: frozenset = frozenset(LOSSES)  # the losses the estimate charges


def _state_bytes(optimizer, optimizer_dtype, master_dtype) -> float:
    """The optimizer's bytes per parameter: its values per parameter in their dtype, plus a master copy if any."""
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZER_STATES:
        raise unknown("optimizer", optimizer if isinstance(optimizer, str) else shown(optimizer), OPTIMIZER_STATES,
                      arg="optimizer")
    state = OPTIMIZER_STATES[optimizer] * bytes_per_value(dtype_name(optimizer_dtype, arg="optimizer_dtype"))
    return state + (0.0 if master_dtype is None else bytes_per_value(dtype_name(master_dtype, arg="master_dtype")))


def _setup(model, B, topology, *, seq_len, dtype="bf16", param_dtype="bf16", grad_dtype="bf16", optimizer="adam",
           optimizer_dtype="f32", master_dtype=None, hbm_bytes=None, efficiency=1.0, flash_attention=True,
           sequence_parallel=True, losses=LOSSES) -> _Setup:
    m = _model(model)
    T = number("seq_len", seq_len, positive=True, integer=True)
    B_ = number("B", B, at_least=1)
    if np.ndim(B_) or np.ndim(T):
        raise InvalidValueError("`B` and `seq_len` must be single numbers (one batch, one sequence length)")
    if B_ < T:
        raise InvalidValueError(f"`B`: a batch of {B_:g} tokens is less than one sequence of `seq_len` = {T:g} tokens; "
                                f"a step trains on whole sequences, so B must be at least seq_len")
    if not isinstance(topology, (TpuSlice, GpuCluster)):
        raise InvalidValueError(f"`topology` must be a TpuSlice (tpu_slice(...), tpu_pod(...)) or a GpuCluster "
                                f"(gpu_cluster(...)), got {shown(topology)}")
    spec = topology.spec
    peak = spec.peak_flops_per_s(dtype=dtype)
    eff = share("efficiency", efficiency)
    C = peak * eff
    b_param = bytes_per_value(dtype_name(param_dtype, arg="param_dtype"))
    b_grad = bytes_per_value(dtype_name(grad_dtype, arg="grad_dtype"))
    b_state = _state_bytes(optimizer, optimizer_dtype, master_dtype)
    hbm = spec._require("hbm_bytes", "memory per chip") if hbm_bytes is None else hbm_bytes
    hbm = number("hbm_bytes", hbm, positive=True)
    if np.ndim(hbm):
        raise InvalidValueError(f"`hbm_bytes` must be one number (bytes per chip), got {shown(hbm_bytes)}")
    P = params(m)
    c = 3 if m.gated else 2
    P_exp = float(m.moe_layers * m.E * c * m.D * m.F) if m.is_moe else 0.0
    P_layer = (params(m, component="mlp") + params(m, component="attention")) / m.L
    F_eff = _mlp_params(m, True).value / (m.L * c * m.D)
    fwd = forward_flops(m, seq_len=T, tokens=B_)
    recompute = tuple(train_flops(m, seq_len=T, tokens=B_, remat=r) - 3 * fwd for r in REMAT)
    # Activation values kept per token per layer, all divided by t below (tensor and sequence parallelism).
    # "selective" is Korthikanti et al. 2022's selective recomputation (Table 2): every tensor the layer's backward
    # reads but the attention core's, which the backward recomputes (QKᵀ, softmax, AV) from the Q, K and V kept:
    # the norms' and projections' inputs, Q, K, V, the MLP's hidden activations, the residual sums; for GPT-3
    # (MHA, F = 4D, not gated) 17·D values, their 34·s·b·h bytes. "none" adds the attention core's own: the
    # softmax statistics (N per token) under flash attention, or without it the scores, softmax and dropout mask
    # (their 5·a·s² bytes per sequence). "dot_product" (JAX's policy saving the weight matmuls' outputs,
    # recomputing everything else) keeps only those: Q, K, V, the output projections' and the MLP's input
    # matmuls'. "full" keeps each layer's input, their 2·s·b·h (plus, below, one layer's working set).
    matmul_outputs = (m.N + 2 * m.K) * m.H + 2 * m.D + (c - 1) * F_eff
    kept = matmul_outputs + 3 * m.D + m.N * m.H + F_eff
    flash = flag("flash_attention", flash_attention)
    core = m.N if flash else 2.5 * m.N * T  # Korthikanti et al. 2022: 5·a·s² bytes per sequence per layer
    act_values = (kept + core, matmul_outputs, float(m.D), kept)  # REMAT order: none, dot_product, full, selective
    seq_par = flag("sequence_parallel", sequence_parallel)
    charged = check_losses(losses)
    gpu = isinstance(topology, GpuCluster)
    n = topology.num_chips
    if n > MAX_CHIPS:
        raise InvalidValueError(f"`topology`: {topology!r} has {n} chips; the training cost model takes at most "
                                f"{MAX_CHIPS} per slice (join slices with `slices`)")
    divisors = _divisors(n)
    if gpu:
        g, w_gpu = topology.gpus_per_node, topology.nvlink_bytes_per_s_per_gpu
        w_node = topology.egress_bytes_per_s_per_node(level="spine") if topology.num_nodes > 1 else math.inf
        w_ici, w_dcn = 0.0, 0.0
    else:
        g, w_gpu, w_node = 0, 0.0, 0.0
        w_ici = sum(topology.axis_bytes_per_s(a) for a in topology.axis_names)
        w_dcn = spec.dcn_bytes_per_s_per_chip or 0.0
    return _Setup(m, float(B_), float(T), P, P_exp, P_layer, fwd, recompute, act_values, m.L,
                  m.moe_layers if m.is_moe else 0, m.D, m.k or 0, m.N, m.E or 1, b_param, b_grad, b_state, 2.0, C,
                  peak, float(hbm), gpu, n, g, w_gpu, w_node, w_ici, math.log(n) if n > 1 else 1.0,
                  {d: math.log(d) for d in divisors}, w_dcn, float(spec.hbm_bytes_per_s or 0.0), seq_par, flash,
                  charged)


def _seconds_per_byte(s: _Setup, axis: str, n: int, inner: int) -> float:
    """1 / W of an axis of n chips, `inner` chips of the axes nested inside it (GPUs), as the module says."""
    if n == 1:
        return 0.0
    if axis == "slices":
        return 1.0 / s.w_dcn
    if not s.gpu:
        return s.log_chips / (s.w_ici * s.logs[n])
    if inner * n <= s.g:
        return 1.0 / s.w_gpu
    cross = min(inner, s.g) / s.w_node
    if inner < s.g:
        return max(1.0 / s.w_gpu, cross)
    return cross


# --- the cost of one plan, one plan at a time (the reference the vectorised search is tested against) ------


def _plan_terms(s: _Setup, d, f, t, p, e, sl, mb, sched, v, r):
    """The cost of one plan: (step s, forward and backward compute s, forward and backward pass s, bubble,
    {axis: (forward s, backward s)}, {part: bytes per chip}).

    Degrees: d data, f FSDP, t tensor, p pipeline, e expert, sl slices; mb microbatches; `sched` is
    0 GPipe, 1 1F1B, 2 interleaved, with v chunks per stage; `r` indexes REMAT. Every operation here is repeated, in
    the same order, by :func:`_costs_numpy`; the two must agree to the last bit.
    """
    N = d * f * t * p * sl                  # chips
    R = d * f * sl                          # replicas: ways the batch is split
    L_stage = -(-s.L // (p * v)) * v        # layers on the busiest stage
    uneven = L_stage * p / s.L              # every stage waits for the busiest
    full = 1.0 if r == 2 else 0.0           # full remat re-runs the forward's collectives in the backward
    fwd_c = s.fwd_flops / (N * s.C) * uneven
    bwd_c = (2.0 * s.fwd_flops + s.recompute[r]) / (N * s.C) * uneven
    tok = s.B / R  # tokens per replica per step
    fe = max(f // e, 1)  # e divides f in a legal plan
    shard = (s.P - s.P_exp) * ((f - 1) / f) + s.P_exp * ((fe - 1) / fe)
    spb_f = _seconds_per_byte(s, "fsdp", f, t)
    # FSDP, per microbatch: the weights gathered in each pass, the gradients reduce-scattered backward
    gather = mb * (s.b_param * shard / (t * p)) * spb_f
    scatter = mb * (s.b_grad * shard / (t * p)) * spb_f
    # EP: one AllToAll of k copies of each token's D values, per MoE layer of the stage (on FSDP's links)
    a2a = s.b_act * (tok / t) * s.k * s.D * ((e - 1) / e) * (s.L_moe / p) * spb_f
    comms = {}
    if f > 1:
        comms["fsdp"] = (gather + 2.0 * a2a, gather + scatter + (2.0 + 2.0 * full) * a2a)
    if t > 1:  # TP: an AllGather and a ReduceScatter of [tokens, D] around attention and the MLP, per layer
        per_pass = L_stage * 4.0 * ((t - 1) / t) * s.b_act * tok * s.D * _seconds_per_byte(s, "tensor", t, 1)
        comms["tensor"] = (per_pass, (2.0 + full) * per_pass)
    if d > 1:  # DP: an AllReduce of the gradient shard, backward
        comms["data"] = (0.0, 2.0 * ((d - 1) / d) * s.b_grad * s.P / (t * p * f) * _seconds_per_byte(s, "data", d, t * f))
    if p > 1:  # PP: each stage passes its [tokens, D / t] activations on, v times (once per chunk)
        hop = v * s.b_act * tok * s.D / t * _seconds_per_byte(s, "pipeline", p, t * f * d)
        comms["pipeline"] = (hop, hop)
    if sl > 1:  # DCN: an AllReduce of the chip's gradient shard with its counterparts in the other slices
        comms["slices"] = (0.0, 2.0 * ((sl - 1) / sl) * s.b_grad * s.P / (t * p * f * d) * _seconds_per_byte(
            s, "slices", sl, 1))
    fwd = fwd_c  # each pass: its compute or its busiest axis's collectives, whichever is longer
    bwd = bwd_c
    for a, b in comms.values():
        fwd = max(fwd, a)
        bwd = max(bwd, b)
    stretch = (v * mb + p - 1) / (v * mb)
    step = (fwd + bwd) * stretch
    # memory per chip
    local = s.P / (t * p * f)
    gathered = 2.0 * s.b_param * s.P_layer / t if f > 1 else 0.0
    if p == 1:
        held = 1.0
    elif sched == 0:
        held = float(mb)
    elif sched == 1:
        held = float(min(mb, p))
    else:
        held = min(float(mb), p + (p - 1) / v)
    tok_mb = tok / mb / t
    acts = s.b_act * s.act_values[r] * tok_mb * L_stage * held + full * s.b_act * s.act_values[0] * tok_mb
    memory = {"parameters": s.b_param * local, "gradients": s.b_grad * local, "optimizer state": s.b_state * local,
              "gathered weights": gathered, "activations": acts}
    memory["total"] = (memory["parameters"] + memory["gradients"] + memory["optimizer state"] + gathered + acts)
    return step, fwd_c, bwd_c, fwd, bwd, (p - 1) / (v * mb + p - 1), comms, memory


# The calibrated estimate sits one layer above this module: scalelib._estimate imports this module (never the
# reverse) and, when imported, installs here its pricing of one plan, (setup, plan) -> ({loss: s}, estimate s),
# which a TrainingCost calls the first time its estimate is read.
_estimate_of = None

_SCHED_CODE = {"gpipe": 0, "1f1b": 1, "interleaved": 2}


# --- the same terms for a whole grid of plans at once (arrays): the plan search's roofline, and what the
# calibrated estimate builds on ---------------------------------------------------------------------------


def _spb_numpy(s: _Setup, axis: str, n, inner):
    """Seconds per byte of an axis for arrays of degrees (as :func:`_seconds_per_byte`)."""
    one = n == 1
    if axis == "slices":
        return np.where(one, 0.0, 1.0 / s.w_dcn if s.w_dcn else 0.0)
    if not s.gpu:
        logs = np.zeros(s.chips + 1)
        for k, value in s.logs.items():
            logs[k] = value
        return np.where(one, 0.0, s.log_chips / (s.w_ici * np.where(one, 1.0, logs[n])))
    inside = inner * n <= s.g
    cross = np.minimum(inner, s.g) / s.w_node
    out = np.where(inner < s.g, np.maximum(1.0 / s.w_gpu, cross), cross)
    return np.where(one, 0.0, np.where(inside, 1.0 / s.w_gpu, out))


def _grid_terms(s: _Setup, g: dict) -> dict:
    """The roofline's terms for every plan of the grid `g` (arrays): compute and traffic per pass and per
    axis, as :func:`_plan_terms` defines them. Shared by :func:`_costs_numpy` and the calibrated estimate (scalelib._estimate), which
    builds on them."""
    d, f, t, p, e, sl = g["data"], g["fsdp"], g["tensor"], g["pipeline"], g["expert"], g["slices"]
    mb, v, r = g["microbatches"], g["virtual_stages"], g["remat"]
    N = d * f * t * p * sl
    R = d * f * sl
    L_stage = -(-s.L // (p * v)) * v
    uneven = L_stage * p / s.L
    full = np.where(r == 2, 1.0, 0.0)
    recompute = np.array(s.recompute)[r]
    tok = s.B / R
    fe = np.maximum(f // e, 1)
    shard = (s.P - s.P_exp) * ((f - 1) / f) + s.P_exp * ((fe - 1) / fe)
    spb_f = _spb_numpy(s, "fsdp", f, t)
    return dict(
        L_stage=L_stage, full=full, tok=tok,
        fwd_c=s.fwd_flops / (N * s.C) * uneven,
        bwd_c=(2.0 * s.fwd_flops + recompute) / (N * s.C) * uneven,
        gather=mb * (s.b_param * shard / (t * p)) * spb_f,
        scatter=mb * (s.b_grad * shard / (t * p)) * spb_f,
        a2a=s.b_act * (tok / t) * s.k * s.D * ((e - 1) / e) * (s.L_moe / p) * spb_f,
        per_pass=L_stage * 4.0 * ((t - 1) / t) * s.b_act * tok * s.D * _spb_numpy(s, "tensor", t, 1),
        dp=2.0 * ((d - 1) / d) * s.b_grad * s.P / (t * p * f) * _spb_numpy(s, "data", d, t * f),
        hop=v * s.b_act * tok * s.D / t * _spb_numpy(s, "pipeline", p, t * f * d),
        dcn=2.0 * ((sl - 1) / sl) * s.b_grad * s.P / (t * p * f * d) * _spb_numpy(s, "slices", sl, 1),
        stretch=(v * mb + p - 1) / (v * mb),
    )


def _costs_numpy(s: _Setup, g: dict):
    """(step time s, memory per chip B) of every plan in `g`, the operations of :func:`_plan_terms` in order."""
    d, f, t, p = g["data"], g["fsdp"], g["tensor"], g["pipeline"]
    mb, sched, v, r = g["microbatches"], g["schedule"], g["virtual_stages"], g["remat"]
    x = _grid_terms(s, g)
    L_stage, full, tok = x["L_stage"], x["full"], x["tok"]
    fwd = np.maximum(x["fwd_c"], x["gather"] + 2.0 * x["a2a"])
    bwd = np.maximum(x["bwd_c"], x["gather"] + x["scatter"] + (2.0 + 2.0 * full) * x["a2a"])
    fwd = np.maximum(fwd, x["per_pass"])
    bwd = np.maximum(bwd, (2.0 + full) * x["per_pass"])
    bwd = np.maximum(bwd, x["dp"])
    fwd = np.maximum(fwd, x["hop"])
    bwd = np.maximum(bwd, x["hop"])
    bwd = np.maximum(bwd, x["dcn"])
    step = (fwd + bwd) * x["stretch"]
    local = s.P / (t * p * f)
    gathered = np.where(f > 1, 2.0 * s.b_param * s.P_layer / t, 0.0)
    held = np.where(p == 1, 1.0, np.where(sched == 0, mb * 1.0, np.where(
        sched == 1, np.minimum(mb, p) * 1.0, np.minimum(mb * 1.0, p + (p - 1) / v))))
    tok_mb = tok / mb / t
    act_values = np.array(s.act_values)
    acts = s.b_act * act_values[r] * tok_mb * L_stage * held + full * s.b_act * s.act_values[0] * tok_mb
    memory = s.b_param * local + s.b_grad * local + s.b_state * local + gathered + acts
    return step, memory



def _check_plan(s: _Setup, plan, topology) -> ParallelPlan:
    if not isinstance(plan, ParallelPlan):
        raise InvalidValueError(f"`plan` must be a ParallelPlan (e.g. ParallelPlan(fsdp=64, tensor=4)), got {shown(plan)}")
    if plan.chips_per_slice != s.chips:
        raise InvalidValueError(
            f"`plan`: data·fsdp·tensor·pipeline = {plan.data}·{plan.fsdp}·{plan.tensor}·{plan.pipeline} = "
            f"{plan.chips_per_slice} chips, but {topology!r} has {s.chips}; the axes must multiply to its chip count")
    if s.gpu and plan.slices > 1:
        raise InvalidValueError(f"`plan`: slices = {plan.slices}: a GPU cluster is one network (put its data "
                                f"parallelism in `data`); slices join TPU slices over DCN")
    if plan.slices > 1 and not s.w_dcn:
        raise InvalidValueError(f"`plan`: {topology.spec.name} has no DCN bandwidth on record to join slices")
    if plan.pipeline > s.L or plan.pipeline * plan.virtual_stages > s.L:
        raise InvalidValueError(f"`plan`: a pipeline of {plan.pipeline} stages × {plan.virtual_stages} chunks needs at "
                                f"least that many layers; {s.model.name} has {s.L}")
    if s.heads % plan.tensor:
        raise InvalidValueError(f"`plan`: tensor = {plan.tensor} must divide the {s.heads} query heads of "
                                f"{s.model.name} (each chip takes whole heads)")
    if plan.expert > 1 and (not s.model.is_moe or s.E % plan.expert):
        raise InvalidValueError(f"`plan`: expert = {plan.expert} needs a mixture of experts whose E it divides; "
                                f"{s.model.name} has " + (f"E = {s.E}" if s.model.is_moe else "no experts"))
    if not _split_ok(s.B, s.T, plan.replicas, plan.microbatches):
        if plan.replicas > s.B:
            raise InvalidValueError(f"`plan`: {plan.replicas} replicas (data·fsdp·slices) is more than the batch's "
                                    f"{s.B:g} tokens (`B`); each replica needs at least one token")
        per_replica = s.B / plan.replicas
        raise InvalidValueError(
            f"`plan`: microbatches = {plan.microbatches} cut a replica's {per_replica:g} tokens into "
            f"{per_replica / plan.microbatches:g} each, less than one sequence (`seq_len` = {s.T:g} tokens); a "
            f"sequence is never split over microbatches: use at most {max(int(per_replica // s.T), 1)} (or a larger "
            f"`B`)")
    return plan


def _cost(s: _Setup, plan: ParallelPlan) -> TrainingCost:
    step, fwd_c, bwd_c, fwd, bwd, bubble, comms, memory = _plan_terms(
        s, plan.data, plan.fsdp, plan.tensor, plan.pipeline, plan.expert, plan.slices, plan.microbatches,
        _SCHED_CODE[plan.schedule], plan.virtual_stages, REMAT.index(plan.remat))
    N = plan.num_chips
    names = {"fsdp": "FSDP", "tensor": "TP", "data": "DP", "pipeline": "PP", "slices": "DCN"}
    comms_s = {names[a]: x + y for a, (x, y) in comms.items()}
    bound = {names[a]: "hidden under compute" if x <= fwd_c and y <= bwd_c else "communication-bound"
             for a, (x, y) in comms.items()}
    recompute = (fwd_c + bwd_c) * s.recompute[REMAT.index(plan.remat)] / (3.0 * s.fwd_flops + s.recompute[
        REMAT.index(plan.remat)])
    # MFU <= efficiency <= 1 (the step is at least its compute at C); min() only drops rounding's last bit.
    return TrainingCost(plan, step, fwd_c + bwd_c, fwd, bwd, bubble, comms_s, bound, memory, s.hbm,
                        min(3.0 * s.fwd_flops / (step * N * s.peak), 1.0), s.B / N, recompute,
                        lambda: _estimate_of(s, plan), {names[a]: xy for a, xy in comms.items()}, (fwd_c, bwd_c))


def _derive_cost(s: _Setup, cost: TrainingCost) -> Derivation:
    p, v, m = cost.plan.pipeline, cost.plan.virtual_stages, cost.plan.microbatches
    return Derivation(
        f"T_step({cost.plan.label})", "(max(T_fwd, comms_fwd) + max(T_bwd, comms_bwd)) · (v·m + p − 1) / (v·m)",
        lambda: f"({fmt(cost.forward_s, 's')} + {fmt(cost.backward_s, 's')}) · ({v}·{m} + {p} − 1) / ({v}·{m})",
        cost.time_s, "s",
        where=(f"T_fwd, T_bwd: each pass's compute, {fmt(cost.compute_s, 's')} in all; comms_fwd, comms_bwd: the "
               f"busiest axis's collectives in that pass ("
               + (", ".join(f"{a} {fmt(t, 's')}" for a, t in cost.comms_s.items()) or "none") + ")",
               f"p: pipeline stages; m: microbatches; v: chunks per stage; MFU {cost.mfu:.1%}"),
        returns=cost)


@derivable
def training_cost(model, B, plan, topology, *, seq_len, dtype="bf16", param_dtype="bf16", grad_dtype="bf16",
                  optimizer="adam", optimizer_dtype="f32", master_dtype=None, hbm_bytes=None, efficiency=1.0,
                  flash_attention=True, sequence_parallel=True, losses=LOSSES):
    """Predict one training step of `model` on `topology` under `plan`: time, memory per chip, MFU, bounds.

    The assumptions (overlap pass by pass, bandwidth per axis, pipeline bubble, memory) are the
    module's, listed in its docstring; ``explain`` gives the step time's derivation, the result's
    ``table()`` the breakdown. Beside the roofline (``time_s``, ``mfu``) the result carries the
    calibrated estimate (``estimated_time_s``, ``estimated_mfu``, the named losses ``losses_s`` and
    their ``loss_sources``, the waterfall ``estimate_table()``), computed when first read; its
    derivation is ``explain(estimated_step_time_s, ...)``.

    Formula:
        T_step = (max(T_fwd, comms_fwd) + max(T_bwd, comms_bwd)) · (v·m + p − 1) / (v·m)

    Args:
        model: a model name or a :class:`ModelSpec`.
        B: tokens per step (the global batch, at least one sequence: >= seq_len). The replicas split it in
            tokens (one may hold part of a sequence); more than one microbatch must each hold whole sequences.
        plan: a :class:`ParallelPlan` whose data·fsdp·tensor·pipeline is the topology's chip count.
        topology: a :class:`TpuSlice` (each of ``plan.slices`` slices) or a :class:`GpuCluster`.
        seq_len: T, tokens per sequence.
        dtype: the dtype of the arithmetic (sets C).
        param_dtype, grad_dtype: dtypes of the weights and gradients (also what their collectives move).
        optimizer, optimizer_dtype: the optimizer (``"adam"``: 2 values per parameter) and its state's dtype.
        master_dtype: dtype of a master copy of the weights the optimizer keeps (None: none, the book's
            10 bytes per parameter; ``"f32"``: ZeRO's mixed-precision Adam, 16 with the gradients).
        hbm_bytes: memory per chip to fit in (default: the chip's HBM).
        efficiency: the share of the peak C the matmuls reach (1: the roofline, the default; real kernels
            reach some 0.6 to 0.8); MFU stays relative to the peak. The estimate honours it as a ceiling: each
            matmul runs at the lower of it and the efficiency its size allows.
        flash_attention: True (the default): the attention scores are never stored (a fused kernel); False:
            each layer without remat keeps them, Korthikanti et al. 2022's 5·a·s² bytes per sequence (a: heads,
            s: seq_len), split over the tensor axis, and the estimate reads and writes them.
        sequence_parallel: for the estimate only: Megatron's sequence parallelism with TP (AllGathers and
            ReduceScatters, elementwise kernels split t ways; the roofline always assumes it); False: two
            AllReduces per layer and pass, elementwise kernels repeated on every chip of the tensor axis.
        losses: the losses the estimate charges, a collection of names from ``scalelib.LOSSES`` (default:
            all; ``()``: the estimate is the roofline).

    Returns:
        a :class:`TrainingCost` (step time in s, memory in B per chip, MFU as a fraction).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import tpu_slice
        >>> cost = training_cost("llama-2-13b", 3 * 2**20, ParallelPlan(fsdp=1024, tensor=4, remat="dot_product"),
        ...                      tpu_slice((16, 16, 16), "tpu-v5p"), seq_len=32768)
        >>> fmt(cost.time_s, "s"), f"{cost.mfu:.0%}", cost.fits
        ('309 ms', '85%', True)
    """
    s = _setup(model, B, topology, seq_len=seq_len, dtype=dtype, param_dtype=param_dtype, grad_dtype=grad_dtype,
               optimizer=optimizer, optimizer_dtype=optimizer_dtype, master_dtype=master_dtype, hbm_bytes=hbm_bytes,
               efficiency=efficiency, flash_attention=flash_attention, sequence_parallel=sequence_parallel,
               losses=losses)
    plan = _check_plan(s, plan, topology)
    return _derive_cost(s, _cost(s, plan))


@derivable
def estimated_step_time_s(model, B, plan, topology, *, seq_len, dtype="bf16", param_dtype="bf16", grad_dtype="bf16",
                          optimizer="adam", optimizer_dtype="f32", master_dtype=None, efficiency=1.0,
                          flash_attention=True, sequence_parallel=True, losses=LOSSES):
    """The calibrated estimate of a training step: the roofline of :func:`training_cost` plus named losses.

    Each loss (``scalelib.LOSSES``: matmul efficiency by shape, memory-bound elementwise kernels,
    exposed tensor-parallel collectives on their network tier, recompute's kernels and collectives,
    pipeline sends, the exposed data-parallel AllReduce, the optimizer step) has its formula in
    ``scalelib._estimate``'s docstring and its constants, each with its source, in
    ``scalelib/data/estimate.toml``. The losses are switched on one at a time in that order, so they
    add up exactly to the estimate minus the roofline; ``losses=()`` gives the roofline itself.

    Formula:
        T_est = T_roofline + Σ losses

    Args:
        model, B, plan, topology, seq_len: as in :func:`training_cost`.
        dtype, param_dtype, grad_dtype, optimizer, optimizer_dtype, master_dtype, efficiency: as there too.
        flash_attention, sequence_parallel, losses: as there too.

    Returns:
        seconds (s).

    Chapter:
        5 (Parallelism for training), 6 (Training LLaMA 3)

    Example:
        >>> from scalelib import gpu_cluster
        >>> plan = ParallelPlan(data=8, fsdp=8, tensor=8, microbatches=4, remat="none")
        >>> fmt(estimated_step_time_s("llama-3-70b", 4 * 2**20, plan, gpu_cluster(64, "h100"), seq_len=4096), "s")
        '7.29 s'
    """
    cost = training_cost(model, B, plan, topology, seq_len=seq_len, dtype=dtype, param_dtype=param_dtype,
                         grad_dtype=grad_dtype, optimizer=optimizer, optimizer_dtype=optimizer_dtype,
                         master_dtype=master_dtype, efficiency=efficiency, flash_attention=flash_attention,
                         sequence_parallel=sequence_parallel, losses=losses)
    names = list(cost.losses_s)
    return Derivation(
        f"T_est({cost.plan.label})", "T_roofline + " + (" + ".join(names) if names else "nothing"),
        lambda: " + ".join([fmt(cost.time_s, "s")] + [fmt(cost.losses_s[k], "s") for k in names]),
        cost.estimated_time_s, "s",
        where=(f"T_roofline: training_cost's step (MFU {cost.mfu:.1%}); estimated MFU {cost.estimated_mfu:.1%}",
               *(f"{k}: {LOSS_SOURCES[k]}" for k in names)))


@derivable
def training_memory_bytes(model, B, plan, topology, *, seq_len, param_dtype="bf16", grad_dtype="bf16",
                          optimizer="adam", optimizer_dtype="f32", master_dtype=None, flash_attention=True):
    """Memory one chip needs for a training step under `plan`: its share of the state, and activations.

    Formula:
        bytes = (p + g + o) · params / (fsdp·tensor·pipeline) + gathered weights + activations

    Args:
        model, B, plan, topology, seq_len: as in :func:`training_cost`.
        param_dtype, grad_dtype, optimizer, optimizer_dtype, master_dtype, flash_attention: as there too.

    Returns:
        bytes (B) per chip.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import tpu_pod
        >>> plan = ParallelPlan(fsdp=8960, remat="full")
        >>> fmt(training_memory_bytes("llama-3-70b", 4 * 2**20, plan, tpu_pod("tpu-v5p"), seq_len=4096), "B")
        '4.27 GB'
    """
    s = _setup(model, B, topology, seq_len=seq_len, param_dtype=param_dtype, grad_dtype=grad_dtype,
               optimizer=optimizer, optimizer_dtype=optimizer_dtype, master_dtype=master_dtype,
               flash_attention=flash_attention)
    plan = _check_plan(s, plan, topology)
    mem = _cost(s, plan).memory_bytes
    parts = [k for k in mem if k != "total"]
    return Derivation(f"memory per chip({plan.label})", " + ".join(parts),
                      lambda: " + ".join(fmt(mem[k], "B") for k in parts), mem["total"], "B",
                      where=(f"p + g + o = {q(s.b_param)} + {q(s.b_grad)} + {q(s.b_state)} bytes per parameter; "
                             f"activations kept by remat {plan.remat!r}",))


@derivable
def model_flops_utilization(model, B, step_time_s, topology, *, seq_len, slices=1, dtype="bf16"):
    """MFU: the share of the chips' peak FLOP/s a step's model FLOPs (6·params per token, plus attention) use.

    Recomputation (remat) does not count: MFU measures the model's work, not the hardware's.

    Formula:
        MFU = FLOPs_train(B tokens) / (T_step · N · C)

    Args:
        model: a model name or a :class:`ModelSpec`.
        B: tokens per step (> 0).
        step_time_s: the step's time (s), measured or predicted: at least FLOPs_train / (N · C), the time of
            the step's FLOPs with every chip at its peak (a shorter step would mean an MFU above 1).
        topology: a :class:`TpuSlice` or :class:`GpuCluster` (N: its chips, times `slices`).
        seq_len: T, tokens per sequence.
        slices: copies of the topology working together (TPU slices over DCN).
        dtype: the dtype of the arithmetic (sets C).

    Returns:
        a fraction (dimensionless).

    Chapter:
        5 (Parallelism for training), 6 (Training LLaMA 3)

    Example:
        >>> from scalelib import gpu_cluster
        >>> round(model_flops_utilization("llama-3.1-405b", 16 * 2**20, 13.0, gpu_cluster(2048, "h100"),
        ...                               seq_len=8192), 3)
        0.209
    """
    if not isinstance(topology, (TpuSlice, GpuCluster)):
        raise InvalidValueError(f"`topology` must be a TpuSlice or a GpuCluster, got {shown(topology)}")
    B_ = positive("B", B)
    t = positive("step_time_s", step_time_s)
    n = count("slices", slices) * topology.num_chips
    flops = explain(train_flops, model, seq_len=seq_len, tokens=B_)
    C = explain(topology.spec.peak_flops_per_s, dtype=dtype)
    # The smallest possible step: its FLOPs with every chip at its peak the whole time (MFU 1).
    T_step, work = (np.ravel(a) for a in np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(flops.value)))
    fastest = work / (n * C.value)
    short = np.flatnonzero(T_step < fastest * (1 - 1e-12))
    if short.size:
        i = short[0]
        raise InvalidValueError(
            f"`step_time_s`: a step of {T_step[i]:.6g} s is shorter than the smallest possible, {fastest[i]:.6g} s "
            f"({q(work[i], 'FLOP')} on {n} chips at their {dtype_name(dtype)} peak): the MFU would exceed 1; "
            f"give step_time_s >= {fastest[i]:.6g}")
    # Rounding alone can put a step of exactly the smallest time a hair above 1.
    return Derivation("MFU", "FLOPs_train / (T_step · N · C)",
                      lambda: f"{q(flops.value, 'FLOP')} / ({q(t, 's')} · {n} · {q(C.value, 'FLOP/s')})",
                      plain(np.minimum(np.asarray(flops.value) / (np.asarray(t) * n * C.value), 1.0)),
                      "", (flops,), where=("N: chips; C: a chip's peak FLOP/s",))


@derivable
def zero_state_bytes(model, data_parallel, *, stage=3, param_dtype="bf16", grad_dtype="bf16", optimizer="adam",
                     optimizer_dtype="f32", master_dtype="f32"):
    """Bytes per chip of the training state under ZeRO stage 0-3 over `data_parallel` chips.

    ZeRO (Rajbhandari et al., 2020) shards across the data-parallel chips first the optimizer state
    (stage 1), then the gradients too (2), then the weights too (3, FSDP). With mixed-precision Adam
    (bf16/fp16 weights and gradients, an f32 master copy and two f32 moments: 2 + 2 + 12 bytes per
    parameter), a 7.5B model on 64 chips needs 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per chip.

    Formula:
        stage 0: (p + g + K)·Ψ;  1: (p + g)·Ψ + K·Ψ/N;  2: p·Ψ + (g + K)·Ψ/N;  3: (p + g + K)·Ψ/N

    Args:
        model: a model name, a :class:`ModelSpec`, or a parameter count Ψ (> 0).
        data_parallel: N, the chips the state is sharded over (a whole number >= 1).
        stage: the ZeRO stage, 0, 1, 2 or 3.
        param_dtype, grad_dtype: dtypes of the weights (p bytes) and gradients (g bytes).
        optimizer, optimizer_dtype: the optimizer and its state's dtype.
        master_dtype: dtype of the optimizer's master copy of the weights, or None; K counts it.

    Returns:
        bytes (B) per chip.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> [fmt(zero_state_bytes(7.5e9, 64, stage=k), "B") for k in range(4)]
        ['120 GB', '31.4 GB', '16.6 GB', '1.88 GB']
    """
    if isinstance(model, (str, ModelSpec)):
        count_ = explain(params, model)
        psi, steps = count_.value, (count_,)
    else:
        psi, steps = number("model", model, positive=True), ()
        if np.ndim(psi):
            raise InvalidValueError(f"`model` must be a model or one parameter count, got {shown(model)}")
    n = count("data_parallel", data_parallel)
    if isinstance(stage, (bool, np.bool_)) or not isinstance(stage, (int, np.integer)) or stage not in (0, 1, 2, 3):
        raise InvalidValueError(f"`stage` must be a ZeRO stage, 0, 1, 2 or 3, got {shown(stage)}")
    p = bytes_per_value(dtype_name(param_dtype, arg="param_dtype"))
    g = bytes_per_value(dtype_name(grad_dtype, arg="grad_dtype"))
    K = _state_bytes(optimizer, optimizer_dtype, master_dtype)
    whole, sharded, formula, text = {
        0: (p + g + K, 0.0, "(p + g + K)·Ψ", f"({q(p)} + {q(g)} + {q(K)})·{q(psi)}"),
        1: (p + g, K, "(p + g)·Ψ + K·Ψ/N", f"({q(p)} + {q(g)})·{q(psi)} + {q(K)}·{q(psi)}/{n}"),
        2: (p, g + K, "p·Ψ + (g + K)·Ψ/N", f"{q(p)}·{q(psi)} + ({q(g)} + {q(K)})·{q(psi)}/{n}"),
        3: (0.0, p + g + K, "(p + g + K)·Ψ/N", f"({q(p)} + {q(g)} + {q(K)})·{q(psi)}/{n}"),
    }[int(stage)]
    return Derivation(f"ZeRO-{int(stage)} state per chip", formula, text, whole * psi + sharded * psi / n, "B", steps,
                      where=("Ψ: parameters; N: data-parallel chips; p, g: bytes per weight and per gradient; "
                             "K: the optimizer's bytes per parameter (master copy and moments)",))
