"""Progress of long commands that works on a terminal and in a log file.

:func:`unit_progress` returns an object with the subset of ``rich.progress.Progress`` the
commands use (``add_task``, ``update(task, advance=..., description=...)``, ``advance``,
context manager):

* stderr a terminal: a transient rich progress bar on stderr;
* stderr redirected (a log file, ``2>&1``, a pipe): one plain line per finished unit on
  stderr, flushed at once, e.g. ``titan table: 3/18 done (titan, density 1, seed 0; 12.4 s
  elapsed, about 62 s left)`` -- so ``schedlab tables titan ... > log.txt 2>&1`` shows each
  cell as it finishes (the estimate: elapsed / done x left, from this run's own units);
* ``enabled=False`` (``--quiet``): nothing.

Results stay on stdout (a table's Markdown, a profile's cells), progress on stderr, so
``> table.md`` keeps only the table.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class PlainProgress:
    """One flushed line per finished unit (module docstring)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None,
                 completed: float = 0, **_: Any) -> int:
        task = len(self._tasks)
        self._tasks[task] = {"title": description, "total": total, "done": completed,
                             "start_done": completed, "started": time.monotonic()}
        return task

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def update(self, task: int, *, advance: float = 0, description: str | None = None,
               **_: Any) -> None:
        state = self._tasks[task]
        if not advance:
            return
        state["done"] += advance
        elapsed = time.monotonic() - state["started"]
        done, total = state["done"], state["total"]
        counted = f"{done:g}/{total:g}" if total else f"{done:g}"
        eta = ""
        ran = done - state["start_done"]
        if total and ran > 0 and done < total:
            eta = f", about {elapsed / ran * (total - done):.0f} s left"
        what = f"{description}; " if description else ""
        self._stream.write(f"{state['title']}: {counted} done ({what}{elapsed:.1f} s "
                           f"elapsed{eta})\n")
        self._stream.flush()


def unit_progress(enabled: bool = True) -> Any:
    """The progress reporter for this process's streams (module docstring)."""
    if enabled and not sys.stderr.isatty():
        return PlainProgress(sys.stderr)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True, markup=False)
    return Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console,
        disable=not (enabled and console.is_terminal), transient=True)


__all__ = ["PlainProgress", "unit_progress"]
