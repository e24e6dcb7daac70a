"""Gandiva (Xiao et al., OSDI'18) time-slicing with packing and migration, and Gandiva-fair.

Round-based simplifications (the simulator owns GPU ids, so Gandiva's mechanisms are modelled
at the level of accelerator types and rounds):

* **Time-slicing**: one round is one time quantum.  When the jobs do not all fit, they take
  turns in a round-robin queue (:class:`RoundRobin`: never-run jobs first, a job that ran goes
  to the back), so over K rounds each of N equal jobs on G GPUs runs about K G / N rounds.
* **Packing**: a waiting 1-GPU job u may share the GPU of a running 1-GPU job v on type k when
  the pair's normalized throughput exceeds one,

      C[u,v,k] / T[u,k] + C[v,u,k] / T[v,k] > 1

  (C = ``colocated_throughput``, steps/s of the first job beside the second).  Gandiva packs
  by trial and reverts on measured loss; here the known throughputs decide up front.  Only
  pairs of 1-GPU jobs are packed.
* **Migration to defragment**: a gang of s GPUs is placed on the type with the most free GPUs
  (consolidation), a 1-GPU job on the type with the fewest free GPUs that still has one (best
  fit, which keeps large holes for gangs); a job that ran before goes back to the type it last
  ran on when it has room.  If a gang still does not fit anywhere although enough GPUs are
  free in total, running 1-GPU jobs are migrated off one type onto the free GPUs of other
  types until the gang fits there (the simulator then counts those jobs' migrations and
  charges their switch overhead).

Gandiva is type-blind (it was built for a homogeneous cluster); ``heterogeneity_aware=True``
instead places each job on its fastest type with room.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from schedlab.policies.base import Policy
from schedlab.policies.fifo import FreeGpus, runnable_types, type_preference
from schedlab.policies.state import Assignment, ClusterState, JobState

logger = logging.getLogger(__name__)


class RoundRobin:
    """A round-robin queue over rounds: jobs that have never run first (by arrival), then by
    the order in which they were last served, so a job that runs goes to the back.

    ``order(jobs)`` ranks jobs; ``served(ids)`` records, in order, the jobs that ran.
    """

    def __init__(self) -> None:
        self._ticket: dict[str, int] = {}
        self._next = 0

    def key(self, job: JobState) -> tuple[int, float, str]:
        """(ticket of its last service, -1 if never served; arrival; id)."""
        return (self._ticket.get(job.id, -1), job.arrival, job.id)

    def order(self, jobs: Iterable[JobState]) -> list[JobState]:
        """``jobs`` in round-robin order; forgets jobs not among them (finished)."""
        ranked = sorted(jobs, key=self.key)
        alive = {j.id for j in ranked}
        self._ticket = {i: t for i, t in self._ticket.items() if i in alive}
        return ranked

    def served(self, job_ids: Iterable[str]) -> None:
        """Send these jobs, in this order, to the back of the queue."""
        for job_id in job_ids:
            self._ticket[job_id] = self._next
            self._next += 1


def packing_gain(u: JobState, v: JobState, accelerator: str) -> float:
    """C[u,v,k] / T[u,k] + C[v,u,k] / T[v,k]; 0 when a throughput is missing."""
    cu = (u.colocated_throughput or {}).get(v.id, {}).get(accelerator, 0.0)
    cv = (v.colocated_throughput or {}).get(u.id, {}).get(accelerator, 0.0)
    tu, tv = u.throughput.get(accelerator, 0.0), v.throughput.get(accelerator, 0.0)
    if cu <= 0.0 or cv <= 0.0 or tu <= 0.0 or tv <= 0.0:
        return 0.0
    return cu / tu + cv / tv


@dataclass
class _Placement:
    job: JobState
    accelerator: str
    partner: str | None = None


class _Placer:
    """Gandiva's type-level placement: sticky, consolidate gangs, best-fit single GPUs."""

    def __init__(self, state: ClusterState, heterogeneity_aware: bool) -> None:
        self.state = state
        self.heterogeneity_aware = heterogeneity_aware
        self.free = FreeGpus(state)
        self.placed: dict[str, _Placement] = {}

    def choose(self, job: JobState) -> str | None:
        """The type for ``job`` under the placement rule, or None when no type has room."""
        s = job.scale_factor
        types = runnable_types(job, self.state.cluster.types)
        if self.heterogeneity_aware:
            return self.free.first_fit(job, type_preference(job, self.state,
                                                            heterogeneity_aware=True))
        last = job.last_accelerator
        if last in types and self.free.fits(s, last):
            return last
        fitting = [k for k in types if self.free.fits(s, k)]
        if not fitting:
            return None
        if s > 1:  # consolidate: the type with the most free GPUs
            return max(fitting, key=lambda k: (self.free.free[k], -types.index(k)))
        return min(fitting, key=lambda k: (self.free.free[k], types.index(k)))  # best fit

    def place(self, job: JobState, accelerator: str) -> None:
        self.free.take(job.scale_factor, accelerator)
        self.placed[job.id] = _Placement(job, accelerator)

    def defragment_for(self, gang: JobState) -> str | None:
        """Migrate placed solo 1-GPU jobs off one type so that ``gang`` fits there.

        Tries the gang's types by most free GPUs; moves the fewest jobs needed, each to the
        first other type (cluster order) where it can run and a GPU is free.  Returns the type
        that now fits the gang, or None (nothing moved).
        """
        s = gang.scale_factor
        free = self.free.free
        for k in sorted(runnable_types(gang, self.state.cluster.types), key=lambda t: -free[t]):
            need = s - free[k]
            movers = [p for p in self.placed.values()
                      if p.accelerator == k and p.partner is None and p.job.scale_factor == 1]
            plan: list[tuple[_Placement, str]] = []
            spare = {t: n for t, n in free.items() if t != k}
            for p in movers:
                if len(plan) == need:
                    break
                dest = next((t for t in runnable_types(p.job, self.state.cluster.types)
                             if t != k and spare.get(t, 0) >= 1), None)
                if dest is not None:
                    spare[dest] -= 1
                    plan.append((p, dest))
            if len(plan) < need:
                continue
            for p, dest in plan:
                logger.debug("gandiva: migrate %s %s -> %s to fit gang %s", p.job.id,
                             p.accelerator, dest, gang.id)
                self.free.give(1, p.accelerator)
                self.free.take(1, dest)
                p.accelerator = dest
            return k
        return None


class GandivaTimeSlicing(Policy):
    """Gandiva: round-robin time-slicing when oversubscribed, packing, migration.

    Rule, each round:

    1. rank the active jobs in round-robin order (:class:`RoundRobin`);
    2. place each in that order by the type-level placement rule (module docstring);
       a gang that fits nowhere triggers defragmenting migration when ``migration`` is on;
    3. with ``packing`` on, each still-waiting 1-GPU job (same order) joins the running solo
       1-GPU job with the largest packing gain on that job's type, if the gain exceeds
       ``packing_threshold`` (default 1: the pair does more work than either alone).

    Parameters: ``packing``, ``migration``, ``packing_threshold``, ``heterogeneity_aware``.
    """

    name = "gandiva"
    description = "Gandiva time-slicing (least recently run first), packing, defragmentation"

    def __init__(
        self,
        *,
        packing: bool = True,
        migration: bool = True,
        packing_threshold: float = 1.0,
        heterogeneity_aware: bool = False,
    ) -> None:
        super().__init__()
        self.packing = packing
        self.migration = migration
        self.packing_threshold = packing_threshold
        self.heterogeneity_aware = heterogeneity_aware
        self.queue = RoundRobin()

    def reset(self) -> None:
        """Forget the previous run: counters and the round-robin queue."""
        super().reset()
        self.queue = RoundRobin()

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Time-slice, defragment, pack."""
        self.decisions += 1
        placer = _Placer(state, self.heterogeneity_aware)
        waiting: list[JobState] = []
        for job in self.queue.order(state.active):
            k = placer.choose(job)
            if k is None and self.migration and job.scale_factor > 1:
                k = placer.defragment_for(job)
            if k is None:
                waiting.append(job)
            else:
                placer.place(job, k)
        if self.packing:
            self._pack(waiting, placer)
        self.queue.served(placer.placed)
        return [Assignment(p.job.id, p.accelerator, p.partner) for p in placer.placed.values()]

    def _pack(self, waiting: list[JobState], placer: _Placer) -> None:
        for u in waiting:
            if u.scale_factor != 1 or not u.colocated_throughput:
                continue
            best: tuple[float, _Placement] | None = None
            for p in placer.placed.values():
                if p.partner is not None or p.job.scale_factor != 1:
                    continue
                gain = packing_gain(u, p.job, p.accelerator)
                if gain > self.packing_threshold and (best is None or gain > best[0]):
                    best = (gain, p)
            if best is not None:
                host = best[1]
                host.partner = u.id
                placer.placed[u.id] = _Placement(u, host.accelerator, partner=host.job.id)
                logger.debug("gandiva: pack %s with %s on %s (gain %.3f)", u.id, host.job.id,
                             host.accelerator, best[0])


class GandivaFair(Policy):
    """Gandiva-fair: an equal share of GPU-rounds per user, by stride scheduling.

    Each user u (``job.user``; a job without a user is its own user) holds ``tickets[u]``
    (default 1) and a *pass* p_u = GPU-rounds received / tickets.  Each round, repeatedly: the
    user with the smallest (tentative) pass that still has a job not yet considered offers its
    next job (round-robin order within the user, :class:`RoundRobin`); the job is placed if
    some type has room (type-blind, cluster order, or fastest first when
    ``heterogeneity_aware``), and then p_u += s_j / tickets[u].  A user that appears (again)
    starts at the smallest pass among the active users, so absence earns no credit.  Over time
    each backlogged user gets an equal number of GPU-rounds (weighted by tickets).  A job
    without a user is filed under the user ``"job:<id>"`` (that is the key for ``tickets``).
    Gandiva-fair's heterogeneity trading between users is not modelled.
    """

    name = "gandiva_fair"
    description = "Gandiva-fair: equal GPU-rounds per user by stride scheduling"

    def __init__(
        self,
        *,
        tickets: Mapping[str, float] | None = None,
        heterogeneity_aware: bool = False,
    ) -> None:
        super().__init__()
        self.tickets = dict(tickets or {})
        if any(t <= 0 for t in self.tickets.values()):
            raise ValueError("tickets must be positive")
        self.heterogeneity_aware = heterogeneity_aware
        self.passes: dict[str, float] = {}
        self.queue = RoundRobin()

    def reset(self) -> None:
        """Forget the previous run: counters, every user's pass and the round-robin queue."""
        super().reset()
        self.passes = {}
        self.queue = RoundRobin()

    @staticmethod
    def user_of(job: JobState) -> str:
        """``job.user``, or the job's own id (one user per job) when unset."""
        return job.user if job.user is not None else f"job:{job.id}"

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Stride-schedule users, round-robin within a user."""
        self.decisions += 1
        queues: dict[str, list[JobState]] = {}
        for job in self.queue.order(state.active):
            queues.setdefault(self.user_of(job), []).append(job)
        self.passes = {u: p for u, p in self.passes.items() if u in queues}
        floor = min(self.passes.values(), default=0.0)
        for u in queues:
            self.passes.setdefault(u, floor)
        first_arrival = {u: min(j.arrival for j in jobs) for u, jobs in queues.items()}

        free = FreeGpus(state)
        out: list[Assignment] = []
        tentative = dict(self.passes)
        while queues:
            u = min(queues, key=lambda v: (tentative[v], first_arrival[v], v))
            job = queues[u].pop(0)
            if not queues[u]:
                del queues[u]
            k = free.first_fit(job, type_preference(
                job, state, heterogeneity_aware=self.heterogeneity_aware))
            if k is None:
                continue
            free.take(job.scale_factor, k)
            out.append(Assignment(job.id, k))
            tentative[u] += job.scale_factor / self.tickets.get(u, 1.0)
        self.passes = tentative
        self.queue.served(a.job for a in out)
        return out
