"""``schedlab replay``: run a Solution's plan with real zoo jobs (docs/executor.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from schedlab.cli.common import (
    EXIT_OK,
    nonnegative_float,
    positive_float,
    positive_int,
    stdout_console,
)
from schedlab.errors import InputError, require_torch


def add_replay_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``replay`` on the top-level subparsers ``sub``."""
    from schedlab.defaults import REPLAY_CHECKPOINT_EVERY_S as DEFAULT_CHECKPOINT_EVERY_S

    replay = sub.add_parser(
        "replay", parents=[common],
        help="run a solution's rounds or schedule with real PyTorch jobs; predicted vs "
        "realized JCT",
        description="Replay SOLUTION's rounds (or timed schedule) with real zoo training jobs "
        "(each job's job_type is MODEL[/SIZE]@BATCH), one worker per device slot, and report "
        "per job the simulator's predicted JCT for the same plan against the realized one. "
        "See docs/executor.md.")
    replay.add_argument("solution", metavar="SOLUTION", help="solution file (rounds or schedule)")
    replay.add_argument("--instance", required=True, metavar="FILE",
                        help="the instance the solution was solved for")
    replay.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local processes (default) or Ray actors (pip install "
                        "'schedlab[ray]')")
    replay.add_argument("--ray-address", metavar="ADDR",
                        help="Ray cluster to join (default: start a local Ray)")
    replay.add_argument("--time-scale", type=positive_float, default=1.0, metavar="X",
                        help="an instance second lasts 1/X wall seconds (default 1)")
    replay.add_argument("--scale-work", action="store_true",
                        help="shrink the work with the time: a job runs ceil(R/X) real steps, "
                        "so hours of instance work replay in minutes")
    replay.add_argument("--threads", type=positive_int, default=1, metavar="N",
                        help="torch threads per worker (one CPU device = one worker; "
                        "default 1)")
    replay.add_argument("--workdir", default="replay", metavar="DIR",
                        help="journal and checkpoints (default ./replay)")
    replay.add_argument("--resume", action="store_true",
                        help="continue the replay journaled in --workdir")
    replay.add_argument("--segment-steps", action="store_true",
                        help="each segment runs its predicted whole steps instead of its wall "
                        "time (deterministic progress, for comparing backends)")
    replay.add_argument("--checkpoint-every", type=nonnegative_float,
                        default=DEFAULT_CHECKPOINT_EVERY_S, metavar="S",
                        help="wall seconds between checkpoints inside a segment (0: only at "
                        f"preemption and finish; default {DEFAULT_CHECKPOINT_EVERY_S:g})")
    replay.add_argument("--device-map", metavar="MAP",
                        help="accelerator slots on CUDA devices, e.g. h100=cuda:0,h100:1=cuda:1 "
                        "(default: every slot is a CPU worker)")
    replay.add_argument("--out", metavar="FILE", help="write the report as JSON (atomically)")
    replay.set_defaults(handler=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    require_torch("replay")  # before the imports below, which need it
    from schedlab.executor.plan import parse_device_map
    from schedlab.executor.run import run_replay

    out = Path(args.out) if args.out else None
    if out is not None and out.is_dir():
        raise InputError("is a directory; --out needs a file name", file=str(out),
                         field="--out")
    for name in (args.solution, args.instance):
        if not Path(name).is_file():
            raise InputError("no such file", file=name)
    report = run_replay(args.solution, args.instance, backend=args.backend,
                        time_scale=args.time_scale, threads=args.threads,
                        workdir=args.workdir, resume=args.resume,
                        segment_steps=args.segment_steps, scale_work=args.scale_work,
                        checkpoint_every_s=args.checkpoint_every,
                        devices=parse_device_map(args.device_map),
                        ray_address=args.ray_address, out=out)
    console = stdout_console()
    summary = report.summary
    median = "-" if summary.median_abs_error is None else f"{summary.median_abs_error:.1%}"
    line = (f"replay: {summary.finished}/{summary.jobs} jobs finished, median |JCT error| "
            f"{median} over {summary.compared} job(s), {summary.faults} fault(s), "
            f"{summary.wall_s:.1f} s wall")
    if not args.quiet:
        console.print(_job_table(report))
    console.print(line + (f", written {out}" if out is not None else ""))
    return EXIT_OK


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _job_table(report: Any) -> Table:
    table = Table(title=f"replay on {report.backend} ({report.mode} mode, time scale "
                  f"{report.time_scale:g}): predicted vs realized JCT (instance s)")
    for name in ("job", "type", "steps", "predicted JCT", "realized JCT", "error",
                 "switch s", "faults"):
        table.add_column(name, justify="left" if name in ("job", "type") else "right")
    for job in report.jobs:
        steps = f"{job.realized_steps}/{job.work_steps}"
        table.add_row(job.job, job.job_type, steps, _fmt(job.predicted_jct_s),
                      _fmt(job.realized_jct_s), _fmt(job.relative_error, "+.1%"),
                      f"{job.switch_s:.2f}", str(len(job.faults)) if job.faults else "")
    return table
