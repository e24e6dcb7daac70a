"""What a simulation produced: per-job records, per-round placements and run-level counters.

The simulator computes raw records only; the metrics (JCT percentiles, finish-time fairness,
utilization, ...) are :mod:`schedlab.analysis.metrics`' job, computed from
:meth:`SimulationResult.to_dataframe`.  :meth:`SimulationResult.summary` gives a few plain
aggregates for logs and benchmarks.

Units: seconds, steps, GPUs; GPU-seconds = GPUs held x seconds held.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from schedlab.placement import mask_ids

if TYPE_CHECKING:
    import pandas as pd


class RunRecord(NamedTuple):
    """One job's run within one round.

    ``gpu_mask`` has bit i set when the job held GPU i of ``accelerator`` (see
    :attr:`gpu_ids`); ``overhead_s`` is the switch overhead paid at the start of the round;
    ``end`` the instant the job released its GPUs (its finish time when it finished in this
    round, else the round's end), s.
    """

    job: str
    accelerator: str
    gpu_mask: int
    partner: str | None
    overhead_s: float
    end: float

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        """GPU ids within the accelerator pool, ascending."""
        return mask_ids(self.gpu_mask)


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """Round ``index`` ran from ``start`` to ``end`` (s) with the runs ``runs``."""

    index: int
    start: float
    end: float
    runs: tuple[RunRecord, ...]

    def busy_gpu_seconds(self) -> dict[str, float]:
        """GPU-seconds busy per type in this round (a co-located pair's GPUs count once):
        sum over used GPUs of (last release on that GPU - round start)."""
        last: dict[tuple[str, int], float] = {}
        for run in self.runs:
            for gpu in mask_ids(run.gpu_mask):
                key = (run.accelerator, gpu)
                last[key] = max(last.get(key, self.start), run.end)
        out: dict[str, float] = defaultdict(float)
        for (acc, _), end in last.items():
            out[acc] += end - self.start
        return dict(out)


@dataclass
class JobRecord:
    """The outcome of one job.  ``finish``/``jct`` are None when the run stopped first.

    ``gpu_seconds`` = sum over rounds of s_j x seconds held (overhead included);
    ``isolated_time_s`` = total_steps / max_k T[j,k], the job's run time alone on its
    fastest type; ``time_on[k]`` = seconds held on type k; ``overhead_s`` = switch overhead
    paid in all; ``steps`` = steps done.
    """

    job: str
    arrival: float
    start: float | None
    finish: float | None
    scale_factor: int
    weight: float
    job_type: str | None
    user: str | None
    total_steps: float
    steps: float
    preemptions: int
    migrations: int
    rounds_run: int
    gpu_seconds: float
    executed_s: float
    overhead_s: float
    isolated_time_s: float
    time_on: dict[str, float] = field(default_factory=dict)

    @property
    def jct(self) -> float | None:
        """finish - arrival, s (None when not finished)."""
        return None if self.finish is None else self.finish - self.arrival


@dataclass
class SimulationResult:
    """Records of one simulated run of ``policy`` on a workload.

    ``jobs`` in arrival order; ``rounds`` in time order (empty when the run was asked not to
    keep per-round records: ``keep_rounds=False``; the counters below still hold);
    ``gpus`` = n_k per type;
    ``solver_time_s``/``solves``/``decisions``/``failed_solves`` are the policy's counters
    at the end;
    ``decide_time_s`` is wall time inside ``policy.decide``; ``wall_s`` the whole run;
    ``end_time`` the simulated time when the run stopped (s); ``stopped`` says why
    (``"all jobs finished"`` or ``"max_rounds"``).
    """

    policy: str
    mode: str
    round_s: float
    gpus: dict[str, int]
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    solver_time_s: float = 0.0
    solves: int = 0
    decisions: int = 0
    #: solves that found no solution, after which the policy fell back (never hidden)
    failed_solves: int = 0
    decide_time_s: float = 0.0
    wall_s: float = 0.0
    end_time: float = 0.0
    stopped: str = "all jobs finished"
    #: GPU-seconds busy per type, accumulated round by round while the run went (None: the
    #: producer did not count them; :meth:`busy_gpu_seconds` then sums ``rounds``)
    busy_gpu_s: dict[str, float] | None = None
    #: rounds simulated and jobs run summed over rounds, counted while the run went (None:
    #: taken from ``rounds``); set when the run kept no per-round records
    num_rounds: int | None = None
    num_job_rounds: int | None = None

    # ------------------------------------------------------------------ counters
    @property
    def complete(self) -> bool:
        """True when every job finished."""
        return all(job.finish is not None for job in self.jobs)

    @property
    def job_rounds(self) -> int:
        """Sum over rounds of the jobs that ran in it."""
        if self.num_job_rounds is not None:
            return self.num_job_rounds
        return sum(len(r.runs) for r in self.rounds)

    @property
    def round_count(self) -> int:
        """Rounds simulated (also when the run kept no per-round records)."""
        return self.num_rounds if self.num_rounds is not None else len(self.rounds)

    def average_jct(self) -> float:
        """Mean of finish - arrival over finished jobs, s (NaN when none finished)."""
        jcts = [j.finish - j.arrival for j in self.jobs if j.finish is not None]
        return sum(jcts) / len(jcts) if jcts else math.nan

    def busy_gpu_seconds(self) -> dict[str, float]:
        """GPU-seconds busy per type over the whole run (the engine's running sums when it
        kept them, else summed over ``rounds``)."""
        if self.busy_gpu_s is not None:
            return {**dict.fromkeys(self.gpus, 0.0), **self.busy_gpu_s}
        out: dict[str, float] = dict.fromkeys(self.gpus, 0.0)
        for r in self.rounds:
            for acc, busy in r.busy_gpu_seconds().items():
                out[acc] += busy
        return out

    def summary(self) -> dict[str, Any]:
        """Plain aggregates: job counts, average JCT and makespan (s), utilization in [0, 1]
        over [first arrival, last release], preemptions, migrations, rounds, job-rounds and the
        policy's counters.  Full metrics: :mod:`schedlab.analysis.metrics` on
        :meth:`to_dataframe`."""
        finished = [j for j in self.jobs if j.finish is not None]
        first = min((j.arrival for j in self.jobs), default=0.0)
        span = max(self.end_time - first, 0.0)
        total_gpus = sum(self.gpus.values())
        busy = sum(self.busy_gpu_seconds().values())
        return {
            "policy": self.policy,
            "mode": self.mode,
            "jobs": len(self.jobs),
            "finished": len(finished),
            "average_jct_s": self.average_jct(),
            "makespan_s": (max(j.finish for j in finished if j.finish is not None) - first)
            if finished else math.nan,
            "utilization": busy / (total_gpus * span) if span > 0 and total_gpus else math.nan,
            "preemptions": sum(j.preemptions for j in self.jobs),
            "migrations": sum(j.migrations for j in self.jobs),
            "rounds": self.round_count,
            "job_rounds": self.job_rounds,
            "solver_time_s": self.solver_time_s,
            "solves": self.solves,
            "decisions": self.decisions,
            "failed_solves": self.failed_solves,
            "decide_time_s": self.decide_time_s,
            "wall_s": self.wall_s,
            "stopped": self.stopped,
        }

    # ------------------------------------------------------------------ tables
    def to_dataframe(self) -> pd.DataFrame:
        """One row per job (arrival order) with columns ``job, arrival, start, finish, jct,
        scale_factor, weight, job_type, user, total_steps, steps, preemptions, migrations,
        rounds_run, gpu_seconds, executed_s, overhead_s, isolated_time_s`` and
        ``time_on_<type>`` per accelerator type (s).  Unfinished jobs have NaN finish/jct."""
        import pandas as pd

        return pd.DataFrame(job_table(self.jobs, self.gpus), columns=job_columns(self.gpus))

    def round_dataframe(self) -> pd.DataFrame:
        """One row per round: ``round, start, end, jobs`` (jobs that ran) and, per type,
        ``gpus_<type>`` (GPUs assigned) and ``busy_gpu_s_<type>`` (GPU-seconds busy)."""
        import pandas as pd

        rows = []
        for r in self.rounds:
            row: dict[str, Any] = {"round": r.index, "start": r.start, "end": r.end,
                                   "jobs": len(r.runs)}
            used: dict[str, int] = dict.fromkeys(self.gpus, 0)
            masks: dict[str, int] = dict.fromkeys(self.gpus, 0)
            for run in r.runs:
                masks[run.accelerator] |= run.gpu_mask
            for acc, mask in masks.items():
                used[acc] = mask.bit_count()
            busy = r.busy_gpu_seconds()
            for acc in self.gpus:
                row[f"gpus_{acc}"] = used[acc]
                row[f"busy_gpu_s_{acc}"] = busy.get(acc, 0.0)
            rows.append(row)
        return pd.DataFrame(rows)


#: Columns of the per-job table before the ``time_on_<type>`` ones.
JOB_COLUMNS: tuple[str, ...] = (
    "job", "arrival", "start", "finish", "jct", "scale_factor", "weight", "job_type",
    "user", "total_steps", "steps", "preemptions", "migrations", "rounds_run",
    "gpu_seconds", "executed_s", "overhead_s", "isolated_time_s",
)


def job_columns(gpus: dict[str, int] | list[str]) -> list[str]:
    """Columns of :meth:`SimulationResult.to_dataframe` for accelerator types ``gpus``."""
    return [*JOB_COLUMNS, *(f"time_on_{acc}" for acc in gpus)]


#: Columns of the per-job table that are a JobRecord attribute of the same name.
_PLAIN_COLUMNS = frozenset(JOB_COLUMNS) - {"start", "finish", "jct"}


def job_table(jobs: list[JobRecord], gpus: dict[str, int] | list[str]) -> dict[str, list[Any]]:
    """The per-job table by column, one list per column (which pandas takes far faster than
    one dict per row): NaN start/finish/jct for a job that did not start or finish, 0 s on a
    type it never ran on."""
    nan = math.nan
    table: dict[str, list[Any]] = {}
    for name in JOB_COLUMNS:
        if name in _PLAIN_COLUMNS:
            table[name] = list(map(attrgetter(name), jobs))
        elif name == "jct":
            table[name] = [nan if j.finish is None else j.finish - j.arrival for j in jobs]
        else:  # start, finish
            table[name] = [nan if v is None else v for v in map(attrgetter(name), jobs)]
    for acc in gpus:
        table[f"time_on_{acc}"] = [j.time_on.get(acc, 0.0) for j in jobs]
    return table


def job_row(j: JobRecord, gpus: dict[str, int] | list[str]) -> dict[str, Any]:
    """One row of the per-job table (:func:`job_table` of one job); ``gpus`` names the
    accelerator types of the ``time_on_<type>`` columns."""
    return {name: column[0] for name, column in job_table([j], gpus).items()}
