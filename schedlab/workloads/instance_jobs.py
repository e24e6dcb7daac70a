"""Instance files (``schedlab/instance@1``) as simulator workloads.

``schedlab simulate --workload FILE.json`` replays the jobs of an instance file exactly as
written: each job arrives at its ``arrival``, with its ``total_steps``, ``throughput``,
``scale_factor``, ``weight`` and (when present) co-location throughputs; the cluster is the
file's.  :func:`workload_from_instance_file` loads the file and applies the command-line
adjustments:

- ``num_jobs``: keep the first N jobs to arrive (ties in file order); co-location entries
  that name a dropped job are dropped with it;
- ``static``: every job arrives at 0 s;
- ``jobs_per_hour``: arrivals stretched or compressed to that mean rate
  (:func:`~schedlab.workloads.traces.rescale_arrivals`, which keeps the order and burstiness);
- ``cluster``: GPUs per type replacing the file's pools.  Its types must be the types the jobs
  have throughputs for (a type given 0 GPUs that no job knows is left out); a mismatch is an
  :class:`~schedlab.errors.InputError` naming the file and ``--cluster``.  A type the override
  keeps retains the file's ``cost_per_hour``; nodes are dropped (the counts changed).

The file is the same for every seed: seeds only reach the policy.  :class:`InstanceFile` is
the picklable recipe that :class:`~schedlab.analysis.sweep.WorkloadSpec` carries to worker
processes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.errors import InputError
from schedlab.instance import Instance, instance_from_dict, load_instance

log = logging.getLogger(__name__)

#: File names ``--workload`` reads as instance files.
INSTANCE_SUFFIXES: tuple[str, ...] = (".json", ".json.gz", ".yaml", ".yml")


def looks_like_instance_file(text: str) -> bool:
    """Whether ``text`` names an instance file by its suffix (``.json``, ``.json.gz``, ...)."""
    return text.lower().endswith(INSTANCE_SUFFIXES)


def file_digest(path: str | Path) -> str:
    """sha256 of the file's bytes (first 16 hex digits); "" when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def job_accelerator_types(instance: Instance) -> list[str]:
    """Accelerator types some job has a throughput for, in the cluster's order."""
    known = {acc for job in instance.jobs for acc in job.throughput}
    ordered = [acc for acc in instance.types if acc in known]
    return ordered + sorted(known - set(ordered))


def check_simulatable(instance: Instance, source: str) -> None:
    """Raise :class:`InputError` unless every job has ``total_steps`` and a throughput."""
    if not instance.jobs:
        raise InputError("the file has no jobs to simulate", file=source, field="jobs")
    for i, job in enumerate(instance.jobs):
        if job.application is not None:
            raise InputError("a goodput job (it names an application): run the file with "
                             "`schedlab goodput FILE` (docs/goodput.md)", file=source,
                             field=f"jobs[{i}].application")
        if job.total_steps is None:
            raise InputError("the simulator needs total_steps on every job", file=source,
                             field=f"jobs[{i}].total_steps")
        if not any(v > 0 for v in job.throughput.values()):
            raise InputError("the simulator needs a positive throughput on some accelerator "
                             "type", file=source, field=f"jobs[{i}].throughput")


def first_jobs(instance: Instance, num_jobs: int) -> Instance:
    """The ``num_jobs`` earliest arrivals (ties in file order); co-location entries that name
    a dropped job are dropped too."""
    if num_jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {num_jobs}", field="--jobs")
    if num_jobs >= len(instance.jobs):
        return instance
    order = sorted(range(len(instance.jobs)), key=lambda i: instance.jobs[i].arrival)
    keep = sorted(order[:num_jobs])
    data = instance.to_dict()
    jobs: list[dict[str, Any]] = [data["jobs"][i] for i in keep]
    kept_ids = {job["id"] for job in jobs}
    for job in jobs:
        pairs = job.get("colocated_throughput")
        if pairs:
            pairs = {other: v for other, v in pairs.items() if other in kept_ids}
            if pairs:
                job["colocated_throughput"] = pairs
            else:
                del job["colocated_throughput"]
    data["jobs"] = jobs
    return instance_from_dict(data, source=instance.name)


def override_cluster(instance: Instance, cluster: Mapping[str, int], source: str) -> Instance:
    """``instance`` on ``cluster`` ({type: GPUs}) instead of its own pools.

    Raises:
        InputError: ``<source>: --cluster: ...`` when the types differ from the types the
            jobs have throughputs for.
    """
    job_types = job_accelerator_types(instance)
    pools = {acc: n for acc, n in cluster.items() if n > 0 or acc in job_types}
    missing = [acc for acc in job_types if acc not in pools]
    extra = [acc for acc in pools if acc not in job_types]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"it lacks {', '.join(missing)}")
        if extra:
            parts.append(f"no job has a throughput for {', '.join(extra)}")
        raise InputError(
            f"the cluster's accelerator types must be the jobs' types "
            f"({', '.join(job_types)}), but {' and '.join(parts)} "
            f"(e.g. --cluster {','.join(f'{acc}=N' for acc in job_types)})",
            file=source, field="--cluster")
    data = instance.to_dict()
    old = data["cluster"]["accelerators"]
    accelerators: dict[str, dict[str, Any]] = {}
    for acc in job_types:  # the jobs' order (the file's cluster order)
        pool: dict[str, Any] = {"count": pools[acc]}
        cost = old.get(acc, {}).get("cost_per_hour")
        if cost is not None:
            pool["cost_per_hour"] = cost
        accelerators[acc] = pool
    data["cluster"] = {"accelerators": accelerators}
    try:
        return instance_from_dict(data, source=source)
    except InputError as exc:  # e.g. every pool 0
        raise InputError(exc.reason, file=source, field="--cluster") from None


def workload_from_instance_file(
    path: str | Path,
    *,
    cluster: Mapping[str, int] | None = None,
    num_jobs: int | None = None,
    jobs_per_hour: float | None = None,
    static: bool = False,
) -> Instance:
    """The simulator workload of an instance file, with the adjustments of the module doc."""
    source = str(path)
    instance = load_instance(path)
    check_simulatable(instance, source)
    if num_jobs is not None:
        instance = first_jobs(instance, num_jobs)
    if cluster is not None:
        instance = override_cluster(instance, cluster, source)
    if static:
        data = instance.to_dict()
        for job in data["jobs"]:
            job["arrival"] = 0.0
        instance = instance_from_dict(data, source=source)
    elif jobs_per_hour is not None:
        from schedlab.workloads.traces import rescale_arrivals

        instance = rescale_arrivals(instance, jobs_per_hour)
    log.debug("workload %s: %d jobs, %d GPUs", source, len(instance.jobs),
              instance.cluster.total_gpus)
    return instance


@dataclass(frozen=True)
class InstanceFile:
    """How to turn an instance file into a run's workload (picklable, for sweep workers).

    ``digest`` is :func:`file_digest` of the file, so a run's fingerprint (and the reuse of
    runs in a ``--runs-dir``) follows the file's content; ``cluster`` is the ``--cluster`` override
    (None: the file's own pools); ``static`` puts every arrival at 0 s.
    """

    path: str
    digest: str = ""
    cluster: tuple[tuple[str, int], ...] | None = None
    static: bool = False

    def build(self, num_jobs: int | None, jobs_per_hour: float | None) -> Instance:
        """The workload (the seed plays no part: a file is the same job stream every run)."""
        return workload_from_instance_file(
            self.path, cluster=None if self.cluster is None else dict(self.cluster),
            num_jobs=num_jobs, jobs_per_hour=jobs_per_hour, static=self.static)
