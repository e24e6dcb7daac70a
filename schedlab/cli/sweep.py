"""``schedlab sweep CONFIG.yaml``: every (workload, policy, load, seed) of a sweep file.

The runs not yet in the output folder are simulated, one result file each
(:func:`~schedlab.analysis.sweep.run_sweep`, on the local process pool or with
``--backend ray`` as Ray tasks: the experiment runner's engine), then one table
of mean ± std over seeds per (workload, policy, load) is printed.  The file is checked first
(:func:`~schedlab.analysis.sweep_config.load_sweep_config`), then the policies, the Ray
install and the first job stream of every workload, so a mistake exits with code 2 before
anything is run or written.  See docs/sweep.md.

A file whose ``schema`` is ``schedlab/experiment@1`` is an experiment spec instead: it runs
through the experiment runner (:func:`schedlab.cli.tables.cmd_experiment_file`,
docs/experiments.md).
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.cli.common import EXIT_OK, fmt_mean_std, positive_int, stdout_console
from schedlab.defaults import UNFAIR_THRESHOLD
from schedlab.errors import InputError

if TYPE_CHECKING:  # imported when the command runs: the CLI starts without pandas
    import pandas as pd

    from schedlab.analysis.sweep import SweepReport
    from schedlab.analysis.sweep_config import SweepConfig

#: The name its log lines have always carried (``WARNING schedlab.analysis.sweep_cli: ...``),
#: from before this module moved into the cli package.
log = logging.getLogger("schedlab.analysis.sweep_cli")

#: --backend choices (the same as sweep_config.BACKENDS).
BACKEND_CHOICES = ("local", "ray")


def add_sweep_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``schedlab sweep`` on the subcommand action ``sub``."""
    parser = sub.add_parser(
        "sweep", parents=[common], help="run a sweep file: policies x workloads x loads x seeds",
        description="Run every (workload, policy, load, seed) of a sweep file that is not yet "
        "in the output folder (one result file per run; an interrupted sweep resumes), then "
        "print mean ± std over seeds. See docs/sweep.md.")
    parser.add_argument("config", metavar="CONFIG.yaml", help="sweep file (docs/sweep.md)")
    parser.add_argument("--backend", choices=BACKEND_CHOICES,
                        help="local process pool (default) or Ray tasks "
                        "(pip install 'schedlab[ray]')")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to connect to (default: start a local instance)")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="simulations in parallel: local processes, or the CPUs of a "
                        "local Ray instance (default: the file's, else 1)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder (default: the file's 'out', relative to the file; "
                        "an experiment spec: the current folder)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="experiment spec only: apply its named variant (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        dest="overrides",
                        help="experiment spec only: override a field (PATH+=VALUE appends; "
                        "docs/experiments.md)")
    parser.set_defaults(handler=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Handler of ``schedlab sweep``; returns the exit code."""
    from schedlab.analysis import sweep
    from schedlab.analysis.experiments.spec import is_experiment_document
    from schedlab.analysis.sweep_config import load_sweep_config
    from schedlab.documents import parse_yaml, read_text

    if is_experiment_document(parse_yaml(read_text(args.config), args.config)):
        from schedlab.cli.tables import cmd_experiment_file

        return cmd_experiment_file(args, args.config)
    if args.overrides or args.variant:
        raise InputError("--set and --variant apply to experiment specs (schema: "
                         "schedlab/experiment@1), not to plain sweep files", field="--set")
    config = load_sweep_config(args.config)
    backend = args.backend or config.backend
    address = args.address if args.address is not None else config.address
    workers = args.workers or config.workers
    out = Path(args.out) if args.out else config.out_dir
    if out is None:
        raise InputError("no output folder: give 'out' in the file or --out",
                         file=str(config.path), field="out")
    if out.exists() and not out.is_dir():
        raise InputError("is a file; the sweep needs a folder", file=str(out), field="--out")
    if address is not None and backend != "ray":
        raise InputError("--address needs --backend ray", field="--address")
    check_inputs(config)
    if backend == "ray":
        from schedlab.analysis.experiments.backends import import_ray

        import_ray()

    specs = config.runs()
    progress = not args.quiet
    log.info("%d runs (%d workloads x %d policies x loads x %d seeds) -> %s", len(specs),
             len(config.workloads), len(config.policies), len(config.seeds), out)
    report = sweep.run_sweep(specs, out, workers=workers, fmt=config.fmt, progress=progress,
                             backend=backend, address=address,
                             description="simulating (ray)" if backend == "ray"
                             else "simulating")
    if report.skipped:
        log.warning("%d of %d runs were already in %s; reused", len(report.skipped),
                    report.total, out)
    table = summary_table(config, report)
    print_summary(config, table, quiet=args.quiet, ran=len(report.ran), out=out)
    return EXIT_OK


def check_inputs(config: SweepConfig) -> None:
    """Policies registered, and every workload's first job stream builds (a bad trace fails
    now); errors name the file and the field."""
    from schedlab.analysis import sweep
    from schedlab.errors import UnknownNameError

    for i, name in enumerate(config.policies):
        try:
            sweep.check_policies([name])
        except UnknownNameError as exc:
            raise InputError(exc.reason, file=str(config.path), field=f"policies[{i}]") \
                from None
    for i, workload in enumerate(config.workloads):
        try:
            workload.spec.build(config.seeds[0], workload.loads[0], config.round_s)
        except InputError as exc:
            raise InputError(str(exc), file=str(config.path),
                             field=f"workloads[{i}] ({workload.name})") from None


def summary_table(config: SweepConfig, report: SweepReport) -> pd.DataFrame:
    """Mean and std over seeds per (workload, policy, load): a ``workload`` column, then
    :func:`~schedlab.analysis.sweep.aggregate`'s columns."""
    import pandas as pd

    from schedlab.analysis import sweep

    threshold = (config.unfair_threshold if config.unfair_threshold is not None
                 else UNFAIR_THRESHOLD)
    frames = []
    for workload in config.workloads:
        runs = config.runs_of(workload)
        results = sweep.load_results([report.files[run.key] for run in runs])
        summary = sweep.summarize_runs(results, unfair_threshold=threshold)
        table = sweep.aggregate(summary)
        table.insert(0, "workload", workload.name)
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def _fmt_load(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "own"
    return f"{value:g}"


def print_summary(config: SweepConfig, table: pd.DataFrame, *, quiet: bool, ran: int,
                  out: Path) -> None:
    """The summary on stdout: a rich table, or with ``quiet`` one line per row."""
    from rich.table import Table

    from schedlab.analysis.metrics import TABLE_METRICS

    console = stdout_console()
    rows = table.to_dict("records")
    if quiet:
        for row in rows:
            cells = " ".join(f"{key}={fmt_mean_std(row[f'{key}_mean'], 0.0, 1.0, '.6g', 1)}"
                             for key, _, _, _ in TABLE_METRICS)
            console.print(f"{row['workload']} {row['policy']} "
                          f"jobs_per_hour={_fmt_load(row['jobs_per_hour'])} "
                          f"seeds={row['seeds']} {cells}", markup=False)
        return
    seeds = len(config.seeds)
    out_table = Table(title=f"{config.path.name}: {len(table)} rows, "
                      f"{'mean ± std over ' if seeds > 1 else ''}{seeds} seed(s); "
                      f"{ran} run(s) done now; results in {out}", title_justify="left")
    out_table.add_column("workload", no_wrap=True)
    out_table.add_column("policy", no_wrap=True)
    out_table.add_column("jobs/h", justify="right")
    for _, label, _, _ in TABLE_METRICS:
        out_table.add_column(label, justify="right")
    for row in rows:
        out_table.add_row(str(row["workload"]), str(row["policy"]),
                          _fmt_load(row["jobs_per_hour"]),
                          *[fmt_mean_std(row[f"{key}_mean"], row[f"{key}_std"], scale, spec,
                                          row["seeds"])
                            for key, _, scale, spec in TABLE_METRICS])
    console.print(out_table)


__all__ = ["add_sweep_command", "check_inputs", "cmd_sweep", "print_summary",
           "summary_table"]
