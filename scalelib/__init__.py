"""scalelib: the numbers behind "How to Scale Your Model", as small functions.

Rooflines, accelerator specs, TPU and GPU topologies with their collective
costs, GPU kernel tiles, and the checker behind the course's exercises.
``import scalelib`` needs numpy only; JAX and matplotlib load inside the
functions that use them.

>>> import scalelib as sl
>>> sl.fmt(sl.critical_intensity("tpu-v5e"), "FLOP/B")
'240 FLOP/B'
"""

from ._collectives import allgather_time, allreduce_time, alltoall_time, reducescatter_time
from ._check import COMMON_MISTAKES, Exercise, Verdict, check, exercises, get_exercise, verdict
from ._derivation import Derivation
from ._diagrams import draw_chip, draw_fat_tree, draw_gpu_node, draw_torus, plot_spec_comparison
from ._errors import InvalidValueError, ScalelibError, UnknownNameError
from ._parallelism import data_parallel_critical_batch, pipeline_bubble_fraction, tensor_parallel_max_degree
from ._plot import plot_roofline
from ._probe import measure_machine, time_copy, time_matmul
from ._roofline import (
    Roofline,
    arithmetic_intensity,
    attainable_flops_per_s,
    critical_batch_size,
    critical_intensity,
    matmul_bytes,
    matmul_flops,
    matmul_intensity,
    matmul_roofline,
    roofline,
    t_comms,
    t_math,
)
from ._tiles import Tile, best_tile, search_tiles, tile_intensity, tile_smem_bytes
from ._topology import GpuCluster, TpuSlice, gpu_cluster, tpu_pod, tpu_slice
from ._specs import DTYPES, ChipSpec, bytes_per_value, chip, chips, hw
from ._units import fmt

__version__ = "0.1.0"

__all__ = [
    "COMMON_MISTAKES", "DTYPES", "ChipSpec", "Derivation", "Exercise", "InvalidValueError", "Roofline",
    "ScalelibError", "UnknownNameError", "Verdict", "arithmetic_intensity", "attainable_flops_per_s",
    "bytes_per_value", "check", "chip", "chips", "critical_batch_size", "critical_intensity", "exercises",
    "fmt", "get_exercise", "hw", "matmul_bytes", "matmul_flops", "matmul_intensity", "matmul_roofline",
    "measure_machine", "plot_roofline", "roofline", "t_comms", "t_math", "time_copy", "time_matmul", "verdict",
    # chapters 2 and 12: topologies, collectives, kernel tiles
    "GpuCluster", "Tile", "TpuSlice", "allgather_time", "allreduce_time", "alltoall_time", "best_tile",
    "gpu_cluster", "reducescatter_time", "search_tiles", "tile_intensity", "tile_smem_bytes", "tpu_pod", "tpu_slice",
    "data_parallel_critical_batch", "pipeline_bubble_fraction", "tensor_parallel_max_degree",
    # pictures of the hardware (chapters 2 and 12)
    "draw_chip", "draw_fat_tree", "draw_gpu_node", "draw_torus", "plot_spec_comparison",
]
