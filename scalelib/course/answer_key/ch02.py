"""Chapter 2 exercises: TPUs.

Every reference is computed by scalelib from the chip registry and the topology
model; the numbers below are only what each question gives (a model size, a
chip count, a message size, two chip coordinates). Facts and formulas follow
ch. 2 "How to Think About TPUs" of How to Scale Your Model (Austin et al., 2025).
"""

from __future__ import annotations

import math

from ..check import Exercise, register
from ._tools import define, slip
from ..._derivation import Derivation, explain, q
from ..._roofline import critical_batch_size, t_comms_s
from ..._specs import bytes_per_value, chip
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
    mistakes={
        slip(_sampling_time(_2_1_BYTES, 1), _sampling_time(_2_1_BYTES, _2_1["chips"])):
            "a factor of 16: the 16 chips read their shares of the weights at the same time, "
            "each from its own HBM, so divide the bytes by the number of chips",
        slip(_sampling_time(_2_1["params"] * bytes_per_value("int8"), _2_1["chips"]),
             _sampling_time(_2_1_BYTES, _2_1["chips"])):
            "a factor of 2: a bf16 parameter takes 2 bytes",
    },
))


# 2.2 -------------------------------------------------------------------------

register(Exercise(
    id="2.2",
    title="Peak bf16 FLOP/s of a full TPU v6e pod",
    reference=lambda: define(explain(tpu_pod("tpu-v6e").total_flops_per_s, dtype="bf16"),
                             {"C": "one TPU v6e chip's peak bf16 rate"}),
    unit="FLOP/s",
    mistakes={
        slip(tpu_pod("tpu-v6e").total_flops_per_s(dtype="int8"), tpu_pod("tpu-v6e").total_flops_per_s(dtype="bf16")):
            "a factor of 2: that is the int8 rate (`int8_ops_per_s`); the question asks for bf16",
        slip(tpu_pod("tpu-v6e").num_hosts * chip("tpu-v6e").peak_flops_per_s(dtype="bf16"),
             tpu_pod("tpu-v6e").total_flops_per_s(dtype="bf16")):
            f"a factor of {math.prod(chip('tpu-v6e').host_shape)}: you multiplied by the number of hosts "
            f"({tpu_pod('tpu-v6e').num_hosts}), not of chips ({tpu_pod('tpu-v6e').num_chips}); "
            f"a v6e host drives {math.prod(chip('tpu-v6e').host_shape)} chips",
    },
))


# 2.3 -------------------------------------------------------------------------

register(Exercise(
    id="2.3",
    title="Total HBM of a full TPU7x (Ironwood) pod",
    reference=lambda: explain(tpu_pod("tpu7x").total_hbm_bytes),
    unit="B",
    mistakes={
        slip(tpu_pod("tpu7x").total_hbm_bytes() * chip("tpu7x").cores, tpu_pod("tpu7x").total_hbm_bytes()):
            "a factor of 2: `hbm_bytes` is per chip, shared by its two TensorCores; do not multiply it by the cores",
    },
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
    mistakes={
        slip(_p2p(wraparound=False), _p2p()):
            "you routed the long way, 12 + 12 hops; the full 16x16 pod has wraparound links, "
            "so 12 steps forward on an axis are 4 steps backward",
        slip(_p2p(hop_latency_s=0.0), _p2p()):
            "you left out the latency of the hops (about 1 µs each); at this size it is a good part of the time",
        slip(_v5e_pod().hops(_2_5["a"], _2_5["b"]) * ICI_HOP_LATENCY_S
             + _2_5["nbytes"] / chip("tpu-v5e").bytes_per_s(bandwidth="ici_bidirectional"), _p2p()):
            "you used the bidirectional bandwidth; one message travels one way along its route, "
            "at `ici_link_bytes_per_s_one_way`",
    },
))


# 2.6 -------------------------------------------------------------------------

def _pcie_batch() -> Derivation:
    """Reference for 2.6: intensity ≈ 2·B·D·F / (2·D·F) = B against the PCIe roofline."""
    return define(explain(critical_batch_size, "tpu-v6e", dtype="bf16", bandwidth="pcie"),
                  {"C": "TPU v6e's peak bf16 rate", "W": "its PCIe bandwidth (the weights come from host memory)"})


register(Exercise(
    id="2.6",
    title="Batch needed to stay compute-bound with weights in host memory (TPU v6e)",
    reference=_pcie_batch,
    unit="tokens",
    mistakes={
        slip(critical_batch_size("tpu-v6e", dtype="bf16", bandwidth="hbm"),
             critical_batch_size("tpu-v6e", dtype="bf16", bandwidth="pcie")):
            "you used the HBM bandwidth; the weights come from host memory over PCIe (`pcie_bytes_per_s`)",
    },
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
    mistakes={
        slip(t_comms_s(_2_9["params"] * bytes_per_value("bf16"), _2_9["chip"], bandwidth="pcie"), _host_load()):
            "a factor of 8: the host has one PCIe link per chip, and its 8 chips load their shares in parallel",
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
