r"""The cross-paper table's four workloads, and the conversions that let every policy run on
each of them with what it can see.

**Workloads** (one instance per seed; the builders take the table's sizes):

* ``homogeneous``: Gavel's generator (:func:`~schedlab.workloads.gavel.generate_gavel_instance`)
  on one accelerator type, Poisson arrivals at a rate (jobs/hour), Gavel's 360 s rounds.
* ``heterogeneous``: the same generator on three types (V100, P100, K80).
* ``dynamic``: Shockwave's generator (:func:`~schedlab.workloads.shockwave.
  generate_shockwave_instance`): dynamic-adaptation jobs (batch-size schedules, epochs) on
  one type, its own arrival gaps and 120 s rounds.
* ``fine-tuning``: Titan's generator (:func:`~schedlab.analysis.paper_workloads.
  titan_workload`): foundation-model fine-tuning tasks (elastic GPU counts, merge
  candidates) on one type in nodes of 4 GPUs, arrivals over the generator's day, 120 s rounds.

**Conversions** (each documented where it is built; ``docs/reproduction.md`` lists them):

* :func:`as_dynamic`: static jobs as Shockwave jobs of a *constant* batch size, so Shockwave's
  planner, which reasons in epochs, can run on the homogeneous workload.  Epochs
  E_j = ceil(S_j / ceil(N_model / b)) (Shockwave's own rule, :func:`~schedlab.workloads.
  shockwave.epoch_count`) when the job type names a model of known dataset size and its batch
  size b, else one epoch per round of work, E_j = ceil(t_j / L) (A3C, CycleGAN); every epoch
  takes t_j / E_j seconds on the fastest type, t_j = S_j / max_k T[j,k] the job's isolated
  time, so the job's total work and its speed on every type are unchanged.
* :func:`with_unit_price`: a cluster type without a price gets 1 $/GPU-hour.  Only Gavel's
  cost policies read prices; on a single-type cluster (the fine-tuning workload) a price is a
  constant factor of their objective, so any positive price gives the same allocations.
* :func:`as_hare`: jobs as Hare jobs (R_j rounds of m_j single-GPU tasks, a barrier between
  rounds), so Hare's greedy planner can plan any workload whose job lengths are known:
  m_j = the job's GPU count (its gang, or a task's requested GPUs), t_jk = its isolated time
  on type k, R_j = min(R_max, max(1, ceil(t_j / L))) (one round per simulator round of work,
  at most R_max), p[j,k] = t_jk / R_j seconds per task, switch seconds sigma_j = the job's
  ``switch_overhead_s`` (0 when unset: Hare's plan pays no context switch on the fine-tuning
  workload, where the simulated policies pay Titan's).  A dynamic job's rounds all take the
  mean epoch time (its total is exact; the batch-size changes are averaged out); a
  fine-tuning task runs at its requested GPU count and never merges.
* :func:`isolated_seconds`: t_j as the simulators record it (the job alone on its own GPUs of
  its fastest type): S_j / max_k T[j,k]; a dynamic job's sum of epoch times; a fine-tuning
  task's profile at its request (the same S_j / T of its instance).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from schedlab.errors import InputError
from schedlab.instance import Instance, Job, instance_from_dict

WorkloadName = Literal["homogeneous", "heterogeneous", "dynamic", "fine-tuning", "goodput"]
#: The table's workloads, in column order.
WORKLOADS: tuple[WorkloadName, ...] = ("homogeneous", "heterogeneous", "dynamic",
                                       "fine-tuning", "goodput")
#: GPUs per node of the goodput workload's cluster (Pollux's g4dn.12xlarge nodes).
GOODPUT_GPUS_PER_NODE = 4
#: One-line description of each workload (the table's text).
WORKLOAD_TEXT: Mapping[str, str] = {
    "homogeneous": "Gavel's generator on one type",
    "heterogeneous": "Gavel's generator on V100 + P100 + K80",
    "dynamic": "Shockwave's generator (dynamic batch sizes)",
    "fine-tuning": "Titan's generator (foundation-model fine-tuning)",
    "goodput": "Pollux's workloads (elastic goodput jobs, Pollux's simulator)",
}
#: Most rounds a Hare job gets from :func:`as_hare`.
HARE_MAX_ROUNDS = 20
#: Price given to a type without one (:func:`with_unit_price`), $/GPU-hour.
UNIT_PRICE_PER_HOUR = 1.0

_JOB_TYPE = re.compile(r"^(?P<model>.+) \(batch size (?P<batch>\d+)\)$")


def build_workload(name: str, *, jobs: int, seed: int, gpus: int,
                   heterogeneous: Mapping[str, int], jobs_per_hour: float) -> Instance:
    """The ``name`` workload of ``seed`` (module docstring): ``jobs`` jobs; ``gpus`` GPUs of
    one type for the one-type workloads, ``heterogeneous`` for the other; Gavel's workloads
    arrive at ``jobs_per_hour``."""
    if name == "homogeneous":
        from schedlab.workloads.gavel import generate_gavel_instance

        return generate_gavel_instance(jobs, {"v100": gpus}, seed, jobs_per_hour=jobs_per_hour,
                                       name=f"cross-homogeneous-{seed}")
    if name == "heterogeneous":
        from schedlab.workloads.gavel import generate_gavel_instance

        return generate_gavel_instance(jobs, dict(heterogeneous), seed,
                                       jobs_per_hour=jobs_per_hour,
                                       name=f"cross-heterogeneous-{seed}")
    if name == "dynamic":
        from schedlab.workloads.shockwave import generate_shockwave_instance

        return generate_shockwave_instance(jobs, {"v100": gpus}, seed,
                                           name=f"cross-dynamic-{seed}")
    if name == "fine-tuning":
        from schedlab.analysis.paper_workloads import titan_workload

        return titan_workload(jobs, {"a100": gpus}, seed, None)
    if name == "goodput":
        return goodput_workload(jobs, seed, gpus)
    raise InputError(f"unknown workload {name!r} (one of {', '.join(WORKLOADS)})",
                     field="workload")


def goodput_workload(jobs: int, seed: int, gpus: int) -> Instance:
    """The first ``jobs`` jobs of Pollux's workload (seed mod 8) + 1 on ``gpus`` T4 GPUs in
    nodes of 4 (type ``aws``), each request capped at the cluster's GPUs so that a
    fixed-gang baseline can run it."""
    from schedlab.workloads.goodput import goodput_instance, pollux_workload

    specs = [replace(spec, num_replicas=min(spec.num_replicas or 1, gpus))
             for spec in pollux_workload(seed % 8 + 1, jobs=jobs)]
    nodes = gpus // GOODPUT_GPUS_PER_NODE
    return goodput_instance(specs, {"aws": (nodes, GOODPUT_GPUS_PER_NODE)},
                            name=f"cross-goodput-{seed}")


# ------------------------------------------------------------------------------ helpers


def isolated_seconds(job: Job) -> dict[str, float]:
    """t_jk: seconds job ``job`` needs alone on its own GPUs of type k, for every type it can
    use (module docstring)."""
    fastest = max(job.throughput.values(), default=0.0)
    if fastest <= 0:
        raise InputError(f"job {job.id}: no positive throughput", field="throughput")
    if job.batch_schedule is not None and job.regimes is not None:
        total = sum(float(job.regimes[str(b)]) for b in job.batch_schedule[job.epochs_done:])
    else:
        if job.total_steps is None:
            raise InputError(f"job {job.id}: no total_steps", field="total_steps")
        total = (job.total_steps - job.steps_done) / fastest
    return {k: total * fastest / v for k, v in job.throughput.items() if v > 0}


def isolated_time(job: Job) -> float:
    """t_j = min_k t_jk, s."""
    return min(isolated_seconds(job).values())


def _replace_jobs(instance: Instance, jobs: list[dict[str, Any]], suffix: str,
                  cluster: Mapping[str, Any] | None = None) -> Instance:
    document = instance.model_dump(mode="json", by_alias=True, exclude_none=True)
    document["jobs"] = jobs
    document["name"] = f"{instance.name}-{suffix}"
    if cluster is not None:
        document["cluster"] = cluster
    return instance_from_dict(document, source=document["name"])


# --------------------------------------------------------------------------- conversions


def as_dynamic(instance: Instance) -> Instance:
    """Static jobs as constant-batch-size Shockwave jobs (module docstring); dynamic jobs are
    kept as they are."""
    from schedlab.workloads.shockwave import epoch_count
    from schedlab.workloads.shockwave_adaptation import DATASET_SAMPLES

    round_s = instance.params.round_s
    jobs = []
    for job in instance.jobs:
        document = job.model_dump(mode="json", by_alias=True, exclude_none=True)
        if job.batch_schedule is None:
            seconds = isolated_time(job)
            match = _JOB_TYPE.match(job.job_type or "")
            if match and match["model"] in DATASET_SAMPLES and job.total_steps is not None:
                batch = int(match["batch"])
                epochs = epoch_count(match["model"], batch, math.ceil(job.total_steps))
            else:
                batch = 1
                epochs = max(1, math.ceil(seconds / round_s))
            document.update(epochs=epochs, epochs_done=0, batch_schedule=[batch] * epochs,
                            regimes={str(batch): seconds / epochs}, adaptation="static")
        jobs.append(document)
    return _replace_jobs(instance, jobs, "constant-batch")


def with_unit_price(instance: Instance) -> Instance:
    """The instance with :data:`UNIT_PRICE_PER_HOUR` on every type that has no price (module
    docstring); the instance itself when every type has one."""
    pools = instance.cluster.accelerators
    if all(pool.cost_per_hour for pool in pools.values()):
        return instance
    cluster = instance.cluster.model_dump(mode="json", by_alias=True, exclude_none=True)
    for name, pool in pools.items():
        if not pool.cost_per_hour:
            cluster["accelerators"][name]["cost_per_hour"] = UNIT_PRICE_PER_HOUR
    jobs = [job.model_dump(mode="json", by_alias=True, exclude_none=True)
            for job in instance.jobs]
    return _replace_jobs(instance, jobs, "priced", cluster=cluster)


def as_hare(instance: Instance, max_rounds: int = HARE_MAX_ROUNDS) -> Instance:
    """The jobs as Hare jobs (module docstring): R_j rounds of m_j tasks of p[j,k] s."""
    round_s = instance.params.round_s
    jobs = []
    for job in instance.jobs:
        seconds = isolated_seconds(job)
        rounds = min(max_rounds, max(1, math.ceil(min(seconds.values()) / round_s)))
        jobs.append({
            "id": job.id, "job_type": job.job_type, "arrival": job.arrival,
            "weight": job.weight, "rounds": rounds, "tasks_per_round": job.scale_factor,
            "task_seconds": {k: t / rounds for k, t in seconds.items()},
            "switch_seconds": float(job.switch_overhead_s or 0.0),
        })
    cluster = {"accelerators": {k: {"count": pool.count}
                                for k, pool in instance.cluster.accelerators.items()}}
    return instance_from_dict({"name": f"{instance.name}-hare", "cluster": cluster,
                               "params": {"round_s": round_s}, "jobs": jobs})


__all__ = [
    "HARE_MAX_ROUNDS",
    "UNIT_PRICE_PER_HOUR",
    "WORKLOADS",
    "WORKLOAD_TEXT",
    "as_dynamic",
    "as_hare",
    "build_workload",
    "isolated_seconds",
    "isolated_time",
    "with_unit_price",
]
