"""Simulator at production scale: 10^3 to 10^5 (10^6) jobs, one table.

Usage::

    python benchmarks/simulator_scale.py                    # every row (see benchmarks/README.md)
    python benchmarks/simulator_scale.py --quick            # 1000 and 10000 jobs, no philly or
                                                            # trace-1000 rows: about 30 s
    python benchmarks/simulator_scale.py --sizes 1000,10000 --skip-gavel-all
    python benchmarks/simulator_scale.py --write-docs       # also replace the table between
                                                            # the markers in docs/simulator.md

It prints one line per row as it finishes, then the table; nothing is written unless ``--out
FILE`` or ``--write-docs`` asks for it.

Rows, each measured in a fresh Python process (so its peak memory is its own):

- **generated**: Gavel's generator (:func:`schedlab.workloads.gavel.generate_gavel_instance`)
  with N jobs, cluster and arrival rate scaled together: N x 36 / 1000 GPUs of each of V100,
  P100, K80 and N x 6 / 1000 jobs/hour (36:36:36 at 6 jobs/h for 1000 jobs, as Gavel's
  trace), under ``fifo`` and ``gavel.max_min_fairness``; N = 10^3, 10^4, 10^5 and, with
  ``--million``, 10^6.
- **philly**: the 10^5-job generated stream written by this script as a Philly
  ``cluster_job_log`` (JSON: one ``Pass`` job per generated job, its V100 run time as one
  attempt, its GPUs in ``detail``) and read back by the project's trace reader
  (:func:`schedlab.workloads.traces.instance_from_trace`; job types drawn anew, so the work
  differs from the generated row), then simulated under ``fifo``.
- **trace-1000**: every registered ``gavel.*`` policy on ``instances/gavel/trace-1000.json.gz``
  (a row stopped at ``--gavel-cpu`` CPU seconds says so).

Every simulation runs as the CLI's runs do: ``keep_rounds=False`` (no per-round records),
every job's record kept.  Columns: ``build s`` (making or reading the workload), ``wall s``
and ``cpu s`` of the :func:`~schedlab.simulator.simulate` call, ``peak MB`` (the process's
``ru_maxrss``, workload included), ``rounds``, ``job-rounds``, ``job-rounds/s`` (per wall
second), ``decide cpu s`` (CPU seconds inside ``policy.decide``), ``LP s`` (the policy's
solver seconds) and ``avg JCT h``.  The machine is shared: the load average before and after
is printed with the table, and CPU seconds are the figure to compare across loads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "instances" / "gavel" / "trace-1000.json.gz"
DOCS = ROOT / "docs" / "simulator.md"
START = "<!-- simulator_scale:start -->"
END = "<!-- simulator_scale:end -->"
SCALED_POLICIES = ("fifo", "gavel.max_min_fairness")
PHILLY_JOBS = 100_000
EPOCH = dt.datetime(2017, 10, 1)

log = logging.getLogger("simulator_scale")


def scaled_cluster(num_jobs: int) -> dict[str, int]:
    """N x 36 / 1000 GPUs of each type (36:36:36 for 1000 jobs)."""
    k = max(num_jobs * 36 // 1000, 1)
    return {"v100": k, "p100": k, "k80": k}


def scaled_rate(num_jobs: int) -> float:
    """N x 6 / 1000 jobs per hour (6 for 1000 jobs)."""
    return num_jobs * 6.0 / 1000.0


def generated(num_jobs: int) -> Any:
    from schedlab.workloads.gavel import generate_gavel_instance

    return generate_gavel_instance(num_jobs, scaled_cluster(num_jobs), 0,
                                   jobs_per_hour=scaled_rate(num_jobs))


def write_philly(path: Path, num_jobs: int) -> None:
    """The generated N-job stream as a Philly ``cluster_job_log``: submitted at its arrival,
    one attempt as long as its run time on V100 (total_steps / T[v100]), s_j GPUs."""
    instance = generated(num_jobs)
    jobs = []
    for job in instance.jobs:
        submit = EPOCH + dt.timedelta(seconds=job.arrival)
        run_s = max(round((job.total_steps or 0.0) / job.throughput["v100"]), 1)
        end = submit + dt.timedelta(seconds=run_s)
        gpus = [f"gpu{g}" for g in range(job.scale_factor)]
        jobs.append({"jobid": job.id, "user": job.user or "u", "vc": "vc0", "status": "Pass",
                     "submitted_time": submit.strftime("%Y-%m-%d %H:%M:%S"),
                     "attempts": [{"start_time": submit.strftime("%Y-%m-%d %H:%M:%S"),
                                   "end_time": end.strftime("%Y-%m-%d %H:%M:%S"),
                                   "detail": [{"ip": "m0", "gpus": gpus}]}]})
    path.write_text(json.dumps(jobs))


# ------------------------------------------------------------------------- one row (child)


def run_row(kind: str, size: int, policy_name: str, philly: str | None) -> dict[str, Any]:
    """Build the workload, simulate it, return the row's numbers (runs in a child process)."""
    from schedlab.analysis.sweep import _policy_for
    from schedlab.instance import load_instance
    from schedlab.simulator import simulate

    t0 = time.perf_counter()
    if kind == "generated":
        instance = generated(size)
    elif kind == "philly":
        from schedlab.workloads.traces import instance_from_trace

        assert philly is not None
        instance = instance_from_trace(philly, "philly", scaled_cluster(size), seed=0,
                                       jobs_per_hour=scaled_rate(size))
    else:
        instance = load_instance(TRACE)
    build_s = time.perf_counter() - t0
    policy = _policy_for(policy_name, "schedlab")
    decide_cpu = [0.0]
    decide = policy.decide

    def timed(state: Any) -> Any:
        c = time.process_time()
        try:
            return decide(state)
        finally:
            decide_cpu[0] += time.process_time() - c

    policy.decide = timed
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = simulate(instance, policy=policy, round_s=instance.params.round_s, seed=0,
                      keep_rounds=False)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {
        "kind": kind, "jobs": len(instance.jobs), "policy": policy_name,
        "gpus": sum(p.count for p in instance.cluster.accelerators.values()),
        "build_s": build_s, "wall_s": wall, "cpu_s": cpu,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "rounds": result.round_count, "job_rounds": result.job_rounds,
        "decide_cpu_s": decide_cpu[0], "lp_s": result.solver_time_s,
        "avg_jct_h": result.average_jct() / 3600.0,
        "finished": sum(1 for j in result.jobs if j.finish is not None),
    }


# ------------------------------------------------------------------------- the table


def child(args: list[str], timeout: float, cpu_limit: float | None = None
          ) -> dict[str, Any] | str:
    """One row in a fresh process: its numbers, or why there are none.  ``cpu_limit``
    stops the row after that many CPU seconds (a limit that does not depend on the load)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--row", *args]

    def limit() -> None:
        if cpu_limit is not None:
            seconds = int(cpu_limit)
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))

    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return f"stopped after {timeout:.0f} s wall"
    if cpu_limit is not None and done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"stopped after {cpu_limit:.0f} CPU s"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"failed: {tail[:120]}"
    line = done.stdout.strip().splitlines()[-1]
    out: dict[str, Any] = json.loads(line)
    return out


def fmt_row(label: str, policy: str, row: dict[str, Any] | str) -> str:
    if isinstance(row, str):
        return f"| {label} | {policy} | {row} |" + " |" * 9
    rate = row["job_rounds"] / row["wall_s"] if row["wall_s"] > 0 else 0.0
    return (f"| {label} | {policy} | {row['build_s']:.1f} | {row['wall_s']:.1f} | "
            f"{row['cpu_s']:.1f} | {row['peak_mb']:.0f} | {row['rounds']} | "
            f"{row['job_rounds']:,} | {rate:,.0f} | {row['decide_cpu_s']:.1f} | "
            f"{row['lp_s']:.1f} | {row['avg_jct_h']:.2f} |")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--row", nargs=4, metavar=("KIND", "SIZE", "POLICY", "PHILLY"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="generated sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--million", action="store_true", help="add the 10^6-job rows")
    parser.add_argument("--skip-philly", action="store_true")
    parser.add_argument("--skip-gavel-all", action="store_true")
    parser.add_argument("--row-timeout", type=float, default=1800.0,
                        help="wall seconds per generated/philly row (default: %(default)s)")
    parser.add_argument("--gavel-cpu", type=float, default=120.0,
                        help="CPU seconds per gavel.* trace-1000 row (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="generated 1000 and 10000 jobs only (no philly, no trace-1000 rows)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the table (markdown) to FILE")
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the table between the simulator_scale markers of "
                        "docs/simulator.md")
    parser.add_argument("--no-docs", action="store_true",
                        help=argparse.SUPPRESS)  # the default now; kept for old command lines
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.skip_philly, args.skip_gavel_all = "1000,10000", True, True
    if args.row:
        kind, size, policy, philly = args.row
        print(json.dumps(run_row(kind, int(size), policy, None if philly == "-" else philly)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from schedlab.policies.registry import policies

    load_before = load()
    started = time.perf_counter()
    lines = ["| workload | policy | build s | wall s | cpu s | peak MB | rounds | job-rounds | "
             "job-rounds/s | decide cpu s | LP s | avg JCT h |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def add(label: str, policy: str, row: dict[str, Any] | str) -> None:
        lines.append(fmt_row(label, policy, row))
        if isinstance(row, str):
            print(f"{label}, {policy}: {row}; elapsed {time.perf_counter() - started:.0f} s",
                  flush=True)
        else:
            print(f"{label}, {policy}: build {row['build_s']:.1f} s, simulate "
                  f"{row['wall_s']:.1f} s wall / {row['cpu_s']:.1f} s CPU, peak "
                  f"{row['peak_mb']:.0f} MB, avg JCT {row['avg_jct_h']:.2f} h; elapsed "
                  f"{time.perf_counter() - started:.0f} s", flush=True)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.million:
        sizes.append(1_000_000)
    for size in sizes:
        cluster = scaled_cluster(size)
        label = (f"generated {size:,} jobs, {cluster['v100']}:{cluster['p100']}:"
                 f"{cluster['k80']}, {scaled_rate(size):g} jobs/h")
        for policy in SCALED_POLICIES:
            add(label, policy, child(["generated", str(size), policy, "-"], args.row_timeout))
    if not args.skip_philly:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "philly-cluster_job_log.json"
            t0 = time.perf_counter()
            write_philly(path, PHILLY_JOBS)
            print(f"wrote {path.name} ({path.stat().st_size / 2**20:.0f} MB) in "
                  f"{time.perf_counter() - t0:.1f} s; elapsed "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
            add(f"Philly format, {PHILLY_JOBS:,} jobs written and read back", "fifo",
                child(["philly", str(PHILLY_JOBS), "fifo", str(path)], args.row_timeout))
    if not args.skip_gavel_all:
        for name in policies():
            if name.startswith("gavel."):
                add("trace-1000", name, child(["trace", "1000", name, "-"], args.row_timeout,
                                              cpu_limit=args.gavel_cpu))
    header = (f"Measured {dt.date.today().isoformat()} on {os.cpu_count()} cores (shared); "
              f"load average (1/5/15 min) before {load_before}, after {load()}.")
    table = "\n".join([header, "", *lines])
    print()
    print(table, flush=True)
    if args.out is not None:
        args.out.write_text(table + "\n")
        print(f"\nwritten to {args.out}", flush=True)
    if args.write_docs:
        text = DOCS.read_text()
        block = f"{START}\n{table}\n{END}"
        if START in text and END in text:
            text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text,
                          flags=re.S)
        else:
            text = text.rstrip() + "\n\n" + block + "\n"
        DOCS.write_text(text)
        print(f"\nwritten to {DOCS}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
