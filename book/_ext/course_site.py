"""Local Sphinx extension of the course website (enabled in book/_config.yml).

1. KaTeX from npm. sphinxcontrib-katex renders every formula at build time
   (``katex_prerender``) by running node; here it is pointed at the katex
   pinned in book/package.json, and that same version's CSS and fonts are
   copied to ``_static/katex/``. Pages thus load no math asset from a CDN.
2. A formula KaTeX cannot parse is reported as a build warning (an error
   under ``-W``) instead of silently showing red source text on the page.
3. Duplicate scripts are dropped from each page. Sphinx 7 re-adds, at write
   time, every inline script an extension registered after the builder was
   created, with ``filename=''`` where the first copy has ``filename=None``;
   the two do not compare equal, so both are emitted. sphinx-thebe registers
   ``const THEBE_JS_URL = ...`` that way, and the second copy throws
   "Identifier 'THEBE_JS_URL' has already been declared" on every page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

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


_KATEX_ERROR = re.compile(r'class="katex-error"[^>]*?title="([^"]*)"')


def report_katex_errors(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    for message in _KATEX_ERROR.findall(context.get("body") or ""):
        logger.warning(
            "KaTeX could not render a formula: %s",
            message,
            location=pagename,
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


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinxcontrib.katex")
    app.connect("config-inited", use_npm_katex)
    app.connect("builder-inited", copy_katex_assets)
    app.connect("html-page-context", report_katex_errors)
    # Late, so scripts that other extensions add to this page are seen too.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
