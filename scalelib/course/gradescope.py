"""Grading on Gradescope: an autograder bundle, and the runner it calls in each submission's container.

``scalelib autograder --gradescope DIR --chapter N`` writes into DIR:

* ``setup.sh``: run once by Gradescope when the autograder is built: installs Python,
  bubblewrap and this course's package (from ``source/``, with its ``grade`` and
  ``notebooks`` extras) into ``/autograder/venv``;
* ``run_autograder``: run by Gradescope for each submission, in a container of its own:
  grades the notebooks in ``/autograder/submission`` as chapter N with
  :func:`scalelib.course.grade.grade` and writes ``/autograder/results/results.json``;
* ``source/``: the package (answer keys included), ``pyproject.toml`` and ``README.md``;
* ``autograder.zip``: the three above, as Gradescope's "Configure Autograder" page takes them.

``results.json`` follows Gradescope's documented format (``score``, ``execution_time``,
``output``, ``visibility``, ``stdout_visibility`` and ``tests``, each test with ``name``,
``number``, ``score``, ``max_score``, ``status`` and ``output``): one test per exercise,
its output the grader's feedback. The learner's name comes from
``/autograder/submission_metadata.json`` (the first user's name), else the file's name.

Inside Gradescope's container the kernel runs in the same bubblewrap sandbox as
``scalelib grade`` wherever the container lets bubblewrap make namespaces; where it
cannot, the container (one per submission) is the only isolation, the answer key in
``/autograder/source`` is then readable by the submission, and the results say so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import stat
import sys
import time
import zipfile
from pathlib import Path

from .._errors import InvalidValueError

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when the autograder image is built.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
/autograder/venv/bin/pip install "/autograder/source[grade,notebooks]"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission, in a container of its own.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{SCALELIB_AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
exec "$PYTHON" -m scalelib.course.gradescope --root "$ROOT" --chapter {chapter}{extra}
"""


def write_bundle(out_dir, chapter: int, *, timeout_s: float = 120.0, notebook_timeout_s: float = 900.0) -> Path:
    """Write the Gradescope autograder for `chapter` into `out_dir`; return the path of its ``autograder.zip``.

    >>> import tempfile; folder = tempfile.mkdtemp()
    >>> write_bundle(folder, 3).name
    'autograder.zip'
    """
    from .check import exercises

    if isinstance(chapter, bool) or not isinstance(chapter, int):
        raise InvalidValueError(f"`chapter` must be a chapter number (1 to 12), got {chapter!r}")
    try:
        exercises(chapter)
    except InvalidValueError:
        raise InvalidValueError(f"`chapter` must be a chapter with exercises (1 to 12), got {chapter!r}") from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    package = Path(__file__).resolve().parents[1]
    project = package.parent
    source = out / "source"
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(package, source / "scalelib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (project / name).exists():
            shutil.copy2(project / name, source / name)
    extra = f" --timeout {timeout_s:g} --notebook-timeout {notebook_timeout_s:g}"
    files = {"setup.sh": SETUP_SH, "run_autograder": RUN_AUTOGRADER.format(chapter=chapter, extra=extra)}
    for name, text in files.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    bundle = out / "autograder.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        for name in files:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, files[name])
        for path in sorted(source.rglob("*")):
            if path.is_file():
                z.write(path, str(path.relative_to(out)))
    return bundle


def _learner(root: Path) -> str | None:
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        users = meta.get("users") or []
        name = users[0].get("name") if users and isinstance(users[0], dict) else None
        return " ".join(name.split())[:100] if isinstance(name, str) and name.strip() else None
    except (OSError, ValueError, AttributeError):
        return None


def results(book, seconds: float, note: str = "") -> dict:
    """Gradescope's ``results.json`` for a gradebook of one submission (or none)."""
    from .grade import feedback, report_block

    tests = []
    score = 0.0
    output = [note] if note else []
    for g in book.grades:
        output.append(report_block(g))
        for e in g.exercises:
            tests.append({"name": f"Exercise {e.exercise}", "number": e.exercise, "score": e.points,
                          "max_score": e.max_points, "status": "passed" if e.points == e.max_points else "failed",
                          "output": e.message.strip() or e.status, "visibility": "visible"})
        score += g.points
        if not g.exercises:
            output.append(feedback(g))
    if not book.grades:
        output.append("No notebook (.ipynb) was found in the submission.")
    return {"score": score, "execution_time": round(seconds, 1), "output": "\n\n".join(output),
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def run(root="/autograder", chapter: int | None = None, *, timeout_s: float = 120.0,
        notebook_timeout_s: float = 900.0) -> dict:
    """Grade ``ROOT/submission`` as `chapter` and write ``ROOT/results/results.json``; return what was written."""
    from .grade import Gradebook, Limits, Roster, grade
    from .sandbox import isolation

    root = Path(root)
    start = time.monotonic()
    ok, why = isolation()
    note = "" if ok else (f"Note for the instructor: graded without a namespace sandbox ({why}); this container "
                          f"is the only isolation.")
    limits = Limits(cell_timeout_s=timeout_s, notebook_timeout_s=notebook_timeout_s, unsafe=not ok)
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts)
    if notebooks:
        name = _learner(root)
        roster = Roster({p.name.lower(): {"learner": name} for p in notebooks}) if name else None
        book = grade(notebooks, limits, chapter=chapter, roster=roster)
    else:
        book = Gradebook([], 0, limits)
    data = results(book, time.monotonic() - start, note)
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalelib.course.gradescope")
    parser.add_argument("--root", default="/autograder")
    parser.add_argument("--chapter", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--notebook-timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    data = run(args.root, args.chapter, timeout_s=args.timeout, notebook_timeout_s=args.notebook_timeout)
    print(f"score {data['score']:g} over {len(data['tests'])} exercise(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
