"""draw_sharding's picture, cell by cell, against the blocks each device holds worked out by hand.

Devices are numbered row-major over the mesh axes (as jax.make_mesh lays them out); a dimension split
over several mesh axes takes its block index major axis first. The array view draws one unit cell per
distinct block at (column, rows − 1 − row), labelled with its devices at the cell's centre; the mesh
view one unit cell per device at (x, rows − 1 − y), labelled with its number and block. Devices holding
the same block share a colour; different blocks differ.
"""

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

import scalelib as sl


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def blocks_by_hand(mesh, axes_of_dims):
    """{device: (row block, column block)} for a 2D array whose dims are split over `axes_of_dims`."""
    names = list(mesh)
    out = {}
    for device, coords in enumerate(itertools.product(*(range(n) for n in mesh.values()))):
        at = dict(zip(names, coords))
        index = []
        for axes in axes_of_dims:
            i = 0
            for a in axes:  # major axis first
                i = i * mesh[a] + at[a]
            index.append(i)
        out[device] = tuple(index)
    return out


def cells(ax):
    assert all(p.get_linewidth() == 1.5 for p in ax.patches)  # every cell outlined alike
    return [(p.get_x(), p.get_y(), p.get_width(), p.get_height(), p.get_facecolor()) for p in ax.patches]


@pytest.mark.parametrize("spec, mesh, axes_of_dims", [
    ("A[I_X, J_Y]", {"X": 2, "Y": 2}, (("X",), ("Y",))),
    ("A[I_X, J]", {"X": 2, "Y": 2}, (("X",), ())),
    ("A[I, J_XY]", {"X": 2, "Y": 2}, ((), ("X", "Y"))),
    ("A[I_YX, J]", {"X": 2, "Y": 4}, (("Y", "X"), ())),
    ("A[I_X, J_Z]", {"X": 2, "Y": 2, "Z": 2}, (("X",), ("Z",))),
])
def test_the_array_view_draws_a_unit_cell_per_block_labelled_with_its_devices(spec, mesh, axes_of_dims):
    held = blocks_by_hand(mesh, axes_of_dims)
    n_rows = max(r for r, _ in held.values()) + 1
    n_cols = max(c for _, c in held.values()) + 1
    ax = sl.draw_sharding(sl.sharding(spec, mesh), (64, 128))
    got = cells(ax)
    assert len(got) == n_rows * n_cols
    by_block = {}
    for x, y, w, h, colour in got:
        assert (w, h) == (1, 1)
        by_block[(n_rows - 1 - int(y), int(x))] = colour
    assert set(by_block) == {(r, c) for r in range(n_rows) for c in range(n_cols)}
    assert len({tuple(c) for c in by_block.values()}) == len(by_block)  # every block its own colour
    texts = {(t.get_position()[0], t.get_position()[1]): t.get_text() for t in ax.texts}
    for (r, c) in by_block:
        devices = sorted(d for d, b in held.items() if b == (r, c))
        label = ",".join(map(str, devices[:4])) + ("…" if len(devices) > 4 else "")
        assert texts[(c + 0.5, n_rows - 0.5 - r)] == f"dev {label}"
    assert ax.get_xlim() == (0, n_cols) and ax.get_ylim() == (0, n_rows)


@pytest.mark.parametrize("spec, mesh, axes_of_dims", [
    ("A[I_X, J_Y]", {"X": 2, "Y": 4}, (("X",), ("Y",))),
    ("A[I_X, J]", {"X": 4, "Y": 2}, (("X",), ())),
    ("A[I, J_YX]", {"X": 2, "Y": 2}, ((), ("Y", "X"))),
])
def test_the_mesh_view_draws_a_unit_cell_per_device_coloured_by_its_block(spec, mesh, axes_of_dims):
    held = blocks_by_hand(mesh, axes_of_dims)
    rows, cols = mesh.values()
    ax = sl.draw_sharding(sl.sharding(spec, mesh), (64, 128), view="mesh")
    got = cells(ax)
    assert len(got) == rows * cols
    colour_of = {}
    for device, (x, y, w, h, colour) in enumerate(got):
        assert (w, h) == (1, 1) and (x, rows - 1 - y) == (device % cols, device // cols)
        colour_of[device] = tuple(colour)
    for a, b in itertools.combinations(held, 2):
        assert (colour_of[a] == colour_of[b]) == (held[a] == held[b])
    for device, t in enumerate(ax.texts):
        assert t.get_position() == (device % cols + 0.5, rows - 0.5 - device // cols)
        block = " ".join(f"{d}{i}" for d, i, axes in zip("IJ", held[device], axes_of_dims) if axes)
        assert t.get_text() == f"dev {device}" + (f"\n{block}" if block else "")
    assert ax.get_xlim() == (0, cols) and ax.get_ylim() == (0, rows)


def test_a_new_figure_is_six_by_four_inches():
    for view in ("array", "mesh"):
        ax = sl.draw_sharding(sl.sharding("A[I_X, J_Y]", {"X": 2, "Y": 2}), (8, 8), view=view)
        assert tuple(ax.figure.get_size_inches()) == (6.0, 4.0)


def test_a_one_dimensional_array_and_mesh_are_one_row():
    ax = sl.draw_sharding(sl.sharding("A[I_X]", {"X": 4}), (64,), view="mesh")
    assert [(p.get_x(), p.get_y()) for p in ax.patches] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert [t.get_position() for t in ax.texts] == [(0.5, 0.5), (1.5, 0.5), (2.5, 0.5), (3.5, 0.5)]
    ax = sl.draw_sharding(sl.sharding("A[I_X]", {"X": 4}), (64,))
    assert sorted((p.get_x(), p.get_y()) for p in ax.patches) == [(0, 0), (1, 0), (2, 0), (3, 0)]


def test_only_the_mesh_view_is_limited_to_two_mesh_axes():
    s = sl.sharding("A[I_X, J_Y]", {"X": 2, "Y": 2, "Z": 2})
    assert len(sl.draw_sharding(s, (8, 8), view="array").patches) == 4
    with pytest.raises(sl.InvalidValueError, match=r"^`view`: the mesh view draws meshes of 1 or 2 axes"):
        sl.draw_sharding(s, (8, 8), view="mesh")
