"""The Russian edition, generated from the English one and gettext catalogs (``scalelib translate``).

The English notebooks and pages stay the only source of content and code. Their prose is
cut into *units* and kept in standard gettext catalogs under ``locales/ru/``, one per
notebook or page (Poedit, Weblate or Crowdin open them):

* a Markdown cell or page is cut into blocks (paragraphs, headings, list and table blocks);
  code fences, display math, HTML comments (the solution markers), labels and style blocks
  stay as they are;
* a code cell gives its prose string literals (figure titles, axis labels, printed headers,
  docstrings) and its comments; code, numbers and identifiers are never units;
* a figure's alt text and caption (cell metadata ``mystnb.image.alt``, ``mystnb.figure.caption``);
* the table of contents' captions; the exercises' registry texts (title, hints, reasons,
  formulas), one catalog per chapter, which the checker looks up at run time.

``scalelib translate update`` rewrites the catalogs from the English: translations kept,
a changed unit marked fuzzy (with its previous English), a new one untranslated, a removed
one dropped. ``scalelib translate generate`` writes the Russian notebooks (``book/ru/``,
``solutions/ru/``, ``exercises/ru/`` generated from ``solutions/ru/`` exactly as
``exercises/`` is from ``solutions/``), the Russian pages and table of contents, from the
English plus the catalogs; ``--check`` only reports what is out of date. A unit without a
translation (or a fuzzy one) stays English there; the tests fail on any.
"""

from __future__ import annotations

import copy
import datetime as _dt
import io
import json
import posixpath
import re
import tokenize
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .authoring import (ANSWER_STUB, CODE_STUB, COLAB_LINK_PREFIX, RAISE_STUB, AuthoringError, Drift, apply_drift,
                        chapter_of, generate_exercise_notebook, notebook_text)

#: The editions' languages besides English, and the folder name of each edition.
LANGUAGE = "ru"
LOCALES = Path("locales") / LANGUAGE

#: Label of the "Open in Colab" line in the Russian notebooks.
COLAB_LABEL = "Открыть в Colab"

#: The exercise notebooks' stubs (scalelib.course.authoring), as the Russian exercise notebooks write them.
STUBS = {ANSWER_STUB: "None  # ВАШ ОТВЕТ ЗДЕСЬ", CODE_STUB: "# ВАШ КОД ЗДЕСЬ",
         RAISE_STUB: 'raise NotImplementedError("напишите здесь своё решение")'}

#: English notebook folders with a Russian edition (exercises/ru is generated from solutions/ru).
NOTEBOOK_DIRS = ("book", "solutions")
#: The Markdown pages of the site translated with the chapters.
PAGES = ("book/intro.md", "book/instructors.md", "book/formulas.md", "book/book-map.md")
TOC = "book/_toc.yml"
CONFIG = "book/_config.yml"
#: The README's learner steps (its section on working an exercise): in Russian beside the Russian
#: exercise notebooks, where GitHub shows a folder's README.
README = "README.md"
README_SECTION = "## Working an exercise"
README_RU = "exercises/ru/README.md"

# A fixed date in the catalogs' headers: regenerating an unchanged catalog gives the same bytes.
_DATE = _dt.datetime(2026, 12, 5, tzinfo=_dt.timezone.utc)


class TranslationError(AuthoringError):
    """A catalog or a source that cannot be read or used."""


# ---------------------------------------------------------------------------
# Units of Markdown

_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})")
_LABEL = re.compile(r"^\s*\([\w.:-]+\)=\s*$")
_COMMENT_LINE = re.compile(r"^\s*<!--.*-->\s*$")
_MATH_SPAN = re.compile(r"\$\$.*?\$\$|\$[^$]+\$", re.S)
_CODE_SPAN = re.compile(r"`[^`]+`")
_ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
_TAG = re.compile(r"<[^>]+>")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")


def _has_prose(text: str) -> bool:
    """True when `text` holds words once math, code, roles, tags and link targets are taken out."""
    bare = _LINK_TARGET.sub("]", _TAG.sub(" ", _ROLE.sub(" ", _CODE_SPAN.sub(" ", _MATH_SPAN.sub(" ", text)))))
    return len(re.findall(r"[^\W\d_]{2,}", bare)) >= 1


def markdown_pieces(text: str) -> list[tuple[bool, str]]:
    """`text` cut into ``(translatable, piece)`` pairs whose pieces join back to `text` exactly.

    A translatable piece is one block of prose (a paragraph, a heading, a list or a table)
    without the structural lines around it (solution markers, labels); everything else
    (fenced code or directives' fences, display math, ``<style>`` blocks, blank lines) is kept.

    >>> markdown_pieces("# Title\\n\\nSome text.\\n")
    [(True, '# Title'), (False, '\\n\\n'), (True, 'Some text.'), (False, '\\n')]
    """
    lines = text.split("\n")
    pieces: list[tuple[bool, str]] = []

    def raw(s: str) -> None:
        if pieces and not pieces[-1][0]:
            pieces[-1] = (False, pieces[-1][1] + s)
        else:
            pieces.append((False, s))

    def block(block_lines: list[str]) -> None:
        # structural lines at either end stay out of the unit
        head, tail = [], []
        while block_lines and (_COMMENT_LINE.match(block_lines[0]) or _LABEL.match(block_lines[0])):
            head.append(block_lines.pop(0))
        while block_lines and _COMMENT_LINE.match(block_lines[-1]):
            tail.insert(0, block_lines.pop())
        if head:
            raw("\n".join(head) + ("\n" if block_lines or tail else ""))
        if block_lines:
            body = "\n".join(block_lines)
            if _has_prose(body):
                pieces.append((True, body))
            else:
                raw(body)
            if tail:
                raw("\n")
        if tail:
            raw("\n".join(tail))

    i, n = 0, len(lines)
    current: list[str] = []

    def flush() -> None:
        nonlocal current
        if current:
            block(current)
            current = []

    while i < n:
        line = lines[i]
        sep = "\n" if i < n - 1 else ""
        fence = _FENCE.match(line)
        stripped = line.strip()
        if fence or stripped.startswith("$$") or stripped.lower().startswith("<style"):
            flush()
            if fence:
                mark = fence.group(1)
                closing = lambda s, m=mark: s.strip().startswith(m[0] * len(m)) and not s.strip()[len(m):].strip()  # noqa: E731
                opens_directive = mark[0] in ":`" and "{" in line
                j = i + 1
                while j < n and not closing(lines[j]):
                    j += 1
                inner = lines[i + 1:j]
                if mark[0] == ":" and opens_directive and not line.strip().endswith("}"):
                    # a titled directive (:::{admonition} Title): the title is prose
                    raw(line + "\n")
                else:
                    raw(line + "\n")
                if mark[0] == ":" or (opens_directive and not any(k in line for k in ("code", "python", "py:"))):
                    # a directive's body is Markdown: cut it into units too
                    for translatable, piece in markdown_pieces("\n".join(inner)):
                        pieces.append((True, piece)) if translatable else raw(piece)
                    raw("\n" if inner else "")
                else:
                    raw("\n".join(inner) + ("\n" if inner else ""))
                end_line = lines[j] if j < n else ""
                raw(end_line + ("\n" if j < n - 1 else ""))
                i = j + 1
                continue
            if stripped.startswith("$$"):
                j = i
                if not (len(stripped) > 2 and stripped.endswith("$$") and stripped != "$$"):
                    j = i + 1
                    while j < n and "$$" not in lines[j]:
                        j += 1
                raw("\n".join(lines[i:j + 1]) + ("\n" if j < n - 1 else ""))
                i = j + 1
                continue
            j = i
            while j < n and "</style>" not in lines[j].lower():
                j += 1
            raw("\n".join(lines[i:j + 1]) + ("\n" if j < n - 1 else ""))
            i = j + 1
            continue
        if not stripped:
            flush()
            raw(line + sep)
            i += 1
            continue
        # a block: lines up to a blank line or a fence
        current.append(line)
        if i == n - 1 or not lines[i + 1].strip() or _FENCE.match(lines[i + 1]) \
                or lines[i + 1].strip().startswith("$$") or lines[i + 1].strip().lower().startswith("<style"):
            flush()
            raw(sep)
        i += 1
    flush()
    return [(t, p) for t, p in pieces if p]


# ---------------------------------------------------------------------------
# Units of code

#: Comments that are markers or tool directives, never prose.
_MARKER_COMMENT = re.compile(r"^#(##|\s*(noqa|type:|pragma|fmt:|isort:|%%|!))", re.I)
_FIELD = re.compile(r"\{[^{}]*\}")


def _string_parts(token: str) -> tuple[str, str, str] | None:
    """A string token's prefix, quote and content; None for bytes."""
    match = re.match(r"(?is)^([rbuf]*)('''|\"\"\"|'|\")(.*)\2$", token)
    if not match or "b" in match.group(1).lower():
        return None
    return match.group(1), match.group(2), match.group(3)


def _prose_string(prefix: str, content: str) -> bool:
    """A string literal worth translating: at least two words of letters, not an identifier or a spec."""
    bare = _FIELD.sub(" ", content) if "f" in prefix.lower() else content
    bare = re.sub(r"\\[nt]", " ", bare)
    words = re.findall(r"[^\W\d_]{2,}", bare)
    if len(words) < 2 or " " not in bare.strip():
        return False
    if "f" in prefix.lower() and _FIELD.search(content):
        return True  # words around a formatted value: a printed line
    if re.fullmatch(r"[\w.,:;|/+*%<>=()\[\]-]*( [\w.,:;|/+*%<>=()\[\]-]*)?", bare.strip()) and len(words) < 3:
        return False  # "bd,bdf->bf", "%Y %m", one or two code-like tokens
    return True


#: Calls and keywords whose string argument a figure shows (axis labels, titles, legend entries).
_LABEL_CALLS = {"set_xlabel", "set_ylabel", "set_title", "suptitle", "xlabel", "ylabel", "title", "set_label"}
_LABEL_KEYWORDS = {"label", "title", "xlabel", "ylabel"}


def _prose_comment(text: str) -> bool:
    return not _MARKER_COMMENT.match(text) and len(re.findall(r"[^\W\d_]{2,}", text)) >= 2


def code_units(source: str) -> list[tuple[tuple[int, int], tuple[int, int], str, str, str]]:
    """The translatable tokens of Python `source`: ``(start, end, kind, head, unit)``.

    `kind` is ``"string"`` or ``"comment"``; `head` what precedes the unit inside the token
    (a string's prefix and quote, a comment's ``#`` and spaces); the token ends with `unit`
    followed by the closing quote. Cells that do not tokenize (IPython magics) give none.
    """
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    significant = [tok for tok in tokens if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                                                             tokenize.INDENT, tokenize.DEDENT)]
    labels = set()  # strings a figure shows as a label or title: prose even when short
    for before, call, tok in zip(significant, significant[1:], significant[2:]):
        if tok.type == tokenize.STRING and ((call.string == "(" and before.string in _LABEL_CALLS)
                                            or (call.string == "=" and before.string in _LABEL_KEYWORDS)):
            labels.add(tok.start)
    for tok in tokens:
        if tok.type == tokenize.STRING:
            parts = _string_parts(tok.string)
            if parts and (_prose_string(parts[0], parts[2])
                          or (tok.start in labels and re.search(r"[^\W\d_]{2,}", _FIELD.sub(" ", parts[2])))):
                out.append((tok.start, tok.end, "string", parts[0] + parts[1], parts[2]))
        elif tok.type == tokenize.COMMENT:
            match = re.match(r"#+\s*", tok.string)
            text = tok.string[match.end():]
            if _prose_comment(tok.string) and text:
                out.append((tok.start, tok.end, "comment", match.group(), text))
    return out


def _offset(source: str, position: tuple[int, int]) -> int:
    line, col = position
    starts = [0]
    for match in re.finditer("\n", source):
        starts.append(match.end())
    return starts[line - 1] + col


def translate_code(source: str, tr) -> str:
    """`source` with each translatable token's unit replaced by ``tr(unit)``."""
    out, pos = [], 0
    for start, end, kind, head, unit in code_units(source):
        a, b = _offset(source, start), _offset(source, end)
        out.append(source[pos:a])
        token = source[a:b]
        tail = token[len(head) + len(unit):]
        out.append(head + tr(unit) + tail)
        pos = b
    out.append(source[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------
# Units of a notebook

#: The first line of the setup cell, which is kept English (it is written by ``scalelib sync-setup``).
SETUP_COMMENT = "# Setup:"
#: The line the Russian notebooks' setup cell adds: the checks' feedback in Russian.
LANGUAGE_LINE = f'os.environ["SCALELIB_LANG"] = "{LANGUAGE}"'


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _is_setup(cell) -> bool:
    return cell.cell_type == "code" and SETUP_COMMENT in _source(cell)


@dataclass(frozen=True)
class Unit:
    """One string to translate, where it comes from and what kind of text it is."""

    text: str
    where: str
    kind: str


def notebook_units(nb, name: str) -> list[Unit]:
    """Every unit of notebook `nb` (named `name` in the catalog's locations), in order."""
    units = []
    for index, cell in enumerate(nb.cells, start=1):
        where = f"{name}:{index}"
        source = _source(cell)
        if cell.cell_type == "markdown":
            units += [Unit(p, where, "markdown") for t, p in markdown_pieces(_markdown_without_colab(source)) if t]
        elif cell.cell_type == "code" and not _is_setup(cell):
            units += [Unit(u[4], where, "code " + u[2]) for u in code_units(source)]
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        if isinstance(alt, str) and alt.strip():
            units.append(Unit(alt, where, "alt text"))
        caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption")
        if isinstance(caption, str) and caption.strip():
            units.append(Unit(caption, where, "figure caption"))
    return units


def _markdown_without_colab(source: str) -> str:
    return "\n".join(line for line in source.split("\n") if not line.startswith(COLAB_LINK_PREFIX))


def readme_section(text: str) -> str:
    """The README's section for learners: from its heading to the next heading of its level."""
    start = text.index(README_SECTION)
    following = re.search(r"^## ", text[start + len(README_SECTION):], re.M)
    end = start + len(README_SECTION) + following.start() if following else len(text)
    return text[start:end].rstrip("\n") + "\n"


def page_units(text: str, name: str) -> list[Unit]:
    return [Unit(p, name, "markdown") for t, p in markdown_pieces(text) if t]


def toc_units(toc_text: str, name: str = TOC, config_text: str = "") -> list[Unit]:
    """The captions of the table of contents, and the site's title (from the book's configuration)."""
    units = []
    if config_text:
        import yaml

        units.append(Unit(str(yaml.safe_load(config_text)["title"]), CONFIG, "title"))
    return units + [Unit(m.group(1), name, "caption") for m in re.finditer(r'caption:\s*"([^"]+)"', toc_text)]


def answer_key_units(chapter: int) -> list[Unit]:
    """The registry texts of chapter `chapter`'s exercises (the checker looks them up at run time)."""
    from . import check

    check._load_chapter(chapter)
    units = []
    for exercise_id in check.exercises(chapter):
        exercise = check.get_exercise(exercise_id)
        where = f"scalelib/course/answer_key/ch{chapter:02d}.py"
        texts = [("title", exercise.title), ("reason", exercise.reason), ("formula", exercise.formula)]
        texts += [("hint", text) for text in exercise.mistakes.values()]
        texts += [("hint", text) for _, text in exercise.wrong]
        texts += [("rule", getattr(exercise.rule, "why", ""))]
        units += [Unit(text, where, f"{kind} of exercise {exercise_id}") for kind, text in texts
                  if isinstance(text, str) and _has_prose(text)]
    return units


# ---------------------------------------------------------------------------
# Catalogs


def _catalog(units: Iterable[Unit], project: str):
    from babel.messages.catalog import Catalog

    catalog = Catalog(locale=LANGUAGE, project=project, version="1", copyright_holder="the course's authors",
                      msgid_bugs_address="", creation_date=_DATE, revision_date=_DATE, fuzzy=False,
                      language_team="Russian", last_translator="the course's translators")
    for unit in units:
        path, _, where = unit.where.rpartition(":")
        location = (path, int(where)) if where.isdigit() else (unit.where, None)
        if unit.text in catalog:
            message = catalog[unit.text]
            if location not in message.locations:
                message.locations.append(location)
        else:
            catalog.add(unit.text, locations=[location], auto_comments=[unit.kind])
    return catalog


def read_catalog(path: Path):
    from babel.messages.pofile import read_po

    try:
        with open(path, "rb") as f:
            return read_po(f, locale=LANGUAGE)
    except Exception as err:  # noqa: BLE001 - any unreadable catalog is named with its error
        raise TranslationError(f"{path}: not a readable gettext catalog ({type(err).__name__}: {err})") from None


def catalog_text(catalog) -> str:
    from babel.messages.pofile import write_po

    buffer = io.BytesIO()
    catalog.creation_date = catalog.revision_date = _DATE
    write_po(buffer, catalog, width=0, sort_output=False, ignore_obsolete=True, include_previous=True)
    return buffer.getvalue().decode("utf-8")


def translations(catalog) -> dict[str, str]:
    """msgid -> msgstr of the translated, non-fuzzy entries of `catalog`."""
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy and isinstance(m.id, str)}


def sources(root=".") -> dict[Path, tuple[str, list[Unit]]]:
    """Catalog path -> (project name, the English units it holds), for every source of the edition."""
    import nbformat

    root = Path(root)
    out: dict[Path, tuple[str, list[Unit]]] = {}
    for folder in NOTEBOOK_DIRS:
        for path in sorted((root / folder).glob("*.ipynb")):
            rel = path.relative_to(root).as_posix()
            nb = nbformat.read(str(path), as_version=4)
            out[LOCALES / folder / (path.stem + ".po")] = (rel, notebook_units(nb, rel))
    for page in PAGES:
        text = (root / page).read_text(encoding="utf-8")
        out[LOCALES / Path(page).with_suffix(".po")] = (page, page_units(text, page))
    out[LOCALES / "README.po"] = (README, page_units(readme_section((root / README).read_text(encoding="utf-8")),
                                                    README))
    out[LOCALES / "book" / "_toc.po"] = (TOC, toc_units((root / TOC).read_text(encoding="utf-8"),
                                                        config_text=(root / CONFIG).read_text(encoding="utf-8")))
    for chapter in range(1, 13):
        out[LOCALES / "answer_key" / f"ch{chapter:02d}.po"] = (f"answer_key/ch{chapter:02d}",
                                                              answer_key_units(chapter))
    return out


def update_catalogs(root=".", check: bool = False) -> list[Drift]:
    """Rewrite every catalog from the English sources (translations kept, changes fuzzy, new untranslated)."""
    root = Path(root)
    drift = []
    for rel, (project, units) in sources(root).items():
        template = _catalog(units, project)
        path = root / rel
        if path.exists():
            catalog = read_catalog(path)
            catalog.update(template, no_fuzzy_matching=False, update_header_comment=False, keep_user_comments=True)
            for message in catalog:  # auto comments (the unit's kind) follow the template
                if message.id in template:
                    message.auto_comments = list(template[message.id].auto_comments)
        else:
            catalog = template
        catalog.project = project
        text = catalog_text(catalog)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            drift.append(Drift(path, "stale" if path.exists() else "missing"))
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", newline="\n")
    return drift + _update_messages(root, check)


def _update_messages(root: Path, check: bool) -> list[Drift]:
    """The checker's and grader's catalog (``locales/ru/scalelib/course.po``, scalelib.course.i18n) brought up
    to the ``_()`` messages of the sources."""
    import tempfile

    from . import i18n

    path = root / LOCALES / "scalelib" / "course.po"
    catalog = i18n.update_catalog(i18n.extract_messages(), path, LANGUAGE)
    with tempfile.TemporaryDirectory() as tmp:
        text = i18n.write_catalog(catalog, Path(tmp) / "course.po").read_text(encoding="utf-8")
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return []
    if not check:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
    return [Drift(path, "stale" if path.exists() else "missing")]


#: The messages the checker reads at run time, compiled from the catalogs (scalelib.course.i18n).
COMPILED = Path("scalelib") / "course" / "locale" / f"{LANGUAGE}.json"


def catalog_stats(root=".") -> list[dict]:
    """Per catalog: entries, translated, fuzzy, untranslated, English words."""
    root = Path(root)
    rows = []
    for path in sorted((root / LOCALES).rglob("*.po")):
        catalog = read_catalog(path)
        entries = [m for m in catalog if m.id]
        rows.append(dict(catalog=path.relative_to(root).as_posix(), entries=len(entries),
                         translated=sum(1 for m in entries if m.string and not m.fuzzy),
                         fuzzy=sum(1 for m in entries if m.fuzzy),
                         untranslated=sum(1 for m in entries if not m.string),
                         words=sum(len(str(m.id).split()) for m in entries)))
    return rows


# ---------------------------------------------------------------------------
# Links and anchors

def _anchors(texts: list[str]) -> list[str]:
    """The anchors MyST gives the headings of one page (its Markdown cells in order), as the book map computes
    them (:func:`scalelib.course.bookmap.markdown_headings`, with the site's MyST configuration)."""
    from .bookmap import markdown_headings

    site = _site()
    return [h.anchor for found in markdown_headings(texts, site.extensions, site.anchor_depth) for h in found
            if h.anchor]


def _site():
    from .bookmap import Site

    global _SITE
    if _SITE is None:
        _SITE = Site.read(Path(__file__).resolve().parents[2])  # the checkout: its book/_config.yml
    return _SITE


_SITE = None


#: English source -> its Russian counterpart, both relative to the repository root.
def counterpart(rel: str) -> str | None:
    path = Path(rel)
    if path.parent.as_posix() in ("book", "solutions", "exercises") and path.suffix == ".ipynb" \
            and chapter_of(path) is not None:
        return (path.parent / LANGUAGE / path.name).as_posix()
    if rel in PAGES:
        return (path.parent / LANGUAGE / path.name).as_posix()
    return None


_MD_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_HTML_HREF = re.compile(r'(<a\b[^>]*?\bhref=")([^"]+)(")')


def relink(text: str, source_rel: str, target_rel: str, anchors: dict[str, dict[str, str]]) -> str:
    """Markdown `text` of `source_rel`, moved to `target_rel`: relative links lead to the Russian pages.

    `anchors` maps an English page (relative to the root) to {English anchor: Russian anchor}.
    """
    src_dir, dst_dir = posixpath.dirname(source_rel), posixpath.dirname(target_rel)

    def fix(match: re.Match) -> str:
        link = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I) or link.startswith("/"):
            return match.group(0)
        path, _, anchor = link.partition("#")
        if not path:  # an anchor on the same page
            mapped = anchors.get(source_rel, {}).get(anchor, anchor)
            return f"{match.group(1)}#{mapped}{match.group(3)}"
        english = posixpath.normpath(posixpath.join(src_dir, path))
        russian = counterpart(english)
        new_target = russian or english
        new = posixpath.relpath(new_target, dst_dir or ".")
        if anchor:
            anchor = anchors.get(english, {}).get(anchor, anchor) if russian else anchor
            new += "#" + anchor
        return f"{match.group(1)}{new}{match.group(3)}"

    return _HTML_HREF.sub(fix, _MD_LINK.sub(fix, text))


# ---------------------------------------------------------------------------
# Generation


def _translator(catalog_path: Path):
    table = translations(read_catalog(catalog_path)) if catalog_path.exists() else {}
    return lambda text: table.get(text, text)


#: A figure reference inside a sentence. Sphinx's Russian label "Рис. %s" suits a caption or a sentence's start;
#: inside a sentence Russian writes it in lower case ("на рис. 5.1", "(рис. 2.3)").
FIGURE_REF_IN_SENTENCE = "рис. %s"
_BARE_FIGURE_REF = re.compile(r"\{numref\}`(fig-[^`<>]+)`")
#: "см." or "ср." ends an abbreviation, not a sentence.
_ABBREVIATION_END = re.compile(r"(?<![^\W\d_])(?:см|ср|напр|т\. ?е)\.[ \t]*$", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?:^|\n|[.!?]|^\s*(?:[-*+]|\d+\.)|\n\s*(?:[-*+]|\d+\.))[ \t]*$")


def lowercase_figure_refs(text: str) -> str:
    """`text` with each bare ``{numref}`fig-...``` that stands inside a sentence given the in-sentence label
    (``{numref}`рис. %s <fig-...>```); one that starts a block, a list item or a sentence keeps Sphinx's
    capitalised label. ``"Как на {numref}`fig-a`."`` -> ``"Как на {numref}`рис. %s <fig-a>`."``"""
    def fix(match: re.Match) -> str:
        before = text[:match.start()]
        if _SENTENCE_START.search(before) and not _ABBREVIATION_END.search(before):
            return match.group(0)
        return "{numref}`" + FIGURE_REF_IN_SENTENCE + " <" + match.group(1) + ">`"

    return _BARE_FIGURE_REF.sub(fix, text)


def _translate_markdown(text: str, tr) -> str:
    return lowercase_figure_refs(
        "".join(tr(piece) if translatable else piece for translatable, piece in markdown_pieces(text)))


def _anchor_table(english: list[str], russian: list[str]) -> dict[str, str]:
    """English anchor -> Russian anchor of one page (its Markdown cells; its headings pair up in order)."""
    return dict(zip(_anchors(english), _anchors(russian)))


def translate_notebook(nb, rel: str, tr):
    """The Russian notebook of English notebook `nb` (at `rel`), before relinking."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        source = _source(cell)
        if cell.cell_type == "markdown":
            lines = source.split("\n")
            colab = [line for line in lines if line.startswith(COLAB_LINK_PREFIX)]
            body = _translate_markdown(_markdown_without_colab(source), tr)
            if colab:
                url = colab[0][len(COLAB_LINK_PREFIX):-1]
                url = url.replace("/" + rel, "/" + counterpart(rel))
                body = body.rstrip("\n") + "\n\n" + f"[{COLAB_LABEL}]({url})"
            cell.source = body
        elif _is_setup(cell):
            if LANGUAGE_LINE not in source:
                cell.source = source.replace("import os\n", "import os\n" + LANGUAGE_LINE + "\n", 1)
        elif cell.cell_type == "code":
            translated = translate_code(source, tr)
            if translated != source:
                cell.source = translated
                cell.outputs = []  # printed prose differs: the Russian run writes its own
                cell.execution_count = None
                tags = cell.get("metadata", {}).get("tags")
                if tags and "nbval-check-output" in tags:
                    tags.remove("nbval-check-output")
        image = cell.get("metadata", {}).get("mystnb", {}).get("image", {})
        if isinstance(image.get("alt"), str):
            image["alt"] = tr(image["alt"])
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if isinstance(figure.get("caption"), str):
            figure["caption"] = tr(figure["caption"])
    nb.metadata.setdefault("scalelib", {})["language"] = LANGUAGE
    return nb


def _markdown_cells(value) -> list[str]:
    """A page's Markdown: a notebook's Markdown cells, or a page's text."""
    return [value] if isinstance(value, str) else [_source(c) for c in value.cells if c.cell_type == "markdown"]


def editions(root=".") -> dict[Path, str]:
    """Russian file (relative path) -> its text, for the whole Russian edition."""
    import nbformat

    root = Path(root)
    english: dict[str, object] = {}
    russian: dict[str, object] = {}
    for folder in NOTEBOOK_DIRS:
        for path in sorted((root / folder).glob("*.ipynb")):
            rel = path.relative_to(root).as_posix()
            nb = nbformat.read(str(path), as_version=4)
            english[rel] = nb
            russian[rel] = translate_notebook(nb, rel, _translator(root / LOCALES / folder / (path.stem + ".po")))
    for page in PAGES:
        text = (root / page).read_text(encoding="utf-8")
        english[page] = text
        russian[page] = _translate_markdown(text, _translator(root / LOCALES / Path(page).with_suffix(".po")))
    # exercise notebooks: generated from the Russian solutions, as exercises/ is from solutions/
    for rel in [r for r in russian if r.startswith("solutions/")]:
        ex = "exercises/" + rel.split("/", 1)[1]
        english[ex] = english[rel]
        russian[ex] = generate_exercise_notebook(russian[rel], name=counterpart(rel), chapter=chapter_of(rel))
        for cell in russian[ex].cells:
            if cell.cell_type == "code":
                for stub, translated in STUBS.items():
                    cell.source = _source(cell).replace(stub, translated)
    anchors = {rel: _anchor_table(_markdown_cells(english[rel]), _markdown_cells(v)) for rel, v in russian.items()}
    out: dict[Path, str] = {}
    for rel, value in russian.items():
        target = counterpart(rel)
        if isinstance(value, str):
            out[Path(target)] = relink(value, rel, target, anchors)
        else:
            for cell in value.cells:
                if cell.cell_type == "markdown":
                    cell.source = relink(_source(cell), rel, target, anchors)
            out[Path(target)] = notebook_text(value)
    toc = (root / TOC).read_text(encoding="utf-8")
    from . import i18n

    out[COMPILED] = i18n.compiled_text(i18n.catalog_paths(LANGUAGE, root / "locales"))
    toc_tr = _translator(root / LOCALES / "book" / "_toc.po")
    readme_tr = _translator(root / LOCALES / "README.po")
    config_title = str(__import__("yaml").safe_load((root / CONFIG).read_text(encoding="utf-8"))["title"])
    section = _translate_markdown(readme_section((root / README).read_text(encoding="utf-8")), readme_tr)
    out[Path(README_RU)] = relink(f"# {toc_tr(config_title)}\n\n{section}", README, README_RU, {})
    out[Path("book") / LANGUAGE / "_toc.yml"] = russian_toc(toc, toc_tr)
    out[Path("book") / LANGUAGE / "_config.yml"] = russian_config(root / CONFIG, toc_tr)
    return out


def russian_config(config_path: Path, tr) -> str:
    """The Russian edition's Jupyter Book configuration: the English one with its title translated, Sphinx's
    language Russian (search stemming, the theme's words), the edition named for the language switch
    (``book/_ext/language_switch.py``), the published address under ``ru/``, local extensions found from
    ``book/ru/``."""
    import yaml

    from .authoring import pages_url

    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    config["title"] = tr(str(config["title"]))
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {name: "../" + path for name, path in (sphinx.get("local_extensions") or {}).items()}
    extra = sphinx.setdefault("config", {})
    extra["language"] = LANGUAGE
    extra["course_edition"] = LANGUAGE
    # MyST-NB's toggle of a folded cell (the setup cell), in the edition's language
    extra["nb_code_prompt_show"] = "Показать код ячейки"
    extra["nb_code_prompt_hide"] = "Скрыть код ячейки"
    config.setdefault("html", {})["baseurl"] = pages_url(config_path).rstrip("/") + f"/{LANGUAGE}/"
    header = ("# Generated by `scalelib translate generate` from book/_config.yml and locales/ru/book/_toc.po;\n"
              "# do not edit: run `make translations` after changing either. Build the Russian edition from the\n"
              "# repository root: jupyter-book build . --config book/ru/_config.yml --toc book/ru/_toc.yml\n")
    return header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def russian_toc(toc_text: str, tr) -> str:
    """The Russian edition's table of contents: the Russian pages, translated captions; the API page shared."""
    def entry(match: re.Match) -> str:
        path = match.group(2)
        russian = counterpart(path + (".md" if path + ".md" in PAGES else ".ipynb"))
        return match.group(1) + (str(Path(russian).with_suffix("")) if russian else path)

    text = re.sub(r'(caption:\s*")([^"]+)(")', lambda m: m.group(1) + tr(m.group(2)) + m.group(3), toc_text)
    text = re.sub(r"^(\s*(?:-\s*file|root):\s*)(\S+)", entry, text, flags=re.M)
    header = ("# Generated by `scalelib translate generate` from book/_toc.yml and locales/ru/book/_toc.po;\n"
              "# do not edit: run `make translations` after changing either.\n")
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#") or line.startswith("#!"))
    return header + body.lstrip("\n")


def generate(root=".", check: bool = False) -> list[Drift]:
    """Write the Russian edition (notebooks, pages, toc); with `check`, only report what is out of date."""
    root = Path(root)
    wanted = editions(root)
    drift = []
    for rel, text in sorted(wanted.items()):
        path = root / rel
        if not path.exists():
            drift.append(Drift(path, "missing"))
        elif path.read_text(encoding="utf-8") != text:
            drift.append(Drift(path, "stale"))
    for folder in ("book", "solutions", "exercises"):
        for path in sorted((root / folder / LANGUAGE).glob("*.ipynb")):
            if path.relative_to(root) not in wanted:
                drift.append(Drift(path, "extra"))
    if not check:
        apply_drift(drift, lambda path: wanted[path.relative_to(root)])
    return drift


def untranslated(root=".") -> list[tuple[str, str, str]]:
    """(catalog, state, msgid) for every entry that is untranslated or fuzzy."""
    root = Path(root)
    out = []
    for path in sorted((root / LOCALES).rglob("*.po")):
        for message in read_catalog(path):
            if not message.id:
                continue
            if message.fuzzy or not message.string:
                out.append((path.relative_to(root).as_posix(), "fuzzy" if message.fuzzy else "untranslated",
                            str(message.id)))
    return out


def stats_json(root=".") -> str:
    return json.dumps(catalog_stats(root), indent=1)


# ---------------------------------------------------------------------------
# What a translation must keep, and the glossary

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_URL = re.compile(r"\]\(([^)\s]+)\)")


def _kept(text: str, kind: str) -> dict[str, list[str]]:
    """What a translation of `text` must keep exactly: math, code spans, roles, fields, link targets, markers."""
    kept = {
        "math": sorted(_MATH_SPAN.findall(text)),
        "code": sorted(_CODE_SPAN.findall(_MATH_SPAN.sub(" ", text))),
        "comments": sorted(_COMMENT.findall(text)),
        "link targets": sorted(m for m in _URL.findall(text) if not m.startswith("#")),
    }
    if kind.startswith("code string"):
        kept["fields"] = sorted(_FIELD.findall(text))
        kept["escapes"] = sorted(re.findall(r"\\.", text))
    return kept


def _structure(text: str) -> list[str]:
    """Each line's Markdown lead (heading, list item, table row, quote) and the number of lines of a table."""
    lead = []
    for line in text.split("\n"):
        m = re.match(r"^\s*(#{1,6}\s|[-*+]\s|\d+\.\s|\||>)", line)
        lead.append(m.group(1).strip() if m else "")
    return lead if any(lead) else []


def _bare(text: str) -> str:
    """`text` without math, code spans, roles, fields, tags and link targets: the words a reader reads."""
    text = _FIELD.sub(" ", _MATH_SPAN.sub(" ", text))
    return _LINK_TARGET.sub("]", _TAG.sub(" ", _ROLE.sub(" ", _CODE_SPAN.sub(" ", text))))


@dataclass(frozen=True)
class Term:
    english: re.Pattern
    russian: re.Pattern
    write: str


def glossary(root=".") -> list[Term]:
    """The terms of ``locales/ru/glossary.tsv``."""
    rows = []
    path = Path(root) / LOCALES / "glossary.tsv"
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line and not line.startswith("#")]
    for line in lines[1:]:
        cells = line.split("\t")
        rows.append(Term(re.compile(cells[0], re.I), re.compile(cells[1], re.I), cells[2]))
    return rows


def latin_share(text: str) -> float:
    """The share of Latin letters among the letters of `text`'s prose (math, code and fields left out)."""
    letters = [ch for ch in _bare(text) if ch.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for ch in letters if ch.isascii()) / len(letters)


def problems(message, terms: list[Term] | None = None) -> list[str]:
    """What is wrong with the translation of one catalog entry (empty: nothing)."""
    msgid, msgstr = str(message.id), message.string
    if not msgstr or message.fuzzy:
        return []
    kind = " ".join(message.auto_comments)
    out = []
    want, got = _kept(msgid, kind), _kept(msgstr, kind)
    for what in want:
        if want[what] != got[what]:
            missing = [x for x in want[what] if x not in got[what]]
            extra = [x for x in got[what] if x not in want[what]]
            out.append(f"{what} not kept: missing {missing[:3]}, added {extra[:3]}")
    if _structure(msgid) != _structure(msgstr):
        out.append("the Markdown structure differs (headings, list items, table rows line by line)")
    if msgid.startswith((" ", "\n")) != msgstr.startswith((" ", "\n")) or \
            msgid.endswith((" ", "\n")) != msgstr.endswith((" ", "\n")):
        out.append("leading or trailing whitespace differs")
    if kind.startswith("code string") and ("\n" in msgstr) != ("\n" in msgid):
        out.append("a line break inside a string literal")
    english_letters = [ch for ch in _bare(msgid) if ch.isalpha()]
    if len(english_letters) >= 40 and latin_share(msgstr) > 0.6:
        out.append(f"mostly Latin script ({latin_share(msgstr):.0%}): not translated?")
    bare_id, bare_str = _bare(msgid), _bare(msgstr)
    for term in terms or []:
        if term.english.search(bare_id) and not term.russian.search(msgstr):
            out.append(f"glossary: {term.english.pattern!r} is written {term.write!r}")
    return out


def catalog_problems(root=".") -> list[tuple[str, str, str]]:
    """(catalog, msgid, problem) for every translated entry of every catalog."""
    root = Path(root)
    terms = glossary(root)
    out = []
    for path in sorted((root / LOCALES).rglob("*.po")):
        for message in read_catalog(path):
            if message.id:
                out += [(path.relative_to(root).as_posix(), str(message.id), p) for p in problems(message, terms)]
    return out
