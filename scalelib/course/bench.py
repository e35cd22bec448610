"""``make bench``: scalelib's import time, its heaviest calls, each course notebook's run time, and
the whole test suite's.

Times are wall-clock on this machine: the import is the best of several fresh
interpreters (minus an empty interpreter's start), each notebook one run in a
fresh kernel, as the tests and the book build run it, and the suite one run of
``pytest`` as ``make test`` runs it (``--suite``; ``make bench SUITE=no`` leaves it out).
When the site is built (``_build/html``), it first prints each page's weight: the bytes of its HTML
and of every script, stylesheet and image the page loads from the site (read from the HTML, as
served, uncompressed; web fonts, which a browser fetches only for the glyphs a page shows, apart).
"""

from __future__ import annotations

import html.parser
import re
import subprocess
import sys
import time
from pathlib import Path

from .._units import fmt


def import_time_s(module: str = "scalelib", runs: int = 7) -> float:
    """Best wall time of ``import module`` in a fresh interpreter, less an empty one's start."""

    def best(code: str) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    return max(best(f"import {module}") - best("pass"), 0.0)


#: The library's heaviest calls, timed as a learner makes them: (label, statement).
CALLS = (
    ("best_tile(2**20, 8192, 8192, 'h100')", "sl.best_tile(2**20, 8192, 8192, 'h100')"),
    ("search_tiles(4096, 4096, 4096, 'b200')", "sl.search_tiles(4096, 4096, 4096, 'b200')"),
    ("matmul_roofline over 10^5 batch sizes", "sl.matmul_roofline(B, 8192, 8192, 'h100')"),
    ("critical_intensity('tpu-v5e')", "sl.critical_intensity('tpu-v5e')"),
    ("explain(critical_intensity, 'tpu-v5e')", "str(sl.explain(sl.critical_intensity, 'tpu-v5e'))"),
)


def call_time_s(statement: str, repeats: int = 5) -> float:
    """Best wall time of one run of `statement` (with ``sl`` and a batch sweep ``B`` defined)."""
    import timeit

    import numpy as np

    import scalelib as sl

    namespace = {"sl": sl, "B": np.arange(1, 100_001)}
    timer = timeit.Timer(statement, globals=namespace)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeats, number=number)) / number


def plan_search_rates(repeats: int = 3) -> dict:
    """Plans per second of the vectorised plan search (ranked by the estimate, its default, and by the roofline)
    and of its per-plan reference loop, on one case, and
    the wall time of searching LLaMA-3.1-405B on 16,384 H100s (best of `repeats`)."""
    import scalelib as sl

    case = ("llama-3-70b", 4 * 2**20, sl.gpu_cluster(512, "h100"))
    rates = {}
    for method in ("numpy", "loop"):
        best = min(sl.search_plans(*case, seq_len=4096, method=method).seconds for _ in range(repeats))
        rates[method] = sl.search_plans(*case, seq_len=4096, method=method).evaluated / best
    # the same search ranked by the roofline alone (the bound), beside the default ranking by the estimate
    best = min(sl.search_plans(*case, seq_len=4096, rank="roofline").seconds for _ in range(repeats))
    rates["roofline"] = sl.search_plans(*case, seq_len=4096, rank="roofline").evaluated / best
    big = []
    for _ in range(repeats):
        start = time.perf_counter()
        found = sl.search_plans("llama-3.1-405b", 16 * 2**20, sl.gpu_cluster(2048, "h100"), seq_len=8192)
        big.append(time.perf_counter() - start)
    return {"numpy_plans_per_s": rates["numpy"], "loop_plans_per_s": rates["loop"],
            "roofline_plans_per_s": rates["roofline"],
            "ratio": rates["numpy"] / rates["loop"], "search_405b_s": min(big), "plans_405b": found.evaluated}


def notebook_time_s(path: Path, timeout: int = 600) -> float:
    """Wall time of executing the notebook at `path` in a fresh kernel (nbclient)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # The kernel's own log (e.g. ipykernel's "running over TCP without encryption" warning)
    # goes nowhere: the terminal shows only the timings; a failing cell still raises here.
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute(
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def suite_time_s(root: Path, pytest_args: tuple[str, ...] = (), slowest: int = 10) -> tuple[float, str, list[str]]:
    """Wall time of one run of the whole test suite (``python -m pytest -q`` in `root`, with `pytest_args`,
    as ``make test`` passes them), its summary line, and pytest's lines for its `slowest` tests."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--durations={slowest}", "--durations-min=0", *pytest_args], cwd=root,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else f"no output (exit {run.returncode})"
    if run.returncode != 0:
        summary += f" (exit {run.returncode})"
    return seconds, summary, slowest_tests(lines, slowest)


def slowest_tests(lines: list[str], count: int) -> list[str]:
    """The first `count` lines of pytest's "slowest durations" section among its output `lines`
    (each like ``12.34s call     tests/test_x.py::test_y``, slowest first, as pytest sorts them)."""
    heads = [i for i, line in enumerate(lines) if "slowest" in line and "durations" in line]
    if not heads:
        return []
    return [line.strip() for line in lines[heads[0] + 1:]
            if re.match(r"\s*\d+(\.\d+)?s (setup|call|teardown) ", line)][:count]


class _Assets(html.parser.HTMLParser):
    """The local files an HTML page loads: scripts, stylesheets, images."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.urls.append(a["src"])
        elif tag == "link" and "stylesheet" in (a.get("rel") or "").split() and a.get("href"):
            self.urls.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.urls.append(a["src"])


def page_weight_bytes(page: Path, site: Path) -> tuple[int, int, list[str]]:
    """(bytes of the page's HTML, bytes of the assets it loads from `site`, assets it names but that
    are not there). Each asset is counted once; remote and data: URLs are not counted."""
    parser = _Assets()
    text = page.read_text(encoding="utf8")
    parser.feed(text)
    seen: set[Path] = set()
    total, missing = 0, []
    for url in parser.urls:
        if re.match(r"^[a-z][a-z0-9+.-]*:", url, re.IGNORECASE):  # http(s):, data:, ...
            continue
        path = (page.parent / url.split("?")[0].split("#")[0]).resolve()
        if path in seen:
            continue
        seen.add(path)
        if path.is_file() and site.resolve() in path.parents:
            total += path.stat().st_size
        else:
            missing.append(url)
    return len(text.encode("utf8")), total, missing


def page_weights(site: Path) -> dict[str, tuple[int, int]]:
    """Each built page of the site (docname: (HTML bytes, asset bytes)), in path order."""
    skip = {"_static", "_sources", "_images"}
    weights = {}
    for page in sorted(site.rglob("*.html")):
        relative = page.relative_to(site)
        if relative.parts[0] in skip:
            continue
        html_bytes, asset_bytes, _ = page_weight_bytes(page, site)
        weights[str(relative.with_suffix(""))] = (html_bytes, asset_bytes)
    return weights


def print_page_weights(site: Path) -> None:
    weights = page_weights(site)
    if not weights:
        print(f"page weights: no site built in {site} (make site)")
        return
    print(f"page weight (HTML + the scripts, stylesheets and images it loads; {site}):")
    for name, (html_bytes, asset_bytes) in weights.items():
        print(f"  {name:43s} {fmt(html_bytes + asset_bytes, 'B'):>10s}  (HTML {fmt(html_bytes, 'B')})")
    heaviest = max(weights, key=lambda n: sum(weights[n]))
    print(f"  heaviest: {heaviest}, {fmt(sum(weights[heaviest]), 'B')}")


def main(root: str = ".", suite: bool = False, pytest_args: tuple[str, ...] = ()) -> int:
    base = Path(root)
    if (base / "_build" / "html").is_dir():
        print_page_weights(base / "_build" / "html")
    print(f"import scalelib: {fmt(import_time_s(), 's')} (best of 7, beyond an empty interpreter's start)")
    for label, statement in CALLS:
        print(f"{label:45s} {fmt(call_time_s(statement), 's')} (best of 5)")
    search = plan_search_rates()
    print(f"{'plan search, vectorised, ranked by the estimate':45s} {search['numpy_plans_per_s']:.3g} plans/s")
    print(f"{'plan search, vectorised, ranked by the roofline':45s} {search['roofline_plans_per_s']:.3g} plans/s")
    print(f"{'plan search, reference loop':45s} {search['loop_plans_per_s']:.3g} plans/s "
          f"(the vectorised one is {search['ratio']:.0f}x faster)")
    print(f"{'search: LLaMA-3.1-405B on 16,384 H100s':45s} {fmt(search['search_405b_s'], 's')} "
          f"({search['plans_405b']} plans, best of 3)")
    notebooks = sorted(p for d in ("book", "solutions", "exercises") for p in (base / d).glob("*.ipynb"))
    total = 0.0
    for path in notebooks:
        seconds = notebook_time_s(path)
        total += seconds
        print(f"{str(path.relative_to(base)):45s} {fmt(seconds, 's')}")
    print(f"{'all ' + str(len(notebooks)) + ' notebooks':45s} {fmt(total, 's')}")
    if suite:
        seconds, summary, slow = suite_time_s(base, pytest_args)
        print(f"{'the whole test suite (pytest, as make test)':45s} {fmt(seconds, 's')} ({summary})")
        print(f"its {len(slow)} slowest tests (setup, call or teardown):")
        for line in slow:
            print(f"  {line}")
        return 0 if "(exit" not in summary else 1
    return 0


if __name__ == "__main__":
    # python -m scalelib.course.bench [--suite [-- PYTEST_ARGS...]]
    argv = sys.argv[1:]
    extra = tuple(argv[argv.index("--") + 1:]) if "--" in argv else ()
    raise SystemExit(main(suite="--suite" in argv, pytest_args=extra))
