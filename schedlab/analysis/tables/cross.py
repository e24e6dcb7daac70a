r"""The cross-paper table: every registered online policy, and Hare's greedy planner, on the
same four workloads (homogeneous, heterogeneous, dynamic-adaptation, fine-tuning).

No paper has this table; it puts the policies of the five papers side by side on workloads
none of them was built for alone.  A policy that cannot use a workload's features runs on it
with what it can see, through the conversions of :mod:`schedlab.analysis.cross_workloads`;
where a policy truly cannot run, its cell is empty and says why (:func:`plan_for`).

**What is run** per (workload, seed, policy) cell, on the instance of
:func:`~schedlab.analysis.cross_workloads.build_workload` (sizes: :class:`TableSettings`):

* ``homogeneous``, ``heterogeneous``, ``dynamic``: the round-based engine
  (:func:`~schedlab.simulator.engine.simulate`, the workload's round length).  Titan's
  policies run there as the engine runs them (:meth:`~schedlab.policies.titan.Titan.decide`:
  fixed gangs, no merge candidates); Shockwave's on the homogeneous workload see its jobs as
  constant-batch-size jobs (:func:`~schedlab.analysis.cross_workloads.as_dynamic`), and
  cannot run on the heterogeneous one (Shockwave plans one accelerator type).
* ``fine-tuning``: Titan's world (:func:`~schedlab.simulator.elastic.simulate_elastic`:
  elastic GPU counts, merges, context switches at every reallocation) for every policy;
  Titan's policies plan natively, every other one runs through
  :class:`~schedlab.simulator.elastic_gangs.FixedGangs` (each task on its requested GPUs, no
  merges), as ``schedlab tables titan`` runs its baselines.  The cluster gets 1 $/GPU-hour
  (:func:`~schedlab.analysis.cross_workloads.with_unit_price`) so Gavel's cost policies run.
  Shockwave cannot run here: its planner needs epoch schedules, and the fixed-gang view
  shows each task as a fraction of work; nor can a policy that needs Gavel's round mechanism
  (``gavel.fifo_agnostic_quirks``: as Gavel's code, it grants more GPUs than exist and
  relies on that mechanism to run only what fits).
* ``goodput`` (only in the full table, not ``--quick``): the first jobs of Pollux's
  workload (seed mod 8) + 1 on T4 nodes of 4 GPUs
  (:func:`~schedlab.analysis.cross_workloads.goodput_workload`, requests capped at the
  cluster), in Pollux's simulator's world
  (:func:`~schedlab.simulator.goodput_run.simulate_goodput`, 60 s rounds): ``pollux`` and
  ``sia`` plan natively (and only here); every other policy runs each job on its requested
  GPUs and batch (:class:`~schedlab.policies.goodput_static.StaticOnGoodput`, the papers'
  TunedJobs); a job's isolated time is its run alone on that request.
* ``hare.greedy`` (Hare's planner, an offline formulation, rounds known in advance) plans
  every workload converted to Hare jobs (:func:`~schedlab.analysis.cross_workloads.as_hare`;
  LP grid :attr:`TableSettings.lp_eps`); its numbers are the plan's, not a simulation's.

**Metrics** per cell (:func:`~schedlab.analysis.metrics.summarize` on its per-job records):
average and 95th-percentile JCT (s), makespan = max f_j - min a_j (s), unfair fraction
#{j : rho_j > 1.05} / J (Shockwave's rho, :func:`~schedlab.analysis.metrics.
finish_time_fairness`, static contention), utilization = busy GPU-seconds / (G x makespan),
solver seconds per decision (Hare: its LP and greedy seconds, one decision).  Each value is
the mean and sample std over the seeds.  The heat map colours each policy's mean average JCT
divided by the best policy's on that workload.

**Spec.**  The table is the experiment ``schedlab/analysis/experiments/cross.yaml`` (variant
``quick``; :func:`settings_from_spec` reads it) run by
:mod:`schedlab.analysis.experiments.runner` through :data:`KIND`.

**Cache.**  Each cell is written atomically as ``cells/<policy>__<workload>__seed<s>__<key>
.json`` (per-job records, run-level numbers, or the reason it could not run) and reused by a
re-run; ``key`` digests the (converted) instance, the policy, how it runs, the code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from schedlab.analysis import cross_workloads as cw
from schedlab.analysis import metrics
from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader
from schedlab.analysis.tables.cells import (
    check_seeds,
    code_digest,
    columns_json,
    file_safe,
    mean_std,
)
from schedlab.analysis.tables.output import Block, Document, Heading, pm
from schedlab.errors import InputError, SchedlabError
from schedlab.instance import Instance
from schedlab.policies.goodput_registry import GOODPUT_POLICIES

log = logging.getLogger(__name__)

Route = Literal["engine", "elastic", "hare", "goodput"]
#: Hare's planner: a row of the table beside the registered policies.
HARE = "hare.greedy"
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
DEFAULT_HETEROGENEOUS: Mapping[str, int] = {"v100": 4, "p100": 4, "k80": 4}
STEM = "cross"
PLOT_NAME = "cross_heatmap.png"
CELLS_FOLDER = "cells"
CELL_FORMAT = 1
HOUR_S = 3600.0
#: Record columns a cell keeps per job.
RECORD_COLUMNS: tuple[str, ...] = ("job", "arrival", "finish", "isolated_time_s",
                                   "scale_factor", "gpu_seconds")
#: (summary key, column label, scale, format) of the table's metric columns.
COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("avg_jct_s", "avg JCT (h)", 1 / HOUR_S, ".2f"),
    ("p95_jct_s", "p95 JCT (h)", 1 / HOUR_S, ".2f"),
    ("makespan_s", "makespan (h)", 1 / HOUR_S, ".2f"),
    ("unfair_fraction", "unfair fraction", 1.0, ".2f"),
    ("utilization", "utilization", 1.0, ".2f"),
    ("solver_time_per_decision_s", "solver s/decision", 1.0, ".3f"),
)
#: Round length of the goodput workload, s (Pollux's and Sia's simulators).
GOODPUT_ROUND_S = 60.0
#: Extra summary keys the CSV keeps.
EXTRA_KEYS: tuple[str, ...] = ("median_jct_s", "worst_rho", "jobs", "finished", "wall_s")


def registered_policies() -> tuple[str, ...]:
    """Every registered online policy, by name, then Hare's planner."""
    from schedlab.policies.registry import policies

    return (*sorted(policies()), HARE)


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed: ``jobs`` jobs per workload, ``gpus`` GPUs of the one-type
    workloads (homogeneous, dynamic), ``heterogeneous`` for the other, ``titan_gpus`` for
    fine-tuning (a multiple of 4), Gavel's arrivals at ``jobs_per_hour``, ``seeds``,
    ``policies`` (None: every registered one and Hare's planner), Hare's LP grid ``lp_eps``
    and rounds cap ``hare_max_rounds``, ``round_s`` {workload: round length, s} overriding a
    generator's (Gavel's 360 s, Shockwave's and Titan's 120 s)."""

    jobs: int = 16
    gpus: int = 8
    heterogeneous: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_HETEROGENEOUS))
    titan_gpus: int = 16
    jobs_per_hour: float = 6.0
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    policies: tuple[str, ...] | None = None
    workloads: tuple[str, ...] = cw.WORKLOADS
    lp_eps: float = 0.25
    hare_max_rounds: int = cw.HARE_MAX_ROUNDS
    round_s: Mapping[str, float] = field(default_factory=dict)

    def policy_names(self) -> tuple[str, ...]:
        """The table's rows (Pollux and Sia after the others when the goodput workload is
        a column)."""
        if self.policies is not None:
            return self.policies
        extra = tuple(GOODPUT_POLICIES) if "goodput" in self.workloads else ()
        return (*registered_policies(), *extra)

    def describe(self) -> str:
        """One sentence: the workloads, their sizes and the seeds."""
        mix = " + ".join(f"{n} {k.upper()}" for k, n in self.heterogeneous.items())
        seeds = ", ".join(str(s) for s in self.seeds)
        return (f"{self.jobs} jobs per workload: homogeneous on {self.gpus} V100 and "
                f"heterogeneous on {mix} (Gavel's generator, {self.jobs_per_hour:g} jobs/h), "
                f"dynamic on {self.gpus} V100 (Shockwave's generator), fine-tuning on "
                f"{self.titan_gpus} A100 (Titan's generator)"
                + (f", goodput on {self.gpus} T4 (Pollux's workloads)"
                   if "goodput" in self.workloads else "") + f"; seed(s) {seeds}")


#: The ``--quick`` table's workloads: every one but the goodput workload (its job model
#: refits throughput models as jobs run: seconds per cell, too slow for a quick table).
QUICK_WORKLOADS: tuple[str, ...] = ("homogeneous", "heterogeneous", "dynamic", "fine-tuning")
#: Round lengths of the ``--quick`` table, s: long rounds, few decisions.
QUICK_ROUND_S: Mapping[str, float] = {"homogeneous": 3600.0, "heterogeneous": 3600.0,
                                      "dynamic": 600.0, "fine-tuning": 600.0}


def quick_settings(**overrides: Any) -> TableSettings:
    """The ``--quick`` table (under a minute on 2 cores): 6 jobs per workload on 4 GPUs
    (heterogeneous 2 + 2 + 2, fine-tuning 8), rounds of :data:`QUICK_ROUND_S`, seed 0, every
    policy."""
    base = TableSettings(jobs=6, gpus=4, heterogeneous={"v100": 2, "p100": 2, "k80": 2},
                         titan_gpus=8, seeds=(0,), round_s=dict(QUICK_ROUND_S),
                         workloads=QUICK_WORKLOADS)
    return replace(base, **overrides)


def check_settings(settings: TableSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` for settings that cannot make a table."""
    check_seeds(settings.seeds)
    if settings.jobs < 1:
        raise InputError("the workloads need at least one job", field="--jobs")
    if settings.gpus < 1 or sum(settings.heterogeneous.values()) < 1:
        raise InputError("the clusters need GPUs", field="--gpus")
    if settings.titan_gpus < 4 or settings.titan_gpus % 4:
        raise InputError("the fine-tuning cluster needs a multiple of 4 GPUs",
                         field="titan_gpus")
    if not (math.isfinite(settings.jobs_per_hour) and settings.jobs_per_hour > 0):
        raise InputError("jobs_per_hour must be > 0", field="jobs_per_hour")
    if any(not (math.isfinite(v) and v > 0) for v in settings.round_s.values()):
        raise InputError("round lengths must be > 0", field="round_s")
    if "goodput" in settings.workloads and (settings.gpus < cw.GOODPUT_GPUS_PER_NODE
                                             or settings.gpus % cw.GOODPUT_GPUS_PER_NODE):
        raise InputError("the goodput workload's cluster is whole nodes of 4 GPUs",
                         field="workloads[0].params.gpus")
    unknown = [w for w in settings.workloads if w not in cw.WORKLOADS]
    if unknown or not settings.workloads:
        raise InputError(f"unknown workload(s) {unknown} (of {', '.join(cw.WORKLOADS)})",
                         field="workloads")
    names = settings.policy_names()
    if not names or len(set(names)) != len(names):
        raise InputError("the table needs distinct policies", field="policies")


#: The spec's workload generator: the four workloads of :mod:`~schedlab.analysis.
#: cross_workloads`, sized by its parameters.
GENERATOR = "cross.workloads"
#: Its parameters (the table settings they set).
PARAMS: tuple[str, ...] = ("workloads", "jobs", "gpus", "heterogeneous", "titan_gpus",
                           "jobs_per_hour")
#: Keys of the spec's ``settings``: Hare's planner's LP grid and rounds cap.
SETTINGS: tuple[str, ...] = ("lp_eps", "hare_max_rounds")


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``cross.yaml`` shipped beside the
    runner), checked; every mistake one :class:`~schedlab.errors.InputError` naming the
    field path:

    * one workload ``cross.workloads`` with the parameters of :data:`PARAMS`: ``workloads``
      (names of :data:`~schedlab.analysis.cross_workloads.WORKLOADS`), ``jobs`` per
      workload, ``gpus`` (homogeneous, dynamic), ``heterogeneous`` ({type: GPUs}),
      ``titan_gpus`` (fine-tuning, a multiple of 4), ``jobs_per_hour`` (Gavel's arrivals);
    * ``policies``: the rows by registered ``name`` (no label, no options); none: every
      registered online policy and Hare's planner, by name;
    * ``seeds``; ``simulator.round_s`` ({workload: round length, s}); ``settings.lp_eps``
      and ``settings.hare_max_rounds``.
    """
    read = FieldReader(spec)
    entry, _ = read.sections((GENERATOR,), PARAMS, simulator=("round_s",), settings=SETTINGS)
    if spec.report.reference is not None:
        raise read.error("report.reference", "this table has no reference policy (its heat "
                         "map divides by each workload's best)")
    if not spec.seeds:
        raise read.error("seeds", "the table needs at least one seed")
    values: dict[str, Any] = {"seeds": tuple(spec.seeds), "policies": _policies_of(read, spec)}
    where = "workloads[0].params"
    for name, value in entry.params.items():
        at = f"{where}.{name}"
        if name == "workloads":
            values[name] = _workloads_of(read, at, value)
        elif name == "heterogeneous":
            if not isinstance(value, Mapping) or not value:
                raise read.error(at, "expected a mapping {accelerator type: GPUs}")
            values[name] = {str(kind): read.number(f"{at}.{kind}", count, integer=True,
                                                   at_least=1)
                            for kind, count in value.items()}
        elif name == "jobs_per_hour":
            values[name] = read.number(at, value, positive=True)
        elif name == "titan_gpus":
            gpus = read.number(at, value, integer=True, at_least=4)
            if gpus % 4:
                raise read.error(at, f"the fine-tuning cluster is whole nodes of 4 GPUs, "
                                 f"got {gpus}")
            values[name] = gpus
        else:  # jobs, gpus
            values[name] = read.number(at, value, integer=True, at_least=1)
    if "round_s" in spec.simulator:
        values["round_s"] = _round_lengths(read, "simulator.round_s",
                                           spec.simulator["round_s"])
    if "lp_eps" in spec.settings:
        values["lp_eps"] = read.number("settings.lp_eps", spec.settings["lp_eps"],
                                       positive=True)
    if "hare_max_rounds" in spec.settings:
        values["hare_max_rounds"] = read.number(
            "settings.hare_max_rounds", spec.settings["hare_max_rounds"], integer=True,
            at_least=1)
    settings = replace(TableSettings(), **values)
    check_settings(settings)
    return settings


def _workloads_of(read: FieldReader, where: str, value: Any) -> tuple[str, ...]:
    """``params.workloads``: distinct names of :data:`~schedlab.analysis.cross_workloads.
    WORKLOADS`, in the table's column order as given."""
    if not isinstance(value, list) or not value:
        raise read.error(where, f"expected a non-empty list of workloads (of "
                         f"{', '.join(cw.WORKLOADS)})")
    for i, name in enumerate(value):
        if name not in cw.WORKLOADS:
            raise read.error(f"{where}[{i}]", f"unknown workload {name!r} (known: "
                             f"{', '.join(cw.WORKLOADS)})")
    if len(set(value)) != len(value):
        raise read.error(where, "workloads must be distinct")
    return tuple(value)


def _round_lengths(read: FieldReader, where: str, value: Any) -> dict[str, float]:
    """``simulator.round_s``: {workload: round length, s}, each > 0."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise read.error(where, "expected a mapping {workload: round length, s}")
    read.only_keys(where, value, cw.WORKLOADS)
    return {str(name): read.number(f"{where}.{name}", seconds, positive=True)
            for name, seconds in value.items()}


def _policies_of(read: FieldReader, spec: Experiment) -> tuple[str, ...]:
    """The rows of ``policies`` by name; when the spec lists none, every registered policy
    and Hare's planner (:func:`registered_policies`, named here so the manifest records
    them)."""
    known = registered_policies()
    if not spec.policies:
        return known
    names = []
    for i, entry in enumerate(spec.policies):
        at = f"policies[{i}]"
        if entry.options:
            raise read.error(f"{at}.options", "the table runs each policy with its defaults "
                             "(no options)")
        if entry.label is not None and entry.label != entry.name:
            raise read.error(f"{at}.label", "the table's rows are named by the policy; "
                             "leave the label out")
        if entry.name not in known:
            raise read.error(f"{at}.name", f"no registered policy {entry.name!r} (known: "
                             f"{', '.join(known)})")
        names.append(entry.name)
    if len(set(names)) != len(names):
        raise read.error("policies", "the table needs distinct policies")
    return tuple(names)


# ------------------------------------------------------------------------ how each runs


@dataclass(frozen=True)
class Plan:
    """How a policy runs on a workload: the ``route`` (None: it cannot, ``reason`` says
    why) and the ``conversion`` it sees the workload through ("" when none)."""

    route: Route | None
    conversion: str = ""
    reason: str = ""


def _kind(policy: str) -> tuple[str, bool, bool]:
    """(the policy's ``workload_kind``, whether it plans Titan's elastic world, whether it
    needs Gavel's round mechanism)."""
    from schedlab.policies.registry import get_policy

    made = get_policy(policy)
    return (made.workload_kind, callable(getattr(made, "plan", None)),
            getattr(made, "mechanism", None) == "gavel")


def plan_for(policy: str, workload: str) -> Plan:
    """How ``policy`` runs on ``workload`` (module docstring)."""
    if policy in GOODPUT_POLICIES:
        if workload == "goodput":
            return Plan("goodput", "")
        return Plan(None, reason="it plans goodput jobs only (elastic jobs that choose their "
                    "batch size from a fitted goodput model)")
    if policy == HARE:
        if workload == "goodput":
            return Plan(None, reason="Hare plans rounds of tasks with known durations; a "
                        "goodput job's speed depends on the batch and GPUs it is given")
        return Plan("hare", "as Hare jobs (R_j rounds of m_j tasks; a plan, not simulated)")
    kind, elastic, gavel_mechanism = _kind(policy)
    if workload == "goodput":
        if kind == "shockwave":
            return Plan(None, reason="Shockwave plans epoch schedules of dynamic jobs; a "
                        "goodput job's batch is the job's own choice")
        if gavel_mechanism:
            return Plan(None, reason="it over-commits GPUs as Gavel's code does and needs "
                        "Gavel's round mechanism, which the goodput simulator does not have")
        return Plan("goodput", "fixed gangs: each job on its requested GPUs and batch "
                    "(TunedJobs)")
    if workload == "fine-tuning":
        if kind == "shockwave":
            return Plan(None, reason="Shockwave plans epoch schedules; Titan's world shows "
                        "each task as a fraction of work")
        if gavel_mechanism:
            return Plan(None, reason="it over-commits GPUs as Gavel's code does and needs "
                        "Gavel's round mechanism, which Titan's world does not have")
        if elastic:
            return Plan("elastic", "")
        return Plan("elastic", "fixed gangs: each task on its requested GPUs, no merges")
    if kind == "shockwave":
        if workload == "heterogeneous":
            return Plan(None, reason="Shockwave plans one accelerator type")
        if workload == "homogeneous":
            return Plan("engine", "constant batch size (static jobs as Shockwave jobs)")
        return Plan("engine", "")
    if kind == "titan":
        return Plan("engine", "fixed gangs, no merge candidates (round engine)")
    return Plan("engine", "")


def workload_instance(settings: TableSettings, workload: str, seed: int) -> Instance:
    """The workload of ``seed`` as generated (the fine-tuning one priced,
    :func:`~schedlab.analysis.cross_workloads.with_unit_price`), with the settings' round
    length when they give one."""
    instance = cw.build_workload(workload, jobs=settings.jobs, seed=seed, gpus=(
        settings.titan_gpus if workload == "fine-tuning" else settings.gpus),
        heterogeneous=settings.heterogeneous, jobs_per_hour=settings.jobs_per_hour)
    round_s = settings.round_s.get(workload)
    if round_s is not None and round_s != instance.params.round_s:
        instance = instance.model_copy(
            update={"params": instance.params.model_copy(update={"round_s": round_s})})
    return cw.with_unit_price(instance) if workload == "fine-tuning" else instance


def policy_instance(settings: TableSettings, instance: Instance, policy: str, workload: str,
                    plan: Plan) -> Instance:
    """What ``policy`` is given of the workload ``instance`` under ``plan``."""
    if plan.route == "hare":
        return cw.as_hare(instance, settings.hare_max_rounds)
    if plan.route == "engine" and workload == "homogeneous" and _kind(policy)[0] == "shockwave":
        return cw.as_dynamic(instance)
    return instance


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One simulation or plan: ``policy`` on the ``workload`` of ``seed``."""

    policy: str
    workload: str
    seed: int
    route: Route | None
    reason: str
    instance: Instance | None
    lp_eps: float
    key: str

    @property
    def file_name(self) -> str:
        """``<policy>__<workload>__seed<seed>__<key>.json`` (file-safe)."""
        return (f"{file_safe(self.policy)}__{self.workload}__seed{self.seed}__"
                f"{self.key}.json")


@dataclass(frozen=True)
class CellResult:
    """A cell's per-job records and run-level numbers, or why it has none."""

    policy: str
    workload: str
    seed: int
    reason: str = ""
    records: pd.DataFrame | None = None
    gpus: int = 0
    busy_gpu_s: float = 0.0
    solver_time_s: float = 0.0
    decisions: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        records = None
        if self.records is not None:
            records = columns_json(self.records, RECORD_COLUMNS)
        return {"format": CELL_FORMAT, "policy": self.policy, "workload": self.workload,
                "seed": self.seed, "reason": self.reason, "records": records,
                "gpus": self.gpus, "busy_gpu_s": self.busy_gpu_s,
                "solver_time_s": self.solver_time_s, "decisions": self.decisions,
                "wall_s": self.wall_s}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        raw = data["records"]
        records = None
        if raw is not None:
            records = pd.DataFrame({
                "job": [str(j) for j in raw["job"]],
                **{c: np.asarray([math.nan if v is None else v for v in raw[c]], dtype=float)
                   for c in RECORD_COLUMNS if c != "job"}})
        return cls(policy=str(data["policy"]), workload=str(data["workload"]),
                   seed=int(data["seed"]), reason=str(data["reason"]), records=records,
                   gpus=int(data["gpus"]), busy_gpu_s=float(data["busy_gpu_s"]),
                   solver_time_s=float(data["solver_time_s"]),
                   decisions=int(data["decisions"]), wall_s=float(data["wall_s"]))

    def summary(self) -> dict[str, float]:
        """:func:`~schedlab.analysis.metrics.summarize` of the records (empty without)."""
        if self.records is None:
            return {}
        frame = self.records.assign(**{metrics.RUN_BUSY_GPU_SECONDS: self.busy_gpu_s})
        out = metrics.summarize(frame, self.gpus, solver_time_s=self.solver_time_s,
                                decisions=self.decisions)
        out["wall_s"] = self.wall_s
        return out


def cell_key(instance: Instance | None, policy: str, route: Route | None, reason: str,
             lp_eps: float) -> str:
    """12 hex digits naming a cell: instance, policy, route, the code, the format."""
    text = json.dumps({"instance": instance.model_dump_json() if instance else None,
                       "policy": policy, "route": route, "reason": reason,
                       "lp_eps": lp_eps if route == "hare" else None,
                       "code": code_digest(), "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _cost_rank(cell: Cell) -> int:
    """Slow cells first (a rough order: planners and MILPs, then LP policies)."""
    if cell.route is None:
        return 9
    if cell.route == "hare" or cell.policy.startswith(("shockwave", "titan")):
        return 0
    return 1 if cell.policy.startswith("gavel.") else 2


def plan_cells(settings: TableSettings) -> list[Cell]:
    """Every (workload, seed, policy) cell, the slow ones first (the settings are checked
    first)."""
    check_settings(settings)
    cells = []
    for workload in settings.workloads:
        for seed in settings.seeds:
            instance = workload_instance(settings, workload, seed)
            for policy in settings.policy_names():
                plan = plan_for(policy, workload)
                given = (policy_instance(settings, instance, policy, workload, plan)
                         if plan.route else None)
                cells.append(Cell(policy, workload, seed, plan.route, plan.reason, given,
                                  settings.lp_eps,
                                  cell_key(given, policy, plan.route, plan.reason,
                                           settings.lp_eps)))
    cells.sort(key=_cost_rank)
    return cells


def _simulated(cell: Cell) -> tuple[pd.DataFrame, int, float, float, int]:
    """(records, GPUs, busy GPU-s, solver s, decisions) of a simulated cell."""
    from schedlab.policies.registry import get_policy
    from schedlab.simulator.elastic import simulate_elastic
    from schedlab.simulator.elastic_gangs import FixedGangs
    from schedlab.simulator.engine import simulate

    assert cell.instance is not None
    policy = get_policy(cell.policy)
    if cell.route == "elastic":
        runner = policy if callable(getattr(policy, "plan", None)) else FixedGangs(policy)
        result = simulate_elastic(cell.instance, runner, seed=cell.seed)  # type: ignore[arg-type]
    else:
        result = simulate(cell.instance, policy=policy, seed=cell.seed,
                          round_s=cell.instance.params.round_s)
    frame = result.to_dataframe()
    records = frame[list(RECORD_COLUMNS)].copy()
    records["job"] = records["job"].astype(str)
    return (records, sum(result.gpus.values()), float(sum(result.busy_gpu_seconds().values())),
            float(result.solver_time_s), int(result.decisions))


def _goodput_simulated(cell: Cell) -> tuple[pd.DataFrame, int, float, float, int]:
    """(records, GPUs, busy GPU-s, solver s, decisions) of a goodput cell: Pollux's
    simulator's rules, 60 s rounds; ``isolated_time_s`` = the job alone on its requested
    GPUs and batch from time 0 (:func:`_alone_s`)."""
    from schedlab.policies.goodput_registry import goodput_policy
    from schedlab.simulator.goodput_run import simulate_goodput
    from schedlab.workloads.goodput import cluster_of, specs_from_instance

    assert cell.instance is not None
    specs = specs_from_instance(cell.instance)
    cluster = cluster_of(cell.instance)
    options = {"seed": cell.seed} if cell.policy == "pollux" else {}
    run = simulate_goodput(specs, cluster, goodput_policy(cell.policy, **options),
                           world="pollux", interval=GOODPUT_ROUND_S)
    jobs = run.result.jobs
    records = pd.DataFrame({
        "job": [j.job for j in jobs],
        "arrival": [j.arrival for j in jobs],
        "finish": [math.nan if j.finish is None else j.finish for j in jobs],
        "isolated_time_s": [_alone_s(spec, tuple(cluster.items())) for spec in specs],
        "scale_factor": [float(j.scale_factor) for j in jobs],
        "gpu_seconds": [j.gpu_seconds for j in jobs],
    })
    busy = float(sum(run.held_gpus)) * GOODPUT_ROUND_S
    return (records, sum(n * g for n, g in cluster.values()), busy,
            float(run.result.solver_time_s), int(run.result.decisions))


@functools.lru_cache(maxsize=1024)
def _alone_s(spec: Any, cluster: tuple[tuple[str, tuple[int, int]], ...]) -> float:
    """Seconds ``spec`` takes alone on its requested GPUs and batch, arriving at 0 (its JCT
    less the idle first round), in Pollux's simulator's world."""
    from dataclasses import replace as replaced

    from schedlab.policies.goodput_static import StaticOnGoodput
    from schedlab.simulator.goodput_run import simulate_goodput

    run = simulate_goodput([replaced(spec, submission_time=0.0)], dict(cluster),
                           StaticOnGoodput("fifo"), world="pollux", interval=GOODPUT_ROUND_S)
    return float(next(iter(run.jcts.values()))) - GOODPUT_ROUND_S


def _planned(cell: Cell) -> tuple[pd.DataFrame, int, float, float, int]:
    """(records, GPUs, busy GPU-s, solver s, decisions) of Hare's plan: completions C_j from
    the plan, busy = the tasks' seconds, one decision of the LP's and the greedy's seconds."""
    from schedlab.registry import get_formulation

    assert cell.instance is not None
    solution = get_formulation(HARE, eps=cell.lp_eps).solve(cell.instance)
    if not solution.status.has_solution:
        raise SchedlabError(f"hare.greedy ended {solution.status.value}: "
                            f"{'; '.join(solution.diagnostics)}")
    done = solution.metrics["completion_s"]
    jobs = cell.instance.jobs
    busy_of = dict.fromkeys((job.id for job in jobs), 0.0)
    for entry in solution.schedule:
        busy_of[entry.job] += float(entry.end) - float(entry.start)
    records = pd.DataFrame({
        "job": [job.id for job in jobs],
        "arrival": [float(job.arrival) for job in jobs],
        "finish": [float(done[job.id]) for job in jobs],
        "isolated_time_s": [job.rounds * min(job.task_seconds.values())  # type: ignore
                            for job in jobs],
        "scale_factor": [float(job.tasks_per_round) for job in jobs],  # type: ignore[arg-type]
        "gpu_seconds": [busy_of[job.id] for job in jobs],
    })
    gpus = sum(pool.count for pool in cell.instance.cluster.accelerators.values())
    seconds = float(solution.metrics.get("lp_s", 0.0)) + float(
        solution.metrics.get("greedy_s", 0.0))
    return records, gpus, float(sum(busy_of.values())), seconds, 1


def run_policy(cell: Cell) -> CellResult:
    """Simulate (or plan) the cell; a run the policy cannot make becomes a stated reason."""
    if cell.route is None:
        return CellResult(cell.policy, cell.workload, cell.seed, reason=cell.reason)
    t0 = time.perf_counter()
    try:
        records, gpus, busy, solver_s, decisions = (
            _planned(cell) if cell.route == "hare"
            else _goodput_simulated(cell) if cell.route == "goodput" else _simulated(cell))
    except SchedlabError as exc:
        log.warning("%s on %s (seed %d) could not run: %s", cell.policy, cell.workload,
                    cell.seed, exc)
        return CellResult(cell.policy, cell.workload, cell.seed,
                          reason=f"failed: {' '.join(str(exc).split())}",
                          wall_s=time.perf_counter() - t0)
    return CellResult(cell.policy, cell.workload, cell.seed, records=records, gpus=gpus,
                      busy_gpu_s=busy, solver_time_s=solver_s, decisions=decisions,
                      wall_s=time.perf_counter() - t0)


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`run_policy` (looked up when called); the runner
    writes the cell file."""
    return run_policy(cell)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.policy} on {cell.workload}, seed {cell.seed}"


CellKey = tuple[str, str, int]


def cell_result_key(cell: Cell) -> CellKey:
    """The key of a cell's result: (workload, policy, seed)."""
    return (cell.workload, cell.policy, cell.seed)


# --------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One policy on one workload over the seeds: how it ran, or why it could not."""

    policy: str
    workload: str
    plan: Plan
    reason: str = ""
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    per_seed: dict[int, dict[str, float]] = field(default_factory=dict)
    unfinished: int = 0

    @property
    def ran(self) -> bool:
        """Whether the row has values."""
        return not self.reason


@dataclass(frozen=True)
class CrossTable:
    """The computed table: settings (policies resolved) and one row per (workload,
    policy)."""

    settings: TableSettings
    rows: list[Row]

    def at(self, workload: str) -> list[Row]:
        """The rows of one workload, in policy order."""
        return [r for r in self.rows if r.workload == workload]

    def row(self, workload: str, policy: str) -> Row:
        """The row of ``policy`` on ``workload``."""
        return next(r for r in self.rows if r.workload == workload and r.policy == policy)

    def normalized_jct(self) -> pd.DataFrame:
        """Mean average JCT / the best policy's on the same workload (policies x workloads;
        NaN where a policy has no value)."""
        cfg = self.settings
        data = {}
        for workload in cfg.workloads:
            values = {r.policy: r.mean.get("avg_jct_s", math.nan) if r.ran else math.nan
                      for r in self.at(workload)}
            finite = [v for v in values.values() if math.isfinite(v)]
            best = min(finite) if finite else math.nan
            data[workload] = {p: v / best if finite else math.nan for p, v in values.items()}
        return pd.DataFrame(data, index=list(cfg.policy_names()))

    def winners(self) -> dict[str, str]:
        """The policy with the lowest mean average JCT on each workload."""
        norm = self.normalized_jct()
        return {w: str(norm[w].idxmin()) for w in norm.columns if norm[w].notna().any()}


def _row(workload: str, policy: str, seeds: Sequence[int],
         results: Mapping[CellKey, CellResult]) -> Row:
    plan = plan_for(policy, workload)
    own = [results[workload, policy, seed] for seed in seeds]
    reasons = [r.reason for r in own if r.reason]
    if reasons:
        return Row(policy=policy, workload=workload, plan=plan, reason=reasons[0])
    per_seed = {seed: r.summary() for seed, r in zip(seeds, own, strict=True)}
    mean: dict[str, float] = {}
    std: dict[str, float] = {}
    for key in (*(k for k, *_ in COLUMNS), *EXTRA_KEYS):
        mean[key], std[key] = mean_std([v[key] for v in per_seed.values()])
    unfinished = int(sum(v["jobs"] - v["finished"] for v in per_seed.values()))
    return Row(policy=policy, workload=workload, plan=plan, mean=mean, std=std,
               per_seed=per_seed, unfinished=unfinished)


def cross_table(settings: TableSettings, results: Mapping[CellKey, CellResult]
                ) -> CrossTable:
    """The table (module docstring) from every cell's result by (workload, policy, seed);
    its settings name the policies (None resolved to every registered one)."""
    cfg = replace(settings, policies=settings.policy_names())
    rows = [_row(w, p, cfg.seeds, results) for w in cfg.workloads for p in cfg.policy_names()]
    return CrossTable(settings=cfg, rows=rows)


# ------------------------------------------------------------------------------ outputs

CSV_COLUMNS: tuple[str, ...] = (
    "workload", "policy", "runs_as", "reason", "stat", "seed",
    *(k for k, *_ in COLUMNS), *EXTRA_KEYS, "normalized_avg_jct",
)


def to_frame(table: CrossTable) -> pd.DataFrame:
    """The CSV: per (workload, policy) one row per seed, then ``mean`` and ``std`` rows; a
    policy that could not run has one row with its reason."""
    norm = table.normalized_jct()
    keys = (*(k for k, *_ in COLUMNS), *EXTRA_KEYS)
    out: list[dict[str, Any]] = []
    for row in table.rows:
        head = {"workload": row.workload, "policy": row.policy,
                "runs_as": row.plan.conversion or "native", "reason": row.reason}
        if not row.ran:
            out.append({**head, "stat": "none"})
            continue
        for seed, values in row.per_seed.items():
            out.append({**head, "stat": "seed", "seed": seed, **{k: values[k] for k in keys}})
        out.append({**head, "stat": "mean", **row.mean,
                    "normalized_avg_jct": norm.loc[row.policy, row.workload]})
        out.append({**head, "stat": "std", **row.std})
    frame = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


def _runs_as(row: Row) -> str:
    if not row.ran:
        return f"n/a: {row.reason}"
    return row.plan.conversion or "native"


def document(table: CrossTable) -> Document:
    """The table's text: what was run, one block per workload, the winners."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    spread = f"mean ± sample std over {seeds} seeds" if seeds > 1 else "one seed"
    parts: list[str | Heading | Block] = [
        f"Ran: {cfg.describe()}. Every registered policy and Hare's greedy planner "
        "(`hare.greedy`, a plan of the workload converted to Hare jobs) on each workload; a "
        "policy sees the workload through the conversion in 'runs as', or gets no values and "
        "the reason. Gavel's and Shockwave's workloads run in the round engine, the "
        "fine-tuning one in Titan's elastic world (switch costs, elastic counts, merges) for "
        f"every policy. No paper reports this table. Cells: {spread}; unfair fraction = "
        "share of jobs with Shockwave's rho > 1.05; utilization = busy GPU-s / (G x "
        "makespan).",
    ]
    header = ["policy", *(label for _, label, _, _ in COLUMNS), "runs as"]
    for workload in cfg.workloads:
        rows = []
        for row in table.at(workload):
            cells = [row.policy]
            for key, _, scale, spec in COLUMNS:
                cells.append(pm(row.mean[key], row.std[key], spec, scale, seeds) if row.ran
                             else "-")
            cells.append(_runs_as(row))
            rows.append(cells)
        parts += [Heading(f"{workload}: {cw.WORKLOAD_TEXT[workload]}"),
                  Block(header=header, rows=rows, align="l" + "r" * len(COLUMNS) + "l")]
    winners = table.winners()
    if winners:
        parts.append("Lowest mean average JCT: " + "; ".join(
            f"{w}: {p}" for w, p in winners.items()) + f". Heat map: {PLOT_NAME}.")
    unfinished = sum(r.unfinished for r in table.rows)
    if unfinished:
        parts.append(f"{unfinished} job(s) did not finish; their JCTs are left out.")
    return Document(title="Cross-paper table: every policy on the same four workloads",
                    parts=parts)


def plot_heatmap(table: CrossTable, path: str | Path, dpi: int = 120) -> Path:
    """Policies x workloads, colour = mean average JCT / the best policy's on the workload
    (log scale), each cell annotated; grey with "n/a" where a policy has no value."""
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    norm = table.normalized_jct()
    values = norm.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    high = max(2.0, float(finite.max())) if len(finite) else 2.0
    fig, ax = plt.subplots(figsize=(2.0 + 1.6 * len(norm.columns), 1.0 + 0.28 * len(norm)))
    cmap = plt.get_cmap("viridis_r").with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", cmap=cmap,
                      norm=LogNorm(vmin=1.0, vmax=high))
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            value = values[i, j]
            text = "n/a" if not math.isfinite(value) else f"{value:.2f}"
            dark = math.isfinite(value) and value > math.sqrt(high)
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")
    ax.set_xticks(range(len(norm.columns)), list(norm.columns))
    ax.set_yticks(range(len(norm)), list(norm.index), fontsize=7)
    ax.set_title("average JCT / best policy's on the workload")
    bar = fig.colorbar(image, ax=ax, shrink=0.6)
    bar.set_ticks([t for t in (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
                   if t <= high])
    bar.ax.yaxis.set_major_formatter(ScalarFormatter())
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    bar.set_label("avg JCT / best (log scale)")
    fig.tight_layout()
    try:
        return _save(fig, Path(path), dpi)
    finally:
        plt.close(fig)


def figures(table: CrossTable, folder: Path) -> list[Path]:
    """The table's figures: ``cross_heatmap.png``."""
    return [plot_heatmap(table, folder / PLOT_NAME)]


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json, key=cell_result_key,
    describe=describe_cell, reduce=cross_table, document=document, frame=to_frame,
    figures=figures, seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)


__all__ = [
    "HARE",
    "KIND",
    "Cell",
    "CellResult",
    "CrossTable",
    "Plan",
    "Row",
    "TableSettings",
    "check_settings",
    "compute_cell",
    "cross_table",
    "figures",
    "plan_cells",
    "plan_for",
    "policy_instance",
    "quick_settings",
    "registered_policies",
    "run_policy",
    "settings_from_spec",
    "workload_instance",
]
