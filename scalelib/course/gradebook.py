"""The gradebook of a grading run: its rows, rosters, reports, feedback and CSV files.

:func:`scalelib.course.grade.grade` makes a :class:`Gradebook` (a
:class:`~scalelib.course.grade.NotebookGrade` per notebook); this module turns it
into what instructors and learners read: ``gradebook.csv`` and ``gradebook.json``,
Canvas's import CSV, the terminal report and the learners' Markdown feedback. A
:class:`Roster` (:func:`load_roster`) says who handed in which notebook.

It sits below the grader: it reads grades, never runs a notebook, and never imports
:mod:`scalelib.course.grade`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import InvalidValueError
from .._units import fmt
from .i18n import N_, _, translate, trusted_language, using_language
from .verdict import CORRECT, INCORRECT, NOT_ATTEMPTED

# The grades it reads (``Limits``, ``NotebookGrade``, ``Submission``) are :mod:`scalelib.course.grade`'s; their
# annotations here stay names only, never imported, so that the grader sits above this module with no circle.

#: Status of an exercise of the notebook's chapter that no cell answered.
MISSING = "missing"
#: Statuses of a notebook: run to the end; stopped or unreadable (``error`` says why); chapter not known.
GRADED, FAILED, CHAPTER_UNKNOWN = "graded", "failed", "chapter unknown"
#: Status of a notebook of another chapter than the one assigned (``--chapter``): reported, never run or credited.
WRONG_CHAPTER = "wrong chapter"
#: Status of a notebook the machine, not the notebook, kept from being graded (its kernel could not start, or
#: the grading machinery timed out), after :data:`~scalelib.course.grade.RETRY_DELAYS_S` tries: no grade, no
#: points (no total in ``gradebook.csv``, a blank score in Canvas's CSV, never 0); grade it again.
NOT_GRADED = "not graded: retry"


@dataclass
class Gradebook:
    """The grades of one run: a row per notebook, the seed its cases were drawn with, its limits."""

    grades: list[NotebookGrade]
    seed: int
    limits: Limits
    roster: Roster | None = None
    tampered: tuple = ()  # package files whose contents changed during the run

    def exercise_ids(self) -> list[str]:
        ids = {e.exercise for g in self.grades for e in g.exercises}
        return sorted(ids, key=lambda i: tuple(int(p) if p.isdigit() else 0 for p in i.split(".")))

    def roster_row(self, g: NotebookGrade) -> dict[str, str] | None:
        """The roster row `g`'s notebook was matched to (None without a roster or off it)."""
        return self.roster.row_of(g.notebook) if self.roster is not None else None

    def to_json(self) -> str:
        """The gradebook as JSON: the run's seed and limits, and per notebook its grade (per exercise the
        status, the points, the grader's message and ``diagnosis``, the named slip whose hint the learner
        saw) and, with a roster, the row it was matched to (``roster``, or null when it is on none)."""
        learners = []
        for g in self.grades:
            row = g.to_json()
            if self.roster is not None:
                matched = self.roster_row(g)
                row["roster"] = None if matched is None else {k: v for k, v in matched.items() if k != "notebook"}
            learners.append(row)
        return json_text({"seed": self.seed, "limits": self.limits.to_json(), "tampered": list(self.tampered),
                          "exercises": self.exercise_ids(), "learners": learners})

    def to_csv(self) -> str:
        ids = self.exercise_ids()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["learner", "notebook", "chapter", "status", *ids, "total", "max", "flags", "note"]
                        + (["roster ID"] if self.roster is not None else []))
        for g in self.grades:
            earned = {e.exercise: _points(e.points) for e in g.exercises}
            status = g.status if g.status == GRADED else f"{g.status}: {g.error}" if g.status == FAILED else g.status
            scored = g.status != NOT_GRADED  # not graded: no total at all, never 0
            writer.writerow([_text_cell(g.learner), _text_cell(g.notebook), "" if g.chapter is None else g.chapter,
                             _text_cell(status), *(earned.get(i, "") for i in ids), _points(g.points) if scored else "",
                             _points(g.max_points) if scored else "", _text_cell("; ".join(g.flags)),
                             _text_cell("" if g.status == FAILED else (g.error or ""))]
                            + ([_text_cell((self.roster_row(g) or {}).get("ID", ""))] if self.roster is not None
                               else []))
        return out.getvalue()

    def to_canvas_csv(self, assignment: str) -> str:
        """The gradebook as a CSV Canvas imports (its gradebook's own columns, then `assignment`'s points).

        Canvas matches rows by ``ID`` (or ``SIS User ID``/``SIS Login ID``), which come from the roster
        row each notebook was matched to (never from a name); `assignment` is the column's name as Canvas
        exports it, e.g. ``"Chapter 3 (12345)"``. A notebook on no row, one of several on the same row, or
        on a row without an ID, is left out (:meth:`canvas_left_out` says which and why). A notebook the
        machine kept from being graded (:data:`NOT_GRADED`) keeps its row with a blank score, never 0,
        for a later run to fill.

        Raises:
            InvalidValueError: no roster, or an empty `assignment`.
        """
        if not isinstance(assignment, str) or not assignment.strip():
            raise InvalidValueError(f"`assignment` must name the Canvas assignment column, got {assignment!r}")
        if self.roster is None:
            raise InvalidValueError("a Canvas CSV needs a roster (`--roster`, with Canvas's ID column): Canvas "
                                    "matches its rows by ID, never by name")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["Student", *_CANVAS_COLUMNS, _text_cell(assignment.strip())])
        writer.writerow(["Points Possible", "", "", "", "",
                         _points(max((g.max_points for g in self.grades), default=0))])
        left_out = {id(g) for g, _why in self.canvas_left_out()}
        for g in self.grades:
            if id(g) in left_out:
                continue
            row = self.roster_row(g) or {}
            writer.writerow([_text_cell(row.get("learner", g.learner)),
                             *(_text_cell(row.get(c, "")) for c in _CANVAS_COLUMNS),
                             _points(g.points) if g.status in (GRADED, FAILED) else
                             "" if g.status == NOT_GRADED else "0"])  # not graded: left blank, for a later run
        return out.getvalue()

    def canvas_left_out(self) -> list[tuple[NotebookGrade, str]]:
        """The notebooks the Canvas CSV leaves out, and why: on no roster row, one of several notebooks matched
        to the same row, or a row without an ID (a notebook not graded keeps its row, with a blank score)."""
        if self.roster is None:
            return [(g, "no roster") for g in self.grades]
        per_row: dict[int, list[NotebookGrade]] = {}
        for g in self.grades:
            index = self.roster.matched.get(str(g.notebook))
            if index is not None:
                per_row.setdefault(index, []).append(g)
        out = []
        for g in self.grades:
            index = self.roster.matched.get(str(g.notebook))
            if index is None:
                why = self.roster.unmatched.get(str(g.notebook))
                out.append((g, "not on the roster" + (f" ({why})" if why else "")))
            elif len(per_row[index]) > 1:
                out.append((g, f"{len(per_row[index])} notebooks are matched to the roster row of "
                               f"{self.roster.rows[index]['learner']!r}; grade one of them"))
            elif not any(self.roster.rows[index].get(c) for c in ("ID", "SIS User ID", "SIS Login ID")):
                out.append((g, "its roster row has no ID (nor SIS User ID or SIS Login ID) for Canvas"))
        return out

    def report(self) -> str:
        blocks = [report_block(g) for g in self.grades]
        if self.tampered:
            blocks.insert(0, "WARNING: these files of the grader changed while it ran (answers were judged by the "
                             "versions imported before the first notebook): "
                             + ", ".join(map(escape_controls, self.tampered)))
        off = self.roster_problems()
        if off:
            blocks.append(off)
        blocks.append(self.summary())
        return "\n\n".join(blocks) + "\n"

    def _off_roster(self) -> list[tuple[NotebookGrade, str]]:
        """The notebooks on no roster row, or sharing one with another notebook, and why."""
        return [(g, why) for g, why in self.canvas_left_out()
                if why.startswith("not on the roster") or "notebooks are matched to the roster row" in why]

    def roster_problems(self, canvas: bool = False) -> str:
        """A warning listing the notebooks on no roster row (or sharing one), and with `canvas` every other
        notebook the Canvas CSV leaves out; empty when there are none."""
        if self.roster is None:
            return ""
        left = self.canvas_left_out() if canvas else self._off_roster()
        lines = [f"  {escape_controls(g.notebook)} ({escape_controls(g.learner)}): {escape_controls(why)}"
                 for g, why in left]
        if not lines:
            return ""
        what = "left out of the Canvas CSV" if canvas else "not matched to one roster row (kept out of Canvas's CSV)"
        return f"WARNING: {len(lines)} notebook(s) {what}:\n" + "\n".join(lines)

    def summary(self) -> str:
        n = len(self.grades)
        counts = {s: sum(g.status == s for g in self.grades)
                  for s in (GRADED, FAILED, CHAPTER_UNKNOWN, WRONG_CHAPTER, NOT_GRADED)}
        others = sorted({g.status for g in self.grades} - set(counts))
        parts = [f"{counts[GRADED]} graded"]
        if counts[FAILED]:
            parts.append(f"{counts[FAILED]} failed")
        if counts[CHAPTER_UNKNOWN]:
            parts.append(f"{counts[CHAPTER_UNKNOWN]} chapter unknown")
        if counts[WRONG_CHAPTER]:
            parts.append(f"{counts[WRONG_CHAPTER]} of another chapter")
        if counts[NOT_GRADED]:
            parts.append(f"{counts[NOT_GRADED]} not graded (the machine stopped them: grade them again)")
        parts += [f"{sum(g.status == s for g in self.grades)} {escape_controls(s)}" for s in others]
        if self.roster is not None:
            off = len(self._off_roster())
            if off:
                parts.append(f"{off} not on the roster")
        flagged = sum(bool(g.flags) for g in self.grades)
        if flagged:
            parts.append(f"{flagged} flagged")
        return f"{n} notebook{'s' if n != 1 else ''}: {', '.join(parts)}; function cases drawn with seed {self.seed}"

    def write(self, out_dir, *, canvas_assignment: str | None = None) -> list[Path]:
        """Write ``gradebook.csv``, ``gradebook.json`` and ``feedback/<learner>.md`` (``<learner>_<ID>.md`` for a
        learner whose roster row has an ID, so that namesakes get a file each) into `out_dir`
        (and ``canvas.csv`` with `canvas_assignment`).

        Every file is written first into a fresh folder beside `out_dir`, then renamed into place: a
        symlink, FIFO or file already at a gradebook path is replaced, never written through; a folder
        there is refused.

        Raises:
            InvalidValueError: `out_dir` is a symlink or not a folder, or a folder stands at a file's path.
        """
        import os
        import shutil
        import tempfile

        out = Path(out_dir)
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise InvalidValueError(f"`out_dir` {str(out)!r} exists and is not a folder (or is a symlink)")
        out.mkdir(parents=True, exist_ok=True)
        feedback_dir = out / "feedback"
        if feedback_dir.is_symlink() or (feedback_dir.exists() and not feedback_dir.is_dir()):
            feedback_dir.unlink()
        feedback_dir.mkdir(exist_ok=True)
        files: dict[str, str] = {"gradebook.csv": self.to_csv(), "gradebook.json": self.to_json()}
        if canvas_assignment is not None:
            files["canvas.csv"] = self.to_canvas_csv(canvas_assignment)
        used: set[str] = set()
        for g in self.grades:
            row_id = (self.roster_row(g) or {}).get("ID", "")
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", g.learner + (f"_{row_id}" if row_id else "")).strip("._") \
                or "learner"
            name, n = stem, 1
            while name.lower() in used:
                n += 1
                name = f"{stem}-{n}"
            used.add(name.lower())
            files[f"feedback/{name}.md"] = feedback(g)
        staging = Path(tempfile.mkdtemp(prefix=".gradebook-", dir=out))
        try:
            (staging / "feedback").mkdir()
            written = []
            for rel, text in files.items():
                with open(staging / rel, "w", encoding="utf-8", newline="") as f:
                    f.write(text)
            for rel in files:
                target = out / rel
                if target.is_dir() and not target.is_symlink():
                    raise InvalidValueError(f"a folder stands where the gradebook's file {str(target)!r} goes")
                os.replace(staging / rel, target)
                written.append(target)
            return written
        finally:
            shutil.rmtree(staging, ignore_errors=True)


#: Characters no report, CSV or JSON field carries as they are: C0 and C1 controls (newlines included: one in
#: a file name must not start a line of its own), DEL, and the invisible format characters that reorder or hide
#: text (bidirectional overrides and isolates, zero-width characters, line and paragraph separators).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match) -> str:
    ch = match.group(0)
    return _NAMED_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def escape_controls(text, keep: str = "") -> str:
    """`text` with each control or invisible format character written as a visible escape (``\\n``,
    ``\\x1b``, ``\\u202e``), but those in `keep`.

    >>> print(escape_controls("ada\\nbob: 16/16 \\x1b[2J"))
    ada\\nbob: 16/16 \\x1b[2J
    """
    text = str(text)
    if keep:
        return "".join(ch if ch in keep else _UNSAFE.sub(_escape_char, ch) for ch in text)
    return _UNSAFE.sub(_escape_char, text)


#: The old name of :func:`escape_controls`.
_clean = escape_controls


def json_text(data) -> str:
    """`data` as indented JSON whose strings carry no raw control or invisible format character."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) + "\n"


def _text_cell(text: str) -> str:
    """`text` for a CSV cell: control characters escaped, and a cell a spreadsheet would read as a formula
    (starting with ``=``, ``+``, ``-``, ``@``, a TAB or a CR) given a leading apostrophe.

    >>> _text_cell("\\t=HYPERLINK(1)"), _text_cell("-2+3"), _text_cell("Ada")
    ("'\\\\t=HYPERLINK(1)", "'-2+3", 'Ada')
    """
    text = str(text)
    safe = escape_controls(text)
    return "'" + safe if text[:1] in ("=", "+", "-", "@", "\t", "\r") else safe


def _fenced(text: str) -> list[str]:
    """`text` as a Markdown code block whose fence no run of backticks in it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", text, fence]


def _points(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def report_block(g: NotebookGrade) -> str:
    """The report's lines for one notebook."""
    e_ = escape_controls
    chapter = f"chapter {g.chapter}" if g.chapter is not None else "chapter unknown"
    head = f"{e_(g.learner)} ({e_(g.notebook)}, {chapter}): {e_(g.status)}"
    if g.exercises:
        head += f", {_points(g.points)}/{_points(g.max_points)} points"
    lines = [head]
    width = max([len(e.exercise) for e in g.exercises], default=0)
    for e in g.exercises:
        notes = []
        if e.status == INCORRECT and e.rel_error is not None and math.isfinite(e.rel_error):
            notes.append(f"off by {fmt(e.rel_error * 100)}%")
        if e.diagnosis:
            notes.append(f"likely {e_(e.diagnosis)}")
        extra = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"  {e_(e.exercise):<{width}}  {e_(e.status)}{extra}")
    if g.error:
        lines.append(f"  {'could not run to the end' if g.exercises else 'not graded'}: {e_(g.error)}")
    lines.extend(f"  {e_(c)}" for c in g.cell_errors)
    lines.extend(f"  ignored: {e_(i)}" for i in g.ignored)
    lines.extend(f"  flag: {e_(f)}" for f in g.flags)
    return "\n".join(lines)


_ICONS = {CORRECT: "✅", INCORRECT: "❌", NOT_ATTEMPTED: "⬜", MISSING: "⬜"}

#: The statuses as a learner reads them (the gradebook's files keep the English ones, which programs read).
STATUS_NAMES = (N_("correct"), N_("incorrect"), N_("not attempted"), N_("missing"), N_("graded"), N_("failed"),
                N_("chapter unknown"), N_("wrong chapter"), N_("not graded: retry"))


def feedback(g: NotebookGrade) -> str:
    """The learner's short Markdown feedback, in the notebook's language: each exercise's status and the grader's
    message."""
    with using_language(trusted_language(getattr(g, "language", "en"))):
        return _feedback(g)


def _feedback(g: NotebookGrade) -> str:
    e_ = escape_controls

    def status(s: str) -> str:
        return e_(translate(s))

    notebook = e_(Path(g.notebook).name).replace("`", chr(39))
    if g.chapter is not None:
        title = _("# Chapter {chapter}: feedback for {learner}").format(chapter=g.chapter, learner=e_(g.learner))
    else:
        title = _("# Feedback: feedback for {learner}").format(learner=e_(g.learner))
    if g.exercises:
        head = _("Notebook `{notebook}`: {status}, {points}/{max_points} points.").format(
            notebook=notebook, status=status(g.status), points=_points(g.points), max_points=_points(g.max_points))
    else:
        head = _("Notebook `{notebook}`: {status}.").format(notebook=notebook, status=status(g.status))
    lines = [title, "", head, ""]
    if g.error:
        stopped = _("**The grading run stopped:** {error}") if g.exercises else _("**Not graded:** {error}")
        lines += [stopped.format(error=e_(g.error)), ""]
    if g.exercises:
        lines += [_("| Exercise | Status | Points |"), "|---|---|---|"]
        lines += [f"| {e_(e.exercise)} | {_ICONS.get(e.status, '')} {status(e.status)} | {_points(e.points)}/"
                  f"{_points(e.max_points)} |" for e in g.exercises]
        lines.append("")
        for e in g.exercises:
            message = escape_controls(e.message.strip() or translate(e.status), keep="\n")
            lines += [_("## Exercise {eid}: {status}").format(eid=e_(e.exercise), status=status(e.status)), "",
                      *_fenced(message), ""]
    if g.cell_errors:
        lines += [_("## Cells that raised"), ""] + [f"- {e_(c)}" for c in g.cell_errors] + [""]
    if g.ignored:
        lines += [_("## Answers that did not count"), ""] + [f"- {e_(i)}" for i in g.ignored] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


#: A file name as Canvas's "Download Submissions" writes it: the learner's sortable name in lower case without
#: spaces or punctuation, ``LATE`` for a late submission, the learner's Canvas user ID (the gradebook's ``ID``
#: column), the submission's attachment ID, then the file's own name (``-1``, ``-2``... before the extension for
#: a resubmitted file): ``lovelaceada_LATE_10003_4242_ch01_rooflines-1.ipynb``.
CANVAS_DOWNLOAD_NAME = re.compile(r"^(?P<name>[^\W_]*)_(?:(?P<late>LATE)_)?(?P<id>\d+)_(?P<attachment>\d+)_"
                                  r"(?P<file>.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class CanvasName:
    """What a Canvas bulk-download file name says (see :data:`CANVAS_DOWNLOAD_NAME`)."""

    name: str
    late: bool
    user_id: str
    attachment_id: str
    file: str


def parse_canvas_name(file_name) -> CanvasName | None:
    """The parts of a file name Canvas's bulk download wrote, or None for any other name.

    >>> parse_canvas_name("lovelaceada_LATE_10003_4242_ch01_rooflines-1.ipynb")
    CanvasName(name='lovelaceada', late=True, user_id='10003', attachment_id='4242', file='ch01_rooflines-1.ipynb')
    >>> parse_canvas_name("ada/ch01_rooflines.ipynb") is None
    True
    """
    match = CANVAS_DOWNLOAD_NAME.match(Path(str(file_name)).name)
    if not match:
        return None
    return CanvasName(match["name"], bool(match["late"]), match["id"], match["attachment"], match["file"])


def _norm(text: str) -> str:
    """`text` for comparing names and paths: NFC, case folded, runs of white space made one space."""
    return " ".join(unicodedata.normalize("NFC", str(text)).casefold().split())


#: Letters of other scripts that look like Latin ones (the commonest confusables of Unicode's list).
_LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k", "м": "m", "н": "h",
    "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "γ": "y", "ı": "i", "ℓ": "l", "０": "0", "１": "1",
})


def name_skeleton(name: str) -> str:
    """`name` with case, Unicode form, accents' encoding and look-alike letters of other scripts set aside.

    Two names with the same skeleton look the same on screen (``"a_victim"`` and ``"а_victim"`` with a
    Cyrillic ``а``).

    >>> name_skeleton("a_victim") == name_skeleton("\u0430_victim"), name_skeleton("Jose\u0301") == name_skeleton("José")
    (True, True)
    """
    return unicodedata.normalize("NFKC", _norm(name)).translate(_LOOKALIKES)


def _scripts(name: str) -> set[str]:
    scripts = set()
    for ch in name:
        if ch.isalpha():
            try:
                scripts.add(unicodedata.name(ch).split()[0])
            except ValueError:
                scripts.add("UNNAMED")
    return scripts


@dataclass
class Roster:
    """Who handed in which notebook: a row per learner, with the learner's Canvas columns.

    Made by :func:`load_roster` from a CSV with a ``learner`` column (the learner's name as the
    course uses it: in the feedback, the gradebook and the capstone's brief) and, to match the
    notebooks, a ``notebook`` column, an ``ID`` column (Canvas's user ID), or both; optionally
    Canvas's ``SIS User ID``, ``SIS Login ID`` and ``Section``.

    A notebook is matched to one row, never by the learner's name:

    * a file name that Canvas's bulk download wrote (:func:`parse_canvas_name`) by its user ID,
      against the ``ID`` column;
    * otherwise by the ``notebook`` column: a file name (``ada_ch01.ipynb``, with or without
      ``.ipynb``), a path ending the notebook's path (``ada/ch01_rooflines.ipynb``), or the
      learner's folder (``ada/``: every notebook in a folder of that name); the longest that
      fits wins.

    Names and paths are compared in Unicode's NFC form with case folded. Two rows with the same
    name are two learners (their IDs keep them apart).
    """

    rows: list[dict[str, str]]
    #: A graded notebook's path (as given) -> the index of its row, filled by :meth:`apply`.
    matched: dict[str, int] = field(default_factory=dict)
    #: A graded notebook's path (as given) -> why it is on no row, filled by :meth:`apply`.
    unmatched: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self._files: dict[tuple, int] = {}
        self._folders: dict[tuple, int] = {}
        self._ids: dict[str, int] = {}
        for index, row in enumerate(self.rows):
            notebook = _norm(row.get("notebook", "")).replace("\\", "/")
            while notebook.startswith("./"):
                notebook = notebook[2:]
            if notebook:
                parts = tuple(p for p in notebook.split("/") if p)
                if notebook.endswith("/"):
                    keys = [(self._folders, parts)]
                elif parts[-1].endswith(".ipynb"):
                    keys = [(self._files, parts)]
                else:  # "ada": the file ada.ipynb or the folder ada/
                    keys = [(self._files, parts[:-1] + (parts[-1] + ".ipynb",)), (self._folders, parts)]
                for table, key in keys:
                    if key in table and table[key] != index:
                        raise InvalidValueError(f"`roster`: the notebook {row['notebook']!r} is listed twice "
                                                f"(rows of {self.rows[table[key]]['learner']!r} and "
                                                f"{row['learner']!r})")
                    table[key] = index
            if row.get("ID"):
                if row["ID"] in self._ids:
                    raise InvalidValueError(f"`roster`: the ID {row['ID']!r} is listed twice (rows of "
                                            f"{self.rows[self._ids[row['ID']]]['learner']!r} and {row['learner']!r})")
                self._ids[row["ID"]] = index

    def row_for(self, path) -> tuple[int | None, str]:
        """The index of the row `path` is matched to (or None), and how (or why not)."""
        path = Path(path)
        canvas = parse_canvas_name(path.name)
        if canvas and self._ids:
            if canvas.user_id in self._ids:
                return self._ids[canvas.user_id], f"Canvas ID {canvas.user_id}"
            return None, f"its Canvas ID {canvas.user_id} is on no row of the roster"
        parts = tuple(_norm(p) for p in path.parts if p not in ("/", ""))
        best: list[tuple[int, int]] = []
        for table, here, bonus in ((self._files, parts, 1), (self._folders, parts[:-1], 0)):
            for key, index in table.items():
                if len(key) <= len(here) and here[len(here) - len(key):] == key:
                    best.append((2 * len(key) + bonus, index))
        if not best:
            return None, "its path matches no row's notebook" + (" or ID" if self._ids else "")
        top = max(score for score, _item in best)
        rows = sorted({index for score, index in best if score == top})
        if len(rows) > 1:
            return None, "it matches the rows of " + " and ".join(repr(self.rows[i]["learner"]) for i in rows)
        return rows[0], "its path"

    def apply(self, subs: list[Submission]) -> None:
        """Name each submission's learner from its row; flag, loudly, a notebook that matches no row."""
        self.matched, self.unmatched = {}, {}
        for sub in subs:
            index, how = self.row_for(sub.path)
            if index is None:
                self.unmatched[str(sub.path)] = how
                sub.flags.append(f"NOT ON THE ROSTER: {how}; graded as {sub.learner!r} and left out of the Canvas "
                                 f"CSV")
            else:
                sub.learner = self.rows[index]["learner"]
                self.matched[str(sub.path)] = index

    def row_of(self, notebook: str) -> dict[str, str] | None:
        """The row a graded notebook (its path as given) was matched to, or None."""
        index = self.matched.get(str(notebook))
        return None if index is None else self.rows[index]

    @classmethod
    def single(cls, path, learner: str) -> "Roster":
        """A roster of one learner handing in the notebook at `path` (Gradescope's submissions)."""
        return cls([{"learner": learner, "notebook": Path(path).name}])


_CANVAS_COLUMNS = ("ID", "SIS User ID", "SIS Login ID", "Section")


def load_roster(path) -> Roster:
    """Read a roster CSV (see :class:`Roster`).

    Raises:
        InvalidValueError: no such file; no ``learner`` column, or neither a ``notebook`` nor an ``ID``
            column; a row without a learner or without a way to match it; a notebook or an ID listed twice.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise InvalidValueError(f"`roster`: cannot read {str(path)!r} ({err.strerror or err})") from None
    reader = csv.DictReader(io.StringIO(text))
    fields = {(f or "").strip().lower(): f for f in (reader.fieldnames or [])}
    if "learner" not in fields or not ({"notebook", "id"} & set(fields)):
        raise InvalidValueError(f"`roster` {str(path)!r} needs the columns 'learner' and 'notebook' (or Canvas's "
                                f"'ID'), got {list(reader.fieldnames or [])}")
    rows: list[dict[str, str]] = []
    for n, raw in enumerate(reader, start=2):
        learner = " ".join(unicodedata.normalize("NFC", raw.get(fields["learner"]) or "").split())[:100]
        notebook = (raw.get(fields["notebook"]) or "").strip() if "notebook" in fields else ""
        row = {"learner": learner, "notebook": notebook}
        for column in _CANVAS_COLUMNS:
            if column.lower() in fields:
                row[column] = (raw.get(fields[column.lower()]) or "").strip()
        if not learner or not (notebook or row.get("ID")):
            raise InvalidValueError(f"`roster` {str(path)!r} line {n}: a learner and a notebook (or an ID) are "
                                    f"both needed")
        rows.append(row)
    try:
        return Roster(rows)
    except InvalidValueError as err:
        raise InvalidValueError(f"{err} in {str(path)!r}") from None


def _name_learners(subs: list[Submission], roster: Roster | None = None) -> None:
    """Flag (never rename) a learner named by two or more submissions, and names that only look alike.

    Names are compared in NFC with case folded (``josé`` typed two ways is one learner); two
    submissions matched to two roster rows are two learners whatever their names (namesakes).
    A name mixing scripts (a Cyrillic ``а`` among Latin letters), or one that looks like another
    learner's without being it, is flagged.
    """
    matched = roster.matched if roster is not None else {}
    for s in subs:
        s.learner = unicodedata.normalize("NFC", s.learner)
        if roster is None and parse_canvas_name(s.path.name):
            s.flags.append(f"a file named by Canvas's bulk download, graded without a roster: its learner is "
                           f"{s.learner!r}, not the name the course knows (the capstone's brief is made from the "
                           f"learner's real name); grade with --roster")
    claims: dict[str, list[Submission]] = {}
    for s in subs:
        claims.setdefault(_norm(s.learner), []).append(s)
    for group in claims.values():
        if len(group) < 2:
            continue
        rows = [matched.get(str(s.path)) for s in group]
        if None not in rows and len(set(rows)) == len(rows):
            continue  # namesakes on the roster: their rows (IDs) keep them apart
        for s in group:
            others = ", ".join(str(o.path) for o in group if o is not s)
            s.flags.append(f"the learner {s.learner!r} is also claimed by {others}")
    skeletons: dict[str, set[str]] = {}
    for s in subs:
        skeletons.setdefault(name_skeleton(s.learner), set()).add(_norm(s.learner))
    for s in subs:
        scripts = _scripts(s.learner)
        if len(scripts) > 1:
            s.flags.append(f"the learner's name {s.learner!r} mixes letters of several scripts "
                           f"({', '.join(sorted(scripts)).lower()}): a look-alike of another name?")
        alike = sorted(skeletons[name_skeleton(s.learner)] - {_norm(s.learner)})
        if alike:
            s.flags.append(f"the learner's name {s.learner!r} looks like {', '.join(map(repr, alike))} but is "
                           f"another string (look-alike letters)")
