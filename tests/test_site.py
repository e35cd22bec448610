"""Browser tests of the built course website (_build/html).

Every page listed in book/_toc.yml is opened in headless Debian Chromium
(through selenium and /usr/bin/chromedriver), served by a Python http.server
on 127.0.0.1, and checked for what a reader would notice: a title, real text,
math typeset by KaTeX, tables rendered (no raw Markdown rows), no test markers,
nothing cut off at a phone's width, no script errors, nothing fetched from the
internet, and (notebook pages) a working "open in Colab" link.

Build the site first (`make site`). Without a build these tests are skipped,
unless the environment variable CI is set, in which case they fail.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
TOC = ROOT / "book" / "_toc.yml"
CONFIG = ROOT / "book" / "_config.yml"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
COLAB = "https://colab.research.google.com"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# URL schemes that never leave the browser.
LOCAL_SCHEMES = {"data", "blob", "about", "javascript"}
# Documents of the browser's own user interface, not of the site.
BROWSER_UI_SCHEMES = {"chrome", "chrome-untrusted", "chrome-extension", "devtools"}
IN_CI = bool(os.environ.get("CI"))

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

# ---------------------------------------------------------------------------
# Serving and browsing


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass


@dataclass
class Server:
    directory: Path
    httpd: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve(directory: Path) -> Server:
    """Serve `directory` on 127.0.0.1 (a free port) from a background thread."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    return Server(directory, httpd, thread)


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in LOCAL_SCHEMES or parsed.hostname in LOCAL_HOSTS


# Collected in the page once it has loaded: what the per-page tests look at.
_DOM_PROBE = """
const article = document.querySelector('article.bd-article') || document.querySelector('main');
if (!article) { return {article: false}; }
const h1 = article.querySelector('h1');
const maths = Array.from(article.querySelectorAll('span.math, div.math'));
// The article's visible prose: without code (which may show $ or \\( on purpose)
// and without the typeset math (whose hidden MathML keeps the TeX source).
const prose = article.cloneNode(true);
prose.querySelectorAll('pre, code, .katex, script, style').forEach(e => e.remove());
return {
  article: true,
  title: document.title,
  h1: h1 ? h1.textContent.replace(/#\\s*$/, '').trim() : null,
  text: article.innerText,
  prose: prose.textContent,
  math_total: maths.length,
  math_inline: maths.filter(e => e.tagName === 'SPAN').length,
  math_display: maths.filter(e => e.tagName === 'DIV').length,
  math_unrendered: maths.filter(e => !e.querySelector('.katex'))
                        .map(e => e.textContent.trim().slice(0, 80)),
  katex_errors: Array.from(article.querySelectorAll('.katex-error'))
                     .map(e => e.getAttribute('title') || e.textContent),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  // Lines of the text a reader sees, outside the code cells' source, that look like Markdown
  // table rows: a table that was printed or written but not rendered.
  raw_table_rows: (() => {
    const shown = article.cloneNode(true);
    // Code a reader reads as code (cell sources, docstring examples) may hold pipes; outputs may not.
    shown.querySelectorAll('.cell_input, script, style').forEach(e => e.remove());
    shown.querySelectorAll('pre').forEach(e => { if (!e.closest('.cell_output')) { e.remove(); } });
    return shown.textContent.split('\\n').map(l => l.trim())
      .filter(l => /^\\|.*\\|$/.test(l) || /\\|\\s*(-{3,}|—)\\s*\\|/.test(l)).slice(0, 5);
  })(),
  output_tables: article.querySelectorAll('.cell_output table').length,
  // Display math and tables that reach past the window's edges with nothing to scroll them:
  // cut off on a narrow screen (a scrolling box of their own, or an ancestor's, is fine).
  cut_off: Array.from(article.querySelectorAll('.katex-display, table')).filter(e => {
             const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
             for (let el = e; el && el !== document.body; el = el.parentElement) {
               if (scrolls(el)) { return false; }
             }
             const box = e.getBoundingClientRect();
             return box.left < -1 || box.right > window.innerWidth + 1 || e.scrollWidth > e.clientWidth + 1;
           }).map(e => e.textContent.trim().slice(0, 60)),
};
"""


@dataclass
class PageReport:
    url: str
    final_url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dom: dict = field(default_factory=dict)

    @property
    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if not _is_local(url)]


def _drain_logs(driver) -> tuple[list[dict], list[dict]]:
    return driver.get_log("browser"), driver.get_log("performance")


def load_page(driver, url: str, settle: float = 0.3) -> PageReport:
    """Open `url`, wait until it and its fonts have loaded, and report what happened.

    console_errors: SEVERE browser-console entries (script errors, failed loads).
    requests: every URL the page asked for (Network.requestWillBeSent).
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
    report.dom = driver.execute_script(_DOM_PROBE) or {}
    return report


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
        "--window-size=1280,900",
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
        driver = _chrome(user_data_dir)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def site() -> Iterator[Server]:
    if not (SITE / "index.html").is_file():
        _missing(f"the site is not built ({SITE}/index.html missing): run `make site` first")
    server = serve(SITE)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reports(browser, site) -> dict[str, PageReport]:
    """Page reports, each page loaded once (lazily) and shared by the tests."""
    return {}


@pytest.fixture
def page(request, browser, site, reports) -> PageReport:
    docname = request.param
    if docname not in reports:
        if not (SITE / f"{docname}.html").is_file():
            pytest.fail(f"{docname}: listed in the toc but {docname}.html was not built")
        reports[docname] = load_page(browser, site.base + f"{docname}.html")
    return reports[docname]


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
    page = reports.get(ROOT_PAGE) or load_page(browser, site.base + f"{ROOT_PAGE}.html")
    reports[ROOT_PAGE] = page
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
    docname = urlparse(page.url).path.lstrip("/").removesuffix(".html")
    expected = f"{COLAB}/github/{org}/{repo}/blob/{branch}/{docname}.ipynb"
    colab_links = [link for link in page.dom.get("links", []) if link.startswith(COLAB)]
    assert expected in colab_links, (
        f"{page.url}: no Colab launch link to {expected}; Colab links found: {colab_links}"
    )


#: Chapter pages whose code cells print tables, and how many at least (rendered as HTML tables).
OUTPUT_TABLES = {"book/ch01_rooflines": 1, "book/ch02_tpus": 2, "book/ch03_sharding": 17, "book/ch04_transformers": 7,
                 "book/ch05_training": 7, "book/ch06_llama_training": 5, "book/ch07_inference": 6, "book/ch08_serving": 7, "book/ch09_profiling": 5, "book/ch10_jax": 1, "book/ch12_gpus": 4}


@_params(PAGES)
def test_no_raw_markdown_tables(page: PageReport) -> None:
    assert not page.dom.get("raw_table_rows"), (
        f"{page.url}: Markdown table rows shown as text (not rendered): {page.dom['raw_table_rows']}"
    )


@_params([p for p in PAGES if p in OUTPUT_TABLES])
def test_tables_printed_by_code_cells_are_rendered(page: PageReport) -> None:
    docname = urlparse(page.url).path.lstrip("/").removesuffix(".html")
    assert page.dom.get("output_tables", 0) >= OUTPUT_TABLES[docname], (
        f"{page.url}: {page.dom.get('output_tables')} rendered output table(s), expected {OUTPUT_TABLES[docname]}"
    )


@_params(PAGES)
def test_no_test_markers_on_the_page(page: PageReport) -> None:
    text = page.dom.get("text") or ""
    for marker in ("NBVAL", "nbval-", "### BEGIN SOLUTION", "### END SOLUTION"):
        assert marker not in text, f"{page.url}: a reader sees the test marker {marker!r}"


PHONE_WIDTH = 420


@pytest.fixture(scope="module")
def phone_reports(browser, site) -> Iterator[dict]:
    """Each page loaded at a phone's width (the window is restored afterwards)."""
    browser.set_window_size(PHONE_WIDTH, 900)
    try:
        yield {}
    finally:
        browser.set_window_size(1280, 900)


@pytest.mark.parametrize("docname", PAGES)
def test_nothing_is_cut_off_at_phone_width(docname, browser, site, phone_reports) -> None:
    report = load_page(browser, site.base + f"{docname}.html", settle=0.1)
    assert not report.dom.get("cut_off"), (
        f"{docname} at {PHONE_WIDTH} px: equations or tables cut off instead of scrolling: {report.dom['cut_off']}"
    )


def test_index_redirects_to_root_page(browser, site) -> None:
    report = load_page(browser, site.base + "index.html", settle=1.0)
    assert report.final_url.endswith(f"/{ROOT_PAGE}.html"), (
        f"index.html should lead to {ROOT_PAGE}.html, ended at {report.final_url}"
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


def _fault_page(browser, tmp_path, name: str, article: str, width: int = 1280) -> PageReport:
    (tmp_path / f"{name}.html").write_text(
        f"<!doctype html><html><head><title>{name}</title></head><body>"
        f'<article class="bd-article"><h1>{name}</h1>{article}</article></body></html>', encoding="utf8")
    server = serve(tmp_path)
    browser.set_window_size(width, 900)
    try:
        return load_page(browser, server.base + f"{name}.html")
    finally:
        browser.set_window_size(1280, 900)
        server.stop()


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
