r"""Goodput mode: elastic jobs whose batch size, GPU count and placement the policy and the
job choose each round, as in Pollux's and Sia's simulators (docs/goodput.md).

**The loop** (Pollux ``simulator.py`` 206-271 and 376-386, Sia ``cluster.py`` 117-225 and
``multi_simulator.py`` 64-67; rounds of ``interval`` s from t = 0):

.. code-block:: text

    until every job of the workload is done:
        every job steps interval s on its current placement   (GoodputJob.step)
        t = t + interval
        active = the jobs with submission <= t, not done (workload order)
        decision = policy.decide(GoodputState at t)           [none when no job is active]
        check the decision                                    InvalidDecisionError
        every active job whose (type, node list) changed:
            no GPUs now            -> it suspends (no restart)
            world "node_ids"       -> it restarts (Pollux: any change of its node list)
            world "shape"          -> it restarts when its type or its GPUs per node changed,
                                      else it only moves (Sia)

A job therefore first runs in the round after the one in which it arrived, and the first
round runs nothing.  A job finishes inside a round (to the whole second); its GPUs stay
idle until the next round.  The policy's time is not charged.

**Records**: one :class:`~schedlab.simulator.result.JobRecord` per job in workload order:
``finish`` its completion time, ``migrations`` its restarts (the first start not counted),
``preemptions`` the rounds in which it lost every GPU before finishing, ``gpu_seconds``
the GPU-seconds it held (checkpoint-restore included), ``overhead_s`` the seconds spent in
checkpoint-restore, ``steps``/``total_steps`` its progress and the progress at which it
finishes, ``time_on[t]`` the seconds it held GPUs of type t.  :class:`GoodputRun` adds the
per-round log (when asked) and the per-round GPUs held and contention that Sia's metrics
read.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.errors import InputError
from schedlab.policies.goodput_state import (
    Decision,
    GoodputJobInfo,
    GoodputPolicy,
    GoodputState,
)
from schedlab.simulator.engine import InvalidDecisionError, SimulationStalledError
from schedlab.simulator.goodput_job import WORLDS, GoodputJob, GoodputWorld
from schedlab.simulator.result import JobRecord, SimulationResult
from schedlab.workloads.goodput import GoodputJobSpec
from schedlab.world.applications import load_application

log = logging.getLogger(__name__)

#: Most replicas a job may be granted (both simulators: "simulator can't handle more").
MAX_REPLICAS = 64
#: Most nodes of a type a placement spans in Sia's simulator (``simulator_config.py`` 15).
MAX_PHYSICAL_NODES = {"azure": 5, "aws": 16, "dgx": 2, "dgx-ext": 2, "quad": 1, "rtx": 3}
#: Rounds in which every arrived job waits with no arrival left before a run is stalled.
STALL_ROUNDS = 1000
#: The batch NCF jobs are held to in both simulators (Pollux ``simulator.py`` 190-192).
NCF_BATCH_SIZE = 32768


@dataclass
class GoodputRun:
    """A goodput simulation's outcome: ``result`` (the package's records), ``world`` its
    rules, ``held_gpus[r]`` the GPUs held in round r (Sia's GPU-hours count whole rounds),
    ``contention[r]`` the jobs active (running or queued) in round r, ``log`` one dict per
    round when asked (time, and per job: epoch, progress, restarts, type, placement,
    batch)."""

    result: SimulationResult
    world: GoodputWorld
    interval: float
    held_gpus: list[int] = field(default_factory=list)
    contention: list[int] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)

    @property
    def jcts(self) -> dict[str, float]:
        """Completion - submission of every finished job, s."""
        return {j.job: j.jct for j in self.result.jobs if j.jct is not None}


def build_jobs(specs: Sequence[GoodputJobSpec], gpus_of: Mapping[str, int],
               world: GoodputWorld, *, profiles: Path | None = None, fixed: bool = False
               ) -> list[GoodputJob]:
    """The simulator's jobs of ``specs`` on the GPU types of ``gpus_of`` (type -> GPUs, in
    cluster order) under ``world``'s rules:
    Pollux's simulator tunes every batch (NCF held at 32768) and ignores the request; Sia's
    keeps the request as the policy's batch cap and fixes the batch of rigid and
    scale-gpus jobs (``cluster.py`` 36-68).  ``fixed``: every job runs its request, the
    batch and GPU count of the trace (the baselines' "TunedJobs" in both papers; Pollux
    ``simulator.py`` 193-197, Sia ``cluster.py`` 69-79), as a rigid gang; a request above
    every type's GPUs is an :class:`~schedlab.errors.InputError`."""
    types = list(gpus_of)
    jobs = []
    largest = max(gpus_of.values(), default=0)
    for spec in specs:
        apps = {t: load_application(spec.application, t, flavour=world.name,  # type: ignore[arg-type]
                                    root=profiles) for t in types}
        if fixed:
            if (spec.num_replicas or 1) > largest:
                raise InputError(
                    f"job {spec.name!r} requests {spec.num_replicas} GPUs and runs as a fixed "
                    f"gang, but no GPU type has more than {largest}", field="num_replicas")
            app = apps[types[0]]
            batch = spec.batch_size or app.init_batch_size
            jobs.append(GoodputJob(
                name=spec.name, apps=apps, submission_time=spec.submission_time, world=world,
                target_batch_size=min(max(batch, app.init_batch_size), app.max_batch_size),
                request_batch_size=spec.batch_size, target_replicas=spec.num_replicas or 1,
                tune_bsz=False, category="rigid"))
            continue
        if world.name == "pollux":
            target = NCF_BATCH_SIZE if spec.application == "ncf" else None
            job = GoodputJob(name=spec.name, apps=apps, submission_time=spec.submission_time,
                             world=world, target_batch_size=target,
                             target_replicas=spec.num_replicas, category="adaptive")
        else:
            target = NCF_BATCH_SIZE if spec.application == "ncf" else spec.batch_size
            job = GoodputJob(name=spec.name, apps=apps, submission_time=spec.submission_time,
                             world=world, target_batch_size=target,
                             request_batch_size=spec.batch_size,
                             target_replicas=spec.num_replicas,
                             tune_bsz=spec.category == "adaptive", category=spec.category)
        jobs.append(job)
    return jobs


def _info(job: GoodputJob, now: float, allocation: tuple[str, tuple[int, ...]] | None,
          gpus_per_node: Mapping[str, int]) -> GoodputJobInfo:
    """What a policy sees of ``job`` (Pollux ``simulator.py`` 321-336, Sia ``cluster.py``
    373-432)."""
    pollux = job.world.name == "pollux"
    max_replicas = {}
    for t, app in job.apps.items():
        limit = min(max(2 * job.max_profiled_replicas(t), 1), MAX_REPLICAS,
                    app.max_batch_size // app.min_local_bsz)
        if pollux and job.app_name == "ncf":
            limit = 1
        if job.category in ("rigid", "scale-gpus") and job.target_replicas is not None:
            limit = job.target_replicas
        max_replicas[t] = limit
    cap = {t: (app.max_batch_size if pollux or job.target_batch_size is None
               else job.target_batch_size) for t, app in job.apps.items()}
    return GoodputJobInfo(
        name=job.name, application=job.app_name, submission_time=job.submission_time,
        age=now - job.submission_time, attained_service=job.attained_service,
        num_restarts=job.num_restarts or 0,
        models={t: job.model(t) for t in job.apps}, max_batch_size=cap,
        atomic_bsz_range={t: (a.min_local_bsz, a.max_local_bsz) for t, a in job.apps.items()},
        tune_bsz=job.tune_bsz, max_replicas=max_replicas,
        min_replicas={t: 0 for t in job.apps},
        one_gpu_throughput={t: a.one_gpu_throughput() for t, a in job.apps.items()},
        category=job.category, target_replicas=job.target_replicas,
        target_batch_size=job.target_batch_size, allocation=allocation,
        scaling_underway=job.rescale_time > 0,
        throughput=({t: job.fixed_rate(t, gpus_per_node[t]) for t in job.apps}
                    if job.category == "rigid" else {}),
        progress=job.progress, total_progress=job.total_progress)


def placement_of(node_ids: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node of a node list, one entry per run of equal consecutive ids (both
    codes: ``simulator.py`` 232-238)."""
    counts: list[int] = []
    for i, node in enumerate(node_ids):
        if i == 0 or node != node_ids[i - 1]:
            counts.append(1)
        else:
            counts[-1] += 1
    return tuple(counts)


def squeeze(placement: tuple[int, ...], max_nodes: int) -> tuple[int, ...]:
    """Sia's repair of a placement over more than ``max_nodes`` nodes: ceil(K / max_nodes)
    GPUs per node, the rest on the last (``cluster.py`` 198-209)."""
    if len(placement) <= max_nodes:
        return placement
    replicas = sum(placement)
    per_node = math.ceil(replicas / max_nodes)
    out = []
    while replicas > 0:
        out.append(min(per_node, replicas))
        replicas -= out[-1]
    return tuple(out)


def _check(policy: str, now: float, decision: Decision, active: Mapping[str, GoodputJob],
           nodes: Mapping[str, int], gpus_per_node: Mapping[str, int]) -> None:
    used: dict[tuple[str, int], int] = {}
    for name, (gpu_type, node_ids) in decision.items():
        where = f"{policy} at t={now:g} s: job {name!r}"
        if name not in active:
            raise InvalidDecisionError(f"{where} is not an active job")
        if gpu_type not in nodes:
            raise InvalidDecisionError(f"{where}: unknown GPU type {gpu_type!r}")
        for node in node_ids:
            if not 0 <= node < nodes[gpu_type]:
                raise InvalidDecisionError(f"{where}: no node {node} of {gpu_type}")
            used[gpu_type, node] = used.get((gpu_type, node), 0) + 1
    for (gpu_type, node), count in used.items():
        if count > gpus_per_node[gpu_type]:
            raise InvalidDecisionError(
                f"{policy} at t={now:g} s: node {node} of {gpu_type} holds {count} GPUs of "
                f"{gpus_per_node[gpu_type]}")


def simulate_goodput(
    specs: Sequence[GoodputJobSpec],
    cluster: Mapping[str, tuple[int, int]],
    policy: GoodputPolicy,
    *,
    world: GoodputWorld | str = "pollux",
    interval: float = 60.0,
    profiles: Path | None = None,
    max_rounds: int | None = None,
    keep_log: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> GoodputRun:
    """Run ``policy`` on the jobs ``specs`` in a cluster of ``cluster[t] = (nodes, GPUs
    per node)`` per type (cluster order), under ``world``'s rules (module docstring).
    ``profiles``: a folder of per-type profiles in Sia's layout (default: the shipped
    Pollux profiles, type ``aws``); ``max_rounds`` stops the run early (then unfinished
    jobs have no finish); ``progress(done, total)`` is called after every round."""
    if isinstance(world, str):
        world = WORLDS[world]
    nodes = {t: n for t, (n, _) in cluster.items()}
    per_node = {t: g for t, (_, g) in cluster.items()}
    jobs = build_jobs(specs, {t: n * g for t, (n, g) in cluster.items()}, world,
                      profiles=profiles,
                      fixed=bool(getattr(policy, "fixed_jobs", False)))
    allocations: dict[str, tuple[str, tuple[int, ...]]] = {}
    suspensions = {job.name: 0 for job in jobs}
    run = GoodputRun(result=SimulationResult(
        policy=policy.name, mode="goodput", round_s=interval,
        gpus={t: n * g for t, (n, g) in cluster.items()}, jobs=[], rounds=[]),
        world=world, interval=interval)
    started = time.perf_counter()
    decide_s = 0.0
    now = 0.0
    rounds = 0
    idle = 0
    while not all(job.completion_time is not None for job in jobs):
        if max_rounds is not None and rounds >= max_rounds:
            run.result.stopped = "max_rounds"
            break
        for job in jobs:
            job.step(interval)
        now += interval
        rounds += 1
        active = {job.name: job for job in jobs
                  if job.submission_time <= now and job.completion_time is None}
        allocations = {k: v for k, v in allocations.items() if k in active}
        if active:
            state = GoodputState(now=now, nodes=nodes, gpus_per_node=per_node, jobs=tuple(
                _info(job, now, allocations.get(name), per_node) for name, job in active.items()))
            tic = time.perf_counter()
            decision = {k: v for k, v in policy.decide(state).items() if v[1]}
            decide_s += time.perf_counter() - tic
            _check(policy.name, now, decision, active, nodes, per_node)
            for name, job in active.items():
                new, old = decision.get(name), allocations.get(name)
                if new == old:
                    continue
                if new is None:
                    if job.placement:
                        suspensions[name] += 1
                    job.suspend()
                    continue
                gpu_type, node_ids = new
                placement = placement_of(node_ids)
                if world.squeeze_nodes:
                    placement = squeeze(placement, MAX_PHYSICAL_NODES.get(
                        gpu_type, len(placement)))
                moved_only = (world.restart == "shape" and job.placement
                              and job.current_type == gpu_type and job.placement == placement)
                if not moved_only:
                    job.start(gpu_type, placement)
            allocations = decision
        run.held_gpus.append(sum(len(ids) for _, ids in allocations.values()))
        idle = idle + 1 if active and not allocations and all(
            job.submission_time <= now for job in jobs) else 0
        if idle >= STALL_ROUNDS:
            raise SimulationStalledError(
                f"{policy.name}: {len(active)} job(s) waited {idle} rounds with no GPUs and "
                f"nothing left to arrive (t={now:g} s): "
                f"{', '.join(sorted(active)[:5])}")
        run.contention.append(len(active))
        if keep_log:
            run.log.append(_log_row(now, jobs, allocations))
        if progress is not None:
            progress(sum(job.completion_time is not None for job in jobs), len(jobs))
    run.result.jobs = [_record(job, suspensions[job.name]) for job in jobs]
    run.result.end_time = now
    run.result.num_rounds = rounds
    run.result.decisions = rounds
    run.result.decide_time_s = decide_s
    run.result.wall_s = time.perf_counter() - started
    counters = getattr(policy, "counters", None)
    if callable(counters):
        solver_s, solves = counters()
        run.result.solver_time_s, run.result.solves = solver_s, solves
    return run


def _log_row(now: float, jobs: Sequence[GoodputJob],
             allocations: Mapping[str, tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    return {"timestamp": now, "jobs": [
        {"name": j.name, "epoch": j.epoch, "progress": j.progress,
         "num_restarts": j.num_restarts, "type": j.current_type,
         "allocation": list(allocations.get(j.name, (None, ()))[1]),
         "placement": list(j.placement),
         "batch_size": j.atomic_bsz * (j.accum_steps + 1) * sum(j.placement),
         "completion_time": j.completion_time}
        for j in jobs if j.submission_time <= now]}


def _record(job: GoodputJob, suspensions: int) -> JobRecord:
    return JobRecord(
        job=job.name, arrival=job.submission_time, start=job.start_time,
        finish=job.completion_time, scale_factor=job.target_replicas or 1, weight=1.0,
        job_type=job.app_name, user=None, total_steps=job.total_progress,
        steps=job.progress, preemptions=suspensions, migrations=job.num_restarts or 0,
        rounds_run=0, gpu_seconds=job.attained_service,
        executed_s=sum(job.time_on.values()) - job.delay_s, overhead_s=job.delay_s,
        isolated_time_s=float("nan"),
        time_on=dict(job.time_on))
