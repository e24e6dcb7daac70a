"""Run many simulations (policy x load x seed) and collect their per-job tables.

A sweep is a list of :class:`RunSpec` (one simulation each: a policy, an arrival rate and a
seed on one :class:`WorkloadSpec`).  :func:`run_sweep` runs the ones whose result file is not
in the output folder yet, in a local process pool, and writes one file per run (Parquet when
``pyarrow`` is installed, else CSV), atomically: a temporary file in the same folder, then a
rename.  An interrupted sweep (Ctrl-C, a crash) therefore never leaves a half-written file, and
running it again skips the finished runs.  A run is claimed before it is computed
(:mod:`schedlab.claims`), so two sweeps into one folder compute each run once between them.

Each result file is the run's per-job table (``SimulationResult.to_dataframe()``) plus
run-level columns repeated on every row: ``policy``, ``jobs_per_hour``, ``seed``, ``run_gpus``
(G), ``run_workload`` (:attr:`RunSpec.fingerprint`), ``run_solver_time_s``, ``run_decisions``,
``run_busy_gpu_s`` (busy GPU-seconds of the cluster) and ``run_wall_s``.  Keep one study per
folder (or filter on ``run_workload``): :func:`summarize_runs` groups by policy, rate and
seed.  :func:`load_results` reads a folder back, :func:`summarize_runs` computes
:func:`~schedlab.analysis.metrics.summarize` per run, and :func:`aggregate` gives mean and
standard deviation over seeds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from schedlab.analysis import metrics
from schedlab.atomic import atomic_path
from schedlab.claims import claim_file
from schedlab.errors import InputError
from schedlab.instance import Instance
from schedlab.workloads.instance_jobs import InstanceFile

log = logging.getLogger(__name__)

#: Positional cluster specs name these types, in this order ("36:36:36" = Gavel's cluster).
POSITIONAL_TYPES: tuple[str, ...] = ("v100", "p100", "k80")
#: Result files a finished run may have left.
RESULT_SUFFIXES: tuple[str, ...] = (".parquet", ".csv")

ResultFormat = Literal["auto", "csv", "parquet"]


# ------------------------------------------------------------------------- cluster spec


def parse_cluster_spec(text: str) -> dict[str, int]:
    """GPUs per accelerator type from ``v100:p100:k80`` counts or ``type=count,...``.

    ``"36:36:36"`` -> {v100: 36, p100: 36, k80: 36} (exactly three counts, in that order);
    ``"v100=36,k80=12"`` names the types (any types of the throughput table).  Counts are
    integers >= 0 and the cluster needs at least one GPU.
    """
    spec = text.strip()
    if not spec:
        raise InputError("empty cluster spec (e.g. 36:36:36 or v100=36,k80=12)",
                         field="--cluster")
    out: dict[str, int] = {}
    if "=" in spec:
        for part in spec.split(","):
            name, sep, count = part.partition("=")
            name = name.strip().lower()
            if not sep or not name:
                raise InputError(f"{text!r}: {part.strip()!r} is not type=count",
                                 field="--cluster")
            if name in out:
                raise InputError(f"{text!r}: {name} is given twice", field="--cluster")
            out[name] = _gpu_count(count, text)
    else:
        parts = spec.split(":")
        if len(parts) != len(POSITIONAL_TYPES):
            raise InputError(
                f"{text!r}: expected {len(POSITIONAL_TYPES)} counts "
                f"{':'.join(POSITIONAL_TYPES)} (e.g. 36:36:36), got {len(parts)}; "
                "name the types for other clusters (e.g. v100=36,k80=12)",
                field="--cluster",
            )
        out = {name: _gpu_count(p, text) for name, p in zip(POSITIONAL_TYPES, parts,
                                                                strict=True)}
    if sum(out.values()) == 0:
        raise InputError(f"{text!r}: the cluster has zero GPUs", field="--cluster")
    return out


def _gpu_count(text: str, spec: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InputError(f"{spec!r}: {text.strip()!r} is not a GPU count", field="--cluster") \
            from None
    if value < 0:
        raise InputError(f"{spec!r}: GPU count {value} is negative", field="--cluster")
    return value


# ---------------------------------------------------------------------------- run specs


@dataclass(frozen=True)
class WorkloadSpec:
    """How to build the job stream of a run (picklable, so it travels to worker processes).

    ``kind="gavel"``: :func:`~schedlab.workloads.generate_gavel_instance` with ``num_jobs``
    jobs, the run's seed and arrival rate.  ``kind="shockwave"``: :func:`~schedlab.workloads.
    shockwave.generate_shockwave_instance` likewise (mean gap 3600 / rate s; no rate: all at
    0 s).  ``kind="trace"``: :func:`~schedlab.workloads.traces.instance_from_trace` of
    ``trace_path`` in ``trace_format``; the first ``num_jobs`` jobs (None: all), job types
    drawn with the run's seed, arrivals rescaled to the run's rate when it is given.
    ``kind="instance"``: the jobs of an instance file
    (:class:`~schedlab.workloads.instance_jobs.InstanceFile`, the same for every seed; ``cluster``
    then repeats the effective pools, the file's or the override's).  ``kind="titan"`` and
    ``kind="hare"``: Titan's and Hare's generated workloads on ``cluster``, as the simulator
    runs them (:mod:`schedlab.analysis.paper_workloads`).  ``throughputs`` (a shipped table's
    name or a throughput file; None: the workload's default) is the throughput source of the
    ``shockwave`` workload and of Shockwave ``.trace`` files; ``throughputs_digest`` is the
    file's digest.  Both enter :attr:`RunSpec.fingerprint` only when set.
    """

    kind: Literal["gavel", "shockwave", "trace", "instance", "titan", "hare"] = "gavel"
    num_jobs: int | None = 100
    cluster: tuple[tuple[str, int], ...] = (("v100", 36), ("p100", 36), ("k80", 36))
    trace_path: str | None = None
    trace_format: str | None = None
    keep_failed: bool = False
    multi_gpu: bool = True
    instance_file: InstanceFile | None = None
    # repr=False: a workload without them keeps the fingerprint it had before they existed
    throughputs: str | None = field(default=None, repr=False)
    throughputs_digest: str | None = field(default=None, repr=False)

    @property
    def cluster_dict(self) -> dict[str, int]:
        """{accelerator type: GPUs}."""
        return dict(self.cluster)

    @property
    def gpus(self) -> int:
        """G = total GPUs."""
        return sum(count for _, count in self.cluster)

    def build(self, seed: int, jobs_per_hour: float | None, round_s: float | None = None
              ) -> Instance:
        """The Instance of one run."""
        if self.kind == "gavel":
            from schedlab.workloads.gavel import generate_gavel_instance

            if self.num_jobs is None:
                raise InputError("the gavel workload needs a number of jobs", field="--jobs")
            instance = generate_gavel_instance(self.num_jobs, self.cluster_dict, seed,
                                               jobs_per_hour=jobs_per_hour,
                                               multi_gpu=self.multi_gpu)
        elif self.kind == "shockwave":
            from schedlab.workloads.shockwave import generate_shockwave_instance

            instance = generate_shockwave_instance(
                self.num_jobs or 0, self.cluster_dict, seed, multi_gpu=self.multi_gpu,
                mean_gap_s=None if jobs_per_hour is None else 3600.0 / jobs_per_hour,
                throughputs=self.throughputs)
        elif self.kind == "trace":
            from schedlab.workloads.traces import instance_from_trace

            if self.trace_path is None or self.trace_format is None:
                raise InputError("a trace workload needs a file and a format",
                                 field="--workload")
            instance = instance_from_trace(
                self.trace_path, self.trace_format, self.cluster_dict, seed=seed,
                num_jobs=self.num_jobs, keep_failed=self.keep_failed,
                jobs_per_hour=jobs_per_hour, round_s=round_s, throughputs=self.throughputs,
            )
        elif self.kind == "instance":
            if self.instance_file is None:
                raise InputError("an instance workload needs a file", field="--workload")
            instance = self.instance_file.build(self.num_jobs, jobs_per_hour)
        elif self.kind in ("titan", "hare"):
            from schedlab.analysis import paper_workloads

            make = (paper_workloads.titan_workload if self.kind == "titan"
                    else paper_workloads.hare_workload)
            instance = make(self.num_jobs, self.cluster_dict, seed, jobs_per_hour, round_s)
        else:
            raise InputError(f"unknown workload kind {self.kind!r}", field="--workload")
        if round_s is not None and instance.params.round_s != round_s:
            instance = instance.model_copy(
                update={"params": instance.params.model_copy(update={"round_s": round_s})})
        return instance


@dataclass(frozen=True)
class RunSpec:
    """One simulation: ``policy`` on ``workload`` at ``jobs_per_hour`` with ``seed``."""

    policy: str
    jobs_per_hour: float | None
    seed: int
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    round_s: float | None = None
    #: round mechanism: ``schedlab`` or ``gavel`` (Gavel's simulator's; docs/simulator.md)
    mechanism: str = "schedlab"
    #: s a job loses in a round it runs after waiting (the simulator's ``resume_overhead_s``)
    resume_overhead_s: float = 0.0

    @property
    def fingerprint(self) -> str:
        """8 hex digits identifying the workload, round length and (when not the defaults)
        the mechanism and resume overhead; not policy, rate, seed."""
        parts: tuple[object, ...] = (self.workload, self.round_s)
        if self.workload.throughputs is not None:
            parts = (*parts, ("throughputs", self.workload.throughputs,
                              self.workload.throughputs_digest))
        if self.mechanism != "schedlab":
            parts = (*parts, self.mechanism)
        if self.resume_overhead_s:
            parts = (*parts, ("resume_overhead_s", self.resume_overhead_s))
        text = repr(parts)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    @property
    def key(self) -> str:
        """File-name stem ``<policy>__jph<rate>__seed<seed>__<fingerprint>``, e.g.
        ``fifo__jph6__seed0__1a2b3c4d`` (``jphnone`` for a run without a rate: a static Gavel
        workload, or a trace at its own timing).  The fingerprint keeps a folder from
        reusing a run of another workload (other jobs, cluster or round length)."""
        load = "none" if self.jobs_per_hour is None else f"{self.jobs_per_hour:g}"
        policy = re.sub(r"[^A-Za-z0-9_.+-]", "-", self.policy)
        return f"{policy}__jph{load}__seed{self.seed}__{self.fingerprint}"


def plan_runs(policies: Sequence[str], loads: Sequence[float | None], seeds: Sequence[int],
              workload: WorkloadSpec, *, round_s: float | None = None,
              mechanism: str = "schedlab", resume_overhead_s: float = 0.0) -> list[RunSpec]:
    """Every (policy, load, seed) combination, in that nesting order."""
    return [RunSpec(policy=p, jobs_per_hour=load, seed=s, workload=workload, round_s=round_s,
                    mechanism=mechanism, resume_overhead_s=resume_overhead_s)
            for p, load, s in product(policies, loads, seeds)]


# ------------------------------------------------------------------------- one run


@dataclass
class RunOutput:
    """What a runner returns: the per-job table and run-level numbers.

    ``busy_gpu_seconds`` is the GPU-seconds the cluster was busy (a GPU shared by a co-located
    pair counts once); None falls back to the sum of the jobs' ``gpu_seconds``.
    """

    jobs: pd.DataFrame
    solver_time_s: float = 0.0
    decisions: int = 0
    busy_gpu_seconds: float | None = None
    failed_solves: int = 0


Runner = Callable[[RunSpec], RunOutput]


def check_policies(names: Iterable[str]) -> None:
    """Raise :class:`~schedlab.errors.UnknownNameError` for a policy name nobody registered."""
    from schedlab.policies.registry import get_policy

    for name in names:
        get_policy(name)


def _policy_for(name: str, mechanism: str) -> Any:
    """The policy ``name``; with Gavel's mechanism, policies that implement their own part of
    it (the Gavel LP policies, Gavel's type-blind FIFO) are made with ``mechanism="gavel"``;
    the others keep their own rules and get Gavel's step accounting from the simulator."""
    import inspect

    from schedlab.policies.registry import get_policy

    policy = get_policy(name)
    if mechanism != "schedlab" and "mechanism" in inspect.signature(type(policy)).parameters:
        try:
            policy = get_policy(name, mechanism=mechanism)
        except InputError as exc:
            log.info("policy %s has no %s mechanism of its own (%s); it keeps its rules",
                     name, mechanism, exc)
    return policy


def simulate_run(spec: RunSpec, *, instance: Instance | None = None,
                 **options: Any) -> RunOutput:
    """Build the run's instance (or take ``instance``, the one the caller already built for
    this spec), simulate it under its policy, return the per-job table.

    The seed drives the workload (job stream) and is handed to the policy
    (``ClusterState.seed``), so every policy of a comparison sees the same jobs.  No
    per-round records are kept (``keep_rounds=False``: the table needs none); ``options``
    go to :func:`~schedlab.simulator.engine.simulate` (``progress``, ``on_job_done``).
    """
    from schedlab.simulator.engine import simulate

    if instance is None:
        instance = spec.workload.build(spec.seed, spec.jobs_per_hour, spec.round_s)
    policy = _policy_for(spec.policy, spec.mechanism)
    result = simulate(instance, policy=policy, round_s=instance.params.round_s, seed=spec.seed,
                      mechanism=spec.mechanism, keep_rounds=False,  # type: ignore[arg-type]
                      resume_overhead_s=spec.resume_overhead_s, **options)
    return RunOutput(
        jobs=result.to_dataframe(),
        solver_time_s=float(result.solver_time_s),
        decisions=int(result.decisions),
        failed_solves=int(result.failed_solves),
        busy_gpu_seconds=float(sum(result.busy_gpu_seconds().values())),
    )


def run_one(spec: RunSpec, runner: Runner = simulate_run) -> tuple[pd.DataFrame, float]:
    """Run one spec; returns (its result table, wall seconds).  The table is what the run's
    result file holds: the per-job rows plus the run-level columns (module docstring)."""
    t0 = time.perf_counter()
    output = runner(spec)
    wall = time.perf_counter() - t0
    frame = output.jobs.drop(columns=[c for c in RUN_KEYS if c in output.jobs.columns])
    frame.insert(0, "policy", spec.policy)
    frame.insert(1, "jobs_per_hour", math.nan if spec.jobs_per_hour is None
                 else float(spec.jobs_per_hour))
    frame.insert(2, "seed", spec.seed)
    frame["run_gpus"] = spec.workload.gpus
    frame["run_workload"] = spec.fingerprint
    frame[metrics.RUN_SOLVER_TIME] = output.solver_time_s
    frame[metrics.RUN_DECISIONS] = output.decisions
    frame[metrics.RUN_FAILED_SOLVES] = output.failed_solves
    frame[metrics.RUN_BUSY_GPU_SECONDS] = (math.nan if output.busy_gpu_seconds is None
                                           else output.busy_gpu_seconds)
    frame["run_wall_s"] = wall
    return frame, wall


def write_frame_atomic(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as CSV or Parquet (by suffix) to a temporary file, then rename."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in RESULT_SUFFIXES:
        raise InputError(f"unknown result format {suffix or '(none)'!r}: use .csv or .parquet",
                         file=str(target))
    if suffix == ".parquet" and not has_pyarrow():
        raise InputError("writing Parquet needs pyarrow (pip install pyarrow); or use .csv",
                         file=str(target))
    with atomic_path(target, suffix=".tmp") as tmp:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a result file written by :func:`write_frame_atomic`."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".parquet":
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except (OSError, ValueError, ImportError) as exc:
        raise InputError(f"cannot read result file: {exc}", file=str(p)) from None


def has_pyarrow() -> bool:
    """Whether ``pyarrow`` (Parquet support) is installed."""
    return importlib.util.find_spec("pyarrow") is not None


def result_format(fmt: ResultFormat = "auto") -> str:
    """``parquet`` or ``csv``: ``auto`` picks Parquet when pyarrow is installed."""
    if fmt == "auto":
        return "parquet" if has_pyarrow() else "csv"
    if fmt == "parquet" and not has_pyarrow():
        raise InputError("Parquet results need pyarrow (pip install pyarrow); use csv")
    if fmt not in ("csv", "parquet"):
        raise InputError(f"unknown result format {fmt!r} (csv, parquet or auto)")
    return fmt


def existing_result(out_dir: str | Path, spec: RunSpec) -> Path | None:
    """The result file of ``spec`` in ``out_dir`` if a finished run left one."""
    for suffix in RESULT_SUFFIXES:
        path = Path(out_dir) / f"{spec.key}{suffix}"
        if path.is_file():
            return path
    return None


# ------------------------------------------------------------------------------- sweeps


@dataclass
class SweepReport:
    """Which runs were done now, which were found done, and where their files are."""

    out_dir: Path
    ran: list[RunSpec] = field(default_factory=list)
    skipped: list[RunSpec] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)  # run key -> result file

    @property
    def total(self) -> int:
        """Runs of the sweep."""
        return len(self.ran) + len(self.skipped)


def run_sweep(
    specs: Sequence[RunSpec],
    out_dir: str | Path,
    *,
    workers: int = 1,
    fmt: ResultFormat = "auto",
    progress: bool = True,
    runner: Runner = simulate_run,
    description: str = "simulating",
    backend: str = "local",
    address: str | None = None,
) -> SweepReport:
    """Run every spec whose result file is not in ``out_dir`` yet; one file per run.

    The runs go through the experiment runner's engine
    (:func:`~schedlab.analysis.experiments.runner.run_cached`), as every paper table's
    cells: ``backend`` ``local`` runs them in this process (``workers`` 1) or in a process
    pool whose workers die with this process, ``ray`` as Ray tasks (``address``: an existing
    cluster; default a local Ray with ``workers`` CPUs); ``runner`` must then be a
    module-level function.  This process writes each result file as its run finishes, so
    both backends write the same files.  Each run is claimed just before it starts
    (:mod:`schedlab.claims`: ``<key>.claim`` in ``out_dir``, removed once its file is
    written), so several sweeps into one folder share the runs; a run claimed by a live other
    runner is waited for and counts as found (``skipped``).  A progress bar goes to stderr
    when ``progress``.  On Ctrl-C the runs not started are cancelled, finished files stay,
    the claims of unfinished runs are removed, and :class:`KeyboardInterrupt` is raised
    again; a rerun resumes.  A run that raises stops the sweep the same way and re-raises
    its error.
    """
    from schedlab.analysis.experiments.runner import run_cached

    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", field="--workers")
    report, pending, suffix = prepare_sweep(specs, out_dir, fmt)
    if not pending:
        return report
    folder = report.out_dir
    bar = progress_bar(progress)
    task = bar.add_task(description, total=len(specs), completed=len(report.skipped))

    def store(spec: RunSpec, done: tuple[pd.DataFrame, float]) -> Path:
        frame, wall = done
        path = folder / f"{spec.key}.{suffix}"
        write_frame_atomic(frame, path)
        log.debug("%s done in %.2f s -> %s", spec.key, wall, path)
        return path

    def on_run(spec: RunSpec, how: str) -> None:
        (report.ran if how == "computed" else report.skipped).append(spec)
        bar.advance(task)
        if how == "elsewhere":
            log.info("%s was computed by another runner", spec.key)

    with bar:
        files = run_cached(
            pending, compute=functools.partial(run_one, runner=runner),
            key=lambda spec: spec.key, describe=lambda spec: spec.key,
            find=lambda spec: existing_result(folder, spec), store=store,
            claim_path=lambda spec: claim_file(folder / spec.key), backend=backend,
            workers=workers, address=address, on_cell=on_run)
    report.files.update({str(k): v for k, v in files.items()})
    return report


def prepare_sweep(specs: Sequence[RunSpec], out_dir: str | Path, fmt: ResultFormat = "auto"
                  ) -> tuple[SweepReport, list[RunSpec], str]:
    """Check the specs, make the output folder, find the finished runs.

    Returns (a report listing the runs found done, the runs still to do, the result file
    suffix).  Raises :class:`InputError` for a run listed twice or a folder that is a file.
    """
    keys = [spec.key for spec in specs]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise InputError(f"the sweep lists run(s) twice: {', '.join(sorted(duplicates))}")
    suffix = result_format(fmt)
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file; the sweep needs a folder", file=str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    report = SweepReport(out_dir=folder)
    pending: list[RunSpec] = []
    for spec in specs:
        found = existing_result(folder, spec)
        if found is not None:
            report.skipped.append(spec)
            report.files[spec.key] = found
        else:
            pending.append(spec)
    if report.skipped:
        log.info("%d of %d runs already have result files in %s; skipping them",
                 len(report.skipped), len(specs), folder)
    return report, pending, suffix


def progress_bar(enabled: bool) -> Any:
    """Progress of the runs: a bar on a terminal, one line per finished run when stdout is
    redirected, nothing when disabled (:func:`schedlab.progress.unit_progress`)."""
    from schedlab.progress import unit_progress

    return unit_progress(enabled)


# ------------------------------------------------------------------------- reading back


RUN_KEYS: tuple[str, ...] = ("policy", "jobs_per_hour", "seed")


def load_results(source: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Concatenate result files: a folder (every ``*.csv`` / ``*.parquet`` in it) or paths."""
    if isinstance(source, str | Path):
        folder = Path(source)
        if not folder.is_dir():
            raise InputError("no such folder", file=str(folder))
        paths = sorted(p for p in folder.iterdir()
                       if p.suffix in RESULT_SUFFIXES and not p.name.startswith("."))
    else:
        paths = [Path(p) for p in source]
    frames = [read_frame(p) for p in paths]
    frames = [f for f in frames if len(f.columns)]
    if not frames:
        raise InputError("no result files", file=str(source) if isinstance(source, str | Path)
                         else None)
    return pd.concat(frames, ignore_index=True)


def summarize_runs(results: pd.DataFrame, *, gpus: int | None = None,
                   unfair_threshold: float = metrics.DEFAULT_UNFAIR_THRESHOLD,
                   contention: metrics.Contention = "static") -> pd.DataFrame:
    """One row per run (policy, jobs_per_hour, seed) with :func:`metrics.summarize`'s keys.

    G is the ``run_gpus`` column unless ``gpus`` is given.
    """
    missing = [k for k in RUN_KEYS if k not in results.columns]
    if missing:
        raise InputError(f"the results lack column(s) {', '.join(missing)}")
    rows: list[dict[str, Any]] = []
    for key, run in results.groupby(list(RUN_KEYS), dropna=False, sort=True):
        policy, load, seed = key
        g = gpus if gpus is not None else int(run["run_gpus"].iloc[0])
        row: dict[str, Any] = {"policy": policy, "jobs_per_hour": load, "seed": seed}
        row.update(metrics.summarize(run, g, unfair_threshold=unfair_threshold,
                                     contention=contention))
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate(summary: pd.DataFrame, by: Sequence[str] = ("policy", "jobs_per_hour")
              ) -> pd.DataFrame:
    """Mean and sample standard deviation over seeds of every metric column.

    Columns: the ``by`` keys, ``seeds`` (runs aggregated), then ``<metric>_mean`` and
    ``<metric>_std`` for each metric (std 0 for a single seed).
    """
    value_columns = [c for c in summary.columns if c not in (*by, "seed")]
    rows: list[dict[str, Any]] = []
    for key, group in summary.groupby(list(by), dropna=False, sort=False):
        keys = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, keys, strict=True))
        row["seeds"] = len(group)
        for column in value_columns:
            mean, std = metrics.mean_std(group[column])
            row[f"{column}_mean"] = mean
            row[f"{column}_std"] = std
        rows.append(row)
    return pd.DataFrame(rows)


def summary_for(summaries: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    """Rows of ``summaries`` whose columns equal ``where`` (NaN matches NaN)."""
    mask = pd.Series(True, index=summaries.index)
    for column, value in where.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            mask &= summaries[column].isna()
        else:
            mask &= summaries[column] == value
    return summaries[mask]


__all__ = [
    "POSITIONAL_TYPES",
    "RunOutput",
    "RunSpec",
    "SweepReport",
    "WorkloadSpec",
    "aggregate",
    "check_policies",
    "existing_result",
    "load_results",
    "parse_cluster_spec",
    "plan_runs",
    "prepare_sweep",
    "progress_bar",
    "read_frame",
    "result_format",
    "run_one",
    "run_sweep",
    "simulate_run",
    "summarize_runs",
    "write_frame_atomic",
]
