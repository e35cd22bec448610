"""Accelerator specs as data: a frozen :class:`ChipSpec` per chip, looked up by name.

The figures live in ``scalelib/data/chips.toml``, each chip with its source.
``chip("tpu-v5e")`` returns one spec, ``chips()`` lists the names, and
``hw.tpu_v5e`` is the same spec with tab completion.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping

from ._errors import InvalidValueError, unknown
from ._units import fmt

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


def bytes_per_value(dtype: str) -> float:
    """Bytes one value of `dtype` takes: ``bytes_per_value("bf16") == 2``."""
    if dtype not in DTYPES:
        raise unknown("dtype", dtype, DTYPES)
    return DTYPES[dtype][1]


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator's figures, per chip (per GPU). ``None`` where no figure is published.

    Rates are dense (no sparsity) peak FLOP/s; bandwidths in bytes/s; memories in bytes.
    ``source`` names where the figures come from; ``sources`` overrides it per field,
    and :meth:`source_of` looks one up.
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

    def __repr__(self) -> str:
        rate = self.bf16_flops_per_s or self.f32_flops_per_s or self.fp16_flops_per_s
        parts = [self.name]
        if rate:
            parts.append(fmt(rate, "FLOP/s"))
        if self.hbm_bytes_per_s:
            parts.append(f"{fmt(self.hbm_bytes_per_s, 'B/s')} memory")
        return f"ChipSpec({', '.join(parts)})"

    def source_of(self, field_name: str) -> str:
        """Where the figure `field_name` comes from: ``chip("h100").source_of("hbm_bytes_per_s")``."""
        names = [f.name for f in dataclasses.fields(self)]
        if field_name not in names:
            raise unknown("ChipSpec field", field_name, names)
        return self.sources.get(field_name, self.source)

    def flops_per_s(self, dtype: str = "bf16") -> float:
        """Peak dense FLOP/s (OP/s for integers) of this chip in `dtype`."""
        if dtype not in DTYPES:
            raise unknown("dtype", dtype, DTYPES)
        value = getattr(self, DTYPES[dtype][0])
        if value is None:
            have = [d for d, (f, _) in DTYPES.items() if getattr(self, f) is not None and d != "int4"]
            raise InvalidValueError(
                f"{self.name} has no published {dtype} rate; it has: {', '.join(have) or 'none'}"
            )
        return value

    def bandwidth(self, kind: str = "hbm") -> float:
        """Bandwidth in bytes/s: `kind` is one of hbm, ici (one-way per link),
        ici_bidirectional (per link), pcie, dcn (per chip), nvlink (per GPU), vmem."""
        if kind not in BANDWIDTHS:
            raise unknown("bandwidth", kind, BANDWIDTHS)
        value = getattr(self, BANDWIDTHS[kind])
        if value is None:
            have = [k for k, f in BANDWIDTHS.items() if getattr(self, f) is not None]
            raise InvalidValueError(
                f"{self.name} has no {kind} bandwidth; it has: {', '.join(have) or 'none'}"
            )
        return value


@lru_cache(maxsize=None)
def _registry() -> dict[str, ChipSpec]:
    text = resources.files("scalelib").joinpath("data/chips.toml").read_text(encoding="utf-8")
    specs = {}
    for name, row in tomllib.loads(text).items():
        row = dict(row)
        for key in ("pod_shape", "host_shape", "aliases"):
            if key in row:
                row[key] = tuple(row[key])
        row["sources"] = MappingProxyType(row.pop("sources", {}))
        specs[name] = ChipSpec(name=name, **row)
    return specs


@lru_cache(maxsize=None)
def _aliases() -> dict[str, str]:
    table = {}
    for name, spec in _registry().items():
        table[name] = name
        for alias in spec.aliases:
            table[alias] = name
    return table


def chips(family: str | None = None) -> tuple[str, ...]:
    """Names of the chips in the registry, optionally only one `family` ("tpu" or "gpu").

    >>> chips("tpu")
    ('tpu-v3', 'tpu-v4p', 'tpu-v5p', 'tpu-v5e', 'tpu-v6e', 'tpu7x')
    """
    specs = _registry().values()
    if family is not None and family not in {s.family for s in specs}:
        raise unknown("chip family", family, {s.family for s in specs})
    return tuple(s.name for s in specs if family is None or s.family == family)


def chip(name: str | ChipSpec) -> ChipSpec:
    """The spec of the chip called `name` (a ChipSpec passes through unchanged).

    >>> chip("tpu-v5e").bf16_flops_per_s
    197000000000000.0
    """
    if isinstance(name, ChipSpec):
        return name
    if not isinstance(name, str):
        raise InvalidValueError(f"`chip` must be a chip name or a ChipSpec, got {name!r}")
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    table = _aliases()
    if key not in table:
        raise unknown("chip", name, _registry())
    return _registry()[table[key]]


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
