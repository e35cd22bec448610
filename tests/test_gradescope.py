"""The Gradescope autograder, tried the way Gradescope runs it.

Gradescope's autograder specification: the zip's root holds ``setup.sh`` and ``run_autograder``;
the zip is extracted into ``/autograder/source``; ``setup.sh`` runs once to build the image;
``run_autograder`` is copied to ``/autograder/run_autograder`` and run for each submission, which
sits in ``/autograder/submission``; ``/autograder/results/results.json`` holds ``score``,
``execution_time``, ``output``, ``visibility``, ``stdout_visibility``, ``extra_data`` and ``tests``
(each with ``name``, ``number``, ``score``, ``max_score``, ``status``, ``output``, ``visibility``:
``hidden``, ``after_due_date``, ``after_published`` or ``visible``).

Here the layout is made under a temporary folder (``AUTOGRADER_ROOT``, which both scripts
honour), ``setup.sh`` runs for real (a fresh virtual environment and ``pip install`` of the
extracted package with its extras; only the interpreter is given, so that no Python is
downloaded), then ``run_autograder`` grades submissions.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import grading_notebooks as nbs
from grading_notebooks import ROOT, write
from scalelib.course import gradescope, sandbox
from scalelib.course.check import exercises

GRADESCOPE_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
SOLVED = ROOT / "solutions" / "ch01_rooflines.ipynb"
#: Words of the instructor's notes that no student-visible field may hold.
INSTRUCTOR_ONLY = ("flag", "answer key", "answer_key", "sandbox", "isolation", "unprivileged", "seed")


def _base_python() -> str:
    """A Python 3.11+ interpreter that is not this virtual environment (setup.sh makes its own)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _env(root: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {**env, "AUTOGRADER_ROOT": str(root), **extra}


def _extract(bundle: Path, source: Path) -> None:
    """Unzip as Gradescope does, keeping the modes the zip records."""
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = info.external_attr >> 16
            if mode:
                (source / info.filename).chmod(mode)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """An autograder for chapter 1, installed by its own setup.sh under a fake /autograder."""
    if not shutil.which("bash"):
        pytest.skip("bash is needed to run setup.sh")
    work = tmp_path_factory.mktemp("gradescope")
    bundle = gradescope.write_bundle(work / "bundle", 1, timeout_s=60, notebook_timeout_s=240)
    root = work / "autograder"
    source = root / "source"
    source.mkdir(parents=True)
    _extract(bundle, source)
    done = subprocess.run(["bash", str(source / "setup.sh")], cwd=source, capture_output=True, text=True,
                          timeout=900, env=_env(root, SCALELIB_AUTOGRADER_PYTHON=_base_python(),
                                                SCALELIB_KERNEL_USER="nobody"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shutil.copy2(source / "run_autograder", root / "run_autograder")  # Gradescope's image build does this
    return root


def _submit(root: Path, files: dict[str, Path], learner: str = "Ada Lovelace") -> dict:
    """Put `files` (name in the submission -> notebook) in a fresh submission and run run_autograder."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "submission").mkdir()
    for name, path in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / "submission" / name)
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"name": learner, "email": "a@x.org"}]}))
    done = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True, timeout=600,
                          env=_env(root, SCALELIB_KERNEL_USER="nobody"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def _check_format(results: dict) -> None:
    """`results` holds only what Gradescope's specification documents, of the documented types."""
    assert set(results) <= {"score", "execution_time", "output", "visibility", "stdout_visibility", "extra_data",
                            "tests", "leaderboard", "output_format", "test_output_format", "test_name_format"}
    assert isinstance(results["score"], (int, float)) and isinstance(results["execution_time"], (int, float))
    assert isinstance(results["output"], str)
    assert results["visibility"] in GRADESCOPE_VISIBILITY and results["stdout_visibility"] == "hidden"
    for t in results["tests"]:
        assert set(t) <= {"score", "max_score", "status", "name", "name_format", "number", "output",
                          "output_format", "tags", "visibility", "extra_data"}
        assert {"name", "score", "max_score", "output", "visibility"} <= set(t)
        assert t["visibility"] in GRADESCOPE_VISIBILITY and t["status"] in ("passed", "failed")
        assert 0 <= t["score"] <= t["max_score"] or t["max_score"] == 0 == t["score"]


def _visible(results: dict) -> str:
    return "\n".join([results["output"]] + [t["name"] + "\n" + t["output"] for t in results["tests"]
                                            if t["visibility"] != "hidden"])


def _hidden(results: dict) -> str:
    return "\n".join(t["output"] for t in results["tests"] if t["visibility"] == "hidden")


def test_the_bundle_s_zip_root_holds_the_scripts_and_the_package():
    with zipfile.ZipFile(gradescope.write_bundle(Path(os.environ.get("TMPDIR", "/tmp")) / "gs-layout", 2)) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    assert {"setup.sh", "run_autograder", "pyproject.toml", "scalelib/__init__.py",
            "scalelib/course/answer_key/ch02.py"} <= names
    assert not any(n.startswith("source/") for n in names)
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR


def test_setup_sh_refuses_a_python_older_than_3_11_with_a_clear_message(tmp_path):
    old = tmp_path / "python3.10"
    old.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "Python 3.10.12"; exit 0; }\nexit 1\n')
    old.chmod(0o755)
    gradescope.write_bundle(tmp_path / "bundle", 1)
    done = subprocess.run(["bash", str(tmp_path / "bundle" / "setup.sh")], capture_output=True, text=True,
                          timeout=60, env=_env(tmp_path / "root", SCALELIB_AUTOGRADER_PYTHON=str(old)))
    assert done.returncode != 0
    assert "is not Python 3.11 or later (Python 3.10.12)" in done.stderr
    assert not (tmp_path / "root" / "venv").exists()


def test_setup_sh_installs_the_package_and_locks_the_answer_key_and_results_to_root(autograder):
    if os.geteuid() != 0:
        pytest.skip("the answer key's lock is tried as root, as Gradescope runs setup.sh")
    venv_python = autograder / "venv" / "bin" / "python"
    found = subprocess.run([str(venv_python), "-I", "-c", "import sys, scalelib, nbclient, jax, ipykernel; "
                            "print(sys.version_info >= (3, 11), scalelib.__file__)"],
                           capture_output=True, text=True, cwd="/", timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    ok, where = found.stdout.split()
    assert ok == "True" and where.startswith(str(autograder / "venv"))  # the installed copy, not the checkout
    key = Path(where).parent / "course" / "answer_key"
    for path in (autograder / "source", key, autograder / "results"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    setpriv = shutil.which("setpriv")
    if setpriv:  # the unprivileged user cannot read the answer key, installed or extracted
        for path in (key / "ch01.py", autograder / "source" / "scalelib" / "course" / "answer_key" / "ch01.py"):
            read = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(path)],
                                  capture_output=True, text=True)
            assert read.returncode != 0 and "Permission denied" in read.stderr


def test_an_honest_submission_gets_full_marks_in_gradescope_s_format_with_no_flag_shown(autograder):
    results = _submit(autograder, {"ch01_rooflines.ipynb": SOLVED})
    _check_format(results)
    assert results["score"] == nbs.max_points(1)
    graded = [t for t in results["tests"] if t["visibility"] != "hidden"]
    assert [t["number"] for t in graded] == list(exercises(1))  # one test per exercise, in order
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in graded)
    visible = _visible(results).lower()
    assert not any(word in visible for word in INSTRUCTOR_ONLY), visible
    assert "isolation:" in _hidden(results)  # how the kernel was isolated: for the instructor only


def test_two_copies_of_the_solution_score_no_more_than_full_marks_and_flags_stay_hidden(autograder, tmp_path):
    flagged = json.loads(SOLVED.read_text())
    flagged["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                             "source": "where = 'scalelib/course/answer_key'"})
    (tmp_path / "flagged.ipynb").write_text(json.dumps(flagged))
    results = _submit(autograder, {"ch01_rooflines.ipynb": tmp_path / "flagged.ipynb",
                                   "copy/ch01_rooflines (1).ipynb": SOLVED})
    _check_format(results)
    graded = [t for t in results["tests"] if t["visibility"] != "hidden"]
    assert len(graded) == len(exercises(1)) and len({t["number"] for t in graded}) == len(graded)
    assert results["score"] <= nbs.max_points(1)
    assert "Only one notebook per submission is graded. Not graded: ch01_rooflines (1).ipynb" in results["output"]
    visible = _visible(results).lower()
    assert not any(word in visible for word in INSTRUCTOR_ONLY), visible
    assert "flag: cell" in _hidden(results) and "names the answer key" in _hidden(results)


def test_without_namespaces_the_kernel_runs_as_the_unprivileged_user_and_the_note_stays_hidden(
        tmp_path, monkeypatch):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("running the kernel as another user needs root and setpriv, as in Gradescope's container")
    monkeypatch.setattr(sandbox, "isolation", lambda: (False, "no user namespaces in this container"))
    monkeypatch.setenv(sandbox.KERNEL_USER_ENV, "nobody")
    secret = tmp_path / "secret.txt"
    secret.write_text("the answer key")
    secret.chmod(0o600)
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    write(root / "submission" / "ch01_rooflines.ipynb", "import os, scalelib as sl", nbs.right("1.1"),
          "raise RuntimeError(f'uid={os.getuid()}')", f"open({str(secret)!r}).read()")
    results = gradescope.run(root, 1, timeout_s=60, notebook_timeout_s=120)
    assert results["score"] == 1
    errors = results["output"]  # the learner's code ran as nobody, and could not read root's file
    assert "raised RuntimeError: uid=65534" in errors and "raised PermissionError" in errors
    hidden = _hidden(results)
    assert "no namespace sandbox" in hidden and "unprivileged user 'nobody' (uid 65534)" in hidden
    assert not any(word in _visible(results).lower() for word in INSTRUCTOR_ONLY)


def test_a_submission_the_machine_kept_from_grading_gets_no_results_json_so_never_a_score_of_0(
        tmp_path, monkeypatch, capsys):
    from scalelib import InvalidValueError
    from scalelib.course import grade as grade_module

    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "results" / "results.json").write_text('{"score": 16}')  # a stale one, from an earlier run
    write(root / "submission" / "ch01_rooflines.ipynb", "import scalelib as sl", nbs.right("1.1"))
    monkeypatch.setattr(grade_module, "STARTUP_TIMEOUT_S", 1.0)  # the kernel never starts in time: every try
    monkeypatch.setattr(grade_module, "_SLOW_MACHINE", lambda what, attempt: 10.0 if what == "start" else 0.0)
    monkeypatch.setattr(grade_module, "RETRY_DELAYS_S", (0.2, 0.2))
    assert gradescope.main(["--root", str(root), "--chapter", "1", "--timeout", "60"]) == 1  # the run failed
    assert not (root / "results" / "results.json").exists()  # Gradescope records no score, 0 or any
    out = capsys.readouterr().out  # the run's output, which Gradescope shows the instructor only
    assert "not graded: retry" in out and "the kernel could not start" in out and "tried 3 times" in out
    assert gradescope.NOT_GRADED_NOTE in out and "Rerun Autograder" in out
    stopped = grade_module.NotebookGrade("ch01_rooflines.ipynb", "ada", 1, grade_module.NOT_GRADED, error="...")
    with pytest.raises(InvalidValueError, match="no score"):
        gradescope.results(grade_module.Gradebook([stopped], 1, grade_module.Limits()), 1.0, max_score=16)
