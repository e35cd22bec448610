"""`make test` gives the same result on the same tree, with or without ``CI`` set: every property test
runs derandomized, with no deadline and no example database (tests/conftest.py), whoever runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, is_hypothesis_test, settings, strategies as st

import conftest

ROOT = Path(__file__).resolve().parents[1]
FUZZING = conftest.PROFILE == "fuzz"


@pytest.mark.skipif(FUZZING, reason="make fuzz explores at random on purpose")
def test_the_default_settings_are_derandomized_once_the_tests_are_collected():
    current = settings.default
    assert current.derandomize is True and current.database is None and current.deadline is None
    assert HealthCheck.too_slow in current.suppress_health_check


@pytest.mark.skipif(FUZZING, reason="make fuzz explores at random on purpose")
def test_every_property_test_in_the_session_is_derandomized_with_no_deadline(request):
    property_tests = [item for item in request.session.items if is_hypothesis_test(getattr(item, "obj", None))]
    loose = [item.nodeid for item in property_tests
             if not item.obj._hypothesis_internal_use_settings.derandomize
             or item.obj._hypothesis_internal_use_settings.deadline is not None]
    assert not loose, f"property tests that would draw differently on each run: {loose}"
    if len(request.session.items) > 1000:  # the whole suite was collected: its property tests are all here
        assert len(property_tests) >= 20


def _drawn_examples() -> list:
    seen = []

    @settings(max_examples=25)
    @given(st.integers(-(10**9), 10**9))
    def record(x):
        seen.append(x)

    record()
    return seen


@pytest.mark.skipif(FUZZING, reason="make fuzz explores at random on purpose")
def test_the_same_test_draws_the_same_examples_on_every_run():
    assert _drawn_examples() == _drawn_examples()


@pytest.mark.parametrize("ci", [None, "true"])
def test_ci_or_not_the_profile_is_the_same(ci):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SCALELIB_HYPOTHESIS")}
    if ci:
        env["CI"] = ci
    probe = ("import sys; sys.path.insert(0, 'tests'); import conftest; from hypothesis import settings; "
             "print(settings.default.derandomize, settings.default.database)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "None"]


def test_an_unknown_profile_is_refused_by_name():
    env = {**os.environ, "SCALELIB_HYPOTHESIS": "random"}
    probe = "import sys; sys.path.insert(0, 'tests'); import conftest"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode != 0 and "SCALELIB_HYPOTHESIS must be 'deterministic' or 'fuzz', got 'random'" in run.stderr
