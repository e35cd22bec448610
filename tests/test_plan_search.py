"""The plan search: the vectorised path equals the per-plan reference exactly; what it finds, and how fast."""


import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import scalelib as sl

TINY_MOE = sl.ModelSpec(name="tiny-moe", L=8, D=1024, F=2048, N=16, K=4, H=64, V=32000, E=8, k=2)
CLUSTERS = [
    (sl.gpu_cluster(1, "h100"), 1), (sl.gpu_cluster(4, "h100"), 1), (sl.gpu_cluster(2, "gb200-nvl72"), 1),
    (sl.tpu_slice((4, 4, 4), "tpu-v5p"), 1), (sl.tpu_slice((4, 4, 8), "tpu-v5p"), 2),
    (sl.tpu_slice((8, 8), "tpu-v5e"), 1), (sl.tpu_slice((2, 4), "tpu-v5e"), 1),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["llama-3-8b", "llama-2-13b", "mixtral-8x7b", TINY_MOE]),
       cluster=st.sampled_from(CLUSTERS), log_batch=st.integers(17, 24), seq_len=st.sampled_from([512, 2048, 8192]),
       remat=st.sets(st.sampled_from(["none", "dot_product", "full"]), min_size=1),
       max_mb=st.sampled_from([1, 4, 32]), pipeline=st.booleans(), hbm=st.sampled_from([None, 24e9, 500e9]),
       efficiency=st.sampled_from([1.0, 0.55]))
def test_the_vectorised_search_agrees_with_the_reference_loop_to_the_last_bit(model, cluster, log_batch, seq_len,
                                                                              remat, max_mb, pipeline, hbm, efficiency):
    topology, slices = cluster
    kw = dict(seq_len=seq_len, slices=slices, remat=tuple(sorted(remat)), max_microbatches=max_mb,
              pipeline=pipeline, hbm_bytes=hbm, efficiency=efficiency)
    results = []
    for method in ("numpy", "loop"):
        try:
            results.append(sl.search_plans(model, 2**log_batch, topology, method=method, **kw))
        except sl.InvalidValueError as err:
            results.append(str(err))
    fast, slow = results
    if isinstance(fast, str) or isinstance(slow, str):
        assert fast == slow  # both find that nothing fits, with the same message
        return
    np.testing.assert_array_equal(fast.step_times_s, slow.step_times_s)
    np.testing.assert_array_equal(fast.memory_bytes, slow.memory_bytes)
    assert fast.best.plan == slow.best.plan and fast.legal == slow.legal
    assert [c.plan for c, _ in fast.runners_up] == [c.plan for c, _ in slow.runners_up]


def test_the_search_prices_each_plan_as_training_cost_does():
    topo = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    found = sl.search_plans("llama-3-8b", 2**20, topo, seq_len=4096, method="numpy", rank="roofline")
    g = found.grid
    legal = np.flatnonzero(np.isfinite(found.step_times_s))
    for i in legal[:: max(1, legal.size // 40)]:
        plan = sl._plan_search._plan_at(g, int(i))
        cost = sl.training_cost("llama-3-8b", 2**20, plan, topo, seq_len=4096)
        assert cost.time_s == found.step_times_s[i] and cost.memory_bytes["total"] == found.memory_bytes[i]
    fits = np.isfinite(found.step_times_s) & (found.memory_bytes <= topo.spec.hbm_bytes)
    assert found.best.time_s == found.step_times_s[fits].min()
    # of the plans that tie for the fastest, the one needing the least memory
    fastest = fits & (found.step_times_s == found.step_times_s[fits].min())
    assert found.best.memory_bytes["total"] == found.memory_bytes[fastest].min()
    # each runner-up says how much slower it is than the best
    for cost, why in found.runners_up:
        if why.split(":")[0].endswith("slower"):
            assert why.startswith(f"{cost.time_s / found.best.time_s - 1:.0%} slower: ")


def test_the_search_prices_plans_across_slices_as_training_cost_does():
    # two 4x4x4 v5p slices over DCN, a batch small enough for DCN's AllReduce to bind in some plans
    topo = sl.tpu_slice((4, 4, 4), "tpu-v5p")
    found = sl.search_plans("llama-3-8b", 2**15, topo, seq_len=256, slices=2, method="numpy", pipeline=False)
    g = found.grid
    legal = np.flatnonzero(np.isfinite(found.step_times_s))
    bound = 0
    for i in legal[:: max(1, legal.size // 30)]:
        plan = sl._plan_search._plan_at(g, int(i))
        assert plan.slices == 2
        cost = sl.training_cost("llama-3-8b", 2**15, plan, topo, seq_len=256)
        assert cost.time_s == found.step_times_s[i] and cost.memory_bytes["total"] == found.memory_bytes[i]
        bound += cost.bound.get("DCN") == "communication-bound"
    assert bound  # some of the sampled plans wait on DCN


def test_the_search_prices_plans_across_gpu_nodes_as_training_cost_does():
    # 4 nodes of 8 H100s: axes nest TP inside FSDP inside DP inside PP, and those crossing nodes share its egress
    topo = sl.gpu_cluster(4, "h100")
    found = sl.search_plans("llama-3-8b", 2**15, topo, seq_len=256, method="numpy", max_microbatches=4)
    g = found.grid
    legal = np.flatnonzero(np.isfinite(found.step_times_s))
    bound = 0
    for i in legal[:: max(1, legal.size // 60)]:
        plan = sl._plan_search._plan_at(g, int(i))
        cost = sl.training_cost("llama-3-8b", 2**15, plan, topo, seq_len=256)
        assert cost.time_s == found.step_times_s[i] and cost.memory_bytes["total"] == found.memory_bytes[i], plan
        bound += cost.bound.get("DP") == "communication-bound"
    mixed = [sl._plan_search._plan_at(g, int(i)) for i in legal]
    assert any(p.data > 1 and p.tensor > 1 and p.fsdp > 1 for p in mixed)
    assert bound  # 1024 tokens per GPU: data parallelism waits on its AllReduce in some plans


def test_runners_up_are_other_kinds_of_parallelism_each_with_its_reason():
    found = sl.search_plans("llama-3-70b", 4 * 2**20, sl.gpu_cluster(2048, "h100"), seq_len=4096)
    families = [c.plan.family for c, _ in found.runners_up]
    assert len(families) >= 3  # on 16,384 GPUs many kinds of parallelism fit
    assert found.best.plan.family not in families and len(set(families)) == len(families)
    assert all(why.split(":")[0].endswith("slower") or why.startswith("fits nowhere") for _, why in found.runners_up)
    assert found.rank == "roofline"  # the default ranking of every planning function: the bound
    assert found.table().startswith("| plan | step | MFU |")
    est = sl.search_plans("llama-3-70b", 4 * 2**20, sl.gpu_cluster(2048, "h100"), seq_len=4096, rank="estimate")
    assert est.table().startswith("| plan | estimated step | estimated MFU | roofline step |")


def test_llama_3_405b_on_16384_gpus_is_searched_over_every_plan():
    # How fast: `make bench` times this search (a timed assert would pass or fail with the machine's load).
    found = sl.search_plans("llama-3.1-405b", 16 * 2**20, sl.gpu_cluster(2048, "h100"), seq_len=8192)
    assert found.evaluated > 30000 and found.best.fits
    assert found.best.plan.tensor >= 8  # its 405B parameters need TP (Meta used TP 8 × PP 16 × DP 128)


def test_the_vectorised_search_and_the_loop_rank_the_same_plans_the_same():
    # How much faster the vectorised one is: `make bench` (a timed assert would depend on the machine's load).
    kw = dict(seq_len=4096)
    fast = sl.search_plans("llama-3-70b", 4 * 2**20, sl.gpu_cluster(512, "h100"), method="numpy", **kw)
    slow = sl.search_plans("llama-3-70b", 4 * 2**20, sl.gpu_cluster(512, "h100"), method="loop", **kw)
    assert fast.evaluated == slow.evaluated and fast.best.plan == slow.best.plan
    assert fast.best.time_s == pytest.approx(slow.best.time_s, rel=1e-9)


def test_pipelines_pay_on_8_gpu_nodes_at_a_small_batch_per_gpu_but_not_on_nvl72_or_a_v5p_pod():
    B = 4 * 2**20  # 4M tokens, 256 per chip on 16,384 chips: far below data parallelism's ≈2475 over InfiniBand
    assert sl.needs_pipeline("llama-3-70b", B, sl.gpu_cluster(2048, "h100"), seq_len=4096).needed
    assert not sl.needs_pipeline("llama-3-70b", B, sl.gpu_cluster(228, "gb200-nvl72"), seq_len=4096).needed
    assert not sl.needs_pipeline("llama-3-70b", B, sl.tpu_slice((16, 16, 16), "tpu-v5p"), seq_len=4096,
                                 slices=4).needed
    # with a big batch per GPU, 8-GPU nodes do not need it either
    assert not sl.needs_pipeline("llama-3-70b", B, sl.gpu_cluster(64, "h100"), seq_len=4096).needed


def test_the_crossover_plot_has_a_line_pair_per_chip():
    ax = sl.plot_pipeline_crossover("llama-3-8b", 2**20, [64, 512], ["h100", "tpu-v5p"], seq_len=4096, remat="full")
    assert len(ax.get_lines()) == 4 and ax.get_xlabel() == "chips in the cluster"
    plt.close("all")


def test_a_model_that_fits_nowhere_says_how_much_it_needs():
    with pytest.raises(sl.InvalidValueError, match=r"^`model`: llama-3.1-405b fits nowhere on GpuCluster\(h100, 1 "
                                                   r"node\(s\) x 8 GPUs = 8 GPUs\): the plan needing the least memory "
                                                   r"still needs .* per chip, more than 80 GB"):
        sl.search_plans("llama-3.1-405b", 2**20, sl.gpu_cluster(1, "h100"), seq_len=4096)


def test_search_options_are_checked():
    node = sl.gpu_cluster(1, "h100")
    with pytest.raises(sl.InvalidValueError, match=r"^`slices`: a GPU cluster is one network"):
        sl.search_plans("llama-3-8b", 2**20, node, seq_len=4096, slices=2)
    with pytest.raises(sl.UnknownNameError, match=r"^`method`: unknown search method 'fast'"):
        sl.search_plans("llama-3-8b", 2**20, node, seq_len=4096, method="fast")
    with pytest.raises(sl.InvalidValueError, match=r"^`max_microbatches` must be at most 4096"):
        sl.search_plans("llama-3-8b", 2**20, node, seq_len=4096, max_microbatches=10**6)
    with pytest.raises(sl.InvalidValueError, match=r"^`sizes`: a h100 cluster is whole nodes of 8 GPUs, got 12 GPUs"):
        sl.pipeline_crossover("llama-3-8b", 2**20, [12], "h100", seq_len=4096)


def test_a_tpu_cluster_past_one_pod_is_whole_pods_joined_over_dcn():
    from scalelib._plan_search import _cluster_of

    one, slices = _cluster_of(4096, "tpu-v5p")  # 64 cubes of 4x4x4 fit one pod (16x20x28) as 16x16x16
    assert (one.shape, slices) == ((16, 16, 16), 1)
    big, slices = _cluster_of(16384, "tpu-v5p")  # 256 cubes: four 16x16x16 slices over DCN
    assert (big.shape, slices) == ((16, 16, 16), 4)
    small, slices = _cluster_of(512, "tpu-v5p")
    assert (small.shape, slices) == ((8, 8, 8), 1)


@pytest.mark.parametrize("remat", [(), [], 5, None])
def test_the_search_needs_at_least_one_remat_policy(remat):
    with pytest.raises(sl.InvalidValueError, match=r"^`remat` must be a remat policy or a list of them \(none, "
                                                   r"dot_product, full, selective\), got"):
        sl.search_plans("llama-3-8b", 2**20, sl.gpu_cluster(1, "h100"), seq_len=4096, remat=remat)


@pytest.mark.parametrize("chips", [100, 192, 384])
def test_a_tpu_crossover_size_must_be_a_power_of_2_of_whole_cubes(chips):
    # 100 chips are not whole 4x4x4 cubes; 192 and 384 are 3 and 6 cubes, not a power of 2
    with pytest.raises(sl.InvalidValueError, match=rf"^`sizes`: a tpu-v5p slice here is a power of 2 of 4x4x4 cubes, "
                                                   rf"got {chips} chips$"):
        sl.pipeline_crossover("llama-3-8b", 2**20, [chips], "tpu-v5p", seq_len=4096)


def test_the_number_of_runners_up_is_asked_for_and_never_negative():
    node = sl.gpu_cluster(1, "h100")
    for n in (0, 2):
        assert len(sl.search_plans("llama-3-8b", 2**20, node, seq_len=4096, runners_up=n).runners_up) == n
    with pytest.raises(sl.InvalidValueError, match=r"^`runners_up` must be a whole number >= 0, got -1$"):
        sl.search_plans("llama-3-8b", 2**20, node, seq_len=4096, runners_up=-1)


@pytest.mark.parametrize("topo", [sl.gpu_cluster(4, "a100"), sl.tpu_slice((4, 4, 4), "tpu-v5p")], ids=repr)
def test_ranked_by_the_estimate_the_search_prices_each_plan_as_training_cost_estimates_it(topo):
    found = sl.search_plans("llama-3-8b", 2**20, topo, seq_len=4096, rank="estimate", flash_attention=False,
                            sequence_parallel=False)
    assert found.rank == "estimate"
    g = found.grid
    legal = np.flatnonzero(np.isfinite(found.estimated_times_s))
    for i in legal[:: max(1, legal.size // 25)]:
        plan = sl._plan_search._plan_at(g, int(i))
        cost = sl.training_cost("llama-3-8b", 2**20, plan, topo, seq_len=4096, flash_attention=False,
                                sequence_parallel=False)
        assert cost.time_s == found.step_times_s[i] and cost.memory_bytes["total"] == found.memory_bytes[i]
        assert cost.estimated_time_s == pytest.approx(found.estimated_times_s[i], rel=1e-12)
    fits = np.isfinite(found.estimated_times_s) & (found.memory_bytes <= topo.spec.hbm_bytes)
    assert found.best.estimated_time_s == pytest.approx(found.estimated_times_s[fits].min(), rel=1e-12)
    for cost, why in found.runners_up:
        if why.split(":")[0].endswith("slower"):
            assert why.startswith(f"{cost.estimated_time_s / found.best.estimated_time_s - 1:.0%} slower: ")
    roofline = sl.search_plans("llama-3-8b", 2**20, topo, seq_len=4096, rank="roofline")
    assert roofline.rank == "roofline" and roofline.estimated_times_s is None
    default = sl.search_plans("llama-3-8b", 2**20, topo, seq_len=4096, flash_attention=False,
                              sequence_parallel=False)
    assert default.rank == "roofline" and default.estimated_times_s is None  # the bound is the default


def test_needs_pipeline_asks_the_bound_unless_told_to_ask_the_estimate():
    B, cluster = 4 * 2**20, sl.gpu_cluster(2048, "h100")
    bound = sl.needs_pipeline("llama-3-70b", B, cluster, seq_len=4096)
    assert bound.rank == "roofline"
    assert bound.speedup == pytest.approx(bound.without_pipeline.time_s / bound.with_pipeline.time_s, rel=1e-12)
    est = sl.needs_pipeline("llama-3-70b", B, cluster, seq_len=4096, rank="estimate")
    assert est.rank == "estimate" and "estimated" in repr(est)
    assert est.speedup == pytest.approx(est.without_pipeline.estimated_time_s / est.with_pipeline.estimated_time_s,
                                        rel=1e-12)
    assert est.time_s == est.with_pipeline.estimated_time_s
    out = sl.pipeline_crossover("llama-3-70b", B, [512], "h100", seq_len=4096, rank="estimate")
    assert out["mfu_with"][0] == est_mfu(out["plans_with"][0], B) and out["mfu_with"][0] < 0.8


def est_mfu(plan, B):
    return sl.training_cost("llama-3-70b", B, plan, sl.gpu_cluster(64, "h100"), seq_len=4096).estimated_mfu


def test_the_ranking_is_checked():
    with pytest.raises(sl.UnknownNameError, match=r"^`rank`: unknown ranking 'fastest': expected one of estimate, roofline"):
        sl.search_plans("llama-3-8b", 2**20, sl.gpu_cluster(1, "h100"), seq_len=4096, rank="fastest")


def test_plan_at_names_the_plan_of_each_position_of_the_grid():
    found = sl.search_plans("llama-3-8b", 2**20, sl.gpu_cluster(2, "h100"), seq_len=4096, rank="estimate")
    i = int(np.argmin(np.where(found.memory_bytes <= 80e9, found.estimated_times_s, np.inf)))
    assert found.plan_at(i) == found.best.plan
    for bad in (-1, found.step_times_s.size, 1.5, True):
        with pytest.raises(sl.InvalidValueError, match=r"^`i` must be a whole number from 0 to "):
            found.plan_at(bad)


#: the training validation's runs, read from the data file itself (not from the code under test)
_RUNS = [r for t in ("run", "step_run") for r in __import__("tomllib").loads(
    (__import__("pathlib").Path(sl.__file__).parent / "data" / "training_runs.toml").read_text())[t]]


def test_a_search_by_the_estimate_warns_when_its_best_plan_is_outside_the_validation():
    import warnings

    # GPT-3 175B on 1,024 A100s: the estimate's best is FSDP 1024, which no validated GPU run used, at an estimated
    # MFU above every A100 run's published utilisation (at most 52%, Megatron's)
    gpt3 = sl.ModelSpec(name="gpt-3-175b", L=96, D=12288, F=49152, N=96, K=96, H=128, V=51200, gated=False,
                        tied_embeddings=True)
    top_a100 = max(r["reported"] for r in _RUNS if r["chip"] == "a100" and r["quantity"] in ("mfu", "hfu"))
    assert not any(r.get("fsdp", 1) > 1 for r in _RUNS if r["chip"] in ("a100", "h100"))
    with pytest.warns(sl.OutsideValidationWarning, match=r"FSDP 1024: the validated GPU runs have none") as caught:
        found = sl.search_plans(gpt3, 1536 * 2048, sl.gpu_cluster(128, "a100"), seq_len=2048, rank="estimate")
    assert found.best.plan.fsdp == 1024 and found.best.estimated_mfu > top_a100
    assert f"at most {top_a100:.0%}, megatron-" in str(caught[0].message)
    assert caught[0].filename == __file__                              # it points at the caller's line
    assert found.outside_validation[0] == "FSDP 1024: the validated GPU runs have none"
    assert any("estimated MFU" in why for why in found.outside_validation)
    with pytest.warns(sl.OutsideValidationWarning) as caught:           # one uniform call away: the derivation
        derivation = sl.explain(sl.search_plans, gpt3, 1536 * 2048, sl.gpu_cluster(128, "a100"), seq_len=2048,
                                rank="estimate")
    assert "outside the training validation: FSDP 1024" in str(derivation) and caught[0].filename == __file__
    # FSDP 1024 on 2048 v5p chips: 256-way FSDP (PaLM's, MaxText's on a v5e-256) is the widest validated on TPUs
    with pytest.warns(sl.OutsideValidationWarning, match=r"FSDP 1024: the validated TPU runs have up to 256 \(palm-540b"):
        sl.search_plans("llama-3-8b", 2**22, sl.tpu_slice((8, 16, 16), "tpu-v5p"), seq_len=4096, rank="estimate")
    # data parallelism over 64 slices: MaxText's 32 v5e-256 slices are the most a validated run joined over DCN
    with pytest.warns(sl.OutsideValidationWarning, match=r"DP 64: the validated TPU runs have up to 32 \(maxtext-"):
        sl.search_plans("llama-3-70b", 2**23, sl.tpu_slice((16, 16), "tpu-v5e"), seq_len=4096, slices=64,
                        rank="estimate")
    # a chip no run was measured on
    with pytest.warns(sl.OutsideValidationWarning, match=r"no validated run on tpu-v6e chips"):
        sl.search_plans("llama-3-8b", 2**20, sl.tpu_slice((4, 4), "tpu-v6e"), seq_len=4096, rank="estimate")

    # inside: Llama 3 8B on a TPU v4 4x4x4 with matmuls at half of peak: FSDP 32 x TP 2 (PaLM ran FSDP 256 x TP 12
    # on v4), an estimated MFU of 45% (PaLM measured 46.2%): no warning, nothing outside
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.OutsideValidationWarning)
        inside = sl.search_plans("llama-3-8b", 2**18, sl.tpu_slice((4, 4, 4), "tpu-v4p"), seq_len=4096,
                                 rank="estimate", efficiency=0.5)
        assert inside.best.plan.fsdp * inside.best.plan.tensor == 64 and inside.best.plan.tensor <= 12
        assert inside.best.estimated_mfu <= 0.462 and inside.outside_validation == ()
        # the roofline ranking is a bound, not a forecast: it never warns, whatever it picks
        bound = sl.search_plans(gpt3, 1536 * 2048, sl.gpu_cluster(128, "a100"), seq_len=2048)
        assert bound.outside_validation == ()
