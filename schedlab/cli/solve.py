"""``schedlab solve``, ``validate``, ``check``, ``formulations``, ``policies``, ``schema`` and
``titan explain``: instance and solution files, the registries, the file formats."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from schedlab.cli.common import (
    EXIT_FAILURE,
    EXIT_INPUT,
    EXIT_OK,
    Parser,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    print_error,
    print_warning,
    stdout_console,
)
from schedlab.errors import InputError

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


def add_solve_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``solve``, ``validate``, ``check``, ``formulations`` and ``policies``."""
    solve = sub.add_parser("solve", parents=[common], help="solve an instance file",
                           description="Build, solve and check a formulation on an instance.")
    solve.add_argument("file", metavar="FILE", help="instance file (.json, .yaml, .json.gz)")
    solve.add_argument("-f", "--formulation", metavar="NAME",
                       help=f"registered formulation (default: {DEFAULT_FORMULATION}, when the "
                       "instance has the fields it needs; otherwise the error names the "
                       "formulations that accept the instance); see 'schedlab formulations'")
    solve.add_argument("--solver", default="highs", metavar="NAME",
                       help="highs (default) or gurobi (pip install 'schedlab[gurobi]')")
    solve.add_argument("--time-limit", type=positive_float, metavar="S",
                       help="solver time limit per solve, seconds")
    solve.add_argument("--mip-gap", type=nonnegative_float, metavar="G",
                       help="relative MIP gap at which to stop, e.g. 0.01")
    solve.add_argument("--threads", type=positive_int, metavar="N", help="solver threads")
    solve.add_argument("--lp-method", choices=("auto", "simplex", "ipm"), default="auto",
                       help="LP algorithm (default: auto, the formulation decides)")
    solve.add_argument("--rounds", type=nonnegative_int, metavar="N",
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


def add_titan_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """``titan explain``: Titan's merge rule on two tasks."""
    titan = sub.add_parser("titan", help="Titan tools (merge rule)",
                           description="Tools for Titan's task merging.")
    titan_tools = titan.add_subparsers(dest="tool", metavar="TOOL", parser_class=Parser)
    titan_tools.required = True
    explain = titan_tools.add_parser(
        "explain", parents=[common], help="why two tasks may or may not merge",
        description="Apply Titan's merge rule to two tasks of an instance file and list every "
        "reason it rejects the pair (same base model, neither started, different datasets, "
        "task similarity >= the threshold, the merge benefit). See docs/formulations/titan.md.")
    explain.add_argument("file", metavar="FILE", help="instance file with the Titan tasks")
    explain.add_argument("first", metavar="A", help="id of one task")
    explain.add_argument("second", metavar="B", help="id of the other task")
    explain.add_argument("--gpus", type=positive_int, metavar="N",
                         help="GPU count of the benefit rule (default: the pool's count, at "
                         "most the pair's maximum)")
    explain.set_defaults(handler=_cmd_titan_explain)


def add_schema_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """``schema KIND``: the JSON Schema of a file format."""
    schema = sub.add_parser("schema", parents=[common], help="print a JSON Schema",
                            description="Print the JSON Schema of a file format.")
    schema.add_argument("kind", choices=("instance", "solution", "throughputs", "replay",
                                         "experiment"),
                        help="which file format")
    schema.set_defaults(handler=_cmd_schema)


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

    console = stdout_console()
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

    console = stdout_console()
    code = EXIT_OK
    for file in args.files:
        try:
            instance = load_instance(file)
        except InputError as exc:
            if len(args.files) == 1:
                raise
            print_error(str(exc))
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
    console = stdout_console()
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
        print_warning(
            f"{args.solution} was computed for instance {solution.instance.name!r} "
            f"({solution.instance.hash[:19]}...), not for {args.instance} "
            f"({expected[:19]}...); checking anyway"
        )
    console = stdout_console()
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
    console = stdout_console()
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
    from schedlab.analysis.experiments.spec import experiment_schema
    from schedlab.instance import instance_json_schema
    from schedlab.solution import solution_json_schema

    schemas: dict[str, Callable[[], dict[str, Any]]] = {
        "instance": instance_json_schema, "solution": solution_json_schema,
        "throughputs": _throughputs_schema, "replay": _replay_schema,
        "experiment": experiment_schema}
    schema = schemas[args.kind]()
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


def _throughputs_schema() -> dict[str, Any]:
    from schedlab.profiler.matrix import throughputs_json_schema

    return throughputs_json_schema()


def _replay_schema() -> dict[str, Any]:
    from schedlab.executor.report import replay_report_json_schema

    return replay_report_json_schema()
