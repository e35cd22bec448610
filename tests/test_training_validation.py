"""scalelib's training cost model against published runs: Llama 3 405B on 8,192 and 16,384 H100s, three of
Megatron-LM's GPT models on A100s, PaLM 540B on TPU v4 (scalelib/data/training_runs.toml).

The cost model runs every chip at its peak and overlaps communication wherever compute covers it, so its
utilisation is an upper bound that every measured run must fall below; each error is held within the bound
it has today, so a change that makes a prediction worse fails here."""

import pytest

import scalelib as sl

#: predicted / reported − 1 of each run today, rounded up: a prediction may get better, not worse.
BOUNDS = {
    "llama3-405b-8k-h100": 0.54,     # 66% predicted against 43%: kernels below peak, remat where Meta had none
    "llama3-405b-16k-h100": 0.47,    # 60% against 41%
    "megatron-1t-a100": 0.82,        # 94% against 52%: 512 microbatches hide the bubble; kernels do not reach peak
    "megatron-530b-a100": 0.70,      # 88% against 52%
    "megatron-146b-a100": 1.02,      # 95% against 47%
    "palm-540b-tpu-v4": 0.63,        # 75% against 46.2%: one pod, TP over 12 chips with its activations
}


def test_every_run_has_a_bound_a_source_and_at_least_three_publishers():
    runs = sl.training_runs()
    assert {r.name for r in runs} == set(BOUNDS)
    assert len({r.url for r in runs}) >= 3
    for r in runs:
        assert r.url.startswith("https://arxiv.org/") and r.source and r.date and r.config
        assert r.quantity in ("mfu", "hfu") and 0 < r.reported < 1
        assert r.checked, f"{r.name}: say where its figures were read"


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_prediction_error_stays_within_its_bound(name):
    assert abs(sl.training_prediction_error(name)) <= BOUNDS[name]


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_no_published_run_beats_the_cost_models_bound(name):
    assert sl.predict_training_run(name) > next(r for r in sl.training_runs() if r.name == name).reported


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_the_published_axes_are_kept_and_the_plan_fits(name):
    r = next(r for r in sl.training_runs() if r.name == name)
    cost = sl.published_plan_cost(r)
    plan = cost.plan
    assert (plan.data, plan.fsdp, plan.tensor, plan.pipeline) == (r.data, r.fsdp, r.tensor, r.pipeline)
    assert plan.num_chips * r.slices_reported == r.chips and cost.fits
    assert plan.remat in r.remat


def test_the_published_shapes_have_the_published_parameter_counts():
    counts = {"megatron-1t-a100": 1008.0e9, "megatron-530b-a100": 529.6e9, "megatron-146b-a100": 145.6e9,
              "palm-540b-tpu-v4": 540.35e9, "llama3-405b-8k-h100": 405e9}
    for name, published in counts.items():
        r = next(r for r in sl.training_runs() if r.name == name)
        assert sl.params(r.spec) == pytest.approx(published, rel=0.01)


def test_halving_the_batch_per_replica_costs_utilisation_as_meta_reports():
    # Meta: 43% on 8,192 GPUs, 41% on 16,384 with the same 16M-token batch (half the batch per DP group)
    assert sl.predict_training_run("llama3-405b-8k-h100") > sl.predict_training_run("llama3-405b-16k-h100")


def test_bad_input_is_refused_clearly():
    with pytest.raises(sl.UnknownNameError, match="llama3-405b-8k-h100"):
        sl.predict_training_run("llama3-405b-8k-h10")
    with pytest.raises(sl.InvalidValueError, match="`run` must be a TrainingRun"):
        sl.training_prediction_error(42)
