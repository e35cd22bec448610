"""Profiling (chapter 9): what XLA compiled, what it counts, and what the profiler saw.

A jitted function passes down a stack of compilers: JAX traces it, writes it as
StableHLO (``jax.jit(f).lower(...)``), XLA rewrites that as HLO, optimises it
(fusions, layouts, collectives) and hands it to a backend that emits machine
code (``.compile()``). This module reads what comes out:

* :func:`hlo_array` reads one array type of HLO text, layout and tiling included
  (``bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}``), and the bytes it takes once padded;
* :func:`hlo_summary` lists the ops of a compiled module: each fusion with the
  ops inside it, the layouts, each parameter's sharding and global shape, and
  the collectives (read by :func:`~scalelib.parse_collectives`);
* :func:`cost_analysis` gives XLA's own count of a function's FLOPs and bytes
  accessed, hence its arithmetic intensity; chapter 1's :func:`~scalelib.roofline`
  turns it into a predicted time;
* :func:`capture_trace` records a trace with the JAX profiler, :func:`read_trace`
  reads the trace file (Chrome trace-event JSON, gzipped) into ops with their
  durations, :func:`plot_trace` draws its timeline;
* :func:`compare_with_roofline` sets a measured time beside the roofline's
  prediction, and :func:`prediction_table` prints a list of them as a table.

JAX and matplotlib are imported inside the functions that use them.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field

from ._errors import InvalidValueError
from ._jax_bridge import (_arrays, _balanced, _bits, _instruction, _joined_lines, _operands, _unknown_dtype,
                          parse_collectives)
from ._units import fmt
from ._validate import count, flag, shown

#: The most runs a trace or a timing makes.
MAX_RUNS = 1000
#: Memory spaces of a TPU as HLO layouts name them (``S(1)``); no ``S(...)`` means space 0.
MEMORY_SPACES = {0: "HBM", 1: "VMEM"}


# --- one array type ----------------------------------------------------------------------

_TYPE = re.compile(r"\s*([a-z][a-z0-9]*)\[([<=\d,\s]*)\](\{[^{}]*\})?\s*$")


@dataclass(frozen=True)
class HloArray:
    """One array type of HLO text: element type, shape, layout, tiling and memory space.

    ``minor_to_major`` lists the dimensions from the one that varies fastest in
    memory to the slowest (``{1,0}`` is row-major for a matrix); ``tiles`` are the
    tilings after ``T`` (outer first), ``memory_space`` the ``S(n)`` number (0,
    HBM on a TPU, when none is written; 1 is VMEM). ``padded_shape`` is the shape
    in memory order (major to minor) once the first tile pads it, with any
    dimension the tile adds in front (a 1-D array under a 2-D tile); bytes are
    counted at the element type's width.
    """

    dtype: str
    shape: tuple[int, ...]
    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int = 0
    text: str = field(default="", repr=False)

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the values themselves, without padding (B)."""
        return math.ceil(self.elements * _bits(self.dtype) / 8)

    @property
    def physical_shape(self) -> tuple[int, ...]:
        """The dimensions in memory order, major to minor."""
        return tuple(self.shape[d] for d in reversed(self.minor_to_major))

    @property
    def padded_shape(self) -> tuple[int, ...]:
        """The physical shape once padded to whole tiles of the first tiling (major to minor)."""
        if not self.tiles:
            return self.physical_shape
        return _pad(self.physical_shape, self.tiles[0])

    @property
    def padded_elements(self) -> int:
        """Elements the array takes in memory once every tiling has padded it."""
        shape = self.physical_shape
        for tile in self.tiles:  # each tiling splits the minor dimensions of the one before into (counts, tile)
            shape = (1,) * max(0, len(tile) - len(shape)) + shape
            head, tail = shape[: len(shape) - len(tile)], shape[len(shape) - len(tile):]
            shape = head + tuple(-(-d // t) for d, t in zip(tail, tile)) + tile
        return math.prod(shape)

    @property
    def padded_nbytes(self) -> int:
        """Bytes the array takes in memory, padding included (B)."""
        return math.ceil(self.padded_elements * _bits(self.dtype) / 8)

    @property
    def memory(self) -> str:
        """The memory space by name on a TPU (``"HBM"``, ``"VMEM"``), or ``"S(n)"``."""
        return MEMORY_SPACES.get(self.memory_space, f"S({self.memory_space})")

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def _pad(dims: tuple[int, ...], tile: tuple[int, ...]) -> tuple[int, ...]:
    """`dims` (major to minor) rounded up to whole tiles on their last len(tile) dimensions."""
    dims = (1,) * max(0, len(tile) - len(dims)) + tuple(dims)
    head, tail = dims[: len(dims) - len(tile)], dims[len(dims) - len(tile):]
    return head + tuple(-(-d // t) * t for d, t in zip(tail, tile))


def hlo_array(text):
    """Read one array type of HLO text: its element type, shape, layout, tiles and memory space.

    The layout in braces lists the dimensions minor to major, then after a colon
    the tilings ``T(...)`` (outer first) and the memory space ``S(n)``:
    ``bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}`` is row-major, tiled in (8, 128)
    blocks of (2, 1) pairs, in VMEM. Without a layout the array is row-major.

    Formula:
        padded bytes = bytes per value · Π(each memory-order dimension rounded up to its tile)

    Args:
        text: the type as HLO prints it, e.g. ``"f32[3,5]{1,0:T(2,2)}"``.

    Returns:
        an :class:`HloArray` (``.nbytes`` and ``.padded_nbytes`` in B).

    Chapter:
        9 (Profiling)

    Example:
        >>> a = hlo_array("f32[3,5]{1,0:T(2,2)}")
        >>> a.padded_shape, a.nbytes, a.padded_nbytes
        ((4, 6), 60, 96)
        >>> hlo_array("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}").memory
        'VMEM'
    """
    if not isinstance(text, str):
        raise InvalidValueError(f"`text` must be an HLO array type such as 'f32[3,5]{{1,0}}', got {shown(text)}")
    m = _TYPE.match(text)
    if not m:
        raise InvalidValueError(f"`text` must be one HLO array type such as 'bf16[8,128]{{1,0:T(8,128)(2,1)}}', "
                                f"got {shown(text)}")
    dtype = m.group(1)
    if _bits(dtype) == 0:
        raise _unknown_dtype("text", dtype, text)
    dims = m.group(2).replace(" ", "")
    if dims and not re.fullmatch(r"(?:<=)?\d+(?:,(?:<=)?\d+)*", dims):
        raise InvalidValueError(f"`text`: the shape [{m.group(2)}] must be sizes separated by commas, such as "
                                f"[3,5] (or [] for a scalar), got {shown(text)}")
    shape = tuple(int(d.replace("<=", "")) for d in dims.split(",") if d)
    layout = (m.group(3) or "")[1:-1]
    order_text, _, extra = layout.partition(":")
    try:
        order = tuple(int(d) for d in order_text.split(",") if d.strip()) if order_text.strip() else ()
    except ValueError:
        order = None
    if order is None or (order and sorted(order) != list(range(len(shape)))):
        raise InvalidValueError(f"`text`: the layout {{{layout}}} must list each of the {len(shape)} dimensions "
                                f"once (minor to major), got {shown(text)}")
    order = order or tuple(reversed(range(len(shape))))
    tiles = tuple(tuple(int(x) for x in t.split(",") if x.strip()) for t in re.findall(r"\(([\d,\s]+)\)",
                                                                                         extra.split("S(")[0]))
    if any(not t or min(t) < 1 for t in tiles):
        raise InvalidValueError(f"`text`: each tile must be whole numbers >= 1, got {shown(text)}")
    space = re.search(r"S\((\d+)\)", extra)
    return HloArray(dtype, shape, order, tiles, int(space.group(1)) if space else 0, text.strip())


# --- a module of HLO ---------------------------------------------------------------------


@dataclass(frozen=True)
class HloOp:
    """One instruction of a module's entry computation, as :func:`hlo_summary` reads it.

    ``result`` holds the array types it produces (several for a tuple);
    ``operands`` the names of its inputs; for a fusion, ``kind`` is XLA's fusion
    kind (``kLoop``, ``kInput``, ``kOutput``, ``kCustom``) and ``inside`` the
    opcodes of the computation it calls, in order (parameters left out).
    ``source`` is the JAX operation it came from (the ``op_name`` XLA keeps);
    ``sharding`` the annotation XLA wrote on it, and ``tiles`` how many pieces
    that annotation splits each dimension into (so ``global_shape`` is the
    shape before sharding). ``collective`` is set for a collective.
    """

    name: str
    opcode: str
    result: tuple[HloArray, ...]
    operands: tuple[str, ...] = ()
    kind: str = ""
    calls: str = ""
    inside: tuple[str, ...] = ()
    source: str = ""
    sharding: str = ""
    tiles: tuple[int, ...] | None = None
    collective: object | None = None

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self.result[0].shape if len(self.result) == 1 else None

    @property
    def global_shape(self) -> tuple[int, ...] | None:
        """The shape before sharding (the per-device shape times the tiles), or None if unknown."""
        if self.shape is None:
            return None
        if self.tiles is None:
            return self.shape if not self.sharding else None
        return tuple(d * t for d, t in zip(self.shape, self.tiles))

    @property
    def has_matmul(self) -> bool:
        return self.opcode in ("dot", "convolution") or any(op in ("dot", "convolution") for op in self.inside)

    @property
    def what(self) -> str:
        """The opcode, with the fusion kind or the collective's axes."""
        if self.opcode == "fusion":
            return f"fusion ({self.kind})" if self.kind else "fusion"
        if self.collective is not None and getattr(self.collective, "axes", None):
            return f"{self.opcode} over {''.join(self.collective.axes)}"
        return self.opcode

    def __str__(self) -> str:
        result = ", ".join(map(str, self.result))
        return f"{self.name} = {result} {self.what}"


def _tiles(sharding: str, ndim: int) -> tuple[int, ...] | None:
    """Pieces per dimension of an HLO sharding annotation (``{devices=[4,1,2]<=[8] last_tile_dim_replicate}``)."""
    text = sharding.strip()
    if text in ("{replicated}", "{maximal device=0}") or text.startswith("{maximal"):
        return (1,) * ndim
    m = re.match(r"\{devices=\[([\d,]+)\]", text)
    if not m:
        return None
    dims = tuple(int(x) for x in m.group(1).split(","))
    return dims[:ndim] if len(dims) >= ndim else None


def _attribute(attrs: str, key: str) -> str:
    """The value of `key=` in an instruction's attributes (a balanced {...} or a single word)."""
    m = re.search(rf"(?:^|[\s,]){re.escape(key)}=", attrs)
    if not m:
        return ""
    start = m.end()
    if start < len(attrs) and attrs[start] == "{":
        return attrs[start:_balanced(attrs, start)]
    word = re.match(r"%?[\w.\-]+", attrs[start:])
    return word.group(0).lstrip("%") if word else ""


def _computations(lines: list[str]) -> tuple[dict[str, list[tuple]], dict[str, list[str]], str | None]:
    """({computation: its parsed instructions}, {computation: its lines}, the entry computation's name)."""
    comps: dict[str, list[tuple]] = {}
    raw: dict[str, list[str]] = {}
    entry, current = None, None
    header = re.compile(r"\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
    for line in lines:
        m = header.match(line)
        if m and "=" not in line.split("(", 1)[0]:
            current = m.group(2)
            comps[current], raw[current] = [], [line.strip()]
            if m.group(1):
                entry = current
            continue
        if current is None:
            continue
        if line.strip() == "}":
            raw[current].append("}")
            current = None
            continue
        parsed = _instruction(line)
        if parsed:
            comps[current].append(parsed)
            raw[current].append("  " + line.strip())
    return comps, raw, entry


_NOISE = ("metadata", "backend_config", "frontend_attributes", "statistics")


def _clean(line: str, drop=_NOISE) -> str:
    """An instruction without the attributes in `drop` (its metadata, backend_config, ...)."""
    noise = re.compile(rf",\s*({'|'.join(drop)})=")
    out, i = [], 0
    while True:
        m = noise.search(line, i)
        if not m:
            out.append(line[i:])
            break
        out.append(line[i:m.start()])
        j = m.end()
        if j < len(line) and line[j] == "{":
            j = _balanced(line, j)
        elif j < len(line) and line[j] == '"':
            j = line.index('"', j + 1) + 1 if '"' in line[j + 1:] else len(line)
        else:
            while j < len(line) and line[j] not in ",":
                j += 1
        i = j
    return "".join(out).rstrip()


@dataclass(frozen=True)
class HloSummary:
    """The ops of a compiled module's entry computation (:func:`hlo_summary`).

    ``ops`` are the instructions in order, parameters included; ``fusions``,
    ``parameters`` and ``collectives`` pick them out. ``num_partitions`` is the
    number of devices the module was partitioned for (1 when unsharded).
    ``listing(name)`` prints a computation without its metadata. Printed, it is a
    table: each op, what it is, its result and the ops inside it.
    """

    module: str
    num_partitions: int
    ops: tuple[HloOp, ...]
    computations: dict = field(default_factory=dict, repr=False)
    entry: str = ""

    @property
    def parameters(self) -> tuple[HloOp, ...]:
        return tuple(op for op in self.ops if op.opcode == "parameter")

    @property
    def fusions(self) -> tuple[HloOp, ...]:
        return tuple(op for op in self.ops if op.opcode == "fusion")

    @property
    def collectives(self) -> tuple:
        return tuple(op.collective for op in self.ops if op.collective is not None)

    def op(self, name: str) -> HloOp:
        """The op called `name` (``"ynn_fusion"``, ``"all-reduce"``)."""
        for op in self.ops:
            if op.name == name:
                return op
        raise InvalidValueError(f"`name`: no op {name!r} in the entry computation; it has "
                                f"{', '.join(op.name for op in self.ops)}")

    def listing(self, name: str | None = None, *, opcodes=None, shardings=True) -> str:
        """The text of computation `name` (the entry computation by default), without metadata.

        With `opcodes` (e.g. ``("fusion", "all-reduce")``) only the instructions
        with those opcodes are kept, as a profile's list of ops shows them; with
        ``shardings=False`` the ``sharding={...}`` annotations are left out too.
        """
        shardings = flag("shardings", shardings)
        name = self.entry if name is None else name
        if not isinstance(name, str) or name not in self.computations:
            raise InvalidValueError(f"`name`: no computation {name!r}; the module has "
                                    f"{', '.join(map(repr, self.computations))}")
        lines = self.computations[name]
        if opcodes is not None:
            if isinstance(opcodes, str):
                opcodes = (opcodes,)
            if not isinstance(opcodes, (tuple, list)) or not all(isinstance(o, str) for o in opcodes):
                raise InvalidValueError(f"`opcodes` must be a tuple of HLO opcodes such as ('fusion', 'dot'), "
                                        f"got {shown(opcodes)}")
            lines = [line for line in lines if (p := _instruction(line)) and p[2] in opcodes]
        drop = _NOISE if shardings else _NOISE + ("sharding",)
        return "\n".join(_clean(line, drop) for line in lines)

    def __str__(self) -> str:
        rows = ["| op | what | result | layout | ops inside |", "|---|---|---|---|---|"]
        for op in self.ops:
            if op.opcode == "parameter":
                what = "parameter" + (f" (global {_dims(op.global_shape)})" if op.sharding and op.global_shape
                                      and op.global_shape != op.shape else "")
            else:
                what = op.what
            result = ", ".join(map(str, op.result))
            layout = ", ".join("{" + ",".join(map(str, a.minor_to_major)) + "}" for a in op.result)
            rows.append(f"| {op.name} | {what} | {result} | {layout} | {_inside(op.inside)} |")
        return "\n".join(rows)


def _dims(shape) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _inside(opcodes: tuple[str, ...]) -> str:
    """``dot, tanh, reduce`` or ``multiply ×7, add ×3, tanh`` (constants and broadcasts left out)."""
    counts = Counter(op for op in opcodes if op not in ("constant", "broadcast"))
    return ", ".join(op if n == 1 else f"{op} ×{n}" for op, n in counts.items())


def hlo_summary(hlo_text, *, mesh=None):
    """The ops of a module of HLO text: fusions and what is inside them, layouts, shardings, collectives.

    Reads the entry computation of ``jax.jit(f).lower(...).compile().as_text()``
    (or any HLO module's text): each instruction's name, opcode, result types
    (with their layouts, see :func:`hlo_array`), operands, the JAX operation it
    came from, and for a fusion its kind and the ops of the computation it calls.
    The collectives are read by :func:`~scalelib.parse_collectives` (with the
    mesh, to name their axes). A parameter's ``sharding={devices=[4,1,2]...}``
    annotation gives its global shape: each dimension times its pieces.

    Args:
        hlo_text: the text of an HLO module (a str).
        mesh: the mesh the devices lie on (a JAX mesh or ``{"X": 2, "Y": 4}``), to name collectives' axes.

    Returns:
        an :class:`HloSummary`; print it for the table.

    Chapter:
        9 (Profiling)

    Example:
        >>> hlo = '''ENTRY %main (x: f32[8,128], w: f32[128,256]) -> f32[8,256] {
        ...   %x = f32[8,128]{1,0} parameter(0)
        ...   %w = f32[128,256]{1,0} parameter(1)
        ...   ROOT %dot = f32[8,256]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        ... }'''
        >>> s = hlo_summary(hlo)
        >>> [op.opcode for op in s.ops], s.op("dot").shape
        (['parameter', 'parameter', 'dot'], (8, 256))
    """
    if not isinstance(hlo_text, str):
        raise InvalidValueError(f"`hlo_text` must be the text of an HLO module (a str), got {shown(hlo_text)}")
    collectives = {c.name: c for c in parse_collectives(hlo_text, mesh=mesh)}
    lines = _joined_lines(hlo_text)
    comps, raw, entry = _computations(lines)
    module = re.search(r"HloModule\s+([\w.\-]+)", hlo_text)
    partitions = re.search(r"num_partitions=(\d+)", hlo_text)
    if entry is None:  # a bare list of instructions, no computations around them
        entry = ""
        comps = {"": [p for p in map(_instruction, lines) if p]}
        raw = {"": [line for line in lines if _instruction(line)]}
    ops = []
    for name, type_text, opcode, operand_text, attrs in comps[entry]:
        result = tuple(_typed(type_text))
        calls = _attribute(attrs, "calls")
        inside = tuple(p[2] for p in comps.get(calls, ()) if p[2] != "parameter")
        sharding = _attribute(attrs, "sharding")
        source = re.search(r'op_name="([^"]*)"', attrs)
        shape_rank = len(result[0].shape) if len(result) == 1 else 0
        ops.append(HloOp(
            name=name, opcode=opcode, result=result,
            operands=tuple(p.split()[-1].lstrip("%") for p in _operands(operand_text) if p.split()),
            kind=_attribute(attrs, "kind"), calls=calls, inside=inside,
            source=source.group(1) if source else "", sharding=sharding,
            tiles=_tiles(sharding, shape_rank) if sharding and len(result) == 1 else None,
            collective=collectives.get(name)))
    return HloSummary(module.group(1) if module else "", int(partitions.group(1)) if partitions else 1,
                      tuple(ops), raw, entry)


def _typed(type_text: str) -> list[HloArray]:
    """The array types in `type_text` (one, or a tuple), layouts kept."""
    found = []
    for m in re.finditer(r"([a-z][a-z0-9]*)\[([<=\d,]*)\](\{[^{}]*\})?", type_text):
        if m.group(1) == "token" or _bits(m.group(1)) == 0:
            continue
        try:
            found.append(hlo_array(m.group(0)))
        except InvalidValueError:  # a layout this reader does not know: keep the shape
            dims = tuple(int(d.replace("<=", "")) for d in m.group(2).split(",") if d)
            found.append(HloArray(m.group(1), dims, tuple(reversed(range(len(dims)))), text=m.group(0)))
    return found or [HloArray(dt, dims, tuple(reversed(range(len(dims))))) for dt, dims in _arrays(type_text)]


# --- XLA's cost analysis -----------------------------------------------------------------


@dataclass(frozen=True)
class XlaCost:
    """XLA's count of a function's work: FLOPs, transcendental ops and bytes accessed.

    ``optimized`` says whether the count is of the compiled module (after
    fusion: each fusion's inputs and output counted once) or of the module as
    JAX lowered it (every op's inputs and outputs). For a sharded module the
    counts are per device.
    """

    flops: float
    bytes_accessed: float
    transcendentals: float = 0.0
    optimized: bool = True

    @property
    def intensity(self) -> float:
        """FLOPs per byte accessed (FLOP/B)."""
        return self.flops / self.bytes_accessed if self.bytes_accessed else math.inf

    def __str__(self) -> str:
        return (f"{fmt(self.flops, 'FLOP')}, {fmt(self.bytes_accessed, 'B')} accessed: "
                f"intensity {fmt(self.intensity, 'FLOP/B')}"
                + (f" ({fmt(self.transcendentals)} transcendentals)" if self.transcendentals else ""))


def _callable(fn):
    if not callable(fn):
        raise InvalidValueError(f"`fn` must be a function of JAX arrays, got {shown(fn)}")


def _lowered(fn, args):
    import jax

    try:
        return jax.jit(fn).lower(*args)
    except Exception as err:  # tracing failed: say so in scalelib's words
        raise InvalidValueError(f"`args`: jax.jit(fn) could not trace fn with these arguments "
                                f"({type(err).__name__}: {_first_line(err)})") from None


def _first_line(err: Exception) -> str:
    text = str(err)
    return text.splitlines()[0] if text else ""


def cost_analysis(fn, *args, optimized=True):
    """XLA's own count of the FLOPs and bytes of ``jax.jit(fn)(*args)``, and so its intensity.

    With ``optimized=True`` the count is of the compiled module, after XLA fused
    ops together (an intermediate inside a fusion costs no bytes); with
    ``optimized=False``, of the module as JAX lowered it, where every op reads
    its inputs and writes its output. On a CPU the compiled count of a bf16
    program includes the conversions to f32 the CPU makes; the unoptimised count
    keeps the bytes a TPU would move. Arguments may be ``jax.ShapeDtypeStruct``:
    nothing runs. Pass the result's ``flops`` and ``bytes_accessed`` to
    :func:`~scalelib.roofline` for a predicted time.

    Args:
        fn: a function of JAX arrays.
        *args: its arguments (arrays or ``jax.ShapeDtypeStruct``).
        optimized: count the compiled module (True) or the lowered one (False).

    Returns:
        an :class:`XlaCost`: ``flops`` (FLOP), ``bytes_accessed`` (B), ``intensity`` (FLOP/B).

    Chapter:
        9 (Profiling)

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
        >>> w = jax.ShapeDtypeStruct((512, 1024), jnp.float32)
        >>> cost = cost_analysis(jnp.matmul, x, w)
        >>> cost.flops == 2 * 256 * 512 * 1024, cost.bytes_accessed == 4 * (256 * 512 + 512 * 1024 + 256 * 1024)
        (True, True)
    """
    _callable(fn)
    optimized = flag("optimized", optimized)
    lowered = _lowered(fn, args)
    try:
        stage = lowered.compile() if optimized else lowered
        counts = stage.cost_analysis()
    except Exception as err:
        raise InvalidValueError(f"`args`: XLA could not compile and count fn for these arguments "
                                f"({type(err).__name__}: {_first_line(err)})") from None
    if isinstance(counts, (list, tuple)):  # older JAX: one dict per computation
        counts = counts[0] if counts else {}
    counts = counts or {}
    return XlaCost(float(counts.get("flops", 0.0)), float(counts.get("bytes accessed", 0.0)),
                   float(counts.get("transcendentals", 0.0)), optimized)


# --- the JAX profiler's trace ------------------------------------------------------------


@dataclass(frozen=True)
class TraceEvent:
    """One span of a trace: its name, thread, start (from the first event) and duration, in seconds.

    ``hlo_op`` and ``hlo_module`` are set for the spans of XLA ops (the trace
    viewer's "XLA Ops" row).
    """

    name: str
    thread: str
    start_s: float
    duration_s: float
    hlo_op: str | None = None
    hlo_module: str | None = None

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class TraceOp:
    """An XLA op of a trace with the time it took over every run: calls, total and mean (s)."""

    name: str
    module: str
    calls: int
    total_s: float
    mean_s: float


@dataclass(frozen=True)
class Trace:
    """A trace the JAX profiler wrote, read by :func:`read_trace`.

    ``events`` are every span in order of start; ``threads`` the threads they
    ran on; ``xla_ops`` the spans of XLA ops; ``ops`` those grouped by op,
    longest total first. Printed, it is a table of the XLA ops.
    """

    path: str
    events: tuple[TraceEvent, ...]
    threads: tuple[str, ...]

    @property
    def xla_ops(self) -> tuple[TraceEvent, ...]:
        return tuple(e for e in self.events if e.hlo_op)

    @property
    def duration_s(self) -> float:
        """From the first span's start to the last span's end (s)."""
        return max((e.end_s for e in self.events), default=0.0)

    @property
    def ops(self) -> tuple[TraceOp, ...]:
        groups: dict[tuple[str, str], list[float]] = {}
        for e in self.xla_ops:
            groups.setdefault((e.hlo_op, e.hlo_module or ""), []).append(e.duration_s)
        rows = [TraceOp(op, module, len(d), sum(d), sum(d) / len(d)) for (op, module), d in groups.items()]
        return tuple(sorted(rows, key=lambda r: -r.total_s))

    def __str__(self) -> str:
        ops = self.ops
        total = sum(r.total_s for r in ops)
        rows = ["| XLA op | module | runs | total | mean per run | share |", "|---|---|---|---|---|---|"]
        for r in ops:
            rows.append(f"| {r.name} | {r.module} | {r.calls} | {fmt(r.total_s, 's')} | {fmt(r.mean_s, 's')} "
                        f"| {r.total_s / total:.0%} |")
        if not ops:
            rows.append("| — | | | | | |")
        return "\n".join(rows)


def _trace_file(path) -> str:
    """The trace file at `path`: the file itself, or the newest ``*.trace.json.gz`` under a folder."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise InvalidValueError(f"`path` must be a trace file or the folder a trace was written to, got {shown(path)}")
    path = os.fspath(path)
    if os.path.isdir(path):
        found = glob.glob(os.path.join(path, "**", "*.trace.json.gz"), recursive=True)
        if not found:
            raise InvalidValueError(f"`path`: no *.trace.json.gz under {path!r}; capture one with "
                                    f"capture_trace(fn, *args, logdir={path!r})")
        return max(found, key=os.path.getmtime)
    if not os.path.isfile(path):
        raise InvalidValueError(f"`path`: no such file or folder: {path!r}")
    return path


def _reset_profiler() -> None:
    """Mark JAX's profiler stopped after a failed stop_trace (which leaves it marked running)."""
    try:
        from jax._src import profiler

        with profiler._profile_state.lock:
            profiler._profile_state.reset()
    except (ImportError, AttributeError):  # another JAX: nothing more to do
        pass


def capture_trace(fn, *args, logdir=None, repeats=3):
    """Run ``jax.jit(fn)(*args)`` `repeats` times under the JAX profiler and write the trace to `logdir`.

    The function is compiled and run once before the trace starts, so the trace
    holds the runs only, not the compilation. The profiler writes, under
    ``logdir/plugins/profile/<date>/``, an ``.xplane.pb`` (what TensorBoard's
    profile plugin, xprof, opens) and a ``.trace.json.gz`` in Chrome's
    trace-event format (what https://ui.perfetto.dev opens, and
    :func:`read_trace` reads). It needs no network.

    Args:
        fn: a function of JAX arrays.
        *args: its arguments (arrays).
        logdir: the folder to write to (a new temporary folder when None).
        repeats: runs to record (>= 1).

    Returns:
        the path of the ``.trace.json.gz`` written (str).

    Chapter:
        9 (Profiling)

    Example:
        >>> import jax.numpy as jnp
        >>> path = capture_trace(jnp.sin, jnp.ones(1024), repeats=2)     # doctest: +SKIP
        >>> path.endswith(".trace.json.gz")                              # doctest: +SKIP
        True
    """
    _callable(fn)
    repeats = count("repeats", repeats)
    if repeats > MAX_RUNS:
        raise InvalidValueError(f"`repeats` must be at most {MAX_RUNS}, got {repeats}")
    if logdir is None:
        logdir = tempfile.mkdtemp(prefix="scalelib-trace-")
    elif not isinstance(logdir, (str, os.PathLike)) or isinstance(logdir, bytes) or not os.fspath(logdir):
        raise InvalidValueError(f"`logdir` must be a folder's path (a str), got {shown(logdir)}")
    logdir = os.fspath(logdir)
    parent = os.path.abspath(logdir)
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        where = "is a file" if parent == os.path.abspath(logdir) else f"lies under {parent!r}, a file"
        raise InvalidValueError(f"`logdir` must be a folder (new or existing), got {logdir!r}, which {where}")
    import jax

    jitted = jax.jit(fn)
    try:
        jax.block_until_ready(jitted(*args))  # compile and warm up outside the trace
    except Exception as err:
        raise InvalidValueError(f"`args`: jax.jit(fn) could not run with these arguments "
                                f"({type(err).__name__}: {_first_line(err)})") from None
    before = set(glob.glob(os.path.join(logdir, "**", "*.trace.json.gz"), recursive=True))
    try:
        jax.profiler.start_trace(logdir)
    except RuntimeError as err:  # e.g. a trace already running: the profiler records one at a time
        raise InvalidValueError(f"`logdir`: the JAX profiler could not record a trace ({_first_line(err)})") from None
    try:
        for _ in range(repeats):
            jax.block_until_ready(jitted(*args))
    finally:  # whatever happens, the profiler stops: a later capture_trace can start it again
        try:
            jax.profiler.stop_trace()
        except RuntimeError as err:  # it could not write the trace, and JAX still counts it as running
            _reset_profiler()
            raise InvalidValueError(f"`logdir`: the JAX profiler could not write a trace under {logdir!r} "
                                    f"({_first_line(err)})") from None
    written = set(glob.glob(os.path.join(logdir, "**", "*.trace.json.gz"), recursive=True)) - before
    if not written:
        raise InvalidValueError(f"`logdir`: the profiler wrote no .trace.json.gz under {logdir!r}")
    return max(written, key=os.path.getmtime)


def read_trace(path):
    """Read a trace the JAX profiler wrote (Chrome trace-event JSON, gzipped) into spans and XLA ops.

    Takes the ``.trace.json.gz`` file, or the folder given to
    :func:`capture_trace` / ``jax.profiler.trace`` (its newest trace is read).
    Each complete event (``"ph": "X"``) becomes a :class:`TraceEvent`, with its
    start measured from the trace's first event; the spans of XLA ops carry
    ``hlo_op`` and ``hlo_module``, as in the trace viewer's "XLA Ops" row.

    Args:
        path: a ``.trace.json.gz`` file, or a folder holding one.

    Returns:
        a :class:`Trace` (times in s); print it for the table of XLA ops.

    Chapter:
        9 (Profiling)

    Example:
        >>> import jax.numpy as jnp
        >>> trace = read_trace(capture_trace(jnp.sin, jnp.ones(1024), repeats=2))   # doctest: +SKIP
        >>> trace.ops[0].calls                                                     # doctest: +SKIP
        2
    """
    file = _trace_file(path)
    try:
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as err:
        raise InvalidValueError(f"`path`: {file!r} is not a gzipped JSON trace ({type(err).__name__})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise InvalidValueError(f"`path`: {file!r} has no list of trace events")
    names: dict[tuple, str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", e.get("tid")))
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"
             and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
    origin = min((e["ts"] for e in spans), default=0.0)
    out = []
    for e in spans:
        args = e.get("args") or {}
        thread = names.get((e.get("pid"), e.get("tid")), str(e.get("tid")))
        out.append(TraceEvent(str(e.get("name", "")), thread, (e["ts"] - origin) * 1e-6, e["dur"] * 1e-6,
                              args.get("hlo_op"), args.get("hlo_module")))
    out.sort(key=lambda e: (e.start_s, -e.duration_s))
    threads = tuple(dict.fromkeys(e.thread for e in out))
    return Trace(file, tuple(out), threads)


def _depths(events) -> list[int]:
    """Nesting depth of each span on its thread (spans sorted by start, longest first at a tie)."""
    depths, stacks = [], {}
    for e in events:
        stack = stacks.setdefault(e.thread, [])
        while stack and stack[-1] <= e.start_s:
            stack.pop()
        depths.append(len(stack))
        stack.append(e.end_s)
    return depths


def plot_trace(trace, *, ax=None, min_duration_s=1e-6):
    """Draw a trace's timeline: a row per thread, a bar per span, XLA ops coloured and named.

    Spans that nest (a call inside a call) are drawn below their parent within
    the thread's row, as the trace viewer does. Spans shorter than
    `min_duration_s` (the profiler's instant markers) are left out.

    Args:
        trace: a :class:`Trace` from :func:`read_trace`, or a path it can read.
        ax: a matplotlib Axes to draw on; a new figure when None.
        min_duration_s: the shortest span drawn (s).

    Returns:
        The matplotlib Axes.

    Chapter:
        9 (Profiling)

    Example:
        >>> import jax.numpy as jnp
        >>> ax = plot_trace(capture_trace(jnp.sin, jnp.ones(1024), repeats=2))     # doctest: +SKIP
        >>> ax.get_xlabel()                                                       # doctest: +SKIP
        'time since the trace began (ms)'
    """
    from ._diagrams import _axes
    from ._validate import nonnegative

    if not isinstance(trace, Trace):
        trace = read_trace(trace)
    shortest = nonnegative("min_duration_s", min_duration_s)
    if not isinstance(shortest, float):
        raise InvalidValueError(f"`min_duration_s` must be one number of seconds, got {shown(min_duration_s)}")
    events = [e for e in trace.events if e.duration_s >= shortest]
    if not events:
        longest = max((e.duration_s for e in trace.events), default=0.0)
        raise InvalidValueError(f"`min_duration_s`: no span of the trace lasts {fmt(shortest, 's')} or more "
                                f"(the longest: {fmt(longest, 's')})")
    depths = _depths(events)
    rows = {t: i for i, t in enumerate(dict.fromkeys(e.thread for e in events))}
    levels = {t: 1 + max((d for e, d in zip(events, depths) if e.thread == t), default=0) for t in rows}
    created = ax is None
    ax = _axes(ax, figsize=(7.5, 1.9 + 0.9 * max(len(rows), 1)))   # the legend goes below: legible at a page's width
    window = max((e.end_s for e in events), default=0.0) - min((e.start_s for e in events), default=0.0)
    colors = {}
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
    for e, d in zip(events, depths):
        height = 0.8 / levels[e.thread]
        y = rows[e.thread] - 0.4 + d * height
        if e.hlo_op:
            color = colors.setdefault(e.hlo_op, palette[len(colors) % len(palette)])
        else:
            color = "#c7c7c7"
        ax.broken_barh([(e.start_s * 1e3, e.duration_s * 1e3)], (y, height * 0.92), facecolors=color,
                       edgecolors="none")
        if e.hlo_op and e.duration_s > 0.0135 * len(e.hlo_op) * window:  # name the XLA ops wide enough for it
            ax.text((e.start_s + e.duration_s / 2) * 1e3, y + height * 0.46, e.hlo_op, ha="center", va="center",
                    fontsize=9, color="white", clip_on=True)
    for op, color in colors.items():
        ax.plot([], [], color=color, linewidth=6, label=f"XLA op: {op}")
    if not colors:
        ax.plot([], [], color="#c7c7c7", linewidth=6, label="host-side spans (no XLA op recorded)")
    else:
        ax.plot([], [], color="#c7c7c7", linewidth=6, label="other spans (JAX runtime, Python)")
    ax.set_yticks(range(len(rows)), _thread_labels(list(rows)))
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time since the trace began (ms)")
    ax.set_ylabel("thread")
    ax.set_title(f"JAX profiler trace: {len(trace.xla_ops)} XLA op spans over {fmt(trace.duration_s, 's')}")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False,
              borderaxespad=0)
    ax.figure.tight_layout()
    if created:  # text legible on the site (>= 9.5 px at 1280 px)
        from ._plot import _legible

        _legible(ax.figure, relayout=True)
    return ax


def _short_thread(name: str) -> str:
    """``tf_XLAEigen/6376883616103112987`` -> ``XLAEigen``; ``python`` stays."""
    name = name.split("/")[0]
    return name[3:] if name.startswith("tf_") else name


def _thread_labels(threads: list[str]) -> list[str]:
    """Short thread names, numbered where several threads share one (``XLAPjRtCpuClient 1``, ``... 2``)."""
    short = [_short_thread(t) for t in threads]
    counts, seen = Counter(short), Counter()
    labels = []
    for name in short:
        seen[name] += 1
        labels.append(f"{name} {seen[name]}" if counts[name] > 1 else name)
    return labels


# --- prediction against measurement ------------------------------------------------------


@dataclass(frozen=True)
class RooflineCheck:
    """A measured time beside the roofline's prediction for the same function (:func:`compare_with_roofline`).

    ``cost`` is XLA's count (of the compiled module), ``roofline`` chapter 1's
    :class:`~scalelib.Roofline` of it on the chip, ``measured_s`` the best of the
    timed runs. ``ratio`` is measured over predicted: 1 means the roofline was
    met, 3 that the run took three times the bound.
    """

    name: str
    cost: XlaCost
    roofline: object
    measured_s: float

    @property
    def predicted_s(self) -> float:
        return float(self.roofline.t_lower_s)

    @property
    def ratio(self) -> float:
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else math.inf

    @property
    def bound(self) -> str:
        return str(self.roofline.bound)

    def __str__(self) -> str:
        return (f"{self.name}: predicted {fmt(self.predicted_s, 's')} ({self.bound}-bound), "
                f"measured {fmt(self.measured_s, 's')}, {self.ratio:.2g}x the prediction")


def compare_with_roofline(fn, *args, chip, dtype="f32", repeats=5, name=None):
    """Time ``jax.jit(fn)(*args)`` and set it beside the roofline's prediction from XLA's cost analysis.

    The prediction is chapter 1's optimistic bound, max(FLOPs / C, bytes / W),
    with FLOPs and bytes from :func:`cost_analysis` of the compiled module and C
    and W from `chip` (a named chip, or this machine's measured spec from
    :func:`~scalelib.measure_machine`). The measurement is the best of `repeats`
    runs after one that compiles.

    Formula:
        predicted = max(FLOPs / C, bytes / W);  ratio = measured / predicted

    Args:
        fn: a function of JAX arrays.
        *args: its arguments (arrays).
        chip: a chip name or a ChipSpec, e.g. ``measure_machine()``.
        dtype: the dtype whose peak rate C applies (``"f32"`` for a measured CPU).
        repeats: timed runs (>= 1).
        name: a label for the table (the function's name by default).

    Returns:
        a :class:`RooflineCheck` (times in s).

    Chapter:
        9 (Profiling)

    Example:
        >>> import jax.numpy as jnp, scalelib as sl
        >>> local = sl.measure_machine()                                         # doctest: +SKIP
        >>> c = compare_with_roofline(jnp.matmul, jnp.ones((512, 512)), jnp.ones((512, 512)),
        ...                           chip=local)                                # doctest: +SKIP
        >>> c.bound                                                              # doctest: +SKIP
        'compute'
    """
    from ._probe import _best_time
    from ._roofline import roofline

    _callable(fn)
    repeats = count("repeats", repeats)
    if repeats > MAX_RUNS:
        raise InvalidValueError(f"`repeats` must be at most {MAX_RUNS}, got {repeats}")
    if name is not None and not isinstance(name, str):
        raise InvalidValueError(f"`name` must be a label (a str), got {shown(name)}")
    cost = cost_analysis(fn, *args)
    if cost.bytes_accessed <= 0:
        raise InvalidValueError("`fn`: XLA counts no bytes accessed for it, so it has no roofline to compare with")
    bound = roofline(cost.flops, cost.bytes_accessed, chip, dtype=dtype)
    import jax

    jitted = jax.jit(fn)
    try:
        measured = _best_time(lambda *a: _Ready(jitted(*a)), *args, repeats=repeats)
    except Exception as err:
        raise InvalidValueError(f"`args`: jax.jit(fn) could not run with these arguments "
                                f"({type(err).__name__}: {_first_line(err)})") from None
    label = name if name is not None else getattr(fn, "__name__", "fn")
    return RooflineCheck(label, cost, bound, measured)


class _Ready:
    """Anything JAX returns (a pytree of arrays), with the ``block_until_ready`` _best_time calls."""

    def __init__(self, out):
        self.out = out

    def block_until_ready(self):
        import jax

        jax.block_until_ready(self.out)
        return self


def prediction_table(checks):
    """A Markdown table of predictions against measurements, one :class:`RooflineCheck` per row.

    Args:
        checks: results of :func:`compare_with_roofline`.

    Returns:
        the table as Markdown text (str); its last column, ``ratio``, is measured / predicted.

    Chapter:
        9 (Profiling)

    Example:
        >>> print(prediction_table([]))
        | operation | FLOPs | bytes | intensity | bound | predicted | measured | ratio |
        |---|---|---|---|---|---|---|---|
    """
    if isinstance(checks, RooflineCheck):
        checks = [checks]
    if isinstance(checks, (str, bytes, dict)) or not hasattr(checks, "__iter__"):
        raise InvalidValueError(f"`checks` must be a list of compare_with_roofline results, got {shown(checks)}")
    checks = list(checks)
    for c in checks:
        if not isinstance(c, RooflineCheck):
            raise InvalidValueError(f"`checks` must hold compare_with_roofline results, got {shown(c)}")
    rows = ["| operation | FLOPs | bytes | intensity | bound | predicted | measured | ratio |",
            "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        rows.append(f"| {c.name} | {fmt(c.cost.flops, 'FLOP')} | {fmt(c.cost.bytes_accessed, 'B')} "
                    f"| {fmt(c.cost.intensity, 'FLOP/B')} | {c.bound} | {fmt(c.predicted_s, 's')} "
                    f"| {fmt(c.measured_s, 's')} | {c.ratio:.2g} |")
    return "\n".join(rows)
