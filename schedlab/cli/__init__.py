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
import logging
import sys
from collections.abc import Callable

from schedlab import __version__
from schedlab.cli import goodput, profile, replay, simulate, solve, sweep, tables
from schedlab.cli.common import (
    EXIT_FAILURE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Parser,
    configure_logging,
    print_error,
)
from schedlab.errors import SchedlabError

log = logging.getLogger("schedlab.cli")


def build_parser() -> argparse.ArgumentParser:
    """The ``schedlab`` argument parser with its subcommands."""
    common = Parser(add_help=False)
    noise = common.add_mutually_exclusive_group()
    noise.add_argument("-v", "--verbose", action="store_true",
                       help="debug logging, and the solver's own log")
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="print only errors and a one-line result")

    parser = Parser(
        prog="schedlab",
        description="GPU-cluster scheduling formulations (Gavel, Shockwave, Saturn, Titan, "
        "Hare) behind one Instance -> Solution interface.",
        epilog="Exit codes: 0 success, 1 solver failure / infeasible / violations, "
        "2 bad input. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"schedlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    solve.add_solve_commands(sub, common)
    tables.add_tables_command(sub, common)
    solve.add_titan_command(sub, common)
    solve.add_schema_command(sub, common)
    simulate.add_simulation_commands(sub, common)
    goodput.add_goodput_command(sub, common)
    sweep.add_sweep_command(sub, common)
    profile.add_profile_commands(sub, common)
    replay.add_replay_command(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``schedlab`` command line; return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    args.command_line = ["schedlab", *(sys.argv[1:] if argv is None else argv)]
    configure_logging(args.verbose, args.quiet)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except SchedlabError as exc:
        print_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `schedlab schema instance | head`
        return EXIT_OK
    except Exception as exc:  # a bug, not the user's fault: one line, traceback on -v
        log.debug("internal error", exc_info=True)
        print_error(f"internal error ({type(exc).__name__}: {exc}); "
                    "rerun with --verbose for the traceback and please report it")
        return EXIT_FAILURE
