"""Properties of the calibrated estimate over whole search grids (scalelib/_estimate.py).

* the bound holds: for every plan a search prices (every plan of the grid that keeps the rules, the full
  grid, not a sample: pricing a grid takes a few milliseconds as arrays), on GPUs and TPUs, with and
  without pipelines, dense and MoE, the estimate is at least the roofline and every loss, switched on
  one at a time in the order of ``scalelib.LOSSES``, is >= 0;
* monotone where physics says so: more bandwidth (HBM, NVLink, InfiniBand, ICI, DCN) never makes any plan
  slower; a larger batch never makes a training step, a generate step or a prefill shorter; a matmul or a
  transfer of more work never takes less time under the efficiency tables;
* `efficiency` is honoured by the estimate (a ceiling on every matmul), not ignored.
"""

import numpy as np
import pytest

import scalelib as sl
from scalelib import _estimate, _plan_search, _topology, _training

GPT3 = sl.ModelSpec(name="gpt-3-175b", L=96, D=12288, F=49152, N=96, K=96, H=128, V=51200, gated=False,
                    tied_embeddings=True, source="Brown et al. 2020, Table 2.1")

#: (model, tokens per step, topology, seq_len, slices, options): each grid is searched whole, with pipelines.
GRIDS = [
    (GPT3, 1536 * 2048, sl.gpu_cluster(128, "a100"), 2048, 1, {}),
    (GPT3, 64 * 2048, sl.gpu_cluster(128, "a100"), 2048, 1, {}),                      # the issue's DP + PP case
    ("llama-3-70b", 4 * 2**20, sl.gpu_cluster(64, "h100"), 4096, 1, {}),
    ("llama-3-70b", 4 * 2**20, sl.gpu_cluster(64, "h100"), 4096, 1, {"efficiency": 0.5}),
    ("llama-3-70b", 4 * 2**20, sl.gpu_cluster(16, "h100"), 4096, 1,
     {"sequence_parallel": False, "flash_attention": False}),
    ("mixtral-8x7b", 2**20, sl.gpu_cluster(8, "h100"), 4096, 1, {}),
    ("llama-3-8b", 2**20, sl.tpu_slice((4, 4, 4), "tpu-v5p"), 4096, 1, {}),
    ("llama-3-8b", 3 * 2**20, sl.tpu_slice((16, 16, 16), "tpu-v5p"), 8192, 4, {}),   # four pods over DCN
    ("llama-2-13b", 2**20, sl.tpu_slice((8, 16), "tpu-v5e"), 4096, 1, {}),
    ("deepseek-v3", 4 * 2**20, sl.tpu_slice((8, 8, 16), "tpu-v5p"), 4096, 1, {}),
]


def _grid(model, B, topology, T, slices, options, pipeline=True):
    s = _training._setup(model, B, topology, seq_len=T, **options)
    g = _plan_search._grid(s, slices, pipeline, 64, _training.REMAT)
    ok = _plan_search._rules_numpy(s, g)
    return s, {k: v[ok] for k, v in g.items()}


def _cumulative(s, g):
    """The roofline, then the step with each loss switched on in turn (as losses_of does, for a whole grid)."""
    hw = _estimate.Hardware(s)
    steps, on = [_training._costs_numpy(s, g)[0]], set()
    for name in sl.LOSSES:
        on.add(name)
        steps.append(_estimate.estimate_step(s, hw, g, frozenset(on)))
    return steps


@pytest.mark.parametrize("pipeline", [True, False], ids=["with PP", "without PP"])
@pytest.mark.parametrize("case", GRIDS, ids=lambda c: f"{getattr(c[0], 'name', c[0])} {c[2]!r} {c[5]}")
def test_every_priced_plan_is_estimated_at_or_above_its_roofline_and_no_loss_is_negative(case, pipeline):
    s, g = _grid(*case, pipeline=pipeline)
    assert g["data"].size > 100
    if not pipeline:
        assert (g["pipeline"] == 1).all()
    steps = _cumulative(s, g)
    roofline, estimate = steps[0], steps[-1]
    assert np.isfinite(estimate).all()
    assert (estimate >= roofline).all(), f"{int((estimate < roofline).sum())} plans below the bound"
    for name, before, after in zip(sl.LOSSES, steps, steps[1:]):
        assert (after >= before).all(), f"{name}: negative for {int((after < before).sum())} plans"
    # the search's one call prices the same estimate as switching the losses on one at a time
    np.testing.assert_array_equal(estimate, _estimate.estimate_step(s, _estimate.Hardware(s), g, s.losses))


def test_the_plans_the_issue_found_below_the_bound_are_now_above_it():
    cases = [
        (GPT3, 64 * 2048, sl.ParallelPlan(data=32, fsdp=2, tensor=4, pipeline=4, microbatches=1, remat="none"),
         sl.gpu_cluster(128, "a100"), 2048, {}),
        ("llama-3-8b", 2**20, sl.ParallelPlan(fsdp=2, tensor=32, remat="none"), sl.tpu_slice((4, 4, 4), "tpu-v5p"),
         4096, {}),
        ("llama-3-70b", 4 * 2**20, sl.ParallelPlan(data=8, fsdp=8, tensor=8, microbatches=4, remat="none"),
         sl.gpu_cluster(64, "h100"), 4096, {"efficiency": 0.5}),
    ]
    for model, B, plan, topology, T, kw in cases:
        cost = sl.training_cost(model, B, plan, topology, seq_len=T, **kw)
        assert cost.estimated_time_s >= cost.time_s
        assert all(v >= 0 for v in cost.losses_s.values()), cost.losses_s
        assert cost.estimated_mfu <= cost.mfu


def test_efficiency_is_a_ceiling_the_estimate_honours():
    model, B, plan, topology = "llama-3-70b", 4 * 2**20, sl.ParallelPlan(data=8, fsdp=8, tensor=8, microbatches=4,
                                                                          remat="none"), sl.gpu_cluster(64, "h100")
    one = sl.training_cost(model, B, plan, topology, seq_len=4096)
    half = sl.training_cost(model, B, plan, topology, seq_len=4096, efficiency=0.5)
    assert half.estimated_time_s > one.estimated_time_s
    # every matmul at most at half of peak: the estimate at least the roofline's compute at 0.5
    assert half.estimated_time_s >= half.compute_s
    best_one = sl.search_plans(model, B, topology, seq_len=4096, runners_up=0, rank="estimate").best
    best_half = sl.search_plans(model, B, topology, seq_len=4096, runners_up=0, efficiency=0.5, rank="estimate").best
    assert best_half.estimated_time_s > best_one.estimated_time_s
    assert best_half.estimated_mfu <= 0.5


def _faster(spec, factor, fields):
    return spec.derive(f"{spec.name}-x{factor}", **{f: getattr(spec, f) * factor for f in fields})


@pytest.mark.parametrize("case", [GRIDS[2], GRIDS[5], GRIDS[6], GRIDS[7]], ids=lambda c: repr(c[2]))
def test_more_bandwidth_never_makes_a_plan_slower(case):
    model, B, topology, T, slices, options = case
    spec = topology.spec
    if isinstance(topology, sl.GpuCluster):
        variants = [sl.gpu_cluster(topology.num_nodes, _faster(spec, 2, ["hbm_bytes_per_s"])),
                    sl.gpu_cluster(topology.num_nodes, _faster(spec, 2, ["scale_up_bytes_per_s_per_gpu"])),
                    sl.gpu_cluster(topology.num_nodes, spec, port_bytes_per_s=2 * _topology.IB_PORT_BYTES_PER_S)]
    else:
        shape = topology.shape
        variants = [sl.tpu_slice(shape, _faster(spec, 2, ["hbm_bytes_per_s"])),
                    sl.tpu_slice(shape, _faster(spec, 2, ["ici_link_bytes_per_s_one_way",
                                                          "ici_link_bytes_per_s_bidirectional"])),
                    sl.tpu_slice(shape, _faster(spec, 2, ["dcn_bytes_per_s_per_chip"]))]
    s, g = _grid(model, B, topology, T, slices, options)
    base = _cumulative(s, g)
    for faster in variants:
        s2, g2 = _grid(model, B, faster, T, slices, options)
        np.testing.assert_array_equal(g2["tensor"], g["tensor"])
        quick = _cumulative(s2, g2)
        assert (quick[0] <= base[0] * (1 + 1e-12)).all()          # the roofline
        assert (quick[-1] <= base[-1] * (1 + 1e-12)).all(), faster  # the estimate


@pytest.mark.parametrize("plan", [sl.ParallelPlan(data=2, fsdp=4, tensor=8, remat="none"),
                                  sl.ParallelPlan(fsdp=8, tensor=4, pipeline=2, microbatches=4, remat="full")],
                         ids=lambda p: p.label)
def test_a_larger_batch_never_makes_a_training_step_shorter(plan):
    topology = sl.gpu_cluster(8, "h100")
    steps = [sl.training_cost("llama-3-8b", k * 4 * 2**15, plan, topology, seq_len=4096).estimated_time_s
             for k in range(1, 33)]
    assert np.all(np.diff(steps) >= 0), steps


@pytest.mark.parametrize("model, topology, kw", [
    ("llama-3-70b", sl.tpu_slice((4, 8), "tpu-v5e"), dict(weight_dtype="int8")),
    ("llama-3-8b", sl.tpu_slice((2, 2), "tpu-v5e"), dict(weight_dtype="int8")),
    ("llama-3-70b", "h100", dict(num_chips=2, weight_dtype="fp8", compute_dtype="fp8")),
    ("llama-3-70b", "a100", dict(num_chips=8)),
], ids=["v5e 4x8 int8", "v5e 2x2 int8", "2 h100 fp8", "8 a100"])
def test_a_larger_batch_never_makes_a_generate_step_or_a_prefill_shorter(model, topology, kw):
    steps = np.asarray(sl.estimated_generate_step_time_s(model, topology, batch=np.arange(1, 513), context=2048,
                                                         check_memory=False, **kw))
    assert steps.shape == (512,) and np.all(np.diff(steps) >= 0), np.flatnonzero(np.diff(steps) < 0)
    longer = np.asarray(sl.estimated_generate_step_time_s(model, topology, batch=8, context=np.arange(128, 8192, 128),
                                                          check_memory=False, **kw))
    assert np.all(np.diff(longer) >= 0)
    prefill_kw = {k: v for k, v in kw.items() if k != "weight_dtype" or v != "int8"}
    prefills = np.asarray(sl.estimated_prefill_time_s(model, topology, tokens=np.arange(64, 16384, 64), **prefill_kw))
    assert prefills.shape == (255,) and np.all(np.diff(prefills) >= 0)


def test_the_issues_decode_example_is_monotone_in_the_batch():
    v5e = sl.tpu_slice((4, 8), "tpu-v5e")
    at = {b: sl.estimated_generate_step_time_s("llama-3-70b", v5e, batch=b, context=2048, weight_dtype="int8")
          for b in (64, 128)}
    assert at[128] >= at[64]  # was 7.4 ms against 18.1 ms


def test_under_the_efficiency_tables_more_work_never_takes_less_time():
    from scalelib._calibration import _hbm_efficiency, _matmul_efficiency, constants

    gflop = np.geomspace(1e-4, 1e4, 20001)
    assert np.all(np.diff(gflop / _matmul_efficiency(gflop)) > 0)
    mb = np.geomspace(1e-4, 1e4, 20001)
    assert np.all(np.diff(mb / _hbm_efficiency(mb)) > 0)
    # at the table's own points it gives the table's values (calculon's), and nothing beyond its range
    c = constants()
    np.testing.assert_array_equal(_matmul_efficiency(c["matmul"]["gflop"]), c["matmul"]["efficiency"])
    np.testing.assert_array_equal(_hbm_efficiency(c["hbm"]["mb"]), c["hbm"]["efficiency"])
    assert _matmul_efficiency(1e6) == max(c["matmul"]["efficiency"])
