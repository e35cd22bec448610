"""`make bench`'s timing of the whole suite reports the run's own summary line, and a failing run as such."""

from scalelib.course.bench import slowest_tests, suite_time_s


def test_the_suite_timing_reports_pytest_s_summary(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    seconds, summary, slow = suite_time_s(tmp_path)
    assert seconds > 0 and summary.startswith("1 passed") and "exit" not in summary
    assert len(slow) == 3 and all(line.endswith("test_one.py::test_ok") for line in slow)
    assert sorted(line.split()[1] for line in slow) == ["call", "setup", "teardown"]


def test_the_slowest_tests_are_read_from_pytest_s_durations_section_and_no_more_than_asked():
    output = """....
============================= slowest 4 durations ==============================
3.50s setup    tests/test_a.py::test_one
2.25s call     book/ch01.ipynb::Cell 3
0.75s call     tests/test_b.py::test_two[x-1]
0.10s teardown tests/test_a.py::test_one
============================== 4 passed in 7.00s ===============================""".splitlines()
    assert slowest_tests(output, 3) == ["3.50s setup    tests/test_a.py::test_one",
                                        "2.25s call     book/ch01.ipynb::Cell 3",
                                        "0.75s call     tests/test_b.py::test_two[x-1]"]
    assert slowest_tests(output, 10)[-1] == "0.10s teardown tests/test_a.py::test_one"
    assert slowest_tests(output[:1] + output[-1:], 3) == []  # no durations section: none


def test_pytest_arguments_reach_the_run(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_ok():\n    pass\ndef test_other():\n    pass\n")
    _, summary, _ = suite_time_s(tmp_path, ("-k", "other"))
    assert summary.startswith("1 passed, 1 deselected")


def test_a_failing_suite_is_reported_with_its_exit_status(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_bad():\n    assert 1 + 1 == 3\n")
    _, summary, _ = suite_time_s(tmp_path)
    assert "1 failed" in summary and summary.endswith("(exit 1)")


def test_a_page_s_weight_is_its_html_and_each_local_asset_it_loads_once(tmp_path):
    from scalelib.course.bench import page_weight_bytes, page_weights

    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "theme.css").write_bytes(b"x" * 100)
    (tmp_path / "_static" / "app.js").write_bytes(b"y" * 1000)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "plot.png").write_bytes(b"z" * 10)
    html = ('<html><head><link rel="stylesheet" href="../_static/theme.css?v=1">'
            '<script src="../_static/app.js"></script><script src="../_static/app.js?digest=2"></script>'
            '<script src="https://cdn.example.invalid/x.js"></script><script src="../_static/gone.js"></script>'
            '</head><body><img src="plot.png"><img src="data:image/png;base64,AAAA"></body></html>')
    (tmp_path / "book" / "page.html").write_text(html)
    html_bytes, asset_bytes, missing = page_weight_bytes(tmp_path / "book" / "page.html", tmp_path)
    assert (html_bytes, asset_bytes, missing) == (len(html), 1110, ["../_static/gone.js"])
    assert page_weights(tmp_path) == {"book/page": (len(html), 1110)}  # _static/ holds no page


def test_the_plan_search_rates_cover_both_rankings_and_the_reference_loop():
    from scalelib.course.bench import plan_search_rates

    rates = plan_search_rates(repeats=1)
    assert set(rates) == {"numpy_plans_per_s", "loop_plans_per_s", "roofline_plans_per_s", "ratio",
                          "search_405b_s", "plans_405b"}
    assert rates["numpy_plans_per_s"] > rates["loop_plans_per_s"] > 0 and rates["roofline_plans_per_s"] > 0
    assert rates["plans_405b"] > 1000 and rates["search_405b_s"] > 0

