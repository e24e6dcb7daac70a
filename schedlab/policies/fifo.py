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
import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Literal

import numpy as np
import numpy.typing as npt

from schedlab.errors import InputError
from schedlab.formulations.gavel.rounds import GavelRoundState
from schedlab.policies.base import Policy
from schedlab.policies.fifo_queue import FifoQueue
from schedlab.policies.state import (
    ActiveArrays,
    ActiveJobs,
    Assignment,
    ClusterState,
    JobState,
    SlotPlan,
)

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
_NO_SLOTS = np.zeros(0, dtype=np.int64)

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
        return list(active)
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

    Heterogeneity-aware (``fifo``), each round:

    1. every job that ran last round keeps its gang on the same type until it finishes (it
       never yields its GPUs, not even to an earlier job that is still waiting);
    2. the waiting jobs, in arrival order (ties by id), each start on its fastest type with
       ``scale_factor`` free GPUs.

    Type-blind (``fifo_agnostic``, the same policy as ``gavel.fifo_agnostic``): Gavel's FIFO
    (its ``FIFOPolicy`` in base mode).  The policy keeps a job -> type map; a job keeps its type
    until it finishes.  Each decision, in arrival order, the type of every job that finished
    goes first to the head of the queue when its gang fits there; then the waiting jobs, in
    arrival order, each take a type drawn uniformly (``random.Random(seed)``) among the types
    with room for the whole gang where it can run (types listed by name, as Gavel sorts
    them); the walk stops at the first job that fits nowhere (head-of-line blocking).

    Parameters:

    * ``heterogeneity_aware`` -- see above.
    * ``backfill`` -- True: a waiting job that does not fit is skipped and later jobs may start
      (Tiresias' "fit job first"); False: nothing starts after the first job that does not fit
      (strict FIFO).  Default: True for ``fifo``, False for the type-blind FIFO (Gavel's).
    * ``gavel_code_quirks`` (type-blind only) -- reproduce Gavel's code as written rather than
      as intended (docs/policies.md, FIFO): the type drawn is not used; each job goes to the
      *last* type, by name, that still has a free GPU, whether or not its gang fits there
      (the allocation over-commits that type and Gavel's round mechanism time-shares it), and
      a finished job's type goes to the head of the queue when the GPUs left before
      subtracting the later running jobs would fit it.  Implies ``mechanism="gavel"``.
    * ``mechanism`` (type-blind only) -- ``"schedlab"``: the allocation is brought up to date
      every round and every allocated job runs; ``"gavel"``: Gavel's round mechanism
      (:class:`~schedlab.formulations.gavel.rounds.GavelRoundState`: the allocation is recomputed
      only at resets at least 1920 s apart, jobs run by Gavel's priorities); the simulator
      reads this attribute and follows Gavel's step accounting too.
    * ``seed`` -- the random stream of the type draws (default: the run's seed).

    Either way FIFO never starts a later job while an earlier waiting job would have fit: when
    a job's turn comes, it takes the GPUs before any later job is looked at.
    """

    name = "fifo"
    description = "first in, first out, non-preemptive (whole gangs, fastest type first)"

    def __init__(
        self,
        *,
        heterogeneity_aware: bool = True,
        backfill: bool | None = None,
        gavel_code_quirks: bool = False,
        mechanism: Literal["schedlab", "gavel"] | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if heterogeneity_aware and (gavel_code_quirks or mechanism == "gavel"):
            raise InputError("gavel_code_quirks and mechanism='gavel' apply to the type-blind "
                             "FIFO (heterogeneity_aware=False)", field="heterogeneity_aware")
        if mechanism not in (None, "schedlab", "gavel"):
            raise InputError(f"mechanism must be 'schedlab' or 'gavel', got {mechanism!r}",
                             field="mechanism")
        if gavel_code_quirks and mechanism == "schedlab":
            raise InputError("gavel_code_quirks over-commits GPUs and needs mechanism='gavel'",
                             field="mechanism")
        self.heterogeneity_aware = heterogeneity_aware
        self.backfill = heterogeneity_aware if backfill is None else backfill
        self.gavel_code_quirks = gavel_code_quirks
        self.mechanism: Literal["schedlab", "gavel"] = (
            mechanism or ("gavel" if gavel_code_quirks else "schedlab"))
        self.seed = seed
        # the heterogeneity-aware FIFO decides from ``state.arrays`` (:meth:`_decide_arrays`)
        # and reads no JobState progress; the type-blind one reads the JobStates, and so is
        # a subclass with its own ``decide`` taken to
        self.uses_arrays = heterogeneity_aware
        self.reads_progress = not heterogeneity_aware or type(self).decide is not Fifo.decide
        self._allocation: dict[str, str] = {}  # job -> type, in allocation order
        self._rank: dict[str, int] = {}  # arrival rank of every job seen
        self._rng = random.Random(0)
        self._rounds: GavelRoundState | None = None
        # array path: the run's ActiveArrays, and per slot the Assignment last made for it
        self._arrays_of: ActiveArrays | None = None
        self._made: npt.NDArray[np.object_] = np.empty(0, dtype=object)
        self._made_type: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # -1: none
        self._forget_admission_order()
        self._forget_rounds()

    def _forget_admission_order(self) -> None:
        # array path: whether every slot admitted so far came (arrival, id)-after the one
        # before it (then every round's active jobs are in that order), checked once per slot
        self._order_arrays: ActiveArrays | None = None
        self._order_checked = -1  # the last slot checked
        self._order_last: tuple[float, str] | None = None  # its (arrival, id)
        self._order_holds = True

    def _forget_rounds(self) -> None:
        # array path: a plan that kept every running job and started none, with the columns,
        # job-set version and round it was made for (:meth:`_plan`)
        self._fixed: tuple[ActiveArrays, int, int, SlotPlan] | None = None
        # array path: (throughput per cluster type, last type) -> type preference
        self._preferences: dict[tuple[tuple[float, ...], str | None], list[str]] = {}
        self._queue: FifoQueue | None = None  # array path: running and waiting between rounds

    def reset(self) -> None:
        """Forget the previous run: counters, the type-blind FIFO's job -> type map, arrival
        ranks, random stream and round-mechanism state."""
        super().reset()
        self._allocation = {}
        self._rank = {}
        self._rng = random.Random(0)
        self._rounds = None
        self._arrays_of = None
        self._made = np.empty(0, dtype=object)
        self._made_type = np.zeros(0, dtype=np.int64)
        self._forget_admission_order()
        self._forget_rounds()

    def decide(self, state: ClusterState) -> list[Assignment]:
        """Keep the running jobs, then start waiting jobs in arrival order."""
        self.decisions += 1
        if not self.heterogeneity_aware:
            return self._decide_gavel_fifo(state)
        if state.arrays is not None:
            return self._decide_arrays(state, state.arrays)
        free = FreeGpus(state)
        out, waiting = keep_running(state, free)

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=self.heterogeneity_aware)

        out += place_in_order(waiting, free, preference, backfill=self.backfill)
        return out

    def _decide_arrays(self, state: ClusterState, arrays: ActiveArrays) -> list[Assignment]:
        """The decision of :func:`keep_running` + :func:`place_in_order`, read from the
        simulator's columns instead of the JobStates' progress: O(active) numpy work, and
        Python work only for the running jobs and the waiting jobs small enough to fit.

        The order is by (arrival, id): the active order when arrivals strictly increase, else
        a sort.  Running jobs (ran in the previous round on a cluster type) keep their type;
        when their gangs, summed per type, fit the pools, every one of them fits in
        :func:`keep_running`'s walk, else the walk is done here one job at a time.  The
        waiting jobs then go to :func:`place_in_order`; with backfill, jobs larger than the
        largest pool's free GPUs at the walk's start are left out beforehand, as that walk
        skips them too (free GPUs only decrease).  Reads of a JobState: ``id``, ``arrival``
        (ties only), ``throughput`` and ``last_accelerator`` (type preference)."""
        fixed = self._fixed
        if (fixed is not None and fixed[0] is arrays and fixed[1] == state.job_set_version
                and fixed[2] == state.round_index - 1):
            # the previous round kept every running job and started none, and no job came or
            # went since: every job it ran is running now and fits again, and every waiting
            # job failed to fit the same free GPUs -- the same plan (the same object: the
            # simulator then skips comparing it with the last one)
            self._fixed = (arrays, fixed[1], state.round_index, fixed[3])
            if self._queue is not None:
                self._queue.round_index = state.round_index
            return fixed[3]
        self._fixed = None
        queue = self._queue
        if (queue is not None and queue.arrays is arrays
                and queue.round_index == state.round_index - 1):
            plan = self._decide_from_queue(state, arrays, queue)
            if plan is not None:
                return plan
        plan, in_order = self._decide_full(state, arrays)
        self._restart_queue(state, arrays, plan, in_order)
        return plan

    def _decide_full(self, state: ClusterState, arrays: ActiveArrays) -> tuple[SlotPlan, bool]:
        """:meth:`_decide_arrays` from scratch, over every active job; also whether the
        active order was (arrival, id) order (no sort was needed)."""
        rows = arrays.rows
        active = state.active
        arrival = arrays.arrival[rows]
        order: npt.NDArray[np.int64] | None = None
        if len(rows) > 1 and not bool(np.all(arrival[1:] > arrival[:-1])) and not (
                self._admitted_in_order(active, arrays)):
            order = np.array(sorted(range(len(active)), key=lambda i: _arrival_key(active[i])),
                             dtype=np.int64)
            rows = rows[order]
        types = state.cluster.types
        counts = [state.cluster.accelerators[k].count for k in types]
        last_type = arrays.last_type[rows]
        scale = arrays.scale[rows]
        running = (arrays.last_round[rows] >= state.round_index - 1) & (last_type >= 0)
        run_at = np.flatnonzero(running)
        free = FreeGpus(state)
        run_type = last_type[run_at]
        run_slots = rows[run_at]
        used = np.bincount(run_type, weights=scale[run_at], minlength=len(types))
        position = run_at if order is None else order[run_at]
        made = self._running_assignments(arrays, run_slots, run_type, types,
                                         lambda n: active[int(position[n])].id)
        kept = np.ones(len(run_at), dtype=bool)
        fits_all = not bool(np.any(used > np.asarray(counts)))
        if fits_all:  # every running gang fits
            out: list[Assignment] = made[run_slots].tolist()
            for acc, n in zip(types, used.tolist(), strict=True):
                free.free[acc] -= int(n)
        else:  # keep_running's walk: a gang keeps its type while it fits
            out = []
            for n, (i, slot, k) in enumerate(zip(position.tolist(), run_slots.tolist(),
                                                 run_type.tolist(), strict=True)):
                size = active[i].scale_factor
                if not free.fits(size, types[k]):
                    kept[n] = False
                    continue
                free.take(size, types[k])
                out.append(made[slot])
        plan_slots = run_slots if fits_all else run_slots[kept]
        plan_types = run_type if fits_all else run_type[kept]
        most = max(free.free.values(), default=0)
        if most == 0:
            return (self._plan(state, arrays, fits_all, SlotPlan(out, plan_slots, plan_types)),
                    order is None)
        waiting_mask = ~running
        waiting_mask[run_at[~kept]] = True
        if self.backfill:
            waiting_mask &= scale <= most
        waiting = np.flatnonzero(waiting_mask)
        if order is not None:
            waiting = order[waiting]
        slot_of: dict[str, int] = {}  # the waiting jobs walked so far -> slot

        def walk() -> Iterator[JobState]:
            # in chunks: the walk usually stops long before the end of the queue
            for start in range(0, len(waiting), 64):
                chunk = waiting[start:start + 64]
                for i, slot in zip(chunk.tolist(), arrays.rows[chunk].tolist(), strict=True):
                    job = active[i]
                    slot_of[job.id] = slot
                    yield job

        cluster_types = state.cluster.types

        def preference(job: JobState) -> list[str]:
            return self._preference_of(state, job, cluster_types)

        started = place_in_order(walk(), free, preference, backfill=self.backfill)
        if not started:
            return (self._plan(state, arrays, fits_all, SlotPlan(out, plan_slots, plan_types)),
                    order is None)
        index = {k: n for n, k in enumerate(types)}
        return SlotPlan(
            out + started,
            np.concatenate([plan_slots, np.array([slot_of[a.job] for a in started],
                                                 dtype=np.int64)]),
            np.concatenate([plan_types, np.array([index[a.accelerator] for a in started],
                                                 dtype=np.int64)])), order is None

    def _made_for(self, arrays: ActiveArrays) -> tuple[npt.NDArray[np.object_], IntArray]:
        """The Assignment made for each slot (kept while its job keeps its type) and that
        type's index (-1: none yet), grown to the run's slots."""
        if arrays is not self._arrays_of or len(self._made) < len(arrays.arrival):
            if arrays is not self._arrays_of:  # a new run: slots start again
                self._arrays_of = arrays
                self._preferences = {}
                self._made = np.empty(0, dtype=object)
                self._made_type = np.zeros(0, dtype=np.int64)
            grow = len(arrays.arrival) - len(self._made)
            self._made = np.concatenate([self._made, np.full(grow, None, dtype=object)])
            self._made_type = np.concatenate([self._made_type,
                                              np.full(grow, -1, dtype=np.int64)])
        return self._made, self._made_type

    def _running_assignments(self, arrays: ActiveArrays, slots: IntArray, kinds: IntArray,
                             types: Sequence[str], id_at: Callable[[int], str]
                             ) -> npt.NDArray[np.object_]:
        """The Assignment of each slot (by slot), made once per job and type: the running
        jobs ``slots[n]``, which keep type index ``kinds[n]``, get theirs now where missing
        (``id_at(n)``: the job's id)."""
        made, made_type = self._made_for(arrays)
        stale = np.flatnonzero(made_type[slots] != kinds)
        for n in stale.tolist():
            slot = int(slots[n])
            k = int(kinds[n])
            made[slot] = Assignment(id_at(n), types[k])
            made_type[slot] = k
        return made

    def _preference_of(self, state: ClusterState, job: JobState,
                       types: list[str]) -> list[str]:
        """:func:`type_preference` of a job, made once per (throughput on each cluster type
        ``types``, last type): it depends on nothing else, and jobs of one model share it."""
        key = (tuple([job.throughput.get(k, 0.0) for k in types]), job.last_accelerator)
        best = self._preferences.get(key)
        if best is None:
            best = self._preferences[key] = type_preference(job, state,
                                                             heterogeneity_aware=True)
        return best

    def _restart_queue(self, state: ClusterState, arrays: ActiveArrays, plan: SlotPlan,
                       in_order: bool) -> None:
        """After a decision from scratch: the queue of the next round (none when the active
        order was not (arrival, id) order)."""
        rows = arrays.rows
        if not in_order or not len(rows):
            self._queue = None
            return
        queue = self._queue
        if queue is None or queue.arrays is not arrays:
            queue = self._queue = FifoQueue(arrays, len(arrays.arrival))
        slots = np.asarray(plan.slots, dtype=np.int64)
        waiting = np.ones(len(rows), dtype=bool)
        waiting[np.searchsorted(rows, slots)] = False
        queue.restart(state.round_index, slots, np.asarray(plan.types, dtype=np.int64),
                      rows[waiting], int(rows[-1]))

    def _decide_from_queue(self, state: ClusterState, arrays: ActiveArrays,
                           queue: FifoQueue) -> SlotPlan | None:
        """:meth:`_decide_full`'s plan from the queue of the round before (its module
        docstring): O(running + jobs looked at + arrivals).  None when the queue cannot
        decide this round (arrivals out of order, or a running gang that no longer fits)."""
        rows = arrays.rows
        new = queue.arrivals(rows)
        if len(new):
            arrival = arrays.arrival[new]
            before = arrays.arrival[queue.seen] if queue.seen >= 0 else -math.inf
            if not (arrival[0] > before and bool(np.all(arrival[1:] > arrival[:-1]))) and (
                    not self._admitted_in_order(state.active, arrays)):
                return None
            queue.take_in(new)
        running, running_types = queue.still_running(rows)
        types = state.cluster.types
        counts = np.array([state.cluster.accelerators[k].count for k in types])
        used = np.bincount(running_types, weights=arrays.scale[running], minlength=len(types))
        if bool(np.any(used > counts)):
            return None
        active = state.active
        if isinstance(active, ActiveJobs):
            job_of = active.at_slot
        else:

            def job_of(slot: int) -> JobState:
                job: JobState = active[int(np.searchsorted(rows, slot))]
                return job

        made = self._running_assignments(arrays, running, running_types, types,
                                         lambda n: job_of(int(running[n])).id)
        out: list[Assignment] = made[running].tolist()
        free = FreeGpus(state)
        for acc, n in zip(types, used.tolist(), strict=True):
            free.free[acc] -= int(n)
        if max(free.free.values(), default=0) == 0:
            queue.hold(state.round_index, running, running_types, _NO_SLOTS, _NO_SLOTS)
            return self._plan(state, arrays, True, SlotPlan(out, running, running_types))

        def preference(job: JobState) -> list[str]:
            return self._preference_of(state, job, types)

        started, started_at = queue.walk(free.free, preference, job_of, self.backfill)
        if not started:
            queue.hold(state.round_index, running, running_types, _NO_SLOTS, _NO_SLOTS)
            return self._plan(state, arrays, True, SlotPlan(out, running, running_types))
        index = {k: n for n, k in enumerate(types)}
        started_slots = np.array(started_at, dtype=np.int64)
        started_types = np.array([index[a.accelerator] for a in started], dtype=np.int64)
        made_type = self._made_type
        for slot, k, assignment in zip(started_at, started_types.tolist(), started,
                                       strict=True):
            made[slot] = assignment  # kept while the job keeps its type
            made_type[slot] = k
        queue.hold(state.round_index, running, running_types, started_slots, started_types)
        return SlotPlan(out + started, np.concatenate([running, started_slots]),
                        np.concatenate([running_types, started_types]))

    def _plan(self, state: ClusterState, arrays: ActiveArrays, kept_all: bool,
              plan: SlotPlan) -> SlotPlan:
        """``plan`` (no job started), remembered as a fixed point when it also kept every
        running job: then every later round's plan is the same while no job comes or goes
        (:class:`SlotPlan`, ``on_repeat``)."""
        if kept_all:
            plan.on_repeat = self._repeated
            self._fixed = (arrays, state.job_set_version, state.round_index, plan)
        return plan

    def _repeated(self, rounds: int, last_round: int) -> None:
        """The simulator ran the fixed-point plan ``rounds`` more rounds without asking:
        they count as decisions, and the plan stands as of round ``last_round``."""
        fixed = self._fixed
        if fixed is None:
            return
        self.decisions += rounds
        self._fixed = (fixed[0], fixed[1], last_round, fixed[3])
        if self._queue is not None:
            self._queue.round_index = last_round

    def _admitted_in_order(self, active: Sequence[JobState], arrays: ActiveArrays) -> bool:
        """Whether ``active`` is in (arrival, id) order although some arrivals tie (a trace
        with whole-second times): true when every slot admitted so far is (arrival,
        id)-after the slot before it, so any subsequence of the slots is too.  Each new slot
        is compared once, so a run pays O(jobs) for this, not a sort per round."""
        rows = arrays.rows
        if arrays is not self._order_arrays:  # a new run: slots start again
            self._forget_admission_order()
            self._order_arrays = arrays
        if not self._order_holds:
            return False
        last = int(rows[-1])
        if last <= self._order_checked:
            return True
        start = int(np.searchsorted(rows, self._order_checked, side="right"))
        for i, slot in zip(range(start, len(rows)), rows[start:].tolist(), strict=True):
            key = _arrival_key(active[i])
            if slot != self._order_checked + 1 or (
                    self._order_last is not None and not self._order_last < key):
                # a slot not seen here (it left before a round), or out of order: sort
                self._order_holds = False
                return False
            self._order_last = key
            self._order_checked = slot
        return True

    # the type-blind FIFO (Gavel's) -------------------------------------------------------
    def _decide_gavel_fifo(self, state: ClusterState) -> list[Assignment]:
        if state.round_index == 0:  # a new run
            self._allocation = {}
            self._rank = {}
            self._rng = random.Random(state.seed if self.seed is None else self.seed)
            self._rounds = None
            if self.mechanism == "gavel":
                types = state.cluster.types
                self._rounds = GavelRoundState(
                    types, [state.cluster.accelerators[k].count for k in types],
                    state.round_s, shuffle_types=True, seed=state.seed,
                    skip_zero_priority=True)
        rank = self._rank
        for job in state.active:
            if job.id not in rank:
                rank[job.id] = len(rank)
        rounds = self._rounds
        if rounds is None:
            self._allocate(state)
            allocation = self._allocation
            return [Assignment(job.id, allocation[job.id]) for job in state.active
                    if job.id in allocation]
        if rounds.observe(state.now, state.active):
            self._allocate(state)
            types = rounds.types
            rows = {job.id: [1.0 if self._allocation.get(job.id) == k else 0.0 for k in types]
                    for job in state.active}
            rounds.reset(state.now, rows)
        return [Assignment(job_id, k) for job_id, k in rounds.play(state.now, state.active)]

    def _allocate(self, state: ClusterState) -> None:
        """Bring the job -> type map up to date (Gavel's ``FIFOPolicy.get_allocation``)."""
        quirks = self.gavel_code_quirks
        allocation = self._allocation
        rank = self._rank
        active = {job.id: job for job in state.active}
        available = dict(state.gpus)
        for job in state.active:  # a job handed over while running keeps its type
            if job.id not in allocation and was_running(job, state) \
                    and job.last_accelerator in available:
                allocation[job.id] = job.last_accelerator
        queue = sorted((job for job in state.active if job.id not in allocation),
                       key=lambda job: rank[job.id])
        ordered = sorted(allocation, key=rank.__getitem__)
        if not quirks:  # the GPUs the running jobs hold, before any replacement
            for job_id in ordered:
                if job_id in active:
                    available[allocation[job_id]] -= active[job_id].scale_factor
        for job_id in ordered:
            k = allocation[job_id]
            if job_id in active:
                if quirks:  # Gavel subtracts a running job only when the walk reaches it
                    available[k] -= active[job_id].scale_factor
                continue
            if queue:  # a finished job's type goes to the head of the queue
                head = queue[0]
                if head.scale_factor <= available[k] and head.throughput.get(k, 0.0) > 0:
                    queue.pop(0)
                    allocation[head.id] = k
                    available[k] -= head.scale_factor
            del allocation[job_id]
        types = sorted(k for k, n in available.items() if n > 0)
        position = 0
        while position < len(queue) and types:
            job = queue[position]
            position += 1
            size = job.scale_factor
            with_room = [i for i, k in enumerate(types) if available[k] >= size
                         and (quirks or job.throughput.get(k, 0.0) > 0)]
            if not with_room:
                if self.backfill and not quirks:
                    continue
                break
            index = self._rng.randrange(len(with_room))
            k = types[-1] if quirks else types[with_room[index]]
            if job.throughput.get(k, 0.0) <= 0:
                continue
            allocation[job.id] = k
            available[k] -= size
            if available[k] == 0:
                types.pop(with_room[index])  # quirks: the drawn type, not necessarily k


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

    def reset(self) -> None:
        """Forget the previous run: counters and the random stream (the next decision starts
        it again from the seed)."""
        super().reset()
        self._rng = None
        self._rng_seed = None

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
