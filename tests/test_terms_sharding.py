"""The rule of a sharding's terms: a mesh axis splits at most one dimension of an array or holds its partial
sums (the {U_...} term), once. Every way to break it is refused, naming the axis and where it is repeated."""

import pytest

import scalelib as sl
from scalelib._sharding import Sharding

MESH = {"X": 2, "Y": 2}
RULE = "a mesh axis may split at most one dimension of an array (or hold its partial sums): keep it in one place"


@pytest.mark.parametrize("dims_axes, unreduced, where", [
    ((("X",), ("X",)), (), "shards both I and J"),
    ((("X", "X"), ()), (), "is given twice"),
    (((), ()), ("X", "X"), "is given twice"),
    ((("X",), ()), ("X",), "is unreduced and also shards I"),
])
def test_a_mesh_axis_is_used_once_per_array(dims_axes, unreduced, where):
    with pytest.raises(sl.InvalidValueError, match=rf"^mesh axis 'X' {where} in .*; " + RULE.replace("(", r"\(")
                       .replace(")", r"\)")):
        Sharding(("I", "J"), dims_axes, MESH, unreduced=unreduced)


def test_each_axis_once_is_accepted():
    s = Sharding(("I", "J"), (("X",), ()), MESH, unreduced=("Y",))
    assert s.unreduced == ("Y",) and s.axes == (("X",), ())
    assert sl.sharding("A[I_X, J]{U_Y}", MESH).unreduced == ("Y",)
