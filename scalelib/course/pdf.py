"""The course's PDF edition: the website as one page, printed by Chromium.

Course machinery, not part of the library: no scalelib module imports this one.
``scalelib pdf`` (run by ``make pdf`` and at the end of ``make site``) makes
``<build>/pdf/how-to-scale-your-model.pdf`` in four steps:

1. **One page.** Jupyter Book builds the site with Sphinx's ``singlehtml``
   builder: every page of the table of contents, in its order, in one HTML
   document, internal links turned into anchors. It is built into
   ``<build>/pdf/_build`` with the site's flags (``-W -n --keep-going``) from a
   copy of ``book/_config.yml`` that points at the site's notebook cache
   (``<build>/.jupyter_cache``), so no notebook is executed a second time, and
   that adds this module as a Sphinx extension (see :func:`setup`).
2. **Print.** Headless Chromium (``/usr/bin/chromium`` through selenium and
   ``/usr/bin/chromedriver``, no host but this machine reachable) opens the
   page, waits for its fonts (KaTeX's among them) and images, adds a title page
   (the course's title, the date of the build, the repository's address from
   ``book/_config.yml``) and a contents page, opens folded cells, shrinks
   formulas and tables wider than the paper to fit, and prints it with the
   DevTools command ``Page.printToPDF``: A4 (or Letter), backgrounds printed,
   the page number in the footer, the print stylesheet :data:`PRINT_CSS`
   (no navigation or buttons, each page of the site on a new sheet, figures,
   tables and outputs kept whole unless longer than half a sheet, code wrapped
   rather than cut off). The PDF is untagged: tagged, it is three times larger.
3. **Bookmarks.** pypdf rewrites the outline: the introduction, then one
   bookmark per part of the table of contents (each chapter, then the
   reference pages), holding its pages and, under each page, its sections,
   with the title and author in the document's metadata.
4. **Into the site.** When the site is built (``<build>/html``), the PDF is
   copied there, where the introduction's download link points.

``make site SOLUTIONS=no`` runs the same steps on its own toc and build folder
(``_build/no-solutions/_build``), so its PDF has no solution pages either.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .._errors import ScalelibError

#: Pages printed in smaller type: the API reference, a reference appendix (the toc puts it near the end).
COMPACT_PAGES = ("book/api",)
#: A sheet whose content ends above this share of its text area counts as almost blank.
NEAR_BLANK = 0.2
#: The most times the PDF is printed while pages are rearranged to leave no sheet almost blank.
MAX_PRINTS = 4
#: The PDF's file name, in ``<build>/pdf/`` and in the built site (book/intro.md links to it there).
PDF_NAME = "how-to-scale-your-model.pdf"
#: Paper sizes Chromium prints on: (width, height) in inches.
PAPERS = {"A4": (8.27, 11.69), "Letter": (8.5, 11.0)}
#: Margins in inches: top, bottom (room for the page number), left, right.
MARGINS = (0.55, 0.7, 0.6, 0.6)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Anchor of each page of the toc in the single page: Sphinx's singlehtml marks where a document
#: starts with ``<span id="document-DOCNAME">``; the print step adds the same for the root page.
ANCHOR = "document-{}"


class PdfError(ScalelibError, RuntimeError):
    """The PDF edition could not be built (a tool missing, the build or the print failing)."""


# ---------------------------------------------------------------------------
# The table of contents and the book's configuration


@dataclass(frozen=True)
class Part:
    """A part of the table of contents: its caption (None for the root page) and its pages, in order."""

    caption: str | None
    docnames: tuple[str, ...]


def toc_parts(toc_path="book/_toc.yml") -> list[Part]:
    """The toc's parts in order, the root page first as a part of its own (caption None).

    Pages nested under a page (``sections``) follow it in its part, as in the
    single page; a toc without parts (``chapters`` at the top) is one part
    without a caption.
    """
    import yaml

    path = Path(toc_path)
    try:
        toc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise PdfError(f"`toc` {str(path)!r} cannot be read ({err.strerror}); expected the book's _toc.yml") from None
    if not isinstance(toc, dict) or not isinstance(toc.get("root"), str):
        raise PdfError(f"`toc` {str(path)!r} has no `root:` page; expected a jb-book table of contents")

    def docname(entry: str) -> str:
        return re.sub(r"\.(ipynb|md|rst)$", "", entry)

    def pages(entries) -> list[str]:
        names: list[str] = []
        for entry in entries or []:
            if isinstance(entry, dict) and "file" in entry:
                names.append(docname(entry["file"]))
            if isinstance(entry, dict):
                for key in ("sections", "chapters", "entries"):
                    names += pages(entry.get(key))
        return names

    parts = [Part(None, (docname(toc["root"]),))]
    if toc.get("parts"):
        parts += [Part(p.get("caption"), tuple(pages(p.get("chapters")))) for p in toc["parts"]]
    elif toc.get("chapters") or toc.get("sections"):
        parts.append(Part(None, tuple(pages(toc.get("chapters") or toc.get("sections")))))
    return [p for p in parts if p.docnames]


def book_config(config_path="book/_config.yml") -> dict:
    """The book's Jupyter Book configuration (title, author, repository, ...), read from `config_path`."""
    import yaml

    path = Path(config_path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise PdfError(f"`config` {str(path)!r} cannot be read ({err.strerror}); "
                       "expected the book's _config.yml") from None
    if not isinstance(config, dict):
        raise PdfError(f"`config` {str(path)!r} is not a mapping; expected the book's _config.yml")
    return config


def build_date() -> _dt.date:
    """Today (UTC), or the day of ``SOURCE_DATE_EPOCH`` when it is set (reproducible builds)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch else _dt.datetime.now(_dt.timezone.utc)
    return moment.date()


# ---------------------------------------------------------------------------
# Step 1: the single page


def pdf_config(config_path, build_dir, out_path) -> Path:
    """Write the single page's Jupyter Book configuration to `out_path` and return it.

    It is `config_path` with three changes: local extensions found from their
    absolute path (the copy lives elsewhere), the notebook cache of the site
    built in `build_dir` (so nothing is executed twice), and this module as an
    extra Sphinx extension.
    """
    import yaml

    config = book_config(config_path)
    here = Path(config_path).resolve().parent
    sphinx = config.setdefault("sphinx", {})
    local = sphinx.get("local_extensions") or {}
    sphinx["local_extensions"] = {name: str((here / path).resolve()) for name, path in local.items()}
    extra = list(sphinx.get("extra_extensions") or [])
    if __name__ not in extra:
        extra.append(__name__)
    sphinx["extra_extensions"] = extra
    execute = config.setdefault("execute", {})
    execute["cache"] = str((Path(build_dir) / ".jupyter_cache").resolve())
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Written by scalelib.course.pdf from " + str(config_path) + "; do not edit.\n"
                   + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return out


def build_single_page(toc_path, config_path, build_dir, *, root=".", strict: bool = True) -> Path:
    """Build the site as one page into ``<build_dir>/pdf/_build/singlehtml``; return that folder.

    `strict` builds as the site is built (``-W -n --keep-going``: a warning fails the build).
    """
    work = Path(build_dir) / "pdf"
    config = pdf_config(config_path, build_dir, work / "_config.yml")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book) if jupyter_book.exists() else (shutil.which("jupyter-book") or "jupyter-book"),
               "build", str(root), "--config", str(config), "--toc", str(toc_path), "--path-output", str(work),
               "--builder", "singlehtml"] + (["-W", "-n", "--keep-going"] if strict else [])
    print("$ " + " ".join(command), flush=True)
    try:
        done = subprocess.run(command, cwd=root)
    except FileNotFoundError:
        raise PdfError("jupyter-book is not installed: run `make site` (it sets up .venv)") from None
    if done.returncode != 0:
        raise PdfError(f"the single-page build failed (exit status {done.returncode}); its log is above")
    return work / "_build" / "singlehtml"


def _singlehtml_uses_html_handlers(app) -> None:
    """Give the singlehtml builder the html builder's handlers of extension nodes it lacks.

    Sphinx looks a node's handlers up under the builder's name and falls back to
    its format ("html") only when none at all are registered under the name;
    sphinx-exercise registers some under "singlehtml", which hides myst-nb's
    (a folded cell, ``HideCodeCellNode``) and the build fails on them.
    """
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, pair in handlers.get("html", {}).items():
        single.setdefault(node, pair)


def setup(app) -> dict[str, Any]:
    """Sphinx extension, added to the single page's configuration only."""
    app.connect("builder-inited", _singlehtml_uses_html_handlers)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


# ---------------------------------------------------------------------------
# Step 2: print

#: The print stylesheet, added to the single page before it is printed.
PRINT_CSS = """
@media print {
  html { font-size: 9.5pt; }
  body { background: white !important; }
  /* Navigation, buttons and anything that only works on screen */
  .bd-header, .bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer,
  .bd-footer-content, .bd-footer-article, .prev-next-area, .prev-next-footer, #pst-skip-link,
  .skip-link, #pst-back-to-top, .search-button-field, .headerlink, .copybtn, button, #jb-print-docs-body,
  .toggle-button, .pdf-site-only, .anim-controls { display: none !important; }
  /* No widget a sheet of paper cannot work: a hidden code cell (the setup cell) stays out of print,
     folded content is printed open without its "Show/Hide" summary, an animation shows its frames */
  details.hide.above-input, details.hide.below-input > summary, details.hide > summary,
  summary.toggle-details__summary, .course-play-prompt { display: none !important; }
  /* A wrapped line of code or output continues indented under its start (lines marked by _PREPARE) */
  pre .pdf-line { display: block; }
  /* A page of the toc that follows the end of the previous one on its last sheet (see build_pdf) */
  .pdf-page-follows { break-before: auto !important; margin-top: 2.5em; }
  .pdf-page-follows > :is(h1, h2, h3):first-of-type, h1.pdf-page-follows { padding-top: 1.2em;
    border-top: 1px solid #999; }
  /* A page whose last lines would spill alone onto a sheet before a new part (see build_pdf) */
  .pdf-tight { font-size: 0.94em; }
  .pdf-tight p, .pdf-tight li { margin-bottom: 0.5em; }
  /* The API reference, an appendix: smaller type, tighter entries */
  .pdf-compact { font-size: 0.8em; }
  .pdf-compact dl, .pdf-compact dd, .pdf-compact p, .pdf-compact div.highlight, .pdf-compact pre {
    margin-top: 0.25em !important; margin-bottom: 0.35em !important; }
  .pdf-compact pre { padding: 0.3em 0.5em !important; }
  /* ... its entries run on from sheet to sheet (an example or a formula still kept whole) */
  .pdf-compact dl, .pdf-compact dd, .pdf-compact dl.field-list { break-inside: auto !important; }
  .pdf-compact h1 { font-size: 2em; }
  .pdf-compact h2, .pdf-compact h3 { font-size: 1.3em; margin-top: 0.8em; }
  /* Tables fit the column: smaller type */
  .cell_output table, .bd-article table.table { font-size: 0.85em; }
  .bd-page-width, .bd-container, .bd-container__inner, .bd-main, .bd-content, .bd-article-container,
  .bd-article { max-width: none !important; width: auto !important; margin: 0 !important;
    padding: 0 !important; display: block !important; }
  /* Each page of the site starts a new sheet; nothing is left alone at the bottom of one */
  .pdf-page-start { break-before: page; }
  h1, h2, h3, h4, h5, h6 { break-after: avoid; break-inside: avoid; }
  /* Figures, tables, outputs and boxes are kept whole on a sheet, unless longer than half of one
     (marked pdf-long before printing): those break between rows or lines */
  figure, img, svg, table, tr, .katex-display, .cell_input, .cell_output, div.highlight, .admonition,
  .math-wrapper, dl { break-inside: avoid; }
  .pdf-long, .pdf-long pre { break-inside: auto !important; }
  /* The theme hides each page's first h1 in print (it prints the title elsewhere); here it stays */
  .bd-article h1:first-of-type { display: block !important; }
  img { max-width: 100% !important; height: auto; }
  th, td { padding: 0.2em 0.5em !important; }
  /* A cell's words and numbers stay whole ("USD 20,267,212" on one line): the table lays its columns
     out around them, and one too wide for the paper is scaled to fit */
  th, td { overflow-wrap: break-word !important; word-break: normal !important; }
  /* Code wraps instead of running off the paper */
  pre, pre span, code { white-space: pre-wrap !important; overflow-wrap: anywhere; }
  pre, div.highlight, .cell_output, .output, .katex-display, .table-wrapper, .pst-scrollable-table-container {
    overflow: visible !important; max-height: none !important; }
  a { text-decoration: none; }
  /* Title page and contents */
  .pdf-title-page { break-after: page; min-height: 9.5in; display: flex !important; flex-direction: column;
    justify-content: center; }
  .pdf-title-page h1 { font-size: 2.6rem; margin-bottom: 0.6em; }
  .pdf-title-page .pdf-subtitle { font-size: 1.25rem; max-width: 36em; }
  .pdf-title-page .pdf-meta { margin-top: 3em; font-size: 1.05rem; }
  .pdf-contents ol { list-style: none; padding-left: 0; }
  .pdf-contents ol ol { padding-left: 1.5em; margin-bottom: 0.4em; }
  .pdf-contents li { margin: 0.1em 0; }
  .pdf-contents .pdf-part { font-weight: bold; margin-top: 0.5em; }
}
"""

#: Run in the page before printing: the print stylesheet, the title page, the contents, a new sheet
#: for each page of the toc, folded cells opened, images loaded eagerly. Returns, for each toc page, its
#: title (its first heading; null when the page is missing) and its sections two levels deep, each
#: with an anchor of its own that a (hidden) link points at, so that Chromium writes it into the PDF
#: as a named destination: the bookmarks are made from these.
_PREPARE = r"""
const [parts, front] = arguments;
const article = document.querySelector('article.bd-article') || document.querySelector('main');
if (!article) { return {error: 'no <article> in the single page'}; }
const style = document.createElement('style');
style.textContent = front.css;
document.head.appendChild(style);
// The root page has no start marker of its own in singlehtml: give it one.
const rootAnchor = document.createElement('span');
rootAnchor.id = 'document-' + parts[0].docnames[0];
article.insertBefore(rootAnchor, article.firstChild);
const targets = document.createElement('div');
targets.className = 'pdf-site-only';
let count = 0;
const headingText = h => h ? h.textContent.replace(/#\s*$/, '').trim() : null;
const sections = (section, depth) => Array.from(section.querySelectorAll(':scope > section')).map(s => {
  const h = s.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4, :scope > h5, :scope > h6');
  if (!h) { return null; }
  const anchor = 'pdf-section-' + (++count);
  const mark = document.createElement('span'); mark.id = anchor; h.insertBefore(mark, h.firstChild);
  const link = document.createElement('a'); link.href = '#' + anchor; targets.appendChild(link);
  return {title: headingText(h), anchor: anchor, children: depth > 1 ? sections(s, depth - 1) : []};
}).filter(Boolean);
const docs = {};
for (const part of parts) {
  for (const name of part.docnames) {
    const start = document.getElementById('document-' + name);
    // The page's first section; label targets (empty spans) may come before it.
    let first = start && start.nextElementSibling;
    while (first && !first.matches('section') && !first.textContent.trim() && first.nextElementSibling) {
      first = first.nextElementSibling;
    }
    if (!first) { docs[name] = {title: null, sections: []}; continue; }
    // The marker moves into the page's first element, on the sheet that element starts; left
    // before it, it would end the previous sheet, and so would its destination in the PDF.
    first.classList.add(front.follows.includes(name) ? 'pdf-page-follows' : 'pdf-page-start');
    if (front.compact.includes(name)) { first.classList.add('pdf-compact'); }
    if (front.tighten.includes(name)) { first.classList.add('pdf-tight'); }
    const heading = first.matches('h1,h2,h3') ? first : first.querySelector('h1, h2, h3');
    // Inside the title itself: a page that follows another on its sheet may see its title pushed to the
    // next sheet, and its destination (the bookmark, the test's "starts here") must go with the title.
    (heading || first).insertBefore(start, (heading || first).firstChild);
    docs[name] = {title: headingText(heading), sections: first.matches('section') ? sections(first, 2) : []};
  }
}
article.appendChild(targets);
// Title page
const title = document.createElement('section');
title.className = 'pdf-title-page';
const h1 = document.createElement('h1'); h1.textContent = front.title; title.appendChild(h1);
const sub = document.createElement('p'); sub.className = 'pdf-subtitle'; sub.textContent = front.subtitle;
title.appendChild(sub);
const meta = document.createElement('div'); meta.className = 'pdf-meta';
for (const line of front.lines) {
  const p = document.createElement('p');
  if (line.href) { const a = document.createElement('a'); a.href = line.href; a.textContent = line.text;
                   p.append(line.label, a); }
  else { p.textContent = line.text; }
  meta.appendChild(p);
}
title.appendChild(meta);
// Contents: a link to the start of every page of the toc (a named destination each, too).
const contents = document.createElement('nav');
contents.className = 'pdf-contents';
const ch = document.createElement('h2'); ch.textContent = front.contents; contents.appendChild(ch);
const list = document.createElement('ol');
const entry = name => {
  const li = document.createElement('li'); const a = document.createElement('a');
  a.href = '#document-' + name; a.textContent = docs[name].title || name; li.appendChild(a); return li;
};
for (const part of parts) {
  if (part.caption === null) { part.docnames.forEach(name => list.appendChild(entry(name))); continue; }
  const li = document.createElement('li');
  const cap = document.createElement('div'); cap.className = 'pdf-part'; cap.textContent = part.caption;
  li.appendChild(cap);
  const sublist = document.createElement('ol');
  part.docnames.forEach(name => sublist.appendChild(entry(name)));
  li.appendChild(sublist);
  list.appendChild(li);
}
contents.appendChild(list);
article.insertBefore(contents, article.firstChild);
article.insertBefore(title, article.firstChild);
// Folded content is printed open; images load now rather than when scrolled to.
document.querySelectorAll('details').forEach(d => { d.open = true; });
document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
document.querySelectorAll('img[loading="lazy"]').forEach(img => { img.loading = 'eager'; });
// No "Open in Colab" on paper: the link goes, and its paragraph when nothing else is in it.
article.querySelectorAll('a[href*="colab.research.google.com"]').forEach(a => {
  const p = a.closest('p'); a.remove();
  if (p && !p.textContent.replace(/[\s·|]/g, '')) { p.remove(); }
});
// Each line of code (a cell's input, an example) becomes a block of its own, its highlighting
// kept, so that a line too long for the paper wraps with its continuation indented.
article.querySelectorAll('div.highlight pre').forEach(pre => {
  if (pre.closest('.cell_output')) { return; }
  const lines = [[]];
  for (const node of Array.from(pre.childNodes)) {
    node.textContent.split('\n').forEach((part, i) => {
      if (i > 0) { lines.push([]); }
      if (!part) { return; }
      let piece;
      if (node.nodeType === Node.TEXT_NODE) { piece = document.createTextNode(part); }
      else { piece = node.cloneNode(false); piece.textContent = part; }
      lines[lines.length - 1].push(piece);
    });
  }
  if (lines.length > 1 && !lines[lines.length - 1].length) { lines.pop(); }
  pre.textContent = '';
  for (const parts of lines) {
    const text = parts.map(p => p.textContent).join('');
    const lead = text.length - text.trimStart().length;
    const span = document.createElement('span'); span.className = 'pdf-line';
    span.style.paddingLeft = `calc(${lead}ch + 2em)`; span.style.textIndent = `calc(-${lead}ch - 2em)`;
    if (parts.length) { parts.forEach(p => span.appendChild(p)); } else { span.textContent = '\u200b'; }
    pre.appendChild(span);
  }
});
// Each line of a plain output becomes a block of its own, so that a line too long for the paper
// wraps with its continuation indented (PRINT_CSS) rather than back at the left margin.
// The continuation sits 2em in from where its line's own text starts (after its leading spaces).
// Only plain outputs (text, or the highlighter's bare spans) are rewritten; their colours go.
article.querySelectorAll('.cell_output pre').forEach(pre => {
  if (Array.from(pre.querySelectorAll('*')).some(e => e.tagName !== 'SPAN' || e.children.length)) { return; }
  const lines = pre.textContent.replace(/\n$/, '').split('\n');
  pre.textContent = '';
  for (const line of lines) {
    const lead = line.length - line.trimStart().length;
    const span = document.createElement('span'); span.className = 'pdf-line';
    span.style.paddingLeft = `calc(${lead}ch + 2em)`; span.style.textIndent = `calc(-${lead}ch - 2em)`;
    span.textContent = line || '\u200b'; pre.appendChild(span);
  }
});
return {docs: docs};
"""

#: Run once print media is emulated at the paper's size: what is still wider than the text column
#: (an equation, a table, a figure) is scaled down to fit it, and what would be kept whole on a sheet
#: but is longer than half of one may break. Returns how many were scaled.
_FIT = r"""
const sheet = arguments[0];
const article = document.querySelector('article.bd-article') || document.querySelector('main');
const width = article.getBoundingClientRect().width;
let scaled = 0;
for (const el of article.querySelectorAll('.katex-display, table, .cell_output img, .cell_output svg, figure img')) {
  const need = Math.max(el.scrollWidth, el.getBoundingClientRect().width);
  const room = Math.min(width, el.parentElement.getBoundingClientRect().width || width);
  if (need > room + 1) { el.style.zoom = (room / need).toFixed(3); scaled += 1; }
}
for (const el of article.querySelectorAll('table, .cell_input, .cell_output, div.highlight, .admonition, figure, dl, .math-wrapper')) {
  if (el.getBoundingClientRect().height > sheet / 2) { el.classList.add('pdf-long'); }
}
return scaled;
"""

_WAIT = r"""
const done = arguments[arguments.length - 1];
const images = Array.from(document.images).filter(img => !img.complete);
const article = document.querySelector('article.bd-article') || document.body;
Promise.all([document.fonts.ready,
             ...images.map(img => new Promise(r => { img.onload = img.onerror = r; }))])
  .then(() => done({images: Array.from(article.querySelectorAll('img')).filter(i => i.offsetParent !== null).length,
                    broken: Array.from(document.images).filter(i => i.src && i.complete && i.naturalWidth === 0)
                                 .map(i => i.getAttribute('src').slice(0, 80))}),
        err => done({error: String(err)}));
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002
        pass


@dataclass
class Server:
    """A folder served over HTTP on 127.0.0.1 from a background thread (the PDF step and the browser test)."""

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
    return Server(Path(directory), httpd, thread)


def _chromium(user_data_dir: str):
    for path, how in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver")):
        if not Path(path).exists():
            raise PdfError(f"{path} not found: install {how} with `make browser`")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise PdfError("selenium is not installed: run `make site` (it sets up .venv)") from None
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", f"--user-data-dir={user_data_dir}", "--window-size=1280,900",
                     # Nothing but this machine can be reached: the PDF is made from the build alone.
                     "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(300)
    driver.set_script_timeout(300)
    # Printing 600 pages takes minutes on a busy machine: more than selenium's 120 s per command.
    client = getattr(driver.command_executor, "_client_config", None)
    if client is not None:
        client.timeout = 1200
    return driver


@dataclass
class Front:
    """What the title page says."""

    title: str
    subtitle: str
    date: _dt.date
    repository: str
    author: str = ""
    #: Pages of the toc printed in smaller type (the API reference, an appendix).
    compact: tuple[str, ...] = ()
    #: Pages of the toc that start below the end of the previous page, on its last sheet, instead of
    #: on a new sheet: that end alone would have left a sheet almost blank (build_pdf finds them).
    follows: tuple[str, ...] = ()
    #: Pages of the toc printed a little tighter (smaller type) so that their end does not spill alone
    #: onto a sheet before a part that starts a sheet of its own.
    tighten: tuple[str, ...] = ()
    #: The language of the edition (``en`` or ``ru``): the title page's own words.
    language: str = "en"

    def as_js(self) -> dict:
        words = FRONT_WORDS[self.language]
        lines = []
        if self.author:
            lines.append({"text": self.author})
        month = words["months"][self.date.month - 1]
        lines.append({"text": words["built"].format(day=self.date.day, month=month, year=self.date.year)})
        if self.repository:
            lines.append({"label": words["source"], "text": self.repository, "href": self.repository})
        return {"title": self.title, "subtitle": self.subtitle, "lines": lines, "css": PRINT_CSS,
                "contents": words["contents"],
                "compact": list(self.compact), "follows": list(self.follows),
                "tighten": list(self.tighten)}


#: The title page's words in each edition's language (the language of ``sphinx: config: language:``).
FRONT_WORDS = {
    "en": {"chapter": r"Chapter \d+", "contents": "Contents", "source": "Source: ", "built": "Built on {day} {month} {year}",
           "months": ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                      "October", "November", "December"],
           "subtitle": "The course website as one document: {chapters} chapter notebooks, their exercises{solutions}, "
                       "and the reference pages. A runnable companion to How to Scale Your Model (Austin et al., "
                       "Google DeepMind, 2025).", "and_solutions": " and solutions"},
    "ru": {"chapter": r"Глава \d+", "contents": "Содержание", "source": "Исходный код: ",
           "built": "Собрано {day} {month} {year} г.",
           "months": ["января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября",
                      "октября", "ноября", "декабря"],
           "subtitle": "Сайт курса одним документом: {chapters} глав-блокнотов, упражнения к ним{solutions} и "
                       "справочные страницы. Исполняемый спутник книги How to Scale Your Model (Austin et al., "
                       "Google DeepMind, 2025).", "and_solutions": " с решениями"},
}


def edition_language(config: dict) -> str:
    """The language of the edition `config` configures: ``ru`` for the Russian one, else ``en``."""
    language = ((config.get("sphinx") or {}).get("config") or {}).get("language")
    return language if language in FRONT_WORDS else "en"


def front_matter(parts: list[Part], config: dict, date: _dt.date | None = None) -> Front:
    """The title page of `parts` (the toc) for the book configured by `config`, in the edition's language."""
    language = edition_language(config)
    words = FRONT_WORDS[language]
    chapters = [p for p in parts if p.caption and re.match(words["chapter"], p.caption)]
    with_solutions = any(name.startswith("solutions/") for p in parts for name in p.docnames)
    subtitle = words["subtitle"].format(chapters=len(chapters),
                                        solutions=words["and_solutions"] if with_solutions else "")
    repository = (config.get("repository") or {}).get("url") or ""
    compact = tuple(name for p in parts for name in p.docnames if name in COMPACT_PAGES)
    return Front(title=str(config.get("title") or "Course"), subtitle=subtitle, date=date or build_date(),
                 repository=str(repository).rstrip("/"), author=str(config.get("author") or ""), compact=compact,
                 language=language)


@dataclass
class Printed:
    """What the print step made: the PDF's bytes, each toc page's title and sections, and what was noticed."""

    pdf: bytes
    docs: dict[str, dict]
    images: int
    broken_images: list[str]
    scaled: int
    seconds: dict[str, float] = field(default_factory=dict)


def print_page(html_path, parts: list[Part], front: Front, *, paper: str = "A4") -> Printed:
    """Print the single page `html_path` (with the title page `front`) with Chromium; see the module's step 2."""
    if paper not in PAPERS:
        raise PdfError(f"`paper`: unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    html_path = Path(html_path)
    if not html_path.is_file():
        raise PdfError(f"{html_path} is missing: build the single page first")
    width_in, height_in = PAPERS[paper]
    top, bottom, left, right = MARGINS
    seconds: dict[str, float] = {}
    start = time.monotonic()
    server = serve(html_path.parent)
    with tempfile.TemporaryDirectory(prefix="course-pdf-chrome-", ignore_cleanup_errors=True) as user_data:
        driver = _chromium(user_data)
        try:
            driver.get(server.base + html_path.name)
            prepared = driver.execute_script(_PREPARE, [{"caption": p.caption, "docnames": list(p.docnames)}
                                                        for p in parts], front.as_js())
            if prepared.get("error"):
                raise PdfError(f"{html_path}: {prepared['error']}")
            # Lay the page out as it will be printed, at the paper's text width, and shrink what is wider.
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": round((width_in - left - right) * 96), "height": round((height_in - top - bottom) * 96),
                "deviceScaleFactor": 1, "mobile": False})
            loaded = driver.execute_async_script(_WAIT)
            if loaded.get("error"):
                raise PdfError(f"{html_path}: waiting for fonts and images failed: {loaded['error']}")
            scaled = driver.execute_script(_FIT, (height_in - top - bottom) * 96)
            seconds["load"] = time.monotonic() - start
            start = time.monotonic()
            footer = ('<div style="font-size: 8px; width: 100%; text-align: center; color: #555;">'
                      '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
            result = driver.execute_cdp_cmd("Page.printToPDF", {
                "paperWidth": width_in, "paperHeight": height_in, "marginTop": top, "marginBottom": bottom,
                "marginLeft": left, "marginRight": right, "printBackground": True, "displayHeaderFooter": True,
                "headerTemplate": "<span></span>", "footerTemplate": footer, "preferCSSPageSize": False,
                # Untagged: a tagged PDF of the course is three times the size and slower to make.
                "generateTaggedPDF": False, "generateDocumentOutline": False})
            seconds["print"] = time.monotonic() - start
        finally:
            driver.quit()
            server.stop()
    return Printed(pdf=base64.b64decode(result["data"]), docs=prepared["docs"], images=loaded["images"],
                   broken_images=loaded["broken"], scaled=scaled, seconds=seconds)


def sheet_fill(pdf_bytes: bytes, *, paper: str = "A4") -> list[float]:
    """For each sheet of the PDF, how far down its text area the content reaches: 0 for none, 1 for the
    bottom. Content is text and images (read by PDFium); the page number in the bottom margin is not."""
    import pypdfium2
    import pypdfium2.raw as pdfium_c

    top_margin, bottom_margin = MARGINS[0] * 72, MARGINS[1] * 72
    document = pypdfium2.PdfDocument(pdf_bytes)
    fills = []
    try:
        for index in range(len(document)):
            sheet = document[index]
            height = sheet.get_height()
            top, bottom = height - top_margin, bottom_margin
            lowest = None
            text = sheet.get_textpage()
            boxes = [text.get_rect(i) for i in range(text.count_rects())]
            boxes += [obj.get_bounds() for obj in sheet.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE])]
            for left, low, right, high in boxes:
                if high > bottom + 1 and high - low > 0.5:
                    lowest = low if lowest is None else min(lowest, low)
            fills.append(0.0 if lowest is None else max(0.0, min(1.0, (top - max(lowest, bottom)) / (top - bottom))))
    finally:
        document.close()
    return fills


def orphaned_ends(pdf_bytes: bytes, parts: list[Part], *, paper: str = "A4") -> list[str]:
    """The pages of the toc (after the first) whose previous page ends alone on an almost blank sheet
    (content in less than :data:`NEAR_BLANK` of it) just before them: printed to follow that end."""
    import io
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    starts = {name: page for name, (page, _top) in _destinations(PdfReader(io.BytesIO(pdf_bytes))).items()
              if name.startswith("document-")}
    fills = sheet_fill(pdf_bytes, paper=paper)
    names = [name for part in parts for name in part.docnames]
    first = starts.get(ANCHOR.format(names[0]), 0)
    return [name for name in names[1:]
            if (page := starts.get(ANCHOR.format(name))) is not None and page - 1 >= first
            and fills[page - 1] < NEAR_BLANK]


# ---------------------------------------------------------------------------
# Step 3: bookmarks


@dataclass
class Bookmark:
    """An outline entry: its title, the (0-based) page it opens and how far down (PDF units from the bottom)."""

    title: str
    page: int
    top: float | None = None
    children: list["Bookmark"] = field(default_factory=list)


def _destinations(reader) -> dict[str, tuple[int, float | None]]:
    """The PDF's named destinations: name (without the leading slash) -> (page, top)."""
    found = {}
    for name, dest in reader.named_destinations.items():
        try:
            page = reader.get_destination_page_number(dest)
        except Exception:  # noqa: BLE001 - a destination pypdf cannot resolve is left out
            continue
        top = dest.get("/Top")
        found[str(name).lstrip("/")] = (page, float(top) if top is not None else None)
    return found


def bookmarks(reader, parts: list[Part], docs: dict[str, dict]) -> list[Bookmark]:
    """The outline of the printed course: the root page, then each part holding its pages and their sections.

    A section whose destination is missing, or lies outside its page's sheets, is left out.
    """
    dests = _destinations(reader)
    starts = {}
    for part in parts:
        for name in part.docnames:
            if ANCHOR.format(name) not in dests:
                raise PdfError(f"the PDF has no destination for the start of {name} (is it in the single page?)")
            starts[name] = dests[ANCHOR.format(name)][0]
    order = sorted(set(starts.values())) + [len(reader.pages)]

    def sections(items: list[dict], first: int) -> list[Bookmark]:
        # up to the sheet the next page of the toc starts on: it may share its first sheet with this end
        last = next(page for page in order if page > first)
        marks = []
        for item in items:
            page, top = dests.get(item["anchor"], (None, None))
            if page is not None and first <= page <= last:
                marks.append(Bookmark(item["title"], page, top, sections(item["children"], first)))
        return marks

    def page_mark(name: str) -> Bookmark:
        page, top = dests[ANCHOR.format(name)]
        return Bookmark(docs[name]["title"] or name, page, top, sections(docs[name]["sections"], page))

    marks: list[Bookmark] = []
    for part in parts:
        if part.caption is None:
            marks += [page_mark(name) for name in part.docnames]
        else:
            pages = [page_mark(name) for name in part.docnames]
            marks.append(Bookmark(part.caption, pages[0].page, pages[0].top, pages))
    return marks


def write_pdf(printed: Printed, parts: list[Part], front: Front, out_path) -> list[Bookmark]:
    """Write `printed` to `out_path` with the outline of :func:`bookmarks` and the metadata of `front`."""
    import io
    import logging

    try:
        from pypdf import PdfReader, PdfWriter
        from pypdf.generic import Fit
    except ImportError:
        raise PdfError("pypdf is not installed: run `make site` (it sets up .venv)") from None

    # Chromium's trailer understates the object count by a few; pypdf copes and says so. Quiet.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(io.BytesIO(printed.pdf))
    marks = bookmarks(reader, parts, printed.docs)
    writer = PdfWriter(clone_from=reader)
    writer._root_object.pop("/Outlines", None)

    def add(mark: Bookmark, parent) -> None:
        fit = Fit.xyz(top=mark.top) if mark.top is not None else Fit.fit()
        item = writer.add_outline_item(mark.title, mark.page, parent=parent, fit=fit)
        for child in mark.children:
            add(child, item)

    for mark in marks:
        add(mark, None)
    writer.page_mode = "/UseOutlines"
    writer.add_metadata({"/Title": front.title, "/Author": front.author, "/Subject": front.subtitle,
                         "/Keywords": front.repository})
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    with open(partial, "wb") as handle:
        writer.write(handle)
    partial.replace(out)
    return marks


# ---------------------------------------------------------------------------
# All steps


@dataclass
class Report:
    """What :func:`build_pdf` made, and how long each step took."""

    pdf: Path
    copied_to: Path | None
    pages: int
    size_bytes: int
    bookmarks: int
    images: int
    scaled: int
    seconds: dict[str, float]

    def summary(self) -> str:
        times = ", ".join(f"{step} {s:.0f} s" for step, s in self.seconds.items())
        where = f"\ncopied into the site: {self.copied_to}" if self.copied_to else ""
        return (f"PDF: {self.pdf}: {self.pages} pages, {self.size_bytes / 2**20:.1f} MiB, {self.bookmarks} bookmarks, "
                f"{self.images} images; {self.scaled} wide formula(s), table(s) or figure(s) scaled to fit{where}\n"
                f"time: {times}, total {sum(self.seconds.values()):.0f} s")


#: A script the page loads from a file: the theme's, search's and buttons' code, none of which the
#: printed page needs (scripts written into the page, such as an animation's, stay).
_SCRIPT_FILE = re.compile(r"<script\b[^>]*\bsrc=[^>]*>\s*</script>", re.I)


def print_copy(root_html, single) -> Path:
    """The single page as printed: ``course-print.html`` at the top of the singlehtml folder `single`.

    singlehtml writes the page at the root document's path (``book/intro.html``) but links its
    assets and images as if it were at the top of the folder; the copy there finds them. It leaves
    out the scripts loaded from files, which would only slow the page down (the search index
    alone is megabytes).
    """
    page = Path(single) / "course-print.html"
    page.write_text(_SCRIPT_FILE.sub("", Path(root_html).read_text(encoding="utf-8")), encoding="utf-8")
    return page


def build_pdf(*, toc="book/_toc.yml", config="book/_config.yml", build_dir="_build", paper="A4",
              build: bool = True, strict: bool = True) -> Report:
    """Build the PDF edition of the site built in `build_dir` (see the module's docstring); return a report.

    The PDF is written to ``<build_dir>/pdf/`` and copied into ``<build_dir>/html/`` when the site is
    there. With ``build=False`` the single page built last time is printed again.
    """
    seconds: dict[str, float] = {}
    parts = toc_parts(toc)
    build_dir = Path(build_dir)
    single = build_dir / "pdf" / "_build" / "singlehtml"
    if build:
        start = time.monotonic()
        single = build_single_page(toc, config, build_dir, strict=strict)
        seconds["single page"] = time.monotonic() - start
    root_html = single / f"{parts[0].docnames[0]}.html"
    if not root_html.is_file():
        raise PdfError(f"{root_html} is missing: build the single page first (`scalelib pdf` without --no-build)")
    page = print_copy(root_html, single)
    front = front_matter(parts, book_config(config))
    printed = print_page(page, parts, front, paper=paper)
    seconds.update(printed.seconds)
    # A page of the toc whose end would sit alone near the top of a sheet (a last check's "not attempted"
    # line pushed over) is followed on that sheet by the next page; or, when the next one starts a part
    # (a chapter starts a sheet), is printed a little tighter. Printed again so, until no sheet is left
    # almost blank that way (each change moves what comes after it: at most MAX_PRINTS prints).
    part_starts = {part.docnames[0] for part in parts}
    names = [name for part in parts for name in part.docnames]
    previous = dict(zip(names[1:], names[:-1]))
    for attempt in range(2, MAX_PRINTS + 1):
        orphans = orphaned_ends(printed.pdf, parts, paper=paper)
        follows = {n for n in orphans if n not in part_starts} - set(front.follows)
        tighten = {previous[n] for n in orphans if n in part_starts} - set(front.tighten)
        if not follows and not tighten:
            break
        front = dataclasses.replace(front, follows=tuple(sorted({*front.follows, *follows})),
                                    tighten=tuple(sorted({*front.tighten, *tighten})))
        printed = print_page(page, parts, front, paper=paper)
        seconds.update({f"{step} {attempt}": s for step, s in printed.seconds.items()})
    if printed.broken_images:
        raise PdfError(f"{len(printed.broken_images)} image(s) of the single page did not load: "
                       f"{printed.broken_images[:3]}")
    missing = [name for name, doc in printed.docs.items() if doc["title"] is None]
    if missing:
        raise PdfError(f"page(s) of the toc missing from the single page: {', '.join(missing)}")
    start = time.monotonic()
    out = build_dir / "pdf" / PDF_NAME
    marks = write_pdf(printed, parts, front, out)
    seconds["bookmarks"] = time.monotonic() - start
    copied = None
    site = build_dir / "html"
    if (site / "index.html").is_file():
        copied = site / PDF_NAME
        shutil.copyfile(out, copied)
    from pypdf import PdfReader  # there: write_pdf needed it

    return Report(pdf=out, copied_to=copied, pages=len(PdfReader(out).pages), size_bytes=out.stat().st_size,
                  bookmarks=sum(1 for _ in iter_bookmarks(marks)), images=printed.images, scaled=printed.scaled,
                  seconds=seconds)


def iter_bookmarks(marks: list[Bookmark], level: int = 0) -> Iterator[tuple[int, Bookmark]]:
    """(level, bookmark) for every bookmark of `marks`, depth first (level 0 at the top)."""
    for mark in marks:
        yield level, mark
        yield from iter_bookmarks(mark.children, level + 1)
