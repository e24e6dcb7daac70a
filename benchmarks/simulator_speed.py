"""Simulator speed on Gavel's 1000-job reference trace, one table for every policy.

Usage::

    python benchmarks/simulator_speed.py                # 3 repeats per policy: ~30 s here
    python benchmarks/simulator_speed.py --quick        # 1 repeat: ~15 s
    python benchmarks/simulator_speed.py --out speed.md # also write the block to a file
    python benchmarks/simulator_speed.py --write-docs   # also replace the "## Speed"
                                                        # section of docs/simulator.md

It prints one line per policy as it finishes, then the markdown block; nothing is written
unless ``--out`` or ``--write-docs`` asks for it.

Workload: ``instances/gavel/trace-1000.json.gz`` (Gavel's own generator: 1000 jobs, Poisson
arrivals at 6 jobs/h, multi-GPU mix), cluster 36 V100 + 36 P100 + 36 K80, rounds of 360 s,
continuous arrivals, no switch overhead.  Policies: ``fifo`` (the heuristic from the policy
registry, skipped with a note when it is not registered), ``gavel.max_min_fairness_agnostic``
and ``gavel.max_min_fairness`` (the array path of :class:`schedlab.policies.gavel.GavelPolicy`:
the class LP on a persistent HiGHS model, re-solved when the job set changes).

Columns: ``wall s`` and ``cpu s`` of the whole :func:`schedlab.simulator.simulate` call (the
fastest of ``--repeat`` runs; loading the trace is not timed), ``cpu / yardstick`` (CPU seconds
divided by the median time of a fixed pure-Python loop measured before each repeat: robust to
the machine's load), ``rounds``, ``job-rounds/s``
(jobs run in a round, summed over rounds, per wall second), ``solves`` and ``solver s`` (LP time
inside the policy), ``avg JCT h`` (hours).  The last line gives the aware / agnostic average-JCT
ratio.  Gavel's own simulator needs about 21 s for the max-min fairness run on the machine type
these numbers come from (not measured here).  CPU seconds are printed beside wall seconds because
a shared machine's wall time depends on its load (the load average is printed too).  The 2 s
target is judged twice: on the wall time as measured, and at the machine type's usual speed
(the run's yardsticks times ``REFERENCE_YARDSTICK_S``), which is the fair comparison with
Gavel's ~21 s when the shared machine runs slow.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from schedlab.errors import UnknownNameError
from schedlab.instance import Instance, load_instance
from schedlab.policies.registry import get_policy, policies
from schedlab.simulator import SimulationResult, simulate

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "instances" / "gavel" / "trace-1000.json.gz"
DOCS = ROOT / "docs" / "simulator.md"
POLICIES = ("fifo", "gavel.max_min_fairness_agnostic", "gavel.max_min_fairness")
TARGET_S = 2.0
#: The yardstick's CPU seconds on this machine type when it runs at its usual speed (the
#: 2026-11-22 measurements on the shared 2-core VM ranged 0.17-0.31 s; 0.19 s was its usual
#: unloaded value): a run's yardsticks times this give its time on an unloaded machine, the
#: conditions of Gavel's ~21 s.
REFERENCE_YARDSTICK_S = 0.19

log = logging.getLogger("simulator_speed")


@dataclass
class Row:
    """One policy's measurements (fastest repeat; JCT and counts are identical across repeats)."""

    policy: str
    wall_s: float
    cpu_s: float
    walls: list[float]
    result: SimulationResult
    yardstick_s: float  # median yardstick (calibration_s) measured just before each repeat


def measure(instance: Instance, name: str, repeat: int) -> Row | None:
    """Run ``name`` ``repeat`` times; None when the policy is not registered."""
    walls: list[float] = []
    cpus: list[float] = []
    yardsticks: list[float] = []
    result: SimulationResult | None = None
    for _ in range(repeat):
        yardsticks.append(calibration_s(1))
        try:
            policy = get_policy(name)
        except UnknownNameError as exc:
            print(f"note: {name} skipped ({exc})", file=sys.stderr)
            return None
        wall0, cpu0 = time.perf_counter(), time.process_time()
        result = simulate(instance, policy=policy, mode="continuous", round_s=360.0)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    assert result is not None
    return Row(name, min(walls), min(cpus), walls, result, statistics.median(yardsticks))


def table(rows: list[Row]) -> list[str]:
    """Markdown table lines."""
    lines = ["| policy | wall s | cpu s | cpu / yardstick | rounds | job-rounds/s | solves | "
             "solver s | avg JCT h |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        r = row.result
        lines.append(
            f"| {row.policy} | {row.wall_s:.2f} | {row.cpu_s:.2f} | "
            f"{row.cpu_s / row.yardstick_s:.1f} | {len(r.rounds)} | "
            f"{r.job_rounds / row.wall_s:,.0f} | {r.solves} | {r.solver_time_s:.2f} | "
            f"{r.average_jct() / 3600:.2f} |")
    return lines


def write_docs(path: Path, block: str) -> None:
    """Replace the body of the ``## Speed`` section of ``path`` with ``block`` (atomic)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Simulator\n"
    section = re.compile(r"(^## Speed\n)(.*?)(?=^## |\Z)", re.S | re.M)
    if section.search(text):
        text = section.sub(lambda m: m.group(1) + "\n" + block + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n## Speed\n\n" + block + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def calibration_s(repeat: int = 3) -> float:
    """CPU seconds of a fixed pure-Python loop (5e6 additions), fastest of ``repeat``: a
    yardstick of this machine's speed at the time, to scale the table to another machine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        total = 0
        for i in range(5_000_000):
            total += i
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs per policy, fastest kept (default 3; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="one run per policy")
    parser.add_argument("--out", type=Path, metavar="FILE",
                        help="also write the markdown block to FILE")
    parser.add_argument("--write-docs", action="store_true",
                        help='replace the "## Speed" section of --docs (docs/simulator.md)')
    parser.add_argument("--docs", type=Path, default=DOCS, help=argparse.SUPPRESS)
    parser.add_argument("--no-docs", action="store_true",
                        help=argparse.SUPPRESS)  # the default now; kept for old command lines
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 3)
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    instance = load_instance(TRACE)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    calibration = calibration_s()
    known = policies()
    rows = []
    skipped = []
    for name in POLICIES:
        if name not in known:
            skipped.append(f"{name} (not registered)")
            print(f"note: {name} is not registered; skipped", file=sys.stderr)
            continue
        row = measure(instance, name, args.repeat)
        if row is None:
            skipped.append(name)
        else:
            rows.append(row)
            print(f"{name}: {row.wall_s:.2f} s wall, {row.cpu_s:.2f} s CPU (fastest of "
                  f"{args.repeat}), avg JCT {row.result.average_jct() / 3600:.2f} h; elapsed "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = table(rows)
    by_name = {row.policy: row for row in rows}
    notes = []
    aware = by_name.get("gavel.max_min_fairness")
    agnostic = by_name.get("gavel.max_min_fairness_agnostic")
    if aware and agnostic:
        ratio = aware.result.average_jct() / agnostic.result.average_jct()
        notes.append(f"Average JCT, heterogeneity-aware / agnostic max-min fairness: {ratio:.3f}.")
    if aware:
        verdict = "meets" if aware.wall_s <= TARGET_S else "misses"
        notes.append(
            f"`gavel.max_min_fairness`: {aware.wall_s:.2f} s wall (median of {len(aware.walls)}: "
            f"{statistics.median(aware.walls):.2f} s), {aware.cpu_s:.2f} s CPU -- {verdict} the "
            f"{TARGET_S:.0f} s target; Gavel's own simulator needs about 21 s.")
        usual = aware.cpu_s / aware.yardstick_s * REFERENCE_YARDSTICK_S
        notes.append(
            f"At this machine type's usual speed (yardstick {REFERENCE_YARDSTICK_S:.2f} s, the "
            f"conditions of Gavel's ~21 s; today's {aware.yardstick_s:.2f} s) its "
            f"{aware.cpu_s / aware.yardstick_s:.1f} yardsticks are {usual:.2f} s: "
            f"{'meets' if usual <= TARGET_S else 'misses'} the target, "
            f"{21.0 / usual:.0f}x faster than Gavel's simulator.")
    if skipped:
        notes.append("Skipped: " + ", ".join(skipped) + ".")
    notes.append(
        f"Yardstick: a pure-Python loop of 5e6 additions (measured before each repeat; "
        f"{calibration:.2f} s CPU at the start of the run) -- `cpu / yardstick` is the run's "
        "CPU time in yardsticks, which carries over to another machine or load: on a core "
        "where the yardstick takes 0.25 s, a run takes 0.25 s x that number.")
    machine = (f"{platform.python_implementation()} {platform.python_version()}, "
               f"{platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} before / "
               f"{load_after:.1f} after")
    header = (f"Measured {dt.date.today().isoformat()} with `python benchmarks/simulator_speed.py "
              f"--repeat {args.repeat}` ({machine}); trace-1000, 36:36:36, 360 s rounds, "
              "continuous arrivals; fastest of the repeats.")
    block = "\n".join([header, "", *lines, "", *notes])
    print()
    print(block, flush=True)
    if args.out is not None:
        args.out.write_text(block + "\n", encoding="utf-8")
        print(f"\nwritten to {args.out}", flush=True)
    if args.write_docs:
        write_docs(args.docs, block)
        print(f"\nwritten to {args.docs}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
