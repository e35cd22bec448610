"""Transformer shapes as data: a frozen :class:`ModelSpec` per model, looked up by name.

The presets live in ``scalelib/data/models.toml``, each with its source (the publisher's
config) and the publisher's own parameter count. ``model("llama-3-70b")`` returns one spec,
``models()`` lists the names (with their aliases). A reader describes a model of their own
with the constructor, ``ModelSpec(L=..., D=..., F=..., N=..., K=..., H=..., V=...)``, which
checks that the shape can exist (positive sizes, K dividing N, k ≤ E, ...), derives a variant
of a preset with :meth:`ModelSpec.derive`, and registers either with :func:`register_model`.

The counting (parameters, FLOPs, KV cache, training memory) is in :mod:`scalelib._transformer`.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping

import numpy as np

from ._errors import InvalidValueError, unknown
from ._registry import lookup
from ._validate import shown


def _whole(owner: str, key: str, value, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidValueError(f"{owner}: `{key}` must be a whole number >= {minimum}, got {shown(value)}")
    return int(value)


@dataclass(frozen=True, kw_only=True)
class LatentAttention:
    """The sizes of multi-head latent attention (MLA, DeepSeek-V2 and V3).

    Each token's keys and values are compressed into one latent vector of ``kv_lora_rank``
    values, plus ``qk_rope_head_dim`` values of a key part shared by all heads that carries the
    positions; only these are cached. Each head's query and key have ``qk_nope_head_dim +
    qk_rope_head_dim`` values, its value ``v_head_dim``. Queries go through a latent of
    ``q_lora_rank`` values too (``None``: a plain D x N·(nope + rope) projection).

    Chapter:
        4 (Transformer math)

    Example:
        >>> mla = LatentAttention(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
        >>> mla.kv_lora_rank + mla.qk_rope_head_dim
        576
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "q_lora_rank" and value is None:
                continue
            object.__setattr__(self, f.name, _whole("LatentAttention", f.name, value, 1))


_INT_FIELDS = ("L", "D", "F", "N", "K", "H", "V")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A Transformer's shape, in the book's letters; the presets are :func:`model`'s.

    ``L`` layers of width ``D``; an MLP of width ``F`` (``gated``: three matrices, else two);
    ``N`` query heads and ``K`` key/value heads of dimension ``H`` (K divides N); a vocabulary
    of ``V`` tokens, its embedding shared with the output layer when ``tied_embeddings``. For a
    mixture of experts, ``E`` routed experts of width F per layer, ``k`` of them per token, and
    ``shared_experts`` every token uses; the first ``dense_layers`` layers may have a dense MLP of
    width ``dense_F`` instead. ``mla`` (a :class:`LatentAttention` or a dict of its fields) replaces
    the Q, K, V, O projections by multi-head latent attention. ``norms_per_layer`` counts the
    layer's normalisation vectors of size D (a final one follows the last layer).

    Every field is checked when a spec is made. ``source`` names where the shape comes from;
    ``published_params`` and ``published_active_params`` are the publisher's own counts, their
    sources in ``sources``.

    Chapter:
        4 (Transformer math)

    Example:
        >>> spec = ModelSpec(L=64, D=4096, F=16384, N=32, K=32, H=128, V=32000)
        >>> spec.N // spec.K, spec.is_moe
        (1, False)
        >>> ModelSpec(L=2, D=64, F=256, N=6, K=4, H=16, V=100)
        Traceback (most recent call last):
        ...
        scalelib._errors.InvalidValueError: ModelSpec 'custom': `K` must divide `N` (...), got N = 6, K = 4
    """

    L: int
    D: int
    F: int
    N: int
    K: int
    H: int
    V: int
    name: str = "custom"
    source: str = "given by the user"
    gated: bool = True
    tied_embeddings: bool = False
    norms_per_layer: int = 2
    E: int | None = None
    k: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    dense_F: int | None = None
    mla: LatentAttention | None = None
    published_params: float | None = None
    published_active_params: float | None = None
    notes: str = ""
    aliases: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        for key in ("name", "source"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise InvalidValueError(f"ModelSpec `{key}` must be a non-empty string, got {shown(value)}")
        set_("name", self.name.strip().lower())
        owner = f"ModelSpec {self.name!r}"
        for key in _INT_FIELDS:
            set_(key, _whole(owner, key, getattr(self, key), 1))
        if self.N % self.K:
            raise InvalidValueError(f"{owner}: `K` must divide `N` (each key/value head serves N / K query heads), "
                                    f"got N = {self.N}, K = {self.K}")
        for key in ("gated", "tied_embeddings"):
            value = getattr(self, key)
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidValueError(f"{owner}: `{key}` must be True or False, got {shown(value)}")
            set_(key, bool(value))
        set_("norms_per_layer", _whole(owner, "norms_per_layer", self.norms_per_layer, 0))
        self._check_experts(owner, set_)
        if isinstance(self.mla, Mapping):
            try:
                set_("mla", LatentAttention(**self.mla))
            except TypeError as err:
                raise InvalidValueError(f"{owner}: `mla` {err}".replace("LatentAttention.__init__() ", "")) from None
        elif self.mla is not None and not isinstance(self.mla, LatentAttention):
            raise InvalidValueError(f"{owner}: `mla` must be a LatentAttention, a dict of its fields or None, "
                                    f"got {shown(self.mla)}")
        for key in ("published_params", "published_active_params"):
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(value) or value <= 0:
                raise InvalidValueError(f"{owner}: `{key}` must be a positive number or None, got {shown(value)}")
            set_(key, float(value))
        if self.published_active_params is not None and not self.is_moe:
            raise InvalidValueError(f"{owner}: `published_active_params` is for a mixture of experts (give `E`)")
        if not isinstance(self.notes, str):
            raise InvalidValueError(f"{owner}: `notes` must be a string, got {shown(self.notes)}")
        if isinstance(self.aliases, str) or not isinstance(self.aliases, (list, tuple)) \
                or not all(isinstance(a, str) and a.strip() for a in self.aliases):
            raise InvalidValueError(f"{owner}: `aliases` must be a sequence of names, got {shown(self.aliases)}")
        set_("aliases", tuple(a.strip().lower() for a in self.aliases))
        names = [f.name for f in dataclasses.fields(self)]
        if not isinstance(self.sources, Mapping) or any(
                k not in names or not isinstance(v, str) for k, v in self.sources.items()):
            raise InvalidValueError(f"{owner}: `sources` must map field names to strings, got {shown(self.sources)}")
        set_("sources", MappingProxyType(dict(self.sources)))

    def _check_experts(self, owner: str, set_) -> None:
        if self.E is None:
            for key, empty in (("k", None), ("shared_experts", 0), ("dense_layers", 0), ("dense_F", None)):
                if getattr(self, key) != empty or isinstance(getattr(self, key), bool):
                    raise InvalidValueError(f"{owner}: `{key}` belongs to a mixture of experts; give `E` (the "
                                            f"experts per layer) too, or leave `{key}` out")
            return
        set_("E", _whole(owner, "E", self.E, 1))
        if self.k is None:
            raise InvalidValueError(f"{owner}: a mixture of experts needs `k`, the experts each token uses")
        set_("k", _whole(owner, "k", self.k, 1))
        if self.k > self.E:
            raise InvalidValueError(f"{owner}: `k` must be at most E: a token uses k of the E experts, "
                                    f"got E = {self.E}, k = {self.k}")
        set_("shared_experts", _whole(owner, "shared_experts", self.shared_experts, 0))
        set_("dense_layers", _whole(owner, "dense_layers", self.dense_layers, 0))
        if self.dense_layers > self.L:
            raise InvalidValueError(f"{owner}: `dense_layers` must be at most L = {self.L}, got {self.dense_layers}")
        if self.dense_layers and self.dense_F is None:
            raise InvalidValueError(f"{owner}: `dense_layers` = {self.dense_layers} needs `dense_F`, the width of "
                                    f"their MLP")
        if self.dense_F is not None:
            set_("dense_F", _whole(owner, "dense_F", self.dense_F, 1))
            if not self.dense_layers:
                raise InvalidValueError(f"{owner}: `dense_F` is the MLP width of the `dense_layers`; give how many "
                                        f"there are")

    @property
    def is_moe(self) -> bool:
        """Whether the MLPs are a mixture of experts."""
        return self.E is not None

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.L - self.dense_layers if self.is_moe else 0

    def __repr__(self) -> str:
        shape = f"L={self.L}, D={self.D}, F={self.F}, N={self.N}, K={self.K}, H={self.H}, V={self.V}"
        if self.is_moe:
            shape += f", E={self.E}, k={self.k}" + (f", shared={self.shared_experts}" if self.shared_experts else "")
        if self.mla is not None:
            shape += ", MLA"
        return f"ModelSpec({self.name}: {shape})"

    def source_of(self, field_name: str) -> str:
        """Where the figure `field_name` comes from: the field's own source, else the model's.

        Returns:
            the source, in words (str).

        Chapter:
            4 (Transformer math)

        Example:
            >>> model("mixtral-8x7b").source_of("published_active_params")[:25]
            "Mistral AI, 'Mixtral of e"
        """
        names = [f.name for f in dataclasses.fields(self)]
        if not isinstance(field_name, str) or field_name not in names:
            raise unknown("ModelSpec field", field_name, names, arg="field_name")
        return self.sources.get(field_name, self.source)

    def derive(self, name: str, **changes) -> "ModelSpec":
        """A variant of this model under a new `name`, with some fields changed (and checked again).

        The variant's source says what it was derived from; the publisher's counts are dropped
        (they belong to the original). It is not registered (pass it to :func:`register_model`).

        Returns:
            a new :class:`ModelSpec`.

        Chapter:
            4 (Transformer math)

        Example:
            >>> mha = model("llama-3-70b").derive("llama-3-70b-mha", K=64)
            >>> mha.K, mha.published_params
            (64, None)
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidValueError(f"`name` must be a non-empty string, got {shown(name)}")
        fields = {f.name for f in dataclasses.fields(self)} - {"name", "aliases"}
        for key in changes:
            if key not in fields:
                raise unknown("ModelSpec field", key, fields, arg="changes")
        if name.strip().lower() == self.name:
            raise InvalidValueError(f"`name`: a variant needs a name of its own, not {self.name!r}")
        changed = ", ".join(sorted(changes)) or "nothing"
        base = dict(source=f"{self.source}; derived from {self.name}", notes=f"derived from {self.name} "
                    f"({changed} changed)", published_params=None, published_active_params=None, sources={})
        return dataclasses.replace(self, name=name, aliases=(), **{**base, **changes})


# --- the registry ---------------------------------------------------------------

_USER: dict[str, ModelSpec] = {}


def _spec_from_row(name: str, row: Mapping) -> ModelSpec:
    row = dict(row)
    row["sources"] = dict(row.pop("sources", {}))
    known = {f.name for f in dataclasses.fields(ModelSpec)} - {"name"}
    for key in row:
        if key not in known:
            raise unknown("ModelSpec field", key, known, arg=f"model {name!r}")
    return ModelSpec(name=name, **row)


@lru_cache(maxsize=None)
def _builtin() -> dict[str, ModelSpec]:
    text = resources.files("scalelib").joinpath("data/models.toml").read_text(encoding="utf-8")
    return {name: _spec_from_row(name, row) for name, row in tomllib.loads(text).items()}


def _all() -> dict[str, ModelSpec]:
    return {**_builtin(), **_USER}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _aliases() -> dict[str, str]:
    table = {}
    for name, spec in _all().items():
        table[name] = name
        for alias in spec.aliases:
            table[alias] = name
    return table


def register_model(spec, *, replace: bool = False) -> ModelSpec:
    """Add a model to the registry, so that every function finds it by name.

    Args:
        spec: a :class:`ModelSpec`, or a dict of its fields (with a ``name``).
        replace: allow replacing a model registered earlier by :func:`register_model`
            (the presets cannot be replaced: derive a variant instead).

    Returns:
        The registered ModelSpec.

    Chapter:
        4 (Transformer math)

    Example:
        >>> spec = register_model({"name": "my-tiny", "L": 2, "D": 256, "F": 1024, "N": 4, "K": 4, "H": 64,
        ...                        "V": 512}, replace=True)
        >>> model("my-tiny").D
        256
    """
    from ._validate import flag

    if isinstance(spec, Mapping):
        row = dict(spec)
        if "name" not in row:
            raise InvalidValueError("`spec`: a model given as a dict needs a 'name'")
        try:
            spec = _spec_from_row(row.pop("name"), row)
        except TypeError as err:
            raise InvalidValueError(f"`spec`: {err}".replace("ModelSpec.__init__() ", "")) from None
    if not isinstance(spec, ModelSpec):
        raise InvalidValueError(f"`spec` must be a ModelSpec or a dict of its fields, got {shown(spec)}")
    replace = flag("replace", replace)
    table = _aliases()
    for key in (spec.name, *spec.aliases):
        owner = table.get(_key(key))
        if owner is None or (owner == spec.name and owner in _USER and replace):
            continue
        if owner in _builtin():
            raise InvalidValueError(f"`spec`: {key!r} is a preset ({owner}); derive a variant under a new "
                                    f"name: model({owner!r}).derive('my-{owner}', ...)")
        raise InvalidValueError(f"`spec`: {key!r} is already registered ({owner}); pass replace=True to replace it")
    _USER[spec.name] = spec
    return spec


class ModelNames(tuple):
    """Model names, printed with their aliases; iterates and compares as the plain tuple of names."""

    aliases: Mapping[str, tuple[str, ...]]

    def __new__(cls, specs):
        specs = list(specs)
        names = super().__new__(cls, (s.name for s in specs))
        names.aliases = MappingProxyType({s.name: s.aliases for s in specs})
        return names

    def __repr__(self) -> str:
        parts = [f"{n!r} ({', '.join(self.aliases[n])})" if self.aliases[n] else repr(n) for n in self]
        return "(" + ", ".join(parts) + ")"


def models() -> tuple[str, ...]:
    """Names of the models in the registry: the presets, then any registered with :func:`register_model`.

    Returns:
        a tuple of names that prints each with its aliases (``.aliases`` maps a name to them).

    Chapter:
        4 (Transformer math)

    Example:
        >>> list(models())[:3]
        ['llama-2-13b', 'llama-3-8b', 'llama-3-70b']
    """
    return ModelNames(_all().values())


def model(name: str | ModelSpec, *, arg: str = "model") -> ModelSpec:
    """The shape of the model called `name` or one of its aliases (a ModelSpec passes through unchanged).

    An unknown name is answered with the known ones and the closest among them. A modified copy
    of a preset that keeps its name is refused: use :meth:`ModelSpec.derive`.

    Returns:
        a :class:`ModelSpec`.

    Chapter:
        4 (Transformer math)

    Example:
        >>> model("llama-3-70b")
        ModelSpec(llama-3-70b: L=80, D=8192, F=28672, N=64, K=8, H=128, V=128256)
        >>> model("mixtral").name
        'mixtral-8x7b'
    """
    return lookup(name, kind="model", cls=ModelSpec, table=_all(), aliases=_aliases(), key=_key, example="llama-3-70b",
                  what="fields", arg=arg)
