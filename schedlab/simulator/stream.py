"""Watching and keeping one long simulation: job records streamed to a CSV file in chunks,
and a progress display on stderr.

:class:`RecordChunks` takes the :class:`~schedlab.simulator.result.JobRecord` of each job as
it finishes (``simulate(..., on_job_done=chunks.add)``) and appends them to a CSV file every
``chunk`` records, so a run stopped by Ctrl-C (or killed) leaves the records of the jobs
finished by then on disk, at most one chunk short after a kill and complete after
:meth:`RecordChunks.flush`.  Its columns are those of
:meth:`~schedlab.simulator.result.SimulationResult.to_dataframe`, after fixed leading
columns (for example the run's policy and seed); an empty cell is a missing value.

:func:`progress_display` is a ``progress`` callback for :func:`~schedlab.simulator.simulate`
showing simulated hours, jobs finished of the total and job-rounds per wall second (a rich
progress bar on stderr; a no-op when disabled).
"""

from __future__ import annotations

import contextlib
import csv
import math
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from schedlab.simulator.engine import Progress
from schedlab.simulator.result import JobRecord, job_columns, job_table

#: Records per appended chunk.
DEFAULT_CHUNK = 5000


class RecordChunks:
    """Append job records to ``path`` (CSV) every ``chunk`` records (module docstring).

    ``leading`` maps leading column names to the value every row gets; ``accelerators`` names
    the ``time_on_<type>`` columns.  The file is created (header only) at once.
    """

    def __init__(self, path: str | Path, accelerators: list[str],
                 leading: Mapping[str, Any] | None = None, chunk: int = DEFAULT_CHUNK) -> None:
        self.path = Path(path)
        self.accelerators = list(accelerators)
        self.leading = dict(leading or {})
        self.chunk = max(int(chunk), 1)
        self.columns = [*self.leading, *job_columns(self.accelerators)]
        self.written = 0
        self._buffer: list[JobRecord] = []
        with self.path.open("w", newline="") as handle:
            csv.writer(handle).writerow(self.columns)

    def add(self, record: JobRecord) -> None:
        """Buffer one record; append the buffer to the file once it holds ``chunk``."""
        self._buffer.append(record)
        if len(self._buffer) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """Append the buffered records to the file (their rows of the per-job table)."""
        if not self._buffer:
            return
        leading = list(self.leading.values())
        columns = job_table(self._buffer, self.accelerators).values()
        rows = [[*leading, *map(_cell, row)] for row in zip(*columns, strict=True)]
        with self.path.open("a", newline="") as handle:
            _write_rows(handle, rows)
        self.written += len(self._buffer)
        self._buffer.clear()


def _write_rows(handle: IO[str], rows: list[list[Any]]) -> None:
    csv.writer(handle).writerows(rows)


def _cell(value: Any) -> Any:
    """A CSV cell: missing values (None, NaN) are empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


@contextlib.contextmanager
def progress_display(total: int, enabled: bool, description: str = "simulating"
                     ) -> Iterator[Callable[[Progress], None]]:
    """A ``progress`` callback drawing a bar of jobs finished out of ``total`` on stderr with
    the simulated clock (hours) and job-rounds per wall second; disabled, a callback that does
    nothing.  The bar disappears when the block ends."""
    if not enabled:
        yield _ignore
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
              TextColumn("jobs  {task.fields[hours]:,.1f} simulated h  "
                         "{task.fields[rate]:,.0f} job-rounds/s"),
              TimeElapsedColumn(), console=Console(stderr=True, markup=False), transient=True)
    task = bar.add_task(description, total=total, hours=0.0, rate=0.0)
    start = time.perf_counter()

    def report(p: Progress) -> None:
        wall = time.perf_counter() - start
        bar.update(task, completed=p.finished, hours=p.now / 3600.0,
                   rate=p.job_rounds / wall if wall > 0 else 0.0)

    with bar:
        yield report


def _ignore(_: Progress) -> None:
    """The disabled progress callback."""
