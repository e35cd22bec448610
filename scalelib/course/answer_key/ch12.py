"""Chapter 12 exercises: GPUs.

Every reference is computed by scalelib from the chip registry, the GPU
topologies, the per-level collective model of ``scalelib._gpu`` and the tile
search; the numbers below are only the shapes, sizes and figures each question
gives (a vector rate NVIDIA quotes, a batch, a model's width). Facts and formulas follow ch. 12 "How to Think About GPUs"
of How to Scale Your Model (Austin et al., 2025) and NVIDIA's data sheets and
DGX SuperPOD reference architecture, as named in the registry's sources.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np

from ..check import Exercise, register
from ._tools import define, rename, slip
from ..._collectives import allgather_time_s, alltoall_time_s
from ..._derivation import Derivation, explain, q
from ..._gpu import (
    expert_parallel_critical_width,
    fat_tree_level_bytes_per_s,
    hierarchical_allgather_time_s,
    hierarchical_allreduce_time_s,
    hierarchical_data_parallel_critical_batch,
    moe_data_parallel_critical_batch,
    node_bandwidth_bytes_per_s,
    pipeline_comms_time_s,
    ragged_alltoall_time_s,
    switch_bytes,
    vector_add_time_s,
    vector_alus,
    vector_clock_hz,
)
from ..._parallelism import data_parallel_critical_batch, pipeline_bubble_fraction, tensor_parallel_max_degree
from ..._roofline import critical_intensity, matmul_roofline, t_math_s
from ..._specs import DTYPES, bytes_per_value, chip
from ..._units import fmt
from ..._vector import vector_flops_per_s
from ..._tiles import search_tiles, tile_intensity, tile_smem_bytes
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

def _fp8_intensities(chips=("h200", "b200"), dtype="fp8") -> Derivation:
    """Reference for 12.1: the fp8 critical intensities of an H200 and a B200."""
    both = tuple(explain(critical_intensity, name, dtype=dtype) for name in chips)
    d = Derivation("[H200, B200]", "[I_crit(h200, fp8, hbm), I_crit(b200, fp8, hbm)]", "",
                   np.array([x.value for x in both]), "FLOP/B", both)
    return define(d, {"C": "the chip's peak fp8 rate", "W": "its HBM bandwidth"})


register(Exercise(
    id="12.1",
    title="Critical intensities of an H200 and a B200 in fp8 (warm-up)",
    reference=_fp8_intensities,
    unit="FLOP/B",
    involves={"peak"},
    mistakes={
        slip(_fp8_intensities(dtype="bf16"), _fp8_intensities()):
            "those are the bf16 intensities; take each chip's fp8 rate (`fp8_flops_per_s`)",
        slip(_fp8_intensities(chips=("h100", "b200")), _fp8_intensities()):
            "the first is the H100's; the H200 has the same tensor cores but faster HBM",
    },
    book=("Quiz 1 Q3",),
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
    """Reference for 12.3: (SMEM + register file) per SM, times the SMs of an A100.

    On-chip memories are stored in binary bytes (256 KiB each), so the derivation reads them in KiB
    and gives the total in MiB before the decimal figure every byte count is printed in.
    """
    a100 = chip("a100")
    smem, regs = a100.fast_mem_bytes_per_core, a100.registers_bytes_per_core
    per_sm = smem + regs
    value = a100.cores * per_sm
    kib = lambda x: fmt(x, "B", binary=True)  # noqa: E731
    return Derivation("SMEM + registers", "SMs · (SMEM per SM + registers per SM)",
                      f"{a100.cores} · ({kib(smem)} + {kib(regs)}) = {a100.cores} · {kib(per_sm)} = {kib(value)}",
                      value, "B", where=("SM: a streaming multiprocessor; SMEM: an SM's shared memory (on-chip "
                                         "memories are counted in binary bytes: 1 KiB = 1024 B)",))


_A100 = chip("a100")

register(Exercise(
    id="12.3",
    title="An A100's SMEM and registers, all SMs together",
    reference=_onchip_fast_memory,
    unit="B",
    involves=set(),
    mistakes={
        slip(_A100.cores * _A100.fast_mem_bytes_per_core, _onchip_fast_memory()):
            "you counted the shared memory (SMEM) only; each SM also has its register file",
        slip(_A100.fast_mem_bytes_per_core + _A100.registers_bytes_per_core, _onchip_fast_memory()):
            "that is one SM's memory; the chip has many SMs, each with its own",
        slip(_A100.cores * _A100.registers_bytes_per_core, _onchip_fast_memory()):
            "you counted the register files only; each SM also has its shared memory (SMEM)",
        slip(2 * _A100.cores * _A100.fast_mem_bytes_per_core, _onchip_fast_memory()):
            "on an A100 the register file and the shared memory of an SM are not the same size: add the two",
    },
    book=("Quiz 1 Q5",),
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
            "you counted one stage; each stage of the pipeline holds its own A and B blocks in SMEM",
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

_12_6 = dict(M=5120, N=5120, K=8192, bm=128, bn=256)


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


def _tile_of(bm, bn):
    """The best-ranked configuration of a bm x bn tile in scalelib's search for 12.7's matmul."""
    return next(t for t in search_tiles(**_12_7, chip="h100") if (t.bm, t.bn) == (bm, bn))


def _wave_time(tile) -> Derivation:
    sms = chip("h100").cores
    return Derivation(f"T({tile.bm}×{tile.bn})", "waves · t_wave",
                      lambda: f"{tile.waves} · {q(tile.time_s / tile.waves, 's')}", tile.time_s, "s",
                      # the tile's own counts as an equation, the meanings the same for both tiles (one symbol,
                      # one meaning in 12.7's text)
                      where=(f"waves = ⌈{tile.num_tiles} tiles / {sms} SMs⌉ = {tile.waves}, whole waves of tiles; "
                             f"t_wave: one wave's time, a tile's arithmetic on one SM ({tile.bound}-bound)",))


def _tile_time_ratio() -> Derivation:
    """Reference for 12.7: predicted time with 128 x 256 tiles over that with 64 x 128 tiles."""
    big, small = _wave_time(_tile_of(128, 256)), _wave_time(_tile_of(64, 128))
    return Derivation("T(128×256) / T(64×128)", "T(128×256) / T(64×128)",
                      lambda: f"{q(big.value, 's')} / {q(small.value, 's')}", big.value / small.value, "", (big, small))


def _tile_ratio_without_waves() -> float:
    """12.7's slip: both times as if the last wave cost only its share (tiles / SMs, not rounded up)."""
    big, small = _tile_of(128, 256), _tile_of(64, 128)
    per_tile = lambda t: t.time_s / t.waves  # noqa: E731
    return (big.num_tiles * per_tile(big)) / (small.num_tiles * per_tile(small))


register(Exercise(
    id="12.7",
    title="Waves decide between two tiles of a 512 × 14336 × 4096 matmul",
    reference=_tile_time_ratio,
    mistakes={
        slip(_tile_ratio_without_waves(), _tile_time_ratio()):
            "you let the last wave cost only the tiles it holds; a partly filled wave takes a whole wave's "
            "time, so round the waves up, and that is where the two tiles differ",
        slip(_tile_of(64, 128).intensity / _tile_of(128, 256).intensity, _tile_time_ratio()):
            "you compared the tiles' intensities; here every tile is compute-bound, so their time is their "
            "arithmetic, counted in whole waves",
    },
))


# 12.8 ------------------------------------------------------------------------

_12_8 = dict(D=4096, F=65536)  # the book's bf16[D_X, F]
_12_8_BYTES = _12_8["D"] * _12_8["F"] * bytes_per_value("bf16")
_NODE = gpu_cluster(1, "h100")

register(Exercise(
    id="12.8",
    title="AllGather of a bf16[4096, 65536] weight inside an 8-GPU H100 node",
    reference=lambda: explain(allgather_time_s, _12_8_BYTES, _NODE, group=8),
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_12_8_BYTES / _NODE.nvlink_bytes_per_s_per_gpu, allgather_time_s(_12_8_BYTES, _NODE, group=8)):
            "a factor of 8/7: each GPU already holds its own eighth, so it receives only (N − 1)/N of the array",
        slip(allgather_time_s(_12_8_BYTES, gpu_cluster(1, _variant("h100", nvlink=2)), group=8),
             allgather_time_s(_12_8_BYTES, _NODE, group=8)):
            "a factor of 2: NVLink's 450 GB/s per H100 is per direction (the bidirectional total is 900 GB/s); "
            "and a bf16 value takes 2 bytes",
        slip(allgather_time_s(2 * _12_8_BYTES, _NODE, group=8), allgather_time_s(_12_8_BYTES, _NODE, group=8)):
            "a factor of 2: either the array was counted at 4 bytes per value (a bf16 value takes 2), or each GPU "
            "was given half of NVLink's per-direction bandwidth",
    },
    book=("Quiz 2 Q3",),
))


# 12.9 ------------------------------------------------------------------------

_12_9 = dict(params=8e9, nodes=16)
_12_9_CLUSTER = gpu_cluster(_12_9["nodes"], "h100")
_12_9_BYTES = _12_9["params"] * bytes_per_value("bf16")


def _by_level(derivation: Derivation) -> Derivation:
    """A hierarchical collective's derivation with each level's one-way bandwidth named for its level (w_node,
    w_leaf, ...), since the library writes w at every level with that level's meaning."""
    def visit(node: Derivation) -> Derivation:
        steps = tuple(visit(step) for step in node.steps)
        level = re.fullmatch(r"T_(node|leaf|spine|[a-z]+)", node.symbol)
        node = replace(node, steps=steps)
        return rename(node, {"w": f"w_{level.group(1)}"}) if level else node
    return visit(derivation)


def _allreduce_12_9() -> Derivation:
    """Reference for 12.9: an AllReduce of the bf16 gradients over every GPU of the 16 nodes, level by level."""
    return _by_level(explain(hierarchical_allreduce_time_s, _12_9_BYTES, _12_9_CLUSTER))


def _allreduce_12_9_over_nvlink_only():
    """What 12.9 gives with the NVLink level alone (the slip of forgetting the network)."""
    node = explain(hierarchical_allreduce_time_s, _12_9_BYTES, _12_9_CLUSTER).steps[0]
    return node.value


register(Exercise(
    id="12.9",
    title="AllReduce of a model's gradients across 16 H100 nodes",
    reference=_allreduce_12_9,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(hierarchical_allreduce_time_s(_12_9_BYTES, gpu_cluster(_12_9["nodes"], _variant("h100", egress=1 / 8))),
             _allreduce_12_9()):
            "a factor of 8: a node has eight 400 Gb/s InfiniBand NICs, 8 × 400 Gb/s = 400 GB/s of egress; "
            "one NIC alone gives 50 GB/s (bits versus bytes)",
        slip(hierarchical_allgather_time_s(_12_9_BYTES, _12_9_CLUSTER), _allreduce_12_9()):
            "a factor of 2: an AllReduce is a ReduceScatter followed by an AllGather, twice the bytes of either; "
            "and bf16 gradients take 2 bytes each",
        slip(_allreduce_12_9_over_nvlink_only(), _allreduce_12_9()):
            "you priced the NVLink level only; the ring between the 16 nodes runs at the same time through "
            "each node's InfiniBand egress (`scale_out_bytes_per_s_per_node`), which is slower and binds",
        slip(2 * _12_9_BYTES / chip("h100").scale_out_bytes_per_s_per_node, _allreduce_12_9()):
            "that is the large-group approximation; a ring of nodes moves only the share of the array the "
            "other nodes hold, as inside a node",
    },
))


# 12.10 -----------------------------------------------------------------------

_12_10 = dict(B=16384, D=7168)  # 16,384 tokens of DeepSeek-V3's width
_12_10_BYTES = _12_10["B"] * _12_10["D"] * bytes_per_value("bf16")

def _alltoall_12_10() -> float:
    return alltoall_time_s(_12_10_BYTES, _NODE, group=8)


register(Exercise(
    id="12.10",
    title="AllToAll of a batch of activations inside an H100 node",
    reference=lambda: explain(alltoall_time_s, _12_10_BYTES, _NODE, group=8),
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_12_10_BYTES / (4 * _NODE.nvlink_bytes_per_s_per_gpu), _alltoall_12_10()):
            "that is the cost on a TPU ring; inside a fully switched node each GPU sends straight "
            "to every other one, only the part of its own share that is bound for each",
        slip(alltoall_time_s(_12_10_BYTES, gpu_cluster(1, _variant("h100", nvlink=2)), group=8), _alltoall_12_10()):
            "a factor of 2: NVLink's figure per H100 (`scale_up_bytes_per_s_per_gpu`) is per direction, not the "
            "bidirectional total; or check the bytes per bf16 value",
        slip(_12_10_BYTES / 8 / _NODE.nvlink_bytes_per_s_per_gpu, _alltoall_12_10()):
            "each GPU keeps the part of its own share that is bound for itself: that part never travels",
        slip(_12_10_BYTES * 7 / 8 / _NODE.nvlink_bytes_per_s_per_gpu, _alltoall_12_10()):
            "each GPU holds only its own share of the array and sends from that, not from the whole array",
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
            "you used the large-group approximations; they hold for many GPUs and nodes, but with only two "
            "nodes the exact cost, which counts the share that stays on each node, is noticeably smaller",
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

_12_13_NODES = (1, 4)  # one node, and four nodes under one leaf switch


def _dp_batches(spec="b200") -> np.ndarray:
    """[one node, four nodes] data-parallel critical batches of B200 nodes, each ring counted exactly (or of a
    slip's variant)."""
    return np.array([hierarchical_data_parallel_critical_batch(gpu_cluster(n, spec)) for n in _12_13_NODES])


def _dp_batches_derivation() -> Derivation:
    """Reference for 12.13, with both thresholds derived."""
    inside, across = (explain(hierarchical_data_parallel_critical_batch, gpu_cluster(n, "b200"))
                      for n in _12_13_NODES)
    return Derivation("[one node, four nodes]", "[B_crit per GPU (1 node), B_crit per GPU (4 nodes)]", "",
                      np.array([inside.value, across.value]), "tokens", (inside, across))


register(Exercise(
    id="12.13",
    title="Data-parallel critical batch on B200s, each ring counted exactly: one node and four",
    reference=_dp_batches_derivation,
    unit="tokens",
    mistakes={
        slip(_dp_batches(_variant("b200", egress=1 / 8)), _dp_batches()):
            "a factor of 8: a node's egress is its eight 400 Gb/s NICs together, 400 GB/s; "
            "one NIC alone gives 50 GB/s (bits versus bytes)",
        slip(_dp_batches(_variant("b200", nvlink=2)), _dp_batches()):
            "a factor of 2: NVLink's 900 GB/s per B200 is per direction, not the bidirectional total",
        slip(np.array([data_parallel_critical_batch(gpu_cluster(n, "b200")) for n in _12_13_NODES]), _dp_batches()):
            "those are the large-group approximations; the question counts each ring exactly, with the share of "
            "the bytes that crosses each level for the members of that ring",
    },
    book=("Quiz 5 Q1",),
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
            "use NVLink's one-way figure per B200 (`scale_up_bytes_per_s_per_gpu`), not the bidirectional total",
        slip(tensor_parallel_max_degree(_12_14_F, _NODE), tensor_parallel_max_degree(_12_14_F, gpu_cluster(1, "b200"))):
            "you used the H100's figures; take the B200's `bf16_flops_per_s` and `scale_up_bytes_per_s_per_gpu`",
    },
    book=("Quiz 5 Q1",),
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

_12_16 = dict(stages=16, sequences=512, per_microbatch=4, chunks=2)  # one replica's step, 2 chunks per stage


def _bubbles() -> Derivation:
    """Reference for 12.16: the bubble of a plain 1F1B schedule and of an interleaved one, for the step's microbatches."""
    p, v = _12_16["stages"], _12_16["chunks"]
    m = _12_16["sequences"] // _12_16["per_microbatch"]
    plain = explain(pipeline_bubble_fraction, p, m)
    interleaved = replace(explain(pipeline_bubble_fraction, p, m, virtual_stages=v), symbol="bubble (interleaved)")
    return Derivation("[1F1B, interleaved]", "[bubble, bubble (interleaved)]", "",
                      np.array([plain.value, interleaved.value]), "", (plain, interleaved))


def _bubble_slip(**how) -> np.ndarray:
    """12.16's slips: the bubble over m alone (`over_m`), or the interleaved one as the plain one over v (`over_v`)."""
    p, v = _12_16["stages"], _12_16["chunks"]
    m = _12_16["sequences"] // _12_16["per_microbatch"]
    plain = (p - 1) / m if how.get("over_m") else pipeline_bubble_fraction(p, m)
    interleaved = pipeline_bubble_fraction(p, m) / v if how.get("over_v") else pipeline_bubble_fraction(p, m, virtual_stages=v)
    return np.array([plain, interleaved])


register(Exercise(
    id="12.16",
    title="Pipeline bubble of a 16-stage step, plain and interleaved",
    reference=_bubbles,
    mistakes={
        slip(_bubble_slip(over_m=True), _bubbles()):
            "you divided by the microbatches alone; the step lasts the microbatches plus the slots to fill and "
            "drain the pipeline",
        slip(_bubble_slip(over_v=True), _bubbles()):
            "dividing the plain bubble by the chunks shrinks the idle time but keeps the step as long as the plain "
            "one's; the step shortens too, by the fill and drain it no longer waits for",
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
            "you used the large-group approximations; the exact costs count the share each GPU or node keeps, "
            "which differs noticeably between 72 GPUs and 9 nodes",
    },
))


# 12.18 -----------------------------------------------------------------------

def _alus_and_tensor_ratio(h100_alus_per_sm: float | None = None, sms_only: bool = False) -> np.ndarray:
    """[H100 / A100 CUDA cores, H100 / A100 bf16 tensor-core FLOP/s] (a slip: the SMs alone, or the A100 counted
    with an H100's cores per SM)."""
    a100, h100 = chip("a100"), chip("h100")
    per_sm_a = 1 if sms_only else (a100.vector_alus_per_core if h100_alus_per_sm is None else h100_alus_per_sm)
    per_sm_h = 1 if sms_only else h100.vector_alus_per_core
    return np.array([h100.cores * per_sm_h / (a100.cores * per_sm_a), h100.bf16_flops_per_s / a100.bf16_flops_per_s])


def _vector_alu_counts() -> Derivation:
    """Reference for 12.18: how many A100s match an H100's fp32 CUDA cores, and its bf16 tensor-core rate."""
    parts = tuple(explain(vector_alus, name) for name in ("h100", "a100"))
    cores = Derivation("CUDA cores ratio", "ALUs(h100) / ALUs(a100)", f"{int(parts[0].value)} / {int(parts[1].value)}",
                       parts[0].value / parts[1].value, "", parts)
    a100, h100 = chip("a100"), chip("h100")
    tensor = Derivation("tensor-core ratio", "C(h100) / C(a100)",
                        f"{q(h100.bf16_flops_per_s, 'FLOP/s')} / {q(a100.bf16_flops_per_s, 'FLOP/s')}",
                        h100.bf16_flops_per_s / a100.bf16_flops_per_s, "",
                        where=("C: a GPU's peak bf16 tensor-core rate",))
    return Derivation("[CUDA cores, tensor cores]", "[CUDA cores ratio, tensor-core ratio]", "",
                      _alus_and_tensor_ratio(), "", (cores, tensor))


register(Exercise(
    id="12.18",
    title="How many A100s match an H100's CUDA cores, and its tensor cores",
    reference=_vector_alu_counts,
    mistakes={
        # Both give the same value: the A100 counted with an H100's cores per SM, or the SMs compared alone.
        slip(_alus_and_tensor_ratio(sms_only=True), _alus_and_tensor_ratio()):
            "either you gave the A100's SMs an H100's CUDA cores per SM, or you compared the SMs alone; the two "
            "chips differ in the fp32 cores of each SM (`vector_alus_per_core`) as well as in their SMs",
        slip([1 / _alus_and_tensor_ratio()[0], 1 / _alus_and_tensor_ratio()[1]], _alus_and_tensor_ratio()):
            "those ratios are upside down: the question asks how many A100s make one H100",
    },
    book=("Quiz 1 Q1",),
))


# 12.19 -----------------------------------------------------------------------

def _a100_vector_rates() -> Derivation:
    """Reference for 12.19: an A100's fp32 vector rate at its base and boost clocks, one op per ALU per cycle."""
    parts = tuple(rename(explain(vector_flops_per_s, "a100", clock=c), {"f": f"f_{c}"}) for c in ("base", "boost"))
    return Derivation("[base, boost]", "[C_vec at the base clock, C_vec at the boost clock]", "",
                      np.array([p.value for p in parts]), "FLOP/s", parts)


register(Exercise(
    id="12.19",
    title="An A100's vector FLOP/s at its base and boost clocks",
    reference=_a100_vector_rates,
    unit="FLOP/s",
    mistakes={
        slip([vector_flops_per_s("a100", clock=c, flops_per_cycle=2) for c in ("base", "boost")],
             _a100_vector_rates()):
            "you counted a fused multiply-add as 2 FLOPs, as NVIDIA's data sheet does; the question "
            "credits each ALU with one operation per cycle",
        slip([vector_flops_per_s("h100", clock=c) * chip("a100").cores / chip("h100").cores
              for c in ("base", "boost")], _a100_vector_rates()):
            "that counts an H100's CUDA cores per SM; an A100's SMs have fewer (`vector_alus_per_core`)",
    },
    book=("Quiz 1 Q2",),
))


# 12.20 -----------------------------------------------------------------------

#: The PCIe H100 of NVIDIA's H100 data sheet: 114 SMs enabled, 51 TFLOP/s of fp32 vector arithmetic (FMA = 2 FLOPs).
_H100_PCIE = chip("h100").derive("h100-pcie", cores=114)
_12_20_VECTOR_FLOPS = 51e12

register(Exercise(
    id="12.20",
    title="A PCIe H100's clock, from its vector FLOP/s",
    reference=lambda: explain(vector_clock_hz, _12_20_VECTOR_FLOPS, _H100_PCIE, flops_per_cycle=2),
    unit="Hz",
    mistakes={
        slip(vector_clock_hz(_12_20_VECTOR_FLOPS, _H100_PCIE, flops_per_cycle=1),
             vector_clock_hz(_12_20_VECTOR_FLOPS, _H100_PCIE)):
            "NVIDIA's figure counts each fused multiply-add as 2 FLOPs, so a CUDA core is credited with 2 FLOPs "
            "per cycle",
        slip(vector_clock_hz(_12_20_VECTOR_FLOPS, "h100"), vector_clock_hz(_12_20_VECTOR_FLOPS, _H100_PCIE)):
            "you counted the SXM H100's SMs; the PCIe card enables fewer",
    },
    book=("Quiz 1 Q6",),
))


# 12.21 -----------------------------------------------------------------------

_12_21_N = 2**31  # values per bf16 vector


def _vector_add(value_bytes: int | None = None) -> Derivation:
    dtype = "bf16" if value_bytes is None else _dtype_of_size(value_bytes)
    return explain(vector_add_time_s, _12_21_N, "h200", dtype=dtype)


def _vector_add_part(symbol: str) -> float:
    return next(s for s in _vector_add().steps if s.symbol == symbol).value


register(Exercise(
    id="12.21",
    title="Adding two bf16 vectors of 2³¹ values on an H200",
    reference=_vector_add,
    unit="s",
    involves=frozenset(),
    mistakes={
        slip(_vector_add_part("T_comms") * 2 / 3, _vector_add()):
            "you counted only the two vectors read; the sum is written back to HBM too",
        slip(_vector_add_part("T_math"), _vector_add()):
            "that is the arithmetic time; at one FLOP per several bytes the add waits on HBM",
        slip(_vector_add(4), _vector_add()):
            "check the bytes per value: the vectors are bf16",
        slip(explain(vector_add_time_s, _12_21_N, "h100", dtype="bf16"), _vector_add()):
            "you took the H100's HBM bandwidth; the H200 has the same chip with faster HBM",
    },
    book=("Quiz 1 Q7",),
))


# 12.22 -----------------------------------------------------------------------

_12_22 = dict(batches=(64, 512), D=4096, F=8192)


def _b200_matmuls() -> Derivation:
    """Reference for 12.22: roofline times of fp16[B, 4096] · fp16[4096, 8192] on a B200 for both batches."""
    parts = tuple(explain(matmul_roofline, B, _12_22["D"], _12_22["F"], "b200", dtype="bf16")
                  for B in _12_22["batches"])
    d = Derivation("[B = 64, B = 512]", "[T_lower(64), T_lower(512)]", "", np.array([p.value for p in parts]), "s",
                   parts, where=("T_lower: the roofline's bound, max(T_math, T_comms), as the lines above derive",))
    return define(d, {"C": "a B200's dense fp16/bf16 tensor-core rate", "W": "its HBM bandwidth"})


def _b200_matmul_part(symbol: str) -> np.ndarray:
    return np.array([getattr(matmul_roofline(B, _12_22["D"], _12_22["F"], "b200"), symbol)
                     for B in _12_22["batches"]], dtype=float)


def _b200_roofline_terms():
    r = [matmul_roofline(B, _12_22["D"], _12_22["F"], "b200") for B in _12_22["batches"]]
    return np.array([x.t_math_s for x in r]), np.array([x.t_comms_s for x in r])


_12_22_MATH, _12_22_COMMS = _b200_roofline_terms()

register(Exercise(
    id="12.22",
    title="Two fp16 matmuls on a B200: memory- or compute-bound, and how long",
    reference=_b200_matmuls,
    unit="s",
    involves={"dtype", "flops", "peak"},
    mistakes={
        slip([_12_22_MATH[0], _b200_matmul_part("t_lower_s")[1]], _b200_matmuls()):
            "with 64 rows the matmul is far below the B200's critical intensity: it waits on HBM, so moving "
            "its bytes, not its arithmetic, sets its time",
        slip([_b200_matmul_part("t_lower_s")[0], _12_22_COMMS[1]], _b200_matmuls()):
            "with 512 rows the matmul is above the critical intensity: the arithmetic takes longer than moving "
            "the bytes",
    },
    book=("Quiz 1 Q4",),
))


# 12.23 -----------------------------------------------------------------------

_12_23 = dict(switches=6, ports=36, port_bytes_per_s=25e9)  # a DGX A100's NVSwitches (NVLink 3, 25 GB/s a port)
_A100_NODE = gpu_cluster(1, "a100")

register(Exercise(
    id="12.23",
    title="Total bandwidth of an 8-GPU A100 node",
    reference=lambda: explain(node_bandwidth_bytes_per_s, _12_23["switches"], _12_23["ports"],
                              _12_23["port_bytes_per_s"], _A100_NODE),
    unit="B/s",
    mistakes={
        slip(_12_23["switches"] * _12_23["ports"] * _12_23["port_bytes_per_s"],
             node_bandwidth_bytes_per_s(*_12_23.values(), _A100_NODE)):
            "that is what the switches could carry; the eight GPUs cannot put that much into them: each sends "
            "only its own NVLink bandwidth",
        slip(2 * node_bandwidth_bytes_per_s(*_12_23.values(), _A100_NODE),
             node_bandwidth_bytes_per_s(*_12_23.values(), _A100_NODE)):
            "count one direction: a GPU's NVLink figure (`scale_up_bytes_per_s_per_gpu`) is per direction, and "
            "the question asks for one",
    },
    book=("Quiz 2 Q1",),
))


# 12.24 -----------------------------------------------------------------------

_NVL72 = gpu_cluster(1, "gb200")

register(Exercise(
    id="12.24",
    title="Bisection bandwidth of a GB200 NVL72 domain, both directions",
    reference=lambda: define(explain(_NVL72.bisection_bytes_per_s), {"W_gpu": "a GPU's NVLink bandwidth, one way; "
                                                                   "each GPU sends it across the cut"}),
    unit="B/s",
    mistakes={
        slip(_NVL72.bisection_bytes_per_s() / 2, _NVL72.bisection_bytes_per_s()):
            "that is one direction; bisection bandwidth counts the traffic crossing the cut both ways, each half's "
            "GPUs sending across it at once",
        slip(_NVL72.bisection_bytes_per_s() * 2, _NVL72.bisection_bytes_per_s()):
            "a GPU's NVLink figure (`scale_up_bytes_per_s_per_gpu`) is already one direction; only half of the "
            "GPUs send one way across the cut, the other half the other way",
    },
    book=("Quiz 2 Q2",),
))


# 12.25 -----------------------------------------------------------------------

_SUPERPOD = gpu_cluster(256, "h100")  # a 2048-GPU DGX H100 SuperPOD: 8 scalable units, 32 spine switches


def _superpod_levels(per_leaf_ports: float = 1.0, directions: int = 1) -> Derivation:
    """Reference for 12.25: [all leaf switches toward the nodes, all spine switches], bandwidth one way."""
    leaf = explain(fat_tree_level_bytes_per_s, _SUPERPOD, level="leaf")
    spine = explain(fat_tree_level_bytes_per_s, _SUPERPOD, level="spine")
    value = np.array([leaf.value * per_leaf_ports, spine.value]) * directions
    return Derivation("[leaf, spine]", "[W_leaf, W_spine]", "", value, "B/s", (leaf, spine))


register(Exercise(
    id="12.25",
    title="Leaf and spine bandwidth of a 2048-GPU H100 SuperPOD",
    reference=_superpod_levels,
    unit="B/s",
    involves=frozenset(),
    mistakes={
        slip(_superpod_levels(per_leaf_ports=2), _superpod_levels()):
            "a leaf switch gives only half its ports to the nodes; the other half go up to the spines",
        slip(_superpod_levels(directions=2), _superpod_levels()):
            "the question asks for one direction; a port's figure is already per direction",
    },
    book=("Quiz 3 Q1",),
))


# 12.26 -----------------------------------------------------------------------

_12_26_BYTES = 1024 * 16384 * bytes_per_value("bf16")  # bf16[B_X, F], B = 1024, F = 16384

register(Exercise(
    id="12.26",
    title="AllGather of bf16[1024, 16384] inside an H100 node (warm-up)",
    reference=lambda: explain(hierarchical_allgather_time_s, _12_26_BYTES, _NODE),
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_12_26_BYTES / _NODE.nvlink_bytes_per_s_per_gpu, hierarchical_allgather_time_s(_12_26_BYTES, _NODE)):
            "that is the approximation; each GPU already holds its own share and receives only the others'",
    },
    book=("Pop quiz 1",),
))


# 12.27 -----------------------------------------------------------------------

_12_27 = dict(B=4096, slots=8, D=6144, k=4)  # bf16[B_X, slots, D]: a row of D for each of the 8 GPUs
_12_27_BYTES = _12_27["B"] * _12_27["slots"] * _12_27["D"] * bytes_per_value("bf16")


def _dense_and_ragged() -> Derivation:
    """Reference for 12.27: the dense AllToAll inside a node, and with only k of its 8 slots filled."""
    dense = explain(alltoall_time_s, _12_27_BYTES, _NODE, latency_s=0)
    ragged = explain(ragged_alltoall_time_s, _12_27_BYTES, _12_27["k"], _NODE)
    return Derivation("[dense, top-4]", "[T_AllToAll(dense), T_AllToAll(top-4)]", "",
                      np.array([dense.value, ragged.value]), "s", (dense, ragged))


register(Exercise(
    id="12.27",
    title="An AllToAll inside a node, dense and with half its entries empty",
    reference=_dense_and_ragged,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip([_12_27_BYTES / 8 / _NODE.nvlink_bytes_per_s_per_gpu, _12_27_BYTES / 8 / _NODE.nvlink_bytes_per_s_per_gpu
              * _12_27["k"] / _12_27["slots"]], _dense_and_ragged()):
            "that is the approximation; each GPU keeps the part of its share that is bound for itself: that part "
            "never travels",
        slip([_dense_and_ragged().value[0]] * 2, _dense_and_ragged()):
            "with only some of the slots holding data, only the non-empty entries travel",
    },
    book=("Pop quiz 2",),
))


# 12.28 -----------------------------------------------------------------------

_SU = gpu_cluster(32, "h100")  # one scalable unit: 32 H100 nodes, 256 GPUs


def _two_axis_allgather(D, F, Y):
    """Reference for 12.28: AllGather_X(bf16[D_X, F_Y]) over one H100 SU, Y the inner axis."""
    return hierarchical_allgather_time_s(2 * D * F, _SU, inner=Y)


register(Exercise(
    id="12.28",
    title="AllGather of an array sharded along two axes in one scalable unit, as a function",
    reference=lambda: _two_axis_allgather,
    unit="s",
    involves={"bandwidth"},
    kind="function",
    cases=(
        dict(D=8192, F=32768, Y=1),
        dict(D=8192, F=32768, Y=4),
        dict(D=8192, F=32768, Y=8),
        dict(D=4096, F=16384, Y=16),
        dict(D=8192, F=32768, Y=64),
        dict(D=8192, F=28672, Y=128),
    ),
    formula="T = 2DF · max over levels (D_l − 1)/(D_l · max(Y, S_l) · w_l): for Y ≤ 8 the leaf binds, "
            "2DF · 31/(32 · 400 GB/s) whatever Y; for Y > 8 each of the X = 256/Y GPUs of a ring sits in its own "
            "node, 2DF · (X − 1)/(X · Y · 50 GB/s)",
    book=("Pop quiz 3",),
))


# 12.29 -----------------------------------------------------------------------

def _gpus_per_node(N: int, nodes: int):
    """`nodes` H100-like nodes of N GPUs each (N = 72: the GB200 NVL72 rack), for 12.29 and 12.30."""
    spec = chip("gb200-nvl72") if N == 72 else chip("h100") if N == 8 else chip("h100").derive(
        f"h100-node-of-{N}", scale_up_domain=N)
    return gpu_cluster(nodes, spec)


def _su_allgather_switch_bytes(B, M, N):
    """Reference for 12.29: [node switch in, node switch out, leaf in, leaf out] for an AllGather of B bytes."""
    cluster = _gpus_per_node(N, M)
    return np.array([switch_bytes(B, cluster, switch=s, direction=d)
                     for s in ("node", "leaf") for d in ("ingress", "egress")])


register(Exercise(
    id="12.29",
    title="Bytes through the node and leaf switches of an AllGather in one scalable unit, as a function",
    reference=lambda: _su_allgather_switch_bytes,
    unit="B",
    kind="function",
    cases=(
        dict(B=1e9, M=32, N=8),
        dict(B=2e6, M=4, N=8),
        dict(B=5e8, M=2, N=16),
        dict(B=3e9, M=8, N=72),
        dict(B=1e9, M=16, N=8),
    ),
    formula="node switch: in N·B/(MN) + B(M − 1)/M = B, out B/M + N·(B − B/(MN)) = N·B; "
            "leaf: in M · B/M = B, out M · B(M − 1)/M = B(M − 1)",
    book=("Quiz 4 Q1",),
))


# 12.30 -----------------------------------------------------------------------

def _sharp_switch_bytes(B, N):
    """Reference for 12.30: [ingress, egress] of a node's switches during a SHARP AllReduce of B bytes."""
    node = _gpus_per_node(N, 1)
    return np.array([switch_bytes(B, node, collective="allreduce", sharp=True, direction=d)
                     for d in ("ingress", "egress")])


register(Exercise(
    id="12.30",
    title="Bytes through a node's switches in an AllReduce reduced in the switches (SHARP), as a function",
    reference=lambda: _sharp_switch_bytes,
    unit="B",
    kind="function",
    cases=(
        dict(B=1e9, N=8),
        dict(B=4e6, N=2),
        dict(B=2e9, N=72),
        dict(B=5e8, N=16),
    ),
    formula="in: N · B(N − 1)/N (each GPU's partial sums) + N · B/N (the reduced slices, sent back once more) "
            "= B·N; out: N · B/N (each GPU's slice) + N · B(N − 1)/N (the multicast) = B·N",
    book=("Quiz 4 Q2",),
))


# 12.31 -----------------------------------------------------------------------

_12_31 = dict(D=5120, F=13824)  # LLaMA-2-13B's model and MLP widths
_12_31_BYTES = 2 * _12_31["D"] * _12_31["F"]
_TWO_NODES = gpu_cluster(2, "h100")
_B200_NODE, _TWO_B200_NODES = gpu_cluster(1, "b200"), gpu_cluster(2, "b200")


def _sharp_two_axes(sharp_in_node: bool = True, two_nodes_inner: int = 1) -> Derivation:
    """Reference for 12.31: SHARP AllReduce_X(bf16[D, F_Y]) in one B200 node (Y = 2) and over two (Y = 8).

    The slips: the ring without SHARP inside the node (`sharp_in_node=False`), or the two nodes' egress
    carrying only 1/Y of the array (`two_nodes_inner=8`).
    """
    one = explain(hierarchical_allreduce_time_s, _12_31_BYTES, _B200_NODE, inner=2, sharp=sharp_in_node)
    two = explain(hierarchical_allreduce_time_s, _12_31_BYTES, _TWO_B200_NODES, inner=8, sharp=True)
    two_value = two.value if two_nodes_inner == 1 else _12_31_BYTES / two_nodes_inner / _TWO_B200_NODES.node_egress_bytes_per_s
    return Derivation("[one node, two nodes]", "[T_AllReduce(inner 2, one node), T_AllReduce(inner 8, two nodes)]", "",
                      np.array([one.value, two_value]), "s", (_by_level(one), _by_level(two)))


register(Exercise(
    id="12.31",
    title="A SHARP AllReduce of an array sharded along a second axis: inside a B200 node and across two",
    reference=_sharp_two_axes,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_sharp_two_axes(two_nodes_inner=8), _sharp_two_axes()):
            "across nodes the node's switches cannot keep the Y shards apart inside the node: every shard "
            "leaves through the node's egress on its own",
        slip(_sharp_two_axes(sharp_in_node=False), _sharp_two_axes()):
            "that is the ring without SHARP; with in-switch reduction each GPU sends and receives its shard "
            "exactly once",
    },
    book=("Quiz 4 Q3",),
))


# 12.32 -----------------------------------------------------------------------

_SUPERPOD_1024 = gpu_cluster(128, "h100")  # the 1024-GPU DGX H100 SuperPOD


def _spine_sharp() -> Derivation:
    """Reference for 12.32: SHARP AllReduce_X(bf16[D, F_Y]) with Y = 256 over the 1024-GPU SuperPOD."""
    return explain(hierarchical_allreduce_time_s, _12_31_BYTES, _SUPERPOD_1024, inner=256, sharp=True)


register(Exercise(
    id="12.32",
    title="A SHARP AllReduce reduced at the spine of the SuperPOD",
    reference=_spine_sharp,
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_12_31_BYTES / _SUPERPOD_1024.node_egress_bytes_per_s, _spine_sharp()):
            "with Y = 256 each reduction joins one GPU per scalable unit: all of a unit's GPUs send their "
            "shards at once, each through its own NIC, not through one node's egress",
        slip(_12_31_BYTES / fat_tree_level_bytes_per_s(_SUPERPOD_1024, level="spine"), _spine_sharp()):
            "the spine's bandwidth is shared by the scalable units; each sends its bytes through its own share",
    },
    book=("Quiz 4 Q4",),
))


# 12.33 -----------------------------------------------------------------------

_12_33_BYTES = 1e9

register(Exercise(
    id="12.33",
    title="AllGather over exactly two H100 nodes, precisely",
    reference=lambda: _by_level(explain(hierarchical_allgather_time_s, _12_33_BYTES, _TWO_NODES)),
    unit="s",
    involves={"bandwidth"},
    mistakes={
        slip(_12_33_BYTES * 15 / 16 / _TWO_NODES.nvlink_bytes_per_s_per_gpu,
             hierarchical_allgather_time_s(_12_33_BYTES, _TWO_NODES)):
            "you charged (N − 1)/N over all 16 GPUs on NVLink; each level of the hierarchy is a ring of its own, "
            "with its own number of members and its own bandwidth",
        slip(_12_33_BYTES / (2 * _TWO_NODES.node_egress_bytes_per_s),
             hierarchical_allgather_time_s(_12_33_BYTES, _TWO_NODES)):
            "that is the level between the two nodes; the NVLink level inside each node is slower here and binds",
        slip(_12_33_BYTES / _TWO_NODES.node_egress_bytes_per_s, hierarchical_allgather_time_s(_12_33_BYTES, _TWO_NODES)):
            "V / W_node is the approximation for many nodes; with M = 2 the nodes exchange only (M − 1)/M of V",
    },
    book=("Quiz 4 Q5",),
))


# 12.34 -----------------------------------------------------------------------

_LLAMA_70B = dict(params=70e9, F=28672, tokens=15e12, gpus=4096, mfu=0.45, batch=4e6)


def _training_state_gpus() -> Derivation:
    """Reference for 12.34: the fewest 80 GB H100s that hold bf16 weights and fp32 Adam moments of LLaMA-3-70B."""
    h100 = chip("h100")
    w, m = bytes_per_value("bf16"), 2 * bytes_per_value("f32")
    total = _LLAMA_70B["params"] * (w + m)
    state = Derivation("state", "params · (w + m)", lambda: f"{q(_LLAMA_70B['params'])} · ({q(w)} + {q(m)})",
                       total, "B", where=("w: bytes of a bf16 weight; m: bytes of Adam's two fp32 moments",))
    return Derivation("GPUs", "⌈state / HBM⌉", lambda: f"⌈{q(total, 'B')} / {q(h100.hbm_bytes, 'B')}⌉",
                      float(math.ceil(total / h100.hbm_bytes)), "GPUs", (state,),
                      where=("HBM: one H100's memory",))


def _state_gpus(bytes_per_param: float, round_up: bool = True) -> float:
    gpus = _LLAMA_70B["params"] * bytes_per_param / chip("h100").hbm_bytes
    return math.ceil(gpus) if round_up else gpus


register(Exercise(
    id="12.34",
    title="The fewest H100s that hold LLaMA-3-70B's weights and Adam state",
    reference=_training_state_gpus,
    unit="GPUs",
    integer=True,
    mistakes={
        slip(_state_gpus(2), _training_state_gpus()):
            "you counted the bf16 weights only; Adam keeps two fp32 moments per parameter, 8 more bytes",
        slip(_state_gpus(6), _training_state_gpus()):
            "Adam keeps two fp32 moments per parameter (first and second), 8 bytes, not one",
        slip(_state_gpus(10, round_up=False), _training_state_gpus()):
            "round up: a fraction of a GPU is a whole GPU",
    },
    book=("Quiz 5 Q2",),
))


# 12.35 -----------------------------------------------------------------------

def _training_time() -> Derivation:
    """Reference for 12.35: 6·N·T FLOPs over 4096 H100s at 45% of their bf16 peak."""
    flops_per_gpu = 6 * _LLAMA_70B["params"] * _LLAMA_70B["tokens"] / _LLAMA_70B["gpus"]
    return define(explain(t_math_s, flops_per_gpu, "h100", efficiency=_LLAMA_70B["mfu"]),
                  {"FLOPs": "6 · params · tokens / GPUs, each GPU's share of the training FLOPs",
                   "C": "an H100's peak bf16 rate"})


register(Exercise(
    id="12.35",
    title="How long LLaMA-3-70B trains on 4096 H100s at 45% MFU",
    reference=_training_time,
    unit="s",
    involves={"flops", "peak"},
    mistakes={
        slip(t_math_s(6 * _LLAMA_70B["params"] * _LLAMA_70B["tokens"] / _LLAMA_70B["gpus"], "h100"), _training_time()):
            "that is at the full peak; at 45% MFU the GPUs do only 0.45 of it",
        slip(t_math_s(2 * _LLAMA_70B["params"] * _LLAMA_70B["tokens"] / _LLAMA_70B["gpus"], "h100",
                      efficiency=_LLAMA_70B["mfu"]), _training_time()):
            "that counts the forward pass only; training does the forward and a backward pass twice as costly: "
            "6 FLOPs per parameter per token",
        # the data sheet's fp8 and "with sparsity" (2:4) rates are each twice the dense bf16 rate
        slip(_training_time().value / 2, _training_time()):
            "a factor of 2: either the rate is twice the dense bf16 one (the data sheet's fp8 or 2:4-sparsity "
            "figure; training runs dense, in bf16), or a multiply-add was counted as 1 FLOP (3 FLOPs per "
            "parameter per token instead of 6)",
    },
    book=("Quiz 5 Q2",),
))


# 12.36 -----------------------------------------------------------------------

_12_36_F = 36864  # Gemma 2 27B's MLP width

register(Exercise(
    id="12.36",
    title="The most tensor parallelism Gemma 2 27B tolerates in an H100 node",
    reference=lambda: replace(explain(tensor_parallel_max_degree, _12_36_F, _NODE), unit="GPUs"),
    unit="GPUs",
    mistakes={
        slip(tensor_parallel_max_degree(_12_36_F, gpu_cluster(1, _variant("h100", nvlink=2))),
             tensor_parallel_max_degree(_12_36_F, _NODE)):
            "use NVLink's one-way figure per H100 (`scale_up_bytes_per_s_per_gpu`), not both directions together",
        slip(tensor_parallel_max_degree(_LLAMA_70B["F"], _NODE), tensor_parallel_max_degree(_12_36_F, _NODE)):
            "that is LLaMA-3-70B's MLP width; take Gemma 2 27B's",
    },
    book=("Quiz 5 Q2",),
))


# 12.37 -----------------------------------------------------------------------

_FOUR_K = gpu_cluster(_LLAMA_70B["gpus"] // 8, "b200")


def _llama_thresholds() -> Derivation:
    """Reference for 12.37: DP thresholds with 8-way TP (ZeRO-3 over the rest), and with 8-way TP x 8-way PP."""
    parts = tuple(explain(hierarchical_data_parallel_critical_batch, _FOUR_K, inner=y) for y in (8, 64))
    return Derivation("[8-way TP, 8-way TP × 8-way PP]", "[B_crit per GPU (8 per replica), B_crit per GPU (64 per replica)]",
                      "",
                      np.array([p.value for p in parts]), "tokens", parts)


register(Exercise(
    id="12.37",
    title="Tokens per GPU LLaMA-3-70B's data parallelism needs on B200s, with and without pipelining",
    reference=_llama_thresholds,
    unit="tokens",
    mistakes={
        slip([data_parallel_critical_batch(_FOUR_K), data_parallel_critical_batch(_FOUR_K) / 8], _llama_thresholds()):
            "those are the large-group approximations; the question counts each level's ring exactly, with the "
            "share of the bytes that crosses each level for the number of members in that ring",
        slip([hierarchical_data_parallel_critical_batch(_FOUR_K, inner=8)] * 2, _llama_thresholds()):
            "the pipeline stages put each replica on several nodes: every weight is then spread over the links "
            "of all the replica's GPUs, not one node's",
    },
    book=("Quiz 5 Q2",),
))


# 12.38 -----------------------------------------------------------------------

_PLANS = ("TP + DP", "TP + ZeRO-3", "TP + PP + DP")


def _llama_plan() -> str:
    """Reference for 12.38: the first plan whose state fits and whose data parallelism is compute-bound."""
    tokens_per_gpu = _LLAMA_70B["batch"] / _LLAMA_70B["gpus"]
    state = _LLAMA_70B["params"] * (bytes_per_value("bf16") + 2 * bytes_per_value("f32"))
    hbm = chip("h100").hbm_bytes
    plans = {  # model-parallel GPUs per replica, and whether each GPU holds a replica's share or less
        "TP + DP": (8, state / 8),
        "TP + ZeRO-3": (8, state / _LLAMA_70B["gpus"]),
        "TP + PP + DP": (64, state / 64),
    }
    for plan in _PLANS:
        y, per_gpu = plans[plan]
        if per_gpu <= hbm and tokens_per_gpu > hierarchical_data_parallel_critical_batch(_FOUR_K, inner=y):
            return plan
    raise AssertionError("12.38: no plan works")


register(Exercise(
    id="12.38",
    title="Which plan trains LLaMA-3-70B on 4096 H100s compute-bound",
    reference=_llama_plan,
    kind="choice",
    choices=_PLANS,
    reason="8-way TP with plain DP needs 700 GB / 8 ≈ 88 GB per GPU, more than an H100 holds; ZeRO-3 fits but "
           "its ~980 tokens per GPU are far below the ~2400 its collectives need; 8 pipeline stages spread each "
           "weight over 64 GPUs' links, which brings the threshold down to about 230 tokens per GPU.",
    book=("Quiz 5 Q2",),
))


# 12.39 -----------------------------------------------------------------------

#: Megatron-LM's published runs (NVIDIA/Megatron-LM README, weak-scaling table): TP, PP, GPUs, sequences per batch.
_MEGATRON = {"16B": dict(tp=4, pp=1, gpus=192, batch=192), "70B": dict(tp=8, pp=2, gpus=768, batch=384),
             "314B": dict(tp=8, pp=8, gpus=3072, batch=1536)}
_MEGATRON_SEQ = 4096


def _megatron_margin(name: str, approximate: bool = False) -> Derivation:
    run = _MEGATRON[name]
    tokens = run["batch"] * _MEGATRON_SEQ / run["gpus"]
    cluster = gpu_cluster(run["gpus"] // 8, "h100")
    y = run["tp"] * run["pp"]
    crit = explain(hierarchical_data_parallel_critical_batch, cluster, inner=y)
    value = tokens / (crit.value if not approximate else data_parallel_critical_batch(cluster) * 8 / max(y, 8))
    return Derivation(f"margin({name})", "(batch · T / GPUs) / B_crit",
                      lambda: f"({run['batch']} · {_MEGATRON_SEQ} / {run['gpus']}) / {q(crit.value, 'tokens')}",
                      value, "", (crit,), where=(f"T: tokens per sequence; model parallelism {run['tp']} TP × "
                                                 f"{run['pp']} PP = {y} GPUs per replica",))


def _megatron_margins() -> Derivation:
    parts = tuple(_megatron_margin(name) for name in _MEGATRON)
    return Derivation("[16B, 70B, 314B]", "[margin(16B), margin(70B), margin(314B)]", "",
                      np.array([p.value for p in parts]), "", parts)


register(Exercise(
    id="12.39",
    title="Megatron-LM's batches per GPU against what their data parallelism needs",
    reference=_megatron_margins,
    mistakes={
        slip([_megatron_margin(n, approximate=True).value for n in _MEGATRON], _megatron_margins()):
            "you used C / W_node divided by the nodes a replica spans; each level's ring also moves only "
            "(D − 1)/D of the bytes, which lowers the thresholds a little",
        slip([float(_megatron_margin(n).value) * hierarchical_data_parallel_critical_batch(
                  gpu_cluster(_MEGATRON[n]["gpus"] // 8, "h100"), inner=_MEGATRON[n]["tp"] * _MEGATRON[n]["pp"])
              / hierarchical_data_parallel_critical_batch(gpu_cluster(_MEGATRON[n]["gpus"] // 8, "h100"))
              for n in _MEGATRON], _megatron_margins()):
            "you left out the model parallelism: a replica spread over several nodes (TP × PP > 8) spreads "
            "each weight's traffic over that many more links",
    },
    book=("Quiz 5 Q3",),
))


# 12.40 -----------------------------------------------------------------------

_12_40 = dict(E=8, k=2)  # Mixtral 8x7B's experts and experts per token
_16_NODES = gpu_cluster(16, "h100")

register(Exercise(
    id="12.40",
    title="Tokens per GPU that data parallelism of an MoE layer needs across H100 nodes",
    reference=lambda: explain(moe_data_parallel_critical_batch, _12_40["E"], _12_40["k"], _16_NODES),
    unit="tokens",
    mistakes={
        slip(data_parallel_critical_batch(_16_NODES), moe_data_parallel_critical_batch(**_12_40, topology=_16_NODES)):
            "that is a dense layer's threshold; an MoE layer moves the gradients of all its experts while each "
            "token computes with only some of them",
        slip(data_parallel_critical_batch(_16_NODES) * _12_40["k"] / _12_40["E"],
             moe_data_parallel_critical_batch(**_12_40, topology=_16_NODES)):
            "you turned the experts' factor upside down: with more weights to move than a token computes with, "
            "the threshold rises above a dense layer's",
    },
))


# 12.41 -----------------------------------------------------------------------

_12_41 = dict(Z=64, k=8)  # DeepSeek-V3's routing: 64-way expert parallelism over 8 nodes, 8 routed experts per token
_8_NODES = gpu_cluster(8, "h100")
_8_B200_NODES = gpu_cluster(8, "b200")

register(Exercise(
    id="12.41",
    title="The narrowest expert that 64-way expert parallelism keeps compute-bound on B200s",
    reference=lambda: explain(expert_parallel_critical_width, _12_41["Z"], _12_41["k"], _8_B200_NODES),
    mistakes={
        slip(expert_parallel_critical_width(**_12_41, topology=_8_B200_NODES)
             * chip("b200").scale_out_bytes_per_s_per_node / chip("b200").scale_up_bytes_per_s_per_gpu,
             expert_parallel_critical_width(**_12_41, topology=_8_B200_NODES)):
            "you used NVLink's bandwidth; the tokens leaving a node go through its InfiniBand egress",
        slip(8 * data_parallel_critical_batch(_8_B200_NODES),
             expert_parallel_critical_width(**_12_41, topology=_8_B200_NODES)):
            "that is the limit for many more experts than a token uses; here each token reaches every node, "
            "and only the other nodes are remote",
        slip(expert_parallel_critical_width(**_12_41, topology=_8_NODES),
             expert_parallel_critical_width(**_12_41, topology=_8_B200_NODES)):
            "you used the H100's figures; take the B200's",
    },
))


# 12.42 -----------------------------------------------------------------------

_12_42 = dict(B=16 * 4096, D=16384, stages=16, microbatches=32)  # one replica of LLaMA-3.1-405B over 16 nodes
_16_NODES_PP = gpu_cluster(16, "h100")

register(Exercise(
    id="12.42",
    title="Activation traffic of a 16-stage pipeline in one step",
    reference=lambda: explain(pipeline_comms_time_s, *_12_42.values(), _16_NODES_PP),
    unit="s",
    involves={"bandwidth", "dtype"},
    mistakes={
        slip(pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP) / (_12_42["microbatches"] + _12_42["stages"] - 2),
             pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP)):
            "that is one hop; the step's critical path makes a hop for every microbatch and for every stage "
            "boundary it waits on, one microbatch each",
        slip(pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP) * _12_42["microbatches"],
             pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP)):
            "each hop carries one microbatch, not the whole batch",
        slip(pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP) * chip("h100").scale_out_bytes_per_s_per_node
             / chip("h100").scale_up_bytes_per_s_per_gpu, pipeline_comms_time_s(*_12_42.values(), _16_NODES_PP)):
            "the stages sit on different nodes: the activations cross InfiniBand, the node's egress, not NVLink",
    },
))


# 12.43 -----------------------------------------------------------------------

def _scale_out_roofline(name: str) -> Derivation:
    spec = chip(name)
    cluster = gpu_cluster(2, spec)
    C = explain(spec.peak_flops_per_s, dtype="bf16")
    return Derivation(f"C / W_node({name})", "C / W_node",
                      lambda: f"{q(C.value, 'FLOP/s')} / {q(cluster.node_egress_bytes_per_s, 'B/s')}",
                      C.value / cluster.node_egress_bytes_per_s, "tokens",
                      where=(f"C: the peak bf16 rate of one {name} GPU; W_node: the egress of one NVLink domain "
                             f"({cluster.gpus_per_node} GPUs), one way",))


def _gb200_gain() -> Derivation:
    """Reference for 12.43: how many times lower the scale-out DP threshold of GB200 NVL72 is than an H100 node's."""
    h100, gb200 = (replace(rename(_scale_out_roofline(name), {"C": f"C_{short}", "W_node": f"W_{short}"}),
                           symbol=f"threshold_{short}")
                   for name, short in (("h100", "h100"), ("gb200-nvl72", "gb200")))
    return Derivation("gain", "threshold_h100 / threshold_gb200",
                      lambda: f"{q(h100.value, 'tokens')} / {q(gb200.value, 'tokens')}", h100.value / gb200.value, "",
                      (h100, gb200))


register(Exercise(
    id="12.43",
    title="How much GB200 NVL72 lowers the cross-node data-parallel roofline",
    reference=_gb200_gain,
    mistakes={
        slip(chip("gb200-nvl72").scale_out_bytes_per_s_per_node / chip("h100").scale_out_bytes_per_s_per_node,
             _gb200_gain()):
            "that is the ratio of the egress alone; each Blackwell GPU also does more than twice an H100's "
            "FLOPs, which it must hide behind that egress",
    },
))
