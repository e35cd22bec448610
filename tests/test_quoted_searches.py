"""Every plan search a chapter or a solution quotes in its text says what the search returns.

Each test reruns a search whose result a Markdown cell quotes (a plan, a step, an MFU, a verdict, a
speedup), formats the result the way the text does, and asserts the text contains it. Where the text
shows the command itself in backticks, the test runs that very text. A change to the cost model or to a
default that moves a quoted result fails here, naming the notebook and the cell, instead of leaving the
prose behind.
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import scalelib as sl

ROOT = Path(__file__).resolve().parent.parent
GPT3 = sl.ModelSpec(name="gpt-3-175b", L=96, D=12288, F=49152, N=96, K=96, H=128, V=51200, gated=False,
                    tied_embeddings=True, source="Brown et al. 2020, Table 2.1")


@lru_cache(maxsize=None)
def cell_text(notebook: str, cell_id: str) -> str:
    nb = json.loads((ROOT / notebook).read_text())
    (cell,) = [c for c in nb["cells"] if c.get("id") == cell_id]
    return re.sub(r"\s+", " ", "".join(cell["source"]))


def quoted(notebook, cell_id, *phrases):
    text = cell_text(notebook, cell_id)
    missing = [p for p in phrases if p not in text]
    assert not missing, f"{notebook} cell {cell_id} does not say {missing}: {text[:600]}"


def command_in(notebook, cell_id, pattern=r"`(sl\.search_plans\(.*?\)(?:\.best)?)`"):
    """The search command a cell quotes in backticks, run as written."""
    (command,) = re.findall(pattern, cell_text(notebook, cell_id))
    return eval(command, {"sl": sl})  # the notebook's own text, under test


# --- the solutions ----------------------------------------------------------------------------------------------


def test_solution_5_11_the_speedup_of_a_pipeline_for_gemma_on_16384_h100s():
    cluster = sl.gpu_cluster(2048, "h100")
    best = sl.search_plans("gemma-2-27b", 4 * 2**20, cluster, seq_len=4096, rank="roofline").best
    flat = sl.search_plans("gemma-2-27b", 4 * 2**20, cluster, seq_len=4096, pipeline=False, rank="roofline").best
    quoted("solutions/ch05_training.ipynb", "73e1c31b", f"About {flat.time_s / best.time_s:.1f}.")


def test_solution_6_9_the_search_on_one_v5p_slice_chooses_the_quoted_split():
    found = command_in("solutions/ch06_llama_training.ipynb", "2a1c642a")
    plan = found.best.plan
    assert (plan.pipeline, plan.data) == (1, 1)
    quoted("solutions/ch06_llama_training.ipynb", "2a1c642a", f"{plan.fsdp}-way FSDP × {plan.tensor}-way TP")


def test_solution_6_11_the_four_slice_search_waits_on_data_parallelism_at_the_quoted_mfu():
    best = command_in("solutions/ch06_llama_training.ipynb", "8f4af08b")
    assert best.binding.startswith("communication-bound on DP: ")
    assert best.bound["DP"] == "communication-bound"
    quoted("solutions/ch06_llama_training.ipynb", "8f4af08b", "waits on its data-parallel collectives",
           f"about {best.mfu:.0%} MFU under the roofline")


def test_solution_6_14_the_405b_search_on_8192_h100s_at_75_percent_efficiency():
    cluster, B = sl.gpu_cluster(1024, "h100"), 16 * 2**20
    days = lambda step: 15.6e12 / B * step / 86400  # noqa: E731
    calibrated = sl.search_plans("llama-3.1-405b", B, cluster, seq_len=8192, efficiency=0.75, rank="roofline").best
    bound = sl.search_plans("llama-3.1-405b", B, cluster, seq_len=8192, rank="roofline").best
    est = sl.search_plans("llama-3.1-405b", B, cluster, seq_len=8192, efficiency=0.75, rank="estimate").best
    quoted("solutions/ch06_llama_training.ipynb", "e675d7b2",
           f"About {calibrated.time_s:.1f} s a step with {calibrated.plan.label}, and {days(calibrated.time_s):.0f} days",
           f"best plan's MFU is {calibrated.mfu:.0%}",
           f"would promise {bound.time_s:.1f} s and {days(bound.time_s):.0f} days",
           f"ranks {est.plan.label} first", f"at an estimated {est.estimated_mfu:.0%} MFU")
    assert calibrated.plan.tensor == 16 and est.plan.tensor <= 8


# --- chapter 5 --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h100_needs():
    cluster = sl.gpu_cluster(2048, "h100")
    return {rank: sl.needs_pipeline("llama-3-70b", 4 * 2**20, cluster, seq_len=4096, rank=rank)
            for rank in ("roofline", "estimate")}


def test_chapter_5_shows_the_bound_and_the_estimate_disagreeing_on_a_pipeline(h100_needs):
    bound, est = h100_needs["roofline"], h100_needs["estimate"]
    assert bound.needed and not est.needed
    w, f = bound.with_pipeline, bound.without_pipeline
    assert w.plan.tensor > 8 and f.plan.tensor > 8  # both stretch TP over two nodes
    flat = est.without_pipeline
    # the estimate's best pipelined plan, and what its bubble costs
    cluster = sl.gpu_cluster(2048, "h100")
    found = sl.search_plans("llama-3-70b", 4 * 2**20, cluster, seq_len=4096, rank="estimate", runners_up=0)
    piped = found.grid["pipeline"] > 1
    i = int(np.argmin(np.where((found.memory_bytes <= 80e9) & piped, found.estimated_times_s, np.inf)))
    best_pp = sl.training_cost("llama-3-70b", 4 * 2**20, found.plan_at(i), cluster, seq_len=4096)
    sequences = 4 * 2**20 // best_pp.plan.replicas // 4096
    quoted("book/ch05_training.ipynb", "e5d90fa6",
           f"pipelining needed at {bound.speedup:.2f}x", f"compares {w.plan.label} ({sl.fmt(w.time_s, 's')})",
           f"with {f.plan.label} ({sl.fmt(f.time_s, 's')})",
           f"{sl.fmt(w.losses_s['tensor_collectives'], 's')} a step",
           f"bound's pipelined plan at {sl.fmt(w.estimated_time_s, 's')}",
           f"Its best pipelined plan, {best_pp.plan.label}, gives each of its {best_pp.plan.replicas} replicas only "
           f"{sequences} sequences", f"idles {best_pp.bubble_fraction:.0%} of the step",
           f"{sl.fmt(best_pp.estimated_time_s, 's')} against {sl.fmt(flat.estimated_time_s, 's')} for the flat "
           f"{flat.plan.label}")
    assert best_pp.estimated_time_s > flat.estimated_time_s


def test_chapter_5_quotes_the_gpt3_searches_by_the_bound_and_by_the_estimate():
    a100s = sl.gpu_cluster(128, "a100")
    kw = dict(seq_len=2048, master_dtype="f32", runners_up=0)
    bound = sl.search_plans(GPT3, 1536 * 2048, a100s, rank="roofline", **kw)
    found = sl.search_plans(GPT3, 1536 * 2048, a100s, rank="estimate", **kw)
    fits, tp = found.memory_bytes <= 80e9, found.grid["tensor"]
    j8 = int(np.argmin(np.where(fits & (tp == 8), found.estimated_times_s, np.inf)))
    tp16 = sl.training_cost(GPT3, 1536 * 2048, bound.best.plan, a100s, seq_len=2048, master_dtype="f32")
    assert found.best.plan.tensor == 1 and bound.best.plan.tensor == 16
    quoted("book/ch05_training.ipynb", "cbdce6a8",
           f"returns {bound.best.plan.label} as its best plan",
           f"gives that plan {sl.fmt(tp16.estimated_time_s, 's', sig=2)}",
           f"about {sl.fmt(tp16.losses_s['tensor_collectives'], 's', sig=2)} that nothing hides",
           f"with $Y = 8$ is {found.estimated_times_s[j8] / found.best.estimated_time_s - 1:.0%} slower",
           f"its {found.best.estimated_mfu:.0%} estimated MFU for FSDP over 1,024 GPUs")


# --- chapter 6 --------------------------------------------------------------------------------------------------


def test_chapter_6_quotes_the_v5p_searches():
    pod = sl.tpu_pod("tpu-v5p")
    one = sl.search_plans("llama-3-70b", 4 * 2**20, pod, seq_len=4096, runners_up=0)
    assert one.rank == "roofline"
    one_est = sl.search_plans("llama-3-70b", 4 * 2**20, pod, seq_len=4096, runners_up=0, rank="estimate")
    assert one_est.best.plan == one.best.plan  # "for one pod the estimate picks the same plan"
    quoted("book/ch06_llama_training.ipynb", "a00a5752", "(For one pod the estimate picks the same plan.)")
    four = sl.search_plans("llama-3-70b", 4 * 2**20, pod, seq_len=4096, slices=4, runners_up=0).best
    F_over_alpha = sl.model("llama-3-70b").F / (pod.spec.bf16_flops_per_s / pod.spec.ici_link_bytes_per_s_bidirectional)
    assert four.plan.tensor <= F_over_alpha  # within the limit the chapter derives
    fwd_bwd = sl.fmt(four.comms_s["FSDP"], "s"), sl.fmt(four.compute_s, "s")
    quoted("book/ch06_llama_training.ipynb", "788e1ac7", f"The search's best, {four.plan.label.split('× ', 1)[1]}",
           f"waits on FSDP: {fwd_bwd[0]} against {fwd_bwd[1]} of compute")
    eight = sl.search_plans("llama-3.1-405b", 16 * 2**20, pod, seq_len=8192, slices=8, runners_up=0).best
    quoted("book/ch06_llama_training.ipynb", "74364a7c", eight.plan.label.split("× ", 1)[1] + " inside each pod")
