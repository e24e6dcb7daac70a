"""What every ``schedlab`` subcommand shares: the exit codes, the one-line ``error:`` and
``warning:`` output, the stdout console, logging to stderr, the argument parser class whose
usage errors exit 2, and the argument types (numbers, counts, comma-separated lists).

Rich's console is imported here, at start-up; anything heavier (numpy, pandas, solvers,
torch) is imported by the command handlers, so ``schedlab --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from rich.console import Console

T = TypeVar("T")

#: Table width when stdout is not a terminal (a file, a pipe, a test's capture).
PIPE_WIDTH = 160

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


# ------------------------------------------------------------------------------- output


def print_error(message: str) -> None:
    """One ``error:`` line on stderr (newlines inside the message are folded)."""
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"error: {one_line}\n")
    sys.stderr.flush()


def print_warning(message: str) -> None:
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"warning: {one_line}\n")
    sys.stderr.flush()


def stdout_console() -> Console:
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


def configure_logging(verbose: bool, quiet: bool) -> None:
    """``schedlab`` logger: WARNING by default, DEBUG with --verbose, ERROR with --quiet."""
    global _HANDLER
    logger = logging.getLogger("schedlab")
    if _HANDLER is not None:
        logger.removeHandler(_HANDLER)
    _HANDLER = _StderrHandler()
    _HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(_HANDLER)
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR if quiet else logging.WARNING)


def fmt_mean_std(mean: float, std: float, scale: float, spec: str, seeds: int) -> str:
    """``mean ± std`` (both times ``scale``, formatted with ``spec``); the mean alone for one
    seed; ``-`` for a missing mean."""
    if mean is None or math.isnan(mean):
        return "-"
    text = format(mean * scale, spec)
    return f"{text} ± {format(std * scale, spec)}" if seeds > 1 else text


# ------------------------------------------------------------------------ argument parsing


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one ``error:`` line on stderr, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{message} (see '{self.prog} --help')")
        raise SystemExit(EXIT_INPUT)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number >= 0")
    return value


def int_at_least(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= {lowest}")
    return value


def positive_int(text: str) -> int:
    return int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    return int_at_least(text, 0)


def rate_list(text: str) -> list[float]:
    """``6`` or ``2,4,6``: positive job arrival rates (jobs/hour)."""
    rates = [positive_float(part) for part in text.split(",") if part.strip()]
    if not rates:
        raise argparse.ArgumentTypeError(f"{text!r} lists no rate")
    return list(dict.fromkeys(rates))


def seed_list(text: str) -> list[int]:
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


def name_list(text: str) -> list[str]:
    """``a,b``: distinct registered policy names, in order."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} lists no policy")
    return list(dict.fromkeys(names))


def list_of(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argument type: a comma-separated list, no empty item, each parsed by ``item``."""
    def parse(text: str) -> list[T]:
        parts = [part.strip() for part in text.split(",")]
        if not parts or any(not part for part in parts):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list")
        return [item(part) for part in parts]

    return parse
