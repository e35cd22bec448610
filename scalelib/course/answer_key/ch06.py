"""Chapter 6 exercises: training LLaMA 3.

The chapter works the book's questions for LLaMA 3-70B on a v5p pod; the exercises ask the same
questions of LLaMA 3-8B on a v5p 16x16x16 slice (4096 chips) with 3·2^20 tokens per step in 8192-token
sequences, and of LLaMA 3.1-405B with Meta's 15.6T tokens. Every reference is computed by scalelib
(parameter counts, FLOPs, training state, thresholds, the plan search); the numbers below are only what
each question gives. Facts and formulas follow ch. 6 "Training LLaMA 3 on TPUs" of How to Scale Your
Model (Austin et al., 2025); ``book=`` names the book's question an exercise answers (its list:
scalelib/course/book_items.py). The book's Q1 and Q2 have no answers in the book: scalelib's are the
references.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..check import Exercise, register
from ._tools import define, slip
from ..._derivation import Derivation, explain, q
from ..._models import model
from ..._parallelism import (
    cross_slice_critical_batch,
    data_parallel_critical_batch,
    fsdp_tensor_parallel_critical_batch,
    optimal_fsdp_degree,
)
from ..._plan_search import search_plans
from ..._specs import chip
from ..._topology import gpu_cluster, tpu_pod, tpu_slice
from ..._transformer import params
from ..._validation_training import published_plan_estimate

SMALL = "llama-3-8b"
BIG = "llama-3.1-405b"
TOKENS = 15e12          # LLaMA 3-8B's training tokens
BIG_TOKENS = 15.6e12    # LLaMA 3.1-405B's, as the Llama 3 paper (Meta, 2024) reports them
MFU = 0.4
B = 3 * 2**20           # tokens per step: 384 sequences of 8192
T = 8192
SHAPE = (16, 16, 16)    # the v5p slice of exercises 6.6, 6.7 and 6.9-6.11: 4096 chips (6.8 takes a v4 pod)
DAY = 86400.0
YEAR = 365 * DAY


def _slice():
    return tpu_slice(SHAPE, "tpu-v5p")


def _P(name: str = SMALL) -> Derivation:
    """A preset's parameter count as one line, its terms left to the chapter (``sl.explain(sl.params, name)``)."""
    return Derivation("P", "params(model)", f"params({name})", params(name), "params",
                      where=(f"P: the parameters, counted term by term as in the chapter "
                             f"(sl.explain(sl.params, {name!r}) shows each term)",))


# 6.1 -------------------------------------------------------------------------

def _count(spec=SMALL, K: int | None = None) -> float:
    m = model(spec)
    return params(m if K is None else m.derive(f"{m.name}-K{K}", K=K))


def _counts(gated: bool = True, gqa: bool = True) -> Derivation:
    """Reference for 6.1: [P, P with every query head its own keys and values (K = N)]."""
    m = model(SMALL)
    spec = m if gated else m.derive(f"{m.name}-two-matrices", gated=False)
    P = _count(spec, None if gqa else m.N)
    P_mha = _count(spec, m.N)
    d = Derivation("[P, P_MHA]", "[L·(3·D·F + 2·D·(N+K)·H) + 2·V·D + norms, the same with K = N]",
                   f"[{m.L}·(3·{m.D}·{m.F} + 2·{m.D}·({m.N}+{m.K})·{m.H}) + 2·{m.V}·{m.D} + (2·{m.L} + 1)·{m.D}, "
                   f"K = {m.N}]", [P, P_mha], "params",
                   where=("norms: the RMS norms' (2·L + 1)·D weights, a few hundredths of a percent",))
    return define(d, {"L": "layers", "D": "the model width", "F": "the MLP width", "N": "query heads",
                      "K": "key/value heads", "H": "the head size", "V": "the vocabulary"})


register(Exercise(
    id="6.1",
    title="LLaMA 3-8B's parameters, and with full multi-head attention",
    reference=_counts,
    unit="params",
    mistakes={
        slip(_counts(gated=False), _counts()):
            "LLaMA's MLP is gated (SwiGLU): each layer has three D x F matrices, not two",
        slip(_counts(gqa=False), _counts()):
            "the first count gives every query head its own keys and values; LLaMA 3 shares them "
            "(grouped-query attention: K key/value heads for N query heads)",
    },
    book=("Text Q1",),
))


# 6.2, 6.3 ---------------------------------------------------------------------

def _per_token(per_param: int = 6, spec: str = SMALL) -> Derivation:
    P = _P(spec)
    return Derivation("FLOPs per token", f"{per_param}·P", f"{per_param}·{q(P.value)}", per_param * P.value, "FLOP",
                      (P,), where=("a forward pass does 2 FLOPs per parameter and token, the backward twice that "
                                   "(attention's dot products left aside)",))


register(Exercise(
    id="6.2",
    title="LLaMA 3-8B's training FLOPs per token",
    reference=_per_token,
    unit="FLOP",
    mistakes={
        slip(_per_token(2), _per_token()): "that counts the forward pass alone; training adds a backward pass",
        slip(_per_token(8), _per_token()): "that counts a forward recomputed under full remat; the model's "
                                           "FLOPs leave recomputation out",
    },
    book=("Text Q2",),
))


def _total_and_years(per_param: int = 6) -> Derivation:
    """Reference for 6.3: [FLOPs for 15T tokens, years on one v5p at its peak]."""
    P = _P()
    C = chip("tpu-v5p").peak_flops_per_s()
    total = per_param * P.value * TOKENS
    d = Derivation("[FLOPs_total, years]", f"[{per_param}·P·tokens, FLOPs_total / (C · year)]",
                   f"[{per_param}·{q(P.value)}·{q(TOKENS)}, {q(total, 'FLOP')} / ({q(C, 'FLOP/s')} · {q(YEAR)} s)]",
                   [total, total / C / YEAR], "", (P,))
    return define(d, {"tokens": "15T", "C": "a TPU v5p's peak bf16 rate", "year": "365 days, in seconds"})


register(Exercise(
    id="6.3",
    title="LLaMA 3-8B's FLOPs for 15T tokens, in years of one v5p",
    reference=_total_and_years,
    unit="",
    involves={"flops", "peak"},
    mistakes={
        slip(_total_and_years(2), _total_and_years()): "that counts a forward pass only; a training step also "
                                                       "runs the backward",
    },
    book=("Text Q3",),
))


# 6.4 -------------------------------------------------------------------------

def _days(chips: int = 2048, mfu: float = MFU, peak: str = "bf16", unit_days: bool = True) -> Derivation:
    P = _P()
    C = chip("tpu-v5p").peak_flops_per_s(dtype=peak)
    seconds = 6 * P.value * TOKENS / (chips * C * mfu)
    d = Derivation("days", "6·P·tokens / (n · C · MFU · day)",
                   f"6·{q(P.value)}·{q(TOKENS)} / ({chips} · {q(C, 'FLOP/s')} · {mfu} · 86400 s)",
                   seconds / DAY if unit_days else seconds, "days", (P,))
    return define(d, {"tokens": "15T", "n": "chips", "C": f"a TPU v5p's {peak} peak",
                      "MFU": "the share of the peak the step uses", "day": "86,400 s"})


register(Exercise(
    id="6.4",
    title="Days for LLaMA 3-8B on a v5p 16x16x8 at 40% MFU",
    reference=_days,
    unit="days",
    involves={"flops", "peak"},
    mistakes={
        slip(_days(mfu=1.0), _days()): "that is at the full peak; the step uses only the question's share of it",
        slip(_days(peak="int8"), _days()):
            "a factor of 2: either the step ran at the int8 peak (training runs in bf16), or on twice the chips "
            "(a 16x16x8 slice is 16·16·8 chips)",
        slip(_days(unit_days=False), _days()): "that is in seconds; the question asks for days",
    },
    book=("Text Q4",),
))


# 6.5, 6.6 --------------------------------------------------------------------

def _memory(checkpoints: int = 4) -> Derivation:
    m, P = model(SMALL), _P()
    d = Derivation("memory", "P·(p + s·o) + c·L·B·D·b",
                   f"{q(P.value)}·(2 + 2·4) + {checkpoints}·{m.L}·{B}·{m.D}·2",
                   10 * P.value + checkpoints * m.L * B * m.D * 2.0, "B", (P,))
    return define(d, {"p": "bytes per bf16 weight", "s": "Adam's moments per parameter", "o": "bytes per f32 moment",
                      "c": "checkpoints of [B, D] kept per layer", "L": "layers", "B": "tokens per step",
                      "D": "the model width", "b": "bytes per bf16 value"})


def _min_chips(checkpoints: int = 4) -> Derivation:
    mem = _memory(checkpoints)
    hbm = chip("tpu-v5p").hbm_bytes
    return Derivation("chips", "⌈memory / HBM⌉", f"⌈{q(mem.value, 'B')} / {q(hbm, 'B')}⌉",
                      float(math.ceil(mem.value / hbm)), "chips", (mem,), where=("HBM: a v5p's 96 GB",))


register(Exercise(
    id="6.5",
    title="The fewest v5p chips that hold LLaMA 3-8B's step",
    reference=_min_chips,
    unit="chips",
    integer=True,
    mistakes={
        slip(_min_chips(checkpoints=0), _min_chips()): "that holds the weights and Adam's state only; the "
                                                       "activation checkpoints of the batch need room too",
        slip(_min_chips(checkpoints=1), _min_chips()): "that keeps one checkpoint of [B, D] per layer; the "
                                                       "question keeps four",
        slip(_min_chips().value - 1, _min_chips()): "rounded down: that many chips hold a little less than the "
                                                    "step needs",
    },
    book=("Text Q5",),
))


def _per_chip(checkpoints: int = 4, chips: int | None = None) -> Derivation:
    mem = _memory(checkpoints)
    n = _slice().num_chips if chips is None else chips
    return Derivation("memory per chip", "memory / n", f"{q(mem.value, 'B')} / {n}", mem.value / n, "B", (mem,),
                      where=("n: the chips of the v5p 16x16x16 slice",))


register(Exercise(
    id="6.6",
    title="LLaMA 3-8B's memory per chip on a v5p 16x16x16",
    reference=_per_chip,
    unit="B",
    mistakes={
        slip(_per_chip(0), _per_chip()): "the checkpoints are sharded too; leave them out and only the state is left",
        slip(_per_chip(chips=int(_min_chips().value)), _per_chip()):
            "that is per chip of the smallest slice that holds the step; the question's slice is larger",
    },
    book=("Text Q6",),
))


# 6.7, 6.8, 6.9 ---------------------------------------------------------------

def _batch_only(seq_len: int = T) -> Derivation:
    return Derivation("FSDP_max", "B / T", f"{B} / {seq_len}", float(B // seq_len), "chips",
                      where=("B: tokens per step; T: tokens per sequence; each chip needs a whole sequence when "
                             "only the batch is split",))


register(Exercise(
    id="6.7",
    title="How far FSDP over the batch alone can go for LLaMA 3-8B",
    reference=_batch_only,
    unit="chips",
    integer=True,
    mistakes={
        slip(float(B), _batch_only()): "that counts tokens; without sequence sharding a chip takes whole sequences",
        slip(_batch_only(seq_len=4096), _batch_only()): "check the sequence length the question gives",
    },
    book=("Text Q7",),
))


#: 6.8's slice: a whole TPU v4 pod, 4096 chips as 6.6-6.11's v5p cube, so that its threshold is not the v5p's
#: 850 tokens the chapters print (the chapter works the v5p; the exercise transfers it to the generation before).
V4_POD = ((16, 16, 16), "tpu-v4p")


def _fsdp_ratio(axes: str | None = None, chips: int | None = None, chip: str = V4_POD[1]) -> Derivation:
    """Reference for 6.8: tokens per chip under FSDP over a whole TPU v4 pod, over what FSDP needs."""
    cube = tpu_slice(V4_POD[0], chip)
    n = cube.num_chips if chips is None else chips
    crit = explain(data_parallel_critical_batch, cube, **({"axes": axes} if axes else {}))
    crit = replace(crit, symbol="B_crit")
    d = Derivation("ratio", "(B / n) / B_crit", f"({B} / {n}) / {q(crit.value)}", B / n / crit.value, "", (crit,))
    return define(d, {"B": "tokens per step", "n": "chips sharing the batch, its sequences split too"})


register(Exercise(
    id="6.8",
    title="LLaMA 3-8B's tokens per chip under FSDP over a 4096-chip TPU v4 pod, against the threshold",
    reference=_fsdp_ratio,
    unit="",
    involves=frozenset({"bandwidth"}),
    mistakes={
        slip(_fsdp_ratio(axes="X"), _fsdp_ratio()):
            "FSDP over the whole slice runs its collectives over all three torus axes, whose bandwidths add up",
        slip(_fsdp_ratio(chips=B // T), _fsdp_ratio()):
            "with the sequences split too, every chip of the slice shares the batch, not one chip per sequence",
        slip(_fsdp_ratio(chip="tpu-v5p"), _fsdp_ratio()):
            "that is the v5p's threshold, the chapter's; a v4 has less FLOP/s and, relative to them, less ICI "
            "bandwidth",
    },
    book=("Text Q8",),
))


def _mixed(M_X: float = 2, M_Y: float = 1) -> Derivation:
    """Reference for 6.9: [FSDP + TP's threshold per chip, the balanced FSDP width], every symbol defined once."""
    F, cube = model(SMALL).F, _slice()
    n = cube.num_chips
    C, W = cube.spec.peak_flops_per_s(), cube.spec.ici_link_bytes_per_s_bidirectional
    alpha = C / W
    crit = fsdp_tensor_parallel_critical_batch(F, cube, M_X=M_X, M_Y=M_Y)
    x = optimal_fsdp_degree(B, F, cube, M_X=M_X, M_Y=M_Y)
    a = Derivation("α", "C / W", f"{q(C, 'FLOP/s')} / {q(W, 'B/s')}", alpha, "tokens")
    d1 = Derivation("B_crit", "α² / (M_X·M_Y·F)", f"{q(alpha)}² / ({M_X:g}·{M_Y:g}·{F})", crit, "tokens", (a,))
    d2 = Derivation("X_opt", "sqrt(B / F · M_X / M_Y · n)", f"sqrt({B} / {F} · {M_X:g} / {M_Y:g} · {n})", x, "chips")
    d = Derivation("answer", "[B_crit, X_opt]", "", [crit, x], "", (d1, d2))
    return define(d, {"C": "a v5p's peak bf16 FLOP/s", "W": "the ICI bandwidth of one torus axis, both directions",
                      "M_X, M_Y": "torus axes FSDP and TP use", "F": "the MLP width", "B": "tokens per step",
                      "n": "chips in the slice"})


register(Exercise(
    id="6.9",
    title="LLaMA 3-8B with FSDP + TP: its threshold and the best FSDP width",
    reference=_mixed,
    unit="",
    mistakes={
        slip(_mixed(1, 2), _mixed()): "M_X and M_Y are swapped: FSDP takes two of the torus axes, TP one",
        slip(_mixed(1, 1), _mixed()): "FSDP and TP use different numbers of torus axes here; M_X / M_Y is not 1",
    },
    book=("Text Q9",),
))


# 6.10, 6.11 (the book's Q1: more slices) -------------------------------------

def _four_step(slices: int = 4, mfu: float = MFU) -> Derivation:
    P = _P()
    C = chip("tpu-v5p").peak_flops_per_s()
    n = slices * _slice().num_chips
    d = Derivation("T_step", "6·P·B / (n·C·MFU)", f"6·{q(P.value)}·{B} / ({n}·{q(C, 'FLOP/s')}·{mfu})",
                   6 * P.value * B / (n * C * mfu), "s", (P,))
    return define(d, {"B": "tokens per step", "n": "chips in all four slices", "C": "a TPU v5p's peak bf16 rate",
                      "MFU": "the share of the peak the step uses"})


register(Exercise(
    id="6.10",
    title="LLaMA 3-8B's step on four v5p 16x16x16 slices at 40% MFU",
    reference=_four_step,
    unit="s",
    involves={"flops", "peak"},
    mistakes={
        slip(_four_step(slices=1), _four_step()): "that is one slice; the four slices share the step's work",
        slip(_four_step(mfu=1.0), _four_step()): "that is at the full peak; the step uses only the question's "
                                                 "share of it",
    },
    book=("Q1",),
))


def _four_ratio(slices: int = 4, link: str = "ici") -> Derivation:
    """Reference for 6.11: each chip's tokens on four slices, over FSDP + TP's threshold inside a slice."""
    cube = _slice()
    if link == "dcn":
        crit = explain(cross_slice_critical_batch, cube)
        return Derivation("ratio", "(B / s) / B_dcn", f"({B} / {slices}) / {q(crit.value)}",
                          B / slices / crit.value, "", (crit,))
    crit = explain(fsdp_tensor_parallel_critical_batch, model(SMALL).F, cube)
    n = cube.num_chips
    d = Derivation("ratio", "(B / (s·n)) / B_crit", f"({B} / ({slices}·{n})) / {q(crit.value)}",
                   B / (slices * n) / crit.value, "", (replace(crit, symbol="B_crit"),))
    return define(d, {"B": "tokens per step", "s": "slices joined over DCN", "n": "chips per slice"})


register(Exercise(
    id="6.11",
    title="Four slices: each chip's tokens against the roofline that binds",
    reference=_four_ratio,
    unit="",
    mistakes={
        slip(_four_ratio(link="dcn"), _four_ratio()):
            "that compares each slice's share with the DCN threshold, which it clears easily; inside each "
            "slice, FSDP + TP over ICI has its own threshold per chip",
        slip(_four_ratio(slices=1), _four_ratio()):
            "that is one slice with the whole batch; the four slices split the batch between them",
    },
    book=("Q1",),
))


# 6.12, 6.13, 6.14 (the book's Q2: LLaMA 3.1-405B) -----------------------------

BIG_B = 16 * 2**20      # tokens per step for the 405B model: 2048 sequences of 8192


def _big(per_param: int = 6, gated: bool = True) -> Derivation:
    m = model(BIG)
    P = _P(BIG) if gated else Derivation("P", "params(model)", "", params(m.derive("405b-two-matrices",
                                                                                    gated=False)), "params")
    d = Derivation("[FLOPs per step, FLOPs_total]", f"[{per_param}·P·B, {per_param}·P·tokens]",
                   f"[{per_param}·{q(P.value)}·{BIG_B}, {per_param}·{q(P.value)}·{q(BIG_TOKENS)}]",
                   [per_param * P.value * BIG_B, per_param * P.value * BIG_TOKENS], "FLOP", (P,))
    return define(d, {"B": "tokens per step (16·2^20)", "tokens": "15.6T"})


register(Exercise(
    id="6.12",
    title="LLaMA 3.1-405B: FLOPs per step and for 15.6T tokens",
    reference=_big,
    unit="FLOP",
    mistakes={
        slip(_big(2), _big()): "that counts a forward pass only; training adds the backward",
        slip(_big(gated=False), _big()): "LLaMA's MLP is gated: three D x F matrices per layer, not two",
    },
    book=("Q2",),
))


_6_13 = dict(days=21)


def _pods(mfu: float = MFU) -> Derivation:
    P = _P(BIG)
    pod = tpu_pod("tpu-v5p")
    C = pod.spec.peak_flops_per_s()
    need = 6 * P.value * BIG_TOKENS / (_6_13["days"] * DAY * pod.num_chips * C * mfu)
    d = Derivation("pods", "⌈6·P·tokens / (t · n_pod · C · MFU)⌉",
                   f"⌈6·{q(P.value)}·{q(BIG_TOKENS)} / ({_6_13['days']}·86400 s · {pod.num_chips} · "
                   f"{q(C, 'FLOP/s')} · {mfu})⌉", float(math.ceil(need)), "pods", (P,))
    return define(d, {"tokens": "15.6T", "t": "the deadline, three weeks", "n_pod": "chips per v5p pod",
                      "C": "a TPU v5p's peak bf16 rate", "MFU": "the share of the peak the step uses"})


register(Exercise(
    id="6.13",
    title="How many v5p pods train LLaMA 3.1-405B in three weeks",
    reference=_pods,
    unit="pods",
    integer=True,
    mistakes={
        slip(_pods(mfu=1.0), _pods()): "that is at the full peak; the pods do useful work only the question's "
                                       "share of the time",
        slip(_pods().value - 1, _pods()): "rounded down: that many pods would finish a little after the deadline",
    },
    book=("Q2",),
))


_6_14 = dict(nodes=1024, efficiency=0.75)


def _h100(efficiency: float | None = None) -> Derivation:
    eff = _6_14["efficiency"] if efficiency is None else efficiency
    # ranked by the roofline (the default ranking), which the efficiency calibrates
    found = explain(search_plans, BIG, BIG_B, gpu_cluster(_6_14["nodes"], "h100"), seq_len=T, efficiency=eff,
                    rank="roofline")
    step = found.value
    d = Derivation("[T_step, days]", "[T_step, tokens / B · T_step / day]",
                   f"[{q(step, 's')}, {q(BIG_TOKENS)} / {BIG_B} · {q(step, 's')} / 86400 s]",
                   [step, BIG_TOKENS / BIG_B * step / DAY], "", (found,))
    return define(d, {"tokens": "15.6T", "B": "tokens per step (16·2^20)", "day": "86,400 s"})


def _h100_at_40() -> list[float]:
    step = 6 * params(BIG) * BIG_B / (8 * _6_14["nodes"] * chip("h100").bf16_flops_per_s * MFU)
    return [step, BIG_TOKENS / BIG_B * step / DAY]


register(Exercise(
    id="6.14",
    title="LLaMA 3.1-405B on 8192 H100 with matmuls at 75% of peak",
    reference=_h100,
    unit="",
    mistakes={
        slip(_h100(efficiency=1.0), _h100()):
            "that is the roofline bound, every matmul at the full peak; the question's calibration runs them "
            "at a share of it",
        slip(_h100_at_40(), _h100()):
            "that assumes an MFU; the question asks for the plan search's best plan under its calibration",
    },
))


# 6.15 ------------------------------------------------------------------------
# One loss of the calibrated estimate, for a run the chapter tabulates but does not draw: the exposed
# tensor-parallel collectives of Korthikanti et al. 2022's 22B GPT on one node of 8 A100s (selective
# recomputation, sequence parallelism). The reference is the estimate's own `tensor_collectives` loss.

_6_15 = dict(run="korthikanti-22b-selective", L=48, D=6144, B=4 * 2048, m=1, n=8, b=2, achieved=0.8,
             latency=10e-6)


def _tp_formula(*, passes=2, layers=None, n_frac=True, b=None, achieved=None, W=None, latency=None) -> float:
    """The question's formula with one of its terms changed (the slips)."""
    c = _6_15
    L = c["L"] if layers is None else layers
    W = chip("a100").scale_up_bytes_per_s_per_gpu if W is None else W
    f = c["achieved"] if achieved is None else achieved
    lat = c["latency"] if latency is None else latency
    V = (c["b"] if b is None else b) * c["B"] * c["D"]
    share = (c["n"] - 1) / c["n"] if n_frac else 1.0
    return passes * L * c["m"] * 4 * (lat + share * V / (f * W))


def _tp_collectives() -> Derivation:
    c = _6_15
    W = chip("a100").scale_up_bytes_per_s_per_gpu
    value = published_plan_estimate(c["run"]).losses_s["tensor_collectives"]
    d = Derivation("T_TP", "2 · L · m · 4 · (T_lat + (n − 1)/n · b·B·D / (f · W))",
                   f"2 · {c['L']} · {c['m']} · 4 · ({q(c['latency'], 's')} + {c['n'] - 1}/{c['n']} · "
                   f"{c['b']}·{c['B']}·{c['D']} B / ({c['achieved']} · {q(W, 'B/s')}))", value, "s",
                   where=("the calibrated estimate's tensor_collectives loss of the run "
                          "(sl.published_plan_estimate('korthikanti-22b-selective').losses_s)",))
    return define(d, {"L": "layers", "m": "microbatches per step",
                      "T_lat": "the latency of one collective on NVLink",
                      "n": "GPUs in the tensor-parallel group", "b": "bytes per bf16 value",
                      "B": "tokens per microbatch", "D": "the model width",
                      "f": "the share of NVLink's bandwidth a collective achieves",
                      "W": "an A100's NVLink bandwidth per direction"})


register(Exercise(
    id="6.15",
    title="The exposed tensor-parallel collectives of Megatron's 22B run",
    reference=_tp_collectives,
    unit="s",
    mistakes={
        slip(_tp_formula(passes=1), _tp_collectives()): "that is the forward pass only; the backward runs as many "
                                                         "collectives again",
        slip(_tp_formula(layers=1), _tp_collectives()): "that is one layer; every layer of the model runs them",
        slip(_tp_formula(achieved=1.0), _tp_collectives()): "that is NVLink's full data-sheet bandwidth; a "
                                                             "collective achieves 80% of it",
        slip(_tp_formula(n_frac=False), _tp_collectives()): "that moves the whole array; in a ring each GPU sends "
                                                             "(n − 1)/n of it",
        slip(_tp_formula(b=4), _tp_collectives()): "that is 4 bytes per value (f32); the activations are bf16",
        slip(_tp_formula(W=chip("a100").scale_out_bytes_per_s_per_node / 8, achieved=0.9, latency=20e-6),
             _tp_collectives()): "that is InfiniBand's tier; the 8 GPUs of the group share one node's NVLink",
    },
    book=(),
))
