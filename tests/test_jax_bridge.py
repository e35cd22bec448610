"""The bridge to JAX: the collectives XLA compiles for a sharded matmul on 8 simulated CPU devices,
read from the compiled HLO, against the book's four cases; the HLO parser on real snippets; bad input.

JAX fixes its device count when its backends start, and other test files start them first (with one
device), so the compiling checks run in one fresh Python process that asks for 8 devices before
anything else; the parser and the input checks need no devices and run here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import scalelib as sl
from scalelib._jax_bridge import parse_collectives

SHAPES = ((64, 128), (128, 256))  # A [I, J], B [J, K], bf16 operands
A_BYTES, B_BYTES, C_BYTES = 64 * 128 * 4, 128 * 256 * 4, 64 * 256 * 4  # f32: CPU XLA computes bf16 in f32
M24, M42 = {"X": 2, "Y": 4}, {"X": 4, "Y": 2}
M42_YX = {"Y": 4, "X": 2}  # the same devices, Y the major axis

# (id, mesh, a_spec, b_spec, out_spec, expected [(kind, axes, bytes per device)], what differs from a TPU)
MATMULS = [
    # case 1: no contracting dimension sharded: no communication
    ("replicated-2x4", M24, (None, None), (None, None), None, [], ""),
    ("replicated-4x2", M42, (None, None), (None, None), None, [], ""),
    ("I_X.K_Y-2x4", M24, ("X", None), (None, "Y"), None, [], ""),
    ("I_Y.K_X-4x2", M42, ("Y", None), (None, "X"), None, [], ""),
    # case 2: one operand sharded on the contracting dimension: AllGather it first
    ("J_X-2x4", M24, (None, "X"), (None, None), None, [("all-gather", ("X",), A_BYTES)], "f32 bytes"),
    ("J_Y-2x4", M24, (None, "Y"), (None, None), None, [("all-gather", ("Y",), A_BYTES)], "f32 bytes"),
    ("J_X-4x2", M42, (None, "X"), (None, None), None, [("all-gather", ("X",), A_BYTES)], "f32 bytes"),
    ("J_Y-4x2", M42, (None, "Y"), (None, None), None, [("all-gather", ("Y",), A_BYTES)], "f32 bytes"),
    ("J_XY-2x4", M24, (None, ("X", "Y")), (None, None), None, [("all-gather", ("X", "Y"), A_BYTES)], "f32 bytes"),
    ("J_YX-2x4", M24, (None, ("Y", "X")), (None, None), None, [("all-gather", ("Y", "X"), A_BYTES)], "f32 bytes"),
    ("J_X-Y4X2", M42_YX, (None, "X"), (None, None), None, [("all-gather", ("X",), A_BYTES)], "f32 bytes"),
    ("J_YX-Y4X2", M42_YX, (None, ("Y", "X")), (None, None), None, [("all-gather", ("Y", "X"), A_BYTES)],
     "f32 bytes"),
    # case 3: both sharded on the contracting dimension along the same axis: AllReduce the partial sums
    ("JX.JX-2x4", M24, (None, "X"), ("X", None), None, [("all-reduce", ("X",), C_BYTES)], "f32 bytes"),
    ("JY.JY-2x4", M24, (None, "Y"), ("Y", None), None, [("all-reduce", ("Y",), C_BYTES)], "f32 bytes"),
    ("JX.JX-4x2", M42, (None, "X"), ("X", None), None, [("all-reduce", ("X",), C_BYTES)], "f32 bytes"),
    ("JY.JY-4x2", M42, (None, "Y"), ("Y", None), None, [("all-reduce", ("Y",), C_BYTES)], "f32 bytes"),
    ("JXY.JXY-2x4", M24, (None, ("X", "Y")), (("X", "Y"), None), None, [("all-reduce", ("X", "Y"), C_BYTES)],
     "f32 bytes"),
    ("JX.JX-Y4X2", M42_YX, (None, "X"), ("X", None), None, [("all-reduce", ("X",), C_BYTES)], "f32 bytes"),
    # ... into a result sharded along that axis: a TPU ReduceScatters; CPU XLA AllReduces and slices
    ("JX.JX->I_X-4x2", M42, (None, "X"), ("X", None), ("X", None), [("all-reduce", ("X",), C_BYTES)],
     "all-reduce + dynamic-slice for a reduce-scatter; f32 bytes"),
    ("JY.JY->I_Y-2x4", M24, (None, "Y"), ("Y", None), ("Y", None), [("all-reduce", ("Y",), C_BYTES)],
     "all-reduce + dynamic-slice for a reduce-scatter; f32 bytes"),
    # 2x4, the 2-long X: XLA all-reduces only the rows each device keeps and swaps them into place
    ("JX.JX->I_X-2x4", M24, (None, "X"), ("X", None), ("X", None),
     [("all-reduce", ("X",), C_BYTES // 2), ("collective-permute", ("X", "Y"), C_BYTES // 2)],
     "all-reduce of half the rows + collective-permute for a reduce-scatter; f32 bytes"),
    # case 4: a non-contracting dimension of both sharded along the same axis: AllGather one
    ("IX.KX-4x2", M42, ("X", None), (None, "X"), None, [("all-gather", ("X",), A_BYTES)], "f32 bytes"),
    ("IY.KY-2x4", M24, ("Y", None), (None, "Y"), None, [("all-gather", ("Y",), A_BYTES)], "f32 bytes"),
    ("IX.KX->I_X-4x2", M42, ("X", None), (None, "X"), ("X", None), [("all-gather", ("X",), B_BYTES)], "f32 bytes"),
    # along the 2-long X of a 2x4 mesh, XLA first moves A from X onto the 4-long Y (a permute), then gathers on Y
    ("IX.KX-2x4", M24, ("X", None), (None, "X"), None,
     [("collective-permute", ("X", "Y"), A_BYTES // 4), ("all-gather", ("Y",), A_BYTES)],
     "reshards A onto Y (collective-permute), then all-gathers over Y; f32 bytes"),
    ("IX.KX-Y4X2", M42_YX, ("X", None), (None, "X"), None,
     [("collective-permute", ("Y", "X"), A_BYTES // 4), ("all-gather", ("Y",), A_BYTES)],
     "reshards A onto Y (collective-permute), then all-gathers over Y; f32 bytes"),
    ("IY.KY-Y4X2", M42_YX, ("Y", None), (None, "Y"), None, [("all-gather", ("Y",), A_BYTES)], "f32 bytes"),
]

SCRIPT = textwrap.dedent("""
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import json, sys
    from functools import partial
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import scalelib as sl

    cases = json.loads(sys.argv[1])
    row = lambda c: [c.kind, list(c.axes) if c.axes is not None else None, list(c.shape), c.dtype, c.nbytes]
    out = {"matmuls": {}}
    for name, mesh, a, b, o in cases:
        spec = lambda s: None if s is None else tuple(tuple(e) if isinstance(e, list) else e for e in s)
        found = sl.sharded_matmul_collectives(spec(a), spec(b), [[64, 128], [128, 256]], mesh, out_spec=spec(o))
        out["matmuls"][name] = [row(c) for c in found]
    mesh = sl.simulated_mesh((2, 4))
    out["mesh"] = [str(mesh), [d.id for d in mesh.devices.flat]]

    @partial(jax.shard_map, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    def every_kind(a):
        return (jax.lax.psum(a, "X") + jax.lax.all_gather(a, "Y", axis=1, tiled=True)[:, :32]
                + jax.lax.psum_scatter(jnp.tile(a, (1, 4)), "Y", scatter_dimension=1, tiled=True)
                + jax.lax.ppermute(a, "Y", [(i, (i + 1) % 4) for i in range(4)])
                + jax.lax.all_to_all(a, "Y", 0, 0, tiled=True))

    x = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
    out["shard_map"] = [row(c) for c in sl.compiled_collectives(every_kind, x)]
    try:
        sl.compiled_collectives(lambda a: a @ a, x)
    except sl.InvalidValueError as err:
        out["bad_args"] = str(err)
    out["compare"] = {}
    for expr, mesh in json.loads(sys.argv[2]):
        c = sl.compare_with_plan(expr, {"I": 64, "J": 128, "K": 256}, mesh)
        out["compare"][f"{expr} on {mesh}"] = {"agrees": c.agrees, "rows": [[r.verdict, r.note] for r in c.rows]}
    out["batched"] = {}
    for expr, mesh in json.loads(sys.argv[3]):
        c = sl.compare_with_plan(expr, {"B": 8, "I": 16, "J": 32, "K": 64}, mesh)
        out["batched"][f"{expr} on {mesh}"] = {"agrees": c.agrees, "rows": [[r.verdict, r.note] for r in c.rows],
                                               "xla_differs": list(c.xla_differs)}
    out["compare_table"] = str(sl.compare_with_plan("A[I, J_X] · B[J_X, K] -> C[I_X, K]",
                                                    {"I": 64, "J": 128, "K": 256}, {"X": 4, "Y": 2}))
    print(json.dumps(out))
""")

TOO_FEW = textwrap.dedent("""
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    jax.devices()
    import scalelib as sl
    try:
        sl.simulated_mesh((2, 4))
    except sl.InvalidValueError as err:
        print(err)
""")


@pytest.fixture(scope="module")
def compiled():
    cases = [[name, mesh, a, b, o] for name, mesh, a, b, o, _, _ in MATMULS]
    compare = [[expr, mesh] for expr, mesh, _, _ in COMPARED]
    batched = [[expr, mesh] for expr, mesh, _, _ in BATCHED]
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases), json.dumps(compare), json.dumps(batched)],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name, mesh, a_spec, b_spec, out_spec, expected, differs", MATMULS,
                         ids=[m[0] for m in MATMULS])
def test_the_compiled_collectives_of_each_case_of_a_sharded_matmul(compiled, name, mesh, a_spec, b_spec, out_spec,
                                                                  expected, differs):
    found = compiled["matmuls"][name]
    assert [(kind, tuple(axes), nbytes) for kind, axes, _, _, nbytes in found] == expected
    if expected:  # CPU XLA carries a bf16 matmul's collectives in f32: twice the bytes a TPU moves
        assert "f32 bytes" in differs and {dtype for _, _, _, dtype, _ in found} == {"f32"}


def test_replicated_operands_never_communicate(compiled):
    assert all(compiled["matmuls"][m[0]] == [] for m in MATMULS if m[2] == m[3] == (None, None))


def test_every_kind_from_shard_map_is_read_with_its_axis_shapes_and_bytes(compiled):
    # shard_map on the 2x4 mesh, a block of [32, 32] f32 per device (4096 B)
    assert compiled["shard_map"] == [
        ["all-reduce", ["X"], [32, 32], "f32", 4096],                # psum over X
        ["collective-permute", ["Y"], [32, 32], "f32", 4096],        # ppermute along Y
        ["all-gather", ["Y"], [32, 128], "f32", 16384],              # the gathered result
        ["reduce-scatter", ["Y"], [32, 128], "f32", 16384],          # the operand, the same V
        ["all-to-all", ["Y"], [[8, 32]] * 4, "f32", 4096],          # a tuple of 4 pieces
    ]


def test_the_simulated_mesh_has_named_automatic_axes_over_devices_in_order(compiled):
    assert compiled["mesh"] == ["Mesh('X': 2, 'Y': 4, axis_types=(Auto, Auto))", list(range(8))]


def test_arguments_that_do_not_compile_are_a_scalelib_error(compiled):
    assert compiled["bad_args"].startswith("`args`: jax.jit(fn) could not compile for these arguments (TypeError")


def test_a_mesh_larger_than_the_devices_says_how_to_get_more():
    run = subprocess.run([sys.executable, "-c", TOO_FEW], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == (
        '`shape`: a mesh of 2 x 4 needs 8 devices, but JAX has 2; run import jax; '
        'jax.config.update("jax_num_cpu_devices", 8) before JAX starts (a fresh Python process or kernel)')


# --- the parser, on HLO as XLA writes it -------------------------------------------------

# Compiled here (JAX 0.10.2, CPU, 8 devices): XLA's mesh form of replica groups, with and without device_ids.
CPU_ALL_REDUCE = ("%all-reduce.1 = f32[64,256]{1,0} all-reduce(%ynn_fusion), channel_id=1, replica_groups="
                  "mesh['axis_0'=1,'axis_1'=2,'axis_2'=4] {'axis_1'}, use_global_device_ids=true, "
                  "to_apply=%add.clone_promoted, metadata={op_name=\"jit(<lambda>)/dot_general\" stack_frame_id=3}")
CPU_ALL_GATHER_T = ("%all-gather = f32[64,128]{1,0} all-gather(%wrapped_convert), channel_id=1, replica_groups="
                    "mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], device_ids=([2,4]T(1,0)) {'axis_0'}, dimensions={0}, "
                    "use_global_device_ids=true, metadata={op_name=\"jit(<lambda>)/dot_general\" stack_frame_id=3}")
CPU_ALL_GATHER_XY = ("%all-gather = f32[64,128]{0,1} all-gather(%convert_copy_fusion), channel_id=1, "
                     "replica_groups=mesh['axis_0'=1,'axis_1'=8], device_ids=([2,4]T(1,0)) {'axis_1'}, "
                     "dimensions={1}, use_global_device_ids=true")
CPU_PERMUTE = ("%collective-permute = f32[16,128]{1,0} collective-permute(%convert_convert_fusion.2), channel_id=1, "
               "source_target_pairs={{0,0},{1,4},{2,1},{3,5},{4,2},{5,6},{6,3},{7,7}}, metadata={op_name=\"x\"}")
CPU_SHARD_MAP = """
  %param.1 = f32[32,32]{1,0} parameter(0), sharding={devices=[2,4]<=[8]}, metadata={op_name="a"}
  %reduce_scatter.7 = f32[32,32]{0,1} reduce-scatter(%copy_bitcast_fusion), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, dimensions={1}, to_apply=%region_1.0, metadata={op_name="jit(f)/shard_map/reduce_scatter" stack_frame_id=17}
  %copy_bitcast_fusion = f32[32,128]{0,1} fusion(%param.1), kind=kLoop, calls=%fused_computation.3
  %all-to-all = (f32[8,32]{1,0}, f32[8,32]{1,0}, f32[8,32]{1,0}, f32[8,32]{1,0}) all-to-all(%wrapped_slice, %wrapped_slice.1, %wrapped_slice.2, %wrapped_slice.3), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, metadata={op_name="jit(f)/shard_map/all_to_all" stack_frame_id=19}
  %get-tuple-element = f32[8,32]{1,0} get-tuple-element(%all-to-all), index=0
  %psum_invariant.14 = f32[32,32]{1,0} all-reduce(%param.1), channel_id=1, replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=%region_0.0
"""
# As written in XLA's own tests (xla/tools/hlo_control_flow_flattening_test.cc): an async all-gather,
# over several lines, operand shapes inline; and a GPU's async collective-permute.
XLA_ASYNC = """
  ENTRY AllGatherStartAndDone {
    %input = f32[8,256,256] parameter(0)
    %ag-start = (f32[8,256,256], f32[16,256,256]) all-gather-start(
      f32[8,256,256] %input), replica_groups={{0,1}}, dimensions={0},
      metadata={op_type="AllGather" op_name="ag0"}
    ROOT %ag-done = f32[16,256,256] all-gather-done(
      (f32[8,256,256], f32[16,256,256]) %ag-start),
      metadata={op_type="AllGather" op_name="ag0"}
  }
"""
XLA_PERMUTE_START = ("%start = (s32[2]{0}, s32[2]{0}, u32[], u32[]) collective-permute-start(%a), channel_id=1, "
                     "source_target_pairs={{0,1},{1,0}}\n%done = s32[2]{0} collective-permute-done(%start)")
# The iota form, in XLA's spelling (xla/hlo/ir/replica_group_test.cc: a:(1)2 of an 8-mesh is [4,2]<=[2,4]T(1,0)).
IOTA = ("%ar = bf16[256]{0} all-reduce(bf16[256]{0} %p), replica_groups=[2,4]<=[8], to_apply=%add\n"
        "%ag = bf16[4,256]{1,0} all-gather(bf16[2,256]{1,0} %q), replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}\n"
        "%ar2 = bf16[256]{0} all-reduce-start(%p), replica_groups=mesh['a'=8] {'a':(1)2}, to_apply=%add")


def _rows(text, mesh=M24):
    return [(c.kind, c.axes, c.shape, c.dtype, c.nbytes) for c in parse_collectives(text, mesh=mesh)]


def test_xla_mesh_form_of_replica_groups_maps_back_to_mesh_axes():
    assert _rows(CPU_ALL_REDUCE) == [("all-reduce", ("X",), (64, 256), "f32", 65536)]
    assert _rows(CPU_ALL_GATHER_T) == [("all-gather", ("Y",), (64, 128), "f32", 32768)]
    assert _rows(CPU_ALL_GATHER_XY) == [("all-gather", ("Y", "X"), (64, 128), "f32", 32768)]
    assert _rows(CPU_ALL_REDUCE, M42) == [("all-reduce", None, (64, 256), "f32", 65536)]  # groups of 2 != X of 4
    assert parse_collectives(CPU_ALL_GATHER_T)[0].groups == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_listed_replica_groups_tuples_and_operands_found_by_name():
    rows = _rows(CPU_SHARD_MAP)
    assert rows == [("reduce-scatter", ("Y",), (32, 128), "f32", 16384),
                    ("all-to-all", ("Y",), ((8, 32),) * 4, "f32", 4096),
                    ("all-reduce", ("X",), (32, 32), "f32", 4096)]
    assert parse_collectives(CPU_SHARD_MAP)[0].operand == "f32[32,128]"


def test_a_collective_permute_runs_over_the_axes_its_pairs_cross():
    (c,) = parse_collectives(CPU_PERMUTE, mesh=M24)
    assert (c.kind, c.axes, c.nbytes) == ("collective-permute", ("X", "Y"), 16 * 128 * 4)
    assert c.groups[:2] == ((0, 0), (1, 4))


def test_async_start_counts_once_with_the_result_of_its_tuple():
    (c,) = parse_collectives(XLA_ASYNC, mesh={"X": 2})
    assert (c.kind, c.axes, c.shape, c.nbytes) == ("all-gather", ("X",), (16, 256, 256), 16 * 256 * 256 * 4)
    assert (c.operand, c.result) == ("f32[8,256,256]", "f32[16,256,256]")
    (p,) = parse_collectives(XLA_PERMUTE_START, mesh={"X": 2})
    assert (p.kind, p.axes, p.shape, p.dtype, p.nbytes) == ("collective-permute", ("X",), (2,), "s32", 8)


def test_iota_replica_groups_and_sub_axes():
    assert _rows(IOTA) == [("all-reduce", ("Y",), (256,), "bf16", 512),
                           ("all-gather", ("X",), (4, 256), "bf16", 2048),
                           ("all-reduce", ("X",), (256,), "bf16", 512)]
    assert parse_collectives(IOTA)[1].groups == ((0, 4), (1, 5), (2, 6), (3, 7))


def test_all_gather_and_reduce_scatter_count_the_same_bytes_as_transposes():
    gather = "%g = f32[64,128]{1,0} all-gather(f32[16,128]{1,0} %x), replica_groups={{0,1,2,3}}, dimensions={0}"
    scatter = "%s = f32[16,128]{1,0} reduce-scatter(f32[64,128]{1,0} %y), replica_groups={{0,1,2,3}}, dimensions={0}"
    assert parse_collectives(gather)[0].nbytes == parse_collectives(scatter)[0].nbytes == 64 * 128 * 4


def test_operands_after_xlas_index_comments_are_counted():
    # regression (issue 18): in a long operand list XLA writes /*index=5*/ before the sixth; that operand was lost,
    # so an 8-way all-to-all counted 7/8 of its bytes
    names = [f"%p{i}" for i in range(8)]
    params = "\n".join(f"{n} = f32[8,16]{{1,0}} parameter({i})" for i, n in enumerate(names))
    types = ["f32[8,16]{1,0}"] * 5 + ["/*index=5*/f32[8,16]{1,0}"] + ["f32[8,16]{1,0}"] * 2
    operands = names[:5] + ["/*index=5*/" + names[5]] + names[6:]
    text = (params + "\n%a2a = (" + ", ".join(types) + ") all-to-all(" + ", ".join(operands)
            + "), channel_id=1, replica_groups=[1,8]<=[8]")
    (c,) = parse_collectives(text, mesh={"X": 8})
    assert (c.kind, c.axes, c.nbytes) == ("all-to-all", ("X",), 8 * 8 * 16 * 4)


def test_text_without_collectives_gives_none():
    assert parse_collectives("HloModule m\nENTRY e {\n  ROOT %p = f32[4]{0} parameter(0)\n}") == []


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: sl.simulated_mesh((2, 0)), r"`shape` must be a sequence of whole numbers >= 1, got (2, 0)"),
    (lambda: sl.simulated_mesh((2, 4), axes=("X", "X")), r"`axes`: axis 'X' is given twice in ('X', 'X')"),
    (lambda: sl.simulated_mesh((2, 4), axes=("X",)), r"`axes` must name each of the 2 mesh axes once, got ('X',)"),
    (lambda: sl.simulated_mesh((2, 4), axes="XY"),
     r"`axes` must be a tuple of axis names such as ('X', 'Y'), got 'XY'"),
    (lambda: sl.simulated_mesh((1, 1, 1, 1)),
     r"`shape` has 4 axes; name them with a dict such as {'X': 2, 'Y': 2, 'Z': 2, 'W': 1}, got (1, 1, 1, 1)"),
    (lambda: sl.sharded_matmul_collectives(("X", None), (None, "X"), SHAPES, {"X": 2, "Y": 4}, out_spec=("X", "X")),
     r"`out_spec`: mesh axis 'X' is used twice in ('X', 'X'); an array may use each mesh axis at most once"),
    (lambda: sl.sharded_matmul_collectives(("Z", None), (None, None), SHAPES, M24),
     r"`a_spec`: unknown mesh axis 'Z'; the mesh has X, Y"),
    (lambda: sl.sharded_matmul_collectives((None,), (None, None), SHAPES, M24),
     r"`a_spec` must give one entry per dimension (2), each None, an axis name or a tuple of names, "
     r"e.g. ('X', None), got (None,)"),
    (lambda: sl.sharded_matmul_collectives(((6, None)), (None, None), SHAPES, M24),
     r"`a_spec`: each entry must be None, an axis name or a tuple of names, got 6 in (6, None)"),
    (lambda: sl.sharded_matmul_collectives((None, None), ("Y", None), ((6, 10), (10, 4)), M24),
     r"`b_spec`: a dimension of 10 does not divide into 4 shards along 'Y'; choose a multiple of 4"),
    (lambda: sl.sharded_matmul_collectives((None, None), (None, None), ((6, 12), (10, 4)), M24),
     r"`shapes` must be ((I, J), (J, K)) with the same J, got ((6, 12), (10, 4))"),
    (lambda: sl.sharded_matmul_collectives((None, None), (None, None), SHAPES, M24, dtype="int4"),
     r"`dtype` must be one of f32, bf16, fp16, got 'int4'"),
    (lambda: sl.compiled_collectives("matmul"), r"`fn` must be a function of JAX arrays, got 'matmul'"),
    (lambda: sl.parse_collectives(b"HloModule"),
     r"`hlo_text` must be the text of an HLO module (a str), got b'HloModule'"),
    # regressions (issue 18): numpy's reshape error on iota groups that do not hold the devices; q7 taken as 7 bits
    (lambda: sl.parse_collectives("%ar = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups=[3,3]<=[8]"),
     r"`hlo_text`: cannot read the replica groups [3,3]<=[8] (3x3 groups do not hold the 8 devices); XLA writes "
     r"[groups,size]<=[devices], e.g. [2,4]<=[8] or [4,2]<=[2,4]T(1,0)"),
    (lambda: sl.hlo_summary("%ar = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups=[3,3]<=[8]"),
     r"`hlo_text`: cannot read the replica groups [3,3]<=[8] (3x3 groups do not hold the 8 devices); XLA writes "
     r"[groups,size]<=[devices], e.g. [2,4]<=[8] or [4,2]<=[2,4]T(1,0)"),
    (lambda: sl.parse_collectives("%ar = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups=[2,4]<=[2,4]T(0,0)"),
     r"`hlo_text`: cannot read the replica groups [2,4]<=[2,4]T(0,0) (T(0,0) is not an order of the 2 "
     r"dimensions); XLA writes [groups,size]<=[devices], e.g. [2,4]<=[8] or [4,2]<=[2,4]T(1,0)"),
    (lambda: sl.parse_collectives("%ar = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups=mesh['a'=8], "
                                  "device_ids=([3,3]<=[8]) {'a'}"),
     r"`hlo_text`: cannot read the replica groups [3,3]<=[8] (3x3 groups do not hold the 8 devices); XLA writes "
     r"[groups,size]<=[devices], e.g. [2,4]<=[8] or [4,2]<=[2,4]T(1,0)"),
    (lambda: sl.parse_collectives("%ar = q7[4]{0} all-reduce(q7[4]{0} %p), replica_groups={{0,1}}"),
     r"`hlo_text`: unknown HLO element type 'q7' in 'ar = q7[4]{0} all-reduce(...)'; expected one of pred, s2, "
     r"s4, s8, s16, s32, s64, u2, u4, u8, u16, u32, u64, f16, bf16, f32, f64, c64, c128, f4e2m1fn, f8e3m4, "
     r"f8e4m3, f8e4m3fn, f8e4m3fnuz, f8e4m3b11fnuz, f8e5m2, f8e5m2fnuz, f8e8m0fnu"),
], ids=["zero-axis", "axis-twice", "names-short", "names-str", "4-axes", "spec-axis-twice", "unknown-axis",
        "spec-length", "spec-entry", "not-divisible", "shapes-J", "dtype", "fn", "hlo-bytes", "iota-3x3-of-8",
        "summary-iota-3x3-of-8", "iota-bad-transpose", "mesh-device-ids-3x3-of-8", "dtype-q7"])
def test_bad_input_is_a_scalelib_error_that_names_the_argument(call, message):
    with pytest.raises(sl.InvalidValueError) as err:
        call()
    assert str(err.value) == message


def test_a_collective_prints_as_a_line_of_the_chapters_table():
    assert [str(c) for c in parse_collectives(CPU_SHARD_MAP, mesh=M24)] == [
        "reduce-scatter over Y of f32[32,128]: 16.4 kB per device",
        "all-to-all over Y of 4 x f32[8,32]: 4.1 kB per device",
        "all-reduce over X of f32[32,32]: 4.1 kB per device"]
    assert str(parse_collectives(CPU_ALL_GATHER_XY, mesh=M24)[0]) == (
        "all-gather over YX of f32[64,128]: 32.8 kB per device")


# --- scalelib's plan beside the compiler (chapter 3's table) -----------------------------

SIZES = {"I": 64, "J": 128, "K": 256}
# (matmul, mesh, the verdicts of the rows, XLA's different but equivalent choices named in the notes)
COMPARED = [
    ("A[I, J] · B[J, K]", M42, [], ""),
    ("A[I_X, J] · B[J, K_Y]", M24, [], ""),
    ("A[I, J_X] · B[J, K]", M24, ["same"], "f32 on CPU (2x the bytes)"),
    ("A[I, J_XY] · B[J, K]", M42, ["same"], "f32 on CPU (2x the bytes)"),
    ("A[I, J_X] · B[J_X, K]", M42, ["same"], "f32 on CPU (2x the bytes)"),
    ("A[I, J_Y] · B[J_Y, K]", M24, ["same"], "f32 on CPU (2x the bytes)"),
    ("A[I, J_X] · B[J_X, K] -> C[I_X, K]", M42, ["equivalent"],
     "all-reduce + slice in place of reduce-scatter (XLA CPU); f32 on CPU (2x the bytes)"),
    ("A[I, J_X] · B[J_X, K] -> C[I_X, K]", M24, ["equivalent"],
     "all-reduce of the rows each device keeps, then a collective-permute, in place of reduce-scatter (XLA CPU); "
     "f32 on CPU (2x the bytes)"),
    ("A[I_X, J] · B[J, K_X]", M42, ["same"], "f32 on CPU (2x the bytes)"),
    ("A[I_X, J] · B[J, K_X]", M24, ["equivalent"],
     "collective-permute onto Y, then all-gather over Y, in place of all-gather over X (the same bytes gathered); "
     "f32 on CPU (2x the bytes)"),
    ("A[I_Y, J] · B[J, K_Y]", M42_YX, ["same"], "f32 on CPU (2x the bytes)"),
]


# Batched einsums (a dimension kept in both operands and the result), compiled as jnp.einsum: (matmul, mesh, the
# verdicts of the rows, XLA's own strategy where it differs)
BATCHED = [
    ("A[B_X, I, J] · B[B_X, J, K] -> C[B_X, I, K]", M42, [], ""),  # the same batch blocks: nothing to move
    ("A[B_X, I, J] · B[B, J, K] -> C[B_X, I, K]", M42, [], ""),  # B's batch sliced to A's, for free
    ("A[B_X, I, J_Y] · B[B_X, J_Y, K] -> C[B_X, I, K]", M42, ["same"], ""),  # partial sums over Y: AllReduce_Y
    ("A[B_X, I, J_Y] · B[B_X, J_Y, K] -> C[B_X, I_Y, K]", M24, ["equivalent"], ""),  # ... or ReduceScatter_Y
    ("A[B_XY, I, J] · B[B_X, J, K] -> C[B_X, I, K]", M42, ["same"], ""),  # B sliced to B_XY, C gathered over Y
    ("A[I, J_X] · B[B_Y, J_X, K] -> C[B_Y, I, K]", M24, ["same"], ""),  # a batch dimension in one operand only
    # batch blocks on different axes: the plan gathers both; XLA swaps blocks with a collective-permute
    ("A[B_X, I, J] · B[B_Y, J, K] -> C[B_X, I, K]", M42, None, "permute"),
]


def test_batched_einsums_are_planned_as_xla_compiles_them(compiled):
    from scalelib._jax_bridge import XLA_STRATEGIES

    for expr, mesh, verdicts, differs in BATCHED:
        got = compiled["batched"][f"{expr} on {mesh}"]
        if verdicts is None:
            assert not got["agrees"] and got["xla_differs"] == [XLA_STRATEGIES[differs]], (expr, mesh, got)
        else:
            assert got["agrees"] and [v for v, _ in got["rows"]] == verdicts, (expr, mesh, got)


def test_scalelibs_plan_agrees_with_the_compiled_collectives_case_by_case(compiled):
    for expr, mesh, verdicts, note in COMPARED:
        got = compiled["compare"][f"{expr} on {mesh}"]
        assert got["agrees"], (expr, mesh, got)
        assert [v for v, _ in got["rows"]] == verdicts, (expr, mesh, got)
        assert [n for _, n in got["rows"]] == ([note] if verdicts else []), (expr, mesh, got)


def test_the_comparison_prints_as_the_chapters_table(compiled):
    assert compiled["compare_table"].splitlines() == [
        "A[I, J_X] · B[J_X, K] → C[I_X, K]  (case 3)",
        "| planned | bytes | compiled (CPU XLA) | bytes | verdict |",
        "|---|---|---|---|---|",
        "| ReduceScatter over X | 32.8 kB | all-reduce over X | 65.5 kB | equivalent: all-reduce + slice in place "
        "of reduce-scatter (XLA CPU); f32 on CPU (2x the bytes) |"]


# --- pairing a plan with compiled collectives: axes and bytes must match --------------------------------

def _compiled(kind, axes, nbytes, dtype="f32"):
    return sl.CompiledCollective(kind, axes, (nbytes // 4,), dtype, nbytes)


def test_an_allgather_is_matched_only_by_one_over_the_same_axes_moving_the_same_bytes():
    # regression (issue 18): a planned AG_Y of 262 kB was paired with a compiled AG_X of 2.1 MB and called equivalent
    from scalelib._jax_bridge import _pair

    (step,) = sl.plan_matmul("A[I, J_Y] · B[J, K]", {"I": 128, "J": 1024, "K": 64}, {"X": 8, "Y": 2}).steps
    assert (step.kind, step.axes, step.nbytes) == ("AllGather", ("Y",), 128 * 1024 * 2)
    V = step.nbytes
    rows = lambda *compiled: [(r.verdict, r.note) for r in _pair((step,), compiled, 2)]  # noqa: E731
    assert rows(_compiled("all-gather", ("Y",), V, "bf16")) == [("same", "")]
    assert rows(_compiled("all-gather", ("Y",), 2 * V)) == [("same", "f32 on CPU (2x the bytes)")]
    assert rows(_compiled("all-gather", ("Y",), int(2 * V * 1.005))) == [("same", "f32 on CPU (2x the bytes)")]
    assert rows(_compiled("all-gather", ("X",), 8 * V)) == [
        ("mismatch", "compiled over X, planned over Y; 2.1 MB of f32 compiled against 262 kB planned")]
    assert rows(_compiled("all-gather", ("X",), 2 * V)) == [("mismatch", "compiled over X, planned over Y")]
    assert rows(_compiled("all-gather", ("Y",), 4 * V)) == [
        ("mismatch", "1.05 MB of f32 compiled against 262 kB planned")]
    assert rows(_compiled("all-gather", ("Y",), 2 * V, "bf16")) == [
        ("mismatch", "524 kB of bf16 compiled against 262 kB planned")]
    assert rows(_compiled("all-reduce", ("Y",), V, "bf16")) == [
        ("only planned", "not in the compiled HLO"), ("only compiled", "not in scalelib's plan")]


def test_equivalent_always_names_its_reason_and_checks_the_bytes():
    from scalelib._jax_bridge import REASONS, _pair

    plan = sl.plan_matmul("A[I, J_X] · B[J_X, K] -> C[I_X, K]", {"I": 64, "J": 128, "K": 256}, {"X": 4, "Y": 2})
    (step,) = plan.steps
    assert step.kind == "ReduceScatter"
    V = step.nbytes
    ok = _pair((step,), (_compiled("all-reduce", ("X",), 2 * V),), 2)
    assert [(r.verdict, r.note) for r in ok] == [
        ("equivalent", REASONS["all-reduce for reduce-scatter"] + "; " + REASONS["f32"])]
    wrong = _pair((step,), (_compiled("all-reduce", ("X",), 3 * V),), 2)
    assert [r.verdict for r in wrong] == ["only planned", "only compiled"]
    # an AllToAll's bytes are each device's block, as the compiled all-to-all counts its operand
    (move,) = sl.plan_reshard("A[I_XY, K] -> A[I, K_XY]", {"I": 64, "K": 128}, {"X": 4, "Y": 2}).steps
    block = move.nbytes / move.group
    assert [r.verdict for r in _pair((move,), (_compiled("all-to-all", ("X", "Y"), int(2 * block)),), 2)] == ["same"]
    assert [r.verdict for r in _pair((move,), (_compiled("all-to-all", ("X", "Y"), int(2 * move.nbytes)),), 2)] == [
        "mismatch"]
