"""Numbered figures and equations: every figure a chapter draws has a caption and a name (its code cell's
``mystnb: figure:`` metadata), so that Sphinx numbers it; the equations the text refers back to carry a
label (``$$ ... $$ (eq-...)``); every ``{numref}`` and ``{eq}`` names a figure or an equation of its own
chapter; and a site built as the course's is (myst-nb, book/_ext/figure_links.py and chapter_numbers.py)
numbers them within the chapter ("Fig. 5.2", "(5.1)"), keeps each figure's alt text and full-size link, and
rewrites no page on a second build. The built site itself is checked in tests/test_site.py."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("ch[0-9][0-9]_*.ipynb"))
NAME = re.compile(r"fig-ch(\d\d)-[a-z0-9]+(?:-[a-z0-9]+)*")
EQ_LABEL = re.compile(r"^[ \t]*\$\$[ \t]*\((eq-[A-Za-z0-9-]+)\)[ \t]*$|\$\$[ \t]*\((eq-[A-Za-z0-9-]+)\)[ \t]*$", re.M)
REFERENCE = re.compile(r"\{(numref|eq)\}`(?:[^`<]*<)?([^`>]+)>?`")
#: At most this many numbered equations a chapter: the few the text comes back to, not every display.
MOST_EQUATIONS = 6


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _is_figure(cell: dict) -> bool:
    return cell["cell_type"] == "code" and any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def figures(path: Path) -> list[tuple[int, dict]]:
    """(cell index, cell) of each figure the chapter's code cells draw."""
    return [(index, cell) for index, cell in enumerate(_cells(path)) if _is_figure(cell)]


def markdown(path: Path) -> str:
    return "\n\n".join("".join(cell["source"]) for cell in _cells(path) if cell["cell_type"] == "markdown")


def equation_labels(text: str) -> list[str]:
    return [a or b for a, b in EQ_LABEL.findall(text)]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_figure_has_a_caption_and_a_name(path):
    chapter = path.stem[2:4]
    found = figures(path)
    assert found, f"{path.name} draws no figure"
    for index, cell in found:
        where = f"{path.name} cell {index}"
        options = cell["metadata"].get("mystnb", {})
        figure = options.get("figure", {})
        caption, name = figure.get("caption", ""), figure.get("name", "")
        match = NAME.fullmatch(name)
        assert match and match.group(1) == chapter, f"{where}: figure name {name!r} is not fig-ch{chapter}-<slug>"
        assert caption.endswith(".") and caption[0].isupper(), f"{where}: caption {caption!r} is not a sentence"
        assert 20 <= len(caption) <= 120, f"{where}: caption of {len(caption)} characters, not one short sentence"
        assert "\n" not in caption and caption.count(". ") == 0, f"{where}: caption {caption!r} is more than a sentence"
        alt = options.get("image", {}).get("alt", "")
        assert alt, f"{where}: the figure lost its alt text"
        assert caption.rstrip(".") not in alt, f"{where}: the caption repeats the alt text"
        # myst-nb makes a figure of every display output of the cell: one name, one output, else two targets.
        shown = [o for o in cell["outputs"] if o["output_type"] in ("display_data", "execute_result")]
        assert len(shown) == 1, f"{where}: {len(shown)} display outputs would each be a figure named {name}"


def test_figure_names_and_equation_labels_are_unique_over_the_book():
    seen: dict[str, str] = {}
    for path in CHAPTERS:
        names = [cell["metadata"]["mystnb"]["figure"]["name"] for _, cell in figures(path)]
        for label in names + equation_labels(markdown(path)):
            assert label not in seen, f"{label} is defined in {path.name} and in {seen[label]}"
            seen[label] = path.name
    assert sum(1 for label in seen if label.startswith("fig-")) >= 50


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_references_name_a_figure_or_equation_of_the_chapter(path):
    text = markdown(path)
    names = {cell["metadata"]["mystnb"]["figure"]["name"] for _, cell in figures(path)}
    labels = equation_labels(text)
    assert len(labels) <= MOST_EQUATIONS, f"{path.name} numbers {len(labels)} equations; number only those referred to"
    refs = REFERENCE.findall(text)
    for role, target in refs:
        known = names if role == "numref" else set(labels)
        assert target in known, f"{path.name}: {{{role}}}`{target}` names no {role == 'eq' and 'equation' or 'figure'} of the chapter"
    referred = {target for role, target in refs if role == "eq"}
    unreferred = [label for label in labels if label not in referred]
    assert not unreferred, f"{path.name}: numbered equations the text never refers to: {unreferred}"


def test_the_text_refers_to_figures_and_equations_by_number():
    """The prose points at its figures and formulas by number: most chapters do both."""
    with_figure_refs = [p.stem for p in CHAPTERS if "{numref}`fig-" in markdown(p)]
    with_equation_refs = [p.stem for p in CHAPTERS if "{eq}`eq-" in markdown(p)]
    assert len(with_figure_refs) >= 10, with_figure_refs
    assert len(with_equation_refs) >= 8, with_equation_refs


def test_the_patterns_read_what_the_notebooks_write():
    text = "$$\na = b\n$$ (eq-ch01-x)\n\n   $$c$$ (eq-ch01-y)\n\nSee {eq}`eq-ch01-x` and {numref}`Figure %s <fig-ch01-z>`."
    assert equation_labels(text) == ["eq-ch01-x", "eq-ch01-y"]
    assert REFERENCE.findall(text) == [("eq", "eq-ch01-x"), ("numref", "fig-ch01-z")]


# ---------------------------------------------------------------------------
# Numbering by chapter (book/_ext/chapter_numbers.py)


def _chapter_numbers():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import chapter_numbers
    finally:
        sys.path.pop(0)
    return chapter_numbers


def test_chapter_of_a_page():
    chapter_of = _chapter_numbers().chapter_of
    assert chapter_of("book/ch05_training") == 5
    assert chapter_of("book/ch12_gpus") == 12
    assert chapter_of("book/ru/ch05_training") == 5
    assert chapter_of("exercises/ch05_training") is None
    assert chapter_of("solutions/ch05_training") is None
    assert chapter_of("book/api") is None


def test_numbers_restart_in_each_chapter_in_sphinx_order():
    sphinx_numbers = {"book/ch02_a": {"figure": {"fig-b": (2,), "fig-a": (1,)}, "displaymath": {"equation-x": (1,)}},
                      "book/ch05_b": {"figure": {"fig-c": (3,)}, "displaymath": {"equation-y": (2,)}},
                      "book/api": {"figure": {"fig-d": (4,)}}}
    assert _chapter_numbers().by_chapter(sphinx_numbers) == {
        "book/ch02_a": {"figure": {"fig-a": (2, 1), "fig-b": (2, 2)}, "displaymath": {"equation-x": (2, 1)}},
        "book/ch05_b": {"figure": {"fig-c": (5, 1)}, "displaymath": {"equation-y": (5, 1)}},
        "book/api": {"figure": {"fig-d": (4,)}}}


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two chapters built as the site builds them (-W -n): chapter 2 with one figure, chapter 5 with two."""
    sphinx_main = pytest.importorskip("sphinx.cmd.build").main
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("myst_nb")
    src = tmp_path_factory.mktemp("src")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['myst_nb', 'figure_links', 'chapter_numbers']\nnb_execution_mode = 'off'\nnumfig = True\n"
        "myst_enable_extensions = ['dollarmath', 'amsmath']\nsuppress_warnings = ['myst-nb.lexer']\n")
    (src / "index.md").write_text("# Course\n\n```{toctree}\nbook/ch02_a\nbook/ch05_b\n```\n")
    (src / "book").mkdir()
    png = _png()

    def figure(name: str):
        cell = nbformat.v4.new_code_cell("draw()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": png, "text/plain": "<Figure>"})])
        cell.metadata = {"mystnb": {"image": {"alt": f"What {name} shows"},
                                    "figure": {"caption": f"Caption of {name}.", "name": name}}}
        return cell

    for stem, names in (("ch02_a", ["fig-ch02-one"]), ("ch05_b", ["fig-ch05-one", "fig-ch05-two"])):
        chapter = stem[2:4]
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(
            f"# Chapter {chapter}\n\n$$ T = a + b $$ (eq-ch{chapter}-t)\n\n$$ U = c $$\n\n"
            f"See {{numref}}`{names[-1]}` and {{eq}}`eq-ch{chapter}-t`.\n"), *[figure(name) for name in names]]
        nbformat.write(nb, src / "book" / f"{stem}.ipynb")
    out = tmp_path_factory.mktemp("html")
    sys.modules.pop("figure_links", None)
    sys.modules.pop("chapter_numbers", None)
    args = ["-q", "-W", "-n", "-b", "html", str(src), str(out)]
    assert sphinx_main(args) == 0
    pages = {stem: (out / "book" / f"{stem}.html").read_text() for stem in ("ch02_a", "ch05_b")}
    written = {stem: (out / "book" / f"{stem}.html").stat().st_mtime_ns for stem in pages}
    assert sphinx_main(args) == 0  # nothing changed: no page should be written again
    rewritten = [stem for stem in pages if (out / "book" / f"{stem}.html").stat().st_mtime_ns != written[stem]]
    return pages, rewritten


def test_figures_are_numbered_within_their_chapter(built):
    pages, _ = built
    number = re.compile(r'<span class="caption-number">([^<]*)</span>')
    assert [n.strip() for n in number.findall(pages["ch02_a"])] == ["Fig. 2.1"]
    assert [n.strip() for n in number.findall(pages["ch05_b"])] == ["Fig. 5.1", "Fig. 5.2"]
    assert '<span class="std std-numref">Fig. 5.2</span>' in pages["ch05_b"]


def test_labelled_equations_are_numbered_within_their_chapter(built):
    pages, _ = built
    for stem, chapter in (("ch02_a", 2), ("ch05_b", 5)):
        assert re.findall(r'<span class="eqno">\(([^)<]*)\)', pages[stem]) == [f"{chapter}.1"]  # the unlabelled one: none
        assert re.search(rf'<a class="reference internal" href="#equation-eq-ch0{chapter}-t">\({chapter}\.1\)</a>',
                         pages[stem]), pages[stem]


def test_a_numbered_figure_keeps_its_alt_text_and_full_size_link(built):
    pages, _ = built
    figure = re.search(r'<figure [^>]*id="fig-ch05-one">(.*?)</figure>', pages["ch05_b"], re.S)
    assert figure, pages["ch05_b"]
    link = re.search(r'<a [^>]*class="figure-full-size"[^>]*href="([^"]+)"[^>]*><img alt="What fig-ch05-one shows" '
                     r'src="([^"]+)"', figure.group(1))
    assert link and link.group(1) == link.group(2), figure.group(1)
    assert re.search(r"<figcaption>.*Fig\. 5\.1.*Caption of fig-ch05-one\.", figure.group(1), re.S)


def test_a_second_build_rewrites_no_page(built):
    _, rewritten = built
    assert rewritten == []


def test_the_site_enables_the_extension():
    import yaml

    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"].get("chapter_numbers") == "_ext"
