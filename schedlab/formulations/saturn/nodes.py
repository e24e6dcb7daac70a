"""Exact one-node scheduling and logic-based Benders decomposition for Saturn's makespan.

**One node** (:func:`node_makespan`).  Jobs i = (g_i GPUs, r_i s), all released at 0, on one
node of G GPUs; minimize the makespan M*(S) of the set S.  Branch and bound over the serial
schedule generation scheme (SGS): jobs are listed in order of their start times and each is
placed at its earliest feasible start not before its predecessor's start.  Every *active*
schedule (no job can start earlier without moving another) is produced by listing its jobs by
start time, and some optimal schedule is active, so the search is exact.  A partial schedule
with last start t and remaining jobs R is pruned when its bound reaches the incumbent:

    max( max end placed,  t + max_{i in R} r_i,
         t + (sum_{i in R} g_i r_i + GPU-seconds placed after t) / G,
         (end of the last placed job with g > G/2 still running after t, else t)
             + sum_{i in R, g_i > G/2} r_i )

(the remaining jobs start at or after t; jobs with g > G/2 never overlap each other), or when
some remaining job cannot end before the incumbent even at its earliest start beside the
placed jobs.  Every placed job started at or before t, so the GPUs in use after t only drop
(at end times): a job's earliest start is the first of t and those end times at which its GPUs
are free, whatever its runtime.  Jobs starting together are listed by increasing index, jobs
of equal (g, r) in a fixed order, and a state (remaining set, t, last job, running jobs after
t) seen before is not expanded again.  Jobs with g = G run alone: they go last, one after
another.

**Benders** (:func:`benders_makespan`), identical nodes, equal releases.  The master is the
assignment MIP of ``saturn_bounds`` (binaries y[j,o,n]: job j runs option o on node n; C; the
``length``, ``energy`` and ``clique`` rows; job 0 on node 0) plus *cuts*.  Each master
solution assigns a set S_n to every node; its exact per-node optima give a feasible schedule
of makespan max_n M*(S_n).  For a node set S with (proven lower bound of) M*(S) = M and
every node n' the cut

    C >= M - sum_{(j,o) in S} r_o (1 - y[j,o,n'])

is valid: a node running a superset of S needs at least M (adding jobs never shortens the
optimum), and taking a job j out of S shortens the optimum by at most r_o (append j to an
optimal schedule of S \\ {j} after its end: M*(S) <= M*(S \\ {j}) + r_o); nodes are identical,
so it holds on any node.  Before it is added, S is shrunk to a subset with the same optimum
(fewer terms, a stronger cut).  The master's optimum (or its dual bound) is therefore a lower
bound of the exact optimal makespan at every iteration; the loop stops when it meets the best
schedule within the target gap, or at the deadline.  New best schedules are polished by a
local search over the assignment (:func:`improve_assignment`, incumbents only).

The master is a persistent :class:`~schedlab.solvers.matrix.MatrixModel` of the chosen
solver (HiGHS by default, Gurobi with ``solver="gurobi"``), cuts added as rows in place.
Each master solve also yields the improving solutions the solver kept on the way (up to
``OTHER_ASSIGNMENTS``): they are evaluated like its optimum (schedules, cuts).  The master is
solved to a relative gap of ``MASTER_GAP_START`` first (its dual bound is valid
at any gap); an iteration without a cut means the schedule is within that gap of the bound, so
the gap is tightened by ``MASTER_GAP_STEP`` (down to the target) and the loop goes on.  An
iteration without a cut because a node's search hit its node limit retries with 4x the limit.
The one-node search runs compiled (``saturn_node_kernel``) when numba is installed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.errors import SolverError
from schedlab.formulations.arrays import csr_arrays
from schedlab.formulations.saturn.baselines import Placement
from schedlab.formulations.saturn.data import Option, SaturnData, lower_bound
from schedlab.lazy import load_compiled
from schedlab.solution import Status
from schedlab.solvers import SolverOptions
from schedlab.solvers.matrix import FloatArray, IntArray, matrix_model

log = logging.getLogger(__name__)

#: time comparisons are made with this slack (s): runtimes are given to 0.1 s or 1 ms
EPS = 1e-6


@dataclass
class NodeResult:
    """Result of :func:`node_makespan`: ``makespan`` and ``starts`` of the best schedule found
    (s, one per job, in input order), ``bound`` a proven lower bound (== makespan when
    ``proven``), ``nodes`` branch-and-bound nodes visited."""

    makespan: float
    bound: float
    starts: list[float]
    proven: bool
    nodes: int = 0


def node_makespan(
    jobs: Sequence[tuple[int, float]],
    capacity: int,
    *,
    upper: float = math.inf,
    node_limit: int = 200_000,
    deadline: float | None = None,
    first: bool = False,
    compiled: bool | None = None,
) -> NodeResult:
    """Exact minimum makespan (s) of ``jobs`` = [(gpus, runtime s)] on one node of
    ``capacity`` GPUs, all released at 0 (module docstring).  ``upper``: a makespan known to be
    reachable (only schedules shorter than it are searched for; the result's makespan is then
    inf when none is shorter).  ``node_limit``: branch-and-bound nodes before giving up; the
    result is then not ``proven`` and ``bound`` is the root bound; the same at ``deadline``
    (a ``time.perf_counter`` value).  ``first``: stop at the first schedule shorter than
    ``upper`` (a yes/no question: is M* < upper?); its result is then not ``proven``.
    ``compiled``: run the search compiled by numba (None: when numba is installed; the
    compiled search reads no clock, so ``deadline`` is checked only before it starts and
    ``node_limit`` bounds its time) or in Python (False); both visit the same nodes."""
    if any(g > capacity or g <= 0 for g, _ in jobs):
        raise ValueError(f"every job needs 1..{capacity} GPUs, got {list(jobs)}")
    n = len(jobs)
    if n == 0:
        return NodeResult(0.0, 0.0, [], True)
    full = [i for i, (g, _) in enumerate(jobs) if g == capacity]
    rest = [i for i in range(n) if jobs[i][0] < capacity]
    serial = sum(jobs[i][1] for i in full)
    inner = _search([jobs[i] for i in rest], capacity, upper - serial, node_limit, deadline,
                    first, compiled)
    if (rest and not inner.starts) or (not rest and serial >= upper - EPS):
        # no schedule shorter than ``upper`` found (proven when the search was complete)
        return NodeResult(math.inf, inner.bound + serial, [], inner.proven, inner.nodes)
    starts = [0.0] * n
    for k, i in enumerate(rest):
        starts[i] = inner.starts[k] if inner.starts else 0.0
    clock = inner.makespan if rest else 0.0
    for i in full:
        starts[i] = clock
        clock += jobs[i][1]
    return NodeResult(inner.makespan + serial, inner.bound + serial, starts, inner.proven,
                      inner.nodes)


def _compiled_kernel() -> Any:
    """The numba kernel module (``saturn_node_kernel``), or None when numba is missing."""
    global _KERNEL
    if _KERNEL is None:  # without it the Python search does the same work, slower
        _KERNEL = load_compiled("schedlab.formulations.saturn.node_kernel",
                                "the compiled one-node search", "running it in pure Python"
                                ) or False
    return _KERNEL or None


_KERNEL: Any = None
#: nodes the compiled search visits per second, at least (for a deadline)
NODES_PER_S = 500_000


def warm_up() -> None:
    """Compile the one-node search now (numba, on the first call after an install, ~15 s;
    later calls load it from numba's disk cache in well under a second), so that it does not
    happen inside a timed solve."""
    if _compiled_kernel() is not None and not _WARM:
        started = time.perf_counter()
        node_makespan([(1, 1.0), (1, 2.0)], 2)
        _WARM.append(True)
        log.debug("one-node search ready after %.1f s", time.perf_counter() - started)


_WARM: list[bool] = []


def _node_limit(compiled: int, python: int) -> int:
    """A default node limit: ``compiled`` when the compiled search is available (it visits
    a node in ~1 us, the Python search in ~30 us), else ``python``."""
    return compiled if _compiled_kernel() is not None else python
#: jobs per node up to which the compiled search is used (its job set is a 63-bit mask)
COMPILED_MAX_JOBS = 62


def _search(jobs: list[tuple[int, float]], capacity: int, upper: float,
            node_limit: int, deadline: float | None, first: bool,
            compiled: bool | None = None) -> NodeResult:
    """Branch and bound of :func:`node_makespan` for jobs with g < capacity: compiled
    (``saturn_node_kernel``, the same search node for node) unless ``compiled`` is False,
    numba is missing or there are too many jobs; else in Python."""
    n = len(jobs)
    if n == 0:
        return NodeResult(0.0, 0.0, [], True)
    gpus = [g for g, _ in jobs]
    run = [r for _, r in jobs]
    big = [2 * g > capacity for g in gpus]
    # twins: a job may be listed only after every identical job of lower index
    twin_before = [next((k for k in range(i - 1, -1, -1) if jobs[k] == jobs[i]), -1)
                   for i in range(n)]
    root = max(max(run), sum(g * r for g, r in jobs) / capacity,
               sum(r for r, b in zip(run, big, strict=True) if b))
    kernel = _compiled_kernel() if compiled is not False and n <= COMPILED_MAX_JOBS else None
    if compiled and kernel is None:
        raise RuntimeError("the compiled one-node search needs numba and at most "
                           f"{COMPILED_MAX_JOBS} jobs")
    if kernel is not None:
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return NodeResult(math.inf, root, [], False, 0)
            # no clock inside the kernel: at most ~0.5 M nodes per second left
            node_limit = min(node_limit, max(1_000, int(left * NODES_PER_S)))
        found_starts = np.zeros(n)
        status, span, count, found = kernel.search(
            np.array(gpus, dtype=np.int64), np.array(run, dtype=float),
            np.array(twin_before, dtype=np.int64), int(capacity), float(upper),
            int(node_limit), bool(first), found_starts)
        starts = [float(x) for x in found_starts] if found else []
        return _result(status == kernel.COMPLETE, float(span), starts, root, upper, count)
    best = [upper]
    best_starts: list[float] = []
    seen: set[tuple[int, int, float, tuple[tuple[float, int], ...]]] = set()
    count = [0]
    full_mask = (1 << n) - 1

    def bound(mask: int, t: float, running: list[tuple[float, float, int]]) -> float:
        left = [i for i in range(n) if not mask >> i & 1]
        area = sum(g * (e - max(s, t)) for s, e, g in running if e > t)
        area += sum(gpus[i] * run[i] for i in left)
        chain_start = max([t] + [e for s, e, g in running if 2 * g > capacity])
        return max(
            max((e for _, e, _ in running), default=0.0),
            t + max((run[i] for i in left), default=0.0),
            t + area / capacity,
            chain_start + sum(run[i] for i in left if big[i]),
        )

    def dive(mask: int, t: float, last: int, placed: list[tuple[float, float, int]],
             starts: list[float]) -> bool:
        """False when the node limit or the deadline is hit.  ``last``: the job placed last
        (jobs starting together are listed by increasing index)."""
        count[0] += 1
        if count[0] > node_limit or (deadline is not None and count[0] % 256 == 0
                                     and time.perf_counter() > deadline):
            return False
        if mask == full_mask:
            span = max(e for _, e, _ in placed)
            if span < best[0] - EPS:
                best[0] = span
                best_starts[:] = starts
            return not first
        running = [p for p in placed if p[1] > t + EPS]
        key = (mask, last, round(t, 6),
               tuple(sorted((round(e - t, 6), g) for _, e, g in running)))
        if key in seen:
            return True
        seen.add(key)
        # every placed job started at or before t, so the GPUs in use after t only drop,
        # at end times: a job's earliest start is the first step where its GPUs are free
        in_use = sum(g for _, _, g in running)
        steps = [(t, in_use)]
        for e, g in sorted((e, g) for _, e, g in running):
            in_use -= g
            steps.append((e, in_use))
        early = {i: next(tau for tau, used in steps if used + gpus[i] <= capacity)
                 for i in range(n) if not mask >> i & 1}
        if max(s + run[i] for i, s in early.items()) >= best[0] - EPS:
            return True  # some job cannot end earlier, whatever comes next
        children = []
        for i, s in early.items():
            if twin_before[i] >= 0 and not mask >> twin_before[i] & 1:
                continue
            if s <= t + EPS and i < last:
                continue  # the same schedule is listed with i before ``last``
            child = [*running, (s, s + run[i], gpus[i])]
            lb = bound(mask | 1 << i, s, child)
            if lb < best[0] - EPS:
                children.append((lb, s, -gpus[i] * run[i], i, child))
        children.sort(key=lambda c: c[:3])
        for lb, s, _, i, child in children:
            if lb >= best[0] - EPS:
                continue
            starts[i] = s
            if not dive(mask | 1 << i, s, i, child, starts):
                return False
        return True

    complete = dive(0, 0.0, -1, [], [0.0] * n)
    return _result(complete, best[0], list(best_starts), root, upper, count[0])


def _result(complete: bool, best: float, starts: list[float], root: float, upper: float,
            nodes: int) -> NodeResult:
    """The :class:`NodeResult` of a search that ended ``complete`` (or not) with incumbent
    ``best`` (``starts`` empty when nothing shorter than ``upper`` was found)."""
    if complete:
        if not starts:  # nothing shorter than ``upper``: upper is optimal
            return NodeResult(math.inf, max(root, upper), [], True, nodes)
        return NodeResult(best, max(root, best), starts, True, nodes)
    return NodeResult(best if starts else math.inf, root, starts, False, nodes)


# ----------------------------------------------------------------------------- Benders


@dataclass
class BendersResult:
    """Outcome of :func:`benders_makespan`: ``bound`` (a valid lower bound of the exact
    optimal makespan, s), the best schedule found (``placements``, ``makespan``; None / inf
    when no master solution was evaluated), iteration and cut counts, and ``finished``
    (True when the bound met the best makespan within the target gap).  ``solver``: the
    master's solver; ``stopped``: why the loop ended early when its solver failed ("" when
    it did not)."""

    bound: float
    makespan: float = math.inf
    placements: list[Placement] | None = None
    iterations: int = 0
    cuts: int = 0
    finished: bool = False
    log: list[tuple[float, float, float]] = field(default_factory=list)
    solver: str = "highs"
    stopped: str = ""


def benders_applicable(data: SaturnData) -> bool:
    """Identical nodes and one release time (the cut's argument needs both)."""
    return (data.num_jobs > 0 and len({(nd.gpus, nd.accelerator) for nd in data.nodes}) == 1
            and len(set(data.release)) == 1)


def master_rows(data: SaturnData, keys: Sequence[tuple[int, int, int]]) -> tuple[
        IntArray, IntArray, FloatArray, FloatArray, FloatArray]:
    """The master's rows over the columns y[keys] (0..c-1) and C (column c), as CSR arrays
    (starts, columns, values) with (lower, upper); one release time a0, identical or not:

    * per job j, ``choice[j]``: sum_{o,n} y[j,o,n] = 1, then ``length[j]``:
      C - sum_{o,n} r_o y[j,o,n] >= a0;
    * per node n, ``energy[n]``: G_n C - sum_{j,o} g_o r_o y[j,o,n] >= G_n a0, then for each
      key k = (j,o,n) in key order whose ``others`` (keys on n of other jobs with
      g > max(G_n/2, G_n - g_o)) are not empty, ``clique[k]``:
      C - r_o y[k] - sum_{others} r y >= a0 (``saturn_bounds``' rows at a_min = a0);
    * with more than one node, ``symmetry``: sum_o y[0,o,0] = 1.
    """
    c = len(keys)
    kj = np.array([k[0] for k in keys], dtype=np.int64).reshape(-1)
    kn = np.array([k[2] for k in keys], dtype=np.int64).reshape(-1)
    run = np.array([data.options[j][o].runtime for j, o, _ in keys], dtype=float)
    gpus = np.array([data.options[j][o].gpus for j, o, _ in keys], dtype=float)
    a0 = data.release[0]
    row_parts: list[IntArray] = []
    col_parts: list[IntArray] = []
    val_parts: list[FloatArray] = []
    lower: list[FloatArray] = []
    upper: list[FloatArray] = []
    num_jobs = data.num_jobs
    # per job: choice (row 2j) then length (row 2j + 1)
    cols = np.arange(c)
    row_parts += [2 * kj, 2 * np.arange(num_jobs) + 1, 2 * kj + 1]
    col_parts += [cols, np.full(num_jobs, c), cols]
    val_parts += [np.ones(c), np.ones(num_jobs), -run]
    lower.append(np.tile([1.0, a0], num_jobs))
    upper.append(np.tile([1.0, np.inf], num_jobs))
    row = 2 * num_jobs
    for n, node in enumerate(data.nodes):
        cap = float(node.gpus)
        on = np.flatnonzero(kn == n)
        row_parts += [np.full(len(on) + 1, row)]
        col_parts += [np.concatenate(([c], on))]
        val_parts += [np.concatenate(([cap], -gpus[on] * run[on]))]
        lower.append(np.array([cap * a0]))
        upper.append(np.array([np.inf]))
        row += 1
        threshold = np.maximum(cap / 2, cap - gpus[on])
        others = (kj[on][None, :] != kj[on][:, None]) & (gpus[on][None, :] > threshold[:, None])
        live = np.flatnonzero(others.any(axis=1))
        ids = row + np.arange(len(live))
        first, second = np.nonzero(others[live])
        row_parts += [ids, ids, ids[first]]
        col_parts += [np.full(len(live), c), on[live], on[second]]
        val_parts += [np.ones(len(live)), -run[on[live]], -run[on[second]]]
        lower.append(np.full(len(live), a0))
        upper.append(np.full(len(live), np.inf))
        row += len(live)
    if len(data.nodes) > 1:
        zero = np.flatnonzero((kj == 0) & (kn == 0))
        row_parts.append(np.full(len(zero), row))
        col_parts.append(zero)
        val_parts.append(np.ones(len(zero)))
        lower.append(np.array([1.0]))
        upper.append(np.array([1.0]))
        row += 1
    starts, columns, values = csr_arrays(np.concatenate(row_parts), np.concatenate(col_parts),
                                         np.concatenate(val_parts), row)
    return starts, columns, values, np.concatenate(lower), np.concatenate(upper)


class _Master:
    """The assignment MIP (:func:`master_rows`) in a persistent
    :class:`~schedlab.solvers.matrix.MatrixModel` of the chosen solver, cuts added in place.
    Columns: y[j,o,n] for every option that fits, then C."""

    def __init__(self, data: SaturnData, floor: float, options: SolverOptions) -> None:
        self.data = data
        self.keys = [(j, o, n) for j, opts in enumerate(data.options)
                     for o, opt in enumerate(opts)
                     for n, node in enumerate(data.nodes) if opt.gpus <= node.gpus]
        self.col = {k: i for i, k in enumerate(self.keys)}
        self.c = len(self.keys)
        self.runtime = np.array([self._opt(k).runtime for k in self.keys])
        model = matrix_model(options, save_solutions=True)
        num = self.c + 1
        cost = np.zeros(num)
        cost[-1] = 1.0
        lower = np.zeros(num)
        upper = np.ones(num)
        lower[-1] = floor
        upper[-1] = np.inf
        model.add_columns(lower, upper, cost, integer=np.arange(num) < self.c)
        starts, columns, values, row_lo, row_up = master_rows(data, self.keys)
        model.add_rows(row_lo, row_up, starts=starts, columns=columns, values=values)
        self.model = model

    @property
    def backend(self) -> str:
        """The solver holding the master (``highs``, ``gurobi``)."""
        return self.model.backend

    def hint(self, chosen: Sequence[tuple[int, int, int]], value: float) -> None:
        """Give the solver the assignment ``chosen`` (keys (j, o, n)) with C = ``value`` (its
        exact makespan, which satisfies every row and cut) as a starting solution."""
        col_value = np.zeros(self.c + 1)
        col_value[[self.col[key] for key in chosen]] = 1.0
        col_value[-1] = value
        self.model.set_start(col_value)

    def _opt(self, key: tuple[int, int, int]) -> Option:
        j, o, _ = key
        return self.data.options[j][o]

    def add_cut(self, items: list[tuple[int, int]], value: float) -> None:
        """C >= value - sum r_o (1 - y[j,o,n']) for every node n'."""
        total = sum(self.data.options[j][o].runtime for j, o in items)
        nodes = len(self.data.nodes)
        cols = np.array([[self.c] + [self.col[j, o, n] for j, o in items]
                         for n in range(nodes)], dtype=np.int64)
        vals = np.concatenate(([1.0], -self.runtime[cols[0, 1:]]))
        width = cols.shape[1]
        self.model.add_rows(np.full(nodes, value - total), np.full(nodes, np.inf),
                            starts=np.arange(0, nodes * width + 1, width),
                            columns=cols.reshape(-1), values=np.tile(vals, nodes))

    def solve(self, time_limit: float, gap: float = 1e-6) -> tuple[
            float, float, list[tuple[int, int, int]], list[list[tuple[int, int, int]]]] | None:
        """(objective, dual bound, chosen keys, up to ``OTHER_ASSIGNMENTS`` other assignments
        the solver found during this solve, latest first) or None when nothing was found in
        time; the solver stops at relative gap ``gap``."""
        result = self.model.solve(time_limit_s=max(0.05, time_limit), mip_gap=gap)
        log.debug("master: %s, dual bound %s", result.message, result.bound)
        if not result.status.has_solution or result.objective is None:
            return None
        chosen = [k for k, v in zip(self.keys, self.model.values(), strict=False) if v > 0.5]
        others: list[list[tuple[int, int, int]]] = []
        for saved in self.model.saved_solutions()[:OTHER_ASSIGNMENTS + 1]:
            keys = [k for k, v in zip(self.keys, saved, strict=False) if v > 0.5]
            if keys != chosen and keys not in others:
                others.append(keys)
        objective = result.objective
        bound = result.bound if result.bound is not None else -math.inf
        if result.status == Status.OPTIMAL:
            bound = max(bound, objective * (1 - gap))
        return objective, bound, chosen, others[:OTHER_ASSIGNMENTS]


class _NodeCache:
    """Exact one-node optima by multiset of (gpus, runtime), shared by the Benders loop."""

    def __init__(self, capacity: int, node_limit: int, deadline: float | None) -> None:
        self.capacity = capacity
        self.node_limit = node_limit
        self.deadline = deadline
        self.known: dict[tuple[tuple[int, float], ...], NodeResult] = {}

    def solve(self, pairs: list[tuple[int, float]]) -> NodeResult:
        """:func:`node_makespan` of ``pairs`` (starts in the order of ``pairs``)."""
        order = sorted(range(len(pairs)), key=lambda i: pairs[i])
        key = tuple(pairs[i] for i in order)
        res = self.known.get(key)
        if res is None:
            res = node_makespan(list(key), self.capacity, node_limit=self.node_limit,
                                deadline=self.deadline)
            if res.proven:
                self.known[key] = res
        starts = [0.0] * len(pairs)
        if res.starts:
            for k, i in enumerate(order):
                starts[i] = res.starts[k]
        return NodeResult(res.makespan, res.bound, starts if res.starts else [], res.proven,
                          res.nodes)

    def at_least(self, pairs: list[tuple[int, float]], value: float) -> bool:
        """True when M*(pairs) >= ``value`` is proven."""
        key = tuple(sorted(pairs))
        res = self.known.get(key)
        if res is not None:
            return res.bound >= value - EPS
        res = node_makespan(list(key), self.capacity, upper=value, first=True,
                            node_limit=self.node_limit, deadline=self.deadline)
        return not res.starts and res.proven


def _minimal_set(items: list[tuple[int, int]], data: SaturnData, cache: _NodeCache,
                 value: float) -> list[tuple[int, int]]:
    """Drop jobs from ``items`` while the proven one-node optimum stays >= ``value``."""
    keep = list(items)
    for item in sorted(items, key=lambda it: data.options[it[0]][it[1]].runtime):
        trial = [it for it in keep if it != item]
        if trial and cache.at_least([(data.options[j][o].gpus, data.options[j][o].runtime)
                                     for j, o in trial], value):
            keep = trial
    return keep


#: the Benders master is first solved to this relative gap, then closer by this factor
#: whenever its solution needs no cut (down to the target gap)
MASTER_GAP_START = 0.005
MASTER_GAP_STEP = 0.25
#: improving solutions of a master solve evaluated besides its optimum (latest first)
OTHER_ASSIGNMENTS = 4
#: a one-node search that hits its node limit without a cut is retried with 4x the limit,
#: up to this many nodes
NODE_LIMIT_MAX = 64_000_000


def benders_makespan(
    data: SaturnData,
    *,
    floor: float,
    upper: float,
    deadline: float | None,
    target_gap: float = 1e-4,
    threads: int | None = None,
    node_limit: int | None = None,
    improve_s: float = 2.0,
    start: Sequence[Placement] | None = None,
    options: SolverOptions | None = None,
) -> BendersResult:
    """Logic-based Benders decomposition (module docstring) until the master's bound meets
    the best makespan (``upper`` or one found here) within ``target_gap`` or ``deadline``
    (a ``time.perf_counter`` value).  ``floor``: a proven lower bound (the result's bound
    never falls below it; it is not loaded into the master, whose C starts at the analytic
    bound: with C floored the master returns arbitrary assignments below the floor, and the
    cuts from them converged much more slowly in our runs).  ``start``: a schedule of
    makespan ``upper``, whose assignment is the master's first MIP start.  ``options``: the
    master's solver (``solver``; ``threads``, unless ``threads`` is given; ``seed``,
    ``verbose``); its time limit and gap are set here, and the backend ``extra`` options,
    tuned for other models, are not passed.  A master that fails (e.g. Gurobi's size-limited
    licence refusing it as cuts accumulate) ends the loop with what it has, said in
    ``stopped``.  Requires :func:`benders_applicable`."""
    if not benders_applicable(data):
        raise ValueError("Benders needs identical nodes and one release time")
    opts = options or SolverOptions()
    master_options = SolverOptions(solver=opts.solver,
                                   threads=threads if threads is not None else opts.threads,
                                   seed=opts.seed, verbose=opts.verbose)
    master = _Master(data, lower_bound(data), master_options)
    capacity = data.nodes[0].gpus
    cache = _NodeCache(capacity, node_limit or _node_limit(1_000_000, 100_000), deadline)
    out = BendersResult(bound=floor, solver=master.backend)
    best = upper
    master_gap = max(target_gap, MASTER_GAP_START)
    best_keys = None if start is None else _keys(data, start)
    seen_cuts: set[tuple[tuple[int, int], ...]] = set()
    while True:
        left = math.inf if deadline is None else deadline - time.perf_counter()
        if left < 0.1 or _met(best, out.bound, target_gap):
            break
        try:
            if best_keys is not None:
                master.hint(best_keys, best)
            answer = master.solve(left, master_gap)
        except SolverError as exc:
            out.stopped = f"the Benders master ({master.backend}) failed: {exc}"
            log.warning("%s; Benders stops with bound %.6g and best %.6g", out.stopped,
                        out.bound, best)
            break
        if answer is None:
            break
        objective, dual, chosen, others = answer
        out.bound = max(out.bound, dual)
        out.iterations += 1
        if _met(best, out.bound, target_gap):
            break
        # the master's solution, then the other assignments the solver found on the way (each
        # a feasible schedule, each a source of cuts)
        added, unproven, found_better = 0, False, False
        for rank, keys in enumerate([chosen, *others]):
            span, placed, cuts, stuck = _evaluate(keys, objective, data, cache, master, seen_cuts)
            if rank == 0:
                added, unproven = cuts, stuck
                main_span = span
            out.cuts += cuts * len(data.nodes)
            if placed is not None and span < best - EPS:
                out.makespan, out.placements = span, placed
                best, best_keys = span, keys
                found_better = True
        if found_better and improve_s > 0 and best_keys is not None:
            stop = time.perf_counter() + improve_s
            if deadline is not None:
                stop = min(stop, deadline)
            better = improve_assignment(data, _per_node(data, best_keys), stop)
            if better is not None and better[0] < best - EPS:
                best, out.makespan, out.placements = better[0], better[0], better[1]
                best_keys = _keys(data, better[1])
        out.log.append((time.perf_counter(), out.bound, best))
        log.debug("benders iteration %d: master %.1f, bound %.1f, schedule %.1f, best %.1f, "
                  "%d more assignments", out.iterations, objective, out.bound, main_span, best,
                  len(others))
        if added == 0:
            # nothing to cut: a node's search hit its limit (search longer), or the schedule
            # is within the master's gap of its bound (solve the master closer, or stop)
            if unproven and cache.node_limit < NODE_LIMIT_MAX:
                cache.node_limit *= 4
            elif master_gap > target_gap:
                master_gap = max(target_gap, master_gap * MASTER_GAP_STEP)
            else:
                break
    out.finished = _met(best, out.bound, target_gap)
    return out


def improve_assignment(
    data: SaturnData,
    per_node: dict[int, list[tuple[int, int]]],
    stop: float,
    node_limit: int | None = None,
) -> tuple[float, list[Placement]] | None:
    """Local search over the assignment (a heuristic, for incumbents only): move one job to
    another (option, node), each node scheduled by :func:`node_makespan` limited to
    ``node_limit`` nodes (its best schedule, exact or not); keep a move when it lowers
    (largest node makespan, sum of node makespans).  Stops at ``stop`` (``perf_counter``) or
    when no move helps.  Returns (makespan, placements) of the best assignment, or None when
    a node could not be scheduled."""
    capacity = data.nodes[0].gpus
    a0 = data.release[0]
    limit = node_limit or _node_limit(50_000, 2_000)
    cache: dict[tuple[tuple[int, float], ...], NodeResult] = {}

    def schedule(items: list[tuple[int, int]]) -> NodeResult:
        pairs = tuple(sorted((data.options[j][o].gpus, data.options[j][o].runtime)
                             for j, o in items))
        if pairs not in cache:
            cache[pairs] = node_makespan(list(pairs), capacity, node_limit=limit)
        return cache[pairs]

    current = {n: list(items) for n, items in per_node.items()}
    spans = {n: schedule(items).makespan for n, items in current.items()}
    if any(not math.isfinite(v) for v in spans.values()):
        return None
    improved = True
    while improved and time.perf_counter() < stop:
        improved = False
        score = (max(spans.values()), sum(spans.values()))
        for n, items in list(current.items()):
            for j, o in list(items):
                for o2, opt in enumerate(data.options[j]):
                    for n2 in current:
                        if (o2, n2) == (o, n) or opt.gpus > capacity:
                            continue
                        if time.perf_counter() > stop:
                            break
                        trial = {k: list(v) for k, v in current.items()}
                        trial[n].remove((j, o))
                        trial[n2].append((j, o2))
                        new = dict(spans)
                        for k in {n, n2}:
                            new[k] = schedule(trial[k]).makespan
                        top, total = max(new.values()), sum(new.values())
                        if top < score[0] - EPS or (top <= score[0] + EPS
                                                    and total < score[1] - EPS):
                            current, spans, improved = trial, new, True
                            break
                    if improved:
                        break
                if improved:
                    break
            if improved:
                break
    placed: list[Placement] = []
    for n, items in current.items():
        order = sorted(range(len(items)), key=lambda i: (data.options[items[i][0]][items[i][1]]
                                                         .gpus, data.options[items[i][0]]
                                                         [items[i][1]].runtime))
        res = schedule(items)
        for k, i in enumerate(order):
            j, o = items[i]
            placed.append((j, data.options[j][o], data.nodes[n], a0 + res.starts[k]))
    return a0 + max(spans.values()), placed


def _per_node(data: SaturnData, keys: Sequence[tuple[int, int, int]],
              ) -> dict[int, list[tuple[int, int]]]:
    """The (job, option) pairs of an assignment, by node."""
    per_node: dict[int, list[tuple[int, int]]] = {n: [] for n in range(len(data.nodes))}
    for j, o, n in keys:
        per_node[n].append((j, o))
    return per_node


def _evaluate(keys: Sequence[tuple[int, int, int]], objective: float, data: SaturnData,
              cache: _NodeCache, master: _Master, seen_cuts: set[tuple[tuple[int, int], ...]],
              ) -> tuple[float, list[Placement] | None, int, bool]:
    """Schedule every node of the assignment ``keys`` exactly and add a cut for every node
    whose proven optimum exceeds the master's ``objective`` (each node set once).  Returns
    (makespan, placements or None when a node found no schedule, cuts added, whether a node's
    search was cut short)."""
    a0 = data.release[0]
    span = a0
    placed: list[Placement] | None = []
    added = 0
    unproven = False
    for n, items in _per_node(data, keys).items():
        pairs = [(data.options[j][o].gpus, data.options[j][o].runtime) for j, o in items]
        res = cache.solve(pairs)
        unproven |= not res.proven
        if items and not res.starts:
            placed = None
        elif placed is not None:
            span = max(span, a0 + res.makespan)
            placed += [(j, data.options[j][o], data.nodes[n], a0 + s)
                       for (j, o), s in zip(items, res.starts, strict=True)]
        if a0 + res.bound > objective + EPS:
            cut = _minimal_set(items, data, cache, res.bound)
            key = tuple(sorted(cut))
            if key not in seen_cuts:
                seen_cuts.add(key)
                master.add_cut(cut, a0 + res.bound)
                added += 1
    return (span if placed is not None else math.inf), placed, added, unproven


def _keys(data: SaturnData, placed: Sequence[Placement]) -> list[tuple[int, int, int]]:
    """The master's keys (j, option index, node index) of a schedule."""
    return [(j, data.options[j].index(opt), data.nodes.index(node)) for j, opt, node, _ in placed]


def _met(upper: float, bound: float, target_gap: float) -> bool:
    """True when a finite ``upper`` is within ``target_gap`` (relative) of ``bound``."""
    return math.isfinite(upper) and upper - bound <= target_gap * upper
