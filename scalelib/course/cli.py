"""The ``scalelib`` command: grade notebooks, generate exercises, sync setup cells, write the API pages.

Exit status: 0 on success (also when answers are wrong: grading reports them);
1 when ``--check`` finds drift, when ``grade --strict`` finds anything not correct,
or when an authoring tool reports an error; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._errors import ScalelibError

DESCRIPTION = ("Tools of the scalelib course: grade notebooks, generate exercise notebooks, sync setup cells, "
               "write the API reference and formula index.")
EPILOG = """\
exit status: 0 on success (wrong answers included); 1 when --check finds drift,
when grade --strict finds anything not correct, or on an authoring error;
2 on a usage error.

examples:
  scalelib grade exercises/ch01_rooflines.ipynb --csv grades.csv
  scalelib generate --check
  scalelib sync-setup
  scalelib api-docs --check"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalelib", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    g = sub.add_parser("grade", help="run notebooks in fresh kernels and report each exercise's status",
                       description="Run each notebook in a fresh kernel (in its folder) and report the "
                       "status of every exercise it checks, plus the exercises of its chapter it never checks.")
    g.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", help="notebook files (.ipynb) to grade")
    g.add_argument("--json", metavar="FILE", help="also write the grades as JSON to FILE")
    g.add_argument("--csv", metavar="FILE", help="also write one CSV row per notebook and exercise to FILE")
    g.add_argument("--timeout", metavar="SECONDS", type=_positive_seconds, default=120.0,
                   help="seconds one cell may run before the notebook is stopped (default: 120)")
    g.add_argument("--kernel", metavar="NAME", default="python3", help="Jupyter kernel to run in (default: python3)")
    g.add_argument("--strict", action="store_true",
                   help="exit 1 unless every exercise is correct and every notebook ran without errors")

    gen = sub.add_parser("generate", help="write exercises/*.ipynb from solutions/*.ipynb",
                         description="Write one exercise notebook in exercises/ for each solution notebook in "
                         "solutions/ (solution regions replaced by stubs, outputs cleared), and remove exercise "
                         "notebooks that have no solution.")
    gen.add_argument("--check", action="store_true", help="write nothing; list what is out of date and exit 1 if any")
    gen.add_argument("--solutions", metavar="DIR", default="solutions", help="solution notebooks (default: solutions)")
    gen.add_argument("--exercises", metavar="DIR", default="exercises", help="exercise notebooks (default: exercises)")

    s = sub.add_parser("sync-setup", help="make every notebook's first code cell start with the setup cell",
                       description="Rewrite the setup block of the first code cell of every course notebook "
                       "(book/*.ipynb and solutions/*.ipynb, or the NOTEBOOKs given) from the repository "
                       "address in book/_config.yml.")
    s.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="notebooks to sync (default: book/*.ipynb and solutions/*.ipynb)")
    s.add_argument("--check", action="store_true", help="write nothing; list what is out of date and exit 1 if any")
    s.add_argument("--config", metavar="FILE", default="book/_config.yml",
                   help="book configuration naming the repository (default: book/_config.yml)")

    a = sub.add_parser("api-docs", help="write the API reference and the formula index from the docstrings",
                       description="Write book/api.md (every name of scalelib.__all__, rendered by Sphinx autodoc, "
                       "grouped by chapter) and book/formulas.md (one table per chapter of every formula a "
                       "docstring gives, with the function computing it) from scalelib's docstrings.")
    a.add_argument("--check", action="store_true", help="write nothing; list what is out of date and exit 1 if any")
    a.add_argument("--root", metavar="DIR", default=".",
                   help="the repository root, which holds book/ (default: the current folder)")
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _grade(args) -> int:
    from .check import CORRECT
    from .grade import grade, report, to_csv, to_json

    grades = grade(args.notebooks, timeout_per_cell=args.timeout, kernel_name=args.kernel)
    print(report(grades), end="")
    if args.json:
        Path(args.json).write_text(to_json(grades), encoding="utf-8")
    if args.csv:
        Path(args.csv).write_text(to_csv(grades), encoding="utf-8", newline="")
    if args.strict:
        perfect = all(not g.error and not g.cell_errors and all(e.status == CORRECT for e in g.exercises)
                      for g in grades)
        return 0 if perfect else 1
    return 0


_DONE = {"missing": "created {}", "stale": "updated {}", "extra": "removed {} (no solution notebook)",
         "setup cell": "updated the setup cell of {}", "no setup cell": "added a setup cell to {}"}


def _report_drift(drift, check: bool, fix: str) -> int:
    for item in drift:
        print(item if check else _DONE.get(item.problem, "updated {}").format(item.path))
    if check and drift:
        print(f"{len(drift)} notebook(s) out of date; run `{fix}` to update them", file=sys.stderr)
        return 1
    return 0


def _generate(args) -> int:
    from .authoring import generate

    drift = generate(args.solutions, args.exercises, check=args.check)
    if not drift:
        print(f"{args.exercises}/ is up to date with {args.solutions}/")
    return _report_drift(drift, args.check, "scalelib generate")


def _sync_setup(args) -> int:
    from .authoring import course_notebooks, sync_setup_cells

    paths = args.notebooks or course_notebooks(".")
    drift = sync_setup_cells(paths, check=args.check, config_path=args.config)
    if not drift:
        print(f"the setup cells of {len(paths)} notebook(s) are up to date")
    code = _report_drift(drift, args.check, "scalelib sync-setup")
    if not args.check and any(Path(d.path).parent.name == "solutions" for d in drift):
        print("solution notebooks changed: run `scalelib generate` to update exercises/")
    return code


def _api_docs(args) -> int:
    from .apidoc import write_pages

    drift = write_pages(args.root, check=args.check)
    if not drift:
        print("book/api.md and book/formulas.md are up to date with the docstrings")
    for item in drift:
        print(item if args.check else f"{'created' if item.problem == 'missing' else 'updated'} {item.path}")
    if args.check and drift:
        print(f"{len(drift)} page(s) out of date; run `make exercises` (or `scalelib api-docs`) to update them",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    """Run the ``scalelib`` command with `argv` (default: the process's arguments); return its exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help (0) or a usage error (2), already printed
        return int(exit.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        commands = {"grade": _grade, "generate": _generate, "sync-setup": _sync_setup, "api-docs": _api_docs}
        return commands[args.command](args)
    except ScalelibError as err:
        print(f"scalelib {args.command}: error: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        package = {"yaml": "pyyaml"}.get(err.name, "'scalelib[grade]'")
        print(f"scalelib {args.command}: error: {err.name} is not installed: pip install {package}", file=sys.stderr)
        return 1
