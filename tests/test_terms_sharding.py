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


def test_copies_are_the_product_of_the_idle_axes_and_the_derivation_names_them():
    s = sl.sharding("A[I_X, J]", {"X": 2, "Y": 4, "Z": 3})
    d = sl.explain(s.copies)
    assert d.value == 12 and str(d).startswith("copies of A[I_X, J] = product of the sizes of the mesh axes that "
                                               "split no dimension = Y=4 · Z=3 = 12")
    d = sl.explain(sl.sharding("A[I_X, J_Y]", {"X": 2, "Y": 2}).copies)
    assert d.value == 1 and "= 1 (every axis splits a dimension) = 1" in str(d)


def test_empty_braces_are_refused_with_what_they_should_hold():
    with pytest.raises(sl.InvalidValueError, match=r"^`text`: cannot read 'A\[I_X\]\{\}' as a sharding \(the braces "
                                                   r"must say which axes hold partial sums, as \{U_X\} or \{U_XY\}, "
                                                   r"got \{\}\)"):
        sl.sharding("A[I_X]{}", {"X": 2})
