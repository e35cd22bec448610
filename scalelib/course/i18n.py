"""The language the checker and the grader speak: English, or Russian from a gettext catalog.

Every learner- and instructor-facing message of ``scalelib.course`` is written in English as a
template with named placeholders and passed through :func:`_` *before* it is formatted::

    _("your answer {shown} is not a finite number").format(shown=shown)

so that the exact English text is the catalog's msgid. Texts that are not literals where they are
shown (an exercise's registered title, slips, reason and formula, the common slips' texts) are
marked where they are written with :func:`N_` (an identity) and translated where they are shown
with :func:`translate`; an answer key's texts are not marked at all: the translation pipeline
extracts them from the registry (``locales/ru/answer_key/chNN.po``).

The language is, in order: the one :func:`set_language` set in this process (a Russian notebook's
setup cell sets ``"ru"``), else the environment variable :data:`LANGUAGE_ENV` (``SCALELIB_LANG``,
which the grader sets for a Russian notebook's kernel), else English. Translations are read at run
time from ``scalelib/course/locale/<lang>.json`` ({msgid: msgstr}), which :func:`compile_messages`
makes from the ``.po`` catalogs; a msgid without a translation reads in English.

Keeping the catalogs in step (what ``scalelib translate`` runs)::

    write_catalog(update_catalog(extract_messages(), "locales/ru/scalelib/course.po"),
                  "locales/ru/scalelib/course.po")  # new msgids untranslated, changed ones fuzzy
    compile_messages(catalog_paths("ru"), LOCALE_DIR / "ru.json")  # course.po, then locales/ru/answer_key/*.po

The formula library never imports this module (its errors are API messages and stay English).
"""

from __future__ import annotations

import ast
import json
import os
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from .._errors import InvalidValueError

#: The languages the course speaks.
LANGUAGES = ("en", "ru")
#: The environment variable that names the language when no :func:`set_language` did.
LANGUAGE_ENV = "SCALELIB_LANG"
#: Where the compiled catalogs live (package data: a wheel and a Colab install ship them).
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: The folder of the course machinery's sources whose ``_()`` and ``N_()`` literals make up its catalog.
SOURCE_DIR = Path(__file__).resolve().parent

_explicit: str | None = None


def _checked(lang, where: str) -> str:
    if not isinstance(lang, str) or lang.strip().lower() not in LANGUAGES:
        raise InvalidValueError(f"{where} must be one of {', '.join(map(repr, LANGUAGES))}, got {lang!r}")
    return lang.strip().lower()


def set_language(lang: str | None) -> None:
    """Make `lang` (``"en"`` or ``"ru"``) the language of this process's feedback; None goes back to the
    environment variable :data:`LANGUAGE_ENV` (else English).

    >>> set_language("ru"); language()
    'ru'
    >>> set_language(None)
    """
    global _explicit
    _explicit = None if lang is None else _checked(lang, "`lang`")


def language() -> str:
    """The language feedback is given in: :func:`set_language`'s, else ``$SCALELIB_LANG``'s, else ``"en"``.

    Raises:
        InvalidValueError: ``SCALELIB_LANG`` names a language the course does not speak.
    """
    if _explicit is not None:
        return _explicit
    env = os.environ.get(LANGUAGE_ENV, "")
    if env.strip():
        return _checked(env, f"the environment variable {LANGUAGE_ENV}")
    return "en"


def trusted_language(value) -> str:
    """`value` (read from a submitted notebook's metadata, say) if it names a language of :data:`LANGUAGES`,
    else English: nothing else from a notebook is believed.

    >>> trusted_language("ru"), trusted_language("de"), trusted_language({"x": 1})
    ('ru', 'en', 'en')
    """
    return value if isinstance(value, str) and value in LANGUAGES else "en"


@contextmanager
def using_language(lang: str):
    """Speak `lang` inside the block (the grader gives each notebook's feedback in that notebook's language)."""
    global _explicit
    before = _explicit
    _explicit = _checked(lang, "`lang`")
    try:
        yield
    finally:
        _explicit = before


@lru_cache(maxsize=None)
def _catalog(lang: str) -> dict:
    path = LOCALE_DIR / f"{lang}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no catalog shipped (the grading kernel's copy has none): English
        return {}
    return data if isinstance(data, dict) else {}


def translate(text: str) -> str:
    """`text` (an exact English msgid) in the current language; `text` itself when it has no translation."""
    lang = language()
    if lang == "en" or not isinstance(text, str) or not text:
        return text
    found = _catalog(lang).get(text)
    return found if isinstance(found, str) and found else text


def _(msgid: str) -> str:
    """The translation of the literal English template `msgid` (format it afterwards, never before)."""
    return translate(msgid)


def N_(msgid: str) -> str:
    """Mark the literal `msgid` for the catalog without translating it (it is translated where it is shown)."""
    return msgid


# ---------------------------------------------------------------------------
# Catalogs: extracting, updating, compiling

_MARKERS = ("_", "N_")
_VERSION = "0.1.0"
_HEADER = ("# Messages of scalelib.course (the checker, the grader, their feedback) in one language.\n"
           "# Made and updated by scalelib.course.i18n (extract_messages, update_catalog); translate it in\n"
           "# any .po editor. Keep every {placeholder}, number, unit, emoji and piece of code as it is.")
#: A placeholder of a template: ``{name}``, ``{name:,}``, ``{name!r}`` (``{{`` and ``}}`` are literal braces).
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)(?:![rsa])?(?::[^{}]*)?\}(?!\})")


def placeholders(text: str) -> list[str]:
    """The named placeholders of a template, sorted.

    >>> placeholders("value {index} of {shown:,} ({shown})")
    ['index', 'shown', 'shown']
    """
    return sorted(_PLACEHOLDER.findall(text))


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _MARKERS:
            yield node


def source_files(folder: Path | None = None) -> list[Path]:
    """The course machinery's modules scanned for messages (``scalelib/course/*.py``)."""
    return sorted((folder or SOURCE_DIR).glob("*.py"))


def marked_literals(paths=None) -> list[tuple[str, str, int]]:
    """(msgid, file name, line) of every ``_("...")`` and ``N_("...")`` whose argument is one string literal."""
    found = []
    for path in paths or source_files():
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in _calls(tree):
            if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                found.append((node.args[0].value, Path(path).name, node.lineno))
    return found


def unmarked_calls(paths=None) -> list[tuple[str, int, str]]:
    """(file name, line, source) of every ``_()`` or ``N_()`` call whose argument is not one string literal:
    its text could not be extracted, so nothing may call them so (use :func:`translate` for a text marked
    elsewhere)."""
    bad = []
    for path in paths or source_files():
        text = Path(path).read_text(encoding="utf-8")
        for node in _calls(ast.parse(text)):
            if not (len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                bad.append((Path(path).name, node.lineno, ast.get_source_segment(text, node) or ""))
    return bad


def extract_messages(paths=None):
    """A babel ``Catalog`` (the template) of every literal ``_()`` and ``N_()`` msgid of ``scalelib/course/*.py``,
    each with the places it is used."""
    from babel.messages.catalog import Catalog

    catalog = Catalog(project="scalelib", version=_VERSION, fuzzy=False, charset="utf-8")
    for msgid, name, _line in marked_literals(paths):  # files only: a line number would change with every edit
        catalog.add(msgid, locations=[(f"scalelib/course/{name}", None)], flags=_flags(msgid))
    return catalog


def _flags(msgid: str) -> tuple[str, ...]:
    return ("python-brace-format",) if placeholders(msgid) else ()


def read_catalog(path, locale: str = "ru"):
    """The babel ``Catalog`` of the ``.po`` file at `path`."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as f:
        return read_po(f, locale=locale)


def update_catalog(template, path, locale: str = "ru"):
    """The catalog at `path` (a new one if there is none) brought up to `template`: existing translations kept,
    a changed msgid's translation carried over fuzzy (babel's matching), new msgids added untranslated,
    msgids gone from the template dropped."""
    from babel.messages.catalog import Catalog

    path = Path(path)
    if path.exists():
        catalog = read_catalog(path, locale)
    else:
        catalog = Catalog(locale=locale, project="scalelib", version=_VERSION, fuzzy=False, charset="utf-8",
                          header_comment=_HEADER, last_translator="scalelib course translators",
                          msgid_bugs_address="https://github.com/scalelib/scaling-course/issues",
                          language_team=f"scalelib course ({locale})")
    catalog.update(template, update_header_comment=False)
    catalog.obsolete.clear()
    return catalog


def write_catalog(catalog, path) -> Path:
    """Write `catalog` as a ``.po`` file at `path` (sorted by msgid, no line wrapping, no dates in the
    header), so that the same catalog always gives the same bytes."""
    from babel.messages.pofile import write_po

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    catalog.creation_date = catalog.revision_date = _EPOCH
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, sort_output=True, omit_header=False, ignore_obsolete=True)
    return path


def _epoch():
    from datetime import datetime, timezone

    return datetime(2026, 1, 1, tzinfo=timezone.utc)


_EPOCH = _epoch()


#: The catalogs of a source checkout: ``locales/<lang>/scalelib/course.po`` (these messages) and
#: ``locales/<lang>/answer_key/chNN.po`` (the answer keys' registry texts).
LOCALES_DIR = Path(__file__).resolve().parents[2] / "locales"


def catalog_paths(lang: str = "ru", root: Path | None = None) -> list[Path]:
    """The ``.po`` files compiled into ``locale/<lang>.json``, in order (the first that translates a msgid wins):
    the course's messages, then the answer keys' catalogs that exist, by chapter."""
    root = Path(root) if root is not None else LOCALES_DIR
    paths = [root / lang / "scalelib" / "course.po"]
    return paths + sorted((root / lang / "answer_key").glob("*.po"))


def compiled_messages(po_paths) -> dict[str, str]:
    """{msgid: msgstr} of every translated, non-fuzzy entry of the ``.po`` files `po_paths` (the first file that
    translates a msgid wins)."""
    out: dict[str, str] = {}
    for path in po_paths:
        for message in read_catalog(path):
            if not message.id or not isinstance(message.id, str) or not isinstance(message.string, str):
                continue  # the header, or a plural entry (none is used)
            if message.fuzzy or not message.string:
                continue
            out.setdefault(message.id, message.string)
    return out


def compiled_text(po_paths) -> str:
    """The JSON :func:`compile_messages` writes for `po_paths`: sorted keys, UTF-8, one entry a line."""
    return json.dumps(compiled_messages(po_paths), ensure_ascii=False, indent=0, sort_keys=True) + "\n"


def compile_messages(po_paths, out_path) -> Path:
    """Compile the ``.po`` files `po_paths` into the JSON catalog `out_path` read at run time (only translated,
    non-fuzzy entries); the same catalogs always give the same bytes."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(compiled_text(po_paths), encoding="utf-8")
    _catalog.cache_clear()
    return out_path
