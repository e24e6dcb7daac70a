"""Lower bounds on Saturn's (SPASE) exact makespan, and the rows they share with the grid model.

Notation as in ``saturn_data``: jobs j (release a_j), options o = (g_o GPUs, r_o s), nodes n
with G_n GPUs.  Any schedule of the exact problem with makespan C* fixes, per job, one option
o(j) and one node n(j); the rows below hold for that choice with C = C*, so the optimum of
any model built from them is a lower bound on C* (and so is any dual bound of it).

* ``length``:   C >= a_j + r_o                         (the job runs after its release)
* ``energy[n]``: G_n (C - a_min) >= sum_{j on n} g_o r_o   (GPU-seconds fit on the node)
* ``clique[n,k,o]``: C >= a_min + r_o [k runs o on n] + sum_{j != k, g_o' > T} r_o' [j runs
  o' on n], T = max(G_n / 2, G_n - g_o).  Options with g > G_n / 2 on one node never run
  together (two of them need more than G_n GPUs), and none of them runs beside k's option o
  (g_o + g > G_n): they form a clique of the node's conflict graph and run one after another,
  all after a_min.  (With k not running o on n the row is the clique of the large ones alone.)

:func:`assignment_bound` solves min C over binaries y[j,o,n] (one option and node per job)
with these rows: a small MIP (J x options x nodes binaries) whose optimum, or any dual bound
of it, is a valid lower bound on the exact makespan.  It dominates the analytic bound
``saturn_data.lower_bound`` (its rows contain both terms).  It ignores *when* jobs run beyond
the cliques, which the rounded-down time-indexed model (``saturn.TimeIndexed``) adds.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyomo.environ as pyo

from schedlab.formulations.saturn.data import SaturnData, lower_bound
from schedlab.solution import Status
from schedlab.solvers import PersistentSolver, SolverOptions

log = logging.getLogger(__name__)

#: (job, option, node) -> the 0/1 expression "job runs option on node" of some model
Chooser = Callable[[int, int, int], Any]


def assignment_keys(data: SaturnData) -> list[tuple[int, int, int]]:
    """(j, o, n) for every option that fits the node."""
    return [
        (j, o, n)
        for j, opts in enumerate(data.options)
        for o, opt in enumerate(opts)
        for n, node in enumerate(data.nodes)
        if opt.gpus <= node.gpus
    ]


def add_valid_rows(
    model: pyo.ConcreteModel,
    data: SaturnData,
    makespan: Any,
    chosen: dict[tuple[int, int, int], Any],
) -> None:
    """Add ``length``, ``energy`` and ``clique`` rows (module docstring) to ``model``.

    ``makespan`` is the model's makespan in seconds; ``chosen[j, o, n]`` the 0/1 expression
    "job j runs option o on node n".  The rows hold for every schedule of the exact problem,
    so they never cut off its optimum.
    """
    a_min = min(data.release, default=0.0)
    by_job: dict[int, list[tuple[float, Any]]] = defaultdict(list)
    for (j, o, _n), y in chosen.items():
        by_job[j].append((data.options[j][o].runtime, y))
    model.bound_length = pyo.Constraint(
        sorted(by_job),
        rule=lambda mm, j: makespan >= data.release[j] + pyo.quicksum(r * y for r, y in by_job[j]),
    )
    nodes = sorted({n for _, _, n in chosen})

    def energy(mm: pyo.ConcreteModel, n: int) -> Any:
        work = [data.options[j][o].gpus * data.options[j][o].runtime * y
                for (j, o, nn), y in chosen.items() if nn == n]
        return data.nodes[n].gpus * (makespan - a_min) >= pyo.quicksum(work)

    model.bound_energy = pyo.Constraint(nodes, rule=energy)
    cliques = [(j, o, n) for (j, o, n) in chosen]

    def clique(mm: pyo.ConcreteModel, k: int, ok: int, n: int) -> Any:
        cap = data.nodes[n].gpus
        threshold = max(cap / 2, cap - data.options[k][ok].gpus)
        big = [data.options[j][o].runtime * y for (j, o, nn), y in chosen.items()
               if nn == n and j != k and data.options[j][o].gpus > threshold]
        if not big:
            return pyo.Constraint.Skip
        return makespan >= a_min + data.options[k][ok].runtime * chosen[k, ok, n] + pyo.quicksum(
            big)

    model.bound_clique = pyo.Constraint(cliques, rule=clique)


def assignment_model(data: SaturnData) -> pyo.ConcreteModel:
    """min C over y[j,o,n] with one option and node per job and the valid rows."""
    m = pyo.ConcreteModel(name="saturn.assignment_bound")
    keys = assignment_keys(data)
    m.Y = pyo.Set(initialize=keys, dimen=3, ordered=True)
    m.y = pyo.Var(m.Y, domain=pyo.Binary)
    m.C = pyo.Var(bounds=(lower_bound(data), None))
    per_job: dict[int, list[Any]] = defaultdict(list)
    for key in keys:
        per_job[key[0]].append(m.y[key])
    m.one_choice = pyo.Constraint(
        range(data.num_jobs), rule=lambda mm, j: pyo.quicksum(per_job[j]) == 1
    )
    add_valid_rows(m, data, m.C, {key: m.y[key] for key in keys})
    identical = len({(nd.gpus, nd.accelerator) for nd in data.nodes}) == 1
    if identical and len(data.nodes) > 1 and data.num_jobs:
        # interchangeable nodes: job 0 on node 0
        m.symmetry = pyo.Constraint(
            expr=pyo.quicksum(m.y[j, o, n] for j, o, n in keys if j == 0 and n == 0) == 1
        )
    m.obj = pyo.Objective(expr=m.C)
    return m


def assignment_bound(data: SaturnData, options: SolverOptions | None = None) -> float:
    """A lower bound (s) on the exact optimal makespan: the dual bound of
    :func:`assignment_model` (its optimum when solved to optimality), never below the analytic
    ``lower_bound``.  ``options`` (time limit) are passed to the solver; without an answer the
    analytic bound is returned."""
    analytic = lower_bound(data)
    if data.num_jobs == 0:
        return analytic
    opts = options or SolverOptions()
    result = PersistentSolver(opts).solve(assignment_model(data))
    if result.bound is None:
        log.info("assignment bound: no answer (%s); using the analytic bound", result.message)
        return analytic
    return max(analytic, float(result.bound))


# ------------------------------------------------------------------ energetic reasoning


def min_overlap(release: float, runtime: float, deadline: float, t1: float, t2: float) -> float:
    """Least time (s) a job with window [release, deadline] and length ``runtime`` runs inside
    [t1, t2]: min over its starts in [release, deadline - runtime] of the overlap, reached at
    one of the two extreme starts (the overlap is concave in the start):
    max(0, min(t2 - t1, runtime, release + runtime - t1, t2 - deadline + runtime))."""
    return max(0.0, min(t2 - t1, runtime, release + runtime - t1, t2 - deadline + runtime))


def energetic_model(data: SaturnData, deadline: float) -> pyo.ConcreteModel | None:
    """Feasibility MIP "is there an option/node choice passing energetic reasoning with every
    job done by ``deadline`` (s)?"; None when some job has no option that fits at all.

    Binaries y[j,o,n] for the options with a_j + r_o <= T (T = ``deadline``), one per job, and
    per node n:

    * ``interval[n,t1,t2]``: sum g_o e(j,o,t1,t2) y[j,o,n] <= G_n (t2 - t1), e the least
      overlap of the job with [t1, t2] (:func:`min_overlap`); intervals [t, T + a_min - t]
      centred in the horizon for every t in {a_j + r_o, T - r_o} below the centre;
    * ``instant[n,tau]``: sum of g_o over the options whose compulsory part
      [T - r_o, a_j + r_o) contains tau is <= G_n (tau in {T - r_o});
    * ``clique``: the large-option cliques of :func:`add_valid_rows` with C = T.

    Every schedule of makespan <= T satisfies all rows with its own choice, so infeasibility
    proves C* > T.
    """
    a_min = min(data.release, default=0.0)
    keys = [(j, o, n) for j, o, n in assignment_keys(data)
            if data.release[j] + data.options[j][o].runtime <= deadline + 1e-9]
    if {j for j, _, _ in keys} != set(range(data.num_jobs)):
        return None
    m = pyo.ConcreteModel(name="saturn.energetic_bound")
    m.Y = pyo.Set(initialize=keys, dimen=3, ordered=True)
    m.y = pyo.Var(m.Y, domain=pyo.Binary)
    per_job: dict[int, list[Any]] = defaultdict(list)
    per_node: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for j, o, n in keys:
        per_job[j].append(m.y[j, o, n])
        per_node[n].append((j, o))
    m.one_choice = pyo.Constraint(
        range(data.num_jobs), rule=lambda mm, j: pyo.quicksum(per_job[j]) == 1
    )
    centre = (deadline + a_min) / 2
    points = sorted({round(p, 6) for j, o, _ in keys
                     for p in (data.release[j] + data.options[j][o].runtime,
                               deadline - data.options[j][o].runtime)
                     if a_min <= p < centre - 1e-6} | {a_min})
    rows = []
    for n, items in per_node.items():
        cap = data.nodes[n].gpus
        for t1 in points:
            t2 = deadline + a_min - t1
            terms = [(data.options[j][o].gpus
                      * min_overlap(data.release[j], data.options[j][o].runtime, deadline, t1, t2),
                      m.y[j, o, n]) for j, o in items]
            # numerically safe relaxation: tiny terms dropped, capacity eased by 1e-7
            room = cap * (t2 - t1) * (1 + 1e-7) + 1e-6
            terms = [(c, y) for c, y in terms if c > 1e-6 * room]
            if sum(c for c, _ in terms) > room:
                rows.append(pyo.quicksum(c * y for c, y in terms) <= room)
        for j0, o0 in items:
            tau = deadline - data.options[j0][o0].runtime
            cover = [(data.options[j][o].gpus, m.y[j, o, n]) for j, o in items
                     if deadline - data.options[j][o].runtime <= tau
                     < data.release[j] + data.options[j][o].runtime]
            if sum(g for g, _ in cover) > cap:
                rows.append(pyo.quicksum(g * y for g, y in cover) <= cap)
    m.rows = pyo.ConstraintList()
    for row in rows:
        m.rows.add(row)
    add_valid_rows(m, data, deadline, {key: m.y[key] for key in keys})
    identical = len({(nd.gpus, nd.accelerator) for nd in data.nodes}) == 1
    if identical and len(data.nodes) > 1:
        zero = [m.y[j, o, n] for j, o, n in keys if j == 0 and n == 0]
        m.symmetry = pyo.Constraint(expr=pyo.quicksum(zero) == 1)
    m.obj = pyo.Objective(expr=0)
    return m


def energetic_bound(
    data: SaturnData,
    low: float,
    high: float,
    *,
    options: SolverOptions | None = None,
    tolerance: float = 1e-3,
    deadline_s: float | None = None,
) -> float:
    """Raise a proven lower bound ``low`` (s) by bisection on T in (low, high): when the
    :func:`energetic_model` for T is proven infeasible, C* > T and ``low`` becomes T.  Stops
    when high - low <= ``tolerance`` x high or at ``deadline_s`` (a ``time.perf_counter``
    value).  A step that ends without a proof (time limit) counts as "feasible".  Returns the
    raised bound (never below ``low``)."""
    opts = options or SolverOptions()
    while high - low > tolerance * high:
        if deadline_s is not None and time.perf_counter() > deadline_s - 0.2:
            break
        mid = (low + high) / 2
        model = energetic_model(data, mid)
        if model is None:
            low = mid
            continue
        step = opts
        if deadline_s is not None:
            left = max(0.2, deadline_s - time.perf_counter())
            step = replace(opts, time_limit_s=min(left, opts.time_limit_s or left))
        result = PersistentSolver(step).solve(model)
        if result.status == Status.INFEASIBLE:
            low = mid
        else:
            high = mid
    return low
