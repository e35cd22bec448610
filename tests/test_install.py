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


def test_the_readme_installs_the_notebooks_extra_and_the_extra_brings_a_kernel():
    import tomllib

    assert _readme_install_command() == '.venv-learn/bin/pip install ".[notebooks]"'
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["notebooks"]
    assert {re.split(r"[<>=\[]", d)[0] for d in extra} >= {"jax", "matplotlib", "ipykernel"}


def test_the_colab_setup_cell_installs_the_same_extra():
    from scalelib.course.authoring import setup_cell_source

    assert 'scalelib[notebooks] @ git+' in setup_cell_source(ROOT / "book" / "_config.yml")


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
