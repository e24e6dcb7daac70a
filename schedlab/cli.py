"""The ``schedlab`` command line: solve, validate and check instance files; paper tables;
simulate and compare online policies (docs/simulate.md).

Exit codes (the same for every subcommand):

* ``0`` success;
* ``1`` the solver failed, the problem is infeasible or unbounded, or the checker found
  violations;
* ``2`` bad input: a missing or malformed file, an invalid instance, an unknown formulation or
  solver, a solver that is not installed, or a bad command-line argument;
* ``130`` interrupted (Ctrl-C).

A user error prints exactly one line, ``error: <message>``, to stderr and never a traceback.
Reports (tables) go to stdout through rich; logging goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.table import Table

from schedlab import __version__
from schedlab.analysis.sweep_cli import add_sweep_command
from schedlab.defaults import UNFAIR_THRESHOLD
from schedlab.errors import InputError, SchedlabError

if TYPE_CHECKING:
    from schedlab.registry import Registry

log = logging.getLogger("schedlab.cli")

DEFAULT_FORMULATION = "gavel.max_min_fairness"
#: Rows shown in per-job tables before the "... N more" line.
MAX_ROWS = 20
#: At most this many per-job metric columns are shown beside the allocation.
MAX_METRIC_COLUMNS = 3
#: Per-job metrics shown first when a solution carries them (others follow by name).
PREFERRED_METRICS = ("effective_throughput", "throughput", "normalized_throughput")

#: Placements of the first round shown in the one-line rounds preview.
ROUND_PREVIEW = 8
#: Table width when stdout is not a terminal (a file, a pipe, a test's capture).
PIPE_WIDTH = 160

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


# ------------------------------------------------------------------------ argument parsing


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one ``error:`` line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        _print_error(f"{message} (see '{self.prog} --help')")
        raise SystemExit(EXIT_INPUT)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def _nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number >= 0")
    return value


def _int_at_least(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= {lowest}")
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def _nonnegative_int(text: str) -> int:
    return _int_at_least(text, 0)


def build_parser() -> argparse.ArgumentParser:
    """The ``schedlab`` argument parser with its subcommands."""
    common = _Parser(add_help=False)
    noise = common.add_mutually_exclusive_group()
    noise.add_argument("-v", "--verbose", action="store_true",
                       help="debug logging, and the solver's own log")
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="print only errors and a one-line result")

    parser = _Parser(
        prog="schedlab",
        description="GPU-cluster scheduling formulations (Gavel, Shockwave, Saturn, Titan, "
        "Hare) behind one Instance -> Solution interface.",
        epilog="Exit codes: 0 success, 1 solver failure / infeasible / violations, "
        "2 bad input. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"schedlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    solve = sub.add_parser("solve", parents=[common], help="solve an instance file",
                           description="Build, solve and check a formulation on an instance.")
    solve.add_argument("file", metavar="FILE", help="instance file (.json, .yaml, .json.gz)")
    solve.add_argument("-f", "--formulation", metavar="NAME",
                       help=f"registered formulation (default: {DEFAULT_FORMULATION}, when the "
                       "instance has the fields it needs; otherwise the error names the "
                       "formulations that accept the instance); see 'schedlab formulations'")
    solve.add_argument("--solver", default="highs", metavar="NAME",
                       help="highs (default) or gurobi (pip install 'schedlab[gurobi]')")
    solve.add_argument("--time-limit", type=_positive_float, metavar="S",
                       help="solver time limit per solve, seconds")
    solve.add_argument("--mip-gap", type=_nonnegative_float, metavar="G",
                       help="relative MIP gap at which to stop, e.g. 0.01")
    solve.add_argument("--threads", type=_positive_int, metavar="N", help="solver threads")
    solve.add_argument("--lp-method", choices=("auto", "simplex", "ipm"), default="auto",
                       help="LP algorithm (default: auto, the formulation decides)")
    solve.add_argument("--rounds", type=_nonnegative_int, metavar="N",
                       help="rounds of placements produced by the round mechanism after the "
                       "solve (overrides the instance's params.num_rounds, default 20); 0 "
                       "solves the policy only. The mechanism's time grows with jobs x rounds "
                       "and dominates large solves (10,000 jobs x 20 rounds: about 0.9 s of a "
                       "1.2 s solve; docs/cli.md)")
    solve.add_argument("-o", "--out", metavar="SOL.json",
                       help="write the Solution as JSON (atomically) to this file")
    solve.add_argument("--partitions", type=int, default=1, metavar="K",
                       help="POP: split the jobs into K random parts with 1/K of every GPU "
                       "type, solve them apart and concatenate (Gavel policies; default 1: "
                       "the exact solve; docs/pop.md)")
    solve.add_argument("--workers", type=int, metavar="N",
                       help="POP: parallel part solves (default min(K, CPUs); 1: one by one)")
    solve.add_argument("--pop-backend", choices=("local", "ray"), default="local",
                       help="POP: a local process pool (default) or Ray")
    solve.add_argument("--pop-seed", type=int, default=0, metavar="S",
                       help="POP: seed of the random partition (default 0)")
    solve.add_argument("--pop-partition", choices=("random", "balanced", "stratified"),
                       default="random",
                       help="POP: random parts (default), balanced ones (power-of-two "
                       "choices on scale factor, weight and throughputs) or stratified ones "
                       "(each class of identical jobs dealt round-robin: every part close to "
                       "a 1/K replica of the whole; docs/pop.md)")
    solve.set_defaults(handler=_cmd_solve)

    validate = sub.add_parser("validate", parents=[common], help="validate instance files",
                              description="Validate instance files and summarize each.")
    validate.add_argument("files", metavar="FILE", nargs="+", help="instance file(s)")
    validate.set_defaults(handler=_cmd_validate)

    check = sub.add_parser("check", parents=[common],
                           help="check a solution file against an instance",
                           description="Re-derive every constraint from the instance and "
                           "list the ones the solution violates.")
    check.add_argument("instance", metavar="INSTANCE", help="instance file")
    check.add_argument("solution", metavar="SOLUTION", help="solution file (from solve --out)")
    check.set_defaults(handler=_cmd_check)

    forms = sub.add_parser("formulations", parents=[common],
                           help="list registered formulations",
                           description="List the registered formulation names.")
    forms.set_defaults(handler=_cmd_formulations)

    pols = sub.add_parser("policies", parents=[common],
                          help="list registered online policies",
                          description="List the registered online policy names.")
    pols.set_defaults(handler=_cmd_policies)

    tables = sub.add_parser("tables", help="regenerate a paper's table",
                            description="Regenerate a paper's comparison table.")
    which = tables.add_subparsers(dest="table", metavar="TABLE", parser_class=_Parser)
    which.required = True
    saturn = which.add_parser(
        "saturn", parents=[common], help="Saturn: makespan of every SPASE method",
        description="Makespan of current practice, greedy, random, the disjunctive and "
        "time-indexed MILPs, and introspective scheduling under runtime noise, with gaps to "
        "the lower bound, solve times and the reduction vs current practice.")
    saturn.add_argument("--instance", action="append", metavar="FILE",
                        help="instance file (repeatable; default: the model-selection 1x8 "
                        "and 2x8 instances of instances/saturn/)")
    saturn.add_argument("--out", metavar="DIR",
                        help="also write saturn.md, .csv, .tex and saturn.manifest.json to "
                        "this folder (created if missing)")
    saturn.add_argument("--quick", action="store_true",
                        help="a small table: the three-jobs instance, 1 seed, MILPs capped at "
                        "5 s, re-solves at 0.5 s")
    saturn.add_argument("--time-limit", type=_positive_float, metavar="S",
                        help="time limit of each MILP solve, seconds (default: 10; --quick: "
                        "5)")
    saturn.add_argument("--sigma", type=_nonnegative_float, default=0.2, metavar="SIGMA",
                        help="runtime noise: true = estimate x lognormal(0, SIGMA) per job "
                        "(default: 0.2)")
    saturn.add_argument("--seeds", type=_positive_int, metavar="N",
                        help="noise seeds 0..N-1 (default: 3; --quick: 1)")
    saturn.add_argument("--scaling", choices=("analytic", "published"), default="published",
                        help="runtimes of the default model-selection instances: speed-ups "
                        "calibrated to published figures (default; docs/saturn-calibration.md) "
                        "or the analytic cost model (= the instances/saturn/ files)")
    saturn.add_argument("--restart-cost", type=_nonnegative_float, default=60.0, metavar="S",
                        help="seconds to resume a checkpointed job, written into every "
                        "realized instance (default: 60)")
    saturn.set_defaults(handler=_cmd_tables_saturn)
    _add_shockwave_table(which, common)
    _add_titan_table(which, common)
    _add_hare_table(which, common)
    _add_gavel_table(which, common)
    _add_cross_table(which, common)

    titan = sub.add_parser("titan", help="Titan tools (merge rule)",
                           description="Tools for Titan's task merging.")
    titan_tools = titan.add_subparsers(dest="tool", metavar="TOOL", parser_class=_Parser)
    titan_tools.required = True
    explain = titan_tools.add_parser(
        "explain", parents=[common], help="why two tasks may or may not merge",
        description="Apply Titan's merge rule to two tasks of an instance file and list every "
        "reason it rejects the pair (same base model, neither started, different datasets, "
        "task similarity >= the threshold, the merge benefit). See docs/formulations/titan.md.")
    explain.add_argument("file", metavar="FILE", help="instance file with the Titan tasks")
    explain.add_argument("first", metavar="A", help="id of one task")
    explain.add_argument("second", metavar="B", help="id of the other task")
    explain.add_argument("--gpus", type=_positive_int, metavar="N",
                         help="GPU count of the benefit rule (default: the pool's count, at "
                         "most the pair's maximum)")
    explain.set_defaults(handler=_cmd_titan_explain)

    schema = sub.add_parser("schema", parents=[common], help="print a JSON Schema",
                            description="Print the JSON Schema of a file format.")
    schema.add_argument("kind", choices=("instance", "solution", "throughputs", "replay"),
                        help="which file format")
    schema.set_defaults(handler=_cmd_schema)
    _add_simulation_commands(sub, common)
    add_sweep_command(sub, common)
    _add_profiling_commands(sub, common)
    return parser


def _add_profiling_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``profile`` (and its tools) and ``replay``: defined beside their code."""
    from schedlab.executor.cli import add_replay_command
    from schedlab.profiler.cli import add_profile_command

    add_profile_command(sub, common, _Parser)
    add_replay_command(sub, common, _Parser)


# ------------------------------------------------------------------------------- output


def _print_error(message: str) -> None:
    """One ``error:`` line on stderr (newlines inside the message are folded)."""
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"error: {one_line}\n")
    sys.stderr.flush()


def _print_warning(message: str) -> None:
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"warning: {one_line}\n")
    sys.stderr.flush()


def _console() -> Console:
    """A rich console on the current ``sys.stdout`` (so captured output works in tests).

    Lines are never wrapped (``soft_wrap``), so one result stays one line for grep; when
    stdout is not a terminal, tables get a wide fixed width instead of rich's default 80.
    Text is printed as it is, never read as rich markup: a reason such as gloo's
    ``[/tmp/x]`` is data, not a closing tag.
    """
    console = Console(file=sys.stdout, highlight=False, soft_wrap=True, markup=False)
    if not console.is_terminal:
        console.width = max(console.width, PIPE_WIDTH)
    return console


class _StderrHandler(logging.StreamHandler):
    """Logs to whatever ``sys.stderr`` is at the time of each record."""

    def emit(self, record: logging.LogRecord) -> None:
        # Assign rather than setStream(): setStream flushes the previous stream, which may
        # be closed by now (e.g. a test harness's capture file).
        self.stream = sys.stderr
        super().emit(record)


_HANDLER: logging.Handler | None = None


def _configure_logging(verbose: bool, quiet: bool) -> None:
    """``schedlab`` logger: WARNING by default, DEBUG with --verbose, ERROR with --quiet."""
    global _HANDLER
    logger = logging.getLogger("schedlab")
    if _HANDLER is not None:
        logger.removeHandler(_HANDLER)
    _HANDLER = _StderrHandler()
    _HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(_HANDLER)
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR if quiet else logging.WARNING)


def _fmt(value: float | None, spec: str = ".6g") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def _fmt_share(value: float) -> str:
    """A share in [0, 1] to 3 decimals; solver noise such as -1e-12 prints as 0.000."""
    return f"{value if abs(value) >= 5e-4 else 0.0:.3f}"


def _fmt_seconds(value: float) -> str:
    return f"{value:.3f} s"


# ------------------------------------------------------------------------------- solve


def _cmd_solve(args: argparse.Namespace) -> int:
    from schedlab.api import solve
    from schedlab.instance import load_instance
    from schedlab.registry import get_formulation
    from schedlab.solvers import PersistentSolver, SolverOptions

    # Cheap checks first, so a typo fails before a large model is built.
    if args.formulation is not None:
        get_formulation(args.formulation)
    PersistentSolver(SolverOptions(solver=args.solver))
    out = Path(args.out) if args.out else None
    if out is not None and out.is_dir():
        raise InputError("is a directory; --out needs a file name", file=str(out),
                         field="--out")

    t0 = time.perf_counter()
    instance = load_instance(args.file)
    load_s = time.perf_counter() - t0
    log.info("loaded %s: %d jobs in %.3f s", args.file, len(instance.jobs), load_s)
    if args.formulation is None:
        args.formulation = _default_formulation(instance, args.file)

    try:
        if args.partitions != 1:
            solution = _solve_pop(args, instance)
        else:
            solution = solve(
                instance,
                args.formulation,
                solver=args.solver,
                time_limit=args.time_limit,
                mip_gap=args.mip_gap,
                threads=args.threads,
                lp_method=args.lp_method,
                verbose=args.verbose,
                num_rounds=args.rounds,
            )
    except InputError as exc:
        # a formulation refusing the instance names a field of it (jobs[3].regimes), not
        # the file: say which file
        if exc.file is None and exc.field and not exc.field.startswith("-"):
            raise InputError(exc.reason, file=args.file, field=exc.field) from None
        raise

    if out is not None:
        try:
            _with_finite_numbers(solution).save(out)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", file=str(out),
                             field="--out") from None
        log.info("wrote %s", out)

    console = _console()
    if args.quiet:
        console.print(_one_line_result(solution))
    else:
        _print_solution(console, instance, solution, load_s=load_s, out=out)
    if solution.violations:
        _print_violations(console, solution.violations)
        return EXIT_FAILURE
    return EXIT_OK if solution.status.has_solution else EXIT_FAILURE


def _default_formulation(instance: Any, file: str) -> str:
    """:data:`DEFAULT_FORMULATION` when it accepts ``instance`` (its ``validate`` hook passes);
    otherwise an error naming the registered formulations that do accept it."""
    from schedlab.registry import formulations, get_formulation

    try:
        get_formulation(DEFAULT_FORMULATION).validate(instance)
        return DEFAULT_FORMULATION
    except InputError as exc:
        refusal = exc.reason
    accepting = []
    for name in formulations():
        try:
            get_formulation(name).validate(instance)
        except Exception:  # a refusal, or a broken plugin: not a candidate
            continue
        accepting.append(name)
    hint = (f"pass --formulation with one that accepts it: {', '.join(accepting)}" if accepting
            else "no registered formulation accepts it")
    raise InputError(f"no --formulation given and the default {DEFAULT_FORMULATION} refuses "
                     f"this instance ({refusal}); {hint}", file=file, field="--formulation")


def _with_finite_numbers(solution: Any) -> Any:
    """``solution`` fit for a JSON file, which has no NaN or infinity: a non-finite
    objective, bound, gap or top-level metric becomes null, and a diagnostic says which and
    why (e.g. ``min_makespan`` stopped at a time limit before any finite allocation: the
    objective is inf).  The solution itself is left as it is."""
    update: dict[str, Any] = {}
    notes = []
    for name in ("objective", "bound", "gap"):
        value = getattr(solution, name)
        if value is not None and not math.isfinite(value):
            update[name] = None
            notes.append(f"{name} {value}")
    metrics = dict(solution.metrics)
    for key, value in solution.metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            metrics[key] = None
            notes.append(f"metrics.{key} {value}")
    if not notes:
        return solution
    update["metrics"] = metrics
    update["diagnostics"] = [*solution.diagnostics, (
        f"written as null, not finite numbers ({', '.join(notes)}): status "
        f"{solution.status.value}, no finite value was found")]
    return solution.model_copy(update=update)


def _solve_pop(args: argparse.Namespace, instance: Any) -> Any:
    """``solve --partitions K``: :func:`schedlab.formulations.gavel.pop.solve_pop`."""
    from schedlab.formulations.gavel.pop import solve_pop
    from schedlab.solvers import SolverOptions

    options = SolverOptions(
        solver=args.solver,
        time_limit_s=args.time_limit if args.time_limit is not None
        else instance.params.time_limit_s,
        mip_gap=args.mip_gap if args.mip_gap is not None else instance.params.mip_gap,
        threads=args.threads, lp_method=args.lp_method, verbose=args.verbose)
    return solve_pop(instance, args.formulation, args.partitions, seed=args.pop_seed,
                     partition=args.pop_partition, workers=args.workers,
                     backend=args.pop_backend, options=options, num_rounds=args.rounds)


def _one_line_result(solution: Any) -> str:
    return (f"{solution.status.value} objective={_fmt(solution.objective)} "
            f"bound={_fmt(solution.bound)} gap={_fmt(solution.gap, '.3g')} "
            f"time={solution.timings.total_s:.3f}s")


def _print_solution(console: Console, instance: Any, solution: Any, *, load_s: float,
                    out: Path | None) -> None:
    summary = Table(title=f"{solution.formulation} on {instance.name}", show_header=False,
                    title_justify="left")
    summary.add_column("what", style="bold")
    summary.add_column("value")
    summary.add_row("status", solution.status.value)
    summary.add_row("solver", solution.solver)
    summary.add_row("objective", _fmt(solution.objective))
    summary.add_row("bound", _fmt(solution.bound))
    summary.add_row("gap", _fmt(solution.gap, ".3g"))
    timings = solution.timings
    summary.add_row("time load", _fmt_seconds(load_s))
    for phase in ("build", "solve", "extract", "check"):
        summary.add_row(f"time {phase}", _fmt_seconds(getattr(timings, f"{phase}_s")))
    summary.add_row("time total", _fmt_seconds(load_s + timings.total_s))
    if out is not None:
        summary.add_row("written", str(out))
    console.print(summary)

    if solution.allocation:
        console.print(_allocation_table(instance, solution))
        for line in _zero_share_reasons(instance, solution):
            console.print(line, markup=False)
    elif solution.schedule:
        console.print(_schedule_table(solution))
    elif solution.status.has_solution and not solution.rounds:
        console.print("note: the solution places nothing" + (
            " (why: the diagnostics below)" if solution.diagnostics
            else " (no job needed a placement)"), markup=False)
    if solution.colocated_allocation:
        console.print(f"space sharing: {len(solution.colocated_allocation)} co-located "
                      "pair share(s) (see the solution file)")
    if solution.rounds:
        first = ", ".join(f"{p.job}->{p.accelerator} x{p.gpus}"
                          for p in solution.rounds[0][:ROUND_PREVIEW])
        more = len(solution.rounds[0]) - ROUND_PREVIEW
        console.print(f"rounds: {len(solution.rounds)} round(s) of placements; round 0: "
                      f"{first or 'idle'}{f', ... {more} more' if more > 0 else ''}",
                      markup=False)
    if solution.groups:
        named = "; ".join(" + ".join(group) for group in solution.groups[:MAX_ROWS])
        more = len(solution.groups) - MAX_ROWS
        console.print(f"groups: {len(solution.groups)} merged group(s): {named}"
                      f"{f'; ... {more} more' if more > 0 else ''}", markup=False)
    if solution.diagnostics:
        console.print("diagnostics:")
        for line in solution.diagnostics:
            console.print(f"  {line}", markup=False)
    if solution.status.value == "time_limit":
        console.print("note: stopped at the time limit; the incumbent is not proven optimal")


def _per_job_metrics(solution: Any, job_ids: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """Metrics that hold one number per job (``{job id: value}``), preferred ones first."""
    found: list[tuple[str, dict[str, Any]]] = []
    for name, value in solution.metrics.items():
        if (isinstance(value, dict) and value and set(value) <= job_ids
                and all(isinstance(v, int | float) for v in value.values())):
            found.append((name, value))
    order = {name: i for i, name in enumerate(PREFERRED_METRICS)}
    found.sort(key=lambda item: (order.get(item[0], len(order)), item[0]))
    return found[:MAX_METRIC_COLUMNS]


def _allocation_table(instance: Any, solution: Any) -> Table:
    """Share of time X[j,k] per job and accelerator type, plus per-job metrics."""
    types = list(instance.types)
    job_ids = [job.id for job in instance.jobs]
    known = set(job_ids)
    extra = [j for j in solution.allocation if j not in known]
    job_ids += extra
    metrics = _per_job_metrics(solution, set(job_ids))
    table = Table(title="allocation (share of time per accelerator type)", title_justify="left")
    table.add_column("job")
    for acc in types:
        table.add_column(acc, justify="right")
    table.add_column("total", justify="right")
    for name, _ in metrics:
        table.add_column(name.replace("_", " "), justify="right")
    for job_id in job_ids[:MAX_ROWS]:
        shares = solution.allocation.get(job_id, {})
        cells = [_fmt_share(shares.get(acc, 0.0)) for acc in types]
        cells.append(_fmt(sum(shares.values()), ".3f"))
        cells += [_fmt(values.get(job_id)) for _, values in metrics]
        table.add_row(job_id, *cells)
    if len(job_ids) > MAX_ROWS:
        table.add_row(f"... {len(job_ids) - MAX_ROWS} more", *[""] * (len(table.columns) - 1))
    return table


def _schedule_table(solution: Any) -> Table:
    """The schedule's entries; a Hare task's round and task index and the GPU ids when any
    entry has them (else identical rows of one round would repeat without a word)."""
    table = Table(title="schedule", title_justify="left")
    entries = solution.schedule
    tasks = any(e.round is not None or e.task is not None for e in entries)
    ids = any(e.gpu_ids for e in entries)
    names = ["job", *(("round", "task") if tasks else ()), "start s", "end s", "accelerator",
             "node", "gpus", *(("gpu ids",) if ids else ()), "config"]
    for name in names:
        table.add_column(name, justify="right" if name in (
            "round", "task", "start s", "end s", "gpus") else "left")
    for e in entries[:MAX_ROWS]:
        row = [e.job]
        if tasks:
            row += [_fmt_index(e.round), _fmt_index(e.task)]
        row += [_fmt(e.start, ".2f"), _fmt(e.end, ".2f"), e.accelerator or "-", e.node or "-",
                str(e.gpus)]
        if ids:
            row.append(",".join(str(g) for g in e.gpu_ids) if e.gpu_ids else "-")
        row.append(e.config or "-")
        table.add_row(*row)
    if len(entries) > MAX_ROWS:
        table.add_row(f"... {len(entries) - MAX_ROWS} more", *[""] * (len(names) - 1))
    return table


def _fmt_index(value: int | None) -> str:
    return "-" if value is None else str(value)


def _zero_share_reasons(instance: Any, solution: Any) -> list[str]:
    """One line per job the allocation gives no time, saying why: no throughput on any type
    the cluster has, time only in co-located pairs, or none at the optimum."""
    colocated = {job for pair in solution.colocated_allocation if pair.fraction > 1e-9
                 for job in pair.jobs}
    lines = []
    for job in instance.jobs:
        shares = solution.allocation.get(job.id, {})
        if sum(shares.values()) > 1e-9:
            continue
        usable = [acc for acc, pool in instance.cluster.accelerators.items()
                  if pool.count > 0 and (job.throughput or {}).get(acc, 0.0) > 0.0]
        if not usable:
            why = "it has no throughput on any accelerator type the cluster has"
        elif job.id in colocated:
            lines.append(f"note: job {job.id} has no time alone: it runs only co-located with "
                         "another job (the space-sharing shares in the solution file)")
            if len(lines) == MAX_ROWS:
                break
            continue
        else:
            why = (f"the optimum gives it none although it could run on {', '.join(usable)} "
                   "(the objective does not gain from its time: e.g. max-min fairness raises "
                   "only the smallest normalized share, and jobs above it may get nothing "
                   "more)")
        lines.append(f"note: job {job.id} gets no time: {why}")
        if len(lines) == MAX_ROWS:
            break
    return lines


def _print_violations(console: Console, violations: Sequence[str]) -> None:
    console.print(f"checker: {len(violations)} violation(s):")
    for line in violations[:MAX_ROWS]:
        console.print(f"  {line}", markup=False)
    if len(violations) > MAX_ROWS:
        console.print(f"  ... {len(violations) - MAX_ROWS} more")


# ---------------------------------------------------------------------------- validate


def _cmd_validate(args: argparse.Namespace) -> int:
    from schedlab.instance import load_instance

    console = _console()
    code = EXIT_OK
    for file in args.files:
        try:
            instance = load_instance(file)
        except InputError as exc:
            if len(args.files) == 1:
                raise
            _print_error(str(exc))
            code = EXIT_INPUT
            continue
        pools = ", ".join(f"{acc} x{pool.count}"
                          for acc, pool in instance.cluster.accelerators.items())
        if not args.quiet:
            console.print(f"ok {file}: {instance.name}: {len(instance.jobs)} jobs; "
                          f"{instance.cluster.total_gpus} GPUs ({pools})", markup=False)
    return code


# ------------------------------------------------------------------------------- titan


def _cmd_titan_explain(args: argparse.Namespace) -> int:
    """``titan explain FILE A B``: the merge rule's verdict, every reason in words."""
    from schedlab.formulations.titan.merge import explain_pair
    from schedlab.instance import load_instance

    instance = load_instance(args.file)
    try:
        verdict = explain_pair(instance, args.first, args.second, gpus=args.gpus)
    except InputError as exc:
        raise InputError(exc.reason, file=args.file, field=exc.field) from None
    a, b = verdict.tasks
    lines = [f"tasks {a} + {b}: " + ("may merge" if verdict.may_merge else "may not merge")]
    if verdict.similarity is not None:
        lines.append(f"task similarity: {verdict.similarity:.4f}")
    if verdict.benefit is not None and verdict.gpus is not None:
        lines.append(f"merge benefit at {verdict.gpus} GPUs: {verdict.benefit:.4f}")
    lines += [f"rejected: {reason}" for reason in verdict.reasons]
    console = _console()
    for line in lines:
        console.print(line, markup=False)
    return EXIT_OK


# ------------------------------------------------------------------------------- check


def _cmd_check(args: argparse.Namespace) -> int:
    from schedlab.check import check
    from schedlab.instance import load_instance
    from schedlab.solution import load_solution

    instance = load_instance(args.instance)
    solution = load_solution(args.solution)
    expected = instance.content_hash()
    if solution.instance.hash != expected:
        _print_warning(
            f"{args.solution} was computed for instance {solution.instance.name!r} "
            f"({solution.instance.hash[:19]}...), not for {args.instance} "
            f"({expected[:19]}...); checking anyway"
        )
    console = _console()
    if not solution.status.has_solution:
        console.print(f"{args.solution}: status {solution.status.value}: nothing to check",
                      markup=False)
        for line in solution.diagnostics:
            console.print(f"  {line}", markup=False)
        return EXIT_FAILURE
    violations = check(instance, solution)
    if violations:
        _print_violations(console, violations)
        return EXIT_FAILURE
    if not args.quiet:
        console.print(f"ok: {args.solution} is feasible for {args.instance} "
                      f"({solution.formulation}, status {solution.status.value})", markup=False)
    return EXIT_OK


# ------------------------------------------------------------------- formulations, schema


def _cmd_formulations(args: argparse.Namespace) -> int:
    from schedlab.registry import FORMULATIONS

    return _list_names(args, FORMULATIONS, "formulations")


def _cmd_policies(args: argparse.Namespace) -> int:
    from schedlab.policies.registry import POLICIES

    return _list_names(args, POLICIES, "policies")


def _list_names(args: argparse.Namespace, registry: Registry[Any], title: str) -> int:
    """Print a registry's names (built-ins and plug-ins) with their first description line;
    a ``from`` column names the plug-in of each name when any plug-in is installed."""
    from schedlab.registry import BUILT_IN

    entries = registry.entries()
    console = _console()
    if args.quiet:
        for name in entries:
            console.print(name, markup=False)
        return EXIT_OK
    plugins = any(entry.origin != BUILT_IN for entry in entries.values())
    table = Table(title=title, title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("description")
    if plugins:
        table.add_column("from")
    for name, entry in entries.items():
        first_line = (entry.description or "").strip().splitlines()
        row = [name, first_line[0] if first_line else ""]
        if plugins:
            row.append(entry.origin)
        table.add_row(*row)
    console.print(table)
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from schedlab.instance import instance_json_schema
    from schedlab.solution import solution_json_schema

    schemas: dict[str, Callable[[], dict[str, Any]]] = {
        "instance": instance_json_schema, "solution": solution_json_schema,
        "throughputs": _throughputs_schema, "replay": _replay_schema}
    schema = schemas[args.kind]()
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


def _throughputs_schema() -> dict[str, Any]:
    from schedlab.profiler.matrix import throughputs_json_schema

    return throughputs_json_schema()


def _replay_schema() -> dict[str, Any]:
    from schedlab.executor.report import replay_report_json_schema

    return replay_report_json_schema()


# ------------------------------------------------------------------------------ tables


def _cmd_tables_saturn(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import saturn as st
    from schedlab.progress import unit_progress

    started = datetime.datetime.now(datetime.UTC)
    out = _table_out(args) if args.out else None
    base = st.quick_settings() if args.quick else st.TableSettings()
    instances = (st.load_instances(args.instance) if args.instance
                 else st.quick_instances() if args.quick
                 else st.default_instances(args.scaling))
    settings = replace(base, time_limit_s=args.time_limit or base.time_limit_s,
                       scaling=args.scaling,
                       sigma=args.sigma,
                       seeds=tuple(range(args.seeds)) if args.seeds else base.seeds,
                       restart_cost_s=args.restart_cost)
    progress = unit_progress(not args.quiet)
    with progress:
        task = progress.add_task("saturn table", total=st.steps(len(instances), settings))

        def step(done: str) -> None:
            progress.update(task, advance=1, description=done)

        rows = st.saturn_table(instances, settings, on_step=step)
    _console().print(st.render(rows, settings))
    if out is not None:
        written = st.write_outputs(rows, settings, out, command=args.command_line,
                                   started=started)
        _console().print("wrote " + ", ".join(str(p) for p in written), markup=False)
    return EXIT_FAILURE if any("violation" in row.note for row in rows) else EXIT_OK


def _add_shockwave_table(which: Any, common: argparse.ArgumentParser) -> None:
    """``tables shockwave``: policies on Shockwave's 120-job trace (docs/reproduction.md)."""
    import os

    from schedlab.defaults import SHIPPED_THROUGHPUTS as THROUGHPUT_SOURCES

    shockwave = which.add_parser(
        "shockwave", parents=[common],
        help="Shockwave: makespan, JCT and fairness of policies on its 120-job trace",
        description="Simulate Shockwave's 120-job trace on 32 V100s (120 s rounds) under "
        "Shockwave, OSSP, Themis, Gavel, AlloX, MST and Gandiva-fair for several seeds; "
        "write shockwave.md, .csv, .tex, .png and shockwave.manifest.json to --out. Finished "
        "simulations are kept in OUT/cells/ and reused by a re-run. See docs/reproduction.md.")
    shockwave.add_argument("--out", required=True, metavar="DIR",
                           help="output folder (created if missing)")
    shockwave.add_argument("--quick", action="store_true",
                           help="a small table: 12 jobs on 4 GPUs, 1 seed, 4 policies")
    shockwave.add_argument("--seeds", type=_positive_int, metavar="N",
                           help="seeds FIRST..FIRST+N-1 (default: 3; --quick: 1)")
    shockwave.add_argument("--first-seed", type=_nonnegative_int, default=25, metavar="S",
                           help="first seed (default: 25, Shockwave's published trace)")
    shockwave.add_argument("--policies", type=_name_list, metavar="A,B,...",
                           help="registered policy names, in row order (default: the table's "
                           "eight; --quick: shockwave, gavel.finish_time_fairness, "
                           "gavel.max_min_fairness, allox)")
    shockwave.add_argument("--workers", type=_positive_int, metavar="W",
                           default=min(2, os.cpu_count() or 1),
                           help="simulations in parallel, in local processes (default: "
                           "%(default)s)")
    shockwave.add_argument("--throughputs", choices=tuple(THROUGHPUT_SOURCES),
                           help="throughput table of the traces' steps and seconds per epoch: "
                           "shockwave-tacc (default: Shockwave's measurements, the published "
                           "trace's) or gavel (Gavel's)")
    shockwave.add_argument("--mechanism", choices=["gavel", "schedlab"], default="gavel",
                           help="round mechanism (default: gavel, as Shockwave's simulator, "
                           "which is Gavel's; schedlab: ours, docs/simulator.md)")
    shockwave.add_argument("--resume-overhead", type=_nonnegative_float, default=20.0,
                           metavar="S", help="seconds a job loses in a round it runs after "
                           "missing one (default: 20, Shockwave's simulator; 0: none)")
    shockwave.set_defaults(handler=_cmd_tables_shockwave)


def _table_out(args: argparse.Namespace) -> Path:
    """The ``--out`` folder of a paper table (an existing file is an input error)."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError("is a file; --out needs a folder", file=str(out), field="--out")
    return out


def _seeded(settings: Any, args: argparse.Namespace) -> Any:
    """``settings`` with the seeds FIRST..FIRST+N-1 of ``--first-seed``/``--seeds`` (N default:
    the settings' count) and ``--workers``."""
    from dataclasses import replace

    count = args.seeds or len(settings.seeds)
    return replace(settings, seeds=tuple(range(args.first_seed, args.first_seed + count)),
                   workers=args.workers)


def _run_table(args: argparse.Namespace, module: Any, build: Callable[..., Any],
               settings: Any, out: Path, title: str) -> int:
    """Run a paper table with a progress bar (stderr, terminals only), write its files and
    print its Markdown (unless ``--quiet``) and the files written."""
    from schedlab.progress import unit_progress

    started = datetime.datetime.now(datetime.UTC)
    progress = unit_progress(not args.quiet)
    with progress:
        task = progress.add_task(title, total=module.cells_count(settings))

        def step(done: str) -> None:
            progress.update(task, advance=1, description=done)

        table = build(settings, out, on_cell=step)
    written = module.write_outputs(table, out, command=args.command_line, started=started)
    if not args.quiet:
        sys.stdout.write(module.render_markdown(table))
    _console().print("wrote " + ", ".join(str(p) for p in written), markup=False)
    return EXIT_OK


def _cmd_tables_shockwave(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import shockwave as sw

    out = _table_out(args)
    settings = _seeded(sw.quick_settings() if args.quick else sw.TableSettings(), args)
    if args.policies:
        settings = replace(settings, policies=sw.select_policies(args.policies))
    if args.throughputs:
        settings = replace(settings, throughputs=args.throughputs)
    settings = replace(settings, mechanism=args.mechanism,
                       resume_overhead_s=args.resume_overhead)
    return _run_table(args, sw, sw.shockwave_table, settings, out, "shockwave table")


def _add_titan_table(which: Any, common: argparse.ArgumentParser) -> None:
    """``tables titan``: Titan's Table 3 and the density sweep (docs/reproduction.md)."""
    import os

    titan = which.add_parser(
        "titan", parents=[common],
        help="Titan: average JCT and makespan of SRTF, Tiresias and Titan's ablations",
        description="Simulate Titan fine-tuning workloads in Titan's world (switch costs, "
        "elastic GPU counts, merged pairs) under SRTF, Tiresias (2 queues, 4 GPU-h), Titan "
        "without the task merger, without the pipelined switch, and Titan, at densities 1, "
        "1.5 and 2: by default TitanSched's own recorded traces on its 32-GPU cluster (the "
        "paper preset), or generated workloads (--preset generated); write titan.md, .csv, "
        ".tex, titan_density.png and titan.manifest.json to --out, with the merger's "
        "accounting (candidates, merged tasks, pairs turned down by rule). "
        "Finished simulations are kept in OUT/cells/ and reused. See docs/reproduction.md.")
    titan.add_argument("--out", required=True, metavar="DIR",
                       help="output folder (created if missing)")
    titan.add_argument("--preset", choices=("paper", "generated"), default="paper",
                       help="paper: TitanSched's traces FM-<density>-<trace model> (default); "
                       "generated: schedlab.workloads.titan's generator on --gpus GPUs, "
                       "several seeds")
    titan.add_argument("--trace-model", default="vit",
                       choices=("vit", "vit-large", "roberta-base", "roberta-large"),
                       help="paper preset: the model of the traces (default: vit)")
    titan.add_argument("--quick", action="store_true",
                       help="a small table: the density-1 trace only (generated: 16 GPUs, "
                       "8-16 tasks up to 2 h, densities 1 and 2, 1 seed)")
    titan.add_argument("--seeds", type=_positive_int, metavar="N",
                       help="generated preset: seeds FIRST..FIRST+N-1 (default: 3; --quick: "
                       "1); the paper preset's traces are fixed (one run each)")
    titan.add_argument("--first-seed", type=_nonnegative_int, default=0, metavar="S",
                       help="first seed (default: 0)")
    titan.add_argument("--gpus", type=_positive_int, metavar="G",
                       help="generated preset: GPUs, whole nodes of 4 (default: 64; --quick: "
                       "16)")
    titan.add_argument("--density", type=_positive_float, metavar="D",
                       help="density of the main table (default: 1; paper preset: 1, 1.5 "
                       "or 2)")
    titan.add_argument("--model", default="mixed",
                       choices=("mixed", "vit-base", "vit-large", "roberta-base",
                                "roberta-large"),
                       help="generated preset: base model of every task, or a mix (default: "
                       "mixed)")
    titan.add_argument("--workers", type=_positive_int, metavar="W",
                       default=min(2, os.cpu_count() or 1),
                       help="simulations in parallel, in local processes (default: "
                       "%(default)s)")
    titan.set_defaults(handler=_cmd_tables_titan)


def _cmd_tables_titan(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import titan as tt

    out = _table_out(args)
    if args.preset == "generated":
        base = (tt.quick_settings(**tt.generated_quick_overrides()) if args.quick
                else tt.generated_settings())
        settings = _seeded(base, args)
    else:
        if args.seeds is not None or args.first_seed:
            raise InputError("the paper preset's traces are fixed: --seeds and --first-seed "
                             "apply to --preset generated", field="--seeds")
        settings = replace(tt.quick_settings() if args.quick else tt.TableSettings(),
                           trace_model=args.trace_model, workers=args.workers)
    if args.gpus is not None:
        settings = replace(settings, gpus=args.gpus)
    if args.density is not None:
        settings = replace(settings, density=args.density)
    settings = replace(settings, model=args.model)
    return _run_table(args, tt, tt.titan_table, settings, out, "titan table")


def _add_hare_table(which: Any, common: argparse.ArgumentParser) -> None:
    """``tables hare``: Hare's weighted-JCT comparison (docs/reproduction.md)."""
    import os

    hare = which.add_parser(
        "hare", parents=[common],
        help="Hare: total weighted JCT of Hare vs Sched_Homo, Sched_Allox, Gavel, Tiresias, "
        "online LAS",
        description="Solve Hare workloads (100/200/300 jobs on 160 GPUs, and 200 jobs on 80 "
        "to 240 GPUs) with hare.greedy, hare.sched_homo and hare.sched_allox, and simulate "
        "Gavel max-min fairness, Tiresias and tiresias_aware (online heterogeneity-aware "
        "LAS) on the same jobs as gangs; write hare.md, .csv, .tex, "
        "hare_jobs.png, hare_gpus.png, hare_jct_cdf.png and hare.manifest.json to --out. Finished "
        "cells are kept in OUT/cells/ and reused. See docs/reproduction.md.")
    hare.add_argument("--out", required=True, metavar="DIR",
                      help="output folder (created if missing)")
    hare.add_argument("--quick", action="store_true",
                      help="a small table: 8 and 16 jobs on 24 GPUs, 16 jobs on 20 and 24 "
                      "GPUs, 1 seed")
    hare.add_argument("--seeds", type=_positive_int, metavar="N",
                      help="seeds FIRST..FIRST+N-1 (default: 3; --quick: 1)")
    hare.add_argument("--first-seed", type=_nonnegative_int, default=0, metavar="S",
                      help="first seed (default: 0)")
    hare.add_argument("--round-s", type=_positive_float, metavar="S",
                      help="round length of the simulated schemes, s (default: 60)")
    hare.add_argument("--lp-eps", type=_positive_float, metavar="EPS",
                      help="grid ratio - 1 of the LP that orders Hare's greedy (default: 0.25;"
                      " larger: a coarser, faster LP)")
    hare.add_argument("--workers", type=_positive_int, metavar="W",
                      default=min(2, os.cpu_count() or 1),
                      help="cells in parallel, in local processes (default: %(default)s)")
    hare.set_defaults(handler=_cmd_tables_hare)


def _cmd_tables_hare(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import hare as ht

    out = _table_out(args)
    settings = _seeded(ht.quick_settings() if args.quick else ht.TableSettings(), args)
    if args.round_s is not None:
        settings = replace(settings, round_s=args.round_s)
    if args.lp_eps is not None:
        settings = replace(settings, lp_eps=args.lp_eps)
    return _run_table(args, ht, ht.hare_table, settings, out, "hare table")


def _add_gavel_table(which: Any, common: argparse.ArgumentParser) -> None:
    """``tables gavel``: average JCT vs rate, heterogeneity-aware vs agnostic
    (docs/reproduction.md)."""
    import os

    gavel = which.add_parser(
        "gavel", parents=[common],
        help="Gavel: average JCT of heterogeneity-aware vs agnostic policies vs job rate",
        description="Simulate Gavel's max-min fairness (LAS), FIFO and finish-time fairness, "
        "each heterogeneity-aware and agnostic, on the shipped trace-1000 and on Gavel's "
        "single-GPU generator at several rates (36:36:36 V100:P100:K80, 360 s rounds); write "
        "gavel.md, .csv, .tex, gavel_jct_vs_rate.png and gavel.manifest.json to --out. "
        "Finished cells are kept in OUT/cells/ and reused. See docs/reproduction.md.")
    gavel.add_argument("--out", required=True, metavar="DIR",
                       help="output folder (created if missing)")
    gavel.add_argument("--quick", action="store_true",
                       help="a small table: the trace's first 40 jobs, 30 generated jobs at "
                       "2 and 6 jobs/h, 1 seed")
    gavel.add_argument("--seeds", type=_positive_int, metavar="N",
                       help="seeds FIRST..FIRST+N-1 (default: 3; --quick: 1)")
    gavel.add_argument("--first-seed", type=_nonnegative_int, default=0, metavar="S",
                       help="first seed (default: 0, as Gavel's sweeps)")
    gavel.add_argument("--jobs", type=_positive_int, metavar="N",
                       help="generated jobs per run (default: 300; --quick: 30)")
    gavel.add_argument("--rates", type=_rate_list, metavar="R,R,...",
                       help="generator rates, jobs/hour (default: 2,4,6; --quick: 2,6)")
    gavel.add_argument("--trace", metavar="FILE",
                       help="trace instance file (default: instances/gavel/trace-1000.json.gz)")
    gavel.add_argument("--no-trace", action="store_true", help="leave the trace column out")
    gavel.add_argument("--steady-state", action="store_true",
                       help="Gavel's protocol for the LAS pair: 6000 jobs per run at 4.4, "
                       "5.2 and 6 jobs/h, averaged over jobs 4000-4999 of each run, no trace "
                       "column (--jobs, --rates, --measure, --pairs still apply)")
    gavel.add_argument("--measure", type=_job_window, metavar="A:B",
                       help="average only jobs A..B-1 of each generated run, in arrival "
                       "order (Gavel's -s A -e B; default: every job)")
    gavel.add_argument("--pairs", type=_gavel_pairs, metavar="P,P,...",
                       help="policy pairs, of las, fifo, ftf (default: all three; "
                       "--steady-state: las)")
    gavel.add_argument("--workers", type=_positive_int, metavar="W",
                       default=min(2, os.cpu_count() or 1),
                       help="simulations in parallel, in local processes (default: "
                       "%(default)s)")
    gavel.set_defaults(handler=_cmd_tables_gavel)


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
_GAVEL_PAIR_NAMES = ("las", "fifo", "ftf")


def _gavel_pairs(text: str) -> tuple[str, ...]:
    """``las,fifo`` -> the named pairs (of :data:`_GAVEL_PAIR_NAMES`), in the table's order."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in _GAVEL_PAIR_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected some of {', '.join(_GAVEL_PAIR_NAMES)}, got {text!r}")
    return tuple(n for n in _GAVEL_PAIR_NAMES if n in names)


def _cmd_tables_gavel(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import gavel as gt

    out = _table_out(args)
    if args.quick and args.steady_state:
        raise InputError("--quick and --steady-state exclude each other",
                         field="--steady-state")
    base = (gt.quick_settings() if args.quick else
            gt.steady_state_settings() if args.steady_state else gt.TableSettings())
    settings = _seeded(base, args)
    if args.pairs is not None:
        settings = replace(settings, pairs=tuple(
            pair for name, pair in zip(_GAVEL_PAIR_NAMES, gt.PAIRS, strict=True)
            if name in args.pairs))
    if args.measure is not None:
        settings = replace(settings, measure=args.measure)
    if args.jobs is not None:
        settings = replace(settings, jobs=args.jobs)
    if args.rates is not None:
        settings = replace(settings, rates=tuple(args.rates))
    if args.trace is not None:
        settings = replace(settings, trace=args.trace)
    if args.no_trace:
        settings = replace(settings, trace=None)
    return _run_table(args, gt, gt.gavel_table, settings, out, "gavel table")


def _add_cross_table(which: Any, common: argparse.ArgumentParser) -> None:
    """``tables cross``: every policy on the same four workloads (docs/reproduction.md)."""
    import os

    cross = which.add_parser(
        "cross", parents=[common],
        help="every policy (and Hare's planner) on the same four workloads",
        description="Run every registered online policy and Hare's greedy planner on four "
        "workloads (homogeneous and heterogeneous Gavel jobs, Shockwave's dynamic jobs, "
        "Titan's fine-tuning tasks), each seeing what it can of them (conversions listed in "
        "docs/reproduction.md); write cross.md, .csv, .tex, cross_heatmap.png and "
        "cross.manifest.json to --out. Finished cells are kept in OUT/cells/ and reused.")
    cross.add_argument("--out", required=True, metavar="DIR",
                       help="output folder (created if missing)")
    cross.add_argument("--quick", action="store_true",
                       help="a small table: 6 jobs per workload on 4-8 GPUs, 1 seed, every "
                       "policy")
    cross.add_argument("--seeds", type=_positive_int, metavar="N",
                       help="seeds FIRST..FIRST+N-1 (default: 3; --quick: 1)")
    cross.add_argument("--first-seed", type=_nonnegative_int, default=0, metavar="S",
                       help="first seed (default: 0)")
    cross.add_argument("--jobs", type=_positive_int, metavar="N",
                       help="jobs per workload (default: 16; --quick: 6)")
    cross.add_argument("--workers", type=_positive_int, metavar="W",
                       default=min(2, os.cpu_count() or 1),
                       help="cells in parallel, in local processes (default: %(default)s)")
    cross.set_defaults(handler=_cmd_tables_cross)


def _cmd_tables_cross(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from schedlab.analysis.tables import cross as ct

    out = _table_out(args)
    settings = _seeded(ct.quick_settings() if args.quick else ct.TableSettings(), args)
    if args.jobs is not None:
        settings = replace(settings, jobs=args.jobs)
    return _run_table(args, ct, ct.cross_table, settings, out, "cross table")


# ------------------------------------------------------------------- simulate, compare

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


def _rate_list(text: str) -> list[float]:
    """``6`` or ``2,4,6``: positive job arrival rates (jobs/hour)."""
    rates = [_positive_float(part) for part in text.split(",") if part.strip()]
    if not rates:
        raise argparse.ArgumentTypeError(f"{text!r} lists no rate")
    return list(dict.fromkeys(rates))


def _seed_list(text: str) -> list[int]:
    """``0,1,2`` (or a range ``0-4``): distinct integer seeds >= 0."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        try:
            values = (range(int(first), int(last) + 1) if dash and first
                      else [int(part)])
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not a seed (an integer >= 0)") \
                from None
        for seed in values:
            if seed < 0:
                raise argparse.ArgumentTypeError(f"seed {seed} must be >= 0")
            seeds.append(seed)
    if not seeds:
        raise argparse.ArgumentTypeError(f"{text!r} lists no seed")
    return list(dict.fromkeys(seeds))


def _name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} lists no policy")
    return list(dict.fromkeys(names))


def _add_simulation_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``simulate`` and ``compare`` subcommands (online policies in the simulator)."""
    from schedlab.defaults import TRACE_FORMATS

    shared = _Parser(add_help=False)
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
    work.add_argument("--jobs", type=_positive_int, metavar="N",
                      help=f"jobs (gavel: default {DEFAULT_SIM_JOBS}; trace: the first N, "
                      "default all; instance file: the N earliest arrivals, default all)")
    work.add_argument("--jobs-per-hour", type=_rate_list, metavar="R[,R...]",
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
    work.add_argument("--seeds", type=_seed_list, default=[0], metavar="S[,S...]",
                      help="seeds, one run each (workload and policy), e.g. 0,1,2 or 0-4 "
                      "(default: 0); an instance file is the same job stream for every seed, "
                      "so seeds then only change randomized policies")
    work.add_argument("--round-s", type=_positive_float, metavar="S",
                      help="round length, seconds (default: 360, Gavel's)")
    work.add_argument("--mechanism", choices=["schedlab", "gavel"], default="schedlab",
                      help="round mechanism: schedlab's (default) or gavel, which follows "
                      "Gavel's simulator (allocation recomputed only at its resets, its "
                      "priorities and per-type queues, whole steps); see docs/simulator.md")
    work.add_argument("--resume-overhead", type=_nonnegative_float, default=0.0, metavar="S",
                      help="seconds a job loses in a round it runs after not running in the "
                      "previous one, unless it finishes within the round less 5 s (Shockwave's "
                      "simulator charges 20); default 0: none. See docs/simulator.md")
    run = shared.add_argument_group("running and output")
    run.add_argument("--workers", type=_positive_int, default=1, metavar="W",
                     help="simulations in parallel, in local processes (default: 1)")
    run.add_argument("--out", metavar="FILE.csv|FILE.parquet",
                     help="write every run's per-job table to this file (atomically)")
    run.add_argument("--runs-dir", metavar="DIR",
                     help="keep one result file per run here and skip runs already there "
                     "(resume an interrupted sweep); default: a temporary folder")
    run.add_argument("--plots", metavar="DIR",
                     help="write jct_cdf.png (and jct_vs_load.png with several rates) here")
    run.add_argument("--unfair-threshold", type=_positive_float, default=UNFAIR_THRESHOLD,
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
    compare.add_argument("--policies", required=True, type=_name_list, metavar="A,B,...",
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
    them (ids that look like numbers become numbers, None becomes NaN).  Float columns are
    kept as they are: their CSV round trip only costs time (~1.5 s for 10^5 rows)."""
    import io

    import pandas as pd

    floats = [c for c in frame.columns if frame[c].dtype == "float64"]
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


def _fmt_mean_std(mean: float, std: float, scale: float, spec: str, seeds: int) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    text = format(mean * scale, spec)
    return f"{text} ± {format(std * scale, spec)}" if seeds > 1 else text


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
    console = _console()
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
                          *[_fmt_mean_std(agg[f"{key}_mean"], agg[f"{key}_std"], scale, spec,
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
    console = _console()
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
                      *[_fmt_mean_std(row[f"{key}_mean"], row[f"{key}_std"], scale, spec,
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


# -------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run the ``schedlab`` command line; return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    args.command_line = ["schedlab", *(sys.argv[1:] if argv is None else argv)]
    _configure_logging(args.verbose, args.quiet)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except SchedlabError as exc:
        _print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _print_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `schedlab schema instance | head`
        return EXIT_OK
    except Exception as exc:  # a bug, not the user's fault: one line, traceback on -v
        log.debug("internal error", exc_info=True)
        _print_error(f"internal error ({type(exc).__name__}: {exc}); "
                     "rerun with --verbose for the traceback and please report it")
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
