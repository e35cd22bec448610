"""What every test shares: the capstone's sample brief, and Hypothesis run the same way every time.

`make test` (with or without ``CI`` set) runs every property test derandomized: the examples are a
function of the test's own code, so the same tree gives the same result for a learner and for CI.
Random exploration is `make fuzz` (``SCALELIB_HYPOTHESIS=fuzz``): fresh random examples on every run,
only the property tests collected, each with ``FUZZ_SCALE`` (10) times its usual number of examples, failures stored in ``.hypothesis/`` and printed with their
reproduction; each bug it finds becomes a named regression test.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

from scalelib.course import capstone

# The kernels nbval starts read an IPython profile from IPYTHONDIR: a fresh one whose startup file fails any
# cell that leaves a figure with text under 9 px as the course site shows it (tests/ipython_startup/).
_IPYTHONDIR = tempfile.mkdtemp(prefix="scalelib-ipython-")
atexit.register(shutil.rmtree, _IPYTHONDIR, ignore_errors=True)
_STARTUP = Path(_IPYTHONDIR, "profile_default", "startup")
_STARTUP.mkdir(parents=True)
shutil.copy(Path(__file__).parent / "ipython_startup" / "figure_text.py", _STARTUP / "00-figure-text.py")
os.environ["IPYTHONDIR"] = _IPYTHONDIR

#: No timing anywhere in a verdict: no deadline, no health check that measures speed, no example
#: database replaying what an earlier run happened to find.
_STEADY = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True, **_STEADY)
settings.register_profile("fuzz", derandomize=False, print_blob=True, **_STEADY)

PROFILE = os.environ.get("SCALELIB_HYPOTHESIS", "deterministic")
if PROFILE not in ("deterministic", "fuzz"):
    raise pytest.UsageError(f"SCALELIB_HYPOTHESIS must be 'deterministic' or 'fuzz', got {PROFILE!r}")
# Loaded before any test module is imported, so every @settings(...) in the tests inherits it.
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(config, items):
    """Under `make fuzz`, keep only the property tests: the rest has nothing random to explore."""
    if PROFILE != "fuzz":
        return
    keep = [item for item in items if is_hypothesis_test(getattr(item, "obj", None))]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
    # Each property test explores FUZZ_SCALE times as many examples as make test gives it.
    scale = int(os.environ.get("FUZZ_SCALE", "10"))
    for item in keep:
        own = item.obj._hypothesis_internal_use_settings
        item.obj._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * scale)


@pytest.fixture(autouse=True)
def _grading_seeds_from_the_test(request, monkeypatch):
    """A grading run without `seed` / `draw_seed` takes them from the operating system (scalelib.course.grade.
    new_seed); in the suite they come from the test's own name instead, so the same tree grades the same way
    every time (the grader's subprocesses, e.g. Gradescope's run_autograder, keep the OS's randomness)."""
    import zlib

    from scalelib.course import grade

    monkeypatch.setattr(grade, "new_seed", lambda: zlib.crc32(request.node.nodeid.encode()) % 10**9)


@pytest.fixture(autouse=True)
def _sample_capstone_brief():
    """Each test sees the sample learner's capstone brief (chapter 11's checks need one), whatever an
    earlier test made current; tests of the brief itself set their own."""
    with capstone.using(capstone.brief_for(capstone.SAMPLE_LEARNER)):
        yield
