"""Every example in scalelib's docstrings runs and prints what it says (the examples are the docs)."""

import doctest
import importlib
import pkgutil

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

import scalelib
from scalelib import _models, _specs

MODULES = ["scalelib"] + sorted(m.name for m in pkgutil.walk_packages(scalelib.__path__, "scalelib."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_written(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    registered, models = dict(_specs._USER), dict(_models._USER)
    try:
        for test in finder.find(module, name):
            runner.run(test)
    finally:  # examples that register chips or models must not leave them behind
        plt.close("all")
        _specs._USER.clear()
        _specs._USER.update(registered)
        _models._USER.clear()
        _models._USER.update(models)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (see the output above)"


def test_the_library_has_examples_to_run():
    finder = doctest.DocTestFinder()
    examples = sum(len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name), name))
    assert examples >= 100
