"""The course website's API reference and formula index, generated from scalelib's docstrings.

Course machinery, not part of the library: no scalelib module imports this one.
``scalelib api-docs`` (run by ``make exercises``) writes two MyST pages:

* ``book/api.md``: every name of ``scalelib.__all__``, rendered by Sphinx autodoc
  (with napoleon reading the Google-style sections), one section per chapter;
* ``book/formulas.md``: chapter by chapter, one block per function and method whose
  docstring has a ``Formula:`` section: the call (linked to its API entry) and the
  unit of the result, then the formula typeset by KaTeX (:func:`formula_tex`) and
  what it computes.

The docstring convention it reads::

    One-line summary.

    Formula:
        I_crit = C / W
    Args:
        chip: ...
    Returns:
        FLOP/B.
    Chapter:
        1 (Rooflines)          (or several: "3 (Sharded matrices), 12 (GPUs)")
    Example:
        >>> import scalelib
        >>> round(scalelib.critical_intensity("tpu-v5e"))
        240

A name without a Chapter section is listed under "Across the course"; one without
a Formula section is not in the formula index. The output is sorted, so the pages
change only when a docstring (or the list of public names) does; ``api-docs
--check`` and ``tests/test_api_docs.py`` report pages that drifted.

This module is also a small Sphinx extension (``scalelib.course.apidoc`` in the book's
``extra_extensions``): it shows each docstring's Formula section as a code block.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The course's chapters: number -> title.
CHAPTERS = {
    1: "Rooflines",
    2: "TPUs",
    3: "Sharded matrices",
    4: "Transformer math",
    5: "Parallelism for training",
    6: "Training LLaMA 3",
    7: "Inference",
    8: "Serving LLaMA 3",
    9: "Profiling",
    10: "Programming with JAX",
    11: "Capstone",
    12: "GPUs",
}
#: The group of the names whose docstring names no chapter.
ACROSS = "Across the course"

API_PAGE = "book/api.md"
FORMULA_PAGE = "book/formulas.md"
#: The sections every public name should have (reported by :func:`missing_sections`).
CONVENTION = ("Formula", "Chapter", "Example")

# Google-style section headers napoleon knows, plus the course's own two.
_SECTION_NAMES = {
    "args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters",
    "returns", "return", "yields", "yield", "raises", "raise", "exceptions", "warns", "warn", "warning",
    "warnings", "example", "examples", "note", "notes", "see also", "todo", "references", "attention",
    "caution", "danger", "error", "hint", "important", "tip", "attributes", "methods", "receives",
    "receive", "formula", "chapter",
}
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ROLE = re.compile(r":(?:py:)?(\w+):`([^`]+)`")
_INLINE = re.compile(r":(?:py:)?(?P<role>\w+):`(?P<target>[^`]+)`|``(?P<literal>[^`]+)``|`(?P<code>[^`]+)`")
_KINDS = ("function", "class", "exception", "data")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>$|#{}])")


# ---------------------------------------------------------------------------
# Reading the docstrings


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(summary, sections) of a Google-style docstring.

    The summary is the first paragraph on one line; `sections` maps each section
    header (``"Formula"``, ``"Args"``, ...) to its body, dedented, lines kept.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _is_header(line):
            break
        summary.append(line.strip())
    sections: dict[str, str] = {}
    i = 0
    while i < len(lines):
        if not _is_header(lines[i]):
            i += 1
            continue
        name = _HEADER.match(lines[i]).group(1).strip()
        i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
            body.append(lines[i])
            i += 1
        sections.setdefault(name.title() if name.islower() else name, _dedent(body))
    return " ".join(summary), sections


def _is_header(line: str) -> bool:
    match = _HEADER.match(line)
    return bool(match) and match.group(1).strip().lower() in _SECTION_NAMES


def _dedent(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:].rstrip() for line in lines).strip("\n")


def parse_chapters(text: str) -> tuple[int, ...]:
    """Chapter numbers of a Chapter section: ``"3 (Sharded matrices), 12 (GPUs)"`` -> ``(3, 12)``."""
    without_titles = re.sub(r"\([^)]*\)", "", text or "")
    return tuple(dict.fromkeys(int(n) for n in re.findall(r"\d+", without_titles)))


def chapter_titles(text: str) -> dict[int, str]:
    """The titles a Chapter section gives its chapters: ``{3: "Sharded matrices", 12: "GPUs"}``."""
    return {int(n): title.strip() for n, title in re.findall(r"(\d+)\s*\(([^)]*)\)", text or "")}


@dataclass
class Entry:
    """One documented object: a public name of scalelib, or a method (or property) of a public class.

    `names` are the public names that reach the object (a method inherited by two
    classes has two: ``TpuSlice.total_hbm_bytes`` and ``GpuCluster.total_hbm_bytes``);
    the first is the one shown.
    """

    names: list[str]
    kind: str  # "function", "class", "exception", "data", "method" or "property"
    obj: object
    doc: str
    summary: str = ""
    sections: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.summary, self.sections = parse_docstring(self.doc)

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def target(self) -> str:
        return f"scalelib.{self.name}"

    @property
    def formula(self) -> str | None:
        return self.sections.get("Formula") or None

    @property
    def returns(self) -> str:
        return self.sections.get("Returns", "")

    @property
    def chapters(self) -> tuple[int, ...]:
        return parse_chapters(self.sections.get("Chapter", ""))

    @property
    def group(self) -> int | None:
        """The chapter the entry is documented under (its first), or None for "across the course"."""
        return self.chapters[0] if self.chapters else None


def _scalelib():
    return importlib.import_module("scalelib")


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj):
        return "function"
    return "data"


def _data_doc(name: str, obj) -> str:
    """The ``#:`` comment above `name`'s assignment in the scalelib module that defines it,
    else the docstring of its type when scalelib defines the type."""
    _scalelib()  # which imports every module that defines a public name
    for module_name in sorted(m for m in sys.modules if m.startswith("scalelib._") and m.count(".") == 1):
        module = sys.modules[module_name]
        path = getattr(module, "__file__", None)
        if getattr(module, name, None) is not obj or not path or module_name == __name__:
            continue
        source = Path(path).read_text(encoding="utf-8").splitlines()
        for node in ast.parse("\n".join(source)).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                comment, line = [], node.lineno - 2
                while line >= 0 and source[line].lstrip().startswith("#:"):
                    comment.insert(0, source[line].lstrip()[2:].strip())
                    line -= 1
                if comment:
                    return " ".join(comment)
    if type(obj).__module__.startswith("scalelib"):
        return inspect.getdoc(type(obj)) or ""
    return ""


def public_entries() -> list[Entry]:
    """One entry per name of ``scalelib.__all__``, sorted by kind, then name."""
    sl = _scalelib()
    entries = []
    for name in sl.__all__:
        obj = getattr(sl, name)
        kind = _kind(obj)
        doc = _data_doc(name, obj) if kind == "data" else (inspect.getdoc(obj) or "")
        entries.append(Entry([name], kind, obj, doc))
    return sorted(entries, key=_order)


def _order(entry: Entry):
    kinds = (*_KINDS, "method", "property")
    return (kinds.index(entry.kind), entry.name.lower(), entry.name)


def method_entries(public: list[Entry] | None = None) -> list[Entry]:
    """The public methods and properties of the public classes (scalelib's own, not inherited
    from Python), one entry per function object with every public name that reaches it.
    `public`: :func:`public_entries`, if already at hand."""
    public = public_entries() if public is None else public
    by_object: dict[int, Entry] = {}
    for cls_entry in public:
        if cls_entry.kind not in ("class", "exception"):
            continue
        cls = cls_entry.obj
        seen = set()
        for base in inspect.getmro(cls):
            if not base.__module__.startswith("scalelib"):
                continue
            for attr, raw in vars(base).items():
                if attr.startswith("_") or attr in seen:
                    continue
                seen.add(attr)
                if isinstance(raw, property):
                    kind, func = "property", raw.fget
                elif inspect.isfunction(raw):
                    kind, func = "method", raw
                elif isinstance(raw, (classmethod, staticmethod)):
                    kind, func = "method", raw.__func__
                else:
                    continue
                name = f"{cls_entry.name}.{attr}"
                if id(func) in by_object:
                    by_object[id(func)].names.append(name)
                else:
                    by_object[id(func)] = Entry([name], kind, func, inspect.getdoc(func) or "")
    entries = list(by_object.values())
    chapter_of = {e.name: e.group or len(CHAPTERS) + 1 for e in public}
    for entry in entries:  # the class of the earliest chapter first: TpuSlice (2) before GpuCluster (12)
        entry.names.sort(key=lambda n: (chapter_of[n.split(".")[0]], n.lower(), n))
    return sorted(entries, key=lambda e: (e.name.lower(), e.name))


def formula_entries(public: list[Entry] | None = None) -> list[Entry]:
    """Every function and method whose docstring has a Formula section, sorted by name."""
    public = public_entries() if public is None else public
    entries = [e for e in public + method_entries(public) if e.formula]
    return sorted(entries, key=lambda e: (e.name.lower(), e.name))


def missing_sections() -> dict[str, list[str]]:
    """Public names (of ``scalelib.__all__``) lacking a section of the convention: name -> sections."""
    return {e.name: missing for e in sorted(public_entries(), key=lambda e: e.name.lower())
            if (missing := [s for s in CONVENTION if s not in e.sections and f"{s}s" not in e.sections])}


def chapter_problems() -> list[str]:
    """Chapter sections that name a chapter the course does not have, or give it another title."""
    problems = []
    public = public_entries()
    for entry in public + method_entries(public):
        text = entry.sections.get("Chapter", "")
        for number in parse_chapters(text):
            if number not in CHAPTERS:
                problems.append(f"{entry.name}: chapter {number} is not a chapter of the course")
        for number, title in chapter_titles(text).items():
            if number in CHAPTERS and title != CHAPTERS[number]:
                problems.append(f"{entry.name}: chapter {number} is called {CHAPTERS[number]!r}, not {title!r}")
    return problems


# ---------------------------------------------------------------------------
# Markdown helpers


def _escape(text: str) -> str:
    """`text` as literal Markdown text (also inside a table cell)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _code(text: str) -> str:
    """`text` as a Markdown code span that may sit in a table cell."""
    text = " ".join(text.split()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _role(role: str, target: str, title: str | None = None) -> str:
    role = {"obj": "py:obj", "exc": "py:exc"}.get(role, f"py:{role}")
    body = f"{title} <{target}>" if title else target
    return "{" + role + "}`" + body.replace("|", "\\|") + "`"


def _inline(text: str) -> str:
    """reStructuredText inline markup of a docstring line as MyST: literals and
    ```name``` as code, ``:func:`x``` as a cross-reference; the rest escaped."""
    out, last = [], 0
    text = " ".join(text.split())
    for match in _INLINE.finditer(text):
        out.append(_escape(text[last:match.start()]))
        if match.group("role"):
            out.append(_role(match.group("role"), match.group("target")))
        else:
            out.append(_code(match.group("literal") or match.group("code")))
        last = match.end()
    out.append(_escape(text[last:]))
    return "".join(out)


def _formula_cell(formula: str) -> str:
    """The formula as written, in code style; one that refers to another function links to it."""
    text = " ".join(formula.split())
    if _ROLE.search(text):
        return _inline(text)
    return _code(_unquote(text))


def _formula_math(formula: str) -> str:
    """The formula typeset by KaTeX (inline math, which wraps on a narrow screen), or as
    :func:`_formula_cell` writes it where :func:`formula_tex` cannot read it."""
    tex = formula_tex(formula)
    return f"${tex}$" if tex is not None else _formula_cell(formula)


def _unquote(text: str) -> str:
    """`text` without reStructuredText's literal quotes: ```dtype``` and ````x```` read as dtype and x."""
    return re.sub(r"``([^`]+)``|`([^`]+)`", lambda m: m.group(1) or m.group(2), text)



# ---------------------------------------------------------------------------
# Formulas as typeset math (the formula index)

#: Characters a docstring formula writes, as TeX.
_TEX_SYMBOLS = {
    "·": r"\cdot ", "−": "-", "≈": r"\approx ", "≠": r"\ne ", "≤": r"\le ", "≥": r"\ge ",
    "×": r"\times ", "…": r"\ldots ", "Σ": r"\sum ", "Π": r"\prod ", "Δ": r"\Delta ",
    "Ψ": r"\Psi ", "α": r"\alpha ", "⌈": r"\lceil ", "⌉": r"\rceil ", "²": "^2", "³": "^3", "₂": "_2",
    "*": r"\ast ", "|": r"\vert ", "<": "<", ">": ">", "=": "=", "+": "+", "-": "-", "/": "/",
    "(": "(", ")": ")", "[": "[", "]": "]", ",": ",", ";": ";", ":": ":", "!": "!", "?": "?",
}
#: Two-character operators, read before single characters.
_TEX_PAIRS = {"<=": r"\le ", ">=": r"\ge ", "<<": r"\ll ", ">>": r"\gg ", "//": r"\mathbin{/\!/}", "->": r"\to "}
#: Words typeset as TeX's operator names.
_TEX_OPERATORS = {"max": r"\max", "min": r"\min", "log": r"\log", "exp": r"\exp",
                  "sqrt": r"\operatorname{sqrt}", "floor": r"\operatorname{floor}", "argmin": r"\operatorname{argmin}"}
_TEX_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<ident>[a-z][a-z0-9]{2,}(?:_[a-z0-9]+)+)
  | (?P<word>[A-Za-z][A-Za-z0-9']*(?:-[A-Za-z][A-Za-z0-9']*)*|[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)
  | (?P<sub>[_^](?:\{(?P<braced>[^{}]*)\}|(?P<bare>[A-Za-z0-9]+(?:[,_][A-Za-z0-9]+)*)))
  | (?P<quoted>"[^"]*")
  | (?P<pair><=|>=|<<|>>|//|->)
  | (?P<char>.)
""", re.VERBOSE)


def _tex_text(words: str) -> str:
    return r"\text{" + words.replace("_", r"\_") + "}"


def formula_tex(formula: str) -> str | None:
    """A docstring's formula (the book's notation in Unicode, prose words in it) as a TeX formula for
    KaTeX: multi-letter names upright (``T_lower`` as T with "lower" below), prose kept as words with
    their spaces, ``·`` as a centred dot, ``Σ`` as a sum; None when the formula holds something this
    does not know (it then stays code) or refers to another function (it stays a link)."""
    text = _unquote(" ".join(formula.split()))
    if _ROLE.search(formula) or not text:
        return None
    out: list[str] = []
    after_word = False  # the last token ends like a word: a space in the source then shows
    pending_space = False
    for match in _TEX_TOKEN.finditer(text):
        kind = match.lastgroup if match.lastgroup not in ("braced", "bare") else "sub"
        token = match.group(0)
        if kind == "space":
            pending_space = True
            continue
        if pending_space and after_word and (kind in ("word", "ident", "quoted") or token in "([⌈"):
            out.append(r"\ \allowbreak ")  # a long formula may wrap at its words' spaces
        if kind == "sub":
            inner = match.group("braced") if match.group("braced") is not None else match.group("bare")
            if match.group("braced") is not None:
                body = formula_tex(inner)
            else:
                body = inner if len(inner) == 1 or inner.isdigit() else _tex_text(inner)
            if body is None:
                return None
            out.append(token[0] + "{" + body + "}")
            after_word = True
        elif kind == "ident":
            out.append(_tex_text(token))
            after_word = True
        elif kind == "quoted":
            out.append(_tex_text("“" + token[1:-1] + "”"))
            after_word = True
        elif kind == "word":
            if token in _TEX_OPERATORS:
                out.append(_TEX_OPERATORS[token] + " ")
            elif len(token) == 1 or token[0].isdigit():
                out.append(token)
            else:
                out.append(_tex_text(token))
            after_word = True
        elif token == "*" and after_word and not pending_space:
            out.append("^{*}")  # V*, T*: a starred name
            after_word = True
        else:
            tex = _TEX_PAIRS.get(token) if kind == "pair" else _TEX_SYMBOLS.get(token)
            if tex is None:
                return None
            out.append(tex)
            after_word = token in ",;:)]⌉"
        pending_space = False
    return "".join(out).strip()

def _unit(returns: str) -> str:
    """The unit of a result from its Returns section: ``seconds (s).`` -> ``s``,
    ``FLOP/B.`` -> ``FLOP/B``, ``A :class:`Roofline` (times in s); ...`` -> the class."""
    text = " ".join(returns.split())
    depth, end = 0, len(text)
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and (text.startswith("; ", i) or text.startswith(". ", i)):
            end = i
            break
    clause = text[:end].rstrip(".").strip()
    match = re.fullmatch(r"(.*?)\s*\((\S+)\)", clause)
    if match and "`" not in match.group(2):
        return _escape(match.group(2))  # "seconds (s)" -> s
    clause = re.sub(r"\s*\([^()]{25,}\)$", "", clause)  # a long aside goes: the API entry has it
    return _inline(re.sub(r"^(A|An|The)\s+", "", clause))


def _call(entry: Entry, name: str | None = None) -> str:
    """``critical_intensity(chip, …)``, linked to its API entry: the call with its positional
    parameters (the quantities, then the chip or topology), ``…`` standing for the keyword options."""
    name = name or entry.name
    title = f"{name}({_parameters(entry.obj)})" if entry.kind in ("function", "method") else name
    return _role(_ROLE_OF[entry.kind], f"scalelib.{name}", title)


def _parameters(obj) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "…"
    params = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    more = len(positional) < len(params)
    return ", ".join(positional + (["…"] if more else []))


def _name_in(entry: Entry, number: int, public: list[Entry]) -> str:
    """The name of `entry` to show in chapter `number`: that of a method on a class of that chapter, if any."""
    classes = {e.name: e.chapters for e in public}
    for name in entry.names:
        if "." in name and number in classes.get(name.split(".")[0], ()):
            return name
    return entry.name


def _chapter_heading(number: int | None) -> str:
    return ACROSS if number is None else f"Chapter {number}: {CHAPTERS.get(number, f'chapter {number}')}"


def _groups(entries: list[Entry]) -> list[int | None]:
    """The chapters the entries name (each entry's every chapter), in order, then None if any has none."""
    numbers = sorted({n for e in entries for n in e.chapters})
    return numbers + ([None] if any(e.group is None for e in entries) else [])


def _generated_note(page: str) -> str:
    return (f"<!-- Generated by `scalelib api-docs` from scalelib's docstrings; do not edit: "
            f"run `make exercises` to update {page}. -->")


# ---------------------------------------------------------------------------
# The pages


API_INTRO = """\
Every public name of `scalelib` (its `__all__`), with its docstring, grouped by the
chapter of the course that introduces it. A function used in several chapters is
documented under the first and listed under the others. The
{ref}`formula index <scalelib-formulas>` puts every formula on one page.

The whole library follows one convention:

- **Arguments**: the quantities first (FLOPs, bytes, matrix sides), then the chip
  or the topology (a name such as `"tpu-v5e"`, a {py:class}`ChipSpec`, a
  {py:class}`TpuSlice` or a {py:class}`GpuCluster`), then the options, by keyword only
  (`dtype=`, `bandwidth=`, `axes=`).
- **Results are numbers**: a plain `float` (or a numpy array for a sweep), in
  the unit the name ends with (`_s` seconds, `_bytes` bytes, `_per_s` per second),
  or a small frozen dataclass of numbers ({py:class}`Roofline`, {py:class}`Tile`).
- **Derivations**: `sl.explain(f, ...)` gives the derivation of any result
  `f(...)`: the formula with the numbers put in ({py:func}`explain`).
- **Errors** are subclasses of {py:exc}`ScalelibError`: {py:exc}`InvalidValueError`
  (a value the formula does not accept), {py:exc}`InvalidCallError` (arguments that
  do not fit the signature) and {py:exc}`UnknownNameError` (an unknown chip, dtype or
  exercise), so `except sl.ScalelibError` catches everything scalelib raises on purpose.

```python
import scalelib as sl

# A number: the critical intensity of a TPU v5e in FLOP/B
sl.critical_intensity("tpu-v5e")
# How it was derived: I_crit(tpu-v5e, int8, hbm) = C / W = ...
print(sl.explain(sl.critical_intensity, "tpu-v5e", dtype="int8"))
```

Each docstring has the sections *Formula* (the book's formula), *Args*, *Returns*
(with the unit), *Chapter* and *Example* (a doctest).
"""

FORMULA_INTRO = """\
Every formula of the course that `scalelib` computes, chapter by chapter: the call
that computes it (linked to its entry in the [API reference](api.md)) and the unit of
its result, then the formula, typeset from its function's docstring, and what it
computes. `sl.explain(f, ...)` prints any of them with the numbers put in. A function
used in several chapters is listed in the first and named under the others.
"""


def render_api() -> str:
    """The text of ``book/api.md``."""
    entries = public_entries()
    lines = ["(scalelib-api)=", "# scalelib API reference", "", _generated_note(API_PAGE), "",
             "```{py:currentmodule} scalelib", "```", "", API_INTRO]
    for number in _groups(entries):
        own = [e for e in entries if e.group == number]
        also = [e for e in entries if number is not None and number in e.chapters[1:]]
        lines += [f"## {_chapter_heading(number)}", ""]
        if also:
            intro = "Also used in this chapter" if own else "Used in this chapter"
            lines += [f"{intro}, documented under their first chapter:", ""]
            lines += [f"- {_role(_ROLE_OF[e.kind], e.name)} (chapter {e.group})" for e in also] + [""]
        if own:
            lines += ["```{eval-rst}"]
            for entry in own:
                lines += _autodoc(entry)
            lines += ["```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


_ROLE_OF = {"function": "func", "class": "class", "exception": "exc", "data": "data",
            "method": "meth", "property": "attr"}


def _autodoc(entry: Entry) -> list[str]:
    target = entry.target
    if entry.kind == "function":
        return [f".. autofunction:: {target}", ""]
    if entry.kind == "exception":
        return [f".. autoexception:: {target}", "   :members:", ""]
    if entry.kind == "class":
        return [f".. autoclass:: {target}", "   :members:", "   :inherited-members:",
                "   :member-order: bysource", ""]
    # Module-level data: autodoc would look for its comment in scalelib/__init__.py,
    # where it is imported, so the comment from the defining module is given here.
    lines = [f".. py:data:: {entry.name}", "   :module: scalelib", ""]
    if entry.doc:
        lines += ["   " + line if line.strip() else "" for line in entry.doc.splitlines()] + [""]
    return lines


# The four columns share the page's width (a long formula or name wraps inside its
# cell) rather than scrolling sideways. Only this page has this style.
FORMULA_STYLE = """\
<style>
  .bd-article dl.simple > dt, .bd-article dl.myst > dt { font-weight: normal; margin-top: 1.1em; }
  .bd-article dl > dd > p:first-child .katex { font-size: 1.12em; }
  .bd-article dl > dd { margin-left: 1.2em; }
</style>"""


def render_formulas() -> str:
    """The text of ``book/formulas.md``."""
    public = public_entries()
    entries = formula_entries(public)
    lines = ["(scalelib-formulas)=", "# Formula index", "", _generated_note(FORMULA_PAGE), "",
             "```{py:currentmodule} scalelib", "```", "", FORMULA_STYLE, "", FORMULA_INTRO]
    for number in _groups(entries):
        own = [e for e in entries if e.group == number]
        also = [e for e in entries if number is not None and number in e.chapters[1:]]
        lines += [f"## {_chapter_heading(number)}", ""]
        for entry in own:
            calls = " or ".join(_call(entry, name) for name in entry.names)
            lines += [f"{calls} → {_unit(entry.returns)}", f": {_formula_math(entry.formula)}",
                      f": {_inline(entry.summary)}", ""]
        if also:
            intro = "Also used in this chapter" if own else "Used in this chapter"
            listed = ", ".join(f"{_role(_ROLE_OF[e.kind], _name_in(e, number, public))} (chapter {e.group})"
                               for e in also)
            lines += [f"{intro}: {listed}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def pages() -> dict[str, str]:
    """Page path (from the repository root) -> the text the generator makes now."""
    return {API_PAGE: render_api(), FORMULA_PAGE: render_formulas()}


@dataclass(frozen=True)
class PageDrift:
    """A generated page out of date: `problem` is ``"missing"`` or ``"stale"``."""

    path: Path
    problem: str

    def __str__(self) -> str:
        why = {"missing": "missing", "stale": "stale (differs from what the docstrings generate)"}
        return f"{self.path}: {why.get(self.problem, self.problem)}"


def write_pages(root=".", *, check: bool = False) -> list[PageDrift]:
    """Write the pages under `root` (or, with `check`, write nothing); return the ones that were out of date."""
    if not (Path(root) / "book").is_dir():
        from .._errors import InvalidValueError

        raise InvalidValueError(f"`root`: {str(root)!r} has no book/ folder; run from the repository root")
    drift = []
    for relative, text in pages().items():
        path = Path(root) / relative
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old == text:
            continue
        drift.append(PageDrift(Path(relative), "missing" if old is None else "stale"))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
    return drift


# ---------------------------------------------------------------------------
# Sphinx: show the Formula sections as code


def _formula_blocks(app, what, name, obj, options, lines: list[str]) -> None:
    """autodoc-process-docstring, before napoleon: the body of a ``Formula:`` section becomes a
    ``code-block`` (so that ``|Δ|`` or ``*`` read as written), unless it refers to another function."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        match = re.match(r"^(\s*)Formula:\s*$", line)
        out.append(line)
        i += 1
        if not match:
            continue
        indent = len(match.group(1))
        body = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        trailing = []
        while body and not body[-1].strip():
            trailing.append(body.pop())
        if body and not _ROLE.search(" ".join(body)):
            pad = " " * (indent + 4)
            body = [pad + ".. code-block:: text", ""] + ["    " + _unquote(b) if b.strip() else "" for b in body]
        out.extend(body + trailing)
    lines[:] = out


def _prose_properties(app, what, name, obj, options, lines: list[str]) -> None:
    """autodoc-process-docstring, before napoleon: napoleon reads the first line of a property's
    docstring as ``type: description``; scalelib's read ``Summary: more`` (``"Optimistic bound:
    ..."``), so such a docstring starts with an empty comment, which napoleon reads as "no type"."""
    if what in ("property", "attribute") and lines and lines[0].strip():
        head = re.sub(r"``[^`]*``|:\w+:`[^`]*`|`[^`]*`", "", lines[0])
        if ":" in head and " " in head.split(":", 1)[0].strip():
            lines[:0] = ["..", ""]


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _formula_blocks, priority=400)  # napoleon runs at 500
    app.connect("autodoc-process-docstring", _prose_properties, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
