"""Saturn's SPASE problem as MILPs: time-indexed (default) and disjunctive (paper-faithful).

Data (``saturn_data``): jobs j with release a_j and weight w_j; options o = (technique, g_o
GPUs, runtime r_o s) per job (after the dominance reduction, the fastest technique per GPU
count); nodes n with G_n GPUs.  Choose one option, one node and a start per job; a job never
spans nodes; at every instant a node's GPUs in use are <= G_n.  Objective: makespan, or
``objective="weighted_completion"``: sum_j w_j C_j.

**Time-indexed** (``saturn.time_indexed``).  Slot length delta (``slot_s``; default
H0 / ``max_slots`` with H0 the greedy makespan), p_o = ceil(r_o / delta) slots, horizon T =
makespan of the greedy list schedule with durations p_o (so the model is always feasible and
that schedule is its MIP start).  Binaries x[j,o,n,t] = 1 when j starts option o on node n at
slot t (t >= ceil(a_j/delta), t + p_o <= T, g_o <= G_n):

* ``one_start[j]``:      sum_{o,n,t} x[j,o,n,t] = 1
* ``capacity[n,tau]``:   sum_{j,o,t: t <= tau < t + p_o} g_o x[j,o,n,t] <= G_n
* ``finish[j]``:         C >= sum_{o,n,t} (t + p_o) x[j,o,n,t]          (makespan)
* ``symmetry``:          with identical nodes, the first job of the LPT order is on node 0.

The default slot is the greatest common divisor of all runtimes and releases (at 1 ms
resolution) when that gives at most 4 ``max_slots`` slots: the grid is then exact and
``optimal`` means optimal.  Otherwise runtimes are rounded up (``metrics["grid_exact"] =
False``), and a grid optimum is ``optimal`` only if a valid bound meets it (below).

The grid schedule is then compacted with the exact runtimes (left shift in grid start order,
keeping each job's option and node): a job never starts later than on the grid, so the exact
makespan is <= the grid makespan C* delta.  ``bound`` is the best lower bound of the *exact*
problem found: the analytic bound, the assignment and energetic-reasoning bounds of
``saturn_bounds``, the Benders decomposition of ``saturn_nodes`` (identical nodes, one release
time) and the rounded-down grid model (:meth:`TimeIndexed._bound_from_rounded_down_grid`);
``status`` is ``optimal`` only when the exact makespan meets it.  Shorter schedules come from
the compiled list search of ``saturn.list_search`` (a heuristic) and the Benders phase.  The
phases share one time limit (:meth:`TimeIndexed.solve`).

**Disjunctive** (``saturn.disjunctive``), per-GPU assignment with big-M ordering as in the
paper.  Binaries y[j,o,n] (option and node), z[j,n,u] (job j holds GPU u of node n), q[i,j]
(i before j); starts S_j >= a_j; D_j = sum r_o y[j,o,n]:

* ``one_option[j]``:   sum_{o,n} y[j,o,n] = 1
* ``gpus[j,n]``:       sum_u z[j,n,u] = sum_o g_o y[j,o,n]
* ``before[i,j,n,u]``: S_j >= S_i + D_i - M (1 - q[i,j]) - M (2 - z[i,n,u] - z[j,n,u])
* ``after[i,j,n,u]``:  S_i >= S_j + D_j - M q[i,j] - M (2 - z[i,n,u] - z[j,n,u])
* ``finish[j]``:       C >= S_j + D_j,   ``horizon[j]``: S_j + D_j <= H

H is the greedy makespan (makespan objective: an optimal schedule is no longer) or the serial
sum of the longest runtimes after the last release (weighted completion).  Every big-M is H,
derived from the data: S_i + D_i - S_j <= H always holds within the horizon.
"""

from __future__ import annotations

import logging
import math
import random
import time
from abc import abstractmethod
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import pyomo.environ as pyo
import scipy.sparse as sp

from schedlab.errors import InputError
from schedlab.formulations.arrays import (
    add_expressions,
    add_rows,
    linear_expression,
    row_expressions,
)
from schedlab.formulations.base import Formulation
from schedlab.formulations.saturn.baselines import (
    Placement,
    earliest_finish,
    greedy_placements,
    list_schedule,
    local_search,
    saturn_example_instance,
    schedule_solution,
    to_schedule,
)
from schedlab.formulations.saturn.bounds import (
    add_valid_rows,
    assignment_bound,
    energetic_bound,
)
from schedlab.formulations.saturn.data import (
    NodeTimeline,
    Option,
    SaturnData,
    lower_bound,
    makespan,
    saturn_data,
    weighted_completion,
)
from schedlab.formulations.saturn.list_search import list_search
from schedlab.formulations.saturn.list_search import warm_up as warm_up_list_search
from schedlab.formulations.saturn.model_arrays import DisjunctiveColumns, StartGrid, with_column
from schedlab.formulations.saturn.nodes import benders_applicable, benders_makespan, warm_up
from schedlab.instance import Instance
from schedlab.solution import Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

log = logging.getLogger(__name__)

OBJECTIVES = ("makespan", "weighted_completion")


def left_shift(data: SaturnData, placed: list[Placement]) -> list[Placement]:
    """Re-place jobs in order of their start, each at its earliest feasible start with its
    exact runtime, same option and node.  Never later than before (see module docstring)."""
    timeline = NodeTimeline(data.nodes)
    out: list[Placement] = []
    for j, option, node, start in sorted(placed, key=lambda p: (p[3], p[0])):
        new_start = timeline.earliest(node.name, option.gpus, option.runtime, data.release[j])
        assert new_start <= start + NodeTimeline.tol, "left shift moved a job later"
        timeline.place(node.name, option.gpus, new_start, option.runtime)
        out.append((j, option, node, new_start))
    return out


def best_list_schedule(data: SaturnData, tries: int, seed: int = 0) -> list[Placement]:
    """The shortest of the LPT greedy schedule and ``tries`` list schedules in random orders
    (each job at its earliest-finishing option and node): a MIP start for the MILPs."""
    best = greedy_placements(data)
    best_span = makespan(to_schedule(data, best))
    rng = random.Random(seed)
    order = list(range(data.num_jobs))
    for _ in range(tries):
        rng.shuffle(order)
        placed = list_schedule(data, order, earliest_finish)
        span = makespan(to_schedule(data, placed))
        if span < best_span - 1e-9:
            best, best_span = placed, span
    return best


def exact_slot(data: SaturnData, resolution: float = 1e-3) -> float | None:
    """The largest slot length dividing every runtime and release (greatest common divisor at
    ``resolution`` s), or None when the times are not multiples of ``resolution``."""
    values = [o.runtime for opts in data.options for o in opts] + [a for a in data.release if a]
    ticks = []
    for v in values:
        t = round(v / resolution)
        if t <= 0 or abs(v / resolution - t) > 1e-6:
            return None
        ticks.append(t)
    return math.gcd(*ticks) * resolution


def grid_is_exact(data: SaturnData, delta: float) -> bool:
    """True when every runtime and release is a whole number of slots."""
    values = [o.runtime for opts in data.options for o in opts] + list(data.release)
    return all(abs(v / delta - round(v / delta)) <= 1e-9 * max(1.0, v / delta) for v in values)


class SaturnMilp(Formulation):
    """Common parts of the two MILPs."""

    objective_sense = "minimize"

    def example_instance(self) -> Instance:
        """:func:`~schedlab.formulations.saturn.baselines.saturn_example_instance`."""
        return saturn_example_instance()

    def __init__(self, objective: str = "makespan", dominance: bool = True) -> None:
        if objective not in OBJECTIVES:
            raise InputError(f"objective must be one of {OBJECTIVES} (got {objective!r})",
                             field="objective")
        self.objective = objective
        self.dominance = dominance

    def data(self, instance: Instance) -> SaturnData:
        """Validated problem data."""
        return saturn_data(instance, dominance=self.dominance, formulation=self.name)

    def validate(self, instance: Instance) -> None:
        self.data(instance)

    @abstractmethod
    def placements(self, model: pyo.ConcreteModel, data: SaturnData) -> list[Placement]:
        """(job, option, node, start s) read from a solved model."""

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """Makespan = latest end of the schedule, s (0 when empty); or, with
        ``objective="weighted_completion"``, sum_j w_j C_j (s) with C_j the latest end of job
        j's entries and w_j from the instance (entries naming no instance job are left out)."""
        if self.objective == "makespan":
            return makespan(solution.schedule)
        completion: dict[str, float] = {}
        for e in solution.schedule:
            completion[e.job] = max(completion.get(e.job, e.end), e.end)
        weight = {job.id: job.weight for job in instance.jobs}
        return sum(weight[job] * end for job, end in completion.items() if job in weight)

    def finish_solution(
        self,
        instance: Instance,
        data: SaturnData,
        placed: list[Placement],
        result: SolveResult,
        metrics: dict[str, Any],
    ) -> Solution:
        """Solution with the exact (left-shifted) schedule, honest status and bound."""
        exact = to_schedule(data, left_shift(data, placed))
        # Never worse than the greedy list schedule with exact runtimes (the grid can be
        # coarse): return whichever is better under the objective.
        greedy = to_schedule(data, greedy_placements(data))
        score = makespan if self.objective == "makespan" else (
            lambda sched: weighted_completion(sched, data))
        # (with a user's extra constraints only the MILP's schedule is known to meet them)
        use_milp = result.status.has_solution and (
            bool(self.extensions) or score(exact) <= score(greedy) + 1e-9)
        schedule = exact if use_milp else greedy
        if self.extensions and not result.status.has_solution:
            solution = self.empty_solution(instance, result)
            solution.diagnostics.append(
                "no schedule: the MILP with the extra constraints found none, and the greedy "
                "fallback does not know those constraints")
            return solution
        status = result.status if result.status.has_solution else Status.FEASIBLE
        solution = schedule_solution(
            self.name, instance, data, schedule, objective=self.objective, status=status
        )
        if not result.status.has_solution:
            # A fallback says so: the MILP proved nothing, the schedule is the greedy one.
            solution.diagnostics.append(
                f"fallback: the MILP ended {result.status.value} ({result.message}); the "
                "schedule returned is the greedy list schedule, a heuristic")
        solution.metrics.update(metrics)
        solution.metrics["milp_schedule_objective"] = score(exact)
        solution.metrics["greedy_objective"] = score(greedy)
        solution.metrics["returned"] = "milp" if schedule is exact else "greedy"
        solution.metrics["solver_status"] = str(result.status)
        solution.metrics["model_objective"] = result.objective
        solution.metrics["model_bound"] = result.bound
        solution.metrics["model_gap"] = result.gap
        return solution


def merge_list_metrics(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """The ``list_search_*`` metrics of two list-search phases as one: iterations and
    seconds added, improvements in order, the later makespan."""
    if not first or not later:
        return {**first, **later}
    return {**later,
            "list_search_iterations": (first["list_search_iterations"]
                                       + later["list_search_iterations"]),
            "list_search_s": first["list_search_s"] + later["list_search_s"],
            "list_search_improvements": (first["list_search_improvements"]
                                         + later["list_search_improvements"])}


# --------------------------------------------------------------------- time-indexed


class TimeIndexed(SaturnMilp):
    """Start binaries on a time grid; see the module docstring."""

    description = "Saturn SPASE: time-indexed MILP (select parallelism, GPUs, node, start)"

    def __init__(
        self,
        objective: str = "makespan",
        dominance: bool = True,
        slot_s: float | None = None,
        max_slots: int = 48,
        start_tries: int | None = None,
        target_gap: float = 1e-4,
        bound_share: float = 0.15,
        incumbent_share: float = 0.5,
        polish_share: float = 0.1,
        polish_moves: int = 20000,
        benders: bool = True,
        benders_incumbent_share: float = 0.05,
        benders_polish_share: float = 0.02,
        benders_max_jobs_per_node: float = 12,
        benders_max_jobs_one_node: int = 8,
        list_search: bool = True,
        list_search_share: float = 0.9,
        list_search_restarts: int | None = None,
        stop_gap: float = 0.0,
        list_first_share: float = 0.5,
        list_first_restarts: int = 8,
    ) -> None:
        super().__init__(objective, dominance)
        if not 0 <= target_gap < 1:
            raise InputError(f"target_gap must be in [0, 1) (got {target_gap!r})",
                             field="target_gap")
        if not 0 <= stop_gap < 1:
            raise InputError(f"stop_gap must be in [0, 1) (got {stop_gap!r})", field="stop_gap")
        if not 0 <= list_first_share <= 1:
            raise InputError(f"list_first_share must be in [0, 1] (got {list_first_share!r})",
                             field="list_first_share")
        if list_first_restarts < 0:
            raise InputError(f"list_first_restarts must be >= 0 (got {list_first_restarts!r})",
                             field="list_first_restarts")
        self.slot_s = slot_s
        self.max_slots = max_slots
        self.start_tries = start_tries
        self.target_gap = target_gap
        self.bound_share = bound_share
        self.incumbent_share = incumbent_share
        self.polish_share = polish_share
        self.polish_moves = polish_moves
        self.benders = benders
        self.benders_incumbent_share = benders_incumbent_share
        self.benders_polish_share = benders_polish_share
        self.benders_max_jobs_per_node = benders_max_jobs_per_node
        self.benders_max_jobs_one_node = benders_max_jobs_one_node
        self.list_search = list_search
        self.list_search_share = list_search_share
        self.list_search_restarts = list_search_restarts
        self.stop_gap = stop_gap
        self.list_first_share = list_first_share
        self.list_first_restarts = list_first_restarts

    @property
    def stop_at_gap(self) -> float:
        """The gap at which the phases stop: max(``target_gap``, ``stop_gap``).  Only a gap
        <= ``target_gap`` makes the status ``optimal``."""
        return max(self.target_gap, self.stop_gap)

    def grid(self, data: SaturnData) -> tuple[float, dict[tuple[int, int], int], list[Placement]]:
        """(slot length delta s, slots p[j,o], greedy placements on the grid)."""
        if self.slot_s is not None:
            delta = float(self.slot_s)
        else:
            horizon0 = makespan(to_schedule(data, greedy_placements(data)))
            exact = exact_slot(data)
            if exact is not None and horizon0 / exact <= 4 * self.max_slots:
                delta = exact
            else:
                shortest = min(o.runtime for opts in data.options for o in opts)
                delta = max(horizon0 / self.max_slots, shortest / 4, 1e-3)
        slots = {
            (j, o): max(1, math.ceil(opt.runtime / delta - 1e-9))
            for j, opts in enumerate(data.options)
            for o, opt in enumerate(opts)
        }
        grid_data = SaturnData(
            job_ids=data.job_ids,
            release=[math.ceil(a / delta - 1e-9) * delta for a in data.release],
            weight=data.weight,
            nodes=data.nodes,
            options=[
                [
                    Option(opt.config, opt.technique, opt.gpus, slots[j, o] * delta)
                    for o, opt in enumerate(opts)
                ]
                for j, opts in enumerate(data.options)
            ],
        )
        tries = self.start_tries
        if tries is None:
            # the greedy start plus random list schedules in Python (~0.3 s per try at 32
            # jobs on a loaded machine); the compiled list search makes better ones later
            tries = 10 if self.list_search and self.objective == "makespan" else 200
        return delta, slots, best_list_schedule(grid_data, tries)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        data = self.data(instance)
        delta, slots, start = self.grid(data)
        return self.build_from(data, delta, slots, start)

    def build_from(
        self,
        data: SaturnData,
        delta: float,
        slots: dict[tuple[int, int], int],
        start: list[Placement],
        *,
        round_down: bool = False,
        floor_s: float = 0.0,
        horizon_slots: int | None = None,
    ) -> pyo.ConcreteModel:
        """The time-indexed model, with the greedy grid schedule loaded as MIP start.

        ``round_down``: the relaxation used for a lower bound (``slots`` and releases rounded
        down, C in seconds with the exact runtimes, see :meth:`_bound_from_rounded_down_grid`).
        ``floor_s``: a proven lower bound (s) of the exact makespan, used as a floor on C.
        ``horizon_slots``: the last slot (default: the end of ``start``)."""
        if horizon_slots is not None:
            horizon = horizon_slots
        else:
            horizon = max(round((s + o.runtime) / delta) for _, o, _, s in start)
        if self.objective == "weighted_completion":
            # a weighted optimum may be longer than the greedy makespan: allow a serial run
            longest = sum(max(slots[j, o] for o in range(len(opts)))
                          for j, opts in enumerate(data.options))
            horizon = max(horizon, max(math.ceil(a / delta) for a in data.release) + longest)
        if round_down:
            release = [math.floor(a / delta + 1e-9) for a in data.release]
        else:
            release = [math.ceil(a / delta - 1e-9) for a in data.release]
        grid = StartGrid.build(data, slots, release, horizon)
        index = grid.keys()
        identical = len({(nd.gpus, nd.accelerator) for nd in data.nodes}) == 1
        m = pyo.ConcreteModel(name=self.name)
        m.START = pyo.Set(initialize=index, dimen=4, ordered=True)
        m.x = pyo.Var(m.START, domain=pyo.Binary)
        x = list(m.x.values())
        width = grid.size
        num_jobs = data.num_jobs
        m.J = pyo.Set(initialize=range(num_jobs))
        # one_start[j]: sum x[j,.] = 1
        add_rows(m, "one_start", grid.by_job(np.ones(width)), x, 1.0, 1.0, index=m.J)
        # capacity[n,tau]: sum g x[j,o,n,t] over t <= tau < t + p <= G_n
        node_tau, usage = grid.usage()
        m.NT = pyo.Set(initialize=[tuple(key) for key in node_tau.tolist()], dimen=2)
        add_rows(m, "capacity", usage, x, None, grid.capacity[node_tau[:, 0]], index=m.NT)
        completion = grid.by_job(grid.t + grid.p)  # end slot of each start
        begin = grid.by_job(grid.t.astype(float))
        add_expressions(m, "completion", completion, x, index=m.J)
        add_expressions(m, "begin", begin, x, index=m.J)
        # Interchangeable jobs (same release, weight and options): order their starts.
        twins = self.identical_pairs(data)
        m.TWINS = pyo.Set(initialize=twins, dimen=2, ordered=True)
        first = [a for a, _ in twins]
        second = [b for _, b in twins]
        add_rows(m, "twin_order", sp.csr_matrix(begin[first] - begin[second]), x, None, 0.0,
                 index=m.TWINS)
        if self.objective == "makespan" and round_down:
            self._rounded_down_makespan(m, data, delta, grid, floor_s, identical)
        elif self.objective == "makespan":
            floor = math.ceil(max(lower_bound(data), floor_s) / delta - 1e-9)
            # C counts whole slots (every completion is an integer slot), so it is declared
            # integer: the solver may then round its bound up.
            m.C = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(min(floor, horizon), horizon))
            with_c = [*x, m.C]
            # finish[j]: completion_j - C <= 0
            add_rows(m, "finish", with_column(completion, -np.ones(num_jobs)), with_c, None,
                     0.0, index=m.J)
            # Energy: GPU-slots used on a node fit under C x G_n (valid, tightens the LP).
            work = grid.by_node(grid.g * grid.p)
            m.N = pyo.Set(initialize=sorted(set(grid.n.tolist())))
            nodes = list(m.N)
            add_rows(m, "energy", with_column(work[nodes], -grid.capacity[nodes]), with_c,
                     None, 0.0, index=m.N)
            if identical and len(data.nodes) > 1:
                # Identical nodes are interchangeable: label them by decreasing load.
                m.NN = pyo.Set(initialize=range(len(data.nodes) - 1))
                add_rows(m, "node_order", sp.csr_matrix(work[1:] - work[:-1]), x, None, 0.0,
                         index=m.NN)
            m.energy_all = pyo.Constraint(expr=(None, linear_expression(
                np.concatenate([grid.g * grid.p, [-data.total_gpus]]), with_c), 0.0))
            m.obj = pyo.Objective(expr=m.C)
        else:
            weighted = np.asarray(data.weight, dtype=float)[grid.j] * (grid.t + grid.p)
            terms = np.flatnonzero(weighted)
            m.obj = pyo.Objective(expr=linear_expression(weighted[terms],
                                                         [x[i] for i in terms.tolist()]))
        # MIP start: the greedy grid schedule (respecting the symmetry rule when it applies).
        node_pos = {nd.name: n for n, nd in enumerate(data.nodes)}
        start_keys = set()
        for j, opt, node, s in start:
            o = next(k for k, cand in enumerate(data.options[j]) if cand.config == opt.config)
            start_keys.add((j, o, node_pos[node.name], round(s / delta)))
        if start_keys <= set(index):
            for key, var in zip(index, x, strict=True):
                var.value = 1.0 if key in start_keys else 0.0
            if self.objective == "makespan" and round_down:
                m.C.value = max(
                    [m.C.lb or 0.0]
                    + [t * delta + data.options[j][o].runtime for j, o, _, t in start_keys])
            elif self.objective == "makespan":
                m.C.value = max(t + slots[j, o] for j, o, _, t in start_keys)
        m.delta = delta
        m.slots = slots
        m.horizon_slots = horizon
        return m

    @staticmethod
    def _rounded_down_makespan(
        m: pyo.ConcreteModel,
        data: SaturnData,
        delta: float,
        grid: StartGrid,
        floor_s: float,
        identical: bool,
    ) -> None:
        """Makespan rows of the rounded-down (bound) model, C in seconds:

        * ``finish[j]``: C >= sum (t delta + r_o) x[j,o,n,t]  (exact runtime after the slot)
        * ``length``, ``energy``, ``clique``: :func:`saturn_bounds.add_valid_rows` with
          [j runs o on n] = sum_t x[j,o,n,t] and exact runtimes
        * ``node_order``: identical nodes labelled by decreasing rounded-down GPU-slots.
        """
        m.C = pyo.Var(bounds=(floor_s, None))
        x = list(m.x.values())
        runtime = grid.runtime
        # finish[j]: sum (t delta + r_o) x - C <= 0
        add_rows(m, "finish", with_column(grid.by_job(grid.t * delta + runtime),
                                           -np.ones(data.num_jobs)), [*x, m.C], None, 0.0,
                 index=m.J)
        # [j runs o on n] = sum_t x[j,o,n,t]: one row per (j, o, n), in order of appearance
        choice, chosen_keys = grid.by_choice()
        chosen = dict(zip(chosen_keys, row_expressions(choice, x), strict=True))
        add_valid_rows(m, data, m.C, chosen)
        if identical and len(data.nodes) > 1:
            work = grid.by_node(grid.g * np.floor(runtime / delta + 1e-9))
            m.NN = pyo.Set(initialize=range(len(data.nodes) - 1))
            add_rows(m, "node_order", sp.csr_matrix(work[1:] - work[:-1]), x, None, 0.0,
                     index=m.NN)
        m.obj = pyo.Objective(expr=m.C)

    @staticmethod
    def identical_pairs(data: SaturnData) -> list[tuple[int, int]]:
        """Consecutive pairs (a, b), a < b, of interchangeable jobs."""
        groups: dict[Any, list[int]] = defaultdict(list)
        for j, opts in enumerate(data.options):
            key = (data.release[j], data.weight[j],
                   tuple((o.gpus, o.runtime) for o in opts))
            groups[key].append(j)
        return [(g[i], g[i + 1]) for g in groups.values() for i in range(len(g) - 1)]

    def placements(self, model: pyo.ConcreteModel, data: SaturnData) -> list[Placement]:
        placed = []
        for (j, o, n, t), value in model.x.extract_values().items():
            if value is not None and value > 0.5:
                placed.append((j, data.options[j][o], data.nodes[n], t * model.delta))
        return placed

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Phases within one time limit (makespan objective):

        0. (``stop_gap`` > 0, ``list_search`` on and no Benders phase; ``list_first_share``
           > 0) *list first*: the assignment bound (the cheap part of phase 1), then the list
           search from the greedy schedule for ``list_first_share`` of the limit or
           ``list_first_restarts`` restarts (when it stalls, the stronger bounds of the later
           phases are needed), stopping at :attr:`stop_at_gap` from that bound; when it gets
           there the solve ends
           (:meth:`_list_first_solution`: no grid model is built), otherwise phases 1-3 follow
           and the shorter of phase 0's and phase 2's schedules goes on to phase 2b,
        1. a valid bound from the small assignment and energetic-reasoning MIPs
           (``saturn_bounds``; at most ``bound_share`` of the limit; skipped when Benders
           runs, whose master's first solve is the same assignment MIP),
        2. the grid model (rounded-up runtimes, MIP start = greedy grid schedule, C floored at
           the phase-1 bound) for at most ``incumbent_share`` of what is left, then the exact
           left-shifted schedule,
        2b. (makespan, no extra constraints, ``list_search`` on; unless the exact grid model
           proved its optimum) the compiled list search (:mod:`saturn.list_search`, a
           heuristic) from that schedule for ``list_search_share`` of the time left
           (:meth:`_list_search_phase`); the grid model and the polish of phase 2 then get the
           short shares ``benders_incumbent_share`` / ``benders_polish_share``,
        3. unless the grid is exact or the gap already <= :attr:`stop_at_gap`: with identical
           nodes, one release time and at most ``benders_max_jobs_per_node`` jobs per
           node (:meth:`_use_benders`), the logic-based Benders
           decomposition of :mod:`saturn_nodes` until the limit (exact in continuous time: its
           master's dual bound is a bound of the exact problem, its schedules replace the
           grid one when shorter; the grid then gets only ``benders_incumbent_share`` of the
           time after phase 1 and the polish ``benders_polish_share`` of the limit); then the
           rounded-down grid model for whatever is left
           (:meth:`_bound_from_rounded_down_grid`).

        ``bound`` is the best valid bound of the exact problem; ``status`` is ``optimal`` only
        when the exact makespan meets it within ``target_gap`` (relative, default 1e-4 as a MIP
        solver's optimality tolerance; ``gap`` gives the value), ``time_limit`` when a phase
        was cut short by the limit, else ``feasible``.  ``stop_gap`` (e.g. 0.01) ends the
        phases once the gap is within it; the status is then ``feasible`` (even when an
        earlier phase hit its share of the time) unless the gap is also within
        ``target_gap``.
        """
        opts = replace(options or SolverOptions(), warm_start=True)
        if opts.solver == "highs" and "presolve" not in opts.extra:
            # HiGHS's presolve (probing on the dense capacity rows) ignores the time limit
            # on these models (10 s under a 1 s limit) and rarely pays off here.
            opts = replace(opts, extra={**opts.extra, "presolve": "off"})
        data = self.data(instance)
        benders_on = self._use_benders(data, opts)
        # the list search makes the incumbents: the grid model and its polish then get the
        # short shares of the Benders path
        list_on = self.list_search and self.objective == "makespan" and not self.extensions
        if benders_on:
            warm_up()  # a one-time compile is not part of the time limit
        if list_on:
            warm_up_list_search()
        t0 = time.perf_counter()
        limit = opts.time_limit_s
        deadline = None if limit is None else t0 + limit
        bound_s = lower_bound(data)
        first: list[Placement] | None = None  # phase 0's schedule (list first)
        first_metrics: dict[str, Any] = {}
        assignment: float | None = None
        if (list_on and not benders_on and data.num_jobs and self.stop_gap > 0
                and self.list_first_share > 0):
            assignment = bound_s = self._combinatorial_bound(data, opts, t0, energetic=False)
            first, first_metrics = self._list_search_phase(
                data, greedy_placements(data), bound_s, t0, deadline, benders_on=False,
                share=self.list_first_share, restarts=self.list_first_restarts)
            span = makespan(to_schedule(data, first))
            if span - bound_s <= self.stop_at_gap * span:
                return self._list_first_solution(instance, data, first, bound_s, first_metrics,
                                                 opts.solver, t0)
        delta, slots, start = self.grid(data)
        if self.objective == "makespan" and data.num_jobs and not benders_on:
            # (with Benders, its master's first solve gives the assignment bound)
            # (its share of the time counts from the end of phase 0, when that ran)
            bound_s = self._combinatorial_bound(
                data, opts, t0 if first is None else time.perf_counter(), assignment=assignment)
        log.debug("phase 1 (bounds) done after %.1f s: %.1f", time.perf_counter() - t0, bound_s)
        t_build = time.perf_counter()
        m = self.extend_model(self.build_from(data, delta, slots, start, floor_s=bound_s),
                              instance)
        t1 = time.perf_counter()
        main_opts = opts
        if deadline is not None:
            left = deadline - t1
            exact_grid = grid_is_exact(data, delta)
            share = 1.0 if exact_grid or self.objective != "makespan" else (
                self.benders_incumbent_share if benders_on or list_on else self.incumbent_share)
            main_opts = replace(opts, time_limit_s=max(0.1, share * left))
        result = PersistentSolver(main_opts).solve(m)
        if result.status.has_solution:
            placed = self.placements(m, data)
        else:  # no incumbent at all (cannot happen with the MIP start, kept for safety)
            by_config = [{o.config: o for o in opts} for opts in data.options]
            placed = [(j, by_config[j][o.config], n, s) for j, o, n, s in start]
        grid_makespan = max(
            s + math.ceil(o.runtime / delta - 1e-9) * delta for _, o, _, s in placed
        )
        milp_makespan = makespan(to_schedule(data, left_shift(data, placed)))
        if self.objective == "makespan" and self.polish_moves > 0 and not self.extensions and (
                milp_makespan - bound_s > self.target_gap * milp_makespan):
            share = self.benders_polish_share if benders_on or list_on else self.polish_share
            budget = math.inf if deadline is None else share * (limit or 0.0)
            placed = local_search(data, left_shift(data, placed), budget,
                                  max_moves=self.polish_moves)
        log.debug("phase 2 (grid model, polish) done after %.1f s: %.1f",
                  time.perf_counter() - t0, makespan(to_schedule(data, left_shift(data, placed))))
        benders_metrics: dict[str, Any] = {}
        benders_notes: list[str] = []
        phase1_bound = bound_s
        cut_short = result.status == Status.TIME_LIMIT
        proven_on_grid = grid_is_exact(data, delta) and result.status == Status.OPTIMAL
        if first is not None and makespan(to_schedule(data, first)) < makespan(
                to_schedule(data, left_shift(data, placed))) - 1e-9:
            placed = first  # phase 0 found the shorter schedule
        benders_metrics.update(first_metrics)
        if list_on and not proven_on_grid:
            placed, list_metrics = self._list_search_phase(data, placed, bound_s, t0, deadline,
                                                           benders_on)
            benders_metrics.update(merge_list_metrics(first_metrics, list_metrics))
        if benders_on and not grid_is_exact(data, delta):
            polished = makespan(to_schedule(data, left_shift(data, placed)))
            if polished - bound_s > self.stop_at_gap * polished:
                budget_end = deadline if deadline is not None else (
                    time.perf_counter() + max(1.0, time.perf_counter() - t0))
                benders = benders_makespan(data, floor=bound_s, upper=polished,
                                           deadline=budget_end, target_gap=self.stop_at_gap,
                                           start=placed, options=opts)
                use = benders.placements is not None and benders.makespan < polished - 1e-9
                if use and benders.placements is not None:
                    placed = benders.placements
                bound_s = max(bound_s, benders.bound)
                cut_short |= deadline is not None and not benders.finished
                if benders.stopped:
                    benders_notes.append(f"{benders.stopped}; the Benders phase stopped there "
                                         "with the bound and schedule it had")
                benders_metrics = {"benders_solver": benders.solver,
                                   "benders_bound_s": benders.bound,
                                   # None: Benders found no schedule (JSON has no inf)
                                   "benders_makespan_s": (benders.makespan
                                                          if math.isfinite(benders.makespan)
                                                          else None),
                                   "benders_iterations": benders.iterations,
                                   "benders_cuts": benders.cuts,
                                   "benders_schedule_used": use}
        t2 = time.perf_counter()
        solution = self.finish_solution(
            instance,
            data,
            placed,
            result,
            {
                "milp_exact_makespan_s": milp_makespan,
                "slot_s": delta,
                "horizon_slots": m.horizon_slots,
                "binaries": len(m.x),
                "grid_makespan_s": grid_makespan,
                "grid_bound_s": (result.bound * delta
                                 if result.bound is not None and self.objective == "makespan"
                                 else None),
                "combinatorial_bound_s": (phase1_bound if self.objective == "makespan"
                                          else None),
                "target_gap": self.target_gap,
                **benders_metrics,
            },
        )
        solution.metrics["grid_exact"] = grid_is_exact(data, delta)
        solution.diagnostics.extend(benders_notes)
        if self.objective == "makespan" and solution.objective is not None:
            solution.bound = max(solution.bound or 0.0, bound_s)
            if solution.metrics["grid_exact"] and result.bound is not None:
                # exact grid: an optimal schedule left-shifts onto the grid, so the grid
                # model's dual bound (C in whole slots) is valid for the exact problem
                solution.bound = max(solution.bound, math.ceil(result.bound - 1e-6) * delta)
            solution.gap = max(0.0, (solution.objective - solution.bound) / solution.objective)
        if self.objective == "makespan":
            cut_short |= self._bound_from_rounded_down_grid(
                solution, data, delta, opts, deadline, t2 - t1, t1 - t_build)
            self._grade(solution, cut_short)
        elif not solution.metrics["grid_exact"] and solution.status == Status.OPTIMAL:
            solution.status = Status.FEASIBLE  # optimal on the rounded-up grid only
        solution.solver = opts.solver
        solution.timings = Timings(
            build_s=t1 - t0, solve_s=t2 - t1, extract_s=time.perf_counter() - t2
        )
        return solution

    def _list_search_phase(self, data: SaturnData, placed: list[Placement], bound_s: float,
                           t0: float, deadline: float | None, benders_on: bool,
                           share: float | None = None, restarts: int | None = None,
                           ) -> tuple[list[Placement], dict[str, Any]]:
        """Phase 2b of :meth:`solve` (and phase 0, with ``share`` = ``list_first_share`` and
        ``restarts`` = ``list_first_restarts``):
        :func:`saturn.list_search.list_search` from the (left-shifted) schedule ``placed`` for
        ``share`` (default ``list_search_share``) of the time left (without
        a time limit: as long as the solve took so far, >= 1 s), stopping early once within
        :attr:`stop_at_gap` of the proven bound ``bound_s`` or after ``restarts`` (default
        ``list_search_restarts``) restarts, each after 2000 J^1.5 iterations without a shorter
        schedule (J jobs).  ``list_search_restarts=None``: 1 when the Benders phase follows
        (it proves such instances, and needs the time), else no limit under a time limit (the
        share of the time ends it) and 3 without one.  A heuristic: it only shortens the
        incumbent."""
        current = left_shift(data, placed)
        span = makespan(to_schedule(data, current))
        stop = self.stop_at_gap
        if span - bound_s <= stop * span:
            return current, {}
        now = time.perf_counter()
        share = self.list_search_share if share is None else share
        budget = share * (deadline - now) if deadline is not None else max(1.0, now - t0)
        if restarts is None:
            restarts = self.list_search_restarts
        if restarts is None:
            restarts = 1 if benders_on else (10**6 if deadline is not None else 3)
        found = list_search(data, current, now + budget,
                            stop_at=bound_s / (1 - stop) if stop > 0 else bound_s,
                            stall_iterations=int(2_000 * max(1, data.num_jobs) ** 1.5),
                            restarts=restarts)
        log.debug("phase 2b (list search) done after %.1f s: %.1f", time.perf_counter() - t0,
                  found.makespan)
        metrics = {"list_search_makespan_s": found.makespan,
                   "list_search_iterations": found.iterations,
                   "list_search_s": time.perf_counter() - now,
                   "list_search_improvements": [(round(t - t0, 3), v) for t, v in found.log]}
        if found.makespan < span - 1e-9:
            return found.placements, metrics
        return current, metrics

    def _grade(self, solution: Solution, cut_short: bool) -> None:
        """The status of a makespan solution from its gap to a valid lower bound: the MIP
        convention (HiGHS's mip_rel_gap is 1e-4 too), ``optimal`` within ``target_gap`` (the
        tolerance recorded, ``gap`` says how close); ``feasible`` when stopped by
        ``stop_gap`` (done, but not a proof) or with no limit cut short, else
        ``time_limit``."""
        if solution.gap is not None and solution.gap <= self.target_gap:
            solution.status = Status.OPTIMAL
            solution.metrics["gap_tolerance"] = self.target_gap
        elif solution.gap is not None and solution.gap <= self.stop_at_gap:
            solution.status = Status.FEASIBLE
        else:
            solution.status = Status.TIME_LIMIT if cut_short else Status.FEASIBLE

    def _list_first_solution(self, instance: Instance, data: SaturnData,
                             placed: list[Placement], bound_s: float, metrics: dict[str, Any],
                             solver: str, t0: float) -> Solution:
        """The answer of :meth:`solve` when phase 0 (the list search before any grid model)
        met :attr:`stop_at_gap` from the proven bound ``bound_s``: the list schedule (never
        longer than the greedy one it started from), ``feasible`` (``optimal`` only when the
        gap is within ``target_gap``)."""
        t1 = time.perf_counter()
        solution = schedule_solution(self.name, instance, data, to_schedule(data, placed))
        assert solution.objective is not None
        solution.bound = max(solution.bound or 0.0, bound_s)
        solution.gap = (max(0.0, (solution.objective - solution.bound) / solution.objective)
                        if solution.objective > 0 else 0.0)
        solution.metrics.update(metrics)
        solution.metrics.update({"combinatorial_bound_s": bound_s, "target_gap": self.target_gap,
                                 "returned": "list_search", "grid_model": "not built"})
        self._grade(solution, cut_short=False)
        solution.solver = solver
        solution.timings = Timings(build_s=0.0, solve_s=t1 - t0, extract_s=time.perf_counter() - t1)
        return solution

    def _use_benders(self, data: SaturnData, opts: SolverOptions) -> bool:
        """The Benders phase runs for the makespan with identical nodes and one
        release time (:func:`saturn_nodes.benders_applicable`), and at most
        ``benders_max_jobs_per_node`` jobs per node on average: with more, the exact one-node
        subproblems get too large (in Python, 32 jobs on 2 nodes took 50 s per iteration;
        compiled, 16 jobs per node take 1-30 s per iteration on a loaded machine; there the
        list search finds better schedules and the Benders bound stayed at the analytic one,
        so the default is 12).  On a single node the subproblem is the whole problem: there
        the limit is ``benders_max_jobs_one_node`` (12 jobs on one node, 10 s: 3.7% with
        Benders, 1.2% without)."""
        per_node = (self.benders_max_jobs_per_node if len(data.nodes) > 1
                    else self.benders_max_jobs_one_node)
        return (self.benders and self.objective == "makespan" and not self.extensions
                and benders_applicable(data)
                and data.num_jobs <= per_node * len(data.nodes))

    def _combinatorial_bound(self, data: SaturnData, opts: SolverOptions, t0: float, *,
                             energetic: bool = True, assignment: float | None = None) -> float:
        """Phase 1 of :meth:`solve`: max(analytic bound, :func:`saturn_bounds.assignment_bound`,
        :func:`saturn_bounds.energetic_bound` below the greedy exact makespan), within
        ``bound_share`` of the time limit from ``t0`` (all valid lower bounds of the exact
        problem).  ``energetic=False``: the assignment bound alone (phase 0);
        ``assignment``: that bound, already computed."""
        limit = opts.time_limit_s
        stop = None if limit is None else t0 + self.bound_share * limit
        sub = replace(opts, warm_start=False, extra={}, time_limit_s=None if stop is None
                      else max(0.1, stop - time.perf_counter()))
        bound = assignment_bound(data, sub) if assignment is None else assignment
        if not energetic:
            return bound
        upper = makespan(to_schedule(data, greedy_placements(data)))
        if upper - bound > self.target_gap * upper and (
                stop is None or time.perf_counter() < stop - 0.2):
            bound = energetic_bound(data, bound, upper, options=sub,
                                    tolerance=max(self.target_gap / 4, 1e-4), deadline_s=stop)
        return bound

    def _bound_from_rounded_down_grid(
        self,
        solution: Solution,
        data: SaturnData,
        delta: float,
        opts: SolverOptions,
        deadline: float | None,
        spent_s: float,
        build_s: float = 0.0,
    ) -> bool:
        """Raise ``solution.bound`` with the grid model whose runtimes and releases are rounded
        *down* (``build_from(..., round_down=True)``); True when cut short by the time limit.

        Validity: take an optimal exact schedule (makespan C* <= U, the incumbent's makespan)
        and snap it to the grid: start slot floor(S_j/delta), length floor(r_o/delta) slots.
        Jobs in sequence stay in sequence (floor x + floor y <= floor(x + y)), all jobs using
        slot tau in the snapped schedule were running together just before (tau + 1) delta in
        the exact one, so capacities hold, and every snapped job ends by floor(C*/delta) <=
        floor(U/delta) (the horizon).  With C = C* the makespan rows hold too:
        C* >= S_j + r_o >= floor(S_j/delta) delta + r_o (``finish``, exact runtime), and the
        ``saturn_bounds`` rows hold for every exact schedule.  So the rounded-down optimum,
        and any dual bound of it, is at most C*.  The model is skipped when the grid is exact
        or the gap is already <= :attr:`stop_at_gap`.
        Time: what is left of the time limit, else as long as the main solve took (>= 1 s);
        skipped (cut short) when less than 0.5 s or 3 x ``build_s`` (the time the grid model
        of phase 2 took to build: building this one is not under the solver's time limit)
        is left.
        """
        if solution.objective is None or solution.gap is None or solution.bound is None:
            return False
        if solution.gap <= self.stop_at_gap or solution.metrics.get("grid_exact"):
            return False
        if deadline is not None:
            budget = deadline - time.perf_counter()
        else:
            budget = max(1.0, spent_s)
        if budget < max(0.5, 3 * build_s if deadline is not None else 0.0):
            return deadline is not None
        upper = solution.objective
        down = {
            (j, o): math.floor(opt.runtime / delta + 1e-9)
            for j, opts_j in enumerate(data.options)
            for o, opt in enumerate(opts_j)
        }
        by_config = [{o.config: o for o in opts_j} for opts_j in data.options]
        node_of = {nd.name: nd for nd in data.nodes}
        index_of = {job: j for j, job in enumerate(data.job_ids)}
        snapped: list[Placement] = [
            (index_of[e.job], next(o for o in by_config[index_of[e.job]].values()
                                   if o.technique == e.config and o.gpus == e.gpus),
             node_of[e.node or ""], math.floor(e.start / delta + 1e-9) * delta)
            for e in solution.schedule
        ]
        model = self.build_from(data, delta, down, snapped, round_down=True,
                                floor_s=solution.bound,
                                horizon_slots=math.floor(upper / delta + 1e-9))
        result = PersistentSolver(replace(opts, time_limit_s=budget)).solve(model)
        if result.bound is None:
            return result.status == Status.TIME_LIMIT
        grid_bound = float(result.bound) - 1e-6 * max(1.0, abs(float(result.bound)))
        solution.metrics["rounded_down_grid_bound_s"] = grid_bound
        if grid_bound > solution.bound:
            solution.bound = grid_bound
        solution.gap = max(0.0, (solution.objective - solution.bound) / solution.objective)
        return result.status == Status.TIME_LIMIT

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        data = self.data(instance)
        return self.finish_solution(instance, data, self.placements(model, data), result, {})


# ---------------------------------------------------------------------- disjunctive


class Disjunctive(SaturnMilp):
    """Per-GPU assignment with big-M ordering (paper-faithful); see the module docstring."""

    description = "Saturn SPASE: disjunctive big-M MILP with per-GPU assignment (paper style)"

    def horizon(self, data: SaturnData) -> float:
        """H: the greedy makespan, or a serial upper bound for weighted completion."""
        if self.objective == "makespan":
            return makespan(to_schedule(data, greedy_placements(data)))
        return max(data.release) + sum(max(o.runtime for o in opts) for opts in data.options)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        data = self.data(instance)
        return self.build_from(data, self.horizon(data))

    def build_from(self, data: SaturnData, big_m: float) -> pyo.ConcreteModel:
        """The disjunctive model with M = ``big_m`` (s), its rows built from arrays over the
        columns [y..., z..., q..., S...] (+ C), each row naming its variables in the order
        of the module docstring's formulas."""
        m = pyo.ConcreteModel(name=self.name)
        num_jobs = data.num_jobs
        jobs = range(num_jobs)
        yon = [(j, o, n) for j in jobs for o, opt in enumerate(data.options[j])
               for n, node in enumerate(data.nodes) if opt.gpus <= node.gpus]
        gpu_slots = [(j, n, u) for j in jobs for n, node in enumerate(data.nodes)
                     for u in range(node.gpus)]
        m.Y = pyo.Set(initialize=yon, dimen=3, ordered=True)
        m.y = pyo.Var(m.Y, domain=pyo.Binary)
        m.Z = pyo.Set(initialize=gpu_slots, dimen=3, ordered=True)
        m.z = pyo.Var(m.Z, domain=pyo.Binary)
        pairs = [(i, j) for i in jobs for j in jobs if i < j]
        m.P = pyo.Set(initialize=pairs, dimen=2, ordered=True)
        m.q = pyo.Var(m.P, domain=pyo.Binary)
        m.J = pyo.Set(initialize=jobs)
        m.S = pyo.Var(m.J, bounds=lambda mm, j: (data.release[j], big_m))
        cols = DisjunctiveColumns.build(data, yon, len(pairs))
        variables = [*m.y.values(), *m.z.values(), *m.q.values(), *m.S.values()]
        # D_j = sum_{o,n} r_o y[j,o,n]
        runs = cols.by_job_y(cols.run)
        add_expressions(m, "D", runs, variables, index=m.J)
        add_rows(m, "one_option", cols.by_job_y(np.ones(len(yon))), variables, 1.0, 1.0,
                 index=m.J)
        m.JN = pyo.Set(initialize=[(j, n) for j in jobs for n in range(len(data.nodes))], dimen=2)
        add_rows(m, "gpus", cols.gpu_rows(), variables, 0.0, 0.0, index=m.JN)
        clash = [(i, j, n, u) for i, j in pairs for n, node in enumerate(data.nodes)
                 for u in range(node.gpus)]
        m.CL = pyo.Set(initialize=clash, dimen=4, ordered=True)
        ci, cj, cn, cu = np.array(clash, dtype=np.int64).reshape(-1, 4).T
        # before[i,j,n,u]: S_i + D_i + M q + M z_i + M z_j - S_j <= 3M
        add_rows(m, "before", cols.clash_rows(ci, cj, cn, cu, big_m, after=False), variables,
                 None, 3 * big_m, index=m.CL)
        # after[i,j,n,u]:  S_j + D_j - M q + M z_i + M z_j - S_i <= 2M
        add_rows(m, "after", cols.clash_rows(ci, cj, cn, cu, big_m, after=True), variables,
                 None, 2 * big_m, index=m.CL)
        # horizon[j]: S_j + D_j <= M
        ends = cols.end_rows()
        add_rows(m, "horizon", ends, variables, None, big_m, index=m.J)
        if self.objective == "makespan":
            m.C = pyo.Var(bounds=(0, big_m))
            # finish[j]: S_j + D_j - C <= 0
            add_rows(m, "finish", with_column(ends, -np.ones(num_jobs)), [*variables, m.C],
                     None, 0.0, index=m.J)
            m.obj = pyo.Objective(expr=m.C)
        else:
            # sum_j w_j (S_j + D_j), terms in the rows' order (S_j, then j's y)
            weighted = sp.diags(np.asarray(data.weight, dtype=float)) @ ends
            weighted.eliminate_zeros()
            m.obj = pyo.Objective(expr=linear_expression(
                weighted.data, [variables[i] for i in weighted.indices.tolist()]))
        return m

    def placements(self, model: pyo.ConcreteModel, data: SaturnData) -> list[Placement]:
        placed = []
        for (j, o, n), value in model.y.extract_values().items():
            if value is not None and value > 0.5:
                start = max(float(pyo.value(model.S[j])), data.release[j])
                placed.append((j, data.options[j][o], data.nodes[n], start))
        return placed

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        data = self.data(instance)
        if result.status.has_solution:
            placed = self.placements(model, data)
            metrics: dict[str, Any] = {"big_m_s": model.S[0].ub if data.num_jobs else 0.0}
        else:
            placed = greedy_placements(data)
            metrics = {"fallback": "greedy (the MILP found no incumbent in time)"}
        solution = self.finish_solution(instance, data, placed, result, metrics)
        if not result.status.has_solution:
            solution.diagnostics.append(
                f"MILP ended ({result.termination}) without an incumbent; returning the greedy "
                "schedule"
            )
            if result.termination == "maxTimeLimit":
                solution.status = Status.TIME_LIMIT
            return solution
        self._adopt_model_bound(solution, result)
        return solution

    @staticmethod
    def _adopt_model_bound(solution: Solution, result: SolveResult) -> None:
        """The disjunctive model is exact in continuous time, so its dual bound bounds the
        exact problem: bound = max(analytic bound, the MILP's bound), gap from it.  ``optimal``
        stays only when that gap is within the solver's tolerance (the proof); otherwise the
        schedule is ``feasible``."""
        if result.bound is None or solution.objective is None:
            if solution.status == Status.OPTIMAL:
                solution.status = Status.FEASIBLE
            return
        bound = float(result.bound)
        solution.bound = bound if solution.bound is None else max(solution.bound, bound)
        solution.gap = (max(0.0, (solution.objective - solution.bound) / solution.objective)
                        if solution.objective > 0 else 0.0)
        tolerance = result.gap_tolerance if result.gap_tolerance is not None else 1e-4
        if result.gap_tolerance is not None:
            solution.metrics["gap_tolerance"] = result.gap_tolerance
        if solution.status == Status.OPTIMAL and solution.gap > tolerance * (1 + 1e-9):
            solution.status = Status.FEASIBLE
