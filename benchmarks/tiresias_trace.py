"""Average JCT of Tiresias (2D-LAS, 2D-Gittins) and FIFO on a homogeneous V100 trace.

Usage::

    python benchmarks/tiresias_trace.py                  # 60 s and 360 s rounds
    python benchmarks/tiresias_trace.py --quick          # 360 s rounds only
    python benchmarks/tiresias_trace.py --round-s 360 --workers 2

Workload: ``instances/gavel/trace-1000.json.gz`` (1000 jobs, Poisson arrivals, Gavel's
generator), made homogeneous: every job's throughput is replaced by its V100 throughput alone
(``{"v100": T[j, v100]}``), and the cluster is one V100 pool with the file's total GPU count
(36 + 36 + 36 = 108).  Everything else comes from the file (arrivals, scale factors, total
steps); no switch overhead (the simulator's default 0 s), rounds of exactly the given length
except that a round ends early when every job in it finished (the simulator's default).

Policies: ``tiresias`` (2D-LAS, default thresholds (3200,) GPU-s, two queues),
``tiresias`` with Tiresias' code thresholds (3250, 7200) GPU-s (``tiresias[code]``),
``tiresias_gittins`` and ``fifo`` (non-preemptive, backfill).  No starvation knob.

Prints one line per (policy, round length) as it finishes, then one row per policy: the
average JCT in hours per round length (all jobs finish).  Nothing is written to a file.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from schedlab.instance import Cluster, load_instance
from schedlab.policies.base import Policy
from schedlab.policies.fifo import Fifo
from schedlab.policies.state import JobState
from schedlab.policies.tiresias import Tiresias
from schedlab.simulator import simulate
from schedlab.simulator.engine import jobs_from_instance

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "instances" / "gavel" / "trace-1000.json.gz"

POLICIES: dict[str, Callable[[], Policy]] = {
    "tiresias": Tiresias,
    "tiresias[code]": lambda: Tiresias(thresholds_gpu_s="tiresias_code"),
    "tiresias_gittins": lambda: Tiresias(gittins=True),
    "fifo": Fifo,
}


def homogeneous_v100() -> tuple[list[JobState], Cluster]:
    """The trace's jobs with only their V100 throughput, on one V100 pool of all its GPUs."""
    instance = load_instance(TRACE)
    gpus = sum(pool.count for pool in instance.cluster.accelerators.values())
    jobs = jobs_from_instance(instance)
    for job in jobs:
        job.throughput = {"v100": job.throughput["v100"]}
        job.colocated_throughput = None
    cluster = Cluster.model_validate({"accelerators": {"v100": {"count": gpus}}})
    return jobs, cluster


def average_jct_h(policy_name: str, round_s: float) -> tuple[str, float, float, float]:
    """(policy, round s, average JCT h, wall s) of one run."""
    jobs, cluster = homogeneous_v100()
    t0 = time.perf_counter()
    result = simulate(jobs, cluster, POLICIES[policy_name](), round_s=round_s)
    jcts = [r.finish - r.arrival for r in result.jobs if r.finish is not None]
    if len(jcts) != len(jobs):
        logger.warning("%s at %g s: %d of %d jobs finished", policy_name, round_s, len(jcts),
                       len(jobs))
    return policy_name, round_s, sum(jcts) / len(jcts) / 3600.0, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-s", type=float, nargs="+", default=None,
                        help="round lengths, s (default 60 360; --quick: 360)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="360 s rounds only")
    args = parser.parse_args()
    if args.round_s is None:
        args.round_s = [360.0] if args.quick else [60.0, 360.0]
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    _, cluster = homogeneous_v100()
    print(f"trace-1000, homogeneous: one pool of {cluster.accelerators['v100'].count} V100",
          flush=True)
    runs = [(p, r) for p in args.policies for r in args.round_s]
    started = time.perf_counter()
    out = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        # map yields in order as the runs finish: one line per run as it goes
        for p, r, jct, wall in pool.map(average_jct_h, *zip(*runs, strict=True)):
            out.append((p, r, jct, wall))
            print(f"{p} at {r:g} s rounds: average JCT {jct:.2f} h, {wall:.1f} s wall; "
                  f"elapsed {time.perf_counter() - started:.0f} s", flush=True)
    table = {(p, r): jct for p, r, jct, _ in out}
    header = "| policy | " + " | ".join(f"{r:g} s rounds" for r in args.round_s) + " |"
    lines = [header, "|---" * (len(args.round_s) + 1) + "|"]
    for p in args.policies:
        lines.append(f"| {p} | " + " | ".join(f"{table[p, r]:.2f} h" for r in args.round_s)
                     + " |")
    print("\naverage JCT (h)\n" + "\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
