r"""Gavel's headline figure: average JCT vs input job rate for heterogeneity-aware vs
heterogeneity-agnostic policies, and the agnostic / aware ratio (Gavel's "up to 3.5x").

Gavel (OSDI'20, Figure 8) simulates the *continuous-single* trace (single-GPU jobs, Poisson
arrivals) on 36 V100 + 36 P100 + 36 K80 GPUs with 360 s rounds, sweeps the input rate over
``numpy.linspace(0, 6, 16)[1:]`` jobs/hour, averages jobs 4000-5000 of each run and seeds
0, 1, 2 (its ``EXPERIMENTS.md``: ``run_sweep_continuous.py -s 4000 -e 5000 -c 36:36:36
-a 0.0 -b 6.0 -n 16``).  The default table keeps the cluster, the rounds, the single-GPU
generator and the seeds, and measures far fewer jobs per run so that it runs in minutes;
the ``steady_state`` variant (:func:`steady_state_settings`) follows Gavel's protocol for the
LAS pair: 6000 jobs per run, the average over jobs 4000-4999 in arrival order
(:attr:`TableSettings.measure`), rates of Gavel's grid up to its 6 jobs/hour.

**Policy pairs** (:data:`PAIRS`, rows): each heterogeneity-aware ``gavel.*`` policy and its
``_agnostic`` variant -- least attained service = max-min fairness
(``gavel.max_min_fairness`` / ``gavel.max_min_fairness_agnostic``, Gavel's "LAS w/ Gavel" /
"LAS"), FIFO (``gavel.fifo`` / ``gavel.fifo_agnostic``) and finish-time fairness
(``gavel.finish_time_fairness`` / ``gavel.finish_time_fairness_agnostic``).

**Workloads** (columns): (a) the shipped trace ``instances/gavel/trace-1000.json.gz`` (1000
jobs, single- and multi-GPU, its own arrival times, 36:36:36, 360 s rounds; the first
:attr:`TableSettings.trace_jobs` jobs when that is set) and (b) Gavel's generator
(:func:`~schedlab.workloads.gavel.generate_gavel_instance`, ``multi_gpu=False``: the
continuous-single trace) with :attr:`TableSettings.jobs` jobs at each rate of
:attr:`TableSettings.rates` jobs/hour on :attr:`TableSettings.cluster`.  Every cell runs the
round-based simulator (:func:`~schedlab.simulator.engine.simulate`, schedlab's round
mechanism) with the cell's seed, which also draws the generated workload.  Policies in
:attr:`TableSettings.trace_first_seed_only` (default: the finish-time-fairness pair, about
5 minutes per run on the trace) run on the trace with the first seed only.

**Metrics** per cell: average JCT = (1/J) sum_j (C_j - r_j) over the jobs that finished
(seconds; the count of unfinished jobs is kept) -- on the generator's columns only over jobs
A..B-1 in arrival order when :attr:`TableSettings.measure` = (A, B) is set -- and per
(workload, pair, seed) the ratio agnostic / aware of the average JCTs (> 1: heterogeneity
awareness helps); mean and sample std over seeds.  "Up to" = the largest mean ratio over
the workloads.

**Spec.**  The table is the experiment ``schedlab/analysis/experiments/gavel.yaml`` (variants
``quick`` and ``steady_state``; :func:`settings_from_spec` reads it) run by
:mod:`schedlab.analysis.experiments.runner` through :data:`KIND`.

**Cache.**  Each cell is written atomically as ``cells/<policy>__<workload>__seed<s>__<key>
.json`` and reused by a re-run; ``key`` digests the workload, the policy, the seed, the
source of every ``schedlab`` module outside ``schedlab.analysis`` and the cell format.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab.analysis import metrics
from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader
from schedlab.analysis.tables import output
from schedlab.analysis.tables.cells import check_seeds, code_digest, file_safe, mean_std, ratio
from schedlab.analysis.tables.output import Block, Document, Heading, pm
from schedlab.errors import InputError
from schedlab.instance import Instance

log = logging.getLogger(__name__)

#: (label, heterogeneity-aware policy, heterogeneity-agnostic policy) in row order.
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("LAS (max-min fairness)", "gavel.max_min_fairness", "gavel.max_min_fairness_agnostic"),
    ("FIFO", "gavel.fifo", "gavel.fifo_agnostic"),
    ("Finish-time fairness", "gavel.finish_time_fairness",
     "gavel.finish_time_fairness_agnostic"),
)
#: Gavel's headline: heterogeneity-aware policies cut average JCT by up to this factor.
PAPER_UP_TO = 3.5
#: Gavel's Figure 8 rates: numpy.linspace(0, 6, 16) without 0, jobs/hour.
PAPER_RATES: tuple[float, ...] = tuple(float(r) for r in np.linspace(0.0, 6.0, 16)[1:])
#: Gavel's measured window: jobs 4000-4999 of each run (``-s 4000 -e 5000``).
PAPER_MEASURE: tuple[int, int] = (4000, 5000)
#: Jobs per run of the steady-state table: the window and 1000 jobs after it, so the
#: measured jobs share the cluster with later arrivals as in Gavel's runs.
STEADY_JOBS = 6000
#: Rates of the steady-state table: the top of Gavel's grid (0.4 jobs/hour steps).
STEADY_RATES: tuple[float, ...] = (4.4, 5.2, 6.0)
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
DEFAULT_CLUSTER: tuple[tuple[str, int], ...] = (("v100", 36), ("p100", 36), ("k80", 36))
#: The shipped trace, relative to the repository root.
TRACE_RELATIVE = "instances/gavel/trace-1000.json.gz"
#: Workload name of the trace column.
TRACE = "trace"
STEM = "gavel"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
PLOT_NAME = "gavel_jct_vs_rate.png"
CELLS_FOLDER = "cells"
CELL_FORMAT = 1
HOUR_S = 3600.0


def default_trace() -> str:
    """The shipped trace: next to the installed package (a source checkout), else the
    current folder's ``instances/gavel/trace-1000.json.gz``."""
    import schedlab

    beside = Path(schedlab.__file__).resolve().parents[1] / TRACE_RELATIVE
    return str(beside) if beside.is_file() else TRACE_RELATIVE


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed: the ``trace`` file (None: no trace column; its first
    ``trace_jobs`` jobs, None: all), ``jobs`` generated single-GPU jobs at each of ``rates``
    jobs/hour on ``cluster``, ``seeds``, the policy ``pairs`` in row order, the simulator's
    ``round_s``, the policies run on the trace with the first seed only; ``measure`` =
    (A, B): on the generator's columns average only jobs A..B-1 in arrival order (Gavel's
    ``-s A -e B``; None: every job)."""

    trace: str | None = field(default_factory=default_trace)
    trace_jobs: int | None = None
    jobs: int = 300
    rates: tuple[float, ...] = (2.0, 4.0, 6.0)
    cluster: tuple[tuple[str, int], ...] = DEFAULT_CLUSTER
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    pairs: tuple[tuple[str, str, str], ...] = PAIRS
    round_s: float = 360.0
    trace_first_seed_only: tuple[str, ...] = ("gavel.finish_time_fairness",
                                              "gavel.finish_time_fairness_agnostic")
    measure: tuple[int, int] | None = None

    @property
    def policies(self) -> list[str]:
        """Every policy, aware then agnostic per pair, in row order."""
        return [name for _, aware, agnostic in self.pairs for name in (aware, agnostic)]

    def workloads(self) -> list[str]:
        """The columns: ``trace`` (when a trace is given), then ``rate<r>`` per rate."""
        return ([TRACE] if self.trace is not None else []) + [rate_name(r) for r in self.rates]

    def seeds_for(self, workload: str, policy: str) -> tuple[int, ...]:
        """The seeds a policy runs with on a workload."""
        if workload == TRACE and policy in self.trace_first_seed_only:
            return self.seeds[:1]
        return self.seeds

    def describe(self) -> str:
        """One sentence: the workloads and the seeds."""
        mix = " + ".join(f"{n} {k.upper()}" for k, n in self.cluster)
        trace = ""
        if self.trace is not None:
            count = "all" if self.trace_jobs is None else f"the first {self.trace_jobs}"
            trace = f"{count} jobs of {Path(self.trace).name} at its own arrival times; "
        rates = ", ".join(f"{r:g}" for r in self.rates)
        seeds = ", ".join(str(s) for s in self.seeds)
        window = ("" if self.measure is None else
                  f" (averaged over jobs {self.measure[0]}-{self.measure[1] - 1} of each run "
                  "in arrival order)")
        return (f"{trace}Gavel's generator, {self.jobs} single-GPU jobs (continuous-single) "
                f"at {rates} jobs/hour on {mix}{window}; {self.round_s:g} s rounds; "
                f"seed(s) {seeds}")


def rate_name(rate: float) -> str:
    """The workload name of a generator rate: ``rate<r>``."""
    return f"rate{rate:g}"


def quick_settings(**overrides: Any) -> TableSettings:
    """The ``--quick`` table (well under a minute): the first 40 jobs of the trace, 30
    generated jobs at 2 and 6 jobs/hour on 36:36:36, seed 0, all three pairs."""
    base = TableSettings(trace_jobs=40, jobs=30, rates=(2.0, 6.0), seeds=(0,))
    return replace(base, **overrides)


def steady_state_settings(**overrides: Any) -> TableSettings:
    """The ``--steady-state`` table, Gavel's protocol for its Figure 8: the LAS pair only,
    :data:`STEADY_JOBS` single-GPU jobs per run at :data:`STEADY_RATES` jobs/hour, the
    average over jobs :data:`PAPER_MEASURE` of each run, seeds 0, 1, 2, no trace column."""
    base = TableSettings(trace=None, jobs=STEADY_JOBS, rates=STEADY_RATES,
                         pairs=PAIRS[:1], measure=PAPER_MEASURE)
    return replace(base, **overrides)


def check_settings(settings: TableSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` for settings that cannot make a table."""
    from schedlab.policies.registry import get_policy

    check_seeds(settings.seeds)
    if settings.jobs < 1 or (settings.trace_jobs is not None and settings.trace_jobs < 1):
        raise InputError("job counts must be >= 1", field="--jobs")
    if not settings.rates and settings.trace is None:
        raise InputError("the table needs a rate or a trace", field="--rates")
    if any(not (math.isfinite(r) and r > 0) for r in settings.rates):
        raise InputError("rates must be > 0 jobs/hour", field="--rates")
    if len(set(settings.rates)) != len(settings.rates):
        raise InputError("rates must be distinct", field="--rates")
    if not (math.isfinite(settings.round_s) and settings.round_s > 0):
        raise InputError(f"round_s must be > 0, got {settings.round_s}", field="--round-s")
    if settings.measure is not None:
        first, end = settings.measure
        if not 0 <= first < end <= settings.jobs:
            raise InputError(f"the measured jobs {first}:{end} must satisfy 0 <= A < B <= "
                             f"--jobs ({settings.jobs})", field="--measure")
    if settings.trace is not None and not Path(settings.trace).is_file():
        raise InputError("trace file not found", file=settings.trace, field="--trace")
    if not settings.pairs or len(set(settings.policies)) != len(settings.policies):
        raise InputError("the table needs distinct policy pairs", field="pairs")
    for name in settings.policies:
        get_policy(name)


#: The spec's workload generator: the trace column and Gavel's continuous-single generator.
GENERATOR = "gavel.figure8"
#: Its parameters (the table settings they set).
PARAMS: tuple[str, ...] = ("trace", "trace_jobs", "jobs", "rates", "cluster", "measure")
#: A spec's policy row ``name`` runs beside ``name + AGNOSTIC``, its heterogeneity-agnostic
#: variant.
AGNOSTIC = "_agnostic"


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``gavel.yaml`` shipped beside the
    runner), checked; every mistake one :class:`~schedlab.errors.InputError` naming the
    field path:

    * one workload ``gavel.figure8`` with the parameters of :data:`PARAMS`: ``trace`` (a
      file, :data:`TRACE_RELATIVE` = the shipped trace; null: no trace column),
      ``trace_jobs`` (null: all), ``jobs``, ``rates`` (jobs/hour), ``cluster`` ({type:
      GPUs}), ``measure`` ([A, B] or null);
    * ``policies``: one row per pair, the heterogeneity-aware ``name`` (run beside
      ``<name>_agnostic``) and the row's ``label``, no options;
    * ``seeds``; ``simulator.round_s``; ``settings.trace_first_seed_only`` (policy names).
    """
    read = FieldReader(spec)
    entry, _ = read.sections((GENERATOR,), PARAMS, simulator=("round_s",),
                             settings=("trace_first_seed_only",))
    if spec.report.reference is not None:
        raise read.error("report.reference", "this table has no reference policy (its ratios "
                         "are agnostic / aware of each pair)")
    values: dict[str, Any] = {"seeds": tuple(spec.seeds), "pairs": _pairs_of(read, spec)}
    if not spec.seeds:
        raise read.error("seeds", "the table needs at least one seed")
    params = entry.params
    where = "workloads[0].params"
    for name, value in params.items():
        at = f"{where}.{name}"
        if name == "trace":
            values[name] = _trace_of(read, at, value)
        elif name == "trace_jobs":
            values[name] = None if value is None else read.number(at, value, integer=True,
                                                                  at_least=1)
        elif name == "jobs":
            values[name] = read.number(at, value, integer=True, at_least=1)
        elif name == "rates":
            if not isinstance(value, list):
                raise read.error(at, "expected a list of rates, jobs/hour")
            rates = tuple(read.number(f"{at}[{i}]", v, positive=True)
                          for i, v in enumerate(value))
            if len(set(rates)) != len(rates):
                raise read.error(at, "rates must be distinct")
            values[name] = rates
        elif name == "cluster":
            if not isinstance(value, Mapping) or not value:
                raise read.error(at, "expected a mapping {accelerator type: GPUs}")
            values[name] = tuple((str(kind), read.number(f"{at}.{kind}", count, integer=True,
                                                         at_least=1))
                                 for kind, count in value.items())
        else:  # measure
            values[name] = _window_of(read, at, value)
    if "round_s" in spec.simulator:
        values["round_s"] = read.number("simulator.round_s", spec.simulator["round_s"],
                                        positive=True)
    if "trace_first_seed_only" in spec.settings:
        names = spec.settings["trace_first_seed_only"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise read.error("settings.trace_first_seed_only", "expected a list of policy "
                             "names")
        values["trace_first_seed_only"] = tuple(names)
    settings = replace(TableSettings(), **values)
    if not settings.rates and settings.trace is None:
        raise read.error(f"{where}.rates", "the table needs a rate or a trace")
    if settings.measure is not None and settings.measure[1] > settings.jobs:
        first, end = settings.measure
        raise read.error(f"{where}.measure", f"the measured jobs {first}:{end} must end at "
                         f"most at jobs ({settings.jobs})")
    check_settings(settings)
    return settings


def _trace_of(read: FieldReader, where: str, value: Any) -> str | None:
    """The trace file of ``params.trace``: :data:`TRACE_RELATIVE` is the shipped trace
    (:func:`default_trace`), another path is read as given; null: no trace column."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise read.error(where, "expected a trace file or null")
    path = default_trace() if value == TRACE_RELATIVE else value
    if not Path(path).is_file():
        raise read.error(where, f"trace file not found: {path}")
    return path


def _window_of(read: FieldReader, where: str, value: Any) -> tuple[int, int] | None:
    """``params.measure``: null or [A, B] with 0 <= A < B."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise read.error(where, "expected [A, B] (average jobs A..B-1) or null")
    first = read.number(f"{where}[0]", value[0], integer=True, at_least=0)
    end = read.number(f"{where}[1]", value[1], integer=True, at_least=0)
    if not first < end:
        raise read.error(where, f"expected A < B, got [{first}, {end}]")
    return first, end


def _pairs_of(read: FieldReader, spec: Experiment) -> tuple[tuple[str, str, str], ...]:
    """(label, aware, agnostic) of every policy row: ``name`` and ``name + _agnostic``."""
    from schedlab.policies.registry import policies

    if not spec.policies:
        raise read.error("policies", "the table needs at least one policy pair")
    known = policies()
    pairs = []
    for i, entry in enumerate(spec.policies):
        at = f"policies[{i}]"
        if entry.options:
            raise read.error(f"{at}.options", "the table's policies take no options")
        agnostic = entry.name + AGNOSTIC
        for name in (entry.name, agnostic):
            if name not in known:
                raise read.error(f"{at}.name", f"no registered policy {name!r} (each row "
                                 f"is a heterogeneity-aware policy X beside X{AGNOSTIC})")
        pairs.append((entry.label or entry.name, entry.name, agnostic))
    names = [name for _, aware, agnostic in pairs for name in (aware, agnostic)]
    if len(set(names)) != len(names):
        raise read.error("policies", "the table needs distinct policy pairs")
    return tuple(pairs)


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One simulation: ``policy`` on ``workload`` (``trace`` or ``rate<r>``) with ``seed``."""

    policy: str
    workload: str
    seed: int
    instance: Instance
    round_s: float
    key: str
    measure: tuple[int, int] | None = None

    @property
    def file_name(self) -> str:
        """``<policy>__<workload>__seed<seed>__<key>.json`` (file-safe)."""
        return (f"{file_safe(self.policy)}__{file_safe(self.workload)}__seed{self.seed}__"
                f"{self.key}.json")


@dataclass(frozen=True)
class CellResult:
    """A cell's average JCT (s, over the finished jobs), its job counts (``jobs``: the jobs it
    averages over, the measured window when one is set), wall and CPU
    seconds of the simulation (CPU: this process's, which a loaded machine does not
    inflate)."""

    policy: str
    workload: str
    seed: int
    avg_jct_s: float
    jobs: int
    unfinished: int
    wall_s: float
    cpu_s: float = math.nan
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {"format": CELL_FORMAT, "policy": self.policy, "workload": self.workload,
                "seed": self.seed,
                "avg_jct_s": None if math.isnan(self.avg_jct_s) else self.avg_jct_s,
                "jobs": self.jobs, "unfinished": self.unfinished, "wall_s": self.wall_s,
                "cpu_s": self.cpu_s}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        jct = data["avg_jct_s"]
        return cls(policy=str(data["policy"]), workload=str(data["workload"]),
                   seed=int(data["seed"]), avg_jct_s=math.nan if jct is None else float(jct),
                   jobs=int(data["jobs"]), unfinished=int(data["unfinished"]),
                   wall_s=float(data["wall_s"]), cpu_s=float(data["cpu_s"]), cached=True)


def build_instance(settings: TableSettings, workload: str, seed: int) -> Instance:
    """The instance of one (workload, seed): the trace (first ``trace_jobs`` jobs, the
    table's round length) or Gavel's single-GPU generator at the workload's rate."""
    from schedlab.analysis.sweep import WorkloadSpec

    if workload == TRACE:
        from schedlab.instance import load_instance
        from schedlab.workloads.instance_jobs import first_jobs

        if settings.trace is None:
            raise InputError("no trace file", field="--trace")
        instance = load_instance(settings.trace)
        if settings.trace_jobs is not None:
            instance = first_jobs(instance, settings.trace_jobs)
        params = instance.params.model_copy(update={"round_s": settings.round_s})
        return instance.model_copy(update={"params": params})
    rate = next(r for r in settings.rates if rate_name(r) == workload)
    spec = WorkloadSpec(kind="gavel", num_jobs=settings.jobs, cluster=settings.cluster,
                        multi_gpu=False)
    return spec.build(seed, rate, settings.round_s)


def cell_key(instance: Instance, policy: str, seed: int,
             measure: tuple[int, int] | None = None) -> str:
    """12 hex digits naming a cell: instance, policy, seed, the measured jobs, the code,
    the format."""
    fields: dict[str, Any] = {"instance": instance.model_dump_json(), "policy": policy,
                              "seed": seed, "code": code_digest(), "format": CELL_FORMAT}
    if measure is not None:  # absent when unset, so existing cells keep their keys
        fields["measure"] = list(measure)
    text = json.dumps(fields)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


#: Rough relative cost of a policy's simulation (the slowest first keeps both workers busy).
_COST = {"gavel.finish_time_fairness_agnostic": 3.0, "gavel.finish_time_fairness": 2.0}


def plan_cells(settings: TableSettings) -> list[Cell]:
    """Every (workload, seed, policy) cell, the slowest (finish-time fairness, trace,
    highest rate) first (the settings are checked first)."""
    check_settings(settings)
    cells = []
    for workload in settings.workloads():
        instances: dict[int, Instance] = {}
        for policy in settings.policies:
            for seed in settings.seeds_for(workload, policy):
                if seed not in instances:
                    instances[seed] = build_instance(settings, workload, seed)
                instance = instances[seed]
                measure = None if workload == TRACE else settings.measure
                cells.append(Cell(policy, workload, seed, instance, settings.round_s,
                                  cell_key(instance, policy, seed, measure), measure))

    def cost(cell: Cell) -> float:
        size = len(cell.instance.jobs)
        return -_COST.get(cell.policy, 1.0) * size * (1.0 + (cell.workload == TRACE))

    return sorted(cells, key=cost)


def average_jct(instance: Instance, policy: str, seed: int, round_s: float,
                measure: tuple[int, int] | None = None) -> tuple[float, int]:
    """Simulate ``policy`` on ``instance`` with ``seed``: (average JCT over the finished
    jobs in s, NaN when none finished; unfinished jobs).  ``measure`` = (A, B): only jobs
    A..B-1 in arrival order (ties in instance order) count."""
    from schedlab.policies.registry import get_policy
    from schedlab.simulator.engine import simulate

    result = simulate(instance, policy=get_policy(policy), round_s=round_s, seed=seed)
    records = sorted(result.jobs, key=lambda r: r.arrival)  # stable: instance order on ties
    if measure is not None:
        records = records[measure[0]:measure[1]]
    frame = pd.DataFrame({"arrival": [r.arrival for r in records],
                          "finish": [math.nan if r.finish is None else r.finish
                                     for r in records]}, dtype=float)
    return metrics.average_jct(frame), int(frame["finish"].isna().sum())


def simulate_cell(cell: Cell) -> CellResult:
    """Simulate a cell (:func:`average_jct`, looked up when called) and time it."""
    t0, c0 = time.perf_counter(), time.process_time()
    avg, unfinished = average_jct(cell.instance, cell.policy, cell.seed, cell.round_s,
                                  cell.measure)
    measured = (len(cell.instance.jobs) if cell.measure is None
                else cell.measure[1] - cell.measure[0])
    result = CellResult(policy=cell.policy, workload=cell.workload, seed=cell.seed,
                        avg_jct_s=avg, jobs=measured, unfinished=unfinished,
                        wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
    return result


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`simulate_cell` (looked up when called); the runner
    writes the cell file."""
    return simulate_cell(cell)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.policy}, {cell.workload}, seed {cell.seed}"


CellKey = tuple[str, int, str]


def cell_result_key(cell: Cell) -> CellKey:
    """The key of a cell's result: (workload, seed, policy)."""
    return (cell.workload, cell.seed, cell.policy)


# --------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One policy pair on one workload over its seeds: average JCT (s) of each side and the
    ratio agnostic / aware."""

    label: str
    aware: str
    agnostic: str
    workload: str
    seeds: tuple[int, ...]
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    per_seed: dict[int, dict[str, float]] = field(default_factory=dict)
    unfinished: int = 0


@dataclass(frozen=True)
class GavelTable:
    """The computed table: settings and one row per (workload, pair)."""

    settings: TableSettings
    rows: list[Row]

    def row(self, workload: str, aware: str) -> Row:
        """The row of one workload and pair (by its aware policy)."""
        return next(r for r in self.rows if r.workload == workload and r.aware == aware)


METRICS: tuple[str, ...] = ("aware_jct_s", "agnostic_jct_s", "ratio", "aware_wall_s",
                            "agnostic_wall_s", "aware_cpu_s", "agnostic_cpu_s")


def rows_from_results(cfg: TableSettings, results: Mapping[CellKey, CellResult]) -> GavelTable:
    """The table from every cell's result by (workload, seed, policy): per (workload, pair)
    the seeds both sides ran, each side's average JCT, the ratio agnostic / aware per seed,
    mean and sample std over those seeds."""
    rows = []
    for workload in cfg.workloads():
        for label, aware, agnostic in cfg.pairs:
            seeds = tuple(s for s in cfg.seeds_for(workload, aware)
                          if s in cfg.seeds_for(workload, agnostic))
            per_seed: dict[int, dict[str, float]] = {}
            unfinished = 0
            for seed in seeds:
                mine, theirs = results[workload, seed, aware], results[workload, seed, agnostic]
                per_seed[seed] = {"aware_jct_s": mine.avg_jct_s,
                                  "agnostic_jct_s": theirs.avg_jct_s,
                                  "ratio": ratio(theirs.avg_jct_s, mine.avg_jct_s),
                                  "aware_wall_s": mine.wall_s, "agnostic_wall_s": theirs.wall_s,
                                  "aware_cpu_s": mine.cpu_s, "agnostic_cpu_s": theirs.cpu_s}
                unfinished += mine.unfinished + theirs.unfinished
            mean: dict[str, float] = {}
            std: dict[str, float] = {}
            for key in METRICS:
                mean[key], std[key] = mean_std([v[key] for v in per_seed.values()])
            rows.append(Row(label=label, aware=aware, agnostic=agnostic, workload=workload,
                            seeds=seeds, mean=mean, std=std, per_seed=per_seed,
                            unfinished=unfinished))
    return GavelTable(settings=cfg, rows=rows)


def up_to(table: GavelTable) -> dict[str, tuple[float, str]]:
    """Per pair (by label): the largest mean ratio agnostic / aware over the workloads and
    the workload where it occurs."""
    best: dict[str, tuple[float, str]] = {}
    for row in table.rows:
        value = row.mean["ratio"]
        if not math.isnan(value) and (row.label not in best or value > best[row.label][0]):
            best[row.label] = (value, row.workload)
    return best


# ------------------------------------------------------------------------------ outputs

CSV_COLUMNS: tuple[str, ...] = ("label", "aware", "agnostic", "workload", "rate_jobs_per_hour",
                                "stat", "seed", "unfinished", *METRICS)


def _rate_of(settings: TableSettings, workload: str) -> float:
    return next((r for r in settings.rates if rate_name(r) == workload), math.nan)


def to_frame(table: GavelTable) -> pd.DataFrame:
    """The CSV: per (workload, pair) one row per seed, then ``mean`` and ``std`` rows."""
    out: list[dict[str, Any]] = []
    for row in table.rows:
        head = {"label": row.label, "aware": row.aware, "agnostic": row.agnostic,
                "workload": row.workload,
                "rate_jobs_per_hour": _rate_of(table.settings, row.workload)}
        for seed, values in row.per_seed.items():
            out.append({**head, "stat": "seed", "seed": seed, **values})
        for stat, values in (("mean", row.mean), ("std", row.std)):
            out.append({**head, "stat": stat, "unfinished": row.unfinished, **values})
    frame = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    for column in ("seed", "unfinished"):
        frame[column] = frame[column].astype("Int64")
    return frame


def _column_name(settings: TableSettings, workload: str) -> str:
    if workload == TRACE:
        return "trace"
    return f"{_rate_of(settings, workload):g} jobs/h"


def document(table: GavelTable) -> Document:
    """The table's text (Markdown and LaTeX): what was run, average JCTs, ratios."""
    cfg = table.settings
    workloads = cfg.workloads()
    spread = (f"mean ± sample std over {len(cfg.seeds)} seeds" if len(cfg.seeds) > 1
              else "one seed")
    parts: list[str | Heading | Block] = [
        f"Ran: {cfg.describe()}. Each cell: average JCT (hours) of the jobs that finished, "
        f"heterogeneity-aware / agnostic, then the ratio agnostic / aware of the same seed's "
        f"runs (> 1: awareness helps); {spread}."
    ]
    if cfg.trace is not None and cfg.trace_first_seed_only and len(cfg.seeds) > 1:
        parts.append("On the trace, " + ", ".join(f"`{p}`" for p in cfg.trace_first_seed_only)
                     + f" ran with seed {cfg.seeds[0]} only (their rows there: one seed).")
    header = ["policy", *(_column_name(cfg, w) for w in workloads)]
    jct_rows: list[list[str]] = []
    ratio_rows: list[list[str]] = []
    for label, aware, _ in cfg.pairs:
        rows = [table.row(w, aware) for w in workloads]
        for side in ("aware", "agnostic"):
            key = f"{side}_jct_s"
            jct_rows.append([f"{label}, {side}", *(
                pm(r.mean[key], r.std[key], ".2f", 1 / HOUR_S, len(r.seeds)) for r in rows)])
        ratio_rows.append([label, *(pm(r.mean["ratio"], r.std["ratio"], ".3f", 1.0,
                                       len(r.seeds)) for r in rows)])
    parts += [Heading("Average JCT (hours)"), Block(header=header, rows=jct_rows),
              Heading("Average JCT ratio, agnostic / aware"),
              Block(header=header, rows=ratio_rows)]
    best = up_to(table)
    if best:
        text = "; ".join(f"{label} {value:.2f}x ({_column_name(cfg, where)})"
                         for label, (value, where) in best.items())
        parts.append(f"Largest mean ratio agnostic / aware per policy: {text} (Gavel reports "
                     f"up to {PAPER_UP_TO}x on its continuous-single trace near saturation).")
    unfinished = sum(r.unfinished for r in table.rows)
    if unfinished:
        parts.append(f"{unfinished} job run(s) did not finish; averages are over the "
                     "finished jobs.")
    parts.append(f"Figure: {PLOT_NAME} (average JCT vs rate; aware solid, agnostic dashed).")
    return Document(title="Gavel: average JCT, heterogeneity-aware vs agnostic policies",
                    parts=parts)


def plot_table(table: GavelTable, path: Path) -> Path:
    """Average JCT (hours) vs rate on the generator, one colour per pair, aware solid and
    agnostic dashed, error bars = sample std over seeds."""
    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    cfg = table.settings
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    rates = list(cfg.rates)
    # equal values would hide one line behind another: each series is shifted sideways by a
    # small step (1.5% of the rate range) and the agnostic markers are hollow
    series = len(cfg.pairs) * 2
    step = 0.015 * ((max(rates) - min(rates)) or 1.0)
    k = 0
    for i, (label, aware, _) in enumerate(cfg.pairs):
        rows = [table.row(rate_name(r), aware) for r in rates]
        for side, style in (("aware", "-"), ("agnostic", "--")):
            key = f"{side}_jct_s"
            shift = (k - (series - 1) / 2) * step
            k += 1
            ax.errorbar([r + shift for r in rates], [r.mean[key] / HOUR_S for r in rows],
                        yerr=[r.std[key] / HOUR_S for r in rows], linestyle=style,
                        marker="o" if side == "aware" else "s", capsize=3,
                        markerfacecolor=f"C{i % 10}" if side == "aware" else "none",
                        color=f"C{i % 10}", label=f"{label}, {side}")
    ax.set_xlabel("input job rate (jobs/hour; series shifted slightly apart)")
    ax.set_ylabel("average JCT (hours)")
    ax.set_xticks(rates)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    mix = ":".join(str(n) for _, n in cfg.cluster)
    ax.set_title(f"{cfg.jobs} single-GPU jobs, {mix} cluster, {len(cfg.seeds)} seed(s)")
    fig.tight_layout()
    try:
        return _save(fig, path, 120)
    finally:
        plt.close(fig)


def figures(table: GavelTable, folder: Path) -> list[Path]:
    """The table's figures: ``gavel_jct_vs_rate.png`` (when there are rates)."""
    return [plot_table(table, folder / PLOT_NAME)] if table.settings.rates else []


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json, key=cell_result_key,
    describe=describe_cell, reduce=rows_from_results, document=document, frame=to_frame,
    figures=figures, seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
