"""Chapter 12 exercises: GPUs.

Every reference is computed by scalelib from the chip registry, the GPU
topologies and the tile search; the numbers below are only the shapes and sizes
each question gives. Facts and formulas follow ch. 12 "How to Think About GPUs"
of How to Scale Your Model (Austin et al., 2025) and NVIDIA's data sheets and
DGX SuperPOD reference architecture, as named in the registry's sources.
"""

from __future__ import annotations

import numpy as np

from ..check import Exercise, register
from ..._collectives import allgather_time_s, allreduce_time_s, alltoall_time_s
from ..._derivation import Derivation, explain, q
from ..._parallelism import data_parallel_critical_batch, pipeline_bubble_fraction, tensor_parallel_max_degree
from ..._roofline import critical_intensity
from ..._specs import DTYPES, bytes_per_value, chip
from ..._tiles import best_tile, search_tiles, tile_intensity, tile_smem_bytes
from ..._topology import gpu_cluster


def _factor(a: float, b: float) -> float:
    """The ratio between two answers as a factor >= 1, as the checker's mistake tables expect."""
    ratio = float(a) / float(b)
    return max(ratio, 1 / ratio)


def _dtype_of_size(size: float) -> str:
    """The first registry dtype whose values take `size` bytes (2 -> bf16, 1 -> fp8, 4 -> f32)."""
    return next(name for name, (_, nbytes) in DTYPES.items() if nbytes == size)


# 12.1 ------------------------------------------------------------------------

register(Exercise(
    id="12.1",
    title="Critical intensities of a B200 in bf16 and in fp8",
    reference=lambda: np.array([critical_intensity("b200", dtype="bf16"), critical_intensity("b200", dtype="fp8")]),
    unit="FLOP/B",
))


# 12.2 ------------------------------------------------------------------------

def _sms_per_tensorcore() -> Derivation:
    """Reference for 12.2: a TPU v5p TensorCore's bf16 rate over an H100 SM's."""
    v5p, h100 = chip("tpu-v5p"), chip("h100")
    C_v5p, C_h100 = v5p.peak_flops_per_s(dtype="bf16"), h100.peak_flops_per_s(dtype="bf16")
    per_core = C_v5p / v5p.cores
    per_sm = C_h100 / h100.cores
    value = per_core / per_sm
    core = Derivation("C per v5p TensorCore", "C_v5p / TensorCores",
                      f"{q(C_v5p, 'FLOP/s')} / {v5p.cores}", per_core, "FLOP/s")
    sm = Derivation("C per H100 SM", "C_h100 / SMs", f"{q(C_h100, 'FLOP/s')} / {h100.cores}",
                    per_sm, "FLOP/s")
    return Derivation("SMs per TensorCore", "C per TensorCore / C per SM",
                      f"{q(per_core, 'FLOP/s')} / {q(per_sm, 'FLOP/s')}", value, "", (core, sm))


register(Exercise(
    id="12.2",
    title="How many H100 SMs match one TPU v5p TensorCore",
    reference=_sms_per_tensorcore,
    mistakes={
        2.0: "a factor of 2: a TPU v5p chip has two TensorCores; divide the chip's rate by `cores` "
             "before comparing it with one SM",
    },
))


# 12.3 ------------------------------------------------------------------------

def _onchip_fast_memory() -> Derivation:
    """Reference for 12.3: (SMEM + register file) per SM, times the SMs of an H100."""
    h100 = chip("h100")
    per_sm = h100.fast_mem_bytes_per_core + h100.registers_bytes_per_core
    value = h100.cores * per_sm
    return Derivation("SMEM + registers", "SMs · (SMEM per SM + registers per SM)",
                      f"{h100.cores} · ({q(h100.fast_mem_bytes_per_core, 'B')} + {q(h100.registers_bytes_per_core, 'B')})",
                      value, "B")


_H100 = chip("h100")

register(Exercise(
    id="12.3",
    title="An H100's SMEM and registers, all SMs together",
    reference=_onchip_fast_memory,
    unit="B",
    mistakes={
        _factor(_H100.fast_mem_bytes_per_core + _H100.registers_bytes_per_core, _H100.fast_mem_bytes_per_core):
            "you counted the shared memory (SMEM) only; the register file of each SM is as large again",
        _factor(_H100.fast_mem_bytes_per_core + _H100.registers_bytes_per_core, _H100.registers_bytes_per_core):
            "you counted the register files only; each SM also has its shared memory (SMEM)",
        float(_H100.cores): "a factor of the number of SMs: that is one SM's memory, not the whole chip's",
    },
))


# 12.4 ------------------------------------------------------------------------

_12_4 = dict(bm=128, bn=256, bk=64, stages=3)

register(Exercise(
    id="12.4",
    title="Shared memory needed by a pipelined matmul tile",
    reference=lambda: explain(tile_smem_bytes, **_12_4, dtype="bf16"),
    unit="B",
    mistakes={
        float(_12_4["stages"]): "a factor of the number of stages: each of the 3 pipeline stages holds its own "
                                "A and B blocks in SMEM",
        2.0: "a factor of 2: a bf16 value takes 2 bytes, and each stage holds both an A block (bm × bk) "
             "and a B block (bk × bn)",
    },
))


# 12.5 ------------------------------------------------------------------------

def _tile_intensity(bm, bn, bytes_per_value):
    """Reference for 12.5: scalelib's long-K tile intensity in the dtype of that size."""
    return tile_intensity(bm, bn, dtype=_dtype_of_size(bytes_per_value))


register(Exercise(
    id="12.5",
    title="Arithmetic intensity of an output tile, as a function",
    reference=lambda: _tile_intensity,
    unit="FLOP/B",
    kind="function",
    mistakes={
        2.0: "a factor of 2: each multiply-add counts as 2 FLOPs, and each value loaded takes bytes_per_value bytes",
    },
    cases=(
        dict(bm=128, bn=128, bytes_per_value=2),
        dict(bm=64, bn=256, bytes_per_value=2),
        dict(bm=128, bn=256, bytes_per_value=1),
        dict(bm=16, bn=64, bytes_per_value=2),
        dict(bm=256, bn=128, bytes_per_value=4),
    ),
))


# 12.6 ------------------------------------------------------------------------

_12_6 = dict(M=6144, N=6144, K=8192, bm=128, bn=256)


def _wave_efficiency() -> Derivation:
    """Reference for 12.6: the 128 x 256 tile of the search, useful tile slots over all slots of its waves."""
    cores = chip("h100").cores
    tile = next(t for t in search_tiles(_12_6["M"], _12_6["N"], _12_6["K"], "h100")
                if (t.bm, t.bn) == (_12_6["bm"], _12_6["bn"]))
    value = tile.num_tiles / (tile.waves * cores)
    return Derivation("wave efficiency", "tiles / (waves · SMs)", f"{tile.num_tiles} / ({tile.waves} · {cores})",
                      value, "")


_12_6_TILES = (_12_6["M"] // _12_6["bm"]) * (_12_6["N"] // _12_6["bn"])

register(Exercise(
    id="12.6",
    title="How full the waves of a 128 x 256 tile are on an H100",
    reference=_wave_efficiency,
    mistakes={
        _factor(_wave_efficiency().value, _12_6_TILES / (_12_6_TILES // chip("h100").cores * chip("h100").cores)):
            "you rounded the number of waves down; the last, partly filled wave still takes a whole wave's time, "
            "so round up",
    },
))


# 12.7 ------------------------------------------------------------------------

_12_7 = dict(M=512, N=14336, K=4096)  # 512 tokens through LLaMA-3-8B's up-projection


def _best_tile_area():
    """Reference for 12.7: bm · bn of the tile scalelib's search puts first."""
    tile = best_tile(**_12_7, chip="h100")
    return tile.bm * tile.bn


register(Exercise(
    id="12.7",
    title="The tile a roofline search picks for a square matmul",
    reference=_best_tile_area,
    unit="",
))


# 12.8 ------------------------------------------------------------------------

_12_8 = dict(D=8192, F=28672)
_12_8_BYTES = _12_8["D"] * _12_8["F"] * bytes_per_value("bf16")
_NODE = gpu_cluster(1, "h100")

register(Exercise(
    id="12.8",
    title="AllGather of an MLP weight inside an 8-GPU H100 node",
    reference=lambda: explain(allgather_time_s, _12_8_BYTES, _NODE, group=8),
    unit="s",
    mistakes={
        8 / 7: "a factor of 8/7: each GPU already holds its own eighth, so it receives only (N − 1)/N of the array",
        2.0: "a factor of 2: NVLink's 450 GB/s per H100 is per direction (the bidirectional total is 900 GB/s); "
             "and a bf16 value takes 2 bytes",
    },
))


# 12.9 ------------------------------------------------------------------------

_12_9 = dict(params=8e9, nodes=16)
_12_9_CLUSTER = gpu_cluster(_12_9["nodes"], "h100")
_12_9_BYTES = _12_9["params"] * bytes_per_value("bf16")


def _allreduce_12_9() -> Derivation:
    """Reference for 12.9: an AllReduce of the bf16 gradients over every GPU of the 16 nodes."""
    return explain(allreduce_time_s, _12_9_BYTES, _12_9_CLUSTER, group=_12_9_CLUSTER.num_gpus)


def _allreduce_12_9_over_nvlink_only():
    """What 12.9 would give with the NVLink term alone (the slip of using W_gpu across nodes)."""
    N = _12_9_CLUSTER.num_gpus
    return 2 * _12_9_BYTES * (N - 1) / N / _12_9_CLUSTER.nvlink_bytes_per_s_per_gpu


register(Exercise(
    id="12.9",
    title="AllReduce of a model's gradients across 16 H100 nodes",
    reference=_allreduce_12_9,
    unit="s",
    mistakes={
        8.0: "a factor of 8: bits versus bytes; a node has eight 400 Gb/s InfiniBand NICs, "
             "8 × 400 Gb/s = 400 GB/s of egress (one NIC alone gives 50 GB/s)",
        2.0: "a factor of 2: an AllReduce is a ReduceScatter followed by an AllGather, twice the bytes of either; "
             "and bf16 gradients take 2 bytes each",
        _factor(_allreduce_12_9().value, _allreduce_12_9_over_nvlink_only()):
            "you used the NVLink bandwidth; across nodes every node's share leaves through its InfiniBand "
            "egress (`scale_out_bytes_per_s_per_node`), which is slower and binds",
    },
))


# 12.10 -----------------------------------------------------------------------

_12_10 = dict(B=16384, D=8192)
_12_10_BYTES = _12_10["B"] * _12_10["D"] * bytes_per_value("bf16")

register(Exercise(
    id="12.10",
    title="AllToAll of a batch of activations inside an H100 node",
    reference=lambda: explain(alltoall_time_s, _12_10_BYTES, _NODE, group=8),
    unit="s",
    mistakes={
        2.0: "a factor of 2: on a TPU ring an AllToAll costs V/(4W); inside a fully switched node each GPU "
             "sends straight to every other one, V·(N−1)/(N²·W) ≈ V/(8W); and bf16 takes 2 bytes",
        8 / 7: "a factor of 8/7: each GPU keeps the 1/N of its own data that stays home: V·(N−1)/(N²·W)",
        8.0: "a factor of 8 (= N): each GPU holds only V/N of the array and sends (N−1)/N of that, "
             "so the time is V·(N−1)/(N²·W), not V·(N−1)/(N·W)",
    },
))


# 12.11 -----------------------------------------------------------------------

_12_11_BYTES = _12_10_BYTES


def _alltoall_slowdown() -> Derivation:
    """Reference for 12.11: the same AllToAll over 16 GPUs in 2 nodes versus 8 GPUs in one node."""
    inside = explain(alltoall_time_s, _12_11_BYTES, _NODE, group=8)
    across = explain(alltoall_time_s, _12_11_BYTES, gpu_cluster(2, "h100"), group=16)
    value = across.value / inside.value
    return Derivation("slowdown", "T_AllToAll(2 nodes) / T_AllToAll(1 node)",
                      f"{q(across.value, 's')} / {q(inside.value, 's')}", value, "", (inside, across))


def _alltoall_slowdown_approximate():
    """12.11 from the large-N approximations V/(8·W_gpu) and V/(M·W_node) (the slip the mistake names)."""
    return (8 * _NODE.nvlink_bytes_per_s_per_gpu) / (2 * _NODE.node_egress_bytes_per_s)


register(Exercise(
    id="12.11",
    title="How much slower an AllToAll gets when it spans two nodes",
    reference=_alltoall_slowdown,
    mistakes={
        _factor(_alltoall_slowdown().value, _alltoall_slowdown_approximate()):
            "you used the approximations V/(8·W_gpu) and V/(M·W_node); they hold for many GPUs and nodes, "
            "but with M = 2 the exact V·(M−1)/(M²·W_node) is half of V/(M·W_node)",
    },
))


# 12.12 -----------------------------------------------------------------------

def _fat_tree_switches(num_nodes):
    """Reference for 12.12: leaf and spine switches of scalelib's two-level H100 fat tree."""
    cluster = gpu_cluster(num_nodes, "h100")
    return np.array([cluster.num_leaf_switches, cluster.num_spine_switches], dtype=float)


register(Exercise(
    id="12.12",
    title="Leaf and spine switches of an H100 fat tree, as a function",
    reference=lambda: _fat_tree_switches,
    kind="function",
    cases=(
        dict(num_nodes=16),
        dict(num_nodes=32),
        dict(num_nodes=100),
        dict(num_nodes=128),
        dict(num_nodes=256),
    ),
))


# 12.13 -----------------------------------------------------------------------

register(Exercise(
    id="12.13",
    title="Data-parallel critical batch on B200s, inside a node and across nodes",
    reference=lambda: np.array([data_parallel_critical_batch(gpu_cluster(1, "b200")),
                                data_parallel_critical_batch(gpu_cluster(2, "b200"))]),
    unit="tokens",
    mistakes={
        8.0: "a factor of 8: bits versus bytes (a node's eight 400 Gb/s NICs give 400 GB/s)",
        2.0: "a factor of 2: NVLink's 900 GB/s per B200 is per direction, not the bidirectional total",
    },
))


# 12.14 -----------------------------------------------------------------------

_12_14_F = 28672  # LLaMA-3-70B's MLP width

register(Exercise(
    id="12.14",
    title="Largest compute-bound tensor-parallel degree for LLaMA-3-70B in a B200 node",
    reference=lambda: explain(tensor_parallel_max_degree, _12_14_F, gpu_cluster(1, "b200")),
    unit="GPUs",
    mistakes={
        2.0: "a factor of 2: use NVLink's one-way 900 GB/s per B200, not the 1.8 TB/s bidirectional total",
        _factor(tensor_parallel_max_degree(_12_14_F, gpu_cluster(1, "b200")), tensor_parallel_max_degree(_12_14_F, _NODE)):
            "you used the H100's figures; take the B200's `bf16_flops_per_s` and `scale_up_bytes_per_s_per_gpu`",
    },
))


# 12.15 -----------------------------------------------------------------------

_12_15 = dict(F=14336, Y=8)  # Mixtral-8x7B's expert width; tensor parallelism over a whole node


def _expert_tp_bound():
    """Reference for 12.15: compute-bound while Y <= F · W_gpu / C."""
    limit = tensor_parallel_max_degree(_12_15["F"], _NODE)
    return "compute" if _12_15["Y"] <= limit else "communication"


register(Exercise(
    id="12.15",
    title="Splitting a Mixtral expert over a whole H100 node",
    reference=_expert_tp_bound,
    kind="choice",
    choices=("compute", "communication"),
))


# 12.16 -----------------------------------------------------------------------

_12_16 = dict(stages=16, microbatches=64)

register(Exercise(
    id="12.16",
    title="Pipeline bubble with 16 stages and 64 microbatches",
    reference=lambda: explain(pipeline_bubble_fraction, **_12_16),
    mistakes={
        _factor(pipeline_bubble_fraction(**_12_16), (_12_16["stages"] - 1) / _12_16["microbatches"]):
            "you divided by m; the step lasts m + p − 1 slots (the m microbatches plus the p − 1 slots "
            "to fill and drain the pipeline), so the idle share is (p − 1) / (m + p − 1)",
    },
))


# 12.17 -----------------------------------------------------------------------

_12_17 = dict(gpus=72, tokens_per_gpu=8192, k=8, D=7168)  # DeepSeek-V3's k and D
_12_17_BYTES = _12_17["gpus"] * _12_17["tokens_per_gpu"] * _12_17["k"] * _12_17["D"] * bytes_per_value("bf16")


def _nvl72_alltoall_speedup() -> Derivation:
    """Reference for 12.17: an AllToAll over 72 GPUs, nine H100 nodes versus one GB200 NVL72 domain."""
    gpus = _12_17["gpus"]
    h100 = explain(alltoall_time_s, _12_17_BYTES, gpu_cluster(gpus // 8, "h100"), group=gpus)
    nvl72 = explain(alltoall_time_s, _12_17_BYTES, gpu_cluster(1, "gb200-nvl72"), group=gpus)
    value = h100.value / nvl72.value
    return Derivation("speed-up", "T_AllToAll(9 H100 nodes) / T_AllToAll(NVL72)",
                      f"{q(h100.value, 's')} / {q(nvl72.value, 's')}", value, "", (h100, nvl72))


register(Exercise(
    id="12.17",
    title="An MoE AllToAll over 72 GPUs: nine H100 nodes or one GB200 NVL72",
    reference=_nvl72_alltoall_speedup,
    mistakes={
        _factor(_nvl72_alltoall_speedup().value,
                chip("gb200-nvl72").scale_up_bytes_per_s_per_gpu / chip("h100").scale_up_bytes_per_s_per_gpu):
            "you compared the NVLink bandwidths only (900 vs 450 GB/s); across nine H100 nodes the "
            "InfiniBand egress of each node, not NVLink, sets the time",
        _factor(_nvl72_alltoall_speedup().value,
                (_12_17["gpus"] * chip("gb200-nvl72").scale_up_bytes_per_s_per_gpu)
                / (_12_17["gpus"] // 8 * chip("h100").scale_out_bytes_per_s_per_node)):
            "you used the approximations V/(N·W_gpu) and V/(M·W_node); the exact costs carry the factors "
            "(N−1)/N² and (M−1)/M², which differ noticeably for M = 9 nodes",
    },
))
