"""Every figure a chapter shows has alt text that says what it shows and what to take from it: the text the
site gives each image a chapter's code cell outputs (the cell's ``mystnb: image: alt:`` metadata, else what
book/_ext/course_site.py makes of the cell's code) is checked here, figure by figure, for placeholders and
generic phrases."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("ch[0-9][0-9]_*.ipynb"))

#: Phrases that say nothing about a figure: the site's fallbacks, a title with its fields cut out, a
#: helper's description of every figure it can draw.
GENERIC = ("figure drawn by", "figure:", "optionally", "the code above", "todo", "placeholder", "image of", "a plot",
           "a figure")


def _site_alt_text(code: str, section: str) -> str:
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_site import figure_alt_text
    finally:
        sys.path.pop(0)
    return figure_alt_text(code, section)


def figures(path: Path) -> list[tuple[int, str]]:
    """(cell index, alt text as the site gives it) for each image the notebook's code cells output."""
    cells = json.loads(path.read_text())["cells"]
    section, found = "", []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            headings = re.findall(r"^#{1,6} (.+)$", source, re.M)
            section = headings[-1].strip() if headings else section
            continue
        if cell["cell_type"] != "code" or not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt") or _site_alt_text(source, section)
        found.append((index, alt))
    return found


def problems(alt: str) -> list[str]:
    """What is wrong with an alt text, if anything."""
    found = [f"says {phrase!r}" for phrase in GENERIC if phrase in alt.lower()]
    if "…" in alt or "..." in alt or re.search(r"\{[^}]*\}", alt):
        found.append("keeps a placeholder where a value was")
    if len(alt) < 120:
        found.append(f"is {len(alt)} characters, too short to say what the figure shows and what it means")
    if not re.search(r": (\S+\s+){7,}\S+", alt):
        found.append("states no takeaway: what the figure shows, a colon, then what to take from it")
    return found


def test_the_checker_rejects_the_alt_texts_the_site_used_to_give():
    for old in ("Figure drawn by the code above (section “Local attention”)",
                "Figure: …: … (section “Gathering over several axes at once”)",
                "Figure: One generation step of a LLaMA-3-70B layer, batch …, TPU v5e, bf16 (section “Worked problem 1”)",
                "The chips of a TPU slice and their ICI links; optionally a route between two chips (section “Slices”)"):
        assert problems(old), old
    assert problems(_site_alt_text("plt.plot(x, y)", "Rooflines"))
    assert not problems("Ratio of attention time to MLP time in one generation step against the context length: "
                        "attention, which reads the KV cache, grows with the context and passes the MLP.")
    assert problems("Ratio of attention time to MLP time in one generation step of a LLaMA-3-70B layer against "
                    "the context length, on log axes, for a batch of 64 sequences.")  # what, but no takeaway


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_figure_says_what_it_shows_and_what_it_means(path):
    bad = {index: problems(alt) for index, alt in figures(path) if problems(alt)}
    assert not bad, f"{path.name}: figures whose alt text says too little (cell: problems): {bad}"


def test_no_two_figures_share_an_alt_text():
    seen: dict[str, str] = {}
    for path in CHAPTERS:
        for index, alt in figures(path):
            assert alt not in seen, f"{path.stem} cell {index} has the same alt text as {seen[alt]}"
            seen[alt] = f"{path.stem} cell {index}"
    assert len(seen) >= 50  # the chapters' figures, all found
