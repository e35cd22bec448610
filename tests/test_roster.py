"""Rosters and Canvas: every learner kept apart, and nothing a learner names can forge a line or a formula.

The cases are those the course's grading at scale met: two students named Wei Zhang (IDs 10003
and 10004), a notebook on no roster row, the ``ada/ch01_rooflines.ipynb`` + ``bob/...`` layout,
Canvas's bulk-download names (``lastfirst_[LATE_]userid_attachmentid_file``), look-alike names
(a Cyrillic ``а``; ``josé`` in NFC and NFD), a newline in a file name, a CSV cell starting with
TAB then ``=``.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from pathlib import Path

import pytest

from grading_notebooks import right, write
from scalelib.course.cli import main
from scalelib.course.grade import GRADED, Gradebook, Limits, NotebookGrade, Submission, grade, load_roster
from scalelib.course.gradebook import (Roster, _name_learners, escape_controls, json_text, name_skeleton,
                                       parse_canvas_name)
from scalelib._errors import InvalidValueError

LIMITS = Limits(cell_timeout_s=30, notebook_timeout_s=60, memory_bytes=int(1.5 * 2**30))


def _canvas_rows(book, assignment="Chapter 1 (555)") -> list[list[str]]:
    return list(csv.reader(io.StringIO(book.to_canvas_csv(assignment))))[2:]


def test_namesakes_folders_and_strangers_graded_with_a_roster(tmp_path):
    subs = tmp_path / "subs"
    for folder, cells in {"wei_a": [right("1.1")], "wei_b": [right("1.1"), right("1.6")], "ada": [],
                          "bob": [right("1.6")], "stranger": [right("1.1")]}.items():
        (subs / folder).mkdir(parents=True)
        write(subs / folder / "ch01_rooflines.ipynb", "import scalelib as sl", *cells)
    roster = tmp_path / "roster.csv"
    roster.write_text("learner,notebook,ID,SIS User ID,SIS Login ID,Section\n"
                      "Ada Lovelace,ada/,10001,s1,ada,A\n"
                      "Bob Stone,bob,10002,s2,bob,A\n"
                      "Wei Zhang,wei_a/ch01_rooflines.ipynb,10003,s3,weiz1,B\n"
                      "Wei Zhang,wei_b/,10004,s4,weiz2,B\n")
    book = grade([subs], LIMITS, seed=1, chapter=1, roster=load_roster(roster))
    assert sorted(_canvas_rows(book)) == [["Ada Lovelace", "10001", "s1", "ada", "A", "0"],
                                          ["Bob Stone", "10002", "s2", "bob", "A", "1"],
                                          ["Wei Zhang", "10003", "s3", "weiz1", "B", "1"],
                                          ["Wei Zhang", "10004", "s4", "weiz2", "B", "2"]]
    for g in book.grades:
        assert not any("also claimed" in f for f in g.flags), g.flags  # namesakes are two learners
    stranger = next(g for g in book.grades if "stranger" in g.notebook)
    assert stranger.status == GRADED and stranger.learner == "stranger"
    assert stranger.flags[0].startswith("NOT ON THE ROSTER")
    report = book.report()
    assert "WARNING: 1 notebook(s) not matched to one roster row" in report and "stranger" in report.split("WARNING")[1]
    assert "1 not on the roster" in book.summary()
    ids = {r["learner"] + r["notebook"]: (r["roster"] or {}).get("ID") for r in json.loads(book.to_json())["learners"]}
    assert ids[f"Wei Zhang{subs / 'wei_a' / 'ch01_rooflines.ipynb'}"] == "10003"
    assert ids[f"stranger{subs / 'stranger' / 'ch01_rooflines.ipynb'}"] is None


def test_canvas_bulk_download_names_are_matched_to_the_roster_by_id(tmp_path, capsys):
    subs = tmp_path / "canvas"
    subs.mkdir()
    write(subs / "zhangwei_10003_9001_ch01_rooflines.ipynb", "import scalelib as sl", right("1.1"))
    write(subs / "zhangwei_LATE_10004_9002_ch01_rooflines-1.ipynb", "import scalelib as sl", right("1.1"),
          right("1.6"))
    write(subs / "doejane_99999_9003_ch01_rooflines.ipynb", "import scalelib as sl", right("1.1"))
    roster = tmp_path / "roster.csv"  # Canvas's own columns: no notebook column is needed
    roster.write_text("learner,ID,SIS User ID\nWei Zhang,10003,s3\nWei Zhang,10004,s4\n")
    out = tmp_path / "gradebook"
    assert main(["grade", str(subs), "--out", str(out), "--chapter", "1", "--seed", "1", "--roster", str(roster),
                 "--canvas", "Chapter 1 (555)"]) == 0
    err = capsys.readouterr().err
    assert "left out of the Canvas CSV" in err and "doejane_99999" in err and "Canvas ID 99999" in err
    rows = list(csv.reader(io.StringIO((out / "canvas.csv").read_text())))
    assert rows[0][1] == "ID" and sorted(r[1:2] + r[-1:] for r in rows[2:]) == [["10003", "1"], ["10004", "2"]]
    assert {"Wei_Zhang_10003.md", "Wei_Zhang_10004.md"} <= {f.name for f in (out / "feedback").iterdir()}
    data = json.loads((out / "gradebook.json").read_text())
    assert sorted(r["learner"] for r in data["learners"]) == ["Wei Zhang", "Wei Zhang", "doejane_99999"]
    assert main(["grade", str(subs), "--out", str(out), "--canvas", "Chapter 1"]) == 1  # Canvas needs a roster
    assert "--canvas needs --roster" in capsys.readouterr().err


def test_a_canvas_name_without_a_roster_is_flagged_as_needing_one():
    subs = [Submission(Path("subs/lovelaceada_LATE_10001_9_ch11_capstone.ipynb"), learner="lovelaceada_10001")]
    _name_learners(subs)
    assert any("graded without a roster" in f and "capstone" in f for f in subs[0].flags)


@pytest.mark.parametrize("name, parts", [
    ("lovelaceada_10001_4242_ch01_rooflines.ipynb", ("lovelaceada", False, "10001", "4242", "ch01_rooflines.ipynb")),
    ("zhangwei_LATE_10004_77_ch01_rooflines-1.ipynb", ("zhangwei", True, "10004", "77", "ch01_rooflines-1.ipynb")),
    ("ada_ch01.ipynb", None), ("ch01_rooflines.ipynb", None), ("ada_12_ch01.ipynb", None)])
def test_canvas_download_names_are_parsed(name, parts):
    got = parse_canvas_name(name)
    assert (None if got is None else (got.name, got.late, got.user_id, got.attachment_id, got.file)) == parts


def test_the_documented_folder_layout_loads_and_a_row_twice_is_refused(tmp_path):
    r = tmp_path / "r.csv"
    r.write_text("learner,notebook\nAda,ada/ch01_rooflines.ipynb\nBob,bob/ch01_rooflines.ipynb\n")
    roster = load_roster(r)
    assert roster.row_for("x/bob/ch01_rooflines.ipynb")[0] == 1
    assert roster.row_for("x/carol/ch01_rooflines.ipynb") == (None, "its path matches no row's notebook")
    r.write_text("learner,notebook,ID\nAda,a.ipynb,1\nBob,b.ipynb,1\n")
    with pytest.raises(InvalidValueError, match="the ID '1' is listed twice"):
        load_roster(r)
    r.write_text("learner,notebook\nAda,ada/\nBob,ADA/\n")
    with pytest.raises(InvalidValueError, match="listed twice"):
        load_roster(r)
    r.write_text("learner,ID\nAda,\n")
    with pytest.raises(InvalidValueError, match="line 2: a learner and a notebook"):
        load_roster(r)


def test_names_are_compared_in_nfc_with_case_folded_and_look_alikes_are_flagged():
    nfc, nfd = unicodedata.normalize("NFC", "josé"), unicodedata.normalize("NFD", "josé")
    assert nfc != nfd
    subs = [Submission(Path(f"{n}.ipynb"), learner=n) for n in (nfc, nfd.upper(), "a_victim", "\u0430_victim")]
    _name_learners(subs)
    assert all(any("also claimed by" in f for f in s.flags) for s in subs[:2])  # one learner, twice
    assert subs[0].learner == subs[1].learner.lower()  # names are kept in NFC
    assert any("looks like 'a_victim'" in f for f in subs[3].flags)
    assert any("looks like '\u0430_victim'" in f for f in subs[2].flags)
    assert any("mixes letters of several scripts (cyrillic, latin)" in f for f in subs[3].flags)
    assert name_skeleton("Wei Zhang") == name_skeleton("wei  zhang")


def _grade_row(learner: str, notebook: str, flag: str = "") -> NotebookGrade:
    return NotebookGrade(notebook, learner, 1, GRADED, flags=(flag,) if flag else ())


def test_no_field_can_forge_a_report_line_a_formula_or_a_hidden_character(tmp_path):
    forged = _grade_row("ada\nbob (bob.ipynb, chapter 1): graded, 16/16 points", "subs/x\n.ipynb",
                        "\x1b[2Jcleared\u202eevil")
    cells = ["=1+1", "+1", "-1", "@SUM(A1)", "\t=HYPERLINK(\"x\")", "\r=1"]
    rows = [forged] + [_grade_row(c, f"{i}.ipynb") for i, c in enumerate(cells)]
    book = Gradebook(rows, 1, Limits(), roster=Roster([{"learner": c, "notebook": f"{i}.ipynb", "ID": str(i)}
                                                       for i, c in enumerate(cells)]))
    book.roster.apply([Submission(Path(f"{i}.ipynb"), learner=c) for i, c in enumerate(cells)])
    report = book.report()
    assert not any(line.startswith("bob") for line in report.splitlines())
    assert "ada\\nbob" in report and "\x1b" not in report and "\u202e" not in report and "\\u202e" in report
    for text in (book.to_csv(), book.to_canvas_csv("Chapter 1")):
        for row in csv.reader(io.StringIO(text)):
            for cell in row:
                assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), (cell, text)
                assert not any(ch in cell for ch in "\n\r\x1b\u202e")
    learners = [r[0] for r in csv.reader(io.StringIO(book.to_canvas_csv("Chapter 1")))][2:]
    assert learners == ["'=1+1", "'+1", "'-1", "'@SUM(A1)", "'\\t=HYPERLINK(\"x\")", "'\\r=1"]
    text = book.to_json()
    assert "\u202e" not in text and "\\u202e" in text and json.loads(text)["learners"][0]["flags"][0].endswith(
        "cleared\u202eevil")
    assert json_text({"a": "\x85"}) == '{\n  "a": "\\u0085"\n}\n'
    assert escape_controls("tab\there") == "tab\\there"
