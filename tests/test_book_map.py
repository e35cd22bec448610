"""The generated map of the book's questions (book/book-map.md, written by ``scalelib book-map``).

The page must be what the exercises' registrations and the chapter notebooks generate now,
list each of the book's items exactly once, and link only to pages on the site, at
headings they have: each exercise link at that exercise's heading. The anchors are
checked with markdown-it's anchors plugin, an implementation apart from the MyST code
the generator uses, and (once the site is built) against the ids of the built pages.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from scalelib.course import book_items, bookmap, check
from scalelib.course.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / bookmap.PAGE
BUILT = ROOT / "_build" / "html" / "book" / "book-map.html"
LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]*)\)")
SECTION = re.compile(r"^## (\d+)\. (.+)$", re.M)


def _page() -> str:
    assert PAGE.is_file(), f"{bookmap.PAGE} is missing: run `make exercises` (or `scalelib book-map`)"
    return PAGE.read_text(encoding="utf-8")


def _sections(text: str) -> dict[int, str]:
    """Book chapter number -> its section of the page (up to the next ## heading)."""
    starts = list(SECTION.finditer(text))
    out = {}
    for match in starts:
        end = text.find("\n## ", match.end())
        out[int(match.group(1))] = text[match.end(): end if end >= 0 else len(text)]
    return out


def _rows(section: str) -> list[list[str]]:
    """The body rows of the (first) table of a section, as cells."""
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    return cells[1:]  # the header row; the |---| row does not start with "| "


def _summary(text: str) -> dict[str, list[str]]:
    """The summary table's rows, by their first cell's chapter number ("1" ...) or "All chapters"."""
    table = text[text.index("| Book chapter"):].split("\n\n", 1)[0]
    return {row[0].split(".")[0]: row for row in _rows(table)}


def _toc_docnames() -> set[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text(encoding="utf-8"))
    names = {toc["root"]}

    def walk(entry):
        if "file" in entry:
            names.add(entry["file"])
        for key in ("parts", "chapters", "sections"):
            for child in entry.get(key) or []:
                walk(child)

    walk(toc)
    return names


def _anchors(notebook: Path) -> dict[str, str]:
    """Heading id -> heading text, from markdown-it's anchors plugin over the notebook's Markdown cells."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.anchors import anchors_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    depth = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())["sphinx"]["config"]["myst_heading_anchors"]
    md = MarkdownIt("commonmark").use(dollarmath_plugin).use(anchors_plugin, max_level=depth)
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    source = "\n\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in cells if c["cell_type"] == "markdown")
    html = md.render(source)
    return {m.group(1): re.sub(r"<[^>]+>", "", m.group(2))
            for m in re.finditer(r'<h\d id="([^"]+)">(.*?)</h\d>', html)}


# ---------------------------------------------------------------------------
# Drift


def test_page_is_up_to_date():
    expected, actual = bookmap.render(ROOT), _page()
    if actual != expected:
        diff = "".join(list(difflib.unified_diff(
            actual.splitlines(keepends=True), expected.splitlines(keepends=True),
            f"{bookmap.PAGE} (on disk)", f"{bookmap.PAGE} (generated now)"))[:60])
        pytest.fail(f"{bookmap.PAGE} is out of date with the exercises' registrations and the notebooks: run "
                    f"`make exercises` (or `scalelib book-map`) and commit it.\n{diff}")


def test_the_page_is_on_the_site_after_the_formula_index():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text(encoding="utf-8"))
    reference = next(part for part in toc["parts"] if part.get("caption") == "Reference")
    files = [entry["file"] for entry in reference["chapters"]]
    assert "book/book-map" in files and files.index("book/book-map") == files.index("book/formulas") + 1


# ---------------------------------------------------------------------------
# Contents


def test_each_book_item_is_listed_exactly_once_in_its_chapter():
    sections = _sections(_page())
    assert sorted(sections) == list(range(1, 13)), "one section per book chapter, 1 to 12"
    assert {int(n): title for n, title in SECTION.findall(_page())} == bookmap.BOOK_TITLES
    for chapter, section in sections.items():
        listed = [row[0] for row in _rows(section)]
        wanted = [item.id if item.required else f"{item.id} (optional)"
                  for item in book_items.ITEMS.get(chapter, ())]
        assert listed == wanted, f"chapter {chapter}: the page lists {listed}, the book has {wanted}"


def test_what_answers_each_item_is_what_claims_it():
    # Independent of the generator: book_items.claims reads the same registrations and cell metadata.
    sections = _sections(_page())
    for chapter, items in book_items.ITEMS.items():
        claims = book_items.claims(chapter, ROOT)
        for (item_id, _label, exercises, worked), item in zip(_rows(sections[chapter]), items):
            named = re.findall(r"\[?Exercise (\d+\.\d+)", exercises)
            want = [c.split()[-1] for c in claims.get(item.id, []) if c.startswith("exercise ")]
            assert named == want, f"chapter {chapter}, {item_id}: the page names exercises {named}, claims {want}"
            has_worked = any(c.startswith("worked problem") for c in claims.get(item.id, []))
            assert (worked != bookmap.NONE) == has_worked, f"chapter {chapter}, {item_id}: worked problem"


def test_the_counts_add_up():
    summary = _summary(_page())
    for chapter in bookmap.BOOK_TITLES:
        items = book_items.ITEMS.get(chapter, ())
        required = [i for i in items if i.required]
        answered = [i for i in required if i.id in book_items.claims(chapter, ROOT)]
        extras = [e for e in check.exercises(chapter) if not check.get_exercise(e).book]
        row = summary[str(chapter)]
        assert row[2] == (f"{len(answered)} of {len(required)}" if items else "none asked")
        assert row[4] == str(len(extras))
    total = summary["All chapters"]
    required = sum(1 for items in book_items.ITEMS.values() for i in items if i.required)
    assert total[2].endswith(f" of {required}")


def test_every_exercise_appears_and_the_extras_are_those_that_claim_nothing():
    text = _page()
    body, extras = text.split("## Course extras", 1)
    for eid in check.exercises():
        claimed = check.get_exercise(eid).book
        in_body = len(re.findall(rf"\bExercise {re.escape(eid)}\b", body))
        in_extras = len(re.findall(rf"\bExercise {re.escape(eid)}\b", extras))
        assert in_body == len(claimed), f"exercise {eid} claims {claimed}, listed {in_body} times"
        assert in_extras == (0 if claimed else 1), f"exercise {eid}: in the extras {in_extras} times"


def test_the_capstone_stands_in_for_the_books_conclusion():
    section = _sections(_page())[11]
    assert _rows(section) == [] and "capstone" in section and "reading list" in section


# ---------------------------------------------------------------------------
# Links


def test_every_link_goes_to_a_page_on_the_site_and_a_heading_it_has():
    text, pages, anchors = _page(), _toc_docnames(), {}
    local = set(re.findall(r"^\((\S+)\)=$", text, re.M))
    links = LINK.findall(text)
    assert len(links) > 100
    for label, target in links:
        path, _, fragment = target.partition("#")
        if not path:
            assert fragment in local, f"[{label}]({target}): no such target on the page"
            continue
        file = (ROOT / "book" / path).resolve()
        assert file.is_file(), f"[{label}]({target}): {file} does not exist"
        docname = file.relative_to(ROOT).with_suffix("").as_posix()
        assert docname in pages, f"[{label}]({target}): {docname} is not in book/_toc.yml"
        if file.suffix == ".ipynb" and docname.startswith(("exercises/", "solutions/")):
            assert fragment or label in ("exercises", "solutions"), f"[{label}]({target}): no anchor"
        if not fragment:
            continue
        if file not in anchors:
            anchors[file] = _anchors(file)
        headings = anchors[file]
        assert fragment in headings, f"[{label}]({target}): {path} has no heading with that anchor"
        if label.startswith("Exercise ") or label == "solution":
            eid = label.split()[1] if label.startswith("Exercise ") else None
            assert re.match(r"Exercise \d+\.\d+\b", headings[fragment]), f"[{label}]({target}) is no exercise"
            if eid:
                assert headings[fragment].startswith(f"Exercise {eid}:"), f"[{label}]({target})"


def test_each_solution_link_goes_to_the_same_exercise():
    for match in re.finditer(r"\[Exercise (\d+\.\d+)\]\(([^)]*)\) · \[solution\]\(([^)]*)\)", _page()):
        eid, exercise, solution = match.groups()
        assert exercise.replace("exercises/", "solutions/").split("#")[0] == solution.split("#")[0]
        assert f"-{eid.replace('.', '')}-" in f"-{solution.split('#')[1]}", (eid, solution)


def test_without_the_solutions_no_link_to_them_is_left():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_site import unlink_solutions
    finally:
        sys.path.pop(0)
    text = unlink_solutions(_page())
    assert "solutions/" not in text and "()" not in text and "· ;" not in text and "· |" not in text
    assert "(exercises)" not in text and "([exercises](../exercises/ch01_rooflines.ipynb))" in text


@pytest.mark.skipif(not BUILT.is_file(), reason="the site is not built (make site)")
def test_the_built_pages_have_every_anchor_the_map_links_to():
    from html.parser import HTMLParser

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.ids, self.hrefs = set(), []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if attrs.get("id"):
                self.ids.add(attrs["id"])
            if tag == "a" and attrs.get("href"):
                self.hrefs.append(attrs["href"])

    def parse(path: Path) -> Collect:
        collect = Collect()
        collect.feed(path.read_text(encoding="utf-8"))
        return collect

    page, targets, checked = parse(BUILT), {}, 0
    for href in page.hrefs:
        path, _, fragment = href.partition("#")
        if not fragment or not path.endswith(".html") or "://" in path or "_static" in path:
            continue
        file = (BUILT.parent / path).resolve()
        assert file.is_file(), f"{href}: not built"
        if file not in targets:
            targets[file] = parse(file).ids
        ids = targets[file]
        assert fragment in ids, f"{href}: the built page has no such id"
        checked += 1
    assert checked > 100


# ---------------------------------------------------------------------------
# The generator notices what changes


def test_a_mistyped_claim_moves_the_exercise_to_the_extras_and_says_so(monkeypatch):
    before = bookmap.render(ROOT)
    exercise = check.get_exercise("3.4")
    assert exercise.book == ("Pop quiz 2",)
    monkeypatch.setitem(check._REGISTRY, "3.4", dataclasses.replace(exercise, book=("Pop quizz 2",)))
    after = bookmap.render(ROOT)
    assert after != before
    row = next(r for r in _rows(_sections(after)[3]) if r[0] == "Pop quiz 2")
    assert "Exercise 3.4" not in row[2] and "Exercise 3.5" in row[2]
    extras = after.split("## Course extras", 1)[1]
    assert "Exercise 3.4" in extras and "'Pop quizz 2', which the book's chapter 3 lacks" in extras


def test_a_new_exercise_shows_up(monkeypatch):
    before = bookmap.render(ROOT)
    check.exercises(3)
    monkeypatch.setitem(check._REGISTRY, "3.98", check.Exercise("3.98", "A new question", lambda: 1.0, book=("Q1",)))
    monkeypatch.setitem(check._REGISTRY, "3.99", check.Exercise("3.99", "A new extra", lambda: 1.0))
    after = bookmap.render(ROOT)
    row = next(r for r in _rows(_sections(after)[3]) if r[0] == "Q1")
    assert "Exercise 3.98" in row[2] and "Exercise 3.98" not in before
    assert "A new extra" in after.split("## Course extras", 1)[1]
    assert int(_summary(after)["3"][4]) == int(_summary(before)["3"][4]) + 1


def _notebook(cells: list[tuple[str, dict]]) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "source": source, "metadata": meta} for source, meta in cells]}


def test_worked_problems_link_to_their_section(tmp_path, monkeypatch):
    # A repository of one chapter on the site: its worked problems sit under headings above or inside them.
    items = [book_items.BookItem(*row) for row in (("Q1", "one"), ("Q2", "two"), ("Q3", "three"),
                                                    ("Q77", "claimed by nothing"), ("Ex9", "optional", False))]
    monkeypatch.setitem(book_items.ITEMS, 3, tuple(items))
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "_config.yml").write_text(
        "sphinx:\n  config:\n    myst_heading_anchors: 2\n", encoding="utf-8")
    (tmp_path / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - chapters:\n      - file: book/ch03_test\n", encoding="utf-8")
    cells = [("# Title", {}), ("## Shardings `A[I_X]`", {}), ("Text.", {"scalelib": {"book": ["Q1"]}}),
             ("Text first.\n\n## Shardings `A[I_X]`\n\n```\n## not a heading\n```", {"scalelib": {"book": ["Q2"]}}),
             ("### Too deep for an anchor", {"scalelib": {"book": ["Q3"]}})]
    (tmp_path / "book" / "ch03_test.ipynb").write_text(json.dumps(_notebook(cells)), encoding="utf-8")
    text = bookmap.render(tmp_path)
    rows = {r[0]: r[3] for r in _rows(_sections(text)[3])}
    assert rows == {"Q1": "[Shardings `A[I_X]`](ch03_test.ipynb#shardings-ai_x)",
                    "Q2": "[Shardings `A[I_X]`](ch03_test.ipynb#shardings-ai_x-1)",
                    "Q3": "[Too deep for an anchor](ch03_test.ipynb)",
                    "Q77": bookmap.NONE, "Ex9 (optional)": bookmap.NONE}
    assert ("3 of the book's 4 questions in this chapter are answered (unanswered: Q77), "
            "and 0 of its 1 optional examples.") in text
    assert _summary(text)["3"][2:4] == ["3 of 4", "0 of 1"]


def test_a_page_not_on_the_site_is_named_not_linked(tmp_path, monkeypatch):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "ch11_capstone.ipynb").write_text(json.dumps(_notebook([("# Capstone", {})])))
    monkeypatch.setitem(book_items.ITEMS, 11, ())
    assert "The course puts a capstone in its place: Chapter 11: Capstone," in bookmap.render(tmp_path)
    (tmp_path / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - chapters:\n      - file: book/ch11_capstone\n")
    assert "capstone in its place: [Chapter 11: Capstone](ch11_capstone.ipynb)," in bookmap.render(tmp_path)


# ---------------------------------------------------------------------------
# The command


def test_cli_check_reports_drift_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "book").mkdir()
    assert main(["book-map", "--check", "--root", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "book/book-map.md: missing" in out and "run `make exercises`" in err
    assert not (tmp_path / "book" / "book-map.md").exists()

    assert main(["book-map", "--root", str(tmp_path)]) == 0
    assert "created book/book-map.md" in capsys.readouterr().out
    assert main(["book-map", "--check", "--root", str(tmp_path)]) == 0
    assert "up to date" in capsys.readouterr().out

    (tmp_path / "book" / "book-map.md").write_text("# Book map\n", encoding="utf-8")
    assert main(["book-map", "--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().out.startswith("book/book-map.md: stale")


def test_cli_refuses_a_folder_without_book(tmp_path, capsys):
    assert main(["book-map", "--root", str(tmp_path)]) == 1
    assert "has no book/ folder" in capsys.readouterr().err
