"""Hare at scale: hare.lp_bound and hare.greedy on 100-300 jobs, and hare.exact (CP-SAT) from
a handful of tasks to the 160-GPU cluster.

    python benchmarks/hare_scale.py                       # every section, budget 60 s
    python benchmarks/hare_scale.py --budget 20           # anytime runs stopped after 20 s
    python benchmarks/hare_scale.py --sections proof      # one section (lp, proof, ladder,
                                                          # anytime)

Nothing here asserts a timing; each row's baseline runs in the same process, and the ratios
are printed beside it.

**lp** -- :func:`schedlab.workloads.hare.generate_hare_instance` (its default cluster: 64 K80
+ 48 P100 + 48 V100 = 160 GPUs; batch arrivals; Hare-style switch costs; seed 0 unless
``--seed``): for each of ``--sizes`` the LP once (build + solve seconds, its optimum), the
greedy on the LP's order (the greedy's own seconds without the LP), greedy / bound on
sum_j w_j C_j and the weighted JCT.  Target: 300 jobs, greedy + bound <= 30 s.

**proof** -- time to a proof on small instances: ``generate_hare_instance(J, seed=s,
cluster={k80: 2, p100: 1, v100: 1}, rounds=(1, 3), tasks_per_round={1, 2, 4},
switch="default")`` (cold-restart switch costs of seconds) for s = 0, 1, ... and J = 2..6,
keeping those of at most 14 tasks, the first ``--proof-count`` of them (default 20); each
solved by hare.exact on one CP-SAT worker and by hare.exact_milp on one HiGHS thread, both
with a ``--proof-limit`` (default 10 s).  Per instance: tasks, seconds and status of each,
ratio MILP / CP-SAT; then the proven share, median and largest time to proof of each.

**ladder** -- the largest size proven within ``--ladder-limit`` (default 60 s, one CP-SAT
worker): ``--ladder-count`` (default 2) instances of the same generator with exactly 14, 16,
18, 20, 24, 28 and 32 tasks (the first seeds and job counts that give that many), size by
size until none of a size is proven.

**anytime** -- the incumbent after ``--budget`` seconds (default 60; CP-SAT's default
workers) against hare.greedy and hare.lp_bound (the greedy's LP, solved in the same run):
``generate_hare_instance`` with 4 and 8 jobs on 2 K80 + 2 P100 + 2 V100 (``--mid-sizes``),
and ``--sizes`` jobs on the 160 GPUs (the Hare table's size; there the circuit model would
have ~10^9 arcs, beyond ``MAX_ARCS``: hare.exact returns the greedy schedule, ``feasible``,
and says so).  Columns: greedy and CP-SAT sum_j w_j C_j, the bound hare.exact reports, the
LP bound, CP-SAT / greedy, CP-SAT / LP, status, seconds, and the fallback reason if any.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

from schedlab.formulations.hare.exact import Exact
from schedlab.formulations.hare.exact_cpsat import ExactCpsat
from schedlab.formulations.hare.greedy import HareGreedy
from schedlab.instance import Instance
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.hare import generate_hare_instance

log = logging.getLogger("hare_scale")

#: The small instances' cluster (proof and ladder sections).
SMALL_CLUSTER = {"k80": 2, "p100": 1, "v100": 1}
#: The mid-size cluster of the anytime section.
MID_CLUSTER = {"k80": 2, "p100": 2, "v100": 2}
LADDER = (14, 16, 18, 20, 24, 28, 32)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def num_tasks(instance: Instance) -> int:
    return sum((j.rounds or 0) * (j.tasks_per_round or 0) for j in instance.jobs)


def small_instance(jobs: int, seed: int) -> Instance:
    return generate_hare_instance(jobs, seed=seed, cluster=SMALL_CLUSTER, rounds=(1, 3),
                                  tasks_per_round={1: 1.0, 2: 1.0, 4: 1.0}, switch="default")


def small_instances(max_tasks: int) -> Iterator[Instance]:
    """The proof section's instances, in (seed, jobs) order."""
    seed = 0
    while True:
        for jobs in range(2, 7):
            instance = small_instance(jobs, seed)
            if num_tasks(instance) <= max_tasks:
                yield instance
        seed += 1


def instances_with_tasks(target: int, count: int) -> list[Instance]:
    """The first ``count`` instances of the generator (seeds 0, 1, ...; 3..9 jobs) with
    exactly ``target`` tasks."""
    found: list[Instance] = []
    for seed in range(500):
        for jobs in range(3, 10):
            instance = small_instance(jobs, seed)
            if num_tasks(instance) == target:
                found.append(instance)
                if len(found) == count:
                    return found
    return found


# ------------------------------------------------------------------------------- sections


def section_lp(sizes: list[int], seed: int, eps: float) -> None:
    emit(f"{'jobs':>5} {'GPUs':>5} {'tasks':>6} {'LP s':>7} {'greedy s':>9} {'total s':>8} "
         f"{'bound':>12} {'greedy':>12} {'ratio':>6} {'trivial':>12} {'wJCT':>12}")
    for n in sizes:
        instance = generate_hare_instance(n, seed=seed)
        t0 = time.perf_counter()
        solution = HareGreedy(eps=eps).solve(instance)
        total = time.perf_counter() - t0
        emit(f"{n:>5} {instance.cluster.total_gpus:>5} {num_tasks(instance):>6} "
             f"{solution.metrics['lp_s']:>7.2f} {solution.metrics['greedy_s']:>9.2f} "
             f"{total:>8.2f} {solution.bound or float('nan'):>12.6g} "
             f"{solution.objective or float('nan'):>12.6g} "
             f"{solution.metrics.get('bound_ratio', float('nan')):>6.3f} "
             f"{solution.metrics['trivial_bound']:>12.6g} "
             f"{solution.metrics['weighted_jct']:>12.6g}")


def _timed(method: Any, instance: Instance, options: SolverOptions) -> tuple[Solution, float]:
    t0 = time.perf_counter()
    solution = method.solve(instance, options)
    return solution, time.perf_counter() - t0


def section_proof(count: int, limit: float) -> None:
    one = SolverOptions(threads=1, time_limit_s=limit)
    emit(f"time to proof, <= 14 tasks on {SMALL_CLUSTER}, limit {limit:g} s, one worker/thread")
    emit(f"{'#':>3} {'jobs':>4} {'tasks':>5} {'cpsat s':>8} {'status':>10} {'milp s':>8} "
         f"{'status':>10} {'milp/cpsat':>10} {'objective':>12} {'agree':>6}")
    cp_times: list[float] = []
    milp_times: list[float] = []
    tasks_of: list[int] = []
    for i, instance in zip(range(count), small_instances(14), strict=False):
        cp, cp_s = _timed(ExactCpsat(), instance, one)
        milp, milp_s = _timed(Exact(), instance, one)
        both = cp.status == milp.status == Status.OPTIMAL
        agree = (abs((cp.objective or 0) - (milp.objective or 0))
                 <= 1e-6 * abs(cp.objective or 1)) if both else None
        cp_times.append(cp_s if cp.status == Status.OPTIMAL else float("inf"))
        milp_times.append(milp_s if milp.status == Status.OPTIMAL else float("inf"))
        tasks_of.append(num_tasks(instance))
        emit(f"{i:>3} {len(instance.jobs):>4} {tasks_of[-1]:>5} {cp_s:>8.2f} "
             f"{cp.status.value:>10} {milp_s:>8.2f} {milp.status.value:>10} "
             f"{milp_s / cp_s:>10.2f} {cp.objective or float('nan'):>12.6g} "
             f"{'-' if agree is None else ('yes' if agree else 'NO'):>6}")
    for name, times in (("cpsat", cp_times), ("milp", milp_times)):
        proven = [t for t in times if t != float("inf")]
        biggest = max((n for n, t in zip(tasks_of, times, strict=True) if t != float("inf")),
                      default=0)
        emit(f"{name}: proven {len(proven)}/{len(times)} within {limit:g} s; time to proof "
             f"median {statistics.median(times):.2f} s (unproven counted as inf), largest "
             f"proven {max(proven, default=float('nan')):.2f} s; largest proven instance "
             f"{biggest} tasks")


def section_ladder(limit: float, count: int) -> None:
    one = SolverOptions(threads=1, time_limit_s=limit)
    emit(f"largest proven within {limit:g} s (one CP-SAT worker), {SMALL_CLUSTER}, "
         f"{count} instance(s) per size")
    emit(f"{'tasks':>5} {'jobs':>4} {'seconds':>8} {'status':>10} {'objective':>12} "
         f"{'bound':>12} {'gap':>8}")
    largest = 0
    for target in LADDER:
        proven = 0
        for instance in instances_with_tasks(target, count):
            sol, seconds = _timed(ExactCpsat(), instance, one)
            emit(f"{target:>5} {len(instance.jobs):>4} {seconds:>8.2f} {sol.status.value:>10} "
                 f"{sol.objective or float('nan'):>12.6g} {sol.bound or float('nan'):>12.6g} "
                 f"{sol.gap if sol.gap is not None else float('nan'):>8.4f}")
            proven += sol.status == Status.OPTIMAL
        if not proven:
            break
        largest = target
    emit(f"largest size with a proof: {largest} tasks")


def section_anytime(mid_sizes: list[int], sizes: list[int], budget: float, seed: int,
                    threads: int | None) -> None:
    emit(f"anytime: hare.exact after {budget:g} s (threads {threads or 'CP-SAT default'}) vs "
         "hare.greedy vs the LP bound")
    emit(f"{'jobs':>5} {'GPUs':>5} {'tasks':>6} {'greedy':>12} {'cpsat':>12} {'bound':>12} "
         f"{'LP':>12} {'cp/greedy':>9} {'cp/LP':>7} {'status':>10} {'greedy s':>8} "
         f"{'cpsat s':>8}  fallback")
    runs = [(n, MID_CLUSTER) for n in mid_sizes] + [(n, None) for n in sizes]
    for n, cluster in runs:
        instance = generate_hare_instance(n, seed=seed, cluster=cluster)
        greedy, greedy_s = _timed(HareGreedy(), instance, SolverOptions())
        cp, cp_s = _timed(ExactCpsat(), instance,
                          SolverOptions(time_limit_s=budget, threads=threads))
        lp = greedy.bound or float("nan")
        g_obj = greedy.objective or float("nan")
        c_obj = cp.objective or float("nan")
        emit(f"{n:>5} {instance.cluster.total_gpus:>5} {num_tasks(instance):>6} {g_obj:>12.6g} "
             f"{c_obj:>12.6g} {cp.bound or float('nan'):>12.6g} {lp:>12.6g} "
             f"{c_obj / g_obj:>9.4f} {c_obj / lp:>7.4f} {cp.status.value:>10} "
             f"{greedy_s:>8.2f} {cp_s:>8.2f}  {cp.metrics.get('fallback', '')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=["lp", "proof", "ladder", "anytime"],
                        choices=["lp", "proof", "ladder", "anytime"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 300])
    parser.add_argument("--mid-sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eps", type=float, default=0.25)
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds of each anytime hare.exact run (default 60)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CP-SAT workers of the anytime runs (default: CP-SAT's)")
    parser.add_argument("--proof-count", type=int, default=20)
    parser.add_argument("--proof-limit", type=float, default=10.0)
    parser.add_argument("--ladder-limit", type=float, default=60.0)
    parser.add_argument("--ladder-count", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    emit(f"schedlab benchmarks/hare_scale.py, {platform.machine()}, {os.cpu_count()} cores, "
         f"Python {platform.python_version()}; load average {load}")
    t0 = time.perf_counter()
    if "lp" in args.sections:
        section_lp(args.sizes, args.seed, args.eps)
    if "proof" in args.sections:
        section_proof(args.proof_count, args.proof_limit)
    if "ladder" in args.sections:
        section_ladder(args.ladder_limit, args.ladder_count)
    if "anytime" in args.sections:
        section_anytime(args.mid_sizes, args.sizes, args.budget, args.seed, args.threads)
    emit(f"total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
