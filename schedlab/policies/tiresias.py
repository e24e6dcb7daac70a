"""Tiresias (Gu et al., NSDI'19): two-dimensional age-based scheduling, 2D-LAS and 2D-Gittins.

A job's *age* is its two-dimensional attained service

    a_j = sum over the rounds it ran of (GPUs x seconds)   (GPU-s; ``job.attained_service_s``)

Discretized priority queues Q_0 (highest) .. Q_{K-1} with thresholds T_1 < ... < T_{K-1}
(GPU-s): a job is in queue q(a) = #{i : a >= T_i}, so it is demoted to Q_i when its attained
service reaches T_i.

**Queues are lists, kept as Tiresias' simulator keeps them** (``dlas_sim_jobs`` in its
``simulator/run_sim.py``; ``JOBS.queues`` in ``simulator/jobs.py``):

* a new job is appended to the tail of its queue (Q_0 for a job that never ran); a job that is
  demoted or promoted is removed from its queue and appended to the tail of the new one;
* every round the queues are walked highest first, each in list order, and a job runs if its
  whole gang fits (backfill: a gang that does not fit is skipped, later jobs may run);
* after the walk, in every queue the jobs that got GPUs are moved ahead of those that did not,
  each group keeping its order.

So within a queue a job that started keeps its priority over the jobs that were waiting (a
waiting gang never preempts a running job *of its own queue*); only a job of a higher queue
preempts it.  Within one round, arrivals are appended first (by arrival, ties by id), then the
demoted / promoted jobs (by arrival), as ``dlas_sim_jobs`` does for one event.  The order
inside a queue is then

* **2D-LAS** (no job information): the list order above (it is *not* re-sorted by arrival);
* **2D-Gittins** (partial information: the distribution of job GPU time): the highest Gittins
  index first, ties by arrival, then list order (the list is sorted stably every round, as
  Tiresias sorts ``queue`` by (rank, submit time)).

Tiresias is type-blind: types in cluster order (the last type first, see
:func:`~schedlab.policies.fifo.type_preference`) unless ``heterogeneity_aware``.

**Thresholds.**  The default is one threshold at 3200 GPU-s (two queues), which the first
version of this module (commit a22bd19) took as the paper's two-queue default; no other reason
is recorded.  Tiresias' code (``JOBS.num_queue = 3``, ``queue_limit = [3250, 7200, 18000]``
in ``simulator/jobs.py``, the last limit unused with three queues) runs three queues at 3250
and 7200 GPU-s: ``thresholds_gpu_s="tiresias_code"`` selects those
(:data:`TIRESIAS_CODE_THRESHOLDS_GPU_S`).

**Starvation knob** (the paper's PROMOTEKNOB, ``starvation_factor`` = P): a job below Q_0
that has waited at least P x its executed time (wall s) since its last promotion is promoted to
Q_0.  Promotion resets the job's clocks, as in Tiresias' simulator: from then on the queue,
the Gittins index, the executed time and the waiting time count only service and time since the
promotion (so the job is demoted again after another T_1 GPU-s).

The queue lists live in the policy object: a decision for a round index not after the last
one (a new simulation) starts them afresh.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schedlab.policies.base import Policy
from schedlab.policies.fifo import (
    FreeGpus,
    by_arrival,
    place_in_order,
    type_preference,
    was_running,
)
from schedlab.policies.state import Assignment, ClusterState, JobState

logger = logging.getLogger(__name__)

#: The paper's two-queue default threshold (GPU-s), this module's default.
DEFAULT_THRESHOLDS_GPU_S: tuple[float, ...] = (3200.0,)

#: The thresholds of Tiresias' own simulator: three queues, ``queue_limit = [3250, 7200, ...]``
#: with ``num_queue = 3`` (``simulator/jobs.py``).
TIRESIAS_CODE_THRESHOLDS_GPU_S: tuple[float, ...] = (3250.0, 7200.0)

#: Names accepted for ``thresholds_gpu_s``.
THRESHOLD_PRESETS: dict[str, tuple[float, ...]] = {
    "paper": DEFAULT_THRESHOLDS_GPU_S,
    "tiresias_code": TIRESIAS_CODE_THRESHOLDS_GPU_S,
}

#: 2D-Gittins' distribution before any job has finished: log-uniform on 10 .. 10^6 GPU-s
#: (11 equally likely points 10^1, 10^1.5, ..., 10^6), a heavy-tailed guess at DL job sizes.
DEFAULT_PRIOR_SERVICE_GPU_S: tuple[float, ...] = tuple(10.0 ** (1.0 + 0.5 * i) for i in range(11))


def gittins_index(service_samples: Sequence[float] | np.ndarray, attained: float) -> float:
    """Gittins index of a job that has attained ``attained`` GPU-s.

    With S the total service of a job, drawn from the empirical distribution of
    ``service_samples`` (each sample equally likely),

        G(a) = max_{Delta > 0}  P(S - a <= Delta | S > a) / E[min(S - a, Delta) | S > a]

    (the probability of finishing within the next Delta GPU-s per GPU-s invested).  For an
    empirical distribution the numerator jumps only at the support points and the denominator
    is continuous and increasing, so the maximum is at some Delta = s - a with s a sample > a;
    those are the Delta searched.  G(a) = 0 when no sample exceeds a (the job has outlived every
    job seen, as in Tiresias' code).

    Example, samples {1, 2, 10}:

    * a = 0: Delta = 1: (1/3) / 1 = 1/3;  Delta = 2: (2/3) / ((1+2+2)/3) = 2/5;
      Delta = 10: 1 / (13/3) = 3/13.  G(0) = 2/5.
    * a = 1.5: S > 1.5 leaves {2, 10}.  Delta = 0.5: (1/2) / 0.5 = 1;
      Delta = 8.5: 1 / ((0.5+8.5)/2) = 2/9.  G(1.5) = 1.
    """
    samples = np.sort(np.asarray(service_samples, dtype=float))
    rest = samples[samples > attained] - attained  # S - a given S > a, sorted
    m = rest.size
    if m == 0:
        return 0.0
    # For Delta = rest[i]:  P = (i+1)/m  and  E = (sum_{k<=i} rest[k] + (m-1-i) rest[i]) / m.
    i = np.arange(m)
    expected = (np.cumsum(rest) + (m - 1 - i) * rest) / m
    prob = (i + 1) / m
    return float(np.max(prob / expected))


@dataclass(frozen=True)
class _Clock:
    """A job's clocks at its last promotion (time s, attained GPU-s, executed s)."""

    time: float
    attained: float
    executed: float


class Tiresias(Policy):
    """Tiresias' discretized 2D-LAS (``gittins=False``) or 2D-Gittins (``gittins=True``).

    Parameters:

    * ``thresholds_gpu_s`` -- queue thresholds T_1 < ... < T_{K-1} in GPU-s (K queues), or a
      name of :data:`THRESHOLD_PRESETS`: ``"paper"`` = (3200,), the default (two queues);
      ``"tiresias_code"`` = (3250, 7200), the three queues of Tiresias' simulator.
    * ``starvation_factor`` -- PROMOTEKNOB P; None or 0 disables promotion.
    * ``gittins`` -- order each queue by the Gittins index instead of list order.
    * ``prior_service_gpu_s`` -- 2D-Gittins' service distribution until ``min_finished`` jobs
      have finished (default :data:`DEFAULT_PRIOR_SERVICE_GPU_S`); afterwards the empirical
      distribution of ``attained_service_s`` of the finished jobs is used alone.
    * ``heterogeneity_aware`` -- place on the fastest type with room (default False: Tiresias
      is type-blind).
    """

    name = "tiresias"
    description = ("Tiresias discretized 2D-LAS: attained GPU-s queues, each a list kept as "
                   "Tiresias does (tail insertion, jobs that got GPUs first)")

    def __init__(
        self,
        *,
        thresholds_gpu_s: Sequence[float] | str = DEFAULT_THRESHOLDS_GPU_S,
        starvation_factor: float | None = None,
        gittins: bool = False,
        prior_service_gpu_s: Sequence[float] | None = None,
        min_finished: int = 1,
        heterogeneity_aware: bool = False,
    ) -> None:
        super().__init__()
        if isinstance(thresholds_gpu_s, str):
            if thresholds_gpu_s not in THRESHOLD_PRESETS:
                raise ValueError(f"thresholds_gpu_s: unknown preset {thresholds_gpu_s!r} "
                                 f"(known: {', '.join(THRESHOLD_PRESETS)})")
            thresholds_gpu_s = THRESHOLD_PRESETS[thresholds_gpu_s]
        thresholds = [float(t) for t in thresholds_gpu_s]
        if any(not math.isfinite(t) or t <= 0 for t in thresholds) or any(
            b <= a for a, b in itertools.pairwise(thresholds)
        ):
            raise ValueError(
                f"thresholds_gpu_s must be positive, finite and increasing, got {thresholds}"
            )
        if starvation_factor is not None and starvation_factor < 0:
            raise ValueError(f"starvation_factor must be >= 0, got {starvation_factor}")
        prior = list(DEFAULT_PRIOR_SERVICE_GPU_S if prior_service_gpu_s is None
                     else prior_service_gpu_s)
        if not prior or any(s <= 0 for s in prior):
            raise ValueError("prior_service_gpu_s needs at least one positive sample")
        self.thresholds_gpu_s = thresholds
        self.starvation_factor = starvation_factor
        self.gittins = gittins
        self.prior_service_gpu_s = prior
        self.min_finished = max(int(min_finished), 1)
        self.heterogeneity_aware = heterogeneity_aware
        self._promoted: dict[str, _Clock] = {}
        self._dist_cache: tuple[int, np.ndarray] | None = None
        # Q_0 .. Q_{K-1} as lists of job ids, and each listed job's queue
        self._queues: list[list[str]] = [[] for _ in range(len(thresholds) + 1)]
        self._queue_of_id: dict[str, int] = {}
        self._last_round: int | None = None
        if gittins:
            self.name = "tiresias_gittins"
            self.description = ("Tiresias discretized 2D-Gittins: attained GPU-s queues, "
                                "Gittins index within a queue")

    def reset(self) -> None:
        """Forget the previous run: counters, the queue lists, promotions and the cached
        service distribution."""
        super().reset()
        self._promoted = {}
        self._dist_cache = None
        self._queues = [[] for _ in range(len(self.thresholds_gpu_s) + 1)]
        self._queue_of_id = {}
        self._last_round = None

    @property
    def queues(self) -> list[list[str]]:
        """The queue lists Q_0 .. Q_{K-1} (job ids, in order) after the last decision."""
        return [list(q) for q in self._queues]

    # ------------------------------------------------------------------ per-job quantities
    def attained_since_promotion(self, job: JobState) -> float:
        """a_j minus the attained service at its last promotion (GPU-s)."""
        clock = self._promoted.get(job.id)
        return job.attained_service_s - (clock.attained if clock else 0.0)

    def queue_of(self, job: JobState) -> int:
        """q = #{i : a >= T_i}, with a the attained service since the last promotion."""
        return bisect.bisect_right(self.thresholds_gpu_s, self.attained_since_promotion(job))

    def waiting_s(self, job: JobState, now: float) -> tuple[float, float]:
        """(executed s, waiting s) since the last promotion, or since the first start.

        waiting = (now - t_ref) - executed, with t_ref the promotion time or the job's first
        start (waiting before the first start does not count, as in Tiresias).
        """
        clock = self._promoted.get(job.id)
        executed = job.executed_s - (clock.executed if clock else 0.0)
        t_ref = clock.time if clock else job.start_time
        if t_ref is None:
            return executed, 0.0
        return executed, max(now - t_ref - executed, 0.0)

    def service_distribution(self, state: ClusterState) -> np.ndarray:
        """Samples of total GPU-s: the finished jobs', or the prior until enough finished."""
        n = len(state.finished)
        if n < self.min_finished:
            return np.asarray(self.prior_service_gpu_s, dtype=float)
        if self._dist_cache is None or self._dist_cache[0] != n:
            samples = np.sort([j.attained_service_s for j in state.finished])
            self._dist_cache = (n, samples)
        return self._dist_cache[1]

    # ------------------------------------------------------------------ the rule
    def _promote_starving(self, state: ClusterState) -> None:
        active = {j.id for j in state.active}
        for job_id in [i for i in self._promoted if i not in active]:
            del self._promoted[job_id]
        if not self.starvation_factor:
            return
        for job in state.active:
            if self.queue_of(job) == 0:
                continue
            executed, waiting = self.waiting_s(job, state.now)
            if executed > 0 and waiting >= self.starvation_factor * executed:
                logger.debug("tiresias: job %s waited %.0f s >= %g x %.0f s, promoted to Q0",
                             job.id, waiting, self.starvation_factor, executed)
                self._promoted[job.id] = _Clock(state.now, job.attained_service_s,
                                                job.executed_s)

    def _update_queues(self, state: ClusterState) -> None:
        """Bring the queue lists up to ``state``: drop finished jobs, append new jobs to the
        tail of their queue, then move every job whose queue changed (demotion, promotion) to
        the tail of its new queue."""
        active = {j.id for j in state.active}
        if any(job_id not in active for job_id in self._queue_of_id):
            self._queues = [[i for i in q if i in active] for q in self._queues]
            self._queue_of_id = {i: q for i, q in self._queue_of_id.items() if i in active}
        in_order = by_arrival(state)
        known = [j for j in in_order if j.id in self._queue_of_id]
        # New jobs, by arrival.  (A job handed over mid-life that ran last round goes first,
        # as if it had been partitioned ahead of the waiting ones.)
        new = sorted((j for j in in_order if j.id not in self._queue_of_id),
                     key=lambda j: not was_running(j, state))
        for job in new:
            q = self.queue_of(job)
            self._queues[q].append(job.id)
            self._queue_of_id[job.id] = q
        for job in known:
            old, q = self._queue_of_id[job.id], self.queue_of(job)
            if q != old:
                logger.debug("tiresias: job %s moves from Q%d to the tail of Q%d", job.id,
                             old, q)
                self._queues[old].remove(job.id)
                self._queues[q].append(job.id)
                self._queue_of_id[job.id] = q

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Promote starving jobs, update the queue lists, walk them (highest queue first, each
        in list order or by Gittins index), place greedily with backfill, then move the jobs
        that got GPUs ahead of the others in every queue."""
        self.decisions += 1
        if self._last_round is not None and state.round_index <= self._last_round:
            logger.debug("tiresias: round %d after round %d, a new run: queues start afresh",
                         state.round_index, self._last_round)
            self._queues = [[] for _ in self._queues]
            self._queue_of_id.clear()
            self._promoted.clear()
        self._last_round = state.round_index
        self._promote_starving(state)
        self._update_queues(state)
        jobs = {j.id: j for j in state.active}
        if self.gittins:
            samples = self.service_distribution(state)
            index = {j.id: gittins_index(samples, self.attained_since_promotion(j))
                     for j in state.active}
            for queue in self._queues:  # stable: full ties keep the list order
                queue.sort(key=lambda i: (-index[i], jobs[i].arrival))
        ranked = [jobs[i] for queue in self._queues for i in queue]

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        plan = place_in_order(ranked, FreeGpus(state), preference)
        placed = {a.job for a in plan}
        self._queues = [[i for i in q if i in placed] + [i for i in q if i not in placed]
                        for q in self._queues]
        return plan
