"""``schedlab goodput``: simulate policies on goodput jobs (Pollux, Sia and any registered
policy as fixed gangs); docs/goodput.md."""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from schedlab.atomic import write_bytes_atomic
from schedlab.cli.common import (
    name_list,
    positive_float,
    positive_int,
    seed_list,
    stdout_console,
)
from schedlab.errors import InputError
from schedlab.progress import unit_progress

if TYPE_CHECKING:
    from schedlab.simulator.goodput_run import GoodputRun
    from schedlab.workloads.goodput import GoodputJobSpec

#: The cluster of Pollux's simulator study (16 g4dn.12xlarge nodes of 4 T4 GPUs).
DEFAULT_CLUSTER = {"aws": (16, 4)}


def add_goodput_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``goodput`` subcommand."""
    cmd = sub.add_parser(
        "goodput", parents=[common], help="simulate policies on goodput jobs (Pollux, Sia)",
        description="Run Pollux, Sia or any registered policy (as the papers' fixed-gang "
        "'TunedJobs' baselines) on elastic goodput jobs in the world of Pollux's or Sia's "
        "simulator, and print Sia's metrics per policy. See docs/goodput.md.")
    cmd.add_argument("workload", metavar="WORKLOAD",
                     help="pollux:N (Pollux's shipped workload-N, 1-8), sia-philly:N (Sia's "
                     "Philly recipe of it), FILE.csv (name,time,application,num_replicas,"
                     "batch_size[,category]) or an instance file of goodput jobs")
    cmd.add_argument("--policies", type=name_list, default=["pollux"], metavar="A,B,...",
                     help="pollux, sia, or registered policies run as fixed gangs (e.g. "
                     "tiresias,fifo,gavel.max_min_fairness); default: pollux")
    cmd.add_argument("--world", choices=["pollux", "sia"], default="pollux",
                     help="the simulator whose rules apply: restarts, their delays, "
                     "calibration (default: pollux)")
    cmd.add_argument("--cluster", metavar="TYPE=NxG[,...]",
                     help="nodes x GPUs per node per type, e.g. aws=16x4 (default; an "
                     "instance file: its own) or aws=6x4,dgx-ext=2x8,rtx=3x8 (needs "
                     "--profiles)")
    cmd.add_argument("--profiles", metavar="DIR",
                     help="per-type profiles in the layout of Sia's sia-simulator/traces "
                     "(default: the shipped Pollux profiles, type aws only)")
    cmd.add_argument("--jobs", type=positive_int, metavar="N",
                     help="the first N jobs of the workload (default: all)")
    cmd.add_argument("--seeds", type=seed_list, default=[0], metavar="S[,S...]",
                     help="seeds of Pollux's search, one run each (default: 0)")
    cmd.add_argument("--interval", type=positive_float, default=60.0, metavar="S",
                     help="round length, s (default: 60, both papers)")
    cmd.add_argument("--tie-break", action="store_true",
                     help="sia: the two-stage lexicographic tie-break among equal optima")
    cmd.add_argument("--out", metavar="FILE.csv", help="write every job of every run here")
    cmd.set_defaults(handler=_cmd_goodput)


def _parse_cluster(text: str) -> dict[str, tuple[int, int]]:
    out = {}
    for part in text.split(","):
        name, _, shape = part.partition("=")
        nodes, _, per_node = shape.lower().partition("x")
        if not name or not nodes.isdigit() or not per_node.isdigit() \
                or int(nodes) < 1 or int(per_node) < 1:
            raise InputError(f"{part!r} is not TYPE=NODESxGPUS (e.g. aws=16x4)",
                             field="--cluster")
        out[name.strip()] = (int(nodes), int(per_node))
    return out


def _workload(text: str, jobs: int | None) -> tuple[list[GoodputJobSpec],
                                                     dict[str, tuple[int, int]] | None]:
    from schedlab.instance import load_instance
    from schedlab.workloads.goodput import (
        cluster_of,
        load_goodput_csv,
        pollux_workload,
        sia_philly_workload,
        specs_from_instance,
    )

    kind, _, rest = text.partition(":")
    if kind in ("pollux", "sia-philly") and rest:
        if not rest.isdigit():
            raise InputError(f"{text!r}: the workload number must be 1 to 8",
                             field="WORKLOAD")
        reader = pollux_workload if kind == "pollux" else sia_philly_workload
        return reader(int(rest), jobs=jobs), None
    path = Path(text)
    if not path.is_file():
        raise InputError("no such file (or pollux:N / sia-philly:N)", file=text,
                         field="WORKLOAD")
    if path.suffix == ".csv":
        specs = load_goodput_csv(path)
        return (specs if jobs is None else specs[:jobs]), None
    instance = load_instance(path)
    specs = specs_from_instance(instance, file=text)
    return (specs if jobs is None else specs[:jobs]), cluster_of(instance)


def _policy(name: str, seed: int, tie_break: bool) -> Any:
    from schedlab.policies.goodput_registry import goodput_policy

    if name == "pollux":
        return goodput_policy(name, seed=seed)
    if name == "sia":
        return goodput_policy(name, tie_break=tie_break)
    return goodput_policy(name)


def _cmd_goodput(args: argparse.Namespace) -> int:
    from schedlab.simulator.goodput_run import simulate_goodput

    specs, own_cluster = _workload(args.workload, args.jobs)
    cluster = (_parse_cluster(args.cluster) if args.cluster else own_cluster or DEFAULT_CLUSTER)
    profiles = Path(args.profiles) if args.profiles else None
    if profiles is not None and not profiles.is_dir():
        raise InputError("not a folder", file=args.profiles, field="--profiles")
    for name in args.policies:  # unknown names fail before anything runs
        _policy(name, 0, args.tie_break)
    runs: dict[str, list[GoodputRun]] = {}
    with unit_progress(not args.quiet) as bar:
        task = bar.add_task("goodput", total=len(args.policies) * len(args.seeds))
        for name in args.policies:
            for seed in args.seeds:
                run = simulate_goodput(specs, cluster, _policy(name, seed, args.tie_break),
                                       world=args.world, interval=args.interval,
                                       profiles=profiles)
                runs.setdefault(name, []).append(run)
                bar.update(task, advance=1, description=f"{name}, seed {seed}")
    _print(runs, len(specs), args.world)
    if args.out:
        write_bytes_atomic(args.out, _jobs_csv(runs, args.seeds).encode())
    return 0


def _print(runs: dict[str, list[GoodputRun]], jobs: int, world: str) -> None:
    from schedlab.analysis.goodput_metrics import goodput_summary

    table = Table(title=f"{jobs} goodput jobs, {world}'s simulator")
    for column in ("policy", "finished", "avg JCT (h)", "p99 JCT (h)", "makespan (h)",
                   "GPU-h/job", "restarts/job", "decide s/round"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, group in runs.items():
        s = goodput_summary(group)
        finished = int(s["jobs"] - s["unfinished"])
        decide = (sum(run.result.decide_time_s for run in group)
                  / max(sum(run.result.num_rounds or 0 for run in group), 1))
        table.add_row(name, f"{finished}/{int(s['jobs'])}", _h(s["avg_jct_s"]),
                      _h(s["p99_jct_s"]), _h(s["makespan_s"]),
                      f"{s['gpu_hours_per_job']:.2f}", f"{s['restarts_per_job']:.2f}",
                      f"{decide:.3f}")
    stdout_console().print(table)


def _h(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds / 3600:.3f}"


def _jobs_csv(runs: dict[str, list[GoodputRun]], seeds: list[int]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["policy", "seed", "job", "application", "arrival_s", "start_s",
                     "finish_s", "jct_s", "restarts", "gpu_seconds"])
    for name, group in runs.items():
        for seed, run in zip(seeds, group, strict=True):
            for j in run.result.jobs:
                writer.writerow([name, seed, j.job, j.job_type, j.arrival, j.start, j.finish,
                                 j.jct, j.migrations, j.gpu_seconds])
    return buffer.getvalue()


__all__ = ["add_goodput_command"]
