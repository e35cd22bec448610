"""Every question the book asks in a chapter on the site has its counterpart in the course:
an exercise whose registration names it, or a worked problem in the chapter notebook."""

import json
import re
from pathlib import Path

import pytest
import yaml

from scalelib.course import book_items

ROOT = Path(__file__).resolve().parents[1]


def _chapters_on_the_site() -> list[int]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    return sorted({int(m.group(1)) for f in files if (m := re.match(r"book/ch(\d\d)_", f))})


@pytest.mark.parametrize("chapter", _chapters_on_the_site())
def test_every_question_of_the_book_is_claimed(chapter):
    assert chapter in book_items.ITEMS, f"chapter {chapter} has no list of the book's items in book_items.py"
    missing = [f"{item.id} ({item.title})" for item in book_items.unclaimed(chapter)]
    assert missing == [], f"chapter {chapter}: the book's items without a counterpart: {missing}"


@pytest.mark.parametrize("chapter", _chapters_on_the_site())
def test_claims_name_items_the_book_has(chapter):
    assert book_items.unknown_claims(chapter) == {}


def test_the_check_notices_an_unclaimed_item_and_a_mistyped_claim(tmp_path, monkeypatch):
    # A chapter of two items (no exercises registered for it) whose notebook claims one, and one the book lacks.
    monkeypatch.setitem(book_items.ITEMS, 98, (book_items.BookItem("Q1", "one"), book_items.BookItem("Q2", "two")))
    (tmp_path / "book").mkdir()
    nb = {"cells": [{"cell_type": "markdown", "source": "x", "metadata": {"scalelib": {"book": ["Q1", "Q9"]}}}]}
    (tmp_path / "book" / "ch98_test.ipynb").write_text(json.dumps(nb))
    assert [item.id for item in book_items.unclaimed(98, tmp_path)] == ["Q2"]
    assert book_items.unknown_claims(98, tmp_path) == {"Q9": ["worked problem in ch98_test.ipynb, cell 1"]}
