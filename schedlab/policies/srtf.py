"""Shortest remaining time first (SRTF), preemptive every round."""

from __future__ import annotations

import math

from schedlab.policies.base import Policy
from schedlab.policies.fifo import FreeGpus, best_throughput, place_in_order, type_preference
from schedlab.policies.state import Assignment, ClusterState, JobState


def remaining_time_s(job: JobState, types: list[str]) -> float:
    """Remaining time at full speed: R_j / max_k T[j,k] (s); inf when the job runs nowhere."""
    best = best_throughput(job, types)
    return job.remaining_steps / best if best > 0.0 else math.inf


class Srtf(Policy):
    """Shortest remaining time first.

    Rule, each round: rank the active jobs by remaining time

        rem_j = R_j / max_k T[j,k]        (s; R_j remaining steps, T[j,k] steps/s)

    ascending (ties: arrival, then id) and place them greedily as whole gangs (with backfill).
    Preemptive: a running job whose rank no longer earns it GPUs is stopped.

    The ranking always uses the best throughput (SRTF needs a duration estimate).  Parameter
    ``heterogeneity_aware``: True places each job on its fastest type with room (``srtf``);
    False takes types in cluster order (``srtf_agnostic``).
    """

    name = "srtf"
    description = "shortest remaining time first (remaining steps / best throughput), preemptive"

    def __init__(self, *, heterogeneity_aware: bool = True) -> None:
        super().__init__()
        self.heterogeneity_aware = heterogeneity_aware

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Rank by remaining time, place greedily."""
        self.decisions += 1
        types = state.cluster.types
        ranked = sorted(state.active, key=lambda j: (remaining_time_s(j, types), j.arrival, j.id))

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        return place_in_order(ranked, FreeGpus(state), preference)
