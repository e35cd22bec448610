"""Whether the built site (or its PDF) is up to date: a digest of everything the build reads.

Course machinery (book/site.mk), not part of the library. ``make site`` builds the website and then
its PDF; each step costs a minute or more even when nothing changed (Sphinx reads its environment and
checks every notebook against the cache, Chromium prints 600 pages). Each step is skipped when the
digest of its inputs equals the one written beside its output after its last successful run::

    python scalelib/course/sitestamp.py check _build/site.inputs --toc book/_toc.yml   # exit 0: up to date
    python scalelib/course/sitestamp.py begin _build/site.inputs --toc book/_toc.yml   # before the build
    python scalelib/course/sitestamp.py done _build/site.inputs                        # after it succeeded

The inputs are the contents (not the times) of: the toc and book/_config.yml; every file under
``book/`` (the pages, the site's extension, its stylesheets and scripts, KaTeX's lock file; not
``node_modules``), ``solutions/`` and ``exercises/`` (the notebooks the toc lists); the library and
the course machinery under ``scalelib/`` (notebooks import the one, the API pages and the PDF come
from the other); ``pyproject.toml`` and ``requirements.txt`` (the pinned tools); and the build's
switches (``SCALELIB_SITE_SOLUTIONS``). Files are read by content, so a fresh clone, whose files all
have new times, and a ``git checkout`` back and forth rebuild nothing that is already built.

Runs as a plain script (stdlib only, without importing scalelib, which would cost numpy's import
time on every ``make test``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

#: Folders whose files are inputs of the site, from the repository root.
INPUT_DIRS = ("book", "solutions", "exercises", "scalelib")
#: Files at the top of the repository that are inputs too.
INPUT_FILES = ("pyproject.toml", "requirements.txt")
#: Folders and files never read (installed packages, caches, editors' checkpoints).
SKIP_DIRS = {"node_modules", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
#: Environment variables that change what is built.
SWITCHES = ("SCALELIB_SITE_SOLUTIONS",)
#: Inputs of the PDF only (``--pdf``): a change to how it is printed does not rebuild the website.
PDF_ONLY = ("scalelib/course/pdf.py",)


def input_files(root: Path) -> list[Path]:
    """Every input file under `root`, sorted (paths relative to `root`)."""
    found = []
    for name in INPUT_DIRS:
        top = root / name
        if not top.is_dir():
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for file in files:
                if file.startswith(".") or file.endswith(SKIP_SUFFIXES):
                    continue
                found.append(Path(folder, file).relative_to(root))
    found += [Path(name) for name in INPUT_FILES if (root / name).is_file()]
    return sorted(found, key=lambda p: p.as_posix())


def digest(root=".", toc="book/_toc.yml", environ=None, *, pdf: bool = False) -> str:
    """The sha256 of the site's inputs under `root` (see the module's docstring), as hex; with `pdf`,
    of the PDF's (the same, and :data:`PDF_ONLY`)."""
    root = Path(root)
    environ = os.environ if environ is None else environ
    h = hashlib.sha256()
    files = [p for p in input_files(root) if pdf or p.as_posix() not in PDF_ONLY]
    for path in [*files, Path(toc)]:
        full = path if path.is_absolute() else root / path
        h.update(path.as_posix().encode() + b"\0")
        h.update(full.read_bytes() if full.is_file() else b"(missing)")
        h.update(b"\0")
    for name in SWITCHES:
        h.update(f"{name}={environ.get(name, '')}\0".encode())
    return h.hexdigest()


def up_to_date(stamp, root=".", toc="book/_toc.yml", output=None, *, pdf: bool = False) -> bool:
    """Whether `stamp` holds the digest of the inputs as they are now (and `output`, when given, exists)."""
    stamp = Path(stamp)
    if output is not None and not Path(output).exists():
        return False
    try:
        return stamp.read_text(encoding="utf-8").strip() == digest(root, toc, pdf=pdf)
    except OSError:
        return False


def pending(stamp) -> Path:
    """Where `begin` keeps the digest of the inputs the build under way reads."""
    stamp = Path(stamp)
    return stamp.with_name(stamp.name + ".pending")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("check", "begin", "done"),
                        help="check: exit 0 when the stamp holds the inputs' digest, 1 when not; "
                             "begin (before a build): remove the stamp, note the digest of the inputs as they are "
                             "now; done (after it succeeded): make the noted digest the stamp, so that an input "
                             "changed while the build ran is seen as changed next time")
    parser.add_argument("stamp", help="the stamp file (beside the build it stands for)")
    parser.add_argument("--toc", default="book/_toc.yml", help="the table of contents the build reads")
    parser.add_argument("--output", help="check: a file the build makes, which must exist too")
    parser.add_argument("--root", default=".", help="the repository root (default: here)")
    parser.add_argument("--pdf", action="store_true", help="the PDF's inputs (the site's, and how it is printed)")
    args = parser.parse_args(argv)
    stamp = Path(args.stamp)
    if args.action == "check":
        fresh = up_to_date(stamp, args.root, args.toc, args.output, pdf=args.pdf)
        if fresh:
            print(f"{stamp}: no input changed since the last build; not rebuilt (FORCE=yes rebuilds it)")
        return 0 if fresh else 1
    stamp.parent.mkdir(parents=True, exist_ok=True)
    if args.action == "begin":
        stamp.unlink(missing_ok=True)
        pending(stamp).write_text(digest(args.root, args.toc, pdf=args.pdf) + "\n", encoding="utf-8")
        return 0
    if not pending(stamp).is_file():
        print(f"{pending(stamp)} is missing: run `begin` before the build", file=sys.stderr)
        return 2
    pending(stamp).replace(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
