r"""Hare's comparison table: total weighted JCT of Hare, Sched_Homo, Sched_Allox, Gavel
(max-min fairness), Tiresias and an online heterogeneity-aware LAS on heterogeneous clusters, by
job count and by GPU count, and the JCT distribution.

The seed (Hare's poster) simulates 160 heterogeneous GPUs with 100-300 jobs (its Fig. 7/10),
varies the GPU count (Fig. 9), plots the JCT CDF (Fig. 8) and reports 47.6-75.3% lower
weighted JCT than the other schemes.  This table measures what our implementation gives on
our generator (:mod:`schedlab.workloads.hare`), without tuning towards the claim.

**Workloads.**  For each seed s (default 0, 1, 2): ``generate_hare_instance(n, seed=s,
cluster=c)`` (all jobs at 0 s, Hare-style switch costs) for n in :attr:`TableSettings.jobs`
(100, 200, 300) on the default 160-GPU mix (64 K80 + 48 P100 + 48 V100), and n =
:attr:`TableSettings.sweep_jobs` (200) on the mix scaled to each total of
:attr:`TableSettings.gpus` (80 ... 240): count_k = round(n_k G / 160).

**Schemes.**  The offline ones solve the Hare instance: Hare = ``hare.greedy`` (rounds in the
LP order, each task on the GPU where it ends earliest; ``eps`` of its LP grid is
:attr:`TableSettings.lp_eps`), ``hare.sched_homo`` and ``hare.sched_allox``.  The online ones
run in the round-based simulator (:func:`~schedlab.simulator.engine.simulate`, rounds of
:attr:`TableSettings.round_s` s) on the same jobs converted to gangs (:func:`gang_instance`):

    scale_factor = m_j,  total_steps = R_j (rounds),  arrival = r_j,  weight = w_j,
    throughput[k] = 1 / p[j,k] rounds/s where n_k >= m_j and j can use k, else 0,
    switch_overhead_s = max_k sigma[j,k].

That is the *gang approximation* of those schedulers: a round's m_j tasks run together as one
gang of m_j GPUs of one type (so a round takes p[j,k] seconds, as in Hare's model when the
tasks run side by side), and a job never spreads one round over types.  Gavel =
``gavel.max_min_fairness`` (heterogeneity-aware, its round mechanism), Tiresias =
``tiresias`` (2D-LAS, its default two queues at 3200 GPU-s, type-blind), and the online
heterogeneity-aware least-attained-service row = ``tiresias_aware`` (the same 2D-LAS with
``heterogeneity_aware=True``: each gang on its fastest type with room).  That last one is the
issue's online variant for jobs whose rounds are not known in advance: its priority is the
attained GPU-s alone, and it never reads ``total_steps`` (R_j).

**Metrics** per (jobs, GPUs, seed, scheme) cell, from its per-job completion C_j: total
weighted JCT sum_j w_j (C_j - r_j) (s), its ratio to Hare's, and Hare's reduction
1 - Hare / scheme on the same workload; mean and sample std over the seeds.  The CDF pools the
per-job JCTs C_j - r_j of all seeds at ``sweep_jobs`` jobs on the default cluster.

**Cache.**  Each cell is written, atomically, as ``cells/<scheme>__n<jobs>__g<gpus>__seed<s>__
<key>.json`` (per-job id, weight, arrival, completion; wall seconds) and reused by a re-run;
``key`` digests the instance, the scheme and its arguments, and the source of every
``schedlab`` module outside ``schedlab.analysis`` and the command line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from schedlab.analysis import metrics
from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader, frozen
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
from schedlab.errors import InputError, UnknownNameError
from schedlab.instance import Instance

log = logging.getLogger(__name__)

Kind = Literal["offline", "online"]

#: (label, kind, registered formulation or policy name, keyword arguments) in row order.
SCHEMES: tuple[tuple[str, Kind, str, Mapping[str, Any]], ...] = (
    ("Hare", "offline", "hare.greedy", {}),
    ("Sched_Homo", "offline", "hare.sched_homo", {}),
    ("Sched_Allox", "offline", "hare.sched_allox", {}),
    ("Gavel (max-min fairness)", "online", "gavel.max_min_fairness", {}),
    ("Tiresias", "online", "tiresias", {}),
    ("Online LAS (heterogeneity-aware)", "online", "tiresias_aware", {}),
)
#: The reductions' reference.
REFERENCE = "hare.greedy"
#: The seed's range of Hare's weighted-JCT reduction over the other schemes, %.
SEED_REDUCTION_PCT = (47.6, 75.3)
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
DEFAULT_CLUSTER: Mapping[str, int] = {"k80": 64, "p100": 48, "v100": 48}
STEM = "hare"
MARKDOWN_NAME = f"{STEM}.md"
CSV_NAME = f"{STEM}.csv"
LATEX_NAME = f"{STEM}.tex"
MANIFEST_NAME = f"{STEM}{output.MANIFEST_SUFFIX}"
JOBS_PLOT_NAME = "hare_jobs.png"
GPUS_PLOT_NAME = "hare_gpus.png"
CDF_PLOT_NAME = "hare_jct_cdf.png"
CELLS_FOLDER = "cells"
CELL_FORMAT = 1
MINUTE_S = 60.0


def scaled_cluster(base: Mapping[str, int], gpus: int) -> dict[str, int]:
    """The mix ``base`` scaled to about ``gpus`` GPUs: count_k = round(n_k gpus / sum n)."""
    total = sum(base.values())
    return {k: round(n * gpus / total) for k, n in base.items()}


@dataclass(frozen=True)
class TableSettings:
    """How the table is computed: ``jobs`` counts on ``cluster``, ``sweep_jobs`` jobs on the
    cluster scaled to each of ``gpus``, ``seeds``, ``schemes`` in row order, the simulator's
    ``round_s``, the greedy's LP grid ``lp_eps``."""

    jobs: tuple[int, ...] = (100, 200, 300)
    sweep_jobs: int = 200
    gpus: tuple[int, ...] = (80, 120, 160, 200, 240)
    cluster: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_CLUSTER))
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    schemes: tuple[tuple[str, Kind, str, Mapping[str, Any]], ...] = SCHEMES
    round_s: float = 60.0
    lp_eps: float = 0.25

    @property
    def base_gpus(self) -> int:
        """GPUs of ``cluster``."""
        return int(sum(self.cluster.values()))

    def describe(self) -> str:
        """One sentence: the workloads and the seeds."""
        mix = " + ".join(f"{n} {k.upper()}" for k, n in self.cluster.items())
        seeds = ", ".join(str(s) for s in self.seeds)
        return (f"Hare workloads (all jobs at 0 s, Hare-style switch costs) of "
                f"{', '.join(str(n) for n in self.jobs)} jobs on {self.base_gpus} GPUs "
                f"({mix}), and {self.sweep_jobs} jobs on that mix scaled to "
                f"{', '.join(str(g) for g in self.gpus)} GPUs; seed(s) {seeds}")

    def workloads(self) -> list[tuple[int, int]]:
        """Every (jobs, GPUs) workload of the table, in a stable order."""
        pairs = {(n, self.base_gpus) for n in self.jobs}
        pairs |= {(self.sweep_jobs, g) for g in self.gpus}
        return sorted(pairs)


def quick_settings(**overrides: Any) -> TableSettings:
    """The ``--quick`` table (well under a minute): 8 and 16 jobs on 24 GPUs (10 K80 + 7 P100
    + 7 V100), 16 jobs on 20 and 24 GPUs, seed 0, all six schemes."""
    base = TableSettings(jobs=(8, 16), sweep_jobs=16, gpus=(20, 24),
                         cluster={"k80": 10, "p100": 7, "v100": 7}, seeds=(0,))
    return replace(base, **overrides)


def check_settings(settings: TableSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` for settings that cannot make a table."""
    check_seeds(settings.seeds)
    if not settings.jobs or any(n < 1 for n in (*settings.jobs, settings.sweep_jobs)):
        raise InputError("job counts must be >= 1", field="--jobs")
    if not settings.gpus or any(g < 1 for g in settings.gpus):
        raise InputError("GPU counts must be >= 1", field="--gpus")
    if not (math.isfinite(settings.round_s) and settings.round_s > 0):
        raise InputError(f"round_s must be > 0, got {settings.round_s}", field="--round-s")
    if not (math.isfinite(settings.lp_eps) and settings.lp_eps > 0):
        raise InputError(f"lp_eps must be > 0, got {settings.lp_eps}", field="--lp-eps")
    names = [name for _, _, name, _ in settings.schemes]
    if not names or len(set(names)) != len(names):
        raise InputError("the table needs distinct schemes", field="schemes")
    largest = max(settings.cluster.values())
    for g in settings.gpus:
        if max(scaled_cluster(settings.cluster, g).values()) < 8:
            raise InputError(f"{g} GPUs leave no type with 8 GPUs (the largest gang); the "
                             f"mix needs more", field="--gpus")
    if largest < 8:
        raise InputError("the cluster needs a type with 8 GPUs (the largest gang)",
                         field="cluster")


#: The spec's workload generator: :func:`~schedlab.workloads.hare.generate_hare_instance`.
GENERATOR = "hare.generated"
#: The generator's parameters, the simulator's settings and the table's other settings the
#: spec may give (each a :class:`TableSettings` field of the same name).
WORKLOAD_PARAMS: tuple[str, ...] = ("jobs", "sweep_jobs", "gpus", "cluster")
SIMULATOR_KEYS: tuple[str, ...] = ("round_s",)
SETTINGS_KEYS: tuple[str, ...] = ("lp_eps",)
#: The largest gang of a Hare workload: some GPU type must have this many GPUs.
LARGEST_GANG = 8


def settings_from_spec(spec: Experiment) -> TableSettings:
    """The table's settings from an experiment spec (``hare.yaml`` shipped beside the
    runner), checked: one ``hare.generated`` workload (``jobs``, ``sweep_jobs``, ``gpus``,
    ``cluster``), the scheme rows (:func:`scheme_kind`), the seeds, ``simulator.round_s``,
    ``settings.lp_eps`` (the LP grid of ``hare.greedy``) and the report's reference, which
    can only be ``hare.greedy`` (the reductions are Hare's)."""
    read = FieldReader(spec)
    entry, _ = read.sections((GENERATOR,), WORKLOAD_PARAMS, simulator=SIMULATOR_KEYS,
                             settings=SETTINGS_KEYS)
    if spec.report.reference not in (None, REFERENCE):
        raise read.error("report.reference", f"this table's reductions are to {REFERENCE} "
                         f"(Hare), got {spec.report.reference!r}")
    values: dict[str, Any] = {"seeds": tuple(spec.seeds), "schemes": _schemes_of(read)}
    for name, value in entry.params.items():
        where = f"workloads[0].params.{name}"
        if name in ("jobs", "gpus"):
            if not isinstance(value, list) or not value:
                raise read.error(where, "expected a non-empty list of counts")
            values[name] = tuple(read.number(f"{where}[{i}]", v, integer=True, positive=True)
                                 for i, v in enumerate(value))
        elif name == "sweep_jobs":
            values[name] = read.number(where, value, integer=True, positive=True)
        else:
            values[name] = _cluster_of(read, where, value)
    for name, value in (*spec.simulator.items(), *spec.settings.items()):
        where = f"{'simulator' if name in SIMULATOR_KEYS else 'settings'}.{name}"
        values[name] = read.number(where, value, positive=True)
    settings = replace(TableSettings(), **values)
    for i, g in enumerate(settings.gpus):
        if max(scaled_cluster(settings.cluster, g).values()) < LARGEST_GANG:
            raise read.error(f"workloads[0].params.gpus[{i}]", f"{g} GPUs leave no type with "
                             f"{LARGEST_GANG} GPUs (the largest gang); the mix needs more")
    check_settings(settings)
    return settings


def _cluster_of(read: FieldReader, where: str, value: Any) -> dict[str, int]:
    """A checked {GPU type: count} mapping with a type of :data:`LARGEST_GANG` GPUs."""
    if not isinstance(value, Mapping) or not value:
        raise read.error(where, "expected a mapping {GPU type: count}, e.g. {k80: 64}")
    cluster = {str(k): read.number(f"{where}.{k}", n, integer=True, at_least=0)
               for k, n in value.items()}
    if max(cluster.values()) < LARGEST_GANG:
        raise read.error(where, f"the cluster needs a type with {LARGEST_GANG} GPUs (the "
                         "largest gang)")
    return cluster


def scheme_kind(name: str) -> Kind | None:
    """How a scheme runs: the table's own schemes as in :data:`SCHEMES`; another name is
    ``online`` (simulated as gangs) when it is a registered policy, ``offline`` (solved) when
    it is a registered formulation only (the ``hare.*`` solvers), None when neither."""
    for _, kind, known, _ in SCHEMES:
        if name == known:
            return kind
    from schedlab.policies.registry import POLICIES as REGISTRY
    from schedlab.registry import formulations

    if name in REGISTRY:
        return "online"
    return "offline" if name in formulations() else None


def _schemes_of(read: FieldReader) -> tuple[tuple[str, Kind, str, Mapping[str, Any]], ...]:
    """(label, kind, name, keyword arguments) of the spec's policy rows: a row without a
    label gets the table's label of that name, else the name."""
    labels = {name: label for label, _, name, _ in SCHEMES}
    if not read.spec.policies:
        raise read.error("policies", "the table needs at least one scheme")
    chosen: list[tuple[str, Kind, str, Mapping[str, Any]]] = []
    for i, entry in enumerate(read.spec.policies):
        kind = scheme_kind(entry.name)
        if kind is None:
            raise UnknownNameError(f"unknown scheme {entry.name!r}: give a registered policy "
                                   "('schedlab policies') or formulation",
                                   field=f"policies[{i}].name")
        if any(entry.name == name for _, _, name, _ in chosen):
            raise read.error(f"policies[{i}].name", f"{entry.name!r} is given twice")
        if entry.name == REFERENCE and "eps" in entry.options:
            raise read.error(f"policies[{i}].options.eps", "give Hare's LP grid as "
                             "settings.lp_eps (the table's text reports it)")
        chosen.append((entry.label or labels.get(entry.name, entry.name), kind, entry.name,
                       frozen(dict(entry.options))))
    return tuple(chosen)


# ------------------------------------------------------------------------ gang conversion


def gang_instance(instance: Instance, round_s: float) -> Instance:
    """The Hare ``instance`` as simulator jobs (module docstring, the gang approximation):
    one gang of m_j GPUs per job, ``total_steps`` = R_j rounds, ``throughput[k]`` =
    1 / p[j,k] rounds/s on every type with n_k >= m_j the job can use (0 elsewhere),
    ``switch_overhead_s`` = max_k sigma[j,k]; weight and arrival kept.  An
    :class:`InputError` names a job whose gang fits no type."""
    from schedlab.formulations.hare.model import hare_data
    from schedlab.instance import instance_from_dict

    data = hare_data(instance, "tables.hare")
    jobs = []
    for j, job_id in enumerate(data.job_ids):
        m = int(data.tasks[j])
        fits = data.usable[j] & (data.gpus >= m)
        if not fits.any():
            raise InputError(f"job {job_id}: a gang of {m} GPUs fits no usable type",
                             field="cluster")
        jobs.append({
            "id": job_id, "job_type": instance.jobs[j].job_type,
            "arrival": float(data.arrival[j]), "weight": float(data.weight[j]),
            "scale_factor": m, "total_steps": float(data.rounds[j]),
            "throughput": {k: (1.0 / float(data.seconds[j, i]) if fits[i] else 0.0)
                           for i, k in enumerate(data.types)},
            "switch_overhead_s": float(data.switch[j].max()),
        })
    return instance_from_dict({
        "name": f"{instance.name}-gangs",
        "cluster": {"accelerators": {k: {"count": int(n)}
                                     for k, n in zip(data.types, data.gpus, strict=True)}},
        "params": {"round_s": round_s},
        "jobs": jobs,
    })


# -------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One solve or simulation: ``scheme`` (with ``kwargs``) on the (jobs, gpus, seed)
    workload."""

    scheme: str
    kind: Kind
    kwargs: Mapping[str, Any]
    jobs: int
    gpus: int
    seed: int
    instance: Instance
    round_s: float
    key: str

    @property
    def file_name(self) -> str:
        """``<scheme>__n<jobs>__g<gpus>__seed<seed>__<key>.json`` (file-safe)."""
        safe = file_safe(self.scheme)
        return f"{safe}__n{self.jobs}__g{self.gpus}__seed{self.seed}__{self.key}.json"


@dataclass(frozen=True)
class CellResult:
    """A cell's per-job records (instance order; NaN completion when unfinished)."""

    scheme: str
    jobs: int
    gpus: int
    seed: int
    records: pd.DataFrame
    wall_s: float
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {
            "format": CELL_FORMAT, "scheme": self.scheme, "jobs": self.jobs,
            "gpus": self.gpus, "seed": self.seed, "wall_s": self.wall_s,
            "records": columns_json(self.records, ("job", "weight", "arrival", "completion")),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        rec = data["records"]
        frame = pd.DataFrame({
            "job": [str(j) for j in rec["job"]],
            "weight": np.asarray(rec["weight"], dtype=float),
            "arrival": np.asarray(rec["arrival"], dtype=float),
            "completion": np.asarray([math.nan if v is None else v
                                      for v in rec["completion"]], dtype=float),
        })
        return cls(scheme=str(data["scheme"]), jobs=int(data["jobs"]), gpus=int(data["gpus"]),
                   seed=int(data["seed"]), records=frame, wall_s=float(data["wall_s"]),
                   cached=True)


def build_instance(settings: TableSettings, jobs: int, gpus: int, seed: int) -> Instance:
    """The (jobs, gpus, seed) workload of the table."""
    from schedlab.workloads.hare import generate_hare_instance

    cluster = (dict(settings.cluster) if gpus == settings.base_gpus
               else scaled_cluster(settings.cluster, gpus))
    return generate_hare_instance(jobs, seed=seed, cluster=cluster)


def cell_key(instance: Instance, scheme: str, kwargs: Mapping[str, Any],
             round_s: float) -> str:
    """12 hex digits naming a cell: instance, scheme, its arguments, the simulator's round,
    the code, the format."""
    text = json.dumps({"instance": instance.model_dump_json(), "scheme": scheme,
                       "kwargs": repr(sorted(kwargs.items())), "round_s": round_s,
                       "code": code_digest(), "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def scheme_kwargs(settings: TableSettings, name: str,
                  kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a scheme runs with: Hare's greedy gets the table's LP grid ``eps``."""
    out = dict(kwargs)
    if name == "hare.greedy":
        out.setdefault("eps", settings.lp_eps)
    return out


def plan_cells(settings: TableSettings) -> list[Cell]:
    """Every (jobs, GPUs, seed, scheme) cell, Hare's largest first (the slowest); the
    settings are checked first."""
    check_settings(settings)
    cells = []
    for jobs, gpus in settings.workloads():
        for seed in settings.seeds:
            instance = build_instance(settings, jobs, gpus, seed)
            for _, kind, name, kwargs in settings.schemes:
                args = scheme_kwargs(settings, name, kwargs)
                cells.append(Cell(name, kind, args, jobs, gpus, seed, instance,
                                  settings.round_s,
                                  cell_key(instance, name, args, settings.round_s)))
    cells.sort(key=lambda c: (c.scheme != REFERENCE, -c.jobs, -c.gpus))
    return cells


def run_scheme(cell: Cell) -> CellResult:
    """Solve (offline) or simulate (online, as gangs) the cell; per-job completions."""
    t0 = time.perf_counter()
    ids = [job.id for job in cell.instance.jobs]
    if cell.kind == "offline":
        from schedlab.registry import get_formulation

        solution = get_formulation(cell.scheme, **dict(cell.kwargs)).solve(cell.instance)
        done = solution.metrics["completion_s"]
        completion = [float(done[j]) for j in ids]
    else:
        from schedlab.policies.registry import get_policy
        from schedlab.simulator.engine import simulate

        gangs = gang_instance(cell.instance, cell.round_s)
        result = simulate(gangs, policy=get_policy(cell.scheme, **dict(cell.kwargs)),
                          seed=cell.seed)
        finish = {r.job: r.finish for r in result.jobs}
        completion = [math.nan if finish[j] is None else float(finish[j])  # type: ignore
                      for j in ids]
    frame = pd.DataFrame({
        "job": ids,
        "weight": [float(job.weight) for job in cell.instance.jobs],
        "arrival": [float(job.arrival) for job in cell.instance.jobs],
        "completion": np.asarray(completion, dtype=float),
    })
    return CellResult(scheme=cell.scheme, jobs=cell.jobs, gpus=cell.gpus, seed=cell.seed,
                      records=frame, wall_s=time.perf_counter() - t0)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.scheme}, {cell.jobs} jobs, {cell.gpus} GPUs, seed {cell.seed}"


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`run_scheme` (looked up when called)."""
    return run_scheme(cell)


CellKey = tuple[int, int, int, str]


# --------------------------------------------------------------------------------- rows


def weighted_jct(records: pd.DataFrame) -> float:
    """sum_j w_j (C_j - r_j), s (NaN when a job did not finish):
    :func:`~schedlab.analysis.metrics.total_weighted_jct` of the records."""
    return metrics.total_weighted_jct(records, finish="completion")


@dataclass(frozen=True)
class Row:
    """One scheme on one (jobs, GPUs) workload over the seeds."""

    label: str
    scheme: str
    jobs: int
    gpus: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    per_seed: dict[int, dict[str, float]] = field(default_factory=dict)
    unfinished: int = 0


@dataclass(frozen=True)
class HareTable:
    """The computed table: settings, one row per (workload, scheme), the CDF's JCTs."""

    settings: TableSettings
    rows: list[Row]
    cdf_jct_s: dict[str, list[float]]

    def at(self, jobs: int, gpus: int) -> list[Row]:
        """The rows of one workload, in scheme order."""
        return [r for r in self.rows if r.jobs == jobs and r.gpus == gpus]


def hare_table(cfg: TableSettings, results: Mapping[CellKey, CellResult]) -> HareTable:
    """The table (module docstring) from every cell's result by (jobs, gpus, seed,
    scheme)."""
    names = [name for _, _, name, _ in cfg.schemes]
    reference = REFERENCE if REFERENCE in names else names[0]
    rows = []
    for jobs, gpus in cfg.workloads():
        for label, _, name, _ in cfg.schemes:
            per_seed: dict[int, dict[str, float]] = {}
            unfinished = 0
            for seed in cfg.seeds:
                own = results[jobs, gpus, seed, name]
                ref = weighted_jct(results[jobs, gpus, seed, reference].records)
                value = weighted_jct(own.records)
                over = ratio(value, ref)
                per_seed[seed] = {"weighted_jct_s": value, "ratio_to_hare": over,
                                  "hare_reduction": 1.0 - 1.0 / over if over else math.nan,
                                  "wall_s": own.wall_s}
                unfinished += int(own.records["completion"].isna().sum())
            mean: dict[str, float] = {}
            std: dict[str, float] = {}
            for key in next(iter(per_seed.values())):
                mean[key], std[key] = mean_std([v[key] for v in per_seed.values()])
            rows.append(Row(label=label, scheme=name, jobs=jobs, gpus=gpus, mean=mean,
                            std=std, per_seed=per_seed, unfinished=unfinished))
    cdf: dict[str, list[float]] = {}
    for _, _, name, _ in cfg.schemes:
        values: list[float] = []
        for seed in cfg.seeds:
            rec = results[cfg.sweep_jobs, cfg.base_gpus, seed, name].records
            values += (rec["completion"] - rec["arrival"]).dropna().tolist()
        cdf[name] = sorted(values)
    return HareTable(settings=cfg, rows=rows, cdf_jct_s=cdf)


# ------------------------------------------------------------------------------ outputs

CSV_COLUMNS: tuple[str, ...] = (
    "label", "scheme", "jobs", "gpus", "stat", "seed", "unfinished", "weighted_jct_s",
    "ratio_to_hare", "hare_reduction", "wall_s",
)


def to_frame(table: HareTable) -> pd.DataFrame:
    """The CSV: per (workload, scheme) one row per seed, then ``mean`` and ``std`` rows."""
    out: list[dict[str, Any]] = []
    keys = ("weighted_jct_s", "ratio_to_hare", "hare_reduction", "wall_s")
    for row in table.rows:
        head = {"label": row.label, "scheme": row.scheme, "jobs": row.jobs, "gpus": row.gpus}
        for seed, values in row.per_seed.items():
            out.append({**head, "stat": "seed", "seed": seed, **{k: values[k] for k in keys}})
        for stat, values in (("mean", row.mean), ("std", row.std)):
            out.append({**head, "stat": stat, "unfinished": row.unfinished,
                        **{k: values[k] for k in keys}})
    frame = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    for column in ("seed", "unfinished"):
        frame[column] = frame[column].astype("Int64")
    return frame


def _sweep_parts(table: HareTable, pairs: Sequence[tuple[int, int]], head: str,
                 column: Callable[[int, int], str]) -> list[Heading | Block]:
    """A heading and one block: a row per scheme, a column per (jobs, GPUs) workload."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    rows: list[list[str]] = []
    for label, _, name, _ in cfg.schemes:
        cells = [label]
        for n, g in pairs:
            row = next(r for r in table.at(n, g) if r.scheme == name)
            text = pm(row.mean["weighted_jct_s"], row.std["weighted_jct_s"], ".0f",
                      1 / MINUTE_S, seeds)
            if name != REFERENCE:
                cut = pm(row.mean["hare_reduction"], row.std["hare_reduction"], ".1f", 100.0,
                         seeds)
                text += f" ({cut}%)"
            cells.append(text)
        rows.append(cells)
    header = ["scheme", *(column(n, g) for n, g in pairs)]
    return [Heading(head), Block(header=header, rows=rows)]


def reduction_range(table: HareTable) -> tuple[float, float] | None:
    """(lowest, highest) mean reduction of Hare's weighted JCT over the other schemes, over
    every workload, as fractions (None without another scheme)."""
    values = [r.mean["hare_reduction"] for r in table.rows
              if r.scheme != REFERENCE and not math.isnan(r.mean["hare_reduction"])]
    return (min(values), max(values)) if values else None


def document(table: HareTable) -> Document:
    """The table's text (Markdown and LaTeX): what was run, the job-count and GPU-count
    tables, the reductions."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    spread = f"mean ± sample std over {seeds} seeds" if seeds > 1 else "one seed"
    parts: list[str | Heading | Block] = [
        f"Ran: {cfg.describe()}. Hare = `hare.greedy` (LP order, grid eps {cfg.lp_eps:g}); "
        "Sched_Homo and Sched_Allox are offline list schedules of the same instance; Gavel "
        "(max-min fairness), Tiresias (2D-LAS, two queues at 3200 GPU-s, type-blind) and "
        "Online LAS (the same 2D-LAS, fastest type first; it never reads R_j) run in the "
        f"round-based simulator ({cfg.round_s:g} s rounds) with each job as one gang of m_j "
        "GPUs of one type running R_j rounds at 1/p[j,k] rounds/s (the gang approximation: "
        "a round's tasks run together on one type). Cells: total weighted JCT "
        "sum_j w_j (C_j - r_j) in minutes, and in brackets Hare's reduction "
        f"1 - Hare / scheme on the same workload; {spread}.",
    ]
    by_jobs = [(n, cfg.base_gpus) for n in cfg.jobs]
    parts += _sweep_parts(table, by_jobs, f"By job count, {cfg.base_gpus} GPUs",
                          lambda n, _: f"{n} jobs")
    by_gpus = [(cfg.sweep_jobs, g) for g in cfg.gpus]
    parts += _sweep_parts(table, by_gpus, f"By GPU count, {cfg.sweep_jobs} jobs",
                          lambda _, g: f"{g} GPUs")
    span = reduction_range(table)
    low, high = SEED_REDUCTION_PCT
    if span is not None:
        parts.append(f"Hare's mean reduction of the weighted JCT over the other schemes "
                     f"ranges from {100 * span[0]:.1f}% to {100 * span[1]:.1f}% over these "
                     f"workloads (the seed reports {low}-{high}%).")
    unfinished = sum(r.unfinished for r in table.rows)
    if unfinished:
        parts.append(f"{unfinished} job(s) did not finish (their cells show '-').")
    parts.append(f"JCT CDF at {cfg.sweep_jobs} jobs on {cfg.base_gpus} GPUs: "
                 f"{CDF_PLOT_NAME}; sweeps: {JOBS_PLOT_NAME}, {GPUS_PLOT_NAME}.")
    return Document(title="Hare: total weighted JCT on heterogeneous GPUs", parts=parts)


def _plot_sweep(table: HareTable, pairs: Sequence[tuple[int, int]], xs: Sequence[int],
                xlabel: str, title: str, path: Path) -> Path:
    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for i, (label, _, name, _) in enumerate(table.settings.schemes):
        rows = [next(r for r in table.at(n, g) if r.scheme == name) for n, g in pairs]
        ax.errorbar(list(xs), [r.mean["weighted_jct_s"] / MINUTE_S for r in rows],
                    yerr=[r.std["weighted_jct_s"] / MINUTE_S for r in rows], marker="o",
                    capsize=4, label=label, color=f"C{i % 10}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("total weighted JCT (min)")
    ax.set_xticks(list(xs))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: it covered a line
    ax.set_title(title)
    fig.tight_layout()
    try:
        return _save(fig, path, 120)
    finally:
        plt.close(fig)


def plot_cdf(table: HareTable, path: Path) -> Path:
    """The JCT CDF (minutes) at ``sweep_jobs`` jobs on the base cluster, all seeds pooled."""
    from schedlab.analysis.plots import _pyplot, _save

    plt = _pyplot()
    cfg = table.settings
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, _, name, _) in enumerate(cfg.schemes):
        values = np.asarray(table.cdf_jct_s[name]) / MINUTE_S
        if len(values):
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post",
                    label=label, color=f"C{i % 10}")
    ax.set_xlabel("JCT (min)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{cfg.sweep_jobs} jobs on {cfg.base_gpus} GPUs, {len(cfg.seeds)} seed(s)")
    fig.tight_layout()
    try:
        return _save(fig, path, 120)
    finally:
        plt.close(fig)


def figures(table: HareTable, folder: Path) -> list[Path]:
    """The table's figures: ``hare_jobs.png``, ``hare_gpus.png``, ``hare_jct_cdf.png``."""
    cfg = table.settings
    return [
        _plot_sweep(table, [(n, cfg.base_gpus) for n in cfg.jobs], cfg.jobs, "jobs",
                    f"{cfg.base_gpus} GPUs", folder / JOBS_PLOT_NAME),
        _plot_sweep(table, [(cfg.sweep_jobs, g) for g in cfg.gpus], cfg.gpus, "GPUs",
                    f"{cfg.sweep_jobs} jobs", folder / GPUS_PLOT_NAME),
        plot_cdf(table, folder / CDF_PLOT_NAME),
    ]


KIND = TableKind(
    name=STEM, settings=settings_from_spec, plan=plan_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json,
    key=lambda cell: (cell.jobs, cell.gpus, cell.seed, cell.scheme), describe=describe_cell,
    reduce=hare_table, document=document, frame=to_frame, figures=figures,
    seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
