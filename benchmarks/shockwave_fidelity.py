"""How closely schedlab's runs follow Shockwave's own runs on its published trace, job by job.

Usage::

    # a local checkout of github.com/uw-mad-dash/shockwave (never vendored here)
    python benchmarks/shockwave_fidelity.py --shockwave-repo ~/src/shockwave

    # other seeds: write the trace, run Shockwave's simulator on it (its
    # scheduler/scripts/drivers/simulate_scheduler_with_trace.py, as its
    # reproduce/tacc_32gpus.sh does), then hand over the folder of its output pickles
    python benchmarks/shockwave_fidelity.py --write-trace 26 /tmp/seed26.trace
    python benchmarks/shockwave_fidelity.py --shockwave-repo ~/src/shockwave \\
        --their-runs 26=/tmp/pickles-seed26 --seeds 25,26

    # without Shockwave's files: our side only (the comparison columns stay empty)
    python benchmarks/shockwave_fidelity.py --ours-only [--quick]

Without Shockwave's files for a seed (``--shockwave-repo`` for seed 25, ``--their-runs`` for
any seed), or with a path that is not there, the script stops with one line saying so,
unless ``--ours-only`` is given.  ``--quick``: the five baselines of seed 25 (not
``shockwave`` and ``shockwave_convex``, whose simulations take most of the time).  It prints
one line per (seed, policy) as it finishes, then the table; nothing is written unless
``--json FILE`` asks for it.

For seed 25 (the published trace, ``scheduler/traces/reproduce/120_0.2_5_100_40_25_...``)
the reference is Shockwave's published result pickles: the simulation runs in
``scheduler/reproduce/pickles/tacc_32gpus/`` and, where they exist, the physical (32-GPU
testbed) runs in ``tacc_32gpus_comparison/``.  Every pickle is read with
:func:`schedlab.analysis.safe_pickle.load_restricted` (plain data only; Shockwave's
``job_id_pair.JobIdPair`` becomes a stand-in): no code from the files runs.

Our side simulates the same jobs (``generate_shockwave_instance(120, seed=S,
throughputs="shockwave-tacc")``, byte for byte the trace Shockwave's generator writes) on 32
V100s with 120 s rounds and Shockwave's 20 s resume overhead (``resume_overhead_s``, the rule
of its ``scheduler.py``): ``shockwave`` and ``shockwave_convex`` under schedlab's mechanism,
the baselines under Gavel's (``mechanism="gavel"``; Shockwave's simulator is Gavel's) with
Shockwave's settings of it
(:func:`~schedlab.analysis.tables.shockwave.shockwave_simulator_policy`: resets at most every
1000 s, none on batch-size changes, AlloX's alpha 0.2) and its step accounting of
batch-size changes (docs/simulator.md, "Shockwave's simulator").

Printed per (seed, policy): makespan, average JCT, worst rho and the unfair fraction (rho >
1.05; rho = JCT / (isolated time x max(1, 120 / 32)), the ``finish_time_fairness_list`` of
Shockwave's pickles) for ours, Shockwave's simulation and its physical run, and the per-job
median |log(JCT_ours / JCT_theirs)| against the simulation (job i of the pickle's
``jct_list`` is our job "i").  ``--json FILE`` writes the same numbers.  A simulation of
``shockwave`` takes ~20 s here on a quiet machine (about 70 s at load average 6), a baseline
under a second.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.analysis import metrics
from schedlab.analysis.safe_pickle import load_restricted
from schedlab.analysis.tables.shockwave import shockwave_simulator_policy
from schedlab.simulator import simulate
from schedlab.workloads.shockwave import CANONICAL_SEED, generate_shockwave_instance

log = logging.getLogger("shockwave_fidelity")

#: Shockwave's policy name -> (ours, mechanism).  Every run charges the 20 s resume overhead.
POLICIES: dict[str, tuple[str, str]] = {
    "shockwave": ("shockwave", "schedlab"),
    "shockwave_convex": ("shockwave_convex", "schedlab"),
    "max_min_fairness": ("gavel.max_min_fairness", "gavel"),
    "finish_time_fairness": ("gavel.finish_time_fairness", "gavel"),
    "allox": ("allox", "gavel"),
    "gandiva_fair": ("gandiva_fair", "gavel"),
    "max_sum_throughput_perf": ("gavel.max_sum_throughput", "gavel"),
}
#: ``--quick``: the baselines (a simulation each takes about a second)
QUICK_POLICIES = ("max_min_fairness", "finish_time_fairness", "allox", "gandiva_fair",
                  "max_sum_throughput_perf")
#: the reference pickle of ``shockwave_convex`` is Shockwave's (the same policy, exact log)
REFERENCE_OF = {"shockwave_convex": "shockwave"}
RESUME_OVERHEAD_S = 20.0
GPUS = 32
ROUND_S = 120.0
NUM_JOBS = 120
TRACE_STEM = "120_0.2_5_100_40_{seed}_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic"
STAND_INS = {"job_id_pair.JobIdPair": "JobIdPair"}


@dataclass
class Numbers:
    """One run's summary."""

    makespan_s: float
    avg_jct_s: float
    worst_rho: float
    unfair_fraction: float


@dataclass
class Row:
    """One (seed, policy): ours, theirs (simulation, physical) and the per-job comparison."""

    seed: int
    policy: str
    ours: Numbers
    simulation: Numbers | None
    physical: Numbers | None
    median_abs_log_ratio: float | None
    wall_s: float


def their_numbers(path: Path) -> tuple[Numbers, np.ndarray]:
    """Summary and per-job JCTs (job id order) of one of Shockwave's result pickles."""
    data = load_restricted(path, STAND_INS)
    jct = np.asarray(data["jct_list"], dtype=float)
    rho = np.asarray(data["finish_time_fairness_list"], dtype=float)
    numbers = Numbers(float(data["makespan"]), float(data["avg_jct"]), float(rho.max()),
                      float((rho > metrics.DEFAULT_UNFAIR_THRESHOLD).mean()))
    return numbers, jct


def find_pickle(folder: Path, policy: str, kind: str) -> Path | None:
    """``<policy>_<trace stem>_<kind>.pickle`` in ``folder`` (or any ``<policy>_*_<kind>``)."""
    if not folder.is_dir():
        return None
    matches = sorted(folder.glob(f"{policy}_1*_{kind}.pickle"))
    return matches[0] if matches else None


def our_run(seed: int, policy: str) -> tuple[Numbers, dict[str, float], float]:
    """Simulate ``policy`` (Shockwave's name) on the seed's trace: summary, JCT per job id,
    wall seconds."""
    name, mechanism = POLICIES[policy]
    instance = generate_shockwave_instance(NUM_JOBS, {"v100": GPUS}, seed=seed,
                                           throughputs="shockwave-tacc")
    t0 = time.perf_counter()
    result = simulate(instance, policy=shockwave_simulator_policy(name, mechanism), seed=seed,
                      mechanism=mechanism,  # type: ignore[arg-type]
                      resume_overhead_s=RESUME_OVERHEAD_S, keep_rounds=False)
    wall = time.perf_counter() - t0
    jobs = result.to_dataframe()
    rho = metrics.finish_time_fairness(jobs, GPUS, contention="static")
    numbers = Numbers(metrics.makespan(jobs), metrics.average_jct(jobs), metrics.worst_rho(rho),
                      metrics.unfair_fraction(rho))
    jct = dict(zip(jobs["job"].astype(str), jobs["finish"] - jobs["arrival"], strict=True))
    return numbers, jct, wall


def median_abs_log_ratio(ours: dict[str, float], theirs: np.ndarray) -> float:
    """median over jobs of |log(JCT_ours / JCT_theirs)| (job i of theirs is our "i")."""
    ratios = [abs(math.log(ours[str(i)] / float(t))) for i, t in enumerate(theirs)
              if str(i) in ours and t > 0 and ours[str(i)] > 0]
    return float(np.median(ratios)) if ratios else math.nan


def compare(seed: int, policy: str, simulation_dir: Path | None,
            physical_dir: Path | None) -> Row:
    """One row: our run against Shockwave's pickles for ``seed`` (None: not given)."""
    reference = REFERENCE_OF.get(policy, policy)
    ours, jct, wall = our_run(seed, policy)
    simulation = physical = None
    median = None
    sim_path = find_pickle(simulation_dir, reference, "simulation") if simulation_dir else None
    if sim_path is not None:
        simulation, theirs = their_numbers(sim_path)
        median = median_abs_log_ratio(jct, theirs)
    phys_path = find_pickle(physical_dir, reference, "physical") if physical_dir else None
    if phys_path is not None:
        physical, _ = their_numbers(phys_path)
    return Row(seed, policy, ours, simulation, physical, median, wall)


def _cell(n: Numbers | None, field: str, fmt: str) -> str:
    return "-" if n is None else format(getattr(n, field), fmt)


def render(rows: list[Row]) -> str:
    """A markdown table: ours / Shockwave's simulation / its physical run per metric."""
    head = ("| seed | policy | makespan s (ours / sim / phys) | avg JCT s (ours / sim / phys) "
            "| worst rho (ours / sim / phys) | unfair (ours / sim / phys) "
            "| per-job median abs log ratio | wall s |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        cells = []
        for field, fmt in (("makespan_s", ".0f"), ("avg_jct_s", ".0f"), ("worst_rho", ".2f"),
                           ("unfair_fraction", ".3f")):
            cells.append(" / ".join(_cell(n, field, fmt)
                                    for n in (r.ours, r.simulation, r.physical)))
        median = "-" if r.median_abs_log_ratio is None else f"{r.median_abs_log_ratio:.4f}"
        lines.append(f"| {r.seed} | {r.policy} | " + " | ".join(cells)
                     + f" | {median} | {r.wall_s:.1f} |")
    return "\n".join(lines)


def _seed_dirs(text: str) -> tuple[int, Path]:
    seed, _, folder = text.partition("=")
    if not seed.isdigit() or not folder:
        raise argparse.ArgumentTypeError(f"expected SEED=DIR, got {text!r}")
    return int(seed), Path(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shockwave-repo", type=Path, metavar="PATH",
                        help="local checkout of Shockwave's repository (its published pickles)")
    parser.add_argument("--their-runs", type=_seed_dirs, action="append", default=[],
                        metavar="SEED=DIR", help="folder of Shockwave's simulator output "
                        "pickles for another seed's trace (repeatable)")
    parser.add_argument("--seeds", default=str(CANONICAL_SEED), metavar="S[,S...]")
    parser.add_argument("--policies", default=None, metavar="A,B,...",
                        help=f"Shockwave's policy names (default: {','.join(POLICIES)}; "
                        f"--quick: {','.join(QUICK_POLICIES)})")
    parser.add_argument("--quick", action="store_true",
                        help="the baselines only (no shockwave, shockwave_convex)")
    parser.add_argument("--ours-only", action="store_true",
                        help="run without Shockwave's files: our side only")
    parser.add_argument("--json", "--out", dest="json", type=Path, metavar="FILE",
                        help="write the rows as JSON")
    parser.add_argument("--write-trace", nargs=2, metavar=("SEED", "FILE"),
                        help="write the seed's trace in Shockwave's format and stop")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.write_trace:
        from schedlab.workloads.shockwave_trace import write_shockwave_trace

        seed = int(args.write_trace[0])
        write_shockwave_trace(generate_shockwave_instance(
            NUM_JOBS, {"v100": GPUS}, seed=seed, throughputs="shockwave-tacc"),
            args.write_trace[1])
        print(f"wrote {args.write_trace[1]} ({TRACE_STEM.format(seed=seed)})")
        return 0
    if args.policies is None:
        args.policies = ",".join(QUICK_POLICIES if args.quick else POLICIES)
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        parser.error(f"unknown policy {unknown[0]!r} (known: {', '.join(POLICIES)})")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    theirs = dict(args.their_runs)
    folders: dict[int, tuple[Path | None, Path | None]] = {}
    for seed in seeds:
        simulation_dir = physical_dir = None
        if seed in theirs:
            simulation_dir = theirs[seed]
            if not simulation_dir.is_dir():
                raise SystemExit(f"shockwave_fidelity: --their-runs {seed}={simulation_dir}: "
                                 "no such folder (Shockwave's simulator output pickles)")
        elif seed == CANONICAL_SEED and args.shockwave_repo is not None:
            pickles = args.shockwave_repo / "scheduler" / "reproduce" / "pickles"
            simulation_dir = pickles / "tacc_32gpus"
            physical_dir = pickles / "tacc_32gpus_comparison"
            if not simulation_dir.is_dir():
                raise SystemExit(f"shockwave_fidelity: {simulation_dir} not found: "
                                 "--shockwave-repo must be a checkout of "
                                 "github.com/uw-mad-dash/shockwave")
        elif not args.ours_only:
            where = ("--shockwave-repo PATH (a checkout of github.com/uw-mad-dash/shockwave) "
                     "or --their-runs" if seed == CANONICAL_SEED else "--their-runs")
            raise SystemExit(f"shockwave_fidelity: no Shockwave results for seed {seed}: give "
                             f"{where} {seed}=DIR, or --ours-only to run our side alone")
        folders[seed] = (simulation_dir, physical_dir)
    rows: list[Row] = []
    started = time.perf_counter()
    for seed in seeds:
        simulation_dir, physical_dir = folders[seed]
        for policy in policies:
            row = compare(seed, policy, simulation_dir, physical_dir)
            rows.append(row)
            median = ("-" if row.median_abs_log_ratio is None
                      else f"{row.median_abs_log_ratio:.4f}")
            print(f"seed {seed} {policy}: makespan {row.ours.makespan_s:.0f} s, avg JCT "
                  f"{row.ours.avg_jct_s:.0f} s, unfair {row.ours.unfair_fraction:.3f}, "
                  f"per-job median |log ratio| {median} ({row.wall_s:.1f} s; elapsed "
                  f"{time.perf_counter() - started:.0f} s)", flush=True)
    print()
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps([_as_json(r) for r in rows], indent=1) + "\n")
    return 0


def _as_json(row: Row) -> dict[str, Any]:
    return asdict(row)


if __name__ == "__main__":
    sys.exit(main())
