"""Simulator at production scale: 10^3 to 10^5 (10^6) jobs, one table.

Usage::

    python benchmarks/simulator_scale.py                    # every row (see benchmarks/README.md)
    python benchmarks/simulator_scale.py --quick            # 1000 and 10000 jobs, no philly,
                                                            # helios or trace-1000 rows: ~30 s
    python benchmarks/simulator_scale.py --row helios 100000 fifo   # one row, measured here:
                                                            # KIND generated|philly|helios|trace
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
- **philly** and **helios**: the generated stream (10^5 jobs; 10^6 too with ``--million``)
  written by this script in each trace format -- a Philly ``cluster_job_log`` (JSON: one
  ``Pass`` job per generated job, one attempt as long as its run time on V100, its GPUs in
  ``detail``) and a Helios ``cluster_log.csv`` (one ``COMPLETED`` row per job, ``gpu_num`` =
  its GPUs, ``duration`` = its V100 run time) -- and read back by the project's trace reader
  (:func:`schedlab.workloads.traces.instance_from_trace`, seed 0, the file's own timing), then
  simulated under ``fifo`` and ``gavel.max_min_fairness``.  Both files carry the same jobs
  (:func:`trace_records`), so both formats give the same Instance.  What a trace file cannot
  carry differs from the generated row: times are whole seconds, as the formats publish them
  (arrivals rounded down, run times rounded, so about 8 % of the jobs at 600 jobs/h arrive in
  the same second as the job before them), and the formats name no model, so the reader
  draws each job's type anew among the types measured at its scale factor (same distribution
  as the generator's, different draws).  Scale factors, arrival order and V100 run times are
  the generated stream's, so the work is the same to within the type draws (the row's
  ``avg JCT h`` shows how close).
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
import csv
import datetime as dt
import json
import logging
import math
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "instances" / "gavel" / "trace-1000.json.gz"
DOCS = ROOT / "docs" / "simulator.md"
START = "<!-- simulator_scale:start -->"
END = "<!-- simulator_scale:end -->"
SCALED_POLICIES = ("fifo", "gavel.max_min_fairness")
TRACE_JOBS = 100_000
EPOCH = dt.datetime(2017, 10, 1)
HELIOS_HEADER = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                 "submit_time", "start_time", "end_time", "duration", "queue")

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


@dataclass(frozen=True)
class TraceRecord:
    """One generated job as a trace file records it (times in whole seconds)."""

    id: str
    user: str
    submit: dt.datetime
    run_s: int
    gpus: int


def trace_records(num_jobs: int) -> list[TraceRecord]:
    """The generated N-job stream as trace records: submitted at its arrival rounded down to
    the second (the formats' resolution), started at once, running its V100 run time
    total_steps / T[v100] rounded to whole seconds (at least 1), on s_j GPUs."""
    records = []
    for job in generated(num_jobs).jobs:
        submit = EPOCH + dt.timedelta(seconds=math.floor(job.arrival))
        run_s = max(round((job.total_steps or 0.0) / job.throughput["v100"]), 1)
        records.append(TraceRecord(job.id, job.user or "u", submit, run_s, job.scale_factor))
    return records


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def write_philly(path: Path, num_jobs: int) -> None:
    """:func:`trace_records` as a Philly ``cluster_job_log``: one ``Pass`` job each, one
    attempt from submission to submission + run time, its GPUs in ``detail``."""
    jobs = []
    for r in trace_records(num_jobs):
        gpus = [f"gpu{g}" for g in range(r.gpus)]
        jobs.append({"jobid": r.id, "user": r.user, "vc": "vc0", "status": "Pass",
                     "submitted_time": _stamp(r.submit),
                     "attempts": [{"start_time": _stamp(r.submit),
                                   "end_time": _stamp(r.submit + dt.timedelta(seconds=r.run_s)),
                                   "detail": [{"ip": "m0", "gpus": gpus}]}]})
    path.write_text(json.dumps(jobs))


def write_helios(path: Path, num_jobs: int) -> None:
    """:func:`trace_records` as a Helios ``cluster_log.csv`` (the public header): one
    ``COMPLETED`` row each, started at submission, ``duration`` = run time, no queueing."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(HELIOS_HEADER)
        for r in trace_records(num_jobs):
            end = r.submit + dt.timedelta(seconds=r.run_s)
            writer.writerow([r.id, r.user, "vc0", r.gpus, 6 * r.gpus, -(-r.gpus // 8),
                             "COMPLETED", _stamp(r.submit), _stamp(r.submit), _stamp(end),
                             r.run_s, 0])


#: Trace formats this script writes, and their writers (file names as the releases name them).
WRITERS: dict[str, tuple[str, Callable[[Path, int], None]]] = {
    "philly": ("cluster_job_log.json", write_philly),
    "helios": ("cluster_log.csv", write_helios),
}


# ------------------------------------------------------------------------- one row (child)


class _CpuStop(Exception):
    """Raised by :func:`run_row`'s progress callback when the row's CPU budget is spent."""


def run_row(kind: str, size: int, policy_name: str, trace: str | None,
            cpu_stop: float | None = None) -> dict[str, Any]:
    """Build the workload, simulate it, return the row's numbers (runs in a child process).

    ``cpu_stop``: stop the simulation after that many CPU seconds (checked after every round)
    and report how far it got instead -- rounds, simulated hours and jobs finished -- so a
    row too long to finish here is still reported with what it did in its budget.

    ``kind`` philly or helios reads ``trace`` (the file written by :data:`WRITERS`) with the
    file's own timing: the file already holds the generated stream's arrivals, so rescaling
    them to the rate (``jobs_per_hour``) would only stretch them by the generated sample's
    deviation from its mean rate (0.1 % at 10^5 jobs)."""
    from schedlab.analysis.sweep import _policy_for
    from schedlab.instance import load_instance
    from schedlab.simulator import simulate

    t0 = time.perf_counter()
    if kind == "generated":
        instance = generated(size)
    elif kind in WRITERS:
        from schedlab.workloads.traces import instance_from_trace

        assert trace is not None
        instance = instance_from_trace(trace, kind, scaled_cluster(size), seed=0)
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
    last: list[Any] = [None]

    def watch(progress: Any) -> None:
        last[0] = progress
        if cpu_stop is not None and time.process_time() - cpu0 > cpu_stop:
            raise _CpuStop

    try:
        result = simulate(instance, policy=policy, round_s=instance.params.round_s, seed=0,
                          keep_rounds=False, progress=watch)
    except _CpuStop:
        done = last[0]
        return {
            "kind": kind, "jobs": len(instance.jobs), "policy": policy_name,
            "stopped_cpu_s": time.process_time() - cpu0, "build_s": build_s,
            "wall_s": time.perf_counter() - wall0, "rounds": done.round_index,
            "simulated_h": (done.now - min(j.arrival for j in instance.jobs)) / 3600.0,
            "finished": done.finished, "active": done.active, "job_rounds": done.job_rounds,
            "decide_cpu_s": decide_cpu[0],
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
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


def one_row(parser: argparse.ArgumentParser, row: list[str], cpu_stop: float | None = None
            ) -> int:
    """``--row KIND SIZE POLICY [FILE]``: one row, in this process; its numbers as JSON."""
    if len(row) not in (3, 4) or row[0] not in ("generated", "trace", *WRITERS):
        parser.error("--row takes KIND SIZE POLICY [FILE], KIND one of generated, "
                     f"{', '.join(WRITERS)}, trace")
    kind, size, policy = row[0], int(row[1]), row[2]
    file = row[3] if len(row) == 4 and row[3] != "-" else None
    if kind in WRITERS and file is None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / WRITERS[kind][0]
            WRITERS[kind][1](path, size)
            print(json.dumps(run_row(kind, size, policy, str(path), cpu_stop)))
        return 0
    print(json.dumps(run_row(kind, size, policy, file, cpu_stop)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--row", nargs="+", metavar="ARG",
                        help="KIND SIZE POLICY [FILE]: measure one row here and print its "
                        "numbers as JSON: KIND "
                        "generated, philly, helios (FILE: a file this script wrote; default: "
                        "write one to a temporary folder first) or trace (trace-1000; SIZE "
                        "ignored); '-' for no FILE")
    parser.add_argument("--cpu-stop", type=float, metavar="S",
                        help="with --row: stop the simulation after S CPU seconds and report "
                        "how far it got (rounds, simulated hours, jobs finished)")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="generated sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--million", action="store_true", help="add the 10^6-job rows")
    parser.add_argument("--skip-traces", "--skip-philly", dest="skip_traces",
                        action="store_true", help="no philly and helios rows")
    parser.add_argument("--skip-gavel-all", action="store_true")
    parser.add_argument("--row-timeout", type=float, default=1800.0,
                        help="wall seconds per generated/philly/helios row (default: "
                        "%(default)s)")
    parser.add_argument("--gavel-cpu", type=float, default=120.0,
                        help="CPU seconds per gavel.* trace-1000 row (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="generated 1000 and 10000 jobs only (no philly, helios or "
                        "trace-1000 rows)")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the table (markdown) to FILE")
    parser.add_argument("--write-docs", action="store_true",
                        help="replace the table between the simulator_scale markers of "
                        "docs/simulator.md")
    parser.add_argument("--no-docs", action="store_true",
                        help=argparse.SUPPRESS)  # the default now; kept for old command lines
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.skip_traces, args.skip_gavel_all = "1000,10000", True, True
    if args.row:
        return one_row(parser, args.row, args.cpu_stop)
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
    if not args.skip_traces:
        for size in [TRACE_JOBS, *([1_000_000] if args.million else [])]:
            with tempfile.TemporaryDirectory() as folder:
                for kind, (name, write) in WRITERS.items():
                    path = Path(folder) / name
                    t0 = time.perf_counter()
                    write(path, size)
                    print(f"wrote {size:,}-job {path.name} ({path.stat().st_size / 2**20:.0f} "
                          f"MB) in {time.perf_counter() - t0:.1f} s; elapsed "
                          f"{time.perf_counter() - started:.0f} s", flush=True)
                    label = (f"{kind.capitalize()} format, the generated {size:,} jobs written "
                             "and read back")
                    for policy in SCALED_POLICIES:
                        add(label, policy, child([kind, str(size), policy, str(path)],
                                                 args.row_timeout))
                    path.unlink()
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
