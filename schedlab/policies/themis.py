"""Themis (Mahajan et al., NSDI'20): finish-time fairness, worst rho first, with leases.

Finish-time fairness of job j against an exclusive 1/N share of the cluster (reference (b) of
:mod:`schedlab.fairness`: finish time in the shared cluster over finish time in the share),
evaluated at the start of a round at time ``now`` as if j ran from now on:

    T_sh[j]  = (now - arrival_j) + R_j / T[j, k*_j]
    T_id[j]  = (S_j / T[j, k_best]) * max(1, N s_j / G)
    rho_j    = T_sh[j] / T_id[j]

with R_j the remaining and S_j the total steps, T[j,k] steps/s of the job's gang on type k,
k_best its fastest type, k*_j its fastest type that has s_j GPUs not held by a lease (k_best
when none has), N the number of active jobs, s_j the scale factor and G the cluster's GPUs.
A 1/N share holds G/N GPUs; a gang of s_j > G/N GPUs can only run a fraction (G/N)/s_j of the
time there, hence the factor max(1, N s_j / G) (= max(1, N/G) for 1-GPU jobs).  rho = 1 is
exactly fair; larger is worse.

This is not the rho the reported metric measures
(:func:`schedlab.analysis.metrics.finish_time_fairness`, Shockwave's): the metric takes the
realized JCT instead of the estimate T_sh, N = every job of the trace (or the time-average
number in the system) instead of the jobs active now, and max(1, N/G) without the gang factor
s_j.  Nor is it ``gavel.finish_time_fairness``' rho, whose reference is Gavel's isolated share
(1/m of every pool; reference (a) of :mod:`schedlab.fairness`).

Rule, each round: jobs holding a lease keep their gang on the same type until the lease
ends (``lease_rounds`` rounds after it was granted); the remaining GPUs go to the other jobs
by decreasing rho, each on its fastest type with room (or cluster order when not
``heterogeneity_aware``), each new placement with a fresh lease.  Themis' partial-allocation
auction among the 1-f worst-rho jobs (and its hidden-payment efficiency) is simplified to this
greedy by rho; with work conservation the filter fraction f would not change the greedy order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.fairness import equal_share_contention, exclusive_time, rho_equal_share
from schedlab.policies.base import Policy
from schedlab.policies.fifo import (
    FreeGpus,
    best_throughput,
    place_in_order,
    runnable_types,
    type_preference,
)
from schedlab.policies.state import Assignment, ClusterState, JobState


def finish_time_fairness(job: JobState, state: ClusterState, free: dict[str, int]) -> float:
    """rho_j as in the module docstring; ``free`` = GPUs per type not held by leases.

    :func:`schedlab.fairness.rho_equal_share` of the estimated finish time T_sh, the
    :func:`~schedlab.fairness.exclusive_time` on the fastest type and the
    :func:`~schedlab.fairness.equal_share_contention` max(1, N s_j / G), N = active jobs.
    inf when the job can run on no type of the cluster.
    """
    types = state.cluster.types
    best = best_throughput(job, types)
    if best <= 0.0:
        return math.inf
    usable = [k for k in runnable_types(job, types) if free.get(k, 0) >= job.scale_factor]
    now_thr = max((job.throughput[k] for k in usable), default=best)
    total_gpus = max(state.cluster.total_gpus, 1)
    contention = equal_share_contention(len(state.active), total_gpus, job.scale_factor)
    t_shared = (state.now - job.arrival) + job.remaining_steps / now_thr
    alone = exclusive_time(job.total_steps, best)
    if alone <= 0:
        return math.inf
    return rho_equal_share(t_shared, alone, contention)


@dataclass(frozen=True)
class Lease:
    """``job`` holds a gang on ``accelerator`` through round ``until_round - 1``."""

    accelerator: str
    until_round: int


class Themis(Policy):
    """Finish-time fairness: the worst (largest) rho gets GPUs first; leases of whole rounds.

    Parameters: ``lease_rounds`` (>= 1, default 1: re-auction every round),
    ``heterogeneity_aware`` (default True: rho and placement use the fastest free type).
    """

    name = "themis"
    description = "Themis finish-time fairness: greedy by worst rho, leases of lease_rounds"

    def __init__(self, *, lease_rounds: int = 1, heterogeneity_aware: bool = True) -> None:
        super().__init__()
        if lease_rounds < 1:
            raise ValueError(f"lease_rounds must be >= 1, got {lease_rounds}")
        self.lease_rounds = lease_rounds
        self.heterogeneity_aware = heterogeneity_aware
        self.leases: dict[str, Lease] = {}

    def reset(self) -> None:
        """Forget the previous run: counters and every lease."""
        super().reset()
        self.leases = {}

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Honour live leases, then allocate by decreasing rho."""
        self.decisions += 1
        free = FreeGpus(state)
        active = {j.id: j for j in state.active}
        out: list[Assignment] = []
        leases: dict[str, Lease] = {}
        for job_id, lease in self.leases.items():
            job = active.get(job_id)
            if (job is not None and lease.until_round > state.round_index
                    and free.fits(job.scale_factor, lease.accelerator)):
                free.take(job.scale_factor, lease.accelerator)
                out.append(Assignment(job_id, lease.accelerator))
                leases[job_id] = lease
        bidders = [j for j in state.active if j.id not in leases]
        rho = {j.id: finish_time_fairness(j, state, free.free) for j in bidders}
        ranked = sorted(bidders, key=lambda j: (-rho[j.id], j.arrival, j.id))

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        granted = place_in_order(ranked, free, preference)
        for a in granted:
            leases[a.job] = Lease(a.accelerator, state.round_index + self.lease_rounds)
        self.leases = leases
        return out + granted
