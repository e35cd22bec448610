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


#: The cost modules, bottom layer first: the estimate's data, the rooflines, the estimate, the search and the
#: validation tables on top.
COST_MODULES = ("_calibration", "_training", "_inference", "_serving", "_pipeline", "_estimate", "_plan_search",
                "_validation_training", "_validation_inference")


def _imports_of(path):
    """The scalelib modules a module imports anywhere in its text (at the top or inside a function)."""
    import ast

    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:  # from . import _x
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scalelib."):
            out.add(node.module.split(".")[1])
    return out


def test_the_cost_modules_import_one_another_without_a_circle_the_estimate_above_the_roofline():
    from pathlib import Path

    import scalelib

    root = Path(scalelib.__file__).parent
    graph = {m: {n for n in _imports_of(root / f"{m}.py") if n in COST_MODULES} for m in COST_MODULES}
    # no circle: a topological order exists (Kahn's algorithm over the whole graph, lazy imports included)
    left, order = {m: set(deps) for m, deps in graph.items()}, []
    while left:
        ready = sorted(m for m, deps in left.items() if not deps)
        assert ready, f"an import circle among {sorted(left)}: {left}"
        order += ready
        left = {m: deps - set(ready) for m, deps in left.items() if m not in ready}
    # the layers: the data below everything, the roofline never reaching up to the estimate or the search, the
    # estimate below the search
    assert graph["_calibration"] == set()
    assert not graph["_training"] & {"_estimate", "_plan_search"}
    assert not graph["_inference"] & {"_estimate", "_plan_search", "_training"}
    assert graph["_estimate"] >= {"_training", "_calibration"} and "_plan_search" not in graph["_estimate"]
    assert graph["_plan_search"] >= {"_estimate", "_training"}
    assert order.index("_training") < order.index("_estimate") < order.index("_plan_search")
