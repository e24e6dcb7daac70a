"""Max-min fairness at scale: reference Pyomo model vs the exact fast path vs raw HiGHS vs cvxpy.

Usage::

    python benchmarks/gavel_scale.py            # full run (about 10 minutes on 2 cores)
    python benchmarks/gavel_scale.py --quick    # small sizes only (about a minute)

Workloads come from the package's own generator and throughput table
(:func:`schedlab.workloads.gavel.generate_gavel_instance`, Gavel's measured throughputs),
seed 0, every job arriving at t = 0 with weight 1.

* Table 1, ``gavel.max_min_fairness`` (heterogeneity-aware, no space sharing): J jobs with
  Gavel's scale-factor mix (1, 2, 4, 8 GPUs) on a cluster of J/3 V100 + J/3 P100 + J/3 K80
  (J GPUs for about 1.9 J requested GPUs: every job gets about half its gang's time).
  ``noisy`` rows multiply every throughput by its own U(0.8, 1.2) factor (seeded), so no two
  jobs have equal rows and the fast path cannot aggregate: the non-aggregated path is
  measured honestly.
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

from schedlab.formulations.gavel.data import GavelData, gavel_data
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.gavel import generate_gavel_instance

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


def run_highspy(instance: Instance) -> Run:
    """The LP from arrays, handed to HiGHS directly, with the reference's LP method: dual
    simplex below 2000 jobs, interior point with crossover from 2000 jobs on."""
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
    highs.setOptionValue("solver", "ipm" if len(instance.jobs) >= 2000 else "simplex")
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
    log.info("%s: %s s, objective %s %s", label, fmt(run.seconds), run.objective, run.note)
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


def packed_table(sizes: list[int], noisy_sizes: list[int], seed: int) -> tuple[Table, str]:
    """Table 2: space sharing, every pair co-locatable; returns the table and a summary."""
    table = Table(title="gavel.max_min_fairness_packed (single-GPU jobs, all pairs, J/6 GPUs "
                  "per type)", box=None, show_edge=False)
    for name in ("jobs", "pairs", "classes", "pair classes", "reference b/s/e", "ref",
                 "fast b/s/e", "fast", "path", "iters", "ref/fast", "agree"):
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

        def phases(run: Run | None) -> str:
            if run is None or run.phases is None:
                return run.note if run is not None else "-"
            return "/".join(fmt(p) for p in run.phases) + (f" {run.note}" if run.note else "")

        table.add_row(
            f"{num_jobs}{' noisy' if is_noisy else ''}", str(num_pairs),
            str(fast.extra.get("classes", "-")), str(fast.extra.get("pair_classes", "-")),
            phases(ref), fmt(ref.seconds) if ref else "-",
            phases(fast), fmt(fast.seconds), str(fast.extra.get("fast_path", "-")),
            str(fast.extra.get("iterations", "-")),
            speedup(ref, fast),
            agreement(fast.objective, [ref]),
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
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s",
                        handlers=[RichHandler(show_path=False)])
    logging.getLogger("schedlab").setLevel(logging.WARNING)
    if args.quick:
        sizes, noisy_sizes = [100, 1000], [1000]
        packed, packed_noisy = [50, 100, 200], [100]
    else:
        sizes, noisy_sizes = [100, 1000, 10_000, 100_000], [1000, 10_000]
        packed, packed_noisy = [50, 100, 200, 300, 500, 1000, 2000], [100, 300]
    log.info("warming up (imports, first solves)")
    warm_up()
    console = Console(width=200)
    header = (
        f"schedlab benchmarks/gavel_scale.py{' --quick' if args.quick else ''}, "
        f"{dt.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, HiGHS "
        f"{highspy.Highs().version()}, cvxpy {cp.__version__}, seed {args.seed}"
    )
    tables = [scale_table(sizes, noisy_sizes, args.seed, not args.no_cvxpy)]
    summary = ""
    if not args.skip_packed:
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
