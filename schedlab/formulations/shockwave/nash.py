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

* **convex** (``mode="convex"``): v_j = log q_j exactly.  ``convex_method="exact"`` (default):
  water-filling with a Lagrangian certificate (:mod:`~schedlab.formulations.shockwave.
  waterfill`); ``optimal`` only when the planned epochs are proven within
  ``epoch_tolerance`` (1e-4, relative) of the exact optimum.  ``"outer_approximation"``
  (and any model with user constraints): v_j is held under tangents of log at a starting
  grid of q, the LP is solved, and tangents at the LP's q_j are added until UB - LB <= 1e-7
  max(1, |LB|), with UB the LP's optimum (the cuts over-estimate the concave log, so UB
  bounds the convex problem) and LB the exact objective of the LP's x; ``optimal`` only when
  that gap also proves the planned epochs within ``epoch_tolerance`` (the same
  strong-concavity bound).  The LP is one persistent matrix
  model (:func:`~schedlab.solvers.matrix_model`, HiGHS by default, presolve off) built from
  the arrays of :func:`window_lp` with the rounds as one (a share a_j per job, x[j,t] = a_j:
  the same convex program, since only sum_t x[j,t] enters the objective and the W capacity
  rows sum to one), cuts added as rows and re-solved from the previous basis.  When the user
  added constraints (:meth:`~schedlab.formulations.base.Formulation.extend`), which may name
  x[j,t], the loop runs on the per-round Pyomo model of :meth:`NashWelfare.build` instead
  (its rows made from the same arrays, plus the user's).
* **integral** (``mode="integral"``, Shockwave's default): v_j = the piecewise-linear log
  through the breakpoints b = 0, .2, .4, .6, .8, 1 (log 0 read as log 1e-6).  :meth:`build`
  writes it as an SOS2 of weights lambda (sum lambda = 1, sum lambda_i b_i = q_j,
  lambda_i <= y_{i-1} + y_i for segment binaries y with sum y = 1); :meth:`solve` uses that
  Pyomo model only with user constraints.  Otherwise the log is its concave epigraph (the
  same optimum); the relaxation over round counts n_j (one capacity row) is solved and its
  counts packed into rounds, and only when they do not pack is the full MILP solved, as one
  matrix model started from the LP relaxation's rounded plan
  (:mod:`~schedlab.formulations.shockwave.integral`).  MIP gap 1e-3 and time limit 15 s
  (Shockwave's ``solver_rel_gap`` and ``solver_timeout``) unless the options or the
  instance's params set them.

**Finish-time fairness rows** (off unless ``finish_time_targets`` are given): with
phi = min(1, G / J), now = ``params.now_s`` (Shockwave's L r) and FT_j the target of job j,
now + L W + u_j / phi <= rho_max FT_j.  The momentum average that produces FT_j in Shockwave
belongs to the online policy, not to this one-shot formulation.

**Priorities** (``priorities``, default all 1): pi_j multiplies job j's log term, c_j =
pi_j B_j / (W sum B) -- Shockwave's relaxed re-solve after infeasible finish-time rows, where
pi_j = rho_j^lambda (:mod:`schedlab.policies.shockwave`).  The objective goes to the solver as
it stands, as Shockwave's code hands it to Gurobi: nothing is divided out (dividing by the
largest priority pushed every other job's weight below the solver's tolerances and starved
those jobs).  HiGHS reads a cost of 1e20 or more as infinite; every Shockwave model lifts
that limit (``infinite_cost``).  A solve the solver cannot carry out on such weights ends
without a plan and says so; the convex mode's exact method needs no LP.

**Calibration** (``duration_scale``, {job: factor}): Shockwave's profile calibration scales
every profiled epoch time of a job (:mod:`~schedlab.formulations.shockwave.calibration`), so
d_j and Rem_j are multiplied by the job's factor.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar, Literal

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo
import scipy.sparse as sp

from schedlab.errors import InputError
from schedlab.formulations.arrays import add_rows, csr_from_entries, linear_expression
from schedlab.formulations.base import Formulation
from schedlab.formulations.shockwave import integral
from schedlab.formulations.shockwave.predictor import (
    PredictorMode,
    remaining_seconds,
    seconds_per_epoch_estimate,
)
from schedlab.formulations.shockwave.waterfill import EPOCH_TOLERANCE, solve_exact
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Placement, Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions, matrix_model
from schedlab.solvers.matrix import MatrixModel

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
NashMode = Literal["convex", "integral"]
ConvexMethod = Literal["exact", "outer_approximation"]
IntegralMethod = Literal["round_counts", "full"]

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
#: HiGHS tolerances of the integral mode's round-count relaxation (unless the caller sets
#: them): under priorities the smallest objective weights fall near the default 1e-7 dual
#: tolerance, and on a captured window (priorities up to 6e3) the default tolerances gave
#: a "proven" optimum 1% below a plan the full MILP had found; these did not.
ROUND_COUNT_HIGHS = {**HIGHS_TIGHT, "mip_feasibility_tolerance": 1e-9}
#: HiGHS reads a cost coefficient of 1e20 or more as infinite (its ``infinite_cost``);
#: Shockwave's priorities reach rho^100, and its code hands them to the solver as they stand,
#: so every Shockwave model lifts that limit (a solver setting, not a change of the objective).
HIGHS_FINITE_COSTS = {"infinite_cost": math.inf}
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
    priority: FloatArray | None = None  # pi_j multiplying the log term (None: all 1)

    @property
    def weights(self) -> FloatArray:
        """c_j = pi_j B_j / (W sum B): the objective's coefficient of v_j."""
        base = self.budget / (self.rounds * float(self.budget.sum()))
        return base if self.priority is None else base * self.priority

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


@dataclass(frozen=True)
class RowBlock:
    """Rows lower <= matrix @ columns <= upper of the window LP (``None``: no bound)."""

    name: str
    matrix: sp.csr_matrix
    lower: FloatArray | float | None
    upper: FloatArray | float | None


@dataclass(frozen=True)
class WindowLP:
    """The window LP as arrays: columns x[j,t] (job-major), p_j, u_j, z, v_j, in that order,
    with their bounds and objective coefficients (maximize), and the row blocks of the module
    docstring (capacity, work, left, max_left, finish_time when set).  The Pyomo model and
    the convex mode's matrix model are both built from these arrays."""

    x: IntArray               # (J, W) column of x[j,t]
    p: IntArray
    u: IntArray
    z: int
    v: IntArray
    lower: FloatArray
    upper: FloatArray
    cost: FloatArray
    blocks: list[RowBlock]

    @property
    def size(self) -> int:
        """Columns."""
        return len(self.lower)


def window_lp(data: WindowData, *, per_round: bool = True) -> WindowLP:
    """The columns and rows of the window problem (module docstring) for ``data``.

    ``per_round=False``: the rounds as one, for the convex mode.  x then has one column per
    job, its average share a_j = sum_t x[j,t] / W in [0, 1], with sum_j s_j a_j <= G and
    d_j p_j <= L W a_j.  That is the same convex program: summing the rows of the W rounds
    gives these, and x[j,t] = a_j meets the rows of every round; the objective reads x only
    through sum_t x[j,t]."""
    n = len(data.ids)
    w = data.rounds if per_round else 1
    round_s = data.round_s if per_round else data.round_s * data.rounds
    xi = np.arange(n * w).reshape(n, w)
    pi, ui, zi = n * w + np.arange(n), n * w + n + np.arange(n), n * w + 2 * n
    vi = zi + 1 + np.arange(n)
    size = n * w + 3 * n + 1
    lower = np.r_[np.zeros(n * w), np.zeros(n), np.zeros(n), 0.0, np.full(n, -math.inf)]
    upper = np.r_[np.ones(n * w), data.epochs - data.done, np.full(n, math.inf), math.inf,
                  np.zeros(n)]
    cost = np.zeros(size)  # the window objective as it stands: no rescaling (Shockwave's code)
    cost[vi], cost[zi] = data.weights, -data.k
    jobs = np.arange(n)
    blocks = [
        # capacity: sum_j s_j x[j,t] <= G
        RowBlock("capacity", csr_from_entries(np.tile(np.arange(w), n), xi.reshape(-1),
                                              np.repeat(data.scale, w), (w, size)),
                 None, float(data.gpus)),
        # work: d_j p_j - L sum_t x[j,t] <= 0
        RowBlock("work", csr_from_entries(
            np.r_[jobs, np.repeat(jobs, w)], np.r_[pi, xi.reshape(-1)],
            np.r_[data.sec_per_epoch, np.full(n * w, -round_s)], (n, size)), None, 0.0),
        # left: u_j + d_j p_j >= Rem_j
        RowBlock("left", csr_from_entries(np.r_[jobs, jobs], np.r_[ui, pi],
                                          np.r_[np.ones(n), data.sec_per_epoch], (n, size)),
                 data.remaining_s, None),
        # max: z - u_j >= 0
        RowBlock("max_left", csr_from_entries(np.r_[jobs, jobs], np.r_[np.full(n, zi), ui],
                                              np.r_[np.ones(n), -np.ones(n)], (n, size)),
                 0.0, None),
    ]
    if data.ftf_cap is not None:
        fin = np.isfinite(data.ftf_cap)
        count = int(fin.sum())
        blocks.append(RowBlock("finish_time", csr_from_entries(
            np.arange(count), ui[fin], np.ones(count), (count, size)), None, data.ftf_cap[fin]))
    return WindowLP(x=xi, p=pi, u=ui, z=zi, v=vi, lower=lower, upper=upper, cost=cost,
                    blocks=blocks)


def tangent_rows(data: WindowData, lp: WindowLP, name: str, points: FloatArray) -> RowBlock:
    """v_j <= log q0 + (q - q0)/q0 at each q0 = points[j, i], q = (e_j + p_j)/E_j:
    v_j - p_j / (E_j q0) <= log q0 - 1 + e_j / (E_j q0)."""
    n, per = points.shape
    q0 = np.maximum(points, _Q_FLOOR).reshape(-1)
    rows = np.arange(n * per)
    jobs = np.repeat(np.arange(n), per)
    matrix = csr_from_entries(np.r_[rows, rows], np.r_[lp.v[jobs], lp.p[jobs]],
                              np.r_[np.ones(n * per), -1.0 / (data.epochs[jobs] * q0)],
                              (n * per, lp.size))
    upper = np.log(q0) - 1.0 + data.done[jobs] / (data.epochs[jobs] * q0)
    return RowBlock(name, matrix, None, upper)


def _start_points(n: int) -> FloatArray:
    """The convex mode's first tangent points, the same grid for each of n jobs."""
    return np.array(OA_START_GRID)[None, :].repeat(n, 0)


def round_gangs(x: FloatArray, scale: FloatArray, gpus: int,
                finishing: npt.NDArray[np.bool_] | None = None) -> FloatArray:
    """Whole gangs y[j,t] in {0, 1} from shares x[j,t], never above G GPUs in a round.

    The window problem depends on x only through n_j = sum_t x[j,t] (and the capacity of each
    round), so the rule reads n_j alone.  A job the plan finishes (``finishing[j]``: p_j =
    E_j - e_j) is owed ceil(n_j) whole rounds -- otherwise a job with less than half a round
    left would never get one -- and any other job n_j rounds.  Rounds in order; in round t,
    job j still owes o_j = target_j - sum_{t' < t} y[j,t']; jobs owing at least 1/2 a round are
    placed by descending urgency o_j / (W - t) (ties: job order) while their gang fits in the
    GPUs left.  Each job's whole rounds stay close to its target, and the jobs that need the
    largest share of what is left of the window run first (the LP's x, which is not unique,
    would otherwise decide which jobs hold the first round -- the only one an online policy
    runs before it may re-plan)."""
    n, w = x.shape
    need = x.sum(axis=1)
    if finishing is not None:
        need = np.where(finishing & (need > 1e-9), np.ceil(need - 1e-9), need)
    y = np.zeros_like(x)
    given = np.zeros(n)
    for t in range(w):
        owed = need - given
        free = float(gpus)
        for j in np.argsort(-owed / (w - t), kind="stable"):
            if owed[j] >= 0.5 and scale[j] <= free + 1e-9:
                y[j, t] = 1.0
                free -= scale[j]
        given += y[:, t]
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
                 rho_max: float = 1.0, oa_tolerance: float = OA_TOLERANCE,
                 priorities: Mapping[str, float] | None = None,
                 convex_method: ConvexMethod = "exact",
                 epoch_tolerance: float = EPOCH_TOLERANCE,
                 integral_method: IntegralMethod = "round_counts",
                 duration_scale: Mapping[str, float] | None = None) -> None:
        if mode not in ("convex", "integral"):
            raise InputError(f"unknown mode {mode!r} (convex or integral)", field="mode")
        self.mode: NashMode = mode
        self.k = k
        self.predictor: PredictorMode = predictor
        self.finish_time_targets = dict(finish_time_targets or {})
        self.rho_max = rho_max
        self.oa_tolerance = oa_tolerance
        if convex_method not in ("exact", "outer_approximation"):
            raise InputError(f"unknown convex method {convex_method!r} (exact or "
                             "outer_approximation)", field="convex_method")
        self.convex_method: ConvexMethod = convex_method
        if integral_method not in ("round_counts", "full"):
            raise InputError(f"unknown integral method {integral_method!r} (round_counts or "
                             "full)", field="integral_method")
        self.integral_method: IntegralMethod = integral_method
        self.duration_scale = dict(duration_scale or {})
        bad_scale = {j: v for j, v in self.duration_scale.items()
                     if not (math.isfinite(v) and v > 0)}
        if bad_scale:
            raise InputError(f"duration scales must be finite and > 0, got {bad_scale}",
                             field="duration_scale")
        if not (math.isfinite(epoch_tolerance) and epoch_tolerance > 0):
            raise InputError(f"must be > 0, got {epoch_tolerance!r}", field="epoch_tolerance")
        self.epoch_tolerance = epoch_tolerance
        self.priorities = dict(priorities or {})
        bad = {j: v for j, v in self.priorities.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise InputError(f"priorities must be finite and > 0, got {bad}",
                             field="priorities")

    # ------------------------------------------------------------------ data
    def validate(self, instance: Instance) -> None:
        """One accelerator type, a window length, and epochs, a profile and a positive
        throughput on that type for every job (a job that cannot run there is an input
        error, as one whose gang is larger than the pool: Nash welfare has no plan for it)."""
        if len(instance.cluster.accelerators) != 1:
            raise InputError("the Shockwave window problem needs exactly one accelerator type",
                             field="cluster.accelerators")
        for i, job in enumerate(instance.jobs):
            # the Instance checks that present fields agree (epochs_done <= epochs, one batch
            # size per epoch, every one of them in a non-empty regimes)
            for name in ("epochs", "batch_schedule", "regimes"):
                if getattr(job, name) is None:
                    raise InputError(f"job {job.id!r} has no {name}: the Shockwave window "
                                     "problem needs epochs, batch_schedule and regimes",
                                     field=f"jobs[{i}].{name}")
        if instance.params.window_rounds is None:
            raise InputError("is required (the window W, in rounds)",
                             field="params.window_rounds")
        (acc, pool), = instance.cluster.accelerators.items()
        for i, job in enumerate(instance.jobs):
            if not job.throughput.get(acc, 0.0) > 0.0:
                # the window reads speeds from regimes, but a type a job lists no positive
                # throughput for is one it cannot run on (the instance format; the checker)
                listed = "0" if acc in job.throughput else "none"
                raise InputError(f"job {job.id!r} has no positive throughput on {acc} (got "
                                 f"{listed}), the cluster's only type, so it can never run; "
                                 "give its steps/s there or leave the job out",
                                 field=f"jobs[{i}].throughput.{acc}")
            if job.scale_factor > pool.count:
                raise InputError(f"job {job.id!r} runs as a gang of {job.scale_factor} GPUs; "
                                 f"the cluster has {pool.count} {acc} GPU(s), so it can never "
                                 "run", field=f"jobs[{i}].scale_factor")

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
        # the profile calibration (Shockwave's calibrate_profiled_epoch_duration) scales
        # every profiled epoch of a job, so d_j and Rem_j (both linear in them) scale alike
        calibration = np.array([self.duration_scale.get(j.id, 1.0) for j in jobs])
        return WindowData(
            ids=[j.id for j in jobs], accelerator=acc, gpus=pool.count, rounds=w,
            round_s=p.round_s, epochs=epochs, done=done,
            scale=np.array([float(j.scale_factor) for j in jobs]),
            budget=np.array([j.weight for j in jobs]),
            sec_per_epoch=calibration * np.array([seconds_per_epoch_estimate(j)
                                                  for j in jobs]),
            remaining_s=calibration * np.array([remaining_seconds(j, mode=self.predictor)
                                                for j in jobs]),
            k=self.k, ftf_cap=cap,
            priority=(np.array([self.priorities.get(j.id, 1.0) for j in jobs])
                      if self.priorities else None))

    # ------------------------------------------------------------------ model
    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The window model; convex mode holds v_j under the starting grid's tangents."""
        data = self.window_data(instance)
        lp = window_lp(data)
        n, w = len(data.ids), data.rounds
        m = pyo.ConcreteModel(name=f"{self.name}:{instance.name}")
        m.window = data
        m.window_lp = lp
        domain = pyo.Binary if self.mode == "integral" else pyo.Reals
        m.x = pyo.Var(range(n), range(w), domain=domain, bounds=(0, 1))
        m.p = pyo.Var(range(n), bounds=lambda _, j: (0.0, data.epochs[j] - data.done[j]))
        m.u = pyo.Var(range(n), bounds=(0, None))
        m.z = pyo.Var(bounds=(0, None))
        m.v = pyo.Var(range(n), bounds=(None, 0.0))
        m.columns = ([m.x[j, t] for j in range(n) for t in range(w)]
                     + [m.p[j] for j in range(n)] + [m.u[j] for j in range(n)] + [m.z]
                     + [m.v[j] for j in range(n)])
        m.column_index = {"p": lp.p, "u": lp.u, "z": lp.z, "v": lp.v}
        for block in lp.blocks:
            add_rows(m, block.name, block.matrix, m.columns, block.lower, block.upper)
        m.objective = pyo.Objective(
            expr=linear_expression(lp.cost[np.r_[lp.v, lp.z]],
                                   [m.v[j] for j in range(n)] + [m.z]),
            sense=pyo.maximize)
        if self.mode == "convex":
            self._add_tangents(m, "log_cut_0", _start_points(n))
        else:
            self._add_pwl_log(m)
        return m

    def _add_tangents(self, m: pyo.ConcreteModel, name: str, points: FloatArray) -> None:
        """The rows of :func:`tangent_rows` on the Pyomo model."""
        block = tangent_rows(m.window, m.window_lp, name, points)
        add_rows(m, block.name, block.matrix, m.columns, block.lower, block.upper)

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
        """Integral: one MIP.  Convex: outer approximation on one persistent LP, a matrix
        model built from :func:`window_lp`'s arrays (the Pyomo model of :meth:`build` when
        the user added constraints with :meth:`extend`: they live on that model)."""
        opts = (options or SolverOptions()).with_method(self.default_lp_method)  # type: ignore[arg-type]
        if opts.solver == "highs":
            tight = HIGHS_TIGHT if self.mode == "convex" else {}
            opts = replace(opts, extra={**HIGHS_FINITE_COSTS, **tight, **opts.extra})
        t0 = time.perf_counter()
        if self.mode == "convex" and not self.extensions and self.convex_method == "exact":
            data = self.window_data(instance)
            t1 = time.perf_counter()
            solution = self._solve_convex_exact(data, instance)
        elif self.mode == "convex" and not self.extensions:
            data = self.window_data(instance)
            lp = window_lp(data, per_round=False)
            t1 = time.perf_counter()
            solution = self._solve_convex_matrix(data, lp, instance, opts)
        elif self.mode == "integral" and not self.extensions:
            data = self.window_data(instance)
            lp = window_lp(data)
            t1 = time.perf_counter()
            solution = self._solve_integral_matrix(data, lp, instance,
                                                   self._mip_options(opts, instance))
        else:
            model = self.extend_model(self.build(instance), instance)
            t1 = time.perf_counter()
            solver = PersistentSolver(opts)
            if self.mode == "integral":
                result = solver.solve(model, self._mip_options(opts, instance))
                solution = self._extract_integral(model, instance, result)
            else:
                solution = self._solve_convex_pyomo(model, instance, solver)
        t2 = time.perf_counter()
        solution.solver = opts.solver
        solution.timings = Timings(build_s=t1 - t0, solve_s=t2 - t1)
        return solution

    @staticmethod
    def _mip_options(opts: SolverOptions, instance: Instance) -> SolverOptions:
        """The integral mode's MIP gap and time limit: the options', else the instance
        params', else Shockwave's (1e-3, 15 s)."""
        params = instance.params
        gap = opts.mip_gap if opts.mip_gap is not None else params.mip_gap
        return replace(opts, mip_gap=DEFAULT_MIP_GAP if gap is None else gap,
                       time_limit_s=(opts.time_limit_s or params.time_limit_s
                                     or DEFAULT_TIME_LIMIT_S))

    def _solve_integral_matrix(self, data: WindowData, lp: WindowLP, instance: Instance,
                               opts: SolverOptions) -> Solution:
        """The MILP by :mod:`~schedlab.formulations.shockwave.integral`: the round-count
        relaxation first, packed into rounds; else the full MILP as one matrix model with
        the log as an epigraph, started from the LP relaxation's rounded plan."""
        t0 = time.perf_counter()
        if self.integral_method == "round_counts":
            counted = self._solve_round_counts(data, instance, opts)
            if counted is not None:
                return counted
        if opts.time_limit_s is not None:
            spent = time.perf_counter() - t0
            opts = replace(opts, time_limit_s=max(1e-3, opts.time_limit_s - spent))
        model = self._epigraph_model(data, lp, opts)
        n, w = lp.x.shape

        def start(relaxed: FloatArray) -> FloatArray:
            x = np.clip(relaxed[lp.x.reshape(-1)].reshape(n, w), 0.0, 1.0)
            planned = data.planned_epochs(x.sum(axis=1))
            finishing = planned >= (data.epochs - data.done) * (1 - 1e-6)
            gangs = round_gangs(x, data.scale, data.gpus, finishing)
            whole = data.planned_epochs(gangs.sum(axis=1))
            return integral.start_values(
                lp.lower, lp.x, gangs, whole, lp.p, lp.u, lp.z, lp.v, data.remaining_s,
                data.sec_per_epoch, pwl_log((data.done + whole) / data.epochs))

        result, relaxation = integral.solve_with_start(model, lp.x.reshape(-1), start, opts)
        x: FloatArray | None = None
        if result.status.has_solution:
            chosen = np.asarray(model.values()[lp.x.reshape(-1)], dtype=float)
            x = np.round(np.clip(chosen, 0.0, 1.0)).reshape(n, w)
        solution = self._integral_solution(data, instance, result, x)
        if relaxation is result:
            solution.diagnostics.append("the LP relaxation is infeasible, so is the MILP")
        return solution

    @staticmethod
    def _epigraph_model(data: WindowData, lp: WindowLP, opts: SolverOptions) -> MatrixModel:
        """``lp``'s columns and rows plus the log's epigraph rows, as one matrix model."""
        model = matrix_model(opts)
        model.add_columns(lp.lower, lp.upper, lp.cost)
        model.set_sense("maximize")
        for block in lp.blocks:
            rows = block.matrix.shape[0]
            lower = -math.inf if block.lower is None else block.lower
            upper = math.inf if block.upper is None else block.upper
            model.add_rows(np.broadcast_to(np.asarray(lower, dtype=float), (rows,)), upper,
                           starts=block.matrix.indptr, columns=block.matrix.indices,
                           values=block.matrix.data)
        (starts, columns, values), log_upper = integral.pwl_log_epigraph(
            data.epochs, data.done, lp.p, lp.v, lp.size, np.asarray(LOG_BREAKPOINTS),
            LOG_ORIGIN)
        model.add_rows(np.full(len(log_upper), -math.inf), log_upper, starts=starts,
                       columns=columns, values=values)
        return model

    def _solve_round_counts(self, data: WindowData, instance: Instance,
                            opts: SolverOptions) -> Solution | None:
        """The round-count relaxation (integer n_j = W a_j in the one-share LP of
        :func:`window_lp`), packed into rounds by :func:`~schedlab.formulations.shockwave.
        integral.pack_rounds`: the solution when it settles the MILP (infeasible, or solved
        within the gap and packed), else None."""
        lp = window_lp(data, per_round=False)
        if opts.solver == "highs":
            opts = replace(opts, extra={**ROUND_COUNT_HIGHS, **opts.extra})
        model = self._epigraph_model(data, lp, opts)
        n, w = len(data.ids), data.rounds
        counts = model.add_columns(np.zeros(n), np.full(n, float(w)), 0.0, integer=True)
        for j in range(n):  # W a_j - n_j = 0
            model.add_row(0.0, 0.0, [int(lp.x[j, 0]), int(counts[j])], [float(w), -1.0])
        result = model.solve()
        if result.status is Status.INFEASIBLE:
            sol = self._integral_solution(data, instance, result, None)
            sol.diagnostics.append("the round-count relaxation is infeasible, so is the MILP")
            return sol
        if result.status is not Status.OPTIMAL:
            return None
        rounds = np.round(model.values()[counts])
        gangs = integral.pack_rounds(rounds, data.scale, data.gpus, w)
        if gangs is None:
            return None
        sol = self._integral_solution(data, instance, result, gangs)
        sol.metrics["round_count_relaxation"] = True
        return sol

    def _solve_convex_exact(self, data: WindowData, instance: Instance) -> Solution:
        """The convex window problem by :func:`~schedlab.formulations.shockwave.waterfill.
        solve_exact`: exact planned epochs, a Lagrangian bound, ``optimal`` only when every
        p_j is proven within ``epoch_tolerance`` (relative to max(p_j, 1))."""
        exact = solve_exact(data.weights, data.epochs, data.done, data.scale,
                            data.sec_per_epoch, data.remaining_s, data.round_s, data.rounds,
                            data.gpus, data.k, data.ftf_cap, self.epoch_tolerance)
        if not exact.feasible:
            sol = self._blank(instance, Status.INFEASIBLE)
            sol.diagnostics.append(f"infeasible: {self._name_job(data, exact.reason)}")
            return sol
        p = exact.planned
        horizon = data.round_s * data.rounds
        share = np.clip(data.sec_per_epoch * p / horizon, 0.0, 1.0)
        x = np.repeat(share[:, None], data.rounds, axis=1)
        allowed = self.epoch_tolerance * np.maximum(p, 1.0)
        proven = bool(np.all(exact.epoch_error_bound <= allowed))
        sol = self._blank(instance, Status.OPTIMAL if proven else Status.FEASIBLE)
        finishing = p >= (data.epochs - data.done) * (1 - 1e-6)
        self._fill(sol, data, x, round_gangs(x, data.scale, data.gpus, finishing))
        sol.objective = exact.objective if math.isfinite(exact.objective) else None
        if math.isfinite(exact.bound) and sol.objective is not None:
            sol.bound = exact.bound
            sol.gap = abs(sol.bound - sol.objective) / max(abs(sol.objective), 1e-10)
        worst = float(np.max(exact.epoch_error_bound / np.maximum(p, 1.0)))
        sol.metrics.update(convex_method="exact", epoch_error_bound=worst)
        # the reported plan's epochs are the exact ones (the shares were derived from them)
        sol.metrics["planned_epochs"] = dict(zip(data.ids, p.tolist(), strict=True))
        if not proven:
            sol.diagnostics.append(
                f"the duality gap {exact.bound - exact.objective:.3g} proves the planned "
                f"epochs only within {worst:.3g} (relative), above the tolerance "
                f"{self.epoch_tolerance:g}: reported as feasible")
        return sol

    @staticmethod
    def _name_job(data: WindowData, reason: str) -> str:
        """``reason`` with "job <index>" replaced by the job's id."""
        if reason.startswith("job "):
            index, _, rest = reason[4:].partition(":")
            if index.isdigit():
                return f"job {data.ids[int(index)]!r}:{rest}"
        return reason

    def _solve_convex_pyomo(self, model: pyo.ConcreteModel, instance: Instance,
                            solver: PersistentSolver) -> Solution:
        """The outer approximation on the Pyomo model (user constraints included)."""
        data: WindowData = model.window
        n = len(data.ids)
        iteration = 0

        def solve_lp() -> tuple[SolveResult, FloatArray, FloatArray]:
            result = solver.solve(model)
            if result.status != Status.OPTIMAL:
                return result, np.zeros(0), np.zeros(0)
            p = np.array([pyo.value(model.p[j]) for j in range(n)])
            return result, self._x_values(model, data), p

        def next_cut(q: FloatArray) -> None:
            nonlocal iteration
            iteration += 1
            self._add_tangents(model, f"log_cut_{iteration}", q[:, None])

        return self._outer_approximation(data, instance, solve_lp, next_cut, "pyomo")

    def _solve_convex_matrix(self, data: WindowData, lp: WindowLP, instance: Instance,
                             opts: SolverOptions) -> Solution:
        """The outer approximation on a matrix model of ``lp``'s columns and rows (the rounds
        as one: x[j,t] = a_j in every round).  HiGHS presolve is off: on this small LP it
        cost more than it saved (460 jobs: first LP 0.16 s with it, 0.02 s without)."""
        model = matrix_model(opts, presolve=False)
        model.add_columns(lp.lower, lp.upper, lp.cost)
        model.set_sense("maximize")
        n, w = lp.x.shape

        def add(block: RowBlock) -> None:
            rows = block.matrix.shape[0]
            lower = -math.inf if block.lower is None else block.lower
            upper = math.inf if block.upper is None else block.upper
            model.add_rows(np.broadcast_to(np.asarray(lower, dtype=float), (rows,)), upper,
                           starts=block.matrix.indptr, columns=block.matrix.indices,
                           values=block.matrix.data)

        for block in lp.blocks:
            add(block)
        add(tangent_rows(data, lp, "log_cut_0", _start_points(n)))
        iteration = 0

        def solve_lp() -> tuple[SolveResult, FloatArray, FloatArray]:
            result = model.solve()
            if result.status != Status.OPTIMAL:
                return result, np.zeros(0), np.zeros(0)
            values = model.values()
            x = np.clip(values[lp.x.reshape(-1)].reshape(n, w), 0.0, 1.0)
            return result, np.repeat(x, data.rounds // w, axis=1), values[lp.p]

        def next_cut(q: FloatArray) -> None:
            nonlocal iteration
            iteration += 1
            add(tangent_rows(data, lp, f"log_cut_{iteration}", q[:, None]))

        return self._outer_approximation(data, instance, solve_lp, next_cut, "matrix")

    def _outer_approximation(
            self, data: WindowData, instance: Instance,
            solve_lp: Callable[[], tuple[SolveResult, FloatArray, FloatArray]],
            next_cut: Callable[[FloatArray], None], interface: str) -> Solution:
        """The loop of the module docstring: ``solve_lp`` solves the current LP and returns
        its result, x and p; ``next_cut(q)`` adds a tangent of log at q_j for every job."""
        lower, upper, iterations = -math.inf, math.inf, 0
        result: SolveResult | None = None
        best_x: FloatArray | None = None
        while iterations < OA_MAX_ITERATIONS:
            iterations += 1
            result, x, p = solve_lp()
            if result.status != Status.OPTIMAL or result.objective is None:
                break
            upper = min(upper, result.objective)
            value = data.objective(x.sum(axis=1), "convex")
            if value > lower or best_x is None:  # -inf: a job with e_j = 0 got no share
                lower, best_x = value, x
            if upper - lower <= self.oa_tolerance * max(1.0, abs(lower)):
                break
            next_cut((data.done + p) / data.epochs)
        if best_x is None or result is None:
            message = result.message if result is not None else "no solve"
            status = result.status if result is not None else Status.ERROR
            sol = self._blank(instance, status)
            sol.diagnostics.append(f"outer approximation: LP ended {message}")
            weights = data.weights
            if len(weights) and float(weights.max()) > 1e12 * float(weights.min()):
                sol.diagnostics.append(
                    f"the objective's weights span {float(weights.min()):.3g} to "
                    f"{float(weights.max()):.3g} (priorities as they stand, no rescaling): "
                    "beyond what the LP solver resolves")
            return sol
        closed = math.isfinite(lower) and upper - lower <= self.oa_tolerance * max(1.0,
                                                                                 abs(lower))
        epoch_bound = math.inf
        if closed:  # the objective's gap bounds the planned epochs (waterfill docstring)
            planned_now = data.planned_epochs(best_x.sum(axis=1))
            reach = data.done + np.minimum(data.epochs - data.done,
                                           data.round_s * data.rounds / data.sec_per_epoch)
            epoch_bound = float(np.max(reach * np.sqrt(
                2.0 * max(upper - lower, 0.0) / data.weights) / np.maximum(planned_now, 1.0)))
        proven = closed and epoch_bound <= self.epoch_tolerance
        sol = self._blank(instance, Status.OPTIMAL if proven else Status.FEASIBLE)
        if closed and not proven:
            sol.diagnostics.append(
                f"outer approximation closed UB - LB = {upper - lower:.3g}, which proves the "
                f"planned epochs only within {epoch_bound:.3g} (relative), above the "
                f"tolerance {self.epoch_tolerance:g}: reported as feasible")
        if not math.isfinite(lower):
            sol.diagnostics.append(
                "a job that has run no epoch got no share in the LP's plan (exact objective "
                "-inf): the log's barrier was lost to floating point, typically under "
                "priorities many orders of magnitude apart; the plan is kept, unproven")
        planned = data.planned_epochs(best_x.sum(axis=1))
        finishing = planned >= (data.epochs - data.done) * (1 - 1e-6)
        self._fill(sol, data, best_x, round_gangs(best_x, data.scale, data.gpus, finishing))
        sol.metrics.update(oa_iterations=iterations, oa_model=interface,
                           convex_method="outer_approximation", epoch_error_bound=epoch_bound)
        if math.isfinite(lower):
            sol.objective, sol.bound = lower, upper
            sol.gap = abs(upper - lower) / max(abs(lower), 1e-10)
            sol.metrics.update(oa_gap=upper - lower,
                               gap_tolerance=self.oa_tolerance * max(1.0, abs(lower))
                               / max(abs(lower), 1e-10))
        if not closed:
            sol.diagnostics.append(f"outer approximation stopped after {iterations} LPs with "
                                   f"UB - LB = {upper - lower:.3g} (last LP: {result.message})")
        return sol

    def _extract_integral(self, model: pyo.ConcreteModel, instance: Instance,
                          result: SolveResult) -> Solution:
        data: WindowData = model.window
        x = (np.round(self._x_values(model, data)) if result.status.has_solution else None)
        return self._integral_solution(data, instance, result, x)

    def _integral_solution(self, data: WindowData, instance: Instance, result: SolveResult,
                           x: FloatArray | None) -> Solution:
        """The integral mode's solution from the solver's result and its rounded x (None
        without a solution): the plan's objective, the solver's bound when it proves
        something."""
        sol = self._blank(instance, result.status)
        if x is None or not result.status.has_solution:
            sol.diagnostics.append(f"solver: {result.message}")
            return sol
        self._fill(sol, data, x, x)
        # the plan's objective (p as large as x allows) is >= the solver's incumbent value
        sol.objective = data.objective(x.sum(axis=1), "integral")
        sol.bound = result.bound
        slack = 1e-9 * max(1.0, abs(sol.objective))
        if sol.bound is not None and sol.bound < sol.objective - slack:
            # a bound below a feasible plan's value proves nothing: the solver's absolute
            # tolerances acted on coefficients many orders of magnitude apart
            sol.diagnostics.append(
                f"solver bound {sol.bound:.12g} is below the plan's objective "
                f"{sol.objective:.12g} (the solver's tolerances, on weights up to "
                f"{float(data.weights.max()):.3g}); no proof of optimality")
            sol.bound = None
            if sol.status is Status.OPTIMAL:
                sol.status = Status.FEASIBLE
        if sol.bound is not None:
            # a bound below the plan's value by less than ``slack`` is float noise: gap 0.
            # Whether this gap proves "optimal" (the solver's gap test used its absolute
            # tolerances, not the plan's own objective) is the status rule's to decide:
            # settle_status, which every solve ends with.
            sol.gap = max(sol.bound - sol.objective, 0.0) / max(abs(sol.objective), 1e-10)
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
