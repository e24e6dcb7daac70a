"""FIFO and random-order baselines, and the greedy gang placement every list policy shares.

A *list policy* ranks the active jobs and walks the ranking: a job runs this round, as one gang
of ``scale_factor`` GPUs on one accelerator type, if some type it can run on still has that
many free GPUs.  The helpers here do that walk (:func:`place_in_order`) over a per-type GPU
budget (:class:`FreeGpus`); each policy module only supplies its ranking.

Type preference (:func:`type_preference`):

* heterogeneity-aware: the job's types by throughput T[j,k] (steps/s), fastest first;
* type-blind: the job's types in cluster order, the type it last ran on first (a type-blind
  policy sees no difference between types, so it does not move a job for nothing).

Either way, only types where the job can run (T[j,k] > 0) are candidates: that is feasibility,
not performance knowledge.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise

from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment, ClusterState, JobState

logger = logging.getLogger(__name__)

#: ``preference(job) -> accelerator types to try, best first``.
Preference = Callable[[JobState], list[str]]


# ---------------------------------------------------------------------------- shared helpers


def runnable_types(job: JobState, types: Sequence[str]) -> list[str]:
    """The cluster's types (cluster order) on which ``job`` can run: T[j,k] > 0."""
    return [k for k in types if job.throughput.get(k, 0.0) > 0.0]


def best_throughput(job: JobState, types: Sequence[str]) -> float:
    """max_k T[j,k] over the cluster's types (steps/s); 0 when the job runs nowhere."""
    return max((job.throughput.get(k, 0.0) for k in types), default=0.0)


def was_running(job: JobState, state: ClusterState) -> bool:
    """True when ``job`` ran in the round just before ``state.round_index``."""
    return (
        job.last_round_run is not None
        and job.last_accelerator is not None
        and job.last_round_run >= state.round_index - 1
    )


def _arrival_key(job: JobState) -> tuple[float, str]:
    return (job.arrival, job.id)


def by_arrival(state: ClusterState) -> list[JobState]:
    """The active jobs sorted by (arrival, id).

    ``state.active`` is in admission order, which is arrival order; it differs from (arrival,
    id) only among jobs with equal arrivals, so the sort is skipped when the list is already
    in order (one linear pass)."""
    active = state.active
    key = _arrival_key
    if all(key(a) < key(b) for a, b in pairwise(active)):
        return active
    return sorted(active, key=key)


def keep_running(state: ClusterState, free: FreeGpus) -> tuple[list[Assignment], list[JobState]]:
    """Non-preemption: every job that ran last round keeps its type while its gang still fits
    (taken from ``free``).  Returns (their assignments, the other jobs), in arrival order."""
    out: list[Assignment] = []
    waiting: list[JobState] = []
    for job in by_arrival(state):
        k = job.last_accelerator
        if was_running(job, state) and k is not None and free.fits(job.scale_factor, k):
            free.take(job.scale_factor, k)
            out.append(Assignment(job.id, k))
        else:
            waiting.append(job)
    return out, waiting


def type_preference(
    job: JobState, state: ClusterState, *, heterogeneity_aware: bool
) -> list[str]:
    """Types to try for ``job``, best first (see the module docstring).

    Heterogeneity-aware: sort by -T[j,k]; ties go to the type it last ran on, then cluster
    order.  Type-blind: the type it last ran on first, then cluster order.
    """
    types = runnable_types(job, state.cluster.types)
    last = job.last_accelerator
    if heterogeneity_aware:
        position = {k: i for i, k in enumerate(types)}
        return sorted(types, key=lambda k: (-job.throughput[k], k != last, position[k]))
    if last in types:
        return [last, *(k for k in types if k != last)]
    return types


class FreeGpus:
    """Free GPUs per accelerator type while a round is being decided."""

    def __init__(self, state: ClusterState) -> None:
        self.free: dict[str, int] = dict(state.gpus)

    def fits(self, gpus: int, accelerator: str) -> bool:
        """True when ``accelerator`` has at least ``gpus`` free GPUs."""
        return self.free.get(accelerator, 0) >= gpus

    def take(self, gpus: int, accelerator: str) -> None:
        """Reserve ``gpus`` GPUs of ``accelerator``."""
        if not self.fits(gpus, accelerator):
            raise ValueError(f"{gpus} GPUs of {accelerator} requested, {self.free} free")
        self.free[accelerator] -= gpus

    def give(self, gpus: int, accelerator: str) -> None:
        """Release ``gpus`` GPUs of ``accelerator``."""
        self.free[accelerator] += gpus

    def first_fit(self, job: JobState, preference: Iterable[str]) -> str | None:
        """The first type of ``preference`` with room for the whole gang, or None."""
        for k in preference:
            if self.fits(job.scale_factor, k):
                return k
        return None


def place_in_order(
    ranked: Iterable[JobState],
    free: FreeGpus,
    preference: Preference,
    *,
    backfill: bool = True,
) -> list[Assignment]:
    """Greedy list scheduling: each job in rank order gets its first preferred type with room.

    With ``backfill`` a job that does not fit is skipped and the walk goes on (a later, smaller
    job may use the GPUs); without it the walk stops at the first job that does not fit
    (head-of-line blocking).  ``free`` is updated in place.
    """
    out: list[Assignment] = []
    most = max(free.free.values(), default=0)  # a gang larger than this fits nowhere
    for job in ranked:
        if job.scale_factor > most:  # fits no type: same outcome as an empty first_fit
            if not backfill or most == 0:  # (with no GPU left, no later job fits either)
                break
            continue
        k = free.first_fit(job, preference(job))
        if k is None:
            if not backfill:
                break
            continue
        free.take(job.scale_factor, k)
        out.append(Assignment(job.id, k))
        most = max(free.free.values())
    return out


# ---------------------------------------------------------------------------- policies


class Fifo(Policy):
    """First in, first out, non-preemptive.

    Rule, each round:

    1. every job that ran last round keeps its gang on the same type until it finishes (it
       never yields its GPUs, not even to an earlier job that is still waiting);
    2. the waiting jobs, in arrival order (ties by id), each start on the first type of its
       preference with ``scale_factor`` free GPUs.

    Parameters:

    * ``heterogeneity_aware`` -- True: a job starts on its fastest type with room (``fifo``);
      False: types in cluster order (``fifo_agnostic``, type-blind).
    * ``backfill`` -- True: a waiting job that does not fit is skipped and later jobs may start
      (Tiresias' "fit job first"); False: nothing starts after the first job that does not fit
      (strict FIFO).

    Either way FIFO never starts a later job while an earlier waiting job would have fit: when
    a job's turn comes, it takes the GPUs before any later job is looked at.
    """

    name = "fifo"
    description = "first in, first out, non-preemptive (whole gangs, fastest type first)"

    def __init__(self, *, heterogeneity_aware: bool = True, backfill: bool = True) -> None:
        super().__init__()
        self.heterogeneity_aware = heterogeneity_aware
        self.backfill = backfill

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Keep the running jobs, then start waiting jobs in arrival order."""
        self.decisions += 1
        free = FreeGpus(state)
        out, waiting = keep_running(state, free)

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        out += place_in_order(waiting, free, preference, backfill=self.backfill)
        return out


class RandomOrder(Policy):
    """Sanity baseline: a fresh random permutation of the active jobs every round.

    Jobs are then placed greedily (with backfill) in that order; preemptive (last round's jobs
    have no claim).  Parameters: ``seed`` for the generator (default None: the run's seed,
    ``ClusterState.seed``, so every policy of a comparison sees the same stream for the same
    run seed), ``heterogeneity_aware`` as in :class:`Fifo` (default type-blind).
    """

    name = "random"
    description = "random order every round, greedy gang placement (sanity baseline)"

    def __init__(self, *, seed: int | None = None, heterogeneity_aware: bool = False) -> None:
        super().__init__()
        self.seed = seed
        self.heterogeneity_aware = heterogeneity_aware
        self._rng: random.Random | None = None
        self._rng_seed: int | None = None

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Shuffle, then place greedily."""
        self.decisions += 1
        seed = state.seed if self.seed is None else self.seed
        if self._rng is None or self._rng_seed != seed:
            self._rng, self._rng_seed = random.Random(seed), seed
        ranked = list(by_arrival(state))
        self._rng.shuffle(ranked)

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        return place_in_order(ranked, FreeGpus(state), preference)
