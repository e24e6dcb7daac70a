"""``schedlab tables PAPER`` and ``schedlab experiment``: a paper's shipped experiment spec,
run by the one experiment runner (docs/experiments.md, docs/reproduction.md).

Every table takes the same options (``--quick``, ``--variant``, ``--set``, ``--out``,
``--workers``, ``--backend``, ``--address``); the flags each table had before the runner
(``--seeds``, ``--gpus``, ``--policies``, ...) are kept as *shortcuts*: each stands for a
variant or ``--set PATH=VALUE`` overrides of the spec (:data:`SHORTCUTS`), and an error in
the value one stands for names the flag.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.cli.common import (
    EXIT_OK,
    Parser,
    name_list,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    rate_list,
    stdout_console,
)
from schedlab.errors import InputError

#: Overrides a shortcut stands for: (spec path, value) pairs.
Overrides = list[tuple[str, Any]]


@dataclass(frozen=True)
class Shortcut:
    """A table flag kept from before the runner: its argparse ``options`` and the overrides
    ``to_set(value)`` it stands for (applied after the variants)."""

    flag: str
    options: dict[str, Any]
    to_set: Callable[[Any], Overrides]
    #: Whether the flag means anything with these arguments (else it is ignored, as before).
    applies: Callable[[argparse.Namespace], bool] = lambda args: True


@dataclass(frozen=True)
class TableCommand:
    """One ``tables PAPER`` subcommand: its help, the shortcuts, the first seed of
    ``--seeds N`` (None: the table has no ``--seeds``/``--first-seed``)."""

    help: str
    description: str
    shortcuts: tuple[Shortcut, ...] = ()
    first_seed: int | None = 0
    out_required: bool = True
    extra: Callable[[argparse.ArgumentParser], None] | None = None
    variants: Callable[[argparse.Namespace], list[str]] = field(
        default=lambda args: ["quick"] if args.quick else [])


def _param(name: str) -> Callable[[Any], Overrides]:
    return lambda value: [(f"workloads[0].params.{name}", value)]


def _at(path: str) -> Callable[[Any], Overrides]:
    return lambda value: [(path, value)]


def _job_window(text: str) -> tuple[int, int]:
    """``A:B`` -> (A, B), two integers with 0 <= A < B."""
    first, sep, end = text.partition(":")
    try:
        window = (int(first), int(end))
    except ValueError:
        window = (-1, -1)
    if not sep or not 0 <= window[0] < window[1]:
        raise argparse.ArgumentTypeError(f"expected A:B with 0 <= A < B, got {text!r}")
    return window


#: ``--pairs`` names of the Gavel table's policy pairs, in the table's row order.
GAVEL_PAIR_NAMES = ("las", "fifo", "ftf")


def _gavel_pairs(text: str) -> tuple[str, ...]:
    """``las,fifo`` -> the named pairs (of :data:`GAVEL_PAIR_NAMES`), in the table's order."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in GAVEL_PAIR_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected some of {', '.join(GAVEL_PAIR_NAMES)}, got {text!r}")
    return tuple(n for n in GAVEL_PAIR_NAMES if n in names)


def _gavel_policies(pairs: Sequence[str]) -> Overrides:
    from schedlab.analysis.tables.gavel import PAIRS

    rows = [{"label": label, "name": aware}
            for name, (label, aware, _) in zip(GAVEL_PAIR_NAMES, PAIRS, strict=True)
            if name in pairs]
    return [("policies", rows)]


def _shockwave_policies(names: Sequence[str]) -> Overrides:
    from schedlab.analysis.tables.shockwave import select_policies

    return [("policies", [{"label": label, "name": name}
                          for label, name in select_policies(names)])]


def _saturn_instances(paths: Sequence[str]) -> Overrides:
    return [("workloads", [{"file": path} for path in paths])]


def _titan_variants(args: argparse.Namespace) -> list[str]:
    if args.preset == "generated":
        return ["generated_quick" if args.quick else "generated"]
    return ["quick"] if args.quick else []


def _gavel_variants(args: argparse.Namespace) -> list[str]:
    if args.quick and args.steady_state:
        raise InputError("--quick and --steady-state exclude each other",
                         field="--steady-state")
    return ["quick"] if args.quick else ["steady_state"] if args.steady_state else []


def _workload_numbers(text: str) -> list[int]:
    """``1,2,8`` -> [1, 2, 8]: Pollux's workload numbers (1 to 8), distinct."""
    try:
        numbers = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        numbers = []
    if not numbers or len(set(numbers)) != len(numbers) or not all(
            1 <= n <= 8 for n in numbers):
        raise argparse.ArgumentTypeError(
            f"expected distinct workload numbers 1 to 8 (e.g. 1,2,8), got {text!r}")
    return numbers


def _sia_variants(args: argparse.Namespace) -> list[str]:
    if args.heterogeneous:
        return ["heterogeneous_quick" if args.quick else "heterogeneous"]
    return ["quick"] if args.quick else []


def _sia_extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heterogeneous", action="store_true",
                        help="Table 3's cluster (6 x 4 aws + 2 x 8 dgx-ext + 3 x 8 rtx), Sia "
                        "and Gavel; needs --profiles and --philly (variant heterogeneous)")


#: The goodput tables' shortcuts: which workloads, how many of their jobs.
_GOODPUT_SHORTCUTS: tuple[Shortcut, ...] = (
    Shortcut("--workloads", {"type": _workload_numbers, "metavar": "N,N,...",
                             "help": "workload numbers, 1 to 8 (default: all; --quick: one)"},
             _param("workloads")),
    Shortcut("--jobs", {"type": positive_int, "metavar": "N",
                        "help": "the first N jobs of each workload (default: all 160; "
                        "--quick: 12)"}, _param("jobs")),
)


def _titan_extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=("paper", "generated"), default="paper",
                        help="paper: TitanSched's traces FM-<density>-<trace model> (default); "
                        "generated: schedlab.workloads.titan's generator on --gpus GPUs, "
                        "several seeds")


def _gavel_extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steady-state", action="store_true",
                        help="Gavel's protocol for the LAS pair: 6000 jobs per run at 4.4, "
                        "5.2 and 6 jobs/h, averaged over jobs 4000-4999 of each run, no trace "
                        "column (variant steady_state)")


TABLES: dict[str, TableCommand] = {
    "saturn": TableCommand(
        help="Saturn: makespan of every SPASE method",
        description="Makespan of current practice, greedy, random, the disjunctive and "
        "time-indexed MILPs, and introspective scheduling under runtime noise, with gaps to "
        "the lower bound, solve times and the reduction vs current practice.",
        first_seed=None, out_required=False,
        shortcuts=(
            Shortcut("--instance", {"action": "append", "metavar": "FILE",
                                    "help": "instance file (repeatable; default: the "
                                    "model-selection 1x8 and 2x8 instances)"},
                     _saturn_instances),
            Shortcut("--time-limit", {"type": positive_float, "metavar": "S",
                                      "help": "time limit of each MILP solve, seconds "
                                      "(default: 10; --quick: 5)"},
                     _at("settings.time_limit_s")),
            Shortcut("--sigma", {"type": nonnegative_float, "metavar": "SIGMA",
                                 "help": "runtime noise: true = estimate x lognormal(0, SIGMA)"
                                 " per job (default: 0.2)"}, _at("simulator.sigma")),
            Shortcut("--seeds", {"type": positive_int, "metavar": "N",
                                 "help": "noise seeds 0..N-1 (default: 3; --quick: 1)"},
                     lambda n: [("seeds", list(range(n)))]),
            Shortcut("--scaling", {"choices": ("analytic", "published"),
                                   "help": "runtimes of the default model-selection "
                                   "instances: calibrated to published figures (default) or "
                                   "the analytic cost model"}, _param("scaling"),
                     applies=lambda args: not (args.quick or args.instance)),
            Shortcut("--restart-cost", {"type": nonnegative_float, "metavar": "S",
                                        "help": "seconds to resume a checkpointed job "
                                        "(default: 60)"}, _at("simulator.restart_cost_s")),
        )),
    "shockwave": TableCommand(
        help="Shockwave: makespan, JCT and fairness of policies on its 120-job trace",
        description="Simulate Shockwave's 120-job trace on 32 V100s (120 s rounds) under "
        "Shockwave, OSSP, Themis, Gavel, AlloX, MST and Gandiva-fair for several seeds; "
        "write shockwave.md, .csv, .tex, .png and shockwave.manifest.json to --out.",
        first_seed=25,
        shortcuts=(
            Shortcut("--policies", {"type": name_list, "metavar": "A,B,...",
                                    "help": "registered policy names, in row order"},
                     _shockwave_policies),
            Shortcut("--throughputs", {"choices": ("shockwave-tacc", "gavel"),
                                       "help": "throughput table of the traces (default: "
                                       "shockwave-tacc)"}, _param("throughputs")),
            Shortcut("--mechanism", {"choices": ("gavel", "schedlab"),
                                     "help": "round mechanism (default: gavel, as "
                                     "Shockwave's simulator)"}, _at("simulator.mechanism")),
            Shortcut("--resume-overhead", {"type": nonnegative_float, "metavar": "S",
                                           "help": "seconds a job loses in a round it runs "
                                           "after missing one (default: 20)"},
                     _at("simulator.resume_overhead_s")),
        )),
    "titan": TableCommand(
        help="Titan: average JCT and makespan of SRTF, Tiresias and Titan's ablations",
        description="Simulate Titan fine-tuning workloads in Titan's world under SRTF, "
        "Tiresias, Titan without the task merger, without the pipelined switch, and Titan: "
        "by default TitanSched's recorded traces on its 32-GPU cluster (the paper preset), or "
        "generated workloads (--preset generated); write titan.md, .csv, .tex, "
        "titan_density.png and titan.manifest.json to --out.",
        extra=_titan_extra, variants=_titan_variants,
        shortcuts=(
            Shortcut("--trace-model", {"choices": ("vit", "vit-large", "roberta-base",
                                                   "roberta-large"),
                                       "help": "paper preset: the model of the traces "
                                       "(default: vit)"}, _param("trace_model")),
            Shortcut("--gpus", {"type": positive_int, "metavar": "G",
                                "help": "generated preset: GPUs, whole nodes of 4"},
                     _param("gpus")),
            Shortcut("--density", {"type": positive_float, "metavar": "D",
                                   "help": "density of the main table (default: 1)"},
                     _param("density")),
            Shortcut("--model", {"choices": ("mixed", "vit-base", "vit-large", "roberta-base",
                                             "roberta-large"),
                                 "help": "generated preset: base model of every task, or a "
                                 "mix (default: mixed)"}, _param("model")),
        )),
    "hare": TableCommand(
        help="Hare: total weighted JCT of Hare vs Sched_Homo, Sched_Allox, Gavel, Tiresias, "
        "online LAS",
        description="Solve Hare workloads with hare.greedy, hare.sched_homo and "
        "hare.sched_allox, and simulate Gavel max-min fairness, Tiresias and tiresias_aware on "
        "the same jobs as gangs; write hare.md, .csv, .tex, figures and hare.manifest.json.",
        shortcuts=(
            Shortcut("--round-s", {"type": positive_float, "metavar": "S",
                                   "help": "round length of the simulated schemes, s "
                                   "(default: 60)"}, _at("simulator.round_s")),
            Shortcut("--lp-eps", {"type": positive_float, "metavar": "EPS",
                                  "help": "grid ratio - 1 of the LP that orders Hare's greedy "
                                  "(default: 0.25)"}, _at("settings.lp_eps")),
        )),
    "gavel": TableCommand(
        help="Gavel: average JCT of heterogeneity-aware vs agnostic policies vs job rate",
        description="Simulate Gavel's max-min fairness (LAS), FIFO and finish-time fairness, "
        "each heterogeneity-aware and agnostic, on the shipped trace and on Gavel's "
        "single-GPU generator at several rates; write gavel.md, .csv, .tex, "
        "gavel_jct_vs_rate.png and gavel.manifest.json to --out.",
        extra=_gavel_extra, variants=_gavel_variants,
        shortcuts=(
            Shortcut("--jobs", {"type": positive_int, "metavar": "N",
                                "help": "generated jobs per run (default: 300; --quick: 30)"},
                     _param("jobs")),
            Shortcut("--rates", {"type": rate_list, "metavar": "R,R,...",
                                 "help": "generator rates, jobs/hour"}, _param("rates")),
            Shortcut("--trace", {"metavar": "FILE", "help": "trace instance file"},
                     _param("trace")),
            Shortcut("--no-trace", {"action": "store_true",
                                    "help": "leave the trace column out"},
                     lambda on: [("workloads[0].params.trace", None)] if on else []),
            Shortcut("--measure", {"type": _job_window, "metavar": "A:B",
                                   "help": "average only jobs A..B-1 of each generated run"},
                     lambda window: [("workloads[0].params.measure", list(window))]),
            Shortcut("--pairs", {"type": _gavel_pairs, "metavar": "P,P,...",
                                 "help": "policy pairs, of las, fifo, ftf"}, _gavel_policies),
        )),
    "cross": TableCommand(
        help="every policy (and Hare's planner) on the same four workloads",
        description="Run every registered online policy and Hare's greedy planner on four "
        "workloads (homogeneous and heterogeneous Gavel jobs, Shockwave's dynamic jobs, "
        "Titan's fine-tuning tasks); write cross.md, .csv, .tex, cross_heatmap.png and "
        "cross.manifest.json to --out.",
        shortcuts=(
            Shortcut("--jobs", {"type": positive_int, "metavar": "N",
                                "help": "jobs per workload (default: 16; --quick: 6)"},
                     _param("jobs")),
        )),
    "pollux": TableCommand(
        help="Pollux: average JCT of Pollux vs Tiresias and FIFO with TunedJobs (§5.3)",
        description="Simulate Pollux's eight 160-job workloads on 16 x 4 T4 GPUs (60 s "
        "rounds, Pollux's simulator rules) under Pollux (seeded) and Tiresias and FIFO on "
        "each job's requested GPUs and batch (TunedJobs); write pollux.md (beside the "
        "authors' stored results), .csv, .tex and pollux.manifest.json to --out.",
        shortcuts=_GOODPUT_SHORTCUTS),
    "sia": TableCommand(
        help="Sia: Sia vs Pollux vs Gavel with TunedJobs on the Philly workloads (Table 4)",
        description="Simulate Sia's Philly workloads (Pollux's, NCF jobs made CIFAR-10) on "
        "16 x 4 T4 GPUs in Sia's world under Sia and Pollux (60 s rounds) and Gavel's max-min "
        "fairness with TunedJobs (360 s rounds), with the metrics of Sia's print_run_stats.py; "
        "--heterogeneous runs Table 3's cluster from Sia's per-type profiles (--profiles); "
        "write sia.md (beside the paper's table), .csv, .tex and sia.manifest.json to --out.",
        extra=_sia_extra, variants=_sia_variants,
        shortcuts=(
            *_GOODPUT_SHORTCUTS,
            Shortcut("--philly", {"metavar": "DIR",
                                  "help": "Sia's own Philly workloads: a checkout's "
                                  "sia-simulator/workloads/philly (not shipped: no licence; "
                                  "default: the recipe on Pollux's workloads); needed by "
                                  "--heterogeneous"},
                     lambda folder: [("workloads[0].generator", "sia.files"),
                                     ("workloads[0].params.folder", folder)]),
            Shortcut("--profiles", {"metavar": "DIR",
                                    "help": "Sia's per-type profiles: a checkout's "
                                    "sia-simulator/traces (not shipped: no licence); needed by "
                                    "--heterogeneous"}, _at("settings.profiles")),
        )),
}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_experiment_options(parser: argparse.ArgumentParser) -> None:
    """The options every experiment command shares: --variant, --set, --workers, --backend,
    --address."""
    parser.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="apply the spec's named variant (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        dest="overrides",
                        help="override a field of the spec (PATH+=VALUE appends to a list; "
                        "VALUE is YAML; docs/experiments.md)")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="cells in parallel (default: the spec's run.workers)")
    parser.add_argument("--backend", choices=("local", "ray"),
                        help="local processes or Ray tasks (default: the spec's)")
    parser.add_argument("--address", metavar="ADDR",
                        help="Ray cluster to connect to (default: a local Ray)")


def add_tables_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """``tables PAPER``: one subcommand per paper's shipped spec."""
    tables = sub.add_parser("tables", help="regenerate a paper's table",
                            description="Regenerate a paper's comparison table: run its "
                            "shipped experiment spec (docs/experiments.md).")
    which = tables.add_subparsers(dest="table", metavar="TABLE", parser_class=Parser)
    which.required = True
    for name, command in TABLES.items():
        parser = which.add_parser(name, parents=[common], help=command.help,
                                  description=command.description + " Finished cells are kept "
                                  "in OUT/cells/ and reused. See docs/reproduction.md.")
        parser.add_argument("--out", required=command.out_required, metavar="DIR",
                            help="output folder (created if missing)")
        parser.add_argument("--quick", action="store_true",
                            help="a small table (the spec's quick variant)")
        if command.first_seed is not None:
            parser.add_argument("--seeds", type=positive_int, metavar="N",
                                help="seeds FIRST..FIRST+N-1 (default: the spec's)")
            parser.add_argument("--first-seed", type=nonnegative_int, metavar="S",
                                help=f"first seed (default: {command.first_seed})")
        if command.extra is not None:
            command.extra(parser)
        for shortcut in command.shortcuts:
            parser.add_argument(shortcut.flag, dest=_dest(shortcut.flag), **shortcut.options)
        add_experiment_options(parser)
        parser.set_defaults(handler=_cmd_table)
    add_experiment_command(sub, common)


def add_experiment_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """``experiment show PAPER|FILE``: print a spec to copy, edit and run."""
    experiment = sub.add_parser("experiment", help="print a paper's experiment spec",
                                description="Experiment specs (docs/experiments.md).")
    what = experiment.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    what.required = True
    show = what.add_parser("show", parents=[common],
                           help="print a shipped spec (or a spec file), resolved",
                           description="Print the spec shipped for PAPER (or the spec file "
                           "FILE); with --quick, --variant or --set, the resolved spec, ready "
                           "to run with 'schedlab sweep FILE'.")
    show.add_argument("source", metavar="PAPER|FILE")
    show.add_argument("--quick", action="store_true", help="apply the quick variant")
    show.add_argument("--variant", action="append", default=[], metavar="NAME")
    show.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                      dest="overrides")
    show.set_defaults(handler=_cmd_experiment_show)


# -------------------------------------------------------------------------- handlers


def _table_overrides(args: argparse.Namespace, command: TableCommand,
                     variants: list[str]) -> tuple[list[str], dict[str, str]]:
    """The ``--set`` texts the shortcuts stand for (then the user's), and for each path the
    flag that set it."""
    from schedlab.analysis.experiments.spec import shipped_experiment

    pairs: Overrides = []
    flag_of: dict[str, str] = {}
    if command.first_seed is not None and (args.seeds is not None
                                           or args.first_seed is not None):
        if getattr(args, "preset", None) == "paper":
            raise InputError("the paper preset's traces are fixed: --seeds and --first-seed "
                             "apply to --preset generated", field="--seeds")
        count = args.seeds or len(shipped_experiment(args.table, variants=variants).seeds)
        first = command.first_seed if args.first_seed is None else args.first_seed
        pairs.append(("seeds", list(range(first, first + count))))
        flag_of["seeds"] = "--seeds"
    for shortcut in command.shortcuts:
        value = getattr(args, _dest(shortcut.flag))
        if value is None or value is False or not shortcut.applies(args):
            continue
        for path, item in shortcut.to_set(value):
            pairs.append((path, item))
            flag_of[path] = shortcut.flag
    if args.workers is not None:
        pairs.append(("run.workers", args.workers))
    if args.backend is not None:
        pairs.append(("run.backend", args.backend))
    if args.address is not None:
        pairs.append(("run.address", args.address))
    texts = [f"{path}={json.dumps(value)}" for path, value in pairs]
    return [*texts, *args.overrides], flag_of


def _cmd_table(args: argparse.Namespace) -> int:
    """Handler of ``tables PAPER``."""
    from schedlab.analysis.experiments.runner import plan_experiment
    from schedlab.analysis.experiments.spec import shipped_experiment

    command = TABLES[args.table]
    variants = [*command.variants(args), *args.variant]
    overrides, flag_of = _table_overrides(args, command, variants)
    try:
        spec = shipped_experiment(args.table, overrides=overrides, variants=variants)
        plan = plan_experiment(spec)
    except InputError as exc:
        flag = flag_of.get(exc.field or "")
        if flag is None:
            raise
        raise InputError(f"{exc.field}: {exc.reason}", field=flag) from None
    if args.table == "saturn" and args.out is None:
        with tempfile.TemporaryDirectory(prefix="schedlab-saturn-") as scratch:
            return run_plan(args, plan, Path(scratch), write_note=False)
    return run_plan(args, plan, _out_folder(args.out))


def _out_folder(text: str) -> Path:
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise InputError("is a file; --out needs a folder", file=str(out), field="--out")
    return out


def run_plan(args: argparse.Namespace, plan: Any, out: Path, *, write_note: bool = True
             ) -> int:
    """Run a checked experiment with a progress bar (stderr), print its table (unless
    ``--quiet``) and the files written; the table's exit code."""
    from schedlab.analysis.experiments.runner import run_experiment
    from schedlab.progress import unit_progress

    if plan.spec.run.address is not None and plan.spec.run.backend != "ray":
        raise InputError("--address needs --backend ray", field="--address")
    if plan.spec.run.backend == "ray":
        from schedlab.analysis.experiments.backends import import_ray

        import_ray()
    started = datetime.datetime.now(datetime.UTC)
    progress = unit_progress(not args.quiet)
    with progress:
        task = progress.add_task(f"{plan.spec.name} table", total=len(plan.cells))

        def step(done: str) -> None:
            progress.update(task, advance=1, description=done)

        outcome = run_experiment(plan, out, on_cell=step, command=args.command_line,
                                 started=started)
    if not args.quiet:
        if plan.spec.table == "saturn":
            from schedlab.analysis.tables.saturn import render

            stdout_console().print(render(outcome.table))
        else:
            sys.stdout.write(outcome.markdown)
    if write_note:
        stdout_console().print("wrote " + ", ".join(str(p) for p in outcome.written),
                               markup=False)
    return outcome.exit_code or EXIT_OK


def _cmd_experiment_show(args: argparse.Namespace) -> int:
    """Handler of ``experiment show``."""
    from importlib import resources

    from schedlab.analysis.experiments.spec import (
        load_experiment,
        shipped_experiment,
        shipped_names,
    )

    variants = [*(["quick"] if args.quick else []), *args.variant]
    resolved = bool(variants or args.overrides)
    if args.source in shipped_names():
        if not resolved:
            source = resources.files("schedlab.analysis.experiments")
            sys.stdout.write(source.joinpath(f"{args.source}.yaml").read_text("utf-8"))
            return EXIT_OK
        spec = shipped_experiment(args.source, overrides=args.overrides, variants=variants)
    else:
        if not Path(args.source).exists():
            raise InputError(f"neither a shipped experiment ({', '.join(shipped_names())}) "
                             "nor a file", file=args.source)
        spec = load_experiment(args.source, overrides=args.overrides, variants=variants)
    if resolved:
        spec = spec.model_copy(update={"variants": {}})
    sys.stdout.write(spec.to_yaml())
    return EXIT_OK


def cmd_experiment_file(args: argparse.Namespace, path: str) -> int:
    """``schedlab sweep FILE`` for an experiment spec file: run it into ``--out`` (default:
    the current folder)."""
    from schedlab.analysis.experiments.runner import plan_experiment
    from schedlab.analysis.experiments.spec import load_experiment

    run = {"workers": args.workers, "backend": args.backend, "address": args.address}
    overrides = [*(f"run.{key}={json.dumps(value)}" for key, value in run.items()
                   if value is not None), *args.overrides]
    spec = load_experiment(path, overrides=overrides, variants=args.variant)
    plan = plan_experiment(spec)
    return run_plan(args, plan, _out_folder(args.out or "."))


__all__ = ["TABLES", "Shortcut", "TableCommand", "add_experiment_command",
           "add_experiment_options", "add_tables_command", "cmd_experiment_file", "run_plan"]
