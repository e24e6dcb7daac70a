"""Per-round decision time of the two goodput policies: Sia's round ILP and Pollux's NSGA-II
search, on seeded synthetic rounds, beside the per-round times the Sia paper quotes.

Usage::

    python benchmarks/goodput_policies.py            # 64 and 512 GPUs, 7 rounds per row
    python benchmarks/goodput_policies.py --quick    # 64 GPUs only, 2 rounds per row

It prints one line per timed round as it finishes (its seconds and the seconds since the
start), then the two tables; nothing is written.  Nothing here asserts a timing.

**Sia** (:func:`~schedlab.formulations.sia.ilp.solve_sia_ilp`, HiGHS through the matrix
model, presolve off as the policy runs it).  Configurations from
:func:`~schedlab.formulations.sia.configs.sia_configs`: 64 GPUs = Sia's default cluster
(aws 6 x 4, dgx-ext 2 x 8, rtx 3 x 8; 19 columns) and 512 GPUs = the same types with 8 times
the nodes (aws 48 x 4, dgx-ext 16 x 8, rtx 24 x 8), configurations capped at Sia's largest
profiled node counts (aws 16, dgx-ext 2, rtx 3: 29 columns); 100 and 1000 jobs.  Each round
is drawn with ``numpy.random.default_rng(seed)`` (seed = the round's index), the goodput
matrix G built directly as :func:`~schedlab.formulations.sia.matrix.goodput_matrix` would
lay it out (float32, floor 1e-4):

* 30 % of the jobs never ran: G = 1 at each type's 1-GPU column, 1e-4 elsewhere;
* the others: max replicas one of 8, 16, 32, 64 (shared across types, as the paper's runs);
  on every column of type t with at most that many GPUs, g = s_t k^e with k the GPUs,
  e ~ U(0.6, 0.95) per job and the per-type speed s_t = 1 (aws), 6.9 (dgx-ext), 2.3 (rtx)
  times a per-job U(0.8, 1.25) factor; a multi-node column is multiplied by 0.9; then the
  row is divided by its smallest valid entry; 1e-4 on the columns above max replicas;
* 30 % of the jobs that ran have a previous configuration (drawn among their valid columns,
  greedily kept within each type's capacity, so the previous allocation is feasible) and a
  re-allocation factor r ~ U(0.5, 1); 10 % of those (at least one) are locked
  (checkpoint-restore in progress).

Each round is solved with the default options (relative gap 1e-4, the authors' CBC setting)
and with ``tie_break=True`` (two stages, gap 0).  Time = wall seconds of the
``solve_sia_ilp`` call (utilities, model build and every solve); building G from goodput
models (``goodput_matrix``) and the placement are not in it; one small untimed solve comes
first, so no row pays for loading HiGHS.  Baseline of the ratios:
64 GPUs x 100 jobs, default options, its median.

**Pollux** (:func:`~schedlab.formulations.pollux.search.pollux_search`, the full budget:
population 100, 100 generations) on 64 GPUs (16 nodes x 4) with 20 and 40 jobs.  Each job
has a :class:`~schedlab.world.goodput.GoodputModel` with PerfParams drawn around the
test models' (alpha_c ~ U(0.05, 0.2), beta_c ~ U(0.002, 0.02), alpha_n ~ U(0.2, 2),
beta_n ~ U(0.01, 0.5), alpha_r ~ U(0.05, 0.3), beta_r ~ U(0.005, 0.1), gamma ~ U(1.2, 3);
sqr = 1, var ~ U(0.5, 20); initial batch 128, max batch 4096, atomic batch 32-256), except
20 % with no model yet (linear speedup), max replicas one of 8, 16, 32, 64.  A chain of 5
rounds 60 s apart, as the policy runs them: jobs ordered least attained service first,
fair-share speedups rebuilt every round (so the speedup table is refilled: its goodput
optimisations are part of the round), the base state the previous round's choice, a
restart counted when a job's row changed, and from round 2 on the previous round's front
carried with :func:`~schedlab.formulations.pollux.search.carry_front` (by position, the
authors' default).  Time = wall seconds of ``fair_share_speedups`` + ``carry_front`` +
``pollux_search``.  Full: 2 chains (seeds 0, 1) = 10 rounds per size; ``--quick``: one
chain of 2 rounds.  Baseline of the ratios: 20 jobs, its median.

**The paper's numbers** (Sia, SOSP'23, §5.6, on its traces, 64 GPUs): Sia median 96 ms, p95
426 ms per round; Pollux median 2.2 s, p95 4.8 s.  Ours gives the maximum over few rounds,
not a p95; the inputs are synthetic, the machine another one -- compare orders of magnitude.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from schedlab.formulations.pollux import (
    JobGoodput,
    PolluxJob,
    carry_front,
    fair_share_speedups,
    pollux_job_order,
    pollux_search,
)
from schedlab.formulations.sia import (
    ConfigSet,
    SiaProblem,
    sia_configs,
    sia_problem,
    solve_sia_ilp,
)
from schedlab.world.goodput import GoodputModel, GradParams, PerfParams

#: Sia's default cluster, type -> (nodes, GPUs per node): 64 GPUs.
CLUSTER_64 = {"aws": (6, 4), "dgx-ext": (2, 8), "rtx": (3, 8)}
#: Per-type speed of a job on one GPU relative to aws (the brief's factors).
TYPE_SPEED = {"aws": 1.0, "dgx-ext": 6.9, "rtx": 2.3}
SIA_SIZES = ((64, 100), (64, 1000), (512, 100), (512, 1000))
POLLUX_JOBS = (20, 40)
POLLUX_NODES, POLLUX_GPUS_PER_NODE = 16, 4
ROUND_S = 60.0
#: Sia §5.6: (median, p95) seconds per round at 64 GPUs, on the paper's traces.
PAPER = {"sia": (0.096, 0.426), "pollux": (2.2, 4.8)}

START = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - START


# ---------------------------------------------------------------------------------- Sia


def cluster(gpus: int) -> dict[str, tuple[int, int]]:
    """Sia's default cluster (64 GPUs) or the same types with gpus / 64 times the nodes."""
    factor = gpus // 64
    return {t: (n * factor, r) for t, (n, r) in CLUSTER_64.items()}


def sia_round(configs: ConfigSet, num_jobs: int, seed: int) -> SiaProblem:
    """One round's ILP input (module docstring)."""
    rng = np.random.default_rng(seed)
    n_cols = len(configs)
    gpus, nodes = configs.column_gpus, configs.column_nodes
    speed = np.array([TYPE_SPEED[configs.types[t]] for t in configs.column_type])
    matrix = np.full((num_jobs, n_cols), 1e-4, dtype=np.float32)
    never_ran = rng.random(num_jobs) < 0.3
    max_replicas = rng.choice([8, 16, 32, 64], size=num_jobs)
    for i in range(num_jobs):
        if never_ran[i]:
            matrix[i, gpus == 1] = 1.0
            continue
        valid = gpus <= max_replicas[i]
        exponent = rng.uniform(0.6, 0.95)
        job_speed = speed * rng.uniform(0.8, 1.25, size=len(configs.types))[configs.column_type]
        raw = job_speed * gpus.astype(float) ** exponent * np.where(nodes > 1, 0.9, 1.0)
        matrix[i, valid] = (raw[valid] / raw[valid].min()).astype(np.float32)
    # previous configurations: 30 % of the jobs that ran, kept within each type's capacity
    free = configs.capacity.astype(np.int64).copy()
    previous: list[int | None] = [None] * num_jobs
    realloc = np.ones(num_jobs)
    ran = np.flatnonzero(~never_ran)
    for i in rng.permutation(ran)[: round(0.3 * len(ran))]:
        valid = np.flatnonzero(gpus <= max_replicas[i])
        column = int(rng.choice(valid))
        if gpus[column] <= free[configs.column_type[column]]:
            free[configs.column_type[column]] -= gpus[column]
            previous[i] = column
            realloc[i] = rng.uniform(0.5, 1.0)
    with_previous = [i for i, c in enumerate(previous) if c is not None]
    locked = [False] * num_jobs
    for i in rng.permutation(with_previous)[: max(1, round(0.1 * len(with_previous)))]:
        locked[int(i)] = True
    return sia_problem(configs, [f"job-{seed}-{i}" for i in range(num_jobs)], matrix,
                       realloc=realloc.tolist(), previous=previous, locked=locked)


@dataclass
class Timings:
    """Seconds per round of one row, and what the rounds said."""

    label: str
    seconds: list[float] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)


def run_sia(rounds: int, quick: bool) -> list[Timings]:
    rows: list[Timings] = []
    for gpus, num_jobs in SIA_SIZES:
        if quick and gpus != 64:
            continue
        configs = sia_configs(cluster(gpus))
        default = Timings(f"{gpus:>4} {len(configs):>4} {num_jobs:>5}  default")
        tie = Timings(f"{gpus:>4} {len(configs):>4} {num_jobs:>5}  tie_break")
        for seed in range(rounds):
            problem = sia_round(configs, num_jobs, seed)
            for row, tie_break in ((default, False), (tie, True)):
                start = time.perf_counter()
                decision = solve_sia_ilp(problem, tie_break=tie_break)
                seconds = time.perf_counter() - start
                status = decision.status.value
                placed = sum(c is not None for c in decision.choice)
                row.seconds.append(seconds)
                row.notes.add(status)
                print(f"sia {gpus} GPUs, {num_jobs} jobs, round {seed}, "
                      f"{'tie_break' if tie_break else 'default'}: {seconds:.3f} s "
                      f"({status}, {placed} jobs placed), elapsed {elapsed():.1f} s",
                      flush=True)
        rows += [default, tie]
    return rows


# ------------------------------------------------------------------------------- Pollux


def pollux_jobs(num_jobs: int, rng: np.random.Generator) -> list[tuple[JobGoodput | None,
                                                                         int]]:
    """(goodput or None, max replicas) of each job (module docstring)."""
    jobs: list[tuple[JobGoodput | None, int]] = []
    for _ in range(num_jobs):
        model = GoodputModel(
            PerfParams(alpha_c=rng.uniform(0.05, 0.2), beta_c=rng.uniform(0.002, 0.02),
                       alpha_n=rng.uniform(0.2, 2.0), beta_n=rng.uniform(0.01, 0.5),
                       alpha_r=rng.uniform(0.05, 0.3), beta_r=rng.uniform(0.005, 0.1),
                       gamma=rng.uniform(1.2, 3.0)),
            GradParams(sqr=1.0, var=rng.uniform(0.5, 20.0)), init_batch_size=128)
        goodput = None if rng.random() < 0.2 else JobGoodput(model, 4096, (32, 256))
        jobs.append((goodput, int(rng.choice([8, 16, 32, 64]))))
    return jobs


def pollux_chain(num_jobs: int, rounds: int, seed: int, row: Timings) -> None:
    """``rounds`` chained rounds of ``num_jobs`` jobs (module docstring)."""
    rng = np.random.default_rng(seed)
    jobs = pollux_jobs(num_jobs, rng)
    names = [f"job-{i}" for i in range(num_jobs)]
    nodes = list(range(POLLUX_NODES))
    capacities = [POLLUX_GPUS_PER_NODE] * POLLUX_NODES
    ages = rng.uniform(0.0, 3600.0, size=num_jobs)
    restarts = np.zeros(num_jobs, dtype=np.int64)
    attained = np.zeros(num_jobs)
    allocation = np.zeros((num_jobs, POLLUX_NODES), dtype=np.int64)  # by job, not order
    front: np.ndarray | None = None
    front_names: list[str] = []
    search_rng = np.random.default_rng(1000 + seed)
    for index in range(rounds):
        order = pollux_job_order(attained, ages.max() - ages)
        ordered = [names[i] for i in order]
        base = allocation[order]
        start = time.perf_counter()
        speedups = fair_share_speedups([jobs[i][0] for i in order], capacities)
        previous = None if front is None else carry_front(
            front, front_names, ordered, nodes, nodes)
        search_jobs = [PolluxJob(speedup=s, age_s=float(ages[i]),
                                 num_restarts=int(restarts[i]), max_replicas=jobs[i][1])
                       for s, i in zip(speedups, order, strict=True)]
        outcome = pollux_search(search_jobs, capacities, base, search_rng,
                                previous_front=previous)
        seconds = time.perf_counter() - start
        state = outcome.state
        row.seconds.append(seconds)
        print(f"pollux {num_jobs} jobs, chain {seed}, round {index + 1} "
              f"({'carried front' if front is not None else 'no front'}): {seconds:.3f} s "
              f"(front {len(outcome.front)}, {int(state.sum())} GPUs used), "
              f"elapsed {elapsed():.1f} s", flush=True)
        changed = np.any(state != base, axis=1) & (state.sum(axis=1) > 0)
        restarts[order[changed]] += 1
        allocation[order] = state
        attained += allocation.sum(axis=1) * ROUND_S
        ages += ROUND_S
        front, front_names = outcome.front, ordered


def run_pollux(rounds: int, chains: int) -> list[Timings]:
    rows = []
    for num_jobs in POLLUX_JOBS:
        row = Timings(f"{POLLUX_NODES * POLLUX_GPUS_PER_NODE:>4} {num_jobs:>5}")
        for seed in range(chains):
            pollux_chain(num_jobs, rounds, seed, row)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="64 GPUs only, 2 rounds per row (about 30 s)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="Sia rounds per row (default 7; 2 with --quick)")
    args = parser.parse_args()
    sia_rounds = args.rounds or (2 if args.quick else 7)
    pollux_rounds, chains = (2, 1) if args.quick else (5, 2)
    print(f"schedlab benchmarks/goodput_policies.py{' --quick' if args.quick else ''}, "
          f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, highspy {importlib.metadata.version('highspy')}, "
          f"load average at the start {os.getloadavg()[0]:.1f}", flush=True)
    solve_sia_ilp(sia_round(sia_configs(CLUSTER_64), 20, seed=10**6))  # warm-up, untimed
    sia = run_sia(sia_rounds, args.quick)
    pollux = run_pollux(pollux_rounds, chains)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average at the end {load} (the machine is shared: compare within a table)")
    base = sia[0].median
    print(f"\nSia's round ILP (solve_sia_ilp, HiGHS), {sia_rounds} rounds per row; ratios to "
          f"64 GPUs x 100 jobs, default ({base:.3f} s median)")
    print(f"{'GPUs':>4} {'cols':>4} {'jobs':>5}  {'options':<9} {'median s':>9} {'max s':>8} "
          f"{'x median':>9} {'x max':>7}  status")
    for row in sia:
        print(f"{row.label:<26} {row.median:>9.3f} {row.worst:>8.3f} "
              f"{row.median / base:>9.2f} {row.worst / base:>7.2f}  "
              f"{', '.join(sorted(row.notes))}")
    med, p95 = PAPER["sia"]
    print(f"paper (Sia §5.6, 64 GPUs, its traces): median {med:.3f} s, p95 {p95:.3f} s")

    base = pollux[0].median
    print(f"\nPollux's search (pollux_search, pop 100 x 100 generations), "
          f"{pollux_rounds} rounds x {chains} chain(s) per row; ratios to 20 jobs "
          f"({base:.3f} s median)")
    print(f"{'GPUs':>4} {'jobs':>5} {'median s':>9} {'max s':>8} {'x median':>9} {'x max':>7}")
    for row in pollux:
        print(f"{row.label} {row.median:>9.3f} {row.worst:>8.3f} {row.median / base:>9.2f} "
              f"{row.worst / base:>7.2f}")
    med, p95 = PAPER["pollux"]
    print(f"paper (Sia §5.6, Pollux at 64 GPUs, its traces): median {med:.1f} s, "
          f"p95 {p95:.1f} s")


if __name__ == "__main__":
    main()
