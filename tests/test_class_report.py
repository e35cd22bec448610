"""The class report, on a made-up class whose slips are known.

Ten chapter 1 notebooks: four make the multiply-add slip on exercise 1.2 (they count B·D·F
FLOPs, not 2·B·D·F), three answer it rightly, three leave it; one learner also gives 1.9 and
1.10 in milliseconds where seconds are asked (the same slip twice). ``scalelib grade`` writes the
gradebook and the report; the report must show those counts and the hint learners saw, and
``scalelib class-report`` must make the same report from the JSON alone.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from grading_notebooks import INTENSITY, reference, right, write
from scalelib.course.check import get_exercise, verdict
from scalelib.course.classreport import class_report, read_gradebook, summarize
from scalelib.course.cli import main
from scalelib._errors import InvalidValueError

#: 1.2 answered with B·D·F FLOPs: the slip the answer key registers for it.
MULTIPLY_ADD_SLIP = ("def intensity(B, D, F, bytes_per_value):\n"
                     "    return B * D * F / (bytes_per_value * (B * D + D * F + B * F))")


def _slip_hint() -> str:
    """The hint of 1.2's registered slip, as the answer key writes it (not as the report does)."""
    (hint,) = get_exercise("1.2").mistakes.values()
    return hint


def _row(text: str, eid: str) -> str:
    match = re.search(rf'<tr data-exercise="{re.escape(eid)}">(.*?)</tr>', text, re.S)
    assert match, f"no row for {eid}"
    return match.group(1)


def _counts(row: str) -> list[int]:
    return [int(n) for n in re.findall(r'data-n="(\d+)"', row)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    subs = folder / "subs"
    subs.mkdir()
    ms = {eid: repr(float(reference(eid)) * 1000) for eid in ("1.9", "1.10")}
    for i in range(10):
        cells = ["import scalelib as sl"]
        if i < 4:
            cells += [MULTIPLY_ADD_SLIP, "sl.check('1.2', intensity)"]
        elif i < 7:
            cells += [INTENSITY, "sl.check('1.2', intensity)", right("1.1")]
        if i == 0:
            cells += [f"sl.check('1.9', {ms['1.9']})", f"sl.check('1.10', {ms['1.10']})"]
        write(subs / f"learner{i}_ch01.ipynb", *cells)
    out = folder / "gradebook"
    assert main(["grade", str(subs), "--out", str(out), "--chapter", "1", "--seed", "3", "--timeout", "60"]) == 0
    return out


def test_the_gradebook_records_each_wrong_answer_s_slip_as_the_hint_learners_saw(graded):
    data = read_gradebook(graded / "gradebook.json")
    by_learner = {row["learner"]: {e["exercise"]: e for e in row["exercises"]} for row in data["learners"]}
    for i in range(4):
        e = by_learner[f"learner{i}"]["1.2"]
        assert e["status"] == "incorrect" and e["diagnosis"].startswith(_slip_hint())  # then any same-value slip
        assert _slip_hint() in e["message"]  # the learner saw it in their feedback
    feedback = (graded / "feedback" / "learner0.md").read_text()
    assert _slip_hint() in feedback


def test_the_class_report_shows_the_planted_slips_with_their_counts(graded):
    text = (graded / "class-report.html").read_text()
    row = _row(text, "1.2")
    assert _counts(row) == [3, 4, 3]  # correct, wrong, not attempted
    assert "3 (30%)" in row and "4 (40%)" in row
    slips = re.findall(r'<li data-count="(\d+)"><span class="count">\d+ ×</span> (.*?)</li>', row)
    assert slips[0][0] == "4" and slips[0][1].startswith(html.escape(_slip_hint())) and len(slips) == 1
    assert _counts(_row(text, "1.1")) == [3, 0, 7]
    # learner0 gave 1.9 and 1.10 in ms: the same slip twice, listed under their name with the hint they saw
    hint = verdict("1.9", float(reference("1.9")) * 1000).diagnosis
    assert hint and hint == verdict("1.10", float(reference("1.10")) * 1000).diagnosis
    repeats = re.findall(r'<tr data-learner="learner0"><td>learner0</td><td>(.*?)</td><td class="n">(\d+)</td>'
                         r'<td>(.*?)</td></tr>', text)
    assert repeats == [(html.escape(hint), "2", "1.9, 1.10")]
    assert '<section class="chapter" data-chapter="1">' in text and text.count("<svg") == 1


def test_the_class_report_is_self_contained_and_rebuilt_from_the_json_alone(graded, tmp_path):
    text = (graded / "class-report.html").read_text()
    assert "<script" not in text and "<link" not in text and "<img" not in text
    assert not re.search(r'(?:src|href)="', text) and "url(" not in text
    assert main(["class-report", str(graded / "gradebook.json"), "--out", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text() == text


def test_the_class_report_escapes_what_learners_control_and_refuses_what_is_no_gradebook(tmp_path):
    data = {"seed": 1, "learners": [{
        "learner": "<b>eve</b>\x1b[2J", "chapter": 1, "points": 0, "max_points": 1, "exercises": [
            {"exercise": "1.1", "status": "incorrect", "diagnosis": "<script>alert(1)</script>"},
            {"exercise": "1.3", "status": "incorrect", "diagnosis": "<script>alert(1)</script>"}]}]}
    text = class_report(data)
    assert "<script>" not in text and "<b>eve" not in text and "\x1b" not in text
    assert summarize(data)["repeats"]["<b>eve</b>\x1b[2J"][0][1] == 2
    (tmp_path / "x.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(InvalidValueError, match="not a gradebook.json"):
        read_gradebook(tmp_path / "x.json")
