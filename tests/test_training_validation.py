"""scalelib's training cost model against published runs: Llama 3 405B on 8,192 and 16,384 H100s, three of
Megatron-LM's GPT models on A100s, PaLM 540B on TPU v4 (scalelib/data/training_runs.toml).

The cost model runs every chip at its peak and overlaps communication wherever compute covers it, so its
utilisation is an upper bound that every measured run falls below. How far below is not arbitrary, and each
run's prediction / published ratio is held inside a two-sided band:

* the lower edge: no kernel reaches its chip's peak. Large bf16 matmuls reach some 75-80% of it on A100s and
  H100s (and TPU v4), so a run at the bound's own plan could at best come within 1 / 0.8 = 1.25 of it; a
  ratio that falls towards 1 means the model became pessimistic (a term counted twice, a bubble too big,
  a plan refused for memory it does not need);
* the upper edge: these are tuned record runs; what separates them from the bound is listed run by run below
  (kernels below peak, exposed communication, the optimizer step, the embeddings and the loss outside the
  pipeline's stages), and together it accounts for today's ratio within a few percent. A ratio that grows
  past the band means the model became optimistic: a term dropped or halved, a bubble forgotten.

Each band is today's ratio ± 8% (about the spread of the per-run losses the papers give), so a change of the
cost model that moves a published prediction by a tenth fails here and has to come with a new band and a
reason. The figures it is compared with are read here from the data file itself."""

import tomllib
from pathlib import Path

import pytest

import scalelib as sl

#: the published figures, read independently of scalelib's loader
PUBLISHED = {r["name"]: r for r in tomllib.loads(
    (Path(sl.__file__).parent / "data" / "training_runs.toml").read_text())["run"]}

#: prediction / published utilisation: (lowest, highest) accepted, and why the ratio is there
BANDS = {
    # 66% predicted against Meta's 43% MFU: H100 kernels at ~75% of the 989 TFLOP/s peak (x1.33), the rest
    # the pipeline's uneven first and last stages (embeddings, loss) and communication the bound hides
    "llama3-405b-8k-h100": (1.42, 1.66),
    # 60% against 41%: as above, with half the batch per data-parallel group, so a larger bubble on both sides
    "llama3-405b-16k-h100": (1.35, 1.57),
    # 94% against 52% of peak (HFU): 512 microbatches hide the bubble in the bound; Megatron's A100 kernels
    # ran at ~65-70% of the 312 TFLOP/s peak, and TP's all-reduces inside the layer were not overlapped
    "megatron-1t-a100": (1.67, 1.95),
    # 88% against 52%: as the 1T model, with fewer microbatches per stage (35 stages)
    "megatron-530b-a100": (1.56, 1.83),
    # 95% against 47%: the smallest model's matmuls (D = 12,288, TP 8) run furthest below peak
    "megatron-146b-a100": (1.86, 2.18),
    # 75% against 46.2%: TP over 12 chips of one pod, whose activations' collectives PaLM does not fully hide
    "palm-540b-tpu-v4": (1.50, 1.76),
    # 90% against 48% of peak (HFU), another stack (Megatron-DeepSpeed): TP 4 leaves D/t = 3584-wide matmuls
    # below peak, no sequence parallelism, 70 layers over 12 uneven stages (the 250,880-wide embedding on the
    # first and last), and the launch script's CUDA_LAUNCH_BLOCKING=1
    "bloom-176b-a100": (1.72, 2.01),
    # 88%, 85% and 83% against 40%, 39% and 36% (HFU): Megatron-LM's 530B plan (TP 8, PP 35) on DeepSpeed's
    # pipeline engine, at 126 to 113 TFLOP/s where Megatron-LM's own run of the same plan reached 163; the
    # estimate misses it too (MT_NLG below)
    "mtnlg-530b-2240-a100": (2.00, 2.34),
    "mtnlg-530b-2800-a100": (2.02, 2.37),
    "mtnlg-530b-3360-a100": (2.10, 2.46),
}

#: the runs the calibrated estimate misses by more than 15%: Megatron-Turing NLG's three
#: scales, 23-27% fast (their entries say why); held to that two-sided band so a change that widens or hides the
#: miss fails here
MT_NLG = {"mtnlg-530b-2240-a100": (-0.28, -0.19), "mtnlg-530b-2800-a100": (-0.28, -0.19),
          "mtnlg-530b-3360-a100": (-0.31, -0.22)}


def test_every_run_has_a_band_a_source_and_at_least_three_publishers():
    runs = sl.training_runs()
    assert {r.name for r in runs} == set(BANDS) == set(PUBLISHED)
    assert len({r.url for r in runs}) >= 3
    for r in runs:
        assert r.url.startswith("https://arxiv.org/") and r.source and r.date and r.config
        assert r.quantity in ("mfu", "hfu") and 0 < r.reported < 1
        assert r.reported == PUBLISHED[r.name]["reported"]
        assert r.checked, f"{r.name}: say where its figures were read"
    for lo, hi in BANDS.values():
        assert 1.25 <= lo < hi <= lo * 1.2  # above what peak-speed kernels allow, and no wider than ±10%


@pytest.mark.parametrize("name", sorted(BANDS))
def test_the_prediction_over_the_published_figure_stays_in_its_band(name):
    ratio = sl.predict_training_run(name) / PUBLISHED[name]["reported"]
    lo, hi = BANDS[name]
    assert lo <= ratio <= hi, f"{name}: predicted / published = {ratio:.3f}, outside [{lo}, {hi}]"
    assert sl.training_prediction_error(name) == pytest.approx(ratio - 1, rel=1e-9)


@pytest.mark.parametrize("name", sorted(BANDS))
def test_no_published_run_beats_the_cost_models_bound(name):
    assert sl.predict_training_run(name) > PUBLISHED[name]["reported"]


@pytest.mark.parametrize("name", sorted(BANDS))
def test_the_published_axes_are_kept_and_the_plan_fits(name):
    r = next(r for r in sl.training_runs() if r.name == name)
    cost = sl.published_plan_cost(r)
    plan = cost.plan
    assert (plan.data, plan.fsdp, plan.tensor, plan.pipeline) == (r.data, r.fsdp, r.tensor, r.pipeline)
    assert plan.num_chips * r.slices_reported == r.chips and cost.fits
    assert plan.remat in r.remat


def test_the_published_shapes_have_the_published_parameter_counts():
    counts = {"megatron-1t-a100": 1008.0e9, "megatron-530b-a100": 529.6e9, "megatron-146b-a100": 145.6e9,
              "palm-540b-tpu-v4": 540.35e9, "llama3-405b-8k-h100": 405e9,
              "bloom-176b-a100": 176.247e9, "mtnlg-530b-2240-a100": 530e9}   # BLOOM: 176,247M parameters (Le Scao et al. 2022)
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


def test_the_step_time_runs_join_only_when_asked_and_each_beats_no_roofline():
    assert len(sl.training_runs(step_times=True)) == len(sl.training_runs()) + 8 + 13
    # MaxText's runs over several slices join only with multislice=True, after the others
    every = sl.training_runs(step_times=True, multislice=True)
    assert every[:31] == sl.training_runs(step_times=True) and len(every) == 31 + 23
    assert all(r.slices > 1 and r.slices == r.slices_reported for r in every[31:])
    for r in every[31:]:  # the roofline's utilisation counts every chip of every slice
        assert r.reported < sl.predict_training_run(r) <= 1.0, r.name
    assert len(sl.training_runs(multislice=True)) == 10 + 23
    for r in sl.training_runs(step_times=True)[len(sl.training_runs()):]:
        if r.quantity != "step_time":  # MaxText's, published as MFU: the roofline's prediction is a utilisation
            assert r.name.startswith("maxtext-") and r.quantity == "mfu" and r.checked
            assert r.reported < sl.predict_training_run(r) <= 1.0
            continue
        assert r.url == "https://arxiv.org/abs/2205.05198" and r.checked and r.remat in (("full",), ("selective",))
        predicted = sl.predict_training_run(r)           # the roofline's seconds, shorter than measured
        assert 0.3 < predicted / r.reported < 0.7
        assert sl.training_prediction_error(r) == pytest.approx(predicted / r.reported - 1, rel=1e-12)


@pytest.mark.parametrize("name", sorted(BANDS))
def test_the_calibrated_estimate_lands_between_the_roofline_and_a_quarter_past_the_measurement(name):
    cost = sl.published_plan_estimate(name)
    measured = sl.measured_step_time_s(name)
    assert cost.time_s < measured
    lo, hi = MT_NLG.get(name, (-0.25, 0.25))
    assert lo <= cost.estimated_time_s / measured - 1 <= hi


#: the TPU runs the calibrated estimate misses by more than 15%, all slow: four of MaxText's six full-remat runs,
#: which reach more of the chip's peak than the estimate's kernels can (chapter 6; their bands are
#: test_estimate.MAXTEXT_BANDS)
TPU_FULL_REMAT = {"maxtext-512b-v5p-1024", "maxtext-1024b-v5p-4096", "maxtext-16b-v5e-256", "maxtext-32b-v5e-256"}


def test_held_out_runs_are_within_15_percent_but_megatron_turing_nlg_and_four_tpu_full_remat_runs():
    fitted = set(tomllib.loads((Path(sl.__file__).parent / "data" / "estimate.toml").read_text())["kernel"]
                 ["fitted_on"])
    errors = {r.name: sl.estimate_error(r) for r in sl.training_runs(step_times=True) if r.name not in fitted}
    held = {n: abs(e) for n, e in errors.items()}
    assert {n for n, e in held.items() if e > 0.15} == set(MT_NLG) | TPU_FULL_REMAT
    assert all(errors[n] < 0 for n in MT_NLG) and all(errors[n] > 0 for n in TPU_FULL_REMAT)
    # the same model, TP, PP and chips on Megatron-LM's own stack: within 5%
    assert held["megatron-530b-a100"] < 0.05
    others = [e for n, e in held.items() if n not in MT_NLG and n not in TPU_FULL_REMAT]
    assert len(held) == 27 and len(others) == 20 and sum(others) / len(others) < 0.08


def test_an_unpublished_microbatch_count_cuts_each_replicas_sequences_into_whole_ones():
    # Megatron-LM's 530B run: 2,520 sequences a step over 9 data-parallel replicas, 280 each; a count such as 256
    # would put 1.09 sequences in a microbatch, so only counts that divide 280 are tried
    for name in ("megatron-530b-a100", "megatron-146b-a100", "llama3-405b-8k-h100"):
        r = next(x for x in sl.training_runs() if x.name == name)
        sequences = r.B / (r.data * r.fsdp * r.seq_len)
        assert sequences == int(sequences)
        for cost in (sl.published_plan_cost(name), sl.published_plan_estimate(name)):
            assert int(sequences) % cost.plan.microbatches == 0, (name, cost.plan)


def test_chapter_6_quotes_the_estimates_errors_as_the_library_computes_them():
    import json
    import re

    words = {10: "ten", 13: "thirteen", 24: "Twenty-four", 27: "twenty-seven", 31: "thirty-one"}
    nb = json.loads((Path(sl.__file__).parent.parent / "book" / "ch06_llama_training.ipynb").read_text())
    text = re.sub(r"\s+", " ", " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))
    fitted = set(tomllib.loads((Path(sl.__file__).parent / "data" / "estimate.toml").read_text())["kernel"]
                 ["fitted_on"])
    every = {r.name: sl.estimate_error(r) for r in sl.training_runs(step_times=True)}
    held = [abs(e) for n, e in every.items() if n not in fitted]
    util = [every[r.name] for r in sl.training_runs()]
    within = sum(abs(e) <= 0.15 for e in every.values())
    mt = [every[n] for n in MT_NLG]
    # MaxText on TPU: its minimal remat (scalelib's dot_product) and its full remat, told apart by the run's own
    # remat; the hardware FLOPs utilisation counts the recomputed forward at the chip's bf16 peak
    maxtext = [r for r in sl.training_runs(step_times=True) if r.name.startswith("maxtext-")]
    minimal = [every[r.name] for r in maxtext if r.remat == ("dot_product",)]
    slow = [every[r.name] for r in maxtext if r.remat == ("full",) and every[r.name] > 0.15]
    hfu = [sl.train_flops(r.spec, seq_len=r.seq_len, tokens=r.B, remat="full")
           / (sl.measured_step_time_s(r) * r.topology.num_chips * r.topology.spec.peak_flops_per_s())
           for r in maxtext if r.name in TPU_FULL_REMAT]
    v4 = [every[r.name] for r in maxtext if r.chip == "tpu-v4p"]
    v4_hfu = [sl.train_flops(r.spec, seq_len=r.seq_len, tokens=r.B, remat="full")
              / (sl.measured_step_time_s(r) * r.topology.num_chips * r.topology.spec.peak_flops_per_s())
              for r in maxtext if r.chip == "tpu-v4p"]
    assert len(maxtext) == 13 and len(minimal) == 5 and len(slow) == 4 and len(hfu) == 4 and len(v4) == 2
    assert sum(r.remat == ("full",) for r in maxtext) == 8 and all(e > 0 for e in v4)
    assert round(min(v4_hfu), 2) == round(max(v4_hfu), 2) and max(v4_hfu) < 0.79  # below the estimate's ceiling
    constants = tomllib.loads((Path(sl.__file__).parent / "data" / "estimate.toml").read_text())
    ceiling = constants["matmul"]["efficiency"][0] * constants["kernel"]["matmul_scale"]
    assert min(hfu) > ceiling  # what the chapter says: these runs beat the estimate's best kernel
    # "More pods": the v5e runs from one slice to 32, and the v5p runs from one slice to two
    step = {r.name: sl.measured_step_time_s(r) for r in sl.training_runs(step_times=True, multislice=True)
            if r.name.startswith("maxtext-")}
    last = [step[f"{n}-x32"] / step[n] - 1 for n in ("maxtext-16b-v5e-256", "maxtext-32b-v5e-256", "maxtext-64b-v5e-256")]
    second = [step[f"{n}-x2"] / step[n] - 1 for n in step if "v5p" in n and "-x" not in n]
    dcn = []
    for n in step:
        if "v5e" in n and "-x" in n:
            cost = sl.published_plan_estimate(n)
            dcn.append(cost.comms_s["DCN"] / cost.backward_s)
    assert len(last) == 3 and len(second) == 8 and len(dcn) == 15
    for phrase in (f"{words[within]} of the {words[len(every)]} estimates land within 15%",
                   f"over the {words[len(held)]} runs it was not fitted on, the mean error is {sum(held) / len(held):.1%}",
                   f"the other {words[len(held)]} runs are predictions",
                   f"and {words[len(maxtext)]} of Google's MaxText benchmarks on one TPU v5p, v5e or v4 slice",
                   f"The last {words[len(maxtext)]} rows are Google's MaxText benchmarks",
                   f"All {words[len(util)]} runs of the previous section come out fast, by {-max(util):.1%} to "
                   f"{-min(util):.1%}",
                   f"Megatron-DeepSpeed is {-every['bloom-176b-a100']:.1%} fast",
                   f"is {-max(mt):.0%} to {-min(mt):.0%} fast at its three scales",
                   f"where Megatron-LM's run of the same plan is {-every['megatron-530b-a100']:.0%} fast",
                   f"the five estimates are {-max(minimal):.1%} to {-min(minimal):.1%} fast",
                   f"four of the eight come out {min(slow):.0%} to {max(slow):.0%} slow",
                   f"The two v4 runs land {min(v4):.1%} and {max(v4):.1%} slow, at {max(v4_hfu):.0%} of peak",
                   f"as PaLM on the same chips lands within {-every['palm-540b-tpu-v4']:.1%}",
                   f"keep their chips at {min(hfu):.0%} to {max(hfu):.0%} of peak",
                   f"Megatron-LM's kernels: {ceiling:.0%})",
                   f"tops out at {constants['matmul']['efficiency'][0]} of peak, times the "
                   f"{constants['kernel']['matmul_scale']} fitted on",
                   f"the measured step grows by {min(last):.1%} to {max(last):.1%}, while the AllReduce is at most "
                   f"{max(dcn):.1%} of the",
                   f"drifts from {every['maxtext-64b-v5e-256']:.0%} slow on one slice to "
                   f"{-sl.estimate_error('maxtext-64b-v5e-256-x32'):.0%} fast on 32",
                   f"a second slice costs {min(second):.1%} to {max(second):.1%}"):
        assert phrase in text, phrase
    assert all(e < 0 for e in util)
