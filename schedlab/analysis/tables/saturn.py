"""Saturn's comparison table: makespan of every SPASE method on model-selection workloads.

The paper (Nagrecha & Kumar, VLDB'24) reports 39-49% lower model-selection runtimes than
current practice.  This table measures what our models give, without tuning towards the claim.
For each instance, rows:

* plans on the estimated runtimes (the instance's ``runtime_s``):
  ``current practice``, ``greedy``, ``random``, ``disjunctive MILP``, ``time-indexed MILP``;
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
violations would be counted in the row's note.
"""

from __future__ import annotations

import datetime as dt
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
from rich.table import Table

from schedlab.analysis.tables import output
from schedlab.analysis.tables.output import Block, Document, pm
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.saturn.data import lower_bound, saturn_data
from schedlab.formulations.saturn.introspective import Introspective
from schedlab.instance import Instance, load_instance
from schedlab.registry import get_formulation
from schedlab.simulator.nodes import NodeWorld, execute, plan_from_schedule
from schedlab.solution import Solution, Status, worst_status
from schedlab.solvers import SolverOptions
from schedlab.workloads.saturn import with_restart_cost, with_runtime_noise

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
#: Instance of the ``--quick`` table (of :func:`~schedlab.workloads.saturn.example_instances`).
QUICK_INSTANCES = ("three-jobs.json",)
#: Output files in the ``--out`` folder.
STEM = "saturn"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
#: Rows executed under noise, in row order.
NOISY_METHODS = ("current practice", "time-indexed, static", "introspective")


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
class TableSettings:
    """How the table is computed.

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
    #: Runtime model of the generated model-selection instances (:func:`default_instances`):
    #: "published" (speed-ups calibrated to published figures, docs/saturn-calibration.md)
    #: or "analytic"; instance files and the hand-made three-jobs case are used as they are.
    scaling: str = "published"


def default_instances(scaling: str = "published") -> list[Instance]:
    """The default instances: the model-selection workloads of ``instances/saturn/``
    (1 and 2 nodes x 8 A100-80GB, 12 jobs).  ``scaling="analytic"`` gives exactly the files
    (:func:`schedlab.workloads.saturn.example_instances`); ``"published"`` the same grid with
    runtimes calibrated to published multi-GPU speed-ups (:mod:`schedlab.profiler.scaling`)."""
    from schedlab.workloads.saturn import example_instances, model_selection_instance

    if scaling == "analytic":
        examples = example_instances()
        return [examples[name] for name in DEFAULT_INSTANCES]
    return [model_selection_instance(nodes=n, gpus_per_node=8, name=f"model-selection-{n}x8",
                                     scaling=scaling) for n in (1, 2)]


def quick_instances() -> list[Instance]:
    """The ``--quick`` instance: three jobs on 4 GPUs (``instances/saturn/three-jobs.json``)."""
    from schedlab.workloads.saturn import example_instances

    examples = example_instances()
    return [examples[name] for name in QUICK_INSTANCES]


def quick_settings() -> TableSettings:
    """The ``--quick`` table's settings: MILPs capped at 5 s, re-solves at 0.5 s, one seed."""
    return TableSettings(time_limit_s=5.0, seeds=(0,), resolve_time_limit_s=0.5)


def load_instances(paths: Sequence[str | Path]) -> list[Instance]:
    """Instances from files (each validated; one clear error for a bad file)."""
    return [load_instance(p) for p in paths]


def steps(num_instances: int, settings: TableSettings) -> int:
    """Progress steps of :func:`saturn_table` (for a progress bar)."""
    return num_instances * (len(PLAN_METHODS) + len(settings.seeds))


def saturn_table(
    instances: Sequence[Instance],
    settings: TableSettings | None = None,
    on_step: Callable[[str], None] | None = None,
) -> list[SaturnRow]:
    """Rows of the table for every instance (see the module docstring).

    ``on_step(description)`` is called after each of :func:`steps` units of work.
    """
    cfg = settings or TableSettings()
    if not cfg.seeds:
        raise InputError("the table needs at least one seed", field="seeds")
    rows: list[SaturnRow] = []
    for instance in instances:
        rows += _instance_rows(instance, cfg, on_step or (lambda _: None))
    return rows


def _violations(instance: Instance, solution: Solution) -> str:
    found = check(instance, solution)
    for line in found:
        log.error("checker (%s): %s", solution.formulation, line)
    return f"{len(found)} checker violations" if found else ""


def _instance_rows(
    instance: Instance, cfg: TableSettings, on_step: Callable[[str], None]
) -> list[SaturnRow]:
    data = saturn_data(instance, formulation="saturn table")
    bound = lower_bound(data)
    options = SolverOptions(solver=cfg.solver, time_limit_s=cfg.time_limit_s)
    solutions: dict[str, Solution] = {}
    rows: list[SaturnRow] = []
    for label, name in PLAN_METHODS:
        t0 = time.perf_counter()
        solution = get_formulation(name).solve(instance, options)
        wall = time.perf_counter() - t0
        solutions[label] = solution
        assert solution.objective is not None, f"{name} returned no schedule"
        rows.append(SaturnRow(
            instance=instance.name, method=label, makespan_s=solution.objective,
            lower_bound_s=bound,
            solve_s=wall if solution.solver != "none" else solution.timings.total_s,
            status=solution.status.value, noise_sigma=0.0, seeds=1,
            reduction_vs_current=0.0, note=_violations(instance, solution)))
        on_step(f"{instance.name}: {label}")
    current = rows[0].makespan_s
    rows = [_with_reduction(r, current) for r in rows]

    # Noisy executions: the same seeds for every method.
    practice_plan = plan_from_schedule(data, solutions["current practice"].schedule)
    static = solutions["time-indexed MILP"]
    noisy: dict[str, list[float]] = {m: [] for m in NOISY_METHODS}
    bounds: list[float] = []
    intro_solve: list[float] = []
    counts = {"resolves": 0.0, "adopted": 0.0, "restarts": 0.0}
    wins = 0
    notes: list[str] = []
    statuses: list[Status] = []
    intro = Introspective(
        interval_s=cfg.interval_s, threshold=cfg.threshold,
        resolve_time_limit_s=cfg.resolve_time_limit_s)
    intro.name = "saturn.introspective"
    for seed in cfg.seeds:
        realized = with_restart_cost(with_runtime_noise(instance, cfg.sigma, seed),
                                     cfg.restart_cost_s)
        world = NodeWorld.of(realized, data)
        bounds.append(lower_bound(world.true_data()))
        noisy["current practice"].append(execute(world, practice_plan).makespan)
        solution = intro.run(realized, static, options)
        if violation := _violations(realized, solution):
            notes.append(f"seed {seed}: {violation}")
        statuses.append(solution.status)
        noisy["time-indexed, static"].append(solution.metrics["static_makespan_s"])
        noisy["introspective"].append(solution.metrics["makespan_s"])
        wins += solution.metrics["makespan_s"] < solution.metrics["static_makespan_s"] - 1e-6
        intro_solve.append(solution.metrics["solver_time_s"])
        for key in counts:
            counts[key] += solution.metrics[key] / len(cfg.seeds)
        on_step(f"{instance.name}: introspective, seed {seed}")
    n = len(cfg.seeds)
    mean_bound = statistics.fmean(bounds)
    practice = statistics.fmean(noisy["current practice"])
    extra = {
        "current practice": ("-", 0.0, ""),
        "time-indexed, static": (static.status.value, rows[-1].solve_s, "plan solved once"),
        "introspective": (
            worst_status(*statuses).value, statistics.fmean(intro_solve),
            f"per seed: {counts['resolves']:.1f} re-solves, {counts['adopted']:.1f} adopted, "
            f"{counts['restarts']:.1f} restarts; beats static on {wins}/{n} seeds"
            + ("; " + "; ".join(notes) if notes else "")),
    }
    for method in NOISY_METHODS:
        status, solve_s, note = extra[method]
        span = statistics.fmean(noisy[method])
        spread = statistics.stdev(noisy[method]) if n > 1 else 0.0
        rows.append(SaturnRow(
            instance=instance.name, method=method, makespan_s=span, lower_bound_s=mean_bound,
            solve_s=solve_s, status=status, noise_sigma=cfg.sigma, seeds=n,
            reduction_vs_current=1 - span / practice if practice else 0.0, note=note,
            makespan_std_s=spread))
    return rows


def _with_reduction(row: SaturnRow, current: float) -> SaturnRow:
    from dataclasses import replace

    return replace(row, reduction_vs_current=1 - row.makespan_s / current if current else 0.0)


def render(rows: Sequence[SaturnRow], settings: TableSettings | None = None) -> Table:
    """The rows as a rich Table (one block per instance)."""
    cfg = settings or TableSettings()
    table = Table(
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
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for row in rows:
        if previous is not None and row.instance != previous:
            table.add_section()
        table.add_row(
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
    return table


# ------------------------------------------------------------------------------ outputs

#: CSV columns, in order (times in s, gap and reduction as fractions).
CSV_COLUMNS: tuple[str, ...] = (
    "instance", "method", "noise_sigma", "seeds", "makespan_s", "makespan_std_s",
    "lower_bound_s", "gap", "solve_s", "status", "reduction_vs_current", "note",
)


def to_frame(rows: Sequence[SaturnRow]) -> pd.DataFrame:
    """The CSV: one line per row; a noisy row's makespan is the mean over its seeds with the
    sample std beside it (``makespan_std_s``)."""
    return pd.DataFrame([{**asdict(row), "gap": row.gap} for row in rows],
                        columns=list(CSV_COLUMNS))


def document(rows: Sequence[SaturnRow], settings: TableSettings | None = None) -> Document:
    """The table's text (Markdown and LaTeX): what was run and one block of every row
    (noisy rows: makespan mean ± sample std over the seeds)."""
    cfg = settings or TableSettings()
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
             for row in rows]
    header = ["instance", "method", "noise", "makespan (s)", "lower bound (s)", "gap %",
              "solve (s)", "status", "reduction %", "note"]
    return Document(title="Saturn (VLDB'24): makespan of every SPASE method",
                    parts=[intro, Block(header=header, rows=cells, align="llrrrrrlrl")])


def render_markdown(rows: Sequence[SaturnRow], settings: TableSettings | None = None) -> str:
    """``saturn.md``: :func:`document` as Markdown."""
    return output.render_markdown(document(rows, settings))


def write_outputs(rows: Sequence[SaturnRow], settings: TableSettings, out_dir: str | Path, *,
                  command: Sequence[str] | None = None,
                  started: dt.datetime | None = None) -> list[Path]:
    """Write ``saturn.md``, ``.csv``, ``.tex`` and ``saturn.manifest.json`` (each
    atomically; :mod:`~schedlab.analysis.tables.output`)."""
    folder = Path(out_dir)
    written = output.write_table_files(folder, STEM, document(rows, settings), to_frame(rows))
    written.append(output.write_manifest(folder, STEM, written, seeds=settings.seeds,
                                         settings=settings, command=command, started=started))
    return written
