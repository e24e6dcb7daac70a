"""Titan's comparison table: average JCT and makespan of SRTF, Tiresias and Titan's ablations
on fine-tuning workloads of 64 GPUs, and the density sweep.

The paper (Gao et al., SoCC'22, Table 3) reports, on its FM fine-tuning traces: SRTF 1.68 h
average JCT and 33.09 h makespan, Tiresias 1.67 h / 33.09 h, Titan without the task merger
1.23 h / 33.11 h, Titan without the pipelined switch 1.16 h / 29.01 h, Titan 1.04 h / 29.01 h
(Figure 5: Titan stays ahead as the workload density grows).  This table measures what our
implementation gives on our generator, without tuning towards the claim.

**What is run.**  For each seed s (default 0, 1, 2) and density rho: the instance
``generate_titan_instance(gpus=G, density=rho, seed=s, model="mixed")`` (Titan's recipe,
:mod:`schedlab.workloads.titan`: about rho x G tasks over an 8-hour day, 120 s rounds), and for
each policy (label, registered name, keyword arguments) one elastic simulation
(:func:`~schedlab.simulator.elastic.simulate_elastic`, Titan's world: switch costs at every
reallocation, elastic GPU counts, merged pairs).  A policy without ``plan`` (SRTF, Tiresias)
runs through :class:`~schedlab.simulator.elastic_gangs.FixedGangs`: each task on the GPUs it
requested.  Tiresias has two queues split at 4 GPU-hours (``thresholds_gpu_s=(14400,)``).
The main table is density :attr:`TableSettings.density` (default 1); the sweep runs every
density of :attr:`TableSettings.densities` (1, 1.5, 2; its density-1 cells are the table's).

**Metrics** per (seed, density, policy) cell, from its per-task records (arrival a_j, finish
f_j): average JCT = mean of f_j - a_j, makespan = max f_j - min a_j (s), both also as ratios
to SRTF on the same seed and density; ``merged`` = tasks that ran in a merged pair.  Every
value is reported as mean and sample standard deviation over the seeds.

**Cache.**  Each cell is written, atomically, as ``cells/<policy>__d<density>__seed<s>__<key>
.json`` (per-task arrival, start, finish, merged flag; wall and solver seconds) and reused by a
re-run; ``key`` digests the instance, the policy and its arguments, and the source of every
``schedlab`` module outside ``schedlab.analysis`` and the command line.
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
from schedlab.analysis.experiments.spec import Experiment, FieldReader, policies_of
from schedlab.analysis.tables import output
from schedlab.analysis.tables.cells import (
    check_seeds,
    code_digest,
    columns_json,
    file_safe,
    mean_std,
    ratio,
)
from schedlab.analysis.tables.output import Block, Document, Heading, pm
from schedlab.errors import InputError
from schedlab.instance import Instance

log = logging.getLogger(__name__)

#: (label, registered policy name, keyword arguments) in row order.
POLICIES: tuple[tuple[str, str, Mapping[str, Any]], ...] = (
    ("SRTF", "srtf", {}),
    ("Tiresias", "tiresias", {"thresholds_gpu_s": (14400.0,)}),
    ("Titan (w/o task merger)", "titan_no_merge", {}),
    ("Titan (w/o pipeline switch)", "titan_no_pipeline", {}),
    ("Titan", "titan", {}),
    ("Titan (code's merge quirks)", "titan_code_quirks", {}),
)
#: The ratios' reference.
REFERENCE = "srtf"
#: The paper's Table 3 (h): policy -> (average JCT, makespan).
PAPER_TABLE_H: Mapping[str, tuple[float, float]] = {
    "srtf": (1.68, 33.09), "tiresias": (1.67, 33.09), "titan_no_merge": (1.23, 33.11),
    "titan_no_pipeline": (1.16, 29.01), "titan": (1.04, 29.01),
}
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
DENSITIES: tuple[float, ...] = (1.0, 1.5, 2.0)
STEM = "titan"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
PLOT_NAME = "titan_density.png"
CELLS_FOLDER = "cells"
CELL_FORMAT = 2
HOUR_S = 3600.0
#: Workload presets: ``paper`` (TitanSched's recorded traces, :mod:`schedlab.workloads.
#: titan_paper`) and ``generated`` (:func:`schedlab.workloads.titan.generate_titan_instance`).
PRESETS: tuple[str, ...] = ("paper", "generated")
#: The policies the code runs at its baseline interval (300 s) rather than Titan's 120 s.
BASELINE_POLICIES: frozenset[str] = frozenset({"srtf", "tiresias"})


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed: ``gpus`` GPUs (nodes of 4), the main table at ``density``,
    the sweep over ``densities``, ``jobs_per_gpu`` tasks per GPU at density 1, task durations
    at the request up to ``max_duration_s``, ``policies`` in row order, ratios to
    ``reference`` (the first policy when it is not among them)."""

    gpus: int = 32
    density: float = 1.0
    densities: tuple[float, ...] = DENSITIES
    jobs_per_gpu: float = 1.0
    max_duration_s: float = 36000.0
    model: str = "mixed"
    seeds: tuple[int, ...] = (0,)
    policies: tuple[tuple[str, str, Mapping[str, Any]], ...] = POLICIES
    preset: str = "paper"
    trace_model: str = "vit"
    reference: str = REFERENCE

    def describe(self) -> str:
        """One sentence: the workload and the seeds."""
        seeds = ", ".join(str(s) for s in self.seeds)
        if self.preset == "paper":
            from schedlab.workloads.titan_paper import trace_name

            traces = ", ".join(trace_name(d, self.trace_model) for d in self.all_densities)
            return (f"TitanSched's recorded traces {traces} (paper preset: work from its "
                    "fine-tuning trajectories, speed from its V100 profiles) on 32 GPUs in "
                    "8 nodes of 4; Titan at 120 s rounds, SRTF and Tiresias at 300 s as in "
                    "its experiment script")
        hours = self.max_duration_s / HOUR_S
        return (f"Titan workloads ({self.model} base models, {self.jobs_per_gpu:g} task(s) per "
                f"GPU at density 1, durations 5 min to {hours:g} h) on {self.gpus} GPUs in "
                f"nodes of 4, 120 s rounds, seed(s) {seeds}")

    @property
    def all_densities(self) -> tuple[float, ...]:
        """The sweep's densities with the main table's, ascending."""
        return tuple(sorted({*self.densities, self.density}))


def generated_settings(**overrides: Any) -> TableSettings:
    """The table on generated workloads (the setting before the paper preset): 64 GPUs,
    mixed base models, one task per GPU at density 1, seeds 0, 1, 2."""
    base = TableSettings(gpus=64, seeds=DEFAULT_SEEDS, preset="generated")
    return replace(base, **overrides)


def generated_quick_overrides() -> dict[str, Any]:
    """What ``--quick`` changes on the generated preset: 16 GPUs, 0.5 tasks per GPU,
    durations up to 2 h, densities 1 and 2, seed 0."""
    return {"preset": "generated", "gpus": 16, "densities": (1.0, 2.0), "jobs_per_gpu": 0.5,
            "max_duration_s": 7200.0, "seeds": (0,)}


def quick_settings(**overrides: Any) -> TableSettings:
    """The ``--quick`` table (well under a minute): the paper preset's density-1 trace only,
    all five policies."""
    base = TableSettings(densities=(1.0,))
    return replace(base, **overrides)


def check_settings(settings: TableSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` for settings that cannot make a table."""
    check_seeds(settings.seeds)
    if settings.preset not in PRESETS:
        raise InputError(f"unknown preset {settings.preset!r} (known: {', '.join(PRESETS)})",
                         field="--preset")
    if settings.preset == "paper":
        from schedlab.workloads.titan_paper import PAPER_NODES, trace_name

        if settings.gpus != PAPER_NODES * 4:
            raise InputError(f"the paper preset's cluster is the code's {PAPER_NODES * 4} "
                             f"GPUs, not {settings.gpus}", field="--gpus")
        for density in settings.all_densities:
            trace_name(density, settings.trace_model)
    if settings.gpus < 4 or settings.gpus % 4:
        raise InputError(f"GPUs must be whole nodes of 4, got {settings.gpus}", field="--gpus")
    if any(not (math.isfinite(d) and d > 0) for d in settings.all_densities):
        raise InputError("densities must be positive", field="--densities")
    names = [name for _, name, _ in settings.policies]
    if not names or len(set(names)) != len(names):
        raise InputError("the table needs distinct policies", field="--policies")


#: The workload generators of the spec: TitanSched's recorded traces, or our generator.
GENERATORS: Mapping[str, str] = {"titan.paper": "paper", "titan.generated": "generated"}
#: The generators' parameters (the table settings they set).
PARAMS: Mapping[str, tuple[str, ...]] = {
    "paper": ("trace_model", "density", "densities"),
    "generated": ("gpus", "density", "densities", "jobs_per_gpu", "max_duration_s", "model"),
}


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``titan.yaml`` shipped beside the
    runner): one workload (``titan.paper`` or ``titan.generated`` with the parameters of
    :data:`PARAMS`), the policy rows, the seeds and the report's reference; checked."""
    read = FieldReader(spec)
    entry, generator = read.sections(
        GENERATORS, {name: PARAMS[preset] for name, preset in GENERATORS.items()})
    preset = GENERATORS[generator]
    values: dict[str, Any] = {"preset": preset, "policies": policies_of(spec),
                              "seeds": tuple(spec.seeds)}
    for name, value in entry.params.items():
        where = f"workloads[0].params.{name}"
        if name == "densities":
            if not isinstance(value, list) or not value:
                raise read.error(where, "expected a non-empty list of densities")
            values[name] = tuple(read.number(f"{where}[{i}]", v, positive=True)
                                 for i, v in enumerate(value))
        elif name in ("trace_model", "model"):
            values[name] = str(value)
        elif name == "gpus":
            values[name] = read.number(where, value, integer=True, positive=True)
        else:
            values[name] = read.number(where, value, positive=True)
    if spec.report.reference is not None:
        values["reference"] = spec.report.reference
    settings = replace(TableSettings(), **values)
    check_settings(settings)
    return settings


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One simulation: ``policy`` (with ``kwargs``) on the instance of (density, seed)."""

    policy: str
    kwargs: Mapping[str, Any]
    density: float
    seed: int
    instance: Instance
    key: str

    @property
    def file_name(self) -> str:
        """``<policy>__d<density>__seed<seed>__<key>.json`` (file-safe)."""
        safe = file_safe(self.policy)
        return f"{safe}__d{self.density:g}__seed{self.seed}__{self.key}.json"


@dataclass(frozen=True)
class CellResult:
    """A cell's per-task records (arrival order; NaN finish when unfinished) and counters."""

    policy: str
    density: float
    seed: int
    jobs: pd.DataFrame
    wall_s: float
    solver_time_s: float
    rounds: int
    accounting: dict[str, Any] = field(default_factory=dict)
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {
            "format": CELL_FORMAT, "policy": self.policy, "density": self.density,
            "seed": self.seed, "wall_s": self.wall_s, "solver_time_s": self.solver_time_s,
            "rounds": self.rounds, "accounting": self.accounting,
            "jobs": columns_json(self.jobs, ("job", "arrival", "start", "finish", "merged")),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        jobs = data["jobs"]
        frame = pd.DataFrame({
            "job": [str(j) for j in jobs["job"]],
            "arrival": np.asarray(jobs["arrival"], dtype=float),
            "start": np.asarray([math.nan if v is None else v for v in jobs["start"]],
                                dtype=float),
            "finish": np.asarray([math.nan if v is None else v for v in jobs["finish"]],
                                 dtype=float),
            "merged": [bool(v) for v in jobs["merged"]],
        })
        return cls(policy=str(data["policy"]), density=float(data["density"]),
                   seed=int(data["seed"]), jobs=frame, wall_s=float(data["wall_s"]),
                   solver_time_s=float(data["solver_time_s"]), rounds=int(data["rounds"]),
                   accounting=dict(data.get("accounting") or {}), cached=True)


def build_instance(settings: TableSettings, density: float, seed: int,
                   policy: str = "titan") -> Instance:
    """The (density, seed) workload of the table; on the paper preset the trace of the
    density, with the round of ``policy`` (300 s for SRTF and Tiresias, else 120 s, as the
    code's experiment script ``run/exp_cluster/fast_batch_run.sh``)."""
    from schedlab.workloads.titan import generate_titan_instance

    if settings.preset == "paper":
        from schedlab.workloads.titan_paper import (
            BASELINE_ROUND_S,
            generate_titan_paper_instance,
        )

        round_s = BASELINE_ROUND_S if policy in BASELINE_POLICIES else 120.0
        return generate_titan_paper_instance(density, settings.trace_model, round_s=round_s)
    return generate_titan_instance(gpus=settings.gpus, density=density, seed=seed,
                                   jobs_per_gpu=settings.jobs_per_gpu, model=settings.model,
                                   max_duration_s=settings.max_duration_s)


def cell_key(instance: Instance, policy: str, kwargs: Mapping[str, Any]) -> str:
    """12 hex digits naming a cell: instance, policy, its arguments, the code, the format."""
    text = json.dumps({"instance": instance.model_dump_json(), "policy": policy,
                       "kwargs": repr(sorted(kwargs.items())), "code": code_digest(),
                       "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def plan_cells(settings: TableSettings) -> list[Cell]:
    """Every (density, seed, policy) cell, the slowest (Titan's, densest first) first
    (the settings are checked first)."""
    check_settings(settings)
    cells = []
    for density in sorted(settings.all_densities, reverse=True):
        for seed in settings.seeds:
            shared = build_instance(settings, density, seed)
            for _, name, kwargs in settings.policies:
                instance = (build_instance(settings, density, seed, name)
                            if settings.preset == "paper" and name in BASELINE_POLICIES
                            else shared)
                cells.append(Cell(name, kwargs, density, seed, instance,
                                  cell_key(instance, name, kwargs)))
    cells.sort(key=lambda c: (not c.policy.startswith("titan"), -c.density))
    return cells


def simulate_cell(cell: Cell) -> CellResult:
    """Run the cell's policy in the elastic mode (a fixed-gang policy through FixedGangs)."""
    from schedlab.policies.registry import get_policy
    from schedlab.simulator.elastic import simulate_elastic
    from schedlab.simulator.elastic_gangs import FixedGangs

    policy = get_policy(cell.policy, **dict(cell.kwargs))
    runner: Any = policy if hasattr(policy, "plan") else FixedGangs(policy)
    t0 = time.perf_counter()
    result = simulate_elastic(cell.instance, runner, seed=cell.seed)
    wall = time.perf_counter() - t0
    merged = {run.job for r in result.rounds for run in r.runs if run.partner is not None}
    frame = result.to_dataframe()[["job", "arrival", "start", "finish"]].copy()
    frame["merged"] = frame["job"].isin(merged)
    accounting = policy.merge_accounting() if hasattr(policy, "merge_accounting") else {}
    return CellResult(policy=cell.policy, density=cell.density, seed=cell.seed,
                      jobs=frame.reset_index(drop=True), wall_s=wall,
                      solver_time_s=float(result.solver_time_s), rounds=len(result.rounds),
                      accounting=accounting)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.policy}, density {cell.density:g}, seed {cell.seed}"


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`simulate_cell` (looked up when called)."""
    return simulate_cell(cell)


# --------------------------------------------------------------------------------- rows


def cell_metrics(jobs: pd.DataFrame, accounting: Mapping[str, Any] | None = None
                 ) -> dict[str, float]:
    """Average JCT and makespan (s; NaN without finished tasks), merged tasks, the average
    JCT of merged and of unmerged tasks (s; NaN when none), and from the policy's merge
    accounting the merge candidates offered over the run (NaN for a policy without one)."""
    done = jobs[jobs["finish"].notna()]
    jct = done["finish"] - done["arrival"]
    merged = done["merged"].astype(bool)
    return {
        "avg_jct_s": metrics.average_jct(jobs),
        "makespan_s": metrics.makespan(jobs),
        "merged": float(jobs["merged"].sum()),
        "avg_jct_merged_s": float(jct[merged].mean()) if merged.any() else math.nan,
        "avg_jct_unmerged_s": float(jct[~merged].mean()) if (~merged).any() else math.nan,
        "candidates": (float(accounting["candidates"]) if accounting and "candidates" in
                       accounting else math.nan),
    }


@dataclass(frozen=True)
class Row:
    """One policy at one density over the seeds: mean and std of every metric and ratio."""

    label: str
    policy: str
    density: float
    seeds: int
    jobs: int
    unfinished: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    per_seed: dict[int, dict[str, float]] = field(default_factory=dict)
    wall_s: float = math.nan
    accounting: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class TitanTable:
    """The computed table: settings and one row per (density, policy)."""

    settings: TableSettings
    rows: list[Row]

    def at(self, density: float) -> list[Row]:
        """The rows of one density, in policy order."""
        return [row for row in self.rows if row.density == density]


def titan_table(cfg: TableSettings, results: Mapping[tuple[float, int, str], CellResult]
                ) -> TitanTable:
    """The table (module docstring) from every cell's result by (density, seed, policy)."""
    names = [name for _, name, _ in cfg.policies]
    reference = cfg.reference if cfg.reference in names else names[0]
    rows = []
    for density in cfg.all_densities:
        for label, name, _ in cfg.policies:
            per_seed: dict[int, dict[str, float]] = {}
            accounting: dict[int, dict[str, Any]] = {}
            jobs = unfinished = 0
            for seed in cfg.seeds:
                own = results[density, seed, name]
                ref = cell_metrics(results[density, seed, reference].jobs)
                values = cell_metrics(own.jobs, own.accounting)
                values["avg_jct_ratio"] = ratio(values["avg_jct_s"], ref["avg_jct_s"])
                values["makespan_ratio"] = ratio(values["makespan_s"], ref["makespan_s"])
                values["wall_s"] = own.wall_s
                per_seed[seed] = values
                accounting[seed] = own.accounting
                jobs += len(own.jobs)
                unfinished += int(own.jobs["finish"].isna().sum())
            mean: dict[str, float] = {}
            std: dict[str, float] = {}
            for key in next(iter(per_seed.values())):
                mean[key], std[key] = mean_std([v[key] for v in per_seed.values()])
            rows.append(Row(label=label, policy=name, density=density, seeds=len(cfg.seeds),
                            jobs=jobs, unfinished=unfinished, mean=mean, std=std,
                            per_seed=per_seed, wall_s=mean["wall_s"],
                            accounting=accounting))
    return TitanTable(settings=cfg, rows=rows)


# ------------------------------------------------------------------------------ outputs

CSV_COLUMNS: tuple[str, ...] = (
    "label", "policy", "density", "stat", "seed", "jobs", "unfinished", "avg_jct_s",
    "makespan_s", "avg_jct_ratio", "makespan_ratio", "merged", "candidates",
    "avg_jct_merged_s", "avg_jct_unmerged_s", "wall_s",
)


def to_frame(table: TitanTable) -> pd.DataFrame:
    """The CSV: per (density, policy) one row per seed, then ``mean`` and ``std`` rows."""
    out: list[dict[str, Any]] = []
    keys = ("avg_jct_s", "makespan_s", "avg_jct_ratio", "makespan_ratio", "merged",
            "candidates", "avg_jct_merged_s", "avg_jct_unmerged_s", "wall_s")
    for row in table.rows:
        head = {"label": row.label, "policy": row.policy, "density": row.density}
        for seed, values in row.per_seed.items():
            out.append({**head, "stat": "seed", "seed": seed,
                        **{k: values[k] for k in keys}})
        for stat, values in (("mean", row.mean), ("std", row.std)):
            out.append({**head, "stat": stat, "jobs": row.jobs, "unfinished": row.unfinished,
                        **{k: values[k] for k in keys}})
    frame = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    for column in ("seed", "jobs", "unfinished"):
        frame[column] = frame[column].astype("Int64")
    return frame


def document(table: TitanTable) -> Document:
    """The table's text (Markdown and LaTeX): what was run, the main table with the paper's
    numbers, and the density sweep."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    spread = (f"mean ± sample std over {seeds} seeds" if seeds > 1 else "one seed")
    parts: list[str | Heading | Block] = [
        f"Ran: {cfg.describe()}; every policy in Titan's world (elastic mode: a context "
        "switch at every reallocation, 30 s checkpoint + parameter load; Titan's pipelined "
        "switch only for Titan and Titan w/o merger). SRTF and Tiresias (2 queues, 4 "
        "GPU-hour threshold) run each task on the GPUs it requested. avg JCT = mean of "
        "finish - arrival; makespan = last finish - first arrival; ratios to SRTF on the "
        f"same seed; merged = tasks trained in a merged pair (mean per seed); {spread}.",
        Heading(f"Density {cfg.density:g}"),
    ]
    rows: list[list[str]] = []
    for row in table.at(cfg.density):
        paper = PAPER_TABLE_H.get(row.policy)
        rows.append([
            row.label,
            pm(row.mean["avg_jct_s"], row.std["avg_jct_s"], ".2f", 1 / HOUR_S, seeds),
            pm(row.mean["makespan_s"], row.std["makespan_s"], ".2f", 1 / HOUR_S, seeds),
            pm(row.mean["avg_jct_ratio"], row.std["avg_jct_ratio"], ".2f", 1.0, seeds),
            pm(row.mean["makespan_ratio"], row.std["makespan_ratio"], ".2f", 1.0, seeds),
            f"{row.mean['merged']:.1f}",
            f"{paper[0]:.2f}" if paper else "-", f"{paper[1]:.2f}" if paper else "-",
            f"{row.wall_s:.1f}",
        ])
    parts.append(Block(header=["policy", "avg JCT (h)", "makespan (h)", "avg JCT / SRTF",
                               "makespan / SRTF", "merged", "paper avg JCT (h)",
                               "paper makespan (h)", "wall (s)"], rows=rows))
    parts.append(Heading(f"The merger at density {cfg.density:g}"))
    merge_rows: list[list[str]] = []
    for row in table.at(cfg.density):
        if not row.accounting or not any(row.accounting.values()):
            continue
        first = row.accounting[min(row.accounting)]
        rejected = first.get("rejected", {})
        merge_rows.append([
            row.label, f"{row.mean['candidates']:.0f}", f"{row.mean['merged']:.0f}",
            pm(row.mean["avg_jct_merged_s"], row.std["avg_jct_merged_s"], ".2f",
               1 / HOUR_S, seeds),
            pm(row.mean["avg_jct_unmerged_s"], row.std["avg_jct_unmerged_s"], ".2f",
               1 / HOUR_S, seeds),
            ", ".join(f"{k} {v}" for k, v in rejected.items()) or "-"])
    parts.append(Block(header=["policy", "candidates offered", "tasks merged",
                               "avg JCT merged (h)", "avg JCT unmerged (h)",
                               f"pairs turned down, by rule (seed {min(cfg.seeds)})"],
                       rows=merge_rows))
    parts.append("candidates offered = merge candidates the round ILPs were offered over the "
                 "run; a pair is turned down by the first rule it fails: started (a member "
                 "ran), model, dataset (the same), benefit, labels (a member without class "
                 "labels), similarity; counted once per round it was considered.")
    unfinished = sum(row.unfinished for row in table.rows)
    if unfinished:
        parts.append(f"{unfinished} task(s) did not finish (their JCT is left out).")
    parts.append(Heading("Average JCT (h) by density"))
    sweep: list[list[str]] = []
    for label, name, _ in cfg.policies:
        by_density = {row.density: row for row in table.rows if row.policy == name}
        sweep.append([label, *(pm(by_density[d].mean["avg_jct_s"],
                                  by_density[d].std["avg_jct_s"], ".2f", 1 / HOUR_S, seeds)
                               for d in cfg.all_densities)])
    parts.append(Block(header=["policy", *(f"{d:g}" for d in cfg.all_densities)],
                       rows=sweep))
    return Document(title="Titan (SoCC'22): fine-tuning tasks on a shared cluster",
                    parts=parts)


def plot_density(table: TitanTable, path: str | Path, dpi: int = 120) -> Path:
    """``titan_density.png``: average JCT (h) against density, one line per policy, error
    bars = sample std over the seeds."""
    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    cfg = table.settings
    fig, ax = plt.subplots(figsize=(7, 4.5))
    densities = list(cfg.all_densities)
    for i, (label, name, _) in enumerate(cfg.policies):
        rows = {row.density: row for row in table.rows if row.policy == name}
        ax.errorbar(densities, [rows[d].mean["avg_jct_s"] / HOUR_S for d in densities],
                    yerr=[rows[d].std["avg_jct_s"] / HOUR_S for d in densities],
                    marker="o", capsize=4, label=label, color=f"C{i % 10}")
    ax.set_xlabel("workload density")
    ax.set_ylabel("average JCT (h)")
    ax.set_xticks(densities)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"Titan workloads on {cfg.gpus} GPUs, {len(cfg.seeds)} seed(s)")
    fig.tight_layout()
    try:
        return _save(fig, path, dpi)
    finally:
        plt.close(fig)


def figures(table: TitanTable, folder: Path) -> list[Path]:
    """The table's figures: ``titan_density.png``."""
    return [plot_density(table, folder / PLOT_NAME)]


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json,
    key=lambda cell: (cell.density, cell.seed, cell.policy), describe=describe_cell,
    reduce=titan_table, document=document, frame=to_frame, figures=figures,
    seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
