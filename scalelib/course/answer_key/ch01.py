"""Chapter 1 exercises: rooflines.

Every reference is computed by scalelib from the chip registry; the numbers
below are only the shapes each question gives (batch, widths, parameter count).
Facts and formulas follow ch. 1 "All About Rooflines" of How to Scale Your Model
(Austin et al., 2025); ``book=`` names the book's question an exercise answers
(its list: scalelib/course/book_items.py).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import after, define, slip, weights_only
from ..._derivation import Derivation, explain, q
from ..._roofline import (
    arithmetic_intensity,
    critical_batch_size,
    critical_intensity,
    matmul_bytes,
    matmul_flops,
    matmul_intensity,
    matmul_roofline,
    t_comms_s,
    t_math_s,
)
from ..._specs import DTYPES, ChipSpec, bytes_per_value, chip
from ..._vector import vector_critical_intensity


# 1.1 -------------------------------------------------------------------------

def _h100_fp8_intensity() -> Derivation:
    """Reference for 1.1: the H100's fp8 rate over its HBM bandwidth."""
    return define(explain(critical_intensity, "h100", dtype="fp8"),
                  {"C": "the H100's peak rate in fp8", "W": "its HBM bandwidth"})


register(Exercise(
    id="1.1",
    title="Critical intensity of an H100 in fp8 (warm-up)",
    reference=_h100_fp8_intensity,
    unit="FLOP/B",
    involves={"peak"},
    mistakes={
        slip(critical_intensity("h100", dtype="bf16"), critical_intensity("h100", dtype="fp8")):
            "that is the bf16 critical intensity; the fp8 rate is about twice the bf16 one",
        # NVIDIA's data sheet also quotes each rate "with sparsity" (2:4 structured sparsity), twice the dense one
        slip(2 * critical_intensity("h100", dtype="fp8"), critical_intensity("h100", dtype="fp8")):
            "that uses the rate quoted with 2:4 structured sparsity, twice the dense one; a dense matmul runs at "
            "the dense fp8 rate",
    },
))


# 1.2 -------------------------------------------------------------------------

def _intensity_of_matmul(B, D, F, bytes_per_value):
    """Reference for 1.2: the registry dtype with that many bytes per value, then matmul_intensity."""
    dtype = next(name for name, (_, size) in DTYPES.items() if size == bytes_per_value)
    return matmul_intensity(B, D, F, dtype=dtype)


_1_2 = dict(B=1, D=8192, F=8192)

register(Exercise(
    id="1.2",
    title="Arithmetic intensity of a matmul, as a function",
    reference=lambda: _intensity_of_matmul,
    unit="FLOP/B",
    kind="function",
    mistakes={
        slip(matmul_flops(**_1_2) / 2 / matmul_bytes(**_1_2), matmul_intensity(**_1_2)):
            "you counted B·D·F FLOPs; a matmul does 2·B·D·F (one multiply and one add per term)",
    },
    cases=(
        dict(B=1, D=8192, F=8192, bytes_per_value=2),
        dict(B=256, D=4096, F=4096, bytes_per_value=2),
        dict(B=4096, D=8192, F=28672, bytes_per_value=2),
        dict(B=512, D=8192, F=8192, bytes_per_value=1),
        dict(B=64, D=1024, F=4096, bytes_per_value=4),
    ),
    formula="I = 2·B·D·F / (bytes_per_value · (B·D + D·F + B·F)): the FLOPs over the bytes of the input, "
            "the weights and the output, each crossing HBM once",
))


# 1.3 -------------------------------------------------------------------------

_1_3 = dict(B=1024, D=4096, F=16)  # F: the rank of each request's own low-rank adapter


def _per_example_weights_counts(dtype: str = "int8", count_x: bool = True) -> tuple[float, float]:
    """(FLOPs, bytes) for 1.3: each of the B rows has its own [D, F] weight matrix (einsum bd,bdf->bf)."""
    B, D, F = _1_3["B"], _1_3["D"], _1_3["F"]
    nbytes = ((B * D if count_x else 0) + B * D * F + B * F) * bytes_per_value(dtype)
    return matmul_flops(B, D, F), nbytes


def _per_example_weights_intensity() -> Derivation:
    """Reference for 1.3 (the book's Q4), with the byte count spelled out."""
    B, D, F = _1_3["B"], _1_3["D"], _1_3["F"]
    flops, nbytes = _per_example_weights_counts()
    b = bytes_per_value("int8")
    counted_flops = Derivation("FLOPs", "2·B·D·F", f"2·{B}·{D}·{F}", flops, "FLOP")
    counted = Derivation("nbytes", "b·(B·D + B·D·F + B·F)", f"{q(b)}·({B}·{D} + {B}·{D}·{F} + {B}·{F})", nbytes, "B")
    intensity = explain(arithmetic_intensity, flops, nbytes)
    return define(replace(intensity, steps=(counted_flops, counted)),
                  {"B": "the requests, each multiplying its row of x [D] by its own adapter w [D, F]",
                   "D, F": "the sides of each request's adapter (F its rank)", "b": "bytes per int8 value"})


register(Exercise(
    id="1.3",
    title="Intensity when every request has its own adapter",
    reference=_per_example_weights_intensity,
    unit="FLOP/B",
    # to four significant figures, as the question asks: the output's write is 0.02% of the bytes, which a 1%
    # tolerance would credit left out
    rtol=1e-4,
    mistakes={
        slip(matmul_intensity(**_1_3, dtype="int8"), arithmetic_intensity(*_per_example_weights_counts())):
            "you counted one weight matrix shared by the whole batch; here each of the B requests "
            "brings its own [D, F] adapter, so the weight bytes grow with B as fast as the FLOPs do",
        slip(arithmetic_intensity(*_per_example_weights_counts(count_x=False)),
             arithmetic_intensity(*_per_example_weights_counts())):
            "you left out the reads of x; next to an adapter this narrow they are not negligible",
        slip(arithmetic_intensity(*_per_example_weights_counts("bf16")),
             arithmetic_intensity(*_per_example_weights_counts())):
            "either you counted one FLOP per multiply-add (each is a multiply and an add) "
            "or 2 bytes per value (int8 values take 1)",
    },
    book=("Q4",),
))


# 1.4 -------------------------------------------------------------------------

_1_4_ARGS = (128, 4096, 16384, "tpu-v5e")
_1_4 = matmul_roofline(*_1_4_ARGS)

register(Exercise(
    id="1.4",
    title="Lower bound on the time of a small-batch matmul on TPU v5e",
    reference=lambda: define(explain(matmul_roofline, *_1_4_ARGS),
                             {"C": "TPU v5e's peak bf16 rate", "W": "its HBM bandwidth"}),
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_1_4.t_math_s, _1_4.t_lower_s):
            "you gave T_math; at this batch moving the bytes from HBM takes longer than the arithmetic, "
            "so the lower bound is max(T_math, T_comms) = T_comms",
        slip(_1_4.t_upper_s, _1_4.t_lower_s):
            "you added T_math and T_comms, which is the pessimistic bound (no overlap); "
            "the lower bound assumes full overlap: max(T_math, T_comms)",
    },
))


# 1.5 -------------------------------------------------------------------------

def _matmul_time_lower_bound(B, D, F, C, W):
    """Reference for 1.5: the bf16 matmul roofline on a chip with peak C (FLOP/s) and HBM bandwidth W (B/s)."""
    spec = ChipSpec(name="given", family="tpu", source="the C and W of exercise 1.5",
                    bf16_flops_per_s=C, hbm_bytes_per_s=W)
    return matmul_roofline(B, D, F, spec).t_lower_s


def _rates(name: str) -> dict:
    spec = chip(name)
    return dict(C=spec.peak_flops_per_s(dtype="bf16"), W=spec.bytes_per_s(bandwidth="hbm"))


_1_5 = dict(B=4096, D=8192, F=8192)  # compute-bound on TPU v5e: the FLOPs set the time

register(Exercise(
    id="1.5",
    title="Lower bound on a matmul's time, as a function",
    reference=lambda: _matmul_time_lower_bound,
    unit="s",
    involves={"dtype", "flops"},
    kind="function",
    mistakes={
        slip(t_math_s(matmul_flops(**_1_5) / 2, "tpu-v5e"), t_math_s(matmul_flops(**_1_5), "tpu-v5e")):
            "a factor of 2: a matmul does 2·B·D·F FLOPs (a multiply and an add per term), "
            "and a bf16 value takes 2 bytes",
    },
    cases=(
        dict(B=64, D=8192, F=8192, **_rates("tpu-v5e")),
        dict(B=4096, D=8192, F=8192, **_rates("tpu-v5e")),
        dict(B=4096, D=8192, F=28672, **_rates("h100")),
        dict(B=256, D=4096, F=4096, **_rates("tpu-v5p")),
        dict(B=1, D=16384, F=16384, **_rates("b200")),
    ),
    formula="T_lower = max(T_math, T_comms), with T_math = 2·B·D·F / C and T_comms = 2·(B·D + D·F + B·F) / W "
            "(2 bytes per bf16 value)",
))


# 1.6 -------------------------------------------------------------------------

register(Exercise(
    id="1.6",
    title="Compute- or memory-bound: int8 weights, bf16 arithmetic",
    reference=lambda: matmul_roofline(200, 8192, 8192, "tpu-v5e", dtype="bf16", weight_dtype="int8").bound,
    kind="choice",
    choices=("compute", "memory"),
    reason="With 1-byte weights the weight bytes halve, so the intensity is close to 2·B rather than B: "
           "above TPU v5e's critical intensity C / W, so compute-bound.",
    book=("Q2",),
))


# 1.7 -------------------------------------------------------------------------

register(Exercise(
    id="1.7",
    title="Critical batch size on TPU v5p with int8 weights",
    reference=lambda: weights_only(define(explain(critical_batch_size, "tpu-v5p", dtype="bf16", weight_dtype="int8"),
                             {"C": "TPU v5p's peak bf16 rate (the arithmetic runs in bf16)", "W": "its HBM bandwidth"})),
    unit="tokens",
    mistakes={
        slip(critical_batch_size("tpu-v5p", dtype="bf16", weight_dtype="bf16"),
             critical_batch_size("tpu-v5p", dtype="bf16", weight_dtype="int8")):
            "a factor of 2: either you counted 2 bytes per weight (int8 weights take 1), or you used the "
            "int8 rate for C (the arithmetic here runs in bf16)",
    },
    book=("Q2",),
))


# 1.8 -------------------------------------------------------------------------

register(Exercise(
    id="1.8",
    title="Critical batch size of a small matmul on TPU v5e",
    reference=lambda: define(explain(critical_batch_size, "tpu-v5e", dtype="bf16", D=1024, F=1024),
                             {"C": "TPU v5e's peak bf16 rate", "W": "its HBM bandwidth",
                              "I": "the critical intensity I_crit above", "D, F": "the sides of the weights [D, F]"}),
    unit="tokens",
    mistakes={
        slip(critical_batch_size("tpu-v5e"), critical_batch_size("tpu-v5e", D=1024, F=1024)):
            "you gave the large-matrix limit I_crit · w / 2; with D = F = 1024 the bytes of the "
            "activations and of the output are not small next to the weights, so a larger batch is needed",
    },
))


# 1.9 -------------------------------------------------------------------------

_1_9_PARAMS = 70e9



def _byte_count(formula: str, factors: tuple, dtype: str = "bf16") -> Derivation:
    """The bytes a transfer moves, ``nbytes = (product of the counts) · b``, shown before its time."""
    b = bytes_per_value(dtype)
    value = float(np.prod(factors)) * b
    return Derivation("nbytes", f"{formula} · b", " · ".join(q(f) for f in factors) + f" · {q(b, 'B')}",
                      value, "B")


def _weights_read() -> Derivation:
    """Reference for 1.9: the weights' bytes, then one read of them at HBM bandwidth."""
    nbytes = _byte_count("P", (_1_9_PARAMS,))
    t = explain(t_comms_s, nbytes.value, "h200", bandwidth="hbm")
    return define(after(t, nbytes), {"P": "the parameters", "b": "bytes of a bf16 value",
                                     "nbytes": "the weights' bytes", "W": "the H200's HBM bandwidth"})


register(Exercise(
    id="1.9",
    title="Time to read a 70B-parameter model's weights on one H200 (warm-up)",
    reference=_weights_read,
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(t_comms_s(_1_9_PARAMS * bytes_per_value("int8"), "h200"),
             t_comms_s(_1_9_PARAMS * bytes_per_value("bf16"), "h200")):
            "a factor of 2: a bf16 parameter takes 2 bytes",
        slip(t_comms_s(_1_9_PARAMS * bytes_per_value("bf16"), "h100"),
             t_comms_s(_1_9_PARAMS * bytes_per_value("bf16"), "h200")):
            "you used the H100's HBM bandwidth; the H200 has faster memory (take `sl.chip('h200').hbm_bytes_per_s`)",
    },
))


# 1.10 ------------------------------------------------------------------------

_1_10 = dict(B=2048, F=16384)
_1_10_BYTES = _1_10["B"] * _1_10["F"] * bytes_per_value("bf16")

register(Exercise(
    id="1.10",
    title="Time to exchange partial sums between two TPU v5e chips",
    reference=lambda: define(after(explain(t_comms_s, _1_10_BYTES, "tpu-v5e", bandwidth="ici"),
                                   _byte_count("B · F", (_1_10["B"], _1_10["F"]))),
                             {"B, F": "the partial result's rows and columns", "b": "bytes of a bf16 value",
                              "nbytes": "the partial result's bytes", "W": "the bandwidth of one ICI link, one way"}),
    unit="s",
    involves={"bandwidth", "dtype"},
    mistakes={
        slip(t_comms_s(_1_10_BYTES, "tpu-v5e", bandwidth="ici_bidirectional"),
             t_comms_s(_1_10_BYTES, "tpu-v5e", bandwidth="ici")):
            "a factor of 2: each partial sum crosses the link one way, at the one-way bandwidth "
            "(`ici_link_bytes_per_s_one_way`), not the bidirectional figure; and each bf16 value takes 2 bytes",
    },
    book=("Ex2",),
))


# 1.11 ------------------------------------------------------------------------

def _min_contracting_dim() -> Derivation:
    """Reference for 1.11: two chips split D; each does B·D·F FLOPs and sends 2·B·F bytes, so D/2 > C / W_ici."""
    ci = explain(critical_intensity, "tpu-v5e", dtype="bf16", bandwidth="ici")
    d = Derivation("D_min", "2 · I_crit", f"2 · {q(ci.value)}", 2 * ci.value, "", (ci,))
    return define(d, {"C": "TPU v5e's peak bf16 rate", "W": "the bandwidth of one ICI link, one way",
                      "I_crit": "C / W above: each chip's intensity against the link, D/2, must reach it"})


register(Exercise(
    id="1.11",
    title="Smallest contracting dimension for a compute-bound 2-chip matmul",
    reference=_min_contracting_dim,
    unit="",
    mistakes={
        slip(critical_intensity("tpu-v5e", bandwidth="ici"), 2 * critical_intensity("tpu-v5e", bandwidth="ici")):
            "a factor of 2: each chip does B·D·F FLOPs (half of D) for 2·B·F bytes, an intensity of D/2, not D; "
            "and the partial sums cross the link one way, at the one-way ICI bandwidth, not the bidirectional figure",
    },
    book=("Ex2",),
))


# 1.12 ------------------------------------------------------------------------

def _vpu_intensity() -> Derivation:
    """Reference for 1.12 (the book's dot-product example, for the whole chip): both v5p TensorCores' VPUs against
    the chip's HBM (one TensorCore's rate is exercise 2.14's answer)."""
    return explain(vector_critical_intensity, "tpu-v5p", per="chip", bandwidth="hbm")


register(Exercise(
    id="1.12",
    title="Critical intensity of a TPU v5p's vector unit",
    reference=_vpu_intensity,
    unit="FLOP/B",
    involves=frozenset(),
    mistakes={
        slip(critical_intensity("tpu-v5p"), vector_critical_intensity("tpu-v5p", per="chip")):
            "that is the critical intensity of the matrix units (the MXUs' bf16 rate over W); "
            "a dot product runs on the VPU, whose rate is its ALUs times the clock",
        slip(vector_critical_intensity("tpu-v5p", per="core"), vector_critical_intensity("tpu-v5p", per="chip")):
            "a factor of 2: that counts one TensorCore's VPU; the question asks for the whole chip's, every "
            "TensorCore's VPU at once",
        slip(vector_critical_intensity("tpu-v5p", per="chip") / 1e9, vector_critical_intensity("tpu-v5p", per="chip")):
            "a factor of 1e9: the clock is in GHz (1 GHz is 1e9 cycles per second)",
    },
    book=("Ex1",),
))


# 1.13 ------------------------------------------------------------------------

_1_13 = dict(B=192, D=8192, F=8192)


def _int8_bounds_of(chip_name: str = "tpu-v5e", compute: str = "int8", dtype: str = "int8") -> Derivation:
    """[T_lower, T_upper] of the book's Q1 layout (x, w and the output all in `dtype`, arithmetic in `compute`)."""
    lower = explain(matmul_roofline, *_1_13.values(), chip_name, dtype=dtype, compute_dtype=compute)
    r = matmul_roofline(*_1_13.values(), chip_name, dtype=dtype, compute_dtype=compute)
    upper = Derivation("T_upper", "T_math + T_comms", f"{q(r.t_math_s, 's')} + {q(r.t_comms_s, 's')}",
                       r.t_upper_s, "s")
    return Derivation("[T_lower, T_upper]", "[max(T_math, T_comms), T_math + T_comms]", "",
                      np.array([r.t_lower_s, r.t_upper_s]), "s", (lower, upper))


register(Exercise(
    id="1.13",
    title="Time bounds of an all-int8 matmul on TPU v5e",
    reference=lambda: define(_int8_bounds_of(), {"C": "TPU v5e's peak int8 rate (int8_ops_per_s)",
                                                 "W": "its HBM bandwidth"}),
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_int8_bounds_of(compute="bf16"), _int8_bounds_of()):
            "you used the bf16 rate for C; int8 arithmetic runs at the int8 rate, about twice as fast",
        slip(_int8_bounds_of(dtype="bf16"), _int8_bounds_of()):
            "you counted 2 bytes per value; int8 values take 1",
    },
    book=("Q1",),
))


# 1.14 ------------------------------------------------------------------------

_1_14_WIDTHS = (4096, 1024)


def _int8_weight_knees(dtype="bf16", weight_dtype="int8") -> Derivation:
    """Reference for 1.14 (the book's Q3): where each curve of attainable FLOP/s against B meets the roof."""
    knees = tuple(replace(explain(critical_batch_size, "tpu-v5e", dtype=dtype, weight_dtype=weight_dtype, D=d, F=d),
                          symbol=f"B_crit(D = F = {d})") for d in _1_14_WIDTHS)
    d = Derivation("[B_4096, B_1024]", "[B_crit(D = F = 4096), B_crit(D = F = 1024)]", "",
                   np.array([k.value for k in knees]), "tokens", knees)
    return d


register(Exercise(
    id="1.14",
    title="Where the int8-weight roofline curves reach the roof",
    reference=lambda: define(_int8_weight_knees(), {"C": "TPU v5e's peak bf16 rate (the arithmetic runs in bf16)",
                                                    "W": "its HBM bandwidth",
                                                    "I": "the critical intensity I_crit above",
                                                    "D, F": "the sides of the int8 weights [D, F]"}),
    unit="tokens",
    mistakes={
        slip([critical_batch_size("tpu-v5e", weight_dtype="int8")] * 2, _int8_weight_knees()):
            "that is the large-matrix limit I_crit · w / 2; with D = F = 4096 or 1024 the bf16 activations "
            "and output are not small next to the int8 weights, so a larger batch is needed, the more so for 1024",
        # All-bf16 and all-int8 give the same knees, both twice the reference.
        slip(_int8_weight_knees(weight_dtype="bf16"), _int8_weight_knees()):
            "a factor of 2: you counted 2 bytes per weight, or took the int8 rate for C with 1-byte activations; "
            "only the weights are int8 (1 byte each): the activations, the output and the arithmetic are bf16",
    },
    book=("Q3",),
))


# 1.15 ------------------------------------------------------------------------

#: The H100 NVL of NVIDIA's H100 data sheet: 1,671 TFLOPS of bf16 "with sparsity" (so half of it dense), 3.9 TB/s.
_H100_NVL = chip("h100").derive("h100-nvl", bf16_flops_per_s=1671e12 / 2, hbm_bytes_per_s=3.9e12)

register(Exercise(
    id="1.15",
    title="An H100 NVL's critical batch, from its data sheet",
    reference=lambda: weights_only(define(explain(critical_batch_size, _H100_NVL, dtype="bf16"),
                             {"C": "the H100 NVL's dense bf16 rate: half the data sheet's 1,671 TFLOPS, "
                                   "which assumes 2:4 structured sparsity",
                              "W": "its HBM bandwidth, 3.9 TB/s"})),
    unit="tokens",
    mistakes={
        slip(2 * critical_batch_size(_H100_NVL), critical_batch_size(_H100_NVL)):
            "a factor of 2: the data sheet's figure counts 2:4 structured sparsity; "
            "a dense matmul gets half of it",
        slip(critical_batch_size("h100"), critical_batch_size(_H100_NVL)):
            "those are the SXM module's figures; the question gives the NVL card's",
    },
    book=("Q5",),
))


# 1.16 ------------------------------------------------------------------------

_1_16 = dict(B=4096, D=8192, F=28672)
_1_16_EFFICIENCY = 0.85  # the book's figure for H100s (ch. 1: 80-85% of the peak in practice)


def _realistic_time(efficiency: float = _1_16_EFFICIENCY) -> float:
    return matmul_roofline(*_1_16.values(), "h100", efficiency=efficiency).t_lower_s


register(Exercise(
    id="1.16",
    title="A realistic time for an H100 matmul at 85% of peak",
    reference=lambda: define(explain(matmul_roofline, *_1_16.values(), "h100", efficiency=_1_16_EFFICIENCY),
                             {"C": "the H100's peak bf16 rate", "W": "its HBM bandwidth",
                              "efficiency": "the share of the peak the kernels reach"}),
    unit="s",
    involves={"flops", "peak"},
    mistakes={
        slip(_realistic_time(1.0), _realistic_time()):
            "that is the time at the data-sheet peak; reaching only 85% of it, the arithmetic takes 1 / 0.85 as long",
        slip(_realistic_time(1.0) * _1_16_EFFICIENCY, _realistic_time()):
            "you multiplied by the efficiency; a lower rate makes the time longer, so divide by it",
    },
))
