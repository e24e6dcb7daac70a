r"""Gavel's optimization policies as online policies: solve the LP, realise it in rounds.

:class:`GavelPolicy` turns the simulator's state into the input of a Gavel formulation
(``gavel.max_min_fairness``, ``gavel.min_makespan``, ...), solves it when the job set changed
(Gavel's rule; or every ``resolve_every`` rounds as well), and realises the allocation X[j,k]
round by round with the round mechanism's priority rule
(:func:`schedlab.formulations.gavel.rounds.choose_by_priority`):

.. math::

    \text{priority}[j,k] = \frac{X_{jk}}{f_{jk}}, \qquad
    f_{jk} = \frac{\text{seconds } j \text{ ran on } k \text{ since it arrived}}
                  {\text{seconds since it arrived}}

with the times read from the simulator's state (``JobState.time_on``), so priorities carry
across re-solves: a job that was under-served before a re-solve stays first in line after it.
Ties go to the larger deficit X age - received, then the larger X, then arrival order.  With
``work_conserving=True`` (default, as Gavel's simulator) GPUs an allocation leaves idle go to
the remaining runnable jobs in the same order (X = 0 last); ``False`` runs only jobs behind
their share.

Two paths compute X:

* **array** (:func:`fast_path_of`): the LP lives in a persistent
  :class:`~schedlab.solvers.matrix.MatrixModel` of the chosen solver (HiGHS by default) that
  only changes where its data changed, and is re-solved from its last basis.

  - ``gavel.max_min_fairness`` (and ``_agnostic``; ``_packed`` while no two active jobs have
    co-location throughputs): :class:`~schedlab.policies.gavel_class_lp.MaxMinClassLP`.  Jobs
    with the same scale factor, weight and throughputs form a class; by symmetry an optimum
    exists in which they get equal shares, so the LP over classes (one column per class and
    type, the class size m_c in the rows) has the same optimum as the per-job LP
    (``docs/fast_paths.md`` gives the argument).  A job that arrives into a known class
    changes two numbers of the model.
  - ``gavel.max_sum_throughput`` and its variants (``_agnostic``, ``_normalized``,
    ``gavel.min_cost``, ``gavel.min_cost_normalized``): the same classes in
    :class:`~schedlab.policies.gavel_class_lp.SumThroughputClassLP`.  (The adapter's jobs carry
    no SLOs: :class:`~schedlab.policies.state.JobState` has none.)
  - ``gavel.min_makespan`` and ``gavel.finish_time_fairness`` (and ``_agnostic``): their rows
    read each job's remaining steps (and time in system and isolated time), so the model stays
    per job (:mod:`schedlab.policies.gavel_job_lp`): arriving jobs add rows and columns,
    leaving ones are retired in place, the per-job coefficients are changed in place;
    finish-time fairness searches min max rho from the last decision's value with
    Dinkelbach-type steps instead of plain bisection (same bracket, test and tolerance).
  - ``gavel.hierarchical`` (and ``_agnostic``; fairness inside entities; ``_fifo`` while no
    two active jobs share an entity, :meth:`GavelPolicy._shared_entity`): the same model
    with floor rows over classes of jobs (:mod:`schedlab.policies.gavel_water_filling`): the
    reference's water-filling levels (the unique leximin values) and floors, each level's
    bottlenecks named by the level LP's duals instead of one LP per group.
  - ``gavel.fifo`` (no LP): the reference's walk on the adapter's arrays
    (:func:`~schedlab.policies.gavel_fifo.fifo_allocation`).

  Every array path reaches the reference model's optimum (``tests/test_gavel_policy_fast.py``
  checks every decision of simulated runs); where that optimum is not unique (identical jobs,
  degenerate LPs) the allocation can be another optimal one, so per-job JCTs can differ from
  the generic path's (``docs/simulator.md``, "Gavel policies at simulator speed").
* **generic** (``method="generic"``, ``gavel.hierarchical_fifo`` at decisions where two
  active jobs share an entity, and the space-sharing variants other than max-min
  fairness's):
  an :class:`~schedlab.instance.Instance` of the active jobs is built (remaining steps,
  ``time_in_system_s`` = now - arrival, ``isolated_time_s`` = steps done / T_iso, entity = the
  job's ``user``) and solved with the formulation's own ``solve`` -- the reference model,
  slow but exact.
"""

from __future__ import annotations

import logging
import math
import time
from operator import attrgetter
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from schedlab.errors import InputError, SolverError, UnknownNameError
from schedlab.formulations.gavel import models as gavel_formulations
from schedlab.formulations.gavel.data import GavelData, isolated_share
from schedlab.formulations.gavel.hierarchical import Hierarchical
from schedlab.formulations.gavel.rounds import (
    GAVEL_RESET_INTERVAL_S,
    GavelRoundState,
    PriorityCandidates,
    choose_by_priority,
    round_kernel,
)
from schedlab.instance import Cluster, Instance, Job, Params
from schedlab.policies.base import Policy
from schedlab.policies.gavel_class_lp import MaxMinClassLP, SumThroughputClassLP
from schedlab.policies.gavel_fifo import fifo_allocation
from schedlab.policies.gavel_job_lp import FinishTimeSearch, MakespanLP
from schedlab.policies.gavel_water_filling import WaterFilling
from schedlab.policies.state import (
    ActiveArrays,
    Assignment,
    ClusterState,
    JobState,
    SlotPlan,
)
from schedlab.registry import formulations
from schedlab.solvers import LpMethod, SolverOptions

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Method = Literal["auto", "array", "generic"]
Mechanism = Literal["schedlab", "gavel"]

_job_id = attrgetter("id")
_thr_version = attrgetter("throughput_version")

#: The persistent model an array path keeps: the class LPs of max-min fairness and of the
#: sum of throughputs, the per-job LPs of min makespan and finish-time fairness, the class
#: LP of the hierarchical water-filling; ``fifo`` keeps none (no LP).
FastPath = Literal["max_min", "sum_throughput", "makespan", "finish_time", "water_filling",
                   "fifo"]


def fast_path_of(cls: type, kwargs: dict[str, Any]) -> FastPath | None:
    """The array path of a Gavel formulation class and its registry keyword arguments, or
    None (the generic path only).  Space-sharing max-min fairness takes the class LP while no
    two active jobs have co-location throughputs (:meth:`GavelPolicy._has_pairs`); the other
    space-sharing variants have none.  ``gavel.fifo`` (no LP) has the array walk of
    :func:`~schedlab.policies.gavel_fifo.fifo_allocation`."""
    if issubclass(cls, gavel_formulations.Fifo):
        return "fifo"
    if issubclass(cls, gavel_formulations.MaxMinFairness):
        return "max_min"
    if kwargs.get("space_sharing", False):
        return None
    if issubclass(cls, gavel_formulations.MaxSumThroughput):
        return "sum_throughput"
    if issubclass(cls, gavel_formulations.MinMakespan):
        return "makespan"
    if issubclass(cls, gavel_formulations.FinishTimeFairness):
        return "finish_time"
    if issubclass(cls, Hierarchical) and kwargs.get("within") in (None, "fairness", "fifo"):
        return "water_filling"  # FIFO inside entities: while every entity has one job
    return None


# ------------------------------------------------------------------------ the adapter


class GavelPolicy(Policy):
    """A Gavel formulation as an online policy (module docstring).

    Args:
        formulation: a registered Gavel formulation name (``schedlab formulations``).
        resolve_every: None re-solves only when the job set changed (Gavel); N also re-solves
            every N rounds (useful for formulations that depend on remaining work).
        work_conserving: give GPUs the allocation leaves idle to other runnable jobs.
        method: ``auto`` (the array LP where it exists, else the generic path), ``array``
            (error when there is none) or ``generic`` (Instance + the formulation's solve).
        min_share: shares X <= this count as 0 (LP noise).
        solver, time_limit_s, threads, lp_method: solver options of both paths (the array
            LP is a :class:`~schedlab.solvers.matrix.MatrixModel` of ``solver``; it takes no
            time limit).
        mechanism: ``"schedlab"`` (module docstring) or ``"gavel"``: Gavel's own round
            mechanism (:class:`~schedlab.formulations.gavel.rounds.GavelRoundState`: allocation
            recomputed only at resets at least 1920 s apart, priorities from the time received
            since the last reset, per-type queues); :func:`schedlab.simulator.simulate` then
            also follows Gavel's step accounting (it reads this attribute).  No space sharing.
        reset_interval_s: under ``mechanism="gavel"``, the least time between allocation
            resets, s: Gavel's 1920 s (default); Shockwave's copy of Gavel's scheduler
            defaults to :data:`~schedlab.formulations.gavel.rounds.SHOCKWAVE_RESET_INTERVAL_S`
            = 1000 s (``minimum_time_between_allocation_resets``, scheduler.py:101 at 8a44f4a).
        reset_on_throughput_change: under ``mechanism="gavel"``, whether a job's new
            throughput (a new batch size) makes an allocation reset due, as an arrival does
            (default True); Shockwave's scheduler resets only on arrivals and finishes
            (:class:`~schedlab.formulations.gavel.rounds.GavelRoundState`).
    """

    description = "Gavel formulation solved on each job-set change, realised by priorities"
    #: a round of single jobs is returned as a SlotPlan (its slots from ``state.arrays``)
    uses_arrays = True

    def __init__(
        self,
        formulation: str = "gavel.max_min_fairness",
        *,
        resolve_every: int | None = None,
        work_conserving: bool = True,
        method: Method = "auto",
        min_share: float = 1e-6,
        solver: str = "highs",
        time_limit_s: float | None = None,
        threads: int | None = None,
        lp_method: LpMethod = "auto",
        mechanism: Mechanism = "schedlab",
        reset_interval_s: float = GAVEL_RESET_INTERVAL_S,
        reset_on_throughput_change: bool = True,
    ) -> None:
        super().__init__()
        entries = formulations()
        entry = entries.get(formulation)
        if entry is None:
            known = ", ".join(n for n, e in entries.items()
                              if issubclass(e.cls, gavel_formulations.GavelMethod))
            raise UnknownNameError(f"unknown Gavel formulation {formulation!r} (known: {known})",
                                   field="formulation")
        if not issubclass(entry.cls, gavel_formulations.GavelMethod):
            raise InputError(f"{formulation!r} is not a Gavel formulation", field="formulation")
        if resolve_every is not None and resolve_every < 1:
            raise InputError(f"resolve_every must be >= 1, got {resolve_every}",
                             field="resolve_every")
        if method not in ("auto", "array", "generic"):
            raise InputError(f"method must be auto, array or generic, got {method!r}",
                             field="method")
        has_array = fast_path_of(entry.cls, entry.kwargs) is not None
        if method == "array" and not has_array:
            raise InputError(f"{formulation} has no array path; use method='generic'",
                             field="method")
        if mechanism not in ("schedlab", "gavel"):
            raise InputError(f"mechanism must be 'schedlab' or 'gavel', got {mechanism!r}",
                             field="mechanism")
        if mechanism == "gavel" and entry.kwargs.get("space_sharing", False):
            raise InputError("mechanism='gavel' has no space sharing", field="mechanism")
        if not (math.isfinite(reset_interval_s) and reset_interval_s >= 0):
            raise InputError(f"must be a number of seconds >= 0, got {reset_interval_s!r}",
                             field="reset_interval_s")
        self.mechanism: Mechanism = mechanism
        self.reset_interval_s = float(reset_interval_s)
        self.reset_on_throughput_change = bool(reset_on_throughput_change)
        self.name = formulation
        self.formulation = formulation
        self.resolve_every = resolve_every
        self.work_conserving = work_conserving
        self.min_share = min_share
        self.path: Literal["array", "generic"] = (
            "array" if has_array and method != "generic" else "generic")
        #: which persistent model the array path keeps (None on the generic path)
        self.fast_path: FastPath | None = (
            fast_path_of(entry.cls, entry.kwargs) if self.path == "array" else None)
        #: the class-LP paths under schedlab's mechanism read no JobState progress (the time
        #: received is the adapter's own sum, ``time_on`` is read once, at a job's first
        #: sight); the simulator's array path then keeps progress in its columns only.  A
        #: subclass with its own ``decide`` is taken to read it.
        self.reads_progress = not (mechanism == "schedlab"
                                   and self.fast_path in ("max_min", "sum_throughput")
                                   and not entry.kwargs.get("space_sharing", False)
                                   and type(self).decide is GavelPolicy.decide)
        form = entry.make()
        if not isinstance(form, gavel_formulations.GavelMethod):  # checked above
            raise InputError(f"{formulation!r} is not a Gavel formulation")
        self._form = form
        self.heterogeneity_aware = bool(entry.kwargs.get("heterogeneity_aware", True))
        #: hierarchical with FIFO inside entities (array path only while no two active jobs
        #: share an entity: :meth:`_shared_entity`)
        self._within_fifo = entry.kwargs.get("within") == "fifo"
        self.options = SolverOptions(solver=solver, time_limit_s=time_limit_s, threads=threads,
                                     lp_method=lp_method)
        self.threads = threads
        self.last_objective: float | None = None
        self._cluster_key: tuple[tuple[str, int], ...] | None = None
        self._cluster: Cluster | None = None
        self._gavel: GavelRoundState | None = None
        # Gavel's cumulative isolated time (FinishTimeFairnessPolicyWithPerf), per job
        self._isolated_s: dict[str, float] = {}
        self._isolated_prev: dict[str, tuple[float, float]] = {}  # (remaining, T_iso)

    def reset(self) -> None:
        """Forget the previous run: the counters, the last objective, the per-cluster set-up
        (rebuilt by the next decision) and Gavel's cumulative isolated times."""
        super().reset()
        self.last_objective = None
        self._cluster_key = None
        self._cluster = None
        self._gavel = None
        self._isolated_s = {}
        self._isolated_prev = {}

    @property
    def class_lp(self) -> MaxMinClassLP | None:
        """The array path's persistent class LP (None on the generic path or before the
        first decision)."""
        return getattr(self, "_lp", None)

    # set-up per cluster ------------------------------------------------------------------
    def _setup(self, cluster: Cluster) -> None:
        self.types = cluster.types
        self._type_index = {k: i for i, k in enumerate(self.types)}
        self.gpus = np.array([cluster.accelerators[k].count for k in self.types], dtype=float)
        self._free = [int(n) for n in self.gpus]
        self._lp: MaxMinClassLP | None = None
        self._job_lp: MakespanLP | FinishTimeSearch | WaterFilling | None = None
        form = self._form
        if self.fast_path == "max_min":
            self._lp = MaxMinClassLP(self.types, self.gpus,
                                     heterogeneity_aware=self.heterogeneity_aware,
                                     options=self.options)
        elif self.fast_path == "sum_throughput":
            assert isinstance(form, gavel_formulations.MaxSumThroughput)
            prices = [cluster.accelerators[k].cost_per_hour for k in self.types]
            self._lp = SumThroughputClassLP(
                self.types, self.gpus,
                prices=(np.array(prices, dtype=float) if form.cost and all(prices) else None),
                normalize=form.normalize, heterogeneity_aware=self.heterogeneity_aware,
                options=self.options)
        elif self.fast_path == "makespan":
            self._job_lp = MakespanLP(self.types, self.gpus,
                                      heterogeneity_aware=self.heterogeneity_aware,
                                      options=self.options)
        elif self.fast_path == "finish_time":
            assert isinstance(form, gavel_formulations.FinishTimeFairness)
            self._job_lp = FinishTimeSearch(form, self.types, self.gpus, options=self.options)
        elif self.fast_path == "water_filling":
            self._job_lp = WaterFilling(self.types, self.gpus,
                                        heterogeneity_aware=self.heterogeneity_aware,
                                        options=self.options)
        size = 64
        num_types = len(self.types)
        self._slot_of: dict[str, int] = {}
        self._thr_version: dict[str, int] = {}  # throughput_version when last read
        self._arrival = np.zeros(size)
        self._gang = np.zeros(size, dtype=np.int64)
        self._runnable = np.zeros((size, num_types), dtype=bool)
        self._thr = np.zeros((size, num_types))  # T[j,k], 0 where j cannot run on k
        self._weight = np.ones(size)
        self._received = np.zeros((size, num_types))
        # the last class LP's solution (rows, X per class and type, class per row), written
        # into ``_target`` at its first read (the round rule reads it as it is)
        self._class_solution: tuple[npt.NDArray[np.int64], FloatArray,
                                    npt.NDArray[np.int64]] | None = None
        self._target_stale = False
        self._target = np.zeros((size, num_types))
        self._class = np.full(size, -1, dtype=np.int64)
        self._seen_version: int | None = None
        self._solved_version: int | None = None
        self._since_solve = 0
        self._rows = np.zeros(0, dtype=np.int64)
        self._id_list: list[str] | None = None
        self._id_rows = np.zeros(0, dtype=np.int64)
        self._ids = []
        self._class_rank: npt.NDArray[np.int64] | None = None  # see _solve, _choose_solo
        self._ran_flat = np.zeros(0, dtype=np.int64)  # slot * K + type of last round's solos
        self._pairs: list[tuple[str, str, FloatArray]] = []  # (a, b, Y per type)
        self._pair_received: dict[tuple[str, str], FloatArray] = {}
        self._ran_pairs: list[tuple[str, str, int]] = []
        self._last_now = 0.0
        self._assignments: dict[str, list[Assignment]] = {}  # per job, one per type
        # Assignment(job, type) per slot * K + type (an object array: one gather per rebuild)
        self._assignment_flat = np.empty(size * num_types, dtype=object)
        self._assignment_rows: list[list[Assignment]] | None = None
        self._candidates: PriorityCandidates | None = None
        self._cand_arrival = np.zeros(0)
        self._cand_flat = np.zeros(0, dtype=np.int64)
        self._cand_engine_slot: npt.NDArray[np.int64] | None = None
        # _sync_jobs_arrays: per simulator slot, the adapter's slot (-1: not seen) and job id
        self._arrays_seen: ActiveArrays | None = None
        self._slot_by_engine = np.zeros(0, dtype=np.int64)
        self._id_by_engine = np.empty(0, dtype=object)
        self._thr_changes_seen = 0
        self._gang_rows = np.zeros(0, dtype=np.int64)  # gang per active job (_choose_solo)
        self._isolated_s = {}
        self._isolated_prev = {}
        self._fairness_tolerance = Params().fairness_tolerance
        # the same accumulation per slot, for the array path (_advance_isolated_arrays)
        self._iso_time = np.zeros(size)
        self._iso_prev_remaining = np.zeros(size)
        self._iso_prev_thr = np.zeros(size)
        self._iso_prev_seen = np.zeros(size, dtype=bool)

    def _grow(self, need: int) -> None:
        size = len(self._arrival)
        if need <= size:
            return
        new = max(need, 2 * size)
        extra = new - size
        self._arrival = np.concatenate([self._arrival, np.zeros(extra)])
        self._gang = np.concatenate([self._gang, np.zeros(extra, dtype=np.int64)])
        self._weight = np.concatenate([self._weight, np.ones(extra)])
        for attr in ("_iso_time", "_iso_prev_remaining", "_iso_prev_thr"):
            setattr(self, attr, np.concatenate([getattr(self, attr), np.zeros(extra)]))
        self._iso_prev_seen = np.concatenate([self._iso_prev_seen, np.zeros(extra, dtype=bool)])
        for attr in ("_runnable", "_received", "_target", "_thr"):
            old = getattr(self, attr)
            setattr(self, attr, np.concatenate(
                [old, np.zeros((extra, old.shape[1]), dtype=old.dtype)]))
        self._class = np.concatenate([self._class, np.full(extra, -1, dtype=np.int64)])
        self._assignment_flat = np.concatenate(
            [self._assignment_flat, np.empty(extra * len(self.types), dtype=object)])

    # decide -------------------------------------------------------------------------------
    def decide(self, state: ClusterState) -> list[Assignment]:
        """Re-solve if due, then choose this round's gangs by priority."""
        self.decisions += 1
        if state.cluster is not self._cluster or state.round_index == 0:
            key = tuple((k, p.count) for k, p in state.cluster.accelerators.items())
            if key != self._cluster_key or state.round_index == 0:  # new cluster or new run
                self._cluster_key = key
                self._setup(state.cluster)
                if self.mechanism == "gavel":
                    self._gavel = GavelRoundState(
                        self.types, self._free, state.round_s,
                        shuffle_types=not self.heterogeneity_aware, seed=state.seed,
                        reset_interval_s=self.reset_interval_s,
                        reset_on_throughput_change=self.reset_on_throughput_change)
            self._cluster = state.cluster
        if self._gavel is not None:
            return self._decide_gavel(state, self._gavel)
        self._sync_if_changed(state)
        self._update_received(state)
        due = (self._solved_version != self._seen_version
               or (self.resolve_every is not None and self._since_solve >= self.resolve_every))
        if due:
            self._timed_solve(state)
            self._since_solve = 0
        self._since_solve += 1
        return self._choose(state)

    def _sync_if_changed(self, state: ClusterState) -> None:
        """:meth:`_sync_jobs` when the job set changed since the last sync."""
        if state.job_set_version != self._seen_version or len(state.active) != self._num_ids:
            self._sync_jobs(state)

    def _timed_solve(self, state: ClusterState) -> None:
        """:meth:`_solve`, counted in ``solves`` and timed in ``solver_time_s``."""
        t0 = time.perf_counter()
        self._solve(state)
        self.solver_time_s += time.perf_counter() - t0
        self.solves += 1
        self._solved_version = self._seen_version

    def _decide_gavel(self, state: ClusterState, rounds: GavelRoundState) -> list[Assignment]:
        """One round of Gavel's mechanism: re-solve only at a reset, then its greedy walk."""
        if rounds.observe(state.now, state.active):
            self._sync_if_changed(state)
            self._timed_solve(state)
            target = self._target
            rounds.reset(state.now, {job_id: target[slot] for job_id, slot
                                     in zip(self._ids, self._rows.tolist(), strict=True)})
        return [Assignment(job_id, k) for job_id, k in rounds.play(state.now, state.active)]

    def _sync_jobs(self, state: ClusterState) -> None:
        """Slots for new jobs; the active rows in arrival order (one pass over the ids)."""
        if state.arrays is not None:
            self._sync_jobs_arrays(state, state.arrays)
            return
        active = state.active
        ids = list(map(_job_id, active))
        slots = list(map(self._slot_of.get, ids))
        if None in slots:  # new jobs get the next slots, in the order of ``active``
            self._grow(len(self._slot_of) + slots.count(None))
            for i in range(slots.index(None), len(slots)):  # arrivals come last: a short walk
                if slots[i] is None:
                    slots[i] = self._add_job(active[i])
        known = self._thr_version
        # a dynamic job in a new batch size: its new throughput row (compared as two lists
        # first: a walk in Python only when some version moved)
        if list(map(_thr_version, active)) != list(map(known.__getitem__, ids)):
            for js in active:
                if js.throughput_version != known[js.id]:
                    self._read_throughput(js, self._slot_of[js.id])
        self._ids = ids
        self._rows = np.array(slots, dtype=np.int64)
        self._assignment_rows = None
        self._seen_version = state.job_set_version
        self._candidates = None

    def _sync_jobs_arrays(self, state: ClusterState, arrays: ActiveArrays) -> None:
        """:meth:`_sync_jobs` with the simulator's columns: the adapter's slot and the id of
        each simulator slot are kept in two arrays, so the rows and ids of the active jobs are
        two gathers, and only new jobs are looked at one by one; throughput versions are
        walked only when the simulator changed some throughput since the last sync."""
        active = state.active
        engine_rows = arrays.rows
        if arrays is not self._arrays_seen:  # a new run: the simulator's slots start again
            self._arrays_seen = arrays
            self._slot_by_engine = np.full(len(arrays.arrival), -1, dtype=np.int64)
            self._id_by_engine = np.empty(len(arrays.arrival), dtype=object)
            self._thr_changes_seen = arrays.throughput_changes
        slots = self._slot_by_engine[engine_rows]
        new = np.flatnonzero(slots < 0)
        if len(new):
            self._grow(len(self._slot_of) + len(new))
            for i in new.tolist():
                js = active[i]
                slot = self._slot_of.get(js.id)
                if slot is None:
                    slot = self._add_job(js)
                slots[i] = slot
                self._slot_by_engine[engine_rows[i]] = slot
                self._id_by_engine[engine_rows[i]] = js.id
        if arrays.throughput_changes != self._thr_changes_seen:
            self._thr_changes_seen = arrays.throughput_changes
            known = self._thr_version
            for js in active:  # a dynamic job in a new batch size: its new throughput row
                if js.throughput_version != known[js.id]:
                    self._read_throughput(js, self._slot_of[js.id])
        self._id_list = None  # made from these at the first need (the _ids property)
        self._id_rows = engine_rows
        self._num_ids = len(engine_rows)
        self._rows = slots
        self._assignment_rows = None
        self._seen_version = state.job_set_version
        self._candidates = None

    @property
    def _ids(self) -> list[str]:
        """Ids of the active jobs, in the order of ``_rows`` (with the simulator's columns,
        gathered at the first read after a sync: most rounds never read them)."""
        if self._id_list is None:
            self._id_list = self._id_by_engine[self._id_rows].tolist()
        return self._id_list

    @_ids.setter
    def _ids(self, ids: list[str]) -> None:
        self._id_list = ids
        self._num_ids = len(ids)

    @property
    def _target(self) -> FloatArray:
        """X[slot, k] as last solved (a class LP's shares written at the first read)."""
        self._write_target()
        return self._target_array

    @_target.setter
    def _target(self, value: FloatArray) -> None:
        self._target_array = value

    def _write_target(self) -> None:
        """Write the last class LP's shares into ``_target`` if not done yet."""
        if self._target_stale:
            self._target_stale = False
            assert self._class_solution is not None
            rows, per_job, classes = self._class_solution
            self._target_array[rows] = per_job[classes]

    def _add_job(self, js: JobState) -> int:
        """Give a new job the next slot (arrays grown by the caller); returns the slot."""
        slot = len(self._slot_of)
        self._slot_of[js.id] = slot
        self._arrival[slot] = js.arrival
        self._gang[slot] = js.scale_factor
        self._weight[slot] = js.weight
        self._read_throughput(js, slot)
        self._received[slot] = [js.time_on.get(k, 0.0) for k in self.types]
        row = [Assignment(js.id, k) for k in self.types]
        self._assignments[js.id] = row
        num_types = len(self.types)
        self._assignment_flat[slot * num_types:(slot + 1) * num_types] = row
        return slot

    def _read_throughput(self, js: JobState, slot: int) -> None:
        """The job's runnable types and LP class from its current throughputs."""
        thr = [js.throughput.get(k, 0.0) for k in self.types]
        self._runnable[slot] = [t > 0 and js.scale_factor <= n
                                for t, n in zip(thr, self._free, strict=True)]
        self._thr[slot] = np.where(self._runnable[slot], thr, 0.0)
        if self._lp is not None:
            self._class[slot] = self._lp.class_of(js.scale_factor, js.weight, np.array(thr))
        self._thr_version[js.id] = js.throughput_version

    def _assignment_table(self) -> list[list[Assignment]]:
        """Assignment(job, type) per active job (rows in arrival order) and type, cached."""
        if self._assignment_rows is None:
            self._assignment_rows = list(map(self._assignments.__getitem__, self._ids))
        return self._assignment_rows

    def _update_received(self, state: ClusterState) -> None:
        """Add last round's time to received[j,k] (solo) and to the pairs' received time.

        Every job that ran last round and is still active held its GPUs for the whole round
        (a round ends early only when all its jobs finished), so adding the elapsed time
        keeps received[j,k] equal to ``JobState.time_on[k]`` minus the job's time in pairs
        (the tests check this against the simulator).
        """
        elapsed = state.now - self._last_now
        self._last_now = state.now
        if len(self._ran_flat):
            self._received.reshape(-1)[self._ran_flat] += elapsed  # a view: C-contiguous
        for a, b, k in self._ran_pairs:
            if a in self._slot_of and b in self._slot_of:
                got = self._pair_received.setdefault((a, b), np.zeros(len(self.types)))
                got[k] += elapsed

    # solving ------------------------------------------------------------------------------
    def _solve(self, state: ClusterState) -> None:
        rows = self._rows
        self._class_rank = None
        if self.fast_path == "fifo":
            self._solve_fifo()
            return
        if self._job_lp is not None and not (self._within_fifo and self._shared_entity(state)):
            self._solve_per_job(state)
            return
        if self._lp is not None and not self._has_pairs(state):
            self._pairs = []
            classes = self._class[rows]
            counts = np.bincount(classes, minlength=self._lp.num_classes)
            remap = self._lp.compact(counts)
            if remap is not None:
                self._class[rows] = remap[classes]
                self._class[np.setdiff1d(np.arange(len(self._slot_of)), rows)] = -1
                classes = self._class[rows]
                counts = np.bincount(classes, minlength=self._lp.num_classes)
            try:
                t, per_job = self._lp.solve(counts)
            except SolverError as exc:
                self._fall_back(state, str(exc))
                return
            self.last_objective = t
            # (an earlier solution still unwritten is dropped: this one covers every
            # active row, and only active rows are read)
            self._class_solution = (rows, per_job, classes)
            self._target_stale = True  # _target[rows] = per_job[classes] at the first read
            self._candidates = None
            if np.isfinite(per_job).all():
                # the shares' few distinct values, ranked (0: the largest), per (class, type)
                class_share = np.where(per_job > self.min_share, per_job, 0.0)
                values = np.unique(class_share)
                self._class_rank = (len(values) - 1
                                    - np.searchsorted(values, class_share)).astype(np.int64)
            return
        self._candidates = None
        self._advance_isolated_time(state)
        instance = self.instance_from_state(state)
        form = formulations()[self.formulation].make()
        if not isinstance(form, gavel_formulations.GavelMethod):  # checked in __init__
            raise InputError(f"{self.formulation!r} is not a Gavel formulation")
        form.num_rounds = 0  # the simulator realises the allocation, not the formulation
        try:
            solution = form.solve(instance, self.options)
        except SolverError as exc:
            self._fall_back(state, f"solving {len(instance.jobs)} active jobs failed: {exc}")
            return
        if not solution.status.has_solution:
            self._fall_back(state, f"{solution.status.value} ("
                            f"{'; '.join(solution.diagnostics) or 'no diagnostics'})")
            return
        self._target[rows] = 0.0
        self._pairs = []
        if solution.metrics.get("failed_subsolves"):
            # the formulation answered with what it had when a sub-solve failed: usable,
            # but a failed solve all the same
            self.failed_solves += 1
            log.warning("%s: a sub-solve failed at t = %.6g s; using the formulation's "
                        "fallback allocation (%s)", self.formulation, state.now,
                        "; ".join(solution.diagnostics) or "no diagnostics")
        self.last_objective = solution.objective
        for job_id, shares in solution.allocation.items():
            slot = self._slot_of[job_id]
            for acc, share in shares.items():
                self._target[slot, self._type_index[acc]] = share
        for pair in solution.colocated_allocation:
            a, b = pair.jobs
            y = np.zeros(len(self.types))
            y[self._type_index[pair.accelerator]] = pair.fraction
            self._pairs.append((a, b, y))

    def _solve_fifo(self) -> None:
        """``gavel.fifo`` on the adapter's arrays (:func:`fifo_allocation`, the reference's
        walk); the objective is the reference's, the number of jobs placed."""
        rows = self._rows
        x = fifo_allocation(self._arrival[rows], self._thr[rows], self._runnable[rows],
                            self._gang[rows].astype(float), self.gpus,
                            heterogeneity_aware=self.heterogeneity_aware)
        self._pairs = []
        self._candidates = None
        self._target[rows] = x
        self.last_objective = float((x.sum(axis=1) > 0).sum())

    def _has_pairs(self, state: ClusterState) -> bool:
        """True when some active job has a co-location throughput with another active job
        (only a space-sharing formulation reads them; its class LP holds no pairs, so such a
        decision goes to the reference model)."""
        if not self._form.space_sharing:
            return False
        ids = set(self._ids)
        return any(js.colocated_throughput and not ids.isdisjoint(js.colocated_throughput)
                   for js in state.active)

    def policy_data(self, state: ClusterState) -> GavelData:
        """The arrays :func:`~schedlab.formulations.gavel.data.gavel_data` makes of
        :meth:`instance_from_state` (no co-located pairs), gathered from the adapter's own
        per-job arrays: rows in the order of ``state.active``."""
        rows = self._rows
        now = state.now
        return GavelData(
            job_ids=self._ids,
            types=self.types,
            throughput=self._thr[rows],
            allowed=self._runnable[rows],
            scale_factor=self._gang[rows].astype(float),
            weight=self._weight[rows],
            gpus=self.gpus,
            remaining_steps=np.array([js.total_steps - min(js.steps_done, js.total_steps)
                                      for js in state.active]),
            pairs=[],
            pair_throughput=np.zeros((0, len(self.types), 2)),
            pair_allowed=np.zeros((0, len(self.types)), dtype=bool),
            time_in_system=np.maximum(now - self._arrival[rows], 0.0),
            isolated_time=self._isolated_times(),
        )

    def _solve_per_job(self, state: ClusterState) -> None:
        """The per-job persistent models (min makespan, finish-time fairness): X of every
        active job, or the reference's fallback when a job can run nowhere."""
        job_lp = self._job_lp
        assert job_lp is not None
        rows = self._rows
        self._candidates = None
        self._pairs = []
        if isinstance(job_lp, FinishTimeSearch):  # only finish-time fairness reads it
            self._advance_isolated_arrays(state)
        stuck = np.flatnonzero(~self._runnable[rows].any(axis=1))
        if len(stuck):
            js = state.active[int(stuck[0])]
            self._fall_back(state, f"job {js.id} cannot run anywhere: scale factor "
                            f"{js.scale_factor} with throughput on {sorted(js.throughput)}")
            return
        data = self.policy_data(state)
        keys = [(slot, self._thr_version[job_id])
                for slot, job_id in zip(rows.tolist(), self._ids, strict=True)]
        try:
            if isinstance(job_lp, FinishTimeSearch):
                value, x = job_lp.solve(keys, data, self._fairness_tolerance)
            elif isinstance(job_lp, WaterFilling):
                value, x = job_lp.solve(keys, data, self._group_weights(state))
            else:
                value, x = job_lp.solve(keys, data)
        except SolverError as exc:
            self._fall_back(state, str(exc))
            return
        self.last_objective = value
        self._target[rows] = x

    @staticmethod
    def _shared_entity(state: ClusterState) -> bool:
        """True when two active jobs share an entity (their ``user``).

        Hierarchical with FIFO inside entities then needs the reference model.  While every
        entity has one job, each group is one job of weight W_e = 1 = omega_j of fairness
        inside entities, so the water-filling levels are the same, and FIFO inside an entity
        (max v_j with every group at its level) finds each job at its level: after the
        water-filling no group can rise.  The array path's values are then the reference's.
        """
        users = [js.user for js in state.active if js.user is not None]
        return len(set(users)) != len(users)

    def _group_weights(self, state: ClusterState) -> FloatArray:
        """omega_j = W_e w_j / sum of w_i over the active jobs of j's entity e (the job's
        ``user``; a job without one is its own entity; W_e = 1, as the instance the reference
        builds has no entity weights): the hierarchical policy's group weights with fairness
        inside entities (:meth:`~schedlab.formulations.gavel.hierarchical.Hierarchical.groups`).
        """
        totals: dict[str, float] = {}
        for js in state.active:
            if js.user is not None:
                totals[js.user] = totals.get(js.user, 0.0) + js.weight
        return np.array([1.0 if js.user is None else js.weight / totals[js.user]
                         for js in state.active])

    def _fall_back(self, state: ClusterState, reason: str) -> None:
        """A solve that found no allocation: count it, say so, and run the round on priority
        0 only (every target share 0, so work conservation alone places jobs)."""
        self.failed_solves += 1
        log.warning("%s: solve at t = %.6g s failed: %s; fallback: running jobs by priority "
                    "0 only", self.formulation, state.now, reason)
        self._target[self._rows] = 0.0
        self._pairs = []
        self._candidates = None
        self.last_objective = None

    @staticmethod
    def isolated_throughputs(state: ClusterState) -> dict[str, float]:
        """T_iso[j] of every active job under Gavel's isolated share
        (:func:`~schedlab.formulations.gavel.data.isolated_share`: 1/m of every pool, m =
        active jobs, rows scaled to sum <= 1), steps/s; a type where the job cannot run (no
        throughput, or its gang does not fit) adds nothing."""
        active = state.active
        pools = state.cluster.accelerators
        types = list(pools)
        gpus = np.array([pools[k].count for k in types], dtype=float)
        scale = np.array([js.scale_factor for js in active], dtype=float)
        share = isolated_share(gpus, scale)
        thr = np.array([[js.throughput.get(k, 0.0) if js.scale_factor <= pools[k].count
                         else 0.0 for k in types] for js in active]).reshape(len(active),
                                                                             len(types))
        iso = (thr * share).sum(axis=1)
        return {js.id: float(v) for js, v in zip(active, iso, strict=True)}

    def _advance_isolated_arrays(self, state: ClusterState) -> None:
        """:meth:`_advance_isolated_time` on the per-slot arrays, vectorized (the same
        operations per job: T_iso from :func:`isolated_share` of the active jobs, then
        t_iso += (remaining then - now) / T_iso then for jobs of the previous decision)."""
        rows = self._rows
        remaining = np.array([js.total_steps - min(js.steps_done, js.total_steps)
                              for js in state.active])
        iso = (self._thr[rows] * isolated_share(self.gpus, self._gang[rows].astype(float))
               ).sum(axis=1)
        got = self._iso_time[rows]
        before = self._iso_prev_seen[rows] & (self._iso_prev_thr[rows] > 0)
        if before.any():
            earlier = rows[before]
            got[before] += ((self._iso_prev_remaining[earlier] - remaining[before])
                            / self._iso_prev_thr[earlier])
        self._iso_time[rows] = got
        self._iso_prev_remaining[rows] = remaining
        self._iso_prev_thr[rows] = iso
        self._iso_prev_seen[:] = False
        self._iso_prev_seen[rows] = True

    def _isolated_times(self) -> FloatArray:
        """t_iso of the active jobs (rows in arrival order) as of the last decision: the
        arrays on finish-time fairness's array path, else Gavel's accumulation in
        ``_isolated_s`` (0 for a job no decision has seen)."""
        if isinstance(getattr(self, "_job_lp", None), FinishTimeSearch):
            return self._iso_time[self._rows].copy()
        return np.array([self._isolated_s.get(job_id, 0.0) for job_id in self._ids])

    def _advance_isolated_time(self, state: ClusterState) -> None:
        """Gavel's cumulative isolated time, updated once per decision (its
        ``FinishTimeFairnessPolicyWithPerf``): a job in the previous decision adds (its
        remaining steps then - now) / (its T_iso then); a new job starts at 0; then T_iso and
        the remaining steps of this decision are kept for the next one."""
        previous = self._isolated_prev
        current: dict[str, tuple[float, float]] = {}
        iso = self.isolated_throughputs(state)
        for js in state.active:
            remaining = js.total_steps - min(js.steps_done, js.total_steps)
            got = self._isolated_s.get(js.id, 0.0)
            before = previous.get(js.id)
            if before is not None and before[1] > 0:
                got += (before[0] - remaining) / before[1]
            self._isolated_s[js.id] = got
            current[js.id] = (remaining, iso[js.id])
        for job_id in previous.keys() - current.keys():
            self._isolated_s.pop(job_id, None)
        self._isolated_prev = current

    def instance_from_state(self, state: ClusterState) -> Instance:
        """The active jobs as an Instance (for the generic path and for tests).

        Each job carries its remaining steps (``steps_done``), ``time_in_system_s`` = now -
        arrival, ``isolated_time_s`` = its cumulative isolated time as of the last decision
        (:meth:`_advance_isolated_time`, Gavel's accumulation: sum over decisions of the steps
        done since the previous one / the isolated throughput then; 0 for a job not seen by a
        decision yet), ``entity`` = its ``user``, and co-location throughputs with the other
        active jobs.
        """
        active = state.active
        ids = {js.id for js in active}
        isolated = (self._isolated_times()
                    if getattr(self, "_ids", None) == [js.id for js in active]
                    else [self._isolated_s.get(js.id, 0.0) for js in active])
        jobs = []
        for i, js in enumerate(active):
            coloc = None
            if js.colocated_throughput:
                coloc = {o: dict(v) for o, v in js.colocated_throughput.items() if o in ids}
            jobs.append(Job(
                id=js.id,
                job_type=js.job_type,
                arrival=js.arrival,
                weight=js.weight,
                scale_factor=js.scale_factor,
                total_steps=js.total_steps,
                steps_done=min(js.steps_done, js.total_steps),
                throughput=dict(js.throughput),
                colocated_throughput=coloc or None,
                entity=js.user,
                time_in_system_s=max(state.now - js.arrival, 0.0),
                isolated_time_s=isolated[i],
                user=js.user,
            ))
        return Instance(name=f"{self.formulation}@{state.now:.6g}s", cluster=state.cluster,
                        jobs=jobs, params=Params(round_s=state.round_s, num_rounds=0,
                                                 now_s=state.now))

    # inspection ----------------------------------------------------------------------------
    def allocation(self) -> dict[str, dict[str, float]]:
        """X[j,k] of the active jobs as last solved: {job: {type: share}} (shares <= min_share
        left out)."""
        out: dict[str, dict[str, float]] = {}
        for job_id, slot in zip(self._ids, self._rows.tolist(), strict=True):
            out[job_id] = {k: float(x) for k, x in zip(self.types, self._target[slot],
                                                        strict=True) if x > self.min_share}
        return out

    def received_time(self) -> dict[str, dict[str, float]]:
        """Seconds each active job ran on each type outside co-located pairs (the f[j,k] of
        the priorities times the job's age), as of the last decision."""
        return {job_id: dict(zip(self.types, map(float, self._received[slot]), strict=True))
                for job_id, slot in zip(self._ids, self._rows.tolist(), strict=True)}

    # the round -----------------------------------------------------------------------------
    def _choose(self, state: ClusterState) -> list[Assignment]:
        rows = self._rows
        num_jobs = len(rows)
        if num_jobs == 0:
            self._ran_flat = np.zeros(0, dtype=np.int64)
            self._ran_pairs = []
            return []
        if not self._pairs:
            picked = self._choose_solo(state)
            self._ran_flat = self._cand_flat[picked]
            self._ran_pairs = []
            plan = self._assignment_flat[self._ran_flat].tolist()  # the picked ones only
            if state.arrays is None:
                return plan
            # the array form for the simulator: slots of the candidates' jobs, their types
            # (candidates are rebuilt, with the rows, whenever the job set changes)
            if self._cand_engine_slot is None:
                candidates = self._candidates
                assert candidates is not None
                self._cand_engine_slot = state.arrays.rows[candidates.unit]
            return SlotPlan(plan, self._cand_engine_slot[picked],
                            self._candidates.acc[picked])  # type: ignore[union-attr]
        chosen, pair_jobs = self._choose_with_pairs(state)
        table = self._assignment_table()
        ran_pairs: list[tuple[str, str, int]] = []
        if not pair_jobs:
            out = [table[u][k] for u, k in chosen]
            solo = chosen
        else:
            out = []
            solo = []
            for u, k in chosen:
                if u < num_jobs:
                    out.append(table[u][k])
                    solo.append((u, k))
                else:
                    a, b = pair_jobs[u - num_jobs]
                    out.append(Assignment(a, self.types[k], partner=b))
                    ran_pairs.append((a, b, k))
        self._ran_flat = (rows[[u for u, _ in solo]] * len(self.types)
                          + np.array([k for _, k in solo], dtype=np.int64))
        self._ran_pairs = ran_pairs
        return out

    def _choose_solo(self, state: ClusterState) -> npt.NDArray[np.int64]:
        """The mechanism over single jobs, with candidates cached between changes; returns
        the chosen candidates (indices in the candidates' static order)."""
        candidates = self._candidates
        if candidates is None and self._class_rank is not None:
            candidates = self._static_candidates()
        if candidates is None:
            rows = self._rows
            num_types = len(self.types)
            unit, acc = np.nonzero(self._runnable[rows])  # ascending (unit, type)
            target = self._target[rows[unit], acc]
            share = np.where(target > self.min_share, target, 0.0)
            rank = (None if self._class_rank is None
                    else self._class_rank[self._class[rows][unit], acc])
            candidates = PriorityCandidates(unit, acc, share, [unit], num_types, presorted=True,
                                            share_rank=rank)
            self._candidates = candidates
            # per candidate, in the static order
            cand_slot = rows[candidates.unit]
            self._cand_flat = cand_slot * num_types + candidates.acc
            self._cand_arrival = self._arrival[cand_slot]
            self._cand_engine_slot = None  # the simulator's slot per candidate (_choose)
            self._gang_rows = self._gang[rows]
        received = self._received.reshape(-1)[self._cand_flat]
        age = state.now - self._cand_arrival
        return candidates.pick(received, age, self._gang_rows, self._free,
                               round_s=state.round_s, work_conserving=self.work_conserving)

    def _static_candidates(self) -> PriorityCandidates | None:
        """The candidates of :meth:`_choose_solo` from a class LP's shares, sorted by the
        compiled counting sort of their ranks (:func:`walk_kernel.static_candidates`; the
        constructor's order), with the per-candidate arrays :meth:`_choose_solo` keeps; None
        when the compiled loops are not used (:func:`round_kernel`)."""
        rows = self._rows
        kernel = round_kernel(len(rows))
        solution = self._class_solution
        if kernel is None or solution is None or solution[0] is not rows:
            return None
        num_types = len(self.types)
        size = len(rows) * num_types
        unit = np.empty(size, dtype=np.int64)
        acc = np.empty(size, dtype=np.int64)
        share = np.empty(size)
        static = np.empty(size, dtype=np.int64)
        flat = np.empty(size, dtype=np.int64)
        since = np.empty(size)
        assert self._class_rank is not None
        count = kernel.static_candidates(
            rows, self._runnable, solution[1], solution[2], self.min_share,
            self._class_rank, self._arrival, unit, acc, share, static, flat, since)
        candidates = PriorityCandidates.in_static_order(
            unit[:count], acc[:count], share[:count], static[:count], num_types)
        self._candidates = candidates
        self._cand_flat = flat[:count]
        self._cand_arrival = since[:count]
        self._cand_engine_slot = None
        self._gang_rows = self._gang[rows]
        return candidates

    def _choose_with_pairs(
        self, state: ClusterState
    ) -> tuple[list[tuple[int, int]], list[tuple[str, str]]]:
        """The mechanism over single jobs and the co-located pairs of the allocation."""
        rows = self._rows
        num_jobs = len(rows)
        age = state.now - self._arrival[rows]
        target = self._target[rows]
        received = self._received[rows]
        runnable = self._runnable[rows]
        gang = self._gang[rows]
        pair_jobs: list[tuple[str, str]] = []
        position = {job_id: i for i, job_id in enumerate(self._ids)}
        extra_target: list[FloatArray] = []
        extra_received: list[FloatArray] = []
        extra_age: list[float] = []
        extra_run: list[npt.NDArray[np.bool_]] = []
        extra_gang: list[int] = []
        ranks = [(i, -1) for i in range(num_jobs)]
        members: list[tuple[int, ...]] = [(i,) for i in range(num_jobs)]
        active = {js.id: js for js in state.active}
        for a, b, y in self._pairs:
            if a not in position or b not in position:
                continue
            pa, pb = sorted((position[a], position[b]))
            ja, jb = active[a], active[b]
            extra_target.append(y)
            extra_received.append(self._pair_received.get((a, b), np.zeros(len(y))))
            extra_age.append(state.now - max(ja.arrival, jb.arrival))
            gang_ab = max(ja.scale_factor, jb.scale_factor)
            extra_gang.append(gang_ab)
            extra_run.append(np.array([
                gang_ab <= self.gpus[k]
                and (ja.colocated_throughput or {}).get(b, {}).get(acc, 0.0) > 0
                and (jb.colocated_throughput or {}).get(a, {}).get(acc, 0.0) > 0
                for k, acc in enumerate(self.types)]))
            ranks.append((pa, pb))
            members.append((pa, pb))
            pair_jobs.append((a, b))
        if pair_jobs:
            target = np.vstack([target, np.array(extra_target)])
            received = np.vstack([received, np.array(extra_received)])
            age = np.concatenate([age, np.array(extra_age)])
            runnable = np.vstack([runnable, np.array(extra_run)])
            gang = np.concatenate([gang, np.array(extra_gang, dtype=np.int64)])
        rank = np.array(ranks, dtype=np.int64)
        chosen = choose_by_priority(
            target, received, age, runnable, gang, self._free, round_s=state.round_s,
            rank=rank, members=members, work_conserving=self.work_conserving,
            min_share=self.min_share)
        return chosen, pair_jobs
