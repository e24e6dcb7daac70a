"""Pollux's simulator study (Qiao et al., OSDI'21, §5.3): Pollux against Tiresias and FIFO run
as "TunedJobs" on its eight 160-job workloads, beside the authors' stored results; and the
cells, metrics and settings every goodput table shares (:mod:`schedlab.analysis.tables.sia`
uses them).

The paper's README (petuum/adaptdl ``osdi21-artifact``) reports, from its simulator on the
eight workloads of ``simulator/workloads/``, Pollux about 48 % lower average JCT than
Optimus+Oracle+TunedJobs and about 32 % lower than Tiresias+TunedJobs; its stored results
(``results-jobload/<policy>-1.0/summary.json``) give average JCTs of 0.764 h (Pollux),
1.578 h (Optimus+Oracle) and 1.122 h (Tiresias).  This table measures what our
implementation gives, without tuning towards them.

**What is run.**  For each workload w (Pollux's ``workload-<w>.csv``, shipped,
:func:`~schedlab.workloads.goodput.pollux_workload`; or its first ``jobs`` rows), each policy
and each seed s: one goodput simulation
(:func:`~schedlab.simulator.goodput_run.simulate_goodput`) on the spec's ``simulator.cluster``
(default 16 nodes x 4 T4 GPUs, type ``aws``) under the spec's ``simulator.world`` rules
(default ``pollux``) at ``simulator.interval`` s rounds (default 60; a policy's own
``interval`` option overrides it, as Sia's Gavel runs at 360 s).  ``pollux`` is
:class:`~schedlab.policies.pollux.Pollux` seeded with s; ``sia`` is
:class:`~schedlab.policies.sia.Sia`; any other name is a registered fixed-gang policy run on
the trace's requested GPUs and batch
(:class:`~schedlab.policies.goodput_static.StaticOnGoodput`, the papers' TunedJobs).  A policy
without randomness (all but ``pollux``) runs once per workload, for the first seed, and that
cell stands for every seed.  Tiresias has Pollux's simulator's two queues split at 16
GPU-hours (``simulator/tiresias.py``: ``_queue_threshold = 3600 * 16``, no starvation knob).

**Metrics** (:func:`pooled_metrics`; per seed, pooled over the workloads): average JCT = mean
over every job of every workload of completion - submission (Pollux's ``plot.py`` averages
the workloads' means: equal for workloads of equal size); p99 = ``sorted(JCTs)[int(0.99 n)]``
(Sia's ``print_run_stats.py``); makespan per workload = max completion (Pollux's ``plot.py``:
``max(time + JCT)``; Sia's tables subtract the first submission), averaged over the
workloads; GPU-hours per job = the GPUs held in every round x the round's length, summed,
over the jobs (Sia's: whole rounds, checkpoint-restore included); restarts per job; mean and
max contention (jobs submitted and not finished, per round, as Sia counts it).  Mean and
sample std over the seeds.

**Cache.**  Each cell is written as ``cells/<policy>__<workload>__seed<s>__<key>.json`` (per job:
application, submission, completion, restarts, GPU-seconds; per round: GPUs held and
contention) and reused by a re-run; ``key`` digests the jobs, the cluster, the world, the
round length, the per-type profiles read (their bytes, when a folder is given), the policy and
its options, the seed of a seeded policy and the source of every ``schedlab`` module outside
``schedlab.analysis`` and the command line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment, FieldReader, policies_of
from schedlab.analysis.goodput_metrics import pooled_metrics
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
from schedlab.policies.goodput_registry import goodput_policy
from schedlab.workloads.goodput import (
    POLLUX_WORKLOADS,
    GoodputJobSpec,
    load_goodput_csv,
    pollux_workload,
    sia_philly_workload,
)

STEM = "pollux"
CELLS_FOLDER = "cells"
CELL_FORMAT = 1
HOUR_S = 3600.0
#: The policies with randomness: one cell per seed (the others run once per workload).
SEEDED: frozenset[str] = frozenset({"pollux"})
#: Workload generators a goodput table reads, and their parameters.
GENERATORS: Mapping[str, tuple[str, ...]] = {
    "pollux.workloads": ("workloads", "jobs"),
    "sia.philly": ("workloads", "jobs"),
    "sia.files": ("folder", "workloads", "jobs"),
    "goodput.csv": ("files", "jobs"),
}
#: The file of workload n in a folder of Sia's (``sia-simulator/workloads/philly``).
SIA_FILE = "workload-{n}.csv"
#: The ``simulator`` keys a goodput table reads.
SIMULATOR_KEYS: tuple[str, ...] = ("cluster", "world", "interval")
#: Pollux's simulator study: 16 nodes of 4 T4 GPUs (AWS g4dn.12xlarge), 60 s rounds.
POLLUX_CLUSTER: tuple[tuple[str, int, int], ...] = (("aws", 16, 4),)
#: The GPU type whose profiles ship (Pollux's; Sia's ``-aws`` files are the same bytes).
SHIPPED_TYPE = "aws"

#: Where the authors' stored numbers come from.
STORED_SOURCE = ("authors' stored results, Pollux osdi21-artifact "
                 "results-jobload/*-1.0/summary.json")
#: The authors' stored results over workloads 1-8 (h): (label, average JCT, mean makespan =
#: mean over the workloads of max(time + JCT), as ``results-jobload/plot.py``).
STORED_H: Mapping[str, tuple[str, float, float]] = {
    "pollux": ("Pollux (p = -1)", 0.764, 16.81),
    "optimus": ("Optimus+Oracle+TunedJobs", 1.578, 18.71),
    "tiresias": ("Tiresias+TunedJobs", 1.122, 24.19),
}
#: Pollux's stored average JCT per workload (s), ``results-jobload/pollux-1.0/summary.json``.
STORED_POLLUX_PER_WORKLOAD_S: Mapping[int, float] = {
    1: 2088.8, 2: 3322.9, 3: 2188.5, 4: 2721.0, 5: 2673.7, 6: 2446.1, 7: 3616.1, 8: 2951.9}
#: The README's workload-6 runs (average JCT, s).
README_WORKLOAD6_S: Mapping[str, float] = {"pollux": 2446.13125, "optimus": 5301.875,
                                           "tiresias": 3469.69375}
#: The README's headline: Pollux's average JCT against Tiresias+TunedJobs and
#: Optimus+Oracle+TunedJobs (relative change).
HEADLINE: Mapping[str, float] = {"tiresias": -0.32, "optimus": -0.48}


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class GoodputSettings:
    """A goodput table's settings: the workloads (``generator`` with its ``workloads``
    numbers, read from ``folder`` for ``sia.files``, or its ``files``; each cut to its
    first ``jobs`` rows when set), the ``cluster``
    ((type, nodes, GPUs per node) in cluster order), the simulator's ``world`` and round
    ``interval`` (s), the per-type ``profiles`` folder (None: the shipped aws profiles),
    ``policies`` (label, name, options; an ``interval`` option is the policy's round
    length), ``seeds``, the ratios' ``reference``, the paper's table shown beside
    (``paper_table``) and whether a makespan starts at the first submission."""

    table: str
    generator: str
    workloads: tuple[int, ...] = POLLUX_WORKLOADS
    folder: str | None = None
    files: tuple[str, ...] = ()
    jobs: int | None = None
    cluster: tuple[tuple[str, int, int], ...] = POLLUX_CLUSTER
    world: str = "pollux"
    interval: float = 60.0
    profiles: str | None = None
    policies: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()
    seeds: tuple[int, ...] = (0,)
    reference: str = "tiresias"
    paper_table: str = "stored"
    makespan_from_first_submission: bool = False

    @property
    def workload_labels(self) -> tuple[str, ...]:
        """One label per workload: ``w<n>`` or the file's stem."""
        if self.generator == "goodput.csv":
            return tuple(Path(f).stem for f in self.files)
        return tuple(f"w{n}" for n in self.workloads)

    @property
    def cluster_map(self) -> dict[str, tuple[int, int]]:
        """The cluster as :func:`~schedlab.simulator.goodput_run.simulate_goodput` takes it."""
        return {t: (n, g) for t, n, g in self.cluster}

    @property
    def names(self) -> list[str]:
        """The policies' registered names, in row order."""
        return [name for _, name, _ in self.policies]

    def policy_interval(self, options: Mapping[str, Any]) -> float:
        """The round length of a policy with ``options``."""
        return float(options.get("interval", self.interval))

    def cell_seed(self, name: str, seed: int) -> int:
        """The seed of the cell that stands for (``name``, ``seed``)."""
        return seed if name in SEEDED else self.seeds[0]

    def describe_cluster(self) -> str:
        """``16 x 4 aws`` (per type, cluster order) and the total."""
        parts = [f"{n} x {g} {t}" for t, n, g in self.cluster]
        return f"{' + '.join(parts)} ({sum(n * g for _, n, g in self.cluster)} GPUs)"

    def describe_workloads(self) -> str:
        """The workloads in one phrase."""
        cut = "all jobs" if self.jobs is None else f"first {self.jobs} jobs"
        if self.generator == "goodput.csv":
            return f"the goodput traces {', '.join(self.files)} ({cut} each)"
        numbers = ", ".join(str(n) for n in self.workloads)
        plural = "s" if len(self.workloads) > 1 else ""
        if self.generator == "sia.philly":
            return (f"Sia's Philly workload{plural} {numbers} by its recipe (Pollux's "
                    f"workload-n.csv with every NCF job a CIFAR-10 one; {cut} each)")
        if self.generator == "sia.files":
            return (f"Sia's Philly workload{plural} {numbers} from its own files "
                    f"({self.folder}/workload-n.csv; {cut} each)")
        return f"Pollux's workload{plural} {numbers} (workload-n.csv; {cut} each)"


def read_goodput_settings(spec: Experiment, *, table: str, base: GoodputSettings,
                          settings_keys: Sequence[str] = ("profiles",)) -> GoodputSettings:
    """A goodput table's settings from an experiment spec (the shipped ``pollux.yaml`` and
    ``sia.yaml`` show every field): one workload entry of :data:`GENERATORS`, ``simulator``
    keys :data:`SIMULATOR_KEYS`, ``settings`` keys ``settings_keys``, at least one seed;
    every value checked, defaults from ``base``."""
    read = FieldReader(spec)
    entry, generator = read.sections(GENERATORS, GENERATORS, SIMULATOR_KEYS, settings_keys)
    values: dict[str, Any] = {"table": table, "generator": generator,
                              "policies": policies_of(spec), "seeds": tuple(spec.seeds)}
    params = entry.params
    if "workloads" in params:
        values["workloads"] = _workload_numbers(read, params["workloads"])
    elif generator != "goodput.csv":
        values["workloads"] = POLLUX_WORKLOADS
    if generator == "sia.files":
        folder = params.get("folder")
        if not isinstance(folder, str) or not folder:
            raise read.error("workloads[0].params.folder",
                             "expected the folder of Sia's Philly workloads (a checkout's "
                             "sia-simulator/workloads/philly; --philly DIR)")
        values["folder"] = folder
        values["files"] = tuple(str(Path(folder) / SIA_FILE.format(n=n))
                                for n in values["workloads"])
    if generator == "goodput.csv":
        files = params.get("files")
        if not isinstance(files, list) or not files or not all(
                isinstance(f, str) and f for f in files):
            raise read.error("workloads[0].params.files",
                             "expected a non-empty list of goodput CSV files")
        values["files"] = tuple(files)
    if params.get("jobs") is not None:
        values["jobs"] = read.number("workloads[0].params.jobs", params["jobs"], integer=True,
                                     positive=True)
    simulator = spec.simulator
    if "cluster" in simulator:
        values["cluster"] = _cluster(read, simulator["cluster"])
    if "world" in simulator:
        from schedlab.simulator.goodput_job import WORLDS

        if simulator["world"] not in WORLDS:
            raise read.error("simulator.world", f"expected one of {', '.join(WORLDS)}, got "
                             f"{json.dumps(simulator['world'])}")
        values["world"] = str(simulator["world"])
    if "interval" in simulator:
        values["interval"] = read.number("simulator.interval", simulator["interval"],
                                         positive=True)
    extra = spec.settings
    if extra.get("profiles") is not None:
        if not isinstance(extra["profiles"], str):
            raise read.error("settings.profiles", "expected a folder")
        values["profiles"] = extra["profiles"]
    if "paper_table" in extra:
        text = str(extra["paper_table"])
        if text not in PAPER_TABLES:
            raise read.error("settings.paper_table", f"expected one of "
                             f"{', '.join(PAPER_TABLES)}, got {json.dumps(extra['paper_table'])}")
        values["paper_table"] = text
    if spec.report.reference is not None:
        values["reference"] = spec.report.reference
    settings = replace(base, **values)
    check_goodput_settings(settings)
    return settings


#: The papers' tables a report can show beside the measured rows (``settings.paper_table``).
PAPER_TABLES: tuple[str, ...] = ("stored", "3", "4")


def _workload_numbers(read: FieldReader, value: Any) -> tuple[int, ...]:
    where = "workloads[0].params.workloads"
    if not isinstance(value, list) or not value:
        raise read.error(where, "expected a non-empty list of workload numbers (1 to 8)")
    numbers = tuple(read.number(f"{where}[{i}]", v, integer=True) for i, v in enumerate(value))
    for i, number in enumerate(numbers):
        if number not in POLLUX_WORKLOADS:
            raise read.error(f"{where}[{i}]", f"Pollux ships workloads 1 to 8, not {number}")
    if len(set(numbers)) != len(numbers):
        raise read.error(where, "workloads must be distinct")
    return numbers


def _cluster(read: FieldReader, value: Any) -> tuple[tuple[str, int, int], ...]:
    where = "simulator.cluster"
    if not isinstance(value, Mapping) or not value:
        raise read.error(where, "expected {TYPE: [nodes, GPUs per node], ...}")
    out = []
    for gpu_type, shape in value.items():
        if not isinstance(shape, list | tuple) or len(shape) != 2:
            raise read.error(f"{where}.{gpu_type}", "expected [nodes, GPUs per node]")
        nodes = read.number(f"{where}.{gpu_type}[0]", shape[0], integer=True, positive=True)
        per_node = read.number(f"{where}.{gpu_type}[1]", shape[1], integer=True, positive=True)
        out.append((str(gpu_type), nodes, per_node))
    return tuple(out)


def make_policy(name: str, options: Mapping[str, Any], seed: int) -> Any:
    """The goodput policy ``name`` (:func:`~schedlab.policies.goodput_registry.
    goodput_policy`; Pollux seeded with ``seed``); ``options`` are its keyword arguments
    (``interval`` left out)."""
    kwargs = {k: _thawed(v) for k, v in options.items() if k != "interval"}
    if name == "pollux":
        kwargs = {"seed": seed, **kwargs}
    return goodput_policy(name, **kwargs)


def _thawed(value: Any) -> Any:
    """A frozen spec value as keyword arguments take it (tuples stay tuples)."""
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def check_goodput_settings(settings: GoodputSettings) -> None:
    """Raise :class:`~schedlab.errors.InputError` naming the field for settings that cannot
    make a table: no or repeated policies, an ``interval`` option that is not a positive
    number, options a policy does not take, ``pollux`` on several GPU types, a GPU type other
    than ``aws`` without ``settings.profiles``, a profiles folder or trace file missing."""
    check_seeds(settings.seeds)
    names = settings.names
    if not names or len(set(names)) != len(names):
        raise InputError("the table needs distinct policies", field="policies")
    for i, (_, name, options) in enumerate(settings.policies):
        interval = options.get("interval", settings.interval)
        if isinstance(interval, bool) or not isinstance(interval, int | float) \
                or not (math.isfinite(interval) and interval > 0):
            raise InputError(f"must be a positive number of seconds, got {interval!r}",
                             field=f"policies[{i}].options.interval")
        if name == "pollux" and len(settings.cluster) != 1:
            raise InputError(
                "pollux runs on one GPU type (its simulator's cluster); Sia's heterogeneous "
                "Pollux baseline (Pollux-unaware: 8-GPU nodes split into 4-GPU virtual nodes, "
                "one merged model per job) is not implemented", field=f"policies[{i}]")
        try:
            make_policy(name, options, 0)
        except TypeError as exc:
            raise InputError(f"{name} does not take these options ({exc})",
                             field=f"policies[{i}].options") from None
        except InputError as exc:
            raise InputError(exc.reason, field=f"policies[{i}]") from None
    other = [t for t, _, _ in settings.cluster if t != SHIPPED_TYPE]
    if other and settings.profiles is None:
        raise InputError(
            f"GPU type(s) {', '.join(other)} need Sia's per-type profiles, which schedlab "
            "cannot ship (siasosp23/artifacts has no licence): set settings.profiles "
            "(--profiles DIR) to a checkout's sia-simulator/traces folder",
            field="settings.profiles")
    if settings.profiles is not None and not Path(settings.profiles).is_dir():
        raise InputError("is not a folder (a checkout's sia-simulator/traces)",
                         file=settings.profiles, field="settings.profiles")
    where = ("workloads[0].params.folder" if settings.generator == "sia.files"
             else "workloads[0].params.files")
    for path in settings.files:
        if not Path(path).is_file():
            raise InputError("no such goodput trace", file=path, field=where)


# --------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One goodput simulation: ``policy`` (with ``options``) on ``workload``'s ``specs``."""

    workload: str
    policy: str
    options: Mapping[str, Any]
    seed: int
    specs: tuple[GoodputJobSpec, ...]
    cluster: tuple[tuple[str, int, int], ...]
    world: str
    interval: float
    profiles: str | None
    key: str

    @property
    def file_name(self) -> str:
        """``<policy>__<workload>__seed<seed>__<key>.json`` (file-safe)."""
        return (f"{file_safe(self.policy)}__{file_safe(self.workload)}__seed{self.seed}__"
                f"{self.key}.json")


#: The per-job columns of a cell.
JOB_COLUMNS: tuple[str, ...] = ("job", "application", "arrival", "finish", "restarts",
                                "gpu_seconds")


@dataclass(frozen=True)
class CellResult:
    """A cell's per-job records (workload order; NaN finish when unfinished), the GPUs held
    and the contention of every round, and its counters."""

    workload: str
    policy: str
    seed: int
    interval: float
    jobs: pd.DataFrame
    held_gpus: tuple[int, ...]
    contention: tuple[int, ...]
    wall_s: float
    decide_time_s: float
    solver_time_s: float
    rounds: int
    stopped: str | None = None
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """The cell file's content."""
        return {
            "format": CELL_FORMAT, "workload": self.workload, "policy": self.policy,
            "seed": self.seed, "interval": self.interval, "wall_s": self.wall_s,
            "decide_time_s": self.decide_time_s, "solver_time_s": self.solver_time_s,
            "rounds": self.rounds, "stopped": self.stopped,
            "jobs": columns_json(self.jobs, JOB_COLUMNS),
            "held_gpus": list(self.held_gpus), "contention": list(self.contention),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        """Read a cell file's content (:class:`KeyError` / :class:`ValueError` if bad)."""
        if data.get("format") != CELL_FORMAT:
            raise ValueError(f"cell format {data.get('format')!r}, expected {CELL_FORMAT}")
        jobs = data["jobs"]
        frame = pd.DataFrame({
            "job": [str(j) for j in jobs["job"]],
            "application": [str(a) for a in jobs["application"]],
            "arrival": np.asarray(jobs["arrival"], dtype=float),
            "finish": np.asarray([math.nan if v is None else v for v in jobs["finish"]],
                                 dtype=float),
            "restarts": np.asarray(jobs["restarts"], dtype=int),
            "gpu_seconds": np.asarray(jobs["gpu_seconds"], dtype=float),
        })
        return cls(workload=str(data["workload"]), policy=str(data["policy"]),
                   seed=int(data["seed"]), interval=float(data["interval"]), jobs=frame,
                   held_gpus=tuple(int(v) for v in data["held_gpus"]),
                   contention=tuple(int(v) for v in data["contention"]),
                   wall_s=float(data["wall_s"]), decide_time_s=float(data["decide_time_s"]),
                   solver_time_s=float(data["solver_time_s"]), rounds=int(data["rounds"]),
                   stopped=data.get("stopped"), cached=True)


def workload_specs(settings: GoodputSettings) -> list[tuple[str, tuple[GoodputJobSpec, ...]]]:
    """(label, jobs) of every workload of the settings, in order."""
    out = []
    for label, index in zip(settings.workload_labels,
                            range(len(settings.workload_labels)), strict=True):
        if settings.generator in ("goodput.csv", "sia.files"):
            specs = load_goodput_csv(settings.files[index])
            specs = specs if settings.jobs is None else specs[:settings.jobs]
        elif settings.generator == "sia.philly":
            specs = sia_philly_workload(settings.workloads[index], jobs=settings.jobs)
        else:
            specs = pollux_workload(settings.workloads[index], jobs=settings.jobs)
        out.append((label, tuple(specs)))
    return out


def profiles_digest(settings: GoodputSettings, applications: Sequence[str]) -> str:
    """sha256 of the profile files of ``applications`` in the settings' profiles folder
    (``<root>/<app>/*``); ``shipped`` without a folder (the shipped profiles are code)."""
    if settings.profiles is None:
        return "shipped"
    root = Path(settings.profiles)
    digest = hashlib.sha256()
    for app in sorted(set(applications)):
        folder = root / app
        if not folder.is_dir():
            raise InputError(f"has no folder {app}/ (a checkout's sia-simulator/traces has "
                             "one per application)", file=str(root), field="settings.profiles")
        for path in sorted(folder.iterdir()):
            if path.is_file():
                digest.update(f"{app}/{path.name}".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def check_profiles(settings: GoodputSettings, applications: Sequence[str]) -> None:
    """Load every (application, GPU type) profile the cells read, so that a missing or bad
    file is one :class:`~schedlab.errors.InputError` before anything runs."""
    from schedlab.world.applications import load_application

    root = None if settings.profiles is None else Path(settings.profiles)
    for app in sorted(set(applications)):
        for gpu_type, _, _ in settings.cluster:
            try:
                load_application(app, gpu_type, flavour=settings.world,  # type: ignore[arg-type]
                                 root=root)
            except OSError as exc:
                raise InputError(f"cannot read the {gpu_type} profiles of {app} ({exc})",
                                 file=settings.profiles, field="settings.profiles") from None


def cell_key(specs: Sequence[GoodputJobSpec], settings: GoodputSettings, profiles: str,
             policy: str, options: Mapping[str, Any], seed: int, interval: float) -> str:
    """12 hex digits naming a cell (module docstring, "Cache")."""
    text = json.dumps({
        "jobs": [dataclasses.asdict(s) for s in specs], "cluster": settings.cluster,
        "world": settings.world, "interval": interval, "profiles": profiles,
        "policy": policy, "options": repr(sorted(options.items())),
        "seed": seed if policy in SEEDED else None, "code": code_digest(),
        "format": CELL_FORMAT})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def plan_goodput_cells(settings: GoodputSettings) -> list[Cell]:
    """Every (workload, policy, seed) cell, a policy without randomness for the first seed
    only; the slowest (pollux, sia) first.  The settings and the profiles are checked."""
    check_goodput_settings(settings)
    workloads = workload_specs(settings)
    applications = sorted({s.application for _, specs in workloads for s in specs})
    check_profiles(settings, applications)
    profiles = profiles_digest(settings, applications)
    cells = []
    for _, name, options in settings.policies:
        seeds = settings.seeds if name in SEEDED else settings.seeds[:1]
        interval = settings.policy_interval(options)
        for label, specs in workloads:
            for seed in seeds:
                cells.append(Cell(
                    workload=label, policy=name, options=options, seed=seed, specs=specs,
                    cluster=settings.cluster, world=settings.world, interval=interval,
                    profiles=settings.profiles,
                    key=cell_key(specs, settings, profiles, name, options, seed, interval)))
    cells.sort(key=lambda c: c.policy not in ("pollux", "sia"))
    return cells


def simulate_cell(cell: Cell) -> CellResult:
    """Run the cell's policy on its workload (:func:`make_policy`,
    :func:`~schedlab.simulator.goodput_run.simulate_goodput`)."""
    from schedlab.simulator.goodput_run import simulate_goodput

    policy = make_policy(cell.policy, cell.options, cell.seed)
    started = time.perf_counter()
    run = simulate_goodput(list(cell.specs), {t: (n, g) for t, n, g in cell.cluster}, policy,
                           world=cell.world, interval=cell.interval,
                           profiles=None if cell.profiles is None else Path(cell.profiles))
    wall = time.perf_counter() - started
    records = run.result.jobs
    frame = pd.DataFrame({
        "job": [r.job for r in records],
        "application": [spec.application for spec in cell.specs],
        "arrival": [float(r.arrival) for r in records],
        "finish": [math.nan if r.finish is None else float(r.finish) for r in records],
        "restarts": [int(r.migrations) for r in records],
        "gpu_seconds": [float(r.gpu_seconds) for r in records],
    })
    return CellResult(workload=cell.workload, policy=cell.policy, seed=cell.seed,
                      interval=cell.interval, jobs=frame, held_gpus=tuple(run.held_gpus),
                      contention=tuple(run.contention), wall_s=wall,
                      decide_time_s=float(run.result.decide_time_s),
                      solver_time_s=float(run.result.solver_time_s),
                      rounds=int(run.result.num_rounds or 0), stopped=run.result.stopped)


def compute_cell(cell: Cell) -> CellResult:
    """The runner's ``compute``: :func:`simulate_cell` (looked up when called)."""
    return simulate_cell(cell)


def describe_cell(cell: Cell) -> str:
    """The cell in a progress line."""
    return f"{cell.policy}, {cell.workload}, seed {cell.seed}"


def cell_result_key(cell: Cell) -> tuple[str, str, int]:
    """(workload, policy, seed): the key of a cell's result."""
    return (cell.workload, cell.policy, cell.seed)


# ------------------------------------------------------------------------------- metrics

#: The metrics of :func:`pooled_metrics`, in CSV order.
METRICS: tuple[str, ...] = (
    "avg_jct_s", "avg_jct_workload_std_s", "p99_jct_s", "makespan_s", "gpu_hours_per_job",
    "restarts_per_job", "contention_mean", "contention_max",
)


@dataclass(frozen=True)
class Row:
    """One policy over the workloads: per seed the pooled metrics (and the average JCT's
    ratio to the reference), their mean and std over the seeds, and per (workload, seed) the
    workload's own metrics; ``jobs`` in one seed's pool, ``unfinished`` the most of any
    seed."""

    label: str
    policy: str
    interval: float
    jobs: int
    unfinished: int
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)
    per_seed: dict[int, dict[str, float]] = field(default_factory=dict)
    per_workload: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    wall_s: float = math.nan


@dataclass(frozen=True)
class GoodputTable:
    """The computed table: settings and one row per policy."""

    settings: GoodputSettings
    rows: list[Row]

    def row(self, policy: str) -> Row | None:
        """The row of ``policy`` (None when it did not run)."""
        return next((r for r in self.rows if r.policy == policy), None)

    @property
    def reference(self) -> str:
        """The ratios' reference: the settings' when it ran, else the first policy."""
        names = self.settings.names
        return self.settings.reference if self.settings.reference in names else names[0]


def goodput_table(settings: GoodputSettings,
                  results: Mapping[tuple[str, str, int], CellResult]) -> GoodputTable:
    """The table from every cell's result by (workload, policy, seed)."""
    labels = settings.workload_labels
    names = settings.names
    reference = settings.reference if settings.reference in names else names[0]
    first = settings.makespan_from_first_submission

    def cells_of(name: str, seed: int) -> list[CellResult]:
        return [results[label, name, settings.cell_seed(name, seed)] for label in labels]

    rows = []
    for label, name, options in settings.policies:
        per_seed: dict[int, dict[str, float]] = {}
        per_workload: dict[tuple[str, int], dict[str, float]] = {}
        walls: list[float] = []
        for seed in settings.seeds:
            own = cells_of(name, seed)
            values = pooled_metrics(own, makespan_from_first_submission=first)
            ref = pooled_metrics(cells_of(reference, seed), makespan_from_first_submission=first)
            values["avg_jct_ratio"] = ratio(values["avg_jct_s"], ref["avg_jct_s"])
            values["wall_s"] = float(sum(c.wall_s for c in own))
            per_seed[seed] = values
            for cell in own:
                per_workload[cell.workload, seed] = {
                    **pooled_metrics([cell], makespan_from_first_submission=first),
                    "wall_s": cell.wall_s}
            walls.append(values["wall_s"])
        mean: dict[str, float] = {}
        std: dict[str, float] = {}
        for key in next(iter(per_seed.values())):
            mean[key], std[key] = mean_std([v[key] for v in per_seed.values()])
        rows.append(Row(label=label, policy=name, interval=settings.policy_interval(options),
                        jobs=int(per_seed[settings.seeds[0]]["jobs"]),
                        unfinished=int(max(v["unfinished"] for v in per_seed.values())),
                        mean=mean, std=std,
                        per_seed=per_seed, per_workload=per_workload,
                        wall_s=float(np.mean(walls))))
    return GoodputTable(settings=settings, rows=rows)


# ------------------------------------------------------------------------------- outputs

#: The values of a per-seed CSV row.
COUNTED: tuple[str, ...] = ("jobs", "unfinished", *METRICS, "avg_jct_ratio", "wall_s")
CSV_COLUMNS: tuple[str, ...] = (
    "label", "policy", "interval_s", "workload", "stat", "seed", "jobs", "unfinished",
    *METRICS, "avg_jct_ratio", "wall_s",
)


def to_frame(table: GoodputTable) -> pd.DataFrame:
    """The CSV: per policy one row per (workload, seed), then per seed the workloads
    pooled (``workload`` = ``all``), then ``mean`` and ``std`` rows over the seeds."""
    out: list[dict[str, Any]] = []
    for row in table.rows:
        head = {"label": row.label, "policy": row.policy, "interval_s": row.interval}
        for (workload, seed), values in row.per_workload.items():
            out.append({**head, "workload": workload, "stat": "seed", "seed": seed,
                        **{k: values[k] for k in COUNTED if k != "avg_jct_ratio"}})
        for seed, values in row.per_seed.items():
            out.append({**head, "workload": "all", "stat": "seed", "seed": seed,
                        **{k: values[k] for k in COUNTED}})
        for stat, values in (("mean", row.mean), ("std", row.std)):
            out.append({**head, "workload": "all", "stat": stat, "jobs": row.jobs,
                        "unfinished": row.unfinished,
                        **{k: values[k] for k in (*METRICS, "avg_jct_ratio", "wall_s")}})
    frame = pd.DataFrame(out, columns=list(CSV_COLUMNS))
    for column in ("jobs", "unfinished"):
        frame[column] = frame[column].round()
    for column in ("seed", "jobs", "unfinished"):
        frame[column] = frame[column].astype("Int64")
    return frame


def spread(settings: GoodputSettings) -> str:
    """How a cell's ± reads."""
    seeds = len(settings.seeds)
    return f"mean ± sample std over {seeds} seeds" if seeds > 1 else "one seed"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def hours(row: Row, key: str, seeds: int) -> str:
    """A row's metric ``key`` (s) in hours, ± over the seeds."""
    return pm(row.mean[key], row.std[key], ".2f", 1 / HOUR_S, seeds)


def change(value: float) -> str:
    """A ratio as a relative change, ``-32 %``."""
    return "-" if math.isnan(value) else f"{(value - 1) * 100:+.0f} %"


def ran_text(settings: GoodputSettings, rules: str) -> str:
    """The "Ran:" paragraph shared by the goodput tables."""
    rounds = ", ".join(f"{label} every {settings.policy_interval(options):g} s"
                       for label, _, options in settings.policies)
    seeded = "Pollux is seeded with each seed; " if "pollux" in settings.names else ""
    return (f"Ran: {settings.describe_workloads()} on {settings.describe_cluster()}, "
            f"{rules}; rounds: {rounds}. {seeded}TunedJobs = each job on the GPUs and batch "
            "size its trace requests, as a fixed gang; a policy without randomness runs once "
            f"per workload. {_sentence(spread(settings))}")


def measured_block(table: GoodputTable, paper: Mapping[str, Mapping[str, str]],
                   columns: Sequence[tuple[str, str, Callable[[Row], str]]]) -> Block:
    """One row per policy: ``columns`` (header, paper key or "", cell text), each measured
    column with a paper column beside it when it has a key."""
    header = ["policy"]
    for title, key, _ in columns:
        header.append(title)
        if key:
            header.append(f"paper {title.split(' (')[0]}")
    rows = []
    for row in table.rows:
        cells = [row.label]
        reference = paper.get(row.policy, {})
        for _, key, text in columns:
            cells.append(text(row))
            if key:
                cells.append(reference.get(key, "-"))
        rows.append(cells)
    return Block(header=header, rows=rows)


def unfinished_note(table: GoodputTable) -> list[str]:
    """A sentence when some job did not finish."""
    unfinished = {row.label: row.unfinished for row in table.rows if row.unfinished}
    if not unfinished:
        return []
    return ["Jobs that did not finish (left out of the JCTs; the makespan is '-'): "
            + ", ".join(f"{label} {count}" for label, count in unfinished.items()) + "."]


def document(table: GoodputTable) -> Document:
    """Pollux's §5.3 table: what was run, the measured rows, the authors' stored results,
    the headline ratio, and the average JCT per workload."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    reference = table.reference
    ref_label = next(label for label, name, _ in cfg.policies if name == reference)
    parts: list[str | Heading | Block] = [
        ran_text(cfg, f"world {cfg.world!r} (Pollux's simulator rules: a restart at any change "
                 "of a job's nodes, 30 s checkpoint-restore)"),
        "avg JCT = mean over every job of completion - submission; p99 = sorted(JCTs)"
        "[int(0.99 n)] over the jobs of all workloads; makespan = max completion per "
        "workload (Pollux's plot.py: max(time + JCT)), averaged; GPU-h/job = GPUs held x "
        "round length summed over the rounds, over the jobs; restarts/job; contention = jobs "
        "submitted and not finished per round (mean, max).",
        Heading("Mean over the workloads"),
    ]
    columns: list[tuple[str, str, Callable[[Row], str]]] = [
        ("avg JCT (h)", "", lambda r: hours(r, "avg_jct_s", seeds)),
        ("p99 JCT (h)", "", lambda r: hours(r, "p99_jct_s", seeds)),
        ("makespan (h)", "", lambda r: hours(r, "makespan_s", seeds)),
        ("GPU-h/job", "", lambda r: pm(r.mean["gpu_hours_per_job"],
                                       r.std["gpu_hours_per_job"], ".2f", 1.0, seeds)),
        ("restarts/job", "", lambda r: pm(r.mean["restarts_per_job"],
                                          r.std["restarts_per_job"], ".2f", 1.0, seeds)),
        ("contention mean (max)", "", lambda r: f"{r.mean['contention_mean']:.1f} "
         f"({r.mean['contention_max']:.0f})"),
        (f"avg JCT vs {ref_label}", "", lambda r: change(r.mean["avg_jct_ratio"])),
        ("wall (s)", "", lambda r: f"{r.wall_s:.1f}"),
    ]
    parts.append(measured_block(table, {}, columns))
    parts += unfinished_note(table)
    parts.append(Heading(f"Paper: {STORED_SOURCE}"))
    parts.append(Block(header=["policy", "avg JCT (h)", "mean makespan (h)"],
                       rows=[[label, f"{jct:.3f}", f"{makespan:.2f}"]
                             for label, jct, makespan in STORED_H.values()]))
    tiresias = STORED_H["tiresias"][1]
    stored_change = STORED_H["pollux"][1] / tiresias - 1
    if cfg.jobs is not None or tuple(cfg.workloads) != POLLUX_WORKLOADS \
            or cfg.generator != "pollux.workloads":
        parts.append(f"The stored results are over all 160 jobs of workloads 1-8 on 16 x 4 "
                     f"aws GPUs; this run, on {cfg.describe_workloads()}, is not the same "
                     "experiment, so compare directions only.")
    pollux, baseline = table.row("pollux"), table.row("tiresias")
    measured = ("not measured (the run needs both pollux and tiresias)"
                if pollux is None or baseline is None else
                change(ratio(pollux.mean["avg_jct_s"], baseline.mean["avg_jct_s"])))
    parts.append(
        f"Headline, Pollux vs Tiresias+TunedJobs average JCT: measured {measured}; paper "
        f"{HEADLINE['tiresias'] * 100:.0f} % (README; stored results {STORED_H['pollux'][1]} vs "
        f"{tiresias} h = {stored_change * 100:.1f} %). Pollux vs Optimus+Oracle+TunedJobs: "
        f"paper {HEADLINE['optimus'] * 100:.0f} % (Optimus is not run here).")
    parts.append(Heading("Average JCT per workload (s)"))
    stored_column = (cfg.generator == "pollux.workloads" and cfg.jobs is None)
    header = ["workload", *(label for label, _, _ in cfg.policies)]
    if stored_column:
        header.append("stored Pollux")
    rows = []
    for label in cfg.workload_labels:
        cells = [label]
        for row in table.rows:
            values = [row.per_workload[label, s]["avg_jct_s"] for s in cfg.seeds]
            cells.append(pm(*mean_std(values), ".0f", 1.0, seeds))
        if stored_column:
            number = int(label[1:])
            cells.append(f"{STORED_POLLUX_PER_WORKLOAD_S[number]:.1f}")
        rows.append(cells)
    parts.append(Block(header=header, rows=rows))
    parts.append("Pollux's README, workload-6 (s): Pollux "
                 f"{README_WORKLOAD6_S['pollux']:.1f}, Optimus+Oracle "
                 f"{README_WORKLOAD6_S['optimus']:.1f}, Tiresias "
                 f"{README_WORKLOAD6_S['tiresias']:.1f}.")
    return Document(title="Pollux (OSDI'21) §5.3: Pollux vs TunedJobs baselines in its "
                    "simulator", parts=parts)


def pollux_settings(spec: Experiment) -> GoodputSettings:
    """The table's settings from ``pollux.yaml`` (module docstring)."""
    base = GoodputSettings(table=STEM, generator="pollux.workloads")
    return read_goodput_settings(spec, table=STEM, base=base)


KIND = TableKind(
    name=STEM, settings=pollux_settings, plan=plan_goodput_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json, key=cell_result_key,
    describe=describe_cell, reduce=goodput_table, document=document, frame=to_frame,
    seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
