"""Pictures drawn by scalelib. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ._errors import InvalidValueError
from ._specs import ChipSpec, dtype_name
from ._units import fmt
from ._validate import positive, shown


def plot_roofline(chips: Iterable[str | ChipSpec] = ("tpu-v5e", "h100"), *, dtype="bf16",
                  bandwidth: str = "hbm", points: Iterable[dict] = (), intensity_range=(1e-1, 1e4), ax=None):
    """Log-log roofline of each chip: attainable FLOP/s against arithmetic intensity.

    Each chip's ridge (its critical intensity C / W) is marked on its line and its
    value given in the legend, which sits beside the plot so that no label covers data.

    Formula:
        attainable FLOP/s = min(C, I · W)

    Args:
        chips: chip names or ChipSpecs (e.g. from :func:`measure_machine`).
        dtype: the dtype of the arithmetic, or one per chip (``["bf16", "f32"]``).
        bandwidth: which W bounds the sloped part: ``"hbm"``, ``"ici"``, ...
        points: measured or computed operations to overlay, each a dict with
            ``intensity`` (FLOP/B) and ``flops_per_s`` (scalars or arrays) and an optional ``label``.
        intensity_range: (low, high) of the x axis, in FLOP/B.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        1 (Rooflines)

    Example:
        >>> ax = plot_roofline(["tpu-v5e", "h100"])
        >>> ax.get_xlabel()
        'arithmetic intensity (FLOP/byte)'
    """
    from ._diagrams import _axes, _chip_list
    from ._roofline import _bandwidth, attainable_flops_per_s, critical_intensity

    specs = _chip_list(chips, default=())
    if isinstance(dtype, (list, tuple)):
        dtypes = [dtype_name(d) for d in dtype]
        if len(dtypes) != len(specs):
            raise InvalidValueError(f"`dtype` must be one dtype, or one per chip ({len(specs)}), got {shown(dtype)}")
    else:
        dtypes = [dtype_name(dtype)] * len(specs)
    bandwidth = _bandwidth(bandwidth)
    low, high = (positive("intensity_range", v) for v in _pair(intensity_range))
    if not low < high:
        raise InvalidValueError(f"`intensity_range` must be (low, high) with low < high, got {shown(intensity_range)}")
    points = list(points) if not isinstance(points, dict) else [points]
    for point in points:
        if not isinstance(point, dict) or "intensity" not in point or "flops_per_s" not in point:
            raise InvalidValueError(f"`points` must be dicts with 'intensity' and 'flops_per_s', got {shown(point)}")
        positive("points' intensity", point["intensity"]), positive("points' flops_per_s", point["flops_per_s"])
    ax = _axes(ax, figsize=(8.5, 4.5))
    x = np.logspace(np.log10(low), np.log10(high), 400)
    for spec, dt in zip(specs, dtypes):
        ridge = critical_intensity(spec, dtype=dt, bandwidth=bandwidth)
        peak = spec.peak_flops_per_s(dtype=dt)
        y = attainable_flops_per_s(x, spec, dtype=dt, bandwidth=bandwidth)
        # The ridge's value goes in the legend, beside the plot: a label next to the point
        # would sit on another chip's line or marker wherever two ridges are close.
        (line,) = ax.loglog(x, y, label=f"{spec.name} ({dt}): ridge at {fmt(ridge)} FLOP/B")
        ax.plot([ridge], [peak], "o", color=line.get_color(), gid="ridge")
    for point in points:
        ax.loglog(np.atleast_1d(point["intensity"]), np.atleast_1d(point["flops_per_s"]), "x", markersize=7,
                  label=point.get("label"))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable throughput (FLOP/s)")
    ax.set_title(f"Roofline ({'memory' if bandwidth == 'hbm' else bandwidth} bandwidth)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.figure.tight_layout()
    return ax


def _pair(value):
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or len(value) != 2:
        raise InvalidValueError(f"`intensity_range` must be a pair (low, high) in FLOP/B, got {shown(value)}")
    return value
