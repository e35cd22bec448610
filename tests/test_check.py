"""The checker (scalelib.course.check), in process: verdicts, diagnoses and what `check` shows.

Each test runs against a registry of its own (chapter 99), so the course's real
exercises neither interfere nor get touched.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import scalelib as sl
from scalelib.course import check as _check
from scalelib.course.check import COMMON_SLIPS, INVOLVES_BY_UNIT, VERDICT_KEY, Exercise, register


def _twice(B, D):
    return 2.0 * B * D


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """A fresh registry holding one exercise of each kind."""
    monkeypatch.setattr(_check, "_REGISTRY", {})
    register(Exercise("99.1", "bytes of something", lambda: 1000.0, unit="B"))
    register(Exercise("99.2", "times of three things", lambda: np.array([1.0, 2.0, 4.0]), unit="s"))
    register(Exercise("99.3", "which bound", lambda: "memory", kind="choice", choices=("compute", "memory")))
    register(Exercise("99.4", "FLOPs of a product", lambda: _twice, unit="FLOP", kind="function",
                      cases=({"B": 1, "D": 2}, {"B": 3, "D": 4})))
    return _check._REGISTRY


# ---------------------------------------------------------------------------
# numbers


def test_answer_within_rtol_is_correct():
    v = sl.verdict("99.1", 1005)
    assert (v.status, v.rel_error) == ("correct", 0.005)
    assert v.message == "✅ Exercise 99.1: correct — 1 kB (within 1% of the reference)."


def test_answer_just_outside_rtol_is_incorrect():
    v = sl.verdict("99.1", 1011)
    assert v.status == "incorrect"
    assert v.message == "❌ Exercise 99.1: not quite — your answer 1.01 kB is a few percent too large."


def test_one_element_list_counts_as_a_number():
    assert sl.verdict("99.1", [1000.0]).status == "correct"
    assert sl.verdict("99.1", np.array([1000.0])).status == "correct"


def test_the_distance_wording_follows_the_ratio():
    from scalelib.course.check import _how_far

    ratios = [1.005, 1.05, 1.5, 1.9999, 2.0, 5.0, 50.0]
    words = [_how_far(r) for r in ratios]
    order = ["less than a percent", "a few percent", "tens of percent", "twice to ten times", "orders of magnitude"]
    ranks = [next(i for i, o in enumerate(order) if w.startswith(o)) for w in words]
    assert ranks == sorted(ranks) and words[3] != words[4] and "twice to ten times" in words[4]
    assert [_how_far(1 / r).replace("small", "large") for r in ratios[:3]] == words[:3]


def _slip(factor, unit="B"):
    """The text of the common slip of `factor` named for an answer in `unit` (one declaring no `involves`)."""
    return next(slip.text for slip in COMMON_SLIPS if slip.factor in (factor, 1 / factor) and (
        slip.about in INVOLVES_BY_UNIT.get(unit, ()) if slip.about else unit in slip.units))


@pytest.mark.parametrize("factor", [2.0, 8.0, 1e3, 1024.0, 1.024**3])
@pytest.mark.parametrize("direction", ["too large", "too small"])
def test_common_slip_is_named_in_both_directions(factor, direction):
    answer = 1000.0 * factor if direction == "too large" else 1000.0 / factor
    v = sl.verdict("99.1", answer)
    assert v.status == "incorrect"
    assert v.diagnosis == _slip(factor)
    assert f" is {'a few percent' if factor < 1.1 else 'twice to ten times' if factor < 10 else 'orders of magnitude'} " \
           f"{direction}." in v.message
    assert v.message.endswith(f"\n   Likely cause: {v.diagnosis}.")


def test_factor_8_message_in_full():
    v = sl.verdict("99.1", 8000)
    assert v.message == (
        "❌ Exercise 99.1: not quite — your answer 8 kB is twice to ten times too large.\n"
        "   Likely cause: a factor of 8: bits versus bytes (a byte is 8 bits)."
    )
    assert v.rel_error == 7.0


def test_ratio_matching_no_slip_gives_a_bucket_and_no_figure():
    v = sl.verdict("99.1", 3300)
    assert (v.status, v.diagnosis) == ("incorrect", None)
    assert v.message == "❌ Exercise 99.1: not quite — your answer 3.3 kB is twice to ten times too large."


def test_a_near_miss_says_which_way_and_roughly_how_far():
    assert sl.verdict("99.1", 1300).message == (
        "❌ Exercise 99.1: not quite — your answer 1.3 kB is tens of percent too large.")
    assert sl.verdict("99.1", 700).message == (
        "❌ Exercise 99.1: not quite — your answer 700 B is tens of percent too small.")
    assert sl.verdict("99.1", 970).message == (
        "❌ Exercise 99.1: not quite — your answer 970 B is a few percent too small.")
    assert sl.verdict("99.1", 0.02).message == (
        "❌ Exercise 99.1: not quite — your answer 20 mB is orders of magnitude too small.")


def test_wrong_sign_is_said_and_not_diagnosed_as_a_factor():
    v = sl.verdict("99.1", -8000)
    assert v.diagnosis is None
    assert v.message == "❌ Exercise 99.1: not quite — your answer -8 kB has the wrong sign."


def test_string_for_a_number_is_incorrect_even_when_it_parses():
    v = sl.verdict("99.1", "1000")
    assert v.status == "incorrect"
    assert v.message == "❌ Exercise 99.1: expected a number in B, got str '1000'; write the number without quotes."


def test_integer_too_large_for_a_float_is_incorrect_not_an_error():
    v = sl.verdict("99.1", 10**400)
    assert (v.status, v.message) == (
        "incorrect", "❌ Exercise 99.1: expected a number in B, got a number too large to compute with.")


# ---------------------------------------------------------------------------
# arrays


def test_array_with_the_same_slip_everywhere_names_it_once():
    v = sl.verdict("99.2", [8, 16, 32])
    assert v.diagnosis is None  # no bits versus bytes for seconds
    assert v.message == "❌ Exercise 99.2: not quite — your answer [8 s, 16 s, 32 s]: every value is twice to ten times too large."
    v = sl.verdict("99.2", [1e-3, 2e-3, 4e-3])
    assert v.message == ("❌ Exercise 99.2: not quite — your answer [1 ms, 2 ms, 4 ms]: every value is orders of "
                         "magnitude too small.\n"
                         f"   Likely cause: {_slip(1e3, 's')}.")


def test_array_is_judged_value_by_value():
    v = sl.verdict("99.2", [1, 2, 33])
    assert (v.status, v.diagnosis) == ("incorrect", None)
    assert v.message == ("❌ Exercise 99.2: not quite — your answer [1 s, 2 s, 33 s]: value 1 is right, value 2 is "
                         "right, value 3 is twice to ten times too large.")


def test_array_of_the_wrong_length_says_what_was_expected():
    assert sl.verdict("99.2", [1, 2]).message == "❌ Exercise 99.2: expected 3 values, got 2: [1, 2]."


def test_array_answer_correct():
    assert sl.verdict("99.2", np.array([1.0, 2.0, 4.0])).status == "correct"


# ---------------------------------------------------------------------------
# choices


def test_choice_right_ignores_case_and_spaces():
    v = sl.verdict("99.3", " Memory")
    assert (v.status, v.message) == ("correct", "✅ Exercise 99.3: correct — 'memory'.")  # no reason registered


def test_choice_wrong():
    v = sl.verdict("99.3", "compute")
    assert (v.status, v.message) == ("incorrect", "❌ Exercise 99.3: not quite — 'compute' is not the right choice.")


def test_choice_not_among_choices_lists_them():
    assert sl.verdict("99.3", "disk").message == "❌ Exercise 99.3: 'disk' is not one of the choices 'compute', 'memory'."


# ---------------------------------------------------------------------------
# functions


def test_function_agreeing_on_all_cases_is_correct():
    v = sl.verdict("99.4", lambda B, D: 2 * B * D)
    assert v.message == "✅ Exercise 99.4: correct — your function agrees with the reference on all 2 cases."


def test_function_wrong_on_one_case_names_that_case():
    # right on the first case, half on the second: no slip of the method gives that, so none is named
    v = sl.verdict("99.4", lambda B, D: 2 * B * D if B == 1 else B * D)
    assert v.status == "incorrect"
    assert v.message == "❌ Exercise 99.4: not quite for B=3, D=4 — your answer 12 FLOP is twice to ten times too small."
    assert v.diagnosis is None


def test_a_functions_slip_is_named_only_where_it_gives_every_case():
    v = sl.verdict("99.4", lambda B, D: B * D)  # a multiply-add counted as 1 FLOP: half on every case
    assert v.diagnosis == _slip(2.0, "FLOP") and f"Likely cause: {_slip(2.0, 'FLOP')}." in v.message
    assert sl.verdict("99.4", lambda B, D: 2).diagnosis is None  # a constant: half on one case only
    assert sl.verdict("99.4", lambda B, D: 4 * B * D).diagnosis is None  # a multiply-add is never 4 FLOPs


def test_function_still_raising_not_implemented_is_not_attempted():
    def stub(B, D):
        raise NotImplementedError("write your solution here")

    v = sl.verdict("99.4", stub)
    assert (v.status, v.message) == (
        "not attempted", "⬜ Exercise 99.4: not attempted (your function still raises NotImplementedError).")


def test_function_raising_another_error_is_incorrect_and_names_it():
    def buggy(B, D):
        raise ValueError("boom")

    v = sl.verdict("99.4", buggy)
    assert (v.status, v.message) == (
        "incorrect", "❌ Exercise 99.4: your function raised ValueError: boom when called with B=1, D=2.")


# ---------------------------------------------------------------------------
# not attempted, unknown ids, check itself


@pytest.mark.parametrize("exercise", ["99.1", "99.2", "99.3", "99.4"])
def test_none_is_not_attempted(exercise):
    v = sl.verdict(exercise, None)
    assert (v.status, v.message) == ("not attempted", f"⬜ Exercise {exercise}: not attempted.")


def test_unknown_exercise_lists_known_ids_and_suggests_the_closest(registry):
    registry.clear()
    register(Exercise("99.1", "a", lambda: 1.0))
    register(Exercise("12.34", "b", lambda: 1.0))
    with pytest.raises(sl.UnknownNameError) as err:
        sl.verdict("99.10", 1.0)
    assert str(err.value) == "unknown exercise '99.10': expected one of 12.34, 99.1; did you mean '99.1'?"
    assert isinstance(err.value, sl.ScalelibError)


@pytest.mark.parametrize("answer", ["abc", {"a": 1}, [1, 2, 3, 4], float("nan"), object()])
def test_check_never_raises_on_a_bad_answer_and_prints_the_verdict(answer, capsys):
    sl.check("99.1", answer)
    out = capsys.readouterr().out
    assert out.startswith("❌ Exercise 99.1: ")
    assert out == sl.verdict("99.1", answer).message + "\n"


def test_check_prints_for_a_function_that_raises(capsys):
    sl.check("99.4", lambda B, D: 1 / 0)
    assert capsys.readouterr().out == (
        "❌ Exercise 99.4: your function raised ZeroDivisionError: division by zero when called with B=1, D=2.\n")


def test_check_in_ipython_displays_the_verdict_as_json(monkeypatch):
    """The contract `scalelib grade` relies on: text/plain plus the verdict MIME bundle."""
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.append((objs, kw)))
    sl.check("99.1", 8000)
    v = sl.verdict("99.1", 8000)
    # the exact relative error is left out: with the answer it gives the reference away
    shown_json = {k: x for k, x in v.to_json().items() if k != "rel_error"}
    assert shown == [(({"text/plain": v.message},), {"metadata": {VERDICT_KEY: shown_json}, "raw": True})]
    assert v.to_json() == {"exercise": "99.1", "status": "incorrect", "message": v.message, "rel_error": 7.0,
                           "diagnosis": _slip(8.0)}


# ---------------------------------------------------------------------------
# what the checker refuses to guess


def test_an_exercise_id_must_be_a_string():
    # 1.10 as a float is 1.1: the checker must not grade exercise 1.1 instead.
    with pytest.raises(sl.InvalidValueError, match=r"^`exercise_id` must be a string such as '1.10', got 1.1 "
                       r"\(a float drops trailing zeros: 1.10 reads as 1.1\)$"):
        sl.check(1.10, 240)


def test_a_bool_is_not_a_number():
    v = sl.verdict("99.1", True)
    assert (v.status, v.message) == (
        "incorrect", "❌ Exercise 99.1: expected a number in B, got bool True (True and False are not numbers).")


def test_ellipsis_means_not_attempted():
    assert sl.verdict("99.1", ...).status == "not attempted"
    assert sl.verdict("99.1", None).status == "not attempted"


def test_an_answer_exactly_at_the_tolerance_is_correct(registry):
    # Reference 4 and rtol 1/4 are exact in binary: 5 is exactly at the edge, 5 + 1e-6 beyond it
    # (the edge itself is widened by a relative 1e-9, so that floating-point noise never decides).
    register(Exercise("99.9", "edge", lambda: 4.0, rtol=0.25))
    assert sl.verdict("99.9", 5.0).status == "correct"
    assert sl.verdict("99.9", 3.0).status == "correct"
    assert sl.verdict("99.9", 5.0 + 1e-6).status == "incorrect"


def test_exercises_of_a_chapter_need_a_chapter_number():
    with pytest.raises(sl.InvalidValueError, match=r"^`chapter` must be a chapter number \(1 to 12\), got '1'$"):
        sl.exercises("1")


# ---------------------------------------------------------------------------
# counts: whole numbers, exact (integer=True), or inside a range the question states (accept=)


def _count(**kw):
    register(Exercise("99.10", "chips that hold it", lambda: 237.0, unit="chips", integer=True, **kw))


def test_a_count_takes_only_its_exact_whole_number(registry):
    _count()
    assert sl.verdict("99.10", 237).message == "✅ Exercise 99.10: correct — 237 chips (exactly)."
    assert sl.verdict("99.10", 237.0).status == "correct"
    assert sl.verdict("99.10", np.int64(237)).status == "correct"
    for near in (236, 238, 235, 239):  # all within rtol = 1%: a count is never judged with a tolerance
        v = sl.verdict("99.10", near)
        side = "too small" if near < 237 else "too large"
        assert v.message == f"❌ Exercise 99.10: not quite — your answer {near} chips is close but {side}: a count is exact."
    assert "a few percent too small" in sl.verdict("99.10", 230).message  # 3% off: no longer 'close'
    big = register(Exercise("99.12", "tokens", lambda: 13136.0, unit="tokens", integer=True))
    assert sl.verdict(big.id, 13136).message == "✅ Exercise 99.12: correct — 13136 tokens (exactly)."  # in full


def test_a_count_names_a_slip_a_fraction_of_a_percent_away(registry):
    # 13,134 for 13,136 is inside any tolerance, but a count is matched exactly: its slip can be named
    register(Exercise("99.13", "rows", lambda: 13136.0, unit="tokens", integer=True,
                      mistakes={13134 / 13136: "a batch that is not a multiple of the 4 devices"}))
    assert "Likely cause: a batch that is not a multiple" in sl.verdict("99.13", 13134).message
    assert "Likely cause" not in sl.verdict("99.13", 13135).message


def test_a_count_refuses_a_fraction_saying_a_count_is_whole(registry):
    _count()
    for answer in (236.4, 80.5, 237.2):
        v = sl.verdict("99.10", answer)
        assert v.status == "incorrect"
        assert v.message == (f"❌ Exercise 99.10: your answer {answer:g} chips is not a whole number; a count is a "
                             f"whole number (round it the way the question asks).")
    assert sl.verdict("99.10", 237 + 1e-12).status == "correct"  # floating-point noise on a whole number


def test_a_list_of_counts_is_checked_value_by_value(registry):
    register(Exercise("99.11", "slices", lambda: np.array([16.0, 8.0, 4.0]), unit="chips", integer=True))
    assert sl.verdict("99.11", [16, 8, 4]).status == "correct"
    v = sl.verdict("99.11", [16, 8, 4.5])
    assert v.message == ("❌ Exercise 99.11: value 3 of your answer (4.5 chips) is not a whole number; a count is a "
                         "whole number (round it the way the question asks).")
    assert sl.verdict("99.11", [16, 8, 5]).message.endswith("value 1 is right, value 2 is right, value 3 is tens of "
                                                           "percent too large.")


def test_a_count_s_slip_is_named_for_its_value_rounded_either_way(registry):
    _count(mistakes={200.3 / 237: "you left out the checkpoints"})
    for answer in (200, 201):
        assert sl.verdict("99.10", answer).diagnosis == "you left out the checkpoints"
    assert sl.verdict("99.10", 199).diagnosis is None


def test_a_range_the_question_states_is_accepted_end_to_end(registry):
    register(Exercise("99.12", "a batch between", lambda: 42.0, unit="sequences", integer=True, accept=(40, 43)))
    for answer in (40, 41, 42, 43):
        v = sl.verdict("99.12", answer)
        assert v.status == "correct" and "(inside the range the question allows)" in v.message
    for answer in (39, 44):
        assert sl.verdict("99.12", answer).status == "incorrect"
    assert "not a whole number" in sl.verdict("99.12", 41.5).message
    register(Exercise("99.13", "a time between", lambda: 0.015, unit="s", accept=(0.012, 0.015)))
    assert sl.verdict("99.13", 0.0121).status == "correct"
    assert sl.verdict("99.13", 0.0151).status == "incorrect"  # within rtol, but past the stated end


@pytest.mark.parametrize("kw, message", [
    (dict(reference=lambda: 236.4, integer=True), "`integer=True` but the reference is not a whole number"),
    (dict(reference=lambda: 42.0, accept=(43, 50)), "is not inside `accept`"),
    (dict(reference=lambda: 42.0, accept=(50, 43)), "`accept` must be (low, high)"),
    (dict(reference=lambda: 2.0, involves={"dtypes"}), "`involves` takes quantities among"),
    (dict(reference=lambda: "a", kind="choice", choices=("FSDP+TP", "fsdp and tp")), "two choices read the same"),
    (dict(reference=lambda: "a", kind="choice", choices=("a", "b"), integer=True), "`integer` and `accept` are for"),
])
def test_the_answer_key_s_forms_are_checked_at_registration(registry, kw, message):
    with pytest.raises(sl.InvalidValueError, match=re.escape(message)):
        register(Exercise("99.20", "bad", **kw))


# ---------------------------------------------------------------------------
# choices: the obvious spellings, never another choice


@pytest.mark.parametrize("choices, right, spellings", [
    (("FSDP+TP", "FSDP", "TP"), "FSDP+TP", ["FSDP+TP", "fsdp + tp", "FSDP and TP", "Fsdp & Tp", " fsdp+TP "]),
    (("AllGather", "ReduceScatter", "AllReduce"), "ReduceScatter",
     ["Reduce-Scatter", "ReduceScatter", "reduce scatter", "reduce_scatter", "REDUCE-SCATTER"]),
    (("A[I_X, J_X]", "A[I_X, J]", "A[I, J_X]"), "A[I_X, J_X]", ["A[I_X,J_X]", "A[I_X, J_X]", "a[i_x , j_x]"]),
])
def test_a_choice_accepts_the_obvious_spellings_of_itself_only(registry, choices, right, spellings):
    register(Exercise("99.14", "which", lambda: right, kind="choice", choices=choices))
    for spelling in spellings:
        assert sl.verdict("99.14", spelling).status == "correct", spelling
    for other in choices:
        if other != right:
            assert sl.verdict("99.14", other).status == "incorrect"
            assert sl.verdict("99.14", other.lower().replace("_", " ")).status == "incorrect"
    assert "is not one of the choices" in sl.verdict("99.14", "FSDP or TP").message


# ---------------------------------------------------------------------------
# a 1x1 array is one number


@pytest.mark.parametrize("answer", [np.array([[1000.0]]), [[1000.0]], np.array([[[1000.0]]]), ([1000],)])
def test_a_one_by_one_array_is_one_number(answer):
    assert sl.verdict("99.1", answer).status == "correct"


def test_a_column_is_still_not_one_number():
    assert "nested list" in sl.verdict("99.1", [[1000.0], [1000.0]]).message


def test_a_one_element_list_is_graded_as_a_list_where_a_list_is_expected():
    from scalelib.course.record import describe
    from scalelib.course.verdict import decode
    register(Exercise("99.31", "one byte count, as a list", lambda: np.array([1000.0]), unit="B"))
    register(Exercise("99.32", "two byte counts", lambda: np.array([1000.0, 3000.0]), unit="B"))
    assert sl.verdict("99.31", [1000.0]).status == "correct"
    assert sl.verdict("99.31", np.array([1000.0])).message == \
        "✅ Exercise 99.31: correct — [1 kB] (within 1% of the reference)."
    # a bare number is not the list asked for; the message says a list of one value
    assert sl.verdict("99.31", 1000.0).message == \
        "❌ Exercise 99.31: expected 1 value (a list such as [x]), got one number, 1000."
    wrong = sl.verdict("99.31", [2000.0])
    assert wrong.status == "incorrect" and "your answer [2 kB]: value 1 is" in wrong.message
    assert sl.verdict("99.32", [1000.0]).message == "❌ Exercise 99.32: expected 2 values, got 1: [1000.0]."
    # the grader reads a recorded list back as an array: the same verdict, the same words
    for eid, answer in [("99.31", [1000.0, 1000.0]), ("99.32", [np.float64(1000.0)]), ("99.31", [[1000.0]]),
                        ("99.32", np.array([1000.0]))]:
        serial = sl.verdict(eid, answer)
        graded = sl.verdict(eid, decode(describe(answer)))
        assert (graded.status, graded.message) == (serial.status, serial.message)
        assert "array(" not in serial.message and "float64" not in serial.message
    assert sl.verdict("99.31", [1000.0, 1000.0]).message == "❌ Exercise 99.31: expected 1 value, got 2: [1000.0, 1000.0]."


# ---------------------------------------------------------------------------
# common slips about a quantity: only where the exercise involves it; slips of the same value named together


def test_a_common_slip_about_a_quantity_fires_only_where_the_exercise_involves_it(registry):
    register(Exercise("99.15", "a time with no dtype", lambda: 1.0, unit="s"))
    register(Exercise("99.16", "a compute time", lambda: 1.0, unit="s", involves={"flops"}))
    register(Exercise("99.17", "bytes with no dtype", lambda: 1000.0, unit="B", involves=set()))
    assert sl.verdict("99.15", 2.0).diagnosis is None
    assert sl.verdict("99.16", 2.0).diagnosis is None  # a multiply-add counted as 1 FLOP only shrinks a count
    assert sl.verdict("99.16", 0.5).diagnosis == _slip(2.0, "FLOP")
    assert sl.verdict("99.17", 2000.0).diagnosis is None
    assert sl.verdict("99.17", 8000.0).diagnosis == _slip(8.0)  # about how bytes are written: by the unit
    assert sl.verdict("99.1", 2000.0).diagnosis == _slip(2.0, "B")  # B involves dtype unless it says otherwise
    assert _check.involved(registry["99.15"]) == frozenset() and _check.involved(registry["99.1"]) == {"dtype"}


def test_two_slips_of_the_same_value_are_both_named(registry):
    register(Exercise("99.18", "a time", lambda: 1.0, unit="s", involves={"dtype", "bandwidth"},
                      mistakes={0.5: "you read the bidirectional figure", 0.5000001: "you took the int8 size"}))
    v = sl.verdict("99.18", 0.5)
    dtype = next(s.text for s in COMMON_SLIPS if s.about == "dtype")
    bandwidth = next(s.text for s in COMMON_SLIPS if s.about == "bandwidth")
    # registered slips come first: the common ones of the same value are named only where none is registered
    assert v.diagnosis == "you read the bidirectional figure. Or: you took the int8 size"
    assert v.message.endswith(f"\n   Likely cause: {v.diagnosis}.")
    assert sl.verdict("99.18", 2.0).diagnosis == f"{dtype}. Or: {bandwidth}"  # the registered ones: one way only


def test_the_dtype_hint_names_a_peak_only_where_a_rate_is_involved(registry):
    register(Exercise("99.22", "bytes", lambda: 1000.0, unit="B"))
    register(Exercise("99.23", "a time", lambda: 1.0, unit="s", involves={"flops", "peak"}))
    register(Exercise("99.24", "a time", lambda: 1.0, unit="s", involves={"dtype", "peak"}))
    assert "FLOP" not in sl.verdict("99.22", 2000.0).diagnosis
    assert sl.verdict("99.23", 2.0).diagnosis == "a factor of 2: check the chip's peak FLOP/s at the question's precision"
    assert "multiply-add" in sl.verdict("99.23", 0.5).diagnosis and "peak" in sl.verdict("99.23", 0.5).diagnosis
    both = sl.verdict("99.24", 2.0).diagnosis
    assert "bytes per value" in both and "peak FLOP/s" in both and "Or:" not in both  # one text, not two


def test_a_common_slip_about_a_quantity_changes_every_value_of_a_list(registry):
    register(Exercise("99.25", "two byte counts", lambda: np.array([1000.0, 3000.0]), unit="B"))
    assert sl.verdict("99.25", [2000.0, 6000.0]).diagnosis == _slip(2.0, "B")
    assert sl.verdict("99.25", [1000.0, 6000.0]).diagnosis is None  # a precision would change both
    assert sl.verdict("99.25", [1000.0, 3e6]).diagnosis == _slip(1e3, "B")  # how one value is written: by value


def test_a_registered_slip_of_another_value_hides_a_common_one(registry):
    # 1.99 and 2 are both within the slip tolerance of an answer of 1.995: the registered slip is named alone
    register(Exercise("99.19", "bytes", lambda: 1000.0, unit="B", mistakes={1.99: "you counted the header twice"}))
    assert sl.verdict("99.19", 1995.0).diagnosis == "you counted the header twice"
    assert sl.verdict("99.19", 2005.0).diagnosis == "you counted the header twice"
    assert sl.verdict("99.19", 2015.0).diagnosis == _slip(2.0)  # past the registered slip's value, not the common one


def test_a_slip_of_every_value_is_named_only_where_it_gives_every_value(registry):
    register(Exercise("99.21", "two times", lambda: np.array([1.0, 3.0]), unit="s", mistakes={
        1.37: "you used the wrong chip", (1.0, 2.5): "you counted the second pass twice"}))
    both = sl.verdict("99.21", [1.37, 3 * 1.37])
    assert both.diagnosis == "you used the wrong chip"
    one = sl.verdict("99.21", [1.37, 3.0])  # the chip slip would change both values
    assert one.diagnosis is None, one.message
    second = sl.verdict("99.21", [1.0, 7.5])
    assert second.diagnosis == "you counted the second pass twice"
