"""POP (k parts, random / balanced / stratified, docs/pop.md) vs the exact solve of Gavel's
max-min LPs, over several seeds.

Usage::

    python benchmarks/pop.py                          # 2048 jobs, fairness seeds 0-9,
                                                      # space sharing seeds 0-2
    python benchmarks/pop.py --quick                  # 256 jobs (packed 96), 3 seeds: ~20 s
    python benchmarks/pop.py --seeds 10 --packed-seeds 10 --out pop.json

It prints one line per solve as it finishes, then the tables; nothing is written unless
``--out FILE`` asks for it.

Instances come from the package's generator and Gavel's measured throughputs
(:func:`schedlab.workloads.gavel.generate_gavel_instance`, arrivals at 0, weight 1); seed s
draws the instance *and* seeds the partition, so a row over seeds varies both:

* ``gavel.max_min_fairness``: J jobs with Gavel's scale-factor mix (1, 2, 4, 8 GPUs) on
  G V100 + G P100 + G K80, G = J/3 rounded down to a multiple of 8 (680 at J = 2048), so
  every k in 1, 2, 4, 8 divides each type's count and every part gets exactly 1/k of it.
* ``gavel.max_min_fairness_packed``: J single-GPU jobs, every pair co-locatable
  (J(J-1)/2 pairs), on J/6 GPUs of each type rounded down to a multiple of 8.

Per seed: ``exact`` is the formulation itself (``method="fast"``, the exact fast path of
docs/fast_paths.md); ``POP k`` is :func:`schedlab.formulations.gavel.pop.solve_pop` with the
parts solved by the same method in 2 worker processes (this machine has 2 cores), once per
partition (k = 1 once: its one part is the whole instance whatever the partition).  The
instance's content hash is taken once before anything is timed (both sides would pay it) and
the checker runs after the timing (every POP solution must pass it against the full instance;
a violation aborts the run).

Printed: for the first seed, every solve side by side (wall s of the whole call, critical
path = partition + slowest part + concatenation, i.e. the time with one worker per part, the
slowest part's own seconds, the objective, ratio POP/exact, the worst and best part's own
optimum / exact, pairs kept); then per (partition, k) over all seeds: the least and mean
ratio, how many seeds reach the 0.99 target and which do not, and the mean exact, POP and
critical-path seconds.  ``--out`` writes every row as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import highspy
from rich.console import Console
from rich.table import Table

from schedlab.check import check
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.formulations.gavel.pop import POP_PARTITIONS, PopPartition, solve_pop
from schedlab.instance import Instance
from schedlab.workloads.gavel import generate_gavel_instance

log = logging.getLogger("pop_benchmark")

PARTITIONS = (1, 2, 4, 8)
TARGET = 0.99
FAIR = "gavel.max_min_fairness"
PACKED = "gavel.max_min_fairness_packed"


@dataclass
class Row:
    """One solve of one seed: wall s, critical path s, slowest part s, objective, ratio to
    the exact optimum, worst / best part's optimum over the exact one, pairs kept / total."""

    problem: str
    seed: int
    label: str
    partition: str
    k: int
    status: str
    seconds: float
    critical_s: float | None
    slowest_part_s: float | None
    objective: float | None
    ratio: float | None
    worst_part: float | None
    best_part: float | None
    pairs_kept: int | None
    pairs_total: int | None


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


def exact_row(instance: Instance, name: str, seed: int) -> Row:
    space_sharing = name == PACKED
    form = MaxMinFairness(method="fast", space_sharing=space_sharing, num_rounds=0)
    form.name = name
    start = time.perf_counter()
    solution = form.solve(instance)
    seconds = time.perf_counter() - start
    pairs = sum(len(job.colocated_throughput or {}) for job in instance.jobs) // 2
    return Row(name, seed, "exact", "-", 0, solution.status.value, seconds, None, None,
               solution.objective, 1.0, None, None,
               pairs if space_sharing else None, pairs if space_sharing else None)


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
        raise RuntimeError(f"POP k={k} ({partition}) violates the instance: {violations[:3]}")
    pop = solution.metrics["pop"]
    objectives = [value for value in pop["objective"] if value is not None]
    return Row(name, seed, f"POP k={k}", partition if k > 1 else "any", k,
               solution.status.value, seconds, pop["critical_path_s"], max(pop["seconds"]),
               solution.objective, pop.get("ratio_to_exact"),
               min(objectives) / exact if exact and objectives else None,
               max(objectives) / exact if exact and objectives else None,
               pop["pairs_kept"] if pop["pairs_total"] else None,
               pop["pairs_total"] or None)


#: when the run started (for the elapsed seconds of the progress lines)
STARTED = time.perf_counter()


def progress(message: str) -> None:
    """One plain line on stdout, flushed, with the seconds since the start."""
    print(f"{message}; elapsed {time.perf_counter() - STARTED:.0f} s", flush=True)


def rows_for(instance: Instance, name: str, seed: int, workers: int,
             kinds: Sequence[PopPartition]) -> list[Row]:
    """The exact row and every POP row of one instance."""
    instance.content_hash()
    exact = exact_row(instance, name, seed)
    progress(f"{name} seed {seed}: exact {exact.seconds:.2f} s, objective "
             f"{fmt(exact.objective, '.6f')}")
    rows = [exact]
    for k in PARTITIONS:
        for partition in kinds if k > 1 else kinds[:1]:
            rows.append(pop_row(instance, name, k, partition, exact.objective, seed, workers))
            progress(f"{name} seed {seed}: POP k={k} {rows[-1].partition}: "
                     f"{rows[-1].seconds:.2f} s, ratio {fmt(rows[-1].ratio, '.4f')}")
    return rows


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def detail_table(title: str, rows: Sequence[Row]) -> Table:
    """Every solve of one seed side by side."""
    exact_s = rows[0].seconds
    table = Table(title=title, title_justify="left")
    for column in ("solve", "partition", "status", "seconds", "critical path s",
                   "slowest part s", "x exact time", "objective", "ratio POP/exact",
                   "worst/best part", "pairs kept"):
        table.add_column(column, justify="left" if column in ("solve", "partition", "status")
                         else "right")
    for row in rows:
        ratio = fmt(row.ratio, ".4f") + ("" if row.ratio is None or row.ratio >= TARGET
                                         else " (<0.99)")
        parts = ("-" if row.worst_part is None or row.best_part is None
                 else f"{row.worst_part:.4f}/{row.best_part:.4f}")
        pairs = "-" if row.pairs_total is None else f"{row.pairs_kept}/{row.pairs_total}"
        table.add_row(row.label, row.partition, row.status, f"{row.seconds:.3g}",
                      fmt(row.critical_s, ".3g"), fmt(row.slowest_part_s, ".3g"),
                      f"{row.seconds / exact_s:.2f}x", fmt(row.objective, ".6f"), ratio,
                      parts, pairs)
    return table


def summary_table(title: str, rows: Sequence[Row]) -> Table:
    """Per (partition, k) over the seeds: least / mean ratio, seeds at the target, times."""
    seeds = sorted({row.seed for row in rows})
    exact_s = statistics.mean(row.seconds for row in rows if row.label == "exact")
    table = Table(title=title, title_justify="left")
    for column in ("solve", "partition", "seeds", "min ratio", "mean ratio", ">= 0.99",
                   "seeds below", "mean exact s", "mean POP s", "mean critical path s"):
        table.add_column(column, justify="left" if column in ("solve", "partition",
                                                               "seeds below") else "right")
    table.add_row("exact", "-", str(len(seeds)), "1", "1", "-", "-", f"{exact_s:.3g}", "-",
                  "-")
    groups: dict[tuple[int, str], list[Row]] = {}
    for row in rows:
        if row.label != "exact":
            groups.setdefault((row.k, row.partition), []).append(row)
    for (k, partition), group in groups.items():
        ratios = [row.ratio for row in group if row.ratio is not None]
        below = [f"{row.seed} ({row.ratio:.4f})" for row in group
                 if row.ratio is not None and row.ratio < TARGET]
        table.add_row(f"POP k={k}", partition, str(len(group)),
                      f"{min(ratios):.4f}" if ratios else "-",
                      f"{statistics.mean(ratios):.4f}" if ratios else "-",
                      f"{len(ratios) - len(below)}/{len(group)}", ", ".join(below) or "none",
                      f"{exact_s:.3g}", f"{statistics.mean(r.seconds for r in group):.3g}",
                      f"{statistics.mean(r.critical_s or 0.0 for r in group):.3g}")
    return table


def run_problem(console: Console, name: str, num_jobs: int, seeds: Sequence[int],
                workers: int, kinds: Sequence[PopPartition]) -> list[Row]:
    rows: list[Row] = []
    describe = ""
    for seed in seeds:
        start = time.perf_counter()
        instance = (packed_instance if name == PACKED else fair_instance)(num_jobs, seed)
        progress(f"{name} seed {seed}: {num_jobs} jobs generated in "
                 f"{time.perf_counter() - start:.1f} s")
        gpus = instance.cluster.accelerators["v100"].count
        describe = (f"{num_jobs} single-GPU jobs, all pairs, {gpus} GPUs of each type"
                    if name == PACKED else
                    f"{num_jobs} jobs (1/2/4/8-GPU mix), {gpus} GPUs of each of v100, p100, k80")
        seed_rows = rows_for(instance, name, seed, workers, kinds)
        if seed == seeds[0]:
            console.print(detail_table(f"{name}: {describe}, seed {seed}", seed_rows))
        rows.extend(seed_rows)
    console.print(summary_table(f"{name}: {describe}; seeds {seeds[0]}-{seeds[-1]} (instance "
                                "and partition)", rows))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="256 jobs, packed 96, 3 seeds each")
    parser.add_argument("--jobs", type=int, default=2048, help="jobs (default 2048)")
    parser.add_argument("--packed-jobs", type=int, default=None,
                        help="jobs of the space-sharing problem (default: --jobs)")
    parser.add_argument("--seeds", type=int, default=10,
                        help="fairness problem: N seeds from --first-seed (default 10)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="first seed of both problems (default 0)")
    parser.add_argument("--packed-seeds", type=int, default=3,
                        help="space-sharing problem: N seeds from --first-seed (default 3: each "
                        "seed solves 2 million pair columns 11 times)")
    parser.add_argument("--partition", choices=POP_PARTITIONS, action="append",
                        help="only these partitions (repeatable; default all)")
    parser.add_argument("--only", choices=("fair", "packed"), help="only one problem")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, help="write every row as JSON to this file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log.setLevel(logging.INFO)
    jobs = 256 if args.quick else args.jobs
    packed_jobs = 96 if args.quick else (args.packed_jobs or jobs)
    seeds = 3 if args.quick else args.seeds
    packed_seeds = 3 if args.quick else args.packed_seeds
    kinds: tuple[PopPartition, ...] = tuple(args.partition or POP_PARTITIONS)

    console = Console(width=200)
    console.print(f"schedlab benchmarks/pop.py, {dt.date.today()}, {platform.machine()}, "
                  f"{os.cpu_count()} cores, Python {platform.python_version()}, HiGHS "
                  f"{highspy.Highs().version()}, {args.workers} workers, load average at "
                  f"the start: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    rows: list[Row] = []
    if args.only in (None, "fair"):
        rows += run_problem(console, FAIR, jobs, range(args.first_seed, args.first_seed + seeds),
                            args.workers, kinds)
    if args.only in (None, "packed"):
        rows += run_problem(console, PACKED, packed_jobs,
                            range(args.first_seed, args.first_seed + packed_seeds),
                            args.workers, kinds)
    console.print(f"load average at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    if args.out:
        args.out.write_text(json.dumps([asdict(row) for row in rows], indent=1))


if __name__ == "__main__":
    main()
