"""Grade submissions: run each in a sandboxed kernel, re-check every answer here, write a gradebook.

``scalelib grade FOLDER_OR_FILES... --out DIR`` (or :func:`grade`) grades each
notebook on its own, and no notebook can cost another learner anything:

1. **Snapshot.** Learners are named first, from the files' paths (and the roster);
   then each notebook is read just before it is graded (never all at once), and
   rebuilt from its cells' sources only: stored outputs (forged verdicts, outputs
   on Markdown or blank cells, outputs under ``skip-execution`` tags) are
   discarded; only what runs in this grading run counts. An older notebook
   (nbformat 3, 4.0 to 4.4) is converted first. No kernel can reach another
   submission's file: the sandbox shows it none (with ``--unsafe`` a kernel has
   the grader's rights, and could).
2. **Chapter.** From the notebook's metadata (``metadata["scalelib"]["chapter"]``,
   which ``make exercises`` writes), else from its file name (``chNN``). A notebook
   whose chapter cannot be told is reported ("chapter unknown") and not run.
3. **Run.** In a :class:`~scalelib.course.sandbox.Sandbox`: its own temporary
   folder, a minimal environment, a kernel in its own session that cannot import
   the answer key, with limits per cell, per notebook, on memory and on output.
   The kernel only *records* answers (``sl.check`` displays them under
   :data:`~scalelib.course.record.ANSWER_MIME`); cells run one by one, and right
   after a cell records a function, the grader calls it in the kernel on the
   exercise's registered cases plus cases drawn for this run (the registered
   ones' numbers varied at random, their types kept; a seed per run). A
   ``kind="jax"`` function is compiled under ``jax.jit`` on a simulated mesh and
   run; its output and compiled HLO come back, and the collectives are read here.
   Only then does the grader send the seeds of a second draw of inputs (from the
   operating system's randomness, recorded as the run's ``draw_seed``), and the
   compiled program runs on it too. A try stopped by the machine rather than the
   notebook (a kernel that could not start, the grader's own requests or the
   output channel timing out) is made again; when every try is, the notebook is
   reported "not graded: retry", never given 0 points. ``jobs=N`` grades N
   notebooks at once through the same function as ``jobs=1``.
4. **Judge.** Here, in the grader's process, with
   :func:`~scalelib.course.check.verdict`: the last answer recorded per exercise
   counts; an exercise of the chapter never answered is "missing"; answers to
   other chapters' exercises are listed and ignored. Nothing the notebook printed,
   displayed or stored is ever taken as a verdict.
5. **Flags.** A static scan lists, per notebook, code that reaches into the
   checker or the answer key, for the instructor to look at (nothing is credited
   or discredited for it).

The gradebook (:mod:`scalelib.course.gradebook`, written by its ``Gradebook.write``)
is ``gradebook.csv`` and ``gradebook.json`` (a row per learner: a column per
exercise with the points earned, the total and the maximum, the status and the
flags) and one short Markdown feedback file per learner in ``feedback/``.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import random
import re
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .._errors import InvalidValueError
from .._units import fmt
from .check import exercises, get_exercise, verdict
from .gradebook import (  # noqa: F401 - the gradebook, rosters, reports and statuses were part of this module
    CHAPTER_UNKNOWN, FAILED, GRADED, MISSING, NOT_GRADED, WRONG_CHAPTER, Gradebook, Roster, _clean, _name_learners,
    feedback, load_roster, parse_canvas_name, report_block)
from .i18n import N_, _, translate, trusted_language, using_language
from .record import ANSWER_MIME, CALLS_MIME, case_key, encode_cases
from .verdict import CORRECT, INCORRECT, NOT_ATTEMPTED, VERDICT_KEY, Verdict
from .verdict import Malformed as _Malformed, decode as _decode

#: Most bytes of answer records (and function-call results) one notebook may send in all; past it they are dropped.
MAX_RECORDS_BYTES = 8 * 2**20
#: The flag on every notebook graded without a namespace sandbox (``--unsafe``) whose kernel ran as the grader.
UNSAFE_FLAG = "graded WITHOUT a sandbox (--unsafe): this notebook ran with the grader's rights"
#: The flag on a notebook graded without a namespace sandbox (``--unsafe``) by a grader running as root whose
#: kernel ran as the unprivileged user :data:`~scalelib.course.sandbox.KERNEL_USER_ENV` names (Gradescope's).
UNSAFE_USER_FLAG = ("graded WITHOUT a sandbox (--unsafe): this notebook ran as the unprivileged user {user!r} "
                    "(uid {uid}), not with the grader's rights, but it shared the machine's processes, network "
                    "and every file that user may read")
#: Largest notebook file read (bytes).
MAX_NOTEBOOK_BYTES = 100 * 2**20
#: Seconds to wait, once a cell has replied, for the rest of its output. Past it the grader asks the kernel
#: for a sign of life on its output channel (within :data:`IOPUB_GRACE_S`): if that comes back while the
#: cell's own output never did, the channel lost it (a message over the size limit disconnects it: the
#: notebook's doing, and the notebook stops); if the cell's output was only late, or nothing comes back,
#: the machine was too busy, and the notebook is graded again.
IOPUB_TIMEOUT_S = 10.0
#: Seconds to wait for that sign of life.
IOPUB_GRACE_S = 30.0
#: Seconds a kernel may take to start and answer.
STARTUP_TIMEOUT_S = 60.0
#: Seconds to wait before each new try of a notebook the machine kept from being graded (a random part of
#: as much again is added, so that parallel workers do not retry in step); one try more than delays given.
RETRY_DELAYS_S = (5.0, 20.0)
#: Tests only: ``f(what, attempt) -> seconds`` by which to slow the machine down artificially, ``what`` being
#: "start" (the kernel's start) or "iopub" (each wait for a cell's output); None in real grading.
_SLOW_MACHINE: Callable[[str, int], float] | None = None

_CHAPTER_IN_NAME = re.compile(r"(?:^|[^a-z])ch(\d+)", re.IGNORECASE)
_LOG = logging.getLogger("scalelib.grade")
_LOG.addHandler(logging.NullHandler())
_LOG.propagate = False


# ---------------------------------------------------------------------------
# Limits


def parse_size(text) -> int:
    """Bytes from ``"4G"``, ``"512M"``, ``"1.5GiB"``, ``"100k"`` or a plain number of bytes.

    >>> parse_size("512M"), parse_size("4GiB"), parse_size("1000")
    (536870912, 4294967296, 1000)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:([kKmMgGtT])(?:i?B)?|B)?\s*", str(text))
    if not match:
        raise InvalidValueError(f"expected a size such as 512M or 4G, got {text!r}")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[(match.group(2) or "").lower()]
    value = int(float(match.group(1)) * scale)
    if value <= 0:
        raise InvalidValueError(f"expected a positive size, got {text!r}")
    return value


def _size_text(n: int) -> str:
    return fmt(n, "B", binary=True)


@dataclass(frozen=True)
class Limits:
    """What one notebook may use when graded.

    Attributes:
        cell_timeout_s: seconds one cell may run (s); a cell over it stops the notebook.
        notebook_timeout_s: seconds all the notebook's cells may run together (s).
        memory_bytes: the memory of the kernel and every process it starts (B), or None for
            none: a cgroup's limit over all of them together where one can be made (the
            grader is root), and always each process's address space (``RLIMIT_AS``).
        max_output_bytes: the most bytes of output a notebook may produce (B); beyond
            it output is dropped (answers still count).
        home_bytes: the size of the kernel's home folder, a tmpfs of its own in the
            sandbox (B): all it writes there together (each file is also limited to
            256 MiB). Its pages count towards `memory_bytes` where a cgroup is made.
        unsafe: grade even where no namespace sandbox can be made (each kernel then runs
            with the grader's rights; every report says so). Otherwise grading refuses there.
    """

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 600.0
    memory_bytes: int | None = 4 * 2**30
    max_output_bytes: int = 4 * 2**20
    unsafe: bool = False
    home_bytes: int = 512 * 2**20

    def __post_init__(self):
        for name in ("cell_timeout_s", "notebook_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
                raise InvalidValueError(f"`{name}` must be a positive number of seconds, got {value!r}")
        if self.memory_bytes is not None and (isinstance(self.memory_bytes, bool) or not isinstance(
                self.memory_bytes, int) or self.memory_bytes < 64 * 2**20):
            raise InvalidValueError(f"`memory_bytes` must be at least 64 MiB (or None), got {self.memory_bytes!r}")
        if isinstance(self.max_output_bytes, bool) or not isinstance(self.max_output_bytes, int) \
                or self.max_output_bytes < 1024:
            raise InvalidValueError(f"`max_output_bytes` must be at least 1024 bytes, got {self.max_output_bytes!r}")
        if isinstance(self.home_bytes, bool) or not isinstance(self.home_bytes, int) or self.home_bytes < 2**20:
            raise InvalidValueError(f"`home_bytes` must be at least 1 MiB, got {self.home_bytes!r}")

    def to_json(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ExerciseGrade:
    """The grader's verdict on the last answer a notebook recorded for one exercise."""

    exercise: str
    status: str  # "correct", "incorrect", "not attempted" or "missing"
    message: str = ""
    points: float = 0.0
    max_points: float = 1.0
    rel_error: float | None = None
    diagnosis: str | None = None
    cell: int | None = None  # the cell (from 1) that recorded the answer


@dataclass(frozen=True)
class CellError:
    """A cell that raised; `cell` counts from 1, `source` is the cell's first line."""

    cell: int
    ename: str
    evalue: str
    source: str = ""

    def __str__(self) -> str:
        where = (_("cell {cell} ({source})") if self.source else _("cell {cell}")).format(cell=self.cell,
                                                                                          source=self.source)
        sep = " " if self.evalue.startswith("(") else ": " if self.evalue else ""
        return _("{where} raised {error}").format(where=where, error=f"{self.ename}{sep}{self.evalue}")


@dataclass(frozen=True)
class NotebookGrade:
    """What grading one notebook found.

    Attributes:
        notebook: the notebook's path, as given.
        learner: from ``metadata["scalelib"]["learner"]``, else the file name.
        chapter: the chapter it was graded as, or None.
        status: "graded", "failed" (`error` says why; answers recorded before the
            failure still count), "chapter unknown", "wrong chapter" or "not graded: retry"
            (the machine kept it from being graded, `error` says how; no points, no exercises).
        exercises: one grade per exercise of the chapter, in order.
        cell_errors: cells that raised (grading carried on after them).
        error: why the notebook could not be run to the end, or None.
        ignored: answers that did not count (other chapters' exercises, ids that are not strings).
        flags: things for the instructor to look at (code reaching into the checker,
            limits reached, processes left behind, ...); they change no points.
        seed: the seed the function exercises' cases were drawn with.
        seconds: how long grading it took.
        draw_seed: the seed of the JAX exercises' second draws of inputs (from the operating
            system's randomness unless given; sent to the kernel only after the function is
            compiled). Grading again with the same `seed` and `draw_seed` draws the same inputs.
        retries: why each earlier try of this notebook stopped (the machine, not the notebook).
        language: the language of its feedback (its metadata's ``scalelib.language``, one of
            :data:`~scalelib.course.i18n.LANGUAGES`, else English).
    """

    notebook: str
    learner: str = ""
    chapter: int | None = None
    status: str = GRADED
    exercises: tuple[ExerciseGrade, ...] = ()
    cell_errors: tuple[CellError, ...] = ()
    error: str | None = None
    ignored: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    seed: int | None = None
    seconds: float = 0.0
    draw_seed: int | None = None
    retries: tuple[str, ...] = ()
    language: str = "en"

    @property
    def points(self) -> float:
        return float(sum(e.points for e in self.exercises))

    @property
    def max_points(self) -> float:
        return float(sum(e.max_points for e in self.exercises))

    @property
    def correct(self) -> int:
        return sum(e.status == CORRECT for e in self.exercises)

    @property
    def total(self) -> int:
        return len(self.exercises)

    def to_json(self) -> dict:
        return {
            "learner": self.learner, "notebook": self.notebook, "chapter": self.chapter,
            "status": self.status, "error": self.error,
            "points": self.points, "max_points": self.max_points,
            "correct": self.correct, "total": self.total,
            "exercises": [asdict(e) for e in self.exercises],
            "cell_errors": [asdict(c) for c in self.cell_errors],
            "ignored": list(self.ignored), "flags": list(self.flags),
            "seed": self.seed, "seconds": round(self.seconds, 3),
            "draw_seed": self.draw_seed, "retries": list(self.retries), "language": self.language,
        }


# ---------------------------------------------------------------------------
# Snapshot: a notebook read once, rebuilt from its sources


@dataclass
class Submission:
    """A notebook as read before grading: its cells' sources only, and what reading it found."""

    path: Path
    nb: object | None = None  # an nbformat NotebookNode without outputs, or None
    error: str | None = None
    learner: str = ""
    chapter: int | None = None
    chapter_note: str | None = None  # why the chapter could not be told
    flags: list[str] = field(default_factory=list)
    language: str = "en"  # the feedback's language: the metadata's scalelib.language if one of LANGUAGES


def _source(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _first_line(source: str) -> str:
    lines = [line.strip() for line in source.split("\n") if line.strip()]
    if not lines:
        return ""
    return lines[0] if len(lines[0]) <= 60 else lines[0][:57] + "..."


def _one_line(err) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _chapter_from_name(path: Path) -> int | None:
    match = _CHAPTER_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _sanitize(raw) -> tuple[object, list[str]]:
    """A new notebook holding only `raw`'s code and Markdown sources (and code cells' tags); flags."""
    import nbformat

    flags = []
    nb = nbformat.v4.new_notebook()
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    nb.metadata = {k: metadata[k] for k in ("kernelspec", "language_info", "scalelib") if k in metadata}
    cells = raw.get("cells") if isinstance(raw.get("cells"), list) else []
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        kind, source = cell.get("cell_type"), _source(cell)
        if kind == "code":
            tags = (cell.get("metadata") or {}).get("tags") if isinstance(cell.get("metadata"), dict) else None
            new = nbformat.v4.new_code_cell(source)
            if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
                new.metadata["tags"] = list(tags)
                if "skip-execution" in tags:
                    flags.append(f"cell {index}: tagged skip-execution, so not run (its stored outputs were "
                                 f"discarded)")
            if not source.strip() and cell.get("outputs"):
                flags.append(f"cell {index}: a blank code cell carries stored outputs (discarded)")
        elif kind in ("markdown", "raw"):
            new = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_raw_cell(source)
            if "outputs" in cell:
                flags.append(f"cell {index}: a {kind} cell carries stored outputs (discarded)")
        else:
            continue
        new["id"] = f"cell-{index}"
        nb.cells.append(new)
    return nb, flags


_COURSE_NOTEBOOK = re.compile(r"^ch\d+_[a-z0-9_]+$", re.IGNORECASE)
_CHAPTER_TOKEN = re.compile(r"(?:^|[_\-. ])ch\d+(?=$|[_\-. ])", re.IGNORECASE)


def learner_from_path(path) -> str:
    """The learner a submission's file names: its stem without a ``chNN`` token, or its folder's name when
    the file keeps the course's own name (``ada/ch03_sharding.ipynb`` is ada's).

    A file named by Canvas's bulk download (:func:`~scalelib.course.gradebook.parse_canvas_name`) is its
    learner's Canvas name and user ID: grade such files with a roster to name learners as the course does.

    >>> learner_from_path("subs/ada_lovelace_ch03.ipynb"), learner_from_path("subs/ada/ch03_sharding.ipynb")
    ('ada_lovelace', 'ada')
    >>> learner_from_path("subs/lovelaceada_LATE_10003_4242_ch03_sharding.ipynb")
    'lovelaceada_10003'
    """
    path = Path(path)
    canvas = parse_canvas_name(path.name)
    if canvas:  # Canvas's bulk download: its name part and user ID (a roster names the learner properly)
        return f"{canvas.name}_{canvas.user_id}"[:100]
    stem = path.stem
    if _COURSE_NOTEBOOK.match(stem) and path.parent.name:
        return path.parent.name[:100]
    name = _CHAPTER_TOKEN.sub("", stem).strip("_-. ")
    return (name or stem)[:100]


def load(path, *, learner: str | None = None) -> Submission:
    """Read the notebook at `path` once: its sources, learner, chapter and static flags; never raises.

    An older notebook (nbformat 3, or 4.0 to 4.4) is converted to the current format first.
    `learner` names it (from a roster, say); by default its file does (:func:`learner_from_path`).
    """
    import nbformat

    path = Path(path)
    sub = Submission(path, learner=learner if learner is not None else learner_from_path(path))
    name_chapter = _chapter_from_name(path)
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"the file is larger than {_size_text(MAX_NOTEBOOK_BYTES)}")
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("it has no list of cells (it is not a JSON object)")
        version = raw.get("nbformat")
        if isinstance(version, int) and not isinstance(version, bool) and version < 4:
            # an older format (nbformat 3 keeps its cells in worksheets): nbformat converts it
            raw = nbformat.convert(nbformat.reads(text, as_version=nbformat.NO_CONVERT), 4)
        elif version not in (4, None):
            raise ValueError(f"nbformat {str(version)[:20]} is not a notebook format this grader reads (4 or older)")
        if not isinstance(raw.get("cells"), list):
            raise ValueError("it has no list of cells")
    except FileNotFoundError:
        sub.error = "not found"
    except Exception as err:  # noqa: BLE001 - anything unreadable is reported, not raised
        sub.error = f"not a readable notebook ({type(err).__name__}: {_one_line(err)})"
    if sub.error:
        sub.chapter = name_chapter
        sub.chapter_note = None if name_chapter else "no chapter in its file name"
        return sub
    sub.nb, sub.flags = _sanitize(raw)
    meta = sub.nb.metadata.get("scalelib")
    meta = meta if isinstance(meta, dict) else {}
    sub.language = trusted_language(meta.get("language"))
    learner = meta.get("learner")
    if isinstance(learner, str) and learner.strip() and " ".join(learner.split())[:100] != sub.learner:
        sub.flags.append(f"its metadata names the learner {_clean(' '.join(learner.split())[:100])!r}; "
                         f"learners are named by their file (or the roster), so it is graded as {sub.learner!r}")
    chapter = meta.get("chapter")
    if isinstance(chapter, str) and chapter.strip().isdigit():
        chapter = int(chapter)
    if isinstance(chapter, int) and not isinstance(chapter, bool) and chapter >= 1:
        sub.chapter = chapter
        if name_chapter is not None and name_chapter != chapter:
            sub.flags.append(f"its metadata says chapter {chapter}, its file name chapter {name_chapter}; "
                             f"graded as chapter {chapter}")
    else:
        if chapter is not None:
            sub.flags.append(f"its metadata's chapter {chapter!r} is not a chapter number")
        sub.chapter = name_chapter
        if name_chapter is None:
            sub.chapter_note = "no chapter in its metadata (scalelib.chapter) or its file name (chNN)"
    sub.flags.extend(scan(sub.nb))
    return sub


#: (pattern, what it means): code the static scan reports for the instructor to look at.
SUSPICIOUS = (
    (r"scalelib\s*\.\s*course|from\s+scalelib\s+import\b[^\n]*\bcourse\b|\bsl\s*\.\s*course\b",
     "reaches into scalelib.course (the checker, the grader, the answer key)"),
    (r"scalelib\s*\.\s*_check\b|\b_exercises\b", "reaches into the checker's internals"),
    (r"answer_key", "names the answer key"),
    (r"\bget_exercise\b|_REGISTRY\b", "looks up exercise registrations"),
    (r"\.\s*reference\s*\(", "calls an exercise's reference"),
    (r"\bcall_recorded\b|\bcourse\s*\.\s*record\b|\brecord\s*\(", "calls the grader's answer recorder"),
    (r"vnd\.scalelib|ANSWER_MIME|CALLS_MIME", "uses the grader's MIME types"),
    (re.escape(VERDICT_KEY) + r"|VERDICT_KEY", "writes verdict metadata (scalelib/verdict)"),
    (r"sys\s*\.\s*modules|sys\s*\.\s*meta_path|sys\s*\.\s*path_hooks", "patches the import system (sys.modules)"),
    (r"\b(?:sl|scalelib)\s*\.\s*(?:check|verdict|exercises)\s*=(?!=)|setattr\s*\(\s*(?:sl|scalelib)\b",
     "replaces scalelib's checker"),
    (r"SCALELIB_GRADING|GRADING_ENV", "looks for the grading run (SCALELIB_GRADING)"),
)
_SUSPICIOUS = tuple((re.compile(p), why) for p, why in SUSPICIOUS)


def scan(nb) -> list[str]:
    """Flags for code in `nb` that reaches into the checker or the answer key (one per cell and kind)."""
    flags = []
    for index, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code":
            continue
        for pattern, why in _SUSPICIOUS:
            match = pattern.search(cell.source)
            if match:
                flags.append(f"cell {index}: {why} (`{_first_line(match.group(0))}`)")
    return flags


# ---------------------------------------------------------------------------
# Function exercises: cases drawn at grading time


def _plain(value):
    from .._derivation import Derivation

    return value.value if isinstance(value, Derivation) else value


#: The place of every value of a dict argument together (see :func:`_ranges`).
_ANY_KEY = ("any key",)


def _ranges(cases) -> dict[tuple, tuple]:
    """(argument, position in a tuple or key of a dict, ...) -> (lowest, highest) of the numbers the registered
    `cases` give it; a dict's numbers are also pooled under (argument, ..., :data:`_ANY_KEY`), by type."""
    ranges: dict[tuple, list] = {}

    def walk(path, value):
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return
        if isinstance(value, (int, float)):
            ranges.setdefault(path + (type(value).__name__,), []).append(value)
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                walk(path + (i,), item)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(path + (key,), item)
                if isinstance(item, (int, float)) and not isinstance(item, bool):
                    ranges.setdefault(path + _ANY_KEY + (type(item).__name__,), []).append(item)

    for case in cases:
        for key, value in case.items():
            walk((key,), value)
    return {path: (min(values), max(values)) for path, values in ranges.items()}


def _draw(value, path: tuple, ranges: dict, rng: random.Random):
    """`value` with each number drawn within the range registered for its place (log-uniform); types kept."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        low, high = ranges[path + (type(value).__name__,)]
        if low == high:
            return value
        if low > 0:
            x = math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            x = rng.uniform(low, high)
        return min(max(round(x), low), high) if isinstance(value, int) else x
    if isinstance(value, (tuple, list)):
        return type(value)(_draw(v, path + (i,), ranges, rng) for i, v in enumerate(value))
    if isinstance(value, dict):  # each number within its key's range, or, where the cases fix it, the dict's
        drawn = {}
        for key, v in value.items():
            place = path + (key,)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                low, high = ranges[place + (type(v).__name__,)]
                if low == high:
                    place = path + _ANY_KEY
            drawn[key] = _draw(v, place, ranges, rng)
        return drawn
    return value


_EINSUM = re.compile(r"^[a-z]+(,[a-z]+)*->[a-z]*$")


def _relabel(case: dict, rng: random.Random) -> dict:
    """`case` with the letters of its einsum subscripts (and the keys of the sizes they index) renamed at random,
    and its operands' letters reordered where that keeps the contraction: a string argument is drawn too, so no
    table of the registered strings answers the drawn cases."""
    specs = [k for k, v in case.items() if isinstance(v, str) and _EINSUM.match(v)]
    if not specs:
        return case
    letters = sorted({ch for k in specs for ch in case[k] if ch.isalpha()})
    sized = [k for k, v in case.items() if isinstance(v, dict) and v and set(v) <= set(letters)]
    pool = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    rng.shuffle(pool)
    rename = dict(zip(letters, pool))
    out = dict(case)
    for k in specs:
        ins, _arrow, result = case[k].partition("->")
        operands = ["".join(rename[ch] for ch in op) for op in ins.split(",")]
        out[k] = ",".join(operands) + "->" + "".join(rename[ch] for ch in result)
    for k in sized:
        out[k] = {rename[letter]: n for letter, n in case[k].items()}
    return out


def _reference_accepts(reference, case) -> bool:
    try:
        value = np.asarray(_plain(reference(**case)), dtype=float)
        return bool(np.all(np.isfinite(value)))
    except Exception:  # noqa: BLE001 - a case outside the reference's domain is not drawn
        return False


def grading_cases(exercise_id: str, seed: int) -> tuple[dict, ...]:
    """The cases a function exercise is graded on: the registered ones, then as many drawn with `seed`.

    A drawn case takes a registered case's shape and types, and draws each of its
    numbers at random (log-uniformly) within the range the registered cases give
    that argument, so that it stays inside what the exercise asks for (an int stays
    an int, a tuple a tuple, a dict keeps its keys: each value is drawn within the
    range of its key, or of all the dict's values where the cases give its key one
    value only); it is kept only where the reference accepts it.
    A jax exercise's drawn case keeps a registered case's mesh and arrays, with a
    new seed and each size kept or doubled. The same seed draws the same cases.
    """
    exercise = get_exercise(exercise_id)
    registered = [dict(c) for c in exercise.cases]
    if not registered:
        return ()
    rng = random.Random(f"{seed}:{exercise.id}")
    if exercise.kind == "jax":  # the same meshes and arrays: new seeds, sizes kept or doubled
        from .jax_check import draw_cases

        return tuple(registered + draw_cases(registered, rng))
    reference = exercise.reference()
    ranges = _ranges(registered)
    seen = {case_key(c) for c in registered}
    drawn: list[dict] = []
    want = len(registered)
    for attempt in range(40 * want):
        if len(drawn) >= want:
            break
        base = registered[attempt % want]
        case = _relabel(dict({key: _draw(value, (key,), ranges, rng) for key, value in base.items()}), rng)
        key = case_key(case)
        if key in seen or not _reference_accepts(reference, case):
            continue
        seen.add(key)
        drawn.append(case)
    return tuple(registered + drawn)


# ---------------------------------------------------------------------------
# Running a notebook


def _slowdown(what: str, attempt: int) -> float:
    """Seconds by which tests slow the machine down (:data:`_SLOW_MACHINE`); 0 in real grading."""
    return float(_SLOW_MACHINE(what, attempt)) if _SLOW_MACHINE is not None else 0.0


def _client_class():
    import asyncio

    from nbclient import NotebookClient

    class GradingClient(NotebookClient):
        """nbclient's client, keeping answers apart and at most `max_output` bytes of other outputs."""

        def __init__(self, nb, km, max_output: int, attempt: int = 1, **kw):
            super().__init__(nb, km=km, **kw)
            self.max_output = max_output
            self.attempt = attempt
            self.kept_bytes = 0
            self.output_dropped_in: list[int] = []
            self.collecting = "cell"
            self.records: list[dict] = []  # answers (or calls, or probe) displayed by the current execution
            self.record_bytes = 0
            self.records_dropped = 0

        async def async_start_new_kernel_client(self):
            delay = _slowdown("start", self.attempt)
            if delay >= self.startup_timeout:  # tests: a machine so busy that the kernel answers too late
                await asyncio.sleep(self.startup_timeout)
                await self._async_cleanup_kernel()
                raise RuntimeError(f"Kernel didn't respond in {self.startup_timeout} seconds")
            if delay:
                await asyncio.sleep(delay)
            return await super().async_start_new_kernel_client()

        async def _async_poll_output_msg(self, parent_msg_id, cell, cell_index):
            delay = _slowdown("iopub", self.attempt)
            if delay:  # tests: a machine so busy that a cell's output arrives `delay` s late
                await asyncio.sleep(delay)
            return await super()._async_poll_output_msg(parent_msg_id, cell, cell_index)

        def output(self, outs, msg, display_id, cell_index):
            from .sandbox import OUTPUT_DROPPED, PROBE_MIME

            kind, content = msg.get("msg_type"), msg.get("content") or {}
            data = content.get("data") if isinstance(content, dict) else None
            if kind in ("display_data", "execute_result") and isinstance(data, dict):
                wanted = {"cell": ANSWER_MIME, "calls": CALLS_MIME, "probe": PROBE_MIME}[self.collecting]
                if wanted in data:
                    size = _content_size(content)
                    if self.record_bytes + size > MAX_RECORDS_BYTES:
                        self.records_dropped += 1
                        return None
                    self.record_bytes += size
                    self.records.append(data[wanted])
                    return None
                if ANSWER_MIME in data or CALLS_MIME in data or PROBE_MIME in data:
                    return None  # displayed where none is expected: not ours to read
            if kind == "stream" and OUTPUT_DROPPED.split("{")[0] in str(content.get("text", "")):
                self.output_dropped_in.append(cell_index + 1)
            size = _content_size(content)
            if kind != "error" and self.kept_bytes + size > self.max_output:
                if not self.output_dropped_in or self.output_dropped_in[-1] != cell_index + 1:
                    self.output_dropped_in.append(cell_index + 1)
                return None
            self.kept_bytes += size
            return super().output(outs, msg, display_id, cell_index)

        def _update_display_id(self, display_id, msg):
            return None  # updates of earlier displays are not kept

    return GradingClient


def _content_size(content) -> int:
    if not isinstance(content, dict):
        return 0
    size = 0
    for value in content.values():
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, dict):
            size += _content_size(value)
        elif isinstance(value, list):
            size += sum(len(v) if isinstance(v, str) else 16 for v in value)
        else:
            size += 16
    return size


@dataclass
class _Run:
    """What running one notebook produced."""

    answers: list = field(default_factory=list)  # (cell number, payload dict)
    cell_errors: list = field(default_factory=list)
    error: str | None = None
    flags: list = field(default_factory=list)
    machine: str | None = None  # why the machine, not the notebook, stopped this try (it is then tried again)


async def _output_lost(client) -> bool | None:
    """After a cell's output stopped short of its end: whether the kernel's output channel lost it.

    The grader asks the kernel for its info and reads the output channel, where messages come in the
    order they were sent. False when the cell's own output comes, only late (a busy machine). True when
    the kernel's answer comes while the cell's output never does: on the output channel first (the
    channel dropped the cell's output), or on the request channel with nothing on the output channel
    for :data:`IOPUB_TIMEOUT_S` more (the channel is dead): a message over the size limit disconnects
    it, the notebook's doing. None when nothing at all comes within :data:`IOPUB_GRACE_S`.
    """
    from queue import Empty

    kc = client.kc
    cell_id = getattr(kc, "last_execute_id", None)
    try:
        probe = kc.kernel_info()
    except Exception:  # noqa: BLE001 - the channels are gone
        return None

    def parent(msg):
        return (msg.get("parent_header") or {}).get("msg_id") if isinstance(msg, dict) else None

    deadline = time.monotonic() + IOPUB_GRACE_S
    replied_at = None
    while (left := deadline - time.monotonic()) > 0:
        try:
            msg = await kc.iopub_channel.get_msg(timeout=min(1.0, left))
        except Empty:
            msg = None
        except Exception:  # noqa: BLE001
            return None
        if msg is not None and cell_id is not None and parent(msg) == cell_id:
            return False
        if msg is not None and parent(msg) == probe:
            return True
        while replied_at is None:
            try:
                reply = await kc.shell_channel.get_msg(timeout=0)
            except Exception:  # noqa: BLE001 - Empty: no reply yet
                break
            if parent(reply) == probe:
                replied_at = time.monotonic()
        if replied_at is not None and time.monotonic() - replied_at > IOPUB_TIMEOUT_S:
            return True
    return None


def _silence(what: str) -> str:
    return (f"the kernel's output channel stayed silent for more than {fmt(IOPUB_TIMEOUT_S, 's')} {what} and "
            f"then {fmt(IOPUB_GRACE_S, 's')} more, while the kernel had not ended (a busy machine)")


def _unsafe_flag(run_as: tuple[int, int] | None) -> str:
    """The flag of a notebook graded without a namespace sandbox: its kernel ran as the grader, or (`run_as`,
    the sandbox's (uid, gid)) as an unprivileged user of its own."""
    if run_as is None:
        return UNSAFE_FLAG
    import pwd

    try:
        user = pwd.getpwuid(run_as[0]).pw_name
    except KeyError:
        user = "?"
    return UNSAFE_USER_FLAG.format(user=_clean(user), uid=run_as[0])


async def _execute(sub: Submission, ids: tuple[str, ...], limits: Limits, seed: int, draw_seed: int,
                   attempt: int = 1) -> _Run:
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .sandbox import Sandbox

    run = _Run()
    nb = sub.nb
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()
            and "skip-execution" not in c.metadata.get("tags", [])]
    if not code:
        return run
    with Sandbox(limits.memory_bytes, limits.max_output_bytes, cpu_seconds=limits.notebook_timeout_s + 60,
                 home_bytes=limits.home_bytes, unsafe=limits.unsafe, language=trusted_language(sub.language)) as box:
        if not box.isolated:
            run.flags.append(_unsafe_flag(box.run_as))
        nbformat.write(nb, str(box.inbox / (sub.path.stem[:100] + ".ipynb")))
        client = _client_class()(
            nb, km=box.kernel_manager(), max_output=limits.max_output_bytes, attempt=attempt, allow_errors=True,
            startup_timeout=int(STARTUP_TIMEOUT_S), shutdown_kernel="immediate", log=_LOG,
            iopub_timeout=IOPUB_TIMEOUT_S, raise_on_iopub_timeout=True,
            skip_cells_with_tag="skip-execution", kernel_name="scalelib-grading")
        box.before_start()
        started = False
        try:
            async with client.async_setup_kernel(cleanup_kc=True, **box.start_kwargs()):
                started = True
                box.kernel_started(client.km)
                await _run_cells(client, box, nb, code, ids, limits, seed, draw_seed, run, CellTimeoutError,
                                 DeadKernelError)
                box.note_leftovers()
        except Exception as err:  # noqa: BLE001 - a kernel that cannot start, or dies while starting
            if not started:
                log = box.kernel_log().strip().splitlines()
                tail = f"; its log ends: {_one_line(log[-1])}" if log else ""
                hint = (f" (is the memory limit of {_size_text(limits.memory_bytes)} too low? a kernel needs about "
                        f"300 MiB of address space)" if limits.memory_bytes else "")
                run.machine = f"the kernel could not start ({type(err).__name__}: {_one_line(err)}){tail}{hint}"
            elif run.error is None and run.machine is None:
                run.error = f"grading stopped ({type(err).__name__}: {_one_line(err)})"
        finally:
            atexit.unregister(client._cleanup_kernel)  # nbclient leaves it registered when the kernel fails to start
        if client.records_dropped:
            run.flags.append(f"{client.records_dropped} answer record(s) beyond {_size_text(MAX_RECORDS_BYTES)} "
                             f"in all were dropped")
        if client.output_dropped_in:
            cells = ", ".join(map(str, sorted(set(client.output_dropped_in))[:5]))
            run.flags.append(f"output over the limit of {_size_text(limits.max_output_bytes)} was dropped "
                             f"(cell {cells})")
    if box.leftovers_killed:
        run.flags.append(f"{box.leftovers_killed} process(es) the notebook left running were killed")
    return run


async def _helper(client, source: str, index: int, timeout: float, collecting: str):
    """Run the grader's `source` in the kernel (not a notebook cell); the records it displayed."""
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    real = client.nb.cells[index]
    client.collecting, client.records = collecting, []
    client.timeout_func = lambda _cell: timeout
    try:
        await client.async_execute_cell(cell, index, store_history=False)
    finally:
        client.nb.cells[index] = real
        client.collecting = "cell"
    records, client.records = client.records, []
    return records, cell


def second_draw_seeds(exercise_id: str, count: int, draw_seed: int) -> list[int]:
    """The seeds of the second draws of inputs of a jax exercise's `count` cases, from the run's `draw_seed`.

    >>> second_draw_seeds("10.3", 2, 7) == second_draw_seeds("10.3", 2, 7)
    True
    """
    rng = random.Random(f"{int(draw_seed)}:{exercise_id}:second draw")
    return [rng.randrange(10**6, 10**9) for _i in range(count)]


async def _call_function(client, eid: str, cases: tuple, index: int, number: int, deadline: float, limits: Limits,
                         draw_seed: int, CellTimeoutError, DeadKernelError) -> tuple[tuple, str | None, str | None]:
    """Call the function recorded for `eid` in the kernel on `cases`: (its ``_calls``, the notebook's error, the
    machine's trouble). A jax exercise's function is compiled and run on the cases' inputs first; only then are
    the seeds of its second draws of inputs sent (:func:`second_draw_seeds`), so that nothing the function can
    read while it is traced and compiled tells them."""
    jax = get_exercise(eid).kind == "jax"
    phases = ("call_recorded_jax", "call_recorded_jax_second") if jax else ("call_recorded",)
    results = None
    for phase in phases:
        remaining = deadline - time.monotonic()
        limit = max(0.5, min(limits.cell_timeout_s, remaining))
        per_call = min(limit, max(1.0, limit / (len(cases) + 1)))  # wall-clock: at least 1 s on a busy machine
        if phase == "call_recorded_jax_second":
            seeds = second_draw_seeds(eid, len(cases), draw_seed)
            argument = json.dumps(seeds)
        else:
            argument = encode_cases(cases)
        source = (f'__import__("scalelib.course.record", fromlist=["{phase}"]).{phase}('
                  f'{eid!r}, {argument!r}, {per_call!r})')
        try:
            records, _cell = await _helper(client, source, index, limit, "calls")
        except CellTimeoutError as err:
            if "IOPub" in str(err) and await _output_lost(client) is not True:
                return (cases, None, N_("the machine was too busy")), None, _silence(
                    f"while the grader called the function that answers {eid} (after cell {number})")
            return ((cases, None, N_("the calls did not finish in time")),
                    _("calling the function that answers {eid} (after cell {cell}) did not finish within {limit}; the "
                      "cells after it were not run").format(eid=eid, cell=number, limit=fmt(limit, "s")), None)
        except DeadKernelError:
            return ((cases, None, N_("the kernel died while calling it")),
                    _("the kernel died while calling the function that answers {eid} (after cell {cell}); the cells "
                      "after it were not run").format(eid=eid, cell=number), None)
        record = records[-1] if records and isinstance(records[-1], dict) else {}
        if phase != "call_recorded_jax_second":
            results = record.get("results")
        else:
            results = _merge_second_draws(results, record.get("results"), seeds)
        if not isinstance(results, list):
            break
    return (cases, results, None), None, None


def _merge_second_draws(results, second, seeds: list[int]):
    """`results` (one per case) with each run's second draw put in: the seed the grader sent (never one the
    kernel names) and the output, or what stopped it."""
    if not isinstance(results, list):
        return results
    second = second if isinstance(second, list) else []
    merged = []
    for i, result in enumerate(results):
        if not isinstance(result, dict) or result.get("result") != "value":
            merged.append(result)
            continue
        later = second[i] if i < len(second) and isinstance(second[i], dict) else None
        result = {k: v for k, v in result.items() if k not in ("seed2", "answer2")}
        if later is not None and later.get("result") == "value" and "answer" in later:
            merged.append({**result, "seed2": seeds[i], "answer2": later["answer"]})
        elif later is not None and later.get("result") in _JAX_RESULTS:
            merged.append(later)  # the second run's timeout or error is the function's result
        else:
            merged.append(result)  # judged "not run on a second draw of inputs"
    return merged


async def _run_cells(client, box, nb, code, ids, limits, seed, draw_seed, run, CellTimeoutError, DeadKernelError):
    deadline = time.monotonic() + limits.notebook_timeout_s
    try:  # no cell of the notebook has run yet: whatever stops this is the machine's doing
        records, _cell = await _helper(client, '__import__("scalelib.course.sandbox", fromlist=["probe"]).probe()',
                                   code[0], STARTUP_TIMEOUT_S, "probe")
    except CellTimeoutError as err:
        run.machine = (_silence("after the grader's first request") if "IOPub" in str(err) else
                       f"the grading kernel did not answer the grader's first request within "
                       f"{fmt(STARTUP_TIMEOUT_S, 's')}")
        return
    except DeadKernelError:
        run.machine = f"the kernel died before the notebook's first cell ({box.death()})"
        return
    probe = records[-1] if records and isinstance(records[-1], dict) else {}
    box.note_kernel_tree()
    where = str(probe.get("scalelib", ""))
    if not where.startswith(str(box.lib)) or probe.get("answer_key") or not probe.get("grading"):
        run.error = (f"the grading kernel is not isolated (it imported scalelib from {where or 'nowhere'}"
                     f"{', and could import the answer key' if probe.get('answer_key') else ''}); nothing was run")
        return
    cases_cache: dict[str, tuple] = {}
    count = 0
    for index in code:
        number = index + 1
        cell = nb.cells[index]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            run.error = _("the notebook ran past its limit of {limit} before cell {cell}; the cells from there on "
                          "were not run").format(limit=fmt(limits.notebook_timeout_s, "s"), cell=number)
            return
        limit = min(limits.cell_timeout_s, remaining)
        by_notebook = remaining < limits.cell_timeout_s
        client.timeout_func = lambda _cell, t=limit: t
        client.collecting, client.records = "cell", []
        count += 1
        try:
            await client.async_execute_cell(cell, index, execution_count=count)
        except CellTimeoutError as err:
            run.answers.extend((number, r) for r in client.records)
            if "IOPub" in str(err):
                if await _output_lost(client) is not True:
                    run.machine = _silence(f"after cell {number} replied")
                    return
                run.error = _("the kernel's output channel broke in cell {cell} (a message over the size limit?); the "
                              "cells after it were not run").format(cell=number)
                return
            run.error = (_("the notebook ran past its limit of {limit} in cell {cell}; the cells after it were not "
                           "run").format(limit=fmt(limits.notebook_timeout_s, "s"), cell=number) if by_notebook else
                         _("cell {cell} did not finish within {limit}; the cells after it were not run").format(
                             cell=number, limit=fmt(limits.cell_timeout_s, "s")))
            return
        except DeadKernelError:
            run.answers.extend((number, r) for r in client.records)
            run.error = _("the kernel died while running cell {cell} ({cause}); the cells after it were not run").format(
                cell=number, cause=box.death())
            return
        answers = list(client.records)
        client.records = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                ename, evalue = str(output.get("ename", "")), _one_line(output.get("evalue", ""))
                if ename == "MemoryError" and limits.memory_bytes:
                    evalue = (f"{evalue} " if evalue else "") + f"(the memory limit is {_size_text(limits.memory_bytes)})"
                run.cell_errors.append(CellError(number, ename, evalue, _first_line(cell.source)))
        # a function answer: call it now, on the registered and the drawn cases
        last_function = {}
        for payload in answers:
            if isinstance(payload, dict) and payload.get("kind") == "function" and payload.get("exercise") in ids:
                last_function[payload["exercise"]] = payload
        for eid, payload in last_function.items():
            cases = cases_cache.setdefault(eid, grading_cases(eid, seed))
            calls, error, machine = await _call_function(client, eid, cases, index, number, deadline, limits,
                                                         draw_seed, CellTimeoutError, DeadKernelError)
            payload["_calls"] = calls
            if error or machine:
                run.answers.extend((number, r) for r in answers)
                run.error, run.machine = error, machine
                return
        run.answers.extend((number, r) for r in answers)


# ---------------------------------------------------------------------------
# Judging, in the grader's process


_CALL_RESULTS = ("value", "none", "not implemented", "error", "timeout")
#: What one run of a jax exercise's function can come to (its "value" carries the compiled HLO too).
_JAX_RESULTS = _CALL_RESULTS + ("unavailable",)


def _expected(exercise) -> str:
    if exercise.kind == "choice":
        return _("one of {choices}").format(choices=", ".join(map(repr, exercise.choices)))
    if exercise.kind in ("function", "jax"):
        return _("a function")
    if exercise.unit:
        return _("a number in {unit} (or a list of numbers)").format(unit=exercise.unit)
    return _("a number (or a list of numbers)")


def _unreadable_value(answer: dict):
    """An object standing for an unreadable answer: its type's name and repr, and no number."""
    name = re.sub(r"\W", "_", str(answer.get("type", "object")))[:80] or "object"
    if name[0].isdigit():
        name = "_" + name
    text, error = str(answer.get("repr", ""))[:300], str(answer.get("error", ""))[:300]

    def fail(self, *args):
        raise TypeError(f"unreadable answer ({error})")

    return type(name, (), {"__repr__": lambda self: text, "__float__": fail, "__array__": fail,
                           "__len__": fail, "__iter__": fail})()


def _stand_in(calls):
    """A function that replays the results the learner's function gave in the kernel, case by case."""
    cases, results, why = calls
    table = {case_key(case): result for case, result in zip(cases, results)}

    def stand_in(**kwargs):
        result = table.get(case_key(kwargs))
        if not isinstance(result, dict):
            raise _Malformed("no result for this case")
        kind = result.get("result")
        if kind == "value":
            answer = result.get("answer")
            if isinstance(answer, dict) and answer.get("kind") == "unreadable":
                return _unreadable_value(answer)
            if isinstance(answer, dict) and answer.get("kind") == "function":
                return _unreadable_value({"type": "function", "repr": f"<function {answer.get('name', '')}>"})
            return _decode(answer)
        if kind == "none":
            return None
        if kind == "not implemented":
            raise NotImplementedError("write your solution here")
        if kind == "timeout":
            raise TimeoutError(f"it did not return within {fmt(float(result.get('limit_s', 0)), 's')}")
        if kind == "error":
            name = re.sub(r"\W", "_", str(result.get("type", "Exception")))[:80] or "Exception"
            raise type(name, (Exception,), {"__module__": "builtins"})(str(result.get("message", ""))[:300])
        raise _Malformed(f"unknown call result {kind!r}")

    return stand_in


def _judge_jax(exercise, answer: dict) -> Verdict:
    """The Verdict on what a jax exercise's function gave in the kernel, case by case; raises _Malformed."""
    from .jax_check import judge_results

    eid = exercise.id
    calls = answer.get("_calls")
    if not calls or calls[1] is None:
        why = calls[2] if calls else N_("it was never called")
        return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: your function could not be run on the test cases "
                                         "({why}).").format(eid=eid, why=translate(why)))
    cases, results, _why = calls
    if not isinstance(results, list) or len(results) != len(cases):
        raise _Malformed("run results that do not match the cases")
    for result in results:  # every result readable, before the checker sees any
        kind = result.get("result") if isinstance(result, dict) else None
        if kind not in _JAX_RESULTS:
            raise _Malformed(f"a run result of kind {str(kind)[:40]!r}")
        if kind == "value":
            if not isinstance(result.get("hlo"), str) or not isinstance(result.get("answer"), dict):
                raise _Malformed("a run result without its output or its compiled HLO")
            if result["answer"].get("kind") not in ("unreadable", "function", "text", "none"):
                _decode(result["answer"])
    return judge_results(exercise, list(cases), results)


def judge(exercise_id: str, answer: dict) -> tuple[Verdict, str | None]:
    """The Verdict on one recorded `answer`, computed here; and a flag when the record is malformed."""
    exercise = get_exercise(exercise_id)
    eid = exercise.id
    kind = answer.get("kind") if isinstance(answer, dict) else None
    try:
        if kind == "unreadable":
            what = f"{answer.get('type', 'object')} {str(answer.get('repr', ''))[:120]}"
            return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: expected {expected}, got {what}; it could not be "
                                             "read ({error}).").format(eid=eid, expected=_expected(exercise),
                                                                       what=what,
                                                                       error=str(answer.get("error", ""))[:200])), None
        if kind == "function" and exercise.kind == "jax":
            return _judge_jax(exercise, answer), None
        if kind == "function":
            if exercise.kind != "function":
                return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: expected {expected}, got a function.").format(
                    eid=eid, expected=_expected(exercise))), None
            calls = answer.get("_calls")
            if not calls or calls[1] is None:
                why = calls[2] if calls else N_("it was never called")
                return Verdict(eid, INCORRECT, _("❌ Exercise {eid}: your function could not be run on the test "
                                                 "cases ({why}).").format(eid=eid, why=translate(why))), None
            cases, results, _why = calls
            if not isinstance(results, list) or len(results) != len(cases):
                raise _Malformed("call results that do not match the cases")
            for result in results:  # every result readable, before the checker sees any
                kind = result.get("result") if isinstance(result, dict) else None
                if kind not in _CALL_RESULTS:
                    raise _Malformed(f"a call result of kind {str(kind)[:40]!r}")
                answer_kind = result.get("answer", {}).get("kind") if kind == "value" and isinstance(
                    result.get("answer"), dict) else None
                if kind == "value" and answer_kind not in ("unreadable", "function"):
                    _decode(result.get("answer"))
            return verdict(eid, _stand_in(calls), cases=list(cases)), None
        return verdict(eid, _decode(answer)), None
    except _Malformed as err:
        return (Verdict(eid, INCORRECT, _("❌ Exercise {eid}: the recorded answer is malformed ({error}); was it "
                                          "written by hand?").format(eid=eid, error=err)),
                f"exercise {eid}: a malformed answer record ({err}); sl.check does not write those")
    except Exception as err:  # noqa: BLE001 - a checker bug must not cost the learner the whole notebook
        return (Verdict(eid, INCORRECT, _("❌ Exercise {eid}: the answer could not be judged ({error}).").format(
                    eid=eid, error=f"{type(err).__name__}: {_one_line(err)}")),
                f"exercise {eid}: the checker failed on this answer ({type(err).__name__}); please look")


def _judge_for_brief(sub: Submission, eid: str, payload: dict, seen: set[str]) -> tuple[Verdict, str | None]:
    """Judge a chapter 11 answer against the brief of the name the notebook made it for.

    The brief is rebuilt here from that name (nothing else the notebook says about it is read). A brief
    made for any other name than the submission's learner (from the roster or the file name, compared with
    case, spacing and punctuation set aside) is not credited, and is flagged once.
    """
    from .capstone import brief_for, same_learner, using

    name = payload.get("brief") if isinstance(payload, dict) else None
    if not isinstance(name, str) or not name.strip():  # no brief made: "not attempted", as the learner was told
        with using(None):
            return judge(eid, payload)
    name = " ".join(name.split())[:100]
    if not same_learner(name, sub.learner):
        flag = None
        if name not in seen:
            seen.add(name)
            flag = (f"the capstone was worked for the brief of {name!r}, not of this submission's learner "
                    f"{sub.learner!r}; nothing worked on another's brief is credited")
        return (Verdict(eid, INCORRECT, _("❌ Exercise {eid}: this answer was worked for the brief of {name}, but "
                                          "this notebook is {learner}'s: make your own brief with your name (as on "
                                          "the roster) and work it.").format(eid=eid, name=repr(name),
                                                                             learner=repr(sub.learner))), flag)
    with using(brief_for(name)):
        return judge(eid, payload)


def _grades(sub: Submission, ids: tuple[str, ...], run: _Run) -> tuple[list[ExerciseGrade], list[str], list[str]]:
    last: dict[str, tuple[int, dict]] = {}
    ignored: list[str] = []
    flags: list[str] = []
    for number, payload in run.answers:
        eid = payload.get("exercise") if isinstance(payload, dict) else None
        if isinstance(payload, dict) and eid is None and "exercise_repr" in payload:
            ignored.append(_("cell {cell}: an exercise id that is not a string ({id}); write it as '1.10'").format(
                cell=number, id=str(payload.get("exercise_repr"))[:40]))
        elif not isinstance(eid, str):
            flags.append(f"cell {number}: an answer record without an exercise id (written by hand?)")
        elif eid not in ids:
            ignored.append(_("cell {cell}: exercise {eid} is not one of chapter {chapter}'s").format(
                cell=number, eid=eid[:50], chapter=sub.chapter))
        else:
            last[eid] = (number, payload)
    grades = []
    briefs: set[str] = set()
    for eid in ids:
        exercise = get_exercise(eid)
        if eid not in last:
            grades.append(ExerciseGrade(eid, MISSING, _("Exercise {eid}: no check of it ran in the grading "
                                                        "run.").format(eid=eid),
                                        0.0, float(exercise.points)))
            continue
        number, payload = last[eid]
        if exercise.per_learner:
            result, flag = _judge_for_brief(sub, eid, payload, briefs)
        else:
            result, flag = judge(eid, payload)
        if flag:
            flags.append(f"cell {number}: {flag}")
        points = float(exercise.points) if result.status == CORRECT else 0.0
        rel_error = result.rel_error if result.rel_error is None or math.isfinite(result.rel_error) else None
        grades.append(ExerciseGrade(eid, result.status, result.message, points, float(exercise.points),
                                    rel_error, result.diagnosis, number))
    return grades, ignored, flags


def _chapter_ids(chapter: int) -> tuple[str, ...]:
    try:
        return exercises(chapter)
    except InvalidValueError:
        return ()


def grade_submission(sub: Submission, limits: Limits | None = None, seed: int | None = None, *,
                     draw_seed: int | None = None) -> NotebookGrade:
    """Grade one :class:`Submission` (see :func:`load`), its feedback in its language; never raises for anything
    in the notebook (see :func:`_grade_submission`)."""
    with using_language(trusted_language(sub.language)):
        return _grade_submission(sub, limits, seed, draw_seed=draw_seed)


def _grade_submission(sub: Submission, limits: Limits | None = None, seed: int | None = None, *,
                      draw_seed: int | None = None) -> NotebookGrade:
    """Grade one :class:`Submission` (see :func:`load`); never raises for anything in the notebook.

    A try that the machine stopped (the kernel could not start, the grader's own requests or the
    kernel's output channel timed out: :class:`_Run`'s ``machine``) is made again, after
    :data:`RETRY_DELAYS_S`; when every try was stopped so, the grade is :data:`NOT_GRADED` with the
    cause, no exercises and no points. A cell's own time limit is the notebook's, never retried.
    """
    limits = limits or Limits()
    seed = new_seed() if seed is None else seed
    draw_seed = new_seed() if draw_seed is None else draw_seed
    start = time.monotonic()
    base = NotebookGrade(str(sub.path), sub.learner, sub.chapter, seed=seed, flags=tuple(sub.flags),
                         draw_seed=draw_seed, language=trusted_language(sub.language))
    ids = _chapter_ids(sub.chapter) if sub.chapter is not None else ()
    if sub.chapter is None or not ids:
        why = sub.chapter_note or f"chapter {sub.chapter} has no registered exercises"
        status = FAILED if sub.error else CHAPTER_UNKNOWN
        return replace(base, status=status, error=sub.error or f"chapter unknown: {why}",
                       seconds=time.monotonic() - start)
    if sub.error:
        grades, _ignored, _flags = _grades(sub, ids, _Run())
        return replace(base, status=FAILED, exercises=tuple(grades), error=sub.error,
                       seconds=time.monotonic() - start)
    from jupyter_core.utils import run_sync

    retries: list[str] = []
    for attempt in range(1, len(RETRY_DELAYS_S) + 2):
        try:
            run = run_sync(_execute)(sub, ids, limits, seed, draw_seed, attempt)
        except Exception as err:  # noqa: BLE001 - one notebook's trouble is its own row, never the batch's
            run = _Run(error=f"could not be run ({type(err).__name__}: {_one_line(err)})")
        if run.machine is None:
            break
        retries.append(f"try {attempt}: {run.machine}")
        if attempt <= len(RETRY_DELAYS_S):
            delay = RETRY_DELAYS_S[attempt - 1]
            time.sleep(delay + random.uniform(0, delay))  # not in step with the other workers
    else:
        return replace(base, status=NOT_GRADED, retries=tuple(retries), seconds=time.monotonic() - start,
                       error=f"{run.machine}; tried {len(retries)} times, each stopped by the machine, not the "
                             f"notebook: grade it again when the machine is less busy")
    grades, ignored, flags = _grades(sub, ids, run)
    return replace(base, status=FAILED if run.error else GRADED, exercises=tuple(grades),
                   cell_errors=tuple(run.cell_errors), error=run.error, ignored=tuple(ignored),
                   flags=tuple(sub.flags) + tuple(run.flags) + tuple(flags), retries=tuple(retries),
                   seconds=time.monotonic() - start)


def grade_notebook(path, limits: Limits | None = None, seed: int | None = None, *,
                   draw_seed: int | None = None) -> NotebookGrade:
    """Read, run and grade the notebook at `path` (see the module's docstring); never raises for its content."""
    return grade_submission(load(path), limits, seed, draw_seed=draw_seed)


def new_seed() -> int:
    """A fresh seed from the operating system's randomness (``secrets``): for the cases drawn in one grading
    run, or for the second draws of inputs of its JAX exercises."""
    return secrets.randbelow(10**9)


# ---------------------------------------------------------------------------
# A batch and its gradebook


def collect(paths: Iterable) -> list[Path]:
    """The notebooks named by `paths`: files as given, folders searched for ``*.ipynb`` (hidden folders skipped).

    Raises:
        InvalidValueError: a path that does not exist, or a folder without notebooks.
    """
    found: list[Path] = []
    paths = list(paths)
    if not paths:
        raise InvalidValueError("`paths` must name at least one notebook or folder, got none")
    for item in map(Path, paths):
        if item.is_dir():
            notebooks = sorted(p for p in item.rglob("*.ipynb")
                               if not any(part.startswith(".") for part in p.relative_to(item).parts))
            if not notebooks:
                raise InvalidValueError(f"the folder {str(item)!r} holds no notebooks (*.ipynb)")
            found.extend(notebooks)
        elif item.exists():
            found.append(item)
        else:
            raise InvalidValueError(f"no such notebook or folder: {str(item)!r}")
    unique, seen = [], set()
    for p in found:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def grade(paths: Iterable, limits: Limits | None = None, seed: int | None = None,
          on_graded: Callable[[NotebookGrade], None] | None = None, *, chapter: int | None = None,
          roster: "Roster | None" = None, jobs: int = 1, draw_seed: int | None = None) -> Gradebook:
    """Grade every notebook `paths` name (files or folders), each on its own; see the module's docstring.

    Learners are named first, from the files' paths (and the roster): nothing is read
    from the notebooks yet. Then each notebook is read just before it is graded, held
    to the assigned chapter and graded: one at a time, or `jobs` at a time, each in a
    process of its own, by the same function (:func:`_grade_entry`), so that
    ``jobs=N`` runs exactly what ``jobs=1`` runs. Every answer key and grader module is
    imported, and the package's files hashed, before the first kernel starts (and
    checked after the last). `on_graded` is called with each grade as it is made.

    Args:
        chapter: the chapter assigned; a notebook of another chapter is reported
            (status "wrong chapter") and neither run nor credited.
        roster: who handed in which file (:func:`load_roster`); learners are named
            from it, else from their file's name, never from the notebook's metadata.
        jobs: notebooks graded at once, each in its own process and sandbox.
        draw_seed: the seed of the JAX exercises' second draws of inputs (recorded in
            each grade); by default a fresh one from the operating system's randomness.

    Raises:
        InvalidValueError: a path that does not exist, a folder without notebooks, a bad
            `chapter`, `jobs` or seed.
        SandboxUnavailable: no sandbox can be made here and ``limits.unsafe`` is false.
    """
    from .sandbox import SandboxUnavailable, isolation

    limits = limits or Limits()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidValueError(f"`jobs` must be a whole number of notebooks at once, 1 or more, got {jobs!r}")
    if chapter is not None and (isinstance(chapter, bool) or not isinstance(chapter, int) or not _chapter_ids(chapter)):
        raise InvalidValueError(f"`chapter` must be a chapter with exercises (1 to 12), got {chapter!r}")
    for name, value in (("seed", seed), ("draw_seed", draw_seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidValueError(f"`{name}` must be a whole number (or None for a fresh one), got {value!r}")
    ok, why = isolation()
    if not ok and not limits.unsafe:
        raise SandboxUnavailable(f"no sandbox can be made for the grading kernels: {why}. Install bubblewrap, or "
                                 f"pass --unsafe to grade without one, knowing that each notebook then runs with "
                                 f"your user's rights")
    seed = new_seed() if seed is None else seed
    draw_seed = new_seed() if draw_seed is None else draw_seed
    fingerprint = preload()
    entries = [Submission(p, learner=learner_from_path(p)) for p in collect(paths)]  # names only, nothing read
    if roster is not None:
        roster.apply(entries)
    _name_learners(entries, roster)

    grades: list[NotebookGrade | None] = [None] * len(entries)
    if jobs == 1 or len(entries) < 2:
        for i, entry in enumerate(entries):
            grades[i] = _grade_entry(entry, limits, seed, draw_seed, chapter)
            if on_graded:
                on_graded(grades[i])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("fork")  # workers inherit the answer keys imported and hashed above
        with ProcessPoolExecutor(max_workers=min(jobs, len(entries)), mp_context=context) as pool:
            futures = {pool.submit(_grade_entry, entry, limits, seed, draw_seed, chapter): i
                       for i, entry in enumerate(entries)}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    grades[i] = future.result()
                except Exception as err:  # noqa: BLE001 - a worker that died costs only its own notebook
                    entry = entries[i]
                    grades[i] = NotebookGrade(str(entry.path), entry.learner, entry.chapter, FAILED,
                                              error=f"its grading process failed ({type(err).__name__}: "
                                                    f"{_one_line(err)})", seed=seed, draw_seed=draw_seed,
                                              flags=tuple(entry.flags))
                if on_graded:
                    on_graded(grades[i])
    changed = fingerprint.changed()
    return Gradebook(list(grades), seed, limits, roster=roster, tampered=tuple(changed))


def _grade_entry(entry: Submission, limits: Limits, seed: int, draw_seed: int, chapter: int | None) -> NotebookGrade:
    """The one grading path, for ``jobs=1`` and for each worker of ``jobs=N``: read the notebook of `entry` (named
    already), hold it to the assigned `chapter` (:func:`_assign`), and grade it; never raises."""
    try:
        sub = load(entry.path, learner=entry.learner)
        sub.flags = sub.flags + list(entry.flags)
        if chapter is not None:
            _assign(sub, chapter)
        if sub.chapter_note and sub.chapter_note.startswith(WRONG_CHAPTER):
            return NotebookGrade(str(sub.path), sub.learner, sub.chapter, WRONG_CHAPTER,
                                 error=sub.chapter_note[len(WRONG_CHAPTER) + 2:], seed=seed, draw_seed=draw_seed,
                                 flags=tuple(sub.flags), language=trusted_language(sub.language))
        return grade_submission(sub, limits, seed, draw_seed=draw_seed)
    except Exception as err:  # noqa: BLE001 - a grader bug on one notebook leaves the others graded
        return NotebookGrade(str(entry.path), entry.learner, entry.chapter, FAILED,
                             error=f"internal error ({type(err).__name__}: {_one_line(err)})", seed=seed,
                             draw_seed=draw_seed, flags=tuple(entry.flags))


def _assign(sub: Submission, chapter: int) -> None:
    """Hold `sub` to the assigned `chapter`: a notebook whose metadata or file name says another is refused."""
    named = _chapter_from_name(sub.path)
    claimed = {c for c in (sub.chapter, named) if c is not None}
    others = sorted(c for c in claimed if c != chapter)
    if others:
        sub.chapter_note = (f"{WRONG_CHAPTER}: it is a chapter {others[0]} notebook (by its "
                            f"{'file name' if others[0] == named else 'metadata'}), and chapter {chapter} was "
                            f"assigned; it was neither run nor credited")
        sub.chapter = others[0]
    else:
        sub.chapter = chapter
        sub.chapter_note = None


class _Fingerprint:
    """SHA-256 of every file of the scalelib package (answer keys and grader included), taken before grading."""

    def __init__(self):
        self.root = Path(__file__).resolve().parents[1]
        self.digests = self._digests()

    def _digests(self) -> dict[str, str]:
        import hashlib

        out = {}
        for path in sorted(self.root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            try:
                out[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[str(path.relative_to(self.root))] = "unreadable"
        return out

    def changed(self) -> list[str]:
        now = self._digests()
        return sorted(k for k in set(now) | set(self.digests) if now.get(k) != self.digests.get(k))


def preload() -> _Fingerprint:
    """Import every answer key and grader module now (later edits to their files change nothing in this
    process), and fingerprint the package's files."""
    import importlib

    for name in ("check", "record", "capstone", "jax_check", "sandbox"):
        importlib.import_module(f"scalelib.course.{name}")
    for chapter in range(1, 13):
        _chapter_ids(chapter)
    return _Fingerprint()
