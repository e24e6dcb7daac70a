"""Saturn at scale: time-indexed (default) vs disjunctive MILP on random SPASE instances.

For 8, 16, 32 and 64 jobs on 2 nodes x 8 GPUs (``random_saturn_instance``, a few seeds), solve
each formulation with one time limit (60 s by default) and print one table: status, wall
seconds, makespan, and gaps against bounds that are valid for the *exact* problem:

* own gap: what the method proves by itself: (makespan - its bound) / makespan, where its
  bound is the Solution's ``bound`` (time-indexed: the best of the analytic, assignment,
  energetic-reasoning and rounded-down-grid bounds, see ``schedlab/formulations/saturn/models.py``),
  raised for the disjunctive model to its own proven MILP bound; 0 when ``optimal``;
* best-bound gap: vs the best valid bound found for the instance by any method;
* model gap: the solver's gap on its own model (time-indexed: on the rounded-up grid, not a
  gap of the exact problem).

The targets: 16 jobs, then 32 jobs, proven within 1% in <= 60 s by the default formulation,
where "proven" means own gap <= 1%.  From ``--to-1pct-from`` jobs (default 32) on, a third
method, "time-indexed, stop at 1%" (``TimeIndexed(stop_gap=0.01)``), stops as soon as its own
gap is <= 1%: its wall seconds are the time to a proven 1% (status ``feasible`` then, since
1% is not the MIP tolerance; with a stop gap the solve runs the list search first and ends
there when the cheap assignment bound already proves the gap).  ``--no-list-first`` adds
"time-indexed, stop at 1%, no list first" (``list_first_share=0``: the phase order before
that change), a baseline in the same run.  ``--before`` adds "time-indexed, before list search" (the
defaults before the list search: ``list_search=False``, Benders up to 16 jobs per node), a
baseline in the same run.  The disjunctive model runs up to ``--disjunctive-max-jobs``
(default 32; at 64 jobs its 2 x 32 256 big-M rows per GPU pair take minutes to build and it
proves nothing).  ``load`` is the 1-minute load average after each solve (the machine is
shared; wall-clock limits make results depend on it).  ``--presolve-off`` adds the
time-indexed model solved with HiGHS presolve switched off (already its default; kept for
comparison with older tables).

Run: ``python benchmarks/saturn_scale.py [--time-limit 60] [--sizes 8 16 32 64]
[--seeds 0 1 2]`` (27 solves of up to 60 s each: about 20-25 minutes), or
``python benchmarks/saturn_scale.py --quick`` (8 jobs, seed 0, a 20 s limit: about 10 s once
the compiled search is cached; its first use after an install compiles it, 15-60 s more).
It prints one line per solve as it finishes, then the table; nothing is written to a file.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from schedlab.formulations.saturn.data import lower_bound, saturn_data
from schedlab.registry import get_formulation
from schedlab.solvers import SolverOptions
from schedlab.workloads.saturn import random_saturn_instance


@dataclass(frozen=True)
class Method:
    """A formulation and the solver extras it runs with."""

    label: str
    formulation: str
    extra: tuple[tuple[str, Any], ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()


TIME_INDEXED = Method("time-indexed", "saturn.time_indexed")
DISJUNCTIVE = Method("disjunctive", "saturn.disjunctive")
TIME_INDEXED_NO_PRESOLVE = Method("time-indexed, presolve off", "saturn.time_indexed",
                                  (("presolve", "off"),))
TIME_INDEXED_TO_1PCT = Method("time-indexed, stop at 1%", "saturn.time_indexed",
                              overrides=(("stop_gap", 0.01),))
#: stop at 1% without phase 0 (the list search before any grid model), as before 2026-12:
#: a baseline in the same run for ``--no-list-first``
TIME_INDEXED_TO_1PCT_NO_LIST_FIRST = Method("time-indexed, stop at 1%, no list first",
                                            "saturn.time_indexed",
                                            overrides=(("stop_gap", 0.01),
                                                       ("list_first_share", 0.0)))
#: the defaults before the list search (Benders up to 16 jobs per node), as a baseline run
#: in the same process: on a shared machine only such side-by-side rows compare
TIME_INDEXED_BEFORE = Method("time-indexed, before list search", "saturn.time_indexed",
                             overrides=(("list_search", False),
                                        ("benders_max_jobs_per_node", 16)))


@dataclass(frozen=True)
class Result:
    """One solve."""

    jobs: int
    seed: int
    method: str
    status: str
    wall_s: float
    makespan_s: float
    bound_s: float  # the analytic lower bound LB
    method_bound_s: float  # the Solution's bound (valid for the exact problem)
    model_gap: float | None
    disjunctive_bound_s: float | None
    load: float  # 1-minute load average after the solve

    def exact_gap(self, bound: float) -> float:
        """(makespan - bound) / makespan."""
        return (self.makespan_s - bound) / self.makespan_s


def solve(jobs: int, seed: int, method: Method, time_limit: float) -> Result:
    """Solve one random instance with one method."""
    instance = random_saturn_instance(jobs, nodes=2, gpus_per_node=8, seed=seed)
    formulation = get_formulation(method.formulation, **dict(method.overrides))
    options = SolverOptions(time_limit_s=time_limit, extra=dict(method.extra))
    t0 = time.perf_counter()
    solution = formulation.solve(instance, options)
    wall = time.perf_counter() - t0
    assert solution.objective is not None
    bound = lower_bound(saturn_data(instance))
    model_bound = solution.metrics.get("model_bound")
    disjunctive_bound = (float(model_bound) if method.formulation == "saturn.disjunctive"
                         and model_bound is not None and math.isfinite(model_bound) else None)
    method_bound = max(bound, solution.bound or 0.0)
    return Result(jobs, seed, method.label, solution.status.value, wall, solution.objective,
                  bound, method_bound, solution.metrics.get("model_gap"), disjunctive_bound,
                  os.getloadavg()[0])


def best_bounds(results: list[Result]) -> dict[tuple[int, int], float]:
    """Per instance: max(analytic LB, every method's valid bound)."""
    bounds: dict[tuple[int, int], float] = {}
    for r in results:
        key = (r.jobs, r.seed)
        bounds[key] = max(bounds.get(key, 0.0), r.bound_s, r.method_bound_s,
                          r.disjunctive_bound_s or 0.0)
    return bounds


def own_gap(r: Result) -> float:
    """Gap the method proves by itself: vs its Solution's bound (valid for the exact
    problem), raised to the disjunctive model's own MILP bound."""
    if r.status == "optimal":
        return 0.0
    return max(0.0, r.exact_gap(max(r.method_bound_s, r.disjunctive_bound_s or 0.0)))


def proven(r: Result) -> bool:
    """Proven within 1% of the exact optimum by the method itself."""
    return own_gap(r) <= 0.01 + 1e-12


def render(results: list[Result], time_limit: float) -> Table:
    """One row per solve, then a summary row per size and method."""
    bounds = best_bounds(results)
    table = Table(title=f"Saturn scale: random SPASE instances, 2 nodes x 8 GPUs, "
                        f"time limit {time_limit:g} s per solve", title_justify="left")
    for name in ("jobs", "seed", "method", "status", "wall s", "makespan s", "own gap %",
                 "best bound s", "best-bound gap %", "model gap %", "proven <= 1%", "load"):
        table.add_column(name, justify="left" if name in ("method", "status") else "right")
    for r in results:
        bound = bounds[r.jobs, r.seed]
        table.add_row(str(r.jobs), str(r.seed), r.method, r.status, f"{r.wall_s:.1f}",
                      f"{r.makespan_s:,.1f}", f"{100 * own_gap(r):.2f}", f"{bound:,.1f}",
                      f"{100 * max(0.0, r.exact_gap(bound)):.2f}",
                      "-" if r.model_gap is None else f"{100 * r.model_gap:.2f}",
                      "yes" if proven(r) else "no", f"{r.load:.1f}")
    table.add_section()
    for jobs in sorted({r.jobs for r in results}):
        for method in dict.fromkeys(r.method for r in results):
            group = [r for r in results if r.jobs == jobs and r.method == method]
            if not group:
                continue
            best = [max(0.0, r.exact_gap(bounds[r.jobs, r.seed])) for r in group]
            table.add_row(
                str(jobs), "median", method,
                f"{sum(r.status == 'optimal' for r in group)}/{len(group)} optimal",
                f"{statistics.median(r.wall_s for r in group):.1f}", "",
                f"{100 * statistics.median(own_gap(r) for r in group):.2f}", "",
                f"{100 * statistics.median(best):.2f}", "",
                f"{sum(proven(r) for r in group)}/{len(group)}",
                f"{statistics.median(r.load for r in group):.1f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds per solve (default 60; --quick: 20)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="job counts (default 8 16 32 64; --quick: 8)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="instance seeds (default 0 1 2; --quick: 0)")
    parser.add_argument("--quick", action="store_true",
                        help="8 jobs, seed 0, 20 s per solve")
    parser.add_argument("--presolve-off", action="store_true",
                        help="also solve the time-indexed model with HiGHS presolve off")
    parser.add_argument("--to-1pct-from", type=int, default=32,
                        help="from this many jobs on, also solve with stop_gap = 1%%")
    parser.add_argument("--disjunctive-max-jobs", type=int, default=32,
                        help="the disjunctive model only up to this many jobs")
    parser.add_argument("--before", action="store_true",
                        help="also solve with the defaults before the list search (baseline)")
    parser.add_argument("--no-list-first", action="store_true",
                        help="also stop at 1%% without the list search first (baseline)")
    args = parser.parse_args()
    if args.time_limit is None:
        args.time_limit = 20.0 if args.quick else 60.0
    if args.sizes is None:
        args.sizes = [8] if args.quick else [8, 16, 32, 64]
    if args.seeds is None:
        args.seeds = [0] if args.quick else [0, 1, 2]

    def methods(jobs: int) -> list[Method]:
        return ([TIME_INDEXED]
                + ([TIME_INDEXED_TO_1PCT] if jobs >= args.to_1pct_from else [])
                + ([TIME_INDEXED_TO_1PCT_NO_LIST_FIRST]
                   if args.no_list_first and jobs >= args.to_1pct_from else [])
                + ([TIME_INDEXED_BEFORE] if args.before else [])
                + ([DISJUNCTIVE] if jobs <= args.disjunctive_max_jobs else [])
                + ([TIME_INDEXED_NO_PRESOLVE] if args.presolve_off else []))

    runs = [(n, s, m) for n in args.sizes for s in args.seeds for m in methods(n)]
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 160)
    results: list[Result] = []
    started = time.perf_counter()
    for number, (jobs, seed, method) in enumerate(runs, 1):
        r = solve(jobs, seed, method, args.time_limit)
        results.append(r)
        print(f"[{number}/{len(runs)}] {jobs} jobs, seed {seed}, {method.label}: {r.status}, "
              f"{r.wall_s:.1f} s, makespan {r.makespan_s:,.1f} s, own gap "
              f"{100 * own_gap(r):.2f}%, load {r.load:.1f}; elapsed "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    print(flush=True)
    console.print(render(results, args.time_limit))
    console.print(f"{datetime.date.today().isoformat()}, Python {platform.python_version()}, "
                  f"{platform.machine()}, {os.cpu_count()} cores, HiGHS via Pyomo; one solve "
                  f"at a time; load average at the end {os.getloadavg()[0]:.1f}.")


if __name__ == "__main__":
    main()
