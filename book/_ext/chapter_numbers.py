"""Local Sphinx extension of the course website (enabled in book/_config.yml): a chapter numbers its own figures
and equations.

A chapter's figures (a code cell's output with ``mystnb: figure: caption/name`` metadata) and its labelled
display equations (``$$ ... $$ (eq-label)``) are numbered by Sphinx (``numfig``, on in Jupyter Book). With no
numbered toctree, Sphinx counts them over the whole book: chapter 5's first figure would be "Fig. 24". Here
each chapter page (``book/chNN_*``, or ``book/<lang>/chNN_*`` in a translated edition) counts its own, prefixed
by its chapter: "Fig. 5.1", equation "(5.1)"; captions, ``{numref}`` and ``{eq}`` references all read these
numbers (``env.toc_fignumbers``). Other pages keep Sphinx's numbers.

Sphinx recomputes the numbers on every build and rewrites a page whose numbers changed since the last one. The
numbers it computes are put back before it compares them (and kept aside after), so a page is rewritten when
its figures change, not on every build.
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

#: A chapter's page, and the chapter's number.
CHAPTER_DOC = re.compile(r"^book/(?:[a-z]{2}(?:_[A-Za-z]+)?/)?ch(\d\d)_[^/]+$")


def chapter_of(docname: str) -> int | None:
    """The chapter number of a chapter's page (``book/ch05_training`` -> 5), else None."""
    match = CHAPTER_DOC.match(docname)
    return int(match.group(1)) if match else None


def by_chapter(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]]) -> dict:
    """Sphinx's numbers (docname -> figure type -> node id -> number) with each chapter page's counted from 1
    within the page and prefixed by the chapter, in the order Sphinx counted them."""
    numbered = {}
    for docname, by_type in fignumbers.items():
        chapter = chapter_of(docname)
        if chapter is None:
            numbered[docname] = by_type
            continue
        numbered[docname] = {figtype: {node_id: (chapter, count) for count, node_id
                                       in enumerate(sorted(numbers, key=numbers.__getitem__), 1)}
                             for figtype, numbers in by_type.items()}
    return numbered


def _put_back_sphinx_numbers(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Before Sphinx counts (priority 400 < its 500): its own numbers from the last build, to compare with."""
    kept = getattr(env, "course_sphinx_fignumbers", None)
    if kept is not None:
        env.toc_fignumbers = kept
    return []


def _number_by_chapter(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """After Sphinx counts: keep its numbers aside, and number each chapter's figures and equations by chapter."""
    env.course_sphinx_fignumbers = env.toc_fignumbers
    env.toc_fignumbers = by_chapter(env.toc_fignumbers)
    return []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-get-updated", _put_back_sphinx_numbers, priority=400)
    app.connect("env-get-updated", _number_by_chapter, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
