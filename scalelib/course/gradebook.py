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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import InvalidValueError
from .._units import fmt
from .check import CORRECT, INCORRECT, NOT_ATTEMPTED

if TYPE_CHECKING:
    from .grade import Limits, NotebookGrade, Submission

#: Status of an exercise of the notebook's chapter that no cell answered.
MISSING = "missing"
#: Statuses of a notebook: run to the end; stopped or unreadable (``error`` says why); chapter not known.
GRADED, FAILED, CHAPTER_UNKNOWN = "graded", "failed", "chapter unknown"
#: Status of a notebook of another chapter than the one assigned (``--chapter``): reported, never run or credited.
WRONG_CHAPTER = "wrong chapter"


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

    def to_json(self) -> str:
        return json.dumps({"seed": self.seed, "limits": self.limits.to_json(), "tampered": list(self.tampered),
                           "exercises": self.exercise_ids(),
                           "learners": [g.to_json() for g in self.grades]}, indent=2, ensure_ascii=False) + "\n"

    def to_csv(self) -> str:
        ids = self.exercise_ids()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["learner", "notebook", "chapter", "status", *ids, "total", "max", "flags", "note"])
        for g in self.grades:
            earned = {e.exercise: _points(e.points) for e in g.exercises}
            status = g.status if g.status == GRADED else f"{g.status}: {g.error}" if g.status == FAILED else g.status
            writer.writerow([_text_cell(g.learner), _text_cell(g.notebook), "" if g.chapter is None else g.chapter,
                             _text_cell(status), *(earned.get(i, "") for i in ids), _points(g.points),
                             _points(g.max_points), _text_cell("; ".join(g.flags)),
                             _text_cell("" if g.status == FAILED else (g.error or ""))])
        return out.getvalue()

    def to_canvas_csv(self, assignment: str) -> str:
        """The gradebook as a CSV Canvas imports (its gradebook's own columns, then `assignment`'s points).

        Canvas matches rows by ``ID`` (or ``SIS User ID``/``SIS Login ID``), which come from the roster;
        `assignment` is the column's name as Canvas exports it, e.g. ``"Chapter 3 (12345)"``.
        """
        if not isinstance(assignment, str) or not assignment.strip():
            raise InvalidValueError(f"`assignment` must name the Canvas assignment column, got {assignment!r}")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["Student", *_CANVAS_COLUMNS, assignment.strip()])
        writer.writerow(["Points Possible", "", "", "", "",
                         _points(max((g.max_points for g in self.grades), default=0))])
        for g in self.grades:
            row = self.roster.canvas(g.learner) if self.roster else {}
            writer.writerow([_text_cell(g.learner), *(_text_cell(row.get(c, "")) for c in _CANVAS_COLUMNS),
                             _points(g.points) if g.status in (GRADED, FAILED) else "0"])
        return out.getvalue()

    def report(self) -> str:
        blocks = [report_block(g) for g in self.grades]
        if self.tampered:
            blocks.insert(0, "WARNING: these files of the grader changed while it ran (answers were judged by the "
                             "versions imported before the first notebook): " + ", ".join(self.tampered))
        blocks.append(self.summary())
        return "\n\n".join(blocks) + "\n"

    def summary(self) -> str:
        n = len(self.grades)
        counts = {s: sum(g.status == s for g in self.grades)
                  for s in (GRADED, FAILED, CHAPTER_UNKNOWN, WRONG_CHAPTER)}
        parts = [f"{counts[GRADED]} graded"]
        if counts[FAILED]:
            parts.append(f"{counts[FAILED]} failed")
        if counts[CHAPTER_UNKNOWN]:
            parts.append(f"{counts[CHAPTER_UNKNOWN]} chapter unknown")
        if counts[WRONG_CHAPTER]:
            parts.append(f"{counts[WRONG_CHAPTER]} of another chapter")
        flagged = sum(bool(g.flags) for g in self.grades)
        if flagged:
            parts.append(f"{flagged} flagged")
        return f"{n} notebook{'s' if n != 1 else ''}: {', '.join(parts)}; function cases drawn with seed {self.seed}"

    def write(self, out_dir, *, canvas_assignment: str | None = None) -> list[Path]:
        """Write ``gradebook.csv``, ``gradebook.json`` and ``feedback/<learner>.md`` into `out_dir`
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
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", g.learner).strip("._") or "learner"
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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    """`text` without control characters (a learner's error message could carry terminal escapes)."""
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", text)


def _text_cell(text: str) -> str:
    """`text` for a CSV cell; one a spreadsheet would read as a formula (a learner's name from the notebook's
    metadata, say) gets a leading apostrophe."""
    text = _clean(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _fenced(text: str) -> list[str]:
    """`text` as a Markdown code block whose fence no run of backticks in it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", text, fence]


def _points(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def report_block(g: NotebookGrade) -> str:
    """The report's lines for one notebook."""
    chapter = f"chapter {g.chapter}" if g.chapter is not None else "chapter unknown"
    head = f"{g.learner} ({g.notebook}, {chapter}): {g.status}"
    if g.exercises:
        head += f", {_points(g.points)}/{_points(g.max_points)} points"
    lines = [head]
    width = max([len(e.exercise) for e in g.exercises], default=0)
    for e in g.exercises:
        notes = []
        if e.status == INCORRECT and e.rel_error is not None and math.isfinite(e.rel_error):
            notes.append(f"off by {fmt(e.rel_error * 100)}%")
        if e.diagnosis:
            notes.append(f"likely {e.diagnosis}")
        extra = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"  {e.exercise:<{width}}  {e.status}{extra}")
    if g.error:
        lines.append(f"  {'could not run to the end' if g.exercises else 'not graded'}: {g.error}")
    lines.extend(f"  {c}" for c in g.cell_errors)
    lines.extend(f"  ignored: {i}" for i in g.ignored)
    lines.extend(f"  flag: {f}" for f in g.flags)
    return _clean("\n".join(lines))


_ICONS = {CORRECT: "✅", INCORRECT: "❌", NOT_ATTEMPTED: "⬜", MISSING: "⬜"}


def feedback(g: NotebookGrade) -> str:
    """The learner's short Markdown feedback: each exercise's status and the grader's message."""
    title = f"Chapter {g.chapter}" if g.chapter is not None else "Feedback"
    lines = [f"# {title}: feedback for {g.learner}", "",
             f"Notebook `{Path(g.notebook).name}`: {g.status}"
             + (f", {_points(g.points)}/{_points(g.max_points)} points." if g.exercises else "."), ""]
    if g.error:
        lines += [f"**{'The grading run stopped' if g.exercises else 'Not graded'}:** {g.error}", ""]
    if g.exercises:
        lines += ["| Exercise | Status | Points |", "|---|---|---|"]
        lines += [f"| {e.exercise} | {_ICONS.get(e.status, '')} {e.status} | {_points(e.points)}/"
                  f"{_points(e.max_points)} |" for e in g.exercises]
        lines.append("")
        for e in g.exercises:
            lines += [f"## Exercise {e.exercise}: {e.status}", "", *_fenced(e.message.strip() or e.status), ""]
    if g.cell_errors:
        lines += ["## Cells that raised", ""] + [f"- {c}" for c in g.cell_errors] + [""]
    if g.ignored:
        lines += ["## Answers that did not count", ""] + [f"- {i}" for i in g.ignored] + [""]
    return _clean("\n".join(lines).rstrip("\n")) + "\n"


@dataclass
class Roster:
    """Who handed in which notebook: file name -> learner, with the learner's other columns (Canvas's IDs).

    Made by :func:`load_roster` from a CSV with the columns ``learner`` and ``notebook``
    (a file name, matched with or without ``.ipynb``), and optionally Canvas's ``ID``,
    ``SIS User ID``, ``SIS Login ID`` and ``Section``.
    """

    rows: dict[str, dict[str, str]]

    def apply(self, subs: list[Submission]) -> None:
        for sub in subs:
            row = self.rows.get(sub.path.name.lower()) or self.rows.get(sub.path.stem.lower())
            if row is None:
                sub.flags.append(f"the file {sub.path.name!r} is not on the roster; graded as {sub.learner!r}")
            else:
                sub.learner = row["learner"]

    def canvas(self, learner: str) -> dict[str, str]:
        for row in self.rows.values():
            if row["learner"] == learner:
                return row
        return {}


_CANVAS_COLUMNS = ("ID", "SIS User ID", "SIS Login ID", "Section")


def load_roster(path) -> Roster:
    """Read a roster CSV (see :class:`Roster`).

    Raises:
        InvalidValueError: no such file, a missing ``learner`` or ``notebook`` column, or a file listed twice.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise InvalidValueError(f"`roster`: cannot read {str(path)!r} ({err.strerror or err})") from None
    reader = csv.DictReader(io.StringIO(text))
    fields = {(f or "").strip().lower(): f for f in (reader.fieldnames or [])}
    if "learner" not in fields or "notebook" not in fields:
        raise InvalidValueError(f"`roster` {str(path)!r} needs the columns 'learner' and 'notebook', got "
                                f"{list(reader.fieldnames or [])}")
    rows: dict[str, dict[str, str]] = {}
    for n, raw in enumerate(reader, start=2):
        learner = " ".join((raw.get(fields["learner"]) or "").split())[:100]
        notebook = (raw.get(fields["notebook"]) or "").strip()
        if not learner or not notebook:
            raise InvalidValueError(f"`roster` {str(path)!r} line {n}: a learner and a notebook are both needed")
        key = Path(notebook).name.lower()
        if key in rows:
            raise InvalidValueError(f"`roster` {str(path)!r} line {n}: the notebook {notebook!r} is listed twice")
        row = {"learner": learner}
        for column in _CANVAS_COLUMNS:
            if column.lower() in fields:
                row[column] = (raw.get(fields[column.lower()]) or "").strip()
        rows[key] = row
    return Roster(rows)


def _name_learners(subs: list[Submission]) -> None:
    """A learner named by two or more submissions is reported on each of them; nobody's row is renamed."""
    claims: dict[str, list[Submission]] = {}
    for s in subs:
        claims.setdefault(s.learner.casefold(), []).append(s)
    for group in claims.values():
        if len(group) > 1:
            for s in group:
                others = ", ".join(str(o.path) for o in group if o is not s)
                s.flags.append(f"the learner {s.learner!r} is also claimed by {others}")
