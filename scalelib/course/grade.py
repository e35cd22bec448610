"""Grade notebooks: run each in a fresh kernel and read back the checker's verdicts.

Every ``check("1.3", answer)`` in a notebook displays its verdict as JSON
(in output metadata, under :data:`~scalelib.course.check.VERDICT_KEY`). :func:`grade_notebook` runs a copy of the
notebook top to bottom with nbclient (in the notebook's folder, carrying on past
cells that raise), collects those verdicts, and adds every exercise of the
notebook's chapter that was never checked as ``"missing"``. Nothing about a
learner's notebook makes it raise: a notebook that cannot be read, a kernel that
dies, or a cell that runs too long becomes the notebook's ``error``.

From a shell: ``scalelib grade exercises/*.ipynb --csv grades.csv``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from .check import CORRECT, VERDICT_KEY, exercises
from .._units import fmt

#: status of an exercise of the notebook's chapter that no cell checked.
MISSING = "missing"
_CHAPTER_IN_NAME = re.compile(r"(?:^|[^a-z])ch(\d+)", re.IGNORECASE)
_LOG = logging.getLogger("scalelib.grade")
_LOG.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class ExerciseGrade:
    """The last verdict a notebook showed for one exercise (status ``"missing"`` if none)."""

    exercise: str
    status: str  # "correct", "incorrect", "not attempted" or "missing"
    message: str = ""
    rel_error: float | None = None
    diagnosis: str | None = None


@dataclass(frozen=True)
class CellError:
    """A cell that raised; `cell` counts from 1, `source` is the cell's first line."""

    cell: int
    ename: str
    evalue: str
    source: str = ""

    def __str__(self) -> str:
        where = f"cell {self.cell}" + (f" ({self.source})" if self.source else "")
        return f"{where} raised {self.ename}: {self.evalue}"


@dataclass(frozen=True)
class NotebookGrade:
    """What grading one notebook found.

    Attributes:
        notebook: the notebook's path, as given.
        exercises: one grade per exercise, in exercise order.
        cell_errors: the cells that raised (grading carried on after them).
        error: why the notebook could not be run to the end, or None.
    """

    notebook: str
    exercises: tuple[ExerciseGrade, ...] = ()
    cell_errors: tuple[CellError, ...] = ()
    error: str | None = None

    @property
    def status(self) -> str:
        """``"ran"``, or ``"failed"`` when the notebook could not be run to the end."""
        return "failed" if self.error else "ran"

    @property
    def correct(self) -> int:
        return sum(e.status == CORRECT for e in self.exercises)

    @property
    def total(self) -> int:
        return len(self.exercises)

    def to_json(self) -> dict:
        return {
            "notebook": self.notebook,
            "status": self.status,
            "error": self.error,
            "correct": self.correct,
            "total": self.total,
            "exercises": [asdict(e) for e in self.exercises],
            "cell_errors": [asdict(c) for c in self.cell_errors],
        }


def _id_key(exercise_id: str):
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in exercise_id.split("."))


def _first_line(source) -> str:
    text = source if isinstance(source, str) else "".join(source)
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if not lines:
        return ""
    return lines[0] if len(lines[0]) <= 60 else lines[0][:57] + "..."


def _verdicts_and_errors(nb) -> tuple[dict[str, ExerciseGrade], list[CellError]]:
    """The last verdict per exercise, and the cells that raised, from `nb`'s outputs."""
    seen: dict[str, ExerciseGrade] = {}
    errors: list[CellError] = []
    for index, cell in enumerate(nb.get("cells", []), start=1):
        for output in cell.get("outputs", []) or []:
            if output.get("output_type") == "error":
                errors.append(CellError(index, output.get("ename", ""), output.get("evalue", ""),
                                        _first_line(cell.get("source", ""))))
            metadata = output.get("metadata") or {}
            if VERDICT_KEY not in metadata:
                continue
            verdict = metadata[VERDICT_KEY]
            if isinstance(verdict, str):
                try:
                    verdict = json.loads(verdict)
                except ValueError:
                    continue
            if not isinstance(verdict, dict) or "exercise" not in verdict:
                continue
            eid = str(verdict["exercise"])
            seen[eid] = ExerciseGrade(eid, str(verdict.get("status", "")), str(verdict.get("message", "")),
                                      verdict.get("rel_error"), verdict.get("diagnosis"))
    return seen, errors


def _chapters(path: Path, seen: Iterable[str]) -> set[int]:
    """The chapter named in the file name (``ch03_...``), else those of the exercises seen."""
    match = _CHAPTER_IN_NAME.search(path.name)
    if match:
        return {int(match.group(1))}
    return {int(e.split(".")[0]) for e in seen if e.split(".")[0].isdigit()}


def _result(path, nb, error: str | None) -> NotebookGrade:
    seen, cell_errors = _verdicts_and_errors(nb) if nb is not None else ({}, [])
    grades = dict(seen)
    for chapter in _chapters(Path(path), seen):
        for eid in exercises(chapter):
            grades.setdefault(eid, ExerciseGrade(eid, MISSING, f"Exercise {eid}: no check output in the notebook."))
    ordered = tuple(grades[k] for k in sorted(grades, key=_id_key))
    return NotebookGrade(str(path), ordered, tuple(cell_errors), error)


def grade_notebook(path, timeout_per_cell: float = 120, kernel_name: str = "python3") -> NotebookGrade:
    """Run a copy of the notebook at `path` in a fresh kernel and grade its checks.

    Args:
        path: an ``.ipynb`` file; it is read, never written.
        timeout_per_cell: seconds one cell may run before grading stops (s).
        kernel_name: the Jupyter kernel to run it in.

    Returns:
        A :class:`NotebookGrade`. Cells run in the notebook's folder; a cell that
        raises is recorded and the next ones still run. A notebook that cannot be
        read, a kernel that dies or a cell that times out is reported in ``error``
        with whatever verdicts came before it; this function does not raise for them.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    path = Path(path)
    try:
        nb = nbformat.read(str(path), as_version=4)
    except FileNotFoundError:
        return _result(path, None, "not found")
    except Exception as err:  # noqa: BLE001 - anything unreadable is reported, not raised
        return _result(path, None, f"not a readable notebook ({type(err).__name__}: {_one_line(err)})")
    running = [0]
    client = NotebookClient(
        nb,
        timeout=timeout_per_cell,
        kernel_name=kernel_name,
        allow_errors=True,
        resources={"metadata": {"path": str(path.resolve().parent)}},
        on_cell_execute=lambda cell, cell_index: running.__setitem__(0, cell_index + 1),
        log=_LOG,  # its complaints (a timeout, a dead kernel) come back in the grade instead
    )
    error = None
    try:
        # The kernel process's own stderr carries only its logging and library
        # warnings; what cells print reaches their outputs.
        client.execute(stderr=subprocess.DEVNULL)
    except CellTimeoutError:
        error = (f"cell {running[0]} did not finish within {fmt(timeout_per_cell, 's')}; "
                 f"the cells after it were not run")
    except DeadKernelError:
        error = f"the kernel died while running cell {running[0]}; the cells after it were not run"
    except Exception as err:  # noqa: BLE001 - a kernel that cannot start, a malformed notebook, ...
        error = f"could not run ({type(err).__name__}: {_one_line(err)})"
    result = _result(path, nb, error)
    if error and error.startswith(f"cell {running[0]} did not finish"):  # drop the interrupt that stopped it
        kept = tuple(c for c in result.cell_errors if not (c.cell == running[0] and c.ename == "KeyboardInterrupt"))
        result = NotebookGrade(result.notebook, result.exercises, kept, result.error)
    return result


def _one_line(err) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:297] + "..."


def grade(paths: Iterable, timeout_per_cell: float = 120, kernel_name: str = "python3") -> list[NotebookGrade]:
    """:func:`grade_notebook` for each of `paths`, in order; one failure never stops the others."""
    return [grade_notebook(p, timeout_per_cell, kernel_name) for p in paths]


def to_json(grades: Iterable[NotebookGrade]) -> str:
    """`grades` as a JSON list, one object per notebook (see :meth:`NotebookGrade.to_json`)."""
    return json.dumps([g.to_json() for g in grades], indent=2, ensure_ascii=False) + "\n"


CSV_COLUMNS = ("notebook", "exercise", "status", "rel_error", "diagnosis", "error")


def to_csv(grades: Iterable[NotebookGrade]) -> str:
    """`grades` as CSV: one row per notebook and exercise, then one per notebook-level problem.

    Columns: notebook, exercise, status, rel_error, diagnosis, error. A notebook
    that could not be run to the end adds a row with status ``run failed``; a cell
    that raised adds one with status ``cell error``; both leave `exercise` empty.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for g in grades:
        for e in g.exercises:
            rel = "" if e.rel_error is None else repr(float(e.rel_error))
            writer.writerow([g.notebook, e.exercise, e.status, rel, e.diagnosis or "", ""])
        if g.error:
            writer.writerow([g.notebook, "", "run failed", "", "", g.error])
        for c in g.cell_errors:
            writer.writerow([g.notebook, "", "cell error", "", "", str(c)])
    return out.getvalue()


def report(grades: Iterable[NotebookGrade]) -> str:
    """A plain-text report: per notebook, each exercise's status, problems, and ``total: 5/7 correct``."""
    grades = list(grades)
    blocks = []
    for g in grades:
        lines = [g.notebook]
        width = max([len(e.exercise) for e in g.exercises], default=0)
        for e in g.exercises:
            notes = []
            if e.status not in (CORRECT, MISSING) and e.rel_error is not None:
                notes.append(f"off by {fmt(e.rel_error * 100)}%")
            if e.diagnosis:
                notes.append(f"likely {e.diagnosis}")
            extra = f"  ({'; '.join(notes)})" if notes else ""
            lines.append(f"  {e.exercise:<{width}}  {e.status}{extra}")
        if g.error:
            lines.append(f"  could not run to the end: {g.error}")
        lines.extend(f"  {c}" for c in g.cell_errors)
        lines.append(f"  total: {g.correct}/{g.total} correct")
        blocks.append("\n".join(lines))
    if len(grades) > 1:
        correct, total = sum(g.correct for g in grades), sum(g.total for g in grades)
        failed = sum(g.status == "failed" for g in grades)
        summary = f"{len(grades)} notebooks: {correct}/{total} correct"
        if failed:
            summary += f"; {failed} could not be run to the end"
        blocks.append(summary)
    return "\n\n".join(blocks) + "\n"
