"""Sharding notation as the book writes it (chapter 3): ``A[I_X, J_Y]`` on a named device mesh.

A *mesh* names the axes of a grid of devices, ``{"X": 8, "Y": 4}`` (or a
:class:`TpuSlice`'s ``.mesh``). A *sharding* says, for each dimension of an
array, which mesh axes split it: ``A[I_X, J]`` splits I into 8 blocks along X and
keeps J whole, so every device holds a ``[I/8, J]`` block, replicated along Y.
``A[I_XY, J]`` splits I over X and Y together (X major, then Y), and
``C[I, K]{U_X}`` is *unreduced* over X: each device along X holds a partial sum.
A mesh axis splits at most one dimension of an array.

:func:`sharding` reads the text; the :class:`Sharding` it returns knows its shard
shape, its bytes per device, and its JAX ``PartitionSpec``.
:func:`latency_bound_bytes` says where a collective stops being bandwidth-bound,
and :func:`draw_sharding` draws the blocks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ._collectives import _collective
from ._derivation import Derivation, derivable, explain, plain, q
from ._errors import InvalidValueError
from ._specs import bytes_per_value, dtype_name
from ._topology import TpuSlice
from ._validate import count, counts, shown

_EXAMPLE = "e.g. 'A[I_X, J_Y]', 'A[I_XY, J]' or 'C[I, K]{U_X}'"
_NAME = r"[A-Za-z][A-Za-z0-9]*"


def _mesh(mesh, arg: str = "mesh") -> dict[str, int]:
    """A mesh as ``{axis: devices}``, from a dict or a TpuSlice, checked."""
    if isinstance(mesh, TpuSlice):
        return dict(mesh.mesh)
    if not isinstance(mesh, dict) or not mesh:
        raise InvalidValueError(f"`{arg}` must be a mesh such as {{'X': 8, 'Y': 4}} or a TpuSlice, got {shown(mesh)}")
    out = {}
    for name, size in mesh.items():
        if not isinstance(name, str) or not re.fullmatch(_NAME, name):
            raise InvalidValueError(f"`{arg}`: mesh axis names must be names such as 'X' or 'data', got {shown(name)}")
        # a plain int >= 1 is taken as it is (the planner makes thousands of shardings); the rest is checked
        out[name] = size if type(size) is int and size >= 1 else count(arg, size)
    return out


@dataclass(frozen=True, eq=True)
class Sharding:
    """An array's sharding on a named mesh: which mesh axes split each dimension, which hold partial sums.

    Make one with :func:`sharding` from the book's notation. `dims` names the
    dimensions (``("I", "J")``), `axes` gives each dimension's mesh axes, major
    first (``(("X",), ())``), `unreduced` the axes over which the devices hold
    partial sums, `mesh` the device mesh and `name` the array's name. Everything
    is checked: a mesh axis splits at most one dimension and is not also unreduced.

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> Sharding(("I", "J"), (("X",), ()), {"X": 8, "Y": 4}, name="A")
        Sharding('A[I_X, J]', mesh={'X': 8, 'Y': 4})
    """

    dims: tuple[str, ...]
    axes: tuple[tuple[str, ...], ...]
    mesh: dict
    unreduced: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self):
        mesh = _mesh(self.mesh)
        if isinstance(self.dims, (str, bytes)) or not isinstance(self.dims, (tuple, list)) or not self.dims:
            raise InvalidValueError(f"`dims` must be a non-empty tuple of dimension names such as ('I', 'J'), "
                                    f"got {shown(self.dims)}")
        dims = tuple(self.dims)
        for d in dims:
            if not isinstance(d, str) or not re.fullmatch(_NAME, d):
                raise InvalidValueError(f"`dims`: a dimension name is a name such as 'I' or 'D', got {shown(d)}")
        for d in set(dims):
            if dims.count(d) > 1:
                raise InvalidValueError(f"`dims`: dimension {d!r} is named twice in {dims}; give each its own name")
        if isinstance(self.axes, (str, bytes)) or not isinstance(self.axes, (tuple, list)) or len(self.axes) != len(dims):
            raise InvalidValueError(f"`axes` must give one tuple of mesh axes per dimension ({len(dims)}), "
                                    f"got {shown(self.axes)}")
        axes = tuple(self._axis_tuple("axes", a, mesh) for a in self.axes)
        unreduced = self._axis_tuple("unreduced", self.unreduced, mesh)
        if not isinstance(self.name, str) or (self.name and not re.fullmatch(_NAME, self.name)):
            raise InvalidValueError(f"`name` must be an array name such as 'A' (or ''), got {shown(self.name)}")
        for a in mesh:
            owners = [d for d, ax in zip(dims, axes) if a in ax] + (["{U}"] if a in unreduced else [])
            if len(owners) > 1 or any(ax.count(a) > 1 for ax in axes) or unreduced.count(a) > 1:
                text = _text(self.name, dims, axes, unreduced)
                where = (f"shards both {owners[0]} and {owners[1]}" if len(owners) > 1 and owners[1] != "{U}"
                         else "is unreduced and also shards " + owners[0] if len(owners) > 1 else "is given twice")
                raise InvalidValueError(
                    f"mesh axis {a!r} {where} in {text!r}; a mesh axis may split at most one dimension of an "
                    f"array (or hold its partial sums): keep it in one place")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("mesh", mesh)
        set_("dims", dims)
        set_("axes", axes)
        set_("unreduced", unreduced)

    def _axis_tuple(self, arg, value, mesh) -> tuple[str, ...]:
        if isinstance(value, str):
            value = (value,)
        if not isinstance(value, (tuple, list)) or not all(isinstance(a, str) for a in value):
            raise InvalidValueError(f"`{arg}` must be tuples of mesh axis names such as ('X', 'Y'), got {shown(value)}")
        for a in value:
            if a not in mesh:
                raise InvalidValueError(f"`{arg}`: unknown mesh axis {a!r}: the mesh has axes "
                                        f"{', '.join(mesh)}; use one of them or add {a!r} to the mesh")
        return tuple(value)

    def __hash__(self):
        return hash((self.dims, self.axes, tuple(self.mesh.items()), self.unreduced, self.name))

    def __str__(self) -> str:
        return _text(self.name, self.dims, self.axes, self.unreduced)

    def __repr__(self) -> str:
        return f"Sharding({str(self)!r}, mesh={self.mesh!r})"

    # --- shape facts ----------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        """Devices in the mesh."""
        return math.prod(self.mesh.values())

    def splits(self, dim) -> int:
        """Into how many blocks `dim` is split: the product of its mesh axes' sizes (1 if whole).

        Returns:
            blocks (a whole number).

        Chapter:
            3 (Sharded matrices)

        Example:
            >>> sharding("A[I_XY, J]", {"X": 8, "Y": 2}).splits("I")
            16
        """
        if not isinstance(dim, str) or dim not in self.dims:
            raise InvalidValueError(f"`dim` must be one of {', '.join(self.dims)} (the dimensions of {self}), "
                                    f"got {shown(dim)}")
        return math.prod(self.mesh[a] for a in self.axes[self.dims.index(dim)])

    def _shape(self, shape) -> tuple[int, ...]:
        if isinstance(shape, dict):
            missing = [d for d in self.dims if d not in shape]
            extra = [k for k in shape if k not in self.dims]
            if missing or extra:
                raise InvalidValueError(f"`shape` must give the size of each of {', '.join(self.dims)}, got "
                                        f"{shown(shape)}" + (f" (missing {', '.join(map(str, missing))})" if missing else
                                                             f" (no dimension {', '.join(map(str, extra))})"))
            shape = tuple(shape[d] for d in self.dims)
        sizes = counts("shape", shape)
        if len(sizes) != len(self.dims):
            raise InvalidValueError(f"`shape` must give {len(self.dims)} sizes, one per dimension of {self} "
                                    f"({', '.join(self.dims)}), got {shown(shape)}")
        for d, n, ax in zip(self.dims, sizes, self.axes):
            k = math.prod(self.mesh[a] for a in ax)
            if n % k:
                over = "·".join(ax)
                raise InvalidValueError(
                    f"`shape`: dimension {d} of size {n} does not split evenly over {over} ({k} blocks) in {self}; "
                    f"make {d} a multiple of {k} (e.g. {(n // k + 1) * k}) or shard it over fewer mesh axes")
        return sizes

    def shard_shape(self, shape) -> tuple[int, ...]:
        """The block each device holds of an array of global `shape`.

        Formula:
            local size of a dimension = its size / product of its mesh axes

        Args:
            shape: the global shape, a tuple in dimension order or a dict ``{"I": 1024, "J": 4096}``.

        Returns:
            the local shape (a tuple of whole numbers).

        Chapter:
            3 (Sharded matrices)

        Example:
            >>> sharding("A[I_XY, J]", {"X": 8, "Y": 2}).shard_shape((1024, 4096))
            (64, 4096)
        """
        sizes = self._shape(shape)
        return tuple(n // math.prod(self.mesh[a] for a in ax) for n, ax in zip(sizes, self.axes))

    @derivable
    def shard_bytes(self, shape, *, dtype="bf16"):
        """Bytes each device holds of an array of global `shape`.

        Formula:
            shard bytes = product of the local shape · bytes per value

        Args:
            shape: the global shape (a tuple, or a dict of dimension sizes).
            dtype: the values' type (``"bf16"``, ``"f32"``, ``"int8"``, ...).

        Returns:
            bytes (B).

        Chapter:
            3 (Sharded matrices)

        Example:
            >>> sharding("A[I_XY, J]", {"X": 8, "Y": 2}).shard_bytes((1024, 4096), dtype="f32")
            1048576.0
        """
        local = self.shard_shape(shape)
        b = bytes_per_value(dtype)
        value = float(math.prod(local)) * b
        return Derivation(f"bytes per device of {self}", "product of the local shape · bytes per value",
                          lambda: f"{' · '.join(map(str, local))} · {q(b)}", value, "B",
                          where=(f"local shape {local} of {dtype_name(dtype)} values",))

    @derivable
    def total_bytes(self, shape, *, dtype="bf16"):
        """Bytes all devices hold together: each device's shard, counted on every device.

        Formula:
            total bytes = devices · shard bytes

        Args:
            shape: the global shape (a tuple, or a dict of dimension sizes).
            dtype: the values' type.

        Returns:
            bytes (B).

        Chapter:
            3 (Sharded matrices)

        Example:
            >>> sharding("A[I_XY, J]", {"X": 2, "Y": 8, "Z": 2}).total_bytes((128, 2048), dtype="int8")
            524288.0
        """
        each = explain(self.shard_bytes, shape, dtype=dtype)
        return Derivation(f"total bytes of {self}", "devices · shard bytes",
                          lambda: f"{self.num_devices} · {q(each.value, 'B')}", self.num_devices * each.value, "B",
                          (each,))

    @derivable
    def copies(self):
        """How many full copies of the array the devices hold together (mesh axes not used replicate it).

        Formula:
            copies = devices / shards = product of the sizes of the mesh axes that split no dimension

        Returns:
            copies (dimensionless; partial sums count as copies).

        Chapter:
            3 (Sharded matrices)

        Example:
            >>> sharding("A[I_X, J, K]", {"X": 4, "Y": 8, "Z": 2}).copies()
            16.0
        """
        used = {a for ax in self.axes for a in ax}
        idle = [a for a in self.mesh if a not in used]
        value = float(math.prod(self.mesh[a] for a in idle))
        return Derivation(f"copies of {self}", "product of the sizes of the mesh axes that split no dimension",
                          lambda: " · ".join(f"{a}={self.mesh[a]}" for a in idle) or "1 (every axis splits a dimension)",
                          value, "")

    def partition_spec(self) -> tuple:
        """The sharding as the entries of a JAX ``PartitionSpec`` on a mesh with the same axis names.

        One entry per dimension: None if whole, the axis name if split over one
        axis, a tuple of names (major first) if over several. Partial sums
        (``{U_X}``) have no PartitionSpec entry.

        Returns:
            a tuple, e.g. ``("X", None)`` or ``(("X", "Y"), None)``; pass it as
            ``jax.sharding.PartitionSpec(*spec)``.

        Chapter:
            3 (Sharded matrices), 10 (Programming with JAX)

        Example:
            >>> sharding("A[I_XY, J]", {"X": 8, "Y": 2}).partition_spec()
            (('X', 'Y'), None)
            >>> sharding("A[I, J_Y]", {"X": 8, "Y": 2}).partition_spec()
            (None, 'Y')
        """
        return tuple(None if not ax else ax[0] if len(ax) == 1 else tuple(ax) for ax in self.axes)

    # --- changed copies (used by the planner) -------------------------------------------
    def _with(self, *, axes=None, unreduced=None, name=None, dims=None) -> "Sharding":
        return Sharding(self.dims if dims is None else dims, self.axes if axes is None else axes, self.mesh,
                        self.unreduced if unreduced is None else unreduced, self.name if name is None else name)

    def _axes_of(self, dim) -> tuple[str, ...]:
        return self.axes[self.dims.index(dim)]

    @property
    def _used(self) -> set[str]:
        return {a for ax in self.axes for a in ax}


def _text(name, dims, axes, unreduced) -> str:
    def sub(ax):
        if not ax:
            return ""
        joined = "".join(ax) if all(len(a) == 1 for a in ax) else "{" + ",".join(ax) + "}"
        return "_" + joined
    body = f"{name}[{', '.join(d + sub(ax) for d, ax in zip(dims, axes))}]"
    if unreduced:
        body += "{U" + sub(unreduced) + "}"
    return body


def _split_axes(sub: str, mesh: dict, text: str) -> tuple[str, ...]:
    """Mesh axes of a subscript: ``XY`` (one letter each), ``data`` (one name), ``{data,model}``."""
    if sub.startswith("{"):
        if not sub.endswith("}"):
            raise _malformed(text, f"an unclosed '{{' in the subscript {sub!r}")
        names = [s.strip() for s in sub[1:-1].split(",")]
    elif sub in mesh:
        names = [sub]
    else:
        names = list(sub)
    for a in names:
        if a not in mesh:
            raise InvalidValueError(f"`text`: unknown mesh axis {a!r} in {text!r}: the mesh has axes "
                                    f"{', '.join(mesh)}; use one of them or add {a!r} to the mesh")
    return tuple(names)


def _malformed(text, why) -> InvalidValueError:
    return InvalidValueError(f"`text`: cannot read {text!r} as a sharding ({why}); write NAME[DIM_AXES, ...], {_EXAMPLE}")


_SHARDING = re.compile(rf"^\s*(?P<name>{_NAME})?\s*\[(?P<dims>[^\]\[]*)\]\s*(?:\{{(?P<unreduced>.*)\}})?\s*$")


def _parse(text, mesh) -> Sharding:
    if not isinstance(text, str):
        raise InvalidValueError(f"`text` must be a sharding in the book's notation, {_EXAMPLE}; got {shown(text)}")
    match = _SHARDING.match(text)
    if not match:
        why = ("no '[...]' holding the dimensions" if "[" not in text and "]" not in text else
               "a '[' without its ']', or the reverse" if text.count("[") != text.count("]") else
               "text that is neither a name, the dimensions in '[...]' nor partial sums in '{U_...}'")
        raise _malformed(text, why)
    dims, axes = [], []
    for item in re.split(r",(?![^{]*\})", match["dims"]):
        item = item.strip()
        dim = re.fullmatch(rf"(?P<dim>{_NAME})(?:_(?P<sub>\{{[^}}]*\}}|[A-Za-z0-9]+))?", item)
        if not dim:
            raise _malformed(text, f"{item!r} is not a dimension such as 'I' or 'I_X'" if item else "an empty dimension")
        dims.append(dim["dim"])
        axes.append(_split_axes(dim["sub"], mesh, text) if dim["sub"] else ())
    unreduced: tuple[str, ...] = ()
    if match["unreduced"] is not None:
        for item in re.split(r",(?![^{]*\})", match["unreduced"]):
            u = re.fullmatch(r"\s*U_(\{[^}]*\}|[A-Za-z0-9]+)\s*", item)
            if not u:
                raise _malformed(text, f"the braces must say which axes hold partial sums, as {{U_X}} or {{U_XY}}, "
                                       f"got {{{match['unreduced']}}}")
            unreduced += _split_axes(u[1], mesh, text)
    for d in dims:
        if dims.count(d) > 1:
            raise InvalidValueError(f"`text`: dimension {d!r} is named twice in {text!r}; give each dimension its own name")
    try:
        return Sharding(tuple(dims), tuple(axes), mesh, unreduced, match["name"] or "")
    except InvalidValueError as err:
        raise InvalidValueError(f"`text`: {err}") from None


def sharding(text, mesh) -> Sharding:
    """Read a sharding written in the book's notation against a named device mesh.

    ``A[I_X, J_Y]`` splits I over mesh axis X and J over Y; ``A[I_XY, J]`` splits
    I over X and Y together (X major); ``A[I, J]`` is fully replicated;
    ``C[I, K]{U_X}`` holds partial sums over X (unreduced). Mesh axes with longer
    names are written whole (``I_data``) or in braces (``I_{data,model}``). The
    array's name is optional (``[B_X, D_Y]``).

    Args:
        text: the sharding, e.g. ``"A[I_X, J]"``.
        mesh: the device mesh, ``{"X": 8, "Y": 4}``, or a :class:`TpuSlice` (its ``.mesh``).

    Returns:
        A :class:`Sharding`.

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> s = sharding("A[I_XY, J]", {"X": 8, "Y": 2})
        >>> s.axes, s.shard_shape((1024, 4096))
        ((('X', 'Y'), ()), (64, 4096))
        >>> sharding("A[I_X, J_X]", {"X": 8})
        Traceback (most recent call last):
        ...
        scalelib._errors.InvalidValueError: `text`: mesh axis 'X' shards both I and J in 'A[I_X, J_X]'; a mesh axis may split at most one dimension of an array (or hold its partial sums): keep it in one place
    """
    return _parse(text, _mesh(mesh))


# --- the latency-bound regime ------------------------------------------------------------

_COLLECTIVES = {"allgather": "AllGather", "reducescatter": "ReduceScatter", "allreduce": "AllReduce",
                "alltoall": "AllToAll"}


@derivable
def latency_bound_bytes(topology, *, axes=None, group=None, collective="allgather", per="array", latency_s=None):
    """The message size below which a collective is latency-bound: its hops take longer than its bytes.

    On a ring of n chips with wraparound an AllGather makes n/2 hops of about
    1 µs each while moving V / W: it is latency-bound below V = T_hop · n/2 · W
    (W bidirectional), whatever the dtype. Per device that is T_hop · W / 2, the
    book's 45 kB on TPU v5e (4.5e10 B/s one way).

    Formula:
        V* = T_latency / (T_bandwidth per byte); on a torus V* = T_hop · hops · ΣW_eff for AllGather,
        ReduceScatter and AllReduce (twice the hops and twice the bytes), with W_eff = W on a ring and
        W · n/(n−1) on a line of n chips; for AllToAll V* = T_hop · hops · 4 · N · W / max(n)

    Args:
        topology: a :class:`TpuSlice` or a :class:`GpuCluster`.
        axes: on a TPU slice, the axes the collective runs over (all by default).
        group: on a GPU cluster, the GPUs taking part (all by default).
        collective: "allgather", "reducescatter", "allreduce" or "alltoall".
        per: "array" for V, the size the collective functions take (the gathered
            array), or "shard" for each device's part of it, V / devices.
        latency_s: latency of one hop or ring step, s (1 µs on ICI, 5 µs on GPUs by default).

    Returns:
        bytes (B).

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> from scalelib import tpu_pod, fmt
        >>> fmt(latency_bound_bytes(tpu_pod("tpu-v5e"), axes="X", per="shard"), "B")
        '45 kB'
    """
    if not isinstance(collective, str) or collective.lower() not in _COLLECTIVES:
        raise InvalidValueError(f"`collective` must be one of {', '.join(_COLLECTIVES)}, got {shown(collective)}")
    if not isinstance(per, str) or per not in ("array", "shard"):
        raise InvalidValueError(f"`per` must be 'array' or 'shard', got {shown(per)}")
    kind = _COLLECTIVES[collective.lower()]
    latency = _collective(kind, 0.0, topology, axes, group, latency_s)
    per_byte = _collective(kind, 1.0, topology, axes, group, 0.0)
    if isinstance(topology, TpuSlice):
        devices = math.prod(topology.mesh[a] for a in topology.axes(axes))
    else:
        devices = topology.num_gpus if group is None else count("group", group)
    if per_byte.value == 0:
        raise InvalidValueError("latency_bound_bytes: a collective over one device moves nothing; "
                                "choose `axes` or `group` with more than one device")
    V = latency.value / per_byte.value
    if per == "shard":
        value = V / devices
        return Derivation(f"V*_shard({kind})", "T_latency / (T per byte) / devices",
                          lambda: f"{q(latency.value, 's')} / {q(per_byte.value, 's')}/B / {devices}",
                          plain(value), "B", (latency,),
                          where=("T_latency: the collective's time for an empty message (its hops); "
                                 "T per byte: its bandwidth term for one byte",))
    return Derivation(f"V*({kind})", "T_latency / (T per byte)",
                      lambda: f"{q(latency.value, 's')} / {q(per_byte.value, 's')}/B",
                      plain(V), "B", (latency,),
                      where=("T_latency: the collective's time for an empty message (its hops); "
                             "T per byte: its bandwidth term for one byte",))


# --- the picture -------------------------------------------------------------------------


def _block_index(s: Sharding, coords: dict, dim_index: int) -> int:
    """Which block of dimension `dim_index` a device at mesh `coords` holds (major axis first)."""
    index = 0
    for a in s.axes[dim_index]:
        index = index * s.mesh[a] + coords[a]
    return index


def _legible_if(created: bool, ax):
    """`ax`, its figure's text raised to the site's legible size when this module made the figure."""
    if created:
        from ._plot import _legible

        ax.figure.tight_layout()
        _legible(ax.figure, relayout=True)
    return ax


def draw_sharding(sharding, shape, *, view="array", ax=None):
    """An array's blocks as its devices hold them, in one colour per distinct block.

    ``view="array"`` draws the array (1D or 2D) as a rectangle cut into the
    blocks its sharding makes, each labelled with the devices holding it, so a
    replicated block lists several. ``view="mesh"`` draws the device mesh (1 or 2
    axes) instead, one cell per device, labelled with the block it holds
    (``I1 J0``) and coloured like that block: devices holding the same data share
    a colour. Devices are numbered row-major over the mesh axes, as
    ``jax.make_mesh`` lays them out. The axis labels say which mesh axes split
    each dimension (array view) or the mesh axes' sizes (mesh view).

    Args:
        sharding: a :class:`Sharding` (from :func:`sharding`) of an array of 1 or 2 dimensions.
        shape: the global shape (a tuple, or a dict of dimension sizes).
        view: "array" (the array's blocks) or "mesh" (the devices).
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        3 (Sharded matrices)

    Example:
        >>> ax = draw_sharding(sharding("A[I_X, J_Y]", {"X": 2, "Y": 2}), (4, 128))
        >>> ax.get_title()
        'A[I_X, J_Y] on mesh X=2, Y=2: each device holds (2, 64)'
        >>> ax = draw_sharding(sharding("A[I_X, J]", {"X": 2, "Y": 2}), (4, 128), view="mesh")
        >>> [t.get_text().splitlines() for t in ax.texts][:3]
        [['dev 0', 'I0'], ['dev 1', 'I0'], ['dev 2', 'I1']]
    """
    if not isinstance(sharding, Sharding):
        raise InvalidValueError(f"`sharding` must be a Sharding (from sharding('A[I_X, J]', mesh)), got {shown(sharding)}")
    s = sharding
    if len(s.dims) > 2:
        raise InvalidValueError(f"`sharding`: draw_sharding draws arrays of 1 or 2 dimensions, {s} has {len(s.dims)}")
    if not isinstance(view, str) or view not in ("array", "mesh"):
        raise InvalidValueError(f"`view` must be 'array' or 'mesh', got {shown(view)}")
    if view == "mesh" and len(s.mesh) > 2:
        raise InvalidValueError(f"`view`: the mesh view draws meshes of 1 or 2 axes, {s.mesh} has {len(s.mesh)}; "
                                f"use view='array'")
    local = s.shard_shape(shape)
    sizes = s._shape(shape)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    created = ax is None
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    rows_dim, cols_dim = (0, 1) if len(s.dims) == 2 else (None, 0)
    n_rows = s.splits(s.dims[rows_dim]) if rows_dim is not None else 1
    n_cols = s.splits(s.dims[cols_dim])
    holders: dict[tuple[int, int], list[int]] = {}
    names = list(s.mesh)
    at_device = []
    for device, coords in enumerate(np.ndindex(*s.mesh.values())):
        at = dict(zip(names, coords))
        r = _block_index(s, at, rows_dim) if rows_dim is not None else 0
        c = _block_index(s, at, cols_dim)
        holders.setdefault((r, c), []).append(device)
        at_device.append((coords, r, c))
    cmap = plt.get_cmap("tab20")

    def colour(r, c):  # tab20's strong colours first, then its pale ones: neighbours differ in hue
        k = (r * n_cols + c) % 20
        return cmap((2 * k) % 20 + (k >= 10))

    mesh_text = ", ".join(f"{a}={n}" for a, n in s.mesh.items())
    if view == "mesh":
        shape2 = list(s.mesh.values()) + [1] * (2 - len(s.mesh))
        mesh_rows, mesh_cols = (shape2[0], shape2[1]) if len(s.mesh) == 2 else (1, shape2[0])
        for device, (coords, r, c) in enumerate(at_device):
            y, x = (coords[0], coords[1]) if len(coords) == 2 else (0, coords[0])
            ax.add_patch(Rectangle((x, mesh_rows - 1 - y), 1, 1, facecolor=colour(r, c), edgecolor="black",
                                   linewidth=1.5))
            block = " ".join(f"{d}{i}" for d, i, dim_i in zip(s.dims, (r, c) if rows_dim is not None else (c,),
                                                                range(len(s.dims))) if s.axes[dim_i])
            ax.text(x + 0.5, mesh_rows - 0.5 - y, f"dev {device}" + (f"\n{block}" if block else ""),
                    ha="center", va="center", fontsize=8 if mesh_cols < 8 else 6)
        ax.set_xlim(0, mesh_cols)
        ax.set_ylim(0, mesh_rows)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"mesh axis {names[-1]} ({s.mesh[names[-1]]} devices)")
        if len(names) == 2:
            ax.set_ylabel(f"mesh axis {names[0]} ({s.mesh[names[0]]} devices)")
        ax.set_title(f"{s} on mesh {mesh_text}: the block each device holds")
        return _legible_if(created, ax)
    for (r, c), devices in holders.items():
        ax.add_patch(Rectangle((c, n_rows - 1 - r), 1, 1, facecolor=colour(r, c), edgecolor="black", linewidth=1.5))
        label = ",".join(map(str, devices[:4])) + ("…" if len(devices) > 4 else "")
        ax.text(c + 0.5, n_rows - 0.5 - r, f"dev {label}", ha="center", va="center", fontsize=8 if n_cols < 8 else 6)
    ax.set_xlim(0, n_cols)
    ax.set_ylim(0, n_rows)
    ax.set_xticks([])
    ax.set_yticks([])

    def label(i):
        d, ax_ = s.dims[i], s.axes[i]
        return f"{d} = {sizes[i]}: " + (f"split over {'·'.join(ax_)} into {s.splits(d)}" if ax_ else "whole")
    ax.set_xlabel(label(cols_dim))
    if rows_dim is not None:
        ax.set_ylabel(label(rows_dim))
    ax.set_title(f"{s} on mesh {mesh_text}: each device holds {local}")
    return _legible_if(created, ax)
