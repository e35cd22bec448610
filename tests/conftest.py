"""What every test shares."""

import pytest

from scalelib.course import capstone


@pytest.fixture(autouse=True)
def _sample_capstone_brief():
    """Each test sees the sample learner's capstone brief (chapter 11's checks need one), whatever an
    earlier test made current; tests of the brief itself set their own."""
    with capstone.using(capstone.brief_for(capstone.SAMPLE_LEARNER)):
        yield
