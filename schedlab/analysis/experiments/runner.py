"""The one experiment runner: spec -> cells -> cached results -> table -> report files.

:func:`run_experiment` is what ``schedlab tables <paper>`` and ``schedlab sweep SPEC`` run:

1. the table kind (:func:`~schedlab.analysis.experiments.kind.table_kind`) checks the spec
   and expands it into cells;
2. :func:`run_cells` reads each cell's file from ``OUT/cells/`` when it is there, and computes
   the others on the spec's backend (``local`` processes or ``ray``,
   :mod:`~schedlab.analysis.experiments.backends`), writing each file atomically in this
   process as its result arrives.  A file's name carries a digest of everything its result
   depends on (the instance, the policy and its options, the code:
   :func:`~schedlab.analysis.tables.cells.code_digest`), so a re-run reuses it, and an
   interrupted run (Ctrl-C, or the parent killed: its workers die with it) resumes where it
   stopped without computing a finished cell again.  A cell is claimed before it is computed
   (:mod:`schedlab.claims`), so two runs into one folder share the work;
3. the kind reduces the results to its table and lays out the report: ``<name>.md``,
   ``.csv``, ``.tex``, its figures and ``<name>.manifest.json`` (which records the spec).
"""

from __future__ import annotations

import datetime as dt
import logging
import stat
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from schedlab.analysis.experiments.backends import WorkerContext, call_in_context, make_pool
from schedlab.analysis.experiments.kind import TableKind, table_kind
from schedlab.analysis.experiments.spec import Experiment
from schedlab.analysis.tables import output
from schedlab.analysis.tables.cells import read_cell_json, write_cell_json
from schedlab.claims import ClaimQueue, claim_file, drain_in_process, drain_on_pool
from schedlab.errors import InputError

log = logging.getLogger(__name__)

CellT = TypeVar("CellT")


@dataclass(frozen=True)
class Plan:
    """A checked experiment: its kind, the table's settings and the cells."""

    spec: Experiment
    kind: TableKind
    settings: Any
    cells: Sequence[Any]


@dataclass(frozen=True)
class Outcome:
    """What a run made: the table, the files written and the exit code the table asks for."""

    table: Any
    markdown: str
    written: list[Path]
    exit_code: int


def plan_experiment(spec: Experiment) -> Plan:
    """Check ``spec`` and expand it into cells (nothing is run or written)."""
    kind = table_kind(spec.table)
    settings = kind.settings(spec)
    return Plan(spec=spec, kind=kind, settings=settings, cells=list(kind.plan(settings)))


def run_experiment(spec: Experiment | Plan, out_dir: str | Path, *,
                   on_cell: Callable[[str], None] | None = None,
                   command: Sequence[str] | None = None,
                   started: dt.datetime | None = None) -> Outcome:
    """Run an experiment into ``out_dir`` (module docstring) and write its report."""
    plan = spec if isinstance(spec, Plan) else plan_experiment(spec)
    started = started or dt.datetime.now(dt.UTC)
    kind, options = plan.kind, plan.spec.run
    folder = Path(out_dir)
    results = run_cells(kind, plan.cells, folder / kind.cells_folder,
                        backend=options.backend, workers=options.workers,
                        address=options.address, on_cell=on_cell)
    table = kind.reduce(plan.settings, results)
    written = write_report(plan, table, folder, command=command, started=started)
    return Outcome(table=table, markdown=output.render_markdown(kind.document(table)),
                   written=written, exit_code=kind.exit_code(table))


def write_report(plan: Plan, table: Any, folder: Path, *, command: Sequence[str] | None,
                 started: dt.datetime) -> list[Path]:
    """The report of ``plan``'s spec (:func:`write_outputs`), the spec in the manifest."""
    return write_outputs(plan.kind, plan.settings, table, folder, stem=plan.spec.name,
                         figures=plan.spec.report.figures, command=command, started=started,
                         experiment=plan.spec.to_document())


def write_outputs(kind: TableKind, settings: Any, table: Any, out_dir: str | Path, *,
                  stem: str | None = None, figures: bool = True,
                  command: Sequence[str] | None = None, started: dt.datetime | None = None,
                  experiment: dict[str, Any] | None = None) -> list[Path]:
    """``<stem>.md``, ``.csv``, ``.tex`` (stem default: the kind's name), the figures (when
    ``figures``) and ``<stem>.manifest.json``, each written atomically; returns the paths."""
    folder = Path(out_dir)
    stem = stem or kind.name
    written = output.write_table_files(folder, stem, kind.document(table), kind.frame(table))
    if figures:
        written.extend(kind.figures(table, folder))
    written.append(output.write_manifest(
        folder, stem, written, seeds=kind.seeds(settings), settings=settings,
        command=command, started=started, experiment=experiment))
    return written


def compute_table(kind: TableKind, settings: Any, out_dir: str | Path, *, workers: int = 1,
                  backend: str = "local", on_cell: Callable[[str], None] | None = None) -> Any:
    """The table of ``settings`` (already the kind's settings, not a spec): its cells run
    (:func:`run_cells`, cached in ``out_dir/cells/``) and reduced."""
    cells = kind.plan(settings)
    results = run_cells(kind, cells, Path(out_dir) / kind.cells_folder, backend=backend,
                        workers=workers, on_cell=on_cell)
    return kind.reduce(settings, results)


def run_cells(kind: TableKind, cells: Sequence[Any], folder: Path, *, backend: str = "local",
              workers: int = 1, address: str | None = None,
              on_cell: Callable[[str], None] | None = None) -> dict[Hashable, Any]:
    """Every cell's result by ``kind.key(cell)``: read from its JSON file in ``folder`` when
    that is there and readable, else computed by ``kind.compute`` and its file written
    (:func:`run_cached`).  ``on_cell(description)`` is called once per cell, cached or
    computed."""
    folder.mkdir(parents=True, exist_ok=True)
    unreadable: dict[Path, int] = {}  # files read as None, by mtime: not read (or warned) again

    def find(cell: Any) -> Any | None:
        path = folder / cell.file_name
        try:
            status = path.stat()
        except OSError:
            return None
        stamp = status.st_mtime_ns
        if not stat.S_ISREG(status.st_mode) or unreadable.get(path) == stamp:
            return None
        result = read_cell_json(path, kind.load)
        if result is None:
            unreadable[path] = stamp
        return result

    def store(cell: Any, result: Any) -> Any:
        write_cell_json(folder, cell.file_name, kind.dump(result))
        return result

    notes = {"cached": " (cached)", "elsewhere": " (computed by another runner)",
             "computed": ""}

    def notify(cell: Any, how: str) -> None:
        if on_cell is not None:
            on_cell(kind.describe(cell) + notes[how])

    return run_cached(cells, compute=kind.compute, key=kind.key, describe=kind.describe,
                      find=find, store=store,
                      claim_path=lambda cell: claim_file(folder / cell.file_name),
                      backend=backend, workers=workers, address=address, on_cell=notify)


def run_cached(cells: Sequence[CellT], *, compute: Callable[[CellT], Any],
               key: Callable[[CellT], Hashable], describe: Callable[[CellT], str],
               find: Callable[[CellT], Any | None], store: Callable[[CellT, Any], Any],
               claim_path: Callable[[CellT], Path], backend: str = "local", workers: int = 1,
               address: str | None = None,
               on_cell: Callable[[CellT, str], None] | None = None) -> dict[Hashable, Any]:
    """The engine under every table and sweep: each cell's stored result by ``key(cell)``.

    ``find(cell)`` gives a finished cell's stored result (None: not there); the others are
    claimed (``claim_path(cell)``, :mod:`schedlab.claims`: two runners into one folder share
    the work, a cell claimed by a live other runner is waited for) and computed by
    ``compute(cell)`` -- in this process for one worker on the ``local`` backend, else on
    the backend's pool (:mod:`~schedlab.analysis.experiments.backends`; ``compute`` must
    then be a module-level function), at most ``workers`` at a time -- and ``store(cell,
    result)`` (this process) writes its file, under the claim, and gives the stored result.
    ``on_cell(cell, how)`` is called once per cell, ``how`` one of ``cached``, ``computed``,
    ``elsewhere``.  On an interrupt or an error the cells not started are cancelled,
    finished files stay, the claims of unfinished cells are removed, and the exception is
    raised again; a rerun computes only what is missing.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", field="run.workers")
    notify = on_cell or (lambda cell, how: None)
    results: dict[Hashable, Any] = {}
    pending: list[CellT] = []
    for cell in cells:
        found = find(cell)
        if found is not None:
            results[key(cell)] = found
            notify(cell, "cached")
        else:
            pending.append(cell)
    if results:
        log.info("%d of %d cells reused", len(results), len(cells))

    def found_elsewhere(cell: CellT, result: Any) -> None:
        results[key(cell)] = result
        notify(cell, "elsewhere")

    def finished(cell: CellT, result: Any) -> None:
        results[key(cell)] = store(cell, result)
        notify(cell, "computed")

    queue: ClaimQueue[CellT, Any] = ClaimQueue(
        pending, claim_path=claim_path, done=find, found=found_elsewhere, describe=describe)
    try:
        if backend == "local" and (workers == 1 or len(pending) <= 1):
            drain_in_process(queue, compute, finished)
        elif pending:
            size = min(workers, len(pending))
            context = WorkerContext.of_this_process(backend)
            inflight: dict[Future[Any], CellT] = {}

            def submit(executor: Any, cell: CellT) -> Future[Any]:
                future: Future[Any] = executor.submit(call_in_context, context, compute, cell)
                inflight[future] = cell
                return future

            pool = make_pool(backend, size, address)
            clean = False
            try:
                drain_on_pool(queue, pool, size, submit=submit, finished=finished)
                clean = True
            finally:
                if not clean:
                    log.warning("stopping: cancelled the cells not started; waiting for "
                                "the running ones to stop")
                pool.shutdown(wait=True, cancel_futures=True)
                if not clean:
                    _store_finished(inflight, results, key, store)
    finally:
        queue.release_all()  # the claims of cells not finished: other runners may take them
    return results


def _store_finished(inflight: dict[Future[Any], CellT], results: dict[Hashable, Any],
                    key: Callable[[CellT], Hashable],
                    store: Callable[[CellT, Any], Any]) -> None:
    """After an interrupt: store the cells that finished in a worker but were not stored yet
    (their claims are still held), so a rerun computes none of them again."""
    for future, cell in inflight.items():
        if key(cell) in results or not future.done() or future.cancelled():
            continue
        if future.exception() is None:
            results[key(cell)] = store(cell, future.result())


__all__ = ["Outcome", "Plan", "compute_table", "plan_experiment", "run_cached", "run_cells",
           "run_experiment", "write_outputs", "write_report"]
