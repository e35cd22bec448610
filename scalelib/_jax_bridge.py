"""A bridge to JAX (chapters 3 and 10): a mesh of simulated CPU devices, and the collectives XLA compiles.

:func:`simulated_mesh` builds a JAX mesh with axes named as scalelib names them
(``X``, ``Y``, ``Z``); :func:`compiled_collectives` compiles a function under
``jax.jit`` and reads every AllGather, AllReduce, ReduceScatter, AllToAll and
CollectivePermute out of the optimised HLO, each mapped back to the mesh axes it
runs over; :func:`sharded_matmul_collectives` does that for ``A @ B`` with the
operands sharded as the book writes them. :func:`parse_collectives` is the parser
on its own, for HLO text from anywhere (a TPU's dump included).

Bytes per device follow the book's V (the T = V / W of chapter 3): the gathered
result of an AllGather, the operand of a ReduceScatter, AllReduce or AllToAll, what
each device sends in a CollectivePermute; so AllGather and ReduceScatter, each
other's transpose, count the same bytes.

On CPU, XLA computes bf16 dots and reductions in f32 (the collective around a bf16
matmul moves f32 bytes, twice a TPU's) and may write an AllReduce plus a slice
where a TPU would ReduceScatter. JAX is imported inside the functions only.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ._errors import InvalidValueError
from ._units import fmt
from ._validate import counts, shown

#: The collectives read from HLO, as HLO names them.
KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
#: Axis names when none are given: scalelib's (and the book's) X, Y, Z.
DEFAULT_AXES = ("X", "Y", "Z")
_JNP_DTYPES = {"f32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_SETUP = 'import jax; jax.config.update("jax_num_cpu_devices", 8)'


@dataclass(frozen=True)
class CompiledCollective:
    """One collective in compiled HLO: its kind, the mesh axes it runs over, and the bytes it moves per device.

    ``shape`` and ``dtype`` describe the buffer whose bytes are counted (the
    gathered result of an all-gather; the operand of the others); for a tuple of
    buffers (a combined all-reduce, an all-to-all split in pieces) ``shape`` is a
    tuple of shapes. ``axes`` is None where the replica groups match no set of
    mesh axes (or no mesh was given). ``groups`` lists the devices (by their
    index in the mesh, row-major) that take part together; for a
    collective-permute, the (source, target) pairs.
    """

    kind: str
    axes: tuple[str, ...] | None
    shape: tuple
    dtype: str
    nbytes: int
    groups: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    operand: str = field(default="", repr=False)
    result: str = field(default="", repr=False)
    name: str = field(default="", repr=False)

    def __str__(self) -> str:
        """``all-gather over X of f32[64,128]: 32.8 kB per device``."""
        over = "?" if self.axes is None else "".join(self.axes) if self.axes else "no axis"
        dims = lambda shape: f"{self.dtype}[{','.join(map(str, shape))}]"
        if all(isinstance(d, int) for d in self.shape):
            what = dims(self.shape)
        elif len(set(self.shape)) == 1:  # a tuple of equal pieces
            what = f"{len(self.shape)} x {dims(self.shape[0])}"
        else:
            what = "(" + ", ".join(map(dims, self.shape)) + ")"
        return f"{self.kind} over {over} of {what}: {fmt(self.nbytes, 'B')} per device"


# --- meshes ----------------------------------------------------------------------------


def _mesh_layout(mesh, arg: str = "mesh") -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(axis names, sizes) of a JAX mesh, a dict {"X": 2, "Y": 4}, or a tuple of sizes (named X, Y, Z)."""
    if isinstance(mesh, dict):
        names = tuple(mesh)
        return _axis_names(arg, names, len(names)), counts(arg, tuple(mesh.values()))
    if hasattr(mesh, "axis_names") and hasattr(mesh, "devices"):
        return tuple(str(a) for a in mesh.axis_names), tuple(int(n) for n in np.shape(mesh.devices))
    sizes = counts(arg, mesh)
    if len(sizes) > len(DEFAULT_AXES):
        raise InvalidValueError(f"`{arg}` has {len(sizes)} axes; name them with a dict such as "
                                f"{{'X': 2, 'Y': 2, 'Z': 2, 'W': 1}}, got {shown(mesh)}")
    return DEFAULT_AXES[: len(sizes)], sizes


def _axis_names(arg: str, axes, ndim: int) -> tuple[str, ...]:
    if isinstance(axes, str) or not isinstance(axes, (tuple, list)):
        raise InvalidValueError(f"`{arg}` must be a tuple of axis names such as ('X', 'Y'), got {shown(axes)}")
    if len(axes) != ndim:
        raise InvalidValueError(f"`{arg}` must name each of the {ndim} mesh axes once, got {shown(axes)}")
    for a in axes:
        if not isinstance(a, str) or not a.isidentifier():
            raise InvalidValueError(f"`{arg}`: an axis name must be a word such as 'X', got {shown(a)}")
    repeated = sorted({a for a in axes if axes.count(a) > 1})
    if repeated:
        raise InvalidValueError(f"`{arg}`: axis {repeated[0]!r} is given twice in {tuple(axes)!r}")
    return tuple(axes)


def _jax_started() -> bool:
    """Whether JAX has started its backends (after which its device count is fixed); True if unknown."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return True


def simulated_mesh(shape, *, axes=None):
    """A JAX mesh of `shape` devices (simulated CPU devices on a laptop), axes named as scalelib names them.

    The axes are automatic (``AxisType.Auto``): ``jax.jit`` chooses the
    collectives, as in the book's chapter 3. JAX simulates N CPU devices when
    ``jax.config.update("jax_num_cpu_devices", N)`` runs before JAX starts; if
    JAX has not started yet, this function makes that call itself (for 8 devices,
    or more if the mesh needs them).

    Args:
        shape: devices per axis: a tuple such as ``(2, 4)`` (axes X, Y, Z in
            order) or a dict such as ``{"X": 2, "Y": 4}``.
        axes: the axis names, one per entry of `shape` (default X, Y, Z).

    Returns:
        a ``jax.sharding.Mesh`` over the first prod(shape) devices.

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX)

    Example:
        >>> print(simulated_mesh((1, 1)))
        Mesh('X': 1, 'Y': 1, axis_types=(Auto, Auto))
        >>> print(simulated_mesh({"X": 2, "Y": 4}))     # needs 8 devices  # doctest: +SKIP
        Mesh('X': 2, 'Y': 4, axis_types=(Auto, Auto))
    """
    names, sizes = _mesh_layout(shape, "shape")
    if axes is not None:
        names = _axis_names("axes", axes, len(sizes))
    needed = math.prod(sizes)
    import jax

    if not _jax_started() and jax.config.jax_num_cpu_devices < max(needed, 8):
        jax.config.update("jax_num_cpu_devices", max(needed, 8))
    have = jax.device_count()
    if have < needed:
        raise InvalidValueError(
            f"`shape`: a mesh of {' x '.join(map(str, sizes))} needs {needed} devices, but JAX has {have}; "
            f"run {_SETUP} before JAX starts (a fresh Python process or kernel)")
    from jax.sharding import AxisType

    return jax.make_mesh(sizes, names, axis_types=(AxisType.Auto,) * len(sizes), devices=jax.devices()[:needed])


# --- reading HLO -------------------------------------------------------------------------

_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([<=\d,]*)\]")
_OP = re.compile(r"([A-Za-z][\w\-]*)\(")


#: HLO's element types (XLA's PrimitiveType names) and their bits per value.
HLO_DTYPES = {"pred": 8, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64, "u2": 2, "u4": 4, "u8": 8,
              "u16": 16, "u32": 32, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
              "f4e2m1fn": 4, "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e4m3b11fnuz": 8,
              "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8}


def _bits(dtype: str) -> int:
    """Bits per value of an HLO element type; 0 for one HLO does not have."""
    return HLO_DTYPES.get(dtype, 0)


def _unknown_dtype(arg: str, dtype: str, text: str) -> InvalidValueError:
    return InvalidValueError(f"`{arg}`: unknown HLO element type {dtype!r} in {shown(text)}; expected one of "
                             f"{', '.join(HLO_DTYPES)}")


def _arrays(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Every array type in `text` (a shape or a tuple of them), as (dtype, dims)."""
    return [(dt, tuple(int(d.replace("<=", "")) for d in dims.split(",") if d))
            for dt, dims in _ARRAY.findall(text) if dt != "token"]


def _nbytes(arrays) -> int:
    return sum(math.ceil(math.prod(dims) * _bits(dt) / 8) for dt, dims in arrays)


def _written(arrays) -> str:
    text = ", ".join(f"{dt}[{','.join(map(str, dims))}]" for dt, dims in arrays)
    return f"({text})" if len(arrays) != 1 else text


def _balanced(text: str, start: int) -> int:
    """The index just past the bracket group opening at `start` ((), [] and {} nest)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _instruction(line: str):
    """(name, type text, opcode, operand text, attributes) of one HLO instruction line, or None."""
    m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*", line)
    if not m:
        return None
    i = m.end()
    if line.startswith("(", i):
        end = _balanced(line, i)
    else:
        end = i
        while end < len(line) and not line[end].isspace():
            end = _balanced(line, end) if line[end] in "{[(" else end + 1
    type_text = line[i:end]
    while end < len(line) and line[end].isspace():
        end += 1
    op = _OP.match(line, end)
    if not op:
        return None
    close = _balanced(line, op.end() - 1)
    return m.group(1), type_text, op.group(1), line[op.end():close - 1], line[close:]


def _joined_lines(text: str) -> list[str]:
    """The lines of `text`, an instruction written over several lines (an open parenthesis) joined into one."""
    lines, pending = [], ""
    for line in text.splitlines():
        pending = f"{pending} {line.strip()}" if pending else line
        if pending.count("(") <= pending.count(")"):
            lines.append(pending)
            pending = ""
    return lines + ([pending] if pending else [])


def _operands(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text + ","):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [p for p in parts if p]


def _iota(dims: str, reshape: str, perm: str | None) -> np.ndarray:
    """The device ids of XLA's iota form ``[dims]<=[reshape]T(perm)``, checked (a bad one names `hlo_text`)."""
    text = (f"[{dims}]" if dims else "") + f"<=[{reshape}]" + (f"T({perm})" if perm else "")
    reshape_dims = [int(d) for d in reshape.split(",") if d]
    order = [int(p) for p in perm.split(",") if p] if perm else list(range(len(reshape_dims)))
    shape = [int(d) for d in dims.split(",") if d] if dims else [-1]
    why = ("a device count of 0" if 0 in reshape_dims or 0 in shape else
           f"T({perm}) is not an order of the {len(reshape_dims)} dimensions" if sorted(order) != list(
               range(len(reshape_dims))) else
           f"{'x'.join(map(str, shape))} groups do not hold the {math.prod(reshape_dims)} devices"
           if dims and math.prod(shape) != math.prod(reshape_dims) else "")
    if why:
        raise InvalidValueError(f"`hlo_text`: cannot read the replica groups {text} ({why}); XLA writes "
                                f"[groups,size]<=[devices], e.g. [2,4]<=[8] or [4,2]<=[2,4]T(1,0)")
    return np.arange(math.prod(reshape_dims)).reshape(reshape_dims).transpose(order).reshape(shape)


def _mesh_groups(text: str):
    """Groups of XLA's `mesh['axis_0'=1,'axis_1'=2] (, device_ids=(...))? {'axis_1'}` form."""
    m = re.match(r"mesh\[([^\]]*)\]\s*(?:,\s*device_ids=\(((?:[^()]|\([^()]*\))*)\)\s*)?(?:\{([^}]*)\})?", text)
    if not m:
        return None
    axes = [(n, int(s)) for n, s in re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))]
    total = math.prod(s for _, s in axes)
    ids = np.arange(total)
    if m.group(2):
        iota = re.fullmatch(r"\s*(?:\[([\d,]+)\]<=)?\[([\d,]+)\](?:T\(([\d,]+)\))?\s*", m.group(2))
        if iota:
            ids = _iota(iota.group(1) or "", iota.group(2), iota.group(3)).reshape(-1)
        else:
            ids = np.array([int(x) for x in re.findall(r"\d+", m.group(2))])
        if ids.size != total:
            return None
    picked = (re.findall(r"'([^']+)'(?::\((\d+)\)(\d+))?", m.group(3)) if m.group(3) is not None
              else [(n, "", "") for n, _ in axes])  # no axes named: the whole mesh
    dims = []  # the mesh's axes, split where a sub-axis 'a':(pre)size is used
    for name, size in axes:
        subs = [(int(p), int(s)) for n, p, s in picked if n == name and p]
        if len(subs) > 1:
            return None
        if subs:
            pre, sub = subs[0]
            dims += [(f"{name}<", pre), (f"{name}:({pre}){sub}", sub), (f"{name}>", size // (pre * sub))]
        else:
            dims.append((name, size))
    keys = [f"{n}:({p}){s}" if p else n for n, p, s in picked]
    index = {d[0]: k for k, d in enumerate(dims)}
    if any(k not in index for k in keys) or math.prod(s for _, s in dims) != total:
        return None
    grid = ids.reshape([s for _, s in dims])
    chosen = [index[k] for k in keys]
    rest = [k for k in range(len(dims)) if k not in chosen]
    return grid.transpose(rest + chosen).reshape(-1, math.prod(dims[k][1] for k in chosen) if chosen else 1)


def _replica_groups(attrs: str, n_devices: int | None):
    """The replica groups of a collective's attributes, in any of XLA's three spellings, or None."""
    m = re.search(r"replica_groups=", attrs)
    if not m:
        return ((tuple(range(n_devices)),) if n_devices else ())
    text = attrs[m.end():]
    if text.startswith("{"):
        body = text[1:_balanced(text, 0) - 1].strip()
        groups = tuple(tuple(int(x) for x in re.findall(r"\d+", g)) for g in re.findall(r"\{([^{}]*)\}", body))
        return groups if groups or body else ((tuple(range(n_devices)),) if n_devices else ())
    iota = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if iota:
        return tuple(tuple(int(x) for x in row) for row in _iota(iota.group(1), iota.group(2), iota.group(3)))
    if text.startswith("mesh["):
        grid = _mesh_groups(text)
        return None if grid is None else tuple(tuple(int(x) for x in row) for row in grid)
    return None


def _axes_of_groups(groups, names, sizes):
    """The mesh axes whose devices (row-major indices) form exactly `groups`, in the order they vary; or None."""
    if not groups or names is None:
        return None
    grid = np.arange(math.prod(sizes)).reshape(sizes)
    ordered = set(groups)
    unordered = {frozenset(g) for g in groups}
    fallback = None
    for k in range(0, len(names) + 1):
        for subset in itertools.combinations(range(len(names)), k):
            for perm in itertools.permutations(subset):
                rest = [d for d in range(len(names)) if d not in perm]
                rows = grid.transpose(rest + list(perm)).reshape(-1, math.prod(sizes[d] for d in perm))
                if {tuple(int(x) for x in r) for r in rows} == ordered:
                    return tuple(names[d] for d in perm)
                if fallback is None and {frozenset(int(x) for x in r) for r in rows} == unordered:
                    fallback = tuple(names[d] for d in perm)
    return fallback


def _axes_of_pairs(pairs, names, sizes):
    if names is None:
        return None
    coords = np.stack(np.unravel_index(np.arange(math.prod(sizes)), sizes), axis=1)
    try:
        moved = {d for s, t in pairs if s != t for d in range(len(names)) if coords[s][d] != coords[t][d]}
    except IndexError:
        return None
    return tuple(names[d] for d in sorted(moved))


def parse_collectives(hlo_text, *, mesh=None):
    """The collectives in a module of HLO text: kind, mesh axes, shapes, element type and bytes per device.

    Reads every all-gather, all-reduce, reduce-scatter, all-to-all and
    collective-permute (async ``-start`` ops count once, their ``-done`` not at
    all), whatever the spelling of their replica groups: listed
    (``{{0,1},{2,3}}``), iota (``[2,4]<=[8]``, ``[4,2]<=[2,4]T(1,0)``) or XLA's
    mesh form (``mesh['axis_0'=2,'axis_1'=4] {'axis_1'}``). A collective inside a
    loop appears once in the text, and once here, though it runs on every trip.

    Formula:
        nbytes = bytes of the gathered result (all-gather); of the operand
        (reduce-scatter, all-reduce, all-to-all, collective-permute)

    Args:
        hlo_text: the HLO of a module, e.g. ``jax.jit(f).lower(x).compile().as_text()``.
        mesh: the mesh the devices lie on (a JAX mesh, a dict such as
            ``{"X": 2, "Y": 4}`` or a tuple of sizes), to name the axes each
            collective runs over; None leaves ``axes`` None.

    Returns:
        a list of :class:`CompiledCollective` in the order of the text, bytes per device (B).

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX)

    Example:
        >>> hlo = ("%ag = f32[64,128]{1,0} all-gather(f32[32,128]{1,0} %p), "
        ...        "replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}")
        >>> parse_collectives(hlo, mesh={"X": 2, "Y": 4})
        [CompiledCollective(kind='all-gather', axes=('X',), shape=(64, 128), dtype='f32', nbytes=32768)]
        >>> print(parse_collectives(hlo, mesh={"X": 2, "Y": 4})[0])
        all-gather over X of f32[64,128]: 32.8 kB per device
    """
    if not isinstance(hlo_text, str):
        raise InvalidValueError(f"`hlo_text` must be the text of an HLO module (a str), got {shown(hlo_text)}")
    names, sizes = (None, None) if mesh is None else _mesh_layout(mesh)
    header = re.search(r"num_partitions=(\d+)", hlo_text)
    n_devices = math.prod(sizes) if sizes else (int(header.group(1)) if header else None)
    types, found = {}, []
    parsed = [p for p in map(_instruction, _joined_lines(hlo_text)) if p]
    for name, type_text, _, _, _ in parsed:
        types[name] = _arrays(type_text)
    for name, type_text, op, operand_text, attrs in parsed:
        start = op.endswith("-start")
        kind = op[: -len("-start")] if start else op
        if kind not in KINDS:
            continue
        operands = []
        for part in _operands(operand_text):
            part = re.sub(r"/\*.*?\*/", "", part).strip()  # XLA numbers long lists: /*index=5*/%x
            inline = _arrays(part.rsplit("%", 1)[0]) if "%" in part else _arrays(part)
            ref = part.split()[-1].lstrip("%") if part.split() else ""
            operands += inline or types.get(ref, [])
        result = _arrays(type_text)
        if start and len(result) > 1:  # (operands..., results..., contexts...) of an async start
            k = max(len(_operands(operand_text)), 1)
            operands = operands or result[:k]
            result = result[k: 2 * k] if kind != "all-reduce" else result
        if not operands:
            operands = result
        counted = result if kind == "all-gather" else operands
        if kind == "collective-permute":
            pairs = re.search(r"source_target_pairs=\{(.*?)\}\}", attrs)
            groups = tuple(tuple(int(x) for x in g.split(","))
                           for g in re.findall(r"\{(\d+,\d+)", pairs.group(0))) if pairs else ()
            axes = _axes_of_pairs(groups, names, sizes)
        else:
            groups = _replica_groups(attrs, n_devices) or ()
            axes = _axes_of_groups(groups, names, sizes)
        for dt, _ in counted:
            if _bits(dt) == 0:
                raise _unknown_dtype("hlo_text", dt, f"{name} = {type_text} {op}(...)")
        shape = counted[0][1] if len(counted) == 1 else tuple(dims for _, dims in counted)
        dtype = ",".join(dict.fromkeys(dt for dt, _ in counted))
        found.append(CompiledCollective(kind, axes, shape, dtype, _nbytes(counted), groups,
                                _written(operands), _written(result), name))
    return found


# --- compiling ---------------------------------------------------------------------------


def _mesh_of(args):
    import jax

    for leaf in jax.tree_util.tree_leaves(args):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and hasattr(sharding, "mesh") and hasattr(sharding.mesh, "devices"):
            return sharding.mesh
    return None


def compiled_collectives(fn, *args, mesh=None):
    """The collectives XLA compiles for ``jax.jit(fn)(*args)``, read from the optimised HLO.

    The arguments may be arrays or ``jax.ShapeDtypeStruct`` (nothing runs;
    only the compiler does), sharded with ``NamedSharding`` on a mesh such as
    :func:`simulated_mesh`'s; the axes of each collective are named from that
    mesh (taken from the arguments when `mesh` is None). Bytes per device are
    counted as :func:`parse_collectives` counts them.

    Args:
        fn: a function of JAX arrays.
        *args: its arguments (sharded arrays or ``jax.ShapeDtypeStruct``).
        mesh: the mesh the arguments lie on, if they do not carry one.

    Returns:
        a list of :class:`CompiledCollective`, bytes per device (B).

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX)

    Example:
        >>> import jax.numpy as jnp
        >>> compiled_collectives(jnp.sin, jnp.ones(8))      # one device: nothing to communicate
        []
        >>> import jax
        >>> from jax.sharding import NamedSharding, PartitionSpec as P
        >>> m = simulated_mesh((2, 4))      # 8 devices, from here on  # doctest: +SKIP
        >>> x = jax.ShapeDtypeStruct((64, 128), jnp.float32,
        ...                          sharding=NamedSharding(m, P(None, "X")))  # doctest: +SKIP
        >>> compiled_collectives(lambda x: x.sum(axis=1), x)  # doctest: +SKIP
        [CompiledCollective(kind='all-reduce', axes=('X',), shape=(64,), dtype='f32', nbytes=256)]
    """
    if not callable(fn):
        raise InvalidValueError(f"`fn` must be a function of JAX arrays, got {shown(fn)}")
    import jax

    try:
        text = jax.jit(fn).lower(*args).compile().as_text()
    except Exception as err:  # tracing or compiling failed: say so in scalelib's words
        raise InvalidValueError(f"`args`: jax.jit(fn) could not compile for these arguments "
                                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from None
    return parse_collectives(text, mesh=mesh if mesh is not None else _mesh_of(args))


def _spec(arg: str, spec, ndim: int, names):
    if callable(getattr(spec, "partition_spec", None)):  # a sharding object that can write itself as one
        spec = spec.partition_spec()
    if not isinstance(spec, (tuple, list)) or len(spec) != ndim:
        raise InvalidValueError(f"`{arg}` must give one entry per dimension ({ndim}), each None, an axis "
                                f"name or a tuple of names, e.g. ('X', None), got {shown(spec)}")
    used = []
    for entry in spec:
        group = () if entry is None else (entry,) if isinstance(entry, str) else entry
        if not isinstance(group, (tuple, list)) or not all(isinstance(a, str) for a in group):
            raise InvalidValueError(f"`{arg}`: each entry must be None, an axis name or a tuple of names, "
                                    f"got {shown(entry)} in {shown(spec)}")
        for a in group:
            if a not in names:
                raise InvalidValueError(f"`{arg}`: unknown mesh axis {a!r}; the mesh has {', '.join(names)}")
            if a in used:
                raise InvalidValueError(f"`{arg}`: mesh axis {a!r} is used twice in {shown(spec)}; "
                                        f"an array may use each mesh axis at most once")
            used.append(a)
    return tuple(tuple(e) if isinstance(e, list) else e for e in spec)


def sharded_matmul_collectives(a_spec, b_spec, shapes, mesh, *, dtype="bf16", out_spec=None):
    """The collectives XLA compiles for ``A @ B`` with A and B sharded as `a_spec` and `b_spec`.

    A spec gives, for each dimension, the mesh axes it is sharded over, as a
    ``PartitionSpec``: the book's A[I, J_X] is ``(None, "X")``, A[I_XY, J] is
    ``(("X", "Y"), None)``. The chapter's four cases: no contracting dimension
    sharded (no communication); the contracting dimension of one operand sharded
    (AllGather it); both along the same axis (AllReduce, or ReduceScatter into a
    sharded result); a non-contracting dimension of both along the same axis
    (AllGather one). Nothing runs: the operands are ``jax.ShapeDtypeStruct``.
    Bytes per device are counted as :func:`parse_collectives` counts them.

    Args:
        a_spec, b_spec: the shardings of A [I, J] and B [J, K]: PartitionSpec
            entries, or objects with a ``partition_spec()`` method.
        shapes: ((I, J), (J, K)), the global shapes.
        mesh: a JAX mesh, a dict such as ``{"X": 2, "Y": 4}`` or a tuple of sizes
            (a simulated mesh of that shape is made).
        dtype: ``"bf16"``, ``"f32"`` or ``"fp16"``.
        out_spec: the sharding of the result, or None to let XLA choose.

    Returns:
        a list of :class:`CompiledCollective`, bytes per device (B).

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX)

    Example:
        >>> sharded_matmul_collectives((None, None), (None, None), ((64, 128), (128, 256)), (1, 1))
        []
        >>> sharded_matmul_collectives((None, "X"), ("X", None), ((64, 128), (128, 256)),
        ...                            {"X": 2, "Y": 4})  # doctest: +SKIP
        [CompiledCollective(kind='all-reduce', axes=('X',), shape=(64, 256), dtype='f32', nbytes=65536)]
    """
    if not isinstance(shapes, (tuple, list)) or len(shapes) != 2:
        raise InvalidValueError(f"`shapes` must be ((I, J), (J, K)), got {shown(shapes)}")
    a_shape, b_shape = counts("shapes", shapes[0]), counts("shapes", shapes[1])
    if len(a_shape) != 2 or len(b_shape) != 2 or a_shape[1] != b_shape[0]:
        raise InvalidValueError(f"`shapes` must be ((I, J), (J, K)) with the same J, got {shown(shapes)}")
    if not isinstance(dtype, str) or dtype not in _JNP_DTYPES:
        raise InvalidValueError(f"`dtype` must be one of {', '.join(_JNP_DTYPES)}, got {shown(dtype)}")
    names, sizes = _mesh_layout(mesh)
    specs = [_spec("a_spec", a_spec, 2, names), _spec("b_spec", b_spec, 2, names)]
    if out_spec is not None:
        specs.append(_spec("out_spec", out_spec, 2, names))
    size = dict(zip(names, sizes))
    for arg, spec, shape in (("a_spec", specs[0], a_shape), ("b_spec", specs[1], b_shape),
                             ("out_spec", specs[-1] if out_spec is not None else None, (a_shape[0], b_shape[1]))):
        for dim, entry in zip(shape, spec or ()):
            parts = math.prod(size[a] for a in ((entry,) if isinstance(entry, str) else entry or ()))
            if dim % parts:
                raise InvalidValueError(f"`{arg}`: a dimension of {dim} does not divide into {parts} shards "
                                        f"along {entry!r}; choose a multiple of {parts}")
    if not (hasattr(mesh, "axis_names") and hasattr(mesh, "devices")):
        mesh = simulated_mesh(dict(zip(names, sizes)))
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    jdtype = getattr(jnp, _JNP_DTYPES[dtype])
    a = jax.ShapeDtypeStruct(a_shape, jdtype, sharding=NamedSharding(mesh, PartitionSpec(*specs[0])))
    b = jax.ShapeDtypeStruct(b_shape, jdtype, sharding=NamedSharding(mesh, PartitionSpec(*specs[1])))
    kw = {} if out_spec is None else {"out_shardings": NamedSharding(mesh, PartitionSpec(*specs[2]))}
    try:
        text = jax.jit(jnp.matmul, **kw).lower(a, b).compile().as_text()
    except Exception as err:  # e.g. a mesh with explicit axes that leave the result's sharding ambiguous
        raise InvalidValueError(f"`mesh`: jax.jit could not compile A @ B on this mesh "
                                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                                f"a mesh with automatic axes, such as simulated_mesh's, lets XLA choose") from None
    return parse_collectives(text, mesh=mesh)


# --- the plan beside the compiler ----------------------------------------------------------

_HLO_KIND = {"AllGather": "all-gather", "ReduceScatter": "reduce-scatter", "AllReduce": "all-reduce",
             "AllToAll": "all-to-all", "CollectivePermute": "collective-permute"}


@dataclass(frozen=True)
class PlanRow:
    """One line of :func:`compare_with_plan`: a planned collective beside what XLA compiled in its place.

    `predicted` is a step of :func:`plan_matmul` (None for a collective only
    the compiler has); `compiled` the collectives of the HLO that do its work
    (empty if XLA needs none); `verdict` is ``"same"``, ``"equivalent"``,
    ``"mismatch"``, ``"only planned"`` or ``"only compiled"``; `note` says how
    they differ (for ``"equivalent"``, always one of the named reasons in
    ``scalelib._jax_bridge.REASONS``).
    """

    predicted: object | None
    compiled: tuple[CompiledCollective, ...]
    verdict: str
    note: str = ""


@dataclass(frozen=True)
class PlanComparison:
    """scalelib's plan of a sharded matmul beside the collectives XLA compiles for it (:func:`compare_with_plan`).

    `agrees` is True when every row is the same collective, or an equivalent one
    (a named reason), and nothing is left over on either side. When it is not,
    `xla_differs` names XLA's own strategies that account for it (from
    ``scalelib._jax_bridge.XLA_STRATEGIES``; empty if none does). Printed, it is
    the chapter's table: kind, axes and bytes per device (as the compiled op
    counts them: an AllToAll's block, not the whole array), planned and compiled.
    """

    expr: str
    plan: object
    compiled: tuple[CompiledCollective, ...]
    rows: tuple[PlanRow, ...]
    xla_differs: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return all(r.verdict in ("same", "equivalent") for r in self.rows)

    def __str__(self) -> str:
        cases = getattr(self.plan, "cases", ())
        lines = [self.expr + (f"  (case {' and '.join(map(str, cases))})" if cases else ""),
                 "| planned | bytes | compiled (CPU XLA) | bytes | verdict |", "|---|---|---|---|---|"]
        for r in self.rows:
            p = r.predicted
            planned = "—" if p is None else f"{p.kind} over {''.join(p.axes)}"
            planned_bytes = "" if p is None else fmt(_planned_bytes(p), "B")
            compiled = " + ".join(f"{c.kind} over {''.join(c.axes or ('?',))}" for c in r.compiled) or "—"
            compiled_bytes = " + ".join(fmt(c.nbytes, "B") for c in r.compiled)
            verdict = r.verdict + (f": {r.note}" if r.note else "")
            lines.append(f"| {planned} | {planned_bytes} | {compiled} | {compiled_bytes} | {verdict} |")
        if not self.rows:
            lines.append("| — | | — | | same: no communication |")
        lines += [f"XLA differs: {why}" for why in self.xla_differs]
        return "\n".join(lines)


#: Why a compiled collective may differ from the planned one and still do its work: the named reasons
#: :func:`compare_with_plan` gives for "equivalent" (and for bytes, "same"). Anything else is a "mismatch".
REASONS = {
    "f32": "f32 on CPU (2x the bytes)",
    "all-reduce for reduce-scatter": "all-reduce + slice in place of reduce-scatter (XLA CPU)",
    "all-reduce and permute for reduce-scatter": ("all-reduce of the rows each device keeps, then a "
                                                  "collective-permute, in place of reduce-scatter (XLA CPU)"),
    "permute then all-gather": "collective-permute onto {onto}, then all-gather over {onto}, in place of "
                               "all-gather over {axes} (the same bytes gathered)",
    "all-gather axis by axis": "one all-gather per axis in place of one over all of them (the same bytes gathered)",
    "all-to-all and permute": "all-to-all, then a collective-permute putting the blocks in the target's device order",
    "all-to-all over other groups": ("all-to-all over device groups that are no set of mesh axes, then a "
                                     "collective-permute putting the blocks in place"),
    "permute from other copies": ("collective-permute over {onto}, in place of one over {axes}: the same blocks "
                                  "taken from other devices holding copies of them"),
    "all-to-all beside the planned permute": ("all-to-all over device groups that are no set of mesh axes, the "
                                              "blocks put in place by the collective-permute planned beside it"),
}


def _planned_bytes(p) -> float:
    """A planned step's bytes per device as :func:`parse_collectives` counts the compiled one's: the gathered
    result of an AllGather, the operand (each device's block) of the others."""
    return p.nbytes / p.group if p.kind == "AllToAll" else p.nbytes


def _same_bytes(planned: float, c, itemsize: float) -> tuple[bool, str]:
    """Whether compiled `c` moves `planned` bytes per device, within 1%, allowing CPU's f32 for a 2-byte type."""
    width = _bits(c.dtype) / 8  # 0 for a tuple of several types
    if width == itemsize and planned > 0 and abs(c.nbytes - planned) <= 0.01 * planned:
        return True, ""
    if width == 4 and itemsize == 2 and planned > 0 and abs(c.nbytes - 2 * planned) <= 0.02 * planned:
        return True, REASONS["f32"]
    return False, f"{fmt(c.nbytes, 'B')} of {c.dtype} compiled against {fmt(planned, 'B')} planned"


def _over(axes) -> str:
    return "?" if axes is None else "".join(axes) if all(len(a) == 1 for a in axes) else ",".join(axes)


#: What XLA does differently from scalelib's plan, by design: the named reasons of a comparison that does not agree.
XLA_STRATEGIES = {
    "permute": ("XLA sends blocks straight to the devices that need them (collective-permute) where scalelib's "
                "plan gathers and slices them or moves them another way"),
    "rematerialize": ("XLA gathers the whole array, then slices it (what it logs as an 'involuntary full "
                      "rematerialization'), where scalelib's plan moves less"),
}


def _strategies(steps, compiled, rows, itemsize: float, whole_bytes: float) -> tuple[str, ...]:
    """The named reasons (XLA_STRATEGIES) why XLA's collectives differ from the planned `steps`."""
    if all(r.verdict in ("same", "equivalent") for r in rows):
        return ()
    found = []
    paired = {id(c) for r in rows if r.verdict in ("same", "equivalent") for c in r.compiled}
    if any(c.kind == "collective-permute" for c in compiled):  # paired or not: it stands in for a planned step
        found.append(XLA_STRATEGIES["permute"])
    if any(c.kind == "all-gather" and id(c) not in paired and _same_bytes(whole_bytes, c, itemsize)[0]
           for c in compiled) and not any(s.kind == "AllGather" and s.nbytes == whole_bytes for s in steps):
        found.append(XLA_STRATEGIES["rematerialize"])
    return tuple(found)


def _pair(steps, compiled, itemsize: float) -> tuple[PlanRow, ...]:
    """Each planned step beside the compiled collectives doing its work, with a verdict and a named reason."""
    left, rows = list(compiled), []
    join = lambda *notes: "; ".join(n for n in notes if n)  # noqa: E731

    def take(*cs):
        for c in cs:
            left.remove(c)
        return tuple(cs)

    for p in steps:
        kind, axes, want = _HLO_KIND.get(p.kind, p.kind), set(p.axes), _planned_bytes(p)
        permutes = [c for c in left if c.kind == "collective-permute"]
        found = None
        for c in left:  # the same collective: kind, axes and bytes
            ok, note = _same_bytes(want, c, itemsize)
            if c.kind == kind and c.axes is not None and set(c.axes) == axes and ok:
                found = PlanRow(p, take(c), "same", note)
                break
        if found is None and kind == "reduce-scatter":
            for c in left:
                if c.kind != "all-reduce" or c.axes is None or set(c.axes) != axes:
                    continue
                ok, note = _same_bytes(want, c, itemsize)
                if ok:
                    found = PlanRow(p, take(c), "equivalent", join(REASONS["all-reduce for reduce-scatter"], note))
                    break
                ok, note = _same_bytes(want / p.group, c, itemsize)
                same_permute = [q for q in permutes if q.nbytes == c.nbytes]
                if ok and same_permute:
                    found = PlanRow(p, take(c, same_permute[0]), "equivalent",
                                    join(REASONS["all-reduce and permute for reduce-scatter"], note))
                    break
        if found is None and kind == "all-gather" and permutes:
            for c in left:
                ok, note = _same_bytes(want, c, itemsize)
                if c.kind == "all-gather" and c.axes is not None and ok:
                    how = REASONS["permute then all-gather"].format(onto=_over(c.axes), axes=_over(p.axes))
                    found = PlanRow(p, take(*permutes, c), "equivalent", join(how, note))
                    break
        if found is None and kind == "all-gather" and len(axes) > 1:
            parts = [c for c in left if c.kind == "all-gather" and c.axes is not None and set(c.axes) <= axes]
            if parts and sorted(a for c in parts for a in c.axes) == sorted(axes):
                ok, note = _same_bytes(want, max(parts, key=lambda c: c.nbytes), itemsize)
                if ok:
                    found = PlanRow(p, take(*parts), "equivalent", join(REASONS["all-gather axis by axis"], note))
        if found is None and kind == "all-to-all" and permutes:
            for c in left:
                ok, note = _same_bytes(want, c, itemsize)
                if c.kind == "all-to-all" and ok and (c.axes is None or set(c.axes) == axes):
                    how = REASONS["all-to-all and permute" if c.axes is not None else "all-to-all over other groups"]
                    found = PlanRow(p, take(c, permutes[0]), "equivalent", join(how, note))
                    break
        if found is None and kind == "collective-permute":
            for c in permutes:
                ok, note = _same_bytes(want, c, itemsize)
                if ok and c.axes is not None:
                    how = REASONS["permute from other copies"].format(onto=_over(c.axes), axes=_over(p.axes))
                    found = PlanRow(p, take(c), "equivalent", join(how, note))
                    break
        if found is None and kind == "all-to-all" and any(s.kind == "CollectivePermute" for s in steps):
            for c in left:  # XLA groups the devices its own way, the planned permute placing the blocks
                ok, note = _same_bytes(want, c, itemsize)
                if c.kind == "all-to-all" and ok and c.axes is None:
                    found = PlanRow(p, take(c), "equivalent", join(REASONS["all-to-all beside the planned permute"],
                                                                   note))
                    break
        if found is None:
            like = [c for c in left if c.kind == kind]
            if like:
                c = like[0]
                ok, note = _same_bytes(want, c, itemsize)
                why = [f"compiled over {_over(c.axes)}, planned over {_over(p.axes)}"] if (
                    c.axes is None or set(c.axes) != axes) else []
                found = PlanRow(p, take(c), "mismatch", join(*why, note if not ok else ""))
            else:
                found = PlanRow(p, (), "only planned", "not in the compiled HLO")
        rows.append(found)
    return tuple(rows) + tuple(PlanRow(None, (c,), "only compiled", "not in scalelib's plan") for c in left)


def _einsum_collectives(plan, sizes: dict, mesh, dtype: str) -> list[CompiledCollective]:
    """The collectives XLA compiles for `plan`'s contraction written as ``jnp.einsum``, sharded as planned."""
    letters = {d: chr(ord("a") + n) for n, d in enumerate(dict.fromkeys(plan.a.dims + plan.b.dims))}
    word = lambda s: "".join(letters[d] for d in s.dims)  # noqa: E731
    subscripts = f"{word(plan.a)},{word(plan.b)}->{word(plan.result)}"
    names, axis_sizes = _mesh_layout(mesh)
    if not (hasattr(mesh, "axis_names") and hasattr(mesh, "devices")):
        mesh = simulated_mesh(dict(zip(names, axis_sizes)))
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    jdtype = getattr(jnp, _JNP_DTYPES[dtype])
    a, b = (jax.ShapeDtypeStruct(tuple(sizes[d] for d in s.dims), jdtype,
                                 sharding=NamedSharding(mesh, PartitionSpec(*s.partition_spec())))
            for s in (plan.a, plan.b))
    out = NamedSharding(mesh, PartitionSpec(*plan.result.partition_spec()))
    text = jax.jit(lambda x, y: jnp.einsum(subscripts, x, y), out_shardings=out).lower(a, b).compile().as_text()
    return parse_collectives(text, mesh=mesh)


def compare_with_plan(expr, sizes, mesh, *, dtype="bf16"):
    """scalelib's plan of a sharded matmul beside the collectives XLA compiles for it on simulated devices.

    Plans ``expr`` with :func:`plan_matmul`, compiles ``A @ B`` (or the einsum)
    with the operands and the result sharded as the plan has them
    (:func:`sharded_matmul_collectives`), and pairs each planned collective with
    the compiled ones doing its work. A row is "same" when the compiled
    collective has the planned kind, runs over the planned mesh axes and moves
    the planned bytes per device within 1% (twice them in f32 for a bf16 plan:
    CPU XLA carries bf16 in f32, and the note says so). It is "equivalent" only
    with a named reason (``scalelib._jax_bridge.REASONS``): on CPU an all-reduce
    then a slice where a TPU would reduce-scatter; a collective-permute moving a
    shard onto another axis before an all-gather of the same bytes over it; one
    all-gather per axis; an all-to-all followed by a collective-permute. Anything
    else is a "mismatch" (the note gives the axes and bytes of both), "only
    planned" or "only compiled"; `xla_differs` then names XLA's own strategy
    where it has one (``scalelib._jax_bridge.XLA_STRATEGIES``).

    Args:
        expr: the matmul in the book's notation, ``"A[I, J_X] · B[J_X, K]"``
            (``-> C[...]`` to ask for the result's sharding); any contraction
            :func:`plan_matmul` plans, batched ones included
            (``"A[B_X, I, J] · B[B_X, J, K] -> C[B_X, I, K]"``), compiled as a
            ``jnp.einsum`` when it is not ``A[I, J] · B[J, K]``.
        sizes: each dimension's size, ``{"I": 64, "J": 128, "K": 256}``.
        mesh: the mesh, ``{"X": 2, "Y": 4}`` (a simulated mesh of that shape is made).
        dtype: ``"bf16"``, ``"f32"`` or ``"fp16"``.

    Returns:
        a :class:`PlanComparison` (bytes per device, B); print it for the table.

    Chapter:
        3 (Sharded matrices), 10 (Programming with JAX)

    Example:
        >>> c = compare_with_plan("A[I, J] · B[J, K]", {"I": 64, "J": 128, "K": 256}, {"X": 1})
        >>> c.agrees, c.rows
        (True, ())
        >>> print(compare_with_plan("A[I, J_X] · B[J_X, K] -> C[I_X, K]", {"I": 64, "J": 128, "K": 256},
        ...                         {"X": 4, "Y": 2}))  # 8 devices  # doctest: +SKIP
        A[I, J_X] · B[J_X, K] -> C[I_X, K]  (case 3)
        | planned | bytes | compiled (CPU XLA) | bytes | verdict |
        |---|---|---|---|---|
        | ReduceScatter over X | 32.8 kB | all-reduce over X | 65.5 kB | equivalent: all-reduce + slice in place of reduce-scatter (XLA CPU); f32 on CPU (2x the bytes) |
    """
    from ._matmul_plan import plan_matmul
    from ._specs import bytes_per_value

    if not isinstance(dtype, str) or dtype not in _JNP_DTYPES:
        raise InvalidValueError(f"`dtype` must be one of {', '.join(_JNP_DTYPES)}, got {shown(dtype)}")
    names, axis_sizes = _mesh_layout(mesh)
    plan = plan_matmul(expr, sizes, dict(zip(names, axis_sizes)), dtype=dtype)
    sizes = {d: int(v) for d, v in sizes.items()}
    if len(plan.a.dims) == len(plan.b.dims) == 2 and plan.a.dims[1] == plan.b.dims[0] != plan.b.dims[1]:
        (i, j), k = plan.a.dims, plan.b.dims[1]
        compiled = tuple(sharded_matmul_collectives(plan.a.partition_spec(), plan.b.partition_spec(),
                                                    ((sizes[i], sizes[j]), (sizes[j], sizes[k])), mesh,
                                                    dtype=dtype, out_spec=plan.result.partition_spec()))
    else:  # any other contraction, batched ones included: as an einsum
        compiled = tuple(_einsum_collectives(plan, sizes, mesh, dtype))
    itemsize = bytes_per_value(dtype)
    rows = _pair(plan.steps, compiled, itemsize)
    whole = itemsize * max(math.prod(sizes[d] for d in s.dims) for s in (plan.a, plan.b, plan.result))
    return PlanComparison(plan.expr, plan, compiled, rows, _strategies(plan.steps, compiled, rows, itemsize, whole))


def _compare_reshard(expr, sizes, mesh, *, dtype="bf16") -> PlanComparison:
    """:func:`~scalelib.plan_reshard`'s plan beside what XLA compiles for ``jax.jit(identity)`` from the
    source sharding to the target (the rows as in :func:`compare_with_plan`)."""
    from ._matmul_plan import plan_reshard
    from ._specs import bytes_per_value

    if not isinstance(dtype, str) or dtype not in _JNP_DTYPES:
        raise InvalidValueError(f"`dtype` must be one of {', '.join(_JNP_DTYPES)}, got {shown(dtype)}")
    names, axis_sizes = _mesh_layout(mesh)
    plan = plan_reshard(expr, sizes, dict(zip(names, axis_sizes)), dtype=dtype)
    if plan.source.unreduced or plan.target.unreduced:
        raise InvalidValueError(f"`expr`: XLA's shardings hold no partial sums; compare a reshard without "
                                f"{{U_...}}, got {shown(expr)}")
    if not (hasattr(mesh, "axis_names") and hasattr(mesh, "devices")):
        mesh = simulated_mesh(dict(zip(names, axis_sizes)))
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    shape = tuple(int(sizes[d]) for d in plan.source.dims)
    x = jax.ShapeDtypeStruct(shape, getattr(jnp, _JNP_DTYPES[dtype]),
                             sharding=NamedSharding(mesh, PartitionSpec(*plan.source.partition_spec())))
    out = NamedSharding(mesh, PartitionSpec(*plan.target.partition_spec()))
    text = jax.jit(lambda a: a, out_shardings=out).lower(x).compile().as_text()
    compiled = tuple(parse_collectives(text, mesh=mesh))
    itemsize = bytes_per_value(dtype)
    rows = _pair(plan.steps, compiled, itemsize)
    whole = itemsize * math.prod(shape)
    return PlanComparison(str(plan.source) + " → " + str(plan.target), plan, compiled, rows,
                          _strategies(plan.steps, compiled, rows, itemsize, whole))
