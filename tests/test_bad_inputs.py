"""Bad input answered by scalelib's own error naming the argument the caller wrote, or by the right value (issue 18).

First one regression test per case the issue's fuzz found (chapters 3-11), then a systematic sweep: every
argument of every public callable of the API contract's table, replaced in turn by a handful of clearly bad
values, must either be accepted or be refused by a scalelib error whose message names that argument in
backticks (`` `batch` ``), as scalelib's messages do; the exceptions are listed with their reasons.
"""

from __future__ import annotations

import inspect
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

import scalelib as sl
import test_api_contract as contract
from scalelib import _models, _specs

V5P_64 = sl.tpu_slice((4, 4, 4), "tpu-v5p")
V5E_16 = sl.tpu_slice((4, 4), "tpu-v5e")
NODE = sl.gpu_cluster(1, "h100")


def _number_after(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return float(match.group(1))


# --- MFU can never exceed 1 ---------------------------------------------------------------------------------


def test_a_step_shorter_than_its_flops_at_peak_is_refused_naming_step_time_s_and_the_smallest_step():
    # The case: 0.5 s for 2**20 tokens of LLaMA-3-8B on 64 v5p chips gave an MFU of 3.67.
    with pytest.raises(sl.InvalidValueError, match=r"^`step_time_s`: .*smallest possible") as err:
        sl.model_flops_utilization("llama-3-8b", 2**20, 0.5, V5P_64, seq_len=4096)
    smallest = sl.train_flops("llama-3-8b", seq_len=4096, tokens=2**20) / (64 * sl.chip("tpu-v5p").bf16_flops_per_s)
    assert _number_after(r"step_time_s >= ([\d.e+-]+)", str(err.value)) == pytest.approx(smallest, rel=1e-5)
    # at that smallest step the MFU is 1 (not a hair above), and a step twice as long gives one half
    assert sl.model_flops_utilization("llama-3-8b", 2**20, smallest, V5P_64, seq_len=4096) == pytest.approx(1.0)
    assert sl.model_flops_utilization("llama-3-8b", 2**20, smallest, V5P_64, seq_len=4096) <= 1.0
    assert sl.model_flops_utilization("llama-3-8b", 2**20, 2 * smallest, V5P_64, seq_len=4096) == pytest.approx(0.5)


def test_a_sweep_of_step_times_is_refused_when_any_is_shorter_than_possible():
    smallest = sl.train_flops("llama-3-8b", seq_len=4096, tokens=2**20) / (64 * sl.chip("tpu-v5p").bf16_flops_per_s)
    ok = sl.model_flops_utilization("llama-3-8b", 2**20, np.array([2.0, 4.0]) * smallest, V5P_64, seq_len=4096)
    np.testing.assert_allclose(ok, [0.5, 0.25])
    with pytest.raises(sl.InvalidValueError, match=r"^`step_time_s`"):
        sl.model_flops_utilization("llama-3-8b", 2**20, np.array([2.0, 0.5]) * smallest, V5P_64, seq_len=4096)


def test_a_compute_bound_plan_at_full_efficiency_reports_an_mfu_of_one_not_one_plus_rounding():
    # TP 8 on one H100 node, 4096 tokens, no remat: every collective hides, so the step is its compute at peak;
    # 3·F / (T_step·N·C) rounded to 1.0000000000000002 before.
    cost = sl.training_cost("llama-3-8b", 4096, sl.ParallelPlan(tensor=8, remat="none"), NODE, seq_len=4096)
    assert cost.time_s == pytest.approx(cost.compute_s) and cost.mfu <= 1.0
    assert cost.mfu == pytest.approx(1.0)


def test_mfu_names_B_not_tokens():
    with pytest.raises(sl.InvalidValueError, match=r"^`B` must be positive \(> 0\), got -1$"):
        sl.model_flops_utilization("llama-3-8b", -1, 1.0, V5P_64, seq_len=4096)


# --- one rule for cutting the batch, in training_cost and search_plans ---------------------------------------


def test_a_batch_of_less_than_one_sequence_is_refused_naming_B_by_training_cost_and_search_plans():
    # The case: 800 tokens of 4096-token sequences over 8 replicas was priced (100 tokens each), and the
    # search returned TP 8 at an MFU of 100%.
    with pytest.raises(sl.InvalidValueError, match=r"^`B`: a batch of 800 tokens is less than one sequence") as a:
        sl.training_cost("llama-3-8b", 800, sl.ParallelPlan(data=8), NODE, seq_len=4096)
    with pytest.raises(sl.InvalidValueError, match=r"^`B`: a batch of 800 tokens is less than one sequence") as b:
        sl.search_plans("llama-3-8b", 800, NODE, seq_len=4096)
    assert str(a.value) == str(b.value)


def test_a_microbatch_holds_whole_sequences_while_replicas_may_share_one():
    # Replicas split the batch in tokens (the book's tokens per chip): 8 replicas of 512 tokens of one sequence.
    assert sl.training_cost("llama-3-8b", 4096, sl.ParallelPlan(data=8), NODE, seq_len=4096).time_s > 0
    # A microbatch runs at its own time and holds whole sequences: 2 of 2048 tokens is refused, naming `plan`.
    with pytest.raises(sl.InvalidValueError, match=r"^`plan`: microbatches = 2 cut a replica's 4096 tokens into "
                                                   r"2048 each, less than one sequence"):
        sl.training_cost("llama-3-8b", 8 * 4096, sl.ParallelPlan(data=8, microbatches=2), NODE, seq_len=4096)
    assert sl.training_cost("llama-3-8b", 16 * 4096, sl.ParallelPlan(data=8, microbatches=2), NODE,
                            seq_len=4096).time_s > 0


def test_the_search_keeps_exactly_the_plans_training_cost_accepts():
    # Every plan the search lists is priced by it if and only if training_cost (and ParallelPlan) accept it.
    found = sl.search_plans("llama-3-8b", 4 * 4096, NODE, seq_len=4096, max_microbatches=8, hbm_bytes=1e12)
    accepted_by_search = np.isfinite(found.step_times_s)
    g = found.grid
    names = {0: "gpipe", 1: "1f1b", 2: "interleaved"}
    for i in range(found.step_times_s.size):
        try:
            plan = sl.ParallelPlan(data=int(g["data"][i]), fsdp=int(g["fsdp"][i]), tensor=int(g["tensor"][i]),
                                   pipeline=int(g["pipeline"][i]), expert=int(g["expert"][i]),
                                   microbatches=int(g["microbatches"][i]), schedule=names[int(g["schedule"][i])],
                                   virtual_stages=int(g["virtual_stages"][i]), remat=sl._training.REMAT[int(g["remat"][i])])
            cost = sl.training_cost("llama-3-8b", 4 * 4096, plan, NODE, seq_len=4096, hbm_bytes=1e12)
        except sl.InvalidValueError:
            assert not accepted_by_search[i], f"the search priced plan {i}, which training_cost refuses"
            continue
        assert accepted_by_search[i] and cost.time_s == found.step_times_s[i]
    assert 0 < accepted_by_search.sum() < accepted_by_search.size  # the rules both keep and drop plans here


# --- a pipeline schedule needs a pipeline ---------------------------------------------------------------------


def test_a_pipeline_schedule_without_a_pipeline_is_refused_naming_schedule():
    with pytest.raises(sl.InvalidValueError, match=r"^`schedule`: 'interleaved' with virtual_stages=2 orders the "
                                                   r"stages of a pipeline, and this plan has none"):
        sl.ParallelPlan(fsdp=512, expert=8, schedule="interleaved", virtual_stages=2)
    with pytest.raises(sl.InvalidValueError, match=r"^`schedule`: 'gpipe' orders the stages of a pipeline"):
        sl.ParallelPlan(data=4, schedule="gpipe")
    assert sl.ParallelPlan(fsdp=512, expert=8).schedule == "1f1b"  # the default is no claim about a pipeline
    assert sl.ParallelPlan(pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2).pipeline == 4


# --- axes, chips and splits of the inference functions ---------------------------------------------------------


def test_generate_comms_refuses_axes_on_a_gpu_cluster():
    with pytest.raises(sl.InvalidValueError, match=r"^`axes`: a GPU cluster takes no `axes`"):
        sl.generate_comms_time_s("llama-3-70b", sl.gpu_cluster(2, "h100"), batch=32, axes="Q")


def test_weight_stationary_comms_takes_whole_chip_counts_and_an_x_that_divides_them():
    args = (64, 8192, 32768)
    with pytest.raises(sl.InvalidValueError, match=r"^`num_chips` must be a whole number, got 2.5$"):
        sl.weight_stationary_comms_time_s(*args, 2.5, "tpu-v5p")
    with pytest.raises(sl.InvalidValueError, match=r"^`num_chips` must be >= 1, got 0$"):
        sl.weight_stationary_comms_time_s(*args, 0, "tpu-v5p")
    with pytest.raises(sl.InvalidValueError, match=r"^`X` must be a whole number, got 0.5$"):
        sl.weight_stationary_comms_time_s(*args, 256, "tpu-v5p", layout="2d", X=0.5)
    with pytest.raises(sl.InvalidValueError, match=r"^`X` must divide `num_chips` = 256 .*got 3$"):
        sl.weight_stationary_comms_time_s(*args, 256, "tpu-v5p", layout="2d", X=3)
    with pytest.raises(sl.InvalidValueError, match=r"^`X` must divide `num_chips` = 256 .*got 512$"):
        sl.weight_stationary_comms_time_s(*args, 256, "tpu-v5p", layout="2d", X=512)
    assert sl.weight_stationary_comms_time_s(*args, 256, "tpu-v5p", layout="2d", X=8) > 0
    with pytest.raises(sl.InvalidValueError, match=r"^`axes` must be a whole number >= 1, got -1$"):
        sl.weight_stationary_comms_time_s(*args, 256, "tpu-v5p", layout="2d", axes=-1)  # was ignored with 2D


def test_weight_stationary_comms_on_a_chip_without_ici_names_chip_not_bandwidth():
    with pytest.raises(sl.InvalidValueError, match=r"^`chip`: h100 has no ICI links on record"):
        sl.weight_stationary_comms_time_s(64, 8192, 32768, 256, "h100")


def test_model_parallelism_on_one_chip_names_topology_not_none():
    with pytest.raises(sl.InvalidValueError, match=r"^`topology`: TpuSlice\(tpu-v5e, X=1, Y=1; 1 chips\) is one chip"):
        sl.generate_model_parallel_max_degree("llama-3-70b", sl.tpu_slice((1, 1), "tpu-v5e"), batch=64)


# --- arrays where one number is meant, or a sweep ----------------------------------------------------------------


def test_an_array_of_prefills_per_pass_is_a_sweep_not_a_raw_numpy_error():
    one = sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512)
    sweep = sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512, prefills_per_pass=np.array([1, 2]))
    np.testing.assert_allclose(sweep, [one, one / 2])
    pair = sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512, prefills_per_pass=(1, 1))
    np.testing.assert_allclose(pair, [one, one])
    with pytest.raises(sl.InvalidValueError, match=r"^`prefills_per_pass` must be a whole number, got 0.5$"):
        sl.prefill_to_generate_ratio(0.91, 0.019, batch=32, output_tokens=512, prefills_per_pass=0.5)
    with pytest.raises(sl.InvalidValueError, match=r"`batch`, .*`prefills_per_pass` must have shapes that broadcast"):
        sl.prefill_to_generate_ratio(0.91, 0.019, batch=[8, 16, 32], output_tokens=512, prefills_per_pass=[1, 2])


def test_plot_latency_throughput_refuses_an_array_of_contexts():
    with pytest.raises(sl.InvalidValueError, match=r"^`context` must be one number of tokens"):
        sl.plot_latency_throughput("llama-3-70b", [V5E_16], context=np.array([1, 2]), weight_dtype="int8")
    with pytest.raises(sl.InvalidValueError, match=r"^`topologies` must be a TpuSlice"):
        sl.plot_latency_throughput("llama-3-70b", [V5E_16, 7], context=2048, weight_dtype="int8")


# --- errors that named another argument ------------------------------------------------------------------------


def test_closed_loop_throughput_names_prefill_efficiency():
    with pytest.raises(sl.InvalidValueError, match=r"^`prefill_efficiency` must be <= 1, got 1.5$"):
        sl.closed_loop_throughput("llama-3-70b", "h100", concurrency=8, prompt_tokens=256, output_tokens=64,
                                  weight_dtype="fp8", compute_dtype="fp8", prefill_efficiency=1.5, num_chips=2)


def test_speculative_decoding_names_draft_and_its_kv_size():
    kw = dict(k=3, acceptance=0.8, batch=1, context=2048, kv_bytes_per_token=0)
    with pytest.raises(sl.InvalidValueError, match=r"^`draft` must be a model name"):
        sl.speculative_time_per_token_s(70e9, V5E_16, draft=None, **kw)
    with pytest.raises(sl.UnknownNameError, match=r"^`draft`: unknown model 'llama-9'"):
        sl.speculative_time_per_token_s(70e9, V5E_16, draft="llama-9", **kw)
    with pytest.raises(sl.InvalidValueError, match=r"^`draft_kv_bytes_per_token` must not be negative, got -1$"):
        sl.speculative_time_per_token_s(70e9, V5E_16, draft=4e9, draft_kv_bytes_per_token=-1, **kw)


@pytest.mark.parametrize("call", [
    lambda: sl.generate_step_time_s("llama-3-70b", V5E_16, batch=1, context=128, compute_dtype="f32"),
    lambda: sl.prefill_time_s("llama-3-70b", V5E_16, tokens=128, compute_dtype="f32"),
    lambda: sl.max_batch_within_latency("llama-3-70b", V5E_16, latency_s=0.05, context=128, compute_dtype="f32"),
    lambda: sl.matmul_roofline(128, 4096, 4096, "tpu-v5e", compute_dtype="f32"),
    lambda: sl.closed_loop_throughput("llama-3-70b", "h100", concurrency=8, prompt_tokens=256, output_tokens=64,
                                      weight_dtype="fp8", compute_dtype="f32", num_chips=2),
], ids=["generate_step_time_s", "prefill_time_s", "max_batch_within_latency", "matmul_roofline",
        "closed_loop_throughput"])
def test_a_compute_dtype_the_chip_has_no_rate_for_names_compute_dtype(call):
    with pytest.raises(sl.InvalidValueError, match=r"^`compute_dtype`: (tpu-v5e|h100) has no published f32 rate"):
        call()


def test_a_parameter_count_without_a_kv_size_names_the_model_too():
    with pytest.raises(sl.InvalidValueError, match=r"^`kv_bytes_per_token`: a model given as a parameter count "
                                                   r"\(`model` = 0.5\)"):
        sl.generate_step_time_s(0.5, V5E_16, batch=1, context=10)


def test_the_crossover_plot_names_chips():
    with pytest.raises(sl.UnknownNameError, match=r"^`chips`: unknown chip 'h100x'"):
        sl.plot_pipeline_crossover("llama-3-8b", 2**20, [8], ["h100x"], seq_len=4096)
    with pytest.raises(sl.InvalidValueError, match=r"^`chips`: the crossover sweep builds 3D slices of tpu-v5e"):
        sl.plot_pipeline_crossover("llama-3-8b", 2**20, [64], ["tpu-v5e"], seq_len=4096)


def test_a_plan_search_that_fits_nowhere_names_hbm_bytes():
    with pytest.raises(sl.InvalidValueError, match=r"^`model`: .* fits nowhere .*more than 500 MB \(`hbm_bytes`"):
        sl.search_plans("llama-3-8b", 2**20, NODE, seq_len=4096, hbm_bytes=0.5e9)


def test_sequences_and_prompts_shorter_than_one_token_are_refused():
    # Fractions above one stay allowed: ch04 sweeps seq_len over np.logspace for a smooth curve.
    with pytest.raises(sl.InvalidValueError, match=r"^`seq_len` must be >= 1, got 0.5$"):
        sl.train_flops("llama-3-8b", seq_len=0.5)
    with pytest.raises(sl.InvalidValueError, match=r"^`seq_len` must be >= 1, got 0.5$"):
        sl.model_flops_utilization("llama-3-8b", 2**20, 10.0, V5P_64, seq_len=0.5)
    with pytest.raises(sl.InvalidValueError, match=r"^`tokens` must be >= 1, got 0.5$"):
        sl.prefill_time_s("llama-3-70b", V5E_16, tokens=0.5)
    assert sl.train_flops("llama-3-8b", seq_len=np.logspace(9, 20, 5, base=2)).shape == (5,)


def test_load_chips_checks_replace_before_reading_the_file():
    with pytest.raises(sl.InvalidValueError, match=r"^`replace` must be True or False, got 'yes'$"):
        sl.load_chips("/nonexistent/chips.toml", replace="yes")


# --- the systematic sweep ------------------------------------------------------------------------------------------

#: Values no argument should take silently, or whose refusal must name the argument.
BAD = [-1, 0, 0.5, 2.5, float("nan"), True, "nonsense-name", "f32", "h100", None, np.array([1.0, 2.0]), (1, 1)]
#: The brief's handful, for the callables the contract marks slow (plots, searches, measurements).
BAD_SLOW = [-1, 0.5, "nonsense-name", None, np.array([1.0, 2.0])]

OWNED_ELSEWHERE = "owned by the HLO/reshard work (_matmul_plan, _jax_bridge, _profile, _jax_collectives, _sharding)"
#: Callables not swept at all, with the reason.
NOT_SWEPT = {name: OWNED_ELSEWHERE for name in (
    "plan_matmul", "plan_reshard", "simulated_mesh", "parse_collectives", "compiled_collectives",
    "sharded_matmul_collectives", "compare_with_plan", "hlo_array", "hlo_summary", "cost_analysis", "capture_trace",
    "read_trace", "plot_trace", "compare_with_roofline", "prediction_table", "input_values", "sharded_inputs",
    "measure_jax_time_s", "sharding", "Sharding", "Sharding.splits", "Sharding.shard_shape", "Sharding.shard_bytes",
    "Sharding.total_bytes", "Sharding.copies", "Sharding.partition_spec", "latency_bound_bytes", "draw_sharding")}
#: (callable, argument): why its refusal may name something else.
ALLOWED = {
    ("explain", "fn"): "explain's subject is any object: its error says which kind of object has no derivation "
                       "(scalelib/_derivation.py, outside this fix)",
    ("chip", "name"): "a lookup by name: the error names what is looked up, `chip`, as for every argument taking one",
    ("model", "name"): "a lookup by name: the error names what is looked up, `model`, as for every argument taking one",
    ("TpuSlice", "shape"): "a shape whose axes cannot wrap around as `wraparound` says: the combination is named by "
                           "`wraparound` (its text is pinned by tests/test_topology.py)",
    ("torus_mean_hops", "shape"): "a shape without the axis the table's `twist` names: the combination is named by "
                                  "`twist` (scalelib/_twisted.py, outside this fix)",
    ("plot_model_breakdown", "seq_lens"): "each of `seq_lens` is passed on as `seq_len` "
                                          "(scalelib/_transformer_plots.py, outside this fix)",
    ("capstone_brief", "learner"): "one message for the learner-or-variant choice (scalelib/course, outside this fix)",
    ("capstone_brief", "variant"): "one message for the learner-or-variant choice (scalelib/course, outside this fix)",
    ("check", "exercise_id"): "the exercise catalogue's error (scalelib/course, outside this fix)",
    ("verdict", "exercise_id"): "the exercise catalogue's error (scalelib/course, outside this fix)",
}
#: Errors about a combination of arguments, allowed whatever the argument probed: (message pattern, reason).
COMBINATIONS = [
    (r"does not fit on", "a memory fit: the model, its dtypes and the batch against the chips' HBM (the text is "
                         "printed in ch07's checked output)"),
    (r"^`(dtype|bandwidth)`: \S+ has no (published \S+ rate|\S+ bandwidth); it has",
     "a real chip without the rate or link that `dtype` or `bandwidth` asks for: named by that argument"),
]


def _call_of(name):
    return contract.CALLS[name]


def _named_slots(name):
    """(slot, the argument's name) for every positional argument that has a name, and every keyword one."""
    fn, args, kwargs = _call_of(name)
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [(i, params[i]) for i in range(min(len(args), len(params)))] + [(k, k) for k in kwargs]


def _run(fn, args, kwargs):
    """The error `fn(*args, **kwargs)` raises (None when it returns), leaving the registries as they were."""
    chips, models = dict(_specs._USER), dict(_models._USER)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the sweep sorts them out below
        return err
    finally:
        plt.close("all")
        _specs._USER.clear()
        _specs._USER.update(chips)
        _models._USER.clear()
        _models._USER.update(models)
    return None


def _misnamed(name) -> list[str]:
    fn, args, kwargs = _call_of(name)
    base = _run(fn, list(args), dict(kwargs))  # a table call that fails (a missing file) fails the same way after
    values = BAD_SLOW if name in contract.SLOW else BAD
    problems = []
    for slot, arg in _named_slots(name):
        if (name, arg) in ALLOWED:
            continue
        for value in values:
            a, k = list(args), dict(kwargs)
            if isinstance(slot, int):
                a[slot] = value
            else:
                k[slot] = value
            err = _run(fn, a, k)
            if err is None or (base is not None and str(err) == str(base)):
                continue
            text = str(err)
            if not isinstance(err, sl.ScalelibError):
                problems.append(f"{arg}={value!r}: raw {type(err).__name__}: {text[:160]}")
            elif f"`{arg}`" not in text and not any(re.search(p, text) for p, _ in COMBINATIONS):
                problems.append(f"{arg}={value!r}: {text[:160]}")
    return problems


SWEPT = sorted(set(contract.CALLS) - set(NOT_SWEPT))


@pytest.mark.parametrize("name", SWEPT)
def test_every_bad_value_of_every_argument_is_refused_by_name(name):
    problems = _misnamed(name)
    assert not problems, f"{name}: errors that do not name the argument:\n" + "\n".join(problems)


def test_the_sweep_covers_the_contract_table_and_every_allowance_names_an_existing_argument():
    assert set(SWEPT) | set(NOT_SWEPT) == set(contract.CALLS)
    assert set(NOT_SWEPT) <= set(contract.CALLS)
    for name, arg in ALLOWED:  # an allowance for an argument that no longer exists would hide nothing
        assert arg in dict((a, s) for s, a in _named_slots(name)), (name, arg)


# --- arrays of shapes that do not broadcast ------------------------------------------------------------------


@pytest.mark.parametrize("call, names", [
    (lambda: sl.matmul_flops([1024, 2048], [1024, 2048, 4096], 8192), ("B", "D")),
    (lambda: sl.matmul_bytes([1024, 2048], 4096, [1, 2, 3]), ("B", "F")),
    (lambda: sl.matmul_intensity(1024, [1024, 2048], [1, 2, 3]), ("D", "F")),
    (lambda: sl.arithmetic_intensity([1e9, 2e9], [1e6, 2e6, 3e6]), ("flops", "nbytes")),
    (lambda: sl.roofline([1e9, 2e9], [1e6, 2e6, 3e6], "tpu-v5e"), ("flops", "nbytes")),
    (lambda: sl.critical_batch_size("tpu-v5e", D=[4096, 8192], F=[1, 2, 3]), ("D", "F")),
    (lambda: sl.tile_intensity([128, 256], [128, 256, 512]), ("bm", "bn")),
    (lambda: sl.tile_smem_bytes([128, 256], 128, [32, 64, 128]), ("bm", "bk")),
], ids=["matmul_flops", "matmul_bytes", "matmul_intensity", "arithmetic_intensity", "roofline",
        "critical_batch_size", "tile_intensity", "tile_smem_bytes"])
def test_arrays_that_do_not_broadcast_are_refused_naming_each_argument_and_its_shape(call, names):
    first, second = names
    with pytest.raises(sl.InvalidValueError, match=rf"^`{first}` has shape \(2,\) and `{second}` has shape \(3,\): "
                                                   r"these arrays do not broadcast together"):
        call()


def test_arrays_that_broadcast_still_sweep():
    np.testing.assert_array_equal(sl.matmul_flops(np.array([[1], [2]]), [1, 2, 3], 4),
                                  2 * np.array([[1], [2]]) * np.array([1, 2, 3]) * 4)
    assert np.shape(sl.tile_intensity([128, 256], [[128], [256], [512]], K=4096)) == (3, 2)


def test_a_plain_number_is_checked_as_a_numpy_one_is():
    # number()'s fast path for a plain float or int gives the same value and the same refusal as the numpy path
    # (a float32 of the same value goes that way)
    import itertools

    import numpy as np

    from scalelib._errors import InvalidValueError
    from scalelib._validate import number

    def outcome(value):
        try:
            return float(number("x", value, **options))
        except InvalidValueError as err:
            return str(err).split(", got ")[0]   # the rule broken (a float32 is shown with its own digits)

    values = [0.0, -0.0, 1.0, -2.0, 0.5, 3.0, 2.0**100, float("inf"), -float("inf"), float("nan")]
    flags = ["positive", "nonnegative", "integer", "allow_inf"]
    for picked in itertools.product([False, True], repeat=4):
        for bound in ({}, {"at_least": 1.0}, {"at_most": 1.0}):
            options = dict(zip(flags, picked), **bound)
            for v in values:
                fast, slow = outcome(v), outcome(np.float32(v))
                assert type(fast) is type(slow) and (fast == slow or fast != fast and slow != slow), (v, options, fast, slow)
