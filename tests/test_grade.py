"""Grading notebooks in fresh kernels (scalelib.course.grade) and the `scalelib grade` command.

Kernels are slow to start, so the notebooks run twice in all: one batch through
the command line (shared by most tests below) and one notebook that times out.
The test exercises (chapter 99) live in a small module next to the notebooks,
which the notebooks import in their kernel and the tests load in this process.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json

import nbformat
import pytest

from scalelib.course import check as _check
from scalelib.course.check import COMMON_MISTAKES
from scalelib.course.cli import main
from scalelib.course.grade import ExerciseGrade, NotebookGrade, grade_notebook, report, to_csv

EXERCISES = '''\
"""Test exercises of chapter 99."""
from scalelib.course.check import _REGISTRY, Exercise, register

for exercise in [
    Exercise("99.1", "bytes", lambda: 1000.0, unit="B"),
    Exercise("99.2", "seconds", lambda: 2.0, unit="s"),
    Exercise("99.3", "which bound", lambda: "memory", kind="choice", choices=("compute", "memory")),
    Exercise("99.4", "never checked", lambda: 1.0),
]:
    if exercise.id not in _REGISTRY:
        register(exercise)
'''

FACTOR_8 = f"{COMMON_MISTAKES[8.0]} (your answer is too large by that factor)"


def write_notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    nbformat.write(nb, path)
    return path


@contextlib.contextmanager
def chapter_99():
    """The test exercises registered in this process too (for "missing"), then forgotten."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_check, "_REGISTRY", {})
        exec(EXERCISES, {})
        yield


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """`scalelib grade BROKEN GOOD --json --csv` run once; its exit code, output and files."""
    folder = tmp_path_factory.mktemp("grade")
    (folder / "course99.py").write_text(EXERCISES)
    (folder / "answer.txt").write_text("16")  # read through a relative path: cells run in the notebook's folder
    good = write_notebook(
        folder / "ch99_demo.ipynb",
        "import course99\nimport scalelib as sl",
        "sl.check('99.1', 1000)",
        "sl.check('99.2', 2.0)",
        "sl.check('99.3', None)",
        "undefined_name + 1",
        "sl.check('99.2', float(open('answer.txt').read()))",  # the last verdict for 99.2 wins
    )
    broken = folder / "ch99_broken.ipynb"
    broken.write_text("{not json")
    out = io.StringIO()
    with chapter_99(), contextlib.redirect_stdout(out):
        rc = main(["grade", str(broken), str(good), "--json", str(folder / "g.json"), "--csv", str(folder / "g.csv")])
    return {
        "rc": rc, "out": out.getvalue(), "good": str(good), "broken": str(broken),
        "json": json.loads((folder / "g.json").read_text()),
        "csv": list(csv.reader(io.StringIO((folder / "g.csv").read_text()))),
    }


def test_grade_exits_0_even_when_answers_are_wrong(batch):
    assert batch["rc"] == 0


def test_grade_report_lists_every_exercise_problems_and_totals(batch):
    good, broken = batch["good"], batch["broken"]
    assert batch["out"] == f"""{broken}
  99.1  missing
  99.2  missing
  99.3  missing
  99.4  missing
  could not run to the end: not a readable notebook (NotJSONError: Notebook does not appear to be JSON: '{{not json')
  total: 0/4 correct

{good}
  99.1  correct
  99.2  incorrect  (off by 700%; likely {FACTOR_8})
  99.3  not attempted
  99.4  missing
  cell 5 (undefined_name + 1) raised NameError: name 'undefined_name' is not defined
  total: 1/4 correct

2 notebooks: 1/8 correct; 1 could not be run to the end
"""


def test_grade_json_holds_statuses_diagnosis_and_errors(batch):
    broken, good = batch["json"]
    assert (broken["notebook"], broken["status"], broken["correct"], broken["total"]) == (batch["broken"], "failed", 0, 4)
    assert {e["status"] for e in broken["exercises"]} == {"missing"}  # its chapter, from the file name
    assert broken["error"].startswith("not a readable notebook (NotJSONError")
    assert (good["status"], good["error"], good["correct"], good["total"]) == ("ran", None, 1, 4)
    assert [(e["exercise"], e["status"]) for e in good["exercises"]] == [
        ("99.1", "correct"), ("99.2", "incorrect"), ("99.3", "not attempted"), ("99.4", "missing")]
    assert good["exercises"][1]["diagnosis"] == FACTOR_8
    assert good["exercises"][1]["rel_error"] == 7.0
    assert good["cell_errors"] == [
        {"cell": 5, "ename": "NameError", "evalue": "name 'undefined_name' is not defined", "source": "undefined_name + 1"}]


def test_grade_csv_has_one_row_per_notebook_and_exercise_then_problems(batch):
    good, broken = batch["good"], batch["broken"]
    assert batch["csv"] == [
        ["notebook", "exercise", "status", "rel_error", "diagnosis", "error"],
        *([broken, f"99.{i}", "missing", "", "", ""] for i in range(1, 5)),
        [broken, "", "run failed", "", "", batch["json"][0]["error"]],
        [good, "99.1", "correct", "0.0", "", ""],
        [good, "99.2", "incorrect", "7.0", FACTOR_8, ""],
        [good, "99.3", "not attempted", "", "", ""],
        [good, "99.4", "missing", "", "", ""],
        [good, "", "cell error", "", "", "cell 5 (undefined_name + 1) raised NameError: name 'undefined_name' is not defined"],
    ]


def test_cell_that_runs_too_long_stops_the_notebook_and_keeps_earlier_verdicts(tmp_path):
    (tmp_path / "course99.py").write_text(EXERCISES)
    path = write_notebook(tmp_path / "slow.ipynb", "import course99, time\nimport scalelib as sl",
                          "sl.check('99.1', 1000)", "time.sleep(60)", "sl.check('99.2', 2.0)")
    with chapter_99():
        result = grade_notebook(path, timeout_per_cell=1)
    assert result.error == "cell 3 did not finish within 1 s; the cells after it were not run"
    assert result.status == "failed"
    assert [(e.exercise, e.status) for e in result.exercises] == [
        ("99.1", "correct"), ("99.2", "missing"), ("99.3", "missing"), ("99.4", "missing")]  # chapter from 99.1
    assert result.cell_errors == ()


def test_missing_notebook_is_reported_not_raised(tmp_path):
    result = grade_notebook(tmp_path / "nope.ipynb")
    assert (result.status, result.error, result.total) == ("failed", "not found", 0)


def test_strict_exits_1_when_a_notebook_cannot_be_run(tmp_path, capsys):
    (tmp_path / "broken.ipynb").write_text("[]")
    assert main(["grade", str(tmp_path / "broken.ipynb"), "--strict"]) == 1


@pytest.mark.parametrize("status, code", [("correct", 0), ("not attempted", 1)])
def test_strict_exits_1_unless_every_exercise_is_correct(status, code, monkeypatch, capsys):
    fake = NotebookGrade("nb.ipynb", (ExerciseGrade("99.1", "correct"), ExerciseGrade("99.2", status)))
    monkeypatch.setattr("scalelib.course.grade.grade_notebook", lambda *args, **kw: fake)
    assert main(["grade", "nb.ipynb", "--strict"]) == code
    assert main(["grade", "nb.ipynb"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["grade"], "the following arguments are required: NOTEBOOK"),
    (["grade", "a.ipynb", "--timeout", "-1"], "argument --timeout: expected a positive number of seconds, got '-1'"),
    (["grade", "a.ipynb", "--timeout", "soon"], "argument --timeout: expected a number of seconds, got 'soon'"),
    (["regrade"], "argument COMMAND: invalid choice: 'regrade'"),
])
def test_usage_errors_exit_2_and_say_what_is_wrong(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: scalelib [-h] COMMAND ..." in capsys.readouterr().err


def test_report_and_csv_of_a_notebook_with_nothing_checked():
    empty = NotebookGrade("x.ipynb")
    assert report([empty]) == "x.ipynb\n  total: 0/0 correct\n"
    assert to_csv([empty]) == "notebook,exercise,status,rel_error,diagnosis,error\n"
