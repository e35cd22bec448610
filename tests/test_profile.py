"""Chapter 9's library: HLO types and modules read right, XLA's counts against the chapters' formulas,
traces read from the profiler's own files, and the book's example-profile predictions reproduced."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

import scalelib as sl
from scalelib.course.answer_key import ch09
from scalelib.course.check import get_exercise


def mlp(x, w, b):
    return jax.nn.gelu(x @ w + b)


B, D, F = 256, 512, 1024
X, W, BIAS = (jax.ShapeDtypeStruct(s, jnp.float32) for s in ((B, D), (D, F), (F,)))


# --- one HLO type ----------------------------------------------------------------------------


def test_the_books_tiling_example_pads_f32_3x5_to_4x6_about_1_6_times_its_size():
    a = sl.hlo_array("f32[3,5]{1,0:T(2,2)}")
    assert (a.padded_shape, a.nbytes, a.padded_nbytes) == ((4, 6), 60, 96)
    assert round(a.padded_nbytes / a.nbytes, 1) == 1.6  # the book's "about 1.6x"


def test_the_books_bf16_op_type_is_row_major_two_tilings_in_vmem_and_unpadded():
    a = sl.hlo_array("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")
    assert (a.dtype, a.shape, a.minor_to_major, a.tiles) == ("bf16", (32, 32, 4096), (2, 1, 0), ((8, 128), (2, 1)))
    assert (a.memory_space, a.memory) == (1, "VMEM")
    assert a.padded_nbytes == a.nbytes == 2 * 32 * 32 * 4096


def test_no_memory_space_means_hbm_and_no_layout_means_row_major():
    a = sl.hlo_array("f32[3,5]")
    assert (a.minor_to_major, a.memory, a.padded_shape) == ((1, 0), "HBM", (3, 5))


def test_the_inner_tiling_of_the_books_1d_bf16_layout_adds_no_padding():
    # Q1's profile: bf16[4096]{0:T(1024)(128)(2,1)}; 4096 values fill 4 tiles of 1024 exactly
    a = sl.hlo_array("bf16[4096]{0:T(1024)(128)(2,1)}")
    assert a.padded_nbytes == a.nbytes == 8192


def test_the_layout_decides_which_dimension_a_tile_pads():
    row_major = sl.hlo_array("f32[1000,3]{1,0:T(8,128)}")
    col_major = sl.hlo_array("f32[1000,3]{0,1:T(8,128)}")
    assert (row_major.physical_shape, row_major.padded_shape) == ((1000, 3), (1000, 128))
    assert (col_major.physical_shape, col_major.padded_shape) == ((3, 1000), (8, 1024))
    assert (row_major.padded_nbytes, col_major.padded_nbytes) == (4 * 1000 * 128, 4 * 8 * 1024)


def test_exercise_9_1_rounds_both_dimensions_to_the_tile():
    # bf16[3000, 10] column-major is [10, 3000] in memory, padded to [16, 3072]; row-major would pad to [3000, 128]
    assert get_exercise("9.1").reference().value == 2 * 16 * 3072


@pytest.mark.parametrize("text, message", [
    ("f32[3,5]{1:T(2,2)}", r"^`text`: the layout \{1:T\(2,2\)\} must list each of the 2 dimensions once"),
    ("f32[3,5]{1,1}", r"^`text`: the layout \{1,1\} must list each"),
    ("tensor<3x5xf32>", r"^`text` must be one HLO array type such as"),
    ("f32[3,5]{1,0:T(0,2)}", r"^`text`: each tile must be whole numbers >= 1"),
    (3, r"^`text` must be an HLO array type such as 'f32\[3,5\]\{1,0\}', got 3$"),
    # regressions (issue 18): an empty size was dropped, f32[3,,5] read as (3, 5); an unknown type read as 7 bits
    ("f32[3,,5]", r"^`text`: the shape \[3,,5\] must be sizes separated by commas, such as \[3,5\]"),
    ("f32[,5]", r"^`text`: the shape \[,5\] must be sizes separated by commas"),
    ("q7[3,5]", r"^`text`: unknown HLO element type 'q7' in 'q7\[3,5\]'; expected one of pred, s2, .*, bf16, f32, "),
])
def test_a_type_hlo_does_not_write_is_a_scalelib_error(text, message):
    with pytest.raises(sl.InvalidValueError, match=message):
        sl.hlo_array(text)


# --- a module of HLO -----------------------------------------------------------------------------

HANDWRITTEN = textwrap.dedent("""\
    HloModule jit_f, num_partitions=8

    %fused_computation (p0: f32[8,512], p1: f32[1024,512]) -> f32[8,1024] {
      %p0 = f32[8,512]{1,0} parameter(0)
      %p1 = f32[1024,512]{1,0} parameter(1)
      ROOT %dot.3 = f32[8,1024]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
    }

    ENTRY %main (x: f32[8,512], w: f32[1024,512]) -> f32[8,1024] {
      %x = f32[8,512]{1,0} parameter(0), sharding={devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}
      %w = f32[1024,512]{1,0} parameter(1), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}, metadata={op_name="w"}
      %f = f32[8,1024]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_computation, metadata={op_name="jit(f)/dot"}
      ROOT %ag = f32[8,4096]{1,0} all-gather(%f), replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={1}
    }
""")


def test_a_handwritten_module_is_read_op_by_op():
    s = sl.hlo_summary(HANDWRITTEN, mesh={"Y": 4, "X": 2})
    assert (s.module, s.num_partitions, s.entry) == ("jit_f", 8, "main")
    assert [op.opcode for op in s.ops] == ["parameter", "parameter", "fusion", "all-gather"]
    fusion = s.op("f")
    assert (fusion.kind, fusion.calls, fusion.inside, fusion.operands, fusion.source) == (
        "kOutput", "fused_computation", ("dot",), ("x", "w"), "jit(f)/dot")
    assert fusion.has_matmul and s.fusions == (fusion,)
    assert s.op("ag").collective.axes == ("Y",) and s.op("ag").what == "all-gather over Y"


def test_a_parameters_sharding_annotation_gives_its_global_shape():
    x, w = sl.hlo_summary(HANDWRITTEN).parameters
    assert (x.tiles, x.global_shape) == ((2, 1), (16, 512))
    assert (w.tiles, w.global_shape) == ((4, 1), (4096, 512))


def test_the_listing_drops_metadata_and_can_keep_only_some_ops():
    s = sl.hlo_summary(HANDWRITTEN)
    assert "metadata" not in s.listing() and "sharding={devices=[4,1,2]" in s.listing()
    assert s.listing(opcodes=("fusion",), shardings=False) == (
        "  %f = f32[8,1024]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_computation")
    assert s.listing("fused_computation").splitlines()[-2].strip().startswith("ROOT %dot.3 = f32[8,1024]")
    with pytest.raises(sl.InvalidValueError, match=r"^`name`: no computation 'nope'; the module has"):
        s.listing("nope")
    with pytest.raises(sl.InvalidValueError, match=r"^`name`: no op 'nope' in the entry computation; it has x, w"):
        s.op("nope")


def test_the_compiled_mlp_is_two_kernels_a_matmul_and_a_loop_fusion_with_the_tanh_inside():
    s = sl.hlo_summary(jax.jit(mlp).lower(X, W, BIAS).compile().as_text())
    matmul, tail = s.fusions
    assert matmul.has_matmul and not tail.has_matmul
    assert tail.kind == "kLoop" and "tanh" in tail.inside
    assert [p.shape for p in s.parameters] == [(B, D), (D, F), (F,)]
    assert str(s).splitlines()[0] == "| op | what | result | layout | ops inside |"


# --- XLA's counts against the chapters' formulas ---------------------------------------------------


def test_xlas_count_of_an_f32_matmul_is_chapter_1s_flops_and_bytes():
    x, w = jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((512, 1024), jnp.float32)
    cost = sl.cost_analysis(jnp.matmul, x, w)
    assert cost.flops == sl.matmul_flops(256, 512, 1024)
    assert cost.bytes_accessed == sl.matmul_bytes(256, 512, 1024, dtype="f32")
    assert cost.intensity == pytest.approx(sl.matmul_intensity(256, 512, 1024, dtype="f32"))


def test_the_lowered_count_of_a_bf16_matmul_keeps_its_bf16_bytes():
    x, w = jax.ShapeDtypeStruct((128, 8192), jnp.bfloat16), jax.ShapeDtypeStruct((8192, 28672), jnp.bfloat16)
    cost = sl.cost_analysis(jnp.matmul, x, w, optimized=False)
    assert (cost.flops, cost.bytes_accessed, cost.optimized) == (
        sl.matmul_flops(128, 8192, 28672), sl.matmul_bytes(128, 8192, 28672, dtype="bf16"), False)


def test_fusion_cuts_the_bytes_and_exercise_9_2_counts_what_xla_counts():
    fused, unfused = sl.cost_analysis(mlp, X, W, BIAS), sl.cost_analysis(mlp, X, W, BIAS, optimized=False)
    assert unfused.bytes_accessed > 5 * fused.bytes_accessed and fused.flops == unfused.flops
    assert fused.transcendentals == B * F  # one tanh per element
    b, d, f = ch09._9_2.values()  # exercise 9.2's layer: its first value is the two kernels' bytes XLA counts
    shapes = ((b, d), (d, f), (f,))
    two_kernels = sl.cost_analysis(mlp, *(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes)).bytes_accessed
    assert two_kernels == get_exercise("9.2").reference().value[0]


@pytest.mark.parametrize("sizes", [ch09._9_3, ch09._9_4])
def test_the_answer_keys_attention_score_counts_are_what_xla_counts(sizes):
    q = jax.ShapeDtypeStruct((sizes["B"], sizes["T"], sizes["N"], sizes["H"]), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((sizes["B"], sizes["S"], sizes["N"], sizes["H"]), jnp.bfloat16)
    cost = sl.cost_analysis(lambda q, k: jnp.einsum("btnh,bsnh->bnts", q, k), q, k, optimized=False)
    assert (cost.flops, cost.bytes_accessed) == ch09._score_counts(**sizes)


def test_arguments_that_do_not_trace_are_a_scalelib_error():
    with pytest.raises(sl.InvalidValueError, match=r"^`args`: jax.jit\(fn\) could not trace fn"):
        sl.cost_analysis(jnp.matmul, jnp.ones((2, 3)), jnp.ones((2, 3)))
    with pytest.raises(sl.InvalidValueError, match=r"^`fn` must be a function of JAX arrays, got 3$"):
        sl.cost_analysis(3)


# --- the book's example profile -----------------------------------------------------------------


def test_the_books_up_projection_prediction_is_95_6_ms():
    spec = ch09.TPU_V2_CORE
    assert sl.t_math_s(sl.matmul_flops(8 * 1024, 8192, 16384), spec) == pytest.approx(95.6e-3, abs=0.05e-3)


def test_the_books_reduce_scatter_prediction_is_about_1_1_ms_against_1_13_measured():
    t = get_exercise("9.5").reference().value
    assert t == pytest.approx(2 * 8 * 1024 * 8192 / 1.2e11) and 1.05e-3 < t < 1.13e-3


def test_the_q_projection_is_a_quarter_of_the_up_projection():
    # both see 8192 tokens and d_model = 8192 per core; 16 heads x 256 = 4096 columns against 16384
    assert get_exercise("9.6").reference().value == pytest.approx(95.6e-3 / 4, rel=1e-3)


# --- traces -------------------------------------------------------------------------------------


def _write_trace(path, events):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, handle)


def test_a_chrome_trace_is_read_into_seconds_threads_and_ops(tmp_path):
    events = [
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "tf_XLAPjRtCpuClient/123"}},
        {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "python"}},
        {"ph": "X", "pid": 1, "tid": 3, "ts": 100.0, "dur": 50.0, "name": "PjitFunction(f)"},
        {"ph": "X", "pid": 1, "tid": 7, "ts": 130.0, "dur": 1000.0, "name": "fusion",
         "args": {"hlo_op": "fusion", "hlo_module": "jit_f"}},
        {"ph": "X", "pid": 1, "tid": 7, "ts": 1130.0, "dur": 500.0, "name": "fusion.1",
         "args": {"hlo_op": "fusion.1", "hlo_module": "jit_f"}},
        {"ph": "X", "pid": 1, "tid": 7, "ts": 2130.0, "dur": 3000.0, "name": "fusion",
         "args": {"hlo_op": "fusion", "hlo_module": "jit_f"}},
        {"ph": "i", "pid": 1, "tid": 7, "ts": 5.0, "name": "instant"},
    ]
    _write_trace(tmp_path / "host.trace.json.gz", events)
    trace = sl.read_trace(tmp_path)  # the folder: its newest trace file
    assert trace.threads == ("python", "tf_XLAPjRtCpuClient/123")
    assert [(e.name, round(e.start_s * 1e6), round(e.duration_s * 1e6)) for e in trace.events] == [
        ("PjitFunction(f)", 0, 50), ("fusion", 30, 1000), ("fusion.1", 1030, 500), ("fusion", 2030, 3000)]
    assert [(r.name, r.calls, r.total_s, r.mean_s) for r in trace.ops] == [
        ("fusion", 2, pytest.approx(4e-3), pytest.approx(2e-3)), ("fusion.1", 1, pytest.approx(5e-4), 5e-4)]
    assert trace.duration_s == pytest.approx(5.03e-3)
    assert "| fusion | jit_f | 2 | 4 ms | 2 ms | 89% |" in str(trace)


def test_what_is_not_a_trace_is_a_scalelib_error(tmp_path):
    with pytest.raises(sl.InvalidValueError, match=r"^`path`: no \*\.trace\.json\.gz under"):
        sl.read_trace(tmp_path)
    (tmp_path / "bad.trace.json.gz").write_text("not gzip")
    with pytest.raises(sl.InvalidValueError, match=r"is not a gzipped JSON trace \(BadGzipFile\)$"):
        sl.read_trace(tmp_path / "bad.trace.json.gz")
    with pytest.raises(sl.InvalidValueError, match=r"^`path`: no such file or folder: '/nonexistent'$"):
        sl.read_trace("/nonexistent")


def test_a_captured_trace_holds_each_run_of_each_kernel_the_hlo_names(tmp_path):
    keys = jax.random.split(jax.random.key(0), 3)
    args = (jax.random.normal(keys[0], (B, D)), jax.random.normal(keys[1], (D, F)), jax.random.normal(keys[2], (F,)))
    path = sl.capture_trace(mlp, *args, logdir=tmp_path, repeats=3)
    assert path.endswith(".trace.json.gz") and path.startswith(str(tmp_path))
    trace = sl.read_trace(path)
    names = {op.name for op in sl.hlo_summary(jax.jit(mlp).lower(*args).compile().as_text()).fusions}
    assert {r.name for r in trace.ops} == names
    assert all(r.calls == 3 and r.total_s > 0 for r in trace.ops)
    assert {r.module for r in trace.ops} == {"jit_mlp"}
    ax = sl.plot_trace(trace)
    assert ax.get_xlabel() == "time since the trace began (ms)" and ax.get_ylabel() == "thread"
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {f"XLA op: {n}" for n in names}
    plt.close("all")


def test_a_failed_capture_leaves_the_profiler_stopped_so_the_next_capture_works(tmp_path):
    # regression (issue 18): a file as `logdir` failed, but left JAX's profiler started, and every later
    # capture_trace in the process failed with "Profile has already been started"
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    with pytest.raises(sl.InvalidValueError, match=r"^`logdir` must be a folder \(new or existing\), got '.*"
                                                   r"not-a-folder', which is a file$"):
        sl.capture_trace(jnp.sin, jnp.ones(8), logdir=a_file, repeats=1)
    with pytest.raises(sl.InvalidValueError, match=r"which lies under '.*not-a-folder', a file$"):
        sl.capture_trace(jnp.sin, jnp.ones(8), logdir=a_file / "sub", repeats=1)
    assert sl.capture_trace(jnp.sin, jnp.ones(8), logdir=tmp_path / "trace", repeats=1).endswith(".trace.json.gz")


def test_a_profiler_that_cannot_write_its_trace_is_stopped_all_the_same(tmp_path, monkeypatch):
    # JAX's stop_trace leaves the profiler marked running when it cannot write (as with a file for a folder)
    real_stop = jax.profiler.stop_trace

    def stop_then_fail():
        real_stop()
        jax.profiler.start_trace(str(tmp_path / "left-running"))  # what a failed export leaves behind
        raise RuntimeError("FAILED_PRECONDITION: could not write")

    monkeypatch.setattr(jax.profiler, "stop_trace", stop_then_fail)
    with pytest.raises(sl.InvalidValueError, match=r"^`logdir`: the JAX profiler could not write a trace under "
                                                   r"'.*' \(FAILED_PRECONDITION: could not write\)$"):
        sl.capture_trace(jnp.sin, jnp.ones(8), logdir=tmp_path / "first", repeats=1)
    monkeypatch.setattr(jax.profiler, "stop_trace", real_stop)
    assert sl.capture_trace(jnp.sin, jnp.ones(8), logdir=tmp_path / "second", repeats=1).endswith(".trace.json.gz")


def test_a_prediction_is_chapter_1s_roofline_of_xlas_count():
    chip = sl.ChipSpec("slow-test-chip", "cpu", "a test", f32_flops_per_s=1e9, hbm_bytes_per_s=1e9)
    x = jnp.ones((64, 64))
    check = sl.compare_with_roofline(jnp.matmul, x, x, chip=chip, repeats=2, name="matmul 64")
    flops, nbytes = sl.matmul_flops(64, 64, 64), sl.matmul_bytes(64, 64, 64, dtype="f32")
    assert check.predicted_s == max(flops / 1e9, nbytes / 1e9) and check.bound == "compute"
    assert check.measured_s > 0 and check.ratio == check.measured_s / check.predicted_s
    rows = sl.prediction_table([check]).splitlines()
    assert len(rows) == 3 and rows[2].startswith("| matmul 64 | 5.24e5 FLOP | 49.2 kB | 10.7 FLOP/B | compute | 524 µs |")


# --- on 8 simulated devices ----------------------------------------------------------------------

SHARDED = textwrap.dedent("""
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import json
    import jax.numpy as jnp
    import scalelib as sl

    out = {}
    def two_matmuls(w1, w2, x):
        return jnp.einsum("wf,bf->bw", w2, jnp.einsum("fw,bw->bf", w1, x))
    for name, axes, shapes, specs in [
            ("exercise", {"Y": 4, "X": 2}, [(4096, 512), (512, 4096), (16, 512)], [("Y", None), (None, "Y"), ("X", None)]),
            ("worked", {"Y": 8}, [(4096, 1024), (1024, 4096), (8, 1024)], [("Y", None), (None, "Y"), ()])]:
        mesh = sl.simulated_mesh(axes)
        at = lambda *a: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*a))
        args = [jax.ShapeDtypeStruct(s, jnp.float32, sharding=at(*p)) for s, p in zip(shapes, specs)]
        s = sl.hlo_summary(jax.jit(two_matmuls).lower(*args).compile().as_text(), mesh=mesh)
        out[name] = {"listing": s.listing() + "\\n", "partitions": s.num_partitions,
                     "global": [list(p.global_shape) for p in sorted(s.parameters, key=lambda p: p.operands[0])],
                     "collectives": [[c.kind, list(c.axes), len(c.groups[0]), len(c.groups)] for c in s.collectives],
                     "per_device_flops": sl.cost_analysis(two_matmuls, *args).flops}

    def layer(x, w_in, w_out):
        return x + jax.nn.gelu(x @ w_in) @ w_out
    mesh = sl.simulated_mesh({"X": 2, "Y": 4})
    at = lambda *a: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*a))
    x = jax.ShapeDtypeStruct((16, 256), jnp.float32, sharding=at("X"))
    w_in = jax.ShapeDtypeStruct((256, 1024), jnp.float32, sharding=at(("X", "Y")))
    w_out = jax.ShapeDtypeStruct((1024, 256), jnp.float32, sharding=at(None, ("X", "Y")))
    fixed = lambda x, *w: layer(jax.lax.with_sharding_constraint(x, at(("X", "Y"))), *w)
    whole = sl.cost_analysis(layer, *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, w_in, w_out))).flops
    out["layer"] = [sl.cost_analysis(f, x, w_in, w_out).flops / whole for f in (layer, fixed)]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def sharded():
    run = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_exercise_9_7s_stored_hlo_is_what_xla_compiles_today(sharded):
    assert sharded["exercise"]["listing"] == ch09.Q1_HLO


def test_the_global_shapes_read_from_the_hlo_are_the_programs(sharded):
    # parameters 0, 1, 2: w1 [F, D], w2 [D, F], x [B, D]
    assert sharded["exercise"]["global"] == [[4096, 512], [512, 4096], [16, 512]]
    assert sharded["worked"]["global"] == [[4096, 1024], [1024, 4096], [8, 1024]]
    assert list(get_exercise("9.7").reference().value) == [16, 512, 4096]


def test_the_all_reduce_runs_over_the_model_axis_in_groups_of_its_size(sharded):
    # 2 groups of 4 devices on the 2 x 4 mesh (the book's {0,16,...}: one group per data-parallel replica)
    assert sharded["exercise"]["collectives"] == [["all-reduce", ["Y"], 4, 2]]
    assert sharded["worked"]["collectives"] == [["all-reduce", ["Y"], 8, 1]]
    assert sharded["exercise"]["partitions"] == sharded["worked"]["partitions"] == 8


def test_the_cost_analysis_of_a_sharded_module_counts_one_devices_work(sharded):
    # the exercise's two matmuls, 2·B·D·F each, split over 8 devices (4-way F x 2-way B), and the all-reduce's
    # one add per element of each device's [8, 512] result
    assert sharded["exercise"]["per_device_flops"] == 2 * (2 * 16 * 512 * 4096) / 8 + 8 * 512


def test_a_batch_sharded_over_x_only_makes_the_y_devices_repeat_the_work_until_constrained(sharded):
    default, fixed = sharded["layer"]
    assert default == pytest.approx(1 / 2, rel=0.01) and fixed == pytest.approx(1 / 8, rel=0.01)
