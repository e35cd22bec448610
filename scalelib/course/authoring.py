"""Tools for the course's authors: exercise notebooks and setup cells, each kept from one source.

**Exercises are generated from solutions** (nbgrader style). ``solutions/*.ipynb``
are the solved notebooks; ``exercises/`` holds one generated notebook of the same
name for each. In a code cell, a region between a line ``### BEGIN SOLUTION`` and
a line ``### END SOLUTION`` becomes a stub:

* each top-level assignment ``name = ...`` becomes ``name = None  # YOUR ANSWER HERE``;
* each ``def f(...)`` keeps its signature and docstring, and its body becomes
  ``raise NotImplementedError("write your solution here")``;
* any other statement is dropped; a region with neither becomes ``# YOUR CODE HERE``.

In a Markdown cell, every ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->``
is removed (a cell left empty is dropped). Outputs and execution counts are cleared;
cell ids and notebook metadata are kept, so regenerating gives the same bytes. Each
exercise notebook's metadata also names its chapter, ``{"scalelib": {"chapter": N}}``
(from the file name ``chNN_...``), which ``scalelib grade`` reads.

**The setup cell is written from one place.** The course repository's address is
kept only in ``book/_config.yml`` (``repository: url:`` and ``branch:``); the first
code cell of every notebook starts with :func:`setup_cell_source`, which
:func:`sync_setup_cells` writes (or checks). Cells are counted from 1 in messages.

From a shell: ``scalelib generate [--check]`` and ``scalelib sync-setup [--check]``.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .._errors import ScalelibError

BEGIN_CODE, END_CODE = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_MD, END_MD = "<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->"
ANSWER_STUB = "None  # YOUR ANSWER HERE"
CODE_STUB = "# YOUR CODE HERE"
RAISE_STUB = 'raise NotImplementedError("write your solution here")'

_CODE_MARKER = re.compile(r"^([ \t]*)### (BEGIN|END) SOLUTION[ \t]*$")
_MD_MARKER = re.compile(r"<!--\s*(BEGIN|END) SOLUTION\s*-->")
# Cell metadata that changes on every run and would only add noise to diffs.
_VOLATILE_CELL_METADATA = ("execution", "ExecuteTime")
_GAP = "\x00"  # stands, while editing Markdown, where whole lines were removed

SETUP_COMMENT = "# Setup:"
SETUP_TEMPLATE = """\
# Setup: import scalelib, installing it first where it is missing (e.g. on Colab).
import os
# JAX on this machine's CPU, as 8 devices, whatever accelerator the runtime has: the sharding chapters need 8.
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
try:
    import scalelib as sl
except ImportError:
    import subprocess, sys
    # The library of the course's version this notebook comes from ({ref}), with JAX in the tested range.
    SCALELIB = "scalelib[notebooks] @ git+{url}@{ref}"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", SCALELIB],
                          capture_output=True, text=True)
    if done.returncode != 0:
        log = done.stdout + done.stderr
        if any(s in log for s in ("Could not resolve host", "Temporary failure in name resolution",
                                  "Failed to establish a new connection", "Network is unreachable",
                                  "NameResolutionError", "Connection timed out")):
            why = "The runtime cannot reach GitHub or PyPI: check its internet connection"
        elif any(s in log for s in ("did not match any file(s) known to git", "Repository not found",
                                    "could not read Username", "Could not read from remote repository",
                                    "couldn't find remote ref")):
            why = (SCALELIB.split(" @ ")[1] + " is not published (the repository is not public "
                   "yet, or the tag is not pushed): open a notebook of a published version of the course")
        else:
            why = "pip's error is above"
        raise RuntimeError(
            "Installing scalelib failed (pip exited with " + str(done.returncode) + "):\\n"
            + log[-1500:] + "\\n" + why + "; then restart the runtime (Runtime > Restart session) "
            "and run this cell again, or install by hand: pip install '" + SCALELIB + "'") from None
    import scalelib as sl"""
SETUP_LAST_LINE = "import scalelib as sl"


class AuthoringError(ScalelibError, ValueError):
    """A solution notebook or a course file that the authoring tools cannot use as it is."""


@dataclass(frozen=True)
class Drift:
    """One notebook out of date: `path` and what is wrong with it.

    `problem` is ``"missing"`` (no exercise notebook for a solution), ``"stale"``
    (differs from what its solution generates), ``"extra"`` (an exercise notebook
    with no solution), ``"setup cell"`` (its setup block, or a chapter's Colab
    link, differs from what ``book/_config.yml`` gives) or ``"no setup cell"`` (its first code cell has none).
    """

    path: Path
    problem: str

    def __str__(self) -> str:
        why = {
            "missing": "missing (its solution notebook has no exercise notebook yet)",
            "stale": "stale (differs from what its solution notebook generates)",
            "extra": "extra (no solution notebook of that name)",
            "setup cell": "its setup cell (or, in book/, its Colab link) differs from what book/_config.yml gives",
            "no setup cell": "its first code cell has no `# Setup:` block",
        }
        return f"{self.path}: {why.get(self.problem, self.problem)}"


# ---------------------------------------------------------------------------
# Code cells


def _stub_region(region: list[str], indent: str, where: str, first_line: int) -> list[str]:
    """The exercise version of the solution lines `region` (marker lines, indented by `indent`, excluded)."""
    text = "\n".join(region)
    body = textwrap.dedent(text)
    margin = _margin(region, body.split("\n")) if text.strip() else indent
    try:
        tree = ast.parse(body)
    except SyntaxError as err:
        last = first_line + len(region) - 1
        span = f"line {first_line}" if last == first_line else f"lines {first_line}-{last}"
        raise AuthoringError(
            f"{where}: the solution region on {span} is not valid Python on its own "
            f"({err.msg}, line {first_line + (err.lineno or 1) - 1}); a region must hold whole statements"
        ) from None
    lines = body.split("\n")
    items: list[tuple[str, list[str]]] = []  # (kind, lines without margin)
    assigned: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in _target_names(targets):
                if name not in assigned:
                    assigned.append(name)
                    items.append(("assign", [f"{name} = {ANSWER_STUB}"]))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            items.append(("def", _stub_def(node, lines)))
    if not items:
        stub = [CODE_STUB]
        if margin:  # inside a block, which a comment alone would leave empty
            stub.append(RAISE_STUB)
        return [margin + line for line in stub]
    out: list[str] = []
    for i, (kind, item) in enumerate(items):
        if out and (kind == "def" or items[i - 1][0] == "def"):
            out.append("")
        out.extend(margin + line if line else line for line in item)
    return out


def _margin(original: list[str], dedented: list[str]) -> str:
    """The indentation that textwrap.dedent took off the region's lines."""
    for before, after in zip(original, dedented):
        if after.strip():
            return before[: len(before) - len(after)]
    return ""


def _target_names(targets: Iterable[ast.expr]) -> list[str]:
    """Plain names assigned by `targets` (``a``, ``a, b``, ``(a, *b)``); attributes and items are skipped."""
    names: list[str] = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names.extend(_target_names(target.elts))
        elif isinstance(target, ast.Starred):
            names.extend(_target_names([target.value]))
    return names


def _stub_def(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> list[str]:
    """`node`'s signature and docstring as written, with a body that raises NotImplementedError."""
    first = node.body[0]
    docstring = first if _is_docstring(first) else None
    first_line = lines[first.lineno - 1]
    if first_line.encode()[: first.col_offset].decode(errors="ignore").strip():  # `def f(x): return x`
        bare = copy.deepcopy(node)
        bare.body = ([docstring] if docstring else []) + [ast.Pass()]
        return ast.unparse(bare).split("\n")[:-1] + [" " * (node.col_offset + 4) + RAISE_STUB]
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    signature = lines[start - 1 : first.lineno - 1]
    while len(signature) > 1 and (not signature[-1].strip() or signature[-1].lstrip().startswith("#")):
        signature.pop()  # comments between the signature and the body belong to the body
    indent = first_line[: len(first_line) - len(first_line.lstrip())]
    kept = lines[docstring.lineno - 1 : docstring.end_lineno] if docstring else []
    return signature + kept + [indent + RAISE_STUB]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def exercise_code(source: str, where: str = "cell") -> str:
    """The exercise version of one code cell's `source` (regions replaced by stubs).

    >>> print(exercise_code("x = 2\\n### BEGIN SOLUTION\\ny = 2 * x\\n### END SOLUTION\\nprint(y)"))
    x = 2
    y = None  # YOUR ANSWER HERE
    print(y)
    """
    lines = source.split("\n")
    out: list[str] = []
    opened: int | None = None  # index of the open BEGIN line
    for i, line in enumerate(lines):
        marker = _CODE_MARKER.match(line)
        kind = marker.group(2) if marker else None
        if kind == "BEGIN":
            if opened is not None:
                raise AuthoringError(
                    f"{where}: `{BEGIN_CODE}` on line {i + 1} is inside the region opened on line {opened + 1}; "
                    f"regions cannot be nested: close the first with `{END_CODE}`"
                )
            opened = i
        elif kind == "END":
            if opened is None:
                raise AuthoringError(f"{where}: `{END_CODE}` on line {i + 1} has no `{BEGIN_CODE}` before it")
            out.extend(_stub_region(lines[opened + 1 : i], marker.group(1), where, opened + 2))
            opened = None
        elif opened is None:
            out.append(line)
    if opened is not None:
        raise AuthoringError(f"{where}: `{BEGIN_CODE}` on line {opened + 1} is never closed by a `{END_CODE}` line")
    result = "\n".join(out)
    if result != source and _parses(source) and not _parses(result):
        raise AuthoringError(
            f"{where}: the exercise version of this cell is not valid Python, although the solution is; "
            f"put whole statements (assignments, defs) inside the solution region"
        )
    return result


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


# ---------------------------------------------------------------------------
# Markdown cells


def exercise_markdown(source: str, where: str = "cell") -> str:
    """`source` without its ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` regions.

    A region that fills whole lines goes with its lines (the paragraphs around it
    stay one blank line apart); one inside a line is cut out of the line.

    >>> exercise_markdown("Answer: <!-- BEGIN SOLUTION -->42<!-- END SOLUTION -->.")
    'Answer: .'
    """
    kept: list[str] = []
    pos, opened = 0, None
    for match in _MD_MARKER.finditer(source):
        line = source.count("\n", 0, match.start()) + 1
        if match.group(1) == "BEGIN":
            if opened is not None:
                raise AuthoringError(
                    f"{where}: `{BEGIN_MD}` on line {line} is inside the region opened on line "
                    f"{source.count(chr(10), 0, opened.start()) + 1}; regions cannot be nested: "
                    f"close the first with `{END_MD}`"
                )
            opened = match
            continue
        if opened is None:
            raise AuthoringError(f"{where}: `{END_MD}` on line {line} has no `{BEGIN_MD}` before it")
        start, end = opened.start(), match.end()
        line_start = source.rfind("\n", 0, start) + 1
        line_end = source.find("\n", end)
        line_end = len(source) if line_end < 0 else line_end
        if not source[line_start:start].strip() and not source[end:line_end].strip():  # whole lines
            kept.append(source[pos:line_start] + _GAP)
            pos = line_end + 1
        else:
            kept.append(source[pos:start])
            pos = end
        opened = None
    if opened is not None:
        line = source.count("\n", 0, opened.start()) + 1
        raise AuthoringError(f"{where}: `{BEGIN_MD}` on line {line} is never closed by `{END_MD}`")
    if not kept:
        return source
    text = "".join(kept) + source[pos:]
    # where whole lines went: one line break, or a blank line if either side had one
    text = re.sub(f"\n*(?:{_GAP}\n*)+", lambda m: "\n" * min(2, m.group().count("\n")), text)
    return text.strip()


# ---------------------------------------------------------------------------
# Notebooks


def generate_exercise_notebook(solution_nb, name: str = "notebook", chapter: int | None = None):
    """The exercise notebook generated from `solution_nb` (an nbformat NotebookNode).

    Args:
        solution_nb: the solved notebook; it is not modified.
        name: how error messages name the notebook (usually its path).
        chapter: the chapter number written into the metadata
            (``metadata["scalelib"]["chapter"]``, read by ``scalelib grade``); None writes none.

    Returns:
        A new NotebookNode: solution regions replaced by stubs, outputs and
        execution counts cleared, cell ids and notebook metadata kept (plus the chapter).

    Raises:
        AuthoringError: a marker not closed, nested or stray, or a code region
            that does not parse, naming `name` and the cell (counted from 1).
    """
    nb = copy.deepcopy(solution_nb)
    cells = []
    for index, cell in enumerate(nb.cells, start=1):
        where = f"{name}, cell {index}"
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        for key in _VOLATILE_CELL_METADATA:
            cell.get("metadata", {}).pop(key, None)
        if cell.cell_type == "code":
            cell.source = exercise_code(source, where)
            cell.outputs = []
            cell.execution_count = None
        elif cell.cell_type == "markdown":
            cell.source = exercise_markdown(source, where)
            if source.strip() and not cell.source.strip():
                continue
        cells.append(cell)
    nb.cells = cells
    scalelib_meta = nb.metadata.get("scalelib")
    scalelib_meta = {k: v for k, v in (scalelib_meta if isinstance(scalelib_meta, dict) else {}).items()
                     if k != "learner"}  # the solved notebook's learner (chapter 11's sample) is nobody's exercise
    if chapter is not None:
        scalelib_meta["chapter"] = chapter
    if scalelib_meta:
        nb.metadata["scalelib"] = scalelib_meta
    else:
        nb.metadata.pop("scalelib", None)
    return nb


#: A chapter's notebook name: ``ch01_rooflines.ipynb`` is chapter 1.
_CHAPTER_FILE = re.compile(r"^ch(\d+)(?:_|\.|$)", re.IGNORECASE)


def chapter_of(path) -> int | None:
    """The chapter a course notebook's file name gives (``ch12_gpus.ipynb`` -> 12), or None."""
    match = _CHAPTER_FILE.match(Path(path).name)
    return int(match.group(1)) if match else None


def notebook_text(nb) -> str:
    """`nb` as nbformat writes it (JSON, indent 1, sorted keys) with a trailing newline."""
    import nbformat

    text = nbformat.writes(nb, version=4)
    return text if text.endswith("\n") else text + "\n"


def _read(path: Path):
    import nbformat

    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as err:  # noqa: BLE001 - any unreadable notebook is an authoring error
        raise AuthoringError(f"{path}: not a readable notebook ({type(err).__name__}: {err})") from None


def generate(solutions_dir="solutions", exercises_dir="exercises", check: bool = False) -> list[Drift]:
    """Write ``exercises_dir/X.ipynb`` for every ``solutions_dir/X.ipynb``; remove exercises with no solution.

    Args:
        solutions_dir: folder of the solved notebooks (the source).
        exercises_dir: folder of the generated exercise notebooks.
        check: write nothing; only report what is out of date.

    Returns:
        The exercise notebooks that were (or, with `check`, are) missing, stale or
        extra, as :class:`Drift` records sorted by path. Empty when all is current.

    Raises:
        AuthoringError: `solutions_dir` is not a folder, or a solution notebook
            cannot be read or converted.
    """
    solutions, exercises = Path(solutions_dir), Path(exercises_dir)
    if not solutions.is_dir():
        raise AuthoringError(f"`solutions_dir` must be a folder of solved notebooks, got {str(solutions)!r}")
    drift: list[Drift] = []
    wanted = {}
    for source in sorted(solutions.glob("*.ipynb")):
        target = exercises / source.name
        text = notebook_text(generate_exercise_notebook(_read(source), name=str(source), chapter=chapter_of(source)))
        wanted[target.name] = text
        if not target.exists():
            drift.append(Drift(target, "missing"))
        elif target.read_text(encoding="utf-8") != text:
            drift.append(Drift(target, "stale"))
    if exercises.is_dir():
        drift.extend(Drift(p, "extra") for p in sorted(exercises.glob("*.ipynb")) if p.name not in wanted)
    if not check:
        apply_drift(drift, lambda path: wanted[path.name])
    return sorted(drift, key=lambda d: str(d.path))


def apply_drift(drift: Iterable[Drift], text_of) -> None:
    """Bring the generated files `drift` names up to date: an extra one removed, a missing or stale one
    written with ``text_of(path)``."""
    for item in drift:
        if item.problem == "extra":
            item.path.unlink()
        else:
            item.path.parent.mkdir(parents=True, exist_ok=True)
            item.path.write_text(text_of(item.path), encoding="utf-8", newline="\n")


# ---------------------------------------------------------------------------
# The site without solutions


def toc_without_solutions(toc_text: str) -> str:
    """The text of a book table of contents (``book/_toc.yml``) without its ``solutions/`` entries.

    ``make site SOLUTIONS=no`` builds the site from it, for courses that grade.
    """
    import yaml

    toc = yaml.safe_load(toc_text)

    def keep(entries):
        kept = []
        for entry in entries:
            if isinstance(entry, dict) and str(entry.get("file", "")).startswith("solutions/"):
                continue
            if isinstance(entry, dict):
                entry = {k: keep(v) if k in ("chapters", "sections", "parts") and isinstance(v, list) else v
                         for k, v in entry.items()}
            kept.append(entry)
        return kept

    for key in ("parts", "chapters", "sections"):
        if isinstance(toc.get(key), list):
            toc[key] = keep(toc[key])
    header = "# Generated from book/_toc.yml by `make site SOLUTIONS=no`: the site without the solution pages.\n"
    return header + yaml.safe_dump(toc, sort_keys=False, allow_unicode=True)


def write_toc_without_solutions(toc_path="book/_toc.yml", out_path="_build/no-solutions/_toc.yml") -> Path:
    """Write :func:`toc_without_solutions` of the file `toc_path` to `out_path`; return `out_path`."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(toc_without_solutions(Path(toc_path).read_text(encoding="utf-8")), encoding="utf-8")
    return out


# ---------------------------------------------------------------------------
# Setup cells


def _book_config(config_path) -> dict:
    """The repository url and branch, and the Colab address, from the book's `config_path`."""
    import yaml

    path = Path(config_path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise AuthoringError(f"`config_path` {str(path)!r} cannot be read ({err.strerror}); "
                             f"expected the book's _config.yml") from None
    except yaml.YAMLError as err:
        raise AuthoringError(f"`config_path` {str(path)!r} is not valid YAML: {err}") from None
    repository = config.get("repository") if isinstance(config, dict) else None
    values = {}
    for key, example in (("url", "https://github.com/owner/course"), ("branch", "main")):
        value = repository.get(key) if isinstance(repository, dict) else None
        if not isinstance(value, str) or not value.strip():
            raise AuthoringError(
                f"{path}: `repository: {key}:` must be set to the course repository's {key} "
                f"(e.g. {example}), got {value!r}"
            )
        values[key] = value.strip().rstrip("/")
    buttons = config.get("launch_buttons") if isinstance(config, dict) else None
    colab = buttons.get("colab_url") if isinstance(buttons, dict) else None
    values["colab"] = (colab or "https://colab.research.google.com").rstrip("/")
    return values


def setup_cell_source(config_path="book/_config.yml") -> str:
    """The setup code every notebook starts with, for the repository named in `config_path`.

    It points JAX at the CPU, as 8 devices (``JAX_PLATFORMS=cpu`` and ``JAX_NUM_CPU_DEVICES=8``
    before JAX is imported: on a Colab GPU or TPU runtime too), imports scalelib, and where that
    fails (on Colab) first installs it with pip from ``git+<repository url>@<ref>`` with its
    ``notebooks`` extra (JAX in the tested range, :func:`tested_jax`; matplotlib; no JupyterLab,
    which Colab does not need), saying what went wrong when the install fails: no network, or a
    ref that is not published. The repository and the ref come from the book's configuration::

        repository:
          url: https://github.com/owner/course
          branch: main

    ``branch`` is the course's ref (:func:`course_ref`): the same one Colab opens the notebook from
    (:func:`colab_link`, and Jupyter Book's launch button), so a notebook and the library it installs
    always come from one version: ``main`` on main; a release commit sets it to its tag (``v`` + the
    version in pyproject.toml, :func:`release_ref`), which the release workflow checks.

    Raises:
        AuthoringError: the file is missing, or has no ``repository: url:`` or ``branch:``.
    """
    values = _book_config(config_path)
    return SETUP_TEMPLATE.format(url=values["url"], ref=values["branch"])


def course_ref(config_path="book/_config.yml") -> str:
    """The git ref (branch or tag) of this version of the course, ``repository: branch:`` in the book's
    configuration: what Colab opens a notebook from and what the notebook's setup cell installs."""
    return _book_config(config_path)["branch"]


def pages_url(config_path="book/_config.yml") -> str:
    """Where GitHub Pages publishes the site of the repository in `config_path` (``repository: url:``,
    the one place it is kept): ``https://github.com/OWNER/REPO`` is served at ``https://owner.github.io/REPO/``."""
    url = _book_config(config_path)["url"]
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", url)
    if not match:
        raise AuthoringError(f"{config_path}: `repository: url:` must be a GitHub repository "
                             f"(https://github.com/OWNER/REPO) to derive its Pages address, got {url!r}")
    owner, name = match.groups()
    return f"https://{owner.lower()}.github.io/{name}/"


def release_ref(root=".") -> str | None:
    """The git tag of this version of the course, ``v<version>`` from `root`'s pyproject.toml
    (None without one): the tag the release workflow publishes, whose commit's course ref
    (:func:`course_ref`) must be that tag."""
    import tomllib

    path = Path(root) / "pyproject.toml"
    if not path.is_file():
        return None
    version = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get("version")
    return f"v{version}" if version else None


#: The JAX releases the course is tested with when pyproject.toml gives none.
DEFAULT_JAX = "jax>=0.7"


def tested_jax(root=".") -> str:
    """JAX's tested range as a pip requirement: the notebooks extra's (pyproject.toml), e.g.
    ``jax>=0.10.2,<0.11``, which the setup cell installs and the local extra includes. CI tests its
    lowest release and the one requirements.txt pins, the highest (tests/test_workflows.py)."""
    import tomllib

    pyproject = Path(root) / "pyproject.toml"
    if pyproject.is_file():
        extras = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get(
            "optional-dependencies", {})
        for requirement in extras.get("notebooks", []):
            if re.match(r"jax\s*[<>=!~]", requirement):
                return re.sub(r"\s+", "", requirement)
    return DEFAULT_JAX


#: The line that opens a chapter notebook in Colab; the last line of its first Markdown cell.
COLAB_LINK_PREFIX = "[Open in Colab]("


def colab_link(notebook_path, config_path="book/_config.yml") -> str:
    """``[Open in Colab](…)`` for the notebook at `notebook_path`, from the book's configuration.

    The path is taken relative to the repository root, the folder above ``book/``.
    """
    values = _book_config(config_path)
    root = Path(config_path).resolve().parents[1]
    relative = Path(notebook_path).resolve().relative_to(root).as_posix()
    github = values["url"].split("github.com/", 1)[-1]
    return f"{COLAB_LINK_PREFIX}{values['colab']}/github/{github}/blob/{values['branch']}/{relative})"


def with_colab_link(nb, link: str):
    """A copy of `nb` whose first Markdown cell ends with the line `link` (replacing an older one)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        lines = [line for line in source.rstrip("\n").split("\n") if not line.startswith(COLAB_LINK_PREFIX)]
        while lines and not lines[-1].strip():
            lines.pop()
        cell.source = "\n".join(lines + ["", link])
        break
    return nb


def _with_setup(source: str, setup: str) -> str | None:
    """`source` (a first code cell) with its setup block replaced by `setup`; None if it has none.

    The block runs from the ``# Setup:`` line through the last ``import scalelib as sl``;
    the cell's other lines follow it, in their order.
    """
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(SETUP_COMMENT)]
    if not starts:
        return None
    start = starts[0]
    ends = [i for i in range(start, len(lines)) if lines[i].strip() == SETUP_LAST_LINE]
    end = ends[-1] if ends else start
    rest = lines[:start] + lines[end + 1 :]
    return setup + ("\n" + "\n".join(rest) if any(line.strip() for line in rest) else "")


def _fresh_id(nb, base: str = "setup") -> str:
    used = {cell.get("id") for cell in nb.cells}
    candidate, n = base, 1
    while candidate in used:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def with_setup_cell(nb, setup: str):
    """A copy of `nb` whose first code cell starts with `setup`, and whether it had a setup block.

    A first code cell without a ``# Setup:`` block gets a new setup cell before it.
    """
    import nbformat

    nb = copy.deepcopy(nb)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    if code:
        cell = nb.cells[code[0]]
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        replaced = _with_setup(source, setup)
        if replaced is not None:
            cell.source = replaced
            _collapsed_on_the_site(cell)
            return nb, True
    cell = nbformat.v4.new_code_cell(setup)
    _collapsed_on_the_site(cell)
    if nb.nbformat == 4 and nb.nbformat_minor >= 5:
        cell["id"] = _fresh_id(nb)  # a fixed id, so that syncing twice gives the same bytes
    else:
        cell.pop("id", None)
    nb.cells.insert(code[0] if code else len(nb.cells), cell)
    return nb, False


#: Cell tag with which Jupyter Book shows a code cell folded, behind a "show code" toggle.
HIDE_INPUT = "hide-input"


def _collapsed_on_the_site(cell) -> None:
    """Tag the setup cell so that the site folds it: a reader needs it only on Colab."""
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if HIDE_INPUT not in tags:
        tags.append(HIDE_INPUT)


def course_notebooks(root=".") -> list[Path]:
    """The notebooks that carry a setup cell: ``book/*.ipynb`` and ``solutions/*.ipynb`` under `root`."""
    root = Path(root)
    return sorted(root.glob("book/*.ipynb")) + sorted(root.glob("solutions/*.ipynb"))


def sync_setup_cells(paths: Iterable, check: bool = False, config_path="book/_config.yml") -> list[Drift]:
    """Make the first code cell of each notebook in `paths` start with :func:`setup_cell_source`,
    and the first Markdown cell of each chapter notebook (in ``book/``) end with its :func:`colab_link`.

    The setup block is the lines from the ``# Setup:`` comment through the last
    ``import scalelib as sl`` of the first code cell; lines after it (``import jax``
    ...) are kept. A notebook whose first code cell has no such block gets a new
    setup cell before it. Exercise notebooks get theirs by generation.

    Args:
        paths: notebook files.
        check: write nothing; only report which notebooks differ.
        config_path: the book configuration that names the repository.

    Returns:
        The notebooks that were (or, with `check`, would be) rewritten, as :class:`Drift`.
    """
    setup = setup_cell_source(config_path)
    drift = []
    for path in map(Path, paths):
        nb = _read(path)
        synced, had_block = with_setup_cell(nb, setup)
        if path.resolve().parent.name == "book":  # chapter notebooks open with a Colab link
            synced = with_colab_link(synced, colab_link(path, config_path))
        text = notebook_text(synced)
        if text != notebook_text(nb):
            drift.append(Drift(path, "setup cell" if had_block else "no setup cell"))
            if not check:
                path.write_text(text, encoding="utf-8", newline="\n")
    return drift
