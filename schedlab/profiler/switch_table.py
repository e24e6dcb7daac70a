"""The switch-cost table: Hare's Table 1 ("Average task switching time of different jobs")
from a throughput file's switch cells, and the ``schedlab profile-table`` command.

Rows are the switch kinds in the order cold, pipelined, warm, resident (Hare's rows Default,
PipeSwitch, -, Hare); columns are the zoo jobs measured (``model/size@batch``, in the order
the file first lists them; when the file holds switches on several devices and no
``--device`` is given, each column is ``job on device``).  A value is the mean seconds of
that switch (:class:`~schedlab.profiler.matrix.SwitchMeasurement`, first step included,
docs/switch-costs.md); a cell that was not measured, or whose status is not ``ok``, is
``-``.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.errors import InputError
from schedlab.profiler.matrix import SwitchMeasurement, ThroughputFile, load_throughputs

#: Row order of the table (Hare's Table 1: Default, PipeSwitch, then ours, then Hare).
TABLE_KINDS: tuple[str, ...] = ("cold", "pipelined", "warm", "resident")
#: What a missing cell shows.
MISSING = "-"


@dataclass(frozen=True)
class SwitchTable:
    """``seconds[kind][i]``: mean seconds of a ``kind`` switch to column ``columns[i]``
    (None: not measured ok)."""

    columns: tuple[str, ...]
    seconds: dict[str, tuple[float | None, ...]]


def switch_table(data: ThroughputFile, device: str | None = None,
                 size: str | None = None) -> SwitchTable:
    """The table of ``data``'s switch cells, restricted to ``device`` and to jobs of zoo size
    ``size`` (``model/size@batch``) when given."""
    cells = [c for c in data.cells if isinstance(c, SwitchMeasurement)
             and (device is None or c.device == device)
             and (size is None or f"/{size}@" in c.job)]
    pairs: list[tuple[str, str]] = []
    for cell in cells:
        if (cell.job, cell.device) not in pairs:
            pairs.append((cell.job, cell.device))
    several = len({d for _, d in pairs}) > 1
    columns = tuple(f"{job} on {dev}" if several else job for job, dev in pairs)
    seconds = {kind: tuple(data.switch_seconds(job, dev, kind) for job, dev in pairs)
               for kind in TABLE_KINDS}
    return SwitchTable(columns, seconds)


def _value(seconds: float | None) -> str:
    return MISSING if seconds is None else f"{seconds:.4g}"


def render_markdown(table: SwitchTable) -> str:
    """A Markdown table, seconds with 4 significant digits."""
    header = ["switch (s)", *table.columns]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for kind in TABLE_KINDS:
        lines.append("| " + " | ".join([kind, *map(_value, table.seconds[kind])]) + " |")
    return "\n".join(lines) + "\n"


def render_csv(table: SwitchTable) -> str:
    """CSV with a ``switch`` column, then one column per job; seconds as stored (repr)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["switch", *table.columns])
    for kind in TABLE_KINDS:
        writer.writerow([kind, *(MISSING if s is None else repr(s)
                                 for s in table.seconds[kind])])
    return buffer.getvalue()


def add_table_command(sub: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Register ``profile-table FILE [--format markdown|csv] [--out F] [--device D]
    [--size S]``."""
    table = sub.add_parser(
        "profile-table", parents=[common],
        help="the switch-cost table (Hare's Table 1 shape) of a throughput file",
        description="Rows cold/pipelined/warm/resident, one column per zoo job, mean seconds "
        "of each switch (first step included); '-' where not measured.")
    table.add_argument("file", metavar="FILE", help="throughput file (schedlab/throughputs@1)")
    table.add_argument("--format", choices=("markdown", "csv"), default="markdown")
    table.add_argument("--out", metavar="F", help="write here (atomically) instead of stdout")
    table.add_argument("--device", metavar="D", help="only the switches on this device label")
    table.add_argument("--size", metavar="S", help="only the jobs of this zoo size (tiny, ...)")
    table.set_defaults(handler=_cmd_profile_table)


def _cmd_profile_table(args: argparse.Namespace) -> int:
    from schedlab.atomic import write_bytes_atomic

    data = load_throughputs(args.file)
    table = switch_table(data, args.device, args.size)
    if not table.columns:
        where = (f" on device {args.device!r}" if args.device else "") + (
            f" of size {args.size!r}" if args.size else "")
        raise InputError(f"no switch measurements{where}", file=args.file, field="cells")
    text = render_markdown(table) if args.format == "markdown" else render_csv(table)
    if args.out:
        write_bytes_atomic(Path(args.out), text.encode("utf-8"))
    else:
        sys.stdout.write(text)
    return 0
