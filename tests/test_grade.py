"""``scalelib grade``: reading submissions, recording and judging answers, cases drawn at grading time,
the gradebook, and a mixed batch graded in one run with every learner's row present.

Most tests here need no kernel: they call the pieces (load, record, judge, the
gradebook) directly. Two run kernels: a batch of good, crashed, looping, malformed,
forged and overwriting notebooks through the command line, and one notebook of
test exercises (chapter 99, registered in this process only: the kernel only
records answers, the grader judges them here). The attacks of issue 7 are in
tests/test_grade_attacks.py.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

import grading_notebooks as nbs
from grading_notebooks import INTENSITY, ROOT, code, forged_all, right, write
from scalelib import InvalidValueError, critical_intensity, explain
from scalelib.course import check as _check
from scalelib.course import record
from scalelib.course.check import Exercise, get_exercise
from scalelib.course.cli import main
from scalelib.course.grade import (
    CHAPTER_UNKNOWN, FAILED, GRADED, MISSING, CellError, ExerciseGrade, Gradebook, Limits, NotebookGrade, collect, feedback,
    grade_notebook, grading_cases, judge, load, parse_size, scan,
)


# ---------------------------------------------------------------------------
# Options and paths


@pytest.mark.parametrize("text, size", [("512M", 512 * 2**20), ("4G", 4 * 2**30), ("1.5GiB", int(1.5 * 2**30)),
                                        ("100k", 100 * 2**10), ("1000", 1000), ("2MB", 2 * 2**20)])
def test_sizes_read_with_binary_prefixes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-1G", "0", "4X"])
def test_a_bad_size_says_what_was_given(text):
    with pytest.raises(InvalidValueError, match=f"got {text!r}"):
        parse_size(text)


@pytest.mark.parametrize("kwargs, name", [({"cell_timeout_s": 0}, "cell_timeout_s"),
                                          ({"notebook_timeout_s": -5}, "notebook_timeout_s"),
                                          ({"memory_bytes": 1000}, "memory_bytes"),
                                          ({"max_output_bytes": 10}, "max_output_bytes")])
def test_bad_limits_name_the_limit(kwargs, name):
    with pytest.raises(InvalidValueError, match=f"`{name}`"):
        Limits(**kwargs)


def test_collect_finds_notebooks_in_folders_skipping_hidden_ones_and_duplicates(tmp_path):
    a = write(tmp_path / "a.ipynb", "1")
    (tmp_path / "sub").mkdir()
    b = write(tmp_path / "sub" / "b.ipynb", "1")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "1")
    assert collect([tmp_path, a]) == [a, b]


def test_collect_names_a_missing_path_and_an_empty_folder(tmp_path):
    with pytest.raises(InvalidValueError, match="no such notebook or folder: '.*nope'"):
        collect([tmp_path / "nope"])
    with pytest.raises(InvalidValueError, match="holds no notebooks"):
        collect([tmp_path])


def test_cli_reports_a_missing_folder_and_exits_1(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 1
    assert "scalelib grade: error: no such notebook or folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["grade"], "the following arguments are required: NOTEBOOK_OR_FOLDER"),
    (["grade", "a.ipynb", "--timeout", "-1"], "argument --timeout: expected a positive number of seconds, got '-1'"),
    (["grade", "a.ipynb", "--timeout", "soon"], "argument --timeout: expected a number of seconds, got 'soon'"),
    (["grade", "a.ipynb", "--memory", "lots"], "argument --memory: expected a size such as 512M or 4G, got 'lots'"),
    (["grade", "a.ipynb", "--notebook-timeout", "0"], "argument --notebook-timeout: expected a positive number"),
    (["grade", "a.ipynb", "--memory", "10M"], "argument --memory: expected at least 64M (or 0 for no limit), got '10M'"),
    (["grade", "a.ipynb", "--max-output", "0"], "argument --max-output: expected a positive size, got '0'"),
    (["regrade"], "argument COMMAND: invalid choice: 'regrade'"),
])
def test_usage_errors_exit_2_and_say_what_is_wrong(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: scalelib [-h] COMMAND ..." in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Reading a submission: sources only, its chapter, its learner, the static scan


def test_load_keeps_sources_only_reads_the_chapter_from_metadata_and_the_learner_from_the_file(tmp_path):
    path = write(tmp_path / "whatever.ipynb", code("x = 1", outputs=forged_all()), chapter=2, learner="  Ada  Lovelace ")
    sub = load(path)
    assert (sub.chapter, sub.learner, sub.error) == (2, "whatever", None)
    assert any("metadata names the learner 'Ada Lovelace'" in f and "'whatever'" in f for f in sub.flags), sub.flags
    assert [c.source for c in sub.nb.cells] == ["x = 1"] and sub.nb.cells[0].outputs == []


def test_the_chapter_falls_back_on_the_file_name_and_a_disagreement_is_flagged(tmp_path):
    assert load(write(tmp_path / "ch12_gpus.ipynb", "1", chapter=None)).chapter == 12
    sub = load(write(tmp_path / "ch02_mine.ipynb", "1", chapter=1))
    assert sub.chapter == 1 and sub.flags == ["its metadata says chapter 1, its file name chapter 2; graded as chapter 1"]
    sub = load(write(tmp_path / "mine.ipynb", "1", chapter=None))
    assert sub.chapter is None and "no chapter in its metadata" in sub.chapter_note


@pytest.mark.parametrize("text, why", [("{not json", "JSONDecodeError"), ("[]", "it has no list of cells")])
def test_an_unreadable_file_is_reported_with_its_reason(tmp_path, text, why):
    path = tmp_path / "ch01_x.ipynb"
    path.write_text(text)
    sub = load(path)
    assert sub.nb is None and sub.error.startswith("not a readable notebook") and why in sub.error
    g = grade_notebook(path)  # never runs: every exercise of chapter 1 missing, one row
    assert (g.status, g.chapter, g.points, g.max_points) == (FAILED, 1, 0, nbs.max_points(1))
    assert {e.status for e in g.exercises} == {MISSING}


def test_a_missing_notebook_is_a_failed_row_not_an_exception(tmp_path):
    g = grade_notebook(tmp_path / "ch01_nope.ipynb")
    assert (g.status, g.error) == (FAILED, "not found")


def test_the_static_scan_reports_code_reaching_into_the_checker_once_per_cell_and_kind(tmp_path):
    sub = load(write(tmp_path / "ch01_x.ipynb",
                     "from scalelib.course.answer_key import ch01\nimport scalelib.course.check",
                     "sl.check = lambda *a: None",
                     "import sys; sys.modules['scalelib'] = None",
                     "import os; os.environ.get('SCALELIB_GRADING')",
                     "x = 1  # nothing to see"))
    assert scan(sub.nb) == [
        "cell 1: reaches into scalelib.course (the checker, the grader, the answer key) (`scalelib.course`)",
        "cell 1: names the answer key (`answer_key`)",
        "cell 2: replaces scalelib's checker (`sl.check =`)",
        "cell 3: patches the import system (sys.modules) (`sys.modules`)",
        "cell 4: looks for the grading run (SCALELIB_GRADING) (`SCALELIB_GRADING`)",
    ]


# ---------------------------------------------------------------------------
# The kernel's side: answers decoded into plain JSON, functions called on cases


class _Broken:
    def __float__(self):
        raise RuntimeError("no number here")


@pytest.mark.parametrize("answer, expected", [
    (None, {"kind": "none"}),
    (..., {"kind": "none"}),
    (3, {"kind": "number", "value": "3.0"}),
    (np.float32(0.5), {"kind": "number", "value": "0.5"}),
    (float("nan"), {"kind": "number", "value": "nan"}),
    (explain(critical_intensity, "h100"), None),
    ([1, 2.5], {"kind": "numbers", "shape": [2], "values": ["1.0", "2.5"]}),
    (((1, 2), (3, 4)), {"kind": "numbers", "shape": [2, 2], "values": ["1.0", "2.0", "3.0", "4.0"]}),
    (np.array([7]), {"kind": "numbers", "shape": [1], "values": ["7.0"]}),
    ("memory", {"kind": "text", "value": "memory"}),
])
def test_answers_are_recorded_as_plain_json(answer, expected):
    described = record.describe(answer)
    if expected is None:  # a Derivation: its number
        assert described == {"kind": "number", "value": repr(float(answer))}
    else:
        assert described == expected
    json.dumps(described)


@pytest.mark.parametrize("answer, kind, error", [
    (_Broken(), "_Broken", "RuntimeError: no number here"),
    ([[1, 2], [3]], "list", "ValueError"),
    ([1, "2"], "list", "a list holding a str"),
    (True, "bool", "a bool is not a number"),
    (1 + 2j, "complex", "a complex is not a number"),
    (list(range(record.MAX_VALUES + 1)), "list", "too many values"),
])
def test_an_unreadable_answer_is_recorded_with_its_type_and_error_never_raised(answer, kind, error):
    described = record.describe(answer)
    assert described["kind"] == "unreadable" and described["type"] == kind and error in described["error"]


def test_a_function_answer_is_kept_in_the_kernel_and_called_case_by_case():
    def slow(x):
        import time
        time.sleep(2)

    def f(x):
        if x == 0:
            raise ZeroDivisionError("x is zero")
        if x == 1:
            return None
        if x == 2:
            raise NotImplementedError
        return [x, 2 * x]

    assert record.describe(f) == {"kind": "function", "name": "f"}
    assert record._call(f, {"x": 0}, 1) == {"result": "error", "type": "ZeroDivisionError", "message": "x is zero"}
    assert record._call(f, {"x": 1}, 1) == {"result": "none"}
    assert record._call(f, {"x": 2}, 1) == {"result": "not implemented"}
    assert record._call(f, {"x": 3}, 1) == {"result": "value", "answer": record.describe([3, 6])}
    assert record._call(slow, {"x": 3}, 0.1) == {"result": "timeout", "limit_s": 0.1}


def test_cases_travel_to_the_kernel_with_their_types():
    cases = [{"a": (0, 3), "n": 16, "x": 2.5, "flag": True, "name": "h100", "nan": float("inf"), "l": [1, (2,)]}]
    decoded = [{k: record.decode_value(v) for k, v in c.items()} for c in json.loads(record.encode_cases(cases))]
    assert decoded == cases and isinstance(decoded[0]["a"], tuple) and isinstance(decoded[0]["n"], int)
    assert record.case_key(cases[0]) == record.case_key(dict(reversed(cases[0].items())))


# ---------------------------------------------------------------------------
# Cases drawn at grading time


FUNCTION_EXERCISES = [e for chapter in (1, 2, 12) for e in _check.exercises(chapter)
                      if get_exercise(e).kind == "function"]


@pytest.mark.parametrize("eid", FUNCTION_EXERCISES)
def test_drawn_cases_follow_the_registered_ones_keep_their_types_and_ranges(eid):
    exercise = get_exercise(eid)
    cases = grading_cases(eid, seed=7)
    n = len(exercise.cases)
    assert cases[:n] == tuple(dict(c) for c in exercise.cases)
    drawn = cases[n:]
    assert len(drawn) == n and len({record.case_key(c) for c in cases}) == 2 * n
    reference = exercise.reference()
    for case in drawn:
        template = next(c for c in exercise.cases if c.keys() == case.keys() and all(
            type(c[k]) is type(case[k]) and np.shape(c[k]) == np.shape(case[k]) for k in c))
        assert template is not None
        for key, value in case.items():  # each number within what the registered cases give its place
            for i, x in enumerate(np.atleast_1d(value)):
                seen = [np.atleast_1d(c[key])[i] for c in exercise.cases if np.size(c[key]) > i]
                assert min(seen) <= x <= max(seen), (key, value)
        assert np.all(np.isfinite(np.asarray(getattr(reference(**case), "value", reference(**case)), dtype=float)))
    assert grading_cases(eid, seed=7) == cases and grading_cases(eid, seed=8) != cases


def test_the_solution_functions_pass_on_cases_drawn_with_many_seeds():
    """Every function exercise's solution, run in this process, is right on the cases of 40 seeds."""
    import re

    import scalelib as sl

    functions = {}  # exercise id -> the solution's function
    for name in ("ch01_rooflines", "ch02_tpus", "ch12_gpus"):
        namespace = {"sl": sl}
        for cell in json.loads((ROOT / "solutions" / f"{name}.ipynb").read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or any(line.lstrip().startswith(("%", "!")) for line in source.split("\n")):
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                exec(source, namespace)
            for eid, function in re.findall(r"sl\.check\(\"([\d.]+)\",\s*(\w+)\)", source):
                if get_exercise(eid).kind == "function":
                    functions[eid] = namespace[function]
    assert set(functions) == set(FUNCTION_EXERCISES)
    for seed in range(40):
        for eid, function in functions.items():
            result = _check.verdict(eid, function, cases=grading_cases(eid, seed))
            assert result.status == "correct", (seed, eid, result.message)


# ---------------------------------------------------------------------------
# Judging, in the grader's process


def test_recorded_answers_are_judged_here():
    assert judge("1.1", record.describe(nbs.reference("1.1")))[0].status == "correct"
    assert judge("1.1", record.describe(8 * nbs.reference("1.1")))[0].status == "incorrect"
    assert judge("1.6", record.describe(nbs.reference("1.6")))[0].status == "correct"
    assert judge("12.1", record.describe(nbs.reference("12.1")))[0].status == "correct"
    assert judge("1.1", record.describe(None))[0].status == "not attempted"


def test_an_unreadable_answer_is_incorrect_and_says_what_it_was():
    result, flag = judge("1.1", record.describe(_Broken()))
    assert result.status == "incorrect" and flag is None
    assert "expected a number in FLOP/B" in result.message and "RuntimeError: no number here" in result.message


@pytest.mark.parametrize("answer", [{"exercise": "1.1", "status": "correct"}, {"kind": "number", "value": 597},
                                    {"kind": "numbers", "shape": [3], "values": ["1.0"]}, "correct"])
def test_a_malformed_record_is_incorrect_and_flagged(answer):
    result, flag = judge("1.1", answer)
    assert result.status == "incorrect" and "malformed" in result.message and "malformed answer record" in flag


def _function_answer(results, eid="1.2", seed=3):
    cases = grading_cases(eid, seed)
    return {"kind": "function", "exercise": eid, "name": "f", "_calls": (cases, results(cases), None)}


def test_a_function_is_judged_on_what_it_returned_in_the_kernel():
    reference = get_exercise("1.2").reference()

    def right_values(cases):
        return [{"result": "value", "answer": record.describe(float(reference(**c)))} for c in cases]

    assert judge("1.2", _function_answer(right_values))[0].status == "correct"
    last_wrong = lambda cases: right_values(cases)[:-1] + [{"result": "value", "answer": record.describe(1.0)}]
    result, _ = judge("1.2", _function_answer(last_wrong))
    assert result.status == "incorrect"
    outcomes = {
        "none": ("incorrect", "returned None"),
        "not implemented": ("not attempted", "NotImplementedError"),
        "error": ("incorrect", "raised KeyError: 'B'"),
        "timeout": ("incorrect", "raised TimeoutError: it did not return within 1 s"),
    }
    for kind, (status, text) in outcomes.items():
        extra = {"error": {"type": "KeyError", "message": "'B'"}, "timeout": {"limit_s": 1.0}}.get(kind, {})
        result, flag = judge("1.2", _function_answer(lambda cases: [{"result": kind, **extra}] * len(cases)))
        assert (result.status, flag) == (status, None) and text in result.message, result.message


def test_a_function_never_called_is_incorrect_and_says_why():
    result, _ = judge("1.2", {"kind": "function", "exercise": "1.2", "name": "f"})
    assert result.status == "incorrect" and "could not be run on the test cases" in result.message


# ---------------------------------------------------------------------------
# The gradebook


def _fake_book() -> Gradebook:
    ada = NotebookGrade("subs/ada.ipynb", "Ada", 99, GRADED, (
        ExerciseGrade("99.1", "correct", "✅ right", 2.0, 2.0), ExerciseGrade("99.2", "incorrect", "❌ off", 0.0, 1.0),
        ExerciseGrade("99.10", MISSING, "never checked", 0.0, 1.0)), flags=("cell 2: names the answer key",))
    bob = NotebookGrade("subs/bob.ipynb", "Bob", 99, FAILED, (
        ExerciseGrade("99.1", "not attempted", "⬜", 0.0, 2.0), ExerciseGrade("99.2", MISSING, "", 0.0, 1.0),
        ExerciseGrade("99.10", MISSING, "", 0.0, 1.0)), error="cell 3 did not finish within 2 s")
    nobody = NotebookGrade("subs/x.ipynb", "x", None, CHAPTER_UNKNOWN, error="chapter unknown: no chapter")
    return Gradebook([ada, bob, nobody], seed=42, limits=Limits())


def test_the_gradebook_csv_has_a_row_per_learner_and_a_column_per_exercise():
    rows = list(csv.reader(io.StringIO(_fake_book().to_csv())))
    assert rows == [
        ["learner", "notebook", "chapter", "status", "99.1", "99.2", "99.10", "total", "max", "flags", "note"],
        ["Ada", "subs/ada.ipynb", "99", "graded", "2", "0", "0", "2", "4", "cell 2: names the answer key", ""],
        ["Bob", "subs/bob.ipynb", "99", "failed: cell 3 did not finish within 2 s", "0", "0", "0", "0", "4", "", ""],
        ["x", "subs/x.ipynb", "", "chapter unknown", "", "", "", "0", "0", "", "chapter unknown: no chapter"],
    ]


def test_the_gradebook_json_holds_seed_limits_and_every_learner():
    data = json.loads(_fake_book().to_json())
    assert data["seed"] == 42 and data["limits"]["cell_timeout_s"] == 120
    assert data["exercises"] == ["99.1", "99.2", "99.10"]
    assert [(r["learner"], r["status"], r["points"], r["max_points"]) for r in data["learners"]] == [
        ("Ada", "graded", 2.0, 4.0), ("Bob", "failed", 0.0, 4.0), ("x", "chapter unknown", 0.0, 0.0)]


def test_feedback_lists_each_exercise_with_its_message_and_leaves_flags_to_the_instructor():
    text = feedback(_fake_book().grades[0])
    assert text.startswith("# Chapter 99: feedback for Ada\n\nNotebook `ada.ipynb`: graded, 2/4 points.")
    assert "| 99.1 | ✅ correct | 2/2 |" in text and "## Exercise 99.2: incorrect\n\n```text\n❌ off\n```" in text
    assert "answer key" not in text


def test_learner_text_reaches_no_terminal_or_spreadsheet_as_code():
    g = NotebookGrade("x.ipynb", "=HYPERLINK(\"http://x\")", 99, GRADED,
                      cell_errors=(CellError(2, "ValueError", "\x1b[2Jcleared"),))
    book = Gradebook([g], seed=1, limits=Limits())
    assert "\x1b" not in book.report() and "\x1b" not in feedback(g)
    assert list(csv.reader(io.StringIO(book.to_csv())))[1][0] == "'=HYPERLINK(\"http://x\")"


def test_the_gradebook_is_written_with_one_feedback_file_per_learner(tmp_path):
    book = _fake_book()
    book.grades.append(NotebookGrade("other/ada.ipynb", "Ada", 99, GRADED))
    written = book.write(tmp_path / "out")
    assert [p.name for p in written] == ["gradebook.csv", "gradebook.json", "Ada.md", "Bob.md", "x.md", "Ada-2.md"]
    assert "2 graded, 1 failed, 1 chapter unknown, 1 flagged; function cases drawn with seed 42" in book.report()


# ---------------------------------------------------------------------------
# Kernels: test exercises judged here, and a mixed batch through the command line


CHAPTER_99 = [
    Exercise("99.1", "bytes", lambda: 1000.0, unit="B", points=2),
    Exercise("99.2", "a function", lambda: (lambda n, scale: n * scale), kind="function",
             cases=(dict(n=1, scale=2.0), dict(n=10, scale=0.5), dict(n=100, scale=3.0))),
    Exercise("99.3", "which bound", lambda: "memory", kind="choice", choices=("compute", "memory")),
    Exercise("99.4", "never checked", lambda: 1.0),
]


@contextlib.contextmanager
def chapter_99():
    """The test exercises, registered in this process only (the kernel records; this process judges)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_check, "_REGISTRY", dict(_check._REGISTRY))
        for exercise in CHAPTER_99:
            _check.register(exercise)
        yield


def test_points_last_answers_and_functions_of_a_chapter_are_judged_in_the_grader(tmp_path):
    path = write(tmp_path / "ada.ipynb", "import scalelib as sl",
                 "sl.check('99.1', 8000)",
                 "sl.check('99.1', 1000)",  # the last answer counts
                 "def f(n, scale):\n    return n * scale\nsl.check('99.2', f)",
                 "def f(n, scale):\n    n * scale\nsl.check('99.2', f)",  # forgot `return`: the last one counts
                 "sl.check('99.3', 'compute')",
                 "sl.check(99.3, 'memory')",  # a float id: not counted, and said so
                 "undefined_name + 1", chapter=99, learner="Ada")
    with chapter_99():
        g = grade_notebook(path, Limits(cell_timeout_s=20), seed=5)
    assert (g.status, g.learner, g.chapter) == (GRADED, "ada", 99)
    assert [(e.exercise, e.status, e.points, e.max_points, e.cell) for e in g.exercises] == [
        ("99.1", "correct", 2.0, 2.0, 3), ("99.2", "incorrect", 0.0, 1.0, 5), ("99.3", "incorrect", 0.0, 1.0, 6),
        ("99.4", MISSING, 0.0, 1.0, None)]
    assert "returned None" in g.exercises[1].message
    assert (g.points, g.max_points) == (2, 5)
    assert [str(c) for c in g.cell_errors] == ["cell 8 (undefined_name + 1) raised NameError: name 'undefined_name' "
                                               "is not defined"]
    assert g.ignored == ("cell 7: an exercise id that is not a string (99.3); write it as '1.10'",)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """good, crashed, looping, malformed, forged and overwriting notebooks: one `scalelib grade` run."""
    folder = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("gradebook")
    good = json.loads((ROOT / "solutions" / "ch01_rooflines.ipynb").read_text())
    good["metadata"]["scalelib"] = {"chapter": 1, "learner": "Alice Example"}
    (folder / "alice.ipynb").write_text(json.dumps(good))
    write(folder / "bob.ipynb", "import scalelib as sl", right("1.1"), "1 / 0", right("1.6"),
          "import os; os._exit(3)", right("1.7"))
    write(folder / "carol.ipynb", "import scalelib as sl", right("1.6"), "while True:\n    pass", right("1.1"))
    (folder / "dave.ipynb").write_text("{not json")
    write(folder / "eve.ipynb", "import scalelib as sl", code("sl.check('1.1', None)", outputs=forged_all()))
    write(folder / "frank.ipynb", "import json, pathlib\n"
          f"for name in ('alice', 'bob', 'carol'):\n"
          f"    target = pathlib.Path({str(folder)!r}) / (name + '.ipynb')\n"
          "    target.write_text(json.dumps({'cells': [], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))",
          INTENSITY + "\nsl = __import__('scalelib')\nsl.check('1.2', intensity)")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = main(["grade", str(folder), "--out", str(out), "--timeout", "3", "--seed", "11", "--strict",
                   "--csv", str(out / "extra.csv")])
    return {"rc": rc, "out": stdout.getvalue(), "dir": out,
            "csv": list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))),
            "json": json.loads((out / "gradebook.json").read_text())}


def test_every_learner_of_the_batch_has_a_row_and_strict_fails(batch):
    assert batch["rc"] == 1
    assert [r["learner"] for r in batch["csv"]] == ["alice", "bob", "carol", "dave", "eve", "frank"]
    assert (batch["dir"] / "extra.csv").read_text() == (batch["dir"] / "gradebook.csv").read_text()
    assert sorted(p.name for p in (batch["dir"] / "feedback").iterdir()) == [
        "alice.md", "bob.md", "carol.md", "dave.md", "eve.md", "frank.md"]
    assert batch["json"]["seed"] == 11


def test_the_good_learner_keeps_full_marks_although_a_neighbour_overwrote_the_file(batch):
    alice = batch["csv"][0]
    full = f"{nbs.max_points(1):g}"
    assert (alice["status"], alice["total"], alice["max"]) == ("graded", full, full)
    assert all(alice[e] == f"{get_exercise(e).points:g}" for e in _check.exercises(1))


def test_crashed_looping_malformed_forged_and_overwriting_learners_get_what_they_earned(batch):
    rows = {r["learner"]: r for r in batch["csv"]}
    assert rows["bob"]["status"].startswith("failed: the kernel died while running cell 5")
    assert (rows["bob"]["1.1"], rows["bob"]["1.6"], rows["bob"]["1.7"], rows["bob"]["total"]) == ("1", "1", "0", "2")
    assert rows["carol"]["status"] == "failed: cell 3 did not finish within 3 s; the cells after it were not run"
    assert (rows["carol"]["1.6"], rows["carol"]["1.1"]) == ("1", "0")
    assert rows["dave"]["status"].startswith("failed: not a readable notebook") and rows["dave"]["total"] == "0"
    assert (rows["eve"]["status"], rows["eve"]["total"]) == ("graded", "0")
    assert (rows["frank"]["status"], rows["frank"]["1.2"], rows["frank"]["total"]) == ("graded", "1", "1")
    assert "cell 1: " not in rows["frank"]["flags"]  # writing files is not flagged: it is not reaching into the checker


def test_the_batch_report_is_all_the_terminal_shows(batch):
    out = batch["out"]
    assert out.startswith("alice (") and "bob (" in out and "dave (" in out
    assert "6 notebooks: 3 graded, 3 failed, 1 flagged; function cases drawn with seed 11" in out, out[-400:]
    assert "WARNING" not in out and "IPKernelApp" not in out
    feedback_bob = (batch["dir"] / "feedback" / "bob.md").read_text()
    assert "**The grading run stopped:** the kernel died while running cell 5" in feedback_bob
    assert "cell 3 (1 / 0) raised ZeroDivisionError: division by zero" in feedback_bob


def test_the_grader_prints_no_kernel_warnings_to_the_terminal(tmp_path):
    import subprocess
    import sys

    path = write(tmp_path / "ch01_one.ipynb", "import scalelib as sl", right("1.6"))
    scalelib_command = str(Path(sys.executable).parent / "scalelib")
    done = subprocess.run([scalelib_command, "grade", str(path), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "TCP" not in done.stdout and "1 notebook: 1 graded" in done.stdout



def test_make_bench_runs_a_notebook_without_kernel_warnings_on_the_terminal(tmp_path, capfd):
    from scalelib.course.bench import notebook_time_s

    path = write(tmp_path / "one.ipynb", "x = 1")
    assert notebook_time_s(path) > 0
    captured = capfd.readouterr()
    assert "IPKernelApp" not in captured.err + captured.out and "TCP" not in captured.err


def test_the_instructors_page_is_on_the_site_and_says_what_is_not_protected():
    import yaml

    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    assert "book/instructors" in [c["file"] for part in toc["parts"] for c in part["chapters"]]
    page = (ROOT / "book" / "instructors.md").read_text()
    for needed in ("make site SOLUTIONS=no", "scalelib grade submissions/ --out gradebook", "gradebook.csv",
                   "## What it does not protect against", "bubblewrap", "--unsafe", "--strict", "--roster",
                   "--chapter N", "--jobs N", "scalelib autograder --gradescope", "canvas.csv",
                   "docker run --rm --network none"):
        assert needed in page, needed
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## For instructors"):readme.index("## For authors")]
    for needed in ("--out gradebook", "bubblewrap sandbox", "--unsafe", "**not** protect", "SOLUTIONS=no",
                   "--gradescope"):
        assert needed in section, needed


def test_a_second_draw_is_judged_on_the_seed_the_grader_sent_never_one_the_kernel_names():
    from scalelib.course.grade import _merge_second_draws, second_draw_seeds

    seeds = second_draw_seeds("10.3", 2, 7)
    assert seeds == second_draw_seeds("10.3", 2, 7) and seeds != second_draw_seeds("10.3", 2, 8)
    assert all(10**6 <= s < 10**9 for s in seeds)
    out1, out2 = record.describe(np.ones(4)), record.describe(np.zeros(4))
    first = [{"result": "value", "answer": out1, "hlo": "", "replicated": True, "seed2": 5, "answer2": out1},
             {"result": "error", "type": "ValueError", "message": "no"}]
    merged = _merge_second_draws(first, [{"result": "value", "answer": out2, "seed2": 99}, {"result": "skipped"}],
                                 seeds)
    assert merged[0] == {**first[0], "seed2": seeds[0], "answer2": out2}  # the kernel's own seed2s are ignored
    assert merged[1] == first[1]
    assert _merge_second_draws(first[:1], [{"result": "timeout", "limit_s": 1.0}], seeds) == [
        {"result": "timeout", "limit_s": 1.0}]  # what stopped the second run is the function's result
    assert "answer2" not in _merge_second_draws(first[:1], [], seeds)[0]  # never run: judged so


def test_a_notebook_the_machine_kept_from_grading_gets_no_total_and_no_canvas_score_never_0():
    from scalelib.course.grade import NOT_GRADED

    from scalelib.course.grade import Roster, Submission

    stopped = NotebookGrade("/subs/ada.ipynb", "ada", 1, NOT_GRADED, error="the kernel could not start (...); tried "
                            "3 times", retries=("try 1: ...", "try 2: ...", "try 3: ..."))
    roster = Roster([{"learner": "ada", "notebook": "ada.ipynb", "ID": "101"},
                     {"learner": "bob", "notebook": "bob.ipynb", "ID": "102"}])
    roster.apply([Submission(Path(f"/subs/{n}.ipynb"), learner=n) for n in ("ada", "bob")])
    book = Gradebook([stopped, NotebookGrade("/subs/bob.ipynb", "bob", 1, GRADED)], 1, Limits(), roster=roster)
    row = next(csv.DictReader(io.StringIO(book.to_csv())))
    assert (row["status"], row["total"], row["max"]) == (NOT_GRADED, "", "")
    assert "tried 3 times" in row["note"]
    canvas = list(csv.reader(io.StringIO(book.to_canvas_csv("Chapter 1 (1)"))))
    assert canvas[2][:2] == ["ada", "101"] and canvas[2][-1] == ""  # its row kept, its score blank: Canvas keeps none
    assert canvas[3][:2] == ["bob", "102"] and canvas[3][-1] == "0"
    assert book.canvas_left_out() == []
    assert "1 not graded (the machine stopped them: grade them again)" in book.summary()
    assert json.loads(book.to_json())["learners"][0]["retries"] == ["try 1: ...", "try 2: ...", "try 3: ..."]
