"""The collective matmul's model (chapter 10) by hand, with the dtype of its arrays: bf16 on the MXU, int32
with a rate the caller gives, and the schedules the book times on a TPU v5e 2x4 (311, 244 and 224 µs)."""

from __future__ import annotations

import pytest

import scalelib as sl

MESH = {"X": 2, "Y": 4}
BOOK = (1024, 2048, 8192)          # the book's B, D, F
W_V5E = 4.5e10                      # TPU v5e: one ICI link, one way (B/s)
C_V5E = 1.97e14                     # TPU v5e: bf16 peak (FLOP/s)


def _by_hand(bytes_per_value, C, schedule, B=1024, D=2048, F=8192, X=2, Y=4, ring=True):
    t_blk = bytes_per_value * (B / X) * (D / Y) / W_V5E
    t_mm = 2 * (B / X) * (D / Y) * (F / Y) / C
    if not ring:     # a line: the AllGather's bytes enter an end chip over one link; both ways = one way
        return {"gather first": (Y - 1) * t_blk + Y * t_mm, "unsplit": Y * t_mm}.get(
            schedule, (Y - 1) * max(t_blk, t_mm) + t_mm)
    return {"gather first": (Y - 1) * t_blk / 2 + Y * t_mm,
            "one way": (Y - 1) * max(t_blk, t_mm) + t_mm,
            "both ways": (Y - 1) * max(t_blk / 2, t_mm) + t_mm,
            "unsplit": Y * t_mm}[schedule]


@pytest.mark.parametrize("schedule", ["gather first", "one way", "both ways", "unsplit"])
def test_bf16_schedules_match_the_formulas_by_hand(schedule):
    got = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule=schedule)
    assert got == pytest.approx(_by_hand(2, C_V5E, schedule), rel=1e-12)


@pytest.mark.parametrize("schedule", ["gather first", "one way", "both ways", "unsplit"])
def test_on_a_line_the_gather_takes_twice_the_ring_and_both_ways_gains_nothing(schedule):
    got = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule=schedule, wraparound=False)
    assert got == pytest.approx(_by_hand(2, C_V5E, schedule, ring=False), rel=1e-12)


def test_on_the_books_line_one_way_beats_gathering_first_even_in_bf16():
    kw = dict(mesh=MESH, wraparound=False)
    assert (sl.collective_matmul_time_s(*BOOK, "tpu-v5e", schedule="one way", **kw)
            < sl.collective_matmul_time_s(*BOOK, "tpu-v5e", schedule="gather first", **kw))


def test_bf16_unsplit_matmul_is_the_chapters_21_8_us():
    assert sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="unsplit") == pytest.approx(
        2 * 512 * 2048 * 2048 / C_V5E)
    assert round(sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="unsplit") * 1e6, 1) == 21.8


def test_bf16_one_way_steps_wait_for_their_transfers_so_it_gains_nothing_over_gathering_first():
    one_way = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="one way")
    first = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="gather first")
    both = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="both ways")
    assert one_way > first > both


def test_int32_sends_four_bytes_a_value_and_multiplies_at_the_rate_given():
    rate = 2e13
    for schedule in ("gather first", "one way", "both ways", "unsplit"):
        got = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule=schedule, dtype="int32",
                                          flops_per_s=rate)
        assert got == pytest.approx(_by_hand(4, rate, schedule), rel=1e-12)


def test_int32_at_the_books_measured_rate_hides_every_transfer():
    """At the rate the book's 224 µs baseline implies, a step's arithmetic outlasts its transfer."""
    rate = 2 * 512 * 2048 * 2048 / 224e-6
    kw = dict(mesh=MESH, dtype="int32", flops_per_s=rate)
    one_way = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", schedule="one way", **kw)
    assert one_way == pytest.approx(224e-6, rel=1e-9)
    assert sl.collective_matmul_time_s(*BOOK, "tpu-v5e", schedule="gather first", **kw) > 250e-6


def test_int32_without_a_rate_is_refused_naming_flops_per_s():
    with pytest.raises(sl.InvalidValueError, match="`flops_per_s`: tpu-v5e publishes no int32 matmul rate"):
        sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, dtype="int32")


def test_int8_takes_the_chips_int8_peak_and_one_byte_a_value():
    got = sl.collective_matmul_time_s(*BOOK, "tpu-v5e", mesh=MESH, schedule="unsplit", dtype="int8")
    assert got == pytest.approx(4 * 2 * 512 * 512 * 2048 / 3.94e14)


def test_the_derivation_names_the_schedule_and_the_dtype():
    text = str(sl.explain(sl.collective_matmul_time_s, *BOOK, "tpu-v5e", mesh=MESH, schedule="both ways"))
    assert "T(both ways, bf16, ring) = (Y − 1)·max(T_blk / 2, T_mm) + T_mm" in text
    assert "T_blk = b·(B/X)·(D/Y) / W = 2·512·512 B / 45 GB/s = 11.7 µs" in text


@pytest.mark.parametrize("kwargs, message", [
    ({"mesh": {"X": 2}}, "`mesh` must name the two axes X and Y"),
    ({"mesh": {"X": 3, "Y": 4}}, "`B` = 1024 does not split into 3 equal blocks over X"),
    ({"mesh": {"X": 2, "Y": 3}}, "`D` = 2048 does not split into 3 equal blocks over Y"),
    ({"mesh": MESH, "schedule": "sideways"}, "`schedule`"),
    ({"mesh": MESH, "flops_per_s": -1.0}, "`flops_per_s`"),
    ({"mesh": MESH, "wraparound": "no"}, "`wraparound`"),
])
def test_bad_inputs_are_refused_naming_the_argument(kwargs, message):
    with pytest.raises(sl.ScalelibError, match=message):
        sl.collective_matmul_time_s(*BOOK, "tpu-v5e", **kwargs)


def test_measure_jax_time_s_gives_the_median_when_asked():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    x = jnp.ones(8)
    assert sl.measure_jax_time_s(jnp.sin, x, repeats=3, statistic="median") > 0
    with pytest.raises(sl.ScalelibError, match="`statistic`"):
        sl.measure_jax_time_s(jnp.sin, x, repeats=1, statistic="mean")
