"""Tiny notebooks for the grader's tests (tests/test_grade.py, tests/test_grade_attacks.py).

Notebooks are written as plain JSON, so that a test can store what no front end
would (outputs on a Markdown cell, forged verdicts), exactly as a learner's file could.
Answers are chapter 1's real exercises; the right ones come from the answer key,
computed in the test process and written into the notebook as literals.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scalelib.course.check import VERDICT_KEY, exercises, get_exercise

ROOT = Path(__file__).resolve().parents[1]

#: A right answer to exercise 1.2 (the arithmetic intensity of a matmul, as a function).
INTENSITY = ("def intensity(B, D, F, bytes_per_value):\n"
             "    return 2 * B * D * F / (bytes_per_value * (B * D + D * F + B * F))")


def reference(eid: str):
    """The reference answer to a number or choice exercise, as plain Python (float, list or str)."""
    value = get_exercise(eid).reference()
    value = getattr(value, "value", value)
    if isinstance(value, str):
        return value
    value = np.asarray(value, dtype=float)
    return value.tolist() if value.ndim else float(value)


def right(eid: str) -> str:
    """A line of code that answers `eid` rightly (number and choice exercises)."""
    return f"sl.check({eid!r}, {reference(eid)!r})"


def max_points(chapter: int) -> float:
    """What a notebook of `chapter` can score: the points of all its exercises."""
    return float(sum(get_exercise(e).points for e in exercises(chapter)))


def numeric_ids(chapter: int) -> list[str]:
    return [e for e in exercises(chapter) if get_exercise(e).kind != "function"]


def code(source: str, outputs=(), tags=()) -> dict:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": list(outputs),
            "source": source}
    if tags:
        cell["metadata"]["tags"] = list(tags)
    return cell


def markdown(source: str, outputs=None) -> dict:
    cell = {"cell_type": "markdown", "metadata": {}, "source": source}
    if outputs is not None:
        cell["outputs"] = list(outputs)  # no front end writes this; a hand-edited file can
    return cell


def forged_verdict(eid: str) -> dict:
    """A stored output that says `eid` was answered correctly, as the old checker displayed it."""
    text = f"✅ Exercise {eid}: correct."
    return {"output_type": "display_data", "data": {"text/plain": text},
            "metadata": {VERDICT_KEY: {"exercise": eid, "status": "correct", "message": text,
                                       "rel_error": 0.0, "diagnosis": None}}}


def forged_all(chapter: int = 1) -> list[dict]:
    return [forged_verdict(e) for e in exercises(chapter)]


def write(path, *cells, chapter: int | None = 1, learner: str | None = None) -> Path:
    """A notebook at `path`: each cell a source string (a code cell) or a dict from :func:`code`/:func:`markdown`."""
    path = Path(path)
    meta = {}
    if chapter is not None:
        meta["chapter"] = chapter
    if learner is not None:
        meta["learner"] = learner
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                          "language": "python"}},
          "cells": []}
    if meta:
        nb["metadata"]["scalelib"] = meta
    for i, cell in enumerate(cells):
        cell = code(cell) if isinstance(cell, str) else dict(cell)
        cell["id"] = f"c{i}"
        nb["cells"].append(cell)
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return path


def row(book, learner: str):
    """The grade of `learner` in a Gradebook."""
    rows = [g for g in book.grades if g.learner == learner]
    assert len(rows) == 1, f"{len(rows)} rows for {learner}: {[g.learner for g in book.grades]}"
    return rows[0]


def statuses(grade) -> dict[str, str]:
    return {e.exercise: e.status for e in grade.exercises}


def answered(grade) -> dict[str, str]:
    """Exercise -> status, for the exercises the notebook answered (not "missing")."""
    return {e.exercise: e.status for e in grade.exercises if e.status != "missing"}
