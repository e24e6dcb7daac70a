"""The experiment runner's backends on the same cells: in this process (one worker, the
baseline), a local pool of 2 workers started with forkserver, and (when Ray is installed) a
local Ray with 2 CPUs; each a fresh output folder, so every cell is computed.

The specs: ``hare --quick`` (18 cells: three solved schemes and three simulated, each cell
tens of milliseconds to a second) and ``cross --quick`` (148 small cells).  The table gives
each backend's wall seconds (the best of ``--repeat`` runs) and its ratio to the in-process
run of the same spec, measured in this process.  ``--quick``: hare only, one repeat.

    python benchmarks/runner.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

from schedlab.analysis.experiments.runner import plan_experiment, run_experiment
from schedlab.analysis.experiments.spec import shipped_experiment

BACKENDS: tuple[tuple[str, list[str]], ...] = (
    ("in process", ["run.workers=1"]),
    ("forkserver x2", ["run.workers=2"]),
    ("ray x2", ["run.workers=2", "run.backend=ray"]),
)


def wall(table: str, overrides: list[str]) -> float:
    """Wall seconds of one run of the table's quick spec into a fresh folder."""
    spec = shipped_experiment(table, variants=["quick"], overrides=overrides)
    plan = plan_experiment(spec)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_experiment(plan, Path(folder))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tables = ("hare",) if args.quick else ("hare", "cross")
    repeat = 1 if args.quick else args.repeat
    has_ray = importlib.util.find_spec("ray") is not None
    print(f"{'spec':<14} {'backend':<15} {'cells':>5} {'wall (s)':>9} {'ratio':>6}")
    for table in tables:
        cells = len(plan_experiment(shipped_experiment(table, variants=["quick"])).cells)
        baseline = None
        for name, overrides in BACKENDS:
            if "ray" in name and not has_ray:
                continue
            best = min(wall(table, overrides) for _ in range(repeat))
            baseline = baseline or best
            print(f"{table + ' --quick':<14} {name:<15} {cells:>5} {best:>9.2f} "
                  f"{best / baseline:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
