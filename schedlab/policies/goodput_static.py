"""Any registered policy of fixed gangs (fifo, srtf, tiresias, gavel.*, ...) on goodput jobs
(docs/goodput.md, "Other policies").

The papers' baselines run every job as its trace asks ("TunedJobs": the requested batch
size on the requested GPUs; Pollux ``simulator.py`` 193-197, Sia ``cluster.py`` 69-79).
This adapter shows such a policy each goodput job as a gang of ``num_replicas`` GPUs
whose throughput on type t is its progress per second there (iterations at M0, packed on
whole nodes, at its current epoch: what the simulator computes), with ``total_steps`` the
progress it needs and ``steps_done`` the progress made; the policy's Assignments become
node placements: a job that keeps its type keeps its nodes, the others are packed first
fit (whole free nodes for gangs of a node or more, else the fullest node that fits).  A
gang that fits nowhere waits (the adapter says so in the log).
"""

from __future__ import annotations

import logging
from typing import Any

from schedlab.instance import AcceleratorPool, Cluster
from schedlab.policies.base import Policy
from schedlab.policies.goodput_state import Decision, GoodputJobInfo, GoodputState
from schedlab.policies.registry import get_policy
from schedlab.policies.state import ClusterState, JobState

log = logging.getLogger(__name__)


class StaticOnGoodput:
    """The registered policy ``policy`` on goodput jobs run as fixed gangs (module
    docstring)."""

    fixed_jobs = True

    def __init__(self, policy: str, **options: Any) -> None:
        self.policy: Policy = get_policy(policy, **options)
        self.name = policy
        self._jobs: dict[str, JobState] = {}
        self._round = 0
        self._previous_now: float | None = None

    def counters(self) -> tuple[float, int]:
        """The wrapped policy's solver seconds and solves."""
        return self.policy.solver_time_s, self.policy.solves

    def _job_state(self, info: GoodputJobInfo, now: float) -> JobState:
        job = self._jobs.get(info.name)
        if job is None:
            job = JobState(id=info.name, arrival=info.submission_time,
                           scale_factor=info.target_replicas or 1,
                           total_steps=info.total_progress, throughput={},
                           job_type=info.application)
            self._jobs[info.name] = job
        job.throughput = {t: v for t, v in info.throughput.items() if v > 0}
        job.steps_done = min(info.progress, job.total_steps)
        job.attained_service_s = info.attained_service
        if info.allocation is not None:
            held = now - (self._previous_now if self._previous_now is not None else now)
            job.executed_s += held
            job.rounds_run += 1
            job.last_round_run = self._round - 1
            job.last_accelerator = info.allocation[0]
            job.time_on[info.allocation[0]] = job.time_on.get(info.allocation[0], 0.0) + held
            if job.start_time is None:
                job.start_time = now - held
        return job

    def decide(self, state: GoodputState) -> Decision:
        """The wrapped policy's Assignments, placed on nodes (module docstring)."""
        cluster = Cluster(accelerators={
            t: AcceleratorPool(count=state.nodes[t] * state.gpus_per_node[t],
                               nodes=state.nodes[t], gpus_per_node=state.gpus_per_node[t])
            for t in state.types})
        infos = {info.name: info for info in state.jobs}
        active = [self._job_state(info, state.now) for info in state.jobs]
        self._jobs = {job.id: job for job in active}
        round_s = (state.now - self._previous_now) if self._previous_now is not None else 60.0
        cluster_state = ClusterState(now=state.now, round_index=self._round, round_s=round_s,
                                     cluster=cluster, active=active, finished=[],
                                     job_set_version=self._round)
        assignments = self.policy.decide(cluster_state)
        self.policy.decisions += 1
        self._round += 1
        self._previous_now = state.now
        free = {t: [state.gpus_per_node[t]] * state.nodes[t] for t in state.types}
        decision: Decision = {}
        wanted = []
        for assignment in assignments:
            info = infos[assignment.job]
            gpus = info.target_replicas or 1
            held = info.allocation
            if held is not None and held[0] == assignment.accelerator and len(held[1]) == gpus:
                for node in held[1]:
                    free[held[0]][node] -= 1
                decision[info.name] = held
            else:
                wanted.append((info.name, assignment.accelerator, gpus))
        for name, gpu_type, gpus in wanted:
            ids = _pack(free[gpu_type], gpus, state.gpus_per_node[gpu_type])
            if ids is None:
                log.info("%s: job %s (%d GPUs of %s) fits on no free nodes; it waits",
                         self.name, name, gpus, gpu_type)
                continue
            decision[name] = (gpu_type, ids)
        return decision


def _pack(free: list[int], gpus: int, per_node: int) -> tuple[int, ...] | None:
    """Node ids of ``gpus`` GPUs taken from ``free`` (changed in place): whole free nodes
    first, in node order, then the rest on the fullest node that fits it; None (and
    ``free`` unchanged) when they do not fit."""
    whole, rest = divmod(gpus, per_node)
    empty = [n for n, f in enumerate(free) if f == per_node]
    if len(empty) < whole:
        return None
    taken = empty[:whole]
    ids = [n for n in taken for _ in range(per_node)]
    if rest:
        fits = [n for n, f in enumerate(free) if f >= rest and n not in taken]
        if not fits:
            return None
        node = min(fits, key=lambda n: (free[n], n))
        ids += [node] * rest
        free[node] -= rest
    for n in taken:
        free[n] = 0
    return tuple(ids)
