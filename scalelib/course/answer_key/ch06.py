"""Chapter 6 exercises: training LLaMA 3.

Every reference is computed by scalelib (parameter counts, FLOPs, training state, thresholds, the plan
search); the numbers below are only what each question gives (15T tokens, 40% MFU, a 4M-token batch of
4096-token sequences, four bf16 checkpoints per layer, a number of pods). Facts and formulas follow ch. 6
"Training LLaMA 3 on TPUs" of How to Scale Your Model (Austin et al., 2025); ``book=`` names the book's
question an exercise answers (its list: scalelib/course/book_items.py). The book's Q1 and Q2 have no
answers in the book: scalelib's are the references.
"""

from __future__ import annotations

import math

from ..check import Exercise, register
from ._tools import define, slip
from .ch04 import _letters
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
from ..._topology import gpu_cluster, tpu_pod
from ..._transformer import params, training_state_bytes

LLAMA = "llama-3-70b"
BIG = "llama-3.1-405b"
TOKENS = 15e12          # training tokens
MFU = 0.4
B = 4 * 2**20           # tokens per step: 1024 sequences of 4096
T = 4096
DAY = 86400.0


def _pod():
    return tpu_pod("tpu-v5p")


# 6.1 -------------------------------------------------------------------------

register(Exercise(
    id="6.1",
    title="LLaMA 3-70B's parameter count",
    reference=lambda: _letters(explain(params, LLAMA)),
    unit="params",
    mistakes={
        slip(params(model(LLAMA).derive("llama-3-70b-two-matrices", gated=False)), params(LLAMA)):
            "LLaMA's MLP is gated (SwiGLU): three D x F matrices per layer, not two",
        slip(params(model(LLAMA).derive("llama-3-70b-mha", K=64)), params(LLAMA)):
            "only K = 8 heads have keys and values (grouped-query attention); the N = 64 are query heads",
    },
    book=("Text Q1",),
))


# 6.2, 6.3 ---------------------------------------------------------------------

def _per_token(per_param: int = 6, spec: str = LLAMA) -> Derivation:
    p = explain(params, spec)
    return _letters(Derivation("FLOPs per token", f"{per_param}·P", lambda: f"{per_param}·{q(p.value, 'params')}",
                               per_param * p.value, "FLOP", (p,),
                               where=("P: parameters; a forward pass does 2 FLOPs per parameter and token, the "
                                      "backward twice that (attention's dot products left aside)",)))


register(Exercise(
    id="6.2",
    title="Training FLOPs per token",
    reference=_per_token,
    unit="FLOP",
    mistakes={
        slip(_per_token(2), _per_token()): "2·P is the forward pass alone; training adds a backward of twice that",
        slip(_per_token(8), _per_token()): "8·P counts a forward recomputed under full remat; the model's FLOPs "
                                           "are 6·P",
    },
    book=("Text Q2",),
))


def _total(per_param: int = 6, spec: str = LLAMA) -> Derivation:
    per = _per_token(per_param, spec)
    return Derivation("FLOPs_total", "FLOPs per token · tokens", lambda: f"{q(per.value, 'FLOP')} · {q(TOKENS)}",
                      per.value * TOKENS, "FLOP", (per,), where=("tokens: 15T",))


register(Exercise(
    id="6.3",
    title="Total FLOPs for 15T tokens",
    reference=_total,
    unit="FLOP",
    mistakes={
        slip(_total(2), _total()): "that is 2·P per token, a forward pass only; training costs 6·P",
    },
    book=("Text Q3",),
))


# 6.4 -------------------------------------------------------------------------

def _days(chips: int = 8960, mfu: float = MFU, spec: str = LLAMA, peak: str = "bf16") -> Derivation:
    total = _total(spec=spec)
    C = chip("tpu-v5p").peak_flops_per_s(dtype=peak)
    return Derivation("days", "FLOPs_total / (N · C · MFU · 86400)",
                      lambda: f"{q(total.value, 'FLOP')} / ({chips} · {q(C, 'FLOP/s')} · {mfu} · 86400)",
                      total.value / (chips * C * mfu) / DAY, "days", (total,),
                      where=("N: chips; C: a TPU v5p's bf16 peak; MFU: the share of it the step uses; 86400: "
                             "seconds in a day",))


register(Exercise(
    id="6.4",
    title="Days on a full v5p pod at 40% MFU",
    reference=_days,
    unit="days",
    mistakes={
        slip(_days(mfu=1.0), _days()): "that is at 100% of peak; the chips do useful work 40% of the time",
        slip(_days(peak="int8"), _days()): "training runs in bf16: 4.59e14 FLOP/s per chip, not int8's rate",
        slip(_days().value * DAY, _days()): "that is in seconds; divide by 86,400 for days",
    },
    book=("Text Q4",),
))


# 6.5, 6.6 --------------------------------------------------------------------

def _memory(checkpoints: int = 4, optimizer_dtype: str = "f32") -> Derivation:
    m = model(LLAMA)
    state = explain(training_state_bytes, LLAMA, grad_dtype=None, optimizer_dtype=optimizer_dtype)
    acts = checkpoints * m.L * B * m.D * 2.0
    return _letters(define(Derivation(
        "memory", "state + c·L·B·D·2", lambda: f"{q(state.value, 'B')} + {checkpoints}·{m.L}·{q(B)}·{m.D}·2 B",
        state.value + acts, "B", (state,)),
        {"c": f"bf16 checkpoints of [B, D] kept per layer ({checkpoints}), 2 bytes a value",
         "B": "tokens per step (4M: 1024 sequences of 4096)"}))


def _min_chips(**kw) -> Derivation:
    mem = _memory(**kw)
    hbm = chip("tpu-v5p").hbm_bytes
    return Derivation("chips", "⌈memory / HBM⌉", lambda: f"⌈{q(mem.value, 'B')} / {q(hbm, 'B')}⌉",
                      float(math.ceil(mem.value / hbm)), "chips", (mem,), where=("HBM: a v5p's 96 GB",))


register(Exercise(
    id="6.5",
    title="The fewest v5p chips that hold a 4M-token step",
    reference=_min_chips,
    unit="chips",
    integer=True,
    mistakes={
        slip(_min_chips(checkpoints=0), _min_chips()): "the weights and Adam state are only 3% of it: the "
                                                        "checkpoints of a 4M-token batch dominate",
        slip(_min_chips(checkpoints=1), _min_chips()): "four checkpoints of [B, D] are kept per layer, not one",
    },
    book=("Text Q5",),
))


def _per_chip(checkpoints: int = 4, chips: int = 8960) -> Derivation:
    mem = _memory(checkpoints)
    return Derivation("memory per chip", "memory / N", lambda: f"{q(mem.value, 'B')} / {chips}",
                      mem.value / chips, "B", (mem,), where=("N: the 8960 chips of a full v5p pod",))


register(Exercise(
    id="6.6",
    title="Memory per chip on a full pod",
    reference=_per_chip,
    unit="B",
    mistakes={
        slip(_per_chip(0), _per_chip()): "the checkpoints are sharded too; leave them out and only the state is left",
        slip(_per_chip(chips=225), _per_chip()): "that is per chip of the smallest slice; the pod has 8960",
    },
    book=("Text Q6",),
))


# 6.7, 6.8, 6.9 ---------------------------------------------------------------

register(Exercise(
    id="6.7",
    title="How far FSDP over the batch alone can go",
    reference=lambda: Derivation("FSDP_max", "B / T", f"{q(B)} / {T}", B / T, "chips",
                                 where=("B: tokens per step; T: tokens per sequence; each chip needs a whole "
                                        "sequence when only the batch is split",)),
    unit="chips",
    integer=True,
    mistakes={
        slip(float(B), B / T): "that counts tokens; without sequence sharding a chip takes whole sequences",
    },
    book=("Text Q7",),
))


def _fsdp_check(chips: int = 8960) -> Derivation:
    crit = explain(data_parallel_critical_batch, _pod())
    return Derivation("[B/N, B_crit]", "[B / N, B_crit per chip]",
                      lambda: f"[{q(B)} / {chips}, {q(crit.value)}]", [B / chips, crit.value], "tokens",
                      (crit,), where=("B: tokens per step (4M); N: chips sharing the batch, its sequences split "
                                      "too; B_crit: FSDP's threshold over all three torus axes",))


register(Exercise(
    id="6.8",
    title="Tokens per chip under 8960-way FSDP, against the threshold",
    reference=_fsdp_check,
    unit="tokens",
    mistakes={
        (1.0, 3.0): "FSDP over the whole pod uses all three torus axes: C / W is 2550 for one axis, 850 for three",
        (8960 / 1024, 1.0): "with the sequences split too, all 8960 chips share the 4M tokens, not 1024",
    },
    book=("Text Q8",),
))


def _mixed(M_X: float = 2, M_Y: float = 1) -> Derivation:
    F = model(LLAMA).F
    crit = explain(fsdp_tensor_parallel_critical_batch, F, _pod(), M_X=M_X, M_Y=M_Y)
    x = explain(optimal_fsdp_degree, B, F, _pod(), M_X=M_X, M_Y=M_Y)
    return Derivation("[B_crit, X_opt]", "[α² / (M_X·M_Y·F), sqrt(B/F · M_X/M_Y · N)]",
                      lambda: f"[{q(crit.value)}, {q(x.value)}]", [crit.value, x.value], "", (crit, x))


register(Exercise(
    id="6.9",
    title="FSDP + TP: its threshold and the best FSDP width",
    reference=_mixed,
    unit="",
    mistakes={
        slip(_mixed(1, 2), _mixed()): "M_X/M_Y inverted: FSDP takes two of the torus axes (M_X = 2), TP one",
        slip(_mixed(1, 1), _mixed()): "FSDP runs over two axes here, M_X = 2",
    },
    book=("Text Q9",),
))


# 6.10, 6.11 (the book's Q1: four pods) ---------------------------------------

register(Exercise(
    id="6.10",
    title="Days on four v5p pods at 40% MFU",
    reference=lambda: _days(chips=4 * 8960),
    unit="days",
    mistakes={
        slip(_days(), _days(chips=4 * 8960)): "that is one pod; four pods have four times the chips",
        slip(_days(chips=4 * 8960, mfu=1.0), _days(chips=4 * 8960)): "40% MFU, not 100%",
    },
    book=("Q1",),
))


def _dcn_margin(pods: int = 4) -> Derivation:
    crit = explain(cross_slice_critical_batch, _pod())
    return Derivation("B_pod / B_crit", "(B / pods) / (C / W_dcn)", lambda: f"({q(B)} / {pods}) / {q(crit.value)}",
                      B / pods / crit.value, "", (crit,), where=("B: tokens per step (4M); pods: slices joined by "
                                                                 "data parallelism over DCN",))


register(Exercise(
    id="6.11",
    title="How far above the DCN roofline each pod's batch is",
    reference=_dcn_margin,
    unit="",
    mistakes={
        slip(_dcn_margin(1), _dcn_margin()): "each of the four pods gets a quarter of the batch",
        slip(_dcn_margin().value * 73440 / 2550, _dcn_margin()): "across pods the link is DCN (6.25 GB/s per chip), "
                                                                 "not ICI: C / W_dcn ≈ 73,440 tokens per pod",
    },
    book=("Q1",),
))


# 6.12, 6.13, 6.14 (the book's Q2: LLaMA 3.1-405B) -----------------------------

def _big(per_param: int = 6) -> Derivation:
    p = explain(params, BIG)
    total = _total(per_param, BIG)
    return _letters(Derivation("[P, FLOPs_total]", "[P, 6·P·tokens]",
                               lambda: f"[{q(p.value)}, {q(total.value, 'FLOP')}]", [p.value, total.value], "",
                               (p, total), where=("P: parameters; tokens: 15T",)))


register(Exercise(
    id="6.12",
    title="LLaMA 3.1-405B: parameters and FLOPs for 15T tokens",
    reference=_big,
    unit="",
    mistakes={
        (1.0, 1 / 3): "2·P per token is the forward only; training costs 6·P",
        slip([params(model(BIG).derive("405b-ungated", gated=False)), 6 * 15e12 * params(model(BIG).derive(
            "405b-ungated2", gated=False))], _big()): "LLaMA's MLP has three matrices (gated), not two",
    },
    book=("Q2",),
))


register(Exercise(
    id="6.13",
    title="LLaMA 3.1-405B on eight v5p pods at 40% MFU",
    reference=lambda: _days(chips=8 * 8960, spec=BIG),
    unit="days",
    mistakes={
        slip(_days(spec=BIG), _days(chips=8 * 8960, spec=BIG)): "that is one pod; there are eight",
        slip(_days(chips=8 * 8960), _days(chips=8 * 8960, spec=BIG)): "that is the 70B model; 405B does 5.8 "
                                                                       "times the FLOPs per token",
    },
    book=("Q2",),
))


def _h100_step(pipeline: bool = True) -> Derivation:
    found = explain(search_plans, BIG, 16 * 2**20, gpu_cluster(2048, "h100"), seq_len=8192, pipeline=pipeline)
    return found


register(Exercise(
    id="6.14",
    title="LLaMA 3.1-405B on 16,384 H100: the best plan's step",
    reference=_h100_step,
    unit="s",
    mistakes={
        slip(6 * params(BIG) * 16 * 2**20 / (16384 * chip("h100").bf16_flops_per_s * MFU), _h100_step()):
            "that assumes 40% MFU; the question asks for the cost model's best plan, which runs at its peak",
    },
))
