"""Where the array engine starts to pay: both engines on the same workloads, cluster by cluster.

Usage::

    python benchmarks/array_engine_threshold.py                 # the table (~3 min)
    python benchmarks/array_engine_threshold.py --sizes 1000,3000 --policies fifo

For each size N (Gavel's generator scaled as ``simulator_scale.py`` scales it: N x 36 / 1000
GPUs of each of V100, P100, K80 and N x 6 / 1000 jobs/h) and policy, the same workload is
simulated with ``engine="reference"`` (the per-job loop) and ``engine="arrays"``, in this
process, back to back, twice each in alternating order; the table gives the smaller CPU time
of each and their ratio (reference / arrays: above 1, the array engine is faster).  The
records of the two engines are compared too (same average JCT to 1e-9).
``simulate(engine="auto")`` takes the array engine from ``ARRAY_ENGINE_MIN_GPUS`` GPUs on
(``schedlab/simulator/engine.py``); this table is what that number is read from.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from schedlab.analysis.sweep import _policy_for
from schedlab.simulator import simulate
from schedlab.workloads.gavel import generate_gavel_instance


def cpu_time(instance: object, policy: str, engine: str) -> tuple[float, float]:
    """(CPU seconds of one simulation, its average JCT in s)."""
    start = time.process_time()
    result = simulate(instance, policy=_policy_for(policy, "schedlab"),  # type: ignore[arg-type]
                      round_s=instance.params.round_s, seed=0,  # type: ignore[attr-defined]
                      keep_rounds=False, engine=engine)  # type: ignore[arg-type]
    return time.process_time() - start, result.average_jct()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,2000,3000,5000,10000",
                        help="jobs per workload, comma-separated (default: %(default)s)")
    parser.add_argument("--policies", default="fifo,gavel.max_min_fairness")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    lines = ["| jobs | GPUs | policy | reference cpu s | arrays cpu s | reference / arrays |",
             "| ---: | ---: | --- | ---: | ---: | ---: |"]
    for size in [int(s) for s in args.sizes.split(",") if s]:
        k = size * 36 // 1000
        instance = generate_gavel_instance(size, {"v100": k, "p100": k, "k80": k}, 0,
                                           jobs_per_hour=size * 6 / 1000)
        for policy in args.policies.split(","):
            best = {"reference": float("inf"), "arrays": float("inf")}
            jct = {}
            for engine in ("reference", "arrays", "arrays", "reference"):
                seconds, jct[engine] = cpu_time(instance, policy, engine)
                best[engine] = min(best[engine], seconds)
            if abs(jct["reference"] - jct["arrays"]) > 1e-9 * max(1.0, jct["reference"]):
                print(f"engines differ on {size} jobs, {policy}", file=sys.stderr)
                return 1
            ratio = best["reference"] / best["arrays"]
            lines.append(f"| {size} | {3 * k} | {policy} | {best['reference']:.2f} | "
                         f"{best['arrays']:.2f} | {ratio:.2f} |")
            print(lines[-1], flush=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
