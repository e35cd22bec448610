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
   and tables scroll within their box on a phone).
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


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinxcontrib.katex")
    app.connect("source-read", hide_solution_markers)
    app.connect("source-read", unlink_solution_pages)
    app.connect("config-inited", add_course_css)
    app.add_css_file("course.css")
    app.connect("config-inited", use_npm_katex)
    app.connect("builder-inited", copy_katex_assets)
    app.connect("builder-inited", start_katex_server)
    app.connect("doctree-resolved", unnumber_amsmath_lines)
    app.connect("doctree-resolved", check_math, priority=600)
    # Late, so scripts that other extensions add to this page are seen too.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    # One KaTeX renderer socket per build: not for parallel writing.
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": False}
