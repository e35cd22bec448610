"""Pictures drawn by scalelib. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ._specs import ChipSpec, chip as _chip
from ._units import fmt


def plot_roofline(chips: Iterable[str | ChipSpec] = ("tpu-v5e", "h100"), dtype: str | Sequence[str] = "bf16",
                  bandwidth: str = "hbm", points: Iterable[dict] = (), intensity_range=(1e-1, 1e4), ax=None):
    """Log-log roofline of each chip: attainable FLOP/s against arithmetic intensity. Chapter 1.

    Each chip's ridge (its critical intensity C / W) is marked and labelled.

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
    """
    import matplotlib.pyplot as plt

    from ._roofline import attainable_flops_per_s, critical_intensity

    specs = [_chip(c) for c in chips]
    dtypes = [dtype] * len(specs) if isinstance(dtype, str) else list(dtype)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    x = np.logspace(np.log10(intensity_range[0]), np.log10(intensity_range[1]), 400)
    for k, (spec, dt) in enumerate(zip(specs, dtypes)):
        y = attainable_flops_per_s(x, spec, dt, bandwidth)
        (line,) = ax.loglog(x, y, label=f"{spec.name} ({dt})")
        ridge = critical_intensity(spec, dt, bandwidth)
        peak = spec.flops_per_s(dt)
        ax.plot([ridge], [peak], "o", color=line.get_color())
        # Stagger the ridge labels so that chips with close ridges stay readable.
        ax.annotate(f"{fmt(ridge)} FLOP/B", (ridge, peak), textcoords="offset points",
                    xytext=(4, -12 - 10 * (k % 3)), fontsize=8, color=line.get_color())
    for point in points:
        ax.loglog(np.atleast_1d(point["intensity"]), np.atleast_1d(point["flops_per_s"]), "x", markersize=7,
                  label=point.get("label"))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(f"attainable throughput (FLOP/s)")
    ax.set_title(f"Roofline ({'memory' if bandwidth == 'hbm' else bandwidth} bandwidth)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
