"""The calibrated estimate (chapters 5, 6, 8): the roofline bound plus named, sourced losses.

The roofline of :func:`~scalelib.training_cost` runs every matmul at peak and hides every collective
under compute wherever compute is longer. Real runs lose time to seven things it leaves out; the
estimate charges each, with the constants of ``scalelib/data/estimate.toml`` (each with its source):

* ``matmul_efficiency``: each matmul of a layer runs at the efficiency its size allows (calculon's
  table by its GFLOP on one chip, linear between the table's points so that a larger matmul never
  takes less time), never above the caller's `efficiency`, plus the time of reading its operands;
* ``memory_bound_ops``: the elementwise kernels of a layer, not overlapped with anything: two
  layernorms, two residual adds, two dropouts, the activation (GeLU or SwiGLU) and, without flash
  attention, the softmax and dropout of the attention scores; their bytes are Korthikanti et al.
  2022's activation tensors (divided by t where tensor or sequence parallelism splits them), read and
  written at the HBM's achieved bandwidth, the backward twice the forward's;
* ``tensor_collectives``: tensor (and expert) parallelism's collectives, none hidden on GPUs
  (Megatron-LM runs them between the matmuls): with sequence parallelism two AllGathers and two
  ReduceScatters of [tokens, D] per layer and pass, without it two AllReduces; an MoE layer's two
  AllToAlls (dispatch and combine) of k copies of each token; each at its network tier's achieved
  bandwidth plus a latency (NVLink inside a node, the scale-out network once the group spans nodes).
  On a TPU slice XLA overlaps them with the matmuls (collective matmul), so they cost what exceeds
  the pass's compute, with a hop's latency per step of the ring;
* ``recompute``: what a recomputed forward repeats besides its FLOPs (which the roofline counts):
  its elementwise kernels and, under full remat, its collectives (one re-gather per layer under
  selective remat with sequence parallelism);
* ``pipeline_send_receive``: each chunk's activations sent to the next stage, every microbatch and
  pass, 1/t of [tokens, D] (Megatron's scatter-gather), at its tier's bandwidth plus latency;
* ``data_parallel_exposed``: the data-parallel (and DCN) gradient AllReduce at achieved bandwidth;
  with a pipeline it runs after the pipeline's flush, exposed (Narayanan et al. 2021); without one it
  overlaps the backward. FSDP's gathers stay overlapped, at achieved bandwidth;
* ``optimizer_step``: Adam's update, memory-bound: weights, state and master copy read and written,
  gradients read.

**In layers.** The roofline (:mod:`scalelib._training`: compute at C, every collective at the data
sheet's bandwidth, hidden where compute is longer) is the bottom layer, a lower bound; this module
sits on it (it imports the roofline's terms, :func:`scalelib._training._grid_terms`, and the roofline
never imports it); the plan search (:mod:`scalelib._plan_search`) sits on both. Each pass of the
estimate lasts the longest of the roofline's own terms for that pass (kept as a floor), its serial
work (compute and the charged losses that do not overlap) and the collectives still overlapped; the
step is the two passes stretched by the pipeline bubble, plus what runs after the flush. A loss only
lengthens a term or adds one, so the estimate is never below the roofline and each loss, the step
with it switched on less the step before it (in the order above), is >= 0 by construction; the
losses add up exactly to estimate − roofline, and with none charged the estimate is the roofline, to
the last bit. (With a pipeline, the roofline keeps the data-parallel AllReduce inside the stretched
backward pass; the estimate keeps that floor and adds the exposed AllReduce after the flush, so it
errs slow, never below the bound.)
"""

from __future__ import annotations

import numpy as np

from . import _training
from ._calibration import (INFERENCE_LOSS_SOURCES, INFERENCE_LOSSES, LOSS_SOURCES, LOSSES,  # noqa: F401 (re-exported)
                           _hbm_efficiency, _matmul_efficiency, check_inference_losses, check_losses, constants,
                           model_shape)
from ._errors import InvalidValueError
from ._training import _SCHED_CODE, REMAT, _costs_numpy, _grid_terms


class Hardware:
    """The achieved bandwidths and latencies of a topology's tiers, for the estimate."""

    def __init__(self, s):
        c = constants()
        if not s.hbm_bw:
            raise InvalidValueError(f"the estimate needs the HBM bandwidth of {s.model.name}'s chip, and it has none "
                                    f"on record")
        self.hbm = s.hbm_bw * c["hbm"]["achieved"]
        self.mm_scale = c["kernel"]["matmul_scale"]
        self.gpu = s.gpu
        if s.gpu:
            self.w_nvlink = s.w_gpu * c["nvlink"]["achieved"]
            self.lat_nvlink = c["nvlink"]["latency_s"]
            self.w_ib = (s.w_node / s.g if np.isfinite(s.w_node) else s.w_gpu) * c["infiniband"]["achieved"]
            self.lat_ib = c["infiniband"]["latency_s"]
            self.ib_fraction = c["infiniband"]["achieved"]
        else:
            self.ici = c["ici"]["achieved"]
            self.hop = c["ici"]["hop_latency_s"]
            self.lat_dcn = c["ici"]["dcn_latency_s"]
            self.ib_fraction = c["ici"]["achieved"]

    def tier(self, s, n, inner):
        """(seconds per byte, latency s) of a collective over an axis of n chips, `inner` chips of the axes
        inside it: NVLink while the group stays in a node, else the scale-out network (GPUs); a TPU axis's
        share of ICI, with a hop's latency per step of a ring half the axis long."""
        n = np.asarray(n)
        if self.gpu:
            inside = inner * n <= s.g
            return (np.where(inside, 1.0 / self.w_nvlink, 1.0 / self.w_ib),
                    np.where(inside, self.lat_nvlink, self.lat_ib))
        logs = np.zeros(s.chips + 1)
        for k, value in s.logs.items():
            logs[k] = value
        logs[1] = 1.0
        return s.log_chips / (s.w_ici * self.ici * logs[n]), self.hop * n / 2


def estimate_step(s, hw, g, on, *, parts=False):
    """The estimated step time (s) of every plan in the grid `g` (arrays, as the plan search's), with the losses
    in `on` charged. With ``on`` empty it is the roofline of :func:`scalelib._training._costs_numpy`, bit for bit.

    Built on the roofline's terms: each pass lasts the longest of the roofline's own terms for it (its compute
    at C, each axis's collectives at the data sheet's bandwidth: lower bounds, kept whatever the estimate adds),
    its serial work (compute and the charged losses that do not overlap) and the collectives the estimate still
    overlaps; the passes are stretched by the bubble, and what runs after the pipeline's flush is added. A loss
    only ever lengthens a term or adds one, so the estimate is never below the roofline and switching a loss on
    never shortens the step: every loss of :func:`losses_of` is >= 0 by construction.
    """
    d, f, t, p, e, sl = g["data"], g["fsdp"], g["tensor"], g["pipeline"], g["expert"], g["slices"]
    mb, v, r = g["microbatches"], g["virtual_stages"], g["remat"]
    if not on:
        return _costs_numpy(s, g)[0]
    sequence_parallel, flash_attention = s.sequence_parallel, s.flash_attention
    x = _grid_terms(s, g)
    L_stage, full, tok, fwd_c, bwd_c = x["L_stage"], x["full"], x["tok"], x["fwd_c"], x["bwd_c"]
    gather, scatter, a2a, per_pass = x["gather"], x["scatter"], x["a2a"], x["per_pass"]
    dp, hop, dcn, stretch = x["dp"], x["hop"], x["dcn"], x["stretch"]
    # the roofline's terms of each pass (as _costs_numpy takes their max): the floor of the estimate's pass
    floor_f = [fwd_c, gather + 2.0 * a2a, per_pass, hop]
    floor_b = [bwd_c, gather + scatter + (2.0 + 2.0 * full) * a2a, (2.0 + full) * per_pass, dp, hop, dcn]
    sel = np.where((r == 1) | (r == 3), 1.0, 0.0)  # dot_product or selective: the attention core recomputed
    over_f = [gather + 2.0 * a2a]
    over_b = [gather + scatter + (2.0 + 2.0 * full) * a2a]
    D, F, Nh, K, H, V, c = model_shape(s.model)
    T = s.T
    tm = tok / mb                       # tokens of one microbatch of one replica
    ser_f, ser_b, after = fwd_c, bwd_c, 0.0
    out = {}
    if "matmul_efficiency" in on:
        # one layer's matmuls on one chip: (m, k, n, batch, whether the m x k input and the m x n output go
        # through HBM); with flash attention the scores (Q·Kᵀ's output, P·V's input) stay on chip
        stored = 0.0 if flash_attention else 1.0
        ops = [(tm, D, (Nh + 2 * K) * H / t, 1.0, 1.0, 1.0), (tm, Nh * H / t, D, 1.0, 1.0, 1.0),
               (tm, D, (c - 1) * F / t, 1.0, 1.0, 1.0), (tm, F / t, D, 1.0, 1.0, 1.0),
               (T, H, T, tm / T * Nh / t, 1.0, stored), (T, T, H, tm / T * Nh / t, stored, 1.0)]
        ideal = 0.0
        real = 0.0
        cap = s.C / s.peak  # `efficiency`: no matmul beats the share of peak the caller allows
        for m_, k_, n_, batch, a_in, a_out in ops:
            flops = 2.0 * m_ * k_ * n_ * batch
            nbytes = s.b_act * (a_in * m_ * k_ + k_ * n_ + a_out * m_ * n_) * batch
            ideal = ideal + flops / s.C
            rate = s.peak * np.minimum(cap, _matmul_efficiency(flops / 1e9) * hw.mm_scale)
            real = real + flops / rate + nbytes / hw.hbm
        factor = real / ideal   # >= 1: every matmul at most at C, operand reads on top
        ser_f, ser_b = ser_f * factor, ser_b * factor
        out["matmul_efficiency"] = factor
    a_s = 1.0 / t if sequence_parallel else 1.0
    elementwise = 30.0 * tm * D * a_s + 2.0 * c * tm * F / t
    scores = 0.0 if flash_attention else 9.0 * tm * T * Nh / t
    layer_mem = (elementwise + scores) / hw.hbm          # one layer's forward, one microbatch (s)
    if "memory_bound_ops" in on:
        ser_f = ser_f + L_stage * mb * layer_mem
        ser_b = ser_b + L_stage * mb * 2.0 * layer_mem
    spb_t, lat_t = hw.tier(s, t, 1)
    V_t = s.b_act * tm * D
    ag = np.where(t > 1, lat_t + (t - 1) / t * V_t * spb_t, 0.0)
    ar = 2.0 * ag
    tp_layer = 4.0 * ag if sequence_parallel else 2.0 * ar     # per layer, microbatch and pass
    if "tensor_collectives" in on and hw.gpu:
        ser_f = ser_f + L_stage * mb * tp_layer
        ser_b = ser_b + L_stage * mb * tp_layer
        # EP: the AllToAll that sends each token's k copies to its experts and back, per MoE layer of the
        # stage, on its tier (the expert groups sit inside the FSDP axis, TP inside them), none hidden
        spb_e, lat_e = hw.tier(s, e, t)
        a2a_mb = np.where(e > 1, lat_e + s.b_act * (tm / t) * s.k * s.D * ((e - 1) / e) * spb_e, 0.0)
        moe_layers = s.L_moe / p
        ser_f = ser_f + 2.0 * mb * moe_layers * a2a_mb
        ser_b = ser_b + (2.0 + 2.0 * full) * mb * moe_layers * a2a_mb
        over_f[0] = gather
        over_b[0] = gather + scatter
    elif "tensor_collectives" in on:  # XLA overlaps them with the matmuls (collective matmul): cost beyond compute
        over_f.append(L_stage * mb * tp_layer)
        over_b.append(L_stage * mb * tp_layer * (2.0 + full))
    if "recompute" in on:
        redo = full * (layer_mem + tp_layer) + sel * (scores / hw.hbm + (ag if sequence_parallel else 0.0))
        ser_b = ser_b + L_stage * mb * redo
    if "pipeline_send_receive" in on:
        spb_p, lat_p = hw.tier(s, p, t * f * d)
        send = np.where(p > 1, lat_p + s.b_act * tm * D / t * spb_p, 0.0)
        ser_f = ser_f + v * mb * send
        ser_b = ser_b + v * mb * send
    if "data_parallel_exposed" in on:
        lat = hw.lat_ib if hw.gpu else hw.lat_dcn
        dp_real = np.where(d > 1, dp / hw.ib_fraction + 2.0 * lat, 0.0)
        dcn_real = np.where(sl > 1, dcn / hw.ib_fraction + 2.0 * lat, 0.0)
        piped = p > 1
        after = after + np.where(piped, dp_real + dcn_real, 0.0)
        over_b.append(np.where(piped, 0.0, dp_real))
        over_b.append(np.where(piped, 0.0, dcn_real))
        over_f[0] = over_f[0] / hw.ib_fraction
        over_b[0] = over_b[0] / hw.ib_fraction
    if "optimizer_step" in on:
        local = s.P / (t * p * f)
        after = after + local * (2.0 * s.b_param + s.b_grad + 2.0 * s.b_state) / hw.hbm
    fwd = ser_f
    for a in floor_f + over_f:
        fwd = np.maximum(fwd, a)
    bwd = ser_b
    for b in floor_b + over_b:
        bwd = np.maximum(bwd, b)
    step = (fwd + bwd) * stretch + after
    return (step, out) if parts else step


def plan_grid(plan) -> dict:
    """One plan as a grid of one (the plan search's arrays)."""
    g = {k: np.array([getattr(plan, k)], dtype=np.int64) for k in
         ("data", "fsdp", "tensor", "pipeline", "expert", "slices", "microbatches", "virtual_stages")}
    g["schedule"] = np.array([_SCHED_CODE[plan.schedule]], dtype=np.int64)
    g["remat"] = np.array([REMAT.index(plan.remat)], dtype=np.int64)
    return g


def losses_of(s, plan) -> dict:
    """({loss: seconds}, the estimate in s) for one plan: the charged losses switched on one at a time, in the
    order of LOSSES (each loss is the step with it on less the step before it)."""
    hw = Hardware(s)
    g = plan_grid(plan)
    prev = float(estimate_step(s, hw, g, frozenset())[0])
    out, on = {}, set()
    for name in LOSSES:
        if name not in s.losses:
            continue
        on.add(name)
        now = float(estimate_step(s, hw, g, frozenset(on))[0])
        out[name] = now - prev
        prev = now
    return out, prev


_training._estimate_of = losses_of  # the roofline's TrainingCost asks this layer for its estimate
