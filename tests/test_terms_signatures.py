"""The convention of every formula of chapters 3 to 8 (README): quantities first, then the chip or topology,
then options by keyword. A default-valued parameter that could be passed by position would let a call's
meaning shift with the order of its arguments, so every option with a default is keyword-only."""

import inspect

import pytest

import scalelib as sl

MODULES = ("_sharding", "_matmul_plan", "_ring", "_models", "_transformer", "_einsum", "_training", "_pipeline",
           "_plan_search", "_inference", "_serving", "_validation_training", "_validation_inference", "_parallelism")
FUNCTIONS = sorted(name for name in sl.__all__ if inspect.isfunction(getattr(sl, name))
                   and getattr(inspect.unwrap(getattr(sl, name)), "__module__", "").rsplit(".", 1)[-1] in MODULES)


def test_the_chapters_have_many_formulas():
    assert len(FUNCTIONS) > 60 and "training_cost" in FUNCTIONS and "pipeline_schedule" in FUNCTIONS


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_option_with_a_default_is_keyword_only(name):
    params = inspect.signature(getattr(sl, name)).parameters.values()
    positional = [p.name for p in params if p.default is not p.empty and p.kind != p.KEYWORD_ONLY]
    assert not positional, f"{name}: {positional} can be given by position"
