"""Saturn's comparison table: makespan of every SPASE method on model-selection workloads.

The paper (Nagrecha & Kumar, VLDB'24) reports 39-49% lower model-selection runtimes than
current practice.  This table measures what our models give, without tuning towards the claim.
For each instance, rows:

* plans on the estimated runtimes (the instance's ``runtime_s``), one per plan method
  (registered formulation; the spec's policies): by default ``current practice``,
  ``greedy``, ``random``, ``disjunctive MILP``, ``time-indexed MILP``;
* the same workload *executed* with noisy runtimes, mean over ``seeds`` (the same seeds for
  every row): per seed the instance's truth is written by
  :func:`~schedlab.workloads.saturn.with_runtime_noise` (true runtime = estimate x
  lognormal(0, sigma) per job) and :func:`~schedlab.workloads.saturn.with_restart_cost`, and
  every row runs in that realized instance (:mod:`schedlab.simulator.nodes`):
  ``current practice`` (its plan executed), ``time-indexed, static`` (the time-indexed plan
  executed without re-planning), ``introspective`` (re-solved every interval,
  :mod:`schedlab.formulations.saturn.introspective`; status: the worst over the seeds).

Columns: makespan (s), lower bound (s; for noisy rows the bound of the true runtimes, mean over
seeds), gap = (makespan - bound) / makespan, solver seconds (build + solve; introspective: the
static solve plus every re-solve), status, and the reduction vs current practice,
1 - makespan / makespan(current practice), against the plan on estimates for the first group
and against current practice executed under the same noise for the second.  Every schedule is
checked by :func:`schedlab.check.check` (introspective ones against the realized instance);
violations would be counted in the row's note (and the run exits 1).

**Experiment.**  The table is the ``saturn`` kind of the experiment runner
(:mod:`schedlab.analysis.experiments`; shipped spec ``saturn.yaml``): workloads
``{generator: saturn.published, params: {scaling: published|analytic}}`` (the 1x8 and 2x8
model-selection instances), ``{generator: saturn.quick}`` (three jobs on 4 GPUs) or
``{file: PATH}`` (an instance file; a relative path is read from the current directory); the
policies are the plan methods (they must include ``saturn.current_practice`` and
``saturn.time_indexed``, whose plans the noisy rows execute); ``seeds`` the noise seeds;
``simulator: {sigma, restart_cost_s}``; ``settings: {time_limit_s, resolve_time_limit_s,
threshold, interval_s, solver}``; ``report.reference`` the plan method the reductions are
taken to (default current practice).

**Cells.**  One cell per instance: every plan solved, checked, and executed under the noise
of every seed (the noisy rows need the plans, so they share the cell).  Its result (per plan:
makespan, solve seconds, status, checker note; per seed: the bound and the three makespans,
the introspective counters) is written atomically as ``cells/<instance>__<key>.json`` and
reused by a re-run; ``key`` digests the instance, the plan methods and their options, the
settings above, the source of every ``schedlab`` module outside ``schedlab.analysis`` and the
command line, and :data:`CELL_FORMAT`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pandas as pd
from rich.table import Table

from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader, policies_of
from schedlab.analysis.tables import output
from schedlab.analysis.tables.cells import code_digest, file_safe
from schedlab.analysis.tables.output import Block, Document, pm
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.instance import Instance, load_instance
from schedlab.solution import Solution, Status, worst_status

log = logging.getLogger(__name__)

#: Instances of the default table (the files in ``instances/saturn/``).
DEFAULT_INSTANCES = ("model-selection-1x8.json", "model-selection-2x8.json")

#: Planning methods (registered formulations) on the estimated runtimes, in row order.
PLAN_METHODS: tuple[tuple[str, str], ...] = (
    ("current practice", "saturn.current_practice"),
    ("greedy", "saturn.greedy"),
    ("random", "saturn.random"),
    ("disjunctive MILP", "saturn.disjunctive"),
    ("time-indexed MILP", "saturn.time_indexed"),
)
#: The plan executed as ``current practice`` under noise (and the default reference).
PRACTICE = "saturn.current_practice"
#: The plan executed as ``time-indexed, static`` and re-planned by ``introspective``.
STATIC = "saturn.time_indexed"
#: Instance of the ``--quick`` table (of :func:`~schedlab.workloads.saturn.example_instances`).
QUICK_INSTANCES = ("three-jobs.json",)
#: Output files in the ``--out`` folder.
STEM = "saturn"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
CELLS_FOLDER = "cells"
#: Version of the cell files' content (part of their key).
CELL_FORMAT = 1
#: Rows executed under noise, in row order.
NOISY_METHODS = ("current practice", "time-indexed, static", "introspective")
#: Runtime models of the generated model-selection instances.
SCALINGS: tuple[str, ...] = ("published", "analytic")
#: Introspective counters, averaged over the seeds in the note.
COUNTERS: tuple[str, ...] = ("resolves", "adopted", "restarts")


@dataclass(frozen=True)
class SaturnRow:
    """One row of the table (times in s, reductions and gaps as fractions).

    For a noisy row ``makespan_s`` is the mean over the seeds and ``makespan_std_s`` their
    sample standard deviation (0 for one seed and for the plans on the estimates)."""

    instance: str
    method: str
    makespan_s: float
    lower_bound_s: float
    solve_s: float
    status: str
    noise_sigma: float
    seeds: int
    reduction_vs_current: float
    note: str = ""
    makespan_std_s: float = 0.0

    @property
    def gap(self) -> float:
        """(makespan - lower bound) / makespan."""
        return (self.makespan_s - self.lower_bound_s) / self.makespan_s if self.makespan_s else 0.0


@dataclass(frozen=True)
class Workload:
    """One workload entry: ``source`` ``published`` (the 1x8 and 2x8 model-selection
    instances with runtimes of ``scaling``), ``quick`` (the three-jobs instance) or ``file``
    (the instance file ``file``)."""

    source: str = "published"
    scaling: str = "published"
    file: str | None = None

    def instances(self) -> list[Instance]:
        """The entry's instances, in row order."""
        if self.source == "published":
            return default_instances(self.scaling)
        if self.source == "quick":
            return quick_instances()
        assert self.file is not None
        return [load_instance(self.file)]


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed.

    ``workloads`` give the instances (in row order); ``methods`` the plan methods (label,
    registered formulation, its keyword arguments) in row order, which must include
    :data:`PRACTICE` and :data:`STATIC`; reductions to ``reference``'s plan.
    ``time_limit_s`` caps each MILP solve (the disjunctive, the time-indexed plan);
    ``resolve_time_limit_s`` each introspective re-solve; ``interval_s`` None = 1/8 of the
    plan's makespan; ``restart_cost_s`` seconds to resume a checkpointed job (written into
    each realized instance).
    """

    time_limit_s: float = 10.0
    sigma: float = 0.2
    seeds: tuple[int, ...] = (0, 1, 2)
    restart_cost_s: float = 60.0
    threshold: float = 0.01
    interval_s: float | None = None
    resolve_time_limit_s: float = 1.0
    solver: str = "highs"
    workloads: tuple[Workload, ...] = (Workload(),)
    methods: tuple[tuple[str, str, Mapping[str, Any]], ...] = tuple(
        (label, name, {}) for label, name in PLAN_METHODS)
    reference: str = PRACTICE

    @property
    def scaling(self) -> str:
        """Runtime model of the generated model-selection instances, as the text names it:
        the scalings of the ``published`` workloads ("published" when there is none; instance
        files and the hand-made three-jobs case are used as they are)."""
        found = list(dict.fromkeys(w.scaling for w in self.workloads
                                   if w.source == "published"))
        return " and ".join(found) if found else "published"


def default_instances(scaling: str = "published") -> list[Instance]:
    """The default instances: the model-selection workloads of ``instances/saturn/``
    (1 and 2 nodes x 8 A100-80GB, 12 jobs).  ``scaling="analytic"`` gives exactly the files
    (:func:`schedlab.workloads.saturn.example_instances`); ``"published"`` the same grid with
    runtimes calibrated to published multi-GPU speed-ups (:mod:`schedlab.world.scaling`)."""
    from schedlab.workloads.saturn import example_instances, model_selection_instance

    if scaling == "analytic":
        examples = example_instances()
        return [examples[name] for name in DEFAULT_INSTANCES]
    return [model_selection_instance(nodes=n, gpus_per_node=8, name=f"model-selection-{n}x8",
                                     scaling=scaling) for n in (1, 2)]


def quick_instances() -> list[Instance]:
    """The ``quick`` instance: three jobs on 4 GPUs (``instances/saturn/three-jobs.json``)."""
    from schedlab.workloads.saturn import example_instances

    examples = example_instances()
    return [examples[name] for name in QUICK_INSTANCES]


def check_settings(settings: TableSettings) -> None:
    """Refuse settings the table cannot run (one :class:`InputError` naming the spec field)."""
    if not settings.seeds:
        raise InputError("the table needs at least one seed", field="seeds")
    if not settings.workloads:
        raise InputError("the table needs at least one workload", field="workloads")
    names = [name for _, name, _ in settings.methods]
    if len(set(names)) != len(names):
        raise InputError("the plan methods must be distinct", field="policies")
    for needed in (PRACTICE, STATIC):
        if needed not in names:
            raise InputError(f"the plan methods must include {needed} (the noisy rows "
                             "execute its plan)", field="policies")
    if settings.reference not in names:
        raise InputError(f"reference {settings.reference!r} is not one of the plan methods "
                         f"({', '.join(names)})", field="report.reference")
    for where, value, low, strict in (("settings.time_limit_s", settings.time_limit_s, 0, True),
                                      ("settings.resolve_time_limit_s",
                                       settings.resolve_time_limit_s, 0, True),
                                      ("simulator.sigma", settings.sigma, 0, False),
                                      ("simulator.restart_cost_s", settings.restart_cost_s, 0,
                                       False)):
        if not math.isfinite(value) or value < low or (strict and value == low):
            raise InputError(f"must be {'>' if strict else '>='} {low}, got {value}",
                             field=where)
    if not (math.isfinite(settings.threshold) and 0 <= settings.threshold < 1):
        raise InputError(f"must be in [0, 1), got {settings.threshold}",
                         field="settings.threshold")
    if settings.interval_s is not None and not (math.isfinite(settings.interval_s)
                                                and settings.interval_s > 0):
        raise InputError(f"must be > 0 (or null), got {settings.interval_s}",
                         field="settings.interval_s")
    for workload in settings.workloads:
        if workload.source not in ("published", "quick", "file"):
            raise InputError(f"unknown workload source {workload.source!r}", field="workloads")
        if workload.scaling not in SCALINGS:
            raise InputError(f"scaling must be one of {', '.join(SCALINGS)}, got "
                             f"{workload.scaling!r}", field="workloads")


# --------------------------------------------------------------------------------- spec

#: The workload generators of the spec and their parameters.
GENERATORS: Mapping[str, tuple[str, ...]] = {
    "saturn.published": ("scaling",),
    "saturn.quick": (),
}
#: Keys of the spec's ``simulator`` and ``settings`` mappings (the table settings they set).
SIMULATOR_KEYS: tuple[str, ...] = ("sigma", "restart_cost_s")
SETTINGS_KEYS: tuple[str, ...] = ("time_limit_s", "resolve_time_limit_s", "threshold",
                                  "interval_s", "solver")


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``saturn.yaml`` shipped beside the
    runner; module docstring), checked: each mistake one :class:`InputError` naming the
    field path."""
    read = FieldReader(spec)
    if not spec.workloads:
        raise read.error("workloads", "the table needs at least one workload")
    workloads = [_workload(read, i, entry) for i, entry in enumerate(spec.workloads)]
    read.only_keys("simulator", spec.simulator, SIMULATOR_KEYS)
    read.only_keys("settings", spec.settings, SETTINGS_KEYS)
    values: dict[str, Any] = {"workloads": tuple(workloads), "seeds": tuple(spec.seeds)}
    for name, value in spec.simulator.items():
        values[name] = read.number(f"simulator.{name}", value, at_least=0)
    for name, value in spec.settings.items():
        where = f"settings.{name}"
        if name == "solver":
            if not isinstance(value, str) or not value:
                raise read.error(where, f"expected a solver name, got {json.dumps(value)}")
            values[name] = value
        elif name == "interval_s":
            values[name] = None if value is None else read.number(where, value, positive=True)
        elif name == "threshold":
            values[name] = read.number(where, value, at_least=0)
        else:
            values[name] = read.number(where, value, positive=True)
    if not spec.policies:
        raise read.error("policies", "the table needs its plan methods (registered "
                         "formulations), e.g. {label: greedy, name: saturn.greedy}")
    methods = policies_of(spec)
    for i, (_, name, options) in enumerate(methods):
        _check_method(read, i, name, options)
    values["methods"] = methods
    if spec.report.reference is not None:
        values["reference"] = spec.report.reference
    settings = replace(TableSettings(), **values)
    check_settings(settings)
    return settings


def _workload(read: FieldReader, index: int, entry: Any) -> Workload:
    where = f"workloads[{index}]"
    if entry.file is not None:
        if entry.generator is not None or entry.params:
            raise read.error(where, "give a file or a generator (with params), not both")
        return Workload(source="file", file=entry.file)
    if entry.generator not in GENERATORS:
        raise read.error(f"{where}.generator", f"expected one of {', '.join(GENERATORS)} "
                         f"(or a file: {{file: PATH}}), got {entry.generator!r}")
    read.only_keys(f"{where}.params", entry.params, GENERATORS[entry.generator])
    if entry.generator == "saturn.quick":
        return Workload(source="quick")
    scaling = entry.params.get("scaling", "published")
    if scaling not in SCALINGS:
        raise read.error(f"{where}.params.scaling", f"expected one of {', '.join(SCALINGS)}, "
                         f"got {json.dumps(scaling)}")
    return Workload(source="published", scaling=scaling)


def _check_method(read: FieldReader, index: int, name: str, options: Mapping[str, Any]) -> None:
    """A plan method must be a registered formulation that takes its options."""
    from schedlab.registry import get_formulation

    try:
        get_formulation(name)
    except InputError as exc:
        raise read.error(f"policies[{index}].name", exc.reason) from None
    try:
        get_formulation(name, **dict(options))
    except (InputError, TypeError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, InputError) else str(exc)
        raise read.error(f"policies[{index}].options", f"{name} refuses these options "
                         f"({reason})") from None


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One instance (the ``index``-th of the table): every plan method solved and executed
    under the noise of every seed."""

    index: int
    instance: Instance
    settings: TableSettings
    key: str

    @property
    def file_name(self) -> str:
        """``<instance>__<key>.json`` (file-safe)."""
        return f"{file_safe(self.instance.name)}__{self.key}.json"


@dataclass(frozen=True)
class PlanResult:
    """One plan on the estimates: ``method`` (registered name), makespan, solve seconds,
    status and the checker's note."""

    method: str
    makespan_s: float
    solve_s: float
    status: str
    note: str = ""


@dataclass(frozen=True)
class SeedResult:
    """One noise seed: the bound of the true runtimes, the makespans of current practice
    executed, the static time-indexed plan executed and introspective scheduling, and the
    introspective run's solver seconds, status, counters and checker note."""

    seed: int
    bound_s: float
    practice_s: float
    static_s: float
    introspective_s: float
    solver_time_s: float
    status: str
    counters: dict[str, float] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class CellResult:
    """A cell's plans (method order) and noisy executions (seed order)."""

    instance: str
    bound_s: float
    plans: list[PlanResult]
    noisy: list[SeedResult]
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {"format": CELL_FORMAT, "instance": self.instance, "bound_s": self.bound_s,
                "plans": [asdict(p) for p in self.plans],
                "noisy": [asdict(s) for s in self.noisy]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        plans = [PlanResult(method=str(p["method"]), makespan_s=float(p["makespan_s"]),
                            solve_s=float(p["solve_s"]), status=str(p["status"]),
                            note=str(p["note"])) for p in data["plans"]]
        noisy = [SeedResult(seed=int(s["seed"]), bound_s=float(s["bound_s"]),
                            practice_s=float(s["practice_s"]), static_s=float(s["static_s"]),
                            introspective_s=float(s["introspective_s"]),
                            solver_time_s=float(s["solver_time_s"]), status=str(s["status"]),
                            counters={k: s["counters"][k] for k in COUNTERS},
                            note=str(s["note"])) for s in data["noisy"]]
        return cls(instance=str(data["instance"]), bound_s=float(data["bound_s"]),
                   plans=plans, noisy=noisy, cached=True)


def cell_key(instance: Instance, settings: TableSettings) -> str:
    """12 hex digits naming a cell: the instance, the plan methods and their options, the
    settings the results depend on, the code and the cell format."""
    text = json.dumps({
        "instance": instance.model_dump_json(),
        "methods": [[name, repr(sorted(options.items()))]
                    for _, name, options in settings.methods],
        "time_limit_s": settings.time_limit_s, "sigma": settings.sigma,
        "seeds": list(settings.seeds), "restart_cost_s": settings.restart_cost_s,
        "threshold": settings.threshold, "interval_s": settings.interval_s,
        "resolve_time_limit_s": settings.resolve_time_limit_s, "solver": settings.solver,
        "code": code_digest(), "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def table_instances(settings: TableSettings) -> list[Instance]:
    """The instances of every workload, in row order."""
    return [instance for workload in settings.workloads for instance in workload.instances()]


def plan_cells(settings: TableSettings) -> list[Cell]:
    """One cell per instance, in row order (the settings and the instances are checked
    first: each must be a Saturn instance)."""
    from schedlab.formulations.saturn.data import saturn_data

    check_settings(settings)
    cells = []
    for index, instance in enumerate(table_instances(settings)):
        saturn_data(instance, formulation="saturn table")
        cells.append(Cell(index, instance, settings, cell_key(instance, settings)))
    return cells


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    seeds = len(cell.settings.seeds)
    return (f"{cell.instance.name}: {len(cell.settings.methods)} plans, {seeds} "
            f"noisy seed{'s' if seeds != 1 else ''}")


def _violations(instance: Instance, solution: Solution) -> str:
    found = check(instance, solution)
    for line in found:
        log.error("checker (%s): %s", solution.formulation, line)
    return f"{len(found)} checker violations" if found else ""


def solve_cell(cell: Cell) -> CellResult:
    """Solve every plan on the estimates, then execute under the noise of every seed
    (module docstring); nothing is written."""
    from schedlab.formulations.saturn.data import lower_bound, saturn_data
    from schedlab.formulations.saturn.introspective import Introspective
    from schedlab.registry import get_formulation
    from schedlab.simulator.nodes import NodeWorld, execute, plan_from_schedule
    from schedlab.solvers import SolverOptions
    from schedlab.workloads.saturn import with_restart_cost, with_runtime_noise

    cfg, instance = cell.settings, cell.instance
    data = saturn_data(instance, formulation="saturn table")
    bound = lower_bound(data)
    options = SolverOptions(solver=cfg.solver, time_limit_s=cfg.time_limit_s)
    solutions: dict[str, Solution] = {}
    plans: list[PlanResult] = []
    for _, name, kwargs in cfg.methods:
        t0 = time.perf_counter()
        solution = get_formulation(name, **dict(kwargs)).solve(instance, options)
        wall = time.perf_counter() - t0
        solutions[name] = solution
        assert solution.objective is not None, f"{name} returned no schedule"
        plans.append(PlanResult(
            method=name, makespan_s=float(solution.objective),
            solve_s=float(wall if solution.solver != "none" else solution.timings.total_s),
            status=solution.status.value, note=_violations(instance, solution)))

    # Noisy executions: the same seeds for every method.
    practice_plan = plan_from_schedule(data, solutions[PRACTICE].schedule)
    static = solutions[STATIC]
    intro = Introspective(
        interval_s=cfg.interval_s, threshold=cfg.threshold,
        resolve_time_limit_s=cfg.resolve_time_limit_s)
    intro.name = "saturn.introspective"
    noisy: list[SeedResult] = []
    for seed in cfg.seeds:
        realized = with_restart_cost(with_runtime_noise(instance, cfg.sigma, seed),
                                     cfg.restart_cost_s)
        world = NodeWorld.of(realized, data)
        seed_bound = lower_bound(world.true_data())
        practice = execute(world, practice_plan).makespan
        solution = intro.run(realized, static, options)
        metrics = solution.metrics
        noisy.append(SeedResult(
            seed=seed, bound_s=float(seed_bound), practice_s=float(practice),
            static_s=float(metrics["static_makespan_s"]),
            introspective_s=float(metrics["makespan_s"]),
            solver_time_s=float(metrics["solver_time_s"]), status=solution.status.value,
            counters={key: float(metrics[key]) for key in COUNTERS},
            note=_violations(realized, solution)))
    return CellResult(instance=instance.name, bound_s=float(bound), plans=plans,
                      noisy=noisy)


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`solve_cell` (looked up when called)."""
    return solve_cell(cell)


# --------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class SaturnTable:
    """The computed table: settings and its rows (per instance: the plans, then the noisy
    rows)."""

    settings: TableSettings
    rows: list[SaturnRow]

    @property
    def violations(self) -> bool:
        """Whether a row's schedule failed the checker."""
        return any("violation" in row.note for row in self.rows)


def saturn_table(cfg: TableSettings, results: Mapping[tuple[int, str], CellResult]
                 ) -> SaturnTable:
    """The table (module docstring) from every cell's result by (index, instance name),
    in the instances' order."""
    rows: list[SaturnRow] = []
    for _, result in sorted(results.items(), key=lambda item: item[0][0]):
        rows += _instance_rows(cfg, result)
    return SaturnTable(settings=cfg, rows=rows)


def _instance_rows(cfg: TableSettings, result: CellResult) -> list[SaturnRow]:
    plans = {plan.method: plan for plan in result.plans}
    rows = [SaturnRow(instance=result.instance, method=label,
                      makespan_s=plans[name].makespan_s, lower_bound_s=result.bound_s,
                      solve_s=plans[name].solve_s, status=plans[name].status,
                      noise_sigma=0.0, seeds=1, reduction_vs_current=0.0,
                      note=plans[name].note)
            for label, name, _ in cfg.methods]
    current = plans[cfg.reference].makespan_s
    rows = [_with_reduction(r, current) for r in rows]

    n = len(result.noisy)
    counts = dict.fromkeys(COUNTERS, 0.0)
    for seed in result.noisy:
        for key in COUNTERS:
            counts[key] += seed.counters[key] / n
    wins = sum(s.introspective_s < s.static_s - 1e-6 for s in result.noisy)
    notes = [f"seed {s.seed}: {s.note}" for s in result.noisy if s.note]
    mean_bound = statistics.fmean(s.bound_s for s in result.noisy)
    noisy = {"current practice": [s.practice_s for s in result.noisy],
             "time-indexed, static": [s.static_s for s in result.noisy],
             "introspective": [s.introspective_s for s in result.noisy]}
    practice = statistics.fmean(noisy["current practice"])
    static = plans[STATIC]
    extra = {
        "current practice": ("-", 0.0, ""),
        "time-indexed, static": (static.status, static.solve_s, "plan solved once"),
        "introspective": (
            worst_status(*(Status(s.status) for s in result.noisy)).value,
            statistics.fmean(s.solver_time_s for s in result.noisy),
            f"per seed: {counts['resolves']:.1f} re-solves, {counts['adopted']:.1f} adopted, "
            f"{counts['restarts']:.1f} restarts; beats static on {wins}/{n} seeds"
            + ("; " + "; ".join(notes) if notes else "")),
    }
    for method in NOISY_METHODS:
        status, solve_s, note = extra[method]
        span = statistics.fmean(noisy[method])
        spread = statistics.stdev(noisy[method]) if n > 1 else 0.0
        rows.append(SaturnRow(
            instance=result.instance, method=method, makespan_s=span,
            lower_bound_s=mean_bound, solve_s=solve_s, status=status,
            noise_sigma=cfg.sigma, seeds=n,
            reduction_vs_current=1 - span / practice if practice else 0.0, note=note,
            makespan_std_s=spread))
    return rows


def _with_reduction(row: SaturnRow, current: float) -> SaturnRow:
    return replace(row, reduction_vs_current=1 - row.makespan_s / current if current else 0.0)


def render(table: SaturnTable) -> Table:
    """The rows as a rich Table (one block per instance)."""
    cfg = table.settings
    rich_table = Table(
        title=(f"Saturn: makespan per method (MILP limit {cfg.time_limit_s:g} s; noisy rows: "
               f"runtime x lognormal(0, {cfg.sigma:g}), mean of {len(cfg.seeds)} seeds, "
               f"restart cost {cfg.restart_cost_s:g} s)"),
        title_justify="left",
        caption=("reduction % = 1 - makespan / current practice's (plans: on the estimates; "
                 "noisy rows: current practice executed under the same noise); gap % = "
                 "(makespan - lower bound) / makespan"),
        caption_justify="left",
    )
    for name, justify in (("instance", "left"), ("method", "left"), ("noise", "right"),
                          ("makespan s", "right"), ("lower bound s", "right"),
                          ("gap %", "right"), ("solve s", "right"), ("status", "left"),
                          ("reduction %", "right"), ("note", "left")):
        rich_table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for row in table.rows:
        if previous is not None and row.instance != previous:
            rich_table.add_section()
        rich_table.add_row(
            row.instance if row.instance != previous else "",
            row.method,
            f"σ={row.noise_sigma:g}" if row.noise_sigma else "-",
            pm(row.makespan_s, row.makespan_std_s, ",.1f", 1.0, row.seeds),
            f"{row.lower_bound_s:,.1f}",
            f"{100 * row.gap:.1f}",
            f"{row.solve_s:.2f}",
            row.status,
            f"{100 * row.reduction_vs_current:.1f}",
            row.note,
        )
        previous = row.instance
    return rich_table


# ------------------------------------------------------------------------------ outputs

#: CSV columns, in order (times in s, gap and reduction as fractions).
CSV_COLUMNS: tuple[str, ...] = (
    "instance", "method", "noise_sigma", "seeds", "makespan_s", "makespan_std_s",
    "lower_bound_s", "gap", "solve_s", "status", "reduction_vs_current", "note",
)


def to_frame(table: SaturnTable) -> pd.DataFrame:
    """The CSV: one line per row; a noisy row's makespan is the mean over its seeds with the
    sample std beside it (``makespan_std_s``)."""
    return pd.DataFrame([{**asdict(row), "gap": row.gap} for row in table.rows],
                        columns=list(CSV_COLUMNS))


def document(table: SaturnTable) -> Document:
    """The table's text (Markdown and LaTeX): what was run and one block of every row
    (noisy rows: makespan mean ± sample std over the seeds)."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    intro = (f"Makespan per method (MILP limit {cfg.time_limit_s:g} s). Plans use the "
             f"estimated runtimes (model-selection instances: {cfg.scaling} scaling, "
             "docs/saturn-calibration.md); noisy rows execute with runtime × lognormal(0, "
             f"{cfg.sigma:g}), restart cost {cfg.restart_cost_s:g} s, "
             + (f"mean ± sample std over {seeds} seeds. " if seeds > 1 else "one seed. ")
             + "reduction % = 1 - makespan / current practice's (plans: on the estimates; "
             "noisy rows: current practice executed under the same noise, ratio of the "
             "means); gap % = (makespan - lower bound) / makespan.")
    cells = [[row.instance, row.method, f"σ={row.noise_sigma:g}" if row.noise_sigma else "-",
              pm(row.makespan_s, row.makespan_std_s, ",.1f", 1.0, row.seeds),
              f"{row.lower_bound_s:,.1f}", f"{100 * row.gap:.1f}", f"{row.solve_s:.2f}",
              row.status, f"{100 * row.reduction_vs_current:.1f}", row.note]
             for row in table.rows]
    header = ["instance", "method", "noise", "makespan (s)", "lower bound (s)", "gap %",
              "solve (s)", "status", "reduction %", "note"]
    return Document(title="Saturn (VLDB'24): makespan of every SPASE method",
                    parts=[intro, Block(header=header, rows=cells, align="llrrrrrlrl")])


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json,
    key=lambda cell: (cell.index, cell.instance.name), describe=describe_cell,
    reduce=saturn_table, document=document, frame=to_frame,
    seeds=lambda settings: settings.seeds,
    exit_code=lambda table: 1 if table.violations else 0, cells_folder=CELLS_FOLDER)
