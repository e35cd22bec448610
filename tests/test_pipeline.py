"""Pipeline schedules simulated op by op, against their closed forms and the Megatron-LM papers' figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings, strategies as st

import scalelib as sl


@settings(max_examples=120, deadline=None)
@given(p=st.integers(1, 8), groups=st.integers(1, 4), v=st.integers(1, 4), schedule=st.sampled_from(sl._pipeline.SCHEDULES))
def test_the_simulated_bubble_and_peak_memory_are_the_closed_forms(p, groups, v, schedule):
    m = p * groups
    v = v if schedule == "interleaved" else 1
    sim = sl.pipeline_schedule(p, m, schedule=schedule, virtual_stages=v)
    assert sim.bubble_fraction == pytest.approx(sl.pipeline_bubble_fraction(p, m, virtual_stages=v), abs=1e-12)
    assert sim.peak_activations == pytest.approx(
        sl.pipeline_peak_activations(p, m, schedule=schedule, virtual_stages=v), abs=1e-12)


def test_gpipe_and_1f1b_idle_alike_but_1f1b_holds_only_p_microbatches():
    gpipe, one = sl.pipeline_schedule(8, 32, schedule="gpipe"), sl.pipeline_schedule(8, 32)
    assert gpipe.bubble_fraction == one.bubble_fraction == pytest.approx(7 / 39)
    assert (gpipe.peak_activations, one.peak_activations) == (32, 8)


def test_interleaving_cuts_the_bubble_v_times_as_narayanan_et_al_2021_state():
    # Megatron-LM (2021): the bubble's time is (p - 1)·(t_f + t_b) without interleaving, (p - 1)/v · (t_f + t_b) with it.
    p, m = 4, 16
    for v in (1, 2, 4):
        sim = sl.pipeline_schedule(p, m, schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v)
        ideal = m * 3.0
        assert sim.time - ideal == pytest.approx((p - 1) / v * 3.0)


def test_interleaved_peak_memory_is_korthikanti_et_als_factor():
    # Korthikanti et al. (2022): the first stage holds p·(1 + (p - 1)/(p·v)) microbatches' activations.
    for p, v in ((4, 2), (8, 2), (8, 4), (16, 2)):
        assert sl.pipeline_schedule(p, 2 * p, schedule="interleaved", virtual_stages=v).peak_activations == (
            pytest.approx(p * (1 + (p - 1) / (p * v))))


def test_every_op_waits_for_its_input():
    sim = sl.pipeline_schedule(4, 8, schedule="interleaved", virtual_stages=2)
    end = {(op.kind, op.microbatch, op.chunk * 4 + op.stage): op.end for op in sim.ops}
    for op in sim.ops:
        vs = op.chunk * 4 + op.stage
        if op.kind == "F" and vs:
            assert op.start >= end[("F", op.microbatch, vs - 1)]
        if op.kind == "B":
            assert op.start >= end[("B", op.microbatch, vs + 1)] if vs < 7 else op.start >= end[("F", op.microbatch, 7)]
    assert len(sim.ops) == 2 * 4 * 8 * 2


def test_the_gantt_chart_draws_a_box_per_op_with_labelled_axes():
    ax = sl.plot_pipeline_schedule(4, 8, schedule="interleaved", virtual_stages=2)
    assert len(ax.patches) == 2 * 4 * 8 * 2
    assert ax.get_ylabel() == "pipeline stage" and "bubble" in ax.get_title()
    plt.close("all")


def test_bad_schedules_are_refused_with_the_reason():
    with pytest.raises(sl.InvalidValueError, match=r"^`microbatches`: the interleaved schedule runs microbatches in "
                                                   r"groups of p = 4 .* got 6$"):
        sl.pipeline_schedule(4, 6, schedule="interleaved", virtual_stages=2)
    with pytest.raises(sl.InvalidValueError, match=r"^`virtual_stages`: only the interleaved schedule"):
        sl.pipeline_schedule(4, 8, schedule="gpipe", virtual_stages=2)
    with pytest.raises(sl.UnknownNameError, match=r"^`schedule`: unknown pipeline schedule 'zb'"):
        sl.pipeline_schedule(4, 8, schedule="zb")
    with pytest.raises(sl.InvalidValueError, match=r"p·m·v = 40000 ops per pass .* is more than it draws \(20000\)"):
        sl.pipeline_schedule(100, 400)
    with pytest.raises(sl.InvalidValueError, match=r"p·m·v = 20400 ops per pass"):
        sl.pipeline_schedule(10, 340, schedule="interleaved", virtual_stages=6)


def test_only_the_interleaved_schedule_needs_microbatches_in_groups_of_p():
    # GPipe and 1F1B run any number of microbatches: 6 on 4 stages idles (p − 1)/(m + p − 1) = 3/9
    for schedule in ("gpipe", "1f1b"):
        assert sl.pipeline_schedule(4, 6, schedule=schedule).bubble_fraction == pytest.approx(1 / 3)
    with pytest.raises(sl.InvalidValueError, match="m must be a multiple of 4, got 6"):
        sl.pipeline_schedule(4, 6, schedule="interleaved", virtual_stages=2)


def test_the_gantt_charts_backward_boxes_are_twice_a_forwards_by_default():
    ax = sl.plot_pipeline_schedule(2, 2, schedule="gpipe")
    widths = sorted({round(patch.get_width(), 9) for patch in ax.patches})
    assert widths == [1.0, 2.0] and ax.get_xlim() == (0.0, 2 * 3.0 + 3.0)  # (m + p − 1)·(1 + 2) time units
    assert {patch.get_linewidth() for patch in ax.patches} == {0.4}  # thin outlines
    plt.close("all")


def test_every_box_a_quarter_stage_wide_still_gets_its_label():
    # interleaved with v = 4: a forward's box is 1/4 wide, room enough for a one-digit microbatch and its chunk
    ax = sl.plot_pipeline_schedule(4, 8, schedule="interleaved", virtual_stages=4)
    assert len(ax.texts) == len(ax.patches) == 2 * 4 * 8 * 4
    assert {t.get_text() for t in ax.texts} == {f"{i}.{c}" for i in range(8) for c in range(4)}
    plt.close("all")
