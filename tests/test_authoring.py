"""Authoring tools: exercise notebooks generated from solutions, and the one setup cell."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from hypothesis import given, strategies as st

from scalelib.course.authoring import (
    course_ref,
    pages_url,
    release_ref,
    tested_jax as _tested_jax,
    AuthoringError,
    Drift,
    colab_link,
    exercise_code,
    generate,
    generate_exercise_notebook,
    setup_cell_source,
    sync_setup_cells,
)
from scalelib.course.cli import main

URL = "https://github.com/example/course"


def notebook(*cells, minor=5):
    """A notebook from ("code" | "md", source) pairs, with fixed cell ids."""
    nb = nbformat.v4.new_notebook()
    nb.nbformat_minor = minor
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, (kind, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell["id"] = f"cell-{i}"
        nb.cells.append(cell)
    return nb


def stub(source: str) -> str:
    return generate_exercise_notebook(notebook(("code", source))).cells[0].source


def config(tmp_path, url=URL, branch="main"):
    path = tmp_path / "_config.yml"
    path.write_text(f"title: x\nrepository:\n  url: {url}\n  branch: {branch}\n  path_to_book: ''\n")
    return path


# ---------------------------------------------------------------------------
# code cells


def test_assignments_in_a_region_become_none_placeholders_and_code_outside_is_kept():
    source = 'B = 8\n### BEGIN SOLUTION\nflops = 2 * B\nanswer = flops / 4\n### END SOLUTION\nsl.check("1.1", answer)'
    assert stub(source) == (
        'B = 8\nflops = None  # YOUR ANSWER HERE\nanswer = None  # YOUR ANSWER HERE\nsl.check("1.1", answer)'
    )


def test_annotated_tuple_and_repeated_assignments_give_one_placeholder_per_name():
    source = "### BEGIN SOLUTION\nx: float = 1.0\na, (b, *c) = 1, (2, 3)\nx = x + a\nd[0] = 5\n### END SOLUTION"
    assert stub(source) == "\n".join(f"{n} = None  # YOUR ANSWER HERE" for n in "xabc")


def test_def_keeps_signature_and_docstring_and_raises_not_implemented():
    source = '''### BEGIN SOLUTION
@functools.cache
def intensity(B: int,
              D: int) -> float:
    """FLOPs per byte.

    Formula: 2·B·D / bytes.
    """
    # the hint in this comment is part of the solution
    return 2 * B * D / 4
### END SOLUTION'''
    assert stub(source) == '''@functools.cache
def intensity(B: int,
              D: int) -> float:
    """FLOPs per byte.

    Formula: 2·B·D / bytes.
    """
    raise NotImplementedError("write your solution here")'''


def test_def_without_docstring_and_one_line_def_get_a_raising_body():
    source = "### BEGIN SOLUTION\ndef f(x):\n    return x\ndef g(x): return 2 * x\n### END SOLUTION"
    raising = '    raise NotImplementedError("write your solution here")'
    assert stub(source) == f"def f(x):\n{raising}\n\ndef g(x):\n{raising}"


def test_other_statements_are_dropped():
    source = "### BEGIN SOLUTION\nimport math\nprint('hidden')\nfor i in range(3):\n    y = i\nx = 1\n### END SOLUTION"
    assert stub(source) == "x = None  # YOUR ANSWER HERE"


def test_region_without_assignment_or_def_becomes_your_code_here():
    assert stub("a = 1\n### BEGIN SOLUTION\nprint(a)\n### END SOLUTION\nb = 2") == "a = 1\n# YOUR CODE HERE\nb = 2"


def test_indented_markers_keep_the_indentation_and_the_cell_stays_valid_python():
    source = """class Model:
    ### BEGIN SOLUTION
    def loss(self, x):
        \"\"\"Mean squared.\"\"\"
        return (x ** 2).mean()
    ### END SOLUTION

def step(x):
    ### BEGIN SOLUTION
    return x + 1
    ### END SOLUTION

def scale(x):
    ### BEGIN SOLUTION
    factor = 2
    ### END SOLUTION
    return factor * x"""
    assert stub(source) == """class Model:
    def loss(self, x):
        \"\"\"Mean squared.\"\"\"
        raise NotImplementedError("write your solution here")

def step(x):
    # YOUR CODE HERE
    raise NotImplementedError("write your solution here")

def scale(x):
    factor = None  # YOUR ANSWER HERE
    return factor * x"""


def test_cells_without_markers_are_kept_as_written():
    source = "%pip install x\n# ### BEGIN SOLUTION is only a marker on a line of its own\ny = 1"
    assert stub(source) == source


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\r"), max_size=30), max_size=8))
def test_code_without_marker_lines_is_never_changed(lines):
    source = "\n".join(line for line in lines if "SOLUTION" not in line)
    assert exercise_code(source) == source


# ---------------------------------------------------------------------------
# markdown cells


def test_inline_markdown_region_is_cut_out_of_its_line():
    nb = notebook(("md", "The answer is <!-- BEGIN SOLUTION -->**42**<!-- END SOLUTION -->, as shown."))
    assert generate_exercise_notebook(nb).cells[0].source == "The answer is , as shown."


def test_multiline_markdown_region_takes_its_lines_and_leaves_one_blank_line():
    source = "Question?\n\n<!-- BEGIN SOLUTION -->\n**Answer.** 42,\nbecause...\n<!-- END SOLUTION -->\n\nNext.\nA\n" \
             "<!-- BEGIN SOLUTION -->\nhidden\n<!-- END SOLUTION -->\nB"
    assert generate_exercise_notebook(notebook(("md", source))).cells[0].source == "Question?\n\nNext.\nA\nB"


def test_markdown_cell_left_empty_is_dropped():
    nb = notebook(("md", "# Title"), ("md", "<!-- BEGIN SOLUTION -->\nAll of it.\n<!-- END SOLUTION -->"),
                  ("code", "x = 1"))
    assert [c.id for c in generate_exercise_notebook(nb).cells] == ["cell-0", "cell-2"]


# ---------------------------------------------------------------------------
# notebooks


def test_outputs_and_counts_cleared_ids_and_metadata_kept_solution_untouched():
    nb = notebook(("code", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION\nx"))
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "1"}, execution_count=3)]
    nb.cells[0].execution_count = 3
    nb.cells[0].metadata = {"tags": ["exercise"], "execution": {"iopub.status.busy": "2025-01-01"}}
    before = nbformat.writes(nb)
    ex = generate_exercise_notebook(nb)
    cell = ex.cells[0]
    assert (cell.outputs, cell.execution_count, cell.id, cell.metadata) == ([], None, "cell-0", {"tags": ["exercise"]})
    assert ex.metadata == nb.metadata
    assert nbformat.writes(nb) == before


def test_generated_exercise_notebooks_name_their_chapter_for_the_grader(tmp_path):
    (tmp_path / "solutions").mkdir()
    nb = notebook(("code", "x = 1"))
    # The solved notebook's learner (chapter 11's sample) is dropped: an exercise notebook is nobody's yet.
    nb.metadata["scalelib"] = {"learner": "Grace Hopper", "note": "kept"}
    nbformat.write(nb, tmp_path / "solutions/ch07_demo.ipynb")
    nbformat.write(notebook(("code", "x = 1")), tmp_path / "solutions/appendix.ipynb")
    generate(tmp_path / "solutions", tmp_path / "exercises")
    assert nbformat.read(tmp_path / "exercises/ch07_demo.ipynb", 4).metadata["scalelib"] == {"note": "kept",
                                                                                             "chapter": 7}
    assert "scalelib" not in nbformat.read(tmp_path / "exercises/appendix.ipynb", 4).metadata
    assert generate_exercise_notebook(notebook(("code", "x = 1")), chapter=3).metadata["scalelib"] == {"chapter": 3}


def test_the_course_exercise_notebooks_name_their_chapter():
    from scalelib.course.authoring import chapter_of

    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "exercises").glob("*.ipynb")):
        assert nbformat.read(path, 4).metadata["scalelib"]["chapter"] == chapter_of(path), path


def test_generate_writes_identical_bytes_twice_and_then_reports_nothing(tmp_path):
    (tmp_path / "solutions").mkdir()
    nbformat.write(notebook(("code", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION")), tmp_path / "solutions/ch99_a.ipynb")
    sol, ex = tmp_path / "solutions", tmp_path / "exercises"
    assert generate(sol, ex) == [Drift(ex / "ch99_a.ipynb", "missing")]
    first = (ex / "ch99_a.ipynb").read_bytes()
    assert generate(sol, ex) == []
    assert (ex / "ch99_a.ipynb").read_bytes() == first
    assert first.endswith(b"}\n") and b'\n "cells": [\n  {\n' in first  # indent 1, trailing newline
    assert generate(sol, ex, check=True) == []


def test_generate_check_reports_missing_stale_and_extra_and_writes_nothing(tmp_path):
    sol, ex = tmp_path / "solutions", tmp_path / "exercises"
    sol.mkdir()
    ex.mkdir()
    for name in ("ch99_a", "ch99_b"):
        nbformat.write(notebook(("code", f"### BEGIN SOLUTION\n{name} = 1\n### END SOLUTION")), sol / f"{name}.ipynb")
    generate(sol, ex)
    nbformat.write(notebook(("code", "### BEGIN SOLUTION\nchanged = 1\n### END SOLUTION")), sol / "ch99_a.ipynb")
    (ex / "ch99_b.ipynb").unlink()
    (ex / "ch99_old.ipynb").write_text("{}")
    snapshot = {p.name: p.read_bytes() for p in ex.iterdir()}
    drift = generate(sol, ex, check=True)
    assert drift == [Drift(ex / "ch99_a.ipynb", "stale"), Drift(ex / "ch99_b.ipynb", "missing"),
                     Drift(ex / "ch99_old.ipynb", "extra")]
    assert str(drift[0]) == f"{ex / 'ch99_a.ipynb'}: stale (differs from what its solution notebook generates)"
    assert {p.name: p.read_bytes() for p in ex.iterdir()} == snapshot
    generate(sol, ex)
    assert sorted(p.name for p in ex.iterdir()) == ["ch99_a.ipynb", "ch99_b.ipynb"]
    assert generate(sol, ex, check=True) == []


@pytest.mark.parametrize("source, message", [
    ("x = 1\n### BEGIN SOLUTION\ny = 2",
     "solutions/ch99.ipynb, cell 2: `### BEGIN SOLUTION` on line 2 is never closed by a `### END SOLUTION` line"),
    ("### BEGIN SOLUTION\n  ### BEGIN SOLUTION\n### END SOLUTION",
     "solutions/ch99.ipynb, cell 2: `### BEGIN SOLUTION` on line 2 is inside the region opened on line 1; "
     "regions cannot be nested: close the first with `### END SOLUTION`"),
    ("y = 1\n### END SOLUTION",
     "solutions/ch99.ipynb, cell 2: `### END SOLUTION` on line 2 has no `### BEGIN SOLUTION` before it"),
    ("x = (1,\n### BEGIN SOLUTION\n2)\n### END SOLUTION",
     "solutions/ch99.ipynb, cell 2: the solution region on line 3 is not valid Python on its own "
     "(unmatched ')', line 3); a region must hold whole statements"),
])
def test_bad_code_markers_name_notebook_cell_and_line(source, message):
    nb = notebook(("md", "# Title"), ("code", source))
    with pytest.raises(AuthoringError) as err:
        generate_exercise_notebook(nb, name="solutions/ch99.ipynb")
    assert str(err.value) == message


@pytest.mark.parametrize("source, message", [
    ("a\n<!-- BEGIN SOLUTION -->\nb",
     "nb, cell 1: `<!-- BEGIN SOLUTION -->` on line 2 is never closed by `<!-- END SOLUTION -->`"),
    ("<!-- BEGIN SOLUTION --> <!-- BEGIN SOLUTION -->",
     "nb, cell 1: `<!-- BEGIN SOLUTION -->` on line 1 is inside the region opened on line 1; "
     "regions cannot be nested: close the first with `<!-- END SOLUTION -->`"),
    ("a <!-- END SOLUTION -->",
     "nb, cell 1: `<!-- END SOLUTION -->` on line 1 has no `<!-- BEGIN SOLUTION -->` before it"),
])
def test_bad_markdown_markers_name_notebook_cell_and_line(source, message):
    with pytest.raises(AuthoringError) as err:
        generate_exercise_notebook(notebook(("md", source)), name="nb")
    assert str(err.value) == message


# ---------------------------------------------------------------------------
# setup cells


SETUP = f'''# Setup: import scalelib, installing it first where it is missing (e.g. on Colab).
import os
# JAX on this machine's CPU, as 8 devices, whatever accelerator the runtime has: the sharding chapters need 8.
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
try:
    import scalelib as sl
except ImportError:
    import subprocess, sys
    # The library of the course's version this notebook comes from (main), with JAX in the tested range.
    SCALELIB = "scalelib[notebooks] @ git+{URL}@main"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", SCALELIB],
                          capture_output=True, text=True)
    if done.returncode != 0:
        log = done.stdout + done.stderr
        if any(s in log for s in ("Could not resolve host", "Temporary failure in name resolution",
                                  "Failed to establish a new connection", "Network is unreachable",
                                  "NameResolutionError", "Connection timed out")):
            why = "The runtime cannot reach GitHub or PyPI: check its internet connection"
        elif any(s in log for s in ("did not match any file(s) known to git", "Repository not found",
                                    "could not read Username", "Could not read from remote repository",
                                    "couldn't find remote ref")):
            why = (SCALELIB.split(" @ ")[1] + " is not published (the repository is not public "
                   "yet, or the tag is not pushed): open a notebook of a published version of the course")
        else:
            why = "pip's error is above"
        raise RuntimeError(
            "Installing scalelib failed (pip exited with " + str(done.returncode) + "):\\n"
            + log[-1500:] + "\\n" + why + "; then restart the runtime (Runtime > Restart session) "
            "and run this cell again, or install by hand: pip install '" + SCALELIB + "'") from None
    import scalelib as sl'''


def _course(tmp_path, version="1.2.3", jax="jax>=0.7,<0.11", branch="main"):
    """A course checkout: book/_config.yml, pyproject.toml (its version and notebooks extra), requirements.txt."""
    (tmp_path / "book").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "scalelib"\nversion = "{version}"\n'
        f'[project.optional-dependencies]\nnotebooks = ["{jax}", "matplotlib>=3.8"]\n')
    (tmp_path / "requirements.txt").write_text("jax==0.10.2\njaxlib==0.10.2\nnumpy==2.0.0\n")
    return config(tmp_path / "book", branch=branch)


def test_the_setup_cell_installs_the_course_ref_the_notebook_opens_from(tmp_path):
    """The ref is the config's `branch`: main on main, a release's tag in a release commit; the
    notebooks extra (JAX's tested range) without a second pin of JAX, and no upgrade of anything."""
    source = setup_cell_source(_course(tmp_path / "main"))
    assert f'SCALELIB = "scalelib[notebooks] @ git+{URL}@main"' in source
    tagged = setup_cell_source(_course(tmp_path / "release", branch="v1.2.3"))
    assert f'SCALELIB = "scalelib[notebooks] @ git+{URL}@v1.2.3"' in tagged
    assert course_ref(tmp_path / "release" / "book" / "_config.yml") == "v1.2.3" == release_ref(tmp_path / "release")
    assert "--upgrade" not in source and "%pip" not in source and "jupyterlab" not in source


def test_colab_and_the_setup_cell_use_one_ref(tmp_path):
    """Colab's link (and Jupyter Book's launch button, built from the same `repository: branch:`)
    opens the notebook from the very ref its setup cell installs, for any ref."""
    import re

    for ref in ("main", "v2.0.1", "some-branch"):
        cfg = _course(tmp_path / ref, branch=ref)
        path = tmp_path / ref / "book" / "ch01_x.ipynb"
        opened = re.search(r"/blob/([^/]+)/book/ch01_x\.ipynb\)$", colab_link(path, cfg)).group(1)
        installed = re.search(r'SCALELIB = "scalelib\[notebooks\] @ git\+[^@"]+@([^"]+)"',
                              setup_cell_source(cfg)).group(1)
        assert opened == installed == ref


def test_the_repository_s_notebooks_open_in_colab_from_the_ref_they_install():
    """Each chapter notebook's Colab link and its setup cell name the same ref, the config's."""
    import re

    root = Path(__file__).resolve().parents[1]
    ref = course_ref(root / "book" / "_config.yml")
    for path in sorted((root / "book").glob("ch*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells)
        opened = re.findall(r"\[Open in Colab\]\([^)]*/blob/([^/]+)/book/", text)
        installed = re.findall(r'scalelib\[notebooks\] @ git\+[^@"]+@([^"]+)"', text)
        assert opened == [ref] and installed == [ref], (
            f"{path.name}: Colab opens {opened}, the setup cell installs {installed}, the course's ref is "
            f"{ref!r} (run `scalelib sync-setup`)")


def test_the_site_s_address_is_derived_from_the_repository(tmp_path):
    assert pages_url(config(tmp_path, url="https://github.com/Some-Org/my-course")) == \
        "https://some-org.github.io/my-course/"
    with pytest.raises(AuthoringError, match="repository: url"):
        pages_url(config(tmp_path, url="https://gitlab.com/a/b"))


def test_the_setup_cell_forces_8_cpu_devices_and_says_why_an_install_failed(tmp_path, monkeypatch):
    """Run as on a Colab GPU runtime without scalelib, where pip fails: JAX is pointed at 8 CPU
    devices before anything imports it, and the learner reads pip's error and what to do."""
    import subprocess
    import sys

    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "scalelib", None)  # `import scalelib` raises ImportError
    calls = []

    def failing_pip(args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, "", "ERROR: Could not find a version that satisfies x")

    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(RuntimeError) as err:
        exec(compile(setup_cell_source(config(tmp_path)), "setup-cell", "exec"), {})
    import os

    assert os.environ["JAX_PLATFORMS"] == "cpu" and os.environ["JAX_NUM_CPU_DEVICES"] == "8"
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", f"scalelib[notebooks] @ git+{URL}@main"]]
    message = str(err.value)
    assert message.startswith("Installing scalelib failed (pip exited with 1):\nERROR: Could not find")
    assert "pip's error is above" in message and "internet" not in message and "not published" not in message
    assert "Restart session" in message and f"pip install 'scalelib[notebooks] @ git+{URL}@main'" in message


def test_tested_jax_is_the_notebooks_extra_s(tmp_path):
    _course(tmp_path, jax="jax >= 0.7, <0.10")
    assert _tested_jax(tmp_path) == "jax>=0.7,<0.10"
    assert _tested_jax(tmp_path / "nowhere") == "jax>=0.7"


def test_setup_cell_source_comes_from_the_config(tmp_path):
    assert setup_cell_source(config(tmp_path)) == SETUP


def test_setup_cell_source_names_a_missing_key(tmp_path):
    path = tmp_path / "_config.yml"
    path.write_text("repository:\n  url: https://github.com/x/y\n")
    with pytest.raises(AuthoringError) as err:
        setup_cell_source(path)
    assert str(err.value) == f"{path}: `repository: branch:` must be set to the course repository's branch (e.g. main), got None"


def test_setup_cell_source_names_a_missing_file(tmp_path):
    with pytest.raises(AuthoringError) as err:
        setup_cell_source(tmp_path / "nope.yml")
    assert str(err.value) == (f"`config_path` {str(tmp_path / 'nope.yml')!r} cannot be read (No such file or directory); "
                              "expected the book's _config.yml")


def test_sync_setup_rewrites_a_stale_block_and_keeps_the_lines_after_it(tmp_path):
    old = SETUP.replace(URL, "https://github.com/old/place").replace("@main", "@dev")
    path = tmp_path / "ch99.ipynb"
    nbformat.write(notebook(("md", "# Title"), ("code", old + "\nimport jax"), ("code", "x = 1")), path)
    before = path.read_bytes()
    assert sync_setup_cells([path], check=True, config_path=config(tmp_path)) == [Drift(path, "setup cell")]
    assert path.read_bytes() == before
    assert sync_setup_cells([path], config_path=config(tmp_path)) == [Drift(path, "setup cell")]
    assert nbformat.read(path, 4).cells[1].source == SETUP + "\nimport jax"
    assert sync_setup_cells([path], check=True, config_path=config(tmp_path)) == []


def test_sync_setup_inserts_a_setup_cell_where_the_first_code_cell_has_none(tmp_path):
    path = tmp_path / "ch99.ipynb"
    nbformat.write(notebook(("md", "# Title"), ("code", "import scalelib as sl")), path)
    assert sync_setup_cells([path], check=True, config_path=config(tmp_path)) == [Drift(path, "no setup cell")]
    sync_setup_cells([path], config_path=config(tmp_path))
    cells = nbformat.read(path, 4).cells
    assert [(c.id, c.source) for c in cells] == [
        ("cell-0", "# Title"), ("setup", SETUP), ("cell-1", "import scalelib as sl")]
    assert sync_setup_cells([path], check=True, config_path=config(tmp_path)) == []


# ---------------------------------------------------------------------------
# the command line


def test_cli_generate_check_exits_1_on_drift_and_0_once_generated(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solutions").mkdir()
    nbformat.write(notebook(("code", "x = 1")), tmp_path / "solutions/ch99.ipynb")
    assert main(["generate", "--check"]) == 1
    assert capsys.readouterr().out == "exercises/ch99.ipynb: missing (its solution notebook has no exercise notebook yet)\n"
    assert main(["generate"]) == 0
    assert main(["generate", "--check"]) == 0
    assert capsys.readouterr().out.endswith("exercises/ is up to date with solutions/\n")


def test_cli_reports_an_authoring_error_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solutions").mkdir()
    nbformat.write(notebook(("code", "### BEGIN SOLUTION")), tmp_path / "solutions/ch99.ipynb")
    assert main(["generate"]) == 1
    assert capsys.readouterr().err == ("scalelib generate: error: solutions/ch99.ipynb, cell 1: `### BEGIN SOLUTION` "
                                       "on line 1 is never closed by a `### END SOLUTION` line\n")


def test_cli_sync_setup_check_exits_1_on_drift(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "book").mkdir()
    config(tmp_path).rename(tmp_path / "book/_config.yml")
    nbformat.write(notebook(("code", "x = 1")), tmp_path / "book/ch99.ipynb")
    assert main(["sync-setup", "--check"]) == 1
    assert capsys.readouterr().out == "book/ch99.ipynb: its first code cell has no `# Setup:` block\n"
    assert main(["sync-setup"]) == 0
    assert main(["sync-setup", "--check"]) == 0


def test_sync_setup_inserts_a_cell_without_id_in_an_nbformat_4_4_notebook(tmp_path):
    path = tmp_path / "old.ipynb"
    nb = notebook(("code", "x = 1"), minor=4)
    del nb.cells[0]["id"]
    nbformat.write(nb, path)
    sync_setup_cells([path], config_path=config(tmp_path))
    cells = nbformat.read(path, 4).cells
    assert [("id" in c, c.source) for c in cells] == [(False, SETUP), (False, "x = 1")]


def test_cli_generate_says_what_it_wrote_and_removed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "exercises").mkdir()
    nbformat.write(notebook(("code", "x = 1")), tmp_path / "solutions/ch99.ipynb")
    (tmp_path / "exercises/old.ipynb").write_text("{}")
    assert main(["generate"]) == 0
    assert capsys.readouterr().out == "created exercises/ch99.ipynb\nremoved exercises/old.ipynb (no solution notebook)\n"


def test_chapter_notebooks_get_a_colab_link_built_from_the_config(tmp_path):
    (tmp_path / "book").mkdir()
    cfg = config(tmp_path).rename(tmp_path / "book/_config.yml")
    path = tmp_path / "book/ch99_topic.ipynb"
    nbformat.write(notebook(("md", "# Chapter 99\n\nA promise."), ("code", SETUP)), path)
    link = "[Open in Colab](https://colab.research.google.com/github/example/course/blob/main/book/ch99_topic.ipynb)"
    assert colab_link(path, cfg) == link
    assert sync_setup_cells([path], config_path=cfg) == [Drift(path, "setup cell")]
    assert nbformat.read(path, 4).cells[0].source == "# Chapter 99\n\nA promise.\n\n" + link
    assert sync_setup_cells([path], check=True, config_path=cfg) == []
    moved = cfg.read_text().replace("example/course", "someone/fork")
    cfg.write_text(moved)
    sync_setup_cells([path], config_path=cfg)
    assert nbformat.read(path, 4).cells[0].source.endswith("github/someone/fork/blob/main/book/ch99_topic.ipynb)")
    assert nbformat.read(path, 4).cells[0].source.count("[Open in Colab]") == 1


def test_solution_notebooks_get_no_colab_link(tmp_path):
    path = tmp_path / "ch99.ipynb"
    nb = notebook(("md", "# Title"), ("code", SETUP))
    nb.cells[1].metadata["tags"] = ["hide-input"]  # as sync-setup leaves it: folded on the site
    nbformat.write(nb, path)
    assert sync_setup_cells([path], check=True, config_path=config(tmp_path)) == []


# ---------------------------------------------------------------------------
# the site without solutions (make site SOLUTIONS=no)


def test_the_toc_without_solutions_keeps_every_other_page_in_order():
    import yaml

    from scalelib.course.authoring import toc_without_solutions

    root = Path(__file__).resolve().parents[1]

    def files(toc):
        return [c["file"] for part in toc["parts"] for c in part["chapters"]]

    full = yaml.safe_load((root / "book" / "_toc.yml").read_text())
    kept = yaml.safe_load(toc_without_solutions((root / "book" / "_toc.yml").read_text()))
    assert files(kept) == [f for f in files(full) if not f.startswith("solutions/")]
    assert any(f.startswith("solutions/") for f in files(full)) and kept["root"] == full["root"]


def test_links_to_solution_pages_become_plain_text_in_the_site_without_solutions():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
    try:
        from course_site import unlink_solutions
    finally:
        sys.path.pop(0)
    assert unlink_solutions("[Exercises](../exercises/ch01_x.ipynb) · [Solutions](../solutions/ch01_x.ipynb) |") == \
        "[Exercises](../exercises/ch01_x.ipynb) |"
    assert unlink_solutions("The [solutions](../solutions/ch01_x.ipynb#a) work it out.") == \
        "The solutions work it out."



def test_the_setup_cell_is_folded_on_the_site():
    import nbformat

    from scalelib.course.authoring import HIDE_INPUT, course_notebooks

    root = Path(__file__).resolve().parents[1]
    for path in course_notebooks(root) + sorted((root / "exercises").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert "# Setup:" in first.source and HIDE_INPUT in first.metadata.get("tags", []), path.name
