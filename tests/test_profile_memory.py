"""Chapter 9's memory profile and graph view, and its figures legible at a page's width: XLA's memory plan
of a compiled block against a count by hand, the bytes on an HLO graph's edges against XLA's count, the
trace's legend and labels at 9 pt or more, and the prediction table narrow enough for the page."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

import scalelib as sl

B, D, F = 256, 512, 1024


def block(x, w1, w2):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)  # RMS norm
    return x + jax.nn.gelu(h @ w1) @ w2


ARGS = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((B, D), (D, F), (F, D))]


def test_xlas_memory_plan_of_the_residual_block_is_the_chapters_count_by_hand():
    plan = jax.jit(block).lower(*ARGS).compile().memory_analysis()
    assert plan.argument_size_in_bytes == 4 * (B * D + 2 * D * F)  # x, W1, W2
    assert plan.output_size_in_bytes == 4 * B * D  # y
    assert plan.temp_size_in_bytes == 4 * B * F  # the hidden [B, F] activation, and nothing else


def test_the_bytes_on_an_hlo_graphs_edges_and_boxes_are_xlas_bytes_accessed():
    hlo = sl.hlo_summary(jax.jit(block).lower(*ARGS).compile().as_text())
    nbytes = {op.name: sum(a.nbytes for a in op.result) for op in hlo.ops}
    kernels = [op for op in hlo.ops if op.opcode != "parameter"]
    assert all(o in nbytes for op in kernels for o in op.operands)  # every edge starts at an op of the module
    on_edges = sum(nbytes[o] for op in kernels for o in op.operands) + sum(nbytes[op.name] for op in kernels)
    assert on_edges == sl.cost_analysis(block, *ARGS).bytes_accessed


def _trace():
    events = (sl.TraceEvent("run", "python", 0.0, 3e-3),
              sl.TraceEvent("ynn_fusion", "tf_XLAPjRtCpuClient/1", 1e-4, 2e-3, "ynn_fusion", "jit_mlp"),
              sl.TraceEvent("multiply_multiply_fusion", "tf_XLAPjRtCpuClient/1", 2.2e-3, 3e-4,
                            "multiply_multiply_fusion", "jit_mlp"))
    return sl.Trace("synthetic.trace.json.gz", events, ("python", "tf_XLAPjRtCpuClient/1"))


def test_the_traces_legend_and_op_names_are_at_least_9_pt_and_the_legend_sits_below_the_timeline():
    ax = sl.plot_trace(_trace())
    legend = ax.get_legend()
    assert {t.get_text() for t in legend.get_texts()} >= {"XLA op: ynn_fusion", "XLA op: multiply_multiply_fusion"}
    assert min(t.get_fontsize() for t in legend.get_texts()) >= 9
    assert all(t.get_fontsize() >= 9 for t in ax.texts)
    assert any(t.get_text() == "ynn_fusion" for t in ax.texts)  # the long op is named on its bar
    ax.figure.canvas.draw()
    box, axes_box = legend.get_window_extent(), ax.get_window_extent()
    assert box.y1 <= axes_box.y0  # below the axes, not beside them
    assert ax.figure.get_size_inches()[0] <= 7.5  # a page's width, so nothing is shrunk to fit
    plt.close("all")


def test_the_prediction_tables_last_column_is_the_ratio():
    assert sl.prediction_table([]).splitlines()[0] == (
        "| operation | FLOPs | bytes | intensity | bound | predicted | measured | ratio |")


def test_exercise_9_8s_reference_is_what_xla_plans_for_its_block():
    from scalelib.course.answer_key import ch09

    b, d, f = ch09._9_8.values()
    shapes = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((b, d), (d, f), (f, d))]
    plan = jax.jit(block).lower(*shapes).compile().memory_analysis()
    planned = plan.argument_size_in_bytes + plan.output_size_in_bytes + plan.temp_size_in_bytes
    assert planned == ch09._9_8_REF
