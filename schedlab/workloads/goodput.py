"""Goodput workloads (Pollux, Sia): jobs that name a profiled application, from an Instance
or from a trace in the authors' CSV format (docs/goodput.md, "Workloads").

The CSV format of both artifacts has one row per job, ``name,time,application,
num_replicas,batch_size`` and optionally ``category``: ``time`` is the submission second,
``num_replicas`` and ``batch_size`` the request (the "TunedJobs" configuration that
Pollux's baselines run; Sia's policy caps the batch at it).

Shipped: Pollux's eight 160-job workloads (``schedlab/data/pollux/workloads``,
Apache-2.0, from the ``osdi21-artifact`` branch of petuum/adaptdl), drawn by its
``workload.py`` from the Philly trace.  Sia's "Philly" workloads have the same jobs, arrival
times and applications except that every NCF job is a CIFAR-10 one;
:func:`sia_philly_workload` applies that recipe, as Sia's repository has no licence and
its files are not shipped.  The *requests* differ (compared file by file: 529 of the 1280
rows): Sia drew them again on its rtx profiles (the NCF-made CIFAR-10 jobs ask for 6-16
GPUs at batch 2048 or 4096 there, where the recipe keeps NCF's 1 GPU; its ImageNet jobs ask
for 10-14 GPUs, here 24-48).  Adaptive policies (Pollux, Sia) read a request only as Sia's
batch cap; the fixed-gang baselines run it.  With a checkout of Sia's artifact, read its own
files instead (:func:`load_goodput_csv`, ``--philly DIR`` of ``schedlab tables sia``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from schedlab.errors import InputError
from schedlab.instance import AcceleratorPool, Cluster, Instance, Job, Params
from schedlab.world.applications import APPLICATION_NAMES, load_application

#: Columns every goodput CSV row has.
CSV_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: Categories of Sia's job model.
CATEGORIES = ("adaptive", "scale-gpus", "rigid")
#: Pollux's shipped workloads, workload-1 ... workload-8.
POLLUX_WORKLOADS = tuple(range(1, 9))


@dataclass(frozen=True)
class GoodputJobSpec:
    """One job of a goodput workload: its ``application``, submission time (s), and the
    trace's request, ``batch_size`` (samples) and ``num_replicas`` (GPUs), and its
    ``category`` (``adaptive``, ``scale-gpus`` or ``rigid``)."""

    name: str
    application: str
    submission_time: float
    batch_size: int | None = None
    num_replicas: int | None = None
    category: str = "adaptive"


def check_spec(spec: GoodputJobSpec, *, file: str, where: str) -> None:
    """One :class:`~schedlab.errors.InputError` naming the file and ``where`` (the job's
    field path) for an unknown application or category, or a batch request outside
    [M0, largest validated batch] of the application's profile."""
    if spec.application not in APPLICATION_NAMES:
        raise InputError(f"unknown application {spec.application!r}; known: "
                         f"{', '.join(APPLICATION_NAMES)}", file=file,
                         field=f"{where}.application")
    if spec.category not in CATEGORIES:
        raise InputError(f"unknown category {spec.category!r}; known: {', '.join(CATEGORIES)}",
                         file=file, field=f"{where}.category")
    if spec.batch_size is not None:
        app = load_application(spec.application)
        if not app.init_batch_size <= spec.batch_size <= app.max_batch_size:
            raise InputError(
                f"batch size {spec.batch_size} is outside the profile of {spec.application} "
                f"({app.init_batch_size} to {app.max_batch_size} samples)", file=file,
                field=f"{where}.batch_size")


def specs_from_instance(instance: Instance, *, file: str | None = None) -> list[GoodputJobSpec]:
    """The goodput jobs of ``instance`` in file order (each job needs ``application``;
    ``batch_size``, ``scale_factor`` as the replica request and ``category`` are read)."""
    source = file or instance.name
    specs = []
    for i, job in enumerate(instance.jobs):
        if job.application is None:
            raise InputError("a goodput job needs an application", file=source,
                             field=f"jobs[{i}].application")
        spec = GoodputJobSpec(name=job.id, application=job.application,
                              submission_time=job.arrival, batch_size=job.batch_size,
                              num_replicas=job.scale_factor,
                              category=job.category or "adaptive")
        check_spec(spec, file=source, where=f"jobs[{i}]")
        specs.append(spec)
    return specs


def read_goodput_csv(text: str, *, file: str) -> list[GoodputJobSpec]:
    """Jobs of a trace in the authors' CSV format (module docstring); a bad row is one
    :class:`~schedlab.errors.InputError` naming the row and the column."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; a goodput trace has "
                         f"{', '.join(CSV_COLUMNS)} and optionally category", file=file,
                         field="header")
    specs = []
    for row_number, row in enumerate(reader, start=2):
        where = f"row {row_number}"
        submitted = _csv_number(row, "time", float, file=file, where=where)
        replicas = int(_csv_number(row, "num_replicas", int, file=file, where=where))
        batch = int(_csv_number(row, "batch_size", float, file=file, where=where))
        if not math.isfinite(submitted) or submitted < 0:
            raise InputError(f"must be a finite number >= 0, got {row['time']!r}", file=file,
                             field=f"{where}.time")
        for column, value in (("num_replicas", replicas), ("batch_size", batch)):
            if value < 1:
                raise InputError(f"must be >= 1, got {row[column]!r}", file=file,
                                 field=f"{where}.{column}")
        spec = GoodputJobSpec(name=row["name"], application=row["application"],
                              submission_time=submitted, batch_size=batch,
                              num_replicas=replicas,
                              category=(row.get("category") or "adaptive"))
        check_spec(spec, file=file, where=where)
        specs.append(spec)
    return specs


def _csv_number(row: dict[str, str], column: str, kind: type[int] | type[float], *,
                file: str, where: str) -> float:
    """``row[column]`` read as ``kind``; a missing or non-numeric value is one error naming
    the row and the column."""
    text = row.get(column)
    try:
        return kind(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"not a number: {text!r}", file=file,
                         field=f"{where}.{column}") from None


def load_goodput_csv(path: str | Path) -> list[GoodputJobSpec]:
    """:func:`read_goodput_csv` of a file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return read_goodput_csv(text, file=str(path))


def pollux_workload(number: int, *, jobs: int | None = None) -> list[GoodputJobSpec]:
    """Pollux's shipped ``workload-<number>.csv`` (1 to 8; 160 jobs each), or its first
    ``jobs`` rows."""
    if number not in POLLUX_WORKLOADS:
        raise InputError(f"Pollux ships workloads 1 to 8, not {number}",
                         field="workload")
    name = f"workload-{number}.csv"
    text = resources.files("schedlab").joinpath("data", "pollux", "workloads", name) \
        .read_text(encoding="utf-8")
    specs = read_goodput_csv(text, file=f"schedlab/data/pollux/workloads/{name}")
    return specs if jobs is None else specs[:jobs]


def sia_philly_workload(number: int, *, jobs: int | None = None) -> list[GoodputJobSpec]:
    """Sia's "Philly" workload by its recipe: Pollux's workload with each NCF job made a
    CIFAR-10 job (name ``cifar10-<i>``), its request kept (module docstring)."""
    out = []
    for spec in pollux_workload(number, jobs=jobs):
        if spec.application == "ncf":
            index = spec.name.rsplit("-", 1)[-1]
            app = load_application("cifar10")
            batch = None if spec.batch_size is None else min(
                max(spec.batch_size, app.init_batch_size), app.max_batch_size)
            spec = replace(spec, name=f"cifar10-{index}", application="cifar10",
                           batch_size=batch)
        out.append(spec)
    return out


def goodput_instance(specs: Sequence[GoodputJobSpec], cluster: dict[str, tuple[int, int]], *,
                     name: str, round_s: float = 60.0) -> Instance:
    """An Instance of goodput jobs on ``cluster[t] = (nodes, GPUs per node)``."""
    return Instance(
        name=name,
        cluster=Cluster(accelerators={
            t: AcceleratorPool(count=n * g, nodes=n, gpus_per_node=g)
            for t, (n, g) in cluster.items()}),
        jobs=[Job(id=s.name, arrival=s.submission_time, application=s.application,
                  batch_size=s.batch_size, scale_factor=s.num_replicas or 1,
                  category=None if s.category == "adaptive" else s.category)  # type: ignore[arg-type]
              for s in specs],
        params=Params(round_s=round_s))


def cluster_of(instance: Instance) -> dict[str, tuple[int, int]]:
    """(nodes, GPUs per node) per type of a goodput instance's cluster; a pool without
    ``nodes`` and ``gpus_per_node`` is an :class:`~schedlab.errors.InputError`."""
    out = {}
    for t, pool in instance.cluster.accelerators.items():
        if pool.nodes is None or pool.gpus_per_node is None:
            raise InputError("goodput jobs need nodes and gpus_per_node for every type",
                             file=instance.name, field=f"cluster.accelerators.{t}")
        out[t] = (pool.nodes, pool.gpus_per_node)
    return out

