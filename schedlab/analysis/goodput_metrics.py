"""The metrics of goodput runs as Sia's ``utils/print_run_stats.py`` and Pollux's
``results-jobload/plot.py`` compute them (docs/goodput.md, "Metrics").

Over the jobs of some runs pooled (JCT = completion - submission, s):

* ``avg_jct_s``: the mean JCT of the finished jobs (Sia's average is over all jobs of all
  traces); ``avg_jct_workload_std_s``: numpy's std of the runs' own averages;
* ``p99_jct_s``: ``sorted(jcts)[int(0.99 n)]`` (not an interpolated percentile);
* ``makespan_s``: per run, last completion - first submission (Sia) or - 0 (Pollux's
  ``max(time + JCT)``), averaged; NaN when a job did not finish;
* ``gpu_hours_per_job``: sum over rounds of GPUs held x the round length, / jobs, h
  (whole rounds, checkpoint-restore included);
* ``restarts_per_job``: mean restarts (a first start not counted);
* ``contention_mean`` / ``contention_max``: over the runs, the mean of the per-round jobs
  active (running or queued), and the most.

A run is anything with ``jobs`` (a frame with ``arrival``, ``finish`` (NaN when not
finished) and ``restarts``), ``held_gpus`` and ``contention`` per round and ``interval``
(s): a table's cell, or :func:`run_records` of a :class:`~schedlab.simulator.goodput_run.
GoodputRun`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from schedlab.simulator.goodput_run import GoodputRun

#: Seconds per hour.
HOUR_S = 3600.0


class RunRecords(Protocol):
    """What the metrics read of one run (module docstring)."""

    @property
    def jobs(self) -> pd.DataFrame: ...

    @property
    def held_gpus(self) -> Sequence[int]: ...

    @property
    def contention(self) -> Sequence[int]: ...

    @property
    def interval(self) -> float: ...


@dataclass(frozen=True)
class _Records:
    jobs: pd.DataFrame
    held_gpus: Sequence[int]
    contention: Sequence[int]
    interval: float


def run_records(run: GoodputRun) -> RunRecords:
    """The per-job frame and per-round counts of a simulated run."""
    jobs = run.result.jobs
    frame = pd.DataFrame({
        "arrival": [j.arrival for j in jobs],
        "finish": [math.nan if j.finish is None else j.finish for j in jobs],
        "restarts": [j.migrations for j in jobs]})
    return _Records(frame, run.held_gpus, run.contention, run.interval)


def pooled_metrics(results: Sequence[RunRecords], *,
                   makespan_from_first_submission: bool) -> dict[str, float]:
    """The metrics (module docstring) of the workloads ``results`` pooled: average, spread
    over the workloads' averages (numpy's std, as Sia's ``print_run_stats.py``) and p99 of
    the finished jobs' JCTs (s); mean makespan (s; NaN when a job did not finish); GPU-hours
    and restarts per job; mean (over the workloads of the per-round mean) and max
    contention."""
    jcts: list[float] = []
    averages: list[float] = []
    makespans: list[float] = []
    jobs = restarts = 0
    gpu_seconds = 0.0
    contention_means: list[float] = []
    contention_max = 0
    for result in results:
        frame = result.jobs
        done = frame[frame["finish"].notna()]
        jct = (done["finish"] - done["arrival"]).to_numpy(dtype=float)
        jcts.extend(jct.tolist())
        averages.append(float(jct.mean()) if len(jct) else math.nan)
        if len(done) == len(frame) and len(frame):
            start = float(frame["arrival"].min()) if makespan_from_first_submission else 0.0
            makespans.append(float(frame["finish"].max()) - start)
        else:
            makespans.append(math.nan)
        jobs += len(frame)
        restarts += int(frame["restarts"].sum())
        gpu_seconds += float(sum(result.held_gpus)) * result.interval
        if result.contention:
            contention_means.append(float(np.mean(result.contention)))
            contention_max = max(contention_max, max(result.contention))
    ordered = sorted(jcts)
    unfinished = jobs - len(ordered)
    return {
        "jobs": float(jobs), "unfinished": float(unfinished),
        "avg_jct_s": float(np.mean(ordered)) if ordered else math.nan,
        "avg_jct_workload_std_s": float(np.std(averages)) if averages else math.nan,
        "p99_jct_s": ordered[int(0.99 * len(ordered))] if ordered else math.nan,
        "makespan_s": float(np.mean(makespans)) if makespans else math.nan,
        "gpu_hours_per_job": gpu_seconds / HOUR_S / jobs if jobs else math.nan,
        "restarts_per_job": restarts / jobs if jobs else math.nan,
        "contention_mean": float(np.mean(contention_means)) if contention_means else math.nan,
        "contention_max": float(contention_max),
    }




def goodput_summary(runs: Sequence[GoodputRun], *,
                    makespan_from_first_submission: bool = True) -> dict[str, Any]:
    """:func:`pooled_metrics` of simulated runs."""
    return pooled_metrics([run_records(run) for run in runs],
                          makespan_from_first_submission=makespan_from_first_submission)
