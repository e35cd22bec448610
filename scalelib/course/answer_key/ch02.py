"""Chapter 2 exercises: TPUs.

Every reference is computed by scalelib from the chip registry and the topology
model; the numbers below are only what each question gives (a model size, a
chip count, a message size, two chip coordinates). Facts and formulas follow
ch. 2 "How to Think About TPUs" of How to Scale Your Model (Austin et al., 2025).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, slip, weights_only
from ..._derivation import Derivation, explain, q
from ..._roofline import critical_batch_size, matmul_flops, matmul_roofline, t_comms_s, t_math_s
from ..._vector import vector_flops_per_s
from ..._specs import bytes_per_value, chip
from ..._systolic import systolic_cycles, systolic_trace
from ..._topology import ICI_HOP_LATENCY_S, tpu_pod, tpu_slice


# 2.1 -------------------------------------------------------------------------

_2_1 = dict(params=70e9, chips=16, chip="tpu-v5e")


def _sampling_latency_bound() -> Derivation:
    """Reference for 2.1: each chip streams its 1/16 share of the bf16 weights from its own HBM."""
    per_chip = _2_1["params"] * bytes_per_value("bf16") / _2_1["chips"]
    return define(explain(t_comms_s, per_chip, _2_1["chip"], bandwidth="hbm"),
                  {"nbytes": "each chip's 1/16 share of the bf16 weights", "W": "a TPU v5e's HBM bandwidth"})


def _sampling_time(params_bytes: float, chips: int) -> float:
    """2.1's time with `params_bytes` bytes of weights shared by `chips` chips (for the slips)."""
    return t_comms_s(params_bytes / chips, _2_1["chip"], bandwidth="hbm")


_2_1_BYTES = _2_1["params"] * bytes_per_value("bf16")


register(Exercise(
    id="2.1",
    title="A lower bound on sampling latency: 70B parameters on a TPU v5e 4x4 slice",
    reference=_sampling_latency_bound,
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(_sampling_time(_2_1_BYTES, 1), _sampling_time(_2_1_BYTES, _2_1["chips"])):
            "a factor of 16: the 16 chips read their shares of the weights at the same time, "
            "each from its own HBM, so divide the bytes by the number of chips",
        slip(_sampling_time(_2_1["params"] * bytes_per_value("int8"), _2_1["chips"]),
             _sampling_time(_2_1_BYTES, _2_1["chips"])):
            "a factor of 2: a bf16 parameter takes 2 bytes",
    },
    book=("Q1",),
))


# 2.2 -------------------------------------------------------------------------

register(Exercise(
    id="2.2",
    title="Peak bf16 FLOP/s of a full TPU v6e pod (warm-up)",
    reference=lambda: define(explain(tpu_pod("tpu-v6e").total_flops_per_s, dtype="bf16"),
                             {"C": "one TPU v6e chip's peak bf16 rate"}),
    unit="FLOP/s",
    mistakes={
        slip(tpu_pod("tpu-v6e").total_flops_per_s(dtype="int8"), tpu_pod("tpu-v6e").total_flops_per_s(dtype="bf16")):
            "a factor of 2: that is twice the dense bf16 rate (the int8 rate, `int8_ops_per_s`, or a figure quoted "
            "with sparsity); the question asks for dense bf16",
        slip(tpu_pod("tpu-v6e").num_hosts * chip("tpu-v6e").peak_flops_per_s(dtype="bf16"),
             tpu_pod("tpu-v6e").total_flops_per_s(dtype="bf16")):
            f"a factor of {math.prod(chip('tpu-v6e').host_shape)}: you multiplied by the number of hosts "
            f"({tpu_pod('tpu-v6e').num_hosts}), not of chips ({tpu_pod('tpu-v6e').num_chips}); "
            f"a v6e host drives {math.prod(chip('tpu-v6e').host_shape)} chips",
    },
    book=("Q2",),
))


# 2.3 -------------------------------------------------------------------------

register(Exercise(
    id="2.3",
    title="Total HBM of a full TPU7x (Ironwood) pod (warm-up)",
    reference=lambda: explain(tpu_pod("tpu7x").total_hbm_bytes),
    unit="B",
    involves=set(),
    mistakes={
        slip(tpu_pod("tpu7x").total_hbm_bytes() * chip("tpu7x").cores, tpu_pod("tpu7x").total_hbm_bytes()):
            "a factor of 2: `hbm_bytes` is per chip, shared by its two TensorCores; do not multiply it by the cores",
    },
    book=("Q2",),
))


# 2.4 -------------------------------------------------------------------------

def _torus_hops(a, b, shape, wraparound):
    """Reference for 2.4: the hops of a slice of that shape (a v5e for 2D, a v4p for 3D)."""
    name = "tpu-v5e" if len(shape) == 2 else "tpu-v4p"
    return tpu_slice(shape, name, wraparound=wraparound).hops(a, b)


register(Exercise(
    id="2.4",
    title="Hops between two chips of a torus, as a function",
    reference=lambda: _torus_hops,
    unit="hops",
    integer=True,
    kind="function",
    rtol=1e-9,
    cases=(
        dict(a=(0, 0), b=(3, 3), shape=(4, 4), wraparound=(False, False)),
        dict(a=(0, 0), b=(15, 15), shape=(16, 16), wraparound=(True, True)),
        dict(a=(0, 0), b=(15, 15), shape=(16, 16), wraparound=(False, False)),
        dict(a=(2, 13), b=(11, 1), shape=(16, 16), wraparound=(True, True)),
        dict(a=(1, 2), b=(7, 14), shape=(8, 16), wraparound=(False, True)),
        dict(a=(0, 3, 15), b=(12, 3, 1), shape=(16, 16, 16), wraparound=(True, True, True)),
        dict(a=(3, 0, 0), b=(0, 3, 5), shape=(4, 4, 8), wraparound=(False, False, False)),
        dict(a=(5, 5), b=(5, 5), shape=(16, 16), wraparound=(True, True)),
    ),
    formula="hops = Σ over axes of d, or min(d, n − d) where the axis wraps around, "
            "with d = |a_i − b_i| and n the chips along that axis",
))


# 2.5 -------------------------------------------------------------------------

_2_5 = dict(nbytes=512 * 1024 * 2, a=(0, 0), b=(12, 12))


def _v5e_pod(wraparound=None):
    """The full 16x16 TPU v5e pod of 2.5, with its wraparound links unless `wraparound` says otherwise."""
    return tpu_slice(chip("tpu-v5e").pod_shape, "tpu-v5e", wraparound=wraparound)


def _p2p(wraparound=None, hop_latency_s=ICI_HOP_LATENCY_S) -> float:
    """2.5's transfer time (s), on the pod with or without wraparound and with the given hop latency."""
    return _v5e_pod(wraparound).p2p_time_s(_2_5["nbytes"], _2_5["a"], _2_5["b"], hop_latency_s=hop_latency_s)


register(Exercise(
    id="2.5",
    title="Sending 1 MiB across a TPU v5e pod",
    reference=lambda: define(explain(_v5e_pod().p2p_time_s, _2_5["nbytes"], _2_5["a"], _2_5["b"]),
                             {"hops": "links on a shortest route, the short way round each ring",
                              "T_hop": "latency of one hop", "W_link": "one ICI link's bandwidth, one way"}),
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_p2p(wraparound=False), _p2p()):
            "you routed the long way; the full 16x16 pod has wraparound links, so going backward along an "
            "axis can take fewer hops than going forward",
        slip(_p2p(hop_latency_s=0.0), _p2p()):
            "you left out the latency of the hops (about 1 µs each); at this size it is a good part of the time",
        slip(_v5e_pod().hops(_2_5["a"], _2_5["b"]) * ICI_HOP_LATENCY_S
             + _2_5["nbytes"] / chip("tpu-v5e").bytes_per_s(bandwidth="ici_bidirectional"), _p2p()):
            "you used the bidirectional bandwidth; one message travels one way along its route, "
            "at `ici_link_bytes_per_s_one_way`",
    },
    book=("Q5",),
))


# 2.6 -------------------------------------------------------------------------

def _pcie_batch() -> Derivation:
    """Reference for 2.6: intensity ≈ 2·B·D·F / (2·D·F) = B against the PCIe roofline."""
    return weights_only(define(explain(critical_batch_size, "tpu-v4p", dtype="bf16", bandwidth="pcie"),
                  {"C": "TPU v4p's peak bf16 rate", "W": "its PCIe bandwidth (the weights come from host memory)"}))


register(Exercise(
    id="2.6",
    title="Batch needed to stay compute-bound with weights in host memory (TPU v4p)",
    reference=_pcie_batch,
    unit="tokens",
    mistakes={
        slip(critical_batch_size("tpu-v4p", dtype="bf16", bandwidth="hbm"),
             critical_batch_size("tpu-v4p", dtype="bf16", bandwidth="pcie")):
            "you used the HBM bandwidth; the weights come from host memory over PCIe (`pcie_bytes_per_s`)",
        slip(critical_batch_size("tpu-v6e", dtype="bf16", bandwidth="pcie"),
             critical_batch_size("tpu-v4p", dtype="bf16", bandwidth="pcie")):
            "that is the TPU v6e of the book's question; take the v4p's rate and PCIe bandwidth",
    },
    book=("Q3",),
))


# 2.7 -------------------------------------------------------------------------

def _mxus_per_core() -> Derivation:
    """Reference for 2.7: C / (cores · 2·n² · f), with 2·n² FLOPs per cycle from an n x n systolic array."""
    spec = chip("tpu-v5e")
    n, f = spec.mxu_size, spec.clock_ghz_boost * 1e9
    per_cycle = Derivation("FLOPs per cycle of one MXU", "2·n²", f"2·{n}²", 2 * n * n, "FLOP/cycle",
                           where=("n: cells per side of the MXU (`mxu_size`); each does a multiply and an add per cycle",))
    per_mxu = Derivation("C_MXU", "2·n² · f", f"{q(2 * n * n)} · {q(f, 'Hz')}", 2 * n * n * f, "FLOP/s", (per_cycle,),
                         where=("f: the clock frequency (`clock_ghz_boost`)",))
    value = spec.bf16_flops_per_s / (spec.cores * per_mxu.value)
    return Derivation("MXUs per TensorCore", "C / (cores · C_MXU)",
                      f"{q(spec.bf16_flops_per_s, 'FLOP/s')} / ({spec.cores} · {q(per_mxu.value, 'FLOP/s')})",
                      value, "", (per_mxu,),
                      where=("C: the chip's peak bf16 rate; cores: its TensorCores",))


register(Exercise(
    id="2.7",
    title="How many MXUs a TPU v5e TensorCore needs for its peak",
    reference=_mxus_per_core,
    unit="",
    mistakes={
        slip(chip("tpu-v5e").bf16_flops_per_s / (chip("tpu-v5e").cores * chip("tpu-v5e").mxu_size ** 2
                                                 * chip("tpu-v5e").clock_ghz_boost * 1e9), _mxus_per_core()):
            "a factor of 2: each cell of the systolic array does one multiply and one add per cycle, "
            "2 FLOPs, so an n x n array does 2·n² FLOPs per cycle",
        slip(math.ceil(_mxus_per_core().value), _mxus_per_core()):
            "that is rounded up; the question asks for the ratio itself, unrounded",
    },
))


# 2.8 -------------------------------------------------------------------------

_2_8_SHAPE = (8, 16)
_2_8_CHOICES = ("X", "Y", "both", "neither")


def _wrapping_axes():
    wrap = tpu_slice(_2_8_SHAPE, "tpu-v5e").wraparound
    return {(True, True): "both", (False, False): "neither", (True, False): "X", (False, True): "Y"}[wrap]


register(Exercise(
    id="2.8",
    title="Which axes of a TPU v5e 8x16 slice wrap around",
    reference=_wrapping_axes,
    kind="choice",
    choices=_2_8_CHOICES,
    reason="An axis of a TPU v5e slice wraps around only where the slice spans the whole pod (16 chips): "
           "Y does, X (8 of 16) does not.",
))


# 2.9 -------------------------------------------------------------------------

_2_9 = dict(params=8e9, chip="tpu-v5e")


def _host_load() -> Derivation:
    """Reference for 2.9: the host's chips each load their 1/8 share over their own PCIe link."""
    spec = chip(_2_9["chip"])
    chips = math.prod(spec.host_shape)
    per_chip = _2_9["params"] * bytes_per_value("bf16") / chips
    return define(explain(t_comms_s, per_chip, spec, bandwidth="pcie"),
                  {"nbytes": "each chip's 1/8 share of the bf16 weights", "W": "one chip's PCIe bandwidth"})


register(Exercise(
    id="2.9",
    title="Loading an 8B-parameter model from a TPU v5e host over PCIe",
    reference=_host_load,
    unit="s",
    involves={"dtype"},
    mistakes={
        slip(t_comms_s(_2_9["params"] * bytes_per_value("bf16"), _2_9["chip"], bandwidth="pcie"), _host_load()):
            "a factor of 8: the host has one PCIe link per chip, and its 8 chips load their shares in parallel",
        slip(t_comms_s(_2_9["params"] * bytes_per_value("bf16") / (math.prod(chip(_2_9["chip"]).host_shape) / 2),
                       _2_9["chip"], bandwidth="pcie"), _host_load()):
            "a factor of 2: either too few chips share the copy (a host drives every chip of its `host_shape` "
            "block, rows times columns), or the weights were counted at 4 bytes per value (bf16 takes 2)",
    },
))


# 2.10 ------------------------------------------------------------------------

_2_10 = dict(params=70e9, shape=(8, 16, 16), chip="tpu-v5p")


def _dcn_gradients() -> Derivation:
    """Reference for 2.10: bf16 gradients leave a slice through every chip's share of DCN."""
    piece = tpu_slice(_2_10["shape"], _2_10["chip"])
    nbytes = _2_10["params"] * bytes_per_value("bf16")
    W = explain(piece.dcn_bytes_per_s)
    d = Derivation("T_dcn", "nbytes / W_dcn", f"{q(nbytes, 'B')} / {q(W.value, 'B/s')}", nbytes / W.value,
                   "s", (W,), where=("nbytes: the bf16 gradients, 2 bytes per parameter",))
    return define(d, {"chips": "TPU v5p chips in the 8x16x16 slice"})


def _dcn_time(nbytes: float, W_per_chip: float) -> float:
    """2.10's time for `nbytes` leaving through every chip of the slice at `W_per_chip` (for the slips)."""
    return nbytes / (tpu_slice(_2_10["shape"], _2_10["chip"]).num_chips * W_per_chip)


_2_10_BYTES = _2_10["params"] * bytes_per_value("bf16")


register(Exercise(
    id="2.10",
    title="Moving a 70B model's gradients between two TPU v5p slices over DCN",
    reference=_dcn_gradients,
    unit="s",
    involves={"bandwidth", "dtype"},
    mistakes={
        slip(_dcn_time(_2_10_BYTES, chip("tpu-v5p").bytes_per_s(bandwidth="ici")),
             _dcn_time(_2_10_BYTES, chip("tpu-v5p").bytes_per_s(bandwidth="dcn"))):
            "you used the ICI link bandwidth; between slices the data crosses the data-center network, "
            "at `dcn_bytes_per_s_per_chip` for every chip of the slice",
        slip(_dcn_time(_2_10["params"] * bytes_per_value("int8"), chip("tpu-v5p").bytes_per_s(bandwidth="dcn")),
             _dcn_time(_2_10_BYTES, chip("tpu-v5p").bytes_per_s(bandwidth="dcn"))):
            "a factor of 2: a bf16 gradient takes 2 bytes",
    },
))


# 2.11 and 2.12: the book's Q4, an int8 matmul on one TPU v5e, from HBM and from VMEM -----------------

_Q4 = dict(D=4096, F=16384, chip="tpu-v5e", dtype="int8")  # int8[B, 4096] x int8[4096, 16384] -> int8[B, 16384]


def _q4_time_s(B, memory):
    """Reference for 2.11: the roofline's lower bound of Q4's matmul with its arrays streaming from `memory`."""
    if memory not in ("hbm", "vmem"):
        raise ValueError(f"`memory` must be 'hbm' or 'vmem', got {memory!r}")
    return matmul_roofline(B, _Q4["D"], _Q4["F"], _Q4["chip"], dtype=_Q4["dtype"], bandwidth=memory).t_lower_s


register(Exercise(
    id="2.11",
    title="An int8 matmul's time against its batch, from HBM and from VMEM, as a function",
    reference=lambda: _q4_time_s,
    unit="s",
    involves={"dtype", "flops", "peak"},
    kind="function",
    cases=(
        dict(B=1, memory="hbm"),
        dict(B=64, memory="hbm"),
        dict(B=200, memory="hbm"),
        dict(B=300, memory="hbm"),
        dict(B=4096, memory="hbm"),
        dict(B=2, memory="vmem"),
        dict(B=16, memory="vmem"),
        dict(B=1024, memory="vmem"),
    ),
    formula="T(B) = max(2·B·D·F / C_int8, (B·D + D·F + B·F) / W) with D = 4096, F = 16384, one byte per "
            "int8 value, and W the bandwidth of the memory the arrays stream from (HBM, or VMEM at about 22x it)",
    book=("Q4",),
))


#: 2.12's two weight matrices, both int8 on one TPU v5e: Q4's [4096, 16384], and a square [2048, 2048].
_2_12_SHAPES = ((_Q4["D"], _Q4["F"]), (2048, 2048))


def _q4_batch(bandwidth: str, spec=None, weight_dtype=None):
    """The batch above which Q4's matmul is compute-bound, streaming over `bandwidth` (for references and slips)."""
    return critical_batch_size(spec or _Q4["chip"], dtype=_Q4["dtype"], weight_dtype=weight_dtype,
                               D=_Q4["D"], F=_Q4["F"], bandwidth=bandwidth)


def _hbm_batch(D: int, F: int, spec=None):
    """The batch above which an int8 [B, D] x [D, F] matmul on `spec` (TPU v5e) is compute-bound over HBM."""
    return critical_batch_size(spec or _Q4["chip"], dtype=_Q4["dtype"], D=D, F=F, bandwidth="hbm")


def _q4_batches() -> Derivation:
    """Reference for 2.12: [Q4's matrix, the square one], every byte counted (activations, weights, result)."""
    both = tuple(explain(critical_batch_size, _Q4["chip"], dtype=_Q4["dtype"], D=D, F=F, bandwidth="hbm")
                 for D, F in _2_12_SHAPES)
    d = Derivation("[16384 x 4096, 2048 x 2048]", "[B_crit of the first, B_crit of the second]", "",
                   np.array([x.value for x in both]), "tokens", both)
    return define(d, {"C": "the TPU v5e's peak int8 rate", "W": "its HBM bandwidth",
                      "I": "that critical intensity, C / W", "D, F": "the weight matrix's sides"})


def _q4_slip_chip(**changes):
    spec = chip(_Q4["chip"])
    return spec.derive("tpu-v5e-slip", **{k: getattr(spec, k) * v for k, v in changes.items()})


register(Exercise(
    id="2.12",
    title="The batch from which an int8 matmul is compute-bound: a tall matrix and a small square one",
    reference=_q4_batches,
    unit="tokens",
    mistakes={
        slip([critical_batch_size(_Q4["chip"], dtype="int8", bandwidth="hbm")] * 2,
             [_hbm_batch(D, F) for D, F in _2_12_SHAPES]):
            "you took the large-matrix limit, which counts only the weights; at these sizes the activations "
            "read and the result written move bytes too, so the crossover sits higher, the more so for the "
            "smaller matrix",
        slip([_hbm_batch(D, F, _q4_slip_chip(int8_ops_per_s=0.5)) for D, F in _2_12_SHAPES],
             [_hbm_batch(D, F) for D, F in _2_12_SHAPES]):
            "you used the bf16 rate; with int8 operands the MXU runs at the int8 rate (`int8_ops_per_s`)",
    },
    book=("Q4",),
))


# 2.13: the book's Q6 (from host memory to one chip, then a matmul), gathered into chip (1, 1) ----------

_Q6 = dict(side=128 * 1024, rows=8, shape=(4, 4), chip="tpu-v5e", dest=(1, 1))


def _q6_stages(dest=_Q6["dest"], links=None) -> dict[str, float]:
    """Q6's four stage times (s) for the matrix gathered into `dest` over `links` ICI links (default: all it has)."""
    spec = chip(_Q6["chip"])
    piece = tpu_slice(_Q6["shape"], spec)
    V = _Q6["side"] ** 2 * bytes_per_value("int8")
    if links is None:
        links = sum(piece.hops(c, dest) == 1 for c in itertools.product(*map(range, piece.shape)))
    arriving = V * (piece.num_chips - 1) / piece.num_chips
    return dict(
        pcie=t_comms_s(V / piece.num_chips, spec, bandwidth="pcie"),
        ici=t_comms_s(arriving / links, spec, bandwidth="ici"),
        hbm=t_comms_s(V, spec, bandwidth="hbm"),
        mxu=t_math_s(matmul_flops(_Q6["rows"], _Q6["side"], _Q6["side"]), spec, dtype="bf16"),
    )


def _q6_bound() -> Derivation:
    """Reference for 2.13: the four stages overlap, so the slowest one bounds the time."""
    spec = chip(_Q6["chip"])
    piece = tpu_slice(_Q6["shape"], spec)
    V = _Q6["side"] ** 2 * bytes_per_value("int8")
    links = sum(piece.hops(c, _Q6["dest"]) == 1 for c in itertools.product(*map(range, piece.shape)))
    stage = _q6_stages()
    chips, M, K = piece.num_chips, _Q6["rows"], _Q6["side"]
    steps = (
        Derivation("T_pcie", "V / (chips · W_pcie)", f"{q(V, 'B')} / ({chips} · {q(spec.pcie_bytes_per_s, 'B/s')})",
                   stage["pcie"], "s"),
        Derivation("T_ici", "V · (chips − 1) / chips / (links · W_link)",
                   f"{q(V, 'B')} · {chips - 1} / {chips} / ({links} · {q(spec.ici_link_bytes_per_s_one_way, 'B/s')})",
                   stage["ici"], "s"),
        Derivation("T_hbm", "V / W_hbm", f"{q(V, 'B')} / {q(spec.hbm_bytes_per_s, 'B/s')}", stage["hbm"], "s"),
        Derivation("T_mxu", "2·M·K·K / C", f"2·{M}·{K}·{K} / {q(spec.bf16_flops_per_s, 'FLOP/s')}",
                   stage["mxu"], "s"),
    )
    d = Derivation("T", "max(T_pcie, T_ici, T_hbm, T_mxu)", f"max({', '.join(q(s.value, 's') for s in steps)})",
                   max(stage.values()), "s", steps)
    return define(d, {
        "V": "the int8 matrix's bytes, 128·1024 squared", "chips": "the 16 chips of the slice",
        "links": "ICI links into chip (1, 1)",
        "W_pcie": "one chip's PCIe bandwidth; every chip of the slice loads its 1/16 share at once",
        "W_link": "one ICI link's one-way bandwidth; everything but chip (1, 1)'s own share arrives over its links",
        "W_hbm": "the HBM bandwidth (the whole matrix passes from HBM into the MXUs once)",
        "M, K": "the bf16 activations' 8 rows and the matrix's side",
        "C": "the bf16 rate (bf16 activations: the int8 weights are multiplied in bf16)",
    })


_Q6_REF = max(_q6_stages().values())

register(Exercise(
    id="2.13",
    title="From host memory into one chip of a TPU v5e 4x4 slice, then a matmul: the least time",
    reference=_q6_bound,
    unit="s",
    involves={"bandwidth", "dtype"},
    mistakes={
        slip(max(_q6_stages(links=2).values()), _Q6_REF):
            "a factor of 2: chip (1, 1) sits inside the 4x4 slice and receives over four ICI links, not two as "
            "the corner chip (0, 0) does. (Adding the four stages gives about the same figure here: they overlap, "
            "as a pipeline, so the slowest one bounds the time)",
        slip(_q6_stages()["pcie"], _Q6_REF):
            "that is the PCIe stage; moving the rest of the matrix into chip (1, 1) over ICI takes longer. "
            "Each link brings data into the chip at its one-way bandwidth (`ici_link_bytes_per_s_one_way`), "
            "not the bidirectional figure",
    },
    book=("Q6",),
))


# 2.14: the book's pop quiz on VPU throughput, beside the same core's MXUs ---------------------------------

def _vpu_rate(spec_name: str = "tpu-v5p", per_chip: bool = False) -> float:
    return vector_flops_per_s(spec_name, per="chip" if per_chip else "core")


def _core_rates(vpu_per_chip: bool = False, mxu_per_chip: bool = False, alus: float = 1.0) -> np.ndarray:
    """[VPU, MXUs] FLOP/s of one TPU v5p TensorCore (a slip: the whole chip's, or a quarter of the ALUs)."""
    v5p = chip("tpu-v5p")
    return np.array([_vpu_rate(per_chip=vpu_per_chip) * alus,
                     v5p.bf16_flops_per_s / (1 if mxu_per_chip else v5p.cores)])


def _vpu_throughput() -> Derivation:
    """Reference for 2.14: every ALU of one TensorCore's VPU does one fp32 operation per cycle; its MXUs do the
    chip's bf16 rate over its cores."""
    v5p = chip("tpu-v5p")
    vpu = replace(explain(vector_flops_per_s, "tpu-v5p", per="core"), symbol="C_VPU per core")
    mxu = Derivation("C_MXU per core", "C / cores", f"{q(v5p.bf16_flops_per_s, 'FLOP/s')} / {v5p.cores}",
                     v5p.bf16_flops_per_s / v5p.cores, "FLOP/s", where=("C: the chip's peak bf16 rate (its MXUs); "
                                                                       "cores: its TensorCores",))
    return Derivation("[VPU, MXUs]", "[C_VPU per core, C_MXU per core]", "", _core_rates(), "FLOP/s", (vpu, mxu))


register(Exercise(
    id="2.14",
    title="Vector and matrix FLOP/s of one TPU v5p TensorCore",
    reference=_vpu_throughput,
    unit="FLOP/s",
    involves=frozenset(),
    mistakes={
        slip(_core_rates() * [2, 1], _core_rates()):
            "you counted each ALU's operation as 2 FLOPs; the question credits each ALU with one per cycle",
        slip(_core_rates(vpu_per_chip=True, mxu_per_chip=True), _core_rates()):
            "those are the whole chip's; the question asks for one TensorCore",
        slip(_core_rates(mxu_per_chip=True), _core_rates()):
            "the second is the whole chip's MXU rate; the chip has more than one TensorCore",
        slip(_core_rates(alus=0.25), _core_rates()):
            "each of the 8 x 128 lanes has several independent ALUs (`vector_alus_per_core` counts them all)",
    },
    book=("Pop quiz",),
))


# 2.15: int4 weights --------------------------------------------------------------------------------------

def _int4_batch() -> Derivation:
    """Reference for 2.15: Q4's matmul with int4 weights, int8 activations and result, arithmetic at the int8 rate."""
    d = explain(critical_batch_size, _Q4["chip"], dtype="int8", weight_dtype="int4", D=_Q4["D"], F=_Q4["F"])
    return define(d, {"C": "the TPU v5e's int8 rate (the int4 weights are multiplied on the int8 units)",
                      "W": "its HBM bandwidth", "I": "that critical intensity, C / W",
                      "D, F": "4096 and 16384, the weight matrix's sides"})


_INT4_REF = _q4_batch("hbm", weight_dtype="int4")

register(Exercise(
    id="2.15",
    title="int4 weights: the batch from which the int8 matmul of 2.11 turns compute-bound",
    reference=_int4_batch,
    unit="tokens",
    mistakes={
        slip(_q4_batch("hbm"), _INT4_REF):
            "a factor of 2: an int4 weight takes half a byte; two of them share each byte",
        slip(_q4_batch("hbm", _q4_slip_chip(int8_ops_per_s=2), weight_dtype="int4"), _INT4_REF):
            "you let the int4 arithmetic run twice as fast as int8; the question keeps it at the int8 rate",
    },
))


# 2.16 and 2.17: Appendix B, the systolic array -----------------------------------------------------------

_2_16 = dict(n=16, M=8, m=5, c=10)


def _output_cycle() -> Derivation:
    """Reference for 2.16: the cycle (from 1) at which the simulated array hands Y[m, c] out of its bottom row."""
    n, M, m, c = _2_16["n"], _2_16["M"], _2_16["m"], _2_16["c"]
    trace = systolic_trace(np.ones((M, n)), np.ones((n, n)), size=n)
    cycle = int(np.argmax(~np.isnan(trace.outputs[:, m, c]))) + 1
    return Derivation("t_out", "m + n + c", f"{m} + {n} + {c}", cycle, "cycles",
                      where=("m, c: the row and column of Y, counted from 0; n: the array's side; X[m, 0] enters "
                             "the top-left PE at cycle m + 1, the sum for Y[m, c] starts in the top PE of that column "
                             "c cycles later and moves down one row a cycle, leaving the bottom row n - 1 cycles "
                             "after that (the simulation, sl.systolic_trace, agrees)",))


register(Exercise(
    id="2.16",
    title="When one output leaves a 16x16 systolic array",
    reference=_output_cycle,
    unit="cycles",
    integer=True,
    rtol=5e-4,
    mistakes={
        slip(_2_16["m"] + _2_16["n"], _output_cycle()):
            "the outputs leave skewed, one column after another, as the activations take a cycle for each PE "
            "they cross moving right",
        slip(_2_16["m"] + _2_16["c"] + 1, _output_cycle()):
            "a partial sum moves down one PE per cycle, so it needs n cycles to pass the array's n rows",
        slip(_2_16["m"] + _2_16["n"] + _2_16["c"] - 1, _output_cycle()):
            "one cycle short: the question counts cycles from 1 (the first cycle is cycle 1)",
    },
))

_2_17 = dict(M=8, K=256, N=256, n=128)


def _tiled_cycles() -> Derivation:
    """Reference for 2.17: one pass per 128 x 128 tile of W, one after the other."""
    return define(explain(systolic_cycles, _2_17["M"], _2_17["K"], _2_17["N"], size=_2_17["n"]),
                  {"M": "rows of X (8)", "K, N": "W's sides (256 each)", "n": "the array's side (128)"})


register(Exercise(
    id="2.17",
    title="Cycles of X[8, 256] · W[256, 256] on one 128x128 MXU",
    reference=_tiled_cycles,
    unit="cycles",
    integer=True,
    rtol=5e-4,
    mistakes={
        slip(systolic_cycles(_2_17["M"], _2_17["n"], _2_17["n"], size=_2_17["n"]), _tiled_cycles()):
            "that is one pass; W is cut into tiles of the array's size, each one pass of X through the "
            "array, one after the other",
        slip(4 * _2_17["M"], _tiled_cycles()):
            "each pass also fills the array (the first sum must cross it) and drains it (the skew on the way "
            "out), besides the cycles that stream X in",
    },
))
