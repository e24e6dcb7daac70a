"""``schedlab profile``: measure zoo jobs into a throughput file (docs/profiler.md); it also
registers the profiler's tools ``profile-table`` and ``profile-instance``."""

from __future__ import annotations

import argparse
import math
import platform
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schedlab.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Parser,
    list_of,
    nonnegative_int,
    positive_float,
    positive_int,
    stdout_console,
)
from schedlab.errors import InputError, require_torch


def add_profile_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``profile`` and the profiler's tools on the top-level subparsers ``sub``."""
    _add_profile(sub, common)
    from schedlab.profiler.switch_table import add_table_command
    add_table_command(sub, common, Parser)
    from schedlab.profiler.to_instance import add_profile_instance_command
    add_profile_instance_command(sub, common, Parser)


def _add_profile(sub: Any, common: argparse.ArgumentParser) -> None:
    profile = sub.add_parser(
        "profile", parents=[common], help="measure zoo jobs into a throughput file",
        description="Measure zoo jobs (schedlab.profiler.zoo) on this machine's devices into a "
        "throughput file (schedlab/throughputs@1, see 'schedlab schema throughputs' and "
        "docs/profiler.md): steps/s with a confidence interval and peak memory per job and "
        "scale factor, and optionally colocated pairs, batch-size regimes, Saturn's technique "
        "search and switch costs. Cells already in --out are kept (resume); Ctrl-C keeps every "
        "finished cell.")
    profile.add_argument("--check", metavar="FILE",
                         help="re-time a sample of FILE's cells with its own settings and "
                         "report how far they moved (a profile taken on a busy host drifts); "
                         "no other option needed")
    profile.add_argument("--check-cells", type=positive_int, default=3, metavar="N",
                         help="cells --check re-times (default: %(default)s)")
    profile.add_argument("--models", type=list_of(str), metavar="M,M,...",
                         help="zoo models (resnet18, resnet50, transformer, lstm, recommender, "
                         "gpt)")
    profile.add_argument("--sizes", type=list_of(str), default=["tiny"], metavar="S,S,...",
                         help="model sizes: tiny, small, base (default: tiny)")
    profile.add_argument("--batch-sizes", type=list_of(positive_int),
                         metavar="B,B,...", help="batch sizes per process")
    profile.add_argument("--devices", type=list_of(str), default=["cpu"],
                         metavar="cpu[,cuda[=LABEL]]",
                         help="device types; LABEL names the type in instances (default for "
                         "CUDA: from the GPU's name, e.g. h100). Default: cpu")
    profile.add_argument("--scale-factors", type=list_of(positive_int), default=[1],
                         metavar="N,N,...", help="devices per job (data parallel; default: 1)")
    profile.add_argument("--colocate", action="store_true",
                         help="also every pair of jobs sharing one device (Gavel)")
    profile.add_argument("--regimes", action="store_true",
                         help="also seconds per epoch at each batch size (Shockwave)")
    profile.add_argument("--samples-per-epoch", type=positive_int, default=50_000, metavar="N",
                         help="samples in an epoch for --regimes (default: %(default)s)")
    profile.add_argument("--techniques", action="store_true",
                         help="also Saturn's technique search: single on 1 device, ddp and fsdp "
                         "on each scale factor above 1")
    profile.add_argument("--switches", type=list_of(str), default=[],
                         metavar="cold,warm,pipelined,resident",
                         help="also these switch costs per job (schedlab.profiler.switching)")
    profile.add_argument("--switch-repeats", type=positive_int, default=3, metavar="N",
                         help="timed switches per switch cell (default: %(default)s)")
    profile.add_argument("--threads", type=positive_int, default=1, metavar="T",
                         help="torch threads per worker process = per CPU device (default: 1)")
    profile.add_argument("--warmup-steps", type=nonnegative_int, default=3, metavar="N",
                         help="untimed steps first (default: %(default)s)")
    profile.add_argument("--min-steps", type=positive_int, default=5, metavar="N",
                         help="timed steps at least, unless --max-seconds ends the cell "
                         "(default: %(default)s)")
    profile.add_argument("--max-steps", type=positive_int, default=200, metavar="N",
                         help="timed steps at most (default: %(default)s)")
    profile.add_argument("--max-seconds", type=positive_float, default=10.0, metavar="S",
                         help="time limit of a cell's timed phase (default: %(default)s)")
    profile.add_argument("--confidence", type=positive_float, default=0.95, metavar="C",
                         help="confidence level of the intervals (default: %(default)s)")
    profile.add_argument("--target-halfwidth", type=positive_float, default=0.05, metavar="R",
                         help="stop when the CI half-width / mean step time <= R "
                         "(default: %(default)s)")
    profile.add_argument("--busy-neighbours", action="store_true",
                         help="CPU: while a cell is timed, every CPU device it does not use "
                         "runs the same job untimed (the conditions of a replay that keeps "
                         "every device busy; docs/profiler.md)")
    profile.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                         help="seed of the weights and synthetic batches (default: 0)")
    profile.add_argument("--cell-timeout", type=positive_float, default=600.0, metavar="S",
                         help="a cell's workers are stopped after S seconds and the cell "
                         "recorded as error (default: %(default)s)")
    profile.add_argument("--out", metavar="FILE",
                         help="throughput file (JSON); an existing one is resumed (required "
                         "unless --check)")
    profile.add_argument("--redo", action="store_true",
                         help="measure again the cells already ok in --out")
    profile.set_defaults(handler=_cmd_profile)


# -------------------------------------------------------------------- devices and options


_LABEL = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def gpu_label(name: str) -> str:
    """A short device label from a CUDA device name: 'NVIDIA H100 80GB HBM3' -> 'h100',
    'NVIDIA A100-SXM4-40GB' -> 'a100', 'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    words = [w for w in re.split(r"[\s_]+", name.strip())
             if w.lower() not in ("nvidia", "geforce", "tesla", "quadro")]
    if not words:
        return "cuda"
    first = words[0].split("-")[0].lower()
    if first in ("rtx", "gtx") and len(words) > 1:
        first += words[1].split("-")[0].lower()
    label = re.sub(r"[^a-z0-9_.-]", "", first)
    return label or "cuda"


def parse_devices(items: list[str]) -> tuple[Any, ...]:
    """``cpu``, ``cuda`` and ``BACKEND=LABEL`` items -> :class:`~schedlab.profiler.run.Device`;
    CUDA without a CUDA device is an :class:`InputError`."""
    from schedlab.profiler.run import Device

    devices = []
    for item in items:
        backend, _, label = item.partition("=")
        backend = backend.strip().lower()
        if backend not in ("cpu", "cuda"):
            raise InputError(f"unknown device {item!r}: expected cpu or cuda[=LABEL]",
                             field="--devices")
        if label and not _LABEL.match(label):
            raise InputError(f"bad device label {label!r}: lower-case letters, digits, '_', "
                             "'.', '-'", field="--devices")
        if backend == "cpu":
            devices.append(Device(label or "cpu", "cpu", _cpu_name()))
            continue
        import torch

        if not torch.cuda.is_available():
            raise InputError("--devices cuda: no CUDA device is available here (torch "
                             f"{torch.__version__}, torch.cuda.is_available() is False)",
                             field="--devices")
        name = torch.cuda.get_device_name(0)
        count = torch.cuda.device_count()
        devices.append(Device(label or gpu_label(name), "cuda",
                              f"{name} (cuda:0..{count - 1})"))
    labels = [d.label for d in devices]
    if len(set(labels)) != len(labels):
        raise InputError(f"device labels repeat: {', '.join(labels)}", field="--devices")
    return tuple(devices)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def campaign_options(args: argparse.Namespace) -> Any:
    """The :class:`~schedlab.profiler.run.CampaignOptions` of the parsed arguments."""
    from schedlab.profiler.matrix import SWITCH_KINDS, Settings
    from schedlab.profiler.run import CampaignOptions
    from schedlab.profiler.zoo import MODELS, SIZES, JobSpec

    for model in args.models:
        if model not in MODELS:
            raise InputError(f"unknown zoo model {model!r}; known: {', '.join(MODELS)}",
                             field="--models")
    for size in args.sizes:
        if size not in SIZES:
            raise InputError(f"unknown size {size!r}; known: {', '.join(SIZES)}",
                             field="--sizes")
    for kind in args.switches:
        if kind not in SWITCH_KINDS:
            raise InputError(f"unknown switch kind {kind!r}; known: {', '.join(SWITCH_KINDS)}",
                             field="--switches")
    if args.min_steps < 2:
        raise InputError("must be at least 2 (a confidence interval needs two steps)",
                         field="--min-steps")
    if args.max_steps < args.min_steps:
        raise InputError(f"--max-steps {args.max_steps} is below --min-steps "
                         f"{args.min_steps}", field="--max-steps")
    if args.confidence >= 1:
        raise InputError("must be between 0 and 1", field="--confidence")
    try:
        settings = Settings(warmup_steps=args.warmup_steps, min_steps=args.min_steps,
                            max_steps=args.max_steps, max_seconds=args.max_seconds,
                            confidence=args.confidence,
                            target_relative_halfwidth=args.target_halfwidth,
                            busy_neighbours=args.busy_neighbours)
    except ValidationError as exc:
        raise InputError(str(exc.errors()[0].get("msg")), field="settings") from None
    jobs = tuple(JobSpec(m, s, b) for m in dict.fromkeys(args.models)
                 for s in dict.fromkeys(args.sizes) for b in dict.fromkeys(args.batch_sizes))
    return CampaignOptions(
        jobs=jobs, devices=parse_devices(args.devices),
        scale_factors=tuple(dict.fromkeys(args.scale_factors)), colocate=args.colocate,
        regimes=args.regimes, samples_per_epoch=args.samples_per_epoch,
        techniques=args.techniques, switches=tuple(dict.fromkeys(args.switches)),
        switch_repeats=args.switch_repeats, threads=args.threads, seed=args.seed,
        settings=settings, timeout_s=args.cell_timeout)


def _check_out(out: Path) -> None:
    if out.is_dir():
        raise InputError("is a directory; --out needs a file name", file=str(out),
                         field="--out")
    if not out.parent.is_dir():
        raise InputError("its folder does not exist", file=str(out), field="--out")


# ------------------------------------------------------------------------------ command


def _cmd_profile(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    require_torch("profile")  # before the imports below, which need it
    from schedlab.profiler.run import open_file, plan, run_campaign

    if args.check is not None:
        return _cmd_check(args)
    for value, flag in ((args.models, "--models"), (args.batch_sizes, "--batch-sizes"),
                        (args.out, "--out")):
        if value is None:
            raise InputError("is required (unless --check FILE)", field=flag)
    options = campaign_options(args)
    out = Path(args.out)
    _check_out(out)
    open_file(out, options)  # a bad or mismatched file is an input error before measuring
    cells = plan(options)
    stderr = Console(stderr=True, markup=False)
    progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=stderr,
                        disable=args.quiet or not stderr.is_terminal, transient=True)
    with progress:
        task = progress.add_task("profile", total=len(cells))

        lines = not args.quiet and not sys.stdout.isatty()

        def step(planned: Any, cell: Any) -> None:
            progress.update(task, advance=1, description=planned.label)
            if lines:  # stdout is a file or pipe: one line per cell as it finishes
                what = ("kept (already ok)" if cell is None
                        else f"{cell.status} {_value_text(cell)}".rstrip())
                busy = f" [busy host: {cell.host_busy}]" if cell is not None and getattr(
                    cell, "host_busy", None) else ""
                sys.stdout.write(f"cell {planned.key}: {what}{busy}\n")
                sys.stdout.flush()

        result = run_campaign(options, out, redo=args.redo, on_cell=step, cells=cells)
    finished = len(result.measured)
    if result.interrupted:
        where = (f"kept in {out} ({len(result.file.cells)} cell(s) in the file)"
                 if out.exists() else "nothing written")
        sys.stderr.write(f"interrupted: {finished} cell(s) measured in this run, {where}; "
                         "run the same command again to resume\n")
        sys.stderr.flush()
        return EXIT_INTERRUPTED
    if not args.quiet:
        _report(result, out)
    failed = [cell for cell in result.measured if cell.status == "error"]
    return EXIT_FAILURE if failed else EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    """``profile --check FILE``: re-time a sample of cells and report the drift, one line per
    cell as it finishes; exit 1 when a cell moved more than the limit or failed."""
    from schedlab.profiler.run import DRIFT_LIMIT, Drift, check_drift

    moved = 0

    def report(drift: Drift) -> None:
        nonlocal moved
        if drift.ratio is None:
            moved += 1
            text = "could not be re-timed"
        else:
            change = drift.ratio - 1.0
            moved += abs(change) > DRIFT_LIMIT
            text = (f"{drift.recorded:.4g} -> {drift.now:.4g} steps/s ({change:+.1%}"
                    f"{'; drifted' if abs(change) > DRIFT_LIMIT else ''})")
        busy = f" [busy host now: {drift.host_busy}]" if drift.host_busy else ""
        sys.stdout.write(f"cell {drift.key}: {text}{busy}\n")
        sys.stdout.flush()

    drifts = check_drift(args.check, args.check_cells, on_cell=report)
    sys.stdout.write(f"{moved} of {len(drifts)} re-timed cell(s) moved more than "
                     f"{DRIFT_LIMIT:.0%} from {args.check}\n")
    return EXIT_FAILURE if moved else EXIT_OK


def _report(result: Any, out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"measured {len(result.measured)} cell(s), kept {result.skipped} "
                  f"already ok; {out}")
    for column in ("cell", "status", "value"):
        table.add_column(column)
    for cell in result.measured:
        table.add_row(cell.key, cell.status, _value_text(cell))
    stdout_console().print(table)


def _value_text(cell: Any) -> str:
    if cell.status != "ok":
        return str(cell.reason or "")
    kind = cell.kind
    if kind == "solo":
        low, high = cell.steps_per_s_ci or (math.nan, math.nan)
        return f"{cell.steps_per_s:.4g} steps/s [{low:.4g}, {high:.4g}]"
    if kind == "colocated":
        first, second = cell.steps_per_s
        return f"{first:.4g} + {second:.4g} steps/s"
    if kind == "regime":
        return f"{cell.seconds_per_epoch:.4g} s/epoch ({cell.step_s:.4g} s/step)"
    if kind == "technique":
        return f"{cell.step_s:.4g} s/step"
    return f"{cell.seconds:.4g} s"
