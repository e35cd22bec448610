"""Sharding notation (chapter 3): reading the book's A[I_X, J_Y], shard shapes and bytes, the latency-bound
regime, and the picture; the book's pop quizzes and Q1 reproduced."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl

MESH = {"X": 8, "Y": 4}


# --- reading the notation -------------------------------------------------------------------


def test_one_axis_per_dimension():
    s = sl.sharding("A[I_X, J_Y]", MESH)
    assert (s.name, s.dims, s.axes, s.unreduced) == ("A", ("I", "J"), (("X",), ("Y",)), ())
    assert s.mesh == MESH and str(s) == "A[I_X, J_Y]"


def test_two_axes_on_one_dimension_keep_their_order():
    assert sl.sharding("A[I_XY, J]", MESH).axes == (("X", "Y"), ())
    assert sl.sharding("A[I_YX, J]", MESH).axes == (("Y", "X"), ())


def test_unreduced_and_fully_replicated_arrays():
    c = sl.sharding("C[I, K]{U_X}", MESH)
    assert c.axes == ((), ()) and c.unreduced == ("X",) and str(c) == "C[I, K]{U_X}"
    assert sl.sharding("C[I, K]{U_XY}", MESH).unreduced == ("X", "Y")
    assert sl.sharding("C[I, K]{U_X, U_Y}", MESH).unreduced == ("X", "Y")
    r = sl.sharding("A[I, J]", MESH)
    assert r.axes == ((), ()) and r.copies() == 32


def test_spaces_an_unnamed_array_and_longer_axis_names():
    assert sl.sharding(" [ B_X , D_Y ] ", MESH).axes == (("X",), ("Y",))
    mesh = {"data": 4, "model": 2}
    assert sl.sharding("W[D_data, F_model]", mesh).axes == (("data",), ("model",))
    s = sl.sharding("W[D_{data,model}, F]", mesh)
    assert s.axes == (("data", "model"), ()) and str(s) == "W[D_{data,model}, F]"


def test_a_tpu_slice_is_a_mesh():
    s = sl.sharding("A[I_X, J_Z]", sl.tpu_slice((4, 4, 4), "tpu-v4p"))
    assert s.mesh == {"X": 4, "Y": 4, "Z": 4}


def test_the_sharding_prints_in_the_books_notation_and_reads_back():
    s = sl.sharding("A[I_XY, J]{U_Z}", {"X": 2, "Y": 2, "Z": 2})
    assert repr(s) == "Sharding('A[I_XY, J]{U_Z}', mesh={'X': 2, 'Y': 2, 'Z': 2})"
    assert sl.sharding(str(s), s.mesh) == s and hash(sl.sharding(str(s), s.mesh)) == hash(s)


# --- bad notation: exact errors that name the fix ------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("A[I_X, J_X]", "`text`: mesh axis 'X' shards both I and J in 'A[I_X, J_X]'; a mesh axis may split at most one "
                    "dimension of an array (or hold its partial sums): keep it in one place"),
    ("A[I_XX, J]", "`text`: mesh axis 'X' is given twice in 'A[I_XX, J]'; a mesh axis may split at most one "
                   "dimension of an array (or hold its partial sums): keep it in one place"),
    ("A[I_X, J]{U_X}", "`text`: mesh axis 'X' is unreduced and also shards I in 'A[I_X, J]{U_X}'; a mesh axis may "
                       "split at most one dimension of an array (or hold its partial sums): keep it in one place"),
    ("A[I_W, J]", "`text`: unknown mesh axis 'W' in 'A[I_W, J]': the mesh has axes X, Y; use one of them or add 'W' "
                  "to the mesh"),
    ("A[I, J]{U_Z}", "`text`: unknown mesh axis 'Z' in 'A[I, J]{U_Z}': the mesh has axes X, Y; use one of them or "
                     "add 'Z' to the mesh"),
    ("A[I, I]", "`text`: dimension 'I' is named twice in 'A[I, I]'; give each dimension its own name"),
    ("A[I_X, J", "`text`: cannot read 'A[I_X, J' as a sharding (a '[' without its ']', or the reverse); write "
                 "NAME[DIM_AXES, ...], e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or 'C[I, K]{U_X}'"),
    ("A", "`text`: cannot read 'A' as a sharding (no '[...]' holding the dimensions); write NAME[DIM_AXES, ...], "
          "e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or 'C[I, K]{U_X}'"),
    ("A[]", "`text`: cannot read 'A[]' as a sharding (an empty dimension); write NAME[DIM_AXES, ...], "
            "e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or 'C[I, K]{U_X}'"),
    ("A[I-X]", "`text`: cannot read 'A[I-X]' as a sharding ('I-X' is not a dimension such as 'I' or 'I_X'); write "
               "NAME[DIM_AXES, ...], e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or 'C[I, K]{U_X}'"),
    ("A[I]{X}", "`text`: cannot read 'A[I]{X}' as a sharding (the braces must say which axes hold partial sums, as "
                "{U_X} or {U_XY}, got {X}); write NAME[DIM_AXES, ...], e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or "
                "'C[I, K]{U_X}'"),
    ("A[I] B", "`text`: cannot read 'A[I] B' as a sharding (text that is neither a name, the dimensions in '[...]' "
               "nor partial sums in '{U_...}'); write NAME[DIM_AXES, ...], e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or "
               "'C[I, K]{U_X}'"),
])
def test_bad_notation_is_refused_with_the_fix(text, message):
    with pytest.raises(sl.InvalidValueError) as err:
        sl.sharding(text, MESH)
    assert str(err.value) == message


def test_a_bad_mesh_is_refused():
    with pytest.raises(sl.InvalidValueError, match=r"^`mesh` must be a mesh such as \{'X': 8, 'Y': 4\} or a TpuSlice, "
                                                   r"got \(8, 4\)$"):
        sl.sharding("A[I_X]", (8, 4))
    with pytest.raises(sl.InvalidValueError, match=r"^`mesh` must be a whole number >= 1, got 0$"):
        sl.sharding("A[I_X]", {"X": 0})
    with pytest.raises(sl.InvalidValueError, match=r"^`text` must be a sharding in the book's notation"):
        sl.sharding(3, MESH)


def test_a_dimension_that_does_not_split_evenly_names_the_fix():
    s = sl.sharding("A[I_XY, J]", MESH)
    with pytest.raises(sl.InvalidValueError) as err:
        s.shard_shape((1000, 4096))
    assert str(err.value) == ("`shape`: dimension I of size 1000 does not split evenly over X·Y (32 blocks) in "
                              "A[I_XY, J]; make I a multiple of 32 (e.g. 1024) or shard it over fewer mesh axes")
    with pytest.raises(sl.InvalidValueError, match=r"^`shape` must give 2 sizes, one per dimension of A\[I_XY, J\] "
                                                   r"\(I, J\), got \(1024,\)$"):
        s.shard_shape((1024,))
    with pytest.raises(sl.InvalidValueError, match=r"\(missing J\)$"):
        s.shard_shape({"I": 1024})


# --- shapes and bytes: the book's pop quizzes and Q1 ------------------------------------------


def test_pop_quiz_2d_sharding_across_one_axis():
    # fp32[1024, 4096] as A[I_XY, J] on {X: 8, Y: 2}: fp32[64, 4096] = 1 MiB per device, ≈300 ns from H100 HBM.
    s = sl.sharding("A[I_XY, J]", {"X": 8, "Y": 2})
    assert s.shard_shape((1024, 4096)) == (64, 4096)
    nbytes = s.shard_bytes((1024, 4096), dtype="f32")
    assert nbytes == 2**20
    assert nbytes / 3.4e12 == pytest.approx(294e-9, rel=0.05)  # the book rounds 1 MiB to 1e6 B


def test_pop_quiz_bytes_per_device_and_in_total():
    # int8[128, 2048] as A[I_XY, J] on {X: 2, Y: 8, Z: 2}: int8[8, 2048] = 16,384 B each; two copies, 512 KiB.
    s = sl.sharding("A[I_XY, J]", {"X": 2, "Y": 8, "Z": 2})
    assert s.shard_shape({"I": 128, "J": 2048}) == (8, 2048)
    assert s.shard_bytes((128, 2048), dtype="int8") == 16384
    assert s.total_bytes((128, 2048), dtype="int8") == 512 * 1024
    assert s.copies() == 2


def test_q1_an_array_sharded_over_x_only_is_held_sixteen_times():
    s = sl.sharding("A[I_X, J, K]", {"X": 4, "Y": 8, "Z": 2})
    assert s.copies() == 16
    assert s.total_bytes((64, 8, 8)) / (64 * 8 * 8 * 2) == 16


def test_the_books_jax_example_local_shapes():
    mesh = {"X": 4, "Y": 2}
    assert sl.sharding("A[B_X, D_Y]", mesh).shard_shape((8, 2048)) == (2, 1024)
    assert sl.sharding("B[D, F_Y]", mesh).shard_shape((2048, 8192)) == (2048, 4096)


def test_partition_spec_entries_for_jax():
    mesh = {"X": 4, "Y": 2}
    assert sl.sharding("A[I_X, J]", mesh).partition_spec() == ("X", None)
    assert sl.sharding("A[I_XY, J]", mesh).partition_spec() == (("X", "Y"), None)
    assert sl.sharding("A[I, J_Y]{U_X}", mesh).partition_spec() == (None, "Y")
    assert sl.sharding("A[I, J]", mesh).partition_spec() == (None, None)


def test_the_derivation_of_shard_bytes_shows_the_local_shape():
    s = sl.sharding("A[I_XY, J]", {"X": 8, "Y": 2})
    assert str(sl.explain(s.shard_bytes, (1024, 4096), dtype="f32")) == (
        "bytes per device of A[I_XY, J] = product of the local shape · bytes per value = 64 · 4096 · 4 = 1.05 MB\n"
        "  where local shape (64, 4096) of f32 values")


# --- the latency-bound regime ---------------------------------------------------------------------


def test_v5e_hops_carrying_under_45_kb_are_latency_bound():
    # The book: on v5e (4.5e10 B/s one way) any buffer under 4.5e10 · 1 µs = 45 kB per hop is latency-bound.
    pod = sl.tpu_pod("tpu-v5e")
    assert sl.latency_bound_bytes(pod, axes="X", per="shard") == pytest.approx(45e3)
    # over the whole ring of 16: T_hop · 16/2 · 9e10 B/s = 720 kB
    assert sl.latency_bound_bytes(pod, axes="X") == pytest.approx(1e-6 * 8 * 9e10)


def test_threshold_is_where_the_two_terms_meet():
    v4p = sl.tpu_slice((4, 4, 4), "tpu-v4p")
    for collective, fn in (("allgather", sl.allgather_time_s), ("allreduce", sl.allreduce_time_s),
                           ("alltoall", sl.alltoall_time_s), ("reducescatter", sl.reducescatter_time_s)):
        V = sl.latency_bound_bytes(v4p, axes="XY", collective=collective)
        assert fn(V * 0.5, v4p, axes="XY") == pytest.approx(fn(V, v4p, axes="XY"))  # flat below: latency
        assert fn(V * 2, v4p, axes="XY") == pytest.approx(2 * fn(V, v4p, axes="XY"))  # linear above: bandwidth
    # The book's Q2: a gather over X and Y has a latency floor of 4 hops ≈ 4 µs, V* = 4 µs · 2 · 9e10 B/s
    assert sl.latency_bound_bytes(v4p, axes="XY") == pytest.approx(4e-6 * 1.8e11)


def test_q3_a_256_byte_gather_is_far_below_the_threshold():
    v4p = sl.tpu_slice((4, 4, 4), "tpu-v4p")
    assert 256 < sl.latency_bound_bytes(v4p, axes="X") / 100


def test_latency_threshold_on_gpus_and_its_errors():
    node = sl.gpu_cluster(1, "h100")
    # 7 ring steps of 5 µs against V·7/8 / 450 GB/s
    assert sl.latency_bound_bytes(node) == pytest.approx(7 * 5e-6 * 450e9 * 8 / 7)
    with pytest.raises(sl.InvalidValueError, match=r"^`collective` must be one of allgather, reducescatter, "
                                                   r"allreduce, alltoall, got 'gather'$"):
        sl.latency_bound_bytes(node, collective="gather")
    with pytest.raises(sl.InvalidValueError, match=r"^latency_bound_bytes: a collective over one device moves "
                                                   r"nothing"):
        sl.latency_bound_bytes(node, group=1)


# --- the picture ------------------------------------------------------------------------------------


def _labels(ax):
    return sorted(t.get_text() for t in ax.texts)


def test_each_device_holds_its_own_block_when_every_axis_is_used():
    ax = sl.draw_sharding(sl.sharding("A[I_X, J_Y]", {"X": 2, "Y": 2}), (4, 128))
    assert ax.get_title() == "A[I_X, J_Y] on mesh X=2, Y=2: each device holds (2, 64)"
    assert _labels(ax) == ["dev 0", "dev 1", "dev 2", "dev 3"]
    assert len(ax.patches) == 4
    assert ax.get_xlabel() == "J = 128: split over Y into 2" and ax.get_ylabel() == "I = 4: split over X into 2"
    plt.close("all")


def test_replicated_blocks_list_every_device_holding_them():
    ax = sl.draw_sharding(sl.sharding("A[I_X, J]", {"X": 2, "Y": 2}), (4, 128))
    assert _labels(ax) == ["dev 0,1", "dev 2,3"] and ax.get_xlabel() == "J = 128: whole"
    ax = sl.draw_sharding(sl.sharding("A[I_XY]", {"X": 2, "Y": 2}), (8,))
    assert _labels(ax) == ["dev 0", "dev 1", "dev 2", "dev 3"]
    # Y major: device (x, y) = 2x + y holds block 2y + x
    ax = sl.draw_sharding(sl.sharding("A[I_YX]", {"X": 2, "Y": 2}), (8,))
    assert [t.get_text() for t in sorted(ax.texts, key=lambda t: t.get_position()[0])] == [
        "dev 0", "dev 2", "dev 1", "dev 3"]
    plt.close("all")


def test_the_mesh_view_colours_each_device_like_the_block_it_holds():
    s = sl.sharding("A[I_X, J]", {"X": 2, "Y": 4})
    ax = sl.draw_sharding(s, (4, 128), view="mesh")
    assert ax.get_title() == "A[I_X, J] on mesh X=2, Y=4: the block each device holds"
    assert ax.get_xlabel() == "mesh axis Y (4 devices)" and ax.get_ylabel() == "mesh axis X (2 devices)"
    texts = [t.get_text().splitlines() for t in ax.texts]
    assert texts == [[f"dev {d}", f"I{d // 4}"] for d in range(8)]
    # each label sits in the middle of its device's cell: device d at column d % 4, row d // 4 from the top
    assert [t.get_position() for t in ax.texts] == [(d % 4 + 0.5, 2 - 0.5 - d // 4) for d in range(8)]
    colours = [tuple(p.get_facecolor()) for p in ax.patches]
    assert len(set(colours)) == 2 and colours[:4] == [colours[0]] * 4  # a row of Y holds one block
    ax = sl.draw_sharding(sl.sharding("A[I_Y, J_X]", {"X": 2, "Y": 2}), (4, 4), view="mesh")
    assert [t.get_text().splitlines()[1] for t in ax.texts] == ["I0 J0", "I1 J0", "I0 J1", "I1 J1"]
    plt.close("all")


def test_the_picture_refuses_what_it_cannot_draw():
    with pytest.raises(sl.InvalidValueError, match=r"draws arrays of 1 or 2 dimensions, A\[I, J, K\] has 3$"):
        sl.draw_sharding(sl.sharding("A[I, J, K]", MESH), (8, 8, 8))
    with pytest.raises(sl.InvalidValueError, match=r"^`sharding` must be a Sharding"):
        sl.draw_sharding("A[I_X]", (8,))
    with pytest.raises(sl.InvalidValueError, match=r"^`view`: the mesh view draws meshes of 1 or 2 axes"):
        sl.draw_sharding(sl.sharding("A[I_X]", {"X": 2, "Y": 2, "Z": 2}), (8,), view="mesh")
    with pytest.raises(sl.InvalidValueError, match=r"^`view` must be 'array' or 'mesh', got 'devices'$"):
        sl.draw_sharding(sl.sharding("A[I_X]", MESH), (8,), view="devices")


# --- properties -------------------------------------------------------------------------------------

AXES = ("X", "Y", "Z")
SMALL = {"X": 2, "Y": 4, "Z": 2}


@st.composite
def shardings(draw, ndims=2):
    """A valid sharding of `ndims` dimensions on SMALL: each axis on at most one dimension (or unreduced)."""
    owners = draw(st.lists(st.integers(-2, ndims - 1), min_size=3, max_size=3))  # -2 unused, -1 unreduced
    order = draw(st.permutations(AXES))
    axes = tuple(tuple(a for a in order if owners[AXES.index(a)] == d) for d in range(ndims))
    unreduced = tuple(a for a in order if owners[AXES.index(a)] == -1)
    return sl.Sharding(tuple("IJK"[:ndims]), axes, SMALL, unreduced, "A")


@settings(max_examples=80, deadline=None)
@given(s=shardings())
def test_every_sharding_reads_back_from_its_text(s):
    assert sl.sharding(str(s), SMALL) == s


@settings(max_examples=80, deadline=None)
@given(s=shardings(), scale=st.integers(1, 4))
def test_all_devices_together_hold_the_array_times_its_copies(s, scale):
    shape = (16 * scale, 32)
    one_copy = shape[0] * shape[1] * 2
    assert s.total_bytes(shape) == pytest.approx(one_copy * s.copies())
    assert s.shard_bytes(shape) * s.splits("I") * s.splits("J") == one_copy


def test_the_mesh_view_of_a_one_axis_mesh_is_one_row_of_devices():
    ax = sl.draw_sharding(sl.sharding("A[I_X, J]", {"X": 4}), (8, 8), view="mesh")
    assert ax.get_xlabel() == "mesh axis X (4 devices)"
    assert [t.get_position() for t in ax.texts] == [(d + 0.5, 0.5) for d in range(4)]
    plt.close("all")
