"""Chapter 5 exercises: parallelism for training.

Every reference is computed by scalelib from its model and chip registries; the numbers below are
only what each question gives (a batch, a slice's shape, an MFU, a pipeline's stages). Facts and
formulas follow ch. 5 "How to Parallelize a Transformer for Training" of How to Scale Your Model
(Austin et al., 2025) and the ZeRO paper (Rajbhandari et al., 2020); ``book=`` names the book's
question an exercise answers (its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

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
    pipeline_bubble_fraction,
)
from ..._plan_search import needs_pipeline
from ..._specs import bytes_per_value
from ..._topology import gpu_cluster, tpu_pod, tpu_slice
from ..._training import zero_state_bytes
from ..._transformer import params, training_state_bytes

#: The book's Q3 setting: LLaMA-2 13B on a TPU v5p 16x16x16 slice, 3M tokens per step in 32k-token sequences.
Q3 = dict(model="llama-2-13b", shape=(16, 16, 16), B=3e6, mfu=0.4)


def _q3_slice():
    return tpu_slice(Q3["shape"], "tpu-v5p")


# 5.1 -------------------------------------------------------------------------

register(Exercise(
    id="5.1",
    title="LLaMA-2 13B's parameter count",
    reference=lambda: _letters(explain(params, "llama-2-13b")),
    unit="params",
    mistakes={
        slip(params(model("llama-2-13b").derive("llama-2-13b-ungated", gated=False)), params("llama-2-13b")):
            "you counted two MLP matrices per layer; LLaMA's gated MLP has three (gate, up and down): 3·D·F",
    },
    book=("Q1",),
))


# 5.2 -------------------------------------------------------------------------

def _state(**kw) -> Derivation:
    d = explain(training_state_bytes, "llama-2-13b", grad_dtype=None, **kw)
    return _letters(d)


register(Exercise(
    id="5.2",
    title="Weights and Adam state of LLaMA-2 13B",
    reference=_state,
    unit="B",
    mistakes={
        slip(training_state_bytes("llama-2-13b", grad_dtype=None, optimizer_dtype="bf16"),
             training_state_bytes("llama-2-13b", grad_dtype=None)):
            "Adam's two moments are kept in f32 here, 4 bytes each, not 2",
        slip(training_state_bytes("llama-2-13b"), training_state_bytes("llama-2-13b", grad_dtype=None)):
            "the question asks for the weights and the optimizer's state; the gradients are not part of it",
        slip(training_state_bytes("llama-2-13b", grad_dtype=None, optimizer="momentum"),
             training_state_bytes("llama-2-13b", grad_dtype=None)):
            "Adam keeps two values per parameter (the first and second moments), not one",
    },
    book=("Q2",),
))


# 5.3 -------------------------------------------------------------------------

_5_3 = dict(B=16e6)


def _checkpoints(dtype: str = "bf16", widths: str = "D + 2·F") -> Derivation:
    """Reference for 5.3: the outputs of the MLP's three matmuls, per token and layer, kept in bf16."""
    m, B = model("llama-2-13b"), _5_3["B"]
    b = bytes_per_value(dtype)
    per = {"D + 2·F": m.D + 2 * m.F, "D": m.D, "D + F": m.D + m.F}[widths]
    text = {"D + 2·F": f"({m.D} + 2·{m.F})", "D": f"{m.D}", "D + F": f"({m.D} + {m.F})"}[widths]
    d = Derivation("checkpoints", f"b·L·B·({widths})", f"{q(b)}·{m.L}·{q(B)}·{text}", b * m.L * B * per, "B")
    return define(d, {"b": f"bytes per {dtype} value", "L": "layers", "B": "tokens in the batch",
                      "D": "the model width (the down projection's output)",
                      **({"F": "the MLP width (the gate's and the up projection's outputs)"} if "F" in widths else {})})


register(Exercise(
    id="5.3",
    title="Checkpointed MLP activations of a 16M-token batch",
    reference=_checkpoints,
    unit="B",
    mistakes={
        slip(_checkpoints(dtype="int8"), _checkpoints()):
            "each bf16 value takes 2 bytes",
        slip(_checkpoints(widths="D"), _checkpoints()):
            "that keeps only each layer's input or output (D values per token); the gate's and the up "
            "projection's outputs, F values each, are saved too",
        slip(_checkpoints(widths="D + F"), _checkpoints()):
            "a gated MLP has two matmuls going in, each with an output of F values per token",
    },
    book=("Q2",),
))


# 5.4 -------------------------------------------------------------------------

_5_4_CHOICES = ("DP", "FSDP", "FSDP + TP")


def _scheme() -> str:
    """Reference for 5.4: the first scheme, simplest first, that fits in memory and stays compute-bound."""
    cube, m = _q3_slice(), model(Q3["model"])
    per_chip = Q3["B"] / cube.num_chips
    if training_state_bytes(m, grad_dtype=None) <= cube.spec.hbm_bytes and per_chip > data_parallel_critical_batch(cube):
        return "DP"
    if per_chip > data_parallel_critical_batch(cube):
        return "FSDP"
    if per_chip > fsdp_tensor_parallel_critical_batch(m.F, cube):
        return "FSDP + TP"
    raise AssertionError("no scheme works for the book's Q3 setting")  # pragma: no cover


register(Exercise(
    id="5.4",
    title="DP, FSDP or FSDP + TP for LLaMA-2 13B on a v5p 16x16x16",
    reference=_scheme,
    kind="choice",
    choices=_5_4_CHOICES,
    reason="Pure DP needs the whole 130 GB state on each 96 GB chip; FSDP fits but over all three axes needs "
           "850 tokens per chip and gets 3e6 / 4096 ≈ 732; FSDP + TP needs only 2550² / 2F ≈ 235.",
    book=("Q3",),
))


# 5.5 -------------------------------------------------------------------------

def _x_opt(M_X: float = 2, M_Y: float = 1) -> Derivation:
    m = model(Q3["model"])
    return explain(optimal_fsdp_degree, Q3["B"], m.F, _q3_slice(), M_X=M_X, M_Y=M_Y)


register(Exercise(
    id="5.5",
    title="The best FSDP width for LLaMA-2 13B on 4096 chips",
    reference=_x_opt,
    unit="chips",
    mistakes={
        slip(_x_opt(M_X=1, M_Y=2), _x_opt()):
            "M_X / M_Y is 2 here (FSDP spans two of the torus's axes, TP one), not 1/2",
        slip(_x_opt(M_X=1, M_Y=1), _x_opt()):
            "FSDP runs over two axes of the torus and TP over one: the ratio M_X / M_Y is 2",
    },
    book=("Q3",),
))


# 5.6 -------------------------------------------------------------------------

def _step(per_param_token: int = 6, mfu: float | None = None) -> Derivation:
    cube = _q3_slice()
    mfu = Q3["mfu"] if mfu is None else mfu
    P = replace(explain(params, Q3["model"]), symbol="P")
    C = cube.spec.peak_flops_per_s()
    N, B = cube.num_chips, Q3["B"]
    d = Derivation("T_step", f"{per_param_token}·P·B / (n·C·MFU)",
                   f"{per_param_token}·{q(P.value)}·{q(B)} / ({N}·{q(C, 'FLOP/s')}·{q(mfu)})",
                   per_param_token * P.value * B / (N * C * mfu), "s", (P,))
    return _letters(define(d, {"B": "tokens per step", "n": "chips", "C": "a TPU v5p's peak bf16 rate",
                               "MFU": "the share of the peak the step achieves"}))


register(Exercise(
    id="5.6",
    title="LLaMA-2 13B's step time at 40% MFU on 4096 v5p chips",
    reference=_step,
    unit="s",
    involves={"dtype", "flops"},
    mistakes={
        slip(_step(per_param_token=2), _step()):
            "2 FLOPs per parameter per token is the forward pass; a training step (forward and backward) is 6",
        slip(_step(mfu=1.0), _step()):
            "at 40% MFU the chips do only 40% of their peak: divide by 0.4",
        slip(_step(per_param_token=8), _step()):
            "count the model's FLOPs, 6 per parameter per token; MFU leaves recomputation out",
    },
    book=("Q3",),
))


# 5.7 -------------------------------------------------------------------------

_5_7 = dict(B=2e6)


def _most_chips(threshold: str = "fsdp+tp") -> Derivation:
    m, pod = model("llama-3-70b"), tpu_pod("tpu-v5p")
    if threshold == "fsdp+tp":
        crit = explain(fsdp_tensor_parallel_critical_batch, m.F, pod)
    else:
        crit = explain(data_parallel_critical_batch, pod)
    crit = replace(crit, symbol="B_crit")
    d = Derivation("N_max", "B / B_crit", f"{q(_5_7['B'])} / {q(crit.value)}", _5_7["B"] / crit.value, "chips",
                   (crit,))
    return define(d, {"B": "tokens per step"})


register(Exercise(
    id="5.7",
    title="How many v5p chips FSDP + TP can use for LLaMA-3 70B at 2M tokens",
    reference=_most_chips,
    unit="chips",
    mistakes={
        slip(_most_chips("fsdp"), _most_chips()):
            "that is the limit of FSDP alone (850 tokens per chip over three axes); with TP alongside, the "
            "step stays compute-bound down to 2550² / 2F tokens per chip",
    },
    book=("Ex1",),
))


# 5.8 -------------------------------------------------------------------------

_5_8 = dict(p=16, m=64, v=4)


def _bubble(v: int | None = None, relative: bool = False) -> Derivation:
    p, m = _5_8["p"], _5_8["m"]
    v = _5_8["v"] if v is None else v
    if relative:
        return Derivation("bubble", "(p − 1) / (v·m)", f"({p} − 1) / ({v}·{m})", (p - 1) / (v * m), "",
                          where=("p: stages; m: microbatches; v: chunks per stage",))
    return explain(pipeline_bubble_fraction, p, m, virtual_stages=v)


register(Exercise(
    id="5.8",
    title="The bubble of an interleaved 16-stage pipeline",
    reference=_bubble,
    unit="",
    mistakes={
        slip(_bubble(v=1), _bubble()):
            "that is plain 1F1B; with v chunks per stage a slot of the bubble costs 1/v of a stage's work",
        slip(_bubble(relative=True), _bubble()):
            "that is the bubble over the useful time; as a fraction of the whole step it is "
            "(p − 1) / (v·m + p − 1)",
    },
))


# 5.9 -------------------------------------------------------------------------

_5_9 = dict(pods=4)


def _dcn_batch(per_pod: bool = False) -> Derivation:
    crit = replace(explain(cross_slice_critical_batch, tpu_pod("tpu-v5p")), symbol="B_slice")
    if per_pod:
        return define(crit, {})
    s = _5_9["pods"]
    d = Derivation("B_min", "s · B_slice", f"{s} · {q(crit.value)}", s * crit.value, "tokens", (crit,),
                   where=("s: pods joined over DCN",))
    return d


register(Exercise(
    id="5.9",
    title="The smallest batch for data parallelism across four v5p pods",
    reference=_dcn_batch,
    unit="tokens",
    mistakes={
        slip(_dcn_batch(per_pod=True), _dcn_batch()):
            "that is the batch each pod needs; the step's batch is split over the four pods",
    },
))


# 5.10 ------------------------------------------------------------------------

_5_10 = dict(params=7.5e9, gpus=64)


def _zero(stage: int = 2) -> Derivation:
    return explain(zero_state_bytes, _5_10["params"], _5_10["gpus"], stage=stage)


register(Exercise(
    id="5.10",
    title="ZeRO stage 2's memory per GPU for a 7.5B model on 64 GPUs",
    reference=_zero,
    unit="B",
    mistakes={
        slip(_zero(1), _zero()): "that is stage 1, which shards only the optimizer's state; stage 2 shards the "
                                 "gradients too",
        slip(_zero(3), _zero()): "that is stage 3, which shards the fp16 weights too; stage 2 keeps them whole",
        slip(_zero(0), _zero()): "that keeps everything on every GPU (plain data parallelism)",
    },
))


# 5.11 ------------------------------------------------------------------------

_5_11 = dict(model="llama-3-70b", B=4 * 2**20, seq_len=4096, nodes=2048)


@lru_cache(maxsize=1)
def _pipeline_need():
    return needs_pipeline(_5_11["model"], _5_11["B"], gpu_cluster(_5_11["nodes"], "h100"), seq_len=_5_11["seq_len"])


def _speedup() -> Derivation:
    need = _pipeline_need()
    flat, piped = need.without_pipeline, need.with_pipeline
    return Derivation("speedup", "T_flat / T_PP", f"{q(flat.time_s, 's')} / {q(piped.time_s, 's')}",
                      flat.time_s / piped.time_s, "",
                      where=(f"T_flat: the best plan without a pipeline, {flat.plan!r}",
                             f"T_PP: the best plan of all, {piped.plan!r}"))


register(Exercise(
    id="5.11",
    title="What pipelining buys LLaMA-3 70B on 16,384 H100s",
    reference=_speedup,
    unit="",
    rtol=0.02,
))
