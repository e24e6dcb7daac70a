"""What every paper table shares: cached cells, run in a process pool, and their statistics.

A table is a grid of *cells* (one simulation or solve each: a seed, a policy, ...).  Each
finished cell is written atomically as a JSON file whose name carries a digest of everything
its result depends on (:func:`code_digest` among them), so a re-run reuses it and an interrupted
table resumes where it stopped.  :func:`run_cached` does that for any cell type, claiming each
cell before computing it so that two runs into one folder share the cells
(:mod:`schedlab.claims`); the table modules supply how to run, read and name a cell.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import stat
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pandas as pd

from schedlab.atomic import atomic_path, write_bytes_atomic
from schedlab.claims import ClaimQueue, claim_file, drain_in_process, drain_on_pool
from schedlab.orphans import process_pool

log = logging.getLogger(__name__)


class CachedCell(Protocol):
    """A cell knows the name of its file (digest included)."""

    @property
    def file_name(self) -> str: ...


CellT = TypeVar("CellT", bound=CachedCell)
ResultT = TypeVar("ResultT")
KeyT = TypeVar("KeyT", bound=Hashable)


@functools.cache
def code_digest() -> str:
    """sha256 of the source of every ``schedlab`` module a cell runs: all ``*.py`` files of the
    package except ``schedlab/analysis/`` and ``schedlab/cli.py`` (computed once per
    process), so a cached cell is never reused after that code changed."""
    import schedlab

    root = Path(schedlab.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("analysis/") or relative == "cli.py":
            continue
        digest.update(relative.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def file_safe(name: str) -> str:
    """``name`` with every character outside [A-Za-z0-9_.+-] replaced by '-' (a policy or
    scheme name inside a cell's file name)."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", name)


def write_cell_json(folder: str | Path, file_name: str, payload: object) -> None:
    """Write a cell's result ``payload`` as JSON to ``folder/file_name``, atomically."""
    write_bytes_atomic(Path(folder) / file_name, json.dumps(payload, indent=1).encode())


def read_cell_json(path: Path, parse: Callable[[dict[str, Any]], ResultT]) -> ResultT | None:
    """A cell file parsed by ``parse``, or None (with a warning: the cell runs again) when
    it cannot be read or parsed."""
    try:
        return parse(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable cell file %s (%s); running it again", path, exc)
        return None


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation) over seeds; std 0 for one value; NaN when any value
    is NaN or there is none."""
    array = np.asarray(values, dtype=float)
    if not len(array) or np.isnan(array).any():
        return math.nan, math.nan
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def ratio(value: float, reference: float) -> float:
    """value / reference; NaN when either is NaN or the reference is 0."""
    if math.isnan(value) or math.isnan(reference) or reference == 0:
        return math.nan
    return value / reference


def run_cached(cells: Sequence[CellT], folder: Path, *,
               run: Callable[[CellT, str], ResultT],
               read: Callable[[Path], ResultT | None],
               key: Callable[[CellT], KeyT],
               describe: Callable[[CellT], str],
               workers: int = 1,
               on_cell: Callable[[str], None] | None = None) -> dict[KeyT, ResultT]:
    """Every cell's result by ``key(cell)``: read from ``folder`` when its file is there and
    readable (``read`` returns None otherwise), else computed by ``run(cell, folder)`` (which
    writes the file; a module-level function, since ``workers`` > 1 runs it in a process
    pool whose workers die with this process, :func:`schedlab.orphans.process_pool`).

    A cell is claimed just before it is computed (:mod:`schedlab.claims`:
    ``<file>.claim``, removed once the file is written), so two tables run into one folder
    share the cells; a cell claimed by a live other runner is waited for (read once its
    file appears).  ``on_cell(description)`` is called once per cell, cached or computed.
    On an interrupt or an error the cells not started are cancelled, finished files stay,
    the claims of unfinished cells are removed, and the exception is raised again.
    """
    notify = on_cell or (lambda _: None)
    folder.mkdir(parents=True, exist_ok=True)
    unreadable: dict[Path, int] = {}  # files read as None, by mtime: not read (or warned) again

    def done(cell: CellT) -> ResultT | None:
        path = folder / cell.file_name
        try:
            status = path.stat()
        except OSError:
            return None
        stamp = status.st_mtime_ns
        if not stat.S_ISREG(status.st_mode) or unreadable.get(path) == stamp:
            return None
        result = read(path)
        if result is None:
            unreadable[path] = stamp
        return result

    results: dict[KeyT, ResultT] = {}
    pending: list[CellT] = []
    for cell in cells:
        found = done(cell)
        if found is not None:
            results[key(cell)] = found
            notify(f"{describe(cell)} (cached)")
        else:
            pending.append(cell)
    if results:
        log.info("%d of %d cells reused from %s", len(results), len(cells), folder)

    def found_elsewhere(cell: CellT, result: ResultT) -> None:
        results[key(cell)] = result
        notify(f"{describe(cell)} (computed by another runner)")

    def finished(cell: CellT, result: ResultT) -> None:
        results[key(cell)] = result
        notify(describe(cell))

    queue: ClaimQueue[CellT, ResultT] = ClaimQueue(
        pending, claim_path=lambda cell: claim_file(folder / cell.file_name), done=done,
        found=found_elsewhere, describe=describe)
    try:
        if workers == 1 or len(pending) <= 1:
            drain_in_process(queue, lambda cell: run(cell, str(folder)), finished)
        else:
            _run_pool(queue, min(workers, len(pending)), run, str(folder), finished)
    finally:
        queue.release_all()  # the claims of cells not finished: other runners may take them
    return results


def _run_pool(queue: ClaimQueue[CellT, ResultT], workers: int,
              run: Callable[[CellT, str], ResultT], folder: str,
              finished: Callable[[CellT, ResultT], None]) -> None:
    """Compute the queue's cells in a pool of ``workers`` processes, at most ``workers``
    claimed at a time (a second runner into the folder takes the others)."""
    executor = process_pool(workers)
    try:
        drain_on_pool(queue, executor, workers,
                      submit=lambda pool, cell: pool.submit(run, cell, folder),
                      finished=finished)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def write_markdown_and_csv(folder: Path, markdown_name: str, markdown: str, csv_name: str,
                           frame: pd.DataFrame) -> list[Path]:
    """Write a table's Markdown text and CSV frame into ``folder`` (created), atomically;
    returns the two paths."""
    folder.mkdir(parents=True, exist_ok=True)
    markdown_path = folder / markdown_name
    write_bytes_atomic(markdown_path, markdown.encode())
    csv_path = folder / csv_name
    with atomic_path(csv_path, suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False)
    return [markdown_path, csv_path]


__all__ = ["code_digest", "file_safe", "mean_std", "ratio", "run_cached", "write_markdown_and_csv"]
