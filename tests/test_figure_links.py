"""Every figure a chapter's code cell outputs opens full size on a tap (book/_ext/figure_links.py): a page
built by myst-nb, as the site's pages are, links each output image to the very file the page shows, and
leaves other images alone; an image whose output metadata records the size of its smallest text (scalelib does,
in a notebook) carries it on its <img> as data-min-text-px, which the browser test reads."""

from __future__ import annotations

import base64
import io
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _png(width: float = 3) -> bytes:
    fig, ax = plt.subplots(figsize=(width, 2))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def built_page(tmp_path_factory) -> str:
    sphinx_main = pytest.importorskip("sphinx.cmd.build").main
    pytest.importorskip("myst_nb")
    src = tmp_path_factory.mktemp("src")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['myst_nb', 'figure_links']\nnb_execution_mode = 'off'\n")
    png = _png()
    (src / "drawn.png").write_bytes(png)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A page\n\n![a picture in the text](drawn.png)"),
        nbformat.v4.new_code_cell("draw()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": base64.b64encode(png).decode(), "text/plain": "<Figure>"},
            metadata={"scalelib": {"min_text_px": 11.5}})]),
        nbformat.v4.new_code_cell("draw_another()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": base64.b64encode(_png(4)).decode(), "text/plain": "<Figure>"})]),
    ]
    nbformat.write(nb, src / "index.ipynb")
    out = tmp_path_factory.mktemp("html")
    sys.modules.pop("figure_links", None)
    assert sphinx_main(["-q", "-b", "html", str(src), str(out)]) == 0
    return (out / "index.html").read_text()


def test_a_cell_output_figure_is_a_link_to_its_own_file(built_page):
    linked = re.findall(r'<a [^>]*class="figure-full-size"[^>]*href="([^"]+)"[^>]*><img [^>]*src="([^"]+)"',
                        built_page)
    assert len(linked) == 2, built_page
    for href, src in linked:
        assert href == src and src.startswith("_images/") and src.endswith(".png")


def test_a_figure_s_recorded_text_size_is_on_its_img(built_page):
    images = re.findall(r'<a [^>]*class="figure-full-size"[^>]*>(<img [^>]*>)', built_page)
    assert len(images) == 2, built_page
    assert 'data-min-text-px="11.5"' in images[0], images[0]
    assert "data-min-text-px" not in images[1], images[1]  # its output records none: the browser test fails it


def test_text_size_is_read_only_from_scalelib_s_record():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from figure_links import text_size_of
    finally:
        sys.path.pop(0)
    assert text_size_of({"scalelib": {"min_text_px": 9}}) == 9.0
    for metadata in ({}, None, {"scalelib": 9}, {"scalelib": {"min_text_px": "9"}}, {"scalelib": {"min_text_px": 0}},
                     {"image/png": {"width": 300}}, {"scalelib": {"min_text_px": True}}):
        assert text_size_of(metadata) is None, metadata


def test_an_image_outside_cell_outputs_gets_no_link(built_page):
    assert re.search(r'<p><img [^>]*alt="a picture in the text"', built_page), built_page


def test_the_site_enables_the_extension():
    import yaml

    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"].get("figure_links") == "_ext"
