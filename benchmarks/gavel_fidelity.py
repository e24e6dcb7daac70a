"""How closely schedlab's simulator follows Gavel's own simulator, job by job.

Usage::

    # 1. our instance as a trace in Gavel's format (tab-separated, one job a line)
    python benchmarks/gavel_fidelity.py --write-gavel-trace /tmp/trace-1000.trace

    # 2. Gavel's simulator on it (in a checkout of github.com/stanford-futuredata/gavel,
    #    directory scheduler/, with its requirements installed), once per policy; its driver
    #    prints one line "Job <id>: <JCT s>" per job, which is all this script needs:
    python scripts/drivers/simulate_scheduler_with_trace.py -t /tmp/trace-1000.trace \
        -p max_min_fairness_perf -c 36:36:36 --seed 0 --throughputs_file \
        simulation_throughputs.json > /tmp/gavel-aware.txt       # likewise max_min_fairness
                                                                 # (agnostic) and fifo

    # 3. our side, compared job by job
    python benchmarks/gavel_fidelity.py --gavel aware=/tmp/gavel-aware.txt \
        --gavel agnostic=/tmp/gavel-agnostic.txt --gavel fifo=/tmp/gavel-fifo.txt

    # without Gavel's files: our side only (the comparison columns stay empty)
    python benchmarks/gavel_fidelity.py --ours-only [--quick]

Without ``--gavel`` (or with a file that is not there) the script stops with one line saying
so, unless ``--ours-only`` is given.  ``--quick``: the ``aware`` and ``fifo`` policies under
schedlab's mechanism only (about 15 s here; the default, every policy under both mechanisms,
about a minute).  It prints one line per (policy, mechanism) as it finishes; nothing is
written unless ``--json FILE`` asks for it.

A Gavel file is either that driver output (lines ``Job <id>: <JCT>``, other lines ignored) or
JSON ``{"jct_s": {"<id>": JCT}}``.  Gavel numbers its jobs 0, 1, ... in trace order; the trace
written in step 1 lists our jobs in (arrival, id) order, so Gavel's job i is our i-th job in
that order.  Gavel truncates ``total_steps`` to whole steps when it reads a trace; step 1 writes
them truncated.

Policies compared (ours -> Gavel's ``-p`` name):

* ``aware``: ``gavel.max_min_fairness`` -> ``max_min_fairness_perf``
* ``agnostic``: ``gavel.max_min_fairness_agnostic`` -> ``max_min_fairness``
* ``fifo``: ``gavel.fifo_agnostic`` (= ``fifo_agnostic``, FIFO as intended) -> ``fifo``
* ``fifo_quirks``: ``gavel.fifo_agnostic_quirks`` (``gavel_code_quirks=True``: Gavel's FIFO
  code as written, see docs/policies.md; Gavel's mechanism only) -> ``fifo``, compared with
  the same Gavel file as ``fifo``

Per policy and mechanism (``--mechanism``, default both ``schedlab`` and ``gavel``; see
docs/simulator.md) the table gives our average JCT, Gavel's, their ratio, the median and the
90th percentile of the per-job |JCT_ours - JCT_gavel| / JCT_gavel, and the simulation's wall
time.  Without ``--gavel`` files only our side is printed.  Nothing here runs Gavel's code.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import time
from pathlib import Path

from schedlab.instance import Instance, load_instance
from schedlab.policies.registry import get_policy
from schedlab.simulator import simulate

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INSTANCE = ROOT / "instances" / "gavel" / "trace-1000.json.gz"

#: our policy name, Gavel's policy name, per comparison key
POLICIES: dict[str, tuple[str, str]] = {
    "aware": ("gavel.max_min_fairness", "max_min_fairness_perf"),
    "agnostic": ("gavel.max_min_fairness_agnostic", "max_min_fairness"),
    "fifo": ("gavel.fifo_agnostic", "fifo"),
    "fifo_quirks": ("gavel.fifo_agnostic_quirks", "fifo"),
}

_JOB_LINE = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.eE+-]+)\s*$")


def trace_order(instance: Instance) -> list[str]:
    """Our job ids in the order of the Gavel trace (arrival, then position in the file)."""
    jobs = sorted(enumerate(instance.jobs), key=lambda p: (p[1].arrival, p[0]))
    return [job.id for _, job in jobs]


def write_gavel_trace(instance: Instance, path: Path) -> None:
    """The instance as a trace in Gavel's tab-separated format (simulation fields only)."""
    lines = []
    by_id = {job.id: job for job in instance.jobs}
    for job_id in trace_order(instance):
        job = by_id[job_id]
        if job.job_type is None or job.total_steps is None:
            raise SystemExit(f"job {job_id}: Gavel's trace needs job_type and total_steps")
        # job_type, command, working dir, num_steps_arg, needs_data_dir, total_steps,
        # scale_factor, priority_weight, SLO (-1: none), arrival time (s)
        fields = [job.job_type, "-", "-", "--num_steps", "0", str(int(job.total_steps)),
                  str(job.scale_factor), str(int(job.weight)), "-1", repr(float(job.arrival))]
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines) + "\n")


def read_gavel_jcts(path: Path, order: list[str]) -> dict[str, float]:
    """Gavel's per-job JCTs (s) keyed by our job ids (see the module docstring)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SystemExit(f"gavel_fidelity: cannot read Gavel's per-job JCT file {path} "
                         f"({exc.strerror}); make it with Gavel's simulator (see --help) or "
                         "run with --ours-only") from None
    raw: dict[int, float] = {}
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        raw = {int(k): float(v) for k, v in data["jct_s"].items() if v is not None}
    else:
        for line in text.splitlines():
            match = _JOB_LINE.match(line.strip())
            if match:
                raw[int(match.group(1))] = float(match.group(2))
    if not raw:
        raise SystemExit(f"{path}: no per-job JCTs found")
    return {order[i]: jct for i, jct in raw.items() if i < len(order)}


def run_ours(instance: Instance, key: str, mechanism: str) -> tuple[dict[str, float], float]:
    """Our per-job JCTs (s) and the simulation's wall time."""
    policy = get_policy(POLICIES[key][0], mechanism=mechanism)
    t0 = time.perf_counter()
    result = simulate(instance, policy=policy, mechanism=mechanism)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    return {j.job: j.jct for j in result.jobs if j.jct is not None}, wall


def compare(ours: dict[str, float], gavel: dict[str, float]) -> tuple[float, float, int]:
    """(median, p90 of |ours - gavel| / gavel over jobs both finished, number of such jobs)."""
    rel = sorted(abs(ours[j] - gavel[j]) / gavel[j] for j in ours.keys() & gavel.keys()
                 if gavel[j] > 0)
    if not rel:
        return float("nan"), float("nan"), 0
    return statistics.median(rel), rel[min(len(rel) - 1, int(0.9 * len(rel)))], len(rel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", type=Path, default=DEFAULT_INSTANCE)
    parser.add_argument("--write-gavel-trace", type=Path, metavar="PATH",
                        help="write the instance as a Gavel trace and stop")
    parser.add_argument("--gavel", action="append", default=[], metavar="KEY=FILE",
                        help="Gavel's per-job JCTs for aware, agnostic or fifo")
    parser.add_argument("--policies", default=None,
                        help=f"comma-separated (default {','.join(POLICIES)}; --quick: "
                        "aware,fifo)")
    parser.add_argument("--mechanism", action="append", choices=["schedlab", "gavel"],
                        help="mechanism(s) to run (default both; --quick: schedlab)")
    parser.add_argument("--quick", action="store_true",
                        help="aware and fifo under schedlab's mechanism only")
    parser.add_argument("--ours-only", action="store_true",
                        help="run without Gavel's files: our side only")
    parser.add_argument("--json", "--out", dest="json", type=Path, metavar="FILE",
                        help="also write the table as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.policies is None:
        args.policies = "aware,fifo" if args.quick else ",".join(POLICIES)
    if args.mechanism is None:
        args.mechanism = ["schedlab"] if args.quick else ["schedlab", "gavel"]
    unknown = [key for key in args.policies.split(",") if key not in POLICIES]
    if unknown:
        parser.error(f"unknown policy {unknown[0]!r} (known: {', '.join(POLICIES)})")
    if not args.gavel and not args.ours_only and args.write_gavel_trace is None:
        raise SystemExit("gavel_fidelity: no Gavel JCT file given (--gavel KEY=FILE, made by "
                         "Gavel's own simulator: see --help); use --ours-only to run our "
                         "side alone")

    instance = load_instance(args.instance)
    order = trace_order(instance)
    if args.write_gavel_trace is not None:
        write_gavel_trace(instance, args.write_gavel_trace)
        print(f"wrote {len(order)} jobs to {args.write_gavel_trace}")
        return 0
    gavel: dict[str, dict[str, float]] = {}
    for item in args.gavel:
        key, _, file = item.partition("=")
        if key not in ("aware", "agnostic", "fifo") or not file:
            raise SystemExit("--gavel wants KEY=FILE with KEY in aware, agnostic, fifo")
        gavel[key] = read_gavel_jcts(Path(file), order)
    if "fifo" in gavel:
        gavel["fifo_quirks"] = gavel["fifo"]

    rows = []
    started = time.perf_counter()
    print(f"{'policy':11} {'mechanism':9} {'ours avg h':>10} {'Gavel h':>8} {'ratio':>6} "
          f"{'median |d|/JCT':>14} {'p90':>6} {'jobs':>5} {'wall s':>7} {'elapsed s':>9}",
          flush=True)
    for key in args.policies.split(","):
        for mechanism in args.mechanism:
            if key == "fifo_quirks" and mechanism != "gavel":
                continue  # over-commits GPUs: only Gavel's mechanism runs it
            ours, wall = run_ours(instance, key, mechanism)
            avg = statistics.fmean(ours.values()) / 3600
            row: dict[str, object] = {"policy": key, "mechanism": mechanism,
                                      "ours_avg_jct_h": avg, "wall_s": wall,
                                      "finished": len(ours)}
            line = f"{key:11} {mechanism:9} {avg:10.2f}"
            if key in gavel:
                g_avg = statistics.fmean(gavel[key].values()) / 3600
                median, p90, n = compare(ours, gavel[key])
                row.update(gavel_avg_jct_h=g_avg, median_rel_diff=median, p90_rel_diff=p90,
                           compared=n)
                line += (f" {g_avg:8.2f} {avg / g_avg:6.3f} {100 * median:13.1f}% "
                         f"{100 * p90:5.1f}% {n:5d}")
            else:
                line += f" {'-':>8} {'-':>6} {'-':>14} {'-':>6} {'-':>5}"
            print(line + f" {wall:7.1f} {time.perf_counter() - started:9.0f}", flush=True)
            rows.append(row)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
