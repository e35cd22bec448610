"""Accelerator specs as data: a frozen :class:`ChipSpec` per chip, looked up by name.

The figures live in ``scalelib/data/chips.toml``, each chip with its source.
``chip("tpu-v5e")`` returns one spec, ``chips()`` lists the names (with their
aliases), ``hw.tpu_v5e`` is the same spec with tab completion. A reader adds a
chip of their own with :func:`register_chip` (a ChipSpec or a dict) or
:func:`load_chips` (a TOML file laid out like ``chips.toml``), and derives a
variant of a known chip under a new name with :meth:`ChipSpec.derive`.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError, unknown
from ._registry import lookup
from ._units import fmt
from ._validate import shown

#: dtype name -> (ChipSpec field with its peak rate, bytes per value)
DTYPES: Mapping[str, tuple[str, float]] = MappingProxyType(
    {
        "f32": ("f32_flops_per_s", 4),
        "bf16": ("bf16_flops_per_s", 2),
        "fp16": ("fp16_flops_per_s", 2),
        "fp8": ("fp8_flops_per_s", 1),
        "int8": ("int8_ops_per_s", 1),
        "int4": ("int8_ops_per_s", 0.5),  # int4 weights run on the int8 units
        "fp4": ("fp4_flops_per_s", 0.5),
    }
)

#: Other spellings of the dtypes: numpy's and JAX's names, and common short forms.
DTYPE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "float32": "f32", "fp32": "f32",
        "bfloat16": "bf16",
        "float16": "fp16", "f16": "fp16", "half": "fp16",
        "float8_e4m3fn": "fp8", "float8_e4m3": "fp8", "float8_e5m2": "fp8", "float8_e4m3b11fnuz": "fp8",
        "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "e4m3": "fp8", "e5m2": "fp8",
        "float4_e2m1fn": "fp4",
    }
)

#: bandwidth name -> ChipSpec field (bytes/s)
BANDWIDTHS: Mapping[str, str] = MappingProxyType(
    {
        "hbm": "hbm_bytes_per_s",
        "ici": "ici_link_bytes_per_s_one_way",
        "ici_bidirectional": "ici_link_bytes_per_s_bidirectional",
        "pcie": "pcie_bytes_per_s",
        "dcn": "dcn_bytes_per_s_per_chip",
        "nvlink": "scale_up_bytes_per_s_per_gpu",
        "vmem": "vmem_bytes_per_s",
    }
)

FAMILIES = ("tpu", "gpu", "cpu")


def dtype_name(dtype, *, arg: str = "dtype") -> str:
    """The course's name of `dtype` ("bf16", "f32", ...), from any usual spelling.

    Accepts the course's names, numpy's and JAX's names (``"bfloat16"``,
    ``"float32"``) and dtype objects (``np.float32``, ``jnp.bfloat16``).

    Returns:
        one of the names of :data:`DTYPES` (str).

    Chapter:
        1 (Rooflines)

    Example:
        >>> import numpy as np
        >>> dtype_name("bfloat16"), dtype_name(np.float32), dtype_name("fp8")
        ('bf16', 'f32', 'fp8')
    """
    if isinstance(dtype, str):
        key = dtype.strip().lower()
    elif dtype is None or isinstance(dtype, (bool, int, float)):
        key = None
    else:
        try:
            key = np.dtype(dtype).name
        except (TypeError, ValueError):
            key = None
    if key is not None:
        key = DTYPE_ALIASES.get(key, key)
        if key in DTYPES:
            return key
    raise unknown("dtype", dtype if isinstance(dtype, str) else (key or shown(dtype)), DTYPES, arg=arg,
                  extra=DTYPE_ALIASES)


@derivable
def bytes_per_value(dtype) -> float:
    """Bytes one value of `dtype` takes (B): 4 for f32, 2 for bf16, 1 for int8 and fp8, ½ for int4 and fp4.

    Formula:
        bytes per value = bits per value / 8

    Args:
        dtype: a dtype name or object (``"bf16"``, ``"bfloat16"``, ``jnp.bfloat16``).

    Returns:
        bytes per value (B).

    Chapter:
        1 (Rooflines)

    Example:
        >>> bytes_per_value("bf16"), bytes_per_value("int4")
        (2.0, 0.5)
    """
    name = dtype_name(dtype)
    return Derivation(f"bytes({name})", "bytes per value", "", float(DTYPES[name][1]), "B")


_FLOAT_FIELDS = (
    "bf16_flops_per_s", "fp16_flops_per_s", "f32_flops_per_s", "int8_ops_per_s", "fp8_flops_per_s",
    "fp4_flops_per_s", "hbm_bytes", "hbm_bytes_per_s", "ici_link_bytes_per_s_one_way",
    "ici_link_bytes_per_s_bidirectional", "dcn_bytes_per_s_per_chip", "pcie_bytes_per_s",
    "fast_mem_bytes_per_core", "vmem_bytes_per_s", "tmem_bytes_per_core", "registers_bytes_per_core",
    "l2_bytes", "clock_ghz_base", "clock_ghz_boost", "scale_up_bytes_per_s_per_gpu",
    "scale_out_bytes_per_s_per_node",
)
_INT_FIELDS = ("ici_links_per_chip", "wraparound_cube", "cores", "vector_alus_per_core", "mxu_size",
               "scale_up_domain")


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator's figures, per chip (per GPU). ``None`` where no figure is published.

    Rates are dense (no sparsity) peak FLOP/s; bandwidths in bytes/s; memories in
    bytes. ``source`` names where the figures come from; ``sources`` overrides it
    per field, and :meth:`source_of` looks one up. Every figure is checked when a
    spec is made: positive and finite, whole where it counts something.

    Chapter:
        1 (Rooflines), 2 (TPUs), 12 (GPUs)

    Example:
        >>> spec = ChipSpec("my-chip", "gpu", "my lab's measurements", bf16_flops_per_s=1e15, hbm_bytes_per_s=4e12)
        >>> spec.peak_flops_per_s() / spec.bytes_per_s()
        250.0
    """

    name: str
    family: str  # "tpu", "gpu" or "cpu"
    source: str
    bf16_flops_per_s: float | None = None
    fp16_flops_per_s: float | None = None
    f32_flops_per_s: float | None = None
    int8_ops_per_s: float | None = None
    fp8_flops_per_s: float | None = None
    fp4_flops_per_s: float | None = None
    hbm_bytes: float | None = None
    hbm_bytes_per_s: float | None = None
    ici_link_bytes_per_s_one_way: float | None = None
    ici_link_bytes_per_s_bidirectional: float | None = None
    ici_links_per_chip: int | None = None
    pod_shape: tuple[int, ...] | None = None
    host_shape: tuple[int, ...] | None = None
    wraparound_cube: int | None = None  # slices of whole cubes of this side wrap on every axis
    dcn_bytes_per_s_per_chip: float | None = None
    pcie_bytes_per_s: float | None = None
    cores: int | None = None  # TensorCores per TPU chip, SMs per GPU
    vector_alus_per_core: int | None = None  # VPU ALUs per TensorCore (lanes x ALUs), fp32 CUDA cores per SM
    mxu_size: int | None = None  # a TPU MXU is mxu_size x mxu_size
    fast_mem_bytes_per_core: float | None = None  # VMEM per TensorCore, SMEM per SM
    vmem_bytes_per_s: float | None = None  # VMEM <-> MXU/VPU bandwidth of a TPU
    tmem_bytes_per_core: float | None = None
    registers_bytes_per_core: float | None = None  # register file per SM
    l2_bytes: float | None = None
    clock_ghz_base: float | None = None
    clock_ghz_boost: float | None = None
    scale_up_bytes_per_s_per_gpu: float | None = None  # NVLink, one direction
    scale_up_domain: int | None = None  # GPUs joined by NVLink/NVSwitch
    scale_out_bytes_per_s_per_node: float | None = None  # InfiniBand egress of one scale-up domain (node)
    notes: str = ""
    aliases: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        for key in ("name", "source"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise InvalidValueError(f"ChipSpec `{key}` must be a non-empty string, got {shown(value)}")
        set_("name", self.name.strip().lower())
        if not isinstance(self.family, str) or self.family not in FAMILIES:
            raise unknown("chip family", self.family, FAMILIES, arg="family")
        for key in _FLOAT_FIELDS:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value) or value <= 0:
                raise InvalidValueError(
                    f"ChipSpec {self.name!r}: `{key}` must be a positive finite number or None, got {shown(value)}")
            set_(key, float(value))
        for key in _INT_FIELDS:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidValueError(
                    f"ChipSpec {self.name!r}: `{key}` must be a whole number >= 1 or None, got {shown(value)}")
            set_(key, int(value))
        for key in ("pod_shape", "host_shape"):
            value = getattr(self, key)
            if value is None:
                continue
            items = tuple(value) if isinstance(value, (list, tuple)) else None
            if not items or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
                                    for v in items):
                raise InvalidValueError(
                    f"ChipSpec {self.name!r}: `{key}` must be a sequence of whole numbers >= 1, got {shown(value)}")
            set_(key, tuple(int(v) for v in items))
        if self.pod_shape and self.host_shape and len(self.pod_shape) != len(self.host_shape):
            raise InvalidValueError(f"ChipSpec {self.name!r}: `host_shape` {self.host_shape} needs as many axes "
                                    f"as `pod_shape` {self.pod_shape}")
        if isinstance(self.aliases, str) or not all(isinstance(a, str) and a for a in self.aliases):
            raise InvalidValueError(f"ChipSpec {self.name!r}: `aliases` must be a sequence of names, got {shown(self.aliases)}")
        set_("aliases", tuple(a.strip().lower() for a in self.aliases))
        if not isinstance(self.notes, str):
            raise InvalidValueError(f"ChipSpec {self.name!r}: `notes` must be a string, got {shown(self.notes)}")
        names = [f.name for f in dataclasses.fields(self)]
        if not isinstance(self.sources, Mapping) or any(
                k not in names or not isinstance(v, str) for k, v in self.sources.items()):
            raise InvalidValueError(f"ChipSpec {self.name!r}: `sources` must map field names to strings, "
                                    f"got {shown(self.sources)}")
        set_("sources", MappingProxyType(dict(self.sources)))

    def __repr__(self) -> str:
        rate = self.bf16_flops_per_s or self.f32_flops_per_s or self.fp16_flops_per_s
        parts = [self.name]
        if rate:
            parts.append(fmt(rate, "FLOP/s"))
        if self.hbm_bytes_per_s:
            parts.append(f"{fmt(self.hbm_bytes_per_s, 'B/s')} memory")
        return f"ChipSpec({', '.join(parts)})"

    def source_of(self, field_name: str) -> str:
        """Where the figure `field_name` comes from: the field's own source, else the chip's.

        Returns:
            the source, in words (str).

        Chapter:
            1 (Rooflines)

        Example:
            >>> chip("tpu-v5e").source_of("fast_mem_bytes_per_core")[:35]
            'Google Cloud TPU documentation (TPU'
        """
        names = [f.name for f in dataclasses.fields(self)]
        if not isinstance(field_name, str) or field_name not in names:
            raise unknown("ChipSpec field", field_name, names, arg="field_name")
        return self.sources.get(field_name, self.source)

    def _require(self, field_name: str, purpose: str):
        """The figure `field_name`, or an error saying that `purpose` needs it and this chip has none."""
        value = getattr(self, field_name)
        if value is None:
            raise InvalidValueError(f"{purpose} needs `{field_name}`, and chip {self.name!r} has none; "
                                    f"give it one with chip({self.name!r}).derive('new-name', {field_name}=...)")
        return value

    def _rate_dtype(self, dtype, *, arg: str = "dtype") -> str:
        """`dtype`'s name, checked to be one this chip has a published peak rate for (`arg`: the caller's name)."""
        name = dtype_name(dtype, arg=arg)
        if getattr(self, DTYPES[name][0]) is None:
            have = [d for d, (f, _) in DTYPES.items() if getattr(self, f) is not None and d != "int4"]
            raise InvalidValueError(
                f"`{arg}`: {self.name} has no published {name} rate; it has: {', '.join(have) or 'none'}"
            )
        return name

    @derivable
    def peak_flops_per_s(self, *, dtype="bf16"):
        """Peak dense FLOP/s (OP/s for integers) of this chip in `dtype`: the C of the rooflines.

        Formula:
            C = the chip's published peak for `dtype` (int4 runs on the int8 units)

        Returns:
            FLOP/s.

        Chapter:
            1 (Rooflines)

        Example:
            >>> chip("h100").peak_flops_per_s(dtype="fp8")
            2000000000000000.0
        """
        name = self._rate_dtype(dtype)
        value = getattr(self, DTYPES[name][0])
        return Derivation(f"C({self.name}, {name})", "peak FLOP/s", lambda: f"({self.source_of(DTYPES[name][0])})",
                          value, "FLOP/s")

    @derivable
    def bytes_per_s(self, *, bandwidth="hbm"):
        """Bandwidth in bytes/s of one link kind: the W of the rooflines.

        Formula:
            W = the chip's published bandwidth of that link

        Args:
            bandwidth: ``"hbm"``, ``"ici"`` (one way, per link), ``"ici_bidirectional"``
                (per link), ``"pcie"``, ``"dcn"`` (per chip), ``"nvlink"`` (per GPU, one way) or ``"vmem"``.

        Returns:
            B/s.

        Chapter:
            1 (Rooflines), 2 (TPUs)

        Example:
            >>> chip("tpu-v5e").bytes_per_s(bandwidth="ici")
            45000000000.0
        """
        if not isinstance(bandwidth, str) or bandwidth not in BANDWIDTHS:
            raise unknown("bandwidth", bandwidth if isinstance(bandwidth, str) else shown(bandwidth), BANDWIDTHS,
                          arg="bandwidth")
        value = getattr(self, BANDWIDTHS[bandwidth])
        if value is None:
            have = [k for k, f in BANDWIDTHS.items() if getattr(self, f) is not None]
            raise InvalidValueError(
                f"`bandwidth`: {self.name} has no {bandwidth} bandwidth; it has: {', '.join(have) or 'none'}"
            )
        return Derivation(f"W({self.name}, {bandwidth})", "bandwidth",
                          lambda: f"({self.source_of(BANDWIDTHS[bandwidth])})", value, "B/s")

    def derive(self, name: str, **changes) -> "ChipSpec":
        """A variant of this chip under a new `name`, with some figures changed.

        The variant's source says what it was derived from; it is not registered
        (pass it to :func:`register_chip` to look it up by name).

        Returns:
            a new :class:`ChipSpec`.

        Chapter:
            1 (Rooflines)

        Example:
            >>> fast = chip("h100").derive("h100-fast-hbm", hbm_bytes_per_s=4e12)
            >>> fast.name, fast.hbm_bytes_per_s, round(fast.peak_flops_per_s() / fast.bytes_per_s())
            ('h100-fast-hbm', 4000000000000.0, 248)
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidValueError(f"`name` must be a non-empty string, got {shown(name)}")
        fields = {f.name for f in dataclasses.fields(self)} - {"name", "aliases"}
        for key in changes:
            if key not in fields:
                raise unknown("ChipSpec field", key, fields, arg="changes")
        if name.strip().lower() == self.name:
            raise InvalidValueError(f"`name`: a variant needs a name of its own, not {self.name!r}")
        source = changes.pop("source", f"{self.source}; derived from {self.name}")
        changed = ", ".join(sorted(changes)) or "nothing"
        return dataclasses.replace(self, name=name, aliases=(), source=source,
                                   notes=f"derived from {self.name} ({changed} changed)", **changes)


# --- the registry ---------------------------------------------------------------

_USER: dict[str, ChipSpec] = {}


def _spec_from_row(name: str, row: Mapping) -> ChipSpec:
    row = dict(row)
    row["sources"] = dict(row.pop("sources", {}))
    known = {f.name for f in dataclasses.fields(ChipSpec)} - {"name"}
    for key in row:
        if key not in known:
            raise unknown("ChipSpec field", key, known, arg=f"chip {name!r}")
    try:
        return ChipSpec(name=name, **row)
    except TypeError as err:
        raise InvalidValueError(f"chip {name!r}: {err}") from None


@lru_cache(maxsize=None)
def _builtin() -> dict[str, ChipSpec]:
    text = resources.files("scalelib").joinpath("data/chips.toml").read_text(encoding="utf-8")
    return {name: _spec_from_row(name, row) for name, row in tomllib.loads(text).items()}


def _all() -> dict[str, ChipSpec]:
    return {**_builtin(), **_USER}


def _aliases() -> dict[str, str]:
    table = {}
    for name, spec in _all().items():
        table[name] = name
        for alias in spec.aliases:
            table[alias] = name
    return table


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def register_chip(spec, *, replace: bool = False) -> ChipSpec:
    """Add a chip to the registry, so that every function finds it by name.

    Args:
        spec: a :class:`ChipSpec`, or a dict of its fields (``name``, ``family``,
            ``source`` and the figures).
        replace: allow replacing a chip registered earlier by :func:`register_chip`
            (the built-in chips cannot be replaced: derive a variant instead).

    Returns:
        The registered ChipSpec.

    Chapter:
        1 (Rooflines)

    Example:
        >>> spec = register_chip({"name": "my-accel", "family": "gpu", "source": "my data sheet",
        ...                       "bf16_flops_per_s": 5e14, "hbm_bytes_per_s": 2e12}, replace=True)
        >>> chip("my-accel").peak_flops_per_s() / chip("my-accel").bytes_per_s()
        250.0
    """
    if isinstance(spec, Mapping):
        row = dict(spec)
        if "name" not in row:
            raise InvalidValueError("`spec`: a chip given as a dict needs a 'name'")
        spec = _spec_from_row(row.pop("name"), row)
    if not isinstance(spec, ChipSpec):
        raise InvalidValueError(f"`spec` must be a ChipSpec or a dict of its fields, got {shown(spec)}")
    from ._validate import flag

    replace = flag("replace", replace)
    table = _aliases()
    for key in (spec.name, *spec.aliases):
        owner = table.get(_key(key))
        if owner is None or (owner == spec.name and owner in _USER and replace):
            continue
        if owner in _builtin():
            raise InvalidValueError(f"`spec`: {key!r} is a built-in chip ({owner}); derive a variant under a new "
                                    f"name: chip({owner!r}).derive('my-{owner}', ...)")
        if owner != spec.name or not replace:
            raise InvalidValueError(f"`spec`: {key!r} is already registered ({owner}); pass replace=True to replace it")
    _USER[spec.name] = spec
    return spec


def load_chips(path, *, replace: bool = False) -> tuple[str, ...]:
    """Register every chip of a TOML file laid out like scalelib's ``chips.toml`` (one table per chip).

    Returns:
        The names of the chips registered.

    Chapter:
        1 (Rooflines)

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "mine.toml"
        >>> _ = path.write_text('[lab-npu]\\nfamily = "tpu"\\nsource = "lab"\\nbf16_flops_per_s = 1e14\\n')
        >>> load_chips(path, replace=True)
        ('lab-npu',)
    """
    if not isinstance(path, (str, Path)):
        raise InvalidValueError(f"`path` must be a file path, got {shown(path)}")
    from ._validate import flag

    replace = flag("replace", replace)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidValueError(f"`path`: cannot read {str(path)!r} ({err.strerror})") from None
    except tomllib.TOMLDecodeError as err:
        raise InvalidValueError(f"`path`: {str(path)!r} is not valid TOML ({err})") from None
    specs = [_spec_from_row(name, row) for name, row in data.items()]
    return tuple(register_chip(spec, replace=replace).name for spec in specs)


class ChipNames(tuple):
    """Chip names, printed with their aliases: ``('h100' (h100-sxm, hopper), ...)``.

    Iterates, indexes and compares as the plain tuple of names; ``.aliases`` maps
    each name to its other spellings.
    """

    aliases: Mapping[str, tuple[str, ...]]

    def __new__(cls, specs):
        specs = list(specs)
        names = super().__new__(cls, (s.name for s in specs))
        names.aliases = MappingProxyType({s.name: s.aliases for s in specs})
        return names

    def __repr__(self) -> str:
        parts = [f"{n!r} ({', '.join(self.aliases[n])})" if self.aliases[n] else repr(n) for n in self]
        return "(" + ", ".join(parts) + ")"


def chips(family: str | None = None) -> tuple[str, ...]:
    """Names of the chips in the registry, optionally of one `family` ("tpu", "gpu" or "cpu").

    Returns:
        a tuple of names that prints each with its aliases (``.aliases`` maps a name to them).

    Chapter:
        2 (TPUs), 12 (GPUs)

    Example:
        >>> chips("tpu")
        ('tpu-v3' (v3), 'tpu-v4p' (v4p, tpu-v4, v4), 'tpu-v5p' (v5p), 'tpu-v5e' (v5e, v5litepod), 'tpu-v6e' (v6e, trillium), 'tpu7x' (ironwood, tpu-v7x, v7x, tpu-7x))
        >>> list(chips("tpu"))[:2]
        ['tpu-v3', 'tpu-v4p']
    """
    specs = _all().values()
    if family is not None:
        from ._validate import name as _name

        _name("family", family, FAMILIES, "chip family")
    return ChipNames(s for s in specs if family is None or s.family == family)


def chip(name: str | ChipSpec, *, arg: str = "chip") -> ChipSpec:
    """The spec of the chip called `name` or one of its aliases (a ChipSpec passes through unchanged).

    A modified copy of a registered chip that keeps its name (``dataclasses.replace(hw.h100, ...)``)
    is refused: it would be reported under the wrong name. Use :meth:`ChipSpec.derive`.

    Returns:
        a :class:`ChipSpec`.

    Chapter:
        1 (Rooflines)

    Example:
        >>> chip("tpu-v5e").bf16_flops_per_s
        197000000000000.0
        >>> chip("hopper").name
        'h100'
    """
    return lookup(name, kind="chip", cls=ChipSpec, table=_all(), aliases=_aliases(), key=_key, example="h100",
                  what="figures", arg=arg)


class _Hardware:
    """Every chip as an attribute, for tab completion: ``hw.tpu_v5e``, ``hw.h100``."""

    def __dir__(self):
        return [n.replace("-", "_") for n in chips()]

    def __getattr__(self, attr: str) -> ChipSpec:
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return chip(attr.replace("_", "-"))
        except KeyError as err:
            raise AttributeError(str(err)) from None

    def __repr__(self) -> str:
        return "hw(" + ", ".join(dir(self)) + ")"


hw = _Hardware()
