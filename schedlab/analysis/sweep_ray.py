"""Run a sweep's simulations as Ray tasks (``schedlab sweep --backend ray``, docs/sweep.md).

Each run not yet in the output folder becomes one Ray task of
:func:`~schedlab.analysis.sweep.run_one`, the function the local process pool runs through
:func:`~schedlab.analysis.sweep.run_sweep`: it calls the same runner
(:func:`~schedlab.analysis.sweep.simulate_run`) and returns the run's result table.  The
driver (this process) writes each table as it arrives, atomically, under the same file name
the local pool uses, so the output folder lives on the driver only and the two backends give
the same files for the same runs; a rerun skips the finished ones with either backend.

Ray is optional (``pip install 'schedlab[ray]'``) and imported only here, when a Ray sweep
starts.  :func:`run_sweep_ray` connects to ``address`` when given (an existing cluster; its
nodes need schedlab installed and, for trace or instance-file workloads, the files at the same
paths), else starts a local instance with ``num_cpus = workers`` and stops it at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from schedlab.analysis.sweep import (
    ResultFormat,
    Runner,
    RunSpec,
    SweepReport,
    prepare_sweep,
    progress_bar,
    run_one,
    simulate_run,
    write_frame_atomic,
)
from schedlab.errors import InputError

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'schedlab[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or an :class:`InputError` (exit 2) saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"the ray backend needs Ray, which is not installed ({exc}); "
                         f"{INSTALL_HINT}, or use --backend local", field="--backend") \
            from None
    return ray


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
    """Run every spec whose result file is not in ``out_dir`` yet as a Ray task; the driver
    writes one file per run as it finishes (module docstring).

    ``runner`` must be a module-level function importable on the Ray workers.  When Ray is
    already initialized in this process it is used as it is (and left running).  On Ctrl-C or
    a failed run, the tasks not finished are cancelled, the files written stay, and the error
    is raised again; a rerun resumes.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", field="--workers")
    ray = import_ray()
    report, pending, suffix = prepare_sweep(specs, out_dir, fmt)
    if not pending:
        return report
    folder = report.out_dir

    started_here = not ray.is_initialized()
    if started_here:
        if address is not None:
            log.info("connecting to the Ray cluster at %s", address)
            ray.init(address=address, logging_level=logging.WARNING)
        else:
            log.info("starting a local Ray instance with %d CPU(s)", workers)
            ray.init(num_cpus=workers, include_dashboard=False,
                     logging_level=logging.WARNING)
    elif address is not None:
        log.warning("Ray is already initialized in this process; --address %s is not used",
                    address)
    task_fn = ray.remote(num_cpus=1, max_retries=0)(run_one)
    bar = progress_bar(progress)
    task = bar.add_task(description, total=len(specs), completed=len(report.skipped))
    refs: dict[Any, RunSpec] = {}
    waiting: list[Any] = []
    clean = False
    try:
        refs = {task_fn.remote(spec, runner): spec for spec in pending}
        waiting = list(refs)
        with bar:
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                for ref in done:
                    spec = refs[ref]
                    frame, wall = ray.get(ref)  # re-raises a run's error
                    path = folder / f"{spec.key}.{suffix}"
                    write_frame_atomic(frame, path)
                    report.ran.append(spec)
                    report.files[spec.key] = path
                    bar.advance(task)
                    log.debug("%s done in %.2f s -> %s", spec.key, wall, path)
        clean = True
    finally:
        if not clean and waiting:
            log.warning("stopping: cancelling %d unfinished Ray task(s)", len(waiting))
            for ref in waiting:
                ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
    return report


__all__ = ["INSTALL_HINT", "import_ray", "run_sweep_ray"]
