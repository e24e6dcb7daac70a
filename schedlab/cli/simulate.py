"""``schedlab simulate`` and ``compare``: online policies in the simulator on a generated
workload, a trace or an instance file (docs/simulate.md)."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from schedlab.cli.common import (
    EXIT_OK,
    Parser,
    fmt_mean_std,
    name_list,
    nonnegative_float,
    positive_float,
    positive_int,
    rate_list,
    seed_list,
    stdout_console,
)
from schedlab.defaults import UNFAIR_THRESHOLD
from schedlab.errors import InputError

log = logging.getLogger("schedlab.cli")

#: Jobs of a generated Gavel workload when --jobs is not given.
DEFAULT_SIM_JOBS = 100
#: Arrival rate of a generated Gavel workload when neither --jobs-per-hour nor --static is given.
DEFAULT_JOBS_PER_HOUR = 6.0
#: Cluster of generated and trace workloads when --cluster is not given (Gavel's).
DEFAULT_SIM_CLUSTER = "36:36:36"
#: --workload shockwave: Shockwave's canonical trace (120 jobs on 32 V100s, a job every 40 s
#: on average).
SHOCKWAVE_SIM_JOBS = 120
SHOCKWAVE_SIM_CLUSTER = "v100=32"
SHOCKWAVE_JOBS_PER_HOUR = 90.0
#: Trace file names that tell the format when --trace-format is not given.
_TRACE_NAME_HINTS = (("cluster_job_log", "philly"), ("cluster_log", "helios"), ("pai_", "pai"))
#: Throughput source of --workload shockwave and Shockwave .trace files without --throughputs.
SHOCKWAVE_SIM_THROUGHPUTS = "shockwave-tacc"


def add_simulation_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``simulate`` and ``compare`` subcommands (online policies in the simulator)."""
    from schedlab.defaults import TRACE_FORMATS

    shared = Parser(add_help=False)
    work = shared.add_argument_group("workload")
    work.add_argument("--workload", default="gavel",
                      metavar="gavel|shockwave|trace:FILE|FILE.json",
                      help="'gavel' (Gavel-style generated jobs, default), 'shockwave' "
                      "(Shockwave's generated jobs following their batch-size schedules; default "
                      f"{SHOCKWAVE_SIM_JOBS} jobs on {SHOCKWAVE_SIM_CLUSTER}), 'trace:FILE' "
                      "(a Philly, Helios or PAI trace file; for PAI the job table, with "
                      "pai_task_table.csv beside it; or a Shockwave .trace file), or an "
                      "instance file (.json, .json.gz, .yaml; or instance:FILE) replayed as "
                      "written: its jobs, arrivals and cluster")
    work.add_argument("--trace-format", choices=TRACE_FORMATS,
                      help="format of trace:FILE (default: guessed from the file name; "
                      "*.trace: shockwave)")
    work.add_argument("--throughputs", metavar="gavel|shockwave-tacc|FILE.json",
                      help="throughput source of --workload shockwave and of Shockwave .trace "
                      f"files (default {SHOCKWAVE_SIM_THROUGHPUTS}, Shockwave's measurements; "
                      "gavel: Gavel's; or a throughput file in schedlab's or Gavel's format)")
    work.add_argument("--keep-failed", action="store_true",
                      help="keep the trace's killed / failed jobs (default: skip them)")
    work.add_argument("--jobs", type=positive_int, metavar="N",
                      help=f"jobs (gavel: default {DEFAULT_SIM_JOBS}; trace: the first N, "
                      "default all; instance file: the N earliest arrivals, default all)")
    work.add_argument("--jobs-per-hour", type=rate_list, metavar="R[,R...]",
                      help="arrival rate(s), jobs/hour: Poisson arrivals for gavel (default "
                      f"{DEFAULT_JOBS_PER_HOUR:g}); a trace's or instance file's arrivals are "
                      "rescaled to the rate (default: the file's own timing). Several rates: "
                      "one run each")
    work.add_argument("--static", action="store_true",
                      help="gavel or instance file: every job arrives at 0 s (instead of "
                      "--jobs-per-hour or the file's arrivals)")
    work.add_argument("--cluster", metavar="SPEC",
                      help=f"GPUs: v100:p100:k80 counts (default {DEFAULT_SIM_CLUSTER}; an "
                      "instance file: its own cluster) or type=count,... (e.g. v100=32); for "
                      "an instance file the types must be those its jobs have throughputs for")
    work.add_argument("--seeds", type=seed_list, default=[0], metavar="S[,S...]",
                      help="seeds, one run each (workload and policy), e.g. 0,1,2 or 0-4 "
                      "(default: 0); an instance file is the same job stream for every seed, "
                      "so seeds then only change randomized policies")
    work.add_argument("--round-s", type=positive_float, metavar="S",
                      help="round length, seconds (default: 360, Gavel's)")
    work.add_argument("--mechanism", choices=["schedlab", "gavel"], default="schedlab",
                      help="round mechanism: schedlab's (default) or gavel, which follows "
                      "Gavel's simulator (allocation recomputed only at its resets, its "
                      "priorities and per-type queues, whole steps); see docs/simulator.md")
    work.add_argument("--resume-overhead", type=nonnegative_float, default=0.0, metavar="S",
                      help="seconds a job loses in a round it runs after not running in the "
                      "previous one, unless it finishes within the round less 5 s (Shockwave's "
                      "simulator charges 20); default 0: none. See docs/simulator.md")
    run = shared.add_argument_group("running and output")
    run.add_argument("--workers", type=positive_int, default=1, metavar="W",
                     help="simulations in parallel, in local processes (default: 1)")
    run.add_argument("--out", metavar="FILE.csv|FILE.parquet",
                     help="write every run's per-job table to this file (atomically)")
    run.add_argument("--runs-dir", metavar="DIR",
                     help="keep one result file per run here and skip runs already there "
                     "(resume an interrupted sweep); default: a temporary folder")
    run.add_argument("--plots", metavar="DIR",
                     help="write jct_cdf.png (and jct_vs_load.png with several rates) here")
    run.add_argument("--unfair-threshold", type=positive_float, default=UNFAIR_THRESHOLD,
                     metavar="T", help="a job with finish-time fairness rho > T is unfair "
                     "(default: %(default)s)")

    simulate = sub.add_parser(
        "simulate", parents=[common, shared], help="simulate an online policy on a workload",
        description="Replay a job stream (generated or from a trace) under one policy for "
        "each seed (and rate) and print JCT, makespan, utilization and fairness per run. "
        "See docs/simulate.md.")
    simulate.add_argument("--policy", required=True, metavar="NAME",
                          help="registered policy, e.g. fifo, srtf, tiresias, "
                          "gavel.max_min_fairness")
    simulate.set_defaults(handler=_cmd_simulate)

    compare = sub.add_parser(
        "compare", parents=[common, shared], help="compare policies on the same job stream",
        description="Run several policies on the same job streams (same seeds) and print one "
        "table of mean +- std over seeds. See docs/simulate.md.")
    compare.add_argument("--policies", required=True, type=name_list, metavar="A,B,...",
                         help="registered policies, comma-separated")
    compare.set_defaults(handler=_cmd_compare)


def _workload_spec(args: argparse.Namespace) -> Any:
    from schedlab.analysis.sweep import WorkloadSpec, parse_cluster_spec
    from schedlab.workloads.instance_jobs import looks_like_instance_file

    kind, _, path = args.workload.partition(":")
    if kind == "instance" and path:
        return _instance_workload_spec(args, path)
    if args.workload not in ("gavel", "shockwave") and kind != "trace" \
            and looks_like_instance_file(args.workload):
        return _instance_workload_spec(args, args.workload)
    cluster = tuple(parse_cluster_spec(args.cluster or DEFAULT_SIM_CLUSTER).items())
    if args.workload == "gavel":
        if args.trace_format or args.keep_failed:
            raise InputError("--trace-format and --keep-failed need --workload trace:FILE",
                             field="--workload")
        _no_throughputs(args)
        return WorkloadSpec(kind="gavel", num_jobs=args.jobs or DEFAULT_SIM_JOBS,
                            cluster=cluster)
    if args.workload == "shockwave":
        if args.trace_format or args.keep_failed:
            raise InputError("--trace-format and --keep-failed need --workload trace:FILE",
                             field="--workload")
        pools = parse_cluster_spec(args.cluster or SHOCKWAVE_SIM_CLUSTER)
        source, digest = _shockwave_throughputs(args)
        return WorkloadSpec(kind="shockwave", num_jobs=args.jobs or SHOCKWAVE_SIM_JOBS,
                            cluster=tuple(pools.items()), throughputs=source,
                            throughputs_digest=digest)
    if kind != "trace" or not path:
        raise InputError(f"{args.workload!r}: expected 'gavel' or 'trace:FILE', or "
                         "'shockwave', or an "
                         "instance file (.json, .json.gz, .yaml, or instance:FILE)",
                         field="--workload")
    fmt = args.trace_format
    if fmt is None:
        name = Path(path).name.lower()
        fmt = next((f for hint, f in _TRACE_NAME_HINTS if name.startswith(hint)), None)
        if fmt is None and name.endswith(".trace"):
            fmt = "shockwave"
        if fmt is None and Path(path).is_dir():
            fmt = "pai"
        if fmt is None:
            raise InputError(f"cannot tell the format of {path!r}; add --trace-format "
                             "philly|helios|pai|shockwave", field="--trace-format")
    if args.static:
        raise InputError("--static applies to the gavel workload; a trace keeps its own "
                         "arrivals (or --jobs-per-hour rescales them)", field="--static")
    if fmt == "shockwave":
        if args.keep_failed:
            raise InputError("a Shockwave trace has no failed jobs", field="--keep-failed")
        pools = parse_cluster_spec(args.cluster or SHOCKWAVE_SIM_CLUSTER)
        source, digest = _shockwave_throughputs(args)
        return WorkloadSpec(kind="trace", num_jobs=args.jobs, cluster=tuple(pools.items()),
                            trace_path=path, trace_format=fmt, throughputs=source,
                            throughputs_digest=digest)
    _no_throughputs(args)
    return WorkloadSpec(kind="trace", num_jobs=args.jobs, cluster=cluster, trace_path=path,
                        trace_format=fmt, keep_failed=args.keep_failed)


def _shockwave_throughputs(args: argparse.Namespace) -> tuple[str, str | None]:
    """(source, digest): ``--throughputs`` (default shockwave-tacc) and, for a file, its
    digest; a source that is neither a shipped name nor a readable table fails here."""
    from schedlab.errors import UnknownNameError
    from schedlab.workloads.throughput_files import resolve_throughputs, throughputs_digest

    source = args.throughputs or SHOCKWAVE_SIM_THROUGHPUTS
    try:
        resolve_throughputs(source)
    except UnknownNameError as exc:
        raise UnknownNameError(exc.reason, field="--throughputs") from None
    return source, throughputs_digest(source)


def _no_throughputs(args: argparse.Namespace) -> None:
    if args.throughputs:
        raise InputError("applies to --workload shockwave and Shockwave .trace files",
                         field="--throughputs")


def _instance_workload_spec(args: argparse.Namespace, path: str) -> Any:
    """``--workload FILE.json``: the file's jobs and cluster (``--cluster`` overrides it)."""
    from schedlab.analysis.sweep import WorkloadSpec, parse_cluster_spec
    from schedlab.workloads.instance_jobs import (
        InstanceFile,
        file_digest,
        workload_from_instance_file,
    )

    if args.trace_format or args.keep_failed:
        raise InputError("--trace-format and --keep-failed need --workload trace:FILE",
                         field="--workload")
    _no_throughputs(args)
    override = None if args.cluster is None else tuple(parse_cluster_spec(args.cluster).items())
    # Load (and check) it here: a bad file or a --cluster that does not fit fails at once.
    instance = workload_from_instance_file(
        path, cluster=None if override is None else dict(override), num_jobs=args.jobs)
    pools = tuple((acc, pool.count) for acc, pool in instance.cluster.accelerators.items())
    spec = InstanceFile(path=path, digest=file_digest(path), cluster=override,
                        static=bool(args.static))
    return WorkloadSpec(kind="instance", num_jobs=args.jobs, cluster=pools, instance_file=spec)


def _run_simulations(args: argparse.Namespace, policies: list[str]) -> tuple[Any, Any, Any]:
    """Check the inputs, run every (policy, rate, seed), return (workload, results, summary)."""
    import tempfile

    from schedlab.analysis import sweep

    # Cheap checks first, so a typo fails before anything runs.
    sweep.check_policies(policies)
    workload = _workload_spec(args)
    if args.static and args.jobs_per_hour:
        raise InputError("give --static or --jobs-per-hour, not both", field="--static")
    out = Path(args.out) if args.out else None
    if out is not None:
        if out.is_dir():
            raise InputError("is a directory; --out needs a file name", file=str(out),
                             field="--out")
        if out.suffix.lower() not in sweep.RESULT_SUFFIXES:
            raise InputError("--out needs a .csv or .parquet file name", file=str(out),
                             field="--out")
        if out.suffix.lower() == ".parquet" and not sweep.has_pyarrow():
            raise InputError("writing Parquet needs pyarrow (pip install pyarrow); or use "
                             ".csv", file=str(out), field="--out")
    if args.plots:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise InputError("plots need matplotlib (pip install matplotlib)", field="--plots")
    loads: list[float | None]
    if args.static:
        loads = [None]
    elif args.jobs_per_hour:
        loads = list(args.jobs_per_hour)
    else:
        loads = [DEFAULT_JOBS_PER_HOUR] if workload.kind == "gavel" else [None]
        if workload.kind == "shockwave":
            loads = [SHOCKWAVE_JOBS_PER_HOUR]
    # Build the first job stream here: a bad trace fails now, with its own message.
    first = workload.build(args.seeds[0], loads[0], args.round_s)
    num_jobs = len(first.jobs)
    log.info("workload %s: %d jobs on %d GPUs", first.name, num_jobs, workload.gpus)
    specs = sweep.plan_runs(policies, loads, args.seeds, workload, round_s=args.round_s,
                            mechanism=args.mechanism,
                            resume_overhead_s=args.resume_overhead)

    if len(specs) == 1 and not args.runs_dir:
        # the one run simulates the stream just built (seed and rate are the spec's)
        results = _run_single(specs[0], num_jobs, out, args.quiet, first)
    else:
        del first  # each run builds its own; at 10^5 jobs this copy is ~10^2 MB
        with tempfile.TemporaryDirectory(prefix="schedlab-runs-") as scratch:
            folder = Path(args.runs_dir) if args.runs_dir else Path(scratch)
            report = sweep.run_sweep(specs, folder, workers=args.workers,
                                     progress=not args.quiet,
                                     fmt="auto" if args.runs_dir else "csv")
            if report.skipped:
                log.warning("%d of %d runs were already in %s; reusing them",
                            len(report.skipped), report.total, folder)
            results = sweep.load_results([report.files[s.key] for s in specs])
    summary = sweep.summarize_runs(results, unfair_threshold=args.unfair_threshold)
    if out is not None:
        try:
            sweep.write_frame_atomic(results, out)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", file=str(out),
                             field="--out") from None
    if args.plots:
        _write_plots(Path(args.plots), results, summary, policies)
    return workload, results, summary


def _run_single(spec: Any, jobs: int, out: Path | None, quiet: bool, instance: Any) -> Any:
    """One simulation in this process, watched and kept (docs/simulate.md): a progress bar on
    stderr when it is a terminal (simulated hours, jobs finished, job-rounds/s); with
    ``--out``, finished jobs' records appended to ``<out>.partial.csv`` in chunks as they
    finish, so Ctrl-C leaves them on disk (the file is removed after a complete run, whose
    table then goes to ``--out``).  ``instance`` is the spec's job stream, already built (by
    the input checks), so it is not built twice.  Returns the run's result table."""
    import functools

    from schedlab.analysis import sweep
    from schedlab.simulator.stream import RecordChunks, progress_display

    chunks = None
    if out is not None:
        leading = {"policy": spec.policy,
                   "jobs_per_hour": "" if spec.jobs_per_hour is None else spec.jobs_per_hour,
                   "seed": spec.seed}
        chunks = RecordChunks(out.with_name(out.name + ".partial.csv"),
                              [acc for acc, _ in spec.workload.cluster], leading)
    show = not quiet and sys.stderr.isatty()
    try:
        with progress_display(jobs, show, f"{spec.policy}") as report:
            runner = functools.partial(sweep.simulate_run, instance=instance, progress=report,
                                       on_job_done=None if chunks is None else chunks.add)
            frame, _ = sweep.run_one(spec, runner)
    except KeyboardInterrupt:
        if chunks is not None:
            chunks.flush()
            log.warning("interrupted: the records of the %d jobs finished so far are in %s",
                        chunks.written, chunks.path)
        raise
    if chunks is not None:
        chunks.path.unlink(missing_ok=True)
    return _as_read_back(frame)


def _as_read_back(frame: Any) -> Any:
    """``frame`` as a sweep reads it back from its CSV run file: types as ``read_csv`` gives
    them (ids that look like numbers become numbers, None becomes NaN).  Float and integer
    columns are kept as they are -- their CSV round trip gives them back unchanged and only
    costs time (~1.5 s for 10^5 rows) -- so only the object columns make the trip."""
    import io

    import pandas as pd

    floats = [c for c in frame.columns if frame[c].dtype in ("float64", "int64")]
    others = [c for c in frame.columns if c not in floats]
    read = pd.read_csv(io.StringIO(frame[others].to_csv(index=False))) if others else None
    table = frame[floats].reset_index(drop=True)
    if read is not None:
        table = pd.concat([read, table], axis=1)
    return table[list(frame.columns)]


def _write_plots(folder: Path, results: Any, summary: Any, policies: list[str]) -> None:
    from schedlab.analysis import plots, sweep

    written = [plots.plot_jct_cdf(results, folder / "jct_cdf.png", policies=policies)]
    if summary["jobs_per_hour"].nunique(dropna=True) > 1:
        written.append(plots.plot_jct_vs_load(sweep.aggregate(summary),
                                              folder / "jct_vs_load.png", policies=policies))
    for path in written:
        log.info("wrote %s", path)


def _fmt_rate(value: Any, workload: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if workload.kind == "instance":
            return "static" if workload.instance_file.static else "file"
        return "static" if workload.kind in ("gavel", "shockwave") else "trace"
    return f"{value:g}"


def _fmt_metric(value: float, scale: float, spec: str) -> str:
    return "-" if value is None or math.isnan(value) else format(value * scale, spec)


def _describe_workload(workload: Any) -> str:
    pools = ", ".join(f"{acc} x{n}" for acc, n in workload.cluster)
    if workload.kind == "instance":
        what = f"instance file {Path(workload.instance_file.path).name}"
    elif workload.kind == "gavel":
        what = "Gavel-style jobs"
    elif workload.kind == "shockwave":
        what = "Shockwave's jobs with their batch-size schedules"
    else:
        what = f"{workload.trace_format} trace {Path(workload.trace_path).name}"
    if workload.throughputs is not None:
        what += f" ({Path(workload.throughputs).name} throughputs)"
    return f"{what}; {workload.gpus} GPUs ({pools})"


def _cmd_simulate(args: argparse.Namespace) -> int:
    from schedlab.analysis.metrics import TABLE_METRICS
    from schedlab.analysis.sweep import aggregate

    workload, _, summary = _run_simulations(args, [args.policy])
    console = stdout_console()
    if args.quiet:
        for row in aggregate(summary).to_dict("records"):
            console.print(_quiet_line(row, workload), markup=False)
        return EXIT_OK
    table = Table(title=f"{args.policy} on {_describe_workload(workload)}",
                  title_justify="left")
    for name in ("jobs/h", "seed", "finished"):
        table.add_column(name, justify="right")
    for _, label, _, _ in TABLE_METRICS:
        table.add_column(label, justify="right")
    by_rate = aggregate(summary).to_dict("records")
    for agg in by_rate:
        rate = agg["jobs_per_hour"]
        rows = summary[summary["jobs_per_hour"].isna()] if _is_nan(rate) else \
            summary[summary["jobs_per_hour"] == rate]
        for row in rows.to_dict("records"):
            table.add_row(_fmt_rate(rate, workload), str(row["seed"]),
                          f"{row['finished']:.0f}/{row['jobs']:.0f}",
                          *[_fmt_metric(row[key], scale, spec)
                            for key, _, scale, spec in TABLE_METRICS])
        if agg["seeds"] > 1:
            table.add_row(_fmt_rate(rate, workload), "mean ± std", "",
                          *[fmt_mean_std(agg[f"{key}_mean"], agg[f"{key}_std"], scale, spec,
                                          agg["seeds"])
                            for key, _, scale, spec in TABLE_METRICS], style="bold")
    console.print(table)
    _note_unfinished(console, summary)
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from schedlab.analysis.metrics import TABLE_METRICS
    from schedlab.analysis.sweep import aggregate

    workload, _, summary = _run_simulations(args, args.policies)
    order = {name: i for i, name in enumerate(args.policies)}
    rows = sorted(aggregate(summary).to_dict("records"),
                  key=lambda row: (order[row["policy"]], _rate_key(row["jobs_per_hour"])))
    console = stdout_console()
    if args.quiet:
        for row in rows:
            console.print(_quiet_line(row, workload), markup=False)
        return EXIT_OK
    seeds = len(args.seeds)
    table = Table(title=f"{', '.join(args.policies)} on {_describe_workload(workload)}; "
                  f"{'mean ± std over ' if seeds > 1 else ''}{seeds} seed(s)",
                  title_justify="left")
    table.add_column("policy", no_wrap=True)
    table.add_column("jobs/h", justify="right")
    for _, label, _, _ in TABLE_METRICS:
        table.add_column(label, justify="right")
    for row in rows:
        table.add_row(str(row["policy"]), _fmt_rate(row["jobs_per_hour"], workload),
                      *[fmt_mean_std(row[f"{key}_mean"], row[f"{key}_std"], scale, spec,
                                      row["seeds"])
                        for key, _, scale, spec in TABLE_METRICS])
    console.print(table)
    _note_unfinished(console, summary)
    return EXIT_OK


def _quiet_line(row: Any, workload: Any) -> str:
    """``policy jobs_per_hour=6 avg_jct_h=... worst_rho=...``: means over seeds, one line."""
    from schedlab.analysis.metrics import TABLE_METRICS

    cells = []
    for key, _, scale, spec in TABLE_METRICS:
        name = key[:-2] + "_h" if scale != 1.0 and key.endswith("_s") else key
        cells.append(f"{name}={_fmt_metric(row[f'{key}_mean'], scale, spec)}")
    return (f"{row['policy']} jobs_per_hour={_fmt_rate(row['jobs_per_hour'], workload)} "
            f"seeds={row['seeds']} {' '.join(cells)}")


def _rate_key(value: Any) -> float:
    return -1.0 if _is_nan(value) else float(value)


def _is_nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _note_unfinished(console: Console, summary: Any) -> None:
    short = summary[summary["finished"] < summary["jobs"]]
    if len(short):
        console.print(f"note: {len(short)} run(s) stopped with unfinished jobs; their JCT "
                      "metrics cover finished jobs only")
