"""Searching every parallel plan (chapter 5): the fastest that fits, its runners-up, and whether PP pays.

:func:`search_plans` lists every plan for a model, a batch and a cluster: each way of writing the
chips as data × FSDP × tensor × pipeline (tensor dividing the heads, at most one stage per layer),
expert parallelism for an MoE, the microbatch counts, the pipeline schedules and the remat
policies; it prices each with the cost model of :func:`~scalelib.training_cost`, drops those that
do not fit in memory or cut a microbatch below one sequence, and returns the fastest with the best
plan of every other kind of parallelism and why each loses.

Two implementations do the pricing: ``method="numpy"`` evaluates all plans at once as arrays,
``method="loop"`` calls the cost model plan by plan. The second is the reference: the tests hold the
first to the same numbers, bit for bit. :func:`needs_pipeline` and :func:`pipeline_crossover` ask
"do you need pipeline parallelism?" of one cluster or of a range of sizes.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._derivation import Derivation, derivable
from ._errors import InvalidValueError, OutsideValidationWarning
from ._calibration import LOSSES, VALIDATED_AXES, validation_coverage
from ._estimate import Hardware, estimate_step
from ._models import model as _model
from ._topology import GpuCluster, TpuSlice, gpu_cluster, tpu_slice
from ._training import (DEFAULT_SCHEDULE, REMAT, ParallelPlan, TrainingCost, _cost, _costs_numpy,  # noqa: F401
                        _divisors, _grid_terms, _plan_terms, _schedule_ok, _Setup, _setup, _spb_numpy, _split_ok)
from ._units import fmt
from ._validate import count, flag, name as _name, shown

#: Pipeline schedules the search tries, as (schedule, chunks per stage).
SEARCH_SCHEDULES = (("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 4))
_CODE = {"gpipe": 0, "1f1b": 1, "interleaved": 2}
#: The most plans one search prices (about 1.5 GB of arrays).
MAX_PLANS = 20_000_000
_METHODS = ("numpy", "loop")
#: What the search ranks plans by: the roofline step of training_cost, or its calibrated estimate.
RANKS = ("roofline", "estimate")


@dataclass(frozen=True)
class PlanSearch:
    """The result of :func:`search_plans`.

    ``best`` is the fastest plan that fits (a :class:`TrainingCost`); ``runners_up`` the fastest of
    each other kind of parallelism, as (cost, why it loses); ``evaluated`` the plans priced,
    ``legal`` those that fit; ``step_times_s`` and ``memory_bytes`` every plan's numbers (inf for
    a plan that breaks a rule other than memory), in the order of ``grid``; ``seconds`` the search's
    wall time. ``outside_validation`` says, when the estimate ranked the plans (``rank="estimate"``), what of the
    best plan no run of the training validation had (a chip, a parallelism degree, a utilisation), one phrase
    each; empty when the validation covers it, and always for the roofline (a bound, not a forecast).
    """

    best: TrainingCost
    runners_up: tuple = field(repr=False)
    evaluated: int = 0
    legal: int = 0
    seconds: float = field(default=0.0, repr=False)
    method: str = "numpy"
    step_times_s: np.ndarray = field(default=None, repr=False)
    memory_bytes: np.ndarray = field(default=None, repr=False)
    grid: dict = field(default=None, repr=False)
    rank: str = "roofline"
    estimated_times_s: np.ndarray = field(default=None, repr=False)
    outside_validation: tuple = ()

    @property
    def time_s(self) -> float:
        return self.best.time_s

    def plan_at(self, i: int) -> ParallelPlan:
        """The plan at position `i` of ``grid`` (and of ``step_times_s``, ``memory_bytes``, ``estimated_times_s``)."""
        n = self.step_times_s.size
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < n:
            raise InvalidValueError(f"`i` must be a whole number from 0 to {n - 1}, got {shown(i)}")
        return _plan_at(self.grid, int(i))

    def table(self) -> str:
        """A Markdown table of the best plan and the runners-up: step time, MFU, memory, why each loses."""
        if self.rank == "estimate":
            rows = ["| plan | estimated step | estimated MFU | roofline step | memory per chip | verdict |",
                    "|---|---|---|---|---|---|", _row_estimate(self.best, "**best**")]
            rows += [_row_estimate(cost, why) for cost, why in self.runners_up]
            return "\n".join(rows)
        rows = ["| plan | step | MFU | memory per chip | verdict |", "|---|---|---|---|---|",
                _row(self.best, "**best**")]
        rows += [_row(cost, why) for cost, why in self.runners_up]
        return "\n".join(rows)


def _row_estimate(cost: TrainingCost, why: str) -> str:
    label = _row(cost, why).split(" | ")[0]
    return (f"{label} | {fmt(cost.estimated_time_s, 's')} | {cost.estimated_mfu:.1%} | {fmt(cost.time_s, 's')} | "
            f"{fmt(cost.memory_bytes['total'], 'B')} | {why} |")


def _row(cost: TrainingCost, why: str) -> str:
    p = cost.plan
    extra = ""
    if p.pipeline > 1:
        extra = f" ({p.schedule}{'' if p.virtual_stages == 1 else f', v={p.virtual_stages}'}, m={p.microbatches})"
    elif p.microbatches > 1:
        extra = f" (m={p.microbatches})"
    return (f"| {p.label}{extra}, remat {p.remat} | {fmt(cost.time_s, 's')} | {cost.mfu:.1%} | "
            f"{fmt(cost.memory_bytes['total'], 'B')} | {why} |")


#: The remat policies a search tries unless told: "selective" (Korthikanti's) keeps as much as "none" under flash
#: attention for more FLOPs, so it is tried only when asked for.
SEARCH_REMAT = ("none", "dot_product", "full")


def _grid(s: _Setup, slices: int, pipeline: bool, max_microbatches: int, remats) -> dict:
    """Every candidate plan, as integer arrays in nested-loop order (base, expert, microbatches, schedule, remat)."""
    n = s.chips
    base = []
    for t in _divisors(n):
        if s.heads % t:
            continue
        for p in _divisors(n // t):
            if p > s.L or (p > 1 and not pipeline):
                continue
            for f in _divisors(n // (t * p)):
                base.append((n // (t * p * f), f, t, p))
    experts = [e for e in _divisors(s.E)] if s.model.is_moe else [1]
    mbs = [2**i for i in range(int(math.log2(max_microbatches)) + 1)]
    scheds = [(_CODE[name], v) for name, v in (SEARCH_SCHEDULES if pipeline else SEARCH_SCHEDULES[:1])]
    rs = [REMAT.index(r) for r in remats]
    base_a = np.array(base, dtype=np.int64)
    shape = (len(base), len(experts), len(mbs), len(scheds), len(rs))
    if math.prod(shape) > MAX_PLANS:
        raise InvalidValueError(f"search_plans: {math.prod(shape):,} plans to price, more than {MAX_PLANS:,}; "
                                f"narrow the search (fewer `remat` policies, a smaller `max_microbatches`, "
                                f"pipeline=False)")
    ib, ie, im, isch, ir = (i.ravel() for i in np.indices(shape))
    sched_a = np.array(scheds, dtype=np.int64)
    return {"data": base_a[ib, 0], "fsdp": base_a[ib, 1], "tensor": base_a[ib, 2], "pipeline": base_a[ib, 3],
            "expert": np.array(experts, dtype=np.int64)[ie], "slices": np.full(ib.size, slices, dtype=np.int64),
            "microbatches": np.array(mbs, dtype=np.int64)[im], "schedule": sched_a[isch, 0],
            "virtual_stages": sched_a[isch, 1], "remat": np.array(rs, dtype=np.int64)[ir]}


def _rules_numpy(s: _Setup, g: dict) -> np.ndarray:
    """Which plans keep the rules other than memory (the same as :func:`_rules_one`)."""
    d, f, t, p, e, sl = g["data"], g["fsdp"], g["tensor"], g["pipeline"], g["expert"], g["slices"]
    mb, sched, v = g["microbatches"], g["schedule"], g["virtual_stages"]
    ok = (f % e == 0) & (p * v <= s.L) & _split_ok(s.B, s.T, d * f * sl, mb)
    ok &= _schedule_ok(p, (sched == _CODE[DEFAULT_SCHEDULE]) & (v == 1))
    ok &= (sched != 2) | (mb % p == 0)
    return ok


def _rules_one(s: _Setup, d, f, t, p, e, sl, mb, sched, v) -> bool:
    if f % e or p * v > s.L or not _split_ok(s.B, s.T, d * f * sl, mb):
        return False
    if not _schedule_ok(p, sched == _CODE[DEFAULT_SCHEDULE] and v == 1):
        return False
    return not (sched == 2 and mb % p)


def _costs_loop(s: _Setup, g: dict):
    """The same numbers as :func:`_costs_numpy`, one plan at a time through the cost model."""
    columns = [g[k].tolist() for k in ("data", "fsdp", "tensor", "pipeline", "expert", "slices", "microbatches",
                                       "schedule", "virtual_stages", "remat")]
    steps, memory = [], []
    for d, f, t, p, e, sl, mb, sched, v, r in zip(*columns):
        out = _plan_terms(s, d, f, t, p, e, sl, mb, sched, v, r)
        steps.append(out[0])
        memory.append(out[-1]["total"])
    return np.array(steps), np.array(memory)


def _plan_at(g: dict, i: int) -> ParallelPlan:
    names = {0: "gpipe", 1: "1f1b", 2: "interleaved"}
    return ParallelPlan(data=int(g["data"][i]), fsdp=int(g["fsdp"][i]), tensor=int(g["tensor"][i]),
                        pipeline=int(g["pipeline"][i]), expert=int(g["expert"][i]), slices=int(g["slices"][i]),
                        microbatches=int(g["microbatches"][i]), schedule=names[int(g["schedule"][i])],
                        virtual_stages=int(g["virtual_stages"][i]), remat=REMAT[int(g["remat"][i])])


def _family_codes(g: dict) -> np.ndarray:
    return sum(((g[a] > 1).astype(np.int64) << k) for k, a in enumerate(("pipeline", "tensor", "expert", "fsdp", "data")))


def _search(s: _Setup, topology, slices, pipeline, max_microbatches, remats, method, runners_up,
            rank="roofline") -> PlanSearch:
    start = time.perf_counter()
    g = _grid(s, slices, pipeline, max_microbatches, remats)
    if method == "numpy":
        ok = _rules_numpy(s, g)
        step, memory = _costs_numpy(s, g)
    else:
        columns = [g[k].tolist() for k in ("data", "fsdp", "tensor", "pipeline", "expert", "slices",
                                           "microbatches", "schedule", "virtual_stages")]
        ok = np.array([_rules_one(s, *plan) for plan in zip(*columns)], dtype=bool)
        step, memory = _costs_loop(s, g)
    step = np.where(ok, step, np.inf)
    fits = ok & (memory <= s.hbm)
    estimated = None
    if rank == "estimate":  # rank by the calibrated estimate; the roofline stays in step_times_s
        # priced on the plans that break no rule only (a third of the grid or less: the ranking's cost)
        estimated = np.full(step.shape, np.inf)
        if ok.any():
            estimated[ok] = estimate_step(s, Hardware(s), {k: v[ok] for k, v in g.items()}, s.losses)
    order = step if estimated is None else estimated
    seconds = time.perf_counter() - start
    if not fits.any():
        least = memory[ok].min() if ok.any() else math.inf
        raise InvalidValueError(
            f"`model`: {s.model.name} fits nowhere on {topology!r}: the plan needing the least memory still needs "
            f"{fmt(least, 'B')} per chip, more than {fmt(s.hbm, 'B')} (`hbm_bytes`, the chip's HBM by default); use "
            f"more chips, a smaller batch (`B`) or model")
    timed = np.where(fits, order, np.inf)
    by_time = np.lexsort((memory, timed))  # ties: the plan needing less memory (then the first in the grid)
    best_i = int(by_time[0])
    best = _cost(s, _plan_at(g, best_i))
    ranked = (lambda c: c.time_s) if estimated is None else (lambda c: c.estimated_time_s)
    families = _family_codes(g)
    # the fastest plan of a family that fits: its first in the order of the whole grid (the same plan as sorting
    # the family alone by time, memory and place), unless none of the family's has a finite time
    fits_by_time, families_by_time = fits[by_time], families[by_time]
    others = []
    for code in np.unique(families[ok]):
        if code == families[best_i]:
            continue
        mine = families == code
        if (fits & mine).any():
            i = int(by_time[np.flatnonzero(fits_by_time & (families_by_time == code))[0]])
            if not np.isfinite(timed[i]):
                i = int(np.lexsort((memory, np.where(mine, timed, np.inf)))[0])
            cost = _cost(s, _plan_at(g, i))
            why = f"{ranked(cost) / ranked(best) - 1:.0%} slower: {cost.binding}"
            others.append((ranked(cost), cost, why))
        else:
            i = int(np.argmin(np.where(mine & ok, memory, np.inf)))
            cost = _cost(s, _plan_at(g, i))
            others.append((math.inf, cost, f"fits nowhere: needs at least {fmt(cost.memory_bytes['total'], 'B')} "
                                             f"per chip, over {fmt(s.hbm, 'B')}"))
    others.sort(key=lambda x: (x[0], x[1].memory_bytes["total"]))
    outside = _outside_validation(best, topology) if rank == "estimate" else ()
    return PlanSearch(best, tuple((c, w) for _, c, w in others[:runners_up]), int(step.size), int(fits.sum()),
                      seconds, method, step, memory, g, rank, estimated, outside)


def _caller_level() -> int:
    """The `stacklevel` of warnings.warn, called from here, that names the first frame outside scalelib (the caller's
    line, however many of scalelib's wrappers, such as ``explain``, stand between)."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


_AXIS_NAMES = {"data": "DP", "fsdp": "FSDP", "tensor": "TP", "pipeline": "PP", "expert": "EP"}


def _outside_validation(cost: TrainingCost, topology) -> tuple:
    """What of `cost`'s plan on `topology` no run of the training validation had, one phrase each (empty: covered).

    Against the runs of ``training_runs.toml`` (:func:`~scalelib._calibration.validation_coverage`): a chip none
    ran on; a degree of data (DCN slices included), FSDP, tensor, pipeline or expert parallelism above the largest
    any run on that family of chips (GPU or TPU) used; an estimated MFU above the highest utilisation measured on
    that chip (MFU, or Megatron's HFU, which counts recompute too and so lets more through).
    """
    spec = topology.spec
    runs = validation_coverage()
    family = [r for r in runs if _family(r["chip"]) == spec.family]
    on_chip = [r for r in runs if r["chip"] == spec.name]
    plan = cost.plan
    out = []
    if not on_chip:
        out.append(f"no validated run on {spec.name} chips")
    for axis in VALIDATED_AXES:
        degree = getattr(plan, axis) * (plan.slices if axis == "data" else 1)
        widest = max(family, key=lambda r: r[axis], default=None)
        most = widest[axis] if widest else 1
        if degree > most:
            seen = (f"up to {most} ({widest['name']})" if most > 1 else "none")
            out.append(f"{_AXIS_NAMES[axis]} {degree}: the validated {spec.family.upper()} runs have {seen}")
    measured = [r for r in on_chip if r["utilisation"] is not None]
    if measured:
        top = max(measured, key=lambda r: r["utilisation"])
        if cost.estimated_mfu > top["utilisation"]:
            out.append(f"estimated MFU {cost.estimated_mfu:.0%}: above every utilisation measured on {spec.name} chips "
                       f"(at most {top['utilisation']:.0%}, {top['name']})")
    return tuple(out)


def _family(chip_name: str) -> str:
    from ._specs import chip

    return chip(chip_name).family


def _search_args(model, B, topology, seq_len, slices, pipeline, max_microbatches, remat, method, runners_up, kw,
                 rank="roofline"):
    s = _setup(model, B, topology, seq_len=seq_len, **kw)
    sl = count("slices", slices)
    if sl > 1 and s.gpu:
        raise InvalidValueError(f"`slices`: a GPU cluster is one network; slices join TPU slices over DCN, got {sl}")
    if sl > 1 and not s.w_dcn:
        raise InvalidValueError(f"`slices`: {topology.spec.name} has no DCN bandwidth on record to join slices")
    mm = count("max_microbatches", max_microbatches)
    if mm > 4096:
        raise InvalidValueError(f"`max_microbatches` must be at most 4096, got {mm}")
    if isinstance(remat, str):
        remat = (remat,)
    if not isinstance(remat, (tuple, list)) or not remat:
        raise InvalidValueError(f"`remat` must be a remat policy or a list of them ({', '.join(REMAT)}), got {shown(remat)}")
    remats = tuple(dict.fromkeys(_name("remat", r, REMAT, "remat policy") for r in remat))
    method = _name("method", method, _METHODS, "search method")
    rank = _name("rank", rank, RANKS, "ranking")
    if rank == "estimate" and not s.hbm_bw:
        raise InvalidValueError(f"`rank`: the estimate needs {topology.spec.name}'s HBM bandwidth, which is not on "
                                f"record; rank='roofline'")
    return (s, sl, flag("pipeline", pipeline), mm, remats, method, count("runners_up", runners_up, minimum=0),
            rank)


@derivable
def search_plans(model, B, topology, *, seq_len, slices=1, pipeline=True, max_microbatches=64, remat=SEARCH_REMAT,
                 method="numpy", runners_up=5, dtype="bf16", param_dtype="bf16", grad_dtype="bf16", optimizer="adam",
                 optimizer_dtype="f32", master_dtype=None, hbm_bytes=None, efficiency=1.0, rank="roofline",
                 flash_attention=True, sequence_parallel=True, losses=LOSSES):
    """Price every legal parallel plan for `model` on `topology` and return the fastest that fits, with runners-up.

    Plans: data × FSDP × tensor × pipeline = the topology's chips (tensor dividing the query heads,
    a stage per layer at most), expert parallelism dividing E and the FSDP axis (an MoE), 1 to
    `max_microbatches` microbatches (powers of 2; none shorter than a sequence), GPipe, 1F1B and
    interleaved schedules (2 and 4 chunks per stage) when there is a pipeline, and each remat
    policy in `remat`. Each is priced by the cost model of :func:`training_cost`, and ranked by its
    roofline step (``rank="roofline"``, the default of every planning function here, :func:`needs_pipeline`
    and :func:`pipeline_crossover` too: the book's bound, every matmul at peak and every collective hidden
    where compute is longer, which may stretch TP across GPU nodes) or by its calibrated estimate
    (``rank="estimate"``: kernels below peak, elementwise kernels, exposed tensor-parallel collectives on
    their network tier, which keeps TP inside a GPU node, and the rest of :func:`estimated_step_time_s`'s
    losses). Either way ``best.time_s`` is the chosen plan's roofline step and ``best.estimated_time_s``
    its estimate.

    Formula:
        best = argmin over plans that fit of T_est (rank="estimate") or T_step (rank="roofline")

    Args:
        model: a model name or a :class:`ModelSpec`.
        B: tokens per step (the global batch, >= seq_len; split over replicas and microbatches as in
            :func:`training_cost`).
        topology: a :class:`TpuSlice` (one of `slices`) or a :class:`GpuCluster`.
        seq_len: T, tokens per sequence.
        slices: TPU slices joined over DCN (data parallelism across them).
        pipeline: whether to consider pipeline parallelism at all.
        max_microbatches: the most microbatches per step tried (<= 4096).
        remat: the remat policies tried (one name or several; by default none, dot_product and full).
        method: ``"numpy"`` (all plans as arrays) or ``"loop"`` (one at a time: the reference).
        runners_up: how many other kinds of plan to report.
        dtype, param_dtype, grad_dtype, optimizer, optimizer_dtype, master_dtype, hbm_bytes, efficiency: as in
            :func:`training_cost`.
        rank: ``"roofline"`` (the default: the bound) or ``"estimate"`` (the calibrated forecast): what
            "fastest" means.
        flash_attention, sequence_parallel, losses: as in :func:`training_cost` (flash_attention also in
            the memory each plan needs; the other two only in the estimate).

    Returns:
        a :class:`PlanSearch` (its ``best`` a :class:`TrainingCost`, times in s). Ranked by the estimate, a best
        plan that no validated training run resembles (a chip none ran on, a degree of DP, FSDP, TP, PP or EP
        beyond every run on that family of chips, an estimated MFU above every utilisation measured on that chip)
        raises an :class:`OutsideValidationWarning` naming what, and ``outside_validation`` lists it.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import gpu_cluster
        >>> bound = search_plans("llama-3-70b", 4 * 2**20, gpu_cluster(64, "h100"), seq_len=4096)  # the bound
        >>> bound.best.plan, fmt(bound.best.time_s, "s"), bound.evaluated
        (ParallelPlan(DP 8 × FSDP 8 × TP 8; 4 microbatches, remat none), '3.72 s', 16800)
        >>> found = search_plans("llama-3-70b", 4 * 2**20, gpu_cluster(64, "h100"), seq_len=4096, rank="estimate")
        >>> found.best.plan
        ParallelPlan(FSDP 512; 2 microbatches, remat dot_product)
        >>> fmt(found.best.estimated_time_s, "s"), fmt(found.best.time_s, "s")
        ('5.61 s', '3.81 s')
    """
    s, sl, pp, mm, remats, method, keep, rank = _search_args(
        model, B, topology, seq_len, slices, pipeline, max_microbatches, remat, method, runners_up,
        dict(dtype=dtype, param_dtype=param_dtype, grad_dtype=grad_dtype, optimizer=optimizer,
             optimizer_dtype=optimizer_dtype, master_dtype=master_dtype, hbm_bytes=hbm_bytes, efficiency=efficiency,
             flash_attention=flash_attention, sequence_parallel=sequence_parallel, losses=losses), rank)
    found = _search(s, topology, sl, pp, mm, remats, method, keep, rank)
    if rank == "estimate":  # the headline stays the roofline step (time_s) of the plan the estimate ranks first
        outside = found.outside_validation
        if outside:
            warnings.warn(f"search_plans: the best plan by the estimate, {found.best.plan!r}, lies outside what the "
                          f"training validation covers ({'; '.join(outside)}); its estimate is an extrapolation",
                          OutsideValidationWarning, stacklevel=_caller_level())
        return Derivation(f"T_step(best of {found.evaluated} plans by the estimate)",
                          "T_step of the plan with the least T_est among those that fit",
                          lambda: f"T_step({found.best.plan.label})", found.best.time_s, "s",
                          where=(f"{found.legal} of {found.evaluated} plans fit; the best by the calibrated estimate: "
                                 f"{found.best.plan!r}, T_est = {fmt(found.best.estimated_time_s, 's')}",)
                          + ((f"outside the training validation: {'; '.join(outside)}",) if outside else ()),
                          returns=found)
    return Derivation(f"T_step(best of {found.evaluated} plans)", "min over plans that fit of T_step",
                      lambda: f"T_step({found.best.plan.label})", found.best.time_s, "s",
                      where=(f"{found.legal} of {found.evaluated} plans fit; the best is {found.best.plan!r}",),
                      returns=found)


@dataclass(frozen=True)
class PipelineNeed:
    """:func:`needs_pipeline`'s answer: the best plan with and without pipeline parallelism."""

    with_pipeline: TrainingCost
    without_pipeline: TrainingCost | None
    speedup: float
    needed: bool
    rank: str = "roofline"

    @property
    def time_s(self) -> float:
        """The step with a pipeline, as ranked: the roofline step, or the estimate under ``rank="estimate"``."""
        return self._timed(self.with_pipeline)

    def _timed(self, cost: TrainingCost) -> float:
        return cost.estimated_time_s if self.rank == "estimate" else cost.time_s

    def __repr__(self) -> str:
        without = "nothing fits" if self.without_pipeline is None else fmt(self._timed(self.without_pipeline), "s")
        kind = ", estimated" if self.rank == "estimate" else ""
        return (f"PipelineNeed({'needed' if self.needed else 'not needed'}{kind}: with PP "
                f"{fmt(self._timed(self.with_pipeline), 's')}, without {without}, speedup {self.speedup:.2f}x)")


def needs_pipeline(model, B, topology, *, seq_len, slices=1, threshold=1.05, **options):
    """Do you need pipeline parallelism? The best plan with and without it, and whether PP wins by `threshold`.

    It is needed when it makes the step at least `threshold` times faster (1.05: 5%), or when nothing
    fits without it. Mostly it is needed where data-parallel communication would otherwise bind: a
    small high-bandwidth domain (8-GPU nodes) under a small batch per chip.

    Like :func:`search_plans` and :func:`pipeline_crossover` it ranks by the roofline unless told otherwise
    (``rank="roofline"``, the default of every planning function): the question it answers is chapter 5's,
    the book's, whether the bound itself needs a pipeline once data-parallel traffic binds.
    ``rank="estimate"`` asks it of the calibrated estimate instead (each side's plan chosen, and the
    speedup measured, by ``estimated_time_s``); the two can disagree, and chapter 5 shows both.

    Args:
        model, B, topology, seq_len, slices: as in :func:`search_plans`.
        threshold: the speedup that counts as needing PP (>= 1).
        **options: further options of :func:`search_plans` (``remat``, ``max_microbatches``, dtypes,
            ``rank``: ``"roofline"`` by default, as everywhere).

    Returns:
        a :class:`PipelineNeed` (times in s: roofline steps, or estimates under ``rank="estimate"``).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> from scalelib import gpu_cluster
        >>> needs_pipeline("llama-3-70b", 4 * 2**20, gpu_cluster(2048, "h100"), seq_len=4096)   # 16,384 GPUs
        PipelineNeed(needed: with PP 179 ms, without 265 ms, speedup 1.48x)
        >>> needs_pipeline("llama-3-70b", 4 * 2**20, gpu_cluster(128, "gb200-nvl72"), seq_len=4096).needed
        False
    """
    from ._validate import number

    th = number("threshold", threshold, at_least=1)
    if np.ndim(th):
        raise InvalidValueError(f"`threshold` must be one number, got {shown(threshold)}")
    for key in ("pipeline", "method", "runners_up"):
        if key in options:
            raise InvalidValueError(f"`{key}`: needs_pipeline sets it itself")
    options.setdefault("rank", "roofline")
    with warnings.catch_warnings():  # the question is pipelining, answered by both searches side by side
        warnings.simplefilter("ignore", OutsideValidationWarning)
        best = search_plans(model, B, topology, seq_len=seq_len, slices=slices, runners_up=0, **options).best
        try:
            flat = search_plans(model, B, topology, seq_len=seq_len, slices=slices, pipeline=False, runners_up=0,
                                **options).best
        except InvalidValueError as err:
            if "fits nowhere" not in str(err):
                raise
            flat = None
    rank = options["rank"]
    timed = (lambda c: c.estimated_time_s) if rank == "estimate" else (lambda c: c.time_s)
    speedup = math.inf if flat is None else timed(flat) / timed(best)
    return PipelineNeed(best, flat, speedup, speedup >= th, rank)


def _cluster_of(chips: int, chip, *, arg="chip"):
    """A GPU cluster of `chips` GPUs, or a TPU slice (cubes of 4x4x4, as even as can be) and how many slices.

    `arg` is the caller's name for `chip`, for the errors.
    """
    from ._specs import chip as _chip

    spec = _chip(chip, arg=arg)
    if spec.family == "gpu":
        g = spec._require("scale_up_domain", "a GPU cluster")
        if chips % g:
            raise InvalidValueError(f"`sizes`: a {spec.name} cluster is whole nodes of {g} GPUs, got {chips} GPUs")
        return gpu_cluster(chips // g, spec), 1
    pod, cube = spec._require("pod_shape", "a TPU slice"), spec.wraparound_cube
    if len(pod) != 3 or not cube:
        raise InvalidValueError(f"`{arg}`: the crossover sweep builds 3D slices of {spec.name}; use a 3D TPU (v4p, v5p)")
    shape, left = [cube] * 3, chips // cube**3
    if chips % cube**3 or left & (left - 1):
        raise InvalidValueError(f"`sizes`: a {spec.name} slice here is a power of 2 of {cube}x{cube}x{cube} cubes, "
                                f"got {chips} chips")
    slices = 1
    while left > 1:
        i = min(range(3), key=lambda k: (shape[k], k))
        if shape[i] * 2 > pod[i]:
            slices, left = slices * left, 1
            break
        shape[i] *= 2
        left //= 2
    return tpu_slice(tuple(shape), spec), slices


def pipeline_crossover(model, B, sizes, chip, *, seq_len, **options):
    """The best step with and without pipeline parallelism as a cluster of `chip` grows, at a fixed batch.

    GPUs come in whole nodes (8, or 72 for GB200 NVL72); TPUs (3D: v4p, v5p) in slices of 4x4x4 cubes,
    several slices over DCN once one slice would outgrow the pod. Like :func:`needs_pipeline`, which
    it calls at each size, and :func:`search_plans`, it ranks by the roofline (the default of every
    planning function: the bound whose crossover chapter 5 draws) unless ``rank="estimate"`` is passed;
    then its MFUs and steps are the estimate's.

    Args:
        model: a model name or a :class:`ModelSpec`.
        B: tokens per step (the global batch, fixed across sizes).
        sizes: chip counts to try (whole numbers).
        chip: the chip (a GPU or a 3D TPU).
        seq_len: T, tokens per sequence.
        **options: further options of :func:`search_plans` (``rank``: ``"roofline"`` by default, as everywhere).

    Returns:
        numpy arrays in a dict, keyed ``chips``, ``mfu_with``, ``mfu_without`` (fractions; nan where nothing
        fits), ``step_with_s``, ``step_without_s`` (s), and ``plans_with``, ``plans_without`` (lists).

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> out = pipeline_crossover("llama-3-70b", 4 * 2**20, [512, 16384], "h100", seq_len=4096)
        >>> [round(float(x), 2) for x in out["mfu_without"] / out["mfu_with"]]
        [1.0, 0.68]
    """
    from ._validate import counts

    ns = counts("sizes", [sizes] if isinstance(sizes, (int, np.integer)) else sizes)
    out = {"chips": np.array(ns, dtype=float), "mfu_with": [], "mfu_without": [], "step_with_s": [],
           "step_without_s": [], "plans_with": [], "plans_without": []}
    for n in ns:
        topology, slices = _cluster_of(n, chip)
        need = needs_pipeline(model, B, topology, seq_len=seq_len, slices=slices, **options)
        mfu = (lambda c: c.estimated_mfu) if need.rank == "estimate" else (lambda c: c.mfu)
        out["mfu_with"].append(mfu(need.with_pipeline))
        out["step_with_s"].append(need._timed(need.with_pipeline))
        out["plans_with"].append(need.with_pipeline.plan)
        flat = need.without_pipeline
        out["mfu_without"].append(math.nan if flat is None else mfu(flat))
        out["step_without_s"].append(math.nan if flat is None else need._timed(flat))
        out["plans_without"].append(None if flat is None else flat.plan)
    for key in ("mfu_with", "mfu_without", "step_with_s", "step_without_s"):
        out[key] = np.array(out[key], dtype=float)
    return out


def plot_pipeline_crossover(model, B, sizes, chips, *, seq_len, ax=None, **options):
    """MFU of the best plan with and without pipeline parallelism against cluster size, one pair of lines per chip.

    Args:
        model, B, sizes, seq_len, options: as in :func:`pipeline_crossover` (options as keywords).
        chips: chip names (one line pair each), e.g. ``["h100", "gb200-nvl72", "tpu-v5p"]``; sizes that do
            not fit a chip's unit (whole nodes, cubes) are skipped for it.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.

    Chapter:
        5 (Parallelism for training)

    Example:
        >>> ax = plot_pipeline_crossover("llama-3-70b", 4 * 2**20, [512, 2048], ["h100"], seq_len=4096, remat="full")
        >>> ax.get_ylabel()
        'MFU of the best plan (%)'
    """
    from ._diagrams import _axes
    from ._validate import counts

    names = [chips] if isinstance(chips, str) else list(chips) if isinstance(chips, (list, tuple)) else None
    if not names or not all(isinstance(n, str) for n in names):
        raise InvalidValueError(f"`chips` must be chip names, e.g. ['h100', 'tpu-v5p'], got {shown(chips)}")
    ns = counts("sizes", [sizes] if isinstance(sizes, (int, np.integer)) else sizes)
    created = ax is None
    ax = _axes(ax, figsize=(8.5, 4.5))
    for name in names:
        usable = []
        for n in ns:
            try:
                _cluster_of(n, name, arg="chips")
            except InvalidValueError as err:
                if str(err).startswith("`chips`"):  # the chip itself cannot make a cluster here
                    raise
                continue
            usable.append(n)
        if not usable:
            raise InvalidValueError(f"`sizes`: none of {list(ns)} makes a cluster of {name}")
        out = pipeline_crossover(model, B, usable, name, seq_len=seq_len, **options)
        (line,) = ax.semilogx(out["chips"], 100 * out["mfu_with"], "o-", label=f"{name}: with PP")
        ax.semilogx(out["chips"], 100 * out["mfu_without"], "x--", color=line.get_color(), label=f"{name}: without PP")
    ax.set_xlabel("chips in the cluster")
    ax.set_ylabel("MFU of the best plan (%)")
    ax.set_title(f"{_model(model).name}, {fmt(B)} tokens per step: does pipelining pay?")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.figure.tight_layout()
    if created:  # text legible on the site (>= 9.5 px at 1280 px)
        from ._plot import _legible

        _legible(ax.figure, relayout=True)
    return ax
