"""The metrics of a goodput run as Sia's ``utils/print_run_stats.py`` computes them
(docs/goodput.md, "Metrics").

Over the jobs of one run (JCT = completion - submission, s):

* ``avg_jct_s``: the mean JCT of the finished jobs;
* ``p99_jct_s``: ``sorted(jcts)[int(0.99 n)]`` (not an interpolated percentile);
* ``makespan_s``: last completion - first submission;
* ``gpu_hours_per_job``: sum over rounds of GPUs held x the round length, / jobs, h
  (whole rounds, checkpoint-restore included);
* ``restarts_per_job``: mean restarts (a first start not counted);
* ``contention``: mean and max over rounds of the jobs active (running or queued).

Several runs pool their jobs for the JCTs (Sia's average is over all jobs of all traces)
and average the makespans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedlab.simulator.goodput_run import GoodputRun


def goodput_summary(runs: Sequence[GoodputRun]) -> dict[str, Any]:
    """The metrics of ``runs`` pooled (module docstring); times in s, GPU-hours in h."""
    jcts = sorted(jct for run in runs for jct in run.jcts.values())
    jobs = sum(len(run.result.jobs) for run in runs)
    finished = len(jcts)
    makespans = []
    for run in runs:
        done = [j.finish for j in run.result.jobs if j.finish is not None]
        if done:
            makespans.append(max(done) - min(j.arrival for j in run.result.jobs))
    held = sum(sum(run.held_gpus) * run.interval for run in runs)
    contention = [c for run in runs for c in run.contention if c > 0]
    return {
        "jobs": jobs,
        "finished": finished,
        "avg_jct_s": sum(jcts) / finished if finished else float("nan"),
        "p99_jct_s": jcts[int(0.99 * finished)] if finished else float("nan"),
        "makespan_s": sum(makespans) / len(makespans) if makespans else float("nan"),
        "gpu_hours_per_job": held / 3600.0 / jobs if jobs else float("nan"),
        "restarts_per_job": (sum(j.migrations for run in runs for j in run.result.jobs) / jobs
                             if jobs else float("nan")),
        "contention_mean": sum(contention) / len(contention) if contention else 0.0,
        "contention_max": max(contention, default=0),
        "decide_s_per_round": (sum(run.result.decide_time_s for run in runs)
                               / max(sum(run.result.num_rounds or 0 for run in runs), 1)),
    }
