"""Chapter 1 exercises: rooflines.

Every reference is computed by scalelib from the chip registry; the numbers
below are only the shapes each question gives (batch, widths, parameter count).
Facts and formulas follow ch. 1 "All About Rooflines" of How to Scale Your Model
(Austin et al., 2025).
"""

from __future__ import annotations

from ..check import Exercise, register
from ..._derivation import Derivation, explain, q
from ..._roofline import (
    arithmetic_intensity,
    critical_batch_size,
    critical_intensity,
    matmul_flops,
    matmul_intensity,
    matmul_roofline,
    t_comms_s,
)
from ..._specs import DTYPES, ChipSpec, bytes_per_value, chip


def _factor(a: float, b: float) -> float:
    """The ratio between two answers as a factor >= 1, as the checker's mistake tables expect."""
    ratio = float(a) / float(b)
    return max(ratio, 1 / ratio)


# 1.1 -------------------------------------------------------------------------

register(Exercise(
    id="1.1",
    title="Critical intensity of an H100 in fp8",
    reference=lambda: explain(critical_intensity, "h100", dtype="fp8"),
    unit="FLOP/B",
    mistakes={
        _factor(critical_intensity("h100", dtype="bf16"), critical_intensity("h100", dtype="fp8")):
            "about a factor of 2: that is the bf16 critical intensity; the fp8 rate is about twice the bf16 one",
    },
))


# 1.2 -------------------------------------------------------------------------

def _intensity_of_matmul(B, D, F, bytes_per_value):
    """Reference for 1.2: the registry dtype with that many bytes per value, then matmul_intensity."""
    dtype = next(name for name, (_, size) in DTYPES.items() if size == bytes_per_value)
    return matmul_intensity(B, D, F, dtype=dtype)


register(Exercise(
    id="1.2",
    title="Arithmetic intensity of a matmul, as a function",
    reference=lambda: _intensity_of_matmul,
    unit="FLOP/B",
    kind="function",
    mistakes={
        2.0: "a factor of 2: a matmul does 2·B·D·F FLOPs (one multiply and one add per term), "
             "and every array counts bytes_per_value bytes per value",
    },
    cases=(
        dict(B=1, D=8192, F=8192, bytes_per_value=2),
        dict(B=256, D=4096, F=4096, bytes_per_value=2),
        dict(B=4096, D=8192, F=28672, bytes_per_value=2),
        dict(B=512, D=8192, F=8192, bytes_per_value=1),
        dict(B=64, D=1024, F=4096, bytes_per_value=4),
    ),
))


# 1.3 -------------------------------------------------------------------------

_1_3 = dict(B=1024, D=4096, F=4096)


def _per_example_weights_counts() -> tuple[float, float]:
    """(FLOPs, bytes) for 1.3: each of the B rows has its own [D, F] weight matrix (einsum bd,bdf->bf)."""
    B, D, F = _1_3["B"], _1_3["D"], _1_3["F"]
    nbytes = (B * D + B * D * F + B * F) * bytes_per_value("bf16")
    return matmul_flops(B, D, F), nbytes


register(Exercise(
    id="1.3",
    title="Intensity when every example has its own weights",
    reference=lambda: explain(arithmetic_intensity, *_per_example_weights_counts()),
    unit="FLOP/B",
    mistakes={
        _factor(matmul_intensity(**_1_3), arithmetic_intensity(*_per_example_weights_counts())):
            "you counted one weight matrix shared by the whole batch; here each of the B examples "
            "brings its own [D, F] matrix, so the weight bytes grow with B as fast as the FLOPs do",
    },
))


# 1.4 -------------------------------------------------------------------------

_1_4_ARGS = (128, 4096, 16384, "tpu-v5e")
_1_4 = matmul_roofline(*_1_4_ARGS)

register(Exercise(
    id="1.4",
    title="Lower bound on the time of a small-batch matmul on TPU v5e",
    reference=lambda: explain(matmul_roofline, *_1_4_ARGS),
    unit="s",
    mistakes={
        _factor(_1_4.t_math_s, _1_4.t_lower_s):
            "you gave T_math; at this batch moving the bytes from HBM takes longer than the arithmetic, "
            "so the lower bound is max(T_math, T_comms) = T_comms",
        _factor(_1_4.t_upper_s, _1_4.t_lower_s):
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


register(Exercise(
    id="1.5",
    title="Lower bound on a matmul's time, as a function",
    reference=lambda: _matmul_time_lower_bound,
    unit="s",
    kind="function",
    mistakes={
        2.0: "a factor of 2: a matmul does 2·B·D·F FLOPs, and a bf16 value takes 2 bytes",
    },
    cases=(
        dict(B=64, D=8192, F=8192, **_rates("tpu-v5e")),
        dict(B=4096, D=8192, F=8192, **_rates("tpu-v5e")),
        dict(B=4096, D=8192, F=28672, **_rates("h100")),
        dict(B=256, D=4096, F=4096, **_rates("tpu-v5p")),
        dict(B=1, D=16384, F=16384, **_rates("b200")),
    ),
))


# 1.6 -------------------------------------------------------------------------

register(Exercise(
    id="1.6",
    title="Compute- or memory-bound: int8 weights, bf16 arithmetic",
    reference=lambda: matmul_roofline(200, 8192, 8192, "tpu-v5e", dtype="bf16", weight_dtype="int8").bound,
    kind="choice",
    choices=("compute", "memory"),
))


# 1.7 -------------------------------------------------------------------------

register(Exercise(
    id="1.7",
    title="Critical batch size on TPU v5p with int8 weights",
    reference=lambda: explain(critical_batch_size, "tpu-v5p", dtype="bf16", weight_dtype="int8"),
    unit="tokens",
    mistakes={
        2.0: "a factor of 2: either you counted 2 bytes per weight (int8 weights take 1), or you used the "
             "int8 rate for C (the arithmetic here runs in bf16)",
    },
))


# 1.8 -------------------------------------------------------------------------

register(Exercise(
    id="1.8",
    title="Critical batch size of a small matmul on TPU v5e",
    reference=lambda: explain(critical_batch_size, "tpu-v5e", dtype="bf16", D=1024, F=1024),
    unit="tokens",
    mistakes={
        _factor(critical_batch_size("tpu-v5e", D=1024, F=1024), critical_batch_size("tpu-v5e")):
            "you gave the large-matrix limit I_crit · w / 2; with D = F = 1024 the bytes of the "
            "activations and of the output are not small next to the weights, so a larger batch is needed",
    },
))


# 1.9 -------------------------------------------------------------------------

_1_9_PARAMS = 70e9

register(Exercise(
    id="1.9",
    title="Time to read a 70B-parameter model's weights on one H200",
    reference=lambda: explain(t_comms_s, _1_9_PARAMS * bytes_per_value("bf16"), "h200", bandwidth="hbm"),
    unit="s",
    mistakes={
        2.0: "a factor of 2: a bf16 parameter takes 2 bytes",
        _factor(chip("h200").bytes_per_s(bandwidth="hbm"), chip("h100").bytes_per_s(bandwidth="hbm")):
            "you used the H100's HBM bandwidth; the H200 has faster memory (take `sl.chip('h200').hbm_bytes_per_s`)",
    },
))


# 1.10 ------------------------------------------------------------------------

_1_10 = dict(B=2048, F=16384)

register(Exercise(
    id="1.10",
    title="Time to exchange partial sums between two TPU v5e chips",
    reference=lambda: explain(t_comms_s, _1_10["B"] * _1_10["F"] * bytes_per_value("bf16"), "tpu-v5e",
                              bandwidth="ici"),
    unit="s",
    mistakes={
        _factor(chip("tpu-v5e").bytes_per_s(bandwidth="ici_bidirectional"), chip("tpu-v5e").bytes_per_s(bandwidth="ici")):
            "a factor of 2: the partial sums cross the link in one direction at the one-way bandwidth "
            "(`ici_link_bytes_per_s_one_way`), not the bidirectional figure; and each bf16 value is 2 bytes",
    },
))


# 1.11 ------------------------------------------------------------------------

def _min_contracting_dim() -> Derivation:
    """Reference for 1.11: two chips split D; each does B·D·F FLOPs and sends 2·B·F bytes, so D/2 > C / W_ici."""
    ci = explain(critical_intensity, "tpu-v5e", dtype="bf16", bandwidth="ici")
    return Derivation("D_min", "2 · C / W_ici", f"2 · {q(ci.value)}", 2 * ci.value, "", (ci,))


register(Exercise(
    id="1.11",
    title="Smallest contracting dimension for a compute-bound 2-chip matmul",
    reference=_min_contracting_dim,
    unit="",
    mistakes={
        2.0: "a factor of 2: each chip's intensity is B·D·F FLOPs over 2·B·F bytes, that is D/2 (not D); "
             "and the partial sums cross the link one way, at the one-way ICI bandwidth",
    },
))
