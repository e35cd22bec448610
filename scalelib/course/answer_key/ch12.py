"""Chapter 12 exercises: GPUs.

Every reference is computed by scalelib from the chip registry, the GPU
topologies and the tile search; the numbers below are only the shapes and sizes
each question gives. Facts and formulas follow ch. 12 "How to Think About GPUs"
of How to Scale Your Model (Austin et al., 2025) and NVIDIA's data sheets and
DGX SuperPOD reference architecture, as named in the registry's sources.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, slip
from ..._collectives import allgather_time_s, allreduce_time_s, alltoall_time_s
from ..._derivation import Derivation, explain, q
from ..._parallelism import data_parallel_critical_batch, pipeline_bubble_fraction, tensor_parallel_max_degree
from ..._roofline import critical_intensity
from ..._specs import DTYPES, bytes_per_value, chip
from ..._tiles import best_tile, search_tiles, tile_intensity, tile_smem_bytes
from ..._topology import gpu_cluster


def _variant(name: str, **changes):
    """A slip's version of chip `name`: NVLink read as bidirectional (``nvlink=2``), or the
    node's egress as one NIC's (``egress=1/8``)."""
    spec = chip(name)
    figures = {}
    if "nvlink" in changes:
        figures["scale_up_bytes_per_s_per_gpu"] = spec.scale_up_bytes_per_s_per_gpu * changes["nvlink"]
    if "egress" in changes:
        figures["scale_out_bytes_per_s_per_node"] = spec.scale_out_bytes_per_s_per_node * changes["egress"]
    return spec.derive(f"{name}-slip", **figures)


def _dtype_of_size(size: float) -> str:
    """The first registry dtype whose values take `size` bytes (2 -> bf16, 1 -> fp8, 4 -> f32)."""
    return next(name for name, (_, nbytes) in DTYPES.items() if nbytes == size)


# 12.1 ------------------------------------------------------------------------

def _b200_intensities() -> Derivation:
    """Reference for 12.1: [bf16, fp8] critical intensities of a B200."""
    both = tuple(explain(critical_intensity, "b200", dtype=dtype) for dtype in ("bf16", "fp8"))
    d = Derivation("[bf16, fp8]", "[I_crit(b200, bf16, hbm), I_crit(b200, fp8, hbm)]", "",
                   np.array([x.value for x in both]), "FLOP/B", both)
    return define(d, {"C": "the B200's peak rate in that dtype", "W": "its HBM bandwidth"})


register(Exercise(
    id="12.1",
    title="Critical intensities of a B200 in bf16 and in fp8",
    reference=_b200_intensities,
    unit="FLOP/B",
    mistakes={
        slip([critical_intensity("h100", dtype=d) for d in ("bf16", "fp8")],
             [critical_intensity("b200", dtype=d) for d in ("bf16", "fp8")]):
            "those are the H100's; take the B200's rates and HBM bandwidth from `sl.chip('b200')`",
    },
))


# 12.2 ------------------------------------------------------------------------

def _sms_per_tensorcore() -> Derivation:
    """Reference for 12.2: a TPU v5p TensorCore's bf16 rate over an H100 SM's."""
    v5p, h100 = chip("tpu-v5p"), chip("h100")
    C_v5p, C_h100 = v5p.peak_flops_per_s(dtype="bf16"), h100.peak_flops_per_s(dtype="bf16")
    per_core = C_v5p / v5p.cores
    per_sm = C_h100 / h100.cores
    value = per_core / per_sm
    core = Derivation("C_core", "C_v5p / TensorCores", f"{q(C_v5p, 'FLOP/s')} / {v5p.cores}", per_core, "FLOP/s",
                      where=("C_v5p: a TPU v5p chip's peak bf16 rate; TensorCores: its cores",))
    sm = Derivation("C_SM", "C_h100 / SMs", f"{q(C_h100, 'FLOP/s')} / {h100.cores}", per_sm, "FLOP/s",
                    where=("C_h100: an H100's peak bf16 rate; SMs: its streaming multiprocessors",))
    return Derivation("SMs per TensorCore", "C_core / C_SM",
                      f"{q(per_core, 'FLOP/s')} / {q(per_sm, 'FLOP/s')}", value, "", (core, sm))


register(Exercise(
    id="12.2",
    title="How many H100 SMs match one TPU v5p TensorCore",
    reference=_sms_per_tensorcore,
    mistakes={
        slip(chip("tpu-v5p").bf16_flops_per_s / (chip("h100").bf16_flops_per_s / chip("h100").cores),
             _sms_per_tensorcore()):
            "a factor of 2: a TPU v5p chip has two TensorCores; divide the chip's rate by `cores` "
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
                      value, "B", where=("SM: a streaming multiprocessor; SMEM: its shared memory",))


_H100 = chip("h100")

register(Exercise(
    id="12.3",
    title="An H100's SMEM and registers, all SMs together",
    reference=_onchip_fast_memory,
    unit="B",
    mistakes={
        slip(_H100.cores * _H100.fast_mem_bytes_per_core, _onchip_fast_memory()):
            "you counted the shared memory (SMEM) only; the register file of each SM is about as large again",
        slip(_H100.cores * _H100.registers_bytes_per_core, _onchip_fast_memory()):
            "you counted the register files only; each SM also has its shared memory (SMEM)",
        slip(_H100.fast_mem_bytes_per_core + _H100.registers_bytes_per_core, _onchip_fast_memory()):
            "that is one SM's memory; multiply by the number of SMs for the whole chip",
    },
))


# 12.4 ------------------------------------------------------------------------

_12_4 = dict(bm=128, bn=256, bk=64, stages=3)

register(Exercise(
    id="12.4",
    title="Shared memory needed by a pipelined matmul tile",
    reference=lambda: define(explain(tile_smem_bytes, **_12_4, dtype="bf16"),
                             {"stages": "blocks in flight in the pipeline", "bm, bn": "the sides of the output tile",
                              "bk": "the step along the contracting dimension", "b": "bytes per bf16 value"}),
    unit="B",
    mistakes={
        slip(tile_smem_bytes(**{**_12_4, "stages": 1}, dtype="bf16"), tile_smem_bytes(**_12_4, dtype="bf16")):
            "you counted one stage; each of the 3 pipeline stages holds its own A and B blocks in SMEM",
        slip(tile_smem_bytes(**_12_4, dtype="fp8"), tile_smem_bytes(**_12_4, dtype="bf16")):
            "a factor of 2: a bf16 value takes 2 bytes",
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
        slip(tile_intensity(128, 128, dtype="bf16") / 2, tile_intensity(128, 128, dtype="bf16")):
            "a factor of 2: each multiply-add counts as 2 FLOPs (the tile does 2·bm·bn·K)",
    },
    cases=(
        dict(bm=128, bn=128, bytes_per_value=2),
        dict(bm=64, bn=256, bytes_per_value=2),
        dict(bm=128, bn=256, bytes_per_value=1),
        dict(bm=16, bn=64, bytes_per_value=2),
        dict(bm=256, bn=128, bytes_per_value=4),
    ),
    formula="I_tile = 2·bm·bn·K / ((bm + bn)·K·bytes_per_value) = 2·bm·bn / ((bm + bn)·bytes_per_value): "
            "K cancels",
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
                      value, "", where=("waves: tiles / SMs rounded up (a partly filled last wave takes a whole "
                                        "wave's time)",))


_12_6_TILES = (_12_6["M"] // _12_6["bm"]) * (_12_6["N"] // _12_6["bn"])

register(Exercise(
    id="12.6",
    title="How full the waves of a 128 x 256 tile are on an H100",
    reference=_wave_efficiency,
    mistakes={
        slip(_12_6_TILES / (_12_6_TILES // chip("h100").cores * chip("h100").cores), _wave_efficiency()):
            "you rounded the number of waves down; the last, partly filled wave still takes a whole wave's time, "
            "so round up",
    },
))


# 12.7 ------------------------------------------------------------------------

_12_7 = dict(M=512, N=14336, K=4096)  # 512 tokens through LLaMA-3-8B's up-projection


def _best_tile_area() -> Derivation:
    """Reference for 12.7: bm · bn of the tile scalelib's search puts first."""
    tile = best_tile(**_12_7, chip="h100")
    time = define(explain(best_tile, **_12_7, chip="h100"),
                  {"bm, bn": "the sides of the output tile, here of the one the search ranks first (by its time)",
                   "K": "the contracting dimension"})
    return Derivation("area", "bm · bn", f"{tile.bm} · {tile.bn}", tile.bm * tile.bn, "", (time,))


def _most_intense_tile_area() -> int:
    """12.7's slip: the area of the tile with the highest intensity, not the fastest."""
    tile = max(search_tiles(**_12_7, chip="h100"), key=lambda t: (t.intensity, t.bm * t.bn))
    return tile.bm * tile.bn


register(Exercise(
    id="12.7",
    title="The tile a roofline search picks",
    reference=_best_tile_area,
    unit="",
    mistakes={
        slip(_most_intense_tile_area(), _best_tile_area()):
            "you took the tile with the highest intensity; the search ranks tiles by predicted time, "
            "and here every tile is compute-bound, so how full the waves are decides",
    },
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
        slip(_12_8_BYTES / _NODE.nvlink_bytes_per_s_per_gpu, allgather_time_s(_12_8_BYTES, _NODE, group=8)):
            "a factor of 8/7: each GPU already holds its own eighth, so it receives only (N − 1)/N of the array",
        slip(allgather_time_s(_12_8_BYTES, gpu_cluster(1, _variant("h100", nvlink=2)), group=8),
             allgather_time_s(_12_8_BYTES, _NODE, group=8)):
            "a factor of 2: NVLink's 450 GB/s per H100 is per direction (the bidirectional total is 900 GB/s); "
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
        slip(allreduce_time_s(_12_9_BYTES, gpu_cluster(_12_9["nodes"], _variant("h100", egress=1 / 8)),
                              group=_12_9_CLUSTER.num_gpus), _allreduce_12_9()):
            "a factor of 8: a node has eight 400 Gb/s InfiniBand NICs, 8 × 400 Gb/s = 400 GB/s of egress; "
            "one NIC alone gives 50 GB/s (bits versus bytes)",
        slip(allgather_time_s(_12_9_BYTES, _12_9_CLUSTER, group=_12_9_CLUSTER.num_gpus), _allreduce_12_9()):
            "a factor of 2: an AllReduce is a ReduceScatter followed by an AllGather, twice the bytes of either; "
            "and bf16 gradients take 2 bytes each",
        slip(_allreduce_12_9_over_nvlink_only(), _allreduce_12_9()):
            "you used the NVLink bandwidth; across nodes every node's share leaves through its InfiniBand "
            "egress (`scale_out_bytes_per_s_per_node`), which is slower and binds",
    },
))


# 12.10 -----------------------------------------------------------------------

_12_10 = dict(B=16384, D=8192)
_12_10_BYTES = _12_10["B"] * _12_10["D"] * bytes_per_value("bf16")

def _alltoall_12_10() -> float:
    return alltoall_time_s(_12_10_BYTES, _NODE, group=8)


register(Exercise(
    id="12.10",
    title="AllToAll of a batch of activations inside an H100 node",
    reference=lambda: explain(alltoall_time_s, _12_10_BYTES, _NODE, group=8),
    unit="s",
    mistakes={
        slip(_12_10_BYTES / (4 * _NODE.nvlink_bytes_per_s_per_gpu), _alltoall_12_10()):
            "that is the cost on a TPU ring, V/(4W); inside a fully switched node each GPU sends straight "
            "to every other one, V·(N−1)/(N²·W)",
        slip(alltoall_time_s(_12_10_BYTES, gpu_cluster(1, _variant("h100", nvlink=2)), group=8), _alltoall_12_10()):
            "a factor of 2: NVLink's 450 GB/s per H100 is per direction, not the bidirectional total; "
            "and a bf16 value takes 2 bytes",
        slip(_12_10_BYTES / 8 / _NODE.nvlink_bytes_per_s_per_gpu, _alltoall_12_10()):
            "a factor of 8/7: each GPU keeps the 1/N of its own data that stays home: V·(N−1)/(N²·W)",
        slip(_12_10_BYTES * 7 / 8 / _NODE.nvlink_bytes_per_s_per_gpu, _alltoall_12_10()):
            "a factor of 8 (= N): each GPU holds only V/N of the array and sends (N−1)/N of that, "
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
        slip(_alltoall_slowdown_approximate(), _alltoall_slowdown()):
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
    formula="leaf = ⌈8·num_nodes / 32⌉ (half of each switch's 64 ports face the nodes), "
            "spine = ⌈8·num_nodes / 64⌉ (every port of a spine takes a link from a leaf)",
))


# 12.13 -----------------------------------------------------------------------

def _dp_batches(spec="b200") -> np.ndarray:
    """[inside one node, across nodes] data-parallel critical batches of B200 nodes (or of a slip's variant)."""
    return np.array([data_parallel_critical_batch(gpu_cluster(n, spec)) for n in (1, 2)])


def _dp_batches_derivation() -> Derivation:
    """Reference for 12.13, with both thresholds derived."""
    inside, across = (explain(data_parallel_critical_batch, gpu_cluster(n, "b200")) for n in (1, 2))
    return Derivation("[inside one node, across nodes]", "[B_crit per chip (1 node), B_crit per chip (2 nodes)]", "",
                      np.array([inside.value, across.value]), "tokens", (inside, across))


register(Exercise(
    id="12.13",
    title="Data-parallel critical batch on B200s, inside a node and across nodes",
    reference=_dp_batches_derivation,
    unit="tokens",
    mistakes={
        slip(_dp_batches(_variant("b200", egress=1 / 8)), _dp_batches()):
            "a factor of 8: a node's egress is its eight 400 Gb/s NICs together, 400 GB/s; "
            "one NIC alone gives 50 GB/s (bits versus bytes)",
        slip(_dp_batches(_variant("b200", nvlink=2)), _dp_batches()):
            "a factor of 2: NVLink's 900 GB/s per B200 is per direction, not the bidirectional total",
    },
))


# 12.14 -----------------------------------------------------------------------

_12_14_F = 28672  # LLaMA-3-70B's MLP width

register(Exercise(
    id="12.14",
    title="Largest compute-bound tensor-parallel degree for LLaMA-3-70B in a B200 node",
    reference=lambda: replace(explain(tensor_parallel_max_degree, _12_14_F, gpu_cluster(1, "b200")), unit="GPUs"),
    unit="GPUs",
    mistakes={
        slip(tensor_parallel_max_degree(_12_14_F, gpu_cluster(1, _variant("b200", nvlink=2))),
             tensor_parallel_max_degree(_12_14_F, gpu_cluster(1, "b200"))):
            "a factor of 2: use NVLink's one-way 900 GB/s per B200, not the 1.8 TB/s bidirectional total",
        slip(tensor_parallel_max_degree(_12_14_F, _NODE), tensor_parallel_max_degree(_12_14_F, gpu_cluster(1, "b200"))):
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
    reason="Tensor parallelism stays compute-bound only while Y ≤ F · W_gpu / C; for F = 14336 on H100s "
           "that limit is below 8 GPUs, so NVLink sets the time.",
))


# 12.16 -----------------------------------------------------------------------

_12_16 = dict(stages=16, microbatches=64)

register(Exercise(
    id="12.16",
    title="Pipeline bubble with 16 stages and 64 microbatches",
    reference=lambda: explain(pipeline_bubble_fraction, **_12_16),
    mistakes={
        slip((_12_16["stages"] - 1) / _12_16["microbatches"], pipeline_bubble_fraction(**_12_16)):
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
        slip(chip("gb200-nvl72").scale_up_bytes_per_s_per_gpu / chip("h100").scale_up_bytes_per_s_per_gpu,
             _nvl72_alltoall_speedup()):
            "you compared the NVLink bandwidths only (900 vs 450 GB/s); across nine H100 nodes the "
            "InfiniBand egress of each node, not NVLink, sets the time",
        slip((_12_17["gpus"] * chip("gb200-nvl72").scale_up_bytes_per_s_per_gpu)
             / (_12_17["gpus"] // 8 * chip("h100").scale_out_bytes_per_s_per_node), _nvl72_alltoall_speedup()):
            "you used the approximations V/(N·W_gpu) and V/(M·W_node); the exact costs carry the factors "
            "(N−1)/N² and (M−1)/M², which differ noticeably for M = 9 nodes",
    },
))
