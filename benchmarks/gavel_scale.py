"""Max-min fairness at scale: reference Pyomo model vs the exact fast path vs raw HiGHS vs cvxpy.

Usage::

    python benchmarks/gavel_scale.py            # full run (long: see benchmarks/README.md)
    python benchmarks/gavel_scale.py --quick    # small sizes only (about a minute)
    python benchmarks/gavel_scale.py --families-only   # table 1b alone

It prints one plain line per finished measurement (size, case, method) with its seconds and
the seconds since the start, then the tables; nothing is written to a file.

Workloads come from the package's own generator and throughput table
(:func:`schedlab.workloads.gavel.generate_gavel_instance`, Gavel's measured throughputs),
seed 0, every job arriving at t = 0 with weight 1.

* Table 1, ``gavel.max_min_fairness`` (heterogeneity-aware, no space sharing): J jobs with
  Gavel's scale-factor mix (1, 2, 4, 8 GPUs) on a cluster of J/3 V100 + J/3 P100 + J/3 K80
  (J GPUs for about 1.9 J requested GPUs: every job gets about half its gang's time).
  ``noisy`` rows multiply every throughput by its own U(0.8, 1.2) factor (seeded), so no two
  jobs have equal rows and the fast path cannot aggregate: the non-aggregated path is
  measured honestly.
* Table 1b, ``gavel.max_min_fairness`` on two families of distinct job rows, at 10^3 to
  10^6 jobs on J/6 GPUs of each of v100, p100, k80 (so the capacities bind; with J/3 the
  optimum of these families is set by the slowest job alone), built here with fixed seeds
  (:func:`family_instance`, nothing in ``instances/``):

  - ``wide`` (wide speed-up ratios): job type uniform over the shipped table's types measured
    on one GPU, base row T[type, 1, k], scale factor uniform in {1, 2, 4}, and throughput[k] =
    base[k] x u_k with u_k ~ U(1, 4) drawn independently per job and type;
  - ``speedup`` (the shipped table with per-job random speed-ups): (job type, scale factor)
    drawn as the generator does (Gavel's mix 1/2/4/8 with probabilities 0.70/0.10/0.15/0.05,
    type uniform among those measured at that scale factor), throughput[k] = T[type, s, k] x
    g_k with g_k log-uniform in [1/2, 2], independently per job and type.

  Columns: ``ours`` = ``method="fast"`` from the Instance (``b/s/e`` = build: arrays and
  classes / solve: the LP work / extract: the Solution, the instance hash included), the path
  it took, its LP count / free classes (price path), its certified gap and the checker's
  verdict; ``ecos``, ``clarabel`` as in table 1; ``highs ipm`` = the LP from arrays through
  ``highspy`` by interior point with crossover (up to 10^5 jobs); ``ours/ECOS`` = t_ours /
  t_ECOS (the acceptance bar is 0.5), ``solve/ECOS`` the same for the solve phase alone;
  ``agree`` = the largest relative difference of the other optima to ours.  At 10^6 jobs the
  other solvers are skipped (predicted over budget), and the claim rests on the certificate:
  the primal is checked by the checker, the dual is feasible by construction, ``gap`` is
  the relative duality gap.
* Table 2, ``gavel.max_min_fairness_packed`` (space sharing): J single-GPU jobs on J/6 GPUs of
  each type, every pair of jobs co-locatable (J(J-1)/2 pairs; the co-location model of
  :mod:`schedlab.workloads.throughputs`).

Columns (seconds are wall time on this machine, from the Instance object to a Solution or an
optimal value; instance generation is not timed):

* ``reference``: :class:`MaxMinFairness` with ``method="pyomo"`` -- build / solve / extract
  as the Solution reports them.  Skipped where it would exceed about 60 s (table 1: above
  20000 jobs; table 2: when the previous size's time times the growth in pair variables
  predicts more than 90 s; it also gets a 60 s solver time limit).
* ``fast``: ``method="fast"`` -- total, and its solve phase (the LP work alone; the rest is
  reading the Instance into arrays, the instance hash and filling the Solution, which the
  reference pays too).
* ``highspy``: the same LP from numpy/scipy arrays handed to ``highspy.Highs.passModel``,
  including the array extraction, with the reference's LP method (dual simplex below 2000
  jobs, interior point + crossover from 2000 on; HiGHS's default simplex takes 48 s at
  10000 jobs).
* ``ecos`` / ``clarabel``: cvxpy as Gavel's implementation writes the policy
  (``cp.Maximize(cp.min(...))`` over a dense (J, K) variable with Gavel's base constraints),
  including problem construction.  Skipped when the previous size's time scaled linearly in
  J predicts more than 120 s.
* ``x ECOS``: t_ECOS / t, the speed-up over cvxpy + ECOS (> 1 is faster than ECOS).
* ``agree``: max relative difference of every optimum found to the fast path's (1e-6 is the
  bar); ``ok`` when below it.
* Table 2 only: ``check``, seconds of :func:`schedlab.check.check` on the fast path's
  Solution (``NO`` when it finds a problem); ``load``, the 1-minute load average after the
  row (the machine is shared).

Everything is printed once as plain-text tables (rich), ready to paste into
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import cvxpy as cp
import highspy
import numpy as np
import scipy.sparse as sp
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from schedlab.check import check
from schedlab.formulations.gavel.data import GavelData, gavel_data
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.gavel import GAVEL_SCALE_FACTOR_MIX, generate_gavel_instance
from schedlab.workloads.throughputs import load_gavel_throughputs

log = logging.getLogger("gavel_scale")

AGREE_TOL = 1e-6
REFERENCE_MAX_JOBS = 20_000
CVXPY_BUDGET_S = 120.0
PACKED_BUDGET_S = 60.0
REPEAT_BELOW_S = 1.0


@dataclass
class Run:
    """One method on one instance: seconds, optimum, and a note when skipped or odd."""

    seconds: float | None = None
    objective: float | None = None
    note: str = ""
    phases: tuple[float, float, float] | None = None  # build, solve, extract
    jobs: int = 0
    extra: dict[str, object] = field(default_factory=dict)


# ------------------------------------------------------------------------------ instances


def gavel_cluster(num_jobs: int, per_gpu: int) -> dict[str, int]:
    """num_jobs / (3 per_gpu) GPUs of each of v100, p100, k80 (at least 8, the largest gang)."""
    count = max(8, num_jobs // (3 * per_gpu))
    return {"v100": count, "p100": count, "k80": count}


def noisy(instance: Instance, seed: int) -> Instance:
    """Every throughput times its own U(0.8, 1.2) factor: no two jobs aggregate."""
    rng = np.random.default_rng(seed)
    document = instance.to_dict()
    for job in document["jobs"]:
        for acc in job["throughput"]:
            job["throughput"][acc] *= float(rng.uniform(0.8, 1.2))
    document["name"] = f"{instance.name}-noisy"
    return instance_from_dict(document, source=document["name"])


# -------------------------------------------------------------------------------- methods


def lp_arrays(data: GavelData) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray, int]:
    """The reference LP as arrays: columns X[j,k] (allowed) then t; rows fairness (>= 0),
    job_share (<= 1), capacity (<= n_k).  Returns (A, row_lower, row_upper, columns)."""
    num_jobs, num_types = data.throughput.shape
    teq = data.equal_share_throughput()
    coef = data.scale_factor / (data.weight * np.where(teq > 0, teq, 1.0))
    jj, kk = np.nonzero(data.allowed)
    n_x = len(jj)
    cols = np.arange(n_x)
    rows = np.concatenate([jj, num_jobs + jj, 2 * num_jobs + kk, np.arange(num_jobs)])
    columns = np.concatenate([cols, cols, cols, np.full(num_jobs, n_x)])
    values = np.concatenate([coef[jj] * data.throughput[jj, kk], np.ones(n_x),
                             data.scale_factor[jj], -np.ones(num_jobs)])
    height = 2 * num_jobs + num_types
    matrix = sp.csc_matrix((values, (rows, columns)), shape=(height, n_x + 1))
    lower = np.concatenate([np.zeros(num_jobs), np.full(num_jobs + num_types, -np.inf)])
    upper = np.concatenate([np.full(num_jobs, np.inf), np.ones(num_jobs), data.gpus])
    return matrix, lower, upper, n_x + 1


def run_highspy(instance: Instance, method: str | None = None) -> Run:
    """The LP from arrays, handed to HiGHS directly, with the reference's LP method (dual
    simplex below 2000 jobs, interior point with crossover from 2000 jobs on) or ``method``
    ("ipm": interior point with crossover at every size)."""
    start = time.perf_counter()
    matrix, lower, upper, width = lp_arrays(gavel_data(instance))
    lp = highspy.HighsLp()
    lp.num_col_ = width
    lp.num_row_ = matrix.shape[0]
    lp.col_cost_ = np.concatenate([np.zeros(width - 1), [1.0]])
    lp.col_lower_ = np.zeros(width)
    lp.col_upper_ = np.concatenate([np.ones(width - 1), [highspy.kHighsInf]])
    lp.row_lower_ = np.where(np.isfinite(lower), lower, -highspy.kHighsInf)
    lp.row_upper_ = np.where(np.isfinite(upper), upper, highspy.kHighsInf)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("solver", method or ("ipm" if len(instance.jobs) >= 2000
                                               else "simplex"))
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    seconds = time.perf_counter() - start
    if status != highspy.HighsModelStatus.kOptimal:
        return Run(seconds, None, f"HiGHS: {highs.modelStatusToString(status)}")
    return Run(seconds, float(highs.getInfo().objective_function_value))


def run_cvxpy(instance: Instance, solver: str) -> Run:
    """Gavel's formulation in cvxpy: maximize min_j sum_k c_j T[j,k] x[j,k] over a dense
    nonnegative x with sum_k x[j,k] <= 1 and sum_j s_j x[j,k] <= n_k."""
    start = time.perf_counter()
    data = gavel_data(instance)
    teq = data.equal_share_throughput()
    coef = data.scale_factor / (data.weight * np.where(teq > 0, teq, 1.0))
    num_jobs, num_types = data.throughput.shape
    x = cp.Variable((num_jobs, num_types), nonneg=True)
    normalized = cp.sum(cp.multiply(coef[:, None] * data.throughput, x), axis=1)
    scale = np.tile(data.scale_factor[:, None], (1, num_types))
    constraints = [cp.sum(x, axis=1) <= 1, cp.sum(cp.multiply(scale, x), axis=0) <= data.gpus]
    problem = cp.Problem(cp.Maximize(cp.min(normalized)), constraints)
    problem.solve(solver=solver)
    seconds = time.perf_counter() - start
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        return Run(seconds, None, f"{solver}: {problem.status}")
    note = "inaccurate" if problem.status == cp.OPTIMAL_INACCURATE else ""
    return Run(seconds, float(problem.value), note)


def run_formulation(instance: Instance, method: str, *, space_sharing: bool = False,
                    time_limit: float | None = None) -> Run:
    """``MaxMinFairness(method=...)`` on ``instance``; the Solution's own phase timings."""
    formulation = MaxMinFairness(method=method, space_sharing=space_sharing, num_rounds=0)
    formulation.name = "gavel.max_min_fairness_packed" if space_sharing else \
        "gavel.max_min_fairness"
    start = time.perf_counter()
    solution: Solution = formulation.solve(instance, SolverOptions(time_limit_s=time_limit))
    seconds = time.perf_counter() - start
    t = solution.timings
    run = Run(seconds, solution.objective, "", (t.build_s, t.solve_s, t.extract_s))
    if solution.status != Status.OPTIMAL:
        why = solution.diagnostics[0] if solution.diagnostics else ""
        run.note = "time limit" if "TimeLimit" in why else solution.status.value
        run.objective = None
    run.extra = {k: solution.metrics.get(k) for k in ("fast_path", "classes", "iterations",
                                                      "columns", "pair_classes")}
    run.extra["gap"] = solution.gap
    run.extra["solution"] = solution
    return run


# ------------------------------------------------------------------------------ helpers


def fmt(seconds: float | None) -> str:
    """Seconds with 3 significant digits."""
    if seconds is None:
        return "-"
    return f"{seconds:.3g}"


def cell(run: Run | None) -> str:
    """Seconds, '*' when the solver called its optimum inaccurate, or the skip note."""
    if run is None:
        return "-"
    if run.seconds is None:
        return run.note
    return fmt(run.seconds) + ("*" if run.note == "inaccurate" else "")


def speedup(base: Run | None, other: Run | None) -> str:
    """t_base / t_other, when both reached an optimum."""
    if base is None or other is None or base.seconds is None or other.seconds is None:
        return "-"
    if base.objective is None or other.objective is None:
        return "-"
    return f"{base.seconds / other.seconds:.3g}x"


def agreement(reference_value: float | None, runs: list[Run | None]) -> str:
    """Max relative difference of the optima found to ``reference_value``."""
    values = [r.objective for r in runs if r is not None and r.objective is not None]
    if reference_value is None or not values:
        return "-"
    worst = max(abs(v - reference_value) / max(abs(reference_value), 1e-12) for v in values)
    return f"{'ok' if worst <= AGREE_TOL else 'NO'} {worst:.1e}"


def predicted(previous: Run | None, growth: float, budget: float) -> float | None:
    """Predicted seconds (previous time x growth) when above ``budget``, else None."""
    if previous is None or previous.seconds is None:
        return None
    guess = previous.seconds * growth
    return guess if guess > budget else None


#: when the run started (for the elapsed seconds of the progress lines)
STARTED = time.perf_counter()


def progress(message: str) -> None:
    """One plain line on stdout, flushed, with the seconds since the start."""
    print(f"{message}; elapsed {time.perf_counter() - STARTED:.0f} s", flush=True)


def timed(label: str, fn: Callable[[], Run]) -> Run:
    """Run ``fn``; when it took under :data:`REPEAT_BELOW_S`, twice more, keeping the fastest
    (the machine is shared, and sub-second timings are noisy)."""
    log.info("%s ...", label)
    run = fn()
    if run.seconds is not None and run.seconds < REPEAT_BELOW_S:
        for _ in range(2):
            again = fn()
            if again.seconds is not None and again.seconds < run.seconds:
                run = again
    progress(f"{label}: {fmt(run.seconds)} s, objective {run.objective}"
             + (f" ({run.note})" if run.note else ""))
    return run


def warm_up() -> None:
    """Import and exercise every code path once, so no timing includes first imports."""
    instance = generate_gavel_instance(12, {"v100": 2, "p100": 2, "k80": 2}, 0,
                                       multi_gpu=False, colocation=True)
    for method in ("pyomo", "fast"):
        run_formulation(instance, method)
        run_formulation(instance, method, space_sharing=True)
    run_highspy(instance)
    for solver in ("ECOS", "CLARABEL"):
        run_cvxpy(instance, solver)


# -------------------------------------------------------------------------------- tables


def scale_table(sizes: list[int], noisy_sizes: list[int], seed: int,
                with_cvxpy: bool) -> Table:
    """Table 1: max-min fairness without space sharing."""
    table = Table(title="gavel.max_min_fairness (3 types, J/3 GPUs each)", box=None,
                  show_edge=False)
    for name in ("jobs", "classes", "reference b/s/e", "ref", "fast", "fast solve", "path",
                 "highspy", "ecos", "clarabel", "ref xECOS", "fast xECOS", "highspy xECOS",
                 "agree"):
        table.add_column(name, justify="right")
    last: dict[tuple[str, str], Run | None] = {}
    cases = [(n, False) for n in sizes] + [(n, True) for n in noisy_sizes]
    for num_jobs, is_noisy in cases:
        instance = generate_gavel_instance(num_jobs, gavel_cluster(num_jobs, 1), seed)
        if is_noisy:
            instance = noisy(instance, seed + 1)
        kind = "noisy" if is_noisy else "gavel"
        label = f"{num_jobs} {kind}"
        ref: Run | None = None
        if num_jobs <= REFERENCE_MAX_JOBS:
            ref = timed(f"{label} reference", partial(run_formulation, instance, "pyomo"))
        fast = timed(f"{label} fast", partial(run_formulation, instance, "fast"))
        high = timed(f"{label} highspy", partial(run_highspy, instance))
        solver_runs: dict[str, Run | None] = {}
        for solver in ("ECOS", "CLARABEL"):
            prev = last.get((kind, solver))
            growth = num_jobs / prev.jobs if prev is not None else 1.0
            too_long = predicted(prev, growth, CVXPY_BUDGET_S)
            if not with_cvxpy:
                solver_runs[solver] = None
            elif too_long is not None:
                solver_runs[solver] = Run(note=f"skipped (~{too_long:.0f} s)")
            else:
                run = timed(f"{label} cvxpy {solver}", partial(run_cvxpy, instance, solver))
                run.jobs = num_jobs
                solver_runs[solver] = run
                last[(kind, solver)] = run
        ecos, clarabel = solver_runs["ECOS"], solver_runs["CLARABEL"]
        phases = "/".join(fmt(p) for p in ref.phases) if ref and ref.phases else "skipped"
        table.add_row(
            f"{num_jobs}{' noisy' if is_noisy else ''}",
            str(fast.extra.get("classes")),
            phases,
            fmt(ref.seconds) if ref else "-",
            fmt(fast.seconds),
            fmt(fast.phases[1]) if fast.phases else "-",
            str(fast.extra.get("fast_path")),
            fmt(high.seconds),
            cell(ecos), cell(clarabel),
            speedup(ecos, ref), speedup(ecos, fast), speedup(ecos, high),
            agreement(fast.objective, [ref, high, ecos, clarabel]),
        )
    return table


# ------------------------------------------------------------------ table 1b: families

FAMILIES = ("wide", "speedup")
FAMILY_TYPES = ("v100", "p100", "k80")
#: Raw HiGHS interior point is run up to this many jobs (54 s at 10^5 on generator rows).
HIGHS_IPM_MAX_JOBS = 100_000
#: The checker is run up to this many jobs (the certificate's primal side is checked in
#: numpy at every size).
CHECK_MAX_JOBS = 1_000_000


def family_instance(family: str, num_jobs: int, seed: int) -> Instance:
    """One instance of a table-1b family (see the module docstring), every job distinct.

    ``wide``: job type uniform over the shipped table's types measured on one GPU; base row
    T[type, 1, k]; scale factor uniform in {1, 2, 4}; throughput[k] = base[k] x u_k with
    u_k ~ U(1, 4) independent per job and type.  ``speedup``: (job type, scale factor) drawn
    as the package's generator does (Gavel's mix 1/2/4/8 with probabilities
    0.70/0.10/0.15/0.05, type uniform among those measured at that scale factor); throughput
    [k] = T[type, s, k] x g_k with g_k log-uniform in [1/2, 2], independent per job and type.
    Both on J/6 GPUs of each of v100, p100, k80 (at least 8), weight 1, arrival 0.
    """
    rng = np.random.default_rng([seed, FAMILIES.index(family), num_jobs])
    table = load_gavel_throughputs()
    per_type = max(8, num_jobs // 6)
    if family == "wide":
        names = [t for t in table.job_types if table.has(t, 1)]
        rows = np.array([[table.throughput(t, 1).get(k, 0.0) for k in FAMILY_TYPES]
                         for t in names])
        kind = rng.integers(0, len(names), num_jobs)
        scale = rng.choice(np.array([1, 2, 4]), num_jobs)
        thr = rows[kind] * rng.uniform(1.0, 4.0, (num_jobs, len(FAMILY_TYPES)))
    elif family == "speedup":
        combos = [(t, sf) for t, sf in table.combinations()
                  if sf in GAVEL_SCALE_FACTOR_MIX and sf <= per_type]
        factors = sorted({sf for _, sf in combos})
        probs = np.array([GAVEL_SCALE_FACTOR_MIX[sf] for sf in factors])
        scale = rng.choice(np.array(factors), num_jobs, p=probs / probs.sum())
        names, rows_list, kind = [], [], np.zeros(num_jobs, dtype=np.int64)
        for sf in factors:
            measured = [t for t, f in combos if f == sf]
            at = np.flatnonzero(scale == sf)
            pick = rng.integers(0, len(measured), len(at))
            kind[at] = len(names) + pick
            names += measured
            rows_list += [[table.throughput(t, sf).get(k, 0.0) for k in FAMILY_TYPES]
                          for t in measured]
        rows = np.array(rows_list)
        thr = rows[kind] * np.exp(rng.uniform(np.log(0.5), np.log(2.0),
                                              (num_jobs, len(FAMILY_TYPES))))
    else:
        raise ValueError(f"unknown family {family!r}")
    jobs = [{"id": str(j), "job_type": names[kind[j]], "scale_factor": int(scale[j]),
             "throughput": {k: float(v) for k, v in zip(FAMILY_TYPES, thr[j], strict=True)
                            if v > 0}}
            for j in range(num_jobs)]
    document = {
        "schema": "schedlab/instance@1",
        "name": f"{family}-{num_jobs}-seed{seed}",
        "cluster": {"accelerators": {k: {"count": per_type} for k in FAMILY_TYPES}},
        "jobs": jobs,
        "params": {"num_rounds": 0},
    }
    return instance_from_dict(document, source=f"{family}-{num_jobs}-seed{seed}")


def run_fast_checked(instance: Instance) -> Run:
    """:func:`run_formulation` with ``method="fast"``, plus the checker's verdict on the
    Solution (up to :data:`CHECK_MAX_JOBS` jobs; not timed)."""
    formulation = MaxMinFairness(method="fast", num_rounds=0)
    formulation.name = "gavel.max_min_fairness"
    start = time.perf_counter()
    solution = formulation.solve(instance, SolverOptions())
    seconds = time.perf_counter() - start
    t = solution.timings
    run = Run(seconds, solution.objective if solution.status == Status.OPTIMAL else None,
              "" if solution.status == Status.OPTIMAL else solution.status.value,
              (t.build_s, t.solve_s, t.extract_s))
    run.extra = {k: solution.metrics.get(k) for k in ("fast_path", "classes", "iterations",
                                                      "columns")}
    run.extra["gap"] = solution.gap
    run.extra["solution"] = solution
    return run


def family_table(sizes: list[int], seed: int, with_cvxpy: bool,
                 families: tuple[str, ...] = FAMILIES,
                 ipm_max: int = HIGHS_IPM_MAX_JOBS) -> Table:
    """Table 1b: the wide-ratio and table-speed-up families, ours vs ECOS, Clarabel and raw
    HiGHS IPM."""
    table = Table(title="gavel.max_min_fairness, distinct job rows (J/6 GPUs per type)",
                  box=None, show_edge=False)
    for name in ("family", "jobs", "ours", "ours b/s/e", "path", "LPs/free", "gap", "check",
                 "ecos", "clarabel", "highs ipm", "ours/ECOS", "solve/ECOS", "agree"):
        table.add_column(name, justify="right")
    for family in families:
        last: dict[str, Run] = {}
        for num_jobs in sizes:
            log.info("building %s family, %d jobs ...", family, num_jobs)
            instance = family_instance(family, num_jobs, seed)
            label = f"{family} {num_jobs}"
            ours = timed(f"{label} fast", partial(run_fast_checked, instance))
            solution = ours.extra.pop("solution")
            violations = "-"
            if num_jobs <= CHECK_MAX_JOBS and isinstance(solution, Solution):
                found = check(instance, solution)
                violations = "ok" if not found else f"{len(found)} violations"
            others: dict[str, Run | None] = {}
            for solver in ("ECOS", "CLARABEL", "HIGHS_IPM"):
                prev = last.get(solver)
                too_long = predicted(prev, num_jobs / prev.jobs, CVXPY_BUDGET_S) if prev else None
                if solver == "HIGHS_IPM" and num_jobs > ipm_max:
                    others[solver] = Run(note=f"not run above {ipm_max}")
                elif solver != "HIGHS_IPM" and not with_cvxpy:
                    others[solver] = None
                elif too_long is not None:
                    others[solver] = Run(note=f"skipped (~{too_long:.0f} s)")
                else:
                    fn = (partial(run_highspy, instance, "ipm") if solver == "HIGHS_IPM"
                          else partial(run_cvxpy, instance, solver))
                    run = timed(f"{label} {solver}", fn)
                    run.jobs = num_jobs
                    others[solver] = run
                    last[solver] = run
            ecos = others["ECOS"]
            solve_ratio = "-"
            if ecos is not None and ecos.seconds and ours.phases:
                solve_ratio = f"{ours.phases[1] / ecos.seconds:.3g}x"
            gap = ours.extra.get("gap")
            row = (
                family, str(num_jobs), fmt(ours.seconds),
                "/".join(fmt(p) for p in ours.phases) if ours.phases else "-",
                str(ours.extra.get("fast_path")),
                f"{ours.extra.get('iterations')}/{ours.extra.get('columns')}",
                f"{gap:.1e}" if isinstance(gap, float) else "-", violations,
                cell(ecos), cell(others["CLARABEL"]), cell(others["HIGHS_IPM"]),
                ratio(ours, ecos), solve_ratio,
                agreement(ours.objective, list(others.values())),
            )
            table.add_row(*row)
            log.info("row: %s (objective %r)", " | ".join(row), ours.objective)
            progress(f"{label} done: ours/ECOS {row[11]}, agree {row[13]}")
    return table


def ratio(ours: Run, base: Run | None) -> str:
    """t_ours / t_base (below 1: ours is faster), when both reached an optimum."""
    if base is None or base.seconds is None or ours.seconds is None:
        return "-"
    if base.objective is None or ours.objective is None:
        return "-"
    return f"{ours.seconds / base.seconds:.3g}x"


def packed_table(sizes: list[int], noisy_sizes: list[int], seed: int) -> tuple[Table, str]:
    """Table 2: space sharing, every pair co-locatable; returns the table and a summary."""
    table = Table(title="gavel.max_min_fairness_packed (single-GPU jobs, all pairs, J/6 GPUs "
                  "per type)", box=None, show_edge=False)
    for name in ("jobs", "pairs", "classes", "pair classes", "reference b/s/e", "ref",
                 "fast b/s/e", "fast", "path", "iters", "check", "ref/fast", "agree", "load"):
        table.add_column(name, justify="right")
    best = {"reference": 0, "fast": 0}
    previous: dict[str, tuple[Run, int] | None] = {"reference": None, "fast": None}
    cases = [(n, False) for n in sizes] + [(n, True) for n in noisy_sizes]
    for num_jobs, is_noisy in cases:
        cluster = gavel_cluster(num_jobs, 2)
        log.info("generating %d jobs with all %d pairs ...", num_jobs,
                 num_jobs * (num_jobs - 1) // 2)
        instance = generate_gavel_instance(num_jobs, cluster, seed, multi_gpu=False,
                                           colocation=not is_noisy)
        if is_noisy:
            from schedlab.workloads.throughputs import add_colocation

            instance = add_colocation(noisy(instance, seed + 1), seed=seed)
        num_pairs = num_jobs * (num_jobs - 1) // 2
        label = f"{num_jobs} packed{' noisy' if is_noisy else ''}"
        runs: dict[str, Run | None] = {}
        for method, key in (("pyomo", "reference"), ("fast", "fast")):
            # only the reference is skipped on a prediction; the fast path always runs
            prev = previous[key] if key == "reference" and not is_noisy else None
            growth = num_pairs / prev[1] if prev is not None else 1.0
            too_long = predicted(prev[0] if prev else None, growth, 1.5 * PACKED_BUDGET_S)
            if too_long is not None:
                runs[key] = Run(note=f"skipped (~{too_long:.0f} s)")
                continue
            run = timed(f"{label} {key}", partial(run_formulation, instance, method,
                                                  space_sharing=True,
                                                  time_limit=PACKED_BUDGET_S))
            runs[key] = run
            if not is_noisy:
                previous[key] = (run, num_pairs)
                if run.note == "" and run.seconds is not None and run.seconds <= PACKED_BUDGET_S:
                    best[key] = max(best[key], num_jobs)
        ref, fast = runs["reference"], runs["fast"]
        assert fast is not None
        check_cell = "-"
        solution = fast.extra.get("solution")
        if isinstance(solution, Solution) and solution.status.has_solution:
            started = time.perf_counter()
            issues = check(instance, solution)
            check_cell = fmt(time.perf_counter() - started) + (" NO" if issues else "")
        del instance  # up to 4 million co-location entries: free them before the next size

        def phases(run: Run | None) -> str:
            if run is None or run.phases is None:
                return run.note if run is not None else "-"
            return "/".join(fmt(p) for p in run.phases) + (f" {run.note}" if run.note else "")

        table.add_row(
            f"{num_jobs}{' noisy' if is_noisy else ''}", str(num_pairs),
            str(fast.extra.get("classes", "-")), str(fast.extra.get("pair_classes", "-")),
            phases(ref), fmt(ref.seconds) if ref else "-",
            phases(fast), fmt(fast.seconds), str(fast.extra.get("fast_path", "-")),
            str(fast.extra.get("iterations", "-")), check_cell,
            speedup(ref, fast),
            agreement(fast.objective, [ref]),
            f"{os.getloadavg()[0]:.1f}",
        )
    summary = (
        f"largest job count solved to optimality within {PACKED_BUDGET_S:.0f} s "
        f"(build + solve + extract, gavel generator, all pairs): reference {best['reference']}"
        f", fast path {best['fast']}"
    )
    return table, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cvxpy", action="store_true", help="skip cvxpy baselines")
    parser.add_argument("--skip-packed", action="store_true", help="skip space sharing")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="job counts of table 1's generator rows")
    parser.add_argument("--noisy-sizes", type=int, nargs="+", default=None,
                        help="job counts of table 1's noisy rows")
    parser.add_argument("--families-only", action="store_true",
                        help="only table 1b (the wide-ratio and speed-up families)")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES),
                        help="families of table 1b")
    parser.add_argument("--ipm-max", type=int, default=HIGHS_IPM_MAX_JOBS,
                        help="largest job count raw HiGHS IPM runs on in table 1b")
    parser.add_argument("--family-sizes", type=int, nargs="+", default=None,
                        help="job counts of table 1b (default 10^3..10^6; 0: skip it)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s",
                        handlers=[RichHandler(show_path=False, console=Console(stderr=True))])
    logging.getLogger("schedlab").setLevel(logging.WARNING)
    if args.sizes is not None or args.noisy_sizes is not None:
        sizes, noisy_sizes = args.sizes or [], args.noisy_sizes or []
        packed, packed_noisy = [50, 100, 200], [100]
    elif args.quick:
        sizes, noisy_sizes = [100, 1000], [1000]
        packed, packed_noisy = [50, 100, 200], [100]
    else:
        sizes, noisy_sizes = [100, 1000, 10_000, 100_000], [1000, 10_000]
        packed, packed_noisy = [50, 100, 200, 300, 500, 1000, 2000], [100, 300]
    log.info("warming up (imports, first solves)")
    warm_up()
    progress("warm-up done")
    console = Console(width=200)
    header = (
        f"schedlab benchmarks/gavel_scale.py{' --quick' if args.quick else ''}, "
        f"{dt.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, HiGHS "
        f"{highspy.Highs().version()}, cvxpy {cp.__version__}, seed {args.seed}"
    )
    tables = []
    if not args.families_only:
        tables.append(scale_table(sizes, noisy_sizes, args.seed, not args.no_cvxpy))
    family_sizes = args.family_sizes or ([1000, 10_000] if args.quick else
                                         [1000, 10_000, 100_000, 1_000_000])
    if family_sizes != [0]:
        tables.append(family_table(family_sizes, args.seed, not args.no_cvxpy,
                                   tuple(args.families), args.ipm_max))
    summary = ""
    if not args.skip_packed and not args.families_only:
        packed_result, summary = packed_table(packed, packed_noisy, args.seed)
        tables.append(packed_result)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header += f"; load average at the end {load} (the machine is shared: compare within a row)"
    console.print(header)
    for table in tables:
        console.print()
        console.print(table)
    console.print("* cvxpy reported the solution as 'optimal_inaccurate'")
    if summary:
        console.print()
        console.print(summary)


if __name__ == "__main__":
    main()
