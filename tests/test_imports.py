"""`import scalelib` stays light: numpy only."""

import subprocess
import sys


def test_import_scalelib_does_not_import_jax_matplotlib_or_ipython():
    code = (
        "import sys, scalelib\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'jax', 'jaxlib', 'matplotlib', 'IPython', 'nbclient'})\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_all_exported():
    import scalelib

    missing = [name for name in scalelib.__all__ if not hasattr(scalelib, name)]
    assert missing == []


def test_the_library_of_formulas_never_imports_the_course_machinery():
    import ast
    from pathlib import Path

    import scalelib

    root = Path(scalelib.__file__).parent
    offenders = []
    for path in sorted(p for p in root.glob("_*.py") if not p.name.startswith("__")):  # __init__ re-exports `check`
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = ("." * node.level) + (node.module or "")
                if target.startswith(".course") or target.startswith("scalelib.course"):
                    offenders.append(f"{path.name}: from {target} import ...")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("scalelib.course")]
    assert offenders == []
    assert len(list(root.glob("_*.py"))) >= 12


def test_importing_scalelib_loads_no_answer_key():
    code = "import sys, scalelib\nprint(sorted(m for m in sys.modules if 'answer_key' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
