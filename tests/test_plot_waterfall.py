"""sl.plot_waterfall: the roofline, each loss stacked where the last ended, the estimate, a measurement.

Checked against the numbers it is given (not against its own arithmetic): each bar's start and length in
the axis's unit, the estimate's bar the roofline plus every loss, the measured line where it was put, the
labels with their units; and bad input refused naming the argument.
"""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

import scalelib as sl


def _bars(ax):
    return [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.patches]


def test_a_training_waterfall_stacks_each_loss_where_the_last_ended():
    cost = sl.published_plan_estimate("korthikanti-175b-selective")
    measured = sl.measured_step_time_s("korthikanti-175b-selective")
    ax = sl.plot_waterfall(cost.time_s, cost.losses_s, measured_s=measured, what="training step")
    bars = _bars(ax)
    assert len(bars) == 1 + len(sl.LOSSES) + 1
    assert ax.get_xlabel() == "time per training step (s)"  # 13 s: the axis reads in seconds
    left = [b[0] for b in bars]
    width = [b[2] for b in bars]
    assert left[0] == 0 and width[0] == pytest.approx(cost.time_s)
    running = cost.time_s
    for (name, t), x, w in zip(cost.losses_s.items(), left[1:], width[1:]):
        assert x == pytest.approx(running) and w == pytest.approx(t), name
        running += t
    assert left[-1] == 0 and width[-1] == pytest.approx(cost.estimated_time_s, rel=1e-12)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["roofline"] + [n.replace("_", " ") for n in sl.LOSSES] + ["estimate"]
    (line,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert line.get_xdata()[0] == pytest.approx(measured)
    texts = [t.get_text() for t in ax.texts]
    assert sl.fmt(cost.time_s, "s") in texts and sl.fmt(cost.estimated_time_s, "s") in texts
    plt.close(ax.figure)


def test_an_inference_waterfall_stands_upright_in_milliseconds_on_given_axes():
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    ax = sl.plot_waterfall(0.01066, {"kernel_efficiency": 0.0012, "kernel_overhead": 0.0036,
                                     "tensor_collectives": 0.0032}, measured_s=0.01858, orientation="vertical",
                           ax=axes[1])
    assert ax is axes[1] and not axes[0].patches
    assert ax.get_ylabel() == "time per step (ms)"
    bottoms, heights = [b[1] for b in _bars(ax)], [b[3] for b in _bars(ax)]
    np.testing.assert_allclose(bottoms, [0, 10.66, 11.86, 15.46, 0])
    np.testing.assert_allclose(heights, [10.66, 1.2, 3.6, 3.2, 18.66])
    plt.close(fig)


@pytest.mark.parametrize("kw, arg", [
    (dict(roofline_s=-1.0, losses={}), "roofline_s"),
    (dict(roofline_s=1.0, losses=[0.1, 0.2]), "losses"),
    (dict(roofline_s=1.0, losses={"tensor_collectives": -0.1}), "losses['tensor_collectives']"),
    (dict(roofline_s=1.0, losses={}, orientation="diagonal"), "orientation"),
    (dict(roofline_s=1.0, losses={}, measured_s=0.0), "measured_s"),
])
def test_bad_input_is_refused_naming_the_argument(kw, arg):
    with pytest.raises((sl.InvalidValueError, sl.UnknownNameError), match="^" + re.escape(f"`{arg}`")):
        sl.plot_waterfall(**kw)
