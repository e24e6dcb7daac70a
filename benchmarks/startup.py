"""Startup time of the command line: ``schedlab --version``, ``--help``, ``schema instance``
and ``validate`` (none imports Pyomo or the solvers), beside two baselines run in the same
process: ``python -c pass`` (the interpreter alone) and ``python -c "import pyomo.environ"``
(what every command paid before the imports were made lazy).

Each command runs ``--repeat`` times (default 5) as a fresh process; the table gives the
median wall seconds and the ratio to the interpreter alone.  It prints one line per command
as it goes.  About 30 s; ``--quick``: 2 repeats.

    python benchmarks/startup.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS: tuple[tuple[str, list[str]], ...] = (
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("import pyomo.environ", [sys.executable, "-c", "import pyomo.environ"]),
    ("schedlab --version", [sys.executable, "-m", "schedlab", "--version"]),
    ("schedlab --help", [sys.executable, "-m", "schedlab", "--help"]),
    ("schedlab schema instance", [sys.executable, "-m", "schedlab", "schema", "instance"]),
    ("schedlab validate small-6jobs", [sys.executable, "-m", "schedlab", "validate",
                                       str(ROOT / "instances/gavel/small-6jobs.json")]),
)


def wall(command: list[str]) -> float:
    """Wall seconds of one run (its output discarded; a failure stops the benchmark)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    base = None
    print(f"{'command':<32} {'median s':>9} {'x python':>9}", flush=True)
    for label, command in COMMANDS:
        median = statistics.median(wall(command) for _ in range(repeat))
        base = median if base is None else base
        print(f"{label:<32} {median:9.3f} {median / base:9.1f}", flush=True)


if __name__ == "__main__":
    main()
