"""The API's contract, over every public name: one signature convention, results that are numbers
with their derivation one call away, units named the same way, docstrings with a formula, a chapter
and an example, and bad input answered by scalelib's own error (never a raw exception, a warning,
a hang or a silent number)."""

from __future__ import annotations

import inspect
import signal
import warnings
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")
import matplotlib.backends.backend_agg  # noqa: E402
import matplotlib.figure  # noqa: E402

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import scalelib as sl
from scalelib import _models, _specs

SLICE = sl.tpu_slice((4, 4), "tpu-v5e")
POD = sl.tpu_pod("tpu-v5e")
CLUSTER = sl.gpu_cluster(2, "h100")
H100 = sl.chip("h100")
TRACE = sl.systolic_trace([[1, 2], [3, 4]], [[1, 0], [2, 1]])
SHARDING = sl.sharding("A[I_X, J_Y]", {"X": 2, "Y": 2})
FIGURE = matplotlib.figure.Figure(figsize=(11, 3))
matplotlib.backends.backend_agg.FigureCanvasAgg(FIGURE)
PROBE_CPU = sl.ChipSpec("probe-cpu", "cpu", "a test", f32_flops_per_s=1e11, hbm_bytes_per_s=1e10)


def _profile_trace() -> str:
    """A trace file as the JAX profiler writes one (gzipped Chrome trace events): one XLA op of 1 ms."""
    import gzip
    import json
    import os
    import tempfile

    path = os.path.join(tempfile.mkdtemp(prefix="scalelib-contract-"), "host.trace.json.gz")
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump({"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1000, "name": "fusion",
                                    "args": {"hlo_op": "fusion", "hlo_module": "jit_f"}}]}, handle)
    return path


PROFILE_TRACE = _profile_trace()
LLAMA = sl.model("llama-3-70b")

#: A valid call of every public callable: (callable, positional args, keyword args).
#: Methods of the public classes are included, bound to an instance.
CALLS = {
    "explain": (sl.explain, (sl.critical_intensity, "tpu-v5e"), {}),
    "fmt": (sl.fmt, (1.5e-3, "s"), {"sig": 3, "binary": False}),
    "bytes_per_value": (sl.bytes_per_value, ("bf16",), {}),
    "chip": (sl.chip, ("h100",), {}),
    "chips": (sl.chips, ("gpu",), {}),
    "dtype_name": (sl.dtype_name, ("bfloat16",), {}),
    "register_chip": (sl.register_chip, ({"name": "probe-chip", "family": "gpu", "source": "a test",
                                          "bf16_flops_per_s": 1e15, "hbm_bytes_per_s": 2e12},), {"replace": True}),
    "load_chips": (sl.load_chips, ("/nonexistent/chips.toml",), {"replace": True}),
    "ChipSpec": (sl.ChipSpec, ("x", "gpu", "a test"), {"bf16_flops_per_s": 1e15, "hbm_bytes_per_s": 2e12}),
    "ChipSpec.peak_flops_per_s": (H100.peak_flops_per_s, (), {"dtype": "fp8"}),
    "ChipSpec.bytes_per_s": (H100.bytes_per_s, (), {"bandwidth": "nvlink"}),
    "ChipSpec.derive": (H100.derive, ("h100-variant",), {"hbm_bytes_per_s": 4e12}),
    "ChipSpec.source_of": (H100.source_of, ("hbm_bytes_per_s",), {}),
    "arithmetic_intensity": (sl.arithmetic_intensity, (2e12, 1e9), {}),
    "critical_intensity": (sl.critical_intensity, ("tpu-v5e",), {"dtype": "int8", "bandwidth": "hbm"}),
    "vector_flops_per_s": (sl.vector_flops_per_s, ("h100",), {"per": "core", "flops_per_cycle": 2, "clock": "base"}),
    "vector_critical_intensity": (sl.vector_critical_intensity, ("tpu-v5p",), {"per": "core", "bandwidth": "hbm"}),
    "t_math_s": (sl.t_math_s, (1e12, "h100"), {"dtype": "bf16"}),
    "t_comms_s": (sl.t_comms_s, (1e9, "tpu-v5e"), {"bandwidth": "ici"}),
    "roofline": (sl.roofline, (1e12, 1e9, "tpu-v5e"), {"dtype": "bf16", "bandwidth": "hbm"}),
    "attainable_flops_per_s": (sl.attainable_flops_per_s, (100.0, "tpu-v5e"), {"dtype": "bf16", "bandwidth": "hbm"}),
    "matmul_flops": (sl.matmul_flops, (256, 4096, 8192), {}),
    "matmul_bytes": (sl.matmul_bytes, (256, 4096, 8192), {"dtype": "bf16", "weight_dtype": "int8", "out_dtype": "f32"}),
    "matmul_intensity": (sl.matmul_intensity, (256, 4096, 8192), {"dtype": "bf16", "weight_dtype": "int8"}),
    "matmul_roofline": (sl.matmul_roofline, (256, 4096, 8192, "h100"), {"dtype": "bf16", "compute_dtype": "bf16"}),
    "critical_batch_size": (sl.critical_batch_size, ("tpu-v5e",), {"weight_dtype": "int8", "D": 8192, "F": 8192}),
    "tpu_slice": (sl.tpu_slice, ((4, 4), "tpu-v5e"), {"wraparound": False}),
    "tpu_pod": (sl.tpu_pod, ("tpu-v5e",), {}),
    "torus_max_hops": (sl.torus_max_hops, ((4, 8),), {"twist": {"X": {"Y": 4}}}),
    "torus_mean_hops": (sl.torus_mean_hops, ((4, 4, 8),), {"twist": {"X": {"Z": 4}, "Y": {"Z": 4}}}),
    "gpu_cluster": (sl.gpu_cluster, (4, "h100"), {"switch_ports": 64, "port_bytes_per_s": 50e9, "oversubscription": 1.0}),
    "TpuSlice": (sl.TpuSlice, (sl.chip("tpu-v5e"), (4, 16), (False, True)), {}),
    "GpuCluster": (sl.GpuCluster, (H100, 4), {}),
    "TpuSlice.hops": (SLICE.hops, ((0, 0), (3, 3)), {}),
    "TpuSlice.route": (SLICE.route, ((0, 0), (3, 3)), {}),
    "TpuSlice.max_hops": (SLICE.max_hops, (), {}),
    "TpuSlice.p2p_time_s": (SLICE.p2p_time_s, (1e6, (0, 0), (3, 3)), {"hop_latency_s": 1e-6}),
    "TpuSlice.axes": (SLICE.axes, ("XY",), {}),
    "TpuSlice.axis_bytes_per_s": (POD.axis_bytes_per_s, ("X",), {}),
    "TpuSlice.bisection_bytes_per_s": (POD.bisection_bytes_per_s, (), {}),
    "TpuSlice.dcn_bytes_per_s": (POD.dcn_bytes_per_s, (), {}),
    "TpuSlice.total_flops_per_s": (POD.total_flops_per_s, (), {"dtype": "int8"}),
    "TpuSlice.total_hbm_bytes": (POD.total_hbm_bytes, (), {}),
    "TpuSlice.total_hbm_bytes_per_s": (POD.total_hbm_bytes_per_s, (), {}),
    "TpuSlice.summary": (POD.summary, (), {}),
    "GpuCluster.egress_bytes_per_s_per_node": (CLUSTER.egress_bytes_per_s_per_node, (), {"level": "leaf"}),
    "GpuCluster.bisection_bytes_per_s": (CLUSTER.bisection_bytes_per_s, (), {}),
    "GpuCluster.total_flops_per_s": (CLUSTER.total_flops_per_s, (), {"dtype": "fp8"}),
    "GpuCluster.total_hbm_bytes": (CLUSTER.total_hbm_bytes, (), {}),
    "GpuCluster.summary": (CLUSTER.summary, (), {}),
    "sharding": (sl.sharding, ("A[I_X, J_Y]", {"X": 2, "Y": 2}), {}),
    "Sharding": (sl.Sharding, (("I", "J"), (("X",), ()), {"X": 2, "Y": 2}), {"unreduced": ("Y",), "name": "A"}),
    "Sharding.splits": (SHARDING.splits, ("I",), {}),
    "Sharding.shard_shape": (SHARDING.shard_shape, ((8, 8),), {}),
    "Sharding.shard_bytes": (SHARDING.shard_bytes, ((8, 8),), {"dtype": "f32"}),
    "Sharding.total_bytes": (SHARDING.total_bytes, ({"I": 8, "J": 8},), {"dtype": "int8"}),
    "Sharding.copies": (SHARDING.copies, (), {}),
    "Sharding.partition_spec": (SHARDING.partition_spec, (), {}),
    "plan_matmul": (sl.plan_matmul, ("A[I_X, J] · B[J_X, K]", {"I": 64, "J": 64, "K": 64}, SLICE),
                    {"dtype": "bf16", "mesh": None}),
    "plan_reshard": (sl.plan_reshard, ("A[I_X, J] -> A[I, J]", {"I": 64, "J": 64}, SLICE), {"dtype": "bf16"}),
    "latency_bound_bytes": (sl.latency_bound_bytes, (POD,), {"axes": "X", "collective": "allreduce", "per": "shard",
                                                             "latency_s": 1e-6}),
    "draw_sharding": (sl.draw_sharding, (SHARDING, (8, 8)), {}),
    "ring_link_bytes": (sl.ring_link_bytes, (1e6, 8), {"collective": "alltoall", "bidirectional": False}),
    "allgather_time_s": (sl.allgather_time_s, (1e9, POD), {"axes": "X", "latency_s": 1e-6}),
    "reducescatter_time_s": (sl.reducescatter_time_s, (1e9, CLUSTER), {"group": 16}),
    "allreduce_time_s": (sl.allreduce_time_s, (1e9, POD), {"axes": "XY"}),
    "alltoall_time_s": (sl.alltoall_time_s, (1e9, CLUSTER), {"group": 8}),
    "collective_permute_time_s": (sl.collective_permute_time_s, (1e6, SLICE), {"axes": "X", "hops": 1,
                                                                           "latency_s": 1e-6}),
    "data_parallel_critical_batch": (sl.data_parallel_critical_batch, (POD,), {"dtype": "bf16", "axes": "X"}),
    "tensor_parallel_max_degree": (sl.tensor_parallel_max_degree, (28672, CLUSTER), {"dtype": "bf16"}),
    "pipeline_bubble_fraction": (sl.pipeline_bubble_fraction, (4, 16), {"virtual_stages": 2}),
    "fsdp_tensor_parallel_critical_batch": (sl.fsdp_tensor_parallel_critical_batch, (32768, POD),
                                            {"M_X": 2, "M_Y": 1, "dtype": "bf16"}),
    "optimal_fsdp_degree": (sl.optimal_fsdp_degree, (3e6, 13824, POD), {"M_X": 2, "M_Y": 1}),
    "cross_slice_critical_batch": (sl.cross_slice_critical_batch, (POD,), {"dtype": "bf16"}),
    "ParallelPlan": (sl.ParallelPlan, (), {"data": 2, "fsdp": 4, "tensor": 2, "pipeline": 1, "expert": 1,
                                           "slices": 1, "microbatches": 1, "schedule": "1f1b", "virtual_stages": 1,
                                           "remat": "full"}),
    "training_cost": (sl.training_cost, ("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=8, tensor=2), CLUSTER),
                      {"seq_len": 4096, "dtype": "bf16", "param_dtype": "bf16", "grad_dtype": "bf16",
                       "optimizer": "adam", "optimizer_dtype": "f32", "master_dtype": None, "hbm_bytes": None,
                       "efficiency": 0.7, "flash_attention": True, "sequence_parallel": True,
                       "losses": sl.LOSSES}),
    "training_memory_bytes": (sl.training_memory_bytes, ("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=16), CLUSTER),
                              {"seq_len": 4096, "param_dtype": "bf16", "grad_dtype": "bf16", "optimizer": "adam",
                               "optimizer_dtype": "f32", "master_dtype": "f32", "flash_attention": False}),
    "model_flops_utilization": (sl.model_flops_utilization, ("llama-3-8b", 2**20, 8.0, CLUSTER),
                                {"seq_len": 4096, "slices": 1, "dtype": "bf16"}),
    "zero_state_bytes": (sl.zero_state_bytes, (7.5e9, 64), {"stage": 2, "param_dtype": "bf16", "grad_dtype": "bf16",
                                                             "optimizer": "adam", "optimizer_dtype": "f32",
                                                             "master_dtype": "f32"}),
    "pipeline_schedule": (sl.pipeline_schedule, (4, 8), {"schedule": "interleaved", "virtual_stages": 2,
                                                         "backward_ratio": 2.0}),
    "pipeline_peak_activations": (sl.pipeline_peak_activations, (4, 8), {"schedule": "interleaved",
                                                                         "virtual_stages": 2}),
    "plot_pipeline_schedule": (sl.plot_pipeline_schedule, (4, 8), {"schedule": "1f1b", "virtual_stages": 1,
                                                                   "backward_ratio": 2.0, "ax": None}),
    "search_plans": (sl.search_plans, ("llama-3-8b", 2**20, CLUSTER),
                     {"seq_len": 4096, "slices": 1, "pipeline": True, "max_microbatches": 8, "remat": "full",
                      "method": "numpy", "runners_up": 3, "hbm_bytes": None, "efficiency": 1.0,
                      "rank": "estimate", "flash_attention": True, "sequence_parallel": True,
                      "losses": sl.LOSSES}),
    "needs_pipeline": (sl.needs_pipeline, ("llama-3-8b", 2**20, CLUSTER), {"seq_len": 4096, "slices": 1,
                                                                         "threshold": 1.05}),
    "pipeline_crossover": (sl.pipeline_crossover, ("llama-3-8b", 2**20, [8, 16], "h100"), {"seq_len": 4096}),
    "plot_pipeline_crossover": (sl.plot_pipeline_crossover, ("llama-3-8b", 2**20, [8, 16], ["h100"]),
                                {"seq_len": 4096, "ax": None}),
    "vector_alus": (sl.vector_alus, ("h100",), {}),
    "vector_clock_hz": (sl.vector_clock_hz, (80e12, "b200"), {"flops_per_cycle": 2}),
    "vector_add_time_s": (sl.vector_add_time_s, (2**20, "h100"), {"dtype": "f32", "flops_per_cycle": 1,
                                                                  "clock": "base"}),
    "measure_vector_add_time_s": (sl.measure_vector_add_time_s, (2**10,), {"dtype": "f32", "repeats": 1}),
    "node_bandwidth_bytes_per_s": (sl.node_bandwidth_bytes_per_s, (4, 64, 25e9, CLUSTER), {}),
    "fat_tree_level_bytes_per_s": (sl.fat_tree_level_bytes_per_s, (sl.gpu_cluster(64, "h100"),), {"level": "spine"}),
    "hierarchical_allgather_time_s": (sl.hierarchical_allgather_time_s, (1e9, CLUSTER), {"group": 16, "inner": 2}),
    "hierarchical_allreduce_time_s": (sl.hierarchical_allreduce_time_s, (1e9, CLUSTER), {"group": 16, "inner": 1,
                                                                                        "sharp": True}),
    "hierarchical_data_parallel_critical_batch": (sl.hierarchical_data_parallel_critical_batch, (CLUSTER,),
                                                  {"group": 16, "inner": 8, "dtype": "bf16"}),
    "switch_bytes": (sl.switch_bytes, (1e9, CLUSTER), {"switch": "leaf", "collective": "allgather",
                                                       "direction": "egress", "sharp": False, "inner": 1}),
    "ragged_alltoall_time_s": (sl.ragged_alltoall_time_s, (1e9, 4, CLUSTER), {"group": 16, "routing": "random"}),
    "allreduce_latency_s": (sl.allreduce_latency_s, (64,), {"algorithm": "tree", "step_latency_s": 5e-6}),
    "moe_data_parallel_critical_batch": (sl.moe_data_parallel_critical_batch, (128, 4, CLUSTER), {"dtype": "bf16"}),
    "expert_parallel_critical_width": (sl.expert_parallel_critical_width, (16, 8, CLUSTER), {"dtype": "bf16"}),
    "pipeline_comms_time_s": (sl.pipeline_comms_time_s, (1e6, 8192, 2, 8, CLUSTER), {"dtype": "bf16"}),
    "host_transfer_time_s": (sl.host_transfer_time_s, (1e9,), {"link": "pcie-gen5"}),
    "tile_intensity": (sl.tile_intensity, (128, 256), {"K": 4096, "dtype": "bf16", "out_dtype": "f32"}),
    "tile_smem_bytes": (sl.tile_smem_bytes, (128, 256, 64), {"dtype": "bf16", "stages": 3}),
    "search_tiles": (sl.search_tiles, (4096, 4096, 4096, "h100"), {"dtype": "bf16", "stages": (2, 3)}),
    "best_tile": (sl.best_tile, (4096, 1024, 4096, "a100"), {"dtype": "bf16", "k_steps": (32, 64)}),
    "measure_matmul_time_s": (sl.measure_matmul_time_s, (32, 32, 32), {"dtype": "f32", "repeats": 1}),
    "measure_copy_time_s": (sl.measure_copy_time_s, (2**16,), {"repeats": 1}),
    "measure_machine": (sl.measure_machine, (), {"matmul_sizes": (32,), "nbytes": 2**16, "repeats": 1}),
    "plot_roofline": (sl.plot_roofline, (["tpu-v5e", "h100"],), {"dtype": "bf16", "intensity_range": (1, 1e3)}),
    "plot_waterfall": (sl.plot_waterfall, (7.44, {"matmul_efficiency": 3.33}), {"measured_s": 13.75,
                                                                               "orientation": "vertical"}),
    "legible": (sl.legible, (FIGURE,), {"relayout": True}),
    "draw_torus": (sl.draw_torus, (SLICE,), {"route": ((0, 0), (3, 1))}),
    "draw_gpu_node": (sl.draw_gpu_node, ("h100",), {}),
    "draw_fat_tree": (sl.draw_fat_tree, (CLUSTER,), {}),
    "draw_chip": (sl.draw_chip, ("tpu-v5e",), {}),
    "plot_spec_comparison": (sl.plot_spec_comparison, (["h100", "tpu-v5e"],), {"fields": ("hbm_bytes",)}),
    "systolic_matmul": (sl.systolic_matmul, ([[1, 2], [3, 4]], [[1, 0, 2], [2, 1, 0]]), {"size": 3}),
    "systolic_trace": (sl.systolic_trace, ([[1.5, 2.0]], [[1.0], [2.0]]), {"size": 2}),
    "systolic_cycles": (sl.systolic_cycles, (8, 4, 4), {"size": 4}),
    "animate_systolic": (sl.animate_systolic, (TRACE,), {"interval_ms": 500, "frames_per_cycle": 2}),
    "systolic_animation_html": (sl.systolic_animation_html, (TRACE,), {"interval_ms": 500, "frames_per_cycle": 1,
                                                                       "dpi": 40}),
    "simulated_mesh": (sl.simulated_mesh, ((1, 1),), {"axes": ("X", "Y")}),
    "parse_collectives": (sl.parse_collectives, ("%ag = f32[8]{0} all-gather(f32[4]{0} %p), replica_groups={{0,1}}",),
                          {"mesh": {"X": 2}}),
    "compiled_collectives": (sl.compiled_collectives, (abs, 1.0), {"mesh": None}),
    "sharded_matmul_collectives": (sl.sharded_matmul_collectives, ((None, "X"), ("X", None), ((8, 8), (8, 8)), (1, 1)),
                                   {"dtype": "bf16", "out_spec": ("X", None)}),
    "compare_with_plan": (sl.compare_with_plan, ("A[I, J_X] · B[J_X, K]", {"I": 8, "J": 8, "K": 8}, {"X": 1}),
                          {"dtype": "bf16"}),
    "input_values": (sl.input_values, (["A[S_X, D]", "B[S_X]"], {"S": 4, "D": 2, "E": 3}, {"X": 2}),
                     {"seed": 1, "integers": {"B": "E"}}),
    "sharded_inputs": (sl.sharded_inputs, (["A[S, D]"], {"S": 4, "D": 2}, {"X": 1}), {"seed": 0, "integers": None}),
    "measure_jax_time_s": (sl.measure_jax_time_s, (abs, 1.0), {"repeats": 1}),
    "collective_matmul_time_s": (sl.collective_matmul_time_s, (1024, 2048, 8192, "tpu-v5e"),
                                 {"mesh": {"X": 2, "Y": 4}, "schedule": "both ways", "dtype": "bf16",
                                  "flops_per_s": None, "wraparound": True}),
    "hlo_array": (sl.hlo_array, ("bf16[8,128]{1,0:T(8,128)(2,1)}",), {}),
    "hlo_summary": (sl.hlo_summary, ("%x = f32[8]{0} parameter(0)",), {"mesh": {"X": 1}}),
    "cost_analysis": (sl.cost_analysis, (abs, 1.0), {"optimized": True}),
    "capture_trace": (sl.capture_trace, (abs, 1.0), {"repeats": 1}),
    "read_trace": (sl.read_trace, (PROFILE_TRACE,), {}),
    "plot_trace": (sl.plot_trace, (PROFILE_TRACE,), {"min_duration_s": 0.0}),
    "compare_with_roofline": (sl.compare_with_roofline, (abs, 1.0), {"chip": PROBE_CPU, "dtype": "f32", "repeats": 1,
                                                                     "name": "abs"}),
    "prediction_table": (sl.prediction_table, ([],), {}),
    "LatentAttention": (sl.LatentAttention, (), {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                                                 "v_head_dim": 128, "q_lora_rank": 1536}),
    "ModelSpec": (sl.ModelSpec, (), {"L": 2, "D": 64, "F": 256, "N": 4, "K": 2, "H": 16, "V": 100, "E": 4, "k": 2}),
    "ModelSpec.derive": (LLAMA.derive, ("llama-variant",), {"K": 64}),
    "ModelSpec.source_of": (LLAMA.source_of, ("published_params",), {}),
    "model": (sl.model, ("llama-3-70b",), {}),
    "models": (sl.models, (), {}),
    "register_model": (sl.register_model, ({"name": "probe-model", "L": 2, "D": 64, "F": 256, "N": 4, "K": 2,
                                            "H": 16, "V": 100},), {"replace": True}),
    "params": (sl.params, ("mixtral-8x7b",), {"component": "mlp", "active": True}),
    "param_bytes": (sl.param_bytes, ("llama-3-8b",), {"dtype": "int8", "active": False}),
    "training_state_bytes": (sl.training_state_bytes, ("llama-3-8b",), {"param_dtype": "bf16", "grad_dtype": "bf16",
                                                                        "optimizer": "adam", "optimizer_dtype": "f32"}),
    "forward_flops": (sl.forward_flops, ("llama-3-8b",), {"seq_len": 4096, "tokens": 8192, "component": "total",
                                                          "causal": True}),
    "train_flops": (sl.train_flops, ("deepseek-v3",), {"seq_len": 4096, "tokens": 4096, "component": "dot_product",
                                                       "causal": False, "remat": "full"}),
    "attention_crossover_seq_len": (sl.attention_crossover_seq_len, ("llama-3-70b",), {"causal": True}),
    "kv_cache_bytes": (sl.kv_cache_bytes, ("llama-3-70b",), {"tokens": 8192, "dtype": "int8"}),
    "moe_critical_batch_size": (sl.moe_critical_batch_size, ("deepseek-v3", "tpu-v5e"), {"dtype": "bf16",
                                                                                         "weight_dtype": "int8"}),
    "plot_model_breakdown": (sl.plot_model_breakdown, (["llama-3-8b"],), {"seq_lens": (4096,), "causal": False}),
    "einsum_flops": (sl.einsum_flops, ("bd,df->bf", {"b": 8, "d": 64, "f": 256}), {}),
    "attention_intensity": (sl.attention_intensity, (4096, 4096), {"G": 8, "dtype": "bf16"}),
    "weight_load_time_s": (sl.weight_load_time_s, ("llama-3-70b", SLICE), {"weight_dtype": "int8", "num_chips": None}),
    "generate_step_time_s": (sl.generate_step_time_s, (30e9, "tpu-v5e"), {
        "batch": 4, "context": 8192, "weight_dtype": "int8", "kv_dtype": None, "compute_dtype": "bf16",
        "kv_bytes_per_token": 100e3, "tokens_per_step": 1, "num_chips": 16, "check_memory": True}),
    "tokens_per_s_per_chip": (sl.tokens_per_s_per_chip, ("llama-3-70b", SLICE), {
        "batch": 32, "context": 8192, "weight_dtype": "int8", "kv_dtype": "int8", "compute_dtype": "bf16",
        "kv_bytes_per_token": None, "num_chips": None, "check_memory": True}),
    "prefill_time_s": (sl.prefill_time_s, ("llama-3-70b", SLICE), {
        "tokens": 8192, "batch": 1, "weight_dtype": "bf16", "compute_dtype": "bf16", "efficiency": 0.4,
        "attention": True, "num_chips": None}),
    "max_batch_size": (sl.max_batch_size, ("llama-3-70b", SLICE), {
        "context": 8192, "weight_dtype": "int8", "kv_dtype": "int8", "kv_bytes_per_token": None,
        "reserve_bytes": 1e9, "num_chips": None}),
    "max_batch_within_latency": (sl.max_batch_within_latency, ("llama-3-70b", SLICE), {
        "latency_s": 0.05, "context": 4096, "weight_dtype": "int8", "kv_dtype": "bf16", "compute_dtype": "bf16",
        "kv_bytes_per_token": None, "num_chips": None}),
    "generate_comms_time_s": (sl.generate_comms_time_s, ("llama-3-70b", SLICE), {
        "batch": 32, "axes": "XY", "dtype": "bf16", "tokens_per_step": 1}),
    "generate_model_parallel_max_degree": (sl.generate_model_parallel_max_degree, ("llama-3-70b", SLICE), {
        "batch": 64, "weight_dtype": "bf16", "dtype": "bf16", "axes": "XY"}),
    "weight_stationary_comms_time_s": (sl.weight_stationary_comms_time_s, (64, 8192, 32768, 256, "tpu-v5p"), {
        "layout": "2d", "X": 8, "axes": 3, "dtype": "bf16"}),
    "weight_stationary_crossover_chips": (sl.weight_stationary_crossover_chips, (8192, 32768), {"axes": 3}),
    "speculative_tokens_per_step": (sl.speculative_tokens_per_step, (4, 0.8), {}),
    "speculative_time_per_token_s": (sl.speculative_time_per_token_s, (70e9, SLICE), {
        "draft": 4e9, "k": 3, "acceptance": 0.8, "batch": 1, "context": 2048, "weight_dtype": "int8",
        "kv_dtype": None, "compute_dtype": "bf16", "kv_bytes_per_token": 0, "draft_kv_bytes_per_token": 0,
        "num_chips": None}),
    "min_chips": (sl.min_chips, ("llama-3-70b", "tpu-v5e"), {
        "weight_dtype": "int8", "kv_dtype": None, "batch": 32, "context": 8192, "kv_bytes_per_token": None,
        "reserve_bytes": 0.0}),
    "smallest_slice": (sl.smallest_slice, ("llama-3-70b", "tpu-v5e"), {
        "weight_dtype": "int4", "kv_dtype": None, "batch": 0, "context": 0, "kv_bytes_per_token": None,
        "reserve_bytes": 0.0}),
    "requests_per_s_per_chip": (sl.requests_per_s_per_chip, ("llama-3-70b", SLICE), {
        "batch": 32, "context": 8192, "output_tokens": 512, "weight_dtype": "int8", "kv_dtype": None,
        "compute_dtype": "bf16", "kv_bytes_per_token": None, "num_chips": None, "check_memory": True}),
    "prefill_to_generate_ratio": (sl.prefill_to_generate_ratio, (0.91, 0.019), {
        "batch": 32, "output_tokens": 512, "prefills_per_pass": 1}),
    "kv_tokens_freed_per_step": (sl.kv_tokens_freed_per_step, (32, 8192, 4096), {}),
    "usd_per_chip_hour": (sl.usd_per_chip_hour, ("tpu-v5e",), {}),
    "flops_per_usd": (sl.flops_per_usd, ("h100",), {"dtype": "bf16", "usd_per_chip_hour": None}),
    "cost_per_million_tokens": (sl.cost_per_million_tokens, (235.0, "tpu-v5e"), {"usd_per_chip_hour": None}),
    "inference_results": (sl.inference_results, (), {"held_out": True}),
    "closed_loop_throughput": (sl.closed_loop_throughput, ("llama-3-70b", "h100"), {
        "concurrency": 8, "prompt_tokens": 256, "output_tokens": 64, "weight_dtype": "fp8", "kv_dtype": None,
        "compute_dtype": "fp8", "prefill_efficiency": 0.5, "num_chips": 2, "check_memory": True}),
    "predict_inference_result": (sl.predict_inference_result, ("nim-h100x2-c50",), {}),
    "prediction_error": (sl.prediction_error, ("nim-h100x2-itl",), {}),
    "training_runs": (sl.training_runs, (), {"step_times": True}),
    "published_plan_cost": (sl.published_plan_cost, ("megatron-146b-a100",), {}),
    "published_plan_estimate": (sl.published_plan_estimate, ("korthikanti-22b-full",), {}),
    "measured_step_time_s": (sl.measured_step_time_s, ("megatron-146b-a100",), {}),
    "estimate_error": (sl.estimate_error, ("korthikanti-22b-selective",), {}),
    "estimate_inference_result": (sl.estimate_inference_result, ("nim-h100x2-c50",), {}),
    "inference_estimate_error": (sl.inference_estimate_error, ("nim-h100x2-itl",), {}),
    "estimated_step_time_s": (sl.estimated_step_time_s, ("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=8, tensor=2),
                                                         CLUSTER),
                              {"seq_len": 4096, "dtype": "bf16", "param_dtype": "bf16", "grad_dtype": "bf16",
                               "optimizer": "adam", "optimizer_dtype": "f32", "master_dtype": None,
                               "efficiency": 1.0, "flash_attention": False, "sequence_parallel": True,
                               "losses": ("matmul_efficiency", "tensor_collectives")}),
    "estimated_generate_step_time_s": (sl.estimated_generate_step_time_s, ("llama-3-70b", "h100"),
                                       {"batch": 8, "context": 4096, "weight_dtype": "fp8", "kv_dtype": None,
                                        "compute_dtype": "fp8", "kv_bytes_per_token": None, "tokens_per_step": 1,
                                        "num_chips": 2, "check_memory": True, "losses": sl.INFERENCE_LOSSES}),
    "estimated_prefill_time_s": (sl.estimated_prefill_time_s, ("llama-3-70b", CLUSTER),
                                 {"tokens": 2048, "batch": 1, "weight_dtype": "bf16", "compute_dtype": "bf16",
                                  "efficiency": None, "attention": None, "num_chips": None,
                                  "losses": ("kernel_efficiency",)}),
    "predict_training_run": (sl.predict_training_run, ("palm-540b-tpu-v4",), {}),
    "training_prediction_error": (sl.training_prediction_error, ("megatron-146b-a100",), {}),
    "plot_latency_throughput": (sl.plot_latency_throughput, ("llama-3-70b", [SLICE]), {
        "context": 2048, "batches": [1, 64, 256], "weight_dtype": "int8", "kv_dtype": None, "compute_dtype": "bf16",
        "num_chips": None, "ax": None}),
    "check": (sl.check, ("1.1", 590), {}),
    "verdict": (sl.verdict, ("1.1", 590), {}),
    "exercises": (sl.exercises, (1,), {}),
    "capstone_brief": (sl.capstone_brief, ("Ada Lovelace",), {"variant": None}),
}

#: Public names that are not called: constants, errors, and records scalelib makes and hands out.
NOT_CALLED = {"DTYPES", "hw", "ScalelibError", "UnknownNameError", "InvalidValueError", "OutsideValidationWarning",
              "InvalidCallError", "Derivation", "Roofline", "Tile", "Verdict", "SystolicTrace", "Collective",
              "CompiledCollective", "MatmulPlan", "Reshard", "PlanComparison", "PlanRow",
              "HloArray", "HloOp", "HloSummary", "XlaCost", "Trace", "TraceEvent", "TraceOp", "RooflineCheck",
              "TrainingCost", "PlanSearch", "PipelineNeed", "PipelineSchedule", "PipelineOp", "InferenceResult", "TrainingRun",
              "CapstoneBrief", "LOSSES", "INFERENCE_LOSSES"}
#: Parameters that may take a default and still be positional: the subject of a listing or a plot.
POSITIONAL_DEFAULTS = {("chips", "family"), ("axes", "axes"), ("exercises", "chapter"), ("plot_roofline", "chips"),
                       ("plot_spec_comparison", "chips"), ("plot_model_breakdown", "models"), ("fmt", "unit"),
                       ("gpu_cluster", None), ("capstone_brief", "learner")}
#: Callables that compute no quantity, so have no derivation (they list, look up, draw or check).
NOT_DERIVED = {"explain", "fmt", "chip", "chips", "dtype_name", "register_chip", "load_chips", "ChipSpec",
               "ChipSpec.derive", "ChipSpec.source_of", "tpu_slice", "tpu_pod", "gpu_cluster", "TpuSlice",
               "GpuCluster", "TpuSlice.route", "TpuSlice.axes", "TpuSlice.axis_bytes_per_s", "TpuSlice.summary",
               "GpuCluster.summary", "measure_machine", "plot_roofline", "legible", "draw_torus", "draw_gpu_node",
               "draw_fat_tree", "draw_chip", "plot_spec_comparison", "check", "verdict", "exercises",
               "systolic_matmul", "systolic_trace", "animate_systolic", "systolic_animation_html",
               "simulated_mesh", "parse_collectives", "compiled_collectives", "sharded_matmul_collectives",
               "compare_with_plan", "input_values", "sharded_inputs", "measure_jax_time_s",
               "sharding", "Sharding", "Sharding.splits", "Sharding.shard_shape", "Sharding.partition_spec",
               "draw_sharding", "LatentAttention", "ModelSpec", "ModelSpec.derive", "ModelSpec.source_of", "model",
               "models", "register_model", "plot_model_breakdown",
               "hlo_array", "hlo_summary", "cost_analysis", "capture_trace", "read_trace", "plot_trace",
               "compare_with_roofline", "prediction_table", "smallest_slice", "plot_latency_throughput",
               "ParallelPlan", "pipeline_schedule", "plot_pipeline_schedule", "needs_pipeline", "pipeline_crossover",
               "plot_pipeline_crossover", "inference_results", "training_runs",
               "published_plan_cost", "capstone_brief", "published_plan_estimate", "plot_waterfall"}
SLOW = {"measure_matmul_time_s", "measure_copy_time_s", "measure_vector_add_time_s", "measure_machine",
        "plot_roofline", "plot_waterfall", "legible", "draw_torus", "draw_gpu_node", "draw_fat_tree", "draw_chip",
        "plot_spec_comparison",
        "search_tiles", "best_tile", "animate_systolic", "systolic_animation_html",
        "simulated_mesh", "compiled_collectives", "sharded_matmul_collectives", "draw_sharding",
        "compare_with_plan", "sharded_inputs", "measure_jax_time_s",
        "plot_model_breakdown", "cost_analysis", "capture_trace", "plot_trace", "compare_with_roofline",
        "plot_latency_throughput", "plot_pipeline_schedule", "pipeline_crossover", "plot_pipeline_crossover",
        "needs_pipeline"}


@pytest.fixture(autouse=True)
def keep_the_registry():
    before, models_before = dict(_specs._USER), dict(_models._USER)
    yield
    _specs._USER.clear()
    _specs._USER.update(before)
    _models._USER.clear()
    _models._USER.update(models_before)
    plt.close("all")


def test_every_public_name_is_covered_here():
    public = set(sl.__all__)
    covered = {name.split(".")[0] for name in CALLS} | NOT_CALLED
    assert public - covered == set(), "add a valid call of each new public name to CALLS"
    assert {n for n in CALLS if "." not in n} <= public


def _public_methods(cls):
    return {f"{cls.__name__}.{name}" for name, member in vars(cls).items() if callable(member)
            and not name.startswith("_")} | (
        {f"{cls.__name__}.{name}" for base in cls.__mro__[1:-1] for name, member in vars(base).items()
         if callable(member) and not name.startswith("_")})


@pytest.mark.parametrize("cls", [sl.ChipSpec, sl.TpuSlice, sl.GpuCluster, sl.Sharding, sl.ModelSpec],
                         ids=lambda c: c.__name__)
def test_every_public_method_is_covered_here(cls):
    methods = _public_methods(cls)
    if cls is sl.GpuCluster:  # the totals it shares with TpuSlice are called on a slice too
        methods -= {"GpuCluster.total_hbm_bytes_per_s"}
    assert methods - set(CALLS) == set()


# --- one signature convention ------------------------------------------------------


def _signature(name):
    fn = CALLS[name][0]
    return inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)


@pytest.mark.parametrize("name", sorted(n for n in CALLS if not n[0].isupper() or "." in n))
def test_options_are_keyword_only(name):
    params = [p for p in _signature(name).parameters.values() if p.name != "self"]
    short = name.split(".")[-1]
    for p in params:
        if p.default is not inspect.Parameter.empty and p.kind is not inspect.Parameter.KEYWORD_ONLY:
            assert (short, p.name) in POSITIONAL_DEFAULTS, f"{name}: option `{p.name}` must be keyword-only"


OLD_NAMES = {"bytes_moved", "n_bytes", "copy_bytes", "explain", "kind"}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_same_concept_has_the_same_name_everywhere(name):
    params = set(_signature(name).parameters)
    assert not params & OLD_NAMES, f"{name} uses an old spelling: {params & OLD_NAMES}"
    assert not {"topo", "cluster", "slice", "n_chips", "num_gpus_in_group"} & params, name


def test_the_chip_or_topology_follows_the_quantities():
    for name in CALLS:
        params = [p.name for p in _signature(name).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
        for subject in ("chip", "topology"):
            if subject in params:
                after = params[params.index(subject) + 1:]
                assert after == [], f"{name}: nothing positional may follow `{subject}`, got {after}"


# --- results are numbers, the derivation one call away ------------------------------


def _call(name):
    fn, args, kwargs = CALLS[name]
    return fn(*args, **kwargs)


DERIVED = sorted(set(CALLS) - NOT_DERIVED
                 - {"measure_matmul_time_s", "measure_copy_time_s", "measure_vector_add_time_s"})


@pytest.mark.parametrize("name", DERIVED)
def test_explain_gives_the_same_value_as_the_plain_call(name):
    fn, args, kwargs = CALLS[name]
    plain = fn(*args, **kwargs)
    d = sl.explain(fn, *args, **kwargs)
    assert isinstance(d, sl.Derivation) and str(d)
    if isinstance(plain, (int, float, np.ndarray)):
        np.testing.assert_array_equal(d.value, plain)
        assert type(plain) in (float, int, np.ndarray), f"{name} returns {type(plain).__name__}"
    else:  # a bundle: its derivation is of its headline time
        headline = plain[0].time_s if isinstance(plain, list) else getattr(plain, "time_s", None)
        headline = getattr(plain, "t_lower_s", headline)
        assert d.value == headline


@pytest.mark.parametrize("name", sorted(set(CALLS) & NOT_DERIVED - {"explain"}))
def test_what_computes_no_quantity_says_so_when_explained(name):
    fn, args, kwargs = CALLS[name]
    with pytest.raises(sl.InvalidCallError, match=r"has no derivation"):
        sl.explain(fn, *args, **kwargs)


@pytest.mark.parametrize("name", DERIVED)
def test_a_unit_in_the_name_is_the_unit_of_the_result(name):
    # Seconds end in _s, bandwidths in bytes_per_s (…_per_node after it), sizes in _bytes, rates in flops_per_s.
    fn, args, kwargs = CALLS[name]
    if not isinstance(fn(*args, **kwargs), (float, int, np.ndarray)):
        return  # a bundle (a roofline, tiles): each field carries its unit in its own name
    unit = sl.explain(fn, *args, **kwargs).unit
    short = name.split(".")[-1]
    expected = {"s": r"(^|_)s$", "B/s": r"bytes_per_s(_per_\w+)?$", "B": r"(^|_)bytes(_per_value)?$",
                "FLOP/s": r"(flops|ops)_per_s$", "FLOP": r"_flops$"}
    import re

    if unit in expected:
        assert re.search(expected[unit], short), f"{name} returns {unit!r}: its name should say so"
    for other, pattern in expected.items():
        if other != unit and re.search(pattern, short):
            assert unit == other or (other == "s" and unit in ("B/s", "FLOP/s")), f"{name}: name says {other}, result is {unit!r}"


# --- documented ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_public_callable_documents_its_chapter_units_and_an_example(name):
    fn = CALLS[name][0]
    doc = inspect.getdoc(fn) or ""
    assert "Chapter:" in doc and "Example:" in doc and ">>> " in doc, f"{name}: needs Chapter and Example sections"
    if not inspect.isclass(fn):
        assert "Returns:" in doc, f"{name}: needs a Returns section with the unit"
    if name in DERIVED:
        assert "Formula:" in doc, f"{name}: a quantity needs its Formula"


# --- bad input: scalelib's own error, or a valid result; never a raw error, a warning or a hang ---

BAD_VALUES = [-1, 0, -0.5, 2.5, float("nan"), float("inf"), -float("inf"), True, False, None, "x", "1e9", "",
              [], (), {}, [1, -1], np.array([1.0, np.nan]), 10**30, 1e308, -10**30, object(), 1j, "hbm", "bf16",
              "tpu-v5e", "X", ("X", "X"), (0, 0), Ellipsis, np.float32(3), np.int64(-2), np.bool_(True)]


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds):
    def _alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _valid(result) -> bool:
    """A result a caller can trust: a finite non-negative number (inf only where it means 'never'), or an object."""
    if isinstance(result, (bool, np.bool_)):
        return False
    if isinstance(result, (int, float, np.ndarray, np.number)):
        arr = np.asarray(result, dtype=float)
        return bool(np.all(~np.isnan(arr)) and np.all(arr >= 0))
    return True


def _probe(name, position, value):
    """Call `name` with one argument (positional index or keyword) replaced by `value`."""
    fn, args, kwargs = CALLS[name]
    args, kwargs = list(args), dict(kwargs)
    if isinstance(position, int):
        args[position] = value
    else:
        kwargs[position] = value
    registered = dict(_specs._USER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", sl.OutsideValidationWarning)  # scalelib's own notice, on purpose
        with time_limit(20 if name in SLOW else 5):
            try:
                result = fn(*args, **kwargs)
            except sl.ScalelibError:
                return
            finally:
                plt.close("all")
                _specs._USER.clear()
                _specs._USER.update(registered)
    if name in ("check",):
        return
    assert _valid(result), f"{name} with {position}={value!r} returned {result!r}"
    if isinstance(result, float) and np.isinf(result):
        assert name == "critical_batch_size", f"{name} with {position}={value!r} returned inf"


def _slots(name):
    fn, args, kwargs = CALLS[name]
    return list(range(len(args))) + list(kwargs)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_bad_value_in_every_argument_gets_a_scalelib_error_or_a_valid_result(name):
    slots = _slots(name)
    values = BAD_VALUES if name not in SLOW else BAD_VALUES[:14] + [10**30, object()]
    for position in slots:
        for value in values:
            try:
                _probe(name, position, value)
            except Exception as err:  # a raw exception, a warning turned error, a hang or a silent bad number
                raise AssertionError(f"{name} with {position}={value!r}: {type(err).__name__}: {err}") from None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_input_anywhere_gets_a_scalelib_error_or_a_valid_result(data):
    name = data.draw(st.sampled_from(sorted(n for n in set(CALLS) - SLOW if _slots(n))))
    position = data.draw(st.sampled_from(_slots(name)))
    value = data.draw(st.one_of(
        st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**40), 10**40), st.text(max_size=4),
        st.booleans(), st.none(), st.lists(st.floats(-1e6, 1e6), max_size=3),
        st.tuples(st.integers(-2, 20), st.integers(-2, 20)), st.sampled_from(sl.chips() + ("hopper", "v5e")),
        st.sampled_from(["bf16", "f32", "int4", "fp8", "ici", "pcie", "dcn", "vmem", "nvlink", "XYZ", "Z"]),
    ))
    try:
        _probe(name, position, value)
    except Exception as err:
        raise AssertionError(f"{name} with {position}={value!r}: {type(err).__name__}: {err}") from None


# --- the cases the review listed, one by one -----------------------------------------


def test_a_switch_with_too_few_ports_is_refused_at_once_not_searched_forever():
    for ports in (3, 2, True, 2.5):
        with time_limit(2), pytest.raises(sl.InvalidValueError, match=r"^`switch_ports` must be"):
            sl.gpu_cluster(4, "h100", switch_ports=ports).summary()


def test_zero_bandwidth_or_a_negative_rate_cannot_make_a_chip():
    with pytest.raises(sl.InvalidValueError, match=r"`bf16_flops_per_s` must be a positive finite number"):
        sl.ChipSpec("x", "gpu", "t", bf16_flops_per_s=-1e14, hbm_bytes_per_s=1e12)
    with pytest.raises(sl.InvalidValueError, match=r"`hbm_bytes_per_s` must be a positive finite number"):
        sl.ChipSpec("x", "gpu", "t", bf16_flops_per_s=1e14, hbm_bytes_per_s=0)


def test_errors_name_the_argument_the_caller_passed():
    with pytest.raises(sl.InvalidValueError, match=r"^`sizes` must be a sequence of whole numbers >= 1, got \(0,\)$"):
        sl.search_tiles(64, 64, 64, "h100", sizes=(0,))
    with pytest.raises(sl.UnknownNameError, match=r"^`chips`: unknown chip 'h100x'"):
        sl.plot_roofline(chips=["h100x"])
    legend = sl.plot_roofline(chips="h100").get_legend().get_texts()
    assert [t.get_text() for t in legend] == ["h100 (bf16): ridge at 296 FLOP/B"]  # one chip, not four letters


def test_overflow_is_an_error_not_inf():
    with pytest.raises(sl.InvalidValueError, match=r"^matmul_flops: these inputs"):
        sl.matmul_flops(1e200, 1e200, 1e200)
