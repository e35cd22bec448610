"""How long ``scalelib grade`` takes on a batch of notebooks, one at a time and N at a time.

``python -m scalelib.course.gradebench [--notebooks 30] [--jobs 2]`` (or ``make bench-grade``) writes
that many small chapter 1 submissions (each answers three exercises, one of them a function re-run
on drawn cases) into a temporary folder, grades them with ``--jobs 1`` and with ``--jobs N``, checks
that both runs give every learner the same points, and prints the two wall times and the speed-up.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def _notebook(i: int) -> dict:
    cells = ["import scalelib as sl",
             "sl.check('1.1', 0.5 if %d %% 3 == 0 else 1.0)" % i,
             "def intensity(B, D, F, bytes_per_value=2):\n"
             "    return 2 * B * D * F / (bytes_per_value * (B * D + D * F + B * F))\n"
             "sl.check('1.2', intensity)",
             "sl.check('1.6', 'memory')"]
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"scalelib": {"chapter": 1}},
            "cells": [{"cell_type": "code", "id": f"c{k}", "metadata": {}, "outputs": [], "execution_count": None,
                       "source": src} for k, src in enumerate(cells)]}


def run(notebooks: int = 30, jobs: int = 2) -> dict:
    """Grade `notebooks` submissions with 1 job and with `jobs`; the wall times (s) and whether the grades agree."""
    from .grade import Limits, grade

    with tempfile.TemporaryDirectory(prefix="scalelib-gradebench-") as folder:
        for i in range(notebooks):
            Path(folder, f"learner{i:03d}.ipynb").write_text(json.dumps(_notebook(i)))
        times, points = {}, {}
        for n in (1, jobs):
            start = time.perf_counter()
            book = grade([folder], Limits(cell_timeout_s=120), seed=1, jobs=n)
            times[n] = time.perf_counter() - start
            points[n] = [(g.learner, g.points) for g in book.grades]
    return {"notebooks": notebooks, "jobs": jobs, "one_s": times[1], "many_s": times[jobs],
            "speedup": times[1] / times[jobs], "same_grades": points[1] == points[jobs]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalelib.course.gradebench")
    parser.add_argument("--notebooks", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    r = run(args.notebooks, args.jobs)
    print(f"{r['notebooks']} notebooks: {r['one_s']:.1f} s with --jobs 1, {r['many_s']:.1f} s with --jobs {r['jobs']} "
          f"(speed-up {r['speedup']:.2f}x); the same grades: {r['same_grades']}")
    return 0 if r["same_grades"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
