"""Grading on Gradescope: an autograder bundle laid out as Gradescope's specification asks, and its runner.

``scalelib autograder --gradescope DIR --chapter N`` writes ``DIR/autograder.zip`` (and the
same files, unzipped, beside it). Gradescope extracts the zip into ``/autograder/source``, runs
``setup.sh`` there once to build the autograder's image, copies ``run_autograder`` to
``/autograder/run_autograder`` and runs it for each submission, in a container of its own, with
the submission in ``/autograder/submission``; it shows ``/autograder/results/results.json``.
The zip's root therefore holds:

* ``setup.sh``: installs Python 3.11 or later whatever the image's ``python3`` (Ubuntu 22.04's
  is 3.10: Ubuntu's ``python3.11`` package, else the deadsnakes PPA's ``python3.12``; a clear
  error if neither installs), bubblewrap, and this package with its ``grade`` and ``notebooks``
  extras into the virtual environment ``/autograder/venv``; creates the unprivileged user
  ``scalelib-learner``; and makes the answer key (``/autograder/source`` and the installed
  ``scalelib/course/answer_key``) and ``/autograder/results`` readable by root only;
* ``run_autograder``: grades the submission as chapter N with :func:`run`;
* the package: ``pyproject.toml``, ``README.md``, ``LICENSE`` and ``scalelib/``.

Both scripts take their root from ``AUTOGRADER_ROOT`` (default ``/autograder``), so that the
layout can be tried anywhere; ``SCALELIB_AUTOGRADER_PYTHON`` names an interpreter (3.11 or later)
for ``setup.sh`` to use instead of installing one.

``results.json`` follows Gradescope's documented format: ``score``, ``execution_time``,
``output``, ``visibility``, ``stdout_visibility`` and ``tests``, each test with ``name``,
``number``, ``score``, ``max_score``, ``status``, ``output`` and ``visibility``. One notebook per
submission is graded (any others are named in the output and never graded or added); the score
is that notebook's, never more than the chapter's points. What students see (the visible tests
and ``output``) holds the verdicts and hints; the instructor's flags and the note on how the
kernel was isolated go to a hidden test, ``extra_data`` and the run's stdout (hidden). A notebook
the machine kept from being graded (``not graded: retry``, after the grader's own retries) gets no
``results.json``, since any would carry a score that Gradescope records: the run fails, Gradescope
tells the student to contact the course staff and records no score, and the run's output tells the
instructor to rerun the autograder.

Isolation inside Gradescope's container: the kernel runs in the same bubblewrap sandbox as
``scalelib grade`` wherever the container lets bubblewrap make namespaces. Where it cannot (the
usual case in Docker), the kernel runs as ``scalelib-learner`` (see
:data:`scalelib.course.sandbox.KERNEL_USER_ENV`): it cannot read the answer key or the results,
but it shares the container's processes, network and world-readable files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import time
import traceback
import zipfile
from pathlib import Path

from .._errors import InvalidValueError

#: The unprivileged user ``setup.sh`` creates for the learners' kernels.
KERNEL_USER = "scalelib-learner"

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, from the folder the autograder zip was extracted into (/autograder/source),
# when it builds the autograder's image. Set AUTOGRADER_ROOT to try the layout elsewhere, and
# SCALELIB_AUTOGRADER_PYTHON to use an interpreter (Python 3.11 or later) instead of installing one.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/venv"
KERNEL_USER="${SCALELIB_KERNEL_USER:-scalelib-learner}"

fail() { echo "scalelib setup.sh: error: $*" >&2; exit 1; }
supported() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; }
find_python() {
  local candidate path
  for candidate in python3.13 python3.12 python3.11 python3; do
    path="$(command -v "$candidate" 2>/dev/null)" || continue
    if supported "$path"; then echo "$path"; return 0; fi
  done
  return 1
}

if [ -n "${SCALELIB_AUTOGRADER_PYTHON:-}" ]; then
  PY="$SCALELIB_AUTOGRADER_PYTHON"
  supported "$PY" || fail "SCALELIB_AUTOGRADER_PYTHON=$PY is not Python 3.11 or later ($("$PY" --version 2>&1 || echo 'it does not run'))"
else
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends ca-certificates bubblewrap util-linux passwd
  if ! PY="$(find_python)"; then  # Ubuntu 22.04's python3 is 3.10: its universe has python3.11
    apt-get install -y --no-install-recommends python3.11 python3.11-venv || true
  fi
  if ! PY="$(find_python)"; then  # else the deadsnakes PPA's
    apt-get install -y --no-install-recommends software-properties-common gpg-agent || true
    (add-apt-repository -y ppa:deadsnakes/ppa && apt-get update &&
      apt-get install -y --no-install-recommends python3.12 python3.12-venv) || true
  fi
  PY="$(find_python)" || fail "no Python 3.11 or later could be installed: the image's python3 is $(python3 --version 2>&1 || echo 'missing'), and neither Ubuntu's python3.11 nor the deadsnakes PPA's python3.12 installed. Choose a base image with Python 3.11 or later (Ubuntu 24.04) in Gradescope's autograder settings, or set SCALELIB_AUTOGRADER_PYTHON."
fi
echo "scalelib setup.sh: $("$PY" --version 2>&1) at $PY"

"$PY" -m venv "$VENV" || fail "$PY could not make a virtual environment (Debian/Ubuntu: install its -venv package)"
"$VENV/bin/python" -m pip install --disable-pip-version-check "$SOURCE[grade,notebooks]"

# The learners' kernels run as this user wherever no namespace sandbox can be made.
if [ "$(id -u)" = 0 ] && ! id -u "$KERNEL_USER" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$KERNEL_USER"
fi
# The answer key (the extracted zip and the installed copy) and the results: root only.
KEY="$(cd / && "$VENV/bin/python" -I -c 'import importlib.util, os; print(os.path.join(importlib.util.find_spec("scalelib").submodule_search_locations[0], "course", "answer_key"))')"
[ -d "$KEY" ] || fail "the installed package has no answer key at $KEY"
chmod -R go-rwx "$SOURCE" "$KEY"
mkdir -p "$ROOT/results"
chmod 700 "$ROOT/results"
echo "scalelib setup.sh: installed into $VENV; kernels run as $KERNEL_USER where no sandbox can be made"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope copies this to /autograder/run_autograder and runs it, as root, for each submission.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
export SCALELIB_KERNEL_USER="${{SCALELIB_KERNEL_USER:-{user}}}"
mkdir -p "$ROOT/results"
chmod 700 "$ROOT/results" "$ROOT/source" 2>/dev/null
[ -f "$ROOT/submission_metadata.json" ] && chmod 600 "$ROOT/submission_metadata.json"
cd "$ROOT"
exec "$ROOT/venv/bin/python" -I -m scalelib.course.gradescope --root "$ROOT" --chapter {chapter}{extra}
"""


def write_bundle(out_dir, chapter: int, *, timeout_s: float = 120.0, notebook_timeout_s: float = 900.0) -> Path:
    """Write the Gradescope autograder for `chapter` into `out_dir`; return the path of its ``autograder.zip``.

    The zip's root holds ``setup.sh``, ``run_autograder`` and the package (``pyproject.toml``,
    ``scalelib/``...), as Gradescope's autograder specification asks.

    >>> import tempfile, zipfile; folder = tempfile.mkdtemp()
    >>> names = zipfile.ZipFile(write_bundle(folder, 3)).namelist()
    >>> {"setup.sh", "run_autograder", "pyproject.toml", "scalelib/course/answer_key/ch03.py"} <= set(names)
    True
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
    for stale in ("source", "scalelib"):  # an earlier bundle's files (``source/`` was the old layout)
        if (out / stale).is_dir():
            shutil.rmtree(out / stale)
    shutil.copytree(package, out / "scalelib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    files = ["scalelib"]
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (project / name).exists():
            shutil.copy2(project / name, out / name)
            files.append(name)
    extra = f" --timeout {timeout_s:g} --notebook-timeout {notebook_timeout_s:g}"
    scripts = {"setup.sh": SETUP_SH,
               "run_autograder": RUN_AUTOGRADER.format(chapter=chapter, extra=extra, user=KERNEL_USER)}
    for name, text in scripts.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    bundle = out / "autograder.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        for name in files:
            path = out / name
            for item in sorted(path.rglob("*")) if path.is_dir() else [path]:
                if item.is_file():
                    z.write(item, str(item.relative_to(out)))
    return bundle


def _learner(root: Path) -> str | None:
    """The submitter's name from Gradescope's ``submission_metadata.json`` (its first user), or None."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        users = meta.get("users") or []
        name = users[0].get("name") if users and isinstance(users[0], dict) else None
        return " ".join(name.split())[:100] if isinstance(name, str) and name.strip() else None
    except (OSError, ValueError, AttributeError):
        return None


def pick_notebook(notebooks: list[Path], chapter: int | None) -> tuple[Path | None, list[Path]]:
    """The one notebook of a submission that is graded, and the others (never graded).

    The first, in order, of: a notebook whose file name names the assigned chapter (``chNN``),
    the course's own file name before any other, then the shallowest, then by name.

    >>> pick_notebook([Path("a/ch01_rooflines (1).ipynb"), Path("ch01_rooflines.ipynb"), Path("notes.ipynb")], 1)
    (PosixPath('ch01_rooflines.ipynb'), [PosixPath('a/ch01_rooflines (1).ipynb'), PosixPath('notes.ipynb')])
    """
    import re

    if not notebooks:
        return None, []

    def key(path: Path):
        match = re.search(r"(?:^|[^a-z])ch(\d+)", path.name, re.IGNORECASE)
        named = match is not None and (chapter is None or int(match.group(1)) == chapter)
        course_name = re.fullmatch(r"ch\d+_[a-z0-9_]+\.ipynb", path.name, re.IGNORECASE) is not None
        return (not named, not course_name, len(path.parts), str(path))

    ordered = sorted(notebooks, key=key)
    return ordered[0], ordered[1:]


def results(book, seconds: float, *, note: str = "", extra: tuple[str, ...] = (), max_score: float | None = None) \
        -> dict:
    """Gradescope's ``results.json`` for the gradebook of one submission's one notebook (or of none).

    Args:
        note: for the instructor only (how the kernel was isolated).
        extra: the submission's other notebooks, named to the student as not graded.
        max_score: the assignment's points; the score never exceeds it.

    Raises:
        InvalidValueError: the notebook was not graded (:data:`~scalelib.course.gradebook.NOT_GRADED`: the
            machine stopped every try). Every ``results.json`` carries a score, and Gradescope records it as
            the grade, so such a notebook gets none (:func:`run` writes no ``results.json`` for it).
    """
    from .gradebook import MISSING, NOT_GRADED, escape_controls
    from .grade import UNSAFE_FLAG
    from .i18n import _, translate, trusted_language, using_language

    if any(g.status == NOT_GRADED for g in book.grades):
        raise InvalidValueError("a notebook the machine kept from being graded (status 'not graded: retry') has "
                                "no score: no results.json is written for it, and Gradescope records none")

    tests: list[dict] = []
    visible: list[str] = []
    hidden: list[str] = [note] if note else []
    score = 0.0
    grades = list(book.grades)[:1]
    language = trusted_language(getattr(grades[0], "language", "en")) if grades else "en"
    for g in grades:
        name = escape_controls(Path(g.notebook).name)
        with using_language(language):
            for e in g.exercises:
                message = escape_controls(e.message.strip() or translate(e.status), keep="\n")
                missing = _("Exercise {eid}: not answered.").format(eid=e.exercise)
                tests.append({"name": _("Exercise {eid}").format(eid=escape_controls(e.exercise)),
                              "number": escape_controls(e.exercise),
                              "score": e.points, "max_score": e.max_points,
                              "status": "passed" if e.points >= e.max_points else "failed",
                              "output": message if e.status != MISSING else missing,
                              "visibility": "visible"})
            line = _("Graded {name}: {points} of {max_points} points.").format(
                name=name, points=f"{g.points:g}", max_points=f"{g.max_points:g}")
            if g.error:
                line += "\n" + _("The grading run stopped: {error}").format(error=escape_controls(g.error))
            visible.append(line)
            visible += [escape_controls(str(c)) for c in g.cell_errors]  # the learner's own cells' errors
        score += g.points
        visible += [escape_controls(i) for i in g.ignored]
        flags = [f for f in g.flags if not f.startswith(UNSAFE_FLAG.split(":")[0])]  # the note says it
        hidden += [f"flag: {escape_controls(f)}" for f in flags]
        hidden.append(f"learner {escape_controls(g.learner)!s}; status {g.status}; seed {g.seed}")
    if extra:
        with using_language(language):
            visible.append(_("Only one notebook per submission is graded. Not graded: {names}.").format(
                names=", ".join(escape_controls(p.name) for p in extra)))
        hidden.append("other notebooks in the submission (not graded): "
                      + ", ".join(escape_controls(str(p)) for p in extra))
    if not grades:
        visible.append(_("No notebook (.ipynb) was found in the submission."))
    if max_score is not None:
        score = min(score, max_score)
    tests.append({"name": "Notes for the instructor", "score": 0.0, "max_score": 0.0, "status": "passed",
                  "output": "\n".join(hidden) or "nothing to note", "visibility": "hidden"})
    return {"score": score, "execution_time": round(seconds, 1), "output": "\n".join(visible),
            "visibility": "visible", "stdout_visibility": "hidden",
            "extra_data": {"instructor_notes": hidden}, "tests": tests}


#: What the instructor reads (the run's output, which Gradescope shows to instructors only) when the machine kept
#: the submission's notebook from being graded.
NOT_GRADED_NOTE = ("NOT GRADED: the machine, not the notebook, stopped every try of grading it (see the cause "
                   "above), so no results.json is written and no score is recorded: Gradescope shows the student "
                   "that the autograder failed and asks them to contact the course staff. Rerun the autograder on "
                   "this submission (Gradescope's 'Rerun Autograder') once the machine is less busy.")


def run(root="/autograder", chapter: int | None = None, *, timeout_s: float = 120.0,
        notebook_timeout_s: float = 900.0) -> dict | None:
    """Grade one notebook of ``ROOT/submission`` as `chapter`; write ``ROOT/results/results.json``; return it.

    A notebook the machine kept from being graded (status ``not graded: retry``, after the grader's own
    retries) gets no ``results.json`` and no score, never 0: Gradescope then marks the submission's
    autograder run failed, tells the student to contact the course staff, and the instructor reruns it;
    the run's output (instructors only) says why (:data:`NOT_GRADED_NOTE`). Returns None then.
    """
    from .check import get_exercise, exercises
    from .gradebook import NOT_GRADED, Gradebook, Roster, json_text
    from .grade import Limits, grade
    from .i18n import _
    from .sandbox import KERNEL_USER_ENV, fallback_user, isolation

    root = Path(root)
    start = time.monotonic()
    ok, why = isolation()
    if ok:
        note = f"isolation: {why}"
    else:
        user = os.environ.get(KERNEL_USER_ENV, "")
        try:
            as_user = fallback_user()
        except Exception as err:  # noqa: BLE001 - said in the note; the kernel then runs as root
            as_user, why = None, f"{why}; {err}"
        note = (f"isolation: no namespace sandbox in this container ({why}); the kernel ran as the unprivileged "
                f"user {user!r} (uid {as_user[0]}), which cannot read the answer key or the results, but shares "
                f"the container's processes, network and world-readable files" if as_user else
                f"isolation: NONE: no namespace sandbox in this container ({why}) and no unprivileged user "
                f"({KERNEL_USER_ENV}); the kernel ran as root and could read the answer key")
    limits = Limits(cell_timeout_s=timeout_s, notebook_timeout_s=notebook_timeout_s, unsafe=not ok)
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb")
                       if not any(part.startswith(".") for part in p.relative_to(root / "submission").parts))
    chosen, others = pick_notebook(notebooks, chapter)
    max_score = float(sum(get_exercise(i).points for i in exercises(chapter))) if chapter else None
    try:
        if chosen is not None:
            name = _learner(root)
            roster = Roster.single(chosen, name) if name else None
            book = grade([chosen], limits, chapter=chapter, roster=roster)
        else:
            book = Gradebook([], 0, limits)
        if any(g.status == NOT_GRADED for g in book.grades):
            print(book.report())
            print(NOT_GRADED_NOTE)
            (root / "results" / "results.json").unlink(missing_ok=True)
            return None
        data = results(book, time.monotonic() - start, note=note, extra=tuple(others), max_score=max_score)
        print(book.report())
    except Exception:  # noqa: BLE001 - the student gets a result, the instructor the traceback (stdout is hidden)
        traceback.print_exc()
        data = {"score": 0.0, "execution_time": round(time.monotonic() - start, 1),
                "output": _("The autograder failed on this submission; your instructor can see why."),
                "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json_text(data), encoding="utf-8")
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalelib.course.gradescope")
    parser.add_argument("--root", default="/autograder")
    parser.add_argument("--chapter", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--notebook-timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    data = run(args.root, args.chapter, timeout_s=args.timeout, notebook_timeout_s=args.notebook_timeout)
    if data is None:  # not graded: no results.json, so that Gradescope records no score and reports a failed run
        print("not graded (the machine stopped every try): no results.json written; rerun the autograder")
        return 1
    graded = sum(t.get("visibility") != "hidden" for t in data["tests"])
    print(f"score {data['score']:g} over {graded} exercise(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
