"""Hare at scale: hare.lp_bound and hare.greedy on 100, 200 and 300 jobs on 160 GPUs.

Instances come from :func:`schedlab.workloads.hare.generate_hare_instance` (its default
cluster: 64 K80 + 48 P100 + 48 V100 = 160 GPUs; batch arrivals; Hare-style switch costs;
seed 0 unless ``--seed``).  For each size the script solves the LP once (build + solve
seconds, its optimum), runs the greedy on the LP's order (the greedy's own seconds without
the LP), and prints the ratio greedy / bound on sum_j w_j C_j and the weighted JCT.
Target: 300 jobs, greedy + bound <= 30 s.

    python benchmarks/hare_scale.py [--sizes 100 200 300] [--seed 0] [--eps 0.25]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from schedlab.formulations.hare.greedy import HareGreedy
from schedlab.workloads.hare import generate_hare_instance

log = logging.getLogger("hare_scale")


def run(sizes: list[int], seed: int, eps: float) -> list[dict[str, float]]:
    """One row per size: jobs, tasks, LP seconds, greedy seconds, objectives, ratio."""
    rows = []
    for n in sizes:
        instance = generate_hare_instance(n, seed=seed)
        t0 = time.perf_counter()
        solution = HareGreedy(eps=eps).solve(instance)
        total = time.perf_counter() - t0
        rows.append({
            "jobs": n, "gpus": instance.cluster.total_gpus,
            "tasks": sum((j.rounds or 0) * (j.tasks_per_round or 0) for j in instance.jobs),
            "lp_s": solution.metrics["lp_s"], "greedy_s": solution.metrics["greedy_s"],
            "total_s": total, "bound": solution.bound or float("nan"),
            "greedy": solution.objective or float("nan"),
            "ratio": solution.metrics.get("bound_ratio", float("nan")),
            "trivial": solution.metrics["trivial_bound"],
            "weighted_jct": solution.metrics["weighted_jct"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 300])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eps", type=float, default=0.25)
    args = parser.parse_args(argv)
    header = (f"{'jobs':>5} {'GPUs':>5} {'tasks':>6} {'LP s':>7} {'greedy s':>9} "
              f"{'total s':>8} {'bound':>12} {'greedy':>12} {'ratio':>6} {'trivial':>12} "
              f"{'wJCT':>12}")
    out = [header]
    for r in run(args.sizes, args.seed, args.eps):
        out.append(f"{r['jobs']:>5} {r['gpus']:>5} {r['tasks']:>6} {r['lp_s']:>7.2f} "
                   f"{r['greedy_s']:>9.2f} {r['total_s']:>8.2f} {r['bound']:>12.6g} "
                   f"{r['greedy']:>12.6g} {r['ratio']:>6.3f} {r['trivial']:>12.6g} "
                   f"{r['weighted_jct']:>12.6g}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
