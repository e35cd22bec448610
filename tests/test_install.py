"""A learner's install, as the README gives it: a fresh virtual environment, the package from
the checkout with its `notebooks` extra, and an exercise notebook run with nothing else."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]


def _readme_install_command() -> str:
    """The pip line of the README's local instructions."""
    text = (ROOT / "README.md").read_text()
    local = text[text.index("**Locally**"):text.index("**On Colab**")]
    (line,) = [ln.strip() for ln in local.splitlines() if "pip install" in ln]
    return line


def _extras() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(requirements) -> set:
    return {re.split(r"[<>=\[ ]", d)[0] for d in requirements}


def test_the_readme_installs_the_local_extra_the_notebooks_extra_and_jupyterlab():
    assert _readme_install_command() == '.venv-learn/bin/pip install ".[local]"'
    extras = _extras()
    assert _names(extras["notebooks"]) >= {"jax", "matplotlib", "ipykernel"}
    assert "jupyterlab" not in _names(extras["notebooks"])  # Colab is the front end there
    assert set(extras["local"]) == {"scalelib[notebooks]", "jupyterlab>=4"}  # the same JAX bounds, and JupyterLab


def test_the_colab_setup_cell_installs_the_notebooks_extra_with_jax_bounded_above():
    from scalelib.course.authoring import setup_cell_source, tested_jax

    assert 'scalelib[notebooks] @ git+' in setup_cell_source(ROOT / "book" / "_config.yml")
    (jax,) = [d for d in _extras()["notebooks"] if d.startswith("jax")]
    assert jax == tested_jax(ROOT) and re.fullmatch(r"jax>=\d+\.\d+(\.\d+)?,<\d+\.\d+", jax), jax


def _run_setup_cell(tmp_path, url: str, ref: str, monkeypatch) -> str:
    """The setup cell for `url`@`ref`, run where scalelib cannot be imported, with the real pip:
    the RuntimeError's message."""
    import pytest

    from scalelib.course.authoring import setup_cell_source

    config = tmp_path / "_config.yml"
    config.write_text(f"repository:\n  url: {url}\n  branch: {ref}\n")
    monkeypatch.setitem(sys.modules, "scalelib", None)  # `import scalelib` raises ImportError
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    with pytest.raises(RuntimeError) as err:
        exec(compile(setup_cell_source(config), "setup-cell", "exec"), {})
    return str(err.value)


def test_the_setup_cell_says_a_ref_is_not_published(tmp_path, monkeypatch):
    """pip's real failure on a repository without the tag (a release not pushed yet) is read as that."""
    repo = tmp_path / "course"
    repo.mkdir()
    (repo / "README").write_text("x")
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    message = _run_setup_cell(tmp_path, f"file://{repo}", "v9.9.9", monkeypatch)
    assert f"git+file://{repo}@v9.9.9 is not published" in message, message
    assert "internet" not in message
    missing = _run_setup_cell(tmp_path, f"file://{tmp_path}/nowhere", "main", monkeypatch)
    assert "is not published" in missing and "internet" not in missing, missing


def test_the_setup_cell_says_the_network_is_unreachable(tmp_path, monkeypatch):
    """pip's real failure on a host no resolver knows (.invalid, RFC 2606) is read as no network."""
    message = _run_setup_cell(tmp_path, "https://github.invalid/owner/course", "main", monkeypatch)
    assert "cannot reach GitHub or PyPI: check its internet connection" in message, message
    assert "not published" not in message


def test_a_fresh_environment_runs_an_exercise_notebook(tmp_path):
    venv = tmp_path / ".venv-learn"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    command = _readme_install_command().replace(".venv-learn/bin/pip", str(venv / "bin" / "pip"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run(command + " --quiet", shell=True, cwd=ROOT, check=True, env=env)
    # The notebook's code, run by IPython from outside the checkout: scalelib comes from the new environment.
    nb = json.loads((ROOT / "exercises" / "ch01_rooflines.ipynb").read_text())
    code = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    script = tmp_path / "ch01.ipy"
    script.write_text("import scalelib\nprint('FROM', scalelib.__file__)\n" + code)
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "IPython", "--quick", str(script)],
                         cwd=tmp_path, env={**env, "MPLBACKEND": "Agg"}, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"FROM {venv}" in out.stdout
    assert "not attempted" in out.stdout and "Traceback" not in out.stdout
    kernels = subprocess.run([str(venv / "bin" / "python"), "-m", "ipykernel", "--version"], capture_output=True, text=True)
    assert kernels.returncode == 0
