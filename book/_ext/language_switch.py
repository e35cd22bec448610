"""The language switch of the course website (enabled in book/_config.yml and the generated book/ru/_config.yml).

The English edition is built into ``_build/html``, the Russian one (``scalelib translate generate``) into
``_build/html/ru``. Every page of each edition leads to the same page of the other: a link at the top of
the article (``<nav class="course-language">``), and ``<link rel="alternate" hreflang>`` in its head.

Pages are paired by their names: the English ``book/ch01_rooflines`` is the Russian ``book/ru/ch01_rooflines``
(likewise ``solutions/``, ``exercises/`` and the pages ``book/intro``, ``book/instructors``, ``book/formulas``,
``book/book-map``); a page with no Russian counterpart (the API reference, shared by both editions) has the
same name in both. The config value ``course_edition`` (``en`` or ``ru``) says which edition is being built.
The site without solutions (``make site SOLUTIONS=no``) has no Russian edition, and so no switch.
"""

from __future__ import annotations

import html
import os
import re
from typing import Any

from sphinx.application import Sphinx

#: The editions: their language code, the folder of the site they live in, and the switch's words.
EDITIONS = {"en": {"root": "", "name": "English", "label": "Language"},
            "ru": {"root": "ru/", "name": "Русский", "label": "Язык"}}
_PAIRED = re.compile(r"^(book|solutions|exercises)/(ch\d+_[\w-]+|intro|instructors|formulas|book-map)$")
_RUSSIAN = re.compile(r"^(book|solutions|exercises)/ru/([\w-]+)$")


def counterpart(pagename: str, edition: str) -> tuple[str, str]:
    """(the other edition, the other edition's page name) for `pagename` of `edition`.

    >>> counterpart("book/ch01_rooflines", "en")
    ('ru', 'book/ru/ch01_rooflines')
    >>> counterpart("exercises/ru/ch12_gpus", "ru")
    ('en', 'exercises/ch12_gpus')
    >>> counterpart("book/api", "ru")
    ('en', 'book/api')
    """
    if edition == "en":
        match = _PAIRED.match(pagename)
        if match and not (match.group(1) != "book" and not match.group(2).startswith("ch")):
            return "ru", f"{match.group(1)}/ru/{match.group(2)}"
        return "ru", pagename
    match = _RUSSIAN.match(pagename)
    return "en", (f"{match.group(1)}/{match.group(2)}" if match else pagename)


def other_edition_url(pagename: str, edition: str) -> tuple[str, str]:
    """(the other edition, the relative address of `pagename`'s counterpart from `pagename`'s own page)."""
    other, name = counterpart(pagename, edition)
    to_site_root = "../" * pagename.count("/") + ("../" if edition != "en" else "")
    return other, f"{to_site_root}{EDITIONS[other]['root']}{name}.html"


def add_switch(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    edition = app.config.course_edition
    if edition not in EDITIONS or "body" not in context or os.environ.get("SCALELIB_SITE_SOLUTIONS") == "no":
        return  # the site without solutions (make site SOLUTIONS=no) is built in English alone
    if app.builder.name != "html":
        return  # the single page the PDF is printed from (singlehtml): no switch on paper
    other, url = other_edition_url(pagename, edition)
    link = (f'<nav class="course-language" aria-label="{EDITIONS[edition]["label"]}">'
            f'<a href="{html.escape(url)}" hreflang="{other}" lang="{other}">{EDITIONS[other]["name"]}</a></nav>\n')
    context["body"] = link + context["body"]
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{other}" href="{html.escape(url)}" />')


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("course_edition", "en", "html")
    app.connect("html-page-context", add_switch)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
