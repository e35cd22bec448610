"""Local Sphinx extension of the course website (enabled in book/_config.yml).

1. KaTeX from npm. sphinxcontrib-katex renders every formula at build time
   (``katex_prerender``) by running node; here it is pointed at the katex
   pinned in book/package.json, and that same version's CSS and fonts are
   copied to ``_static/katex/``. Pages thus load no math asset from a CDN.
   The node renderer is started here, waiting until its socket accepts
   connections: sphinxcontrib-katex 0.9.11 connects as soon as the socket
   file exists, and now and then gets "Connection refused" and aborts.
2. A numbered amsmath block (``\begin{align}`` in a Markdown cell) gets one
   equation number, from Sphinx, as it does with MathJax; KaTeX would
   number each line as well, printing both.
3. A formula KaTeX cannot typeset is reported as a build warning, with its
   file and line (an error under ``-W``), instead of showing up in red on
   the page.
4. The site's own stylesheet, ``book/_static/course.css`` (wide equations
   and tables scroll within their box on a phone), and ``course-scroll.js``, which
   shows a cue on each side of a box (table, equation, code) where content is hidden.
5. The solution notebooks' region markers (``### BEGIN SOLUTION`` /
   ``### END SOLUTION``, which `make exercises` reads) are left out of the
   code a reader sees on the site.
6. Built with ``make site SOLUTIONS=no`` (environment variable
   ``SCALELIB_SITE_SOLUTIONS=no``), the site has no solution pages, and links
   to them become plain text (a ``· [Solutions](...)`` after another link goes
   entirely), so that no page points at a page that is not there.
7. Duplicate scripts are dropped from each page. Sphinx 7 re-adds, at write
   time, every inline script an extension registered after the builder was
   created, with ``filename=''`` where the first copy has ``filename=None``;
   the two do not compare equal, so both are emitted. sphinx-thebe registers
   ``const THEBE_JS_URL = ...`` that way, and the second copy throws
   "Identifier 'THEBE_JS_URL' has already been declared" on every page.
8. The theme's own sidebar toggles work at every width. pydata-sphinx-theme
   0.17 fills an unset ``navbar_persistent`` with a search field, so a top bar
   is drawn with a second (hidden) pair of toggles before the article's; the
   themes' scripts bind ``document.querySelector(".primary-toggle")``, the
   hidden one, and the visible buttons did nothing. With the option empty,
   as sphinx-book-theme means it, there is no top bar and the one pair works.
9. No 1.5 MB icon script: the theme's ``fontawesome.js`` is dropped from every
   page; the icons the pages use still show, drawn from the Font Awesome web
   fonts the theme's stylesheet already declares (loaded only by pages that
   show an icon of that style).
10. Every figure says what it shows: an image a code cell outputs gets as alt
   text what the scalelib helper that drew it draws (the first sentence of its
   docstring), or the figure's title in the cell, with its section; a cell's
   ``mystnb: image: alt:`` metadata wins. Images in raw HTML outputs (an
   animation's frames) without alt text get their section's.
11. The download menu's ".pdf" links the course's PDF (``how-to-scale-your-model.pdf``
   at the top of the site) instead of opening the browser's print dialog.
12. An animation's frames, written inline by matplotlib as base64 data: URIs,
   become files in ``_images/``: its page's HTML loses about a megabyte.
13. Search snippets without repeated math (``book/_static/course-search.js``):
   the MathML copy KaTeX writes of each formula is left out of the snippet.
14. A change to book/_ext (this file, its sibling extensions) or to book/_static rewrites every page (the config
   value ``course_site_digest``), not only the pages whose source changed.
15. Every page names its published address (``html_baseurl``, a canonical link):
   GitHub Pages' address of ``repository: url:`` (scalelib.course.authoring.pages_url).
16. Search: results ranked by what their page is for, a chapter that teaches a word before the
   exercises that use it (``course-scorer.js`` beside this file, Sphinx's ``html_search_scorer``);
   the index and the search scripts are loaded by the search page only.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

BOOK_DIR = Path(__file__).resolve().parents[1]
KATEX_DIST = BOOK_DIR / "node_modules" / "katex" / "dist"
KATEX_STATIC_DIR = "katex"  # inside the site's _static/


def use_npm_katex(app: Sphinx, config: Config) -> None:
    """Render with, and link the CSS of, the katex installed from book/package-lock.json."""
    katex_js = KATEX_DIST / "katex.min.js"
    if not katex_js.is_file():
        raise ExtensionError(
            f"KaTeX is not installed ({katex_js} is missing). "
            "Install it with `make book/node_modules/.installed` (npm ci --prefix book)."
        )
    config.katex_js_path = str(katex_js)
    config.katex_css_path = f"{KATEX_STATIC_DIR}/katex.min.css"


def copy_katex_assets(app: Sphinx) -> None:
    """Put katex.min.css and the fonts it references into _static/katex/."""
    if app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / KATEX_STATIC_DIR
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(KATEX_DIST / "katex.min.css", dest / "katex.min.css")
    shutil.copytree(KATEX_DIST / "fonts", dest / "fonts", dirs_exist_ok=True)


def start_katex_server(app: Sphinx) -> None:
    """Start the build-time KaTeX renderer once its socket really accepts connections."""
    from sphinxcontrib.katex import KaTeXServer

    if not app.config.katex_prerender or os.name != "posix":
        return
    if KaTeXServer.katex_server is not None:
        return
    KaTeXServer.katex_path = app.config.katex_js_path
    rundir = Path(tempfile.mkdtemp(prefix="course-site-katex-"))
    socket_path = rundir / "katex.sock"
    command = KaTeXServer.build_command(socket=socket_path)
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=rundir
    )
    deadline = time.monotonic() + 30.0
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(socket_path))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                shutil.rmtree(rundir, ignore_errors=True)
                raise ExtensionError(
                    f"the KaTeX renderer did not start ({' '.join(command)}; "
                    f"exit code {process.poll()}); is node installed?"
                ) from None
            time.sleep(0.01)
    server = KaTeXServer(rundir, process, sock)
    KaTeXServer.katex_server = server
    atexit.register(server.terminate)


_NUMBERED_ENV = re.compile(r"\\(begin|end)\{(equation|align|alignat|gather)\}")


def unnumber_amsmath_lines(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for node in doctree.findall(nodes.math_block):
        if "amsmath" not in node["classes"]:
            continue
        latex = node.astext()
        starred = _NUMBERED_ENV.sub(r"\\\1{\2*}", latex)
        if starred != latex:
            node.clear()
            node += nodes.Text(starred)


def check_math(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Warn, with file and line, about each formula KaTeX cannot typeset."""
    from sphinxcontrib.katex import KaTeXServer

    if not app.config.katex_prerender or app.builder.format != "html":
        return
    server = KaTeXServer.get()
    for node in doctree.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        latex = node.astext()
        options = {"throwOnError": True, "displayMode": isinstance(node, nodes.math_block)}
        response = server.render({"latex": latex, "katex_options": options}, timeout=10)
        if "error" in response:
            logger.warning(
                "KaTeX cannot typeset %r: %s",
                latex,
                response["error"],
                location=node,
                type="course_site",
                subtype="katex",
            )


def drop_duplicate_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for js in scripts:
        attributes = getattr(js, "attributes", {})
        key = (
            str(getattr(js, "filename", js) or ""),
            getattr(js, "priority", None),
            tuple(sorted((k, str(v)) for k, v in attributes.items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(js)
    # A new list: the builder's own list is left untouched for the next page.
    context["script_files"] = unique


def no_top_bar(app: Sphinx, config: Config) -> None:
    """No top bar: its hidden toggles would capture the themes' click handlers (item 8)."""
    options = dict(config.html_theme_options or {})
    options.setdefault("navbar_persistent", [])
    config.html_theme_options = options


FONTAWESOME_SCRIPT = re.compile(r'[ \t]*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')


#: The search's scripts, which pydata-sphinx-theme loads on every page for a search-as-you-type it
#: leaves off (its option ``search_as_you_type``): the index alone is about 300 kB.
SEARCH_SCRIPTS = re.compile(
    r'[ \t]*<script src="[^"]*(?:_static/searchtools\.js|_static/language_data\.js|searchindex\.js)[^"]*">'
    r'</script>\n?')


def drop_fontawesome_script(app: Sphinx, exception: Exception | None) -> None:
    """Remove the theme's 1.5 MB fontawesome.js from every page and from _static (item 9), and the
    search's scripts and index from every page but the search page (item 16)."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    search_page = out / "search.html"
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        if page != search_page:
            lighter = SEARCH_SCRIPTS.sub("", lighter)
        if lighter != text:
            page.write_text(lighter, encoding="utf8")
    for name in ("fontawesome.js", "fontawesome.js.map", "fontawesome.js.LICENSE.txt"):
        (out / "_static" / "scripts" / name).unlink(missing_ok=True)


_PLOT_CALL = re.compile(r"\b(?:sl|scalelib)\.((?:plot|draw|animate)_\w+)\s*\(")
_TITLE_CALL = re.compile(r"""\.(?:set_title|suptitle|title)\(\s*(f?)(["'])(.+?)\2""")


def _first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    end = text.find(". ")
    return (text if end < 0 else text[:end + 1]).strip()


def _helper_description(name: str) -> str:
    try:
        import scalelib
    except ImportError:  # pragma: no cover - the site is built with scalelib installed
        return ""
    return _first_sentence(getattr(getattr(scalelib, name, None), "__doc__", "") or "")


def _section_title(node: nodes.Node) -> str:
    while node is not None:
        if isinstance(node, nodes.section) and node.children and isinstance(node[0], nodes.title):
            return node[0].astext().strip()
        node = node.parent
    return ""


def figure_alt_text(code: str, section: str) -> str:
    """What a figure that `code` draws shows, for its alt text (never its file name)."""
    where = f" (section “{section}”)" if section else ""
    helpers = list(dict.fromkeys(_PLOT_CALL.findall(code)))
    described = [d for d in (_helper_description(h) for h in helpers) if d]
    if described:
        return " ".join(described).rstrip(".") + where
    # An f-string's fields are values the cell computes: left out ("B = … tokens").
    titles = [re.sub(r"\{[^{}]*\}", "…", m.group(3)) if m.group(1) else m.group(3) for m in _TITLE_CALL.finditer(code)]
    if titles:
        return "Figure: " + "; ".join(titles) + where
    return f"Figure drawn by the code above{where}" if section else "Figure drawn by the code above"


_RAW_IMG_NO_ALT = re.compile(r"<img\b(?![^>]*\balt=)", re.IGNORECASE)


def describe_figures(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Alt text for every image a code cell outputs (item 10)."""
    for image in list(doctree.findall(nodes.image)):
        if image.get("alt") and image["alt"] != image.get("uri"):
            continue
        cell = image.parent
        while cell is not None and "cell" not in cell.get("classes", []):
            cell = cell.parent
        if cell is None:
            continue
        code = "\n".join(block.astext() for block in cell.findall(nodes.literal_block)
                         if block.parent is not None and "cell_input" in block.parent.get("classes", []))
        image["alt"] = figure_alt_text(code, _section_title(cell))
    for raw in list(doctree.findall(nodes.raw)):
        if raw.get("format") != "html":
            continue
        text = externalize_images(app, docname, raw.astext())
        if "<img" in text.lower():
            section = _section_title(raw)
            alt = f'alt="Frame of the animation in “{section}”" ' if section else 'alt="Animation frame" '
            text = _RAW_IMG_NO_ALT.sub(lambda m: m.group(0) + " " + alt, text)
        if text != raw.astext():
            raw.replace_self(nodes.raw("", text, format="html"))


#: A PNG or JPEG written into a raw HTML output as a data: URI in a JavaScript string (an animation's
#: frames, matplotlib's to_jshtml), the base64 text possibly split by backslash-newlines.
_INLINE_IMAGE = re.compile(r'"data:image/(png|jpeg);base64,((?:[A-Za-z0-9+/=]|\\\n)+)"')


def externalize_images(app: Sphinx, docname: str, html: str) -> str:
    """`html` with each inline data: image of a JavaScript string replaced by the URL of a file
    written to the site's _images/ (named by its hash): an animation's frames no longer weigh on
    its page's HTML, and a browser fetches each frame once, when shown (item 12)."""
    import base64
    import hashlib

    if app.builder.format != "html" or "data:image/" not in html:
        return html
    folder = Path(app.outdir) / "_images"
    prefix = "" if app.builder.name == "singlehtml" else "../" * docname.count("/")

    def write(match: re.Match) -> str:
        data = base64.b64decode(match.group(2).replace("\\\n", ""))
        name = hashlib.sha256(data).hexdigest()[:32] + (".png" if match.group(1) == "png" else ".jpg")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / name).is_file():
            (folder / name).write_bytes(data)
        return f'"{prefix}_images/{name}"'

    return _INLINE_IMAGE.sub(write, html)


#: The course's PDF edition, at the top of the site (scalelib.course.pdf copies it there).
COURSE_PDF = "how-to-scale-your-model.pdf"


def link_course_pdf(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """The download menu's ".pdf" opens the course's PDF, not the browser's print dialog (item 11)."""
    pathto = context.get("pathto")
    for group in context.get("header_buttons") or []:
        if group.get("label") != "download-buttons" or pathto is None:
            continue
        for i, button in enumerate(group.get("buttons") or []):
            if button.get("label") == "download-pdf-button":
                group["buttons"][i] = {
                    "type": "link",
                    "url": pathto(COURSE_PDF, 1),
                    "text": "course .pdf",
                    "tooltip": "The whole course as one PDF",
                    "icon": "fas fa-file-pdf",
                    "label": "download-pdf-button",
                }


def canonical_address(app: Sphinx, config: Config) -> None:
    """Pages name their published address (``<link rel="canonical">``): GitHub Pages' address of the
    repository in the config (``repository: url:``, the one place it is kept; item 15)."""
    if config.html_baseurl:
        return
    from scalelib.course.authoring import pages_url

    config.html_baseurl = pages_url(BOOK_DIR / "_config.yml")


def rank_search_results(app: Sphinx, config: Config) -> None:
    """The search ranks the chapter that teaches a word above the exercises that use it
    (``book/_ext/course-scorer.js``, Sphinx's html_search_scorer; item 16)."""
    if not config.html_search_scorer:
        config.html_search_scorer = str(Path(__file__).with_name("course-scorer.js"))


def add_course_css(app: Sphinx, config: Config) -> None:
    """Serve book/_static (course.css) and link course.css from every page; numpy's array type,
    which the offline build cannot link to (no intersphinx), is not reported as a missing target."""
    config.html_static_path = [*config.html_static_path, str(BOOK_DIR / "_static")]
    config.nitpick_ignore = {*map(tuple, config.nitpick_ignore), ("py:class", "numpy.ndarray")}


SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def hide_solution_markers(app: Sphinx, docname: str, source: list[str]) -> None:
    """Drop the solution-region marker lines from a notebook's code cells (the page only)."""
    if not app.env.doc2path(docname).endswith(".ipynb") or "### BEGIN SOLUTION" not in source[0]:
        return
    import json

    nb = json.loads(source[0])
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            lines = "".join(cell["source"]).split("\n")
            cell["source"] = "\n".join(line for line in lines if not SOLUTION_MARKER.match(line))
    source[0] = json.dumps(nb)


#: A Markdown link to a solutions/ page, with the " · " that may join it to the link before it.
SOLUTION_LINK = re.compile(r"(\s*(?:·|\\u00b7)\s*)?\[([^\]\n]*)\]\((?:\.\./|\./)?solutions/[^)\s]*\)")


def unlink_solutions(text: str) -> str:
    """`text` with its links to solutions/ pages made plain text (or dropped after a " · ")."""
    return SOLUTION_LINK.sub(lambda m: "" if m.group(1) else m.group(2), text)


def unlink_solution_pages(app: Sphinx, docname: str, source: list[str]) -> None:
    """In a site built without the solution pages, no page links to them."""
    if os.environ.get("SCALELIB_SITE_SOLUTIONS", "yes") == "no" and "solutions/" in source[0]:
        source[0] = unlink_solutions(source[0])


def site_digest() -> str:
    """A hash of the local extensions (book/_ext) and of book/_static: a config value, so that a change to either
    rewrites every page (Sphinx otherwise rewrites only the pages whose source changed)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.iterdir()):  # this extension, its siblings and course-scorer.js
        if path.is_file() and path.suffix in (".py", ".js"):
            digest.update(path.name.encode() + path.read_bytes())
    for path in sorted((BOOK_DIR / "_static").iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("course_site_digest", site_digest(), "env")
    app.setup_extension("sphinxcontrib.katex")
    app.connect("source-read", hide_solution_markers)
    app.connect("source-read", unlink_solution_pages)
    app.connect("config-inited", add_course_css)
    app.connect("config-inited", canonical_address)
    app.connect("config-inited", rank_search_results)
    app.connect("config-inited", no_top_bar)
    app.connect("doctree-resolved", describe_figures)
    app.connect("build-finished", drop_fontawesome_script)
    app.connect("html-page-context", link_course_pdf, priority=600)
    app.add_css_file("course.css")
    app.add_js_file("course-search.js", loading_method="defer")
    app.add_js_file("course-scroll.js", loading_method="defer")
    app.connect("config-inited", use_npm_katex)
    app.connect("builder-inited", copy_katex_assets)
    app.connect("builder-inited", start_katex_server)
    app.connect("doctree-resolved", unnumber_amsmath_lines)
    app.connect("doctree-resolved", check_math, priority=600)
    # Late, so scripts that other extensions add to this page are seen too.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    # One KaTeX renderer socket per build: not for parallel writing.
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": False}
