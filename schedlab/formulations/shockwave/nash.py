"""Shockwave's window problem: Nash social welfare of planned progress over W rounds.

One accelerator type with G GPUs; jobs j = 1..J with E_j epochs (``epochs``), e_j done
(``epochs_done``), gang size s_j (``scale_factor``), budget B_j (``weight``; Shockwave gives
every job 1), d_j seconds per epoch (:func:`~schedlab.formulations.shockwave.predictor.
seconds_per_epoch_estimate`) and Rem_j predicted remaining seconds (:func:`~schedlab.
formulations.shockwave.predictor.remaining_seconds`).  The window has W rounds
(``params.window_rounds``) of L seconds (``params.round_s``).  Variables:

* x[j,t] in [0, 1] (convex mode) or {0, 1} (integral mode): share of round t that j runs as
  a gang of s_j GPUs;
* p_j in [0, E_j - e_j]: epochs planned in the window;
* u_j >= 0, u_j >= Rem_j - d_j p_j: predicted seconds left after the window; z >= u_j;
* v_j: the log of the progress q_j = (e_j + p_j) / E_j.

Rows: sum_j s_j x[j,t] <= G (each round); d_j p_j <= L sum_t x[j,t] (each job).  Objective
(maximize), Shockwave's normalization with budgets as weights:

    sum_j B_j v_j / (W sum_j B_j)  -  k z,          k = 1e-3 per second by default.

* **convex** (``mode="convex"``): v_j = log q_j exactly, by outer approximation: v_j is held
  under tangents of log at a starting grid of q, the LP is solved, and tangents at the LP's
  q_j are added until UB - LB <= 1e-7 max(1, |LB|), with UB the LP's optimum (the cuts
  over-estimate the concave log, so UB bounds the convex problem) and LB the exact objective
  of the LP's x.  One persistent HiGHS model; ``optimal`` only when that gap closed.
* **integral** (``mode="integral"``, Shockwave's default): v_j = the piecewise-linear log
  through the breakpoints b = 0, .2, .4, .6, .8, 1 (log 0 read as log 1e-6), as an SOS2 of
  weights lambda (sum lambda = 1, sum lambda_i b_i = q_j, lambda_i <= y_{i-1} + y_i for
  segment binaries y with sum y = 1).  MIP gap 1e-3 and time limit 15 s unless the options or
  the instance's params set them.

**Finish-time fairness rows** (off unless ``finish_time_targets`` are given): with
phi = min(1, G / J), now = ``params.now_s`` (Shockwave's L r) and FT_j the target of job j,
now + L W + u_j / phi <= rho_max FT_j.  The momentum average that produces FT_j in Shockwave
belongs to the online policy, not to this one-shot formulation.

**Solution.**  ``allocation[j][type]`` = sum_t x[j,t] / W (the plan's average share; the
checker verifies sum_j s_j share <= G); ``rounds`` = W lists of whole gangs (integral mode:
x itself; convex mode: rounded, see :func:`round_gangs`).  The objective is re-derived from
the allocation: p_j = min(E_j - e_j, L W share_j / d_j) (the most the plan allows; the
objective grows with p_j), so the reported objective is that of the plan.  ``metrics``:
``planned_epochs`` (p_j), ``oa_iterations`` / ``oa_gap`` (convex), ``rounded_planned_epochs``
and ``rounded_objective`` (the exact-log objective of the gangs in ``rounds``; None when a job
with no epoch done gets no round, log 0 = -inf).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

from schedlab.errors import InputError
from schedlab.formulations.arrays import add_rows, csr_from_entries, linear_expression
from schedlab.formulations.base import Formulation
from schedlab.formulations.shockwave.predictor import (
    PredictorMode,
    remaining_seconds,
    seconds_per_epoch_estimate,
)
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Placement, Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

FloatArray = npt.NDArray[np.float64]
NashMode = Literal["convex", "integral"]

#: Breakpoints of Shockwave's piecewise-linear log (progress fractions) and log 0's stand-in.
LOG_BREAKPOINTS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
LOG_ORIGIN = 1e-6
#: Tangent points of the convex mode's first cuts (progress fractions).
OA_START_GRID: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
#: Convex mode stops when UB - LB <= OA_TOLERANCE max(1, |LB|) (``oa_tolerance``).  The
#: objective is flat at its optimum, so p_j is only as accurate as about
#: sqrt(tolerance / curvature): ~1e-3 epochs at 1e-7 on small windows.
OA_TOLERANCE = 1e-7
OA_MAX_ITERATIONS = 200
#: HiGHS tolerances of the convex mode's LPs (unless the caller sets them): the LB is the
#: exact objective of the LP's x, so the LP's feasibility slack (1e-7 by default) would
#: otherwise floor UB - LB near 1e-8.
HIGHS_TIGHT = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
#: Smallest progress at which a tangent is taken (log is -inf at 0).
_Q_FLOOR = 1e-9
DEFAULT_MIP_GAP = 1e-3
DEFAULT_TIME_LIMIT_S = 15.0


def pwl_log(q: FloatArray) -> FloatArray:
    """Shockwave's piecewise-linear log of progress fractions q in [0, 1]."""
    b = np.asarray(LOG_BREAKPOINTS)
    values = np.log(np.where(b > 0, b, LOG_ORIGIN))
    return np.asarray(np.interp(np.clip(q, 0.0, 1.0), b, values), dtype=float)


def exact_log(q: FloatArray) -> FloatArray:
    """log q (-inf at 0)."""
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.clip(q, 0.0, None)), dtype=float)


@dataclass(frozen=True)
class WindowData:
    """The numbers of one window problem, one entry per job in instance order."""

    ids: list[str]
    accelerator: str
    gpus: int                 # G
    rounds: int               # W
    round_s: float            # L, s
    epochs: FloatArray        # E_j
    done: FloatArray          # e_j
    scale: FloatArray         # s_j
    budget: FloatArray        # B_j
    sec_per_epoch: FloatArray  # d_j, s
    remaining_s: FloatArray   # Rem_j, s
    k: float                  # per second
    ftf_cap: FloatArray | None  # upper bound on u_j from the finish-time rows (None: off)

    @property
    def weights(self) -> FloatArray:
        """c_j = B_j / (W sum B): the objective's coefficient of v_j."""
        return self.budget / (self.rounds * float(self.budget.sum()))

    def planned_epochs(self, rounds_run: FloatArray) -> FloatArray:
        """p_j = min(E_j - e_j, L n_j / d_j) for n_j rounds of running (the most allowed)."""
        return np.clip(self.round_s * rounds_run / self.sec_per_epoch, 0.0,
                       self.epochs - self.done)

    def objective(self, rounds_run: FloatArray, mode: NashMode) -> float:
        """The window objective when job j runs n_j = sum_t x[j,t] rounds."""
        p = self.planned_epochs(rounds_run)
        q = (self.done + p) / self.epochs
        logs = exact_log(q) if mode == "convex" else pwl_log(q)
        left = np.maximum(0.0, self.remaining_s - self.sec_per_epoch * p)
        return float(self.weights @ logs - self.k * (left.max() if len(left) else 0.0))


def round_gangs(x: FloatArray, scale: FloatArray, gpus: int) -> FloatArray:
    """Whole gangs y[j,t] in {0, 1} from shares x[j,t], never above G GPUs in a round.

    Rule: rounds in order; job j's score in round t is x[j,t] plus its carry (sum of x - y
    over the earlier rounds); jobs with score >= 1/2 are placed by descending score (ties: job
    order) while their gang fits in the GPUs left.  The carry keeps each job's rounds close to
    sum_t x[j,t]."""
    n, w = x.shape
    y = np.zeros_like(x)
    carry = np.zeros(n)
    for t in range(w):
        score = x[:, t] + carry
        free = float(gpus)
        for j in np.argsort(-score, kind="stable"):
            if score[j] >= 0.5 and scale[j] <= free + 1e-9:
                y[j, t] = 1.0
                free -= scale[j]
        carry += x[:, t] - y[:, t]
    return y


class NashWelfare(Formulation):
    """Shockwave's window problem (module docstring); ``mode`` convex or integral."""

    name = "shockwave.nash_welfare"
    description: ClassVar[str] = "Shockwave: Nash social welfare of progress over a window"
    objective_sense = "maximize"
    default_lp_method: ClassVar[str] = "simplex"

    def __init__(self, mode: NashMode = "integral", *, k: float = 1e-3,
                 predictor: PredictorMode = "shockwave",
                 finish_time_targets: Mapping[str, float] | None = None,
                 rho_max: float = 1.0, oa_tolerance: float = OA_TOLERANCE) -> None:
        if mode not in ("convex", "integral"):
            raise InputError(f"unknown mode {mode!r} (convex or integral)", field="mode")
        self.mode: NashMode = mode
        self.k = k
        self.predictor: PredictorMode = predictor
        self.finish_time_targets = dict(finish_time_targets or {})
        self.rho_max = rho_max
        self.oa_tolerance = oa_tolerance

    # ------------------------------------------------------------------ data
    def validate(self, instance: Instance) -> None:
        """One accelerator type, a window length, and epochs and a profile for every job."""
        if len(instance.cluster.accelerators) != 1:
            raise InputError("the Shockwave window problem needs exactly one accelerator type",
                             field="cluster.accelerators")
        for i, job in enumerate(instance.jobs):
            if job.epochs is None or job.batch_schedule is None or job.regimes is None:
                raise InputError(f"job {job.id}: epochs, batch_schedule and regimes are "
                                 "required", field=f"jobs[{i}]")
        if instance.params.window_rounds is None:
            raise InputError("params.window_rounds (W) is required", field="params")

    def window_data(self, instance: Instance) -> WindowData:
        """E, e, s, B, d, Rem and the finish-time caps of every job."""
        self.validate(instance)
        (acc, pool), = instance.cluster.accelerators.items()
        jobs = instance.jobs
        p = instance.params
        w = int(p.window_rounds or 1)
        epochs = np.array([float(j.epochs or 1) for j in jobs])
        done = np.array([float(min(j.epochs_done, j.epochs or 0)) for j in jobs])
        cap = None
        if self.finish_time_targets:
            phi = min(1.0, pool.count / max(1, len(jobs)))
            target = np.array([self.finish_time_targets.get(j.id, math.inf) for j in jobs])
            cap = phi * (self.rho_max * target - p.now_s - p.round_s * w)
        return WindowData(
            ids=[j.id for j in jobs], accelerator=acc, gpus=pool.count, rounds=w,
            round_s=p.round_s, epochs=epochs, done=done,
            scale=np.array([float(j.scale_factor) for j in jobs]),
            budget=np.array([j.weight for j in jobs]),
            sec_per_epoch=np.array([seconds_per_epoch_estimate(j) for j in jobs]),
            remaining_s=np.array([remaining_seconds(j, mode=self.predictor) for j in jobs]),
            k=self.k, ftf_cap=cap)

    # ------------------------------------------------------------------ model
    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The window model; convex mode holds v_j under the starting grid's tangents."""
        data = self.window_data(instance)
        n, w = len(data.ids), data.rounds
        m = pyo.ConcreteModel(name=f"{self.name}:{instance.name}")
        m.window = data
        domain = pyo.Binary if self.mode == "integral" else pyo.Reals
        m.x = pyo.Var(range(n), range(w), domain=domain, bounds=(0, 1))
        m.p = pyo.Var(range(n), bounds=lambda _, j: (0.0, data.epochs[j] - data.done[j]))
        m.u = pyo.Var(range(n), bounds=(0, None))
        m.z = pyo.Var(bounds=(0, None))
        m.v = pyo.Var(range(n), bounds=(None, 0.0))
        cols = ([m.x[j, t] for j in range(n) for t in range(w)] + [m.p[j] for j in range(n)]
                + [m.u[j] for j in range(n)] + [m.z] + [m.v[j] for j in range(n)])
        xi = np.arange(n * w).reshape(n, w)
        pi, ui, zi = n * w + np.arange(n), n * w + n + np.arange(n), n * w + 2 * n
        m.columns = cols
        m.column_index = {"p": pi, "u": ui, "z": zi, "v": zi + 1 + np.arange(n)}
        size = len(cols)
        # capacity: sum_j s_j x[j,t] <= G
        cap = csr_from_entries(np.tile(np.arange(w), n), xi.reshape(-1),
                               np.repeat(data.scale, w), (w, size))
        add_rows(m, "capacity", cap, cols, None, float(data.gpus))
        # work: d_j p_j - L sum_t x[j,t] <= 0
        rows = np.concatenate([np.arange(n), np.repeat(np.arange(n), w)])
        vals = np.concatenate([data.sec_per_epoch, np.full(n * w, -data.round_s)])
        work = csr_from_entries(rows, np.concatenate([pi, xi.reshape(-1)]), vals, (n, size))
        add_rows(m, "work", work, cols, None, 0.0)
        # left: u_j + d_j p_j >= Rem_j ; max: z - u_j >= 0
        left = csr_from_entries(np.r_[np.arange(n), np.arange(n)], np.r_[ui, pi],
                                np.r_[np.ones(n), data.sec_per_epoch], (n, size))
        add_rows(m, "left", left, cols, data.remaining_s, None)
        most = csr_from_entries(np.r_[np.arange(n), np.arange(n)], np.r_[np.full(n, zi), ui],
                                np.r_[np.ones(n), -np.ones(n)], (n, size))
        add_rows(m, "max_left", most, cols, 0.0, None)
        if data.ftf_cap is not None:
            fin = np.isfinite(data.ftf_cap)
            ftf = csr_from_entries(np.arange(int(fin.sum())), ui[fin], np.ones(int(fin.sum())),
                                   (int(fin.sum()), size))
            add_rows(m, "finish_time", ftf, cols, None, data.ftf_cap[fin])
        m.objective = pyo.Objective(
            expr=linear_expression(np.r_[data.weights, -data.k],
                                   [m.v[j] for j in range(n)] + [m.z]),
            sense=pyo.maximize)
        if self.mode == "convex":
            self._add_tangents(m, "log_cut_0", np.array(OA_START_GRID)[None, :].repeat(n, 0))
        else:
            self._add_pwl_log(m)
        return m

    def _add_tangents(self, m: pyo.ConcreteModel, name: str, points: FloatArray) -> None:
        """v_j <= log q0 + (q - q0)/q0 at each q0 = points[j, i], q = (e_j + p_j)/E_j:
        v_j - p_j / (E_j q0) <= log q0 - 1 + e_j / (E_j q0)."""
        data: WindowData = m.window
        n, per = points.shape
        q0 = np.maximum(points, _Q_FLOOR)
        rows = np.arange(n * per)
        jobs = np.repeat(np.arange(n), per)
        idx = m.column_index
        mat = csr_from_entries(np.r_[rows, rows], np.r_[idx["v"][jobs], idx["p"][jobs]],
                               np.r_[np.ones(n * per),
                                     -1.0 / (data.epochs[jobs] * q0.reshape(-1))],
                               (n * per, len(m.columns)))
        upper = np.log(q0.reshape(-1)) - 1.0 + data.done[jobs] / (data.epochs[jobs]
                                                                  * q0.reshape(-1))
        add_rows(m, name, mat, m.columns, None, upper)

    def _add_pwl_log(self, m: pyo.ConcreteModel) -> None:
        """SOS2 rows: v_j = sum_i lambda_i log b_i, sum_i lambda_i b_i = q_j, sum lambda = 1,
        lambda_i <= y_{i-1} + y_i, sum_s y_s = 1 (y binary, one per segment)."""
        data: WindowData = m.window
        n = len(data.ids)
        b = np.asarray(LOG_BREAKPOINTS)
        logb = np.log(np.where(b > 0, b, LOG_ORIGIN))
        nb, ns = len(b), len(b) - 1
        m.lam = pyo.Var(range(n), range(nb), bounds=(0, 1))
        m.seg = pyo.Var(range(n), range(ns), domain=pyo.Binary)
        cols = (list(m.columns) + [m.lam[j, i] for j in range(n) for i in range(nb)]
                + [m.seg[j, s] for j in range(n) for s in range(ns)])
        base = len(m.columns)
        li = base + np.arange(n * nb).reshape(n, nb)
        si = base + n * nb + np.arange(n * ns).reshape(n, ns)
        idx = m.column_index
        r: list[npt.NDArray[np.int64]] = []
        c: list[npt.NDArray[np.int64]] = []
        v: list[FloatArray] = []
        lo: list[FloatArray] = []
        hi: list[FloatArray] = []
        row = 0

        def block(cols_: npt.ArrayLike, vals_: npt.ArrayLike, low: float, up: float) -> None:
            nonlocal row
            cc = np.asarray(cols_, dtype=np.int64)
            r.append(np.full(len(cc), row, dtype=np.int64))
            c.append(cc)
            v.append(np.asarray(vals_, dtype=float))
            lo.append(np.array([low]))
            hi.append(np.array([up]))
            row += 1

        for j in range(n):
            ej, dj = data.epochs[j], data.done[j]
            block(li[j], np.ones(nb), 1.0, 1.0)
            block(np.r_[li[j], idx["p"][j]], np.r_[b, -1.0 / ej], dj / ej, dj / ej)
            block(np.r_[idx["v"][j], li[j]], np.r_[1.0, -logb], 0.0, 0.0)
            block(si[j], np.ones(ns), 1.0, 1.0)
            for i in range(nb):
                segs = [s for s in (i - 1, i) if 0 <= s < ns]
                block(np.r_[li[j, i], si[j, segs]], np.r_[1.0, -np.ones(len(segs))],
                      -math.inf, 0.0)
        mat = csr_from_entries(np.concatenate(r), np.concatenate(c), np.concatenate(v),
                               (row, len(cols)))
        add_rows(m, "pwl_log", mat, cols, np.concatenate(lo), np.concatenate(hi))

    # ------------------------------------------------------------------ solve
    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Integral: one MIP.  Convex: outer approximation on one persistent LP."""
        opts = (options or SolverOptions()).with_method(self.default_lp_method)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        model = self.extend_model(self.build(instance), instance)
        t1 = time.perf_counter()
        if self.mode == "convex" and opts.solver == "highs":
            opts = replace(opts, extra={**HIGHS_TIGHT, **opts.extra})
        solver = PersistentSolver(opts)
        if self.mode == "integral":
            params = instance.params
            gap = opts.mip_gap if opts.mip_gap is not None else params.mip_gap
            mip = replace(opts, mip_gap=DEFAULT_MIP_GAP if gap is None else gap,
                          time_limit_s=(opts.time_limit_s or params.time_limit_s
                                        or DEFAULT_TIME_LIMIT_S))
            result = solver.solve(model, mip)
            solution = self._extract_integral(model, instance, result)
        else:
            solution = self._solve_convex(model, instance, solver)
        t2 = time.perf_counter()
        solution.solver = opts.solver
        solution.timings = Timings(build_s=t1 - t0, solve_s=t2 - t1)
        return solution

    def _solve_convex(self, model: pyo.ConcreteModel, instance: Instance,
                      solver: PersistentSolver) -> Solution:
        data: WindowData = model.window
        n = len(data.ids)
        lower, upper, iterations = -math.inf, math.inf, 0
        result: SolveResult | None = None
        best_x: FloatArray | None = None
        while iterations < OA_MAX_ITERATIONS:
            iterations += 1
            result = solver.solve(model)
            if result.status != Status.OPTIMAL or result.objective is None:
                break
            upper = min(upper, result.objective)
            x = self._x_values(model, data)
            value = data.objective(x.sum(axis=1), "convex")
            if value > lower:
                lower, best_x = value, x
            if upper - lower <= self.oa_tolerance * max(1.0, abs(lower)):
                break
            p = np.array([pyo.value(model.p[j]) for j in range(n)])
            self._add_tangents(model, f"log_cut_{iterations}",
                               ((data.done + p) / data.epochs)[:, None])
        if best_x is None or result is None:
            message = result.message if result is not None else "no solve"
            status = result.status if result is not None else Status.ERROR
            sol = self._blank(instance, status)
            sol.diagnostics.append(f"outer approximation: LP ended {message}")
            return sol
        closed = upper - lower <= self.oa_tolerance * max(1.0, abs(lower))
        sol = self._blank(instance, Status.OPTIMAL if closed else Status.FEASIBLE)
        self._fill(sol, data, best_x, round_gangs(best_x, data.scale, data.gpus))
        sol.objective, sol.bound = lower, upper
        sol.gap = abs(upper - lower) / max(abs(lower), 1e-10)
        sol.metrics.update(oa_iterations=iterations, oa_gap=upper - lower,
                           gap_tolerance=self.oa_tolerance * max(1.0, abs(lower))
                           / max(abs(lower), 1e-10))
        if not closed:
            sol.diagnostics.append(f"outer approximation stopped after {iterations} LPs with "
                                   f"UB - LB = {upper - lower:.3g} (last LP: {result.message})")
        return sol

    def _extract_integral(self, model: pyo.ConcreteModel, instance: Instance,
                          result: SolveResult) -> Solution:
        data: WindowData = model.window
        sol = self._blank(instance, result.status)
        if not result.status.has_solution:
            sol.diagnostics.append(f"solver: {result.message}")
            return sol
        x = np.round(self._x_values(model, data))
        self._fill(sol, data, x, x)
        # the plan's objective (p as large as x allows) is >= the solver's incumbent value
        sol.objective = data.objective(x.sum(axis=1), "integral")
        sol.bound = result.bound
        if sol.bound is not None:
            sol.gap = abs(sol.bound - sol.objective) / max(abs(sol.objective), 1e-10)
        if result.gap_tolerance is not None:
            sol.metrics["gap_tolerance"] = result.gap_tolerance
        return sol

    # ------------------------------------------------------------------ solution
    @staticmethod
    def _x_values(model: pyo.ConcreteModel, data: WindowData) -> FloatArray:
        n, w = len(data.ids), data.rounds
        x = np.array([[pyo.value(model.x[j, t]) or 0.0 for t in range(w)] for j in range(n)])
        return np.clip(x, 0.0, 1.0)

    def _blank(self, instance: Instance, status: Status) -> Solution:
        return Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                        formulation=self.name, status=status)

    def _fill(self, sol: Solution, data: WindowData, x: FloatArray, gangs: FloatArray) -> None:
        """Allocation (average shares), whole-gang rounds and the metrics."""
        w = data.rounds
        sol.allocation = {jid: {data.accelerator: float(x[j].sum() / w)}
                          for j, jid in enumerate(data.ids)}
        sol.rounds = [[Placement(job=jid, accelerator=data.accelerator,
                                 gpus=int(data.scale[j]))
                       for j, jid in enumerate(data.ids) if gangs[j, t] > 0.5]
                      for t in range(w)]
        p = data.planned_epochs(x.sum(axis=1))
        rounded_p = data.planned_epochs(gangs.sum(axis=1))
        rounded = data.objective(gangs.sum(axis=1), "convex")
        sol.metrics.update(
            mode=self.mode,
            planned_epochs=dict(zip(data.ids, p.tolist(), strict=True)),
            rounded_planned_epochs=dict(zip(data.ids, rounded_p.tolist(), strict=True)),
            # None when a job that has not started gets no round (log 0 = -inf)
            rounded_objective=rounded if math.isfinite(rounded) else None,
            seconds_per_epoch=dict(zip(data.ids, data.sec_per_epoch.tolist(), strict=True)),
            remaining_s=dict(zip(data.ids, data.remaining_s.tolist(), strict=True)))

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        """The integral read-out (the convex mode's loop lives in :meth:`solve`)."""
        return self._extract_integral(model, instance, result)

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The objective of the allocation: n_j = W share_j rounds, p_j the most they allow."""
        data = self.window_data(instance)
        shares = np.array([sum(solution.allocation.get(jid, {}).values()) for jid in data.ids])
        return data.objective(shares * data.rounds, self.mode)

    def example_instance(self) -> Instance:
        """Four seeded Shockwave jobs on 2 V100s, a 4-round window of 120 s."""
        from schedlab.workloads.shockwave import TINY_SEED, generate_shockwave_instance
        return generate_shockwave_instance(4, {"v100": 2}, seed=TINY_SEED, window_rounds=4,
                                           name="shockwave-nash-example")


__all__ = [
    "LOG_BREAKPOINTS",
    "LOG_ORIGIN",
    "NashWelfare",
    "WindowData",
    "exact_log",
    "pwl_log",
    "round_gangs",
]
