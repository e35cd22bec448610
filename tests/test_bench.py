"""`make bench`'s timing of the whole suite reports the run's own summary line, and a failing run as such."""

from scalelib.course.bench import suite_time_s


def test_the_suite_timing_reports_pytest_s_summary(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    seconds, summary, slow = suite_time_s(tmp_path)
    assert seconds > 0 and summary.startswith("1 passed") and "exit" not in summary
    assert len(slow) == 3 and all(line.endswith("test_one.py::test_ok") for line in slow)
    assert sorted(line.split()[1] for line in slow) == ["call", "setup", "teardown"]


def test_the_slowest_tests_are_listed_slowest_first_and_no_more_than_asked(tmp_path):
    body = "".join(f"def test_{i}():\n    import time; time.sleep({i} * 0.02)\n" for i in range(5))
    (tmp_path / "test_many.py").write_text(body)
    _, summary, slow = suite_time_s(tmp_path, slowest=3)
    assert summary.startswith("5 passed") and len(slow) == 3
    assert [line.rsplit("::", 1)[1] for line in slow] == ["test_4", "test_3", "test_2"]


def test_pytest_arguments_reach_the_run(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_ok():\n    pass\ndef test_other():\n    pass\n")
    _, summary, _ = suite_time_s(tmp_path, ("-k", "other"))
    assert summary.startswith("1 passed, 1 deselected")


def test_a_failing_suite_is_reported_with_its_exit_status(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_bad():\n    assert 1 + 1 == 3\n")
    _, summary, _ = suite_time_s(tmp_path)
    assert "1 failed" in summary and summary.endswith("(exit 1)")
