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

* **array** (``gavel.max_min_fairness`` and ``gavel.max_min_fairness_agnostic``): the LP is
  built from numpy arrays in a persistent :class:`~schedlab.solvers.matrix.MatrixModel` of the
  chosen solver (HiGHS by default) that only changes where the job set changed
  (:class:`MaxMinClassLP`).  Jobs with the same scale
  factor, weight and throughputs form a class; by symmetry an optimum exists in which they get
  equal shares, so the LP over classes (one column per class and type, the class size m_c in
  the rows) has the same optimum as the per-job LP (``docs/fast_paths.md`` gives the
  argument).  A job that arrives into a known class changes two numbers of the model; the
  solver re-solves from the previous basis in a fraction of a millisecond.
* **generic** (every other Gavel formulation): an :class:`~schedlab.instance.Instance` of the
  active jobs is built (remaining steps, ``time_in_system_s`` = now - arrival,
  ``isolated_time_s`` = steps done / T_iso, entity = the job's ``user``) and solved with the
  formulation's own ``solve`` -- the reference model, slow but exact.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from operator import attrgetter
from typing import Literal

import numpy as np
import numpy.typing as npt

from schedlab.errors import InputError, SolverError, UnknownNameError
from schedlab.formulations.gavel import models as gavel_formulations
from schedlab.formulations.gavel.data import isolated_share
from schedlab.formulations.gavel.rounds import (
    GavelRoundState,
    PriorityCandidates,
    choose_by_priority,
)
from schedlab.instance import Cluster, Instance, Job, Params
from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.registry import formulations
from schedlab.solution import Status
from schedlab.solvers import LpMethod, SolverOptions
from schedlab.solvers.matrix import matrix_model

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Method = Literal["auto", "array", "generic"]
Mechanism = Literal["schedlab", "gavel"]

_job_id = attrgetter("id")

#: Classes without active jobs the persistent LP keeps before it is rebuilt without them.
_MAX_IDLE_CLASSES = 64


# ------------------------------------------------------------------------ the array LP


class MaxMinClassLP:
    r"""Gavel's max-min fairness LP over job classes, kept in one persistent LP.

    Class c (jobs with equal s_c, w_c and throughput row T_c) has m_c active jobs and
    a_c = s_c / (w_c T_eq[c]), T_eq[c] = sum_k T_ck n_k / N.  Variables: t and, per class,
    Z_ck = the class's *total* share on type k (heterogeneity-aware: one column per allowed
    type; agnostic: one column Z_c whose time lands on the allowed types in proportion to
    n_k, X_ck = Z_c n_k / N_c, N_c = sum of n_k over the allowed types).

    .. math::

        \max t \quad\text{s.t.}\quad
        \text{fair}_c:\; a_c \sum_k T_{ck} Z_{ck} - m_c t \ge 0,\qquad
        \text{share}_c:\; \sum_k Z_{ck} \le m_c,\qquad
        \text{capacity}_k:\; \sum_c s_c Z_{ck} \le n_k

    Each job of class c gets X_jk = Z_ck / m_c.  Only ``fair_c``'s coefficient of t and
    ``share_c``'s bound depend on m_c, so a change of the job set changes two numbers per
    class and the model is re-solved from its last basis.  A class with m_c = 0 is inert
    (its Z is forced to 0 and its row holds trivially); when more than
    :data:`_MAX_IDLE_CLASSES` classes are idle the model is rebuilt without them.

    The model is a :class:`~schedlab.solvers.matrix.MatrixModel` of the solver ``options``
    name (HiGHS by default, presolve off: the warm re-solves are a few dual simplex
    iterations), with the options' threads, LP method and seed and no time limit.
    """

    def __init__(
        self,
        types: list[str],
        gpus: FloatArray,
        *,
        heterogeneity_aware: bool = True,
        threads: int | None = None,
        options: SolverOptions | None = None,
    ) -> None:
        self.types = types
        self.gpus = np.asarray(gpus, dtype=float)
        self.aware = heterogeneity_aware
        # no time limit: a warm re-solve takes a fraction of a millisecond, and a limit
        # could only turn it into a failed decision
        opts = replace(options or SolverOptions(), time_limit_s=None)
        if threads is not None:
            opts = replace(opts, threads=threads)
        self.options = opts
        self._keys: dict[tuple[float, float, bytes], int] = {}
        self._rows: list[tuple[float, float, FloatArray]] = []  # (s, w, T) per class
        self._reset_model()

    @property
    def backend(self) -> str:
        """The solver holding the model (``highs``, ``gurobi``)."""
        return self.model.backend

    # model --------------------------------------------------------------------------
    def _reset_model(self) -> None:
        model = matrix_model(self.options, presolve=False)
        model.add_columns([0.0], [np.inf], [1.0])  # t
        model.set_sense("maximize")
        model.add_rows(np.full(len(self.types), -np.inf), self.gpus)  # capacity_k, filled later
        self.model = model
        self._fair_row: list[int] = []
        self._share_row: list[int] = []
        self._col_class: list[int] = []
        self._col_direction: list[FloatArray] = []  # X per unit of Z, per type
        self._scatter: tuple[IntArray, IntArray, FloatArray] | None = None
        self._counts = np.zeros(0)
        for c in range(len(self._rows)):
            self._add_to_model(c)

    def _add_to_model(self, c: int) -> None:
        """Rows fair_c, share_c and the columns Z_c of class c (count 0)."""
        model = self.model
        scale, weight, thr = self._rows[c]
        n = self.gpus
        allowed = (thr > 0) & (scale <= n)
        thr = np.where(allowed, thr, 0.0)
        teq = float((thr * n).sum() / n.sum())
        a = scale / (weight * teq) if teq > 0 else 0.0
        fair, share = model.add_rows([0.0, -np.inf], [np.inf, 0.0]).tolist()
        self._fair_row.append(fair)
        self._share_row.append(share)
        num_types = len(self.types)
        if self.aware:
            ks = np.flatnonzero(allowed)
            width = len(ks)
            rows = np.column_stack([np.full(width, fair), np.full(width, share), ks])
            values = np.column_stack([a * thr[ks], np.ones(width), np.full(width, scale)])
            model.add_columns(np.zeros(width), np.full(width, np.inf), 0.0,
                              starts=np.arange(0, 3 * width + 1, 3), rows=rows.reshape(-1),
                              values=values.reshape(-1))
            self._col_class.extend([c] * width)
            self._col_direction.extend(np.eye(num_types)[ks])
        elif allowed.any():
            pool = float(n[allowed].sum())
            direction = np.where(allowed, n / pool, 0.0)
            ks = np.flatnonzero(allowed)
            rows = np.concatenate(([fair, share], ks))
            values = np.concatenate(([a * float((thr * direction).sum()), 1.0],
                                     scale * direction[ks]))
            model.add_columns([0.0], [np.inf], 0.0, starts=[0, len(rows)], rows=rows,
                              values=values)
            self._col_class.append(c)
            self._col_direction.append(direction)
        self._counts = np.append(self._counts, 0.0)
        self._scatter = None

    def _scatter_arrays(self) -> tuple[IntArray, IntArray, FloatArray]:
        """(class, type and X per unit of Z per type (ncols, K)) of each Z column, cached."""
        if self._scatter is None:
            num_types = len(self.types)
            direction = np.asarray(self._col_direction, dtype=float).reshape(-1, num_types)
            self._scatter = (
                np.asarray(self._col_class, dtype=np.int64),
                np.argmax(direction, axis=1).astype(np.int64),
                direction,
            )
        return self._scatter

    def class_of(self, scale: float, weight: float, throughput: FloatArray) -> int:
        """The class id of a job (a new class is added to the model when needed)."""
        thr = np.asarray(throughput, dtype=float)
        key = (float(scale), float(weight), thr.tobytes())
        c = self._keys.get(key)
        if c is None:
            c = len(self._rows)
            self._keys[key] = c
            self._rows.append((float(scale), float(weight), thr.copy()))
            self._add_to_model(c)
        return c

    @property
    def num_classes(self) -> int:
        """Classes in the model (with or without active jobs)."""
        return len(self._rows)

    def compact(self, counts: IntArray) -> IntArray | None:
        """Rebuild without idle classes when too many are idle; returns old -> new class ids
        (-1: dropped), or None when nothing changed."""
        idle = self.num_classes - int(np.count_nonzero(counts[: self.num_classes]))
        if idle <= _MAX_IDLE_CLASSES:
            return None
        keep = np.flatnonzero(counts[: self.num_classes] > 0)
        remap = np.full(self.num_classes, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        self._rows = [self._rows[c] for c in keep]
        self._keys = {k: int(remap[c]) for k, c in self._keys.items() if remap[c] >= 0}
        self._reset_model()
        return remap

    # solve ----------------------------------------------------------------------------
    def solve(self, counts: IntArray) -> tuple[float, FloatArray]:
        """(t*, X per job of each class (C, K)) for class sizes ``counts`` (C,)."""
        model = self.model
        num_classes = self.num_classes
        m = counts[:num_classes].astype(float)
        if len(m) < num_classes:
            m = np.concatenate([m, np.zeros(num_classes - len(m))])
        changed = np.flatnonzero(m != self._counts)
        if len(changed):
            sizes = m[changed]
            model.set_coefficients(np.asarray(self._fair_row)[changed], 0, -sizes)
            model.set_row_bounds(np.asarray(self._share_row)[changed], -np.inf, sizes)
        self._counts = m
        num_types = len(self.types)
        total = np.zeros((num_classes, num_types))
        if not m.any():
            return 0.0, total
        result = model.solve()
        if result.status != Status.OPTIMAL:
            log.debug("warm re-solve ended %s (%s); solving from scratch", result.status.value,
                      result.message)
            model.forget_basis()
            result = model.solve()
            if result.status != Status.OPTIMAL:
                raise SolverError(f"{model.backend} could not solve the max-min fairness LP: "
                                  f"{result.status.value} ({result.message})")
        values = model.values()
        t = float(values[0])
        z = np.maximum(values[1:], 0.0)
        col_class, col_type, direction = self._scatter_arrays()
        if self.aware:  # one column per (class, type)
            total[col_class, col_type] = z
        elif len(z):  # one column per class
            total[col_class] = z[:, None] * direction
        per_job = np.divide(total, m[:, None], out=total, where=m[:, None] > 0)
        return t, np.minimum(per_job, 1.0, out=per_job)


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
    """

    description = "Gavel formulation solved on each job-set change, realised by priorities"

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
        has_array = (issubclass(entry.cls, gavel_formulations.MaxMinFairness)
                     and not entry.kwargs.get("space_sharing", False))
        if method == "array" and not has_array:
            raise InputError(f"{formulation} has no array path; use method='generic'",
                             field="method")
        if mechanism not in ("schedlab", "gavel"):
            raise InputError(f"mechanism must be 'schedlab' or 'gavel', got {mechanism!r}",
                             field="mechanism")
        if mechanism == "gavel" and entry.kwargs.get("space_sharing", False):
            raise InputError("mechanism='gavel' has no space sharing", field="mechanism")
        self.mechanism: Mechanism = mechanism
        self.name = formulation
        self.formulation = formulation
        self.resolve_every = resolve_every
        self.work_conserving = work_conserving
        self.min_share = min_share
        self.path: Literal["array", "generic"] = (
            "array" if has_array and method != "generic" else "generic")
        self.heterogeneity_aware = bool(entry.kwargs.get("heterogeneity_aware", True))
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
        if self.path == "array":
            self._lp = MaxMinClassLP(self.types, self.gpus,
                                     heterogeneity_aware=self.heterogeneity_aware,
                                     options=self.options)
        size = 64
        num_types = len(self.types)
        self._slot_of: dict[str, int] = {}
        self._thr_version: dict[str, int] = {}  # throughput_version when last read
        self._arrival = np.zeros(size)
        self._gang = np.zeros(size, dtype=np.int64)
        self._runnable = np.zeros((size, num_types), dtype=bool)
        self._received = np.zeros((size, num_types))
        self._target = np.zeros((size, num_types))
        self._class = np.full(size, -1, dtype=np.int64)
        self._seen_version: int | None = None
        self._solved_version: int | None = None
        self._since_solve = 0
        self._rows = np.zeros(0, dtype=np.int64)
        self._ids: list[str] = []
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
        self._cand_assign: list[Assignment] = []
        self._gang_list: list[int] = []
        self._isolated_s = {}
        self._isolated_prev = {}

    def _grow(self, need: int) -> None:
        size = len(self._arrival)
        if need <= size:
            return
        new = max(need, 2 * size)
        extra = new - size
        self._arrival = np.concatenate([self._arrival, np.zeros(extra)])
        self._gang = np.concatenate([self._gang, np.zeros(extra, dtype=np.int64)])
        for attr in ("_runnable", "_received", "_target"):
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
                        shuffle_types=not self.heterogeneity_aware, seed=state.seed)
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
        if state.job_set_version != self._seen_version or len(state.active) != len(self._ids):
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
        active = state.active
        ids = list(map(_job_id, active))
        slots = list(map(self._slot_of.get, ids))
        if None in slots:  # new jobs get the next slots, in the order of ``active``
            self._grow(len(self._slot_of) + slots.count(None))
            for i in range(slots.index(None), len(slots)):  # arrivals come last: a short walk
                if slots[i] is None:
                    slots[i] = self._add_job(active[i])
        known = self._thr_version
        for js in active:  # a dynamic job in a new batch size: its new throughput row
            if js.throughput_version != known[js.id]:
                self._read_throughput(js, self._slot_of[js.id])
        self._ids = ids
        self._rows = np.array(slots, dtype=np.int64)
        self._assignment_rows = None
        self._seen_version = state.job_set_version
        self._candidates = None

    def _add_job(self, js: JobState) -> int:
        """Give a new job the next slot (arrays grown by the caller); returns the slot."""
        slot = len(self._slot_of)
        self._slot_of[js.id] = slot
        self._arrival[slot] = js.arrival
        self._gang[slot] = js.scale_factor
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
        if self._lp is not None:
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
            self._target[rows] = per_job[classes]
            self._candidates = None
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
        jobs = []
        for js in active:
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
                isolated_time_s=self._isolated_s.get(js.id, 0.0),
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
            assignments = self._cand_assign
            self._ran_flat = self._cand_flat[picked]
            self._ran_pairs = []
            return list(map(assignments.__getitem__, picked))
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

    def _choose_solo(self, state: ClusterState) -> list[int]:
        """The mechanism over single jobs, with candidates cached between changes; returns
        the chosen candidates (indices in the candidates' static order)."""
        candidates = self._candidates
        if candidates is None:
            rows = self._rows
            num_types = len(self.types)
            unit, acc = np.nonzero(self._runnable[rows])  # ascending (unit, type)
            target = self._target[rows, :][unit, acc]
            share = np.where(target > self.min_share, target, 0.0)
            candidates = PriorityCandidates(unit, acc, share, [unit], num_types, presorted=True)
            self._candidates = candidates
            # per candidate, in the static order
            cand_slot = rows[candidates.unit]
            self._cand_flat = cand_slot * num_types + candidates.acc
            self._cand_arrival = self._arrival[cand_slot]
            self._cand_assign = self._assignment_flat[self._cand_flat].tolist()
            self._gang_list = self._gang[rows].tolist()
        received = self._received.reshape(-1)[self._cand_flat]
        age = state.now - self._cand_arrival
        return candidates.pick(received, age, self._gang_list, self._free,
                               round_s=state.round_s, work_conserving=self.work_conserving)

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
