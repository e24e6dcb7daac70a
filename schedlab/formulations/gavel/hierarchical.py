"""Gavel's hierarchical policy: weighted max-min fairness across entities by water-filling.

Each job belongs to an entity e (``job.entity``; a job without one is its own entity) with
weight W_e (``params.entity_weights``, default 1).  Let v_j(X) = s_j thr_j(X) / T_eq[j] be the
job's normalized throughput (as in max-min fairness, without the weight).

* ``hierarchy_within_entity = "fairness"``: groups are jobs with weight
  omega_j = W_e w_j / sum_{i in e} w_i (the entity's weight split by job weight);
  group value G_j = v_j.
* ``hierarchy_within_entity = "fifo"``: groups are entities with weight W_e and value
  G_e = sum_{j in e} v_j; inside an entity the share goes to jobs in arrival order.

Water-filling (one LP per level, bottleneck detection), with L_g the level reached by g:

1. ``level`` LP:  maximize t  s.t.  G_g >= omega_g t  (active g),  G_g >= L_g  (all g).
2. Set L_g = omega_g t* for active g.  For each active g solve  maximize G_g  s.t.
   G_h >= L_h for all h; if the maximum does not exceed L_g (relative 1e-7) g is a bottleneck
   and is frozen.  Repeat until every group is frozen.
3. FIFO inside entities: for the jobs of every entity in arrival order, maximize v_j with
   every group at its level and earlier jobs at their maxima.
4. Finally maximize sum_j v_j with every floor kept (work-conserving).

Every LP re-uses one persistent solver: only mutable weights/floors and the objective change.
``objective`` is the first level t* = min_g G_g / omega_g of the returned allocation.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from schedlab.errors import SolverError
from schedlab.formulations.gavel.base import GavelPolicy, read_allocation
from schedlab.formulations.gavel.data import FloatArray, GavelData, effective_throughput
from schedlab.instance import Instance
from schedlab.lazy import LazyModule
from schedlab.solution import Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolverOptions

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:  # imported at the first use (schedlab.lazy)
    pyo = LazyModule("pyomo.environ")


log = logging.getLogger(__name__)
#: Floors are set this far (relative) below the level just reached, so that the next LP stays
#: feasible despite the solver's primal feasibility tolerance; raised tenfold (up to
#: ``_MAX_SLACK``) whenever an LP is declared infeasible at the edge of that tolerance.  A
#: group is a bottleneck when its own maximum exceeds its level by at most 20 x the slack.
_FLOOR_SLACK = 2e-7
_MAX_SLACK = 2e-4


class Hierarchical(GavelPolicy):
    """Weighted max-min fairness across entities (water-filling), fairness or FIFO inside."""

    description = "hierarchical: max-min fairness across entities by water-filling"

    def __init__(self, within: str | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.within = within

    def groups(self, instance: Instance) -> tuple[list[list[int]], FloatArray, str]:
        """(members of each group, group weights omega_g, the within-entity mode)."""
        within = self.within or instance.params.hierarchy_within_entity
        entity_weights = instance.params.entity_weights or {}
        members: dict[str, list[int]] = defaultdict(list)
        for j, job in enumerate(instance.jobs):
            members[job.entity or f"job:{job.id}"].append(j)
        entity_names = list(members)
        w_entity = {e: entity_weights.get(e, 1.0) for e in entity_names}
        if within == "fifo":
            return [members[e] for e in entity_names], np.array(
                [w_entity[e] for e in entity_names]
            ), within
        groups: list[list[int]] = []
        weights: list[float] = []
        for e in entity_names:
            total = sum(instance.jobs[j].weight for j in members[e])
            for j in members[e]:
                groups.append([j])
                weights.append(w_entity[e] * instance.jobs[j].weight / total)
        return groups, np.array(weights), within

    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        return self.model(data)

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        groups, weights = self._groups_cache
        v = self._values(data, x, y)
        return float(min(v[g].sum() / w for g, w in zip(groups, weights, strict=True)))

    _groups_cache: tuple[list[list[int]], FloatArray] = ([], np.zeros(0))

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The first level t = min_g G_g / omega_g of the solution's allocation, with the
        groups and weights taken from ``instance`` (as :meth:`solve` sets them before it
        evaluates :meth:`objective_value`); None when there is no group (no job)."""
        groups, weights, _ = self.groups(instance)
        if not groups:
            return None
        self._groups_cache = (groups, weights)
        return super().objective_of(instance, solution)

    @staticmethod
    def _values(data: GavelData, x: FloatArray, y: FloatArray) -> FloatArray:
        teq = data.equal_share_throughput()
        thr = effective_throughput(data, x, y)
        return np.divide(data.scale_factor * thr, teq, out=np.zeros_like(thr), where=teq > 0)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        early = self.precheck(instance)
        if early is not None:
            return early
        opts = (options or SolverOptions()).with_method("simplex")
        t0 = time.perf_counter()
        data, true = self.policy_data(instance)
        groups, weights, within = self.groups(instance)
        self._groups_cache = (groups, weights)
        teq = data.equal_share_throughput()
        coef = data.scale_factor / np.where(teq > 0, teq, 1.0)
        m = self.extend_model(self.build_from(data), instance)
        m.G = pyo.Set(initialize=range(len(groups)), ordered=True)
        m.v = pyo.Expression(m.J, rule=lambda model, j: float(coef[j]) * model.thr[j])
        m.gval = pyo.Expression(
            m.G, rule=lambda model, g: pyo.quicksum(model.v[j] for j in groups[g])
        )
        m.omega = pyo.Param(m.G, mutable=True, initialize=0.0)
        m.floor_g = pyo.Param(m.G, mutable=True, initialize=0.0)
        m.floor_j = pyo.Param(m.J, mutable=True, initialize=0.0)
        m.t = pyo.Var(bounds=(0.0, None))
        m.level = pyo.Constraint(
            m.G, rule=lambda model, g: model.gval[g] >= model.omega[g] * model.t
        )
        m.floor = pyo.Constraint(m.G, rule=lambda model, g: model.gval[g] >= model.floor_g[g])
        m.job_floor = pyo.Constraint(m.J, rule=lambda model, j: model.v[j] >= model.floor_j[j])
        solver = PersistentSolver(opts)
        t1 = time.perf_counter()
        lps = 0
        # Levels reached so far (exact); the LPs see them lowered by a small slack.
        group_level = dict.fromkeys(range(len(groups)), 0.0)
        job_level = dict.fromkeys(range(data.num_jobs), 0.0)
        slack = _FLOOR_SLACK
        # Honest status: the worst sub-solve, and every fallback said in the diagnostics.
        unproven: list[str] = []
        first_bound: list[float] = []

        def apply_floors() -> None:
            for g, value in group_level.items():
                m.floor_g[g] = value - slack * max(1.0, abs(value))
            for j, value in job_level.items():
                m.floor_j[j] = value - slack * max(1.0, abs(value))

        def maximize(expr: object) -> float:
            nonlocal lps, slack
            if hasattr(m, "objective"):
                m.del_component(m.objective)
            m.objective = pyo.Objective(expr=expr, sense=pyo.maximize)
            while True:
                apply_floors()
                result = solver.solve(m)
                lps += 1
                if result.status.has_solution and result.objective is not None:
                    if result.status != Status.OPTIMAL:
                        unproven.append(f"LP {lps} ended {result.status.value}: "
                                        f"{result.message}")
                    if not first_bound and result.bound is not None:
                        first_bound.append(float(result.bound))
                    return float(result.objective)
                if result.status != Status.INFEASIBLE or slack >= _MAX_SLACK:
                    raise SolverError(f"water-filling LP failed: {result.message}")
                # Floors at the edge of the solver's tolerance: relax them a little more.
                slack *= 10
                log.debug("water-filling: floors relaxed to %g (relative)", slack)
                unproven.append(f"floors relaxed to {slack:g} (relative) after LP {lps} was "
                                "infeasible at the solver's tolerance")

        levels: list[float] = []
        try:
            active = set(range(len(groups)))
            while active:
                for g in m.G:
                    m.omega[g] = float(weights[g]) if g in active else 0.0
                t_star = maximize(m.t)
                levels.append(t_star)
                for g in active:
                    group_level[g] = float(weights[g]) * t_star
                for g in m.G:
                    m.omega[g] = 0.0
                frozen = set()
                for g in sorted(active):
                    best = maximize(m.gval[g])
                    floor = float(weights[g]) * t_star
                    if best <= floor * (1 + 20 * slack) + 20 * slack:
                        frozen.add(g)
                if not frozen:  # numerical safety: cannot happen in exact arithmetic
                    log.warning("water-filling: no bottleneck found at level %g; stopping", t_star)
                    unproven.append(f"no bottleneck found at level {t_star:.6g}: every remaining "
                                    "group was frozen there (fallback)")
                    frozen = set(active)
                active -= frozen
            if within == "fifo":
                for members in groups:
                    order = sorted(members, key=lambda j: (instance.jobs[j].arrival, j))
                    for j in order:
                        best = maximize(m.v[j])
                        job_level[j] = best
            maximize(pyo.quicksum(m.v[j] for j in m.J))
            x, y = read_allocation(m, data)
        except SolverError as exc:  # a sub-LP ended without a solution (e.g. its time limit)
            failed = self.new_solution(instance, Status.ERROR)
            failed.solver = opts.solver
            failed.diagnostics = [*dict.fromkeys(unproven), str(exc)]
            failed.metrics.update(water_filling_levels=levels, lps_solved=lps)
            failed.timings = Timings(build_s=t1 - t0, solve_s=time.perf_counter() - t1)
            return failed
        t2 = time.perf_counter()
        # proof: every water-filling LP ended optimal at unrelaxed floors and each level
        # found its bottleneck; anything else was recorded in ``unproven``
        solution = self.new_solution(instance, Status.FEASIBLE if unproven else Status.OPTIMAL)
        solution.solver = opts.solver
        solution.diagnostics = list(dict.fromkeys(unproven))
        self.finish(solution, instance, data, true, x, y)
        # The first level's LP bound bounds the max-min value (the objective) from above.
        solution.bound = first_bound[0] if first_bound else None
        if solution.bound is not None and solution.objective:
            solution.gap = abs(solution.bound - solution.objective) / abs(solution.objective)
        solution.metrics["water_filling_levels"] = levels
        solution.metrics["lps_solved"] = lps
        solution.timings = Timings(
            build_s=t1 - t0, solve_s=t2 - t1, extract_s=time.perf_counter() - t2
        )
        return solution
