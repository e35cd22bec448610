"""Tests of the course's PDF edition, _build/pdf/how-to-scale-your-model.pdf (`make site` or `make pdf`).

What a reader of the PDF would notice: the title page; every page of the table of contents
there, in its order, each starting a sheet of its own under its title (the chapters counted);
page numbers; bookmarks for the introduction, every part and every page; the figures (at least
as many images as the site's pages show); the math typeset by KaTeX (its fonts embedded, no raw
TeX in the text); and the site's introduction linking to the copy of the PDF in the site.
Expected titles come from the built site's pages, not from the code that made the PDF.

The last tests print small faulty pages with the same code (headless Chromium) and check that
the checks above notice each fault.

Without a built PDF these tests are skipped, unless the environment variable CI is set, in which
case they fail (as in tests/test_site.py).
"""

from __future__ import annotations

import datetime
import filecmp
import html
import logging
import os
import re
import struct
import unicodedata
import zlib
from pathlib import Path

import pytest

from scalelib.course import pdf

ROOT = Path(__file__).resolve().parents[1]
#: Which edition: English (this module), or Russian (tests/test_pdf_ru.py runs this module again with
#: ``_EDITION = "ru"``: its own build in _build/ru, its copy in the site's ru/).
_EDITION = globals().get("_EDITION", "en")
BUILD = ROOT / "_build" / ("ru/_build" if _EDITION == "ru" else "")
PDF = BUILD / "pdf" / pdf.PDF_NAME
SITE = ROOT / "_build" / "html" / ("ru" if _EDITION == "ru" else "")
TOC = ROOT / "book" / ("ru/_toc.yml" if _EDITION == "ru" else "_toc.yml")
CONFIG = ROOT / "book" / ("ru/_config.yml" if _EDITION == "ru" else "_config.yml")
IN_CI = bool(os.environ.get("CI"))
#: The title page's words in the edition's language (scalelib.course.pdf.FRONT_WORDS).
WORDS = pdf.FRONT_WORDS[_EDITION]

PARTS = pdf.toc_parts(TOC)
DOCNAMES = [name for part in PARTS for name in part.docnames]
ROOT_PAGE = PARTS[0].docnames[0]
CHAPTERS = [part for part in PARTS if part.caption and re.match(WORDS["chapter"] + r"\b", part.caption)]

logging.getLogger("pypdf").setLevel(logging.ERROR)  # Chromium's trailer understates its object count


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def squash(text: str) -> str:
    """`text` for comparison: ligatures undone (NFKC), all white space dropped."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def site_title(docname: str) -> str:
    """The title (first <h1> of the article) of `docname`'s page in the built site."""
    page = SITE / f"{docname}.html"
    if not page.is_file():
        _missing(f"{page} is missing: build the site (`make site`)")
    text = page.read_text(encoding="utf-8")
    article = text[text.find("<article"):]
    found = re.search(r"<h1[^>]*>(.*?)</h1>", article, re.S)
    assert found, f"{page}: no <h1> in the article"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).replace("#", "").strip()


# ---------------------------------------------------------------------------
# The checks, as functions: the fault tests below run them on PDFs made to fail.

RAW_MATH = ("$$", "\\frac", "\\begin{", "\\text{")
#: TeX's \( ... \) and \[ ... \] delimiters, as a pair: a lone "\(" is code (a regular expression's
#: escaped parenthesis, `re.findall(r"all-reduce\(", hlo)`), not math.
RAW_DELIMITERS = re.compile(r"\\\((?:(?!\\\().){0,300}?\\\)|\\\[(?:(?!\\\[).){0,300}?\\\]", re.DOTALL)


def raw_math(texts: list[str]) -> list[str]:
    """Each place where TeX source shows in the text (math that was not typeset), with its context."""
    found = []
    for number, text in enumerate(texts, 1):
        for raw in RAW_MATH:
            where = text.find(raw)
            if where >= 0:
                found.append(f"page {number}: {raw!r} in {text[max(0, where - 50):where + 50]!r}")
        pair = RAW_DELIMITERS.search(text)
        if pair:
            found.append(f"page {number}: {pair.group(0)[:2]!r} in {text[max(0, pair.start() - 50):pair.start() + 50]!r}")
    return found


def font_names(reader) -> set[str]:
    """The base names of the fonts the pages use (subset prefixes such as ``ABCDEF+`` dropped)."""
    names = set()
    for page in reader.pages:
        for font in ((page.get("/Resources") or {}).get("/Font") or {}).values():
            names.add(str(font.get_object().get("/BaseFont", "")).lstrip("/").split("+")[-1])
    return names


def image_count(reader) -> int:
    """How many images the pages draw (image XObjects, also inside form XObjects), counted per page."""
    def count(resources, seen: set) -> int:
        total = 0
        for ref in ((resources or {}).get("/XObject") or {}).values():
            obj = ref.get_object()
            if obj.get("/Subtype") == "/Image":
                total += 1
            elif obj.get("/Subtype") == "/Form" and id(obj) not in seen:
                seen.add(id(obj))
                total += count(obj.get("/Resources"), seen)
        return total

    return sum(count(page.get("/Resources"), set()) for page in reader.pages)


def outline(reader) -> list[tuple[str, int, list]]:
    """The bookmarks as (title, 0-based page, children) trees."""
    def walk(items) -> list:
        marks: list = []
        for item in items:
            if isinstance(item, list):
                marks[-1][2].extend(walk(item))
            else:
                marks.append((str(item.title), reader.get_destination_page_number(item), []))
        return marks

    return walk(reader.outline)


def starts(reader) -> dict[str, tuple[int, float]]:
    """Where each page of the toc starts: docname -> (0-based page, height of its top in points)."""
    found = {}
    for name, dest in reader.named_destinations.items():
        name = str(name).lstrip("/")
        if name.startswith("document-"):
            found[name.removeprefix("document-")] = (reader.get_destination_page_number(dest), float(dest["/Top"]))
    return found


# ---------------------------------------------------------------------------
# The built PDF


@pytest.fixture(scope="module")
def reader():
    if not PDF.is_file():
        _missing(f"the PDF is not built ({PDF} missing): run `make site` or `make pdf`")
    from pypdf import PdfReader

    return PdfReader(PDF)


@pytest.fixture(scope="module")
def sheets(reader):
    """Every sheet of the PDF as PDFium reads it, opened and loaded once (about 10 ms a sheet) for the checks that
    read its text, its pixels or its characters' sizes."""
    import pypdfium2

    document = pypdfium2.PdfDocument(PDF)
    try:
        yield [document[n] for n in range(len(document))]
    finally:
        document.close()


@pytest.fixture(scope="module")
def texts(reader, sheets) -> list[str]:
    """The text of every page (NFKC: ligatures undone), read by PDFium: about 10 ms a page, where
    pypdf's extract_text takes about 0.2 s (two minutes for the whole course)."""
    assert len(sheets) == len(reader.pages)
    return [unicodedata.normalize("NFKC", sheet.get_textpage().get_text_bounded().replace("\r\n", "\n"))
            for sheet in sheets]


@pytest.fixture(scope="module")
def where(reader) -> dict[str, tuple[int, float]]:
    return starts(reader)


def test_the_site_holds_the_pdf_it_links_to() -> None:
    if not (SITE / "index.html").is_file():
        _missing(f"the site is not built ({SITE}/index.html missing): run `make site`")
    intro = SITE / f"{ROOT_PAGE}.html"
    links = re.findall(r'<a\b[^>]*\bhref="([^"#]*\.pdf)"', intro.read_text(encoding="utf-8"))
    assert links, f"{intro}: no link to a PDF (the introduction should offer the course as a PDF)"
    targets = {(intro.parent / link).resolve() for link in links}
    assert (SITE / pdf.PDF_NAME).resolve() in targets, f"{intro} links to {links}, not to {pdf.PDF_NAME} in the site"
    copy = SITE / pdf.PDF_NAME
    assert copy.is_file(), f"{intro} links to {copy}, which is missing: `make site` copies the PDF there"
    if PDF.is_file():
        assert filecmp.cmp(PDF, copy, shallow=False), f"{copy} differs from the PDF just built ({PDF})"


def test_title_page(texts) -> None:
    import yaml

    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    first = squash(texts[0])
    assert squash(config["title"]) in first, f"title page: no course title {config['title']!r} in {texts[0]!r}"
    assert squash(config["repository"]["url"]) in first, f"title page: no repository address in {texts[0]!r}"
    pattern = re.escape(WORDS["built"]).replace(r"\{day\}", r"(\d{1,2})").replace(r"\{month\}", r"(\w+)") \
        .replace(r"\{year\}", r"(\d{4})")
    built = re.search(pattern, texts[0])
    assert built, f"title page: no date of the build in {texts[0]!r}"
    assert squash(WORDS["contents"]) in squash("".join(texts[:3])), f"no {WORDS['contents']!r} on the first pages"
    day = datetime.date(int(built.group(3)), WORDS["months"].index(built.group(2)) + 1, int(built.group(1)))
    assert day <= datetime.date.today() + datetime.timedelta(days=1), f"title page: a build date in the future, {day}"


def test_page_numbers_in_the_footer(reader, texts) -> None:
    total = len(reader.pages)
    for number in sorted({1, 2, total // 2, total}):
        assert f"{number} / {total}" in texts[number - 1], (
            f"page {number}: no page number '{number} / {total}' in its text (ends {texts[number - 1][-80:]!r})")


def test_every_page_of_the_toc_in_toc_order(where) -> None:
    missing = [name for name in DOCNAMES if name not in where]
    assert not missing, f"pages of the toc missing from the PDF: {missing}"
    pages = [where[name] for name in DOCNAMES]
    # (page, distance from the top): a page may share the last sheet of the one before, below it
    out_of_order = [(a, b) for a, b, pa, pb in zip(DOCNAMES, DOCNAMES[1:], pages, pages[1:])
                    if (pb[0], -pb[1]) <= (pa[0], -pa[1])]
    assert not out_of_order, f"pages not in toc order: {out_of_order}"


#: The text area's top and height on an A4 sheet, in points (scalelib.course.pdf.MARGINS, in inches).
TEXT_TOP = pdf.MARGINS[0] * 72
TEXT_HEIGHT = pdf.PAPERS["A4"][1] * 72 - (pdf.MARGINS[0] + pdf.MARGINS[1]) * 72


#: Pages that start a part of the toc (a chapter, the reference): each always starts a sheet.
PART_STARTS = {part.docnames[0] for part in PARTS}


@pytest.mark.parametrize("docname", DOCNAMES)
def test_each_page_starts_a_sheet_under_its_title(docname, reader, texts, where) -> None:
    """Each page of the toc starts a sheet with its title; or, where the end of the page before would
    have been left alone at the top of a sheet, starts on that sheet below it (scalelib.course.pdf's
    orphaned_ends). A chapter, or any page that starts a part of the toc, always starts a sheet."""
    page, top = where.get(docname, (None, None))
    assert page is not None, f"{docname}: not in the PDF"
    height = float(reader.pages[page].mediabox.height)
    title = site_title(docname)
    if squash(texts[page]).startswith(squash(title)) and top > 0.9 * height:
        return
    assert docname not in PART_STARTS, (
        f"{docname} starts a part, yet page {page + 1} starts {texts[page][:80]!r} ({height - top:.0f} pt above it)")
    before = DOCNAMES[DOCNAMES.index(docname) - 1]
    assert where[before] < (page, 0) or where[before][0] == page and where[before][1] > top, (
        f"{docname} starts {height - top:.0f} pt below the top of page {page + 1}, not after the end of {before}")
    assert squash(title) in squash(texts[page]), f"{docname}: page {page + 1} does not show its title {title!r}"


def _ink_bottom(bitmap, scale: float) -> float | None:
    """How far down (points from the sheet's top) the lowest non-white pixel row is, above the footer."""
    import numpy as np

    pixels = np.asarray(bitmap.to_numpy())[..., :3]
    footer = round((pdf.PAPERS["A4"][1] - pdf.MARGINS[1]) * 72 * scale)
    rows = np.nonzero((pixels[:footer] < 235).any(axis=(1, 2)))[0]
    return None if not len(rows) else (rows[-1] + 1) / scale


def test_no_sheet_is_almost_blank(reader, sheets) -> None:
    """No sheet is less than a fifth full: its ink (text, figures, rules, code boxes; the page number
    aside) reaches at least a fifth of the way down its text area. Measured on pixels, each sheet
    rendered by PDFium. The last sheet of the PDF, where the book ends, may be short."""
    scale = 0.5
    short = []
    for number, sheet in enumerate(sheets[:-1]):
        bottom = _ink_bottom(sheet.render(scale=scale), scale)
        fill = 0.0 if bottom is None else (bottom - TEXT_TOP) / TEXT_HEIGHT
        if fill < 0.2:
            short.append(f"page {number + 1}: {fill:.0%}")
    assert not short, f"{len(short)} sheet(s) less than a fifth full: {short[:10]}"


def test_no_colab_link_is_printed(texts) -> None:
    """The chapters' "Open in Colab" links are for the site: paper has no use for them."""
    found = [n for n, text in enumerate(texts, 1) if "Open in Colab" in text]
    assert not found, f"'Open in Colab' printed on pages {found[:10]}"


def test_the_api_reference_is_a_compact_appendix(where, reader, sheets) -> None:
    """The API reference comes after the chapters, in smaller type than a chapter (its characters'
    median height, read by PDFium, at most nine tenths of the first chapter's)."""
    import statistics

    if "book/api" not in where:
        pytest.skip("no API reference in the toc")
    chapters = [where[part.docnames[0]][0] for part in CHAPTERS]
    assert where["book/api"][0] > max(chapters), "the API reference is not after the chapters"

    def median_height(page: int) -> float:
        text = sheets[page].get_textpage()
        boxes = [text.get_charbox(i) for i in range(text.count_chars())]
        return statistics.median(top - bottom for left, bottom, right, top in boxes if top - bottom > 1)

    api, chapter = median_height(where["book/api"][0] + 1), median_height(chapters[0] + 1)
    assert api <= 0.9 * chapter, f"API reference characters {api:.1f} pt high, a chapter's {chapter:.1f} pt"


def test_as_many_chapter_starts_as_chapters_in_the_toc(reader, texts, where) -> None:
    assert CHAPTERS, "no 'Chapter N' part in the toc"
    chapter_pages = {where[part.docnames[0]][0] for part in CHAPTERS if part.docnames[0] in where}
    started = [page for page in chapter_pages
               if any(squash(texts[page]).startswith(squash(site_title(p.docnames[0]))) for p in CHAPTERS)]
    assert len(started) == len(CHAPTERS), (
        f"{len(started)} sheets start a chapter, the toc has {len(CHAPTERS)} chapters: "
        f"{[p.caption for p in CHAPTERS]}")


def test_every_toc_title_is_in_the_text(texts) -> None:
    everything = squash("\n".join(texts))
    absent = [site_title(name) for name in DOCNAMES if squash(site_title(name)) not in everything]
    assert not absent, f"titles of toc pages not found in the PDF's text: {absent}"


def test_bookmarks_for_every_part_and_page(reader, where) -> None:
    marks = outline(reader)
    expected = [site_title(ROOT_PAGE)] + [part.caption for part in PARTS if part.caption]
    assert [squash(m[0]) for m in marks] == [squash(t) for t in expected], (
        f"top-level bookmarks {[m[0] for m in marks]}, expected the introduction and the toc's parts {expected}")
    for part, mark in zip([p for p in PARTS if p.caption], marks[1:]):
        titles = [squash(child[0]) for child in mark[2]]
        assert titles == [squash(site_title(name)) for name in part.docnames], (
            f"bookmark {part.caption!r} holds {[c[0] for c in mark[2]]}, expected its pages {list(part.docnames)}")
        for name, child in zip(part.docnames, mark[2]):
            assert child[1] == where[name][0], f"bookmark {child[0]!r} opens page {child[1] + 1}, not its start"
        assert mark[1] == where[part.docnames[0]][0], f"bookmark {part.caption!r} does not open its first page"
    chapter_sections = [child for part, mark in zip([p for p in PARTS if p.caption], marks[1:])
                        if part in CHAPTERS for child in mark[2][0][2]]
    assert len(chapter_sections) >= 2 * len(CHAPTERS), "the chapter pages' sections have (almost) no bookmarks"


def test_figures_intact(reader) -> None:
    shown = 0
    for name in DOCNAMES:
        page = SITE / f"{name}.html"
        if not page.is_file():
            _missing(f"{page} is missing: build the site (`make site`)")
        text = page.read_text(encoding="utf-8")
        article = text[text.find("<article"):text.find("</article>")]
        shown += len(re.findall(r"<img\b[^>]*\bsrc=", article))
    assert shown > 0, "the site's pages show no image at all: nothing to compare"
    assert image_count(reader) >= shown, (
        f"the PDF draws {image_count(reader)} images, the site's pages show {shown}: figures were lost")


def test_katex_fonts_embedded(reader) -> None:
    katex = {name for name in font_names(reader) if name.startswith("KaTeX_")}
    assert {"KaTeX_Main-Regular", "KaTeX_Math-Italic"} <= katex, (
        f"KaTeX's fonts are not (all) embedded, so math is not typeset as on the site: {sorted(font_names(reader))}")


def test_no_raw_math_in_the_text(texts) -> None:
    leaks = raw_math(texts)
    assert not leaks, f"TeX source in the PDF's text (math not typeset): {leaks[:5]}"


def test_no_widget_is_printed(texts) -> None:
    """Nothing a sheet of paper cannot work: no "Show/Hide code cell" toggle (the setup cell stays out
    of print, folded cells print open without their summary), no "Click to show"."""
    for label in ("Hide code cell", "Show code cell", "Click to show", "Click to hide"):
        pages = [number for number, text in enumerate(texts, 1) if label in text]
        assert not pages, f"{label!r} printed on {len(pages)} page(s): {pages[:10]}"


def test_no_character_printed_as_an_empty_box(texts) -> None:
    """A character no installed font has (the checker's emoji without `make browser`'s emoji font)
    prints as an empty box, which the PDF's text maps to NUL or U+FFFD."""
    boxes = [f"page {n}: {t[max(0, t.find(c) - 40):t.find(c) + 40]!r}"
             for n, t in enumerate(texts, 1) for c in ("\x00", "\ufffd") if c in t]
    assert not boxes, f"characters printed as empty boxes (a font missing?): {boxes[:5]}"
    if any(name.startswith("solutions/") for name in DOCNAMES):
        assert "✅" in "".join(texts), "the solutions' checks print no ✅"


def test_pdf_without_solutions() -> None:
    """`make site SOLUTIONS=no` makes its own PDF: no solution page in it (checked when it is built)."""
    other = BUILD / "no-solutions" / "_build" / "pdf" / pdf.PDF_NAME
    if not other.is_file():
        pytest.skip(f"{other} is not built (`make site SOLUTIONS=no`)")
    from pypdf import PdfReader

    found = starts(PdfReader(other))
    assert not [name for name in found if name.startswith("solutions/")], "solution pages in the PDF without them"
    assert [name for name in DOCNAMES if not name.startswith("solutions/")] == sorted(found, key=lambda n: found[n][0])


# ---------------------------------------------------------------------------
# The table of contents and the configuration (no browser needed)


def test_toc_parts(tmp_path) -> None:
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/intro\nparts:\n"
                   "  - caption: 'Chapter 1: A'\n    chapters:\n      - file: book/a.ipynb\n"
                   "        sections:\n          - file: book/a2\n      - file: exercises/a\n"
                   "  - caption: Reference\n    chapters:\n      - file: book/api.md\n", encoding="utf-8")
    assert pdf.toc_parts(toc) == [pdf.Part(None, ("book/intro",)),
                                  pdf.Part("Chapter 1: A", ("book/a", "book/a2", "exercises/a")),
                                  pdf.Part("Reference", ("book/api",))]
    toc.write_text("format: jb-book\nroot: intro\nchapters:\n  - file: one\n  - file: two\n", encoding="utf-8")
    assert pdf.toc_parts(toc) == [pdf.Part(None, ("intro",)), pdf.Part(None, ("one", "two"))]
    toc.write_text("format: jb-book\nparts: []\n", encoding="utf-8")
    with pytest.raises(pdf.PdfError, match="root"):
        pdf.toc_parts(toc)


def test_pdf_config_reuses_the_site_cache(tmp_path) -> None:
    import yaml

    written = pdf.pdf_config(CONFIG, tmp_path / "build", tmp_path / "pdf" / "_config.yml")
    config = yaml.safe_load(written.read_text(encoding="utf-8"))
    original = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert config["execute"]["cache"] == str((tmp_path / "build" / ".jupyter_cache").resolve())
    assert config["sphinx"]["extra_extensions"] == original["sphinx"]["extra_extensions"] + ["scalelib.course.pdf"]
    for name, path in config["sphinx"]["local_extensions"].items():
        assert Path(path).is_absolute() and (Path(path) / f"{name}.py").is_file(), (name, path)
    assert config["title"] == original["title"] and config["repository"] == original["repository"]


def test_make_site_ends_with_the_pdf_and_make_pdf_builds_only_it() -> None:
    """`make site` builds the site, then the PDF (each when its inputs changed, tests/test_sitestamp.py);
    `make pdf` always prints the PDF, and nothing else."""
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("make is not installed")

    def commands(*args: str) -> list[str]:
        done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True)
        lines = [" ".join(line.split()) for line in done.stdout.replace("\\\n", " ").splitlines()]
        return [line for line in lines if "jupyter-book build" in line or "scalelib pdf" in line]

    site = commands("site")
    # the English site and PDF, then the Russian edition's site and PDF
    assert len(site) == 4 and "jupyter-book build" in site[0] and "scalelib pdf" not in site[0]
    assert site[1].endswith("scalelib pdf --toc book/_toc.yml --build-dir _build "
                            "&& .venv/bin/python scalelib/course/sitestamp.py done _build/pdf/pdf.inputs; }"), site
    assert "--config book/ru/_config.yml --toc book/ru/_toc.yml --path-output _build/ru" in site[2], site
    assert site[3].endswith("scalelib pdf --toc book/ru/_toc.yml --config book/ru/_config.yml --build-dir "
                            "_build/ru/_build && .venv/bin/python scalelib/course/sitestamp.py done "
                            "_build/ru/_build/pdf/pdf.inputs; }"), site
    assert len(commands("site", "SOLUTIONS=no")) == 2  # the site without solutions is English alone
    assert commands("pdf") == [".venv/bin/scalelib pdf --toc book/_toc.yml --build-dir _build"]
    nosol = commands("pdf", "SOLUTIONS=no")
    assert nosol == ["SCALELIB_SITE_SOLUTIONS=no .venv/bin/scalelib pdf --toc _build/no-solutions/_toc.yml "
                     "--build-dir _build/no-solutions/_build"], nosol


def test_cli_reports_errors(tmp_path, capsys) -> None:
    from scalelib.course.cli import main

    assert main(["pdf", "--toc", str(tmp_path / "missing.yml")]) == 1
    assert "missing.yml" in capsys.readouterr().err
    assert main(["pdf", "--paper", "A5"]) == 2


# ---------------------------------------------------------------------------
# The checks notice faults: small pages printed by the same code


class _OneChromium:
    """The Chromium every small print below is made with: pdf.print_page starts one per print (a second or two
    each) and quits it; given this one by pdf._chromium, its quit() instead leaves it as a fresh one starts
    (no emulated media or screen, a blank page) for the next print."""

    def __init__(self, driver) -> None:
        self._driver = driver

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def quit(self) -> None:
        self._driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        self._driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        self._driver.get("about:blank")


@pytest.fixture(scope="module")
def _one_chromium():
    for path in (pdf.CHROMIUM, pdf.CHROMEDRIVER):
        if not Path(path).exists():
            _missing(f"{path} not found: install it with `make browser`")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="course-pdf-chrome-", ignore_cleanup_errors=True) as user_data:
        driver = pdf._chromium(user_data)
        try:
            yield _OneChromium(driver)
        finally:
            driver.quit()


@pytest.fixture
def chromium(_one_chromium, monkeypatch) -> None:
    """Chromium is installed; the test's prints share one (_OneChromium)."""
    monkeypatch.setattr(pdf, "_chromium", lambda user_data_dir: _one_chromium)


FRONT = pdf.Front(title="A faulty page", subtitle="For the tests.", date=datetime.date(2025, 1, 1), repository="")


def _png(path: Path, width: int = 40, height: int = 30) -> None:
    """A small grey PNG, written without any imaging library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes([128, 128, 128]) * width for _ in range(height))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _print(tmp_path: Path, body: str, docnames=("intro",), after: str = "", front=FRONT):
    """Print a 'site' whose root page holds `body` (and `after` it, more pages as singlehtml marks them)
    through the PDF code; return (printed, parts, reader)."""
    import io

    from pypdf import PdfReader

    page = tmp_path / "page.html"
    page.write_text("<!doctype html><html><head><meta charset='utf-8'><title>fault</title></head><body>"
                    '<article class="bd-article">'
                    f'<section id="intro"><h1>Intro</h1>{body}</section>{after}</article></body></html>',
                    encoding="utf-8")
    parts = [pdf.Part(None, tuple(docnames))]
    printed = pdf.print_page(page, parts, front)
    return printed, parts, PdfReader(io.BytesIO(printed.pdf))


def test_math_check_catches_unrendered_math(chromium, tmp_path) -> None:
    _, _, faulty = _print(tmp_path, r"<p>Energy is $$E = mc^2$$ and a ratio is \frac{a}{b}.</p>")
    texts = [page.extract_text() for page in faulty.pages]
    leaks = raw_math(texts)
    assert any("$$" in leak for leak in leaks) and any("frac" in leak for leak in leaks), leaks
    assert raw_math(["a ratio \\(a / b\\) here"]) and not raw_math(['re.findall(r"all-reduce\\(", hlo)'])
    assert not {name for name in font_names(faulty) if name.startswith("KaTeX_")}, "KaTeX fonts in a page without them"


def test_figure_check_counts_images_and_notices_a_broken_one(chromium, tmp_path) -> None:
    _png(tmp_path / "figure.png")
    printed, _, reader = _print(tmp_path, '<p>A figure:</p><img src="figure.png" alt="figure">')
    assert image_count(reader) == 1 and not printed.broken_images
    broken, _, _ = _print(tmp_path, '<img src="missing.png" alt="lost">')
    assert broken.broken_images == ["missing.png"]


def test_bookmark_check_notices_a_page_missing_from_the_pdf(chromium, tmp_path) -> None:
    printed, parts, reader = _print(tmp_path, "<p>Text.</p>", docnames=("intro", "chapter"))
    assert printed.docs["chapter"]["title"] is None and printed.docs["intro"]["title"] == "Intro"
    assert set(starts(reader)) == {"intro"}
    with pytest.raises(pdf.PdfError, match="chapter"):
        pdf.write_pdf(printed, parts, FRONT, tmp_path / "out.pdf")


def test_each_page_of_the_single_page_starts_a_sheet(chromium, tmp_path) -> None:
    """A page's start marker may be followed by label targets before its section; it still starts a sheet."""
    after = ('<div class="toctree-wrapper"><span id="document-chapter"></span><span id="a-label"></span>'
             '<section id="chapter"><h2>Chapter</h2><p>Text.</p><section id="part"><h3>Part</h3><p>More.</p>'
             '</section></section></div>')
    printed, parts, reader = _print(tmp_path, "<p>Short.</p>", docnames=("intro", "chapter"), after=after)
    assert printed.docs["chapter"]["title"] == "Chapter"
    assert [s["title"] for s in printed.docs["chapter"]["sections"]] == ["Part"]
    found = starts(reader)
    height = float(reader.pages[0].mediabox.height)
    assert found["chapter"][0] == found["intro"][0] + 1 and found["chapter"][1] > 0.9 * height, found
    pdf.write_pdf(printed, parts, FRONT, tmp_path / "out.pdf")
    from pypdf import PdfReader

    marks = outline(PdfReader(tmp_path / "out.pdf"))
    assert [(m[0], m[1]) for m in marks] == [("Intro", found["intro"][0]), ("Chapter", found["chapter"][0])]
    assert [c[0] for c in marks[1][2]] == ["Part"]


def test_a_wrapped_code_line_continues_indented(chromium, tmp_path) -> None:
    """A line of code too long for the paper wraps, its continuation indented under its start, and
    the next line starts where its own indentation puts it; the highlighting stays."""
    import pypdfium2

    code = ('<div class="highlight"><pre><span class="k">def</span> <span class="nf">f</span>():\n'
            '    <span class="n">x</span> = "' + "word " * 70 + '"\n    <span class="k">return</span> x\n</pre></div>')
    printed, _, _ = _print(tmp_path, code)
    document = pypdfium2.PdfDocument(printed.pdf)
    try:
        (sheet,) = [n for n in range(len(document)) if "def" in document[n].get_textpage().get_text_bounded()]
        text = document[sheet].get_textpage()
        rects = sorted((text.get_rect(i) for i in range(text.count_rects())), key=lambda r: -(r[1] + r[3]))
    finally:
        document.close()
    lines: list[list[float]] = []  # [middle, left] of each printed line, from the top of the sheet down
    for left, bottom, right, top in rects:
        if bottom < 72:  # the page number
            continue
        if lines and abs(lines[-1][0] - (bottom + top) / 2) < 4:
            lines[-1][1] = min(lines[-1][1], left)
        else:
            lines.append([(bottom + top) / 2, left])
    starts_ = [left for _, left in lines]
    # "Intro", "def f():", "x = ...", its continuation(s), "return x"
    define, assign, continued, ret = starts_[1], starts_[2], starts_[3], starts_[-1]
    assert len(starts_) >= 5 and assign > define + 5 and continued > assign + 10, starts_
    assert abs(ret - assign) < 3 and all(abs(c - continued) < 1 for c in starts_[3:-1]), starts_


def test_colab_links_are_left_out_of_print(chromium, tmp_path) -> None:
    printed, _, reader = _print(tmp_path, '<p>Text before.</p><p><a class="reference external" '
                                'href="https://colab.research.google.com/github/o/r/blob/main/book/a.ipynb">'
                                'Open in Colab</a></p><p>Text after.</p>')
    text = "".join(page.extract_text() for page in reader.pages)
    assert "Open in Colab" not in text and "Text before." in text and "Text after." in text


def test_a_page_whose_end_would_sit_alone_follows_it(chromium, tmp_path) -> None:
    """The intro's last lines spill onto a sheet of their own: orphaned_ends names the chapter after
    it, which, printed to follow, starts below those lines on that sheet, and no sheet is near-blank."""
    after = ('<div><span id="document-chapter"></span><section id="chapter"><h2>Chapter</h2>'
             + "<p>Chapter text.</p>" * 5 + "</section></div>")
    body = "".join(f"<p>Line {n} of the introduction.</p>" for n in range(40))
    printed, parts, reader = _print(tmp_path, body, docnames=("intro", "chapter"), after=after)
    found = starts(reader)
    intro_sheets = found["chapter"][0] - found["intro"][0]
    fills = pdf.sheet_fill(printed.pdf)
    assert intro_sheets == 2 and fills[found["chapter"][0] - 1] < pdf.NEAR_BLANK, (found, fills)
    assert pdf.orphaned_ends(printed.pdf, parts) == ["chapter"]
    import dataclasses

    printed, parts, reader = _print(tmp_path, body, docnames=("intro", "chapter"), after=after,
                                    front=dataclasses.replace(FRONT, follows=("chapter",)))
    again = starts(reader)
    assert again["chapter"][0] == again["intro"][0] + 1 and again["chapter"][1] < 0.9 * float(reader.pages[0].mediabox.height)
    assert pdf.orphaned_ends(printed.pdf, parts) == []
