r"""``hare.exact``: the Hare scheduling problem solved exactly on CP-SAT (OR-Tools).

**The problem** (docs/formulations/hare.md): jobs j with weight w_j, arrival r_j, R_j rounds
of m_j tasks; a task of j runs p[j,k] seconds on a GPU of type k; a GPU runs one task at a
time; round q+1 starts after every task of round q ended; when task b directly follows task a
on GPU g and their jobs differ, b starts >= end(a) + sigma[job(b), type(g)] (a GPU's first
task pays sigma only with ``params.switch_on_first_task``); with
``params.one_type_per_round`` all tasks of a round run on one GPU type.  Minimize
sum_j w_j C_j.

**Time in ticks.**  CP-SAT is an integer solver, so every time is measured in ticks of
1/S s (``S`` = ``metrics.time_scale``) and the weights are integers W_j = w_j F
(``metrics.weight_scale`` = F).  Durations, switch gaps and arrivals are rounded *up*
(P = ceil(p S), Sigma = ceil(sigma S), A = ceil(r S)).  When every value is a rational
with a small denominator (integers, or decimals with few digits) S is the least common
multiple of the denominators and nothing is rounded: the integer model *is* the problem,
scaled.  Otherwise S is as large as the model's integer range allows and

* **the schedule** is still feasible: the solver's assignment and GPU orders are retimed to
  their earliest starts with the true seconds (:func:`~schedlab.formulations.hare.exact.
  earliest_starts`), which are never later than the solver's times divided by S (the true
  durations and gaps are no longer than the rounded ones); the objective is that
  schedule's sum_j w_j C_j;
* **the bound** loses at most the rounding: retiming an optimal schedule's orders with the
  rounded data moves every end by at most E ticks, E = (max arrival rounding) + n (max
  duration rounding + max gap rounding) (a longest chain of start rules holds at most one
  arrival and n tasks, each with a duration and a gap), so the integer optimum is
  <= sum_j W_j (S C*_j + E) and OPT >= (CP-SAT's bound - E sum_j W_j) / (S F rho), rho =
  max_j W_j / (w_j F) (1 when the weights are exact).  ``metrics.rounding_error_s`` = E/S.

**The model** (tasks t job by job, round by round; GPUs g type by type; only pairs where the
job can use the type; :func:`build_cpsat`):

* x[t,g] (presence), one optional interval of length P[j(t), type(g)] per pair on the
  task's start S_t; exactly one x per task; E_t = S_t + sum_g P x[t,g]; a NoOverlap per GPU
  and a Cumulative per type of >= 2 GPUs (capacity n_k) over the same intervals (redundant,
  they propagate and give the LP energy cuts);
* one AddCircuit per GPU over a depot node and the GPU's candidate tasks: the arc
  depot->depot means "g unused", t->t means "t is not on g" (literal not x[t,g]),
  depot->t "t is g's first task", t->depot "its last", a->b "b directly follows a":
  a->b implies S_b >= S_a + P[j(a), type(g)] + Sigma[j(b), type(g)] when the jobs differ
  (+ 0 for the same job); depot->b implies S_b >= Sigma[j(b), type(g)] with the first-task
  option.  Arcs that cannot hold are left out (from a later round of a job to an earlier
  one, against the start order of a round's tasks).  Since the arcs are exactly the direct
  successions, the gap is charged exactly where the rules charge it (a NoOverlap with
  transition times would charge it between every pair);
* rounds: F[j,q] >= E_t for the tasks of round q, S_t >= F[j,q-1], S_t >= A_j in round 0;
* ``one_type_per_round``: z[j,q,k] in {0,1} per usable type, exactly one per round,
  x[t,g] implies z[j(t),q(t),type(g)];
* symmetry: the tasks of a round start in index order; GPU g+1 of a type is used only when
  GPU g is (the tasks of a round, and the GPUs of a type, are interchangeable);
* horizon: a known schedule of value U (the hint) bounds every optimal one, so
  W_j C_j <= U - sum_{i != j} W_i L_i (L_i = A_i + R_i min_k P[i,k]): each job's times get
  the domain [A_j + q Pmin_j, H_j - (R_j - q) Pmin_j];
* minimize sum_j W_j F[j, R_j - 1].

``ExactCpsat(per_type=True)`` sequences each GPU type instead of each GPU: one
AddMultipleCircuit per type whose at most n_k routes are its GPUs (no GPU symmetry; the
route of the i-th earliest first task goes to GPU i), a Cumulative of capacity n_k in place
of the NoOverlaps.  Same optimum; it was no faster on the measured instances, so the per-GPU
model is the default.  (OR-Tools 9.15's presolve declares a multiple circuit whose every
non-depot node is skipped infeasible; each type's circuit carries one extra always-visited
node as its own route to avoid that.)

**Anytime.**  The better of ``hare.greedy``'s schedule and the serial schedule of
:mod:`~schedlab.formulations.hare.exact` (the smaller integer objective) is the search's
complete hint (AddHint), relabelled to meet the symmetry rows; ``hare.greedy``'s LP bound
is kept beside CP-SAT's (the larger valid one is reported).  The time limit
(``options.time_limit_s``, else ``params.time_limit_s``, else 60 s) counts from the start of
``solve``, greedy and build included; CP-SAT gets what is left.  Threads =
``options.threads`` (CP-SAT's num_workers; None: CP-SAT's default, every core), seed =
``options.seed``, ``options.mip_gap`` (else ``params.mip_gap``) = CP-SAT's
relative_gap_limit, ``options.extra`` = further CP-SAT parameters by name (e.g.
``max_deterministic_time``; an unknown name is an InputError); linearization level
:data:`LINEARIZATION_LEVEL`.

**Status.**  ``optimal`` when CP-SAT proved its model optimal and the gap between the
retimed schedule and the bound (after the rounding correction) is within the status rule's
tolerance (:func:`~schedlab.solution.settle_status`); ``time_limit`` with CP-SAT's incumbent
when the limit stopped it.  Without an incumbent (no time left, CP-SAT found nothing, the
model too large) the hint schedule is returned as ``feasible`` with the LP bound and
``metrics.fallback`` saying why.

**Size.**  The circuits have at most sum_g (n_g + 2)^2 arcs (n_g = the tasks that may run
on g); a model above :data:`MAX_ARCS` arcs, or one whose Python construction would take
more than half the time left (:data:`BUILD_S_PER_ARC` per arc), is not built: the answer is
the hint as above.  No other limit on jobs, GPUs, rounds or tasks.

Without OR-Tools installed, :class:`ExactCpsat` raises
:class:`~schedlab.errors.SolverUnavailableError` (exit 2) naming
``pip install "schedlab[cpsat]"``.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from schedlab.errors import InputError, SolverUnavailableError
from schedlab.formulations.base import Method
from schedlab.formulations.hare.exact import (
    DEFAULT_TIME_LIMIT_S,
    TaskIndex,
    earliest_starts,
    example_instance,
    serial_schedule,
    to_tasks,
)
from schedlab.formulations.hare.greedy import HareGreedy
from schedlab.formulations.hare.model import (
    FloatArray,
    HareData,
    IntArray,
    hare_data,
    hare_solution,
    objective_of_schedule,
    reconcile_bound,
    tasks_from_schedule,
)
from schedlab.instance import Instance
from schedlab.solution import Solution, Status, Timings
from schedlab.solvers import SolverOptions
from schedlab.solvers.interrupt import stop_on_sigint

#: The one line a user without OR-Tools reads.
CPSAT_MISSING = ('hare.exact solves on CP-SAT (OR-Tools), which is not installed: '
                 'pip install "schedlab[cpsat]" (or use hare.exact_milp, the HiGHS MILP)')
#: Most circuit arcs (sum over GPUs of (candidate tasks + 2)^2) of a model we build: about
#: 10 s of construction; e.g. 100 tasks on 32 GPUs, or 280 on 5.
MAX_ARCS = 400_000
#: Seconds to build one circuit arc in Python (measured: 479 172 arcs in 12.6 s on the
#: loaded 2-core development machine); a model whose build would take more than half the
#: time left is not built.
BUILD_S_PER_ARC = 2.5e-5
#: Largest time in ticks (S times the longest horizon, s).
MAX_TICKS = 2**40
#: Largest sum_j W_j x (the longest horizon in ticks): every objective value and bound is
#: an integer a double holds exactly.
MAX_OBJECTIVE = 2**53
#: Largest denominator tried when looking for an exact time or weight scale.
MAX_DENOMINATOR = 10**6
#: Largest integer weight.
MAX_WEIGHT = 2**20
#: Rounding error aimed at when the data are not exact: E sum_j W_j / (S F) at most this
#: fraction of the trivial bound sum_j w_j (r_j + R_j pmin_j) (S permitting).
TARGET_ROUNDING = 1e-5
#: CP-SAT's linearization_level: 2 adds the circuit and scheduling cuts to its LP (fewer
#: search steps to a proof on 8-14-task instances than the default 1, measured).
LINEARIZATION_LEVEL = 2


def _cp_model() -> Any:
    """OR-Tools' cp_model module, or the one-line error of :data:`CPSAT_MISSING`."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        raise SolverUnavailableError(CPSAT_MISSING) from None
    return cp_model


# --------------------------------------------------------------------------- time in ticks


def _common_denominator(values: FloatArray, limit: int) -> int | None:
    """The least common multiple of the denominators of ``values`` read as fractions with
    denominators <= ``limit`` (None when one is not such a fraction within 1e-12, or the
    multiple exceeds ``limit``)."""
    scale = 1
    for v in np.unique(values).tolist():
        frac = Fraction(v).limit_denominator(limit)
        if abs(float(frac) - v) > 1e-12 * max(abs(v), 1e-300):
            return None
        scale = math.lcm(scale, frac.denominator)
        if scale > limit:
            return None
    return scale


def _ceil_ticks(seconds: FloatArray, scale: float) -> FloatArray:
    """ceil(seconds * scale), values within 1e-9 (relative) of an integer taken as it."""
    x = seconds * scale
    near = np.round(x)
    return np.where(np.abs(x - near) <= 1e-9 * np.maximum(1.0, np.abs(x)), near, np.ceil(x))


@dataclass(frozen=True)
class Ticks:
    """The problem in integer ticks (module docstring, "Time in ticks").

    ``data`` is the same :class:`HareData` with seconds, switch gaps and arrivals in ticks
    (integers stored as floats) and the integer weights W_j; ``scale`` = S ticks per second,
    ``weight_scale`` = F, ``weight_ratio`` = rho, ``error`` = E ticks, ``exact``: nothing was
    rounded."""

    data: HareData
    scale: int
    weight_scale: float
    weight_ratio: float
    error: float
    exact: bool

    def lower_bound(self, ticks_bound: float) -> float:
        """A lower bound on the true optimum, s, from a bound on the integer model's."""
        total_w = float(self.data.weight.sum())
        return (ticks_bound - self.error * total_w) / (
            self.scale * self.weight_scale * self.weight_ratio)


def to_ticks(data: HareData, horizon_s: float) -> Ticks:
    """The tick scale S and the integer weights for ``data`` whose optimal schedules end by
    ``horizon_s`` (module docstring)."""
    usable = data.usable
    times = np.concatenate([data.seconds[usable], data.switch[usable & (data.switch > 0)],
                            data.arrival[data.arrival > 0]])
    weights = data.weight
    w_scale: float
    w_exact = _common_denominator(weights, MAX_DENOMINATOR)
    if w_exact is not None and float(weights.max()) * w_exact <= MAX_WEIGHT:
        w_scale = float(w_exact)
    else:
        w_scale = MAX_WEIGHT / float(weights.max())
    int_w = np.maximum(1.0, np.round(weights * w_scale))
    weights_exact = w_exact is not None and w_scale == w_exact   # fractions within 1e-12
    ratio = 1.0 if weights_exact else float(np.max(int_w / (weights * w_scale)))
    horizon = max(horizon_s, 1e-9)
    cap = min(MAX_TICKS / horizon, MAX_OBJECTIVE / (float(int_w.sum()) * horizon))
    exact = _common_denominator(times, MAX_DENOMINATOR) if len(times) else 1
    if exact is not None and exact <= cap:
        scale = exact
    else:
        shortest = float(np.min(data.arrival + data.rounds * data.min_seconds))
        wanted = (2 * data.total_tasks + 1) / (TARGET_ROUNDING * max(shortest, 1e-9))
        scale = max(1, int(min(cap, max(wanted, 1.0))))
    seconds = np.where(usable, _ceil_ticks(np.where(usable, data.seconds, 0.0), scale), np.inf)
    switch = _ceil_ticks(data.switch, scale)
    arrival = _ceil_ticks(data.arrival, scale)

    def worst(rounded: FloatArray, true: FloatArray) -> float:
        return float(np.max(rounded - true * scale, initial=0.0))

    error = worst(arrival, data.arrival) + data.total_tasks * (
        worst(seconds[usable], data.seconds[usable])
        + worst(switch[usable], data.switch[usable]))
    ticks = HareData(job_ids=data.job_ids, types=data.types, gpus=data.gpus, weight=int_w,
                     arrival=arrival, rounds=data.rounds, tasks=data.tasks, seconds=seconds,
                     switch=switch, first_task_pays=data.first_task_pays)
    return Ticks(data=ticks, scale=scale, weight_scale=w_scale, weight_ratio=ratio,
                 error=error, exact=error == 0.0 and weights_exact)


# ------------------------------------------------------------------------------ schedules


@dataclass(frozen=True)
class Sequenced:
    """A schedule as an assignment (global GPU per task, :class:`~schedlab.formulations.
    hare.exact.TaskIndex` order) and each GPU's task order."""

    gpu: IntArray
    order: list[list[int]]
    source: str

    def starts(self, data: HareData, tasks: TaskIndex) -> FloatArray:
        """Earliest starts with ``data``'s durations, gaps and arrivals."""
        return earliest_starts(data, tasks, self.gpu, self.order)


def _value(data: HareData, tasks: TaskIndex, gpu: IntArray, start: FloatArray) -> float:
    end = start + data.seconds[tasks.job, tasks.gpu_type[gpu]]
    completion = np.full(data.num_jobs, -np.inf)
    np.maximum.at(completion, tasks.job, end)
    return float(data.weight @ completion)


def _canonical(seq: Sequenced, data: HareData, tasks: TaskIndex) -> Sequenced:
    """The same schedule relabelled to meet the model's symmetry rows: the tasks of a round
    start in index order, and each type's GPUs are used in index order (by first start)."""
    start = seq.starts(data, tasks)
    n = tasks.num_tasks
    # tasks of a round: the k-th earliest takes index k (the tasks are alike)
    relabel = np.arange(n)
    first = 0
    while first < n:
        last = first
        while (last + 1 < n and tasks.job[last + 1] == tasks.job[first]
               and tasks.round[last + 1] == tasks.round[first]):
            last += 1
        members = np.arange(first, last + 1)
        by_start = members[np.lexsort((members, start[members]))]
        relabel[by_start] = members        # the task at position i becomes members[i]
        first = last + 1
    gpu_of = np.empty(n, dtype=np.int64)
    gpu_of[relabel] = seq.gpu
    order = [[int(relabel[t]) for t in s] for s in seq.order]
    # GPUs of a type: used ones first, by their first task's start
    new_gpu = np.arange(tasks.num_gpus)
    for k in range(data.num_types):
        members = np.flatnonzero(tasks.gpu_type == k)
        keyed = sorted(members.tolist(), key=lambda g: (
            not order[g], start[seq.order[g][0]] if order[g] else 0.0, g))
        new_gpu[keyed] = members
    new_order: list[list[int]] = [[] for _ in range(tasks.num_gpus)]
    for g, s in enumerate(order):
        new_order[int(new_gpu[g])] = s
    return Sequenced(gpu=new_gpu[gpu_of], order=new_order, source=seq.source)


def _sequenced(tasks: TaskIndex, gpu: IntArray, start: FloatArray, source: str) -> Sequenced:
    order = [sorted(np.flatnonzero(gpu == g).tolist(), key=lambda t: (start[t], t))
             for g in range(tasks.num_gpus)]
    return Sequenced(gpu=gpu, order=order, source=source)


def _greedy_sequence(instance: Instance, data: HareData, tasks: TaskIndex,
                     options: SolverOptions) -> tuple[Sequenced | None, float | None]:
    """hare.greedy's schedule in model order and its LP bound (None, None when it does not
    give one task per model task)."""
    solution = HareGreedy().solve(instance, replace(options, extra={}))  # extra: CP-SAT's
    placed = tasks_from_schedule(data, solution.schedule)
    if placed is None or len(placed) != tasks.num_tasks:
        return None, solution.bound
    first_task = {}
    offset = 0
    for j in range(data.num_jobs):
        for q in range(int(data.rounds[j])):
            first_task[j, q] = offset
            offset += int(data.tasks[j])
    first_gpu = np.concatenate([[0], np.cumsum(data.gpus)[:-1]]).astype(np.int64)
    gpu = np.full(tasks.num_tasks, -1, dtype=np.int64)
    start = np.zeros(tasks.num_tasks)
    for p in placed:
        t = first_task[p.job, p.round] + p.index
        gpu[t] = first_gpu[p.type] + p.gpu
        start[t] = p.start
    if np.any(gpu < 0):
        return None, solution.bound
    return _sequenced(tasks, gpu, start, "greedy"), solution.bound


def _one_type_ok(seq: Sequenced, tasks: TaskIndex) -> bool:
    """Every round's tasks on one GPU type."""
    seen: dict[tuple[int, int], int] = {}
    for t in range(tasks.num_tasks):
        key = (int(tasks.job[t]), int(tasks.round[t]))
        k = int(tasks.gpu_type[seq.gpu[t]])
        if seen.setdefault(key, k) != k:
            return False
    return True


# ----------------------------------------------------------------------------- the model


@dataclass
class CpsatModel:
    """The CP-SAT model of the module docstring and the handles to read it.

    ``model`` is OR-Tools' ``CpModel`` (a user may add constraints to it before
    :meth:`ExactCpsat.solve_model`).  The tasks are sequenced on *units*: one per GPU
    (``per_type`` False: a circuit each) or one per GPU type (``per_type`` True: a multiple
    circuit with at most n_k routes, one per GPU).  ``unit_type[u]``, ``unit_gpus[u]`` (the
    global GPUs of unit u); ``pairs`` the (task, unit) pairs with presence literal
    ``present[i]``; ``start``/``end`` per task; ``round_end`` per (job, round); ``arcs`` the
    circuit literals by (unit, from, to) with -1 for the depot; ``horizon`` the per-job
    horizons, ticks."""

    model: Any
    ticks: Ticks
    tasks: TaskIndex
    per_type: bool
    unit_type: list[int]
    unit_gpus: list[list[int]]
    pairs: list[tuple[int, int]]
    present: list[Any]
    start: list[Any]
    end: list[Any]
    round_end: dict[tuple[int, int], Any]
    arcs: dict[tuple[int, int, int], Any]
    type_choice: dict[tuple[int, int, int], Any]
    horizon: FloatArray
    hint: Sequenced

    @property
    def num_arcs(self) -> int:
        """Circuit arcs (self loops included)."""
        return len(self.arcs)

    def schedule(self, value: Any) -> tuple[IntArray, list[list[int]]]:
        """(global GPU per task, each GPU's order) of a solution, ``value(literal)`` its
        truth: each unit's sequences read from its arcs; on a type unit the routes go to
        the type's GPUs in the order of their first tasks."""
        n = self.tasks.num_tasks
        gpu = np.full(n, -1, dtype=np.int64)
        order: list[list[int]] = [[] for _ in range(self.tasks.num_gpus)]
        succ: dict[tuple[int, int], int] = {}
        heads: list[list[int]] = [[] for _ in self.unit_type]
        for (u, a, b), lit in self.arcs.items():
            if a == b or a < -1 or b < -1 or not value(lit):
                continue
            if a == -1 and b >= 0:
                heads[u].append(b)
            elif a >= 0 and b >= 0:
                succ[u, a] = b
        for u, firsts in enumerate(heads):
            routes = []
            for h in sorted(firsts):
                route: list[int] = []
                t = h
                while t >= 0 and len(route) <= n:
                    route.append(t)
                    t = succ.get((u, t), -1)
                routes.append(route)
            for g, route in zip(self.unit_gpus[u], routes, strict=False):
                order[g] = route
                gpu[route] = g
            if len(routes) > len(self.unit_gpus[u]):
                raise ValueError(f"unit {u} has more sequences than GPUs")
        if np.any(gpu < 0) or sorted(t for s in order for t in s) != list(range(n)):
            raise ValueError("the solver's sequences do not cover every task once")
        return gpu, order


def count_arcs(data: HareData, tasks: TaskIndex, *, per_type: bool = True) -> int:
    """An upper bound on the model's circuit arcs: sum over units of (candidate tasks +
    1)^2, units GPUs or types."""
    per_type_tasks = np.array([int(data.usable[tasks.job, k].sum())
                               for k in range(data.num_types)], dtype=np.int64)
    units = np.minimum(data.gpus, 1) if per_type else data.gpus
    return int(((per_type_tasks + 2) ** 2 * units).sum())


def build_cpsat(ticks: Ticks, tasks: TaskIndex, hint: Sequenced, *,
                one_type_per_round: bool, per_type: bool = False) -> CpsatModel:
    """The CP-SAT model (module docstring) over ``ticks.data`` with ``hint`` (feasible, in
    canonical form) as its complete hint and its value as the horizon; tasks sequenced per
    GPU type (``per_type``, the default) or per GPU."""
    cp = _cp_model()
    data = ticks.data
    job, rnd, gtype = tasks.job, tasks.round, tasks.gpu_type
    n, num_gpus = tasks.num_tasks, tasks.num_gpus
    hint_start = hint.starts(data, tasks)
    hint_end = hint_start + data.seconds[job, gtype[hint.gpu]]
    pmin = data.min_seconds

    def ival(x: float) -> int:
        return int(np.rint(x))

    # horizons in exact integer arithmetic: W_j C_j <= U - sum_{i != j} W_i L_i
    weight = [ival(w) for w in data.weight]
    completion = [-math.inf] * data.num_jobs
    for t in range(n):
        completion[job[t]] = max(completion[job[t]], float(hint_end[t]))
    upper = sum(w * ival(c) for w, c in zip(weight, completion, strict=True))
    low = [ival(a + r * p) for a, r, p in zip(data.arrival, data.rounds, pmin, strict=True)]
    total_low = sum(w * lo for w, lo in zip(weight, low, strict=True))
    horizon = np.array([(upper - total_low + w * lo) // w
                        for w, lo in zip(weight, low, strict=True)], dtype=float)
    m = cp.CpModel()

    start = [m.new_int_var(ival(data.arrival[job[t]] + rnd[t] * pmin[job[t]]),
                           ival(horizon[job[t]] - (data.rounds[job[t]] - rnd[t]) * pmin[job[t]]),
                           f"S{t}") for t in range(n)]
    end = [m.new_int_var(ival(data.arrival[job[t]] + (rnd[t] + 1) * pmin[job[t]]),
                         ival(horizon[job[t]] - (data.rounds[job[t]] - rnd[t] - 1)
                              * pmin[job[t]]), f"E{t}") for t in range(n)]
    round_end: dict[tuple[int, int], Any] = {}
    for j in range(data.num_jobs):
        for q in range(int(data.rounds[j])):
            round_end[j, q] = m.new_int_var(
                ival(data.arrival[j] + (q + 1) * pmin[j]),
                ival(horizon[j] - (data.rounds[j] - q - 1) * pmin[j]), f"F{j}_{q}")
    # units: GPU types (routes) or GPUs (circuits)
    if per_type:
        unit_gpus = [np.flatnonzero(gtype == k).tolist() for k in range(data.num_types)]
        unit_type = [k for k in range(data.num_types) if unit_gpus[k]]
        unit_gpus = [g for g in unit_gpus if g]
    else:
        unit_gpus = [[g] for g in range(num_gpus)]
        unit_type = [int(gtype[g]) for g in range(num_gpus)]
    unit_of_gpu = np.empty(num_gpus, dtype=np.int64)
    for u, members in enumerate(unit_gpus):
        unit_of_gpu[members] = u
    pairs: list[tuple[int, int]] = []
    present: list[Any] = []
    on_unit: list[list[tuple[int, Any, Any]]] = [[] for _ in unit_type]  # (t, x, interval)
    by_task: list[list[tuple[int, Any]]] = [[] for _ in range(n)]
    for t in range(n):
        for u, k in enumerate(unit_type):
            if not data.usable[job[t], k]:
                continue
            x = m.new_bool_var(f"x{t}_{u}")
            interval = m.new_optional_fixed_size_interval_var(
                start[t], ival(data.seconds[job[t], k]), x, f"I{t}_{u}")
            pairs.append((t, u))
            present.append(x)
            on_unit[u].append((t, x, interval))
            by_task[t].append((u, x))
    for t in range(n):
        m.add_exactly_one(x for _, x in by_task[t])
        m.add(end[t] == start[t] + sum(ival(data.seconds[job[t], unit_type[u]]) * x
                                       for u, x in by_task[t]))
        m.add(round_end[int(job[t]), int(rnd[t])] >= end[t])
        if rnd[t] > 0:
            m.add(start[t] >= round_end[int(job[t]), int(rnd[t]) - 1])
    # sequences
    arcs: dict[tuple[int, int, int], Any] = {}
    used: list[Any] = []
    for u, k in enumerate(unit_type):
        cands = on_unit[u]
        capacity = len(unit_gpus[u])
        circuit: list[tuple[int, int, Any]] = []
        if capacity == 1:
            m.add_no_overlap([iv for _, _, iv in cands])
            empty = m.new_bool_var(f"empty{u}")
            used.append(~empty)
            circuit.append((0, 0, empty))
            arcs[u, -1, -1] = empty
        else:
            m.add_cumulative([iv for _, _, iv in cands], [1] * len(cands), capacity)
            # a route of its own through an extra node: OR-Tools 9.15's presolve declares a
            # multiple circuit whose every other node is skipped infeasible
            extra = len(cands) + 1
            one = m.new_constant(1)
            circuit += [(0, extra, one), (extra, 0, one)]
            arcs[u, -2, -2] = one
        heads = []
        for i, (t, x, _) in enumerate(cands):
            circuit.append((i + 1, i + 1, ~x))
            arcs[u, t, t] = ~x
            head = m.new_bool_var(f"h{t}_{u}")
            tail = m.new_bool_var(f"l{t}_{u}")
            heads.append(head)
            circuit += [(0, i + 1, head), (i + 1, 0, tail)]
            arcs[u, -1, t] = head
            arcs[u, t, -1] = tail
            if data.first_task_pays and data.switch[job[t], k] > 0:
                m.add(start[t] >= ival(data.switch[job[t], k])).only_enforce_if(head)
        for i, (a, _, _) in enumerate(cands):
            for i2, (b, _, _) in enumerate(cands):
                if a == b or (job[a] == job[b] and (rnd[a] > rnd[b]
                                                    or (rnd[a] == rnd[b] and a > b))):
                    continue
                y = m.new_bool_var(f"y{a}_{b}_{u}")
                gap = 0.0 if job[a] == job[b] else data.switch[job[b], k]
                m.add(start[b] >= start[a] + ival(data.seconds[job[a], k] + gap)
                      ).only_enforce_if(y)
                circuit.append((i + 1, i2 + 1, y))
                arcs[u, a, b] = y
        if capacity == 1:
            m.add_circuit(circuit)
        else:
            m.add(sum(heads) <= capacity)
            m.add_multiple_circuit(circuit)
    if not per_type:
        # redundant: per type, the tasks on it never exceed its GPUs (energetic reasoning)
        for k in range(data.num_types):
            members = np.flatnonzero(gtype == k).tolist()
            if len(members) < 2:
                continue
            intervals = []
            for t in range(n):
                if not data.usable[job[t], k]:
                    continue
                on_k = m.new_bool_var(f"o{t}_{k}")
                m.add(on_k == sum(x for u, x in by_task[t] if unit_type[u] == k))
                m.add_hint(on_k, bool(gtype[hint.gpu[t]] == k))
                intervals.append(m.new_optional_fixed_size_interval_var(
                    start[t], ival(data.seconds[job[t], k]), on_k, f"K{t}_{k}"))
            m.add_cumulative(intervals, [1] * len(intervals), len(members))
        # symmetry: a type's GPUs are used in index order
        for g in range(num_gpus - 1):
            if gtype[g] == gtype[g + 1]:
                m.add_implication(used[g + 1], used[g])
    # symmetry: a round's tasks start in index order
    for t in range(n - 1):
        if job[t] == job[t + 1] and rnd[t] == rnd[t + 1]:
            m.add(start[t] <= start[t + 1])
    # one type per round
    type_choice: dict[tuple[int, int, int], Any] = {}
    if one_type_per_round:
        for j in range(data.num_jobs):
            for q in range(int(data.rounds[j])):
                choices = []
                for k in np.flatnonzero(data.usable[j]).tolist():
                    z = m.new_bool_var(f"z{j}_{q}_{k}")
                    type_choice[j, q, k] = z
                    choices.append(z)
                m.add_exactly_one(choices)
        for (t, u), x in zip(pairs, present, strict=True):
            m.add_implication(x, type_choice[int(job[t]), int(rnd[t]), unit_type[u]])
    last = [round_end[j, int(data.rounds[j]) - 1] for j in range(data.num_jobs)]
    m.minimize(sum(w * f for w, f in zip(weight, last, strict=True)))

    # the hint: every variable
    for t in range(n):
        m.add_hint(start[t], ival(hint_start[t]))
        m.add_hint(end[t], ival(hint_end[t]))
    hint_unit = unit_of_gpu[hint.gpu]
    for (t, u), x in zip(pairs, present, strict=True):
        m.add_hint(x, bool(hint_unit[t] == u))
    round_hint: dict[tuple[int, int], float] = {}
    for t in range(n):
        key = (int(job[t]), int(rnd[t]))
        round_hint[key] = max(round_hint.get(key, -math.inf), float(hint_end[t]))
    for key, var in round_end.items():
        m.add_hint(var, ival(round_hint[key]))
    follows: set[tuple[int, int, int]] = set()
    for g, seq in enumerate(hint.order):
        u = int(unit_of_gpu[g])
        if seq:
            follows |= {(u, -1, seq[0]), (u, seq[-1], -1)}
            follows |= {(u, a, b) for a, b in itertools.pairwise(seq)}
        else:
            follows.add((u, -1, -1))
    for (u, a, b), lit in arcs.items():
        if a == b and a != -1:
            continue                       # t -> t is not x[t,u]: hinted through x; a constant
        m.add_hint(lit, (u, a, b) in follows)
    for (j, q, k), z in type_choice.items():
        t = int(np.flatnonzero((job == j) & (rnd == q))[0])
        m.add_hint(z, bool(gtype[hint.gpu[t]] == k))
    return CpsatModel(model=m, ticks=ticks, tasks=tasks, per_type=per_type,
                      unit_type=unit_type, unit_gpus=unit_gpus, pairs=pairs, present=present,
                      start=start, end=end, round_end=round_end, arcs=arcs,
                      type_choice=type_choice, horizon=horizon, hint=hint)


# ---------------------------------------------------------------------------- the method


@dataclass(frozen=True)
class _Prepared:
    data: HareData
    tasks: TaskIndex
    ticks: Ticks
    hint: Sequenced
    lp_bound: float | None
    one_type: bool


class ExactCpsat(Method):
    """``hare.exact``: the CP-SAT model (module docstring) on a Hare instance.

    The Solution holds one schedule entry per task; ``objective`` = sum_j w_j C_j of the
    retimed schedule, ``bound`` the larger of CP-SAT's bound (in seconds, less the rounding)
    and hare.greedy's LP bound; ``metrics`` add ``time_scale``, ``weight_scale``,
    ``exact_scaling``, ``rounding_error_s``, ``cpsat_status``, ``cpsat_bound`` and
    ``cpsat_objective`` (ticks x weight units), ``cpsat_wall_s``,
    ``cpsat_deterministic_time``, ``hint`` (greedy or serial), ``hint_objective``,
    ``lp_bound``, ``prepare_s`` (greedy, LP and hint), the model's size (``tasks``,
    ``pairs``, ``arcs``) and ``fallback`` when the hint is returned instead.
    """

    name = "hare.exact"
    description: ClassVar[str] = ("Hare: exact CP-SAT model (per-GPU circuits with switch "
                                  "gaps, barriers, arrivals; integer ticks, retimed in seconds)")
    objective_sense = "minimize"

    def __init__(self, *, per_type: bool = False) -> None:
        """``per_type``: sequence the tasks per GPU type (one multiple circuit with n_k
        routes) instead of per GPU (a circuit each); the same optimum."""
        self.per_type = per_type

    def validate(self, instance: Instance) -> None:
        """The Hare fields on every job, a usable GPU type for each."""
        data = hare_data(instance, self.name)
        for j in np.flatnonzero(~data.usable.any(axis=1)):
            raise InputError(f"job {data.job_ids[j]!r} can run on no GPU type present",
                             field=f"jobs[{int(j)}].task_seconds")

    def prepare(self, instance: Instance, options: SolverOptions) -> _Prepared:
        """The data, the hint (better of greedy and serial), the ticks."""
        data = hare_data(instance, self.name)
        tasks = TaskIndex.of(data)
        one_type = bool(getattr(instance.params, "one_type_per_round", False))
        s_gpu, s_start = serial_schedule(data, tasks)
        candidates = [_sequenced(tasks, s_gpu, s_start, "serial")]
        greedy, lp_bound = _greedy_sequence(instance, data, tasks, options)
        if greedy is not None and (not one_type or _one_type_ok(greedy, tasks)):
            candidates.insert(0, greedy)
        values = [_value(data, tasks, c.gpu, c.starts(data, tasks)) for c in candidates]
        low = data.arrival + data.rounds * data.min_seconds
        others = float(data.weight @ low) - data.weight * low
        horizon_s = float(np.max((min(values) - others) / data.weight))
        ticks = to_ticks(data, horizon_s)
        tick_values = [_value(ticks.data, tasks, c.gpu, c.starts(ticks.data, tasks))
                       for c in candidates]
        hint = _canonical(candidates[int(np.argmin(tick_values))], ticks.data, tasks)
        return _Prepared(data=data, tasks=tasks, ticks=ticks, hint=hint, lp_bound=lp_bound,
                         one_type=one_type)

    def build(self, instance: Instance, options: SolverOptions | None = None) -> CpsatModel:
        """The CP-SAT model of ``instance`` (a user may add constraints to ``.model``)."""
        prepared = self.prepare(instance, options or SolverOptions())
        return build_cpsat(prepared.ticks, prepared.tasks, prepared.hint,
                           one_type_per_round=prepared.one_type, per_type=self.per_type)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Hint, model, CP-SAT within the time limit, retimed schedule (module docstring)."""
        opts = options or SolverOptions()
        self.validate(instance)
        _cp_model()
        t0 = time.perf_counter()
        limit = opts.time_limit_s or instance.params.time_limit_s or DEFAULT_TIME_LIMIT_S
        prepared = self.prepare(instance, opts)
        arcs = count_arcs(prepared.data, prepared.tasks, per_type=self.per_type)
        data, tasks, hint = prepared.data, prepared.tasks, prepared.hint
        metrics: dict[str, Any] = dict(
            tasks=tasks.num_tasks, time_scale=prepared.ticks.scale,
            weight_scale=prepared.ticks.weight_scale, exact_scaling=prepared.ticks.exact,
            rounding_error_s=prepared.ticks.error / prepared.ticks.scale,
            hint=hint.source, hint_objective=_value(data, tasks, hint.gpu,
                                                    hint.starts(data, tasks)),
            lp_bound=prepared.lp_bound, arcs=arcs, prepare_s=time.perf_counter() - t0)
        if arcs > MAX_ARCS:
            return self._fallback(instance, prepared, opts, t0, metrics,
                                  f"model too large: {arcs} circuit arcs > {MAX_ARCS}")
        left = limit - (time.perf_counter() - t0)
        if arcs * BUILD_S_PER_ARC > left / 2:
            return self._fallback(
                instance, prepared, opts, t0, metrics,
                f"{arcs} circuit arcs take about {arcs * BUILD_S_PER_ARC:.2g} s to build, more "
                f"than half the {max(left, 0.0):.2g} s left of the time limit")
        model = build_cpsat(prepared.ticks, prepared.tasks, prepared.hint,
                             one_type_per_round=prepared.one_type, per_type=self.per_type)
        t_built = time.perf_counter()
        left = limit - (t_built - t0)
        metrics.update(pairs=len(model.pairs), arcs=model.num_arcs)
        if left <= 0:
            return self._fallback(instance, prepared, opts, t0, metrics,
                                  f"no time left for CP-SAT (limit {limit:g} s)")
        return self.solve_model(instance, prepared, model, opts, left, t0, t_built, metrics)

    def solve_model(self, instance: Instance, prepared: _Prepared, model: CpsatModel,
                    opts: SolverOptions, seconds: float, t0: float, t_built: float,
                    metrics: dict[str, Any]) -> Solution:
        """Run CP-SAT for at most ``seconds`` and read its answer."""
        cp = _cp_model()
        mip_gap = opts.mip_gap if opts.mip_gap is not None else instance.params.mip_gap
        solver = cp.CpSolver()
        params = solver.parameters
        params.max_time_in_seconds = seconds
        if opts.threads is not None:
            params.num_workers = int(opts.threads)
        if opts.seed is not None:
            params.random_seed = int(opts.seed)
        if mip_gap is not None:
            params.relative_gap_limit = float(mip_gap)
        params.log_search_progress = bool(opts.verbose)
        if opts.verbose:  # the search log is a diagnostic: stderr, never stdout
            params.log_to_stdout = False
            solver.log_callback = _log_to_stderr
        params.linearization_level = LINEARIZATION_LEVEL
        for key, value in opts.extra.items():
            try:
                setattr(params, key, value)
            except (AttributeError, TypeError, ValueError) as exc:
                raise InputError(f"CP-SAT has no parameter {key}={value!r} ({exc})",
                                 field=f"options.extra.{key}") from None
        params.catch_sigint_signal = False  # Ctrl-C: stop_on_sigint, then exit 130
        with stop_on_sigint(solver.stop_search) as interrupted:
            code = solver.solve(model.model)
        if interrupted["stop"]:
            raise KeyboardInterrupt
        t_solved = time.perf_counter()
        status_name = solver.status_name(code)
        metrics.update(cpsat_status=status_name, cpsat_wall_s=solver.wall_time,
                       cpsat_deterministic_time=solver.deterministic_time)
        if code not in (cp.OPTIMAL, cp.FEASIBLE):
            return self._fallback(instance, prepared, opts, t0, metrics,
                                  f"CP-SAT returned no schedule ({status_name})")
        tasks, data, ticks = prepared.tasks, prepared.data, prepared.ticks
        gpu, order = model.schedule(solver.boolean_value)
        start = earliest_starts(data, tasks, gpu, order)
        cpsat_bound = float(solver.best_objective_bound)
        bound = ticks.lower_bound(cpsat_bound)
        metrics.update(cpsat_bound=cpsat_bound, cpsat_objective=float(solver.objective_value))
        if prepared.lp_bound is not None:
            bound = max(bound, prepared.lp_bound)
        objective = _value(data, tasks, gpu, start)
        claimed, status, note = reconcile_bound(
            bound, objective, Status.OPTIMAL if code == cp.OPTIMAL else Status.TIME_LIMIT)
        sol = hare_solution(instance, self.name, data, to_tasks(data, tasks, gpu, start),
                            status=status, bound=claimed, solver="cpsat")
        sol.diagnostics.extend([note] if note else [])
        sol.metrics.update(metrics)
        if mip_gap is not None:
            sol.metrics["gap_tolerance"] = mip_gap
        sol.timings = Timings(build_s=t_built - t0, solve_s=t_solved - t_built,
                              extract_s=time.perf_counter() - t_solved)
        return sol

    def _fallback(self, instance: Instance, prepared: _Prepared, opts: SolverOptions,
                  t0: float, metrics: dict[str, Any], reason: str) -> Solution:
        """The hint schedule, ``feasible``, the LP bound, ``metrics.fallback`` = reason."""
        data, tasks, hint = prepared.data, prepared.tasks, prepared.hint
        start = hint.starts(data, tasks)
        bound = prepared.lp_bound
        sol = hare_solution(instance, self.name, data, to_tasks(data, tasks, hint.gpu, start),
                            status=Status.FEASIBLE, bound=bound, solver="cpsat")
        sol.metrics.update(metrics)
        sol.metrics["fallback"] = f"{hint.source} schedule: {reason}"
        sol.diagnostics.append(f"hare.exact: {reason}; returned the {hint.source} schedule")
        sol.timings = Timings(solve_s=time.perf_counter() - t0)
        return sol

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """sum_j w_j C_j of the solution's schedule."""
        return objective_of_schedule(instance, solution)

    def example_instance(self) -> Instance:
        """Three jobs on a V100 and a K80 (hare.exact_milp's example)."""
        return example_instance()


def _log_to_stderr(line: str) -> None:
    """One line of CP-SAT's search log, on stderr."""
    sys.stderr.write(line + "\n")
