"""Run a sweep's simulations as Ray tasks (``schedlab sweep --backend ray``, docs/sweep.md).

Each run not yet in the output folder becomes one Ray task of
:func:`~schedlab.analysis.sweep.run_one`, through the same engine as the local pool
(:func:`~schedlab.analysis.experiments.runner.run_cached` with the ``ray`` backend,
:mod:`schedlab.analysis.experiments.backends`).  The driver (this process) writes each table
as it arrives, atomically, under the same file name the local pool uses, so the output folder
lives on the driver only and the two backends give the same files for the same runs; a rerun
skips the finished ones with either backend.

Ray is optional (``pip install 'schedlab[ray]'``) and imported only when a Ray sweep
starts.  :func:`run_sweep_ray` connects to ``address`` when given (an existing cluster; its
nodes need schedlab installed and, for trace or instance-file workloads, the files at the same
paths), else starts a local instance with ``num_cpus = workers`` and stops it at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from schedlab.analysis.experiments.backends import INSTALL_HINT, import_ray
from schedlab.analysis.sweep import (
    ResultFormat,
    Runner,
    RunSpec,
    SweepReport,
    run_sweep,
    simulate_run,
)
from schedlab.errors import InputError

log = logging.getLogger(__name__)


def run_sweep_ray(
    specs: Sequence[RunSpec],
    out_dir: str | Path,
    *,
    address: str | None = None,
    workers: int = 1,
    fmt: ResultFormat = "auto",
    progress: bool = True,
    runner: Runner = simulate_run,
    description: str = "simulating (ray)",
) -> SweepReport:
    """:func:`~schedlab.analysis.sweep.run_sweep` on the ``ray`` backend (module docstring).

    ``runner`` must be a module-level function importable on the Ray workers.  When Ray is
    already initialized in this process it is used as it is (and left running).  On Ctrl-C or
    a failed run, the tasks not finished are cancelled, the files written stay, and the error
    is raised again; a rerun resumes.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", field="--workers")
    import_ray()  # a missing Ray is an input error before anything is written
    return run_sweep(specs, out_dir, workers=workers, fmt=fmt, progress=progress,
                     runner=runner, description=description, backend="ray", address=address)


__all__ = ["INSTALL_HINT", "import_ray", "run_sweep_ray"]
