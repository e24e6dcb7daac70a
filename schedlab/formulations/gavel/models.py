"""Gavel's heterogeneity-aware scheduling policies as Pyomo LPs (Narayanan et al., OSDI'20).

Each policy is a :class:`~schedlab.formulations.gavel.base.GavelPolicy` over the shared model
of :mod:`schedlab.formulations.gavel.base` (the variables, the per-job and capacity rows and
the type-blind rows of the heterogeneity-agnostic variant).  An agnostic policy's objective is
evaluated with the true throughputs, so it is directly comparable with the heterogeneity-aware
optimum (which is never lower: type-blindness only adds rows).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from schedlab.errors import InputError
from schedlab.fairness import isolated_finish_time, rho_isolated_share
from schedlab.formulations.arrays import add_rows, linear_expression
from schedlab.formulations.base import Heuristic
from schedlab.formulations.gavel.base import (
    GavelMethod,
    GavelPolicy,
    lead_rows,
    model_columns,
    read_allocation,
)
from schedlab.formulations.gavel.data import (
    FloatArray,
    GavelData,
    effective_throughput,
    isolated_share,
    isolated_throughput,
    makespan_value,
    max_min_value,
    sum_throughput_coefficients,
    sum_throughput_value,
)
from schedlab.formulations.gavel.fast import solve_max_min_fast
from schedlab.gcpause import gc_paused
from schedlab.instance import Instance
from schedlab.lazy import LazyModule
from schedlab.solution import Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sp
else:  # imported at the first use (schedlab.lazy)
    pyo = LazyModule("pyomo.environ")
    sp = LazyModule("scipy.sparse")


log = logging.getLogger(__name__)


# ------------------------------------------------------------------- max-min fairness


class MaxMinFairness(GavelPolicy):
    """Weighted max-min fairness (Gavel's LAS), normalized by equal-share throughput.

    maximize  t
    s.t.      fairness[j]:  s_j thr_j(X) / (w_j T_eq[j]) >= t     for every job j
              job_share, capacity (base model)

    With ``space_sharing=True``, thr_j also counts co-located pairs.  Large degenerate
    instances are solved with interior point + crossover.
    """

    description = "weighted max-min fairness over normalized effective throughput"

    def __init__(self, method: str = "auto", fast_threshold: int = 500, **kwargs: Any) -> None:
        """``method``: ``pyomo`` (the reference model), ``fast`` (the exact fast path of
        :mod:`schedlab.formulations.gavel.fast`) or ``auto`` (fast from ``fast_threshold``
        jobs on)."""
        super().__init__(**kwargs)
        self.method = method
        self.fast_threshold = fast_threshold

    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        m = self.model(data)
        teq = data.equal_share_throughput()
        coef = data.scale_factor / (data.weight * np.where(teq > 0, teq, 1.0))
        m.t = pyo.Var(bounds=(0.0, None))
        # fairness[j]: t - coef_j thr_j <= 0
        add_rows(m, "fairness", lead_rows(m, np.arange(data.num_jobs), coef,
                                          np.ones(data.num_jobs)),
                 [m.t, *model_columns(m)], None, 0.0, index=m.J)
        m.objective = pyo.Objective(expr=m.t, sense=pyo.maximize)
        return m

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        opts = options or SolverOptions()
        use_fast = self.method == "fast" or (
            self.method == "auto" and len(instance.jobs) >= self.fast_threshold
        )
        if use_fast and self.extensions:
            # the fast path's models are over job classes, not the X[j,k] of build()
            if self.method == "fast":
                raise InputError("method='fast' does not take extra constraints (its models "
                                 "are over job classes); use method='pyomo' or 'auto'",
                                 field="method")
            use_fast = False
        if use_fast:
            self.validate(instance)
            with gc_paused():  # arrays and per-job dicts only, no reference cycles
                return solve_max_min_fast(self, instance, opts)
        if len(instance.jobs) >= 2000:
            opts = opts.with_method("ipm")
        return super().solve(instance, opts)

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        return max_min_value(data, x, y)


# -------------------------------------------------------------------- sum throughput


class MaxSumThroughput(GavelPolicy):
    """Maximize the sum of throughputs (Gavel's ``ThroughputSumWithPerf``), optionally per
    dollar (``cost=True``: Gavel's ``ThroughputNormalizedByCostSumWithPerfSLOs``), with SLOs.

    maximize  sum_j sum_k T[j,k] X[j,k] / c_k          (c_k = 1 without costs)
    s.t.      slo[j]:  thr_j(X) >= R_j / slo_j         for jobs with ``slo_s``
              job_share, capacity

    Raw throughputs, exactly as Gavel's code: c_k is the accelerator's price per GPU-hour
    (``cost_per_hour``), with no per-job normalization and no scale factor in the price.

    ``normalize="best_type"`` (an explicit option, not Gavel's policy) divides each job's terms
    by T_best[j] = max_k T[j,k] (and, with costs, by s_j c_k), so a job's full-speed run is
    worth 1 whatever its model.

    SLOs: when the SLO rows cannot all hold, Gavel's code drops them all and solves again.
    With ``drop_infeasible_slos=True`` (the default, Gavel's) the solution is that re-solve,
    and ``diagnostics`` / ``metrics["slos_dropped"]`` name the SLOs that break (found by an
    elastic LP that minimizes the total relative SLO shortfall); with ``False`` the solution is
    ``infeasible`` with the same diagnostics.
    """

    description = "maximize the sum of raw throughputs (cost=True: per dollar), with SLOs"
    needs_every_job = False
    #: accepted values of ``normalize``
    NORMALIZATIONS = ("none", "best_type")

    def __init__(
        self,
        cost: bool = False,
        normalize: str = "none",
        drop_infeasible_slos: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if normalize not in self.NORMALIZATIONS:
            raise InputError(
                f"normalize must be one of {self.NORMALIZATIONS}, got {normalize!r}",
                field="normalize",
            )
        self.cost = cost
        self.normalize = normalize
        self.drop_infeasible_slos = drop_infeasible_slos

    def validate(self, instance: Instance) -> None:
        super().validate(instance)
        if self.cost:
            for acc, pool in instance.cluster.accelerators.items():
                if not pool.cost_per_hour:
                    raise InputError(
                        f"formulation {self.name} needs a positive cost_per_hour on every type",
                        file=instance.name,
                        field=f"cluster.accelerators.{acc}.cost_per_hour",
                    )
        for i, job in enumerate(instance.jobs):
            if job.slo_s is not None and job.total_steps is None:
                raise InputError(
                    "a job with slo_s needs total_steps", file=instance.name,
                    field=f"jobs[{i}].total_steps",
                )

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        data, _ = self.policy_data(instance)
        m = self.build_from(data)
        self._add_slos(m, instance, data)
        return m

    def _prices(self, data: GavelData) -> FloatArray | None:
        return data.prices if self.cost else None

    def coefficients(self, data: GavelData) -> FloatArray:
        """The objective's coefficient of X[j,k]: T[j,k] / c_k, or with ``best_type``
        T[j,k] / (T_best[j] [s_j c_k])."""
        return sum_throughput_coefficients(data, self._prices(data), self.normalize)

    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        m = self.model(data)
        jk = m.gavel_rows.jk
        coef = self.coefficients(data)[jk[:, 0], jk[:, 1]]
        terms = np.flatnonzero(coef)  # a 0 * X term is no term
        x = list(m.X.values())
        m.objective = pyo.Objective(
            expr=linear_expression(coef[terms], [x[i] for i in terms.tolist()]),
            sense=pyo.maximize,
        )
        return m

    @staticmethod
    def _slo_rates(instance: Instance) -> dict[int, float]:
        """Required throughput R_j / slo_j (steps/s) of jobs with an SLO."""
        return {
            j: job.remaining_steps / job.slo_s
            for j, job in enumerate(instance.jobs)
            if job.slo_s is not None and job.remaining_steps > 0
        }

    def _add_slos(self, m: pyo.ConcreteModel, instance: Instance, data: GavelData) -> None:
        rates = self._slo_rates(instance)
        jobs = sorted(rates)
        m.SLO = pyo.Set(initialize=jobs, ordered=True)
        # slo[j]: thr_j >= R_j / slo_j
        add_rows(m, "slo", m.gavel_rows.thr[jobs], model_columns(m),
                 np.array([rates[j] for j in jobs]), None, index=m.SLO)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        solution = super().solve(instance, options)
        if solution.status != Status.INFEASIBLE or not self._slo_rates(instance):
            return solution
        broken = self._explain_slos(instance, options)
        if not self.drop_infeasible_slos:
            solution.diagnostics = broken
            return solution
        # Gavel's fallback: drop every SLO row and solve again, saying so.
        without = instance.model_copy(
            update={"jobs": [job.model_copy(update={"slo_s": None}) for job in instance.jobs]}
        )
        relaxed = super().solve(without, options)
        relaxed.instance = solution.instance
        relaxed.diagnostics = [
            "SLOs cannot all hold: every SLO row was dropped and the policy solved again "
            "without them (Gavel's fallback; drop_infeasible_slos=False reports infeasible)",
            *broken,
        ]
        relaxed.metrics["slos_dropped"] = sorted(
            instance.jobs[j].id for j in self._slo_rates(instance)
        )
        return relaxed

    def _explain_slos(self, instance: Instance, options: SolverOptions | None) -> list[str]:
        """Name the SLOs that cannot hold: first alone, then together (elastic LP)."""
        data, _ = self.policy_data(instance)
        rates = self._slo_rates(instance)
        alone = []
        for j, rate in rates.items():
            best = float(data.best_throughput()[j])
            if rate > best * (1 + 1e-9):
                alone.append(
                    f"job {data.job_ids[j]}: SLO needs {rate:.6g} steps/s but its best "
                    f"throughput is {best:.6g} (cannot hold even alone)"
                )
        if alone:
            return alone
        m = self.model(data, f"{self.name}.slo_elastic")
        jobs = sorted(rates)
        m.SLO = pyo.Set(initialize=jobs, ordered=True)
        m.short = pyo.Var(m.SLO, bounds=(0.0, 1.0))
        # slo[j]: thr_j >= R_j (1 - short_j), as -R_j short_j - thr_j <= -R_j over the
        # columns [short..., X..., Y...]
        required = np.array([rates[j] for j in jobs])
        elastic = sp.hstack([sp.diags(-required), -m.gavel_rows.thr[jobs]], format="csr")
        elastic.sort_indices()
        add_rows(m, "slo", elastic, [*m.short.values(), *model_columns(m)], None, -required,
                 index=m.SLO)
        m.objective = pyo.Objective(expr=linear_expression(np.ones(len(jobs)),
                                                           list(m.short.values())))
        PersistentSolver(options).solve(self.extend_model(m, instance))
        broken = [
            f"job {data.job_ids[j]}: SLO short by {100 * pyo.value(m.short[j]):.3g}% of its "
            f"required {rates[j]:.6g} steps/s"
            for j in m.SLO
            if (pyo.value(m.short[j]) or 0.0) > 1e-7
        ]
        return ["SLOs cannot all hold together; least total shortfall:", *broken]

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        return sum_throughput_value(data, x, self._prices(data), self.normalize)


# ----------------------------------------------------------------------- min makespan


class MinMakespan(GavelPolicy):
    """Minimize the time until every job's remaining steps are done, as one exact LP.

    Makespan M satisfies R_j / thr_j(X) <= M for all j, i.e. thr_j(X) >= R_j / M.  With
    y = 1/M this is linear:

    maximize  y
    s.t.      finish[j]:  thr_j(X) >= R_j y        for jobs with R_j > 0
              job_share, capacity

    and the optimal makespan is 1/y* (seconds).  Gavel instead bisects on M.

    The model's variable is y' = R_max y (R_max = the largest R_j), so the rows read
    (R_j / R_max) y' <= thr_j(X): y itself is of the order of 1e-6 per second for Gavel's
    jobs, below the solver's optimality tolerance, where HiGHS could stop short of the
    optimum (0.8% above the optimal makespan at one decision of a 40-job stream); y' is of
    the order of a throughput.
    """

    description = "minimize makespan as one LP in y = 1/makespan"
    objective_sense = "minimize"

    def validate(self, instance: Instance) -> None:
        super().validate(instance)
        instance.require("total_steps", formulation=self.name)

    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        m = self.model(data)
        busy = np.flatnonzero(data.remaining_steps > 0)
        m.B = pyo.Set(initialize=busy.tolist(), ordered=True)
        m.y = pyo.Var(bounds=(0.0, None))  # y' = R_max / makespan (class docstring)
        remaining = data.remaining_steps[busy]
        m.y_scale = float(remaining.max()) if len(busy) else 1.0
        # finish[j]: (R_j / R_max) y' - thr_j <= 0
        add_rows(m, "finish", lead_rows(m, busy, np.ones(len(busy)), remaining / m.y_scale),
                 [m.y, *model_columns(m)], None, 0.0, index=m.B)
        m.objective = pyo.Objective(expr=m.y, sense=pyo.maximize)
        return m

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        solution = super().extract(model, instance, result)
        scale = model.y_scale
        y = pyo.value(model.y) / scale if model.y.value is not None else None
        if solution.status.has_solution and y:
            solution.metrics["inverse_makespan_per_s"] = y
            # the solver's bound on y bounds the makespan from below; without one (a stopped
            # LP) there is no bound, never the primal value
            solution.bound = scale / result.bound if result.bound else None
            solution.gap = None
            if solution.objective and solution.bound:
                solution.gap = abs(solution.objective - solution.bound) / solution.objective
        return solution

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        return makespan_value(data, x)


# --------------------------------------------------------------- finish-time fairness


class FinishTimeFairness(GavelPolicy):
    """Themis' finish-time fairness as Gavel's ``FinishTimeFairnessPolicyWithPerf``: minimize
    max_j rho_j, by bisection on rho.

    rho_j(X) = (t_j + R_j / thr_j(X)) / (t_iso_j + R_j / T_iso[j])

    t_j = ``time_in_system_s`` (s), t_iso_j = ``isolated_time_s`` (s), R_j remaining steps.
    T_iso[j] = sum_k T[j,k] X_iso[j,k] is the throughput on Gavel's isolated share, 1/m of
    every accelerator pool (m = number of jobs): X_iso[j,k] = n_k / (m s_j), each row then
    scaled down so that sum_k X_iso[j,k] <= 1 (:func:`schedlab.fairness.isolated_share`,
    reference (a) of :mod:`schedlab.fairness`, which also says how this rho differs from the
    reported metric and from the ``themis`` policy's).  Job weights do not enter, as in
    Gavel's code.

    For a fixed rho the condition rho_j <= rho is linear:  thr_j(X) >= R_j / (rho D_j - t_j),
    D_j = t_iso_j + R_j/T_iso[j].  Each bisection step solves  max z  s.t.  thr_j(X) >= r_j(rho) z
    and tests z >= 1, re-using one persistent solver (only the row coefficients r_j change).
    The isolated allocation (restricted to the types a job can use) is feasible and gives the
    first upper bound; every job alone on its best type gives the first lower bound.
    Bisection stops when (hi - lo) <= tol * hi, tol = ``params.fairness_tolerance``.
    ``objective`` is max rho of the returned allocation; ``bound`` the largest rho proven
    infeasible by an optimal sub-solve.  Status: ``optimal`` when the bisection closed to the
    tolerance; ``feasible`` when it stopped early (a sub-solve that failed or hit its time
    limit proves nothing, so the search stops there and reports the gap it has; or the step
    cap); the gap is always (objective - bound) / objective.
    """

    description = "finish-time fairness (Themis): minimize max rho by bisection on LP feasibility"
    objective_sense = "minimize"
    #: most bisection steps (each halves the interval)
    max_steps = 200

    def validate(self, instance: Instance) -> None:
        super().validate(instance)
        instance.require("total_steps", formulation=self.name)

    @staticmethod
    def terms(data: GavelData) -> tuple[FloatArray, FloatArray]:
        """(t_j, D_j) per job: time in system and the finish time on Gavel's isolated share
        (:func:`schedlab.fairness.isolated_finish_time`), s."""
        assert data.time_in_system is not None and data.isolated_time is not None
        denom = isolated_finish_time(data.isolated_time, data.remaining_steps,
                                     isolated_throughput(data))
        return data.time_in_system, denom

    def rho(self, data: GavelData, x: FloatArray, y: FloatArray) -> FloatArray:
        """rho_j of an allocation (:func:`schedlab.fairness.rho_isolated_share`; inf for a job
        with work left and no throughput)."""
        t, denom = self.terms(data)
        return rho_isolated_share(t, data.remaining_steps, effective_throughput(data, x, y),
                                  denom)

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        busy = data.remaining_steps > 0
        if not busy.any():
            return 0.0
        return float(self.rho(data, x, y)[busy].max())

    def build_from(self, data: GavelData) -> pyo.ConcreteModel:
        m = self.model(data)
        busy = [int(j) for j in np.flatnonzero(data.remaining_steps > 0)]
        m.B = pyo.Set(initialize=busy, ordered=True)
        m.rate = pyo.Param(m.B, mutable=True, initialize=0.0)
        m.z = pyo.Var(bounds=(0.0, 2.0))
        # the coefficient of z is a mutable Param (changed in place between bisection steps),
        # so each row combines the array-built thr_j with that term
        m.finish = pyo.Constraint(
            m.B, rule=lambda model, j: model.thr[j] >= model.rate[j] * model.z
        )
        m.objective = pyo.Objective(expr=m.z, sense=pyo.maximize)
        return m

    def start_allocation(self, data: GavelData) -> FloatArray:
        """A feasible allocation with finite rho: Gavel's isolated share on the usable types
        (heterogeneity-agnostic: spread over the usable pools in proportion to their GPUs,
        with the same total share, which satisfies the type-blind rows)."""
        x_iso = np.where(data.allowed, isolated_share(data.gpus, data.scale_factor), 0.0)
        if self.heterogeneity_aware:
            return x_iso
        pool = (data.allowed * data.gpus[None, :]).sum(axis=1)
        total = x_iso.sum(axis=1)
        spread = np.divide(data.allowed * data.gpus[None, :], pool[:, None],
                           out=np.zeros_like(x_iso), where=pool[:, None] > 0)
        # Scale so that no pool is over-subscribed: each job keeps at most its isolated share.
        x = spread * total[:, None]
        used = (data.scale_factor[:, None] * x).sum(axis=0)
        over = np.max(np.divide(used, data.gpus, out=np.zeros_like(used), where=data.gpus > 0))
        return x / max(over, 1.0)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        early = self.precheck(instance)
        if early is not None:
            return early
        opts = (options or SolverOptions()).with_method("simplex")
        t0 = time.perf_counter()
        data, true = self.policy_data(instance)
        m = self.extend_model(self.build_from(data), instance)
        solver = PersistentSolver(opts)
        t1 = time.perf_counter()
        t_in, denom = self.terms(data)
        busy = data.remaining_steps > 0
        # hi: the isolated allocation is feasible; lo: every job alone at its best speed.
        best_x = self.start_allocation(data)
        y0 = np.zeros(data.pair_allowed.shape)
        hi = float(self.rho(data, best_x, y0)[busy].max()) if busy.any() else 0.0
        lo_each = rho_isolated_share(t_in, data.remaining_steps, data.best_throughput(), denom)
        lo = float(lo_each[busy].max()) if busy.any() else 0.0
        tol = instance.params.fairness_tolerance
        steps = 0
        stopped: str | None = None
        failed_steps = 0  # steps that ended without a proof (errors, limits)
        # The isolated start need not meet a user's extra constraints: then hi is first
        # verified by a solve at hi (doubled until feasible) before bisecting.
        verified = not self.extensions
        while busy.any() and (not verified or hi - lo > tol * hi):
            if steps >= self.max_steps:
                stopped = f"bisection stopped at its cap of {self.max_steps} steps"
                break
            mid = 0.5 * (lo + hi) if verified else hi
            for j in m.B:
                slack_time = mid * denom[j] - t_in[j]
                m.rate[j] = data.remaining_steps[j] / slack_time if slack_time > 0 else 1e12
            result = solver.solve(m)
            steps += 1
            if result.status != Status.OPTIMAL:
                failed_steps += 1
                stopped = (f"bisection step {steps} (rho = {mid:.6g}) ended {result.status.value}"
                           f"{': ' + result.message if result.message else ''}; it proves "
                           "nothing, so the search stopped there")
                break
            if (pyo.value(m.z) or 0.0) >= 1.0 - 1e-9:
                x, y = read_allocation(m, data)
                rho_here = float(self.rho(data, x, y)[busy].max())
                hi = min(mid, rho_here) if rho_here <= mid * (1 + 1e-9) else mid
                best_x, y0 = x, y
                verified = True
            elif not verified:
                lo, hi = hi, 2.0 * hi
            else:
                lo = mid
        t2 = time.perf_counter()
        if busy.any() and not verified:
            failed = self.new_solution(instance, Status.ERROR)
            failed.diagnostics = [stopped or "", "no allocation meeting the extra constraints "
                                  f"was found (searched up to rho = {hi:.6g})"]
            failed.metrics["failed_subsolves"] = failed_steps
            return failed
        # proof: every step optimal and hi - lo <= tol * hi, with lo a proven lower bound
        # (a step with z < 1 proves rho = mid infeasible) and hi attained by best_x
        solution = self.new_solution(instance, Status.FEASIBLE if stopped else Status.OPTIMAL)
        solution.solver = opts.solver
        if stopped:
            solution.diagnostics = [stopped]
        self.finish(solution, instance, data, true, best_x, y0)
        solution.bound = lo
        solution.gap = (solution.objective - lo) / solution.objective if solution.objective else 0.0
        solution.metrics["bisection_steps"] = steps
        solution.metrics["failed_subsolves"] = failed_steps
        solution.metrics["rho"] = {
            job: float(v)
            for job, v in zip(data.job_ids, self.rho(true, best_x, y0), strict=True)
        }
        solution.metrics["isolated_throughput"] = {
            job: float(v) for job, v in zip(data.job_ids, isolated_throughput(true), strict=True)
        }
        t3 = time.perf_counter()
        solution.timings = Timings(build_s=t1 - t0, solve_s=t2 - t1, extract_s=t3 - t2)
        return solution


# -------------------------------------------------------------------------- FIFO


class Fifo(GavelMethod, Heuristic):
    """First in, first out: in arrival order each job takes a whole gang (X = 1) on the
    fastest type with s_j free GPUs (heterogeneity-aware) or on the first type in the
    cluster's order with free GPUs (agnostic).  Not an LP; ``objective`` is the number of
    jobs running and the status is ``feasible`` (a heuristic proves no optimum).  This is the
    one-shot allocation; the online policies ``gavel.fifo_agnostic`` / ``fifo_agnostic`` are
    :class:`schedlab.policies.fifo.Fifo` (Gavel's FIFO with its persistent job -> type map)."""

    description = "FIFO baseline: arrival order, fastest free accelerator first"
    needs_every_job = False

    def allocate(self, instance: Instance, data: GavelData) -> FloatArray:
        """The FIFO allocation X (each row has at most one 1)."""
        free = data.gpus.copy()
        x = np.zeros(data.throughput.shape)
        order = sorted(range(data.num_jobs), key=lambda j: (instance.jobs[j].arrival, j))
        for j in order:
            candidates = np.flatnonzero(data.allowed[j])
            if self.heterogeneity_aware:
                candidates = candidates[np.argsort(-data.throughput[j, candidates], kind="stable")]
            for k in candidates:
                if free[k] >= data.scale_factor[j]:
                    x[j, k] = 1.0
                    free[k] -= data.scale_factor[j]
                    break
        return x

    def objective_value(self, data: GavelData, x: FloatArray, y: FloatArray) -> float:
        return float((x.sum(axis=1) > 0).sum())

    def run(self, instance: Instance) -> Solution:
        _, true = self.policy_data(instance)
        x = self.allocate(instance, true)
        # a heuristic: it proves nothing about any objective, so "feasible", never "optimal"
        solution = self.new_solution(instance, Status.FEASIBLE)
        return self.finish(solution, instance, true, true, x, np.zeros(true.pair_allowed.shape))
