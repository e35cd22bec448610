"""The Russian PDF (``_build/ru/_build/pdf/how-to-scale-your-model.pdf``, copied into the site's ru/):
tests/test_pdf.py's checks of a built PDF run again on it, and its text is Russian."""

import importlib.util
import sys
import re
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_pdf_checks_ru", Path(__file__).with_name("test_pdf.py"))
_module = importlib.util.module_from_spec(_spec)
_module._EDITION = "ru"
sys.modules[_spec.name] = _module  # its dataclasses look their module up there
_spec.loader.exec_module(_module)

#: The checks of a built PDF (the checks of the checks, on faulty pages, run once in test_pdf.py).
_BUILT_PDF_TESTS = [
    "test_the_site_holds_the_pdf_it_links_to", "test_title_page", "test_page_numbers_in_the_footer",
    "test_every_page_of_the_toc_in_toc_order", "test_each_page_starts_a_sheet_under_its_title",
    "test_no_sheet_is_almost_blank", "test_no_colab_link_is_printed", "test_the_api_reference_is_a_compact_appendix",
    "test_as_many_chapter_starts_as_chapters_in_the_toc", "test_every_toc_title_is_in_the_text",
    "test_bookmarks_for_every_part_and_page", "test_figures_intact", "test_katex_fonts_embedded",
    "test_no_raw_math_in_the_text", "test_no_widget_is_printed", "test_no_character_printed_as_an_empty_box",
]
globals().update({name: getattr(_module, name) for name in _BUILT_PDF_TESTS + ["reader", "sheets", "texts", "where"]})


def test_the_russian_pdf_reads_in_russian(texts) -> None:
    """The chapters' pages of the Russian PDF are Russian prose: most letters Cyrillic (code, formulas and
    the API reference aside), and the title page in Russian."""
    assert "Содержание" in "".join(texts[:3])
    chapter_pages = [t for t in texts[1:] if t.strip()]
    letters = "".join(re.findall(r"[^\W\d_]", "".join(chapter_pages[: len(chapter_pages) // 2])))
    cyrillic = sum(1 for ch in letters if "\u0400" <= ch <= "\u04ff")
    assert cyrillic / len(letters) > 0.5, f"only {cyrillic / len(letters):.0%} of the first half's letters are Cyrillic"
