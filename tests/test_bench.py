"""`make bench`'s timing of the whole suite reports the run's own summary line, and a failing run as such."""

from scalelib.course.bench import suite_time_s


def test_the_suite_timing_reports_pytest_s_summary(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    seconds, summary = suite_time_s(tmp_path)
    assert seconds > 0 and summary.startswith("1 passed") and "exit" not in summary


def test_a_failing_suite_is_reported_with_its_exit_status(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_bad():\n    assert 1 + 1 == 3\n")
    _, summary = suite_time_s(tmp_path)
    assert "1 failed" in summary and summary.endswith("(exit 1)")
