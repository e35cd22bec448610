"""Every trick from issue 7 against ``scalelib grade``, each its own test; none may earn a point.

Each worked against the grader that trusted what a notebook displayed or stored
(chapter 1 notebooks scored 11/11 without solving anything). Most attack notebooks
are graded together, in one batch with short limits (the `batch` fixture: one kernel
per notebook, as in real grading), next to a learner who answers three exercises
rightly and must keep exactly those three points. The memory measurement runs the
grader in a subprocess of its own, so that its peak memory is the grader's alone.

What is *not* defended against, and so not tested here: code that reads the answer
key's source file from disk (the grader is no file-system sandbox; see the book's
page for instructors), and attacks on the grader's own process by the same user.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import grading_notebooks as nbs
from grading_notebooks import INTENSITY, ROOT, code, forged_all, forged_verdict, markdown, right, write
from scalelib.course.check import exercises, get_exercise
from scalelib.course.cli import main
from scalelib.course.grade import CHAPTER_UNKNOWN, FAILED, GRADED, Limits, grade, grade_notebook
from scalelib.course.record import ANSWER_MIME, CALLS_MIME

LIMITS = Limits(cell_timeout_s=3, notebook_timeout_s=12, memory_bytes=int(1.5 * 2**30), max_output_bytes=256 * 2**10)
SECRET = "SCALELIB_TEST_INSTRUCTOR_SECRET"
CHAPTER_1 = list(exercises(1))


def _lookup_table_source() -> str:
    """A function answering 1.2 from a table of the registered cases' reference values (and 1.0 elsewhere)."""
    exercise = get_exercise("1.2")
    reference = exercise.reference()
    table = {tuple(sorted(case.items())): float(reference(**case)) for case in exercise.cases}
    return (f"TABLE = {table!r}\n"
            "def intensity(**kwargs):\n"
            "    return TABLE.get(tuple(sorted(kwargs.items())), 1.0)\n"
            "sl.check('1.2', intensity)")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    spy = tmp_path_factory.mktemp("spy")  # where attack notebooks leave what they saw
    sl = "import scalelib as sl"
    victim = folder / "b_victim.ipynb"
    write(folder / "good.ipynb", sl, right("1.1"), INTENSITY + "\nsl.check('1.2', intensity)", right("1.6"))
    write(folder / "forged_display.ipynb", sl + "\nfrom IPython.display import display",
          f"for eid in {CHAPTER_1!r}:\n"
          "    display({'text/plain': f'✅ Exercise {eid}: correct'}, raw=True,\n"
          "            metadata={'scalelib/verdict': {'exercise': eid, 'status': 'correct', 'message': '✅'}})")
    write(folder / "patched_checker.ipynb", sl,
          "import scalelib.course.check as c\n"
          "c.verdict = lambda eid, answer, **kw: c.Verdict(eid, 'correct', '✅ correct')\n"
          "sl.verdict = c.verdict\n"
          "sl.check('1.1', 1.0)\nsl.check('1.6', 'memory')",
          "sl.check = lambda eid, answer: print(f'✅ Exercise {eid}: correct')\nsl.check('1.3', 0.0)")
    write(folder / "reference.ipynb", sl + "\nfrom scalelib.course.check import get_exercise",
          "sl.check('1.1', get_exercise('1.1').reference())",
          "import sys\n"
          "for name in [m for m in sys.modules if m.startswith('scalelib')]:\n"
          "    del sys.modules[name]\n"
          f"sys.path.insert(0, {str(ROOT)!r})\n"
          "import scalelib.course.answer_key.ch01")
    write(folder / "skip_tagged.ipynb", sl,
          code(right("1.1"), outputs=[forged_verdict("1.1")], tags=["skip-execution"]),
          code("sl.check('1.6', 'compute')", outputs=[forged_verdict("1.6")], tags=["skip-execution"]))
    write(folder / "forged_cells.ipynb", sl, code("", outputs=forged_all()),
          markdown("All done.", outputs=forged_all()))
    write(folder / "loop_after_forgery.ipynb", sl, code("while True: pass", outputs=forged_all()),
          code(right("1.1"), outputs=[forged_verdict("1.1")]), code(right("1.6"), outputs=[forged_verdict("1.6")]))
    write(folder / "exit_after_forgery.ipynb", sl, code("import os; os._exit(1)", outputs=forged_all()),
          code(right("1.1"), outputs=[forged_verdict("1.1")]), code(right("1.6"), outputs=[forged_verdict("1.6")]))
    write(folder / "other_chapters.ipynb", sl, "\n".join(right(e) for e in nbs.numeric_ids(2) + nbs.numeric_ids(12)))
    write(folder / "submission.ipynb", sl, right("1.1"), chapter=None)
    write(folder / "a_overwriter.ipynb", sl,
          "import json, pathlib\n"
          f"victim = pathlib.Path({str(victim)!r})\n"
          "nb = json.loads(victim.read_text())\n"
          "for cell in nb['cells']:\n"
          "    cell['source'] = ''\n"
          "victim.write_text(json.dumps(nb))")
    write(victim, sl, right("1.1"), right("1.6"))
    pidfile, pwned = spy / "leftover.pid", spy / "pwned"
    child = ("import os, sys, time\n"
             "if os.fork(): sys.exit(0)\n"
             "os.setsid()\n"
             f"open({str(pidfile)!r}, 'w').write(f'{{os.getpid()}} {{time.time()}}')\n"
             "time.sleep(8)\n"
             f"open({str(pwned)!r}, 'w').write('rewrote the gradebook')\n")
    write(folder / "leftover.ipynb", sl,
          f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {child!r}])\n"
          f"while not __import__('os').path.exists({str(pidfile)!r}): time.sleep(0.05)",
          right("1.6"))
    envfile = spy / "environment.json"
    write(folder / "environment.ipynb", sl,
          "import json, os, importlib.util\n"
          "try:\n"
          "    importlib.import_module('scalelib.course.answer_key')\n"
          "    key = True\n"
          "except ImportError:\n"
          "    key = False\n"
          f"open({str(envfile)!r}, 'w').write(json.dumps({{'env': dict(os.environ), 'cwd': os.getcwd(),\n"
          "    'scalelib': sl.__file__, 'answer_key': key}))")
    write(folder / "big_output.ipynb", sl, "print('x' * 100_000_000)", "for i in range(2000): print('y' * 1000)",
          right("1.6"))
    write(folder / "memory_hog.ipynb", sl, "hog = bytearray(3 * 2**30)", right("1.6"))
    write(folder / "slow_cell.ipynb", sl, right("1.6"), "import time; time.sleep(30)", right("1.1"))
    write(folder / "forged_record.ipynb", sl + "\nfrom IPython.display import display",
          f"display({{{ANSWER_MIME!r}: {{'exercise': '1.1', 'status': 'correct'}}}}, raw=True)\n"
          f"display({{{CALLS_MIME!r}: {{'exercise': '1.2', 'results': []}}}}, raw=True)")
    write(folder / "lookup_table.ipynb", sl, _lookup_table_source())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET, "hunter2")
        start = time.monotonic()
        book = grade([folder], LIMITS, seed=1234)
        seconds = time.monotonic() - start
    return {"book": book, "folder": folder, "victim": victim, "pidfile": pidfile, "pwned": pwned,
            "envfile": envfile, "seconds": seconds}


def _row(batch, learner):
    return nbs.row(batch["book"], learner)


def test_the_honest_learner_in_the_batch_keeps_exactly_the_points_earned(batch):
    g = _row(batch, "good")
    assert g.status == GRADED and g.error is None and g.cell_errors == ()
    assert nbs.answered(g) == {"1.1": "correct", "1.2": "correct", "1.6": "correct"}
    assert (g.points, g.max_points) == (3, nbs.max_points(1))
    assert g.flags == ()


def test_displayed_verdict_metadata_earns_nothing_and_is_flagged(batch):
    g = _row(batch, "forged_display")
    assert g.points == 0 and set(nbs.statuses(g).values()) == {"missing"}
    assert any("verdict metadata" in f for f in g.flags)


def test_patching_the_checker_in_the_kernel_earns_nothing(batch):
    g = _row(batch, "patched_checker")
    # the answers were recorded and judged here, whatever the kernel's verdict said; sl.check replaced records nothing
    assert nbs.answered(g) == {"1.1": "incorrect", "1.6": "incorrect"}
    assert g.points == 0
    assert any("replaces scalelib's checker" in f for f in g.flags)
    assert any("scalelib.course" in f for f in g.flags)


def test_the_answer_key_cannot_be_imported_in_the_kernel_and_reaching_for_it_is_flagged(batch):
    g = _row(batch, "reference")
    assert g.points == 0 and nbs.answered(g) == {}
    errors = {c.cell: (c.ename, c.evalue) for c in g.cell_errors}
    assert errors[2][0] == "ModuleNotFoundError" and "answer key is not available" in errors[2][1]
    assert errors[3][0] == "ModuleNotFoundError" and "answer key is not available" in errors[3][1]
    flagged = " ".join(g.flags)
    for what in ("exercise registrations", "an exercise's reference", "sys.modules", "answer key"):
        assert what in flagged


def test_skip_execution_tags_over_forged_outputs_earn_nothing(batch):
    g = _row(batch, "skip_tagged")
    assert g.points == 0 and nbs.answered(g) == {}
    assert sum("skip-execution" in f for f in g.flags) == 2


def test_forged_outputs_on_a_blank_code_cell_and_a_markdown_cell_earn_nothing(batch):
    g = _row(batch, "forged_cells")
    assert g.status == GRADED and g.points == 0 and nbs.answered(g) == {}
    assert any("blank code cell carries stored outputs" in f for f in g.flags)
    assert any("markdown cell carries stored outputs" in f for f in g.flags)


def test_forged_outputs_then_an_endless_loop_earn_nothing_after_it(batch):
    g = _row(batch, "loop_after_forgery")
    assert g.status == FAILED
    assert g.error == "cell 2 did not finish within 3 s; the cells after it were not run"
    assert g.points == 0 and nbs.answered(g) == {}  # right answers after the loop never ran


def test_forged_outputs_then_os_exit_earn_nothing_after_it(batch):
    g = _row(batch, "exit_after_forgery")
    assert g.status == FAILED and g.error.startswith("the kernel died while running cell 2")
    assert g.points == 0 and nbs.answered(g) == {}


def test_other_chapters_answers_add_nothing_and_are_listed(batch):
    g = _row(batch, "other_chapters")
    assert (g.points, g.max_points, g.chapter) == (0, nbs.max_points(1), 1)
    others = nbs.numeric_ids(2) + nbs.numeric_ids(12)
    assert len(g.ignored) == len(others)
    assert all(f"exercise {e} is not one of chapter 1's" in " ".join(g.ignored) for e in others)


def test_a_notebook_without_a_chapter_has_a_row_and_is_not_graded(batch):
    g = _row(batch, "submission")
    assert g.status == CHAPTER_UNKNOWN and g.exercises == () and "chapter unknown" in g.error


def test_strict_fails_on_a_notebook_without_a_chapter(tmp_path, capsys):
    path = write(tmp_path / "submission.ipynb", "import scalelib as sl", right("1.1"), chapter=None)
    assert main(["grade", str(path), "--out", str(tmp_path / "out"), "--strict"]) == 1
    assert main(["grade", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "submission (" in capsys.readouterr().out
    rows = (tmp_path / "out" / "gradebook.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("submission,") and ",chapter unknown," in rows[1]


def test_a_notebook_that_rewrites_another_submission_leaves_its_grade_intact(batch):
    assert json.loads(batch["victim"].read_text())["cells"][1]["source"] == ""  # the attack did happen on disk
    victim = _row(batch, "b_victim")
    assert nbs.answered(victim) == {"1.1": "correct", "1.6": "correct"} and victim.points == 2


def test_a_process_left_behind_is_killed_before_it_can_write(batch):
    pid, started = batch["pidfile"].read_text().split()
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
    time.sleep(max(0.0, float(started) + 8.5 - time.time()))  # the rest of the batch usually took longer
    assert not batch["pwned"].exists()
    g = _row(batch, "leftover")
    assert nbs.answered(g) == {"1.6": "correct"}
    assert any("left running were killed" in f for f in g.flags)


def test_the_kernel_sees_none_of_the_instructors_environment(batch):
    seen = json.loads(batch["envfile"].read_text())
    env = seen["env"]
    assert SECRET not in env
    assert env["SCALELIB_GRADING"] == "1" and env["MPLBACKEND"] == "Agg"
    home = Path(env["HOME"])
    assert home.parent.name.startswith("scalelib-grade-") and seen["cwd"] == str(home)
    assert seen["scalelib"].startswith(str(home.parent / "lib" / "scalelib"))  # the copy, without the answer key
    assert seen["answer_key"] is False
    assert not home.parent.exists()  # the temporary folder is gone


def test_100_mb_of_output_is_capped_and_answers_after_it_still_count(batch):
    g = _row(batch, "big_output")
    assert g.status == GRADED and nbs.answered(g) == {"1.6": "correct"}
    assert any("output over the limit of 256 KiB was dropped (cell 2" in f for f in g.flags)


MEMORY_PROBE = """
import json, resource, sys
import jupyter_client.asynchronous, nbclient, nbformat, zmq  # the grader's imports, before the baseline
from scalelib.course import grade
from scalelib.course.grade import Limits, grade_notebook
grade.IOPUB_TIMEOUT_S = 2  # the bypass breaks the output channel: no need to wait 10 s to see it
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
g = grade_notebook(sys.argv[1], Limits(cell_timeout_s=30, max_output_bytes=2**20), seed=1)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "status": g.status, "error": g.error,
                  "answered": {e.exercise: e.status for e in g.exercises if e.status != "missing"}}))
"""

BYPASS = """k = get_ipython().kernel
import jupyter_client.session as js
s = k.session
msg = s.msg('stream', {'name': 'stdout', 'text': 'x' * 100_000_000}, parent=k.get_parent('shell'))
parts = [s.pack(msg['header']), s.pack(msg['parent_header']), s.pack(msg['metadata']), s.pack(msg['content'])]
k.iopub_socket.send_multipart([js.DELIM, s.sign(parts)] + parts)"""


def test_the_graders_memory_stays_bounded_when_a_notebook_prints_100_mb(tmp_path):
    """100 MB printed at once, 100 MB in a loop, then 100 MB sent past the kernel's cap."""
    path = write(tmp_path / "ch01_big.ipynb", "import scalelib as sl", "print('x' * 100_000_000)",
                 "for i in range(100): print('y' * 1_000_000)", right("1.6"), BYPASS,
                 right("1.1"))
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True, text=True,
                         timeout=240, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    growth_mib = (result["after_kib"] - result["before_kib"]) / 1024
    print(f"grader's peak memory: {result['before_kib'] / 1024:.0f} MiB before, {result['after_kib'] / 1024:.0f} MiB "
          f"after grading 300 MB of output (+{growth_mib:.0f} MiB)")
    assert growth_mib < 40, result
    assert result["answered"] == {"1.6": "correct"}  # answers before the bypass count; the broken channel stops it
    assert result["status"] == FAILED and "output channel broke in cell 5" in result["error"]


def test_a_memory_hog_hits_the_limit_and_the_notebook_carries_on(batch):
    g = _row(batch, "memory_hog")
    assert [(c.cell, c.ename) for c in g.cell_errors] == [(2, "MemoryError")]
    assert "the memory limit is 1.5 GiB" in str(g.cell_errors[0])
    assert nbs.answered(g) == {"1.6": "correct"}


def test_a_cell_over_the_time_limit_stops_the_notebook_and_keeps_earlier_answers(batch):
    g = _row(batch, "slow_cell")
    assert g.status == FAILED and g.error == "cell 3 did not finish within 3 s; the cells after it were not run"
    assert nbs.answered(g) == {"1.6": "correct"}


def test_a_notebook_over_its_total_time_limit_is_stopped(tmp_path):
    path = write(tmp_path / "ch01_slow.ipynb", "import scalelib as sl", right("1.6"),
                 *["import time; time.sleep(0.8)"] * 6, right("1.1"))
    g = grade_notebook(path, Limits(cell_timeout_s=10, notebook_timeout_s=2), seed=1)
    assert g.status == FAILED and "the notebook ran past its limit of 2 s" in g.error
    assert nbs.answered(g) == {"1.6": "correct"}


def test_hand_written_answer_records_are_judged_as_answers_and_flagged(batch):
    g = _row(batch, "forged_record")
    assert nbs.answered(g) == {"1.1": "incorrect"} and g.points == 0  # a record is an answer, never a verdict
    assert any("malformed answer record" in f for f in g.flags)
    assert any("MIME types" in f for f in g.flags)


def test_a_function_that_only_knows_the_registered_cases_fails_the_drawn_ones(batch):
    g = _row(batch, "lookup_table")
    assert nbs.answered(g) == {"1.2": "incorrect"}
    message = next(e.message for e in g.exercises if e.exercise == "1.2")
    assert "not quite for" in message or "called with" in message


def test_a_kernel_that_did_not_import_the_grading_copy_of_scalelib_runs_nothing(tmp_path, monkeypatch):
    """Defence in depth: if the kernel's environment ever lost the copy, the probe says so and no cell runs."""
    from scalelib.course import sandbox

    env = sandbox.Sandbox.env
    monkeypatch.setattr(sandbox.Sandbox, "env", lambda self: {k: v for k, v in env(self).items() if k != "PYTHONPATH"})
    path = write(tmp_path / "ch01_x.ipynb", "import scalelib as sl", right("1.6"))
    g = grade_notebook(path, LIMITS, seed=1)
    assert g.status == FAILED and g.error.startswith("the grading kernel is not isolated") and g.points == 0


def test_every_submission_has_a_row_and_the_batch_stays_quick(batch):
    names = sorted(p.stem for p in batch["folder"].glob("*.ipynb"))
    assert sorted(g.learner for g in batch["book"].grades) == names
    print(f"{len(names)} attack notebooks graded in {batch['seconds']:.1f} s")
