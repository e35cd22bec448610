"""Every figure a chapter draws keeps its text legible on the site: the kernels the suite runs notebooks in
(nbval's) fail a cell that leaves a figure whose smallest text is under 9 px as a 1280 px window shows it, or
under 7 px as a 390 px phone window shows it (tests/ipython_startup/figure_text.py, installed by conftest.py).
These tests hold that check to its word."""

from __future__ import annotations

import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbclient  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from scalelib._plot import COLUMN_PX, PHONE_COLUMN_PX, _legible, _smallest_text_px  # noqa: E402


def _png_width(fig) -> int:
    """The width of the PNG a notebook shows of `fig` (IPython saves it with a tight bounding box), read from the file."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    with Image.open(buffer) as image:
        return image.width


def test_text_is_measured_as_the_site_shows_it():
    fig, ax = plt.subplots(figsize=(6.76, 3), dpi=100)  # 676 px wide before its margins: shown at about full size
    ax.set_title("title", fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])
    assert _png_width(fig) < COLUMN_PX
    assert _smallest_text_px(fig) == pytest.approx(12 * 100 / 72, rel=0.01)
    fig.set_size_inches(13.52, 3)  # twice as wide: shown at about half size
    assert _smallest_text_px(fig) == pytest.approx(12 * 100 / 72 * COLUMN_PX / _png_width(fig), rel=0.005)
    plt.close(fig)


def test_on_a_phone_a_figure_is_scaled_down_to_its_narrower_column():
    # 9.5 in at 100 dpi: about 740 px once its tight box is taken (measured below, not assumed)
    fig, ax = plt.subplots(figsize=(9.5, 3), dpi=100)
    ax.set_title("title", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    width = _png_width(fig)  # the tight box and its 0.1 in padding on each side
    assert _smallest_text_px(fig, PHONE_COLUMN_PX) == pytest.approx(9 * 100 / 72 * PHONE_COLUMN_PX / width, rel=0.005)
    assert _smallest_text_px(fig) >= 9 > 7 > _smallest_text_px(fig, PHONE_COLUMN_PX)  # 12.5 px drawn, 6 on a phone
    _legible(fig)  # what scalelib's own figures get: raised until legible in both windows
    assert _smallest_text_px(fig, PHONE_COLUMN_PX) >= 7 and _smallest_text_px(fig) >= 9
    plt.close(fig)


def test_a_title_wider_than_its_figure_is_broken_into_lines_so_raising_the_text_shows():
    # a title wider than the figure widens the saved image with it: raising the text then never shows it larger
    # (a translated title, say); legible breaks such a title at spaces into lines no wider than the figure
    words = "Одна плоскость X-Y слайса TPU v5p 8x4x4 с разрезом, делящим её пополам: разрез пересекает 8 её X-связей"
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot([1, 2], [1, 2])
    ax.set_title(words)
    _legible(fig, relayout=True)
    title = ax.get_title()
    assert "\n" in title and title.replace("\n", " ") == words
    renderer = fig.canvas.get_renderer()
    assert ax.title.get_window_extent(renderer).width <= fig.bbox.width
    assert _smallest_text_px(fig, PHONE_COLUMN_PX) >= 7
    ax.set_title("$a + b$ " + words)  # math is never broken
    _legible(fig, relayout=True)
    assert "\n" not in ax.get_title()
    plt.close(fig)


def test_the_phone_column_is_a_390_px_window_less_its_margins():
    assert PHONE_COLUMN_PX == 390 - 2 * 16


def _run(source: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return nb


def test_a_cell_leaving_a_figure_with_tiny_text_fails_and_names_it():
    assert os.environ.get("IPYTHONDIR", "").startswith(os.path.join(os.path.dirname(os.environ["IPYTHONDIR"]),
                                                                    "scalelib-ipython-"))
    nb = _run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(14, 3))\n"
              "ax.set_title('tiny', fontsize=6)")
    # nbval fails a cell on any error message the kernel sends: this is the one it gets
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "AssertionError"
    assert re.search(r"under 9 px .*'tiny': \d\.\d px", errors[0].evalue), errors[0].evalue
    # legible on a desktop (676 px column, shown at about 12 px) but not on a phone (about 6 px)
    nb = _run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(9.5, 3))\n"
              "ax.set_title('phone', fontsize=9); ax.tick_params(labelsize=9)")
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1 and re.search(r"under 7 px .*phone .*'phone': \d\.\d px", errors[0].evalue), errors
    assert "under 9 px" not in errors[0].evalue
    nb = _run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(6, 3))\nax.set_title('fine')")
    assert any("image/png" in o.get("data", {}) for o in nb.cells[0].outputs)
    assert not [o for o in nb.cells[0].outputs if o.output_type == "error"]


def test_scalelib_figures_are_legible_on_a_phone():
    """The figures scalelib's helpers draw for the chapters, measured as a 390 px window shows them."""
    import scalelib as sl

    figures = {
        "plot_roofline": lambda: sl.plot_roofline().figure,
        "draw_torus (a pod)": lambda: sl.draw_torus(sl.tpu_pod("tpu-v5e"), route=((0, 0), (12, 10))).figure,
        "draw_gpu_node (H100)": lambda: sl.draw_gpu_node("h100").figure,
        "draw_gpu_node (NVL72)": lambda: sl.draw_gpu_node("gb200-nvl72").figure,
        "draw_fat_tree": lambda: sl.draw_fat_tree(sl.gpu_cluster(32, "h100")).figure,
        "draw_chip (TPU)": lambda: sl.draw_chip("tpu-v5e").figure,
        "draw_chip (GPU)": lambda: sl.draw_chip("h100").figure,
        "plot_spec_comparison": lambda: sl.plot_spec_comparison(["v100", "a100", "h100", "h200", "b200", "tpu-v5p"]),
        "plot_model_breakdown": lambda: sl.plot_model_breakdown()[0].figure,
        "plot_pipeline_schedule": lambda: sl.plot_pipeline_schedule(4, 8, schedule="interleaved",
                                                                    virtual_stages=2).figure,
    }
    small = {}
    for name, draw in figures.items():
        fig = draw()
        phone, desktop = _smallest_text_px(fig, PHONE_COLUMN_PX), _smallest_text_px(fig)
        if phone < 7 or desktop < 9:
            small[name] = (round(phone, 1), round(desktop, 1))
        plt.close(fig)
    assert not small, f"figures with text under 7 px at 390 px or 9 px at 1280 px (phone, desktop): {small}"


@pytest.mark.parametrize("values", ["integers", "floats"])
def test_chapter_2s_systolic_animation_is_legible_on_a_phone(values):
    """Chapter 2's animation of a 4 x 4 array: its frames are shown whole (no tight box), at most as wide as
    the column; every text of a frame in the middle of the product is at least 7 px in a 390 px window and
    9 px in a 1280 px one."""
    import numpy as np

    import scalelib as sl
    from scalelib._systolic import _Drawing, _frames

    rng = np.random.default_rng(0)
    x, w = rng.integers(-9, 10, size=(3, 4)), rng.integers(-9, 10, size=(4, 4))
    if values == "floats":
        x, w = x / 7, w / 3
    trace = sl.systolic_trace(x, w, size=4)
    drawing = _Drawing(trace, 72)
    drawing.draw(_frames(trace, 2)[9])
    fig = drawing.fig
    from matplotlib.text import Text

    smallest_pt = min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())
    width_px = fig.get_size_inches()[0] * fig.dpi
    for column, least in ((PHONE_COLUMN_PX, 7), (COLUMN_PX, 9)):
        shown = smallest_pt * fig.dpi / 72 * min(1.0, column / width_px)
        assert shown >= least, f"{shown:.1f} px in a {column} px column"
    plt.close(fig)


def _run_cells(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return nb


def _image_output(cell):
    (output,) = [o for o in cell.outputs if "image/png" in o.get("data", {})]
    return output


@pytest.mark.parametrize("figure_format, scale", [("png", 1), ("retina", 2)])
def test_a_notebook_figure_records_its_smallest_text_in_pixels_of_its_image(figure_format, scale):
    """In a notebook that imports scalelib, each figure's output carries the font size of its smallest text in
    pixels of the PNG it holds (what the site's browser test scales by the shown width): a capital H of 36 pt
    at 100 dpi, alone in its figure, is 50 px to the em, and its height measured in the image is DejaVu Sans's
    cap height, 0.729 em (1493 of 2048 font units), of that; a retina PNG doubles both."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    nb = _run_cells(
        "import scalelib\nimport matplotlib.pyplot as plt\n"
        f"%config InlineBackend.figure_formats = [{figure_format!r}]",
        "fig, ax = plt.subplots(figsize=(2, 2), dpi=100)\nax.axis('off')\n"
        "ax.text(0.5, 0.5, 'H', fontsize=36, family='DejaVu Sans', ha='center', va='center');",
        "fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\nax.plot([0, 1])\nax.set_title('t', fontsize=12)\n"
        "ax.tick_params(labelsize=14); ax.xaxis.label.set_size(30);")
    letter, plot = _image_output(nb.cells[1]), _image_output(nb.cells[2])
    assert letter.metadata["scalelib"]["min_text_px"] == pytest.approx(36 * 100 / 72 * scale, abs=0.01)
    assert plot.metadata["scalelib"]["min_text_px"] == pytest.approx(12 * 100 / 72 * scale, abs=0.01)  # the title
    with Image.open(io.BytesIO(base64.b64decode(letter.data["image/png"]))) as image:
        dark = np.asarray(image.convert("L")) < 128
    rows = np.flatnonzero(dark.any(axis=1))
    assert rows.size and rows[-1] - rows[0] + 1 == pytest.approx(0.729 * 50 * scale, abs=1.5)


def test_figure_text_metadata_outside_a_notebook():
    from scalelib._plot import _figure_text_metadata, _png_dpi, _record_figure_text_size

    fig, ax = plt.subplots(dpi=80)
    ax.set_title("t", fontsize=9)
    assert _figure_text_metadata(fig) == {"scalelib": {"min_text_px": 10.0}}  # 9 pt at 80 dpi
    assert _png_dpi(fig) == 80 and _png_dpi(fig, lambda f: None) == 80
    plt.close(fig)
    empty = plt.figure()
    assert _figure_text_metadata(empty) == {}  # IPython shows no image of a figure without axes
    plt.close(empty)
    assert _record_figure_text_size(object()) is False  # no display formatter: nothing to register with
