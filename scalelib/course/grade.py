"""Grade submissions: run each in a sandboxed kernel, re-check every answer here, write a gradebook.

``scalelib grade FOLDER_OR_FILES... --out DIR`` (or :func:`grade`) grades each
notebook on its own, and no notebook can cost another learner anything:

1. **Snapshot.** Every notebook is read once, before any runs, and rebuilt from its
   cells' sources only: stored outputs (forged verdicts, outputs on Markdown or
   blank cells, outputs under ``skip-execution`` tags) are discarded; only what
   runs in this grading run counts. A later write to the file changes nothing.
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
   ``kind="jax"`` function is run under ``jax.jit`` on a simulated mesh; its
   output and compiled HLO come back, and the collectives are read here.
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
from .check import CORRECT, INCORRECT, VERDICT_KEY, Verdict, exercises, get_exercise, verdict
from .gradebook import (  # noqa: F401 - the gradebook, rosters and reports were part of this module
    CHAPTER_UNKNOWN, FAILED, GRADED, MISSING, WRONG_CHAPTER, Gradebook, Roster, _clean, _name_learners, feedback,
    load_roster, parse_canvas_name, report_block)
from .record import ANSWER_MIME, CALLS_MIME, MAX_VALUES, case_key, decode_number, encode_cases

#: Most bytes of answer records (and function-call results) one notebook may send in all; past it they are dropped.
MAX_RECORDS_BYTES = 8 * 2**20
#: The flag on every notebook graded without a namespace sandbox (``--unsafe``).
UNSAFE_FLAG = "graded WITHOUT a sandbox (--unsafe): this notebook ran with the grader's rights"
#: Largest notebook file read (bytes).
MAX_NOTEBOOK_BYTES = 100 * 2**20
#: Seconds to wait, once a cell has replied, for the rest of its output; past it the kernel's output
#: channel is taken as broken (a message over the size limit disconnects it) and the notebook stops.
IOPUB_TIMEOUT_S = 10.0

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
        memory_bytes: the kernel's address-space limit (B), or None for none.
        max_output_bytes: the most bytes of output a notebook may produce (B); beyond
            it output is dropped (answers still count).
        unsafe: grade even where no namespace sandbox can be made (each kernel then runs
            with the grader's rights; every report says so). Otherwise grading refuses there.
    """

    cell_timeout_s: float = 120.0
    notebook_timeout_s: float = 600.0
    memory_bytes: int | None = 4 * 2**30
    max_output_bytes: int = 4 * 2**20
    unsafe: bool = False

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
        where = f"cell {self.cell}" + (f" ({self.source})" if self.source else "")
        sep = " " if self.evalue.startswith("(") else ": " if self.evalue else ""
        return f"{where} raised {self.ename}{sep}{self.evalue}"


@dataclass(frozen=True)
class NotebookGrade:
    """What grading one notebook found.

    Attributes:
        notebook: the notebook's path, as given.
        learner: from ``metadata["scalelib"]["learner"]``, else the file name.
        chapter: the chapter it was graded as, or None.
        status: "graded", "failed" (`error` says why; answers recorded before the
            failure still count) or "chapter unknown".
        exercises: one grade per exercise of the chapter, in order.
        cell_errors: cells that raised (grading carried on after them).
        error: why the notebook could not be run to the end, or None.
        ignored: answers that did not count (other chapters' exercises, ids that are not strings).
        flags: things for the instructor to look at (code reaching into the checker,
            limits reached, processes left behind, ...); they change no points.
        seed: the seed the function exercises' cases were drawn with.
        seconds: how long grading it took.
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


def load(path) -> Submission:
    """Read the notebook at `path` once: its sources, learner, chapter and static flags; never raises."""
    import nbformat

    path = Path(path)
    sub = Submission(path, learner=learner_from_path(path))
    name_chapter = _chapter_from_name(path)
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"the file is larger than {_size_text(MAX_NOTEBOOK_BYTES)}")
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
            raise ValueError("it has no list of cells")
        if raw.get("nbformat") not in (4, None):
            raw = nbformat.reads(text, as_version=4)  # an older format: let nbformat convert it
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
        ins, _, result = case[k].partition("->")
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


def _client_class():
    from nbclient import NotebookClient

    class GradingClient(NotebookClient):
        """nbclient's client, keeping answers apart and at most `max_output` bytes of other outputs."""

        def __init__(self, nb, km, max_output: int, **kw):
            super().__init__(nb, km=km, **kw)
            self.max_output = max_output
            self.kept_bytes = 0
            self.output_dropped_in: list[int] = []
            self.collecting = "cell"
            self.records: list[dict] = []  # answers (or calls, or probe) displayed by the current execution
            self.record_bytes = 0
            self.records_dropped = 0

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


async def _execute(sub: Submission, ids: tuple[str, ...], limits: Limits, seed: int) -> _Run:
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
                 unsafe=limits.unsafe) as box:
        if not box.isolated:
            run.flags.append(UNSAFE_FLAG)
        nbformat.write(nb, str(box.home / (sub.path.stem[:100] + ".ipynb")))
        client = _client_class()(
            nb, km=box.kernel_manager(), max_output=limits.max_output_bytes, allow_errors=True,
            startup_timeout=60, shutdown_kernel="immediate", log=_LOG,
            iopub_timeout=IOPUB_TIMEOUT_S, raise_on_iopub_timeout=True,
            skip_cells_with_tag="skip-execution", kernel_name="scalelib-grading")
        box.before_start()
        started = False
        try:
            async with client.async_setup_kernel(cleanup_kc=True, **box.start_kwargs()):
                started = True
                box.kernel_started(client.km)
                await _run_cells(client, box, nb, code, ids, limits, seed, run, CellTimeoutError, DeadKernelError)
                box.note_leftovers()
        except Exception as err:  # noqa: BLE001 - a kernel that cannot start, or dies while starting
            if not started:
                log = box.kernel_log().strip().splitlines()
                tail = f"; its log ends: {_one_line(log[-1])}" if log else ""
                hint = (f" (is the memory limit of {_size_text(limits.memory_bytes)} too low? a kernel needs about "
                        f"300 MiB of address space)" if limits.memory_bytes else "")
                run.error = f"the kernel could not start ({type(err).__name__}: {_one_line(err)}){tail}{hint}"
            elif run.error is None:
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


async def _run_cells(client, box, nb, code, ids, limits, seed, run, CellTimeoutError, DeadKernelError):
    deadline = time.monotonic() + limits.notebook_timeout_s
    records, _ = await _helper(client, '__import__("scalelib.course.sandbox", fromlist=["probe"]).probe()',
                               code[0], 60.0, "probe")
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
            run.error = (f"the notebook ran past its limit of {fmt(limits.notebook_timeout_s, 's')} before cell "
                         f"{number}; the cells from there on were not run")
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
                run.error = (f"the kernel's output channel broke in cell {number} (a message over the size limit?); "
                             f"the cells after it were not run")
                return
            run.error = (f"the notebook ran past its limit of {fmt(limits.notebook_timeout_s, 's')} in cell {number}"
                         if by_notebook else
                         f"cell {number} did not finish within {fmt(limits.cell_timeout_s, 's')}") + \
                "; the cells after it were not run"
            return
        except DeadKernelError:
            run.answers.extend((number, r) for r in client.records)
            run.error = f"the kernel died while running cell {number} ({box.death()}); the cells after it were not run"
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
            remaining = deadline - time.monotonic()
            limit = max(0.5, min(limits.cell_timeout_s, remaining))
            per_call = min(limit, max(1.0, limit / (len(cases) + 1)))  # wall-clock: at least 1 s on a busy machine
            runner = "call_recorded_jax" if get_exercise(eid).kind == "jax" else "call_recorded"
            source = (f'__import__("scalelib.course.record", fromlist=["{runner}"]).{runner}('
                      f'{eid!r}, {encode_cases(cases)!r}, {per_call!r})')
            try:
                results, _ = await _helper(client, source, index, limit, "calls")
            except CellTimeoutError:
                payload["_calls"] = (cases, None, "the calls did not finish in time")
                run.answers.extend((number, r) for r in answers)
                run.error = (f"calling the function that answers {eid} (after cell {number}) did not finish within "
                             f"{fmt(limit, 's')}; the cells after it were not run")
                return
            except DeadKernelError:
                payload["_calls"] = (cases, None, "the kernel died while calling it")
                run.answers.extend((number, r) for r in answers)
                run.error = (f"the kernel died while calling the function that answers {eid} (after cell "
                             f"{number}); the cells after it were not run")
                return
            record = results[-1] if results and isinstance(results[-1], dict) else {}
            payload["_calls"] = (cases, record.get("results"), None)
        run.answers.extend((number, r) for r in answers)


# ---------------------------------------------------------------------------
# Judging, in the grader's process


_CALL_RESULTS = ("value", "none", "not implemented", "error", "timeout")
#: What one run of a jax exercise's function can come to (its "value" carries the compiled HLO too).
_JAX_RESULTS = _CALL_RESULTS + ("unavailable",)


class _Malformed(ValueError):
    """An answer record that sl.check cannot have written (written by hand?)."""


def _expected(exercise) -> str:
    if exercise.kind == "choice":
        return "one of " + ", ".join(map(repr, exercise.choices))
    if exercise.kind in ("function", "jax"):
        return "a function"
    return "a number" + (f" in {exercise.unit}" if exercise.unit else "") + " (or a list of numbers)"


def _decode(answer: dict):
    """The Python value a recorded (non-function) answer stands for; raises _Malformed."""
    if not isinstance(answer, dict):
        raise _Malformed("not a record")
    kind = answer.get("kind")
    try:
        if kind == "none":
            return None
        if kind == "number":
            return decode_number(answer["value"])
        if kind == "numbers":
            shape, values = answer["shape"], answer["values"]
            if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                    for n in shape) and isinstance(values, list)):
                raise _Malformed("bad shape or values")
            if len(values) > MAX_VALUES or int(np.prod(shape)) != len(values):
                raise _Malformed("the values do not fill the shape")
            return np.array([decode_number(v) for v in values], dtype=float).reshape(shape)
        if kind == "text":
            if not isinstance(answer["value"], str):
                raise _Malformed("text that is not a string")
            return answer["value"]
    except (KeyError, ValueError, TypeError) as err:
        raise _Malformed(str(err)) from None
    raise _Malformed(f"unknown kind {kind!r}")


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
        why = calls[2] if calls else "it was never called"
        return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: your function could not be run on the test cases ({why}).")
    cases, results, _ = calls
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
            return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected {_expected(exercise)}, got {what}; "
                                           f"it could not be read ({str(answer.get('error', ''))[:200]})."), None
        if kind == "function" and exercise.kind == "jax":
            return _judge_jax(exercise, answer), None
        if kind == "function":
            if exercise.kind != "function":
                return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: expected {_expected(exercise)}, "
                                               f"got a function."), None
            calls = answer.get("_calls")
            if not calls or calls[1] is None:
                why = calls[2] if calls else "it was never called"
                return Verdict(eid, INCORRECT, f"❌ Exercise {eid}: your function could not be run on the "
                                               f"test cases ({why})."), None
            cases, results, _ = calls
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
        return (Verdict(eid, INCORRECT, f"❌ Exercise {eid}: the recorded answer is malformed ({err}); "
                                        f"was it written by hand?"),
                f"exercise {eid}: a malformed answer record ({err}); sl.check does not write those")
    except Exception as err:  # noqa: BLE001 - a checker bug must not cost the learner the whole notebook
        return (Verdict(eid, INCORRECT, f"❌ Exercise {eid}: the answer could not be judged "
                                        f"({type(err).__name__}: {_one_line(err)})."),
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
        return (Verdict(eid, INCORRECT, f"❌ Exercise {eid}: this answer was worked for the brief of {name!r}, "
                                        f"but this notebook is {sub.learner!r}'s: make your own brief with your "
                                        f"name (as on the roster) and work it."), flag)
    with using(brief_for(name)):
        return judge(eid, payload)


def _grades(sub: Submission, ids: tuple[str, ...], run: _Run) -> tuple[list[ExerciseGrade], list[str], list[str]]:
    last: dict[str, tuple[int, dict]] = {}
    ignored: list[str] = []
    flags: list[str] = []
    for number, payload in run.answers:
        eid = payload.get("exercise") if isinstance(payload, dict) else None
        if isinstance(payload, dict) and eid is None and "exercise_repr" in payload:
            ignored.append(f"cell {number}: an exercise id that is not a string "
                           f"({str(payload.get('exercise_repr'))[:40]}); write it as '1.10'")
        elif not isinstance(eid, str):
            flags.append(f"cell {number}: an answer record without an exercise id (written by hand?)")
        elif eid not in ids:
            ignored.append(f"cell {number}: exercise {eid[:50]} is not one of chapter {sub.chapter}'s")
        else:
            last[eid] = (number, payload)
    grades = []
    briefs: set[str] = set()
    for eid in ids:
        exercise = get_exercise(eid)
        if eid not in last:
            grades.append(ExerciseGrade(eid, MISSING, f"Exercise {eid}: no check of it ran in the grading run.",
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


def grade_submission(sub: Submission, limits: Limits | None = None, seed: int | None = None) -> NotebookGrade:
    """Grade one :class:`Submission` (see :func:`load`); never raises for anything in the notebook."""
    limits = limits or Limits()
    seed = new_seed() if seed is None else seed
    start = time.monotonic()
    base = NotebookGrade(str(sub.path), sub.learner, sub.chapter, seed=seed, flags=tuple(sub.flags))
    ids = _chapter_ids(sub.chapter) if sub.chapter is not None else ()
    if sub.chapter is None or not ids:
        why = sub.chapter_note or f"chapter {sub.chapter} has no registered exercises"
        status = FAILED if sub.error else CHAPTER_UNKNOWN
        return replace(base, status=status, error=sub.error or f"chapter unknown: {why}",
                       seconds=time.monotonic() - start)
    if sub.error:
        grades, _, _ = _grades(sub, ids, _Run())
        return replace(base, status=FAILED, exercises=tuple(grades), error=sub.error,
                       seconds=time.monotonic() - start)
    from jupyter_core.utils import run_sync

    try:
        run = run_sync(_execute)(sub, ids, limits, seed)
    except Exception as err:  # noqa: BLE001 - one notebook's trouble is its own row, never the batch's
        run = _Run(error=f"could not be run ({type(err).__name__}: {_one_line(err)})")
    grades, ignored, flags = _grades(sub, ids, run)
    return replace(base, status=FAILED if run.error else GRADED, exercises=tuple(grades),
                   cell_errors=tuple(run.cell_errors), error=run.error, ignored=tuple(ignored),
                   flags=tuple(sub.flags) + tuple(run.flags) + tuple(flags), seconds=time.monotonic() - start)


def grade_notebook(path, limits: Limits | None = None, seed: int | None = None) -> NotebookGrade:
    """Read, run and grade the notebook at `path` (see the module's docstring); never raises for its content."""
    return grade_submission(load(path), limits, seed)


def new_seed() -> int:
    """A fresh seed for the cases drawn in one grading run."""
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
          roster: "Roster | None" = None, jobs: int = 1) -> Gradebook:
    """Grade every notebook `paths` name (files or folders), each on its own; see the module's docstring.

    Every notebook is read before any runs, so that none can change another's file
    before it is graded; every answer key and grader module is imported, and the
    package's files hashed, before the first kernel starts (and checked after the last).
    `on_graded` is called with each grade as it is made.

    Args:
        chapter: the chapter assigned; a notebook of another chapter is reported
            (status "wrong chapter") and neither run nor credited.
        roster: who handed in which file (:func:`load_roster`); learners are named
            from it, else from their file's name, never from the notebook's metadata.
        jobs: notebooks graded at once, each in its own process and sandbox.

    Raises:
        InvalidValueError: a path that does not exist, a folder without notebooks, a bad
            `chapter` or `jobs`.
        SandboxUnavailable: no sandbox can be made here and ``limits.unsafe`` is false.
    """
    from .sandbox import SandboxUnavailable, isolation

    limits = limits or Limits()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidValueError(f"`jobs` must be a whole number of notebooks at once, 1 or more, got {jobs!r}")
    if chapter is not None and (isinstance(chapter, bool) or not isinstance(chapter, int) or not _chapter_ids(chapter)):
        raise InvalidValueError(f"`chapter` must be a chapter with exercises (1 to 12), got {chapter!r}")
    ok, why = isolation()
    if not ok and not limits.unsafe:
        raise SandboxUnavailable(f"no sandbox can be made for the grading kernels: {why}. Install bubblewrap, or "
                                 f"pass --unsafe to grade without one, knowing that each notebook then runs with "
                                 f"your user's rights")
    seed = new_seed() if seed is None else seed
    fingerprint = preload()
    submissions = [load(p) for p in collect(paths)]
    if roster is not None:
        roster.apply(submissions)
    _name_learners(submissions, roster)
    if chapter is not None:
        for sub in submissions:
            _assign(sub, chapter)

    def one(sub: Submission) -> NotebookGrade:
        if sub.chapter_note and sub.chapter_note.startswith(WRONG_CHAPTER):
            return NotebookGrade(str(sub.path), sub.learner, sub.chapter, WRONG_CHAPTER,
                                 error=sub.chapter_note[len(WRONG_CHAPTER) + 2:], seed=seed, flags=tuple(sub.flags))
        try:
            return grade_submission(sub, limits, seed)
        except Exception as err:  # noqa: BLE001 - a grader bug on one notebook leaves the others graded
            return NotebookGrade(str(sub.path), sub.learner, sub.chapter, FAILED,
                                 error=f"internal error ({type(err).__name__}: {_one_line(err)})", seed=seed)

    grades: list[NotebookGrade | None] = [None] * len(submissions)
    if jobs == 1 or len(submissions) < 2:
        for i, sub in enumerate(submissions):
            grades[i] = one(sub)
            if on_graded:
                on_graded(grades[i])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("fork")  # workers inherit the answer keys imported and hashed above
        with ProcessPoolExecutor(max_workers=min(jobs, len(submissions)), mp_context=context) as pool:
            futures = {pool.submit(_grade_in_worker, sub, limits, seed): i for i, sub in enumerate(submissions)}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    grades[i] = future.result()
                except Exception as err:  # noqa: BLE001 - a worker that died costs only its own notebook
                    sub = submissions[i]
                    grades[i] = NotebookGrade(str(sub.path), sub.learner, sub.chapter, FAILED,
                                              error=f"its grading process failed ({type(err).__name__}: "
                                                    f"{_one_line(err)})", seed=seed)
                if on_graded:
                    on_graded(grades[i])
    changed = fingerprint.changed()
    return Gradebook(list(grades), seed, limits, roster=roster, tampered=tuple(changed))


def _grade_in_worker(sub: Submission, limits: Limits, seed: int) -> NotebookGrade:
    """One notebook graded in a worker process (``grade(..., jobs=N)``)."""
    try:
        return grade_submission(sub, limits, seed)
    except Exception as err:  # noqa: BLE001
        return NotebookGrade(str(sub.path), sub.learner, sub.chapter, FAILED,
                             error=f"internal error ({type(err).__name__}: {_one_line(err)})", seed=seed)


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
