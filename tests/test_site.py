"""Browser tests of the built course website (_build/html).

Every page listed in book/_toc.yml is opened once in headless Debian Chromium
(through selenium and /usr/bin/chromedriver), served by a Python http.server
on 127.0.0.1, and checked for what a reader would notice:

- a title: an <h1>, a <title> that begins with it; a chapter's page titled as
  its part of the toc, its exercise and solution pages saying what they are;
- real text, math typeset by KaTeX, tables rendered (no raw Markdown rows), no
  test markers, nothing cut off at a phone's width;
- images: each one loaded, with an alt text that says what it shows (not its
  file name); every chapter page shows at least one; a chapter's figures and
  labelled equations numbered within it (Fig. 5.1, (5.1)), references reading them;
- nothing cut: at 390 px no page scrolls sideways and every box that scrolls
  (a wide table, an equation) shows a shadow that says so; at 1280 px no
  output hides the end of a line; no page loads the theme's fontawesome.js;
- navigation: at 390, 800 and 1280 px the ☰ button and the page-contents
  button are clicked, and the navigation and contents must open and close;
- figures: every figure a chapter draws has its smallest text at 9 px or more
  as a 1280 px window shows it and 7 px or more in a 390 px one, measured in
  the browser: the size the figure's own output metadata records in pixels of
  its image (data-min-text-px on its <img>, scalelib and
  book/_ext/figure_links.py) times the width the page shows it at over its
  natural width; a figure without that record fails;
- links: every link into the site leads to a file of the build, and its
  #fragment to an element of the target page (read with html.parser); links
  that leave the site are listed in _build/screenshots/external-links.txt,
  never fetched;
- the table of contents: every chapter, exercise set and solution set on disk
  is in the toc, a chapter's three pages in one part, and the root page's
  sidebar lists every toc page in order;
- downloads: the theme's download menu offers the page's source (.ipynb or
  .md), served as a valid notebook or text whose title is the page's, and the
  course's PDF; notebook
  pages have a working "open in Colab" link;
- search (search.html?q=..., run in the browser from searchindex.js): the
  first chapter's subject finds it, a nonsense word finds nothing, and the
  index holds every page under its title;
- no script errors, nothing fetched from the internet.

The root page and each chapter page are photographed at 1280 px (the window's
top; in CI, or with SITE_FULL_SCREENSHOTS=1, also the page down to 8000 px)
into _build/screenshots/, which CI keeps as the `screenshots` artefact. Fault
pages at the end show each check catching the fault it is meant to catch.

Build the site first (`make site`). Without a build these tests are skipped,
unless the environment variable CI is set, in which case they fail.
"""

from __future__ import annotations

import base64
import functools
import html.parser
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlencode, urlparse
from urllib.request import urlopen

import pytest
import yaml

from scalelib.course.pdf import Server, serve

ROOT = Path(__file__).resolve().parents[1]
#: Which edition these tests check: English (this module), or Russian (tests/test_site_ru.py runs this
#: module again with ``_EDITION = "ru"``): the Russian site is the folder ru/ of the English one.
_EDITION = globals().get("_EDITION", "en")
#: What the server serves: the whole site, both editions (a language switch leads from one to the other).
SERVED = ROOT / "_build" / "html"
SITE = SERVED / "ru" if _EDITION == "ru" else SERVED
TOC = ROOT / "book" / ("ru/_toc.yml" if _EDITION == "ru" else "_toc.yml")
#: The words the checks look for, in the edition's language.
WORDS = {
    "en": {"chapter": r"Chapter (\d+): (.+)", "exercises": "Chapter {number} exercises", "solutions": "solutions",
           "no_match": "did not match any documents", "search_results": "Search Results", "figure": "Fig."},
    "ru": {"chapter": r"Глава (\d+): (.+)", "exercises": "Упражнения к главе {number}", "solutions": "решения",
           "no_match": "не найдено ни одного документа", "search_results": "Результаты поиска", "figure": "Рис."},
}[_EDITION]
#: Screenshots of the Russian pages are named ru-<page>.png beside the English ones.
_SHOT_PREFIX = "" if _EDITION == "en" else f"{_EDITION}-"
#: The other edition's page for each page (book/_ext/language_switch.py).
OTHER_EDITION = {"en": "ru", "ru": "en"}[_EDITION]
CONFIG = ROOT / "book" / "_config.yml"
#: The course's PDF edition, at the top of the site (scalelib.course.pdf); the download menu links it.
COURSE_PDF = "how-to-scale-your-model.pdf"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
COLAB = "https://colab.research.google.com"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# URL schemes that never leave the browser.
LOCAL_SCHEMES = {"data", "blob", "about", "javascript"}
# Documents of the browser's own user interface, not of the site.
BROWSER_UI_SCHEMES = {"chrome", "chrome-untrusted", "chrome-extension", "devtools"}
IN_CI = bool(os.environ.get("CI"))
#: The browser window (CSS pixels): a desktop screen. Screenshots are taken at this width.
WINDOW = (1280, 900)
#: Where the screenshots go (uploaded by CI as the `screenshots` artefact), and the
#: most of a page's height the full-page screenshot keeps.
SCREENSHOTS = ROOT / "_build" / "screenshots"
FULL_PAGE_MAX_HEIGHT = 8000
#: Full-page screenshots cost 1-2 s a chapter: taken in CI, or when SITE_FULL_SCREENSHOTS=1.
FULL_SCREENSHOTS = IN_CI or os.environ.get("SITE_FULL_SCREENSHOTS", "") not in ("", "0")

# ---------------------------------------------------------------------------
# Pages, from the table of contents


def _toc_docnames(toc_path: Path = TOC) -> list[str]:
    """Docnames (paths from the repository root, no suffix) in toc order."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    names: list[str] = []

    def walk(entry: dict) -> None:
        if "file" in entry:
            names.append(re.sub(r"\.(ipynb|md|rst)$", "", entry["file"]))
        for key in ("parts", "chapters", "sections", "subtrees", "entries"):
            for child in entry.get(key) or []:
                walk(child)

    names.append(re.sub(r"\.(ipynb|md|rst)$", "", toc["root"]))
    walk(toc)
    return names


def _toc_parts(toc_path: Path = TOC) -> list[tuple[str, list[str]]]:
    """(caption, docnames) of each part of the toc, in order."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    return [(part.get("caption", ""),
             [re.sub(r"\.(ipynb|md|rst)$", "", entry["file"]) for entry in part.get("chapters") or [] if "file" in entry])
            for part in toc.get("parts") or []]


def _is_notebook(docname: str) -> bool:
    return (ROOT / f"{docname}.ipynb").is_file() or (
        SITE / "_sources" / f"{docname}.ipynb"
    ).is_file()


def _repository() -> tuple[str, str, str]:
    """(org, repo, branch) from book/_config.yml, the one place they are kept."""
    repo = yaml.safe_load(CONFIG.read_text(encoding="utf8"))["repository"]
    org, name = urlparse(repo["url"]).path.strip("/").split("/")[:2]
    return org, name, repo["branch"]


PAGES = _toc_docnames()
ROOT_PAGE = PAGES[0]
NOTEBOOK_PAGES = [page for page in PAGES if _is_notebook(page)]
#: The chapters' own pages (book/chNN_name), whichever chapters the toc lists.
CHAPTER_PAGES = [page for page in PAGES if re.fullmatch(r"book/(ru/)?ch\d+_\w+", page)]
SCREENSHOT_PAGES = [ROOT_PAGE, *CHAPTER_PAGES]
#: The part (its caption) each page is listed under in the toc.
CAPTION = {docname: caption for caption, docnames in _toc_parts() for docname in docnames}
#: A chapter's page, exercises and solutions: book|exercises|solutions/chNN_name.
CHAPTER_SET_PAGES = [page for page in PAGES if re.fullmatch(r"(book|exercises|solutions)/(ru/)?ch\d+_\w+", page)]


def _served_docname(url: str) -> str:
    """The page name (``book/ru/ch01_x``) of a page's URL, without the edition's folder (``ru/``) it is served in."""
    path = urlparse(url).path.lstrip("/").removesuffix(".html")
    folder = SITE.relative_to(SERVED).as_posix()
    return path.removeprefix(folder + "/") if folder != "." else path


def _plain(docname: str) -> str:
    """The English page's name of a page of either edition (``book/ru/ch01_x`` -> ``book/ch01_x``)."""
    return re.sub(r"^ru/", "", docname).replace("/ru/", "/")

# ---------------------------------------------------------------------------
# Serving and browsing


# The site is served as the PDF step serves it (scalelib.course.pdf.serve).


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in LOCAL_SCHEMES or parsed.hostname in LOCAL_HOSTS


def docname_of(url: str, base: str) -> str:
    """The docname of a page of the site served at `base` (no fragment, query or .html)."""
    return urlparse(url).path.removeprefix(urlparse(base).path).removesuffix(".html")


class _Anchors(html.parser.HTMLParser):
    """The names a URL fragment can point at in an HTML file: ids, and <a name=...>."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value and (key == "id" or (key == "name" and tag == "a")):
                self.names.add(value)


@functools.lru_cache(maxsize=None)
def _anchors(path: Path, mtime_ns: int) -> frozenset[str]:
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf8", errors="replace"))
    parser.close()
    return frozenset(parser.names)


def _link_faults(links: list[str], base: str, directory: Path) -> list[str]:
    """The links into the site served from `directory` at `base` that lead nowhere: no such
    file, or no element with the #fragment's id in the target page. Links elsewhere are ignored."""
    site = urlparse(base).netloc
    faults = []
    for link in dict.fromkeys(links):
        parsed = urlparse(link)
        if parsed.scheme not in ("http", "https") or parsed.netloc != site:
            continue
        path = unquote(parsed.path).lstrip("/")
        if not path or path.endswith("/"):
            path += "index.html"
        target = directory / path
        if not target.is_file():
            faults.append(f"{link}: the site has no file {path}")
        elif parsed.fragment and target.suffix == ".html":
            fragment = unquote(parsed.fragment)
            if fragment not in _anchors(target, target.stat().st_mtime_ns):
                faults.append(f"{link}: {path} has no element with id {fragment!r}")
    return faults


def _external_links(links: list[str], base: str) -> list[str]:
    """Web links that leave the site (listed by the tests, never fetched)."""
    site = urlparse(base).netloc
    return [link for link in dict.fromkeys(links)
            if urlparse(link).scheme in ("http", "https") and urlparse(link).netloc != site]


def _image_faults(images: list[dict]) -> list[str]:
    """Images (from the page probe) that did not load, or that say nothing to a reader who
    cannot see them: no alt text, or an alt text that is only the image's file name or path."""
    faults = []
    for image in images:
        if not image["complete"] or not image["width"]:
            faults.append(f"{image['src']}: not loaded (missing or broken file)")
        alt = image["alt"]
        if not alt:
            faults.append(f"{image['src']}: no alt text")
        elif re.search(r"\.(png|jpe?g|gif|svg|webp)\b", alt, re.IGNORECASE) or "/" in alt and " " not in alt:
            faults.append(f"{image['src']}: its alt text is a file name, not what it shows: {alt!r}")
    return faults


#: Every figure a code cell draws (not chapter 2's animation player, whose frames are measured where they are
#: drawn): the size of its smallest text in pixels of its image (data-min-text-px, book/_ext/figure_links.py),
#: and how wide the image is shown against its natural width. A JavaScript expression (``article`` defined).
_FIGURE_TEXT = """Array.from(article.querySelectorAll('.cell_output img')).filter(img => !img.closest('.animation'))
                    .map((img, k) => {
    const number = img.closest('figure') && img.closest('figure').querySelector('figcaption .caption-number');
    return {figure: number ? number.textContent.trim() : `image ${k + 1}`, src: img.getAttribute('src'),
            alt: (img.getAttribute('alt') || '').trim().slice(0, 60), text_px: img.getAttribute('data-min-text-px'),
            shown_width: img.getBoundingClientRect().width, natural_width: img.naturalWidth};
  })"""

# Collected in the page once it has loaded: what the per-page tests look at (all of it, or the fields named).
_DOM_PROBE = """
const article = document.querySelector('article.bd-article') || document.querySelector('main');
if (!article) { return {article: false}; }
const h1 = article.querySelector('h1');
const maths = Array.from(article.querySelectorAll('span.math, div.math'));
// The article's visible prose: without code (which may show $ or \\( on purpose)
// and without the typeset math (whose hidden MathML keeps the TeX source).
const prose = () => {
  const copy = article.cloneNode(true);
  copy.querySelectorAll('pre, code, .katex, script, style').forEach(e => e.remove());
  return copy;
};
// Each measurement, taken when asked for: all of them in this order, or those named in arguments[0].
const fields = {
  article: () => true,
  title: () => document.title,
  h1: () => h1 ? h1.textContent.replace(/#\\s*$/, '').trim() : null,
  text: () => article.innerText,
  prose: () => prose().textContent,
  math_total: () => maths.length,
  math_inline: () => maths.filter(e => e.tagName === 'SPAN').length,
  math_display: () => maths.filter(e => e.tagName === 'DIV').length,
  math_unrendered: () => maths.filter(e => !e.querySelector('.katex'))
                        .map(e => e.textContent.trim().slice(0, 80)),
  katex_errors: () => Array.from(article.querySelectorAll('.katex-error'))
                     .map(e => e.getAttribute('title') || e.textContent),
  links: () => Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  // Lines of the text a reader sees, outside the code cells' source, that look like Markdown
  // table rows: a table that was printed or written but not rendered.
  raw_table_rows: () => (() => {
    const shown = article.cloneNode(true);
    // Code a reader reads as code (cell sources, docstring examples) may hold pipes; outputs may not.
    shown.querySelectorAll('.cell_input, script, style').forEach(e => e.remove());
    shown.querySelectorAll('pre').forEach(e => { if (!e.closest('.cell_output')) { e.remove(); } });
    return shown.textContent.split('\\n').map(l => l.trim())
      .filter(l => /^\\|.*\\|$/.test(l) || /\\|\\s*(-{3,}|—)\\s*\\|/.test(l)).slice(0, 5);
  })(),
  output_tables: () => article.querySelectorAll('.cell_output table').length,
  // Every image of the article: loaded (complete, with a width), and described by an alt
  // text or shown as a figure or a cell's output (a plot).
  images: () => Array.from(article.querySelectorAll('img')).map(img => ({
    src: img.getAttribute('src'),
    complete: img.complete,
    width: img.naturalWidth,
    alt: (img.getAttribute('alt') || '').trim(),
    in_output: !!img.closest('figure, .cell_output, .output'),
  })),
  // Numbered figures (a cell's output with a caption): the number and caption the page shows, whether the
  // image still opens full size, and how wide it is drawn against its output box (a figure's padding would
  // shrink it, and its text, below the column). Equation numbers, and the text of references to either.
  figures: () => Array.from(article.querySelectorAll('.cell_output figure')).map(f => {
    const img = f.querySelector('img'), box = f.closest('.cell_output');
    const text = sel => { const e = f.querySelector(sel); return e ? e.textContent.trim() : ''; };
    return {id: f.id, number: text('figcaption .caption-number'), caption: text('figcaption .caption-text'),
            linked: !!f.querySelector('a.figure-full-size > img'),
            img_width: img ? img.getBoundingClientRect().width : 0, natural_width: img ? img.naturalWidth : 0,
            box_width: box ? box.clientWidth : 0};
  }),
  // Every figure a code cell draws, its smallest text and its shown and natural widths (_FIGURE_TEXT).
  figure_text: () => """ + _FIGURE_TEXT + """,
  // The text column's width (scalelib._plot.COLUMN_PX assumes it): the article's, less its padding.
  column_width: () => (() => {
    const a = document.querySelector('article.bd-article');
    if (!a) { return null; }
    const s = getComputedStyle(a);
    return a.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
  })(),
  equation_numbers: () => Array.from(article.querySelectorAll('div.math .eqno')).map(e => e.textContent.trim()),
  number_refs: () => Array.from(article.querySelectorAll('a span.std-numref, a[href^="#equation-"]:not(.headerlink)'))
                    .map(e => e.textContent.trim()),
  // The left navigation (the book's table of contents) and the theme's download menu.
  nav_captions: () => Array.from(document.querySelectorAll('nav.bd-docs-nav .caption-text'))
                     .map(e => e.textContent.trim()),
  nav_links: () => Array.from(document.querySelectorAll('nav.bd-docs-nav a[href]'))
                  .map(a => ({href: a.href, text: a.textContent.trim()})),
  downloads: () => Array.from(document.querySelectorAll('.dropdown-download-buttons a[href]')).map(a => a.href),
  // The language switch (book/_ext/language_switch.py): the other edition's page, and where it is drawn.
  language_switch: () => Array.from(document.querySelectorAll('nav.course-language a[href]'))
                        .map(a => ({href: a.href, lang: a.getAttribute('hreflang')})),
  language_switch_box: () => (() => {
    const a = document.querySelector('nav.course-language a[href]');
    if (!a) { return null; }
    const r = a.getBoundingClientRect();
    return [r.left, r.right, r.width, r.height, getComputedStyle(a).visibility];
  })(),
  // Display math and tables that reach past the window's edges with nothing to scroll them:
  // cut off on a narrow screen (a scrolling box of their own, or an ancestor's, is fine).
  // How far the page scrolls sideways (0: not at all), and the elements that reach past its right edge.
  page_overflow: () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  too_wide: () => document.documentElement.scrollWidth <= document.documentElement.clientWidth ? [] :
            Array.from(article.querySelectorAll('*')).filter(e => {
              // the innermost elements past the right edge, not inside a box that scrolls or clips them
              const edge = document.documentElement.clientWidth + 1, box = e.getBoundingClientRect();
              if (!box.width || box.right <= edge || Array.from(e.children).some(c => c.getBoundingClientRect().right > edge)) {
                return false;
              }
              for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
                if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(a).overflowX)) { return false; }
              }
              return true;
            }).slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + Array.from(e.classList).join('.') + ': '
                                 + e.textContent.trim().slice(0, 50)),
  // Output boxes whose lines run past their right edge (hidden behind a horizontal scroll).
  cut_outputs: () => Array.from(article.querySelectorAll('.cell_output .output, .cell_output pre')).filter(
                 e => e.scrollWidth > e.clientWidth + 1 && !e.querySelector('img, svg, table, .katex-display'))
               .map(e => e.textContent.trim().split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 80)),
  // Every element that really scrolls sideways (a table, KaTeX's inner box, a code block: whatever
  // has overflow-x auto or scroll and more content than width), at the start of its scroll, whose
  // box is not marked as hiding content on the right (the cue itself is checked by pixels,
  // _scroll_cue_faults).
  hintless_scrollers: () => Array.from(article.querySelectorAll('*')).filter(e =>
                 e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
                 && e.checkVisibility({visibilityProperty: true})
                 && !(e.parentElement.classList.contains('course-scroll')
                      && e.parentElement.classList.contains('course-more-right') === (e.scrollLeft < e.scrollWidth - e.clientWidth - 1)))
               .map(e => e.tagName.toLowerCase() + '.' + Array.from(e.classList).join('.') + ': ' + e.textContent.trim().slice(0, 60)),
  cut_off: () => Array.from(article.querySelectorAll('.katex-display, table')).filter(e => {
             const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
             const box = e.getBoundingClientRect();
             // a box that starts left of the text column is cut there, scrolling or not: nothing scrolls
             // to a negative offset (a centred flex item wider than its column, say)
             if (box.width && box.left < article.getBoundingClientRect().left - 1) { return true; }
             for (let el = e; el && el !== document.body; el = el.parentElement) {
               if (scrolls(el)) { return false; }
             }
             return box.left < -1 || box.right > window.innerWidth + 1 || e.scrollWidth > e.clientWidth + 1;
           }).map(e => e.textContent.trim().slice(0, 60)),
};
const wanted = arguments[0] || Object.keys(fields);
return Object.fromEntries(wanted.map(name => [name, fields[name]()]));
"""


@dataclass
class PageReport:
    url: str
    final_url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dom: dict = field(default_factory=dict)
    screenshots: list[Path] = field(default_factory=list)
    #: What a check that works on the open page (scrolling it, taking screenshots) found there while it was
    #: loaded, by the check's name: its result, or the exception it raised (re-raised by the test that reads it).
    checked: dict = field(default_factory=dict)

    def result(self, check: str):
        """The result of `check` on this page, raising what it raised."""
        found = self.checked[check]
        if isinstance(found, BaseException):
            raise found
        return found

    def check(self, name: str, function, *args) -> None:
        """Run `function(*args)` on the open page now and keep its result (or its exception) as `name`."""
        try:
            self.checked[name] = function(*args)
        except Exception as error:  # noqa: BLE001 - kept for the test that reads this check
            self.checked[name] = error

    @property
    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if not _is_local(url)]


def _drain_logs(driver) -> tuple[list[dict], list[dict]]:
    return driver.get_log("browser"), driver.get_log("performance")


def load_page(driver, url: str, settle: float = 0.3, fields: list[str] | None = None) -> PageReport:
    """Open `url`, wait until it and its fonts have loaded, and report what happened.

    console_errors: SEVERE browser-console entries (script errors, failed loads).
    requests: every URL the page asked for (Network.requestWillBeSent).
    dom: the page probe's measurements (_DOM_PROBE), all of them or the `fields` named.
    """
    _drain_logs(driver)  # forget whatever the previous page left behind
    driver.get(url)
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.fonts.ready.then(() => done(true), () => done(false));"
    )
    time.sleep(settle)  # let late async requests show up in the logs
    browser_log, performance_log = _drain_logs(driver)
    report = PageReport(url=url, final_url=driver.current_url)
    report.console_errors = [
        entry["message"] for entry in browser_log if entry.get("level") == "SEVERE"
    ]
    for entry in performance_log:
        message = json.loads(entry["message"])["message"]
        if message.get("method") != "Network.requestWillBeSent":
            continue
        params = message["params"]
        if urlparse(params.get("documentURL", "")).scheme in BROWSER_UI_SCHEMES:
            continue
        report.requests.append(params["request"]["url"])
    report.dom = driver.execute_script(_DOM_PROBE, fields) or {}
    return report


def take_screenshots(driver, name: str, folder: Path = SCREENSHOTS, full: bool = FULL_SCREENSHOTS) -> list[Path]:
    """Photograph the open page: `name`.png, the window as a reader first sees it, and (if
    `full`) `name`.full.png, the whole page down to FULL_PAGE_MAX_HEIGHT CSS pixels (Chrome's
    DevTools protocol draws beyond the window without scrolling it)."""
    folder.mkdir(parents=True, exist_ok=True)
    top = folder / f"{name}.png"
    top.write_bytes(driver.get_screenshot_as_png())
    if not full:
        return [top]
    width, height = driver.execute_script(
        "return [window.innerWidth, document.documentElement.scrollHeight];")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": min(height, FULL_PAGE_MAX_HEIGHT), "scale": 1},
    })
    full = folder / f"{name}.full.png"
    full.write_bytes(base64.b64decode(shot["data"]))
    return [top, full]


def _blank(png: Path) -> str | None:
    """Why the screenshot looks blank (one colour nearly everywhere), or None if it shows a page."""
    from PIL import Image  # Pillow comes with matplotlib

    with Image.open(png) as image:
        pixels = image.width * image.height
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    if colours is None:  # more than 65536 colours: a picture, not a blank
        return None
    most = max(count for count, _ in colours)
    if len(colours) < 16 or most > 0.98 * pixels:
        return f"{len(colours)} colour(s), the commonest on {most / pixels:.1%} of the pixels"
    return None


def _chrome(user_data_dir: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={user_data_dir}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        # No host but this machine can even be looked up: a stray CDN request is
        # still logged (and fails the tests) but never leaves the machine.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    driver.get("about:blank")
    return driver


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    for path, how in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver")):
        if not Path(path).exists():
            _missing(f"{path} not found: install {how} with `make browser`")
    try:
        import selenium  # noqa: F401
    except ImportError:
        _missing("selenium is not installed in this environment")
    with tempfile.TemporaryDirectory(
        prefix="site-test-chrome-", ignore_cleanup_errors=True
    ) as user_data_dir:
        driver = _Browser(lambda: _chrome(user_data_dir))
        try:
            yield driver
        finally:
            driver.quit()


class _Browser:
    """The WebDriver, which :func:`_report` starts again if Chromium itself has gone away (seen once in a
    parallel run: "session deleted as the browser has closed the connection" before any page was
    loaded). Every other call goes to the driver as it is; a page that kills the browser twice still fails."""

    def __init__(self, start):
        self._start, self._driver, self.restarts = start, start(), 0

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def alive(self) -> bool:
        try:
            self._driver.current_url
            return True
        except Exception:  # noqa: BLE001 - the session is gone, whatever the driver makes of it
            return False

    def restart(self, why: str) -> None:
        import warnings

        self.restarts += 1
        if self.restarts > 2:
            pytest.fail(f"Chromium went away {self.restarts} times ({why})")
        warnings.warn(f"Chromium went away ({why}); started it again", RuntimeWarning, stacklevel=2)
        try:
            self._driver.quit()
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        self._driver = self._start()


@pytest.fixture(scope="module")
def site() -> Iterator[Server]:
    if not (SITE / "index.html").is_file():
        _missing(f"the site is not built ({SITE}/index.html missing): run `make site` first")
    server = serve(SERVED)
    try:
        yield server if SITE == SERVED else _EditionServer(server, SITE.relative_to(SERVED).as_posix() + "/")
    finally:
        server.stop()


class _EditionServer:
    """The server of the whole site, seen from one edition's folder (``base`` ends in ``ru/``)."""

    def __init__(self, server: Server, folder: str) -> None:
        self._server, self.base = server, server.base + folder

    def __getattr__(self, name):
        return getattr(self._server, name)


@pytest.fixture(scope="module")
def reports(browser, site) -> dict[str, PageReport]:
    """Page reports, each page loaded once (lazily) and shared by the tests."""
    return {}


def _report(browser, site, reports, docname: str) -> PageReport:
    """The page's report, loading it (at the desktop width) the first time it is asked for.

    Chapter pages and the root page are photographed while they are open (SCREENSHOT_PAGES), and a chapter's
    boxes that scroll sideways are checked for their cue then (_scroll_cue_faults: one load serves every check).
    """
    if docname not in reports:
        if not (SITE / f"{docname}.html").is_file():
            pytest.fail(f"{docname}: listed in the toc but {docname}.html was not built")
        if not browser.alive():
            browser.restart(f"before loading {docname}")
        size = browser.get_window_size()
        resized = size["width"] != WINDOW[0]
        if resized:  # e.g. while the phone-width tests hold the window narrow
            browser.set_window_size(*WINDOW)
        try:
            report = load_page(browser, site.base + f"{docname}.html")
            if docname in CHAPTER_PAGES:
                # before the screenshots: a full-page capture (in CI) leaves Chrome's layout changed for the
                # captures that follow. The check scrolls each box back to its start; the page goes back to its top.
                report.check("desktop_scroll_cues", _scroll_cue_faults, browser, ("code", "table", "equation"))
                browser.execute_script("window.scrollTo(0, 0)")
            if docname in SCREENSHOT_PAGES:
                report.screenshots = take_screenshots(browser, _SHOT_PREFIX + Path(docname).name)
        finally:
            if resized:
                browser.set_window_size(size["width"], size["height"])
        reports[docname] = report
    return reports[docname]


@pytest.fixture
def page(request, browser, site, reports) -> PageReport:
    return _report(browser, site, reports, request.param)


def _params(pages: list[str]):
    return pytest.mark.parametrize("page", pages, indirect=True, ids=pages)


# ---------------------------------------------------------------------------
# Every page


@_params(PAGES)
def test_title(page: PageReport) -> None:
    assert page.dom.get("article"), f"{page.url}: no <article>/<main> element"
    assert page.dom.get("h1"), f"{page.url}: the page has no non-empty <h1> title"
    assert page.dom.get("title", "").strip(), f"{page.url}: empty <title>"


@_params(PAGES)
def test_article_has_text(page: PageReport) -> None:
    text = re.sub(r"\s+", " ", page.dom.get("text") or "")
    body = text.replace(page.dom.get("h1") or "", "", 1).strip()
    assert len(body) >= 200, (
        f"{page.url}: the article has only {len(body)} characters of text besides "
        f"its title: {body[:200]!r}"
    )


@_params(PAGES)
def test_math_rendered_by_katex(page: PageReport) -> None:
    dom = page.dom
    assert not dom.get("math_unrendered"), (
        f"{page.url}: {len(dom['math_unrendered'])} of {dom['math_total']} math "
        f"elements were not typeset by KaTeX: {dom['math_unrendered'][:3]}"
    )
    assert not dom.get("katex_errors"), (
        f"{page.url}: KaTeX could not parse: {dom['katex_errors'][:3]}"
    )
    prose = dom.get("prose") or ""
    for raw in ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{"):
        where = prose.find(raw)
        assert where < 0, (
            f"{page.url}: raw math delimiter {raw!r} left in the text: "
            f"{prose[max(0, where - 60):where + 60]!r}"
        )


def test_root_page_shows_inline_and_display_math(browser, site, reports) -> None:
    page = _report(browser, site, reports, ROOT_PAGE)
    assert page.dom.get("math_inline", 0) >= 1, f"{page.url}: no inline math ($...$)"
    assert page.dom.get("math_display", 0) >= 1, f"{page.url}: no display math ($$...$$)"


@_params(PAGES)
def test_no_console_errors(page: PageReport) -> None:
    assert not page.console_errors, (
        f"{page.url}: {len(page.console_errors)} browser console error(s):\n  "
        + "\n  ".join(page.console_errors)
    )


@_params(PAGES)
def test_no_requests_outside_localhost(page: PageReport) -> None:
    assert page.requests, f"{page.url}: no network request seen at all (is the log working?)"
    assert not page.foreign_requests, (
        f"{page.url}: requested {len(page.foreign_requests)} URL(s) not on localhost:\n  "
        + "\n  ".join(page.foreign_requests)
    )


@pytest.mark.skipif(not NOTEBOOK_PAGES, reason="no notebook page in the toc yet")
@_params(NOTEBOOK_PAGES)
def test_notebook_has_colab_link(page: PageReport) -> None:
    org, repo, branch = _repository()
    docname = _served_docname(page.url)
    expected = f"{COLAB}/github/{org}/{repo}/blob/{branch}/{docname}.ipynb"
    colab_links = [link for link in page.dom.get("links", []) if link.startswith(COLAB)]
    assert expected in colab_links, (
        f"{page.url}: no Colab launch link to {expected}; Colab links found: {colab_links}"
    )


#: Chapter pages whose code cells print tables, and how many at least (rendered as HTML tables).
OUTPUT_TABLES = {"book/ch01_rooflines": 1, "book/ch02_tpus": 2, "book/ch03_sharding": 17, "book/ch04_transformers": 7,
                 "book/ch05_training": 7, "book/ch06_llama_training": 5, "book/ch07_inference": 6, "book/ch08_serving": 7, "book/ch09_profiling": 5, "book/ch10_jax": 1, "book/ch11_capstone": 5, "book/ch12_gpus": 4}


@_params(PAGES)
def test_no_raw_markdown_tables(page: PageReport) -> None:
    assert not page.dom.get("raw_table_rows"), (
        f"{page.url}: Markdown table rows shown as text (not rendered): {page.dom['raw_table_rows']}"
    )


@_params([p for p in PAGES if _plain(p) in OUTPUT_TABLES])
def test_tables_printed_by_code_cells_are_rendered(page: PageReport) -> None:
    docname = _plain(urlparse(page.url).path.lstrip("/").removesuffix(".html"))
    assert page.dom.get("output_tables", 0) >= OUTPUT_TABLES[docname], (
        f"{page.url}: {page.dom.get('output_tables')} rendered output table(s), expected {OUTPUT_TABLES[docname]}"
    )


@_params(PAGES)
def test_no_test_markers_on_the_page(page: PageReport) -> None:
    text = page.dom.get("text") or ""
    for marker in ("NBVAL", "nbval-", "### BEGIN SOLUTION", "### END SOLUTION"):
        assert marker not in text, f"{page.url}: a reader sees the test marker {marker!r}"


# ---------------------------------------------------------------------------
# Images, links, table of contents, downloads, search, titles, screenshots


@_params(PAGES)
def test_images_load_and_are_described(page: PageReport) -> None:
    faults = _image_faults(page.dom.get("images", []))
    assert not faults, f"{page.url}: {len(faults)} faulty image(s):\n  " + "\n  ".join(faults)


@_params(CHAPTER_PAGES)
def test_chapter_shows_a_figure(page: PageReport) -> None:
    shown = [image["src"] for image in page.dom.get("images", []) if image["width"]]
    assert shown, f"{page.url}: the chapter shows no image (its figures are missing)"


def _numbered_in_notebook(docname: str) -> tuple[int, int]:
    """(figures, labelled equations) of a chapter's notebook: what its page must number."""
    cells = json.loads((ROOT / f"{docname}.ipynb").read_text(encoding="utf8"))["cells"]
    figures = sum(1 for cell in cells if cell["cell_type"] == "code"
                  and any("image/png" in output.get("data", {}) for output in cell.get("outputs", [])))
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    return figures, len(re.findall(r"\$\$[ \t]*\(eq-[A-Za-z0-9-]+\)[ \t]*$", text, re.M))


@_params(CHAPTER_PAGES)
def test_chapter_numbers_its_figures_and_equations(page: PageReport) -> None:
    """Every figure a chapter draws is shown as "Fig. N.k" with its caption, still opening full size and as wide
    as an uncaptioned one; its labelled equations read "(N.k)"; every reference reads one of those numbers."""
    docname = _served_docname(page.url)
    chapter = int(re.search(r"ch(\d+)_", docname).group(1))
    figure_count, equation_count = _numbered_in_notebook(_plain(docname))  # the Russian page numbers the same
    figures = page.dom.get("figures", [])
    assert [f["number"] for f in figures] == [f"{WORDS['figure']} {chapter}.{k}" for k in range(1, figure_count + 1)], (
        f"{page.url}: figure numbers {[f['number'] for f in figures]}, expected {figure_count} numbered {chapter}.k")
    assert all(f["caption"] and f["linked"] for f in figures), f"{page.url}: a figure without caption or link: {figures}"
    narrow = [f["id"] for f in figures if f["img_width"] < min(f["natural_width"], f["box_width"]) - 1]
    assert not narrow, f"{page.url}: figures drawn narrower than their output box: {narrow}"
    numbers = [re.sub(r"[^0-9.()]", "", n) for n in page.dom.get("equation_numbers", [])]
    assert numbers == [f"({chapter}.{k})" for k in range(1, equation_count + 1)], (
        f"{page.url}: equation numbers {numbers}, expected {equation_count} numbered ({chapter}.k)")
    refs = page.dom.get("number_refs", [])
    word = WORDS["figure"]  # a reference inside a Russian sentence reads "рис.", the caption "Рис." (translate.py)
    figure = f"[{word[0]}{word[0].lower()}]{re.escape(word[1:])}"
    wrong = [r for r in refs if not re.fullmatch(rf"{figure} {chapter}\.\d+|\({chapter}\.\d+\)", r)]
    assert refs and not wrong, f"{page.url}: references that do not read a number of this chapter: {wrong or refs}"


#: The smallest a figure's text may be shown (CSS px) at each window width the browser tests use.
LEAST_FIGURE_TEXT_PX = {390: 7.0, 1280: 9.0}


def _figure_text_sizes(figures: list[dict], where: str) -> tuple[list[tuple[float, str]], list[str]]:
    """Each figure's smallest text as the page shows it, ``data-min-text-px`` (its size in pixels of the image)
    times the image's shown width over its natural width, with the figure's name; and the figures that cannot
    be measured (no attribute, image not loaded)."""
    sizes, faults = [], []
    for f in figures:
        name = f"{where}, {f['figure']} ({f['alt'] or f['src']})"
        if f["text_px"] is None:
            faults.append(f"{name}: its <img> has no data-min-text-px (the figure's output metadata records no "
                          "text size; outputs from a notebook cache older than that record lack it: clear "
                          "_build/.jupyter_cache)")
        elif not f["natural_width"] or not f["shown_width"]:
            faults.append(f"{name}: not loaded or not shown")
        else:
            sizes.append((float(f["text_px"]) * f["shown_width"] / f["natural_width"], name))
    return sizes, faults


def _figure_text_faults(figures: list[dict], where: str, width: int) -> list[str]:
    """Figures whose smallest text is shown under LEAST_FIGURE_TEXT_PX[width], or that cannot be measured."""
    sizes, faults = _figure_text_sizes(figures, where)
    least = LEAST_FIGURE_TEXT_PX[width]
    return faults + [f"{name}: smallest text {px:.1f} px as shown at {width} px, under {least:g}"
                     for px, name in sizes if px < least]


def _chapter_figure_count(docname: str) -> int:
    return _numbered_in_notebook(_plain(docname))[0]  # a Russian page shows the English notebook's figures


@_params(CHAPTER_PAGES)
def test_figure_text_is_legible_as_shown_at_desktop_width(page: PageReport) -> None:
    """Every figure a chapter draws shows its smallest text at 9 px or more in a 1280 px window, measured in the
    browser from the figure's own record of its text size and the width the page gives its image."""
    docname = _served_docname(page.url)
    figures = page.dom.get("figure_text", [])
    assert len(figures) == _chapter_figure_count(docname), (
        f"{page.url}: {len(figures)} figure images, the notebook draws {_chapter_figure_count(docname)}")
    faults = _figure_text_faults(figures, docname, WINDOW[0])
    assert not faults, f"{len(faults)} figure(s) with text too small or unmeasured:\n  " + "\n  ".join(faults)


@pytest.mark.parametrize("docname", CHAPTER_PAGES)
def test_figure_text_is_legible_as_shown_at_phone_width(docname, browser, site, phone_reports) -> None:
    """Every figure a chapter draws shows its smallest text at 7 px or more in a 390 px phone's window (scaled
    down to its 358 px column), measured as at 1280 px (with the scrollbar hidden, _phone_report)."""
    shown = _phone_report(browser, site, phone_reports, docname).result("figures_without_scrollbar")
    viewport, figures = shown["viewport"], shown["figure_text"]
    assert viewport == PHONE_WIDTH, f"{docname}: the page is laid out {viewport} px wide, not a phone's {PHONE_WIDTH}"
    assert len(figures) == _chapter_figure_count(docname), (
        f"{docname} at {PHONE_WIDTH} px: {len(figures)} figure images, the notebook draws "
        f"{_chapter_figure_count(docname)}")
    faults = _figure_text_faults(figures, docname, PHONE_WIDTH)
    assert not faults, f"{len(faults)} figure(s) with text too small or unmeasured:\n  " + "\n  ".join(faults)


@_params(PAGES)
def test_internal_links_resolve(page: PageReport, site: Server) -> None:
    faults = _link_faults(page.dom.get("links", []), site.base, SERVED)
    assert not faults, f"{page.url}: {len(faults)} broken link(s):\n  " + "\n  ".join(faults)


def test_external_links_are_listed(browser, site, reports) -> None:
    """Links that leave the site are not fetched (the browser cannot reach the internet):
    they are written to _build/screenshots/external-links.txt, each with the pages that
    carry it, and must use https."""
    pages_of: dict[str, list[str]] = {}
    for docname in PAGES:
        report = _report(browser, site, reports, docname)
        for link in _external_links(report.dom.get("links", []), site.base):
            pages_of.setdefault(link, []).append(docname)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    listing = "".join(f"{link}\t{' '.join(pages)}\n" for link, pages in sorted(pages_of.items()))
    (SCREENSHOTS / f"{_SHOT_PREFIX}external-links.txt").write_text(listing, encoding="utf8")
    print(f"{len(pages_of)} external link(s), not fetched:\n{listing}")
    assert pages_of, "no external link at all: the repository and Colab links should be there"
    insecure = [link for link in pages_of if not link.startswith("https://")]
    assert not insecure, f"external links without https: {insecure}"


NOTEBOOK_FOLDERS = ("book", "exercises", "solutions")


def test_every_notebook_is_in_the_toc() -> None:
    """Every chapter, exercise set and solution set on disk has its page in book/_toc.yml."""
    notebooks = [f"{folder}/{path.stem}" for folder in NOTEBOOK_FOLDERS
                 for path in sorted((ROOT / folder).glob("ch*.ipynb"))]
    assert notebooks, "no chapter notebook found"
    missing = [docname for docname in notebooks if docname not in PAGES]
    assert not missing, f"notebooks missing from {TOC.relative_to(ROOT)}: {missing}"


@pytest.mark.parametrize("chapter", sorted(path.stem for path in (ROOT / "book").glob("ch*.ipynb")))
def test_chapter_part_lists_chapter_exercises_solutions(chapter: str) -> None:
    """A chapter's part of the toc holds its page, its exercises and its solutions, in that order."""
    expected = [f"{folder}/{chapter}" for folder in NOTEBOOK_FOLDERS]
    for docname in expected:
        assert (ROOT / f"{docname}.ipynb").is_file(), f"{docname}.ipynb does not exist"
    parts = [docnames for _, docnames in _toc_parts() if f"book/{chapter}" in docnames]
    assert parts, f"book/{chapter} is in no part of {TOC.relative_to(ROOT)}"
    assert parts[0] == expected, f"the part of book/{chapter} lists {parts[0]}, expected {expected}"


def test_sidebar_lists_every_page_in_toc_order(browser, site, reports) -> None:
    """The left navigation of the root page: every toc page, in order, under the toc's captions."""
    root = _report(browser, site, reports, ROOT_PAGE)
    listed = list(dict.fromkeys(docname_of(link["href"], site.base) for link in root.dom.get("nav_links", [])))
    assert listed == PAGES, (
        f"the sidebar lists {len(listed)} page(s), the toc {len(PAGES)}; "
        f"missing: {[p for p in PAGES if p not in listed]}, extra: {[p for p in listed if p not in PAGES]}"
    )
    captions = [caption for caption, _ in _toc_parts() if caption]
    assert root.dom.get("nav_captions") == captions, (
        f"sidebar captions {root.dom.get('nav_captions')} differ from the toc's {captions}"
    )


def _source_suffix(docname: str) -> str:
    return next(suffix for suffix in (".ipynb", ".md", ".rst") if (ROOT / f"{docname}{suffix}").is_file())


def _first_heading(markdown: str) -> str | None:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return re.sub(r"<!--.*?-->", "", line[2:]).strip()
    return None


@_params(PAGES)
def test_downloads_are_served(page: PageReport, site: Server) -> None:
    """The theme's download menu offers the page's source, which the site serves: a valid
    notebook (or Markdown file) whose title is the page's."""
    import nbformat

    docname = docname_of(page.url, site.base)
    downloads = page.dom.get("downloads", [])
    source = site.base + f"_sources/{docname}{_source_suffix(docname)}"
    assert source in downloads, f"{page.url}: no download of {source}; downloads offered: {downloads}"
    pdfs = [url for url in downloads if url.endswith(".pdf")]
    assert pdfs == [site.base + COURSE_PDF], f"{page.url}: the menu's .pdf should be the course's PDF, got {pdfs}"
    if (SITE / COURSE_PDF).is_file():
        with urlopen(pdfs[0], timeout=10) as response:
            assert response.status == 200 and response.read(5) == b"%PDF-", f"{pdfs[0]} is not a PDF"
    for url in downloads:
        if url in pdfs:
            continue
        with urlopen(url, timeout=10) as response:
            assert response.status == 200, f"{url}: HTTP {response.status}"
            text = response.read().decode("utf8")
        if url.endswith(".ipynb"):
            notebook = nbformat.reads(text, as_version=4)
            nbformat.validate(notebook)
            markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
        else:
            markdown = text
        assert _first_heading(markdown) == page.dom.get("h1"), (
            f"{url}: its first heading {_first_heading(markdown)!r} is not the page's title {page.dom.get('h1')!r}"
        )


def _search(browser, site, query: str) -> tuple[PageReport, str, list[str]]:
    """Search the site as a reader does (search.html?q=...): the page's report, the summary
    line, and the docnames of the results (Sphinx searches searchindex.js in the browser)."""
    from selenium.webdriver.support.ui import WebDriverWait

    report = load_page(browser, site.base + "search.html?" + urlencode({"q": query}), settle=0)
    WebDriverWait(browser, 10, poll_frequency=0.1).until(lambda driver: driver.execute_script(
        "const h = document.querySelector('#search-results h2');"
        "return !!h && h.textContent === arguments[0];", WORDS["search_results"]))
    summary, links = browser.execute_script(
        "return [document.querySelector('#search-results .search-summary').textContent,"
        " Array.from(document.querySelectorAll('#search-results ul.search li > a')).map(a => a.href)];")
    return report, summary, list(dict.fromkeys(docname_of(link, site.base) for link in links))


def test_search_finds_the_first_chapter(browser, site, reports) -> None:
    """A reader's search for the first chapter's subject (e.g. Rooflines) lists that chapter,
    and every result links to a page of the site."""
    chapter = CHAPTER_PAGES[0]
    topic = re.sub(WORDS["chapter"].split("(.+)")[0].replace("(\\d+)", "\\d+") + r"\s*", "",
                   _report(browser, site, reports, chapter).dom.get("h1") or "")
    report, summary, found = _search(browser, site, topic)
    assert not report.console_errors, f"search for {topic!r}: console errors {report.console_errors}"
    assert chapter in found, f"searching {topic!r} did not list {chapter}: {summary!r}, found {found}"
    faults = _link_faults([site.base + f"{docname}.html" for docname in found], site.base, SERVED)
    assert not faults, f"search results that lead nowhere: {faults}"


def test_search_for_nonsense_finds_nothing(browser, site) -> None:
    report, summary, found = _search(browser, site, "qzxwvkjplorth")
    assert found == [], f"a nonsense word found pages: {found}"
    assert WORDS["no_match"] in summary, summary


@pytest.mark.parametrize("query, teaching, within", [
    ("AllGather", {"book/ch03_sharding"}, 1),  # chapter 3 teaches it; chapters 10 and 12 and exercises use it
    ("MFU", {"book/ch05_training", "book/ch06_llama_training"}, 3),  # training's chapters define and use it
])
def test_search_ranks_the_page_that_teaches_a_term_first(query, teaching, within, browser, site) -> None:
    """A reader searching a term finds the chapter that teaches it before the exercises that use it
    (book/_ext/course-scorer.js: a chapter's page, and its headings, weigh most)."""
    if _EDITION == "ru":
        teaching = {name.replace("book/", "book/ru/") for name in teaching}
    report, summary, found = _search(browser, site, query)
    assert not report.console_errors, f"search for {query!r}: console errors {report.console_errors}"
    ranked = [docname_of(url, site.base) for url in found]
    assert teaching & set(ranked[:within]), f"searching {query!r}: {sorted(teaching)} not in the first {within}: {ranked[:8]}"


@_params(PAGES)
def test_the_search_index_is_loaded_by_the_search_page_only(page: PageReport) -> None:
    """searchindex.js (about 300 kB) and the search's scripts are not loaded by the course's pages:
    the search field sends the reader to search.html, which loads them."""
    loaded = [url for url in page.requests if re.search(r"/(searchindex\.js|_static/searchtools\.js)", url)]
    assert not loaded, f"{page.url} loads {loaded}"


def test_the_search_page_loads_the_index(browser, site) -> None:
    report, summary, found = _search(browser, site, "roofline")
    assert any(url.split("?")[0].endswith("/searchindex.js") for url in report.requests), report.requests
    assert found, summary


def test_search_index_has_every_page_under_its_title(browser, site, reports) -> None:
    """searchindex.js (what the browser searches) indexes every toc page, titled by its <h1>."""
    text = (SITE / "searchindex.js").read_text(encoding="utf8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    titles = dict(zip(index["docnames"], index["titles"]))
    missing = [docname for docname in PAGES if docname not in titles]
    assert not missing, f"pages the search cannot find: {missing}"
    for docname in PAGES:
        h1 = _report(browser, site, reports, docname).dom.get("h1")
        assert re.sub(r"<[^>]+>", "", titles[docname]).strip() == h1, (
            f"{docname}: indexed as {titles[docname]!r}, titled {h1!r}")


@_params(PAGES)
def test_title_names_the_page(page: PageReport) -> None:
    h1, title = page.dom.get("h1") or "", page.dom.get("title") or ""
    assert h1 and title.startswith(h1), f"{page.url}: <title> {title!r} does not begin with the <h1> {h1!r}"


@_params(CHAPTER_SET_PAGES)
def test_title_matches_the_toc(page: PageReport, site: Server) -> None:
    """A chapter's page is titled as its part of the toc; its exercise and solution pages say what they are."""
    docname = docname_of(page.url, site.base)
    folder, number = docname.split("/")[0], int(re.search(r"/ch(\d+)_", docname).group(1))
    caption = CAPTION[docname]
    match = re.fullmatch(WORDS["chapter"], caption)
    assert match and int(match.group(1)) == number, f"{docname}: listed under the caption {caption!r}"
    h1, title = page.dom.get("h1") or "", page.dom.get("title") or ""
    if folder == "book":
        assert h1 == caption, f"{page.url}: title {h1!r}, but the toc's part is {caption!r}"
        return
    exercises = WORDS["exercises"].format(number=number)
    assert h1.startswith(exercises) and match.group(2) in h1, (
        f"{page.url}: title {h1!r} should read '{exercises}: {match.group(2)}...'")
    assert (WORDS["solutions"] in title.lower()) == (folder == "solutions"), (
        f"{page.url}: the title {title!r} of a page in {folder}/ should say whether it has the solutions")


@_params(PAGES)
def test_language_switch_leads_to_the_same_page_in_the_other_edition(page: PageReport, site: Server) -> None:
    """Every page has one link to the other edition, to the same page there (its own switch leads back)."""
    switch = page.dom.get("language_switch") or []
    assert len(switch) == 1 and switch[0]["lang"] == OTHER_EDITION, f"{page.url}: language switch {switch}"
    target = switch[0]["href"]
    assert not _link_faults([target], site.base, SERVED), f"{page.url}: the switch leads nowhere: {target}"
    here, there = _plain(docname_of(page.url, site.base)), _plain(urlparse(target).path.lstrip("/").removesuffix(".html"))
    assert here == there, f"{page.url}: the switch leads to another page, {target}"
    other_html = (SERVED / unquote(urlparse(target).path).lstrip("/")).read_text(encoding="utf8")
    back = re.search(r'<nav class="course-language"[^>]*><a href="([^"]+)"', other_html)
    from urllib.parse import urljoin
    assert back and urljoin(target, back.group(1)) == page.url.split("#")[0], (
        f"{target}: its switch does not lead back to {page.url}")


@_params(SCREENSHOT_PAGES)
def test_screenshot_kept(page: PageReport) -> None:
    """A screenshot of the page (its top, and the whole page) for the CI artefact, not blank."""
    from PIL import Image

    name = _SHOT_PREFIX + Path(page.url).stem
    assert [png.name for png in page.screenshots] == [f"{name}.png", f"{name}.full.png"][:1 + FULL_SCREENSHOTS]
    for png in page.screenshots:
        assert png.is_file(), f"{png} was not written"
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width == WINDOW[0], (png, image.format, image.size)
        assert _blank(png) is None, f"{png} looks blank: {_blank(png)}"


#: A phone's width (CSS px): an iPhone 12 to 15's.
PHONE_WIDTH = 390


@pytest.fixture(scope="module")
def phone_reports(browser, site) -> Iterator[dict]:
    """Each page's report at a phone's width (_phone_report), the page loaded once and shared by the tests;
    the window is held at that width meanwhile, and restored afterwards."""
    browser.set_window_size(PHONE_WIDTH, 900)
    try:
        yield {}
    finally:
        browser.set_window_size(*WINDOW)


#: The figures of the open page as shown (_FIGURE_TEXT), with the width the page is laid out at, two frames after
#: the window's scrollbar is made anew (the root's overflow set and reset: Chromium applies a change of
#: Emulation.setScrollbarsHidden to a page already laid out when its scrollbar is made again).
_FIGURES_AS_SHOWN = """
const done = arguments[arguments.length - 1];
const root = document.documentElement, overflow = root.style.overflowY;
root.style.overflowY = 'hidden';
root.offsetWidth;
root.style.overflowY = overflow;
requestAnimationFrame(() => requestAnimationFrame(() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main');
  done({viewport: document.documentElement.clientWidth, figure_text: article ? """ + _FIGURE_TEXT + """ : []});
}));
"""


def _figures_without_scrollbar(browser) -> dict:
    """The open page's figures as shown with the window's scrollbar hidden: a phone's scrollbar overlays the
    page, where desktop Chromium's takes 15 px of a 390 px window's width. The scrollbar comes back after."""
    browser.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": True})
    try:
        return browser.execute_async_script(_FIGURES_AS_SHOWN)
    finally:
        browser.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": False})
        browser.execute_async_script(_FIGURES_AS_SHOWN)  # the scrollbar back in the page's layout


def _language_switch(browser) -> dict:
    """The open page's language switch: its box (left, right, width, height) and where it leads."""
    from selenium.webdriver.common.by import By

    link = browser.find_element(By.CSS_SELECTOR, "nav.course-language a")
    box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); "
                                 "return [r.left, r.right, r.width, r.height];", link)
    return {"box": box, "target": link.get_attribute("href")}


def _tap_language_switch(browser) -> str:
    """Tap the open page's language switch (the page is left): the URL the browser opens."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script("window.scrollTo(0, 0);")  # where the page was before the phone checks scrolled it
    link = browser.find_element(By.CSS_SELECTOR, "nav.course-language a")
    target = link.get_attribute("href")
    link.click()
    try:  # the new page, as soon as it opens (at most a few seconds)
        WebDriverWait(browser, 5, poll_frequency=0.05).until(lambda driver: driver.current_url == target)
    except TimeoutException:
        pass
    return browser.current_url


#: What the page probe measures at a phone's width: what test_nothing_is_cut_off_at_phone_width looks at.
PHONE_FIELDS = ["article", "language_switch_box", "cut_off", "page_overflow", "too_wide", "hintless_scrollers"]


def _phone_report(browser, site, phone_reports, docname: str) -> PageReport:
    """The page at a phone's width (PHONE_WIDTH), loaded once, with every phone check's measurement taken while
    it is open: the page probe (its ``dom``), right after loading the language switch's box and link
    (``language_switch``), the cue of each kind of box that scrolls sideways (``scroll_cues``), on a chapter's
    page its figures with the scrollbar hidden (``figures_without_scrollbar``), and on a photographed page, last
    since it leaves the page, a tap on the language switch (``language_tap``: the URL then open)."""
    if docname not in phone_reports:
        size = browser.get_window_size()
        resized = size["width"] != PHONE_WIDTH
        if resized:  # (the phone tests run apart, say, from the phone_reports fixture's other users)
            browser.set_window_size(PHONE_WIDTH, 900)
        try:
            report = load_page(browser, site.base + f"{docname}.html", settle=0.1, fields=PHONE_FIELDS)
            if docname in SCREENSHOT_PAGES:
                report.check("language_switch", _language_switch, browser)
            report.check("scroll_cues", _scroll_cue_faults, browser)
            if docname in CHAPTER_PAGES:
                report.check("figures_without_scrollbar", _figures_without_scrollbar, browser)
            if docname in SCREENSHOT_PAGES:
                report.check("language_tap", _tap_language_switch, browser)
        finally:
            if resized:
                browser.set_window_size(size["width"], size["height"])
        phone_reports[docname] = report
    return phone_reports[docname]


@pytest.mark.parametrize("docname", SCREENSHOT_PAGES)
def test_language_switch_is_clicked_at_phone_width(docname, browser, site, phone_reports) -> None:
    """At a phone's width the switch shows inside the screen, and a tap on it opens the other edition's page."""
    report = _phone_report(browser, site, phone_reports, docname)
    switch = report.result("language_switch")
    box, target = switch["box"], switch["target"]
    assert box[2] > 0 and box[3] > 0 and box[0] >= 0 and box[1] <= PHONE_WIDTH, (
        f"{docname} at {PHONE_WIDTH} px: the language switch is off screen or hidden: {box}")
    opened = report.result("language_tap")
    assert opened == target and _plain(urlparse(target).path.lstrip("/").removesuffix(".html")) == \
        _plain(docname), (
        f"{docname}: tapping the switch opened {opened}, expected {target}")


@pytest.mark.parametrize("docname", PAGES)
def test_nothing_is_cut_off_at_phone_width(docname, browser, site, phone_reports) -> None:
    """At a phone's width the page never scrolls sideways (a long inline code span, a figure, a
    table wider than the screen), and wide equations and tables scroll in their own box, with the
    shadow that says there is more; the language switch shows inside the screen (every page; a tap on it
    is tested on the chapters' pages)."""
    report = _phone_report(browser, site, phone_reports, docname)
    box = report.dom.get("language_switch_box")
    assert box and box[2] > 0 and box[3] > 0 and box[0] >= 0 and box[1] <= PHONE_WIDTH and box[4] == "visible", (
        f"{docname} at {PHONE_WIDTH} px: the language switch is missing, hidden or off screen: {box}")
    assert not report.dom.get("cut_off"), (
        f"{docname} at {PHONE_WIDTH} px: equations or tables cut off instead of scrolling: {report.dom['cut_off']}"
    )
    assert report.dom.get("page_overflow", 0) <= 1, (
        f"{docname} at {PHONE_WIDTH} px: the page scrolls sideways by {report.dom['page_overflow']} px; "
        f"past the edge: {report.dom.get('too_wide')}"
    )
    assert not report.dom.get("hintless_scrollers"), (
        f"{docname} at {PHONE_WIDTH} px: boxes that scroll sideways with no sign that they do: "
        f"{report.dom['hintless_scrollers'][:5]}"
    )
    faults = report.result("scroll_cues")
    assert not faults, f"{docname} at {PHONE_WIDTH} px: {faults}"


#: Tells each element that scrolls sideways by what it holds (the first of each kind on a page is
#: checked by pixels), and returns them.
_SCROLLERS = """
const article = document.querySelector('article.bd-article') || document.querySelector('main');
const kind = e => e.closest('table, .pst-scrollable-table-container, .table-wrapper') || e.querySelector('table') ? 'table'
                  : e.closest('.katex-display, .katex') || e.querySelector('.katex') ? 'equation'
                  : e.closest('pre, div.highlight') || e.querySelector('pre') ? 'code' : 'other';
const found = {};
for (const e of article.querySelectorAll('*')) {
  // (not one folded away, in a closed <details>: nothing to see there)
  if (e.scrollWidth <= e.clientWidth + 1 || !['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
      || !e.checkVisibility({visibilityProperty: true})) { continue; }
  const k = kind(e);
  if (!(k in found)) { found[k] = e; }
}
return found;
"""

#: Scrolls the element to `left` ('start' or 'end'), waits two frames for the page's scroll handler, and
#: returns the box it is in (where the cue is drawn) as [left, top, right, bottom] in CSS pixels.
_SCROLL_TO = """
const [e, where, done] = arguments;
e.scrollIntoView({block: 'center', inline: 'nearest'});
e.scrollLeft = where === 'start' ? 0 : e.scrollWidth;
requestAnimationFrame(() => requestAnimationFrame(() => {
  const host = e.parentElement.getBoundingClientRect(), own = e.getBoundingClientRect();
  done([host.left, Math.max(own.top, 0), host.right, Math.min(own.bottom, window.innerHeight)]);
}));
"""


def _edge_strips(driver, box, inner: float, width: float = 8):
    """The `width` CSS pixels inside the left and the right edge of `box`, from one screenshot of the window
    (RGB; `inner`: the window's width in CSS pixels)."""
    import io

    from PIL import Image

    # Chrome's own capture, its PNG compressed for speed: the same pixels as WebDriver's screenshot, made faster.
    png = base64.b64decode(driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True})["data"])
    with Image.open(io.BytesIO(png)) as shot:
        scale = shot.width / inner
        left, top, right, bottom = box
        return tuple(shot.crop(tuple(round(v * scale) for v in (x0, top + 2, x1, bottom - 2))).convert("RGB")
                     for x0, x1 in ((left + 1, left + 1 + width), (right - 1 - width, right - 1)))


def _difference(a, b) -> float:
    """The mean absolute difference of two images of one size, per channel (0-255)."""
    from PIL import ImageChops, ImageStat

    return sum(ImageStat.Stat(ImageChops.difference(a, b)).mean) / 3


#: Takes the cue classes in `sides` off the box around the element; returns which it had, and how far the cue of
#: each side (its ::before, ::after) reaches into the box, in CSS pixels.
_CUES_OFF = """
const [e, sides] = arguments, host = e.parentElement;
const had = sides.map(side => host.classList.contains('course-more-' + side));
sides.forEach(side => host.classList.remove('course-more-' + side));
const reach = pseudo => parseFloat(getComputedStyle(host, pseudo).width) || 0;
return [had, reach('::before'), reach('::after')];
"""


def _cues_on_and_off(driver, element, box, inner: float, width: float = 8) -> tuple[float, float]:
    """How much the box's cue on each side, right and left, changes that side's edge strip: the strip as the
    page draws it against the same with that side's cue taken away (the other side's as drawn). One screenshot
    shows both strips as drawn, one both without their cue where neither cue reaches the other side's strip
    (as in any box wider than the two cues and a strip; else one screenshot each)."""
    def off(sides):
        had, reach_left, reach_right = driver.execute_script(_CUES_OFF, element, sides)
        return [side for side, was in zip(sides, had) if was], reach_left, reach_right

    def on(sides):
        if sides:
            driver.execute_script("arguments[1].forEach(s => arguments[0].parentElement.classList.add('course-more-' + s));",
                                  element, sides)

    drawn = dict(zip(("left", "right"), _edge_strips(driver, box, inner, width)))
    had, reach_left, reach_right = off(["right", "left"])
    if box[2] - box[0] > max(reach_left, reach_right) + width + 2:
        hidden = dict(zip(("left", "right"), _edge_strips(driver, box, inner, width)))
        on(had)
    else:  # the cues would reach across: one side at a time, the other's cue as drawn
        on(had)
        hidden = {}
        for index, side in ((1, "right"), (0, "left")):
            taken, _, _ = off([side])
            hidden[side] = _edge_strips(driver, box, inner, width)[index]
            on(taken)
    return _difference(drawn["right"], hidden["right"]), _difference(drawn["left"], hidden["left"])


#: How much a cue must change its edge (mean difference per channel, 0-255): the shade is about
#: 60 levels on white where it starts; text and row stripes under it lower that, never to 12.
CUE_VISIBLE = 12


def _scroll_cue_faults(driver, kinds=("table", "equation", "code", "other")) -> list[str]:
    """For the first element of each kind that scrolls sideways on the loaded page: at the start of
    its scroll its right edge looks different with the cue than without (a shade is seen above rows,
    code backgrounds and all) and its left edge does not; at the end, the other way round."""
    faults = []
    inner = None  # the window's width in CSS pixels
    for kind, element in driver.execute_script(_SCROLLERS).items():
        if kind not in kinds:
            continue
        if inner is None:
            inner = driver.execute_script("return window.innerWidth")
        label = f"{kind} {driver.execute_script('return arguments[0].textContent.trim().slice(0, 40)', element)!r}"
        box = driver.execute_async_script(_SCROLL_TO, element, "start")
        if box[3] - box[1] < 8:
            continue
        right, left = _cues_on_and_off(driver, element, box, inner)
        if right < CUE_VISIBLE:
            faults.append(f"{label}: content continues on the right, the edge shows no cue (difference {right:.1f})")
        if left > 1:
            faults.append(f"{label}: nothing is hidden on the left, yet its edge shows a cue (difference {left:.1f})")
        box = driver.execute_async_script(_SCROLL_TO, element, "end")
        right, left = _cues_on_and_off(driver, element, box, inner)
        if left < CUE_VISIBLE:
            faults.append(f"{label}: scrolled to its end, content hidden on the left shows no cue (difference {left:.1f})")
        if right > 1:
            faults.append(f"{label}: scrolled to its end, the right edge still shows a cue (difference {right:.1f})")
        driver.execute_async_script(_SCROLL_TO, element, "start")
    return faults


@_params(CHAPTER_PAGES)
def test_code_that_scrolls_shows_a_cue_at_desktop_width(page: PageReport) -> None:
    """At 1280 px a code block with lines wider than the column scrolls; its edge is shaded where the
    code continues (checked by pixels: the edge with and without the cue, while the page's report loaded it)."""
    faults = page.result("desktop_scroll_cues")
    assert not faults, f"{page.url} at {WINDOW[0]} px: {faults}"


@_params(PAGES)
def test_no_output_is_cut_at_desktop_width(page: PageReport) -> None:
    """At 1280 px every line a cell printed is seen whole (outputs wrap): a checker's verdict is
    never hidden behind a horizontal scroll."""
    assert not page.dom.get("cut_outputs"), (
        f"{page.url}: {len(page.dom['cut_outputs'])} output(s) hide the end of their lines: "
        f"{page.dom['cut_outputs'][:3]}"
    )


@_params(PAGES)
def test_no_icon_script(page: PageReport) -> None:
    """The theme's 1.5 MB fontawesome.js is not loaded: its icons come from the web fonts."""
    heavy = [url for url in page.requests if "fontawesome.js" in url]
    assert not heavy, f"{page.url}: loads {heavy}"


#: Widths at which the navigation is clicked: a phone, a tablet (both: sidebars as pop-up
#: dialogs), a desktop (the site's navigation collapses in place, the contents always shown).
NAV_WIDTHS = (390, 800, 1280)

_NAV_STATE = """
const visible = el => { if (!el) { return false; } const s = getComputedStyle(el), b = el.getBoundingClientRect();
                        return s.display !== 'none' && s.visibility !== 'hidden' && +s.opacity > 0 && b.width > 0 && b.height > 0; };
const primary = Array.from(document.querySelectorAll('.primary-toggle')).filter(visible);
const secondary = Array.from(document.querySelectorAll('.secondary-toggle')).filter(visible);
const navLink = document.querySelector('nav.bd-docs-nav a');
const tocLink = document.querySelector('.bd-toc-nav a, nav.page-toc a, #pst-page-toc-nav a');
return {
  primary_toggles: primary.length, secondary_toggles: secondary.length,
  primary_modal: !!document.getElementById('pst-primary-sidebar-modal')?.open,
  secondary_modal: !!document.getElementById('pst-secondary-sidebar-modal')?.open,
  nav_shown: visible(navLink) && navLink.getBoundingClientRect().right > 0,
  toc_shown: visible(tocLink),
};
"""


def _nav_state(browser, expected=None, within: float = 2.0) -> dict:
    """The navigation's state; given `expected` (a test of the state), the first state that passes it, read
    every 50 ms for at most `within` seconds (the sidebar's transition), else the last one read."""
    deadline = time.monotonic() + within
    while True:
        state = browser.execute_script(_NAV_STATE)
        if expected is None or expected(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def _click_visible(browser, selector: str) -> None:
    browser.execute_script(
        "const el = Array.from(document.querySelectorAll(arguments[0])).find(e => e.getBoundingClientRect().width > 0"
        " && getComputedStyle(e).display !== 'none'); el.click();", selector)


def _press_escape(browser) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    ActionChains(browser._driver if isinstance(browser, _Browser) else browser).send_keys(Keys.ESCAPE).perform()


@pytest.mark.parametrize("width", NAV_WIDTHS)
def test_the_sidebar_toggles_open_and_close_the_navigation_and_contents(width, browser, site) -> None:
    """☰ opens the site's navigation and the contents button the page's contents (as pop-up
    dialogs on a phone or tablet, which Escape closes); on a desktop ☰ collapses the navigation
    and brings it back, and the contents stand beside the page."""
    page = CHAPTER_PAGES[0] if CHAPTER_PAGES else ROOT_PAGE
    browser.set_window_size(width, 900)
    try:
        load_page(browser, site.base + f"{page}.html", settle=0.2)
        state = _nav_state(browser)
        assert state["primary_toggles"] == 1, f"{width} px: {state['primary_toggles']} visible ☰ buttons (one expected)"
        if width < 992:
            assert not state["nav_shown"], f"{width} px: the navigation is shown before ☰ is clicked"
            _click_visible(browser, ".primary-toggle")
            state = _nav_state(browser, lambda s: s["primary_modal"] and s["nav_shown"])
            assert state["primary_modal"] and state["nav_shown"], f"{width} px: ☰ did not open the navigation: {state}"
            _press_escape(browser)
            state = _nav_state(browser, lambda s: not s["primary_modal"] and not s["nav_shown"])
            assert not state["primary_modal"] and not state["nav_shown"], f"{width} px: Escape left it open: {state}"
            assert state["secondary_toggles"] == 1, f"{width} px: no visible page-contents button"
            _click_visible(browser, ".secondary-toggle")
            state = _nav_state(browser, lambda s: s["secondary_modal"] and s["toc_shown"])
            assert state["secondary_modal"] and state["toc_shown"], f"{width} px: the contents did not open: {state}"
            _press_escape(browser)
            state = _nav_state(browser, lambda s: not s["secondary_modal"])
            assert not state["secondary_modal"], f"{width} px: Escape left the contents open: {state}"
        else:
            assert state["nav_shown"] and state["toc_shown"], f"{width} px: navigation or contents hidden: {state}"
            _click_visible(browser, ".primary-toggle")
            state = _nav_state(browser, lambda s: not s["nav_shown"] and not s["primary_modal"])
            assert not state["nav_shown"] and not state["primary_modal"], f"{width} px: ☰ did not collapse the navigation: {state}"
            _click_visible(browser, ".primary-toggle")
            assert _nav_state(browser, lambda s: s["nav_shown"])["nav_shown"], (
                f"{width} px: a second ☰ did not bring the navigation back")
    finally:
        browser.set_window_size(*WINDOW)


def test_the_text_column_is_as_wide_as_the_figures_assume(browser, site, reports) -> None:
    """scalelib._plot.COLUMN_PX, the width figures are scaled down to, is the article's width at 1280 px."""
    from scalelib._plot import COLUMN_PX

    report = _report(browser, site, reports, CHAPTER_PAGES[0] if CHAPTER_PAGES else ROOT_PAGE)
    width = report.dom.get("column_width")
    assert width is not None, f"{report.url}: no article.bd-article to measure"
    assert abs(width - COLUMN_PX) <= 24, f"the text column is {width} px at 1280 px, figures assume {COLUMN_PX}"


def test_index_redirects_to_root_page(browser, site) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    load_page(browser, site.base + "index.html", settle=0)
    try:  # the redirect, as soon as it has happened (at most 5 s)
        WebDriverWait(browser, 5, poll_frequency=0.05).until(
            lambda driver: driver.current_url.endswith(f"/{ROOT_PAGE}.html"))
    except TimeoutException:
        pass
    final_url = browser.current_url
    assert final_url.endswith(f"/{ROOT_PAGE}.html"), (
        f"index.html should lead to {ROOT_PAGE}.html, ended at {final_url}"
    )


# ---------------------------------------------------------------------------
# The checks themselves catch the faults they are meant to catch


def test_console_check_catches_duplicate_const(browser, tmp_path) -> None:
    """The stock Jupyter Book fault: one `const` declared by two script tags."""
    script = 'const THEBE_JS_URL = "https://example.invalid/thebe.js";'
    (tmp_path / "fault.html").write_text(
        "<!doctype html><html><head><title>fault</title>"
        f"<script>{script}</script><script>{script}</script>"
        "</head><body><h1>fault</h1></body></html>",
        encoding="utf8",
    )
    server = serve(tmp_path)
    try:
        report = load_page(browser, server.base + "fault.html")
    finally:
        server.stop()
    errors = [e for e in report.console_errors if "SyntaxError" in e]
    assert errors, f"duplicate const not reported; console errors: {report.console_errors}"
    assert "THEBE_JS_URL" in errors[0] and "already been declared" in errors[0], errors


def test_request_check_catches_remote_asset(browser, tmp_path) -> None:
    """A page that loads a stylesheet from a CDN is reported (nothing leaves the machine)."""
    (tmp_path / "cdn.html").write_text(
        "<!doctype html><html><head><title>cdn</title>"
        '<link rel="stylesheet" href="https://cdn.example.invalid/katex.min.css">'
        "</head><body><h1>cdn</h1></body></html>",
        encoding="utf8",
    )
    server = serve(tmp_path)
    try:
        report = load_page(browser, server.base + "cdn.html")
    finally:
        server.stop()
    assert report.foreign_requests == ["https://cdn.example.invalid/katex.min.css"], (
        f"remote stylesheet not reported; requests seen: {report.requests}"
    )


def _fault_page(browser, tmp_path, name: str, article: str, width: int = WINDOW[0]) -> PageReport:
    (tmp_path / f"{name}.html").write_text(
        f"<!doctype html><html><head><title>{name}</title></head><body>"
        f'<article class="bd-article"><h1>{name}</h1>{article}</article></body></html>', encoding="utf8")
    server = serve(tmp_path)
    browser.set_window_size(width, 900)
    try:  # (no script on the page, no late request: the probe reads it as soon as it has loaded)
        return load_page(browser, server.base + f"{name}.html", settle=0)
    finally:
        browser.set_window_size(*WINDOW)
        server.stop()


def test_figure_text_check_catches_a_figure_shrunk_on_a_phone_and_one_without_its_text_size(browser, tmp_path) -> None:
    """Three 1000 px wide figures shown in a 390 px window's column: one whose 30 px text is shown at about 10 px
    passes; the same image recording 12 px text (shown at about 4 px) fails, and so does one recording nothing;
    at 1280 px (shown at natural size, the page's column being wider) the 12 px one passes."""
    from PIL import Image

    Image.new("RGB", (1000, 400), "white").save(tmp_path / "wide.png")
    article = "<style>img { max-width: 100%; }</style>" + "".join(
        f'<div class="cell_output"><figure><img src="wide.png" alt="figure {k}"{attribute}>'
        f'<figcaption><span class="caption-number">Fig. 1.{k} </span></figcaption></figure></div>'
        for k, attribute in ((1, ' data-min-text-px="30"'), (2, ' data-min-text-px="12"'), (3, "")))
    phone = _fault_page(browser, tmp_path, "figures", article, width=PHONE_WIDTH)
    faults = _figure_text_faults(phone.dom["figure_text"], "figures", PHONE_WIDTH)
    assert len(faults) == 2 and "Fig. 1.2" in faults[1] and "under 7" in faults[1], faults
    assert "Fig. 1.3" in faults[0] and "no data-min-text-px" in faults[0], faults
    sizes = dict((name.split(", ")[1].split(" ")[1], px) for px, name in _figure_text_sizes(
        phone.dom["figure_text"], "figures")[0])
    shown = phone.dom["figure_text"][0]["shown_width"]
    assert shown < PHONE_WIDTH and sizes["1.1"] == pytest.approx(30 * shown / 1000) and sizes["1.1"] >= 7
    desktop = _fault_page(browser, tmp_path, "figures", article, width=WINDOW[0])
    assert [f for f in _figure_text_faults(desktop.dom["figure_text"], "figures", WINDOW[0])
            if "Fig. 1.3" not in f] == []


def test_table_check_catches_a_table_left_as_markdown(browser, tmp_path) -> None:
    report = _fault_page(browser, tmp_path, "raw", "\n<p>| chip | peak |\n|---|---|\n| h100 | 9.9e14 |</p>"
                         '<div class="cell_input"><pre>rows = ["| a | b |"]</pre></div>'
                         '<div class="highlight"><pre>&gt;&gt;&gt; print(table)\n| a | b |</pre></div>')
    assert report.dom["raw_table_rows"] == ["| chip | peak |", "|---|---|", "| h100 | 9.9e14 |"]
    printed = _fault_page(browser, tmp_path, "printed", '\n<div class="cell_output"><pre>| x | y |\n|---|---|</pre></div>')
    assert printed.dom["raw_table_rows"] == ["| x | y |", "|---|---|"]  # a table printed as text by a cell


def test_phone_check_catches_an_equation_cut_off(browser, tmp_path) -> None:
    wide = '<div class="katex-display" style="white-space: nowrap; overflow-x: visible">' + "x + " * 80 + "</div>"
    report = _fault_page(browser, tmp_path, "wide", wide, width=PHONE_WIDTH)
    assert report.dom["cut_off"] and report.dom["cut_off"][0].startswith("x + x")
    scrolls = wide.replace("overflow-x: visible", "overflow-x: auto")
    assert _fault_page(browser, tmp_path, "scrolls", scrolls, width=PHONE_WIDTH).dom["cut_off"] == []


def test_image_check_catches_a_broken_image(browser, tmp_path) -> None:
    from PIL import Image

    Image.new("RGB", (40, 20), "steelblue").save(tmp_path / "plot.png")
    report = _fault_page(browser, tmp_path, "images",
                         '<div class="cell_output"><img src="plot.png" alt="A blue bar"></div>'  # described: fine
                         '<img src="plot.png" alt="a blue bar">'                                 # described: fine
                         '<img src="missing.png" alt="a figure that is not there">'
                         '<div class="cell_output"><img src="plot.png"></div>'                  # a plot without alt
                         '<img src="plot.png" alt="_images/plot.png">')                         # its path as alt
    assert _image_faults(report.dom["images"]) == [
        "missing.png: not loaded (missing or broken file)",
        "plot.png: no alt text",
        "plot.png: its alt text is a file name, not what it shows: '_images/plot.png'",
    ]


def test_phone_check_catches_a_page_that_scrolls_sideways_and_a_scroller_without_a_hint(browser, tmp_path) -> None:
    code = '<p>Call <code>' + "sl.a_very_long_function_name_" * 6 + '</code> now.</p>'
    report = _fault_page(browser, tmp_path, "sideways", code, width=PHONE_WIDTH)
    assert report.dom["page_overflow"] > 100 and report.dom["too_wide"]
    table = '<table style="display: block; overflow-x: auto"><tr>' + "<td>cell_of_a_wide_table</td>" * 12 + "</tr></table>"
    plain = _fault_page(browser, tmp_path, "plain", table, width=PHONE_WIDTH)
    assert plain.dom["page_overflow"] <= 1 and plain.dom["hintless_scrollers"]
    # a shadow painted as the box's background is no hint either (striped rows cover it)
    shaded = table.replace("overflow-x: auto", "overflow-x: auto; background: linear-gradient(to left, #888, white)")
    assert _fault_page(browser, tmp_path, "shaded", shaded, width=PHONE_WIDTH).dom["hintless_scrollers"]


def test_scroll_cue_check_sees_the_cue_and_catches_one_hidden_under_striped_rows(browser, tmp_path) -> None:
    """With the site's own course.css and course-scroll.js, a wide table with opaque striped rows shows
    its cue at each end of its scroll; the same cue drawn under the rows is caught by the pixels."""
    import shutil

    for name in ("course.css", "course-scroll.js"):
        shutil.copy(ROOT / "book" / "_static" / name, tmp_path / name)
    rows = "".join(f'<tr style="background: {"#e8e8e8" if i % 2 else "#ffffff"}">'
                   + "<td>cell_of_a_wide_table</td>" * 12 + "</tr>" for i in range(6))

    def page(name: str, css: str = "") -> None:
        (tmp_path / f"{name}.html").write_text(
            f'<!doctype html><html><head><title>{name}</title><link rel="stylesheet" href="course.css">'
            f'<style>{css}</style><script defer src="course-scroll.js"></script></head><body>'
            f'<article class="bd-article"><h1>{name}</h1><table class="table">{rows}</table></article></body></html>',
            encoding="utf8")

    page("cued")
    page("under", ".course-scroll::before, .course-scroll::after { z-index: -1 !important; }")
    server = serve(tmp_path)
    browser.set_window_size(PHONE_WIDTH, 900)
    try:
        cued = load_page(browser, server.base + "cued.html")
        assert cued.dom["hintless_scrollers"] == [] and _scroll_cue_faults(browser) == []
        load_page(browser, server.base + "under.html")
        faults = _scroll_cue_faults(browser)
        assert any("content continues on the right, the edge shows no cue" in f for f in faults), faults
        assert any("content hidden on the left shows no cue" in f for f in faults), faults
    finally:
        browser.set_window_size(*WINDOW)
        server.stop()


def test_output_check_catches_a_line_cut_at_desktop_width(browser, tmp_path) -> None:
    line = "Exercise 1.14: correct — " + "[136 tokens, 226 tokens] " * 12 + "(within 1% of the reference)"
    cut = f'<div class="cell_output"><div class="output"><pre style="white-space: pre; overflow-x: auto">{line}</pre></div></div>'
    report = _fault_page(browser, tmp_path, "cut", cut)
    assert report.dom["cut_outputs"] and report.dom["cut_outputs"][0].startswith("Exercise 1.14")
    wrapped = cut.replace("white-space: pre;", "white-space: pre-wrap; overflow-wrap: anywhere;")
    assert _fault_page(browser, tmp_path, "wrapped", wrapped).dom["cut_outputs"] == []


def test_link_check_catches_a_broken_link_and_a_missing_anchor(browser, tmp_path) -> None:
    (tmp_path / "target.html").write_text(
        '<!doctype html><html><body><section id="here"><a name="named">x</a></section></body></html>', encoding="utf8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<!doctype html><html><body>sub</body></html>", encoding="utf8")
    report = _fault_page(browser, tmp_path, "links",
                         '<p id="present">text</p>'
                         '<a href="#present">fine</a><a href="target.html#here">fine</a>'
                         '<a href="target.html#named">fine</a><a href="sub/">fine</a><a href="#">fine</a>'
                         '<a href="https://example.invalid/page#x">external: listed, not checked</a>'
                         '<a href="nowhere.html">broken</a>'
                         '<a href="#gone">missing anchor</a>'
                         '<a href="target.html#missing">missing anchor</a>')
    base = report.url.removesuffix("links.html")
    faults = _link_faults(report.dom["links"], base, tmp_path)
    assert [fault.split(": ", 1)[1] for fault in faults] == [
        "the site has no file nowhere.html",
        "links.html has no element with id 'gone'",
        "target.html has no element with id 'missing'",
    ], faults
    assert _external_links(report.dom["links"], base) == ["https://example.invalid/page#x"]


def test_screenshot_check_catches_a_blank_page(browser, tmp_path) -> None:
    (tmp_path / "blank.html").write_text("<!doctype html><html><body></body></html>", encoding="utf8")
    server = serve(tmp_path)
    try:
        load_page(browser, server.base + "blank.html", settle=0)
        shots = take_screenshots(browser, "blank", folder=tmp_path, full=True)
    finally:
        server.stop()
    assert [png.name for png in shots] == ["blank.png", "blank.full.png"]
    for png in shots:
        assert _blank(png) is not None, f"{png}: a blank page passed as a page"


def _running(process) -> bool:
    """Whether the process still runs: neither gone nor a zombie (dead, not yet reaped by its parent)."""
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_browser_that_went_away_is_started_again_before_the_next_page(site, tmp_path) -> None:
    browser = _Browser(lambda: _chrome(str(tmp_path / "profile")))
    try:
        import psutil

        chromium = psutil.Process(browser._driver.service.process.pid).children(recursive=True)
        for child in chromium:  # Chromium dies under a driver still running, as in the crash seen
            try:
                child.kill()
            except psutil.NoSuchProcess:  # one of its helpers that had already exited
                pass
        # Dead: gone, or a zombie its parent has not reaped yet (chromedriver may never reap it: waiting for
        # those to be gone would wait out the whole timeout).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_running(process) for process in chromium):
            time.sleep(0.05)
        assert not browser.alive()
        with pytest.warns(RuntimeWarning, match=r"Chromium went away \(before loading book/intro\)"):
            report = _report(browser, site, {}, "book/intro")
        assert browser.alive() and browser.restarts == 1 and report.dom.get("h1")
    finally:
        browser.quit()


def test_figure_alt_text_says_what_the_figure_shows_not_its_file():
    """book/_ext/course_site.py's alt text for a cell's figure: what the scalelib helper it calls
    draws (its docstring's first sentence), else the figure's title, with the section it is in."""
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_site import figure_alt_text
    finally:
        sys.path.pop(0)
    assert figure_alt_text('sl.plot_roofline(["h100"])', "Rooflines") == (
        "Log-log roofline of each chip: attainable FLOP/s against arithmetic intensity (section “Rooflines”)")
    assert figure_alt_text('ax.set_title(f"B = {B:,} tokens")\nax2.set_title("Hidden above 1")', "Mixing") == (
        "Figure: B = … tokens; Hidden above 1 (section “Mixing”)")
    assert figure_alt_text("plt.plot(x, y)", "Rooflines") == "Figure drawn by the code above (section “Rooflines”)"
