"""Grading at course scale: what was assigned, who handed in what, several at once, Gradescope and Canvas.

Also the grader's own integrity: the gradebook is written by renaming into place (never through a
planted symlink, FIFO or folder), and grading refuses to run without a sandbox unless told.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

import grading_notebooks as nbs
from grading_notebooks import INTENSITY, ROOT, right, write
from scalelib.course import grade as grade_module
from scalelib.course import sandbox
from scalelib.course.check import exercises, get_exercise, verdict
from scalelib.course.cli import main
from scalelib.course.grade import (FAILED, GRADED, UNSAFE_FLAG, WRONG_CHAPTER, Gradebook, Limits, NotebookGrade,
                                   grade, grading_cases, learner_from_path, load_roster)
from scalelib._errors import InvalidValueError

LIMITS = Limits(cell_timeout_s=30, notebook_timeout_s=60, memory_bytes=int(1.5 * 2**30))


def test_a_notebook_of_another_chapter_than_the_one_assigned_is_reported_not_run_or_credited(tmp_path):
    solved = json.loads((ROOT / "solutions" / "ch09_profiling.ipynb").read_text())
    solved["metadata"]["scalelib"] = {"chapter": 9}
    (tmp_path / "bob.ipynb").write_text(json.dumps(solved))  # chapter 9's metadata and solution, no chNN in the name
    write(tmp_path / "carol_ch09.ipynb", "import scalelib as sl", chapter=None)
    book = grade([tmp_path], LIMITS, seed=1, chapter=1)
    bob, carol = nbs.row(book, "bob"), nbs.row(book, "carol")
    for g, how in ((bob, "metadata"), (carol, "file name")):
        assert g.status == WRONG_CHAPTER and g.points == 0 and g.exercises == (), g
        assert f"it is a chapter 9 notebook (by its {how}), and chapter 1 was assigned" in g.error
    assert "2 of another chapter" in book.summary()
    with pytest.raises(InvalidValueError, match="`chapter` must be a chapter with exercises"):
        grade([tmp_path], LIMITS, chapter=13)


def test_learners_come_from_the_roster_or_the_file_and_a_name_claimed_twice_is_reported_not_renamed(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    write(tmp_path / "x" / "ada_ch01.ipynb", "import scalelib as sl", right("1.1"), learner="b_victim")
    write(tmp_path / "y" / "ada_ch01.ipynb", "import scalelib as sl", right("1.6"))
    write(tmp_path / "z1.ipynb", "import scalelib as sl", right("1.6"))
    roster = tmp_path / "roster.csv"
    roster.write_text("learner,notebook,ID,SIS User ID,SIS Login ID,Section\n"
                      "Zoe Example,z1.ipynb,101,s101,zoe,A\n")
    book = grade([tmp_path / "x", tmp_path / "y", tmp_path / "z1.ipynb"], LIMITS, seed=1,
                 roster=load_roster(roster))
    names = [g.learner for g in book.grades]
    assert names == ["ada", "ada", "Zoe Example"], names
    for g in book.grades[:2]:
        assert any("the learner 'ada' is also claimed by" in f for f in g.flags), g.flags
        assert any(f.startswith("NOT ON THE ROSTER") for f in g.flags), g.flags
    assert any("metadata names the learner 'b_victim'" in f for f in book.grades[0].flags)
    canvas = list(csv.reader(io.StringIO(book.to_canvas_csv("Chapter 1 (555)"))))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Chapter 1 (555)"]
    assert canvas[1][0] == "Points Possible" and float(canvas[1][5]) == nbs.max_points(1)
    assert canvas[2:] == [["Zoe Example", "101", "s101", "zoe", "A", "1"]]  # the two off the roster are left out
    assert "WARNING: 2 notebook(s) not matched to one roster row" in book.report()


def test_a_roster_without_its_columns_or_with_a_file_twice_is_refused_by_name(tmp_path):
    bad = tmp_path / "r.csv"
    bad.write_text("name,file\nAda,a.ipynb\n")
    with pytest.raises(InvalidValueError, match="needs the columns 'learner' and 'notebook'"):
        load_roster(bad)
    bad.write_text("learner,notebook\nAda,a.ipynb\nBob,A.ipynb\n")
    with pytest.raises(InvalidValueError, match="listed twice"):
        load_roster(bad)


@pytest.mark.parametrize("path, learner", [("subs/ada_lovelace_ch03.ipynb", "ada_lovelace"),
                                           ("subs/ada/ch03_sharding.ipynb", "ada"), ("ch03-bob.ipynb", "bob"),
                                           ("subs/carol.ipynb", "carol"), ("ch03.ipynb", "ch03")])
def test_a_learner_is_named_by_their_file(path, learner):
    assert learner_from_path(path) == learner


def test_notebooks_graded_two_at_a_time_get_the_grades_they_get_one_at_a_time(tmp_path):
    write(tmp_path / "a.ipynb", "import scalelib as sl", right("1.1"), INTENSITY + "\nsl.check('1.2', intensity)")
    write(tmp_path / "b.ipynb", "import scalelib as sl", right("1.6"), "1 / 0")
    write(tmp_path / "c.ipynb", "import scalelib as sl", "sl.check('1.1', 3.0)")
    one = grade([tmp_path], LIMITS, seed=5)
    two = grade([tmp_path], LIMITS, seed=5, jobs=2)
    strip = lambda book: [(g.learner, g.status, g.points, nbs.answered(g), g.flags) for g in book.grades]  # noqa: E731
    assert strip(two) == strip(one)
    assert [g.points for g in one.grades] == [2, 1, 0]
    with pytest.raises(InvalidValueError, match="`jobs` must be a whole number"):
        grade([tmp_path], LIMITS, jobs=0)


def _book() -> Gradebook:
    g = NotebookGrade("/subs/ada.ipynb", "ada", 1, GRADED, seed=1)
    return Gradebook([g], 1, LIMITS)


def test_the_gradebook_replaces_planted_symlinks_and_fifos_and_never_writes_through_them(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere.txt"
    (out / "feedback").mkdir(parents=True)
    elsewhere.write_text("the instructor's file")
    (out / "gradebook.json").symlink_to(elsewhere)
    os.mkfifo(out / "gradebook.csv")
    (out / "feedback" / "ada.md").symlink_to(elsewhere)
    written = _book().write(out)
    assert elsewhere.read_text() == "the instructor's file"
    for path in written:
        assert path.is_file() and not path.is_symlink(), path
    assert json.loads((out / "gradebook.json").read_text())["learners"][0]["learner"] == "ada"
    assert not [p for p in out.iterdir() if p.name.startswith(".gradebook-")]  # no staging folder left behind


def test_a_folder_planted_at_a_gradebook_file_or_a_symlinked_out_folder_is_refused_by_name(tmp_path):
    out = tmp_path / "out"
    (out / "gradebook.csv").mkdir(parents=True)
    with pytest.raises(InvalidValueError, match="a folder stands where the gradebook's file"):
        _book().write(out)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "somewhere", target_is_directory=True)
    with pytest.raises(InvalidValueError, match="is not a folder \\(or is a symlink\\)"):
        _book().write(link)


def test_without_a_sandbox_grading_refuses_unless_unsafe_and_then_says_so_on_every_row(tmp_path, monkeypatch):
    path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl", right("1.6"))
    monkeypatch.setattr(sandbox, "isolation", lambda: (False, "bubblewrap is not installed"))
    monkeypatch.setattr(grade_module, "_execute", grade_module._execute)  # unchanged: the refusal comes first
    from scalelib.course.sandbox import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed.*--unsafe"):
        grade([path], LIMITS)
    assert main(["grade", str(path), "--out", str(tmp_path / "gb")]) == 1
    book = grade([path], Limits(cell_timeout_s=30, unsafe=True), seed=1)
    (g,) = book.grades
    assert g.status == GRADED and g.points == 1 and UNSAFE_FLAG in g.flags


def test_a_drawn_einsum_case_renames_its_letters_so_a_table_of_the_registered_cases_fails():
    exercise = get_exercise("4.6")
    cases = grading_cases("4.6", seed=9)
    registered = {c["subscripts"] for c in exercise.cases}
    drawn = cases[len(exercise.cases):]
    assert drawn and all(c["subscripts"] not in registered for c in drawn)
    reference = exercise.reference()
    for c in drawn:
        letters = set(c["subscripts"].replace(",", "").replace("->", ""))
        assert set(c["sizes"]) == letters and reference(**c) > 0
    table = {(c["subscripts"], tuple(sorted(c["sizes"].items()))): float(reference(**c)) for c in exercise.cases}
    lookup = lambda subscripts, sizes: table.get((subscripts, tuple(sorted(sizes.items()))), 1.0)  # noqa: E731
    assert verdict("4.6", lookup, cases=list(cases)).status == "incorrect"
    assert verdict("4.6", reference, cases=list(cases)).status == "correct"
