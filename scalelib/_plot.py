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
    with a tight bounding box (and its 0.1 in padding) at its dpi, then scaled down to the `column_px`
    (`phone_column_px`) text column if wider. Sizes only grow; what the figure shows is unchanged.
    Returns the smallest text size, in CSS pixels, once shown in the 1280 px window."""
    from matplotlib.text import Text

    for _ in range(4):
        _wrap_overhanging_titles(fig)
        if relayout:
            fig.tight_layout()
        width_px = _image_width_px(fig)
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


def _wrap_overhanging_titles(fig) -> None:
    """Break each title of `fig` (its axes' titles and its suptitle) that is wider than the figure into lines no
    wider than the figure, at spaces. A title wider than the figure widens the saved image, and then raising the
    text cannot make it larger as shown: the image grows with the title (a longer title, a translated one, say).
    A title with math (``$``) is left whole."""
    import textwrap

    renderer = fig.canvas.get_renderer()
    room = 0.96 * fig.bbox.width
    titles = [t for ax in fig.axes for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None))
              if t is not None]
    if getattr(fig, "_suptitle", None) is not None:
        titles.append(fig._suptitle)
    for title in titles:
        text = title.get_text()
        if not title.get_visible() or not text.strip() or "$" in text:
            continue
        width = title.get_window_extent(renderer).width
        if width <= room:
            continue
        longest = max(len(line) for line in text.split("\n"))
        chars = max(12, int(longest * room / width))
        title.set_text("\n".join(textwrap.fill(line, chars) for line in text.split("\n")))


def _smallest_text_pt(fig) -> float | None:
    """The font size, in points, of `fig`'s smallest visible text (None when it has none)."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    texts = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and t.get_window_extent(renderer).width > 0]
    return min(texts) if texts else None


def _image_width_px(fig) -> float:
    """The width, in pixels, of the PNG a notebook shows of `fig`: IPython saves it at its dpi with a tight
    bounding box, padded by ``savefig.pad_inches`` (0.1 in) on each side."""
    import matplotlib

    pad_in = float(matplotlib.rcParams["savefig.pad_inches"])
    return (fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * pad_in) * fig.dpi


def _smallest_text_px(fig, column_px: float = COLUMN_PX, default_pt: float | None = None) -> float:
    """The size, in CSS pixels, of `fig`'s smallest visible text as the site shows it: drawn at the
    figure's dpi with a tight bounding box and its padding, then scaled down to the `column_px` column if wider."""
    smallest = _smallest_text_pt(fig)
    if smallest is None:
        return float("inf") if default_pt is None else default_pt * fig.dpi / 72.0
    return smallest * fig.dpi / 72.0 * min(1.0, column_px / _image_width_px(fig))


#: The key of a figure's notebook output metadata under which scalelib records, in the notebooks that import it,
#: the size of the figure's smallest text in pixels of the PNG image the output holds (``min_text_px``): the
#: course site puts it on the figure's <img> (book/_ext/figure_links.py) and its browser test multiplies it by
#: the image's shown width over its natural width (tests/test_site.py).
FIGURE_METADATA_KEY = "scalelib"


def _png_dpi(fig, printer=None) -> float:
    """The dpi at which `printer`, IPython's PNG formatter of `fig` (``print_figure`` or ``retina_figure`` bound
    by ``functools.partial``; None: matplotlib's own), writes the figure: its ``dpi`` keyword, else the
    figure's dpi, doubled for a retina PNG."""
    keywords = getattr(printer, "keywords", None) or {}
    if "dpi" in keywords:
        return float(keywords["dpi"])
    function = getattr(printer, "func", printer)
    retina = keywords.get("fmt") in ("retina", "png2x") or getattr(function, "__name__", "") == "retina_figure"
    return float(fig.dpi) * (2.0 if retina else 1.0)


def _figure_text_metadata(fig, printer=None) -> dict:
    """The display metadata of `fig`'s PNG output: ``{"scalelib": {"min_text_px": px}}``, `px` the font size of
    its smallest visible text in pixels of the image (points · dpi / 72, the dpi `printer` writes it at); empty
    for a figure with no text or no image (IPython shows no image of a figure without axes or lines)."""
    if not fig.axes and not fig.lines:
        return {}
    smallest = _smallest_text_pt(fig)
    if smallest is None:
        return {}
    return {FIGURE_METADATA_KEY: {"min_text_px": round(smallest * _png_dpi(fig, printer) / 72.0, 2)}}


def _record_figure_text_size(shell=None) -> bool:
    """In an IPython kernel (a notebook), have every matplotlib figure it shows carry the size of its smallest
    text in its output's metadata (:func:`_figure_text_metadata`); elsewhere do nothing. True if registered.

    The size is given by IPython's mime-bundle formatter, which returns metadata only: the PNG itself is still
    drawn by the PNG formatter matplotlib's inline backend registers, whichever it is (plain or retina)."""
    import sys

    if shell is None:
        if "IPython" not in sys.modules:
            return False
        shell = sys.modules["IPython"].get_ipython()
    formatter = getattr(shell, "display_formatter", None)
    if formatter is None:
        return False
    png = formatter.formatters.get("image/png")

    def metadata_only(fig):
        try:
            printer = png.lookup(fig) if png is not None else None
        except KeyError:
            printer = None
        return {}, _figure_text_metadata(fig, printer)

    formatter.mimebundle_formatter.for_type_by_name("matplotlib.figure", "Figure", metadata_only)
    return True


def legible(fig, *, relayout: bool = False) -> float:
    """Raise a figure's text until the course site shows it legibly in a 1280 px window and on a phone.

    The site shows a figure saved with a tight bounding box (padded by 0.1 in) at its dpi, scaled down to the text
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


def _time_unit(seconds: float) -> tuple[str, float]:
    """The unit a waterfall's axis reads in, and seconds per unit, for times up to `seconds`."""
    if seconds >= 1.0:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e-3
    return "µs", 1e-6


def plot_waterfall(roofline_s, losses, *, measured_s=None, orientation="horizontal", what="step", ax=None):
    """The calibrated estimate as a waterfall: the roofline (the bound), each loss stacked on it, the estimate.

    The first bar is the roofline; each loss starts where the one before it ended, so the last loss ends
    at the estimate, drawn as the last bar; a dashed line marks a measured time, if one is given. Each
    bar carries its time. Used for a training step (``TrainingCost.time_s`` and ``.losses_s``) in
    chapter 6 and for an inference step or prefill (the differences of the estimate with the losses
    switched on one at a time) in chapter 8.

    Formula:
        estimate = roofline + Σ losses   (each loss >= 0: the estimate never falls below the bound)

    Args:
        roofline_s: the roofline's time (s, > 0).
        losses: {loss name: seconds >= 0}, in the order they are switched on (e.g. ``cost.losses_s``).
        measured_s: a measured time to mark (s), or None.
        orientation: ``"horizontal"`` (bars along x, one row per term) or ``"vertical"``.
        what: what the times are of, for the axis label (``"step"``, ``"training step"``, ``"prefill"``).
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes (times in s, ms or µs, as the axis label says).

    Chapter:
        6 (Training LLaMA 3), 8 (Serving LLaMA 3)

    Example:
        >>> ax = plot_waterfall(7.44, {"matmul_efficiency": 3.33, "tensor_collectives": 1.23}, measured_s=13.75,
        ...                     what="training step")
        >>> ax.get_xlabel(), [t.get_text() for t in ax.get_yticklabels()]
        ('time per training step (s)', ['roofline', 'matmul efficiency', 'tensor collectives', 'estimate'])
    """
    from ._diagrams import _axes
    from ._validate import name as _name, nonnegative

    base = positive("roofline_s", roofline_s)
    if np.ndim(base):
        raise InvalidValueError(f"`roofline_s` must be one time in seconds, got {shown(roofline_s)}")
    if not isinstance(losses, dict) or not all(isinstance(k, str) for k in losses):
        raise InvalidValueError(f"`losses` must be a dict of loss names to seconds (e.g. cost.losses_s), "
                                f"got {shown(losses)}")
    parts = {}
    for k, v in losses.items():
        t = nonnegative(f"losses['{k}']", v)
        if np.ndim(t):
            raise InvalidValueError(f"`losses`: {k!r} must be one time in seconds, got {shown(v)}")
        parts[k] = float(t)
    measured = None if measured_s is None else positive("measured_s", measured_s)
    if np.ndim(measured):
        raise InvalidValueError(f"`measured_s` must be one time in seconds (or None), got {shown(measured_s)}")
    measured = None if measured is None else float(measured)
    _name("orientation", orientation, ("horizontal", "vertical"), "orientation")
    if not isinstance(what, str) or not what:
        raise InvalidValueError(f"`what` must be a few words (what the times are of), got {shown(what)}")
    estimate = float(base) + sum(parts.values())
    unit, per = _time_unit(max(estimate, measured or 0.0))
    names = ["roofline"] + [k.replace("_", " ") for k in parts] + ["estimate"]
    starts = [0.0]
    sizes = [float(base)]
    for t in parts.values():
        starts.append(starts[-1] + sizes[-1])
        sizes.append(t)
    starts.append(0.0)
    sizes.append(estimate)
    starts, sizes = np.array(starts) / per, np.array(sizes) / per
    colors = ["tab:blue"] + ["tab:orange"] * len(parts) + ["tab:green"]
    created = ax is None
    ax = _axes(ax, figsize=(8.5, 0.45 * len(names) + 1.6) if orientation == "horizontal" else (5.0, 4.6))
    top = max(estimate, measured or 0.0) / per
    labels = [fmt(s * per, "s") for s in sizes]
    if orientation == "horizontal":
        pos = np.arange(len(names))[::-1]
        ax.barh(pos, sizes, left=starts, color=colors)
        for p, s, w, text in zip(pos, starts, sizes, labels):
            ax.text(s + w + 0.01 * top, p, text, va="center", fontsize=10,
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        if measured is not None:
            ax.axvline(measured / per, color="k", ls="--", lw=1.5, label=f"measured: {fmt(measured, 's')}")
        ax.set_yticks(pos, names)
        ax.set_xlabel(f"time per {what} ({unit})")
        ax.set_xlim(0, 1.25 * top)
        ax.grid(axis="x", alpha=0.3)
    else:
        pos = np.arange(len(names))
        ax.bar(pos, sizes, bottom=starts, color=colors, width=0.7)
        for p, s, h, text in zip(pos, starts, sizes, labels):
            ax.text(p, s + h + 0.01 * top, text, ha="center", va="bottom", fontsize=10)
        if measured is not None:
            ax.axhline(measured / per, color="k", ls="--", lw=1.2, label=f"measured: {fmt(measured, 's')}")
        ax.set_xticks(pos, names, rotation=40, ha="right", rotation_mode="anchor")
        ax.set_ylabel(f"time per {what} ({unit})")
        ax.set_ylim(0, 1.2 * top)
        ax.grid(axis="y", alpha=0.3)
    if measured is not None:
        ax.legend(fontsize=10, loc="upper right" if orientation == "horizontal" else "upper left")
    if created:
        ax.figure.tight_layout()
        _legible(ax.figure, relayout=True)
    return ax
