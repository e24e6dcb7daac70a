r"""Sia's round ILP: one configuration (or none) per job, GPUs per type within capacity.

Written from the authors' code, read and run (siasosp23/artifacts at aaf7a0d,
``sia-simulator/``: ``sia.py`` ``__solve_mip_rescaled`` 844-1138 (restart scaling 879-908,
the power 910-936, the objective 938-964, the constraints 966-1025, the solve 1034-1036,
decoding 1066-1120); the sign rule of lambda_n, ``simulator_config.py`` 36-46).

**Sets.**  Adaptive jobs i (rows of G), configurations c (:class:`ConfigSet` columns, type
t(c), g_c GPUs), rigid jobs k (K_k GPUs, any type t), GPU types t (capacity Cap_t GPUs).

**Parameters.**  G (J x C, unitless, :func:`~schedlab.formulations.sia.matrix.goodput_matrix`),
r_i (re-allocation factors), prev_i (the job's configuration last round, or none), the lock
set L (jobs in checkpoint-restore: ``scaling_underway``); H (Jr x T) for rigid jobs (the
goodput per type normalised so the slowest type is K_k), r^R_k, prev^R_k, L^R; the fairness
power p != 0 and the no-allocation weight lambda_n (> 0 for p < 0, < 0 for p > 0, the code's
sign rule; default +-1.1).

1. restart scaling: G'_ic = r_i G_ic for c != prev_i when job i has a previous
   configuration (its previous column and jobs without one keep G), in float32 as the code
   (H' likewise, in float64 as the code);
2. utilities: A = min(round(G'^p, 2), 3000) (float32 power and rounding, as the code; a
   column scaled to 0 gets 3000 for p < 0);

**Variables.**  X_ic, Y_kt in {0, 1}.

**Objective.**

.. math::

    E = \sum_{ic} A_{ic} X_{ic} + \sum_{kt} A^R_{kt} Y_{kt}
        + \lambda_n \Big(J + J_r - \sum_{ic} X_{ic} - \sum_{kt} Y_{kt}\Big)

minimised for p < 0, maximised for p > 0.  All job weights are 1 (``sia.py`` 608-609); the
code's lambda_a is never used (``sia.py`` 936).

**Constraints** (rows of the matrix model, in this order).

* ``one_config[i]``: sum_c X_ic <= 1; ``one_type[k]``: sum_t Y_kt <= 1;
* ``capacity[t]``: 0 <= sum_{i, c: t(c)=t} g_c X_ic + sum_k K_k Y_kt <= Cap_t;
* locks (column bounds): X_{i, prev_i} = 1 for i in L, Y_{k, prev_k} = 1 for k in L^R.

There is no per-node constraint: the configuration set keeps each type packable
(:mod:`~schedlab.formulations.sia.placement`; rigid counts outside it may not be).

**Reduction** (exact).  A column whose cost A - lambda_n is worse than leaving the job out
by more than 0.005 (A - lambda_n > 0.005 for p < 0) gets upper bound 0 unless it is locked:
removing it from any assignment improves E by more than 0.005, so it is in no optimum and in
no assignment stage 2 of the tie-break may pick (with p < 0 this drops the 1e-4 columns,
A = 100, and moves worth less than G r = 0.81).

**Solve.**  A relative MIP gap of 1e-4 by default (:data:`SIA_MIP_GAP`, the authors' CBC
``allowablePercentageGap = 0.01``); ``options.mip_gap`` overrides it (0 for a proven exact
optimum).  Decoding as the code: round X, the argmax of each row, an all-zero row -> no
allocation.

**Two-stage tie-break** (``tie_break=True``).  The optimum is often not unique (A lives on a
0.01 grid, and a job that never ran is tied across the types' 1-GPU columns), so solvers pick
different optima.  Stage 1 solves as above (gap 0 unless ``options.mip_gap`` says otherwise)
giving E*; stage 2 keeps every constraint, adds ``E <= E* + 0.005`` (p < 0; ``E >= E* - 0.005``
for p > 0 -- exact because E moves in steps of 0.01 and lambda_n = 1.1) and minimises
sum_ic W_ic X_ic with integer weights W_ic = crc32(f"{job_name}:{c}") mod 1000003 + 1 (c the
global column index) at gap 0.  The result is the lexicographic choice (E first, then W):
the same with any exact solver.  Rigid columns have weight 0 (ties among rigid jobs are
left to the solver).
"""

from __future__ import annotations

import logging
import math
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from schedlab.formulations.sia.configs import Config, ConfigSet
from schedlab.solution import Status, worst_status
from schedlab.solvers import SolveResult, SolverOptions
from schedlab.solvers.matrix import MatrixModel, matrix_model

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
Float32Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

#: Relative MIP gap of the authors' runs (``simulator_config.py`` ``sia_solver_thresh``).
SIA_MIP_GAP = 1e-4
#: Utilities above this are clipped (``sia_goodput_clip_val``).
UTILITY_CLIP = 3000.0
#: |lambda_n| of the authors' runs (``--mip_lambda_n 1.1``).
DEFAULT_LAMBDA_N = 1.1
#: Fairness power of the authors' runs (``--policy_p_val -0.5``).
DEFAULT_P = -0.5
#: Stage 2 keeps E within this of E* (half the 0.01 grid of the utilities).
TIE_BREAK_SLACK = 0.005
#: W_ic = crc32(f"{job_name}:{c}") mod TIE_BREAK_MODULUS + 1.
TIE_BREAK_MODULUS = 1000003


@dataclass(frozen=True)
class RigidJobs:
    """Rigid jobs (only the type is chosen; ``sia.py`` 527-574).

    Args:
        names: job names.
        goodput: H, shape (Jr, T), float64, normalised so the slowest type is K_k.
        gpus: K_k, the fixed GPU count of each job.
        realloc: r^R_k (the caller applies the code's rule: 1 while attained service < S).
        previous: type index last round, or None.
        locked: in checkpoint-restore (the previous type is kept).
    """

    names: tuple[str, ...]
    goodput: FloatArray
    gpus: IntArray
    realloc: FloatArray
    previous: tuple[int | None, ...]
    locked: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.names)


def rigid_jobs(names: Sequence[str], goodput: npt.ArrayLike, gpus: Sequence[int], *,
               realloc: Sequence[float] | None = None,
               previous: Sequence[int | None] | None = None,
               locked: Sequence[bool] | None = None) -> RigidJobs:
    """:class:`RigidJobs` with defaults: r = 1, no previous type, no lock."""
    n = len(names)
    matrix = np.asarray(goodput, dtype=np.float64)
    if matrix.ndim != 2:
        matrix = matrix.reshape(n, -1) if n else matrix.reshape(0, 0)
    return RigidJobs(names=tuple(names), goodput=matrix,
                     gpus=np.asarray(gpus, dtype=np.int64).reshape(n),
                     realloc=np.ones(n) if realloc is None else np.asarray(realloc, float),
                     previous=(None,) * n if previous is None else tuple(previous),
                     locked=(False,) * n if locked is None else tuple(locked))


@dataclass(frozen=True)
class SiaProblem:
    """One round's ILP input (module docstring); build it with :func:`sia_problem`."""

    configs: ConfigSet
    names: tuple[str, ...]
    goodput: Float32Array
    realloc: FloatArray
    previous: tuple[int | None, ...]
    locked: tuple[bool, ...]
    rigid: RigidJobs
    p: float
    lambda_n: float

    def __post_init__(self) -> None:
        n, n_cols, n_types = len(self.names), len(self.configs), len(self.configs.types)
        if self.goodput.shape != (n, n_cols):
            raise ValueError(f"goodput has shape {self.goodput.shape}, expected {(n, n_cols)} "
                             "(jobs x configurations)")
        _check_jobs("job", self.names, self.realloc, self.previous, self.locked, n_cols)
        rigid = self.rigid
        if rigid.goodput.shape != (len(rigid), n_types):
            raise ValueError(f"rigid goodput has shape {rigid.goodput.shape}, expected "
                             f"{(len(rigid), n_types)} (rigid jobs x GPU types)")
        _check_jobs("rigid job", rigid.names, rigid.realloc, rigid.previous, rigid.locked,
                    n_types)
        if np.any(rigid.gpus < 1):
            raise ValueError("every rigid job needs at least 1 GPU")
        if self.p == 0 or not math.isfinite(self.p):
            raise ValueError(f"p must be a nonzero number, got {self.p}")
        if self.lambda_n * self.p >= 0:
            raise ValueError(f"lambda_n must have the sign opposite to p (a penalty for "
                             f"leaving a job out): p = {self.p}, lambda_n = {self.lambda_n}")

    @property
    def num_jobs(self) -> int:
        """J + Jr."""
        return len(self.names) + len(self.rigid)


def _check_jobs(what: str, names: Sequence[str], realloc: FloatArray,
                previous: Sequence[int | None], locked: Sequence[bool], width: int) -> None:
    n = len(names)
    if realloc.shape != (n,) or len(previous) != n or len(locked) != n:
        raise ValueError(f"realloc, previous and locked need one entry per {what} ({n})")
    if np.any(~np.isfinite(realloc)) or np.any(realloc < 0):
        raise ValueError(f"every {what}'s re-allocation factor must be finite and >= 0")
    for name, prev, lock in zip(names, previous, locked, strict=True):
        if prev is not None and not 0 <= prev < width:
            raise ValueError(f"{what} {name!r}: previous index {prev} outside 0..{width - 1}")
        if lock and prev is None:
            raise ValueError(f"{what} {name!r} is locked (checkpoint-restore) but has no "
                             "previous allocation")


def sia_problem(configs: ConfigSet, names: Sequence[str], goodput: npt.ArrayLike, *,
                realloc: Sequence[float] | None = None,
                previous: Sequence[int | None] | None = None,
                locked: Sequence[bool] | None = None, rigid: RigidJobs | None = None,
                p: float = DEFAULT_P, lambda_n: float | None = None) -> SiaProblem:
    """A :class:`SiaProblem` with defaults: r = 1, no previous configuration, no lock, no
    rigid jobs, p = -0.5, lambda_n = 1.1 for p < 0 and -1.1 for p > 0."""
    n = len(names)
    matrix = np.asarray(goodput, dtype=np.float32).reshape(n, len(configs))
    if lambda_n is None:
        lambda_n = DEFAULT_LAMBDA_N if p < 0 else -DEFAULT_LAMBDA_N
    return SiaProblem(
        configs=configs, names=tuple(names), goodput=matrix,
        realloc=np.ones(n) if realloc is None else np.asarray(realloc, dtype=np.float64),
        previous=(None,) * n if previous is None else tuple(previous),
        locked=(False,) * n if locked is None else tuple(locked),
        rigid=rigid if rigid is not None else rigid_jobs([], np.zeros((0, len(configs.types))),
                                                         []),
        p=float(p), lambda_n=float(lambda_n))


# ------------------------------------------------------------------------------ utilities


def utilities(goodput: npt.NDArray[np.floating], realloc: FloatArray,
              previous: Sequence[int | None], p: float) -> npt.NDArray[np.floating]:
    """A = min(round((restart-scaled G)^p, 2), 3000) in G's own dtype (float32 for adaptive
    jobs, float64 for rigid ones, as the code): row i is multiplied by r_i except in its
    previous column, for jobs with one (steps 1-2 of the module docstring)."""
    scaled = goodput.copy()
    kind = scaled.dtype.type
    rows = np.array([i for i, c in enumerate(previous) if c is not None], dtype=np.int64)
    if len(rows):
        cols = np.array([previous[i] for i in rows], dtype=np.int64)
        kept = scaled[rows, cols]
        scaled[rows] *= realloc[rows].astype(scaled.dtype)[:, None]
        scaled[rows, cols] = kept
    with np.errstate(divide="ignore"):
        powered = np.power(scaled, kind(p))
    rounded = np.round(powered, 2)
    rounded[rounded > UTILITY_CLIP] = kind(UTILITY_CLIP)
    return rounded


def tie_break_weights(names: Sequence[str], num_columns: int) -> IntArray:
    """W_ic = crc32(f"{name}:{c}") mod 1000003 + 1, shape (len(names), num_columns)."""
    return np.array([[zlib.crc32(f"{name}:{c}".encode()) % TIE_BREAK_MODULUS + 1
                      for c in range(num_columns)] for name in names],
                    dtype=np.int64).reshape(len(names), num_columns)


# ------------------------------------------------------------------------------- solving


@dataclass(frozen=True)
class SiaDecision:
    """The ILP's answer.

    Attributes:
        choice: the column of each adaptive job, or None (no allocation).
        rigid_choice: the type index of each rigid job, or None.
        allocations: job name -> :class:`Config` or None, adaptive then rigid jobs (a rigid
            job on type t holds ceil(K / R_t) nodes).
        objective: E* of stage 1 (of the decoded assignment; None without a solution).
        chosen_objective: E of the returned assignment (stage 2's with the tie-break, on
            the same 0.01 grid as E*).
        tie_break_weight: sum of W over the returned assignment (None without tie-break).
        status: the worst status of the solves; ``optimal`` only when each was proven.
        solve_s: seconds in the solver (all stages); build_s: seconds building the model.
        stages: the solver's result of each stage (their objectives leave out the constant
            lambda_n (J + Jr); stage 2's is the sum of W).
    """

    choice: tuple[int | None, ...]
    rigid_choice: tuple[int | None, ...]
    allocations: dict[str, Config | None]
    objective: float | None
    chosen_objective: float | None
    tie_break_weight: int | None
    status: Status
    solve_s: float
    build_s: float
    stages: tuple[SolveResult, ...]


def solve_sia_ilp(problem: SiaProblem, options: SolverOptions | None = None, *,
                  tie_break: bool = False, presolve: bool | None = None) -> SiaDecision:
    """Solve one round's ILP (module docstring) on a matrix model (HiGHS by default).

    Args:
        problem: the round's input (:func:`sia_problem`).
        options: solver, time limit per stage, MIP gap (default :data:`SIA_MIP_GAP`, or 0
            with ``tie_break``), threads.
        tie_break: the two-stage lexicographic tie-break.
        presolve: the solver's presolve; None: off for HiGHS (on this model its presolve
            took 1.8 of 2.4 s at 1000 jobs and left a root-node MIP; 0.3 s without it),
            the solver's default otherwise.
    """
    opts = options or SolverOptions()
    if opts.mip_gap is None:
        opts = replace(opts, mip_gap=0.0 if tie_break else SIA_MIP_GAP)
    started = time.perf_counter()
    n_jobs, n_cols = problem.goodput.shape
    n_rigid, n_types = problem.rigid.goodput.shape
    n_x, n_y = n_jobs * n_cols, n_rigid * n_types
    lam = problem.lambda_n
    values = np.concatenate([
        utilities(problem.goodput, problem.realloc, problem.previous, problem.p)
        .astype(np.float64).reshape(-1),
        utilities(problem.rigid.goodput, problem.rigid.realloc, problem.rigid.previous,
                  problem.p).astype(np.float64).reshape(-1)])
    constant = lam * problem.num_jobs
    if n_x + n_y == 0:  # nothing to choose: every job left out
        return _decision(problem, np.zeros(0), constant, constant, None, Status.OPTIMAL, (),
                         time.perf_counter() - started)
    if presolve is None and opts.solver == "highs":
        presolve = False
    model = _build(problem, values - lam, opts, presolve)
    build_s = time.perf_counter() - started
    first = model.solve()
    stages = [first]
    if not first.status.has_solution:
        return _decision(problem, None, None, None, None, first.status, tuple(stages), build_s)
    x = np.round(model.values())
    best = float(values @ x) + lam * (problem.num_jobs - float(x.sum()))
    weight = None
    if tie_break:
        x, weight, second = _second_stage(problem, model, values - lam, best - constant, x)
        stages.append(second)
    chosen = float(values @ x) + lam * (problem.num_jobs - float(x.sum()))
    status = worst_status(*(s.status for s in stages))
    return _decision(problem, x, best, chosen, weight, status, tuple(stages), build_s)


def _build(problem: SiaProblem, cost: FloatArray, options: SolverOptions,
           presolve: bool | None) -> MatrixModel:
    """The matrix model of stage 1: columns X (row-major) then Y; rows one_config,
    one_type, capacity; locks as lower bounds 1."""
    configs, rigid = problem.configs, problem.rigid
    n_jobs, n_cols = problem.goodput.shape
    n_rigid, n_types = rigid.goodput.shape
    n_x, n_y = n_jobs * n_cols, n_rigid * n_types
    lower = np.zeros(n_x + n_y)
    for i, (prev, lock) in enumerate(zip(problem.previous, problem.locked, strict=True)):
        if lock and prev is not None:
            lower[i * n_cols + prev] = 1.0
    for k, (prev, lock) in enumerate(zip(rigid.previous, rigid.locked, strict=True)):
        if lock and prev is not None:
            lower[n_x + k * n_types + prev] = 1.0
    # a column worse than leaving the job out by more than the tie-break slack is in no
    # optimum and in no stage-2 assignment (dropping it moves E by more than the slack)
    useless = cost > TIE_BREAK_SLACK if problem.p < 0 else cost < -TIE_BREAK_SLACK
    upper = np.where(useless & (lower < 1), 0.0, 1.0)
    model = matrix_model(options, presolve=presolve)
    model.set_sense("minimize" if problem.p < 0 else "maximize")
    model.add_columns(lower, upper, cost, integer=True)
    # one_config[i] and one_type[k]: consecutive blocks of n_cols (n_types) columns
    starts = np.concatenate([np.arange(0, n_x, n_cols, dtype=np.int64) if n_cols else
                             np.zeros(n_jobs, dtype=np.int64),
                             n_x + np.arange(0, n_y + 1, n_types, dtype=np.int64)
                             if n_types else np.full(n_rigid + 1, n_x, dtype=np.int64)])
    model.add_rows(np.full(n_jobs + n_rigid, -np.inf), np.ones(n_jobs + n_rigid),
                   starts=starts, columns=np.arange(n_x + n_y), values=np.ones(n_x + n_y))
    # capacity[t]: entries (type of the column, column, GPUs), grouped by type
    col_type = np.concatenate([np.tile(configs.column_type, n_jobs),
                               np.tile(np.arange(n_types, dtype=np.int64), n_rigid)])
    col_gpus = np.concatenate([np.tile(configs.column_gpus, n_jobs),
                               np.repeat(rigid.gpus, n_types)]).astype(float)
    order = np.argsort(col_type, kind="stable")
    counts = np.bincount(col_type, minlength=n_types)
    model.add_rows(np.zeros(n_types), configs.capacity.astype(float),
                   starts=np.concatenate([[0], np.cumsum(counts)]), columns=order,
                   values=col_gpus[order])
    return model


def _second_stage(problem: SiaProblem, model: MatrixModel, cost: FloatArray, best: float,
                  x: FloatArray) -> tuple[FloatArray, int, SolveResult]:
    """Stage 2 of the tie-break on the stage-1 model: the E row, the W objective, x as the
    start; returns (x, sum of W, the result), x unchanged when stage 2 finds nothing."""
    n_jobs, n_cols = problem.goodput.shape
    n_x = n_jobs * n_cols
    weights = np.zeros(len(x))
    weights[:n_x] = tie_break_weights(problem.names, n_cols).reshape(-1)
    columns = np.arange(len(x))
    if problem.p < 0:
        model.add_row(-np.inf, best + TIE_BREAK_SLACK, columns, cost)
    else:
        model.add_row(best - TIE_BREAK_SLACK, np.inf, columns, cost)
    model.set_sense("minimize")
    model.set_costs(columns, weights)
    model.set_start(x)
    result = model.solve(mip_gap=0.0)
    if result.status.has_solution:
        x = np.round(model.values())
    else:
        log.warning("Sia's tie-break stage ended %s; keeping stage 1's assignment",
                    result.status.value)
    return x, round(float(weights @ x)), result


def _decision(problem: SiaProblem, x: FloatArray | None, best: float | None,
              chosen: float | None, weight: int | None, status: Status,
              stages: tuple[SolveResult, ...], build_s: float) -> SiaDecision:
    """Decode x as the code: round, argmax per row, an all-zero row -> None."""
    n_jobs, n_cols = problem.goodput.shape
    n_rigid, n_types = problem.rigid.goodput.shape
    choice: list[int | None] = [None] * n_jobs
    rigid_choice: list[int | None] = [None] * n_rigid
    if x is not None and len(x):
        adaptive = x[: n_jobs * n_cols].reshape(n_jobs, n_cols)
        rigid = x[n_jobs * n_cols:].reshape(n_rigid, n_types)
        choice = [int(np.argmax(row)) if row.sum() > 0 else None for row in adaptive]
        rigid_choice = [int(np.argmax(row)) if row.sum() > 0 else None for row in rigid]
    configs = problem.configs
    allocations: dict[str, Config | None] = {
        name: None if c is None else configs.configs[c]
        for name, c in zip(problem.names, choice, strict=True)}
    for k, t in enumerate(rigid_choice):
        gpus = int(problem.rigid.gpus[k])
        allocations[problem.rigid.names[k]] = None if t is None else Config(
            configs.types[t], math.ceil(gpus / configs.gpus_per_node[t]), gpus)
    return SiaDecision(choice=tuple(choice), rigid_choice=tuple(rigid_choice),
                       allocations=allocations, objective=best, chosen_objective=chosen,
                       tie_break_weight=weight, status=status,
                       solve_s=sum(s.solve_s for s in stages), build_s=build_s,
                       stages=stages)


__all__ = ["DEFAULT_LAMBDA_N", "DEFAULT_P", "SIA_MIP_GAP", "TIE_BREAK_MODULUS",
           "TIE_BREAK_SLACK", "UTILITY_CLIP", "RigidJobs", "SiaDecision", "SiaProblem",
           "rigid_jobs", "sia_problem", "solve_sia_ilp", "tie_break_weights", "utilities"]
