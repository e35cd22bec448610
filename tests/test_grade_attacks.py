"""Every trick from issue 7 against ``scalelib grade``, each its own test; none may earn a point.

Each worked against the grader that trusted what a notebook displayed or stored
(chapter 1 notebooks scored 11/11 without solving anything). Most attack notebooks
are graded together, in one batch with short limits (the `batch` fixture: one kernel
per notebook, as in real grading), next to a learner who answers three exercises
rightly and must keep exactly those three points. The memory measurement runs the
grader in a subprocess of its own, so that its peak memory is the grader's alone.

Every kernel runs in the real bubblewrap sandbox (``make browser`` installs it; CI has it),
so the attacks of issue 22 are here too: reading or rewriting the checkout, the answer
key, the venv or another learner's file; signalling the grader or other processes;
reading the grader's environment, command line or memory through ``/proc``; forking
past the memory limit. None may earn a point or harm another learner, and the
checkout and the venv must be byte-identical afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import hashlib
import os

import psutil
import pytest

import grading_notebooks as nbs
from grading_notebooks import INTENSITY, ROOT, code, forged_all, forged_verdict, markdown, right, write
from scalelib.course.check import exercises, get_exercise
from scalelib.course.cli import main
from scalelib.course.grade import CHAPTER_UNKNOWN, FAILED, GRADED, NOT_GRADED, Limits, grade, grade_notebook
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
             "open('leftover.pid', 'w').write(f'{os.getpid()} {time.time()}')\n"
             "time.sleep(8)\n"
             f"open({str(pwned)!r}, 'w').write('rewrote the gradebook')\n")
    write(folder / "leftover.ipynb", sl,
          f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {child!r}])\n"
          "while not __import__('os').path.exists('leftover.pid'): time.sleep(0.05)",
          right("1.6"))
    envfile = spy / "environment.json"
    write(folder / "environment.ipynb", sl,
          "import json, os, importlib.util\n"
          "try:\n"
          "    importlib.import_module('scalelib.course.answer_key')\n"
          "    key = True\n"
          "except ImportError:\n"
          "    key = False\n"
          "raise RuntimeError('ENV ' + json.dumps({'secret': " + repr(SECRET) + " in os.environ,\n"
          "    'grading': os.environ.get('SCALELIB_GRADING'), 'mpl': os.environ.get('MPLBACKEND'),\n"
          "    'home': os.environ['HOME'], 'cwd': os.getcwd(), 'copy': sl.__file__.startswith(os.environ['PYTHONPATH']),\n"
          "    'key': key}))",
          f"open({str(envfile)!r}, 'w').write('reached the spy folder')")
    write(folder / "big_output.ipynb", sl, "print('x' * 100_000_000)", "for i in range(2000): print('y' * 1000)",
          right("1.6"))
    write(folder / "memory_hog.ipynb", sl, "hog = bytearray(3 * 2**30)", right("1.6"))
    write(folder / "slow_cell.ipynb", sl, right("1.6"), "import time; time.sleep(30)", right("1.1"))
    write(folder / "forged_record.ipynb", sl + "\nfrom IPython.display import display",
          f"display({{{ANSWER_MIME!r}: {{'exercise': '1.1', 'status': 'correct'}}}}, raw=True)\n"
          f"display({{{CALLS_MIME!r}: {{'exercise': '1.2', 'results': []}}}}, raw=True)")
    write(folder / "lookup_table.ipynb", sl, _lookup_table_source())
    _sandbox_attacks(folder, victim)
    before = _fingerprint()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET, "hunter2")
        start = time.monotonic()
        book = grade([folder], LIMITS, seed=1234)
        seconds = time.monotonic() - start
    return {"book": book, "folder": folder, "victim": victim, "pidfile": pidfile, "pwned": pwned,
            "envfile": envfile, "seconds": seconds, "before": before, "after": _fingerprint()}


def _fingerprint() -> dict[str, str]:
    """SHA-256 of every file of the checkout's scalelib, solutions and tests, and the venv's site-packages listing."""
    out = {}
    for top in ("scalelib", "solutions", "tests"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".pytest_cache" not in path.parts:
                out[str(path.relative_to(ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    for site in Path(sys.prefix).glob("lib/python*/site-packages"):
        for path in sorted(site.iterdir()):
            out[f"venv:{path.name}"] = str(path.stat().st_size if path.is_file() else "dir")
            if path.suffix == ".pth" or path.name.startswith("__editable__"):
                out[f"venv:{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


#: Where an escape attempt looks for the course's files (the grader's checkout, found every way a kernel could).
_FIND_CHECKOUT = r"""
import glob, json, os, re, sys
routes = {"root": [ROOT_DIR]}
for f in glob.glob(sys.prefix + "/lib/python*/site-packages/*"):
    try:
        text = open(f, errors="replace").read() if os.path.isfile(f) else ""
    except OSError:
        text = ""
    routes.setdefault("site-packages", []).extend(re.findall(r"(/[^\s\"':]+?)/scalelib", text))
for f in glob.glob(sys.prefix + "/lib/python*/site-packages/scalelib*/direct_url.json"):
    try:
        routes.setdefault("direct_url", []).append(json.load(open(f))["url"].replace("file://", ""))
    except Exception:
        pass
routes["executable"] = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))]
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        routes.setdefault("proc", []).extend(re.findall(r"(/[^\x00]+?)/(?:\.venv|scalelib)", cmd))
places = sorted({p for found in routes.values() for p in found if p})
"""


FORK_HOG = (
    "import os, time\n"
    "codes = []\n"
    "kids = []\n"
    "for _ in range(3):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        block = bytearray(2**30)\n"
    "        for i in range(0, len(block), 4096):\n"
    "            block[i] = 1\n"
    "        time.sleep(1)\n"
    "        os._exit(0)\n"
    "    kids.append(pid)\n"
    "for pid in kids:\n"
    "    codes.append(os.waitpid(pid, 0)[1])\n"
    "raise RuntimeError('CODES ' + repr(codes))")


def _sandbox_attacks(folder: Path, victim: Path) -> None:
    """The notebooks of issue 22's attacks, which the sandbox must defeat."""
    sl = "import scalelib as sl"
    find = _FIND_CHECKOUT.replace("ROOT_DIR", repr(str(ROOT)))
    # Read the answer key (or a solved notebook) by any route, and answer with it.
    write(folder / "escape_read.ipynb", sl, find +
          "readable = []\n"
          "for place in places:\n"
          "    for rel in ('scalelib/course/answer_key/ch01.py', 'solutions/ch01_rooflines.ipynb'):\n"
          "        if os.path.exists(os.path.join(place, rel)):\n"
          "            readable.append(os.path.join(place, rel))\n"
          "secrets_seen = []\n"
          "for pid in os.listdir('/proc'):\n"
          "    if pid.isdigit():\n"
          "        try:\n"
          "            if b'" + SECRET + "' in open(f'/proc/{pid}/environ', 'rb').read():\n"
          "                secrets_seen.append(pid)\n"
          "        except OSError:\n"
          "            pass\n"
          "try:\n"
          "    mem = open(f'/proc/{os.getppid()}/mem', 'rb'); mem.seek(4096); mem.read(16); parent_mem = True\n"
          "except OSError:\n"
          "    parent_mem = False\n"
          "raise RuntimeError('SEEN ' + json.dumps({'key': readable, 'secret': secrets_seen, 'mem': parent_mem,\n"
          "                                         'pids': len([p for p in os.listdir('/proc') if p.isdigit()])}))",
          right("1.6"))
    # Rewrite the answer key, the recorder, the venv and another learner's notebook.
    write(folder / "escape_write.ipynb", sl, find +
          "wrote = []\n"
          "targets = [os.path.join(p, rel) for p in places for rel in ('scalelib/course/answer_key/ch02.py',\n"
          "           'scalelib/course/record.py', 'scalelib/course/grade.py')]\n"
          "targets += [os.path.join(s, 'zz_pwn.pth') for s in glob.glob(sys.prefix + '/lib/python*/site-packages')]\n"
          f"targets += [{str(victim)!r}]\n"
          "for t in targets:\n"
          "    try:\n"
          "        with open(t, 'a') as f:\n"
          "            f.write('\\nimport os; os.environ.pop(\"SCALELIB_GRADING\", None)\\n')\n"
          "        wrote.append(t)\n"
          "    except OSError:\n"
          "        pass\n"
          "raise RuntimeError('WROTE ' + json.dumps(wrote) + ' TRIED ' + str(len(targets)))",
          right("1.6"))
    # Stop, then kill, every process it can see (the grader first); it runs before the victim.
    write(folder / "a_killer.ipynb", sl,
          "import os, signal\n"
          "for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
          "    for target in [os.getppid()] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
          "        if target != os.getpid():\n"
          "            try:\n"
          "                os.kill(target, sig)\n"
          "            except OSError:\n"
          "                pass",
          right("1.6"))
    # Impersonation: metadata naming the victim.
    write(folder / "impostor.ipynb", sl, right("1.1"), learner="b_victim")




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


def test_a_notebook_that_rewrites_another_submission_cannot_and_leaves_its_grade_intact(batch):
    assert json.loads(batch["victim"].read_text())["cells"][1]["source"] != ""  # the sandbox kept it off the disk
    assert _errors(batch, "a_overwriter")[0][0] in ("FileNotFoundError", "PermissionError", "OSError")
    victim = _row(batch, "b_victim")
    assert nbs.answered(victim) == {"1.1": "correct", "1.6": "correct"} and victim.points == 2


def test_a_process_left_behind_is_killed_before_it_can_write(batch):
    assert not batch["pidfile"].exists()  # the kernel cannot even reach the spy folder
    marked = [p for p in psutil.process_iter(["cmdline"]) if any("leftover.pid" in a for a in (p.info["cmdline"] or []))]
    assert not marked, marked
    assert not batch["pwned"].exists()
    g = _row(batch, "leftover")
    assert nbs.answered(g) == {"1.6": "correct"}
    assert any("left running were killed" in f for f in g.flags)


def test_the_kernel_sees_none_of_the_instructors_environment(batch):
    seen = json.loads(_seen(batch, "environment", "ENV "))
    assert seen["secret"] is False and seen["key"] is False and seen["copy"] is True, seen
    assert seen["grading"] == "1" and seen["mpl"] == "Agg" and seen["cwd"] == seen["home"], seen
    assert Path(seen["home"]).parent.name.startswith("scalelib-grade-")
    assert not Path(seen["home"]).parent.exists()  # the temporary folder is gone
    assert _errors(batch, "environment")[1][0] in ("FileNotFoundError", "PermissionError", "OSError")
    assert not batch["envfile"].exists()


def test_a_kernel_sees_neither_the_checkout_nor_the_grader_s_environment_command_line_or_memory(batch):
    seen = json.loads(_seen(batch, "escape_read", "SEEN "))
    assert seen["key"] == [] and seen["secret"] == [] and seen["mem"] is False, seen
    assert seen["pids"] <= 3, seen  # its own PID namespace: the sandbox's init, the kernel (and a child at most)
    assert _row(batch, "escape_read").points == 1  # it ran: only 1.6, answered rightly, counts


def test_a_kernel_can_rewrite_neither_the_answer_key_nor_the_venv_nor_another_learner(batch):
    wrote, tried = _seen(batch, "escape_write", "WROTE ").split(" TRIED ")
    assert json.loads(wrote) == [] and int(tried) >= 5, (wrote, tried)
    assert batch["after"] == batch["before"]  # checkout and venv byte-identical
    assert _row(batch, "escape_write").points == 1


def test_a_kernel_that_stops_and_kills_all_it_sees_costs_only_its_own_submission(batch):
    g = _row(batch, "a_killer")  # graded first: it saw only its own namespace (whose init ignores it)
    assert g.points <= 1 and nbs.answered(g).get("1.1") is None, (g.status, g.error)
    assert _row(batch, "b_victim").points == 2 and _row(batch, "good").points == 3
    assert len(batch["book"].grades) == len(list(batch["folder"].glob("*.ipynb")))


def test_metadata_naming_another_learner_takes_nobody_s_row(batch):
    impostor, victim = _row(batch, "impostor"), _row(batch, "b_victim")
    assert impostor.notebook.endswith("impostor.ipynb") and victim.notebook.endswith("b_victim.ipynb")
    assert any("metadata names the learner 'b_victim'" in f for f in impostor.flags)
    assert [g.learner for g in batch["book"].grades].count("b_victim") == 1


def test_children_forked_past_the_memory_limit_are_held_to_it_together(tmp_path):
    from scalelib.course.sandbox import _Cgroup

    probe = _Cgroup(LIMITS.memory_bytes)
    made = bool(probe.dirs)
    probe.remove()
    if not made:
        pytest.skip("no cgroup can be made here: the memory limit is per process (RLIMIT_AS)")
    path = write(tmp_path / "ch01_fork_hog.ipynb", "import scalelib as sl", FORK_HOG, right("1.6"))
    g = grade_notebook(path, Limits(cell_timeout_s=60, notebook_timeout_s=120, memory_bytes=int(1.5 * 2**30)), seed=1)
    errors = dict((c.ename, c.evalue) for c in g.cell_errors)
    if "RuntimeError" in errors:  # the kernel survived: some child was killed or refused
        codes = eval(errors["RuntimeError"].split("CODES ", 1)[1])  # noqa: S307 - our own notebook's text
        assert any(code != 0 for code in codes), codes
    else:  # the kernel itself was the one killed: the report says what killed it
        assert "memory limit" in (g.error or ""), g.error


def test_answer_records_past_their_budget_are_dropped_and_flagged(tmp_path):
    path = write(tmp_path / "ch01_huge.ipynb", "import scalelib as sl",
                 "for i in range(30):\n    sl.check('1.1', [float(i)] * 99_999)", right("1.6"))
    g = grade_notebook(path, Limits(cell_timeout_s=60, notebook_timeout_s=120), seed=1)
    assert any("answer record(s) beyond 8 MiB in all were dropped" in f for f in g.flags), g.flags
    assert nbs.answered(g)["1.6"] == "correct"


def _errors(batch, learner):
    return [(c.ename, c.evalue) for c in _row(batch, learner).cell_errors]


def _seen(batch, learner, prefix):
    for ename, evalue in _errors(batch, learner):
        if prefix in evalue:
            return evalue.split(prefix, 1)[1]
    raise AssertionError(f"{learner}: no {prefix!r} in {_errors(batch, learner)}")


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
    """Defence in depth: if the kernel's environment ever lost the copy, no cell runs (in the sandbox there is no
    other scalelib to import, so the kernel cannot even start)."""
    from scalelib.course import sandbox

    from scalelib.course import grade as grade_module

    env = sandbox.Sandbox.env
    monkeypatch.setattr(sandbox.Sandbox, "env", lambda self: {k: v for k, v in env(self).items() if k != "PYTHONPATH"})
    monkeypatch.setattr(grade_module, "RETRY_DELAYS_S", (0.1,))  # a kernel that cannot start is tried again
    path = write(tmp_path / "ch01_x.ipynb", "import scalelib as sl", right("1.6"))
    g = grade_notebook(path, LIMITS, seed=1)
    assert g.points == 0 and nbs.answered(g) == {}
    if g.status == NOT_GRADED:  # in the sandbox: no other scalelib to import, so the kernel cannot even start
        assert g.error.startswith("the kernel could not start") and g.exercises == () and len(g.retries) == 2, g
    else:
        assert g.status == FAILED and g.error.startswith("the grading kernel is not isolated"), g.error


def test_every_submission_has_a_row_and_the_batch_stays_quick(batch):
    names = sorted(p.stem for p in batch["folder"].glob("*.ipynb"))
    assert sorted(g.learner for g in batch["book"].grades) == names
    print(f"{len(names)} attack notebooks graded in {batch['seconds']:.1f} s")


#: Chapter 10's setup: JAX on 8 CPU devices (the solution's own first cells).
JAX_SETUP = ("import os\nos.environ['JAX_PLATFORMS'] = 'cpu'\nimport scalelib as sl\nimport jax\n"
             "jax.config.update('jax_num_cpu_devices', 8)\nimport jax.numpy as jnp\n"
             "from jax.sharding import PartitionSpec as P")

#: Issue 27's attack on 10.3: while traced, find `case` in a caller's frame, work out the second draw's seed the
#: way the grader once did (from the case's seed), draw both inputs with scalelib's public input_values, and
#: compile a program that picks between the two answers by comparing its input with the first draw (a dummy
#: ppermute gives the collective-permute the exercise requires). Any seed found in a frame is tried too.
PREDICTED_DRAWS = """
import inspect
import numpy as np

def ring_all_gather(a, mesh):
    case, seeds = None, []
    for info in inspect.stack():
        for name, value in list(info.frame.f_locals.items()):
            if name == "case" and isinstance(value, dict) and "seed" in value:
                case = value
            if "seed" in name and isinstance(value, int) and not isinstance(value, bool):
                seeds.append(value)
    if case is None:
        return a
    n = mesh.shape["Y"]
    first = int(case["seed"])
    guesses = [10**6 + (first * 7919 + 104_729) % 10**9] + [s for s in seeds if s != first]
    draws = [sl.input_values(case["arrays"], case["sizes"], case["mesh"], seed=s)[0] for s in [first] + guesses[:1]]
    c1, c2 = (jnp.asarray(d, dtype=a.dtype) for d in draws)
    rows = a.shape[0] // n

    def local(block):
        me = jax.lax.axis_index("Y")
        mine = jax.lax.dynamic_slice_in_dim(c1, me * rows, rows)
        passed = jax.lax.ppermute(block, "Y", [(j, (j + 1) % n) for j in range(n)])
        pick = jnp.where(jnp.all(block == mine), c1, c2)
        return pick + 0.0 * passed.sum()

    return jax.shard_map(local, mesh=mesh, in_specs=P("Y", None), out_specs=P(None, None), check_vma=False)(a)

sl.check("10.3", ring_all_gather)
"""

#: A right answer to 10.1 that prints with jax.debug.print while it runs.
PRINTING_MEANS = """
def shard_means(a, mesh):
    def local(block):
        m = block.mean(keepdims=True)
        jax.debug.print("block mean {m}", m=m)
        return m
    return jax.shard_map(local, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(a)

sl.check("10.1", shard_means)
"""


def test_predicting_the_second_draw_earns_nothing_and_jax_debug_print_is_allowed(tmp_path):
    """The second draw's seeds come from the operating system's randomness, reach the kernel only after the
    function is compiled, and are recorded (as the run's draw seed) so that the grade can be made again."""
    path = write(tmp_path / "ch10_predict.ipynb", JAX_SETUP, PREDICTED_DRAWS, PRINTING_MEANS, chapter=10)
    limits = Limits(cell_timeout_s=240, notebook_timeout_s=400, memory_bytes=3 * 2**30)
    book = grade([path], limits, seed=1, draw_seed=271_828)
    (g,) = book.grades
    assert g.status == GRADED, g.error
    grades = {e.exercise: e for e in g.exercises}
    assert (grades["10.3"].status, grades["10.3"].points) == ("incorrect", 0), grades["10.3"].message
    assert "on a second draw of inputs" in grades["10.3"].message
    assert grades["10.1"].status == "correct", grades["10.1"].message  # jax.debug.print returns nothing: allowed
    assert json.loads(book.to_json())["learners"][0]["draw_seed"] == 271_828
