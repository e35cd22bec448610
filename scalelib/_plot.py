"""Pictures drawn by scalelib. matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ._errors import InvalidValueError
from ._specs import ChipSpec, dtype_name
from ._units import fmt
from ._validate import flag, positive, shown

#: The width (CSS px) of the course site's text column in a 1280 px window: a figure whose image is
#: wider is shown scaled down to it (measured by tests/test_site.py).
COLUMN_PX = 676
#: The smallest text a figure may show there (CSS px).
MIN_TEXT_PX = 9.5
#: The width (CSS px) of the text column in a 390 px phone window (the page's 16 px margins taken off),
#: and the smallest text a figure may show there once scaled down to it.
PHONE_COLUMN_PX = 358
PHONE_MIN_TEXT_PX = 7.0


def _legible(fig, min_px: float = MIN_TEXT_PX, column_px: float = COLUMN_PX, relayout: bool = False, *,
             phone_min_px: float = PHONE_MIN_TEXT_PX + 0.2, phone_column_px: float = PHONE_COLUMN_PX):
    """Raise every text of `fig` (labels, ticks, legends, titles) to at least `min_px` CSS pixels
    as the site shows it in a 1280 px window, and `phone_min_px` in a 390 px one: the figure saved
    with a tight bounding box at its dpi, then scaled down to the `column_px` (`phone_column_px`)
    text column if wider. Sizes only grow; what the figure shows is unchanged.
    Returns the smallest text size, in CSS pixels, once shown in the 1280 px window."""
    from matplotlib.text import Text

    for _ in range(4):
        if relayout:
            fig.tight_layout()
        renderer = fig.canvas.get_renderer()
        width_px = fig.get_tightbbox(renderer).width * fig.dpi
        need_pt = max(min_px / min(1.0, column_px / width_px),
                      phone_min_px / min(1.0, phone_column_px / width_px)) * 72.0 / fig.dpi
        changed = False
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                labels = [t for t in axis.get_ticklabels(which="both") if t.get_text()]
                if labels and min(t.get_fontsize() for t in labels) < need_pt - 1e-6:
                    axis.set_tick_params(which="both", labelsize=need_pt)
                    changed = True
        for text in fig.findobj(Text):
            if text.get_visible() and text.get_text().strip() and text.get_fontsize() < need_pt - 1e-6:
                text.set_fontsize(need_pt)
                changed = True
        if not changed:
            break
    return _smallest_text_px(fig, column_px, default_pt=need_pt)


def _smallest_text_px(fig, column_px: float = COLUMN_PX, default_pt: float | None = None) -> float:
    """The size, in CSS pixels, of `fig`'s smallest visible text as the site shows it: drawn at the
    figure's dpi with a tight bounding box, then scaled down to the `column_px` column if wider."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    texts = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and t.get_window_extent(renderer).width > 0]
    width_px = fig.get_tightbbox(renderer).width * fig.dpi
    if not texts:
        return float("inf") if default_pt is None else default_pt * fig.dpi / 72.0
    return min(texts) * fig.dpi / 72.0 * min(1.0, column_px / width_px)


def legible(fig, *, relayout: bool = False) -> float:
    """Raise a figure's text until the course site shows it legibly in a 1280 px window and on a phone.

    The site shows a figure saved with a tight bounding box at its dpi, scaled down to the text
    column when wider: 676 px in a 1280 px window, 358 px in a 390 px phone window. Every label,
    tick, legend and title of `fig` smaller than what both need is raised (sizes only grow).

    Formula:
        shown px = font pt · dpi / 72 · min(1, column px / figure px);
        raised until shown px ≥ 9.5 at 1280 px and ≥ 7 at 390 px

    Args:
        fig: a matplotlib Figure.
        relayout: call ``fig.tight_layout()`` before each measurement (for plots with axes).

    Returns:
        The smallest text size, in CSS px, as a 390 px phone window shows the figure (for a figure
        with no text yet, the size a text of matplotlib's default size would be shown at).

    Chapter:
        1 (Rooflines); used by every chapter's figures

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(figsize=(11, 3))
        >>> _ = ax.set_title("a wide figure", fontsize=8)
        >>> legible(fig) >= 7
        True
        >>> plt.close(fig)
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise InvalidValueError(f"`fig` must be a matplotlib Figure (e.g. `ax.figure`), got {shown(fig)}")
    _legible(fig, relayout=flag("relayout", relayout))
    import matplotlib

    return float(_smallest_text_px(fig, PHONE_COLUMN_PX, default_pt=matplotlib.rcParams["font.size"]))


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
    created = ax is None
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
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.figure.tight_layout()
    if created:
        _legible(ax.figure, relayout=True)
    return ax


def _pair(value):
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or len(value) != 2:
        raise InvalidValueError(f"`intensity_range` must be a pair (low, high) in FLOP/B, got {shown(value)}")
    return value
