"""`make site` rebuilds the website and its PDF only when one of their inputs changed
(scalelib/course/sitestamp.py, book/site.mk): a digest of the inputs' contents, written beside each
build after it succeeded. Here on a small tree, and through make's dry run on the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scalelib.course import sitestamp

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scalelib" / "course" / "sitestamp.py"


def _tree(root: Path) -> Path:
    for path, text in {
        "book/_toc.yml": "root: book/intro\n",
        "book/_config.yml": "title: x\n",
        "book/intro.md": "# Intro\n",
        "book/_static/course.css": "a {}\n",
        "solutions/ch01.ipynb": "{}",
        "exercises/ch01.ipynb": "{}",
        "scalelib/roofline.py": "X = 1\n",
        "scalelib/course/pdf.py": "CSS = ''\n",
        "pyproject.toml": "[project]\n",
        "requirements.txt": "numpy==2.0.0\n",
        "tests/test_x.py": "",
        "README.md": "readme\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_the_digest_follows_contents_not_times(tmp_path):
    root = _tree(tmp_path)
    before = sitestamp.digest(root, environ={})
    os.utime(root / "book" / "intro.md", (1, 1))  # a fresh clone: every file has a new time
    (root / "scalelib" / "__pycache__").mkdir()
    (root / "scalelib" / "__pycache__" / "roofline.cpython-311.pyc").write_bytes(b"\0")
    (root / "book" / "node_modules" / "katex").mkdir(parents=True)
    (root / "book" / "node_modules" / "katex" / "katex.js").write_text("x")
    (root / "tests" / "test_y.py").write_text("")  # tests and the README are not the site's inputs
    (root / "README.md").write_text("changed\n")
    assert sitestamp.digest(root, environ={}) == before
    for path in ("book/intro.md", "book/_static/course.css", "solutions/ch01.ipynb", "scalelib/roofline.py",
                 "requirements.txt", "book/_config.yml"):
        original = (root / path).read_text()
        (root / path).write_text(original + "\n")
        assert sitestamp.digest(root, environ={}) != before, path
        (root / path).write_text(original)
    assert sitestamp.digest(root, environ={}) == before
    assert sitestamp.digest(root, environ={"SCALELIB_SITE_SOLUTIONS": "no"}) != before


def test_how_the_pdf_is_printed_is_an_input_of_the_pdf_only(tmp_path):
    root = _tree(tmp_path)
    site, pdf = sitestamp.digest(root, environ={}), sitestamp.digest(root, environ={}, pdf=True)
    (root / "scalelib" / "course" / "pdf.py").write_text("CSS = 'new'\n")
    assert sitestamp.digest(root, environ={}) == site
    assert sitestamp.digest(root, environ={}, pdf=True) != pdf


def _run(root: Path, *args: str) -> int:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--root", str(root)], cwd=root,
                          capture_output=True, text=True, env={**os.environ, "SCALELIB_SITE_SOLUTIONS": ""}).returncode


def test_a_build_is_fresh_after_it_succeeded_and_stale_when_an_input_changed_meanwhile(tmp_path):
    root = _tree(tmp_path)
    stamp = root / "_build" / "site.inputs"
    output = root / "_build" / "html" / "index.html"
    output.parent.mkdir(parents=True)
    output.write_text("site")
    assert _run(root, "check", str(stamp), "--output", str(output)) == 1  # never built
    assert _run(root, "begin", str(stamp)) == 0
    assert _run(root, "check", str(stamp)) == 1  # under way: not fresh
    assert _run(root, "done", str(stamp)) == 0
    assert _run(root, "check", str(stamp), "--output", str(output)) == 0
    output.unlink()
    assert _run(root, "check", str(stamp), "--output", str(output)) == 1  # the build was removed
    output.write_text("site")
    assert _run(root, "begin", str(stamp)) == 0
    (root / "book" / "intro.md").write_text("# Intro, edited while the site was building\n")
    assert _run(root, "done", str(stamp)) == 0
    assert _run(root, "check", str(stamp)) == 1  # the edit was not built
    assert _run(root, "done", str(stamp)) == 2  # no begin


def _dry_run(*args: str) -> list[str]:
    """make's commands for `args`, each on one line (continuations joined, spaces squeezed)."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [" ".join(line.split()) for line in out.replace("\\\n", " ").splitlines()]


def test_make_site_builds_each_step_only_when_its_inputs_changed():
    lines = [line for line in _dry_run("site") if "jupyter-book build" in line or "scalelib pdf" in line]
    assert len(lines) == 4, lines  # the English site and PDF, then the Russian edition's, each with its stamp
    site, pdf, ru_site, ru_pdf = lines
    stamp = ".venv/bin/python scalelib/course/sitestamp.py"
    assert ru_site.startswith(f"{stamp} check _build/ru/site.inputs --toc book/ru/_toc.yml "
                              "--output _build/ru/_build/html/index.html || "), ru_site
    assert ru_site.endswith(f"-W -n --keep-going && {stamp} done _build/ru/site.inputs; }}"), ru_site
    assert ru_pdf.startswith(f"{stamp} check _build/ru/_build/pdf/pdf.inputs --pdf --toc book/ru/_toc.yml "), ru_pdf
    stamp = ".venv/bin/python scalelib/course/sitestamp.py"
    assert site.startswith(f"{stamp} check _build/site.inputs --toc book/_toc.yml --output _build/html/index.html || "
                           f"{{ {stamp} begin _build/site.inputs --toc book/_toc.yml && "), site
    assert site.endswith(f"-W -n --keep-going && {stamp} done _build/site.inputs; }}"), site
    assert pdf.startswith(f"{stamp} check _build/pdf/pdf.inputs --pdf --toc book/_toc.yml "
                          "--output _build/pdf/how-to-scale-your-model.pdf || "), pdf
    assert pdf.endswith(f"scalelib pdf --toc book/_toc.yml --build-dir _build && {stamp} done _build/pdf/pdf.inputs; }}")
    forced = [line for line in _dry_run("site", "FORCE=yes") if "jupyter-book build" in line]
    assert forced and forced[0].startswith("false || {"), forced
