"""scalelib: the numbers behind "How to Scale Your Model", as small functions.

Rooflines, accelerator specs, TPU and GPU topologies with their collective
costs, GPU kernel tiles; and ``check``, the checker behind the course's exercises
(the rest of the course's machinery lives apart, in :mod:`scalelib.course`).
``import scalelib`` needs numpy only; JAX and matplotlib load inside the
functions that use them.

One convention holds everywhere: quantities first, then the chip or topology,
then options by keyword (``dtype=``, ``bandwidth=``, ``axes=``); results are plain
numbers (or numpy arrays for a sweep), in the unit their name ends with; and
``explain(f, ...)`` gives the derivation of any ``f(...)``.

>>> import scalelib as sl
>>> sl.fmt(sl.critical_intensity("tpu-v5e"), "FLOP/B")
'240 FLOP/B'
>>> print(sl.explain(sl.critical_intensity, "tpu-v5e", dtype="int8"))
I_crit(tpu-v5e, int8, hbm) = C / W = 3.94e14 FLOP/s / 820 GB/s = 480 FLOP/B
"""

from ._collectives import (
    allgather_time_s,
    allreduce_time_s,
    alltoall_time_s,
    collective_permute_time_s,
    reducescatter_time_s,
)
from ._derivation import Derivation, explain
from ._diagrams import draw_chip, draw_fat_tree, draw_gpu_node, draw_torus, plot_spec_comparison
from ._einsum import einsum_flops
from ._errors import InvalidCallError, InvalidValueError, OutsideValidationWarning, ScalelibError, UnknownNameError
from ._gpu import (
    allreduce_latency_s,
    expert_parallel_critical_width,
    fat_tree_level_bytes_per_s,
    hierarchical_allgather_time_s,
    hierarchical_allreduce_time_s,
    hierarchical_data_parallel_critical_batch,
    host_transfer_time_s,
    measure_vector_add_time_s,
    moe_data_parallel_critical_batch,
    node_bandwidth_bytes_per_s,
    pipeline_comms_time_s,
    ragged_alltoall_time_s,
    switch_bytes,
    vector_add_time_s,
    vector_alus,
    vector_clock_hz,
)
from ._inference import (
    generate_comms_time_s,
    generate_model_parallel_max_degree,
    estimated_generate_step_time_s,
    estimated_prefill_time_s,
    generate_step_time_s,
    max_batch_size,
    max_batch_within_latency,
    prefill_time_s,
    speculative_time_per_token_s,
    speculative_tokens_per_step,
    tokens_per_s_per_chip,
    weight_load_time_s,
    weight_stationary_comms_time_s,
    weight_stationary_crossover_chips,
)
from ._jax_bridge import (
    CompiledCollective,
    PlanComparison,
    PlanRow,
    compare_with_plan,
    compiled_collectives,
    parse_collectives,
    sharded_matmul_collectives,
    simulated_mesh,
)
from ._jax_collectives import collective_matmul_time_s, input_values, measure_jax_time_s, sharded_inputs
from ._matmul_plan import Collective, MatmulPlan, Reshard, plan_matmul, plan_reshard
from ._models import LatentAttention, ModelSpec, model, models, register_model
from ._parallelism import (
    cross_slice_critical_batch,
    data_parallel_critical_batch,
    fsdp_tensor_parallel_critical_batch,
    optimal_fsdp_degree,
    pipeline_bubble_fraction,
    tensor_parallel_max_degree,
)
from ._pipeline import PipelineOp, PipelineSchedule, pipeline_peak_activations, pipeline_schedule, plot_pipeline_schedule
from ._calibration import INFERENCE_LOSSES, LOSSES
from ._plan_search import PipelineNeed, PlanSearch, needs_pipeline, pipeline_crossover, plot_pipeline_crossover, search_plans
from ._plot import legible, plot_roofline, plot_waterfall
from ._probe import measure_copy_time_s, measure_machine, measure_matmul_time_s
from ._profile import (
    HloArray,
    HloOp,
    HloSummary,
    RooflineCheck,
    Trace,
    TraceEvent,
    TraceOp,
    XlaCost,
    capture_trace,
    compare_with_roofline,
    cost_analysis,
    hlo_array,
    hlo_summary,
    plot_trace,
    prediction_table,
    read_trace,
)
from ._ring import ring_link_bytes
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
    t_comms_s,
    t_math_s,
)
from ._serving import (
    cost_per_million_tokens,
    flops_per_usd,
    kv_tokens_freed_per_step,
    min_chips,
    plot_latency_throughput,
    prefill_to_generate_ratio,
    requests_per_s_per_chip,
    smallest_slice,
    usd_per_chip_hour,
)
from ._sharding import Sharding, draw_sharding, latency_bound_bytes, sharding
from ._validation_inference import (
    InferenceResult,
    closed_loop_throughput,
    estimate_inference_result,
    inference_estimate_error,
    inference_results,
    predict_inference_result,
    prediction_error,
)
from ._validation_training import (
    TrainingRun,
    estimate_error,
    measured_step_time_s,
    predict_training_run,
    published_plan_cost,
    published_plan_estimate,
    training_prediction_error,
    training_runs,
)
from ._specs import DTYPES, ChipSpec, bytes_per_value, chip, chips, dtype_name, hw, load_chips, register_chip
from ._systolic import (
    SystolicTrace,
    animate_systolic,
    systolic_animation_html,
    systolic_cycles,
    systolic_matmul,
    systolic_trace,
)
from ._tiles import Tile, best_tile, search_tiles, tile_intensity, tile_smem_bytes
from ._topology import GpuCluster, TpuSlice, gpu_cluster, tpu_pod, tpu_slice
from ._training import (
    ParallelPlan,
    TrainingCost,
    estimated_step_time_s,
    model_flops_utilization,
    training_cost,
    training_memory_bytes,
    zero_state_bytes,
)
from ._transformer import (
    attention_crossover_seq_len,
    attention_intensity,
    forward_flops,
    kv_cache_bytes,
    moe_critical_batch_size,
    param_bytes,
    params,
    train_flops,
    training_state_bytes,
)
from ._transformer_plots import plot_model_breakdown
from ._twisted import torus_max_hops, torus_mean_hops
from ._units import fmt
from ._vector import vector_critical_intensity, vector_flops_per_s
from .course.capstone import CapstoneBrief, capstone_brief
from .course.check import Verdict, check, exercises, verdict

__version__ = "0.1.0"

__all__ = [
    # one call away from every result, and the errors
    "Derivation", "explain", "fmt", "InvalidCallError", "InvalidValueError", "ScalelibError", "UnknownNameError",
    "OutsideValidationWarning",
    # chips (chapters 1, 2, 12)
    "DTYPES", "ChipSpec", "bytes_per_value", "chip", "chips", "dtype_name", "hw", "load_chips", "register_chip",
    # rooflines (chapter 1)
    "Roofline", "arithmetic_intensity", "attainable_flops_per_s", "critical_batch_size", "critical_intensity",
    "matmul_bytes", "matmul_flops", "matmul_intensity", "matmul_roofline", "roofline", "t_comms_s", "t_math_s",
    "measure_copy_time_s", "measure_machine", "measure_matmul_time_s", "plot_roofline", "plot_waterfall", "legible",
    # vector units: a TPU's VPU, a GPU's CUDA cores (chapters 1, 2, 12)
    "vector_critical_intensity", "vector_flops_per_s",
    # the MXU, a systolic array, simulated (chapter 2)
    "SystolicTrace", "animate_systolic", "systolic_animation_html", "systolic_cycles", "systolic_matmul",
    "systolic_trace",
    # topologies and collectives (chapters 2, 3, 12)
    "GpuCluster", "TpuSlice", "gpu_cluster", "tpu_pod", "tpu_slice",
    "allgather_time_s", "allreduce_time_s", "alltoall_time_s", "reducescatter_time_s", "collective_permute_time_s",
    "torus_max_hops", "torus_mean_hops",
    # sharded arrays and matmuls (chapter 3)
    "Sharding", "sharding", "draw_sharding", "latency_bound_bytes", "Collective", "MatmulPlan", "Reshard",
    "plan_matmul", "plan_reshard", "ring_link_bytes",
    # JAX on simulated devices: the collectives XLA compiles (chapters 3, 10)
    "CompiledCollective", "compiled_collectives", "parse_collectives", "sharded_matmul_collectives", "simulated_mesh",
    "PlanComparison", "PlanRow", "compare_with_plan",
    # JAX programs on simulated devices: seeded sharded inputs, timings, the collective matmul's model (chapter 10)
    "input_values", "sharded_inputs", "measure_jax_time_s", "collective_matmul_time_s",
    # profiling: HLO, XLA's cost analysis, the JAX profiler's traces, predictions against measurements (chapter 9)
    "HloArray", "HloOp", "HloSummary", "hlo_array", "hlo_summary", "XlaCost", "cost_analysis",
    "Trace", "TraceEvent", "TraceOp", "capture_trace", "read_trace", "plot_trace",
    "RooflineCheck", "compare_with_roofline", "prediction_table",
    # parallelism rooflines (chapters 5, 12)
    "data_parallel_critical_batch", "pipeline_bubble_fraction", "tensor_parallel_max_degree",
    "fsdp_tensor_parallel_critical_batch", "optimal_fsdp_degree", "cross_slice_critical_batch",
    # training: the cost model, pipeline schedules, the plan search (chapter 5)
    "ParallelPlan", "TrainingCost", "training_cost", "training_memory_bytes", "model_flops_utilization",
    "estimated_step_time_s", "LOSSES",
    "zero_state_bytes", "PipelineOp", "PipelineSchedule", "pipeline_schedule", "pipeline_peak_activations",
    "plot_pipeline_schedule", "PlanSearch", "PipelineNeed", "search_plans", "needs_pipeline", "pipeline_crossover",
    "plot_pipeline_crossover",
    # GPUs: CUDA cores, a node's switches, collectives level by level, rooflines of EP, PP and MoE (chapter 12)
    "vector_alus", "vector_clock_hz", "vector_add_time_s", "measure_vector_add_time_s", "node_bandwidth_bytes_per_s",
    "fat_tree_level_bytes_per_s", "hierarchical_allgather_time_s", "hierarchical_allreduce_time_s",
    "hierarchical_data_parallel_critical_batch", "switch_bytes", "ragged_alltoall_time_s", "allreduce_latency_s",
    "moe_data_parallel_critical_batch", "expert_parallel_critical_width", "pipeline_comms_time_s",
    "host_transfer_time_s",
    # Transformer shapes and their math: parameters, FLOPs, KV cache, training memory (chapter 4)
    "LatentAttention", "ModelSpec", "model", "models", "register_model", "params", "param_bytes",
    "training_state_bytes", "forward_flops", "train_flops", "attention_crossover_seq_len", "kv_cache_bytes",
    "moe_critical_batch_size", "plot_model_breakdown", "einsum_flops", "attention_intensity",
    # inference: step times, memory, model parallelism, speculative decoding (chapter 7); serving (chapter 8)
    "weight_load_time_s", "generate_step_time_s", "tokens_per_s_per_chip", "prefill_time_s", "max_batch_size",
    "estimated_generate_step_time_s", "estimated_prefill_time_s", "INFERENCE_LOSSES",
    "max_batch_within_latency",
    "generate_comms_time_s", "generate_model_parallel_max_degree", "weight_stationary_comms_time_s",
    "weight_stationary_crossover_chips",
    "speculative_tokens_per_step", "speculative_time_per_token_s", "min_chips", "smallest_slice",
    "requests_per_s_per_chip", "prefill_to_generate_ratio", "kv_tokens_freed_per_step", "usd_per_chip_hour",
    "flops_per_usd", "cost_per_million_tokens", "plot_latency_throughput",
    # published inference figures and scalelib's predictions of them (chapter 8)
    "InferenceResult", "inference_results", "closed_loop_throughput", "predict_inference_result",
    "prediction_error",
    "estimate_inference_result", "inference_estimate_error",
    "TrainingRun", "training_runs", "published_plan_cost", "predict_training_run", "training_prediction_error",
    "published_plan_estimate", "measured_step_time_s", "estimate_error",
    # GPU kernel tiles (chapter 12)
    "Tile", "best_tile", "search_tiles", "tile_intensity", "tile_smem_bytes",
    # pictures of the hardware (chapters 2, 12)
    "draw_chip", "draw_fat_tree", "draw_gpu_node", "draw_torus", "plot_spec_comparison",
    # the exercises' checker (the rest of the course's machinery lives in scalelib.course)
    "Verdict", "check", "exercises", "verdict", "CapstoneBrief", "capstone_brief",
]

# In a notebook, every figure shown records the size of its smallest text in its output's metadata (the course
# site's browser test measures it as the page shows the image: scalelib._plot.FIGURE_METADATA_KEY).
from ._plot import _record_figure_text_size  # noqa: E402

_record_figure_text_size()
del _record_figure_text_size
