"""POP (k random or balanced parts, docs/pop.md) vs the exact solve of Gavel's max-min LPs.

Usage::

    python benchmarks/pop.py                        # 2048 jobs; space sharing at --packed-jobs
    python benchmarks/pop.py --quick                # 256 jobs, packed 96: under a minute
    python benchmarks/pop.py --packed-jobs 2048     # space sharing at the full size too

Instances come from the package's generator and Gavel's measured throughputs
(:func:`schedlab.workloads.gavel.generate_gavel_instance`, seed 0, arrivals at 0, weight 1):

* ``gavel.max_min_fairness``: J jobs with Gavel's scale-factor mix (1, 2, 4, 8 GPUs) on
  G V100 + G P100 + G K80, G = J/3 rounded down to a multiple of 8 (680 at J = 2048), so
  every k in 1, 2, 4, 8 divides each type's count and every part gets exactly 1/k of it.
* ``gavel.max_min_fairness_packed``: J single-GPU jobs, every pair co-locatable
  (J(J-1)/2 pairs), on J/6 GPUs of each type rounded down to a multiple of 8.

Rows: ``exact`` is the formulation itself (``method="fast"``, the exact fast path of
docs/fast_paths.md); ``k = 1 .. 8`` are :func:`schedlab.formulations.gavel.pop.solve_pop`
with the parts solved by the same method, 2 worker processes (this machine has 2 cores),
once with the ``random`` partition and once with the ``balanced`` one (same seed).
The instance's content hash is taken once before anything is timed (both sides would pay it
for the same instance) and the checker runs after the timing (every POP solution must pass
it against the full instance; a violation aborts the run).  Columns: wall seconds of the
whole call; ``critical path`` = partition + slowest part + concatenation (the time with one
worker per part); the objective (the least normalized throughput over all J jobs, evaluated
on the full instance); ``ratio`` = POP / exact (the acceptance target is >= 0.99); the
worst and best part's own optimum / exact (the parts get exactly 1/k of every type, so each
part's optimum uses the full problem's normalization; the worst part is the POP objective);
pairs kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import time
from dataclasses import dataclass

import highspy
from rich.console import Console
from rich.table import Table

from schedlab.check import check
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.formulations.gavel.pop import PopPartition, solve_pop
from schedlab.instance import Instance
from schedlab.solution import Solution
from schedlab.workloads.gavel import generate_gavel_instance

log = logging.getLogger("pop_benchmark")

PARTITIONS = (1, 2, 4, 8)
PARTITION_KINDS: tuple[PopPartition, ...] = ("random", "balanced")
TARGET = 0.99


@dataclass
class Row:
    """One solve: label, wall s, critical path s, objective, ratio, pairs kept / total."""

    label: str
    partition: str
    seconds: float
    critical_s: float | None
    objective: float | None
    ratio: float | None
    parts: str
    status: str
    pairs: str


def per_type(count: float) -> int:
    """``count`` rounded down to a multiple of 8 (at least 8)."""
    return max(8, int(count) // 8 * 8)


def fair_instance(num_jobs: int, seed: int) -> Instance:
    gpus = per_type(num_jobs / 3)
    return generate_gavel_instance(num_jobs, {"v100": gpus, "p100": gpus, "k80": gpus}, seed)


def packed_instance(num_jobs: int, seed: int) -> Instance:
    gpus = per_type(num_jobs / 6)
    return generate_gavel_instance(num_jobs, {"v100": gpus, "p100": gpus, "k80": gpus}, seed,
                                   multi_gpu=False, colocation=True)


def exact_row(instance: Instance, name: str, space_sharing: bool) -> tuple[Row, Solution]:
    form = MaxMinFairness(method="fast", space_sharing=space_sharing, num_rounds=0)
    form.name = name
    start = time.perf_counter()
    solution = form.solve(instance)
    seconds = time.perf_counter() - start
    pairs = sum(len(job.colocated_throughput or {}) for job in instance.jobs) // 2
    return Row("exact", "-", seconds, None, solution.objective, 1.0, "-",
               solution.status.value,
               f"{pairs}/{pairs}" if space_sharing else "-"), solution


def pop_row(instance: Instance, name: str, k: int, partition: PopPartition,
            exact: float | None, seed: int, workers: int) -> Row:
    start = time.perf_counter()
    solution = solve_pop(instance, name, k, seed=seed, partition=partition,
                         workers=workers, num_rounds=0,
                         exact_objective=exact, run_check=False,
                         overrides={"method": "fast"})
    seconds = time.perf_counter() - start
    violations = check(instance, solution) if solution.status.has_solution else []
    if violations:
        raise RuntimeError(f"POP k={k} violates the instance: {violations[:3]}")
    pop = solution.metrics["pop"]
    pairs = f"{pop['pairs_kept']}/{pop['pairs_total']}" if pop["pairs_total"] else "-"
    objectives = [value for value in pop["objective"] if value is not None]
    spread = (f"{min(objectives) / exact:.4f}/{max(objectives) / exact:.4f}"
              if exact and objectives else "-")
    return Row(f"POP k={k}", partition, seconds, pop["critical_path_s"], solution.objective,
               pop.get("ratio_to_exact"), spread, solution.status.value, pairs)


def table_for(title: str, instance: Instance, name: str, space_sharing: bool, seed: int,
              workers: int) -> Table:
    log.info("%s: hashing the instance (%d jobs)", name, len(instance.jobs))
    instance.content_hash()
    log.info("%s: exact solve", name)
    exact, solution = exact_row(instance, name, space_sharing)
    rows = [exact]
    for partition in PARTITION_KINDS:
        for k in PARTITIONS:
            log.info("%s: POP k=%d %s", name, k, partition)
            rows.append(pop_row(instance, name, k, partition, solution.objective, seed,
                                workers))
    table = Table(title=title, title_justify="left")
    for column in ("solve", "partition", "status", "seconds", "critical path s", "objective",
                   "ratio POP/exact", "worst/best part", "x exact time", "pairs kept"):
        table.add_column(column, justify="left" if column in ("solve", "partition", "status")
                         else "right")
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.4f}" + (
            "" if row.ratio >= TARGET else " (<0.99)")
        table.add_row(row.label, row.partition, row.status, f"{row.seconds:.3g}",
                      "-" if row.critical_s is None else f"{row.critical_s:.3g}",
                      "-" if row.objective is None else f"{row.objective:.6f}", ratio,
                      row.parts,
                      f"{row.seconds / exact.seconds:.2f}x", row.pairs)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="256 jobs, packed 96")
    parser.add_argument("--jobs", type=int, default=2048, help="jobs (default 2048)")
    parser.add_argument("--packed-jobs", type=int, default=None,
                        help="jobs of the space-sharing table (default: --jobs)")
    parser.add_argument("--seed", type=int, default=0, help="instance and partition seed")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log.setLevel(logging.INFO)
    jobs = 256 if args.quick else args.jobs
    packed_jobs = 96 if args.quick else (args.packed_jobs or jobs)

    console = Console(width=160)
    console.print(f"schedlab benchmarks/pop.py, {dt.date.today()}, {platform.machine()}, "
                  f"{os.cpu_count()} cores, Python {platform.python_version()}, HiGHS "
                  f"{highspy.Highs().version()}, seed {args.seed}, {args.workers} workers")
    instance = fair_instance(jobs, args.seed)
    gpus = instance.cluster.accelerators["v100"].count
    console.print(table_for(f"gavel.max_min_fairness: {jobs} jobs (1/2/4/8-GPU mix), {gpus} "
                            "GPUs of each of v100, p100, k80", instance,
                            "gavel.max_min_fairness", False, args.seed, args.workers))
    start = time.perf_counter()
    packed = packed_instance(packed_jobs, args.seed)
    log.info("generated the packed instance in %.1f s", time.perf_counter() - start)
    gpus = packed.cluster.accelerators["v100"].count
    note = "" if packed_jobs == jobs else f" (not {jobs}: see --packed-jobs)"
    console.print(table_for(f"gavel.max_min_fairness_packed: {packed_jobs} single-GPU jobs"
                            f"{note}, all pairs, {gpus} GPUs of each type", packed,
                            "gavel.max_min_fairness_packed", True, args.seed, args.workers))
    console.print(f"load average at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
