"""Published training runs, and scalelib's predictions of them (chapter 6's validation table).

``scalelib/data/training_runs.toml`` holds runs whose parallel configuration and measured utilisation
are public (Llama 3 405B on H100s, Megatron-LM's GPT models on A100s, PaLM 540B on TPU v4, and from other
software stacks BLOOM 176B and Megatron-Turing NLG 530B on Megatron-DeepSpeed), each with
its source. :func:`predict_training_run` prices the published plan with :func:`~scalelib.training_cost`:
the published axes are kept, and what the paper leaves out (pipeline schedule, microbatches, remat
when not stated) is chosen as the fastest that fits. The cost model runs every chip at its peak and
hides communication perfectly wherever compute covers it, so its utilisation is an upper bound:
a real run should come out below it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from ._derivation import Derivation, derivable, explain, q
from ._units import fmt
from ._errors import InvalidValueError, unknown
from ._models import ModelSpec, model as _model
from ._plan_search import SEARCH_SCHEDULES
from ._topology import gpu_cluster, tpu_slice
from ._training import ParallelPlan, _divisors, training_cost
from ._transformer import train_flops
from ._validate import flag, shown

QUANTITIES = {"mfu": "model FLOPs utilisation", "hfu": "hardware FLOPs utilisation (recomputation counted)",
              "step_time": "seconds per training step (iteration)"}


@dataclass(frozen=True)
class TrainingRun:
    """One published training run: its model, cluster, parallel axes and batch, what was reported, where.

    ``quantity`` is ``"mfu"`` or ``"hfu"`` (see :func:`predict_training_run`), and ``reported`` the
    fraction of peak the authors measured; or ``"step_time"``, and ``reported`` the seconds per step.
    ``remat`` lists the remat policies the prediction may choose from (one when the paper states it);
    ``microbatches``, ``schedule`` and ``virtual_stages``, when given, are the published pipeline
    schedule. ``slices`` above 1 joins that many copies of ``slice`` over the data-center network in the
    priced plan (its ``slices`` axis: MaxText's multi-slice runs, ``B`` their whole batch), where
    ``slices_reported`` only counts the pods a run used and prices one of them (PaLM's two pods, as one
    with half the batch). ``sequence_parallel``, ``flash_attention`` and ``state_sharded_over_data`` (gradients and
    optimizer state sharded over the data axis, ZeRO-2) describe the run for the calibrated estimate
    (:func:`published_plan_estimate`).
    """

    name: str
    title: str
    quantity: str
    reported: float
    chip: str
    B: int
    seq_len: int
    config: str
    source: str
    url: str
    date: str
    model: str | None = None
    shape: dict | None = field(default=None, repr=False)
    num_nodes: int | None = None
    slice: tuple[int, ...] | None = None
    slices_reported: int = 1
    slices: int = 1
    data: int = 1
    fsdp: int = 1
    tensor: int = 1
    pipeline: int = 1
    remat: tuple[str, ...] = ("none", "dot_product", "full")
    master_dtype: str | None = None
    notes: str = ""
    checked: tuple[str, ...] = ()
    microbatches: int | None = None
    schedule: str | None = None
    virtual_stages: int = 1
    sequence_parallel: bool = True
    flash_attention: bool = True
    state_sharded_over_data: bool = False

    @property
    def spec(self) -> ModelSpec:
        """The model trained: a preset, or the shape the paper gives."""
        if self.shape is not None:
            return ModelSpec(**self.shape, source=self.source)
        return _model(self.model)

    @property
    def topology(self):
        """The cluster the prediction runs on (one pod of a multi-pod TPU run)."""
        if self.slice:
            return tpu_slice(self.slice, self.chip)
        return gpu_cluster(self.num_nodes, self.chip)

    @property
    def chips(self) -> int:
        """Chips in the run as published (every pod of it)."""
        return self.topology.num_chips * self.slices_reported


@lru_cache(maxsize=None)
def _load(step_times: bool = False, multislice: bool = False) -> tuple[TrainingRun, ...]:
    text = resources.files("scalelib").joinpath("data/training_runs.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    rows = []
    for row in (data["run"] + (data.get("step_run", []) if step_times else [])
                + (data.get("multislice_run", []) if multislice else [])):
        row = dict(row)
        for key in ("slice", "remat", "checked"):
            if key in row:
                row[key] = tuple(row[key])
        rows.append(TrainingRun(**row))
    return tuple(rows)


def training_runs(*, step_times=False, multislice=False) -> tuple[TrainingRun, ...]:
    """The published training runs chapter 6 predicts, each with its configuration and source.

    Args:
        step_times: also the runs the calibrated estimate is checked on by their step time, after the
            ten of the roofline's table: Korthikanti et al. 2022's eight (Table 5, published as seconds)
            and Google's MaxText benchmarks on one TPU v4, v5p or v5e slice (published as MFU, whose
            step time follows from MaxText's FLOP count, the same as :func:`~scalelib.train_flops`').
        multislice: also, last, MaxText's runs of the same models and plans over 2 to 32 slices joined by
            data parallelism over the data-center network (the plan's ``slices``), each at the batch per
            chip of its one-slice run.

    Returns:
        a tuple of :class:`TrainingRun`.

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> r = training_runs()[0]
        >>> r.chips, r.tensor, r.pipeline, r.data, r.reported
        (8192, 8, 16, 64, 0.43)
    """
    return _load(flag("step_times", step_times), flag("multislice", multislice))


def _run(run) -> TrainingRun:
    if isinstance(run, TrainingRun):
        return run
    known = {r.name: r for r in _load(True, True)}
    if isinstance(run, str) and run in known:
        return known[run]
    if isinstance(run, str):
        raise unknown("published training run", run, known, arg="run")
    raise InvalidValueError(f"`run` must be a TrainingRun (from training_runs()) or its name, such as "
                            f"'llama3-405b-8k-h100', got {shown(run)}")


def published_plan_cost(run):
    """The fastest way to run a published configuration: its axes fixed, the unpublished details chosen.

    Every pipeline schedule the plan search tries, every microbatch count that cuts a replica's
    sequences into whole ones (the published count, where the paper gives one) and the run's remat
    policies are priced with :func:`~scalelib.training_cost`; the fastest plan that fits in memory wins.

    Args:
        run: a :class:`TrainingRun` or its name.

    Returns:
        a :class:`~scalelib.TrainingCost` (step time in s).

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> cost = published_plan_cost("megatron-1t-a100")
        >>> cost.plan.tensor, cost.plan.pipeline, cost.plan.remat
        (8, 64, 'full')
    """
    r = _run(run)
    best = None
    for cost in _candidates(r):
        if cost.fits and (best is None or cost.time_s < best.time_s):
            best = cost
    if best is None:
        raise InvalidValueError(f"`run`: no schedule, microbatch count or remat policy fits {r.name}'s plan in "
                                f"memory")
    return best


def _candidates(r: TrainingRun, **options):
    """Every plan with the run's published axes: its published schedule, or each the search tries."""
    spec, topology = r.spec, r.topology
    axes = dict(data=r.data, fsdp=r.fsdp, tensor=r.tensor, pipeline=r.pipeline, slices=r.slices)
    sequences = r.B // (r.data * r.fsdp * r.slices * r.seq_len)
    if r.microbatches is not None:
        schedules, counts = ((r.schedule, r.virtual_stages),), (r.microbatches,)
    else:
        # every count that cuts a replica's sequences into whole ones (a microbatch never holds part of a
        # sequence): 280 sequences are tried as 280 microbatches of one, 140 of two, ..., not 256 of 1.09
        schedules = SEARCH_SCHEDULES if r.pipeline > 1 else SEARCH_SCHEDULES[:1]
        counts = tuple(_divisors(max(sequences, 1)))
    for schedule, v in schedules:
        for m in counts:
            for remat in r.remat:
                try:
                    plan = ParallelPlan(**axes, microbatches=m, schedule=schedule, virtual_stages=v, remat=remat)
                    yield training_cost(spec, r.B, plan, topology, seq_len=r.seq_len, master_dtype=r.master_dtype,
                                        **options)
                except InvalidValueError:
                    continue


def published_plan_estimate(run):
    """The published configuration priced by the calibrated estimate: its axes fixed, the rest chosen by it.

    As :func:`published_plan_cost`, with the run's own ``sequence_parallel`` and ``flash_attention``,
    and the fastest plan by ``estimated_time_s`` among those that fit (a run whose schedule is
    published prices that schedule only). A run with ``state_sharded_over_data`` fits when its memory
    with the gradients and optimizer state divided over the data axis does.

    Args:
        run: a :class:`TrainingRun` or its name.

    Returns:
        a :class:`~scalelib.TrainingCost` (its ``estimated_time_s`` in s).

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> cost = published_plan_estimate("korthikanti-175b-selective")
        >>> fmt(cost.time_s, "s"), fmt(cost.estimated_time_s, "s")      # measured: 13.75 s
        ('7.44 s', '13.3 s')
    """
    r = _run(run)
    best = None
    for cost in _candidates(r, sequence_parallel=r.sequence_parallel, flash_attention=r.flash_attention):
        mem = cost.memory_bytes
        total = mem["total"]
        if r.state_sharded_over_data:
            total -= (mem["gradients"] + mem["optimizer state"]) * (1 - 1 / cost.plan.data)
        if total <= cost.hbm_bytes and (best is None or cost.estimated_time_s < best.estimated_time_s):
            best = cost
    if best is None:
        raise InvalidValueError(f"`run`: no schedule, microbatch count or remat policy fits {r.name}'s plan in "
                                f"memory")
    return best


@derivable
def measured_step_time_s(run):
    """The step time a published run measured: given as such, or from its utilisation and its FLOPs.

    Formula:
        T_measured = FLOPs(B tokens) / (U · N · C)   (for a run published as a utilisation U)

    Args:
        run: a :class:`TrainingRun` or its name.

    Returns:
        seconds (s).

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> round(measured_step_time_s("korthikanti-22b-full"), 2), round(measured_step_time_s("megatron-1t-a100"), 1)
        (1.42, 103.8)
    """
    r = _run(run)
    if r.quantity == "step_time":
        return Derivation("T_measured", "published", "", float(r.reported), "s", where=(f"source: {r.source}",))
    remat = r.remat[0] if r.quantity == "hfu" else "none"
    flops = explain(train_flops, r.spec, seq_len=r.seq_len, tokens=r.B, remat=remat)
    C = r.topology.spec.peak_flops_per_s()
    n = r.topology.num_chips * r.slices
    return Derivation("T_measured", "FLOPs / (U · N · C)",
                      lambda: f"{q(flops.value, 'FLOP')} / ({q(r.reported)} · {n} · {q(C, 'FLOP/s')})",
                      float(flops.value) / (r.reported * n * C), "s", (flops,),
                      where=(f"U: the published {r.quantity.upper()}, {r.source}", "N: chips; C: peak FLOP/s"))


@derivable
def estimate_error(run):
    """The calibrated estimate's error on a published run: estimated / measured step time − 1.

    Positive means the estimate is slower than the run was.

    Formula:
        error = T_est / T_measured − 1

    Args:
        run: a :class:`TrainingRun` or its name.

    Returns:
        The relative error as a ratio (0.1 means 10% slower than measured).

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> round(estimate_error("korthikanti-1t-full"), 3)
        0.025
    """
    r = _run(run)
    cost = published_plan_estimate(r)
    measured = explain(measured_step_time_s, r)
    return Derivation("error", "T_est / T_measured − 1",
                      lambda: f"{q(cost.estimated_time_s, 's')} / {q(measured.value, 's')} − 1",
                      cost.estimated_time_s / float(measured.value) - 1, "", (measured,),
                      where=(f"T_est: the calibrated estimate of {cost.plan!r} (roofline {q(cost.time_s, 's')})",))


@derivable
def predict_training_run(run):
    """scalelib's prediction of a published run's utilisation, from its configuration alone.

    The published plan is priced by :func:`published_plan_cost`. For ``"mfu"`` the step does the
    model's FLOPs (:func:`~scalelib.train_flops`, no recomputation); for ``"hfu"`` the FLOPs of its
    remat policy. Chips run at peak and communication hides under compute where it can, so the
    prediction is an upper bound on what the run can measure.

    Formula:
        U = FLOPs(B tokens) / (T_step · N · C)

    Args:
        run: a :class:`TrainingRun` from :func:`training_runs`, or its name.

    Returns:
        a fraction of peak (dimensionless); for a run published as a step time (``"step_time"``), the
        roofline's step in seconds.

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> round(predict_training_run("palm-540b-tpu-v4"), 2)     # reported: 0.462
        0.75
    """
    r = _run(run)
    cost = published_plan_cost(r)
    if r.quantity == "step_time":
        return Derivation("T_step", "roofline step of the published plan", "", cost.time_s, "s",
                          where=(f"T_step: the step of {cost.plan!r}",))
    topology = r.topology
    remat = cost.plan.remat if r.quantity == "hfu" else "none"
    flops = explain(train_flops, r.spec, seq_len=r.seq_len, tokens=r.B, remat=remat)
    C = topology.spec.peak_flops_per_s()
    n = topology.num_chips * r.slices
    return Derivation(r.quantity.upper(), "FLOPs / (T_step · N · C)",
                      lambda: f"{q(flops.value, 'FLOP')} / ({q(cost.time_s, 's')} · {n} · {q(C, 'FLOP/s')})",
                      flops.value / (cost.time_s * n * C), "", (flops,),
                      where=(f"T_step: the step of {cost.plan!r}, the fastest that fits with the published axes",
                             f"N: chips; C: a {topology.spec.name}'s peak FLOP/s"))


@derivable
def training_prediction_error(run):
    """The relative error of scalelib's prediction of a published run's utilisation: predicted / reported − 1.

    Positive means the run reached less than the cost model's bound.

    Formula:
        error = U_predicted / U_reported − 1

    Args:
        run: a :class:`TrainingRun` or its name.

    Returns:
        a ratio (0.1 is 10% above the reported value).

    Chapter:
        6 (Training LLaMA 3)

    Example:
        >>> round(training_prediction_error("megatron-1t-a100"), 2)
        0.81
    """
    r = _run(run)
    predicted = explain(predict_training_run, r)
    return Derivation("error", "U_predicted / U_reported − 1",
                      lambda: f"{q(predicted.value)} / {q(r.reported)} − 1",
                      float(predicted.value) / r.reported - 1, "", (predicted,), where=(f"reported: {r.source}",))
