"""Grading at course scale: what was assigned, who handed in what, several at once, Gradescope and Canvas.

Also the grader's own integrity: the gradebook is written by renaming into place (never through a
planted symlink, FIFO or folder), and grading refuses to run without a sandbox unless told.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest

import grading_notebooks as nbs
from grading_notebooks import INTENSITY, ROOT, markdown, right, write
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


#: A mix of honest, hostile and wrong-chapter notebooks (the attacks of tests/test_grade_attacks.py, a few of each
#: kind), graded with --chapter 1 by one worker and by two.
def _mix(folder: Path) -> None:
    sl = "import scalelib as sl"
    write(folder / "good.ipynb", sl, right("1.1"), INTENSITY + "\nsl.check('1.2', intensity)", right("1.6"))
    solved = json.loads((ROOT / "solutions" / "ch02_tpus.ipynb").read_text())
    solved["metadata"]["scalelib"] = {"chapter": 2}
    (folder / "bob.ipynb").write_text(json.dumps(solved))  # chapter 2's solution, handed in for chapter 1
    write(folder / "forged_display.ipynb", sl + "\nfrom IPython.display import display",
          "for eid in ['1.1', '1.6']:\n"
          "    display({'text/plain': f'✅ Exercise {eid}: correct'}, raw=True,\n"
          "            metadata={'scalelib/verdict': {'exercise': eid, 'status': 'correct', 'message': '✅'}})")
    write(folder / "patched_checker.ipynb", sl,
          "import scalelib.course.check as c\n"
          "c.verdict = lambda eid, answer, **kw: c.Verdict(eid, 'correct', '✅ correct')\n"
          "sl.verdict = c.verdict\nsl.check('1.1', 1.0)\nsl.check('1.6', 'memory')")
    write(folder / "a_killer.ipynb", sl,
          "import os, signal\n"
          "for target in [os.getppid()] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
          "    if target != os.getpid():\n"
          "        try:\n"
          "            os.kill(target, signal.SIGKILL)\n"
          "        except OSError:\n"
          "            pass", right("1.6"))
    write(folder / "leftover.ipynb", sl, "import subprocess\nsubprocess.Popen(['sleep', '300'])", right("1.6"))
    write(folder / "other_chapter_answers.ipynb", sl, right("1.1"), "\n".join(right(e) for e in nbs.numeric_ids(2)[:3]))
    write(folder / "loop.ipynb", sl, right("1.6"), "while True:\n    pass", right("1.1"))


def _strip(book) -> list[tuple]:
    return [(g.learner, g.notebook, g.chapter, g.status, g.error, g.points, g.max_points,
             tuple((e.exercise, e.status, e.points) for e in g.exercises), g.flags, g.ignored,
             tuple(str(c) for c in g.cell_errors)) for g in book.grades]


def test_two_jobs_grade_a_hostile_mix_exactly_as_one_job_does_the_assigned_chapter_included(tmp_path):
    _mix(tmp_path)
    roster = tmp_path / "roster.csv"  # Canvas's CSV needs one: its rows come from the roster's IDs
    roster.write_text("learner,notebook,ID\n" + "".join(f"{p.stem},{p.name},{100 + i}\n" for i, p in
                                                         enumerate(sorted(tmp_path.glob("*.ipynb")))))
    limits = Limits(cell_timeout_s=5, notebook_timeout_s=30, memory_bytes=int(1.5 * 2**30))
    one = grade([tmp_path], limits, seed=5, chapter=1, draw_seed=5, roster=load_roster(roster))
    two = grade([tmp_path], limits, seed=5, chapter=1, draw_seed=5, jobs=2, roster=load_roster(roster))
    assert _strip(two) == _strip(one)
    bob = nbs.row(two, "bob")
    assert (bob.status, bob.points, bob.exercises) == (WRONG_CHAPTER, 0, ())  # was credited 17/17 with --jobs 2
    assert "it is a chapter 2 notebook (by its metadata), and chapter 1 was assigned" in bob.error
    assert nbs.row(two, "good").points == 3 and nbs.row(two, "leftover").points == 1
    assert any("left running were killed" in f for f in nbs.row(two, "leftover").flags)
    assert nbs.row(two, "forged_display").points == 0 and nbs.row(two, "patched_checker").points == 0
    assert nbs.row(two, "loop").status == FAILED and nbs.row(two, "loop").points == 1
    for book in (one, two):
        canvas = list(csv.reader(io.StringIO(book.to_canvas_csv("Chapter 1 (555)"))))
        assert canvas[1][0] == "Points Possible" and float(canvas[1][5]) == nbs.max_points(1)  # was 17, chapter 2's
    with pytest.raises(InvalidValueError, match="`jobs` must be a whole number"):
        grade([tmp_path], LIMITS, jobs=0)


HOLDER = ("import subprocess\n"
          "held = []\n"
          "for _ in range(500):\n"
          "    try:\n"
          "        held.append(subprocess.Popen(['sleep', '600']))\n"
          "    except OSError:\n"
          "        break\n"
          "raise RuntimeError(f'HELD {len(held)}')")


#: Where the holder looks for word that the learner beside it is graded (bound read-only into every sandbox).
HOLDER_SIGNAL = "/holder-signal"


def test_a_notebook_holding_500_processes_starves_no_kernel_graded_beside_it(tmp_path, monkeypatch):
    """Every kernel once ran as uid 65534, and RLIMIT_NPROC counts a user's processes machine-wide: beside this
    holder the chapter 10 solution scored 2/14. Each kernel now has a process budget of its own.

    The holder keeps its processes until ada's grading has ended (the grading worker leaves a file where the
    holder's sandbox sees it), at most 75 s: all of ada's run happens beside them, and no longer than it."""
    if not sandbox.isolation()[0]:
        pytest.skip("no sandbox can be made here")
    signal = tmp_path / "signal"
    signal.mkdir()
    signal.chmod(0o755)
    drop = sandbox._drop_privileges
    monkeypatch.setattr(sandbox, "_drop_privileges",
                        lambda *a, **kw: ["--ro-bind", str(signal), HOLDER_SIGNAL, *drop(*a, **kw)])
    graded = grade_module.grade_submission

    def grade_then_signal(sub, *args, **kwargs):  # runs in the grading worker (forked: it inherits this patch)
        try:
            return graded(sub, *args, **kwargs)
        finally:
            if sub.learner == "ada":
                (signal / "ada-graded").write_text("done")

    monkeypatch.setattr(grade_module, "grade_submission", grade_then_signal)
    wait = ("import os, time\n"
            "deadline = time.monotonic() + 75\n"
            f"while not os.path.exists({HOLDER_SIGNAL + '/ada-graded'!r}) and time.monotonic() < deadline:\n"
            "    time.sleep(0.1)")
    write(tmp_path / "holder_ch01.ipynb", "import scalelib as sl", HOLDER, wait, right("1.6"))
    solved = json.loads((ROOT / "solutions" / "ch10_jax.ipynb").read_text())
    solved["metadata"]["scalelib"] = {"chapter": 10}
    (tmp_path / "ada_ch10.ipynb").write_text(json.dumps(solved))
    limits = Limits(cell_timeout_s=120, notebook_timeout_s=400, memory_bytes=3 * 2**30)
    start = time.monotonic()
    book = grade([tmp_path], limits, seed=1, draw_seed=1, jobs=2)
    assert (signal / "ada-graded").exists() and time.monotonic() - start < 75, "the holder waited out its 75 s"
    holder, ada = nbs.row(book, "holder"), nbs.row(book, "ada")
    held = int(holder.cell_errors[0].evalue.split("HELD ")[1])
    assert held >= 450, holder.cell_errors
    assert (ada.status, ada.points, ada.max_points) == (GRADED, nbs.max_points(10), nbs.max_points(10)), \
        (ada.error, [(e.exercise, e.status) for e in ada.exercises])
    assert nbs.answered(holder) == {"1.6": "correct"}
    assert any("process(es) the notebook left running were killed" in f for f in holder.flags)


def test_each_kernel_runs_as_a_user_of_its_own_and_the_next_one_gets_another_while_it_lives():
    if os.geteuid() != 0 or not sandbox.isolation()[0]:
        pytest.skip("kernels get users of their own only when the grader is root")
    import fcntl

    first, second = sandbox._KernelUser(), sandbox._KernelUser()
    try:
        assert first.own and second.own and first.uid != second.uid
        assert {first.uid, second.uid} <= set(sandbox.KERNEL_UIDS)
        lock = next(Path(d) / f"{first.uid}.lock" for d in ("/run/lock/scalelib-grade", "/tmp/scalelib-grade")
                    if (Path(d) / f"{first.uid}.lock").exists())
        fd = os.open(lock, os.O_RDWR)
        with pytest.raises(OSError):  # held while the kernel lives
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first.release()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again once it is released
        os.close(fd)
    finally:
        first.release()
        second.release()


def _slow(monkeypatch, start=0.0, iopub=0.0, tries=None):
    """Slow the machine down artificially (grade._SLOW_MACHINE): the kernel's start by `start` s, and each wait
    for a notebook cell's output (never the grader's first request) by `iopub` s, on the tries `tries` (all)."""
    calls: dict = {}

    def slow(what, attempt):
        calls[what, attempt] = calls.get((what, attempt), 0) + 1
        if tries is not None and attempt not in tries:
            return 0.0
        if what == "iopub":
            return iopub if calls[what, attempt] >= 2 else 0.0
        return start

    monkeypatch.setattr(grade_module, "_SLOW_MACHINE", slow)
    monkeypatch.setattr(grade_module, "RETRY_DELAYS_S", (0.2, 0.2))
    return calls


def test_a_kernel_too_slow_to_start_every_time_is_not_graded_and_never_given_0_points(tmp_path, monkeypatch):
    path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl", right("1.1"), right("1.6"))
    monkeypatch.setattr(grade_module, "STARTUP_TIMEOUT_S", 1.0)  # the start is 10 s late: far past the limit
    _slow(monkeypatch, start=10.0)
    g = grade([path], LIMITS, seed=1).grades[0]
    assert g.status == grade_module.NOT_GRADED == "not graded: retry"
    assert g.exercises == () and g.max_points == 0 and len(g.retries) == 3, g
    assert g.error.startswith("the kernel could not start (RuntimeError: Kernel didn't respond in 1 seconds)")
    assert "tried 3 times, each stopped by the machine, not the notebook" in g.error
    assert json.loads(Gradebook([g], 1, LIMITS).to_json())["learners"][0]["retries"] == list(g.retries)


def test_output_late_on_a_busy_machine_is_tried_again_and_the_learner_keeps_every_point(tmp_path, monkeypatch):
    path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl", right("1.1"), right("1.6"))
    monkeypatch.setattr(grade_module, "IOPUB_TIMEOUT_S", 1)
    monkeypatch.setattr(grade_module, "IOPUB_GRACE_S", 10.0)
    _slow(monkeypatch, iopub=4.0, tries=(1,))  # the first try: every wait for a cell's output is 4 s late
    g = grade([path], LIMITS, seed=1).grades[0]
    assert (g.status, g.points, g.error) == (GRADED, 2, None), g
    assert len(g.retries) == 1 and g.retries[0].startswith(
        "try 1: the kernel's output channel stayed silent for more than 1 s after cell 1 replied"), g.retries
    _slow(monkeypatch, iopub=4.0)  # every try
    g = grade([path], LIMITS, seed=1).grades[0]
    assert (g.status, g.exercises) == (grade_module.NOT_GRADED, ()) and len(g.retries) == 3
    assert "output channel stayed silent" in g.error and "(a busy machine)" in g.error


def test_a_learner_s_own_cell_over_its_time_limit_is_not_tried_again(tmp_path, monkeypatch):
    calls = _slow(monkeypatch)
    path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl", right("1.6"), "import time\ntime.sleep(30)",
                 right("1.1"))
    g = grade([path], Limits(cell_timeout_s=3, notebook_timeout_s=30), seed=1).grades[0]
    assert (g.status, g.points, g.retries) == (FAILED, 1, ())
    assert g.error == "cell 3 did not finish within 3 s; the cells after it were not run"
    assert calls == {("start", 1): 1, ("iopub", 1): 4}  # one try only: the grader's probe and three cells


def test_a_kernel_s_home_is_a_tmpfs_of_its_own_size_and_the_gradebook_says_how_big(tmp_path):
    if not sandbox.isolation()[0] or not sandbox._bwrap_sizes_tmpfs():
        pytest.skip("no sandbox, or a bubblewrap that cannot size a tmpfs")
    path = write(tmp_path / "ada_ch01.ipynb", "import scalelib as sl",
                 "import os, tempfile\n"
                 "written = 0\n"
                 "try:\n"
                 "    for i in range(6):\n"
                 "        for folder in ('.', tempfile.gettempdir()):\n"
                 "            with open(os.path.join(folder, f'big{i}'), 'wb') as f:\n"
                 "                f.write(b'x' * 20 * 2**20)\n"
                 "            written += 20\n"
                 "finally:\n"
                 "    raise RuntimeError(f'WROTE {written} MiB')",
                 right("1.6"))
    limits = Limits(cell_timeout_s=30, home_bytes=64 * 2**20)
    book = grade([path], limits, seed=1)
    g = book.grades[0]
    assert g.cell_errors[0].evalue.startswith("WROTE 60 MiB"), g.cell_errors  # the fourth 20 MiB file did not fit
    assert nbs.answered(g) == {"1.6": "correct"}
    assert json.loads(book.to_json())["limits"]["home_bytes"] == 64 * 2**20


def test_each_notebook_is_read_just_before_it_is_graded(tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        write(tmp_path / f"{name}_ch01.ipynb", markdown(f"{name}: nothing to run"))
    events = []
    load, grade_submission = grade_module.load, grade_module.grade_submission
    monkeypatch.setattr(grade_module, "load", lambda path, **kw: events.append(("read", Path(path).stem[0]))
                        or load(path, **kw))
    monkeypatch.setattr(grade_module, "grade_submission", lambda sub, *a, **kw: events.append(
        ("graded", sub.path.stem[0])) or grade_submission(sub, *a, **kw))
    book = grade([tmp_path], LIMITS, seed=1)
    assert events == [("read", "a"), ("graded", "a"), ("read", "b"), ("graded", "b"), ("read", "c"), ("graded", "c")]
    assert [g.status for g in book.grades] == [GRADED] * 3


def test_notebooks_of_nbformat_3_and_4_0_are_converted_and_graded(tmp_path):
    import nbformat

    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[
        nbformat.v3.new_code_cell(input="import scalelib as sl"), nbformat.v3.new_code_cell(input=right("1.1"))])])
    v3.metadata["scalelib"] = {"chapter": 1}
    (tmp_path / "ada_ch01.ipynb").write_text(nbformat.v3.writes_json(v3))
    assert json.loads((tmp_path / "ada_ch01.ipynb").read_text())["nbformat"] == 3
    v40 = {"nbformat": 4, "nbformat_minor": 0, "metadata": {"scalelib": {"chapter": 1}},
           "cells": [{"cell_type": "code", "metadata": {}, "source": ["import scalelib as sl\n", right("1.6")],
                      "outputs": [], "execution_count": None}]}
    (tmp_path / "bob_ch01.ipynb").write_text(json.dumps(v40))
    book = grade([tmp_path], LIMITS, seed=1)
    assert [(g.learner, g.status, nbs.answered(g)) for g in book.grades] == [
        ("ada", GRADED, {"1.1": "correct"}), ("bob", GRADED, {"1.6": "correct"})]
    (tmp_path / "carol_ch01.ipynb").write_text(json.dumps({**v40, "nbformat": 5}))
    sub = grade_module.load(tmp_path / "carol_ch01.ipynb")
    assert "nbformat 5 is not a notebook format this grader reads" in sub.error


def test_the_cli_help_and_the_instructors_page_say_the_same_of_what_memory_limits():
    from scalelib.course.cli import _parser

    grade_parser = _parser()._subparsers._group_actions[0].choices["grade"]
    helps = {a.dest: " ".join(a.help.split()) for a in grade_parser._actions if a.help}
    page = (ROOT / "book" / "instructors.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `--memory SIZE` |"))
    for said in ("cgroup", "every process it starts", "RLIMIT_AS", "where one can be made"):
        assert said in helps["memory"] and said in row, said
    assert "address-space limit of each kernel" not in helps["memory"]  # what it said before: half of the truth
    assert "tmpfs" in helps["home_size"] and "`--home-size SIZE`" in page and "`--draw-seed N`" in page


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


def test_an_unsafe_kernel_run_as_the_unprivileged_kernel_user_is_flagged_so_never_as_the_grader_s_rights(
        tmp_path, monkeypatch):
    flag = grade_module._unsafe_flag((65534, 65534))
    assert flag.startswith("graded WITHOUT a sandbox (--unsafe): this notebook ran as the unprivileged user ")
    assert "(uid 65534), not with the grader's rights" in flag and grade_module._unsafe_flag(None) == UNSAFE_FLAG
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("running the kernel as another user needs root and setpriv")
    monkeypatch.setattr(sandbox, "isolation", lambda: (False, "no user namespaces in this container"))
    monkeypatch.setenv(sandbox.KERNEL_USER_ENV, "nobody")
    path = write(tmp_path / "ada_ch01.ipynb", "import os, scalelib as sl", right("1.6"),
                 "raise RuntimeError(f'uid={os.getuid()}')")
    (g,) = grade([path], Limits(cell_timeout_s=30, unsafe=True), seed=1).grades
    assert g.status == GRADED and g.points == 1 and any("uid=65534" in str(c) for c in g.cell_errors), g
    assert UNSAFE_FLAG not in g.flags and "graded WITHOUT a sandbox (--unsafe): this notebook ran as the " \
        "unprivileged user 'nobody' (uid 65534), not with the grader's rights" in "; ".join(g.flags), g.flags


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
