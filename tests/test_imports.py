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


def _course_imports() -> dict[str, set[str]]:
    """scalelib.course's modules -> the course modules each imports, at its top or inside a function."""
    import ast
    from pathlib import Path

    import scalelib.course

    root = Path(scalelib.course.__file__).parent
    modules = {p.stem: p for p in root.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:  # from .x import y, or from . import x
                    targets = [node.module] if node.module else [a.name for a in node.names]
                elif node.level == 0 and (node.module or "").startswith("scalelib.course."):
                    targets = [node.module.split(".")[2]]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[2] for a in node.names if a.name.startswith("scalelib.course.")]
            edges.update(t.split(".")[0] for t in targets if t and t.split(".")[0] in modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of `graph` meets, as the path that closes it."""
    cycles: list[list[str]] = []
    done: set[str] = set()

    def visit(node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt])
        done.add(node)

    for start in sorted(graph):
        if start not in done:
            visit(start, [start])
    return cycles


def test_the_walk_finds_a_circle_through_a_function_level_import():
    # before: jax_check imported grade's private _decode inside a function, and grade imported jax_check
    assert _cycles({"grade": {"jax_check", "check"}, "jax_check": {"check", "grade"}, "check": set()}) == [
        ["grade", "jax_check", "grade"]]
    assert _cycles({"grade": {"jax_check"}, "jax_check": {"verdict"}, "verdict": set()}) == []


def test_the_course_machinery_s_modules_import_each_other_in_layers_with_no_circle():
    graph = _course_imports()
    assert {"check", "grade", "jax_check", "sandbox", "record", "verdict"} <= set(graph)
    assert graph["verdict"] == set()  # the lowest layer: verdict types and answer decoding
    for module in ("check", "grade", "jax_check", "sandbox"):
        assert "verdict" in graph[module], module
    assert _cycles(graph) == []


def test_the_verdict_types_are_still_importable_from_the_checker():
    from scalelib.course import check, verdict

    assert check.Verdict is verdict.Verdict and check.CORRECT == verdict.CORRECT
    assert check.GRADING_ENV == verdict.GRADING_ENV and check.VERDICT_KEY == verdict.VERDICT_KEY
