"""The ``scalelib`` command: grade notebooks, generate exercises, sync setup cells, write the generated pages.

Exit status: 0 on success (also when answers are wrong: grading reports them);
1 when ``--check`` finds drift, when ``grade --strict`` finds a notebook it could
not grade (failed, chapter unknown, of another chapter, not graded: retry), on a
bad path, or when an authoring tool reports an error; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._errors import ScalelibError

DESCRIPTION = ("Tools of the scalelib course: grade notebooks, generate exercise notebooks, sync setup cells, "
               "write the API reference, the formula index and the map of the book's questions.")
EPILOG = """\
exit status: 0 on success (wrong answers included); 1 when --check finds drift,
when grade --strict finds a notebook it could not grade, or on an error;
2 on a usage error.

examples:
  scalelib grade submissions/ --out gradebook --strict
  scalelib class-report gradebook/gradebook.json
  scalelib generate --check
  scalelib sync-setup
  scalelib api-docs --check
  scalelib book-map --check"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalelib", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    g = sub.add_parser(
        "grade", help="grade submissions in isolated kernels and write a gradebook",
        description="Run each notebook in a kernel of its own (a temporary folder, a minimal "
        "environment, limits on time, memory and output), re-check every answer in this process, and write "
        "a gradebook: gradebook.csv and gradebook.json (a row per learner, a column per exercise), one "
        "feedback file per learner in DIR/feedback/ and the class report DIR/class-report.html (per exercise "
        "the shares right, wrong and not attempted and the commonest slips). Stored outputs are never trusted; "
        "only what runs counts.",
        epilog="Each kernel runs in a bubblewrap sandbox of Linux namespaces (its own processes only, no network, "
        "no checkout, no answer key, limits on memory and processes); without bubblewrap grading refuses unless "
        "--unsafe is given. See the book's page for instructors.")
    g.add_argument("notebooks", nargs="+", metavar="NOTEBOOK_OR_FOLDER",
                   help="notebooks (.ipynb) or folders of them (searched recursively)")
    g.add_argument("--out", metavar="DIR", default="gradebook",
                   help="folder for gradebook.csv, gradebook.json and feedback/ (default: gradebook)")
    g.add_argument("--csv", metavar="FILE", help="also write the gradebook's CSV to FILE")
    g.add_argument("--json", metavar="FILE", help="also write the gradebook's JSON to FILE")
    g.add_argument("--timeout", metavar="SECONDS", type=_positive_seconds, default=120.0,
                   help="seconds one cell may run; a cell over it stops its notebook (default: 120)")
    g.add_argument("--notebook-timeout", metavar="SECONDS", type=_positive_seconds, default=600.0,
                   help="seconds all of a notebook's cells may run together (default: 600)")
    g.add_argument("--memory", metavar="SIZE", type=_memory_size, default="4G",
                   help="memory of each kernel, e.g. 2G or 512M; 0 for none (default: 4G): the limit of a cgroup "
                   "holding the kernel and every process it starts, together, where one can be made (the grader "
                   "runs as root), and always the address space of each of its processes (RLIMIT_AS)")
    g.add_argument("--home-size", metavar="SIZE", type=_home_size, default="512M",
                   help="size of each kernel's home folder, a tmpfs of its own in the sandbox: all the files it "
                   "writes together (default: 512M)")
    g.add_argument("--max-output", metavar="SIZE", type=_output_size, default="4M",
                   help="most output a notebook may print or display; the rest is dropped (default: 4M)")
    g.add_argument("--seed", metavar="N", type=int, default=None,
                   help="seed of the cases drawn for function exercises (default: a fresh one, reported)")
    g.add_argument("--draw-seed", metavar="N", type=int, default=None,
                   help="seed of the JAX exercises' second draws of inputs (default: a fresh one from the operating "
                   "system's randomness, recorded in gradebook.json as draw_seed); with --seed, grades a run again "
                   "on the same inputs")
    g.add_argument("--strict", action="store_true",
                   help="exit 1 if any notebook could not be graded (failed, chapter unknown, of another chapter, or "
                   "not graded: retry)")
    g.add_argument("--chapter", metavar="N", type=int, default=None,
                   help="the chapter assigned: notebooks of another chapter are reported, not run or credited")
    g.add_argument("--roster", metavar="FILE",
                   help="CSV with a learner column and a notebook column (a file name, a path ending the "
                   "notebook's path, or the learner's folder as 'ada/'), Canvas's ID column (matched to Canvas's "
                   "bulk-download file names), or both; optionally SIS User ID, SIS Login ID and Section. Each "
                   "notebook is matched to one row, never by name; one on no row is reported and left out of "
                   "canvas.csv")
    g.add_argument("--jobs", metavar="N", type=int, default=1,
                   help="notebooks graded at once, each in its own process and sandbox (default: 1)")
    g.add_argument("--canvas", metavar="ASSIGNMENT",
                   help="also write DIR/canvas.csv for Canvas's gradebook import, ASSIGNMENT being the column "
                   "name as Canvas exports it, e.g. 'Chapter 3 (12345)'; needs --roster, whose rows give the IDs")
    g.add_argument("--unsafe", action="store_true",
                   help="grade even where no sandbox can be made (each notebook then runs with your rights, or, "
                   "when you are root, as the unprivileged user SCALELIB_KERNEL_USER names; every report says "
                   "so)")

    ag = sub.add_parser("autograder", help="write a Gradescope autograder bundle for one chapter",
                        description="Write autograder.zip into DIR (its root: setup.sh, run_autograder and the "
                        "package, as Gradescope's specification asks; the same files beside it): upload the zip on "
                        "Gradescope's Configure Autograder page. setup.sh installs Python 3.11 or later and the "
                        "package; each submission's one notebook is graded as the chapter given, one container "
                        "per submission, flags visible to the instructor only.")
    ag.add_argument("--gradescope", metavar="DIR", required=True, help="folder for the bundle")
    ag.add_argument("--chapter", metavar="N", type=int, required=True, help="the chapter the assignment is")

    cr = sub.add_parser("class-report", help="write the class report of a gradebook.json",
                        description="Write the class report (self-contained HTML: per chapter a chart of the shares "
                        "of each exercise right, wrong and not attempted, the commonest named slips with the hint "
                        "learners saw; per learner the slips made more than once) from a gradebook.json alone.")
    cr.add_argument("gradebook", metavar="GRADEBOOK_JSON", help="the gradebook.json that scalelib grade wrote")
    cr.add_argument("--out", metavar="FILE", default=None,
                    help="where to write it (default: class-report.html beside the gradebook)")

    gen = sub.add_parser("generate", help="write exercises/*.ipynb from solutions/*.ipynb",
                         description="Write one exercise notebook in exercises/ for each solution notebook in "
                         "solutions/ (solution regions replaced by stubs, outputs cleared), and remove exercise "
                         "notebooks that have no solution.")
    gen.add_argument("--check", action="store_true", help="write nothing; list what is out of date and exit 1 if any")
    gen.add_argument("--solutions", metavar="DIR", default="solutions", help="solution notebooks (default: solutions)")
    gen.add_argument("--exercises", metavar="DIR", default="exercises", help="exercise notebooks (default: exercises)")

    tr = sub.add_parser("translate", help="keep the Russian edition in step: catalogs and generated notebooks",
                        description="update: rewrite the gettext catalogs under locales/ru/ from the English "
                        "notebooks and pages (translations kept, changed entries fuzzy, new ones untranslated). "
                        "generate: write the Russian notebooks (book/ru, solutions/ru, exercises/ru), pages and "
                        "table of contents from the English and the catalogs. stats: entries, words and what is "
                        "left to translate, per catalog.")
    tr.add_argument("action", choices=("update", "generate", "stats"), help="what to do")
    tr.add_argument("--check", action="store_true", help="write nothing; list what is out of date and exit 1 if any")

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

    b = sub.add_parser("book-map", help="write the page mapping each of the book's questions to the course",
                       description="Write book/book-map.md: every question of the book, chapter by chapter, with "
                       "the exercises (from their registrations' `book=`) and the worked problems (from the chapter "
                       "notebooks' cell metadata) that answer it, and the exercises that answer none.")
    b.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is out of date")
    b.add_argument("--root", metavar="DIR", default=".",
                   help="the repository root, which holds book/ (default: the current folder)")

    p = sub.add_parser("pdf", help="build the PDF edition of the course website (make pdf)",
                       description="Build the site as one page (Jupyter Book's singlehtml builder, reusing the "
                       "site's notebook cache), print it with headless Chromium (a title page, contents, page "
                       "numbers) and add bookmarks: BUILD/pdf/how-to-scale-your-model.pdf, copied into BUILD/html "
                       "when the site is built there. Run from the repository root.")
    p.add_argument("--toc", metavar="FILE", default="book/_toc.yml", help="table of contents (default: book/_toc.yml)")
    p.add_argument("--config", metavar="FILE", default="book/_config.yml",
                   help="book configuration (default: book/_config.yml)")
    p.add_argument("--build-dir", metavar="BUILD", default="_build",
                   help="the site's build folder, holding html/ and .jupyter_cache/ (default: _build)")
    p.add_argument("--paper", choices=("A4", "Letter"), default="A4", help="paper size (default: A4)")
    p.add_argument("--no-build", action="store_true", help="print the single page built last time again")
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _memory_size(text: str):
    from .grade import parse_size

    if text.strip() in ("0", "none"):
        return None
    try:
        size = parse_size(text)
    except ScalelibError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if size < 64 * 2**20:
        raise argparse.ArgumentTypeError(f"expected at least 64M (or 0 for no limit), got {text!r}")
    return size


def _home_size(text: str) -> int:
    from .grade import parse_size

    try:
        size = parse_size(text)
    except ScalelibError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if size < 2**20:
        raise argparse.ArgumentTypeError(f"expected at least 1M, got {text!r}")
    return size


def _output_size(text: str) -> int:
    from .grade import parse_size

    try:
        size = parse_size(text)
    except ScalelibError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if size < 1024:
        raise argparse.ArgumentTypeError(f"expected at least 1k, got {text!r}")
    return size


def _grade(args) -> int:
    from .._errors import InvalidValueError
    from .classreport import write_class_report
    from .grade import GRADED, Limits, collect, grade, load_roster, report_block

    limits = Limits(cell_timeout_s=args.timeout, notebook_timeout_s=args.notebook_timeout,
                    memory_bytes=args.memory, max_output_bytes=args.max_output, unsafe=args.unsafe,
                    home_bytes=args.home_size)
    collect(args.notebooks)  # a missing path is reported before anything runs
    if args.canvas and not args.roster:
        raise InvalidValueError("--canvas needs --roster: Canvas matches rows by ID, which the roster gives")
    roster = load_roster(args.roster) if args.roster else None
    book = grade(args.notebooks, limits, seed=args.seed, chapter=args.chapter, roster=roster, jobs=args.jobs,
                 draw_seed=args.draw_seed, on_graded=lambda g: print(report_block(g) + "\n", flush=True))
    problems = book.roster_problems(canvas=bool(args.canvas))
    if problems:
        print(problems, file=sys.stderr)
    print(book.summary())
    written = book.write(args.out, canvas_assignment=args.canvas)
    report = write_class_report(Path(args.out) / "gradebook.json")
    print(f"gradebook: {written[0]}, {written[1]}; feedback: {sum(p.parent.name == 'feedback' for p in written)} "
          f"file(s) in {Path(args.out) / 'feedback'}; class report: {report}"
          + (f"; Canvas: {Path(args.out) / 'canvas.csv'}" if args.canvas else ""))
    if args.json:
        Path(args.json).write_text(book.to_json(), encoding="utf-8")
    if args.csv:
        Path(args.csv).write_text(book.to_csv(), encoding="utf-8", newline="")
    if args.strict:
        return 0 if all(g.status == GRADED for g in book.grades) else 1
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


def _translate(args) -> int:
    from . import translate

    if args.action == "stats":
        rows = translate.catalog_stats(".")
        print(f"{'catalog':44} {'entries':>7} {'words':>7} {'done':>6} {'fuzzy':>6} {'todo':>6}")
        for r in rows:
            print(f"{r['catalog']:44} {r['entries']:7d} {r['words']:7d} {r['translated']:6d} {r['fuzzy']:6d} "
                  f"{r['untranslated']:6d}")
        print(f"{'all':44} {sum(r['entries'] for r in rows):7d} {sum(r['words'] for r in rows):7d} "
              f"{sum(r['translated'] for r in rows):6d} {sum(r['fuzzy'] for r in rows):6d} "
              f"{sum(r['untranslated'] for r in rows):6d}")
        return 0
    if args.action == "update":
        drift = translate.update_catalogs(".", check=args.check)
        if not drift:
            print(f"the catalogs under {translate.LOCALES}/ are up to date with the English")
        return _report_drift(drift, args.check, "scalelib translate update")
    drift = translate.generate(".", check=args.check)
    if not drift:
        print("the Russian edition is up to date with the English and the catalogs")
    return _report_drift(drift, args.check, "scalelib translate generate")


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


def _book_map(args) -> int:
    from .bookmap import unknown_claims, write_page

    for chapter, claims in unknown_claims(args.root).items():
        for item, where in claims.items():
            print(f"warning: chapter {chapter}: {', '.join(where)} claims {item!r}, which the book's chapter "
                  f"lacks (see scalelib/course/book_items.py)", file=sys.stderr)
    drift = write_page(args.root, check=args.check)
    if not drift:
        print("book/book-map.md is up to date with the exercises and the notebooks")
    for item in drift:
        print(item if args.check else f"{'created' if item.problem == 'missing' else 'updated'} {item.path}")
    if args.check and drift:
        print("the book map is out of date; run `make exercises` (or `scalelib book-map`) to update it",
              file=sys.stderr)
        return 1
    return 0


def _autograder(args) -> int:
    from .gradescope import write_bundle

    bundle = write_bundle(args.gradescope, args.chapter)
    print(f"Gradescope autograder for chapter {args.chapter}: {bundle} (upload it on Configure Autograder)")
    return 0


def _class_report(args) -> int:
    from .classreport import write_class_report

    print(f"class report: {write_class_report(args.gradebook, args.out)}")
    return 0


def _pdf(args) -> int:
    from .pdf import build_pdf

    report = build_pdf(toc=args.toc, config=args.config, build_dir=args.build_dir, paper=args.paper,
                       build=not args.no_build)
    print(report.summary())
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
        commands = {"grade": _grade, "generate": _generate, "sync-setup": _sync_setup, "api-docs": _api_docs,
                    "book-map": _book_map, "translate": _translate, "pdf": _pdf, "autograder": _autograder, "class-report": _class_report}
        return commands[args.command](args)
    except ScalelibError as err:
        print(f"scalelib {args.command}: error: {err}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as err:
        package = {"yaml": "pyyaml", "myst_parser": "myst-parser"}.get(err.name, "'scalelib[grade]'")
        print(f"scalelib {args.command}: error: {err.name} is not installed: pip install {package}", file=sys.stderr)
        return 1
