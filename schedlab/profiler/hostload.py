"""Was the host busy while a cell was measured?

A profile taken while other processes share the cores is silently wrong: one campaign under
load put a job at 12.2 steps/s where a re-profile minutes later measured 192.9, with tight
confidence intervals (the steps were uniformly slow).  So every cell records what else ran:

* ``load_average``: the 1-minute load average at the cell's end (``os.getloadavg``);
* ``foreign_cores``: cores' worth of CPU time used by *other* processes while the cell ran,
  from Linux's ``/proc/stat``: the host's busy time over the cell, in cores
  (Δbusy / Δtotal x the host's CPUs), minus the cores the cell itself is expected to keep busy
  (``own_cores``: its threads x processes), floored at 0.  None where ``/proc/stat`` is
  unreadable.

:func:`busy_reason` turns them into the warning line: busy when other processes used at least
:data:`FOREIGN_CORES_LIMIT` of a core on average during the cell.  The measure counts the
profiler's own parent process and the idle device's kernel threads as foreign too, which is
why the limit is half a core, not zero.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Other processes' CPU use during a cell (cores) from which the host counts as busy.
FOREIGN_CORES_LIMIT = 0.5


@dataclass(frozen=True)
class CpuSample:
    """Cumulative busy and total jiffies of all CPUs, and the CPU count."""

    busy: int
    total: int
    cpus: int


def sample() -> CpuSample | None:
    """The host's CPU counters now (None off Linux or when unreadable)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            first = stat.readline().split()
            cpus = sum(1 for line in stat if line.startswith("cpu"))
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    return CpuSample(busy=total - idle, total=total, cpus=max(cpus, 1))


def foreign_cores(before: CpuSample | None, after: CpuSample | None,
                  own_cores: float) -> float | None:
    """Cores' worth of CPU other processes used between the samples (module docstring)."""
    if before is None or after is None or after.total <= before.total:
        return None
    busy_cores = (after.busy - before.busy) / (after.total - before.total) * after.cpus
    return max(0.0, busy_cores - own_cores)


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def busy_reason(foreign: float | None, load: float | None, cpus: int | None = None) -> str | None:
    """Why the host counts as busy during a cell, or None."""
    if foreign is not None and foreign >= FOREIGN_CORES_LIMIT:
        return (f"other processes used {foreign:.2f} core(s) on average while it was "
                f"measured (load average {load:.2f})" if load is not None else
                f"other processes used {foreign:.2f} core(s) on average while it was measured")
    if foreign is None and load is not None and cpus and load > cpus:
        return f"load average {load:.2f} on {cpus} CPU(s) while it was measured"
    return None


@dataclass(frozen=True)
class HostLoad:
    """What else ran while a cell was measured: :func:`foreign_cores`, the load average at
    its end and :func:`busy_reason`."""

    foreign_cores: float | None
    load_average: float | None
    busy: str | None


def since(before: CpuSample | None, own_cores: float) -> HostLoad:
    """The host's load from ``before`` (a :func:`sample` taken when the cell began) to now,
    for a cell that keeps ``own_cores`` busy itself."""
    foreign = foreign_cores(before, sample(), own_cores)
    load = load_average()
    return HostLoad(foreign, load, busy_reason(foreign, load, os.cpu_count()))


__all__ = ["FOREIGN_CORES_LIMIT", "CpuSample", "HostLoad", "busy_reason", "foreign_cores",
           "load_average", "sample", "since"]
