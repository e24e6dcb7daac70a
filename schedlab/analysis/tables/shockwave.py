"""Shockwave's comparison table: makespan, JCT and finish-time fairness of every policy on
Shockwave's 120-job trace on 32 V100 GPUs.

The paper (Zheng et al., NSDI'23) simulates 120 jobs that adapt their batch size while they
train, arriving every 40 s on average, on 32 V100s with 120 s rounds, and reports Shockwave's
makespan about 1.3x better and its unfair fraction about 2x lower than Gavel's, Themis's and
AlloX's, at a similar average JCT.  This table measures what our policies give on the same
trace generator, without tuning towards the claim.

**What is run.**  For each seed s of :attr:`TableSettings.seeds` (default 25, 26, 27; 25 is
Shockwave's published trace): the instance
``generate_shockwave_instance(num_jobs, {"v100": gpus}, seed=s, throughputs=...)``
(continuous arrivals, mean gap 40 s, ``params.round_s`` = 120 s; steps and seconds per epoch
from :attr:`TableSettings.throughputs`, default ``shockwave-tacc``, Shockwave's own
measurements, with which seed 25 is its published trace byte for byte), and for each policy
of :attr:`TableSettings.policies` (label, registered name) one simulation
``simulate(instance, policy=..., seed=s, mechanism=..., resume_overhead_s=...)`` as
Shockwave's simulator runs its policies: Gavel's round mechanism (``mechanism="gavel"``; a
policy with a Gavel mechanism of its own is made with it, with Shockwave's settings of it,
:func:`shockwave_simulator_policy`) and a 20 s resume overhead for a
job that runs after missing a round (:attr:`TableSettings.mechanism`,
:attr:`TableSettings.resume_overhead_s`; ``mechanism="schedlab"`` and 0 give the table as it
was before the 2026-12 fidelity work).  A name that is not registered (yet)
is skipped with a logged warning; its row says "not available".

**Metrics** of one (seed, policy) cell, from its per-job records (jobs j = 1..J, arrival a_j,
finish f_j, isolated run time t_j = ``isolated_time_s``, G GPUs):

* makespan = max_j f_j - min_j a_j, s;
* average JCT = (1/J) sum_j (f_j - a_j), s;
* rho_j = (f_j - a_j) / (t_j max(1, J / G)) (Shockwave's finish-time fairness with the static
  contention J / G, :func:`~schedlab.analysis.metrics.finish_time_fairness`); worst rho =
  max_j rho_j;
* unfair fraction = #{j : rho_j > 1.05} / J;
* each also as a ratio policy / reference on the same seed, the reference being Shockwave
  (``shockwave``) when it is available, else the first available policy of the list.

Every metric and ratio is reported as mean and sample standard deviation over the seeds (a
ratio whose reference value is 0 is undefined: NaN, and so is its mean).

**Cache.**  Each finished cell is written, atomically, as ``cells/<policy>__seed<s>__<key>.json``
in the output folder (its per-job arrival, finish and isolated time, the simulation's wall and
solver seconds); a re-run reuses every cell whose file exists, so an interrupted table resumes
where it stopped.  ``key`` is a digest of the instance, the throughput source, the mechanism,
the resume overhead, the policy name and the source of the code a simulation runs (every
``schedlab`` module outside ``schedlab.analysis`` and the command line), so a cell computed
by other code, on another trace or from another throughput table is never reused.  Metrics
are computed from the cached records each time, never cached themselves.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab.analysis import metrics
from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader
from schedlab.analysis.tables import output
from schedlab.analysis.tables.cells import code_digest, file_safe, mean_std, ratio
from schedlab.analysis.tables.output import Block, Document, pm
from schedlab.errors import InputError, UnknownNameError
from schedlab.instance import Instance

log = logging.getLogger(__name__)

#: The table's policies in row order: (label, registered policy name).
POLICIES: tuple[tuple[str, str], ...] = (
    ("Shockwave", "shockwave"),
    ("Shockwave (convex)", "shockwave_convex"),
    ("OSSP", "gavel.min_makespan"),
    ("Themis", "gavel.finish_time_fairness"),
    ("Gavel", "gavel.max_min_fairness"),
    ("AlloX", "allox"),
    ("MST", "gavel.max_sum_throughput"),
    ("Gandiva-fair", "gandiva_fair"),
)
#: The ratios' reference when it is available.
REFERENCE_POLICY = "shockwave"
#: Policies of the quick table (a subset of :data:`POLICIES`).
QUICK_POLICY_NAMES: tuple[str, ...] = (
    "shockwave", "gavel.finish_time_fairness", "gavel.max_min_fairness", "allox")
#: Shockwave's simulator charges a job that runs after missing a round 20 s (scheduler.py).
RESUME_OVERHEAD_S = 20.0
#: Shockwave's published trace is seed 25; the default table adds the next two seeds.
DEFAULT_SEEDS: tuple[int, ...] = (25, 26, 27)
#: Metrics of the table (key, label): seconds for the first two, ratios and fractions after.
METRICS: tuple[tuple[str, str], ...] = (
    ("makespan_s", "makespan"),
    ("avg_jct_s", "average JCT"),
    ("worst_rho", "worst rho"),
    ("unfair_fraction", "unfair fraction"),
)
#: Output file names in the ``--out`` folder.
STEM = "shockwave"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
PLOT_NAME = "shockwave.png"
CELLS_FOLDER = "cells"
#: Bump when the cell file's layout changes (old files are then ignored).
CELL_FORMAT = 1
#: Throughput source of the table's traces (a name of ``THROUGHPUT_SOURCES``).
DEFAULT_THROUGHPUTS = "shockwave-tacc"
NOT_AVAILABLE = "not available"
HOUR_S = 3600.0


# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed.

    ``num_jobs`` jobs on ``gpus`` V100s, ``round_s`` s rounds, arrivals every ``mean_gap_s`` s
    on average (Shockwave's: 120 jobs, 32 GPUs, 120 s, 40 s); ``policies`` as (label,
    registered name) pairs in row order; ``throughputs`` the shipped throughput table the
    traces' steps and seconds per epoch come from (``shockwave-tacc``, Shockwave's
    measurements, or ``gavel``); ``mechanism`` and ``resume_overhead_s`` (s) the simulator's
    round mechanism and resume overhead (Shockwave's simulator: Gavel's mechanism, 20 s);
    ratios to ``reference`` when it is available, else to the first available policy.
    """

    num_jobs: int = 120
    gpus: int = 32
    round_s: float = 120.0
    mean_gap_s: float = 40.0
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    policies: tuple[tuple[str, str], ...] = POLICIES
    unfair_threshold: float = metrics.DEFAULT_UNFAIR_THRESHOLD
    throughputs: str = DEFAULT_THROUGHPUTS
    mechanism: str = "gavel"
    resume_overhead_s: float = RESUME_OVERHEAD_S
    reference: str = REFERENCE_POLICY

    def describe(self) -> str:
        """One sentence: the workload, its throughput source, the simulator's settings and
        the seeds."""
        seeds = ", ".join(str(s) for s in self.seeds)
        return (f"{self.num_jobs} Shockwave jobs (mean arrival gap {self.mean_gap_s:g} s; "
                f"{self.throughputs} throughputs) on {self.gpus} V100 GPUs, "
                f"{self.round_s:g} s rounds, {self.mechanism} round mechanism, "
                f"{self.resume_overhead_s:g} s resume overhead, seed(s) {seeds}")


def quick_settings(**overrides: Any) -> TableSettings:
    """The ``--quick`` table: 12 jobs on 4 GPUs, seed 25, four policies (under a minute)."""
    chosen = tuple(pair for pair in POLICIES if pair[1] in QUICK_POLICY_NAMES)
    base = TableSettings(num_jobs=12, gpus=4, seeds=(DEFAULT_SEEDS[0],), policies=chosen)
    return replace(base, **overrides)


def select_policies(names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(label, name) pairs for registered policy names, in the order given.

    A name of :data:`POLICIES` keeps its label (and is accepted even when not registered
    yet: its row then says "not available"); any other registered policy is labelled by its
    name.  A name that is neither raises :class:`~schedlab.errors.UnknownNameError`.
    """
    from schedlab.policies.registry import POLICIES as REGISTRY

    labels = {name: label for label, name in POLICIES}
    chosen: list[tuple[str, str]] = []
    for name in dict.fromkeys(names):
        if name in labels:
            chosen.append((labels[name], name))
        elif name in REGISTRY:
            chosen.append((name, name))
        else:
            table = ", ".join(n for _, n in POLICIES)
            raise UnknownNameError(
                f"unknown policy {name!r}: give the table's ({table}) or any name of "
                "'schedlab policies'", field="--policies")
    if not chosen:
        raise InputError("no policy given", field="--policies")
    return tuple(chosen)


def check_settings(settings: TableSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` for settings that cannot make a table."""
    if not settings.seeds:
        raise InputError("the table needs at least one seed", field="--seeds")
    if len(set(settings.seeds)) != len(settings.seeds):
        raise InputError("a seed is given twice", field="--seeds")
    if any(s < 0 for s in settings.seeds):
        raise InputError("seeds must be >= 0", field="--seeds")
    if not settings.policies:
        raise InputError("the table needs at least one policy", field="--policies")
    names = [name for _, name in settings.policies]
    if len(set(names)) != len(names):
        raise InputError("a policy is given twice", field="--policies")
    if settings.num_jobs < 1 or settings.gpus < 1:
        raise InputError("the table needs at least one job and one GPU")
    from schedlab.workloads.throughputs import THROUGHPUT_SOURCES

    if settings.throughputs not in THROUGHPUT_SOURCES:
        raise UnknownNameError(f"unknown throughput source {settings.throughputs!r} (known: "
                               f"{', '.join(THROUGHPUT_SOURCES)})", field="--throughputs")


#: The spec's workload generator: Shockwave's trace generator
#: (:func:`~schedlab.workloads.shockwave.generate_shockwave_instance`).
GENERATOR = "shockwave.trace"
#: The generator's parameters, the simulator's settings and the table's other settings the
#: spec may give (each a :class:`TableSettings` field of the same name).
WORKLOAD_PARAMS: tuple[str, ...] = ("num_jobs", "gpus", "mean_gap_s", "throughputs")
SIMULATOR_KEYS: tuple[str, ...] = ("round_s", "mechanism", "resume_overhead_s")
SETTINGS_KEYS: tuple[str, ...] = ("unfair_threshold",)
#: Round mechanisms of the simulator: Gavel's (Shockwave's simulator) or schedlab's.
MECHANISMS: tuple[str, ...] = ("gavel", "schedlab")


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``shockwave.yaml`` shipped beside the
    runner), checked: one ``shockwave.trace`` workload (``num_jobs``, ``gpus``,
    ``mean_gap_s``, ``throughputs``), the policy rows (no options; a row without a label
    gets the table's label of that name, else the name; a name neither of the table nor
    registered is refused, a name of the table not registered yet gives a "not available"
    row), the seeds, ``simulator`` (``round_s``, ``mechanism``, ``resume_overhead_s``),
    ``settings`` (``unfair_threshold``) and the report's reference."""
    from schedlab.workloads.throughputs import THROUGHPUT_SOURCES

    read = FieldReader(spec)
    entry, _ = read.sections((GENERATOR,), WORKLOAD_PARAMS, simulator=SIMULATOR_KEYS,
                             settings=SETTINGS_KEYS)
    values: dict[str, Any] = {"seeds": tuple(spec.seeds), "policies": _policies_of(read)}
    for name, value in entry.params.items():
        where = f"workloads[0].params.{name}"
        if name == "throughputs":
            if value not in THROUGHPUT_SOURCES:
                raise UnknownNameError(f"unknown throughput source {json.dumps(value)} "
                                       f"(known: {', '.join(THROUGHPUT_SOURCES)})",
                                       field=where)
            values[name] = str(value)
        elif name == "mean_gap_s":
            values[name] = read.number(where, value, at_least=0.0)
        else:
            values[name] = read.number(where, value, integer=True, positive=True)
    for name, value in spec.simulator.items():
        where = f"simulator.{name}"
        if name == "mechanism":
            if value not in MECHANISMS:
                raise read.error(where, f"expected one of {', '.join(MECHANISMS)}, got "
                                 f"{json.dumps(value)}")
            values[name] = str(value)
        elif name == "round_s":
            values[name] = read.number(where, value, positive=True)
        else:
            values[name] = read.number(where, value, at_least=0.0)
    for name, value in spec.settings.items():
        values[name] = read.number(f"settings.{name}", value, positive=True)
    if spec.report.reference is not None:
        values["reference"] = spec.report.reference
    settings = replace(TableSettings(), **values)
    check_settings(settings)
    return settings


def _policies_of(read: FieldReader) -> tuple[tuple[str, str], ...]:
    """(label, name) of the spec's policy rows (:func:`settings_from_spec`)."""
    from schedlab.policies.registry import POLICIES as REGISTRY

    labels = {name: label for label, name in POLICIES}
    if not read.spec.policies:
        raise read.error("policies", "the table needs at least one policy")
    chosen: list[tuple[str, str]] = []
    for i, entry in enumerate(read.spec.policies):
        if entry.options:
            raise read.error(f"policies[{i}].options", "this table runs every policy as "
                             "Shockwave's simulator does (shockwave_simulator_policy): no "
                             "options")
        if entry.name not in labels and entry.name not in REGISTRY:
            table = ", ".join(n for _, n in POLICIES)
            raise UnknownNameError(f"unknown policy {entry.name!r}: give the table's "
                                   f"({table}) or any name of 'schedlab policies'",
                                   field=f"policies[{i}].name")
        if any(entry.name == name for _, name in chosen):
            raise read.error(f"policies[{i}].name", f"{entry.name!r} is given twice")
        chosen.append((entry.label or labels.get(entry.name, entry.name), entry.name))
    return tuple(chosen)


#: AlloX's fairness knob in Shockwave's runs (its ``scheduler/utils.py`` lines 606-611 make the
#: "allox" policy with alpha = 0.2).
SHOCKWAVE_ALLOX_ALPHA = 0.2


def shockwave_simulator_policy(name: str, mechanism: str) -> Any:
    """The registered policy ``name`` as Shockwave's simulator runs it.

    Under ``mechanism="gavel"`` a policy with Gavel's round mechanism of its own is made with
    it (:func:`~schedlab.analysis.sweep._policy_for`) and with Shockwave's settings of that
    mechanism: allocations reset at most every
    :data:`~schedlab.formulations.gavel.rounds.SHOCKWAVE_RESET_INTERVAL_S` (1000 s, its
    ``scheduler.py`` line 101; Gavel's is 1920 s) and never because a batch size changed (its
    change flags are cleared before they are read, lines 4703-4715); AlloX with alpha =
    :data:`SHOCKWAVE_ALLOX_ALPHA`.  Other mechanisms: the policy as registered."""
    import inspect

    from schedlab.analysis.sweep import _policy_for
    from schedlab.formulations.gavel.rounds import SHOCKWAVE_RESET_INTERVAL_S
    from schedlab.policies.registry import get_policy

    policy = _policy_for(name, mechanism)
    if mechanism != "gavel":
        return policy
    params = inspect.signature(type(policy)).parameters
    kwargs: dict[str, Any] = {}
    if "reset_interval_s" in params and getattr(policy, "mechanism", None) == "gavel":
        kwargs.update(mechanism="gavel", reset_interval_s=SHOCKWAVE_RESET_INTERVAL_S,
                      reset_on_throughput_change=False)
    if "alpha" in params and name == "allox":
        kwargs["alpha"] = SHOCKWAVE_ALLOX_ALPHA
    return get_policy(name, **kwargs) if kwargs else policy


def is_available(name: str) -> bool:
    """Whether ``name`` is a registered policy."""
    from schedlab.policies.registry import POLICIES as REGISTRY

    return name in REGISTRY


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One simulation to run: ``policy`` on the seed's instance."""

    policy: str
    seed: int
    instance: Instance
    key: str
    mechanism: str = "gavel"
    resume_overhead_s: float = RESUME_OVERHEAD_S

    @property
    def file_name(self) -> str:
        """``<policy>__seed<seed>__<key>.json`` (the policy name made file-safe)."""
        safe = file_safe(self.policy)
        return f"{safe}__seed{self.seed}__{self.key}.json"


@dataclass(frozen=True)
class CellResult:
    """What a cell's simulation left: per-job records (arrival order) and run counters.

    ``finish`` is NaN for a job that did not finish.  ``wall_s`` is the simulation's wall
    time (s), ``solver_time_s`` the policy's solver seconds inside it.
    """

    policy: str
    seed: int
    gpus: int
    jobs: pd.DataFrame
    wall_s: float
    solver_time_s: float
    rounds: int
    stopped: str
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {
            "format": CELL_FORMAT,
            "policy": self.policy,
            "seed": self.seed,
            "gpus": self.gpus,
            "wall_s": self.wall_s,
            "solver_time_s": self.solver_time_s,
            "rounds": self.rounds,
            "stopped": self.stopped,
            "jobs": {
                "job": [str(j) for j in self.jobs["job"]],
                "arrival": [float(v) for v in self.jobs["arrival"]],
                "finish": [None if pd.isna(v) else float(v) for v in self.jobs["finish"]],
                "isolated_time_s": [float(v) for v in self.jobs["isolated_time_s"]],
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content back (:class:`KeyError`/:class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        jobs = data["jobs"]
        frame = pd.DataFrame({
            "job": [str(j) for j in jobs["job"]],
            "arrival": np.asarray(jobs["arrival"], dtype=float),
            "finish": np.asarray([math.nan if v is None else v for v in jobs["finish"]],
                                 dtype=float),
            "isolated_time_s": np.asarray(jobs["isolated_time_s"], dtype=float),
        })
        return cls(policy=str(data["policy"]), seed=int(data["seed"]), gpus=int(data["gpus"]),
                   jobs=frame, wall_s=float(data["wall_s"]),
                   solver_time_s=float(data["solver_time_s"]), rounds=int(data["rounds"]),
                   stopped=str(data["stopped"]), cached=True)


def build_instance(settings: TableSettings, seed: int) -> Instance:
    """The seed's trace: ``generate_shockwave_instance(num_jobs, {"v100": gpus}, seed,
    throughputs=settings.throughputs)``."""
    from schedlab.workloads.shockwave import generate_shockwave_instance

    return generate_shockwave_instance(settings.num_jobs, {"v100": settings.gpus}, seed,
                                       mean_gap_s=settings.mean_gap_s,
                                       round_s=settings.round_s,
                                       throughputs=settings.throughputs)


def cell_key(instance: Instance, policy: str, throughputs: str, mechanism: str = "gavel",
             resume_overhead_s: float = RESUME_OVERHEAD_S) -> str:
    """12 hex digits naming a cell: the instance, its throughput source, the simulator's
    mechanism and resume overhead, the policy name, the code and the format."""
    text = json.dumps({"instance": instance.model_dump_json(), "throughputs": throughputs,
                       "mechanism": mechanism, "resume_overhead_s": resume_overhead_s,
                       "policy": policy, "code": code_digest(), "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def available_policies(settings: TableSettings) -> list[str]:
    """The names of the settings' policies that are registered, in row order."""
    return [name for _, name in settings.policies if is_available(name)]


def plan_cells(settings: TableSettings) -> list[Cell]:
    """Every (seed, policy) cell of the available policies (the settings are checked first),
    policies outermost in table order: the Shockwave rows, by far the slowest at 120 jobs,
    start first, so parallel workers do not leave one of them for the end.  A policy that is
    not registered has no cell (a logged warning; its row says "not available"); an
    :class:`~schedlab.errors.InputError` when none is registered."""
    check_settings(settings)
    available = available_policies(settings)
    for label, name in settings.policies:
        if name not in available:
            log.warning("policy %s (%r) is not registered; its row says %r", label, name,
                        NOT_AVAILABLE)
    if not available:
        raise InputError("none of the table's policies is registered: "
                         + ", ".join(name for _, name in settings.policies), field="policies")
    instances = {seed: build_instance(settings, seed) for seed in settings.seeds}
    return [Cell(policy=name, seed=seed, instance=instances[seed],
                 key=cell_key(instances[seed], name, settings.throughputs,
                              settings.mechanism, settings.resume_overhead_s),
                 mechanism=settings.mechanism, resume_overhead_s=settings.resume_overhead_s)
            for name in available for seed in settings.seeds]


def simulate_cell(cell: Cell) -> CellResult:
    """Simulate the cell's policy on its instance (``seed`` handed to the policy) under the
    cell's mechanism and resume overhead."""
    from schedlab.simulator import simulate

    policy = shockwave_simulator_policy(cell.policy, cell.mechanism)
    t0 = time.perf_counter()
    result = simulate(cell.instance, policy=policy, seed=cell.seed,
                      mechanism=cell.mechanism,  # type: ignore[arg-type]
                      resume_overhead_s=cell.resume_overhead_s)
    wall = time.perf_counter() - t0
    frame = result.to_dataframe()[["job", "arrival", "finish", "isolated_time_s"]]
    gpus = sum(pool.count for pool in cell.instance.cluster.accelerators.values())
    return CellResult(policy=cell.policy, seed=cell.seed, gpus=gpus,
                      jobs=frame.reset_index(drop=True), wall_s=wall,
                      solver_time_s=float(result.solver_time_s), rounds=len(result.rounds),
                      stopped=result.stopped)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.policy}, seed {cell.seed}"


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`simulate_cell` (looked up when called)."""
    result = simulate_cell(cell)
    log.debug("%s seed %d: %.2f s", cell.policy, cell.seed, result.wall_s)
    return result


# --------------------------------------------------------------------------------- rows


def cell_metrics(jobs: pd.DataFrame, gpus: int,
                 unfair_threshold: float = metrics.DEFAULT_UNFAIR_THRESHOLD
                 ) -> dict[str, float]:
    """The four metrics of one cell (module docstring) from its per-job records."""
    rho = metrics.finish_time_fairness(jobs, gpus, contention="static")
    return {
        "makespan_s": metrics.makespan(jobs),
        "avg_jct_s": metrics.average_jct(jobs),
        "worst_rho": metrics.worst_rho(rho),
        "unfair_fraction": metrics.unfair_fraction(rho, unfair_threshold),
    }


@dataclass(frozen=True)
class SeedRow:
    """One (seed, policy) cell: its metrics, their ratios to the reference on that seed."""

    label: str
    policy: str
    seed: int
    jobs: int
    finished: int
    values: dict[str, float]
    ratios: dict[str, float]
    wall_s: float
    solver_time_s: float
    cached: bool


@dataclass(frozen=True)
class PolicyRow:
    """One policy over the seeds: mean and sample standard deviation of every metric and
    ratio (std 0 for one seed; NaN when a seed's value is NaN), and of the wall time."""

    label: str
    policy: str
    available: bool
    seeds: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    ratio_mean: dict[str, float] = field(default_factory=dict)
    ratio_std: dict[str, float] = field(default_factory=dict)
    wall_s_mean: float = math.nan
    wall_s_std: float = math.nan
    unfinished: int = 0

    @property
    def note(self) -> str:
        """"not available", or how many jobs did not finish (over all seeds)."""
        if not self.available:
            return NOT_AVAILABLE
        return f"{self.unfinished} unfinished jobs" if self.unfinished else ""


@dataclass(frozen=True)
class ShockwaveTable:
    """The computed table: settings, the ratios' reference, per-seed and per-policy rows."""

    settings: TableSettings
    reference: tuple[str, str] | None
    seed_rows: list[SeedRow]
    policy_rows: list[PolicyRow]

    @property
    def reference_is_shockwave(self) -> bool:
        """Whether the ratios are to the settings' reference (Shockwave by default), else
        to the first available policy."""
        return self.reference is not None and self.reference[1] == self.settings.reference

    @property
    def preferred_label(self) -> str:
        """The label of the settings' reference: its row's, else the table's, else its
        name (``Shockwave`` by default)."""
        name = self.settings.reference
        labels = {n: label for label, n in POLICIES}
        labels.update({n: label for label, n in self.settings.policies})
        return labels.get(name, name)

    @property
    def ratio_header(self) -> str:
        """What the ratios divide by, e.g. ``Shockwave`` or ``Themis (Shockwave not
        available)``."""
        if self.reference is None:
            return "-"
        if self.reference_is_shockwave:
            return self.reference[0]
        return f"{self.reference[0]} ({self.preferred_label} not available)"


def shockwave_table(cfg: TableSettings, results: Mapping[tuple[int, str], CellResult]
                    ) -> ShockwaveTable:
    """The table (see the module docstring) from every available policy's cell result by
    (seed, policy); a policy that is not registered gets a "not available" row."""
    available = available_policies(cfg)
    if not available:
        raise InputError("none of the table's policies is registered: "
                         + ", ".join(name for _, name in cfg.policies), field="policies")
    reference_name = cfg.reference if cfg.reference in available else available[0]
    reference = next(pair for pair in cfg.policies if pair[1] == reference_name)

    seed_rows: list[SeedRow] = []
    values: dict[tuple[int, str], dict[str, float]] = {
        key: cell_metrics(result.jobs, result.gpus, cfg.unfair_threshold)
        for key, result in results.items()}
    for label, name in cfg.policies:
        if name not in available:
            continue
        for seed in cfg.seeds:
            result = results[seed, name]
            own = values[seed, name]
            ref = values[seed, reference_name]
            seed_rows.append(SeedRow(
                label=label, policy=name, seed=seed, jobs=len(result.jobs),
                finished=int(result.jobs["finish"].notna().sum()), values=own,
                ratios={key: ratio(own[key], ref[key]) for key, _ in METRICS},
                wall_s=result.wall_s, solver_time_s=result.solver_time_s,
                cached=result.cached))
    policy_rows = [_policy_row(label, name, name in available, seed_rows, len(cfg.seeds))
                   for label, name in cfg.policies]
    return ShockwaveTable(settings=cfg, reference=reference, seed_rows=seed_rows,
                          policy_rows=policy_rows)


def _policy_row(label: str, name: str, available: bool, seed_rows: Sequence[SeedRow],
                seeds: int) -> PolicyRow:
    if not available:
        return PolicyRow(label=label, policy=name, available=False, seeds=seeds)
    own = [row for row in seed_rows if row.policy == name]
    mean: dict[str, float] = {}
    std: dict[str, float] = {}
    ratio_mean: dict[str, float] = {}
    ratio_std: dict[str, float] = {}
    for key, _ in METRICS:
        mean[key], std[key] = mean_std([row.values[key] for row in own])
        ratio_mean[key], ratio_std[key] = mean_std([row.ratios[key] for row in own])
    wall_mean, wall_std = mean_std([row.wall_s for row in own])
    return PolicyRow(label=label, policy=name, available=True, seeds=len(own), mean=mean,
                     std=std, ratio_mean=ratio_mean, ratio_std=ratio_std,
                     wall_s_mean=wall_mean, wall_s_std=wall_std,
                     unfinished=sum(row.jobs - row.finished for row in own))


# ------------------------------------------------------------------------------ outputs

#: CSV columns, in order.
CSV_COLUMNS: tuple[str, ...] = (
    "label", "policy", "stat", "seed", "seeds", "status", "jobs", "finished",
    *(key for key, _ in METRICS), *(f"{key}_ratio" for key, _ in METRICS),
    "reference", "wall_s", "solver_time_s",
)


def to_frame(table: ShockwaveTable) -> pd.DataFrame:
    """The CSV's rows, policy by policy in row order: one per seed (``stat`` = ``seed``),
    then a ``mean`` and a ``std`` row over the seeds; a policy that is not available has
    status "not available", empty metrics and one ``mean`` row.  Times in s."""
    reference = table.reference[1] if table.reference else ""
    rows: list[dict[str, Any]] = []
    for row in table.policy_rows:
        head = {"label": row.label, "policy": row.policy}
        if not row.available:
            rows += [{**head, "stat": "seed", "seed": seed, "seeds": 1,
                      "status": NOT_AVAILABLE, "reference": reference}
                     for seed in table.settings.seeds]
            rows.append({**head, "stat": "mean", "seeds": 0, "status": NOT_AVAILABLE,
                         "reference": reference})
            continue
        for seed_row in (r for r in table.seed_rows if r.policy == row.policy):
            rows.append({
                **head, "stat": "seed", "seed": seed_row.seed, "seeds": 1,
                "status": "ok" if seed_row.finished == seed_row.jobs else
                f"{seed_row.jobs - seed_row.finished} unfinished jobs",
                "jobs": seed_row.jobs, "finished": seed_row.finished, **seed_row.values,
                **{f"{key}_ratio": v for key, v in seed_row.ratios.items()},
                "reference": reference, "wall_s": seed_row.wall_s,
                "solver_time_s": seed_row.solver_time_s,
            })
        for stat, values, ratios, wall in (
                ("mean", row.mean, row.ratio_mean, row.wall_s_mean),
                ("std", row.std, row.ratio_std, row.wall_s_std)):
            rows.append({
                **head, "stat": stat, "seeds": row.seeds,
                "status": "ok" if not row.unfinished else row.note, **values,
                **{f"{key}_ratio": v for key, v in ratios.items()},
                "reference": reference, "wall_s": wall,
            })
    frame = pd.DataFrame(rows, columns=list(CSV_COLUMNS))
    for column in ("seed", "seeds", "jobs", "finished"):
        frame[column] = frame[column].astype("Int64")
    return frame


#: Markdown columns: (metric key, header, scale, format).
_SHOWN: tuple[tuple[str, str, float, str], ...] = (
    ("makespan_s", "makespan (h)", 1 / HOUR_S, ".2f"),
    ("avg_jct_s", "avg JCT (h)", 1 / HOUR_S, ".2f"),
    ("worst_rho", "worst ρ", 1.0, ".2f"),
    ("unfair_fraction", "unfair fraction", 1.0, ".3f"),
)


def document(table: ShockwaveTable) -> Document:
    """The table's text (Markdown and LaTeX): a title, what was run, and the table (mean ±
    std over seeds)."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    ref = table.ratio_header
    parts: list[str | Block] = [
        f"Ran: {cfg.describe()}; continuous arrivals; each job follows its batch-size "
        "schedule (dynamic adaptation) as the simulator runs it. One simulation per (seed, "
        "policy). makespan = last finish - first arrival; avg JCT = mean of finish - arrival; "
        f"ρ_j = JCT_j / (isolated time_j × max(1, J/G)) with J = {cfg.num_jobs} jobs, "
        f"G = {cfg.gpus} GPUs; unfair fraction = share of jobs with ρ_j > "
        f"{cfg.unfair_threshold:g}. Ratios = policy / {ref} on the same seed "
        "('-' where the reference's value is 0). "
        + (f"Values are mean ± sample std over {seeds} seeds." if seeds > 1 else
           "One seed, no spread.")
        + " Wall = seconds of one simulation (mean over seeds).",
    ]
    header = ["policy", *(h for _, h, _, _ in _SHOWN),
              *(f"{h.split(' (')[0]} / {table.reference[0] if table.reference else '-'}"
                for _, h, _, _ in _SHOWN), "wall (s)", "note"]
    rows: list[list[str]] = []
    for row in table.policy_rows:
        if not row.available:
            cells = [row.label] + ["-"] * (2 * len(_SHOWN) + 1) + [NOT_AVAILABLE]
        else:
            cells = [row.label]
            cells += [pm(row.mean[k], row.std[k], spec, scale, row.seeds)
                      for k, _, scale, spec in _SHOWN]
            cells += [pm(row.ratio_mean[k], row.ratio_std[k], ".2f", 1.0, row.seeds)
                      for k, _, _, _ in _SHOWN]
            cells += [f"{row.wall_s_mean:.2f}", row.note]
        rows.append(cells)
    parts.append(Block(header=header, rows=rows, align="l" + "r" * (len(header) - 2) + "l"))
    if not table.reference_is_shockwave:
        parts.append(f"Ratios are to {ref}.")
    missing = [row.label for row in table.policy_rows if not row.available]
    if missing:
        parts.append(f"Not available (not registered): {', '.join(missing)}.")
    return Document(title="Shockwave (NSDI'23): policies on Shockwave's trace", parts=parts)


def plot_table(table: ShockwaveTable, path: str | Path, dpi: int = 120) -> Path:
    """``shockwave.png``: 2 x 2 bar charts (makespan h, avg JCT h, worst rho, unfair
    fraction), one bar per available policy, error bars = sample std over seeds."""
    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    rows = [row for row in table.policy_rows if row.available]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    positions = np.arange(len(rows))
    for ax, (key, header, scale, _) in zip(axes.flat, _SHOWN, strict=True):
        heights = [row.mean[key] * scale for row in rows]
        errors = [row.std[key] * scale for row in rows]
        ax.bar(positions, heights, yerr=errors, capsize=4,
               color=[f"C{i % 10}" for i in range(len(rows))])
        ax.set_xticks(positions, [row.label for row in rows], rotation=30, ha="right")
        ax.set_title(header)
        ax.grid(axis="y", alpha=0.3)
    cfg = table.settings
    fig.suptitle(f"{cfg.num_jobs} Shockwave jobs on {cfg.gpus} V100s, {len(cfg.seeds)} "
                 "seed(s): mean ± std")
    fig.tight_layout()
    try:
        return _save(fig, path, dpi)
    finally:
        plt.close(fig)


def figures(table: ShockwaveTable, folder: Path) -> list[Path]:
    """The table's figures: ``shockwave.png``."""
    return [plot_table(table, folder / PLOT_NAME)]


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json,
    key=lambda cell: (cell.seed, cell.policy), describe=describe_cell,
    reduce=shockwave_table, document=document, frame=to_frame, figures=figures,
    seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
