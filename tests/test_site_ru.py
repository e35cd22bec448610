"""The browser test of the Russian edition (``_build/html/ru``): tests/test_site.py run again on its pages.

Every check of a page (title, text, math, images and their alt text, links, tables, downloads and the Colab
link, nothing cut at a phone's width, the language switch at both widths, every figure's text as shown at
390 and 1280 px), the sidebar, the search in Russian (stemmed by Sphinx's Russian stemmer) and the search
index. The checks of the repository's files
(the toc covers every notebook) and the checks of the checks themselves (fault pages) run once, in
test_site.py.
"""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_site_checks_ru", Path(__file__).with_name("test_site.py"))
_module = importlib.util.module_from_spec(_spec)
_module._EDITION = "ru"
sys.modules[_spec.name] = _module  # its dataclasses look their module up there
_spec.loader.exec_module(_module)

#: The tests of test_site.py that check the built pages of an edition.
_EDITION_TESTS = [name for name in dir(_module) if name.startswith("test_") and "_catches_" not in name
                  and name not in {"test_every_notebook_is_in_the_toc", "test_chapter_part_lists_chapter_exercises_solutions",
                                   "test_a_browser_that_went_away_is_started_again_before_the_next_page",
                                   "test_figure_alt_text_says_what_the_figure_shows_not_its_file"}]
_FIXTURES = ["browser", "site", "reports", "page", "phone_reports"]
globals().update({name: getattr(_module, name) for name in _EDITION_TESTS + _FIXTURES})
