"""Metrics of one simulated run, computed from its per-job table.

Every function reads the per-job DataFrame of a run (``SimulationResult.to_dataframe()``, or a
result file written by :mod:`schedlab.analysis.sweep`) with, per job: ``job``, ``arrival`` and
``finish`` (s), ``jct`` (s, optional: finish - arrival), ``weight``, ``scale_factor`` (GPUs),
``preemptions``, ``migrations``, ``gpu_seconds`` (GPU-seconds the job held GPUs) and
``isolated_time_s`` (s the job needs alone on ``scale_factor`` GPUs of its fastest type:
total_steps / max_k T[j,k], as the simulator records it).  Jobs that did not
finish (``finish`` missing) are left out of the JCT metrics and counted by :func:`summarize`.

Notation: jobs j = 1..J with arrival a_j, finish f_j, JCT_j = f_j - a_j, weight w_j; G GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd

from schedlab.defaults import UNFAIR_THRESHOLD
from schedlab.errors import InputError
from schedlab.fairness import equal_share_contention, rho_equal_share

#: Shockwave's threshold: a job with rho > 1.05 counts as treated unfairly.
DEFAULT_UNFAIR_THRESHOLD = UNFAIR_THRESHOLD
#: Column names of run-level values that sweep result files repeat on every row.
RUN_SOLVER_TIME = "run_solver_time_s"
RUN_DECISIONS = "run_decisions"
#: per-run column: solves that found no solution (the policy fell back then)
RUN_FAILED_SOLVES = "run_failed_solves"
RUN_BUSY_GPU_SECONDS = "run_busy_gpu_s"

Contention = Literal["static", "dynamic"]


def _require(df: pd.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"the per-job table lacks column(s) {', '.join(missing)} "
                         f"(has {', '.join(map(str, df.columns))})")


def _finished(df: pd.DataFrame) -> pd.DataFrame:
    _require(df, "arrival", "finish")
    return df[df["finish"].notna()]


def job_completion_times(df: pd.DataFrame) -> pd.Series:
    """JCT_j = f_j - a_j in seconds, for every finished job (indexed like ``df``)."""
    done = _finished(df)
    return (done["finish"].astype(float) - done["arrival"].astype(float)).rename("jct")


def average_jct(df: pd.DataFrame) -> float:
    """Average JCT = (1/J) sum_j JCT_j, s (NaN when no job finished)."""
    jct = job_completion_times(df)
    return float(jct.mean()) if len(jct) else math.nan


def median_jct(df: pd.DataFrame) -> float:
    """Median JCT, s: the 50th percentile of JCT_j."""
    return percentile_jct(df, 50.0)


def percentile_jct(df: pd.DataFrame, q: float) -> float:
    """The q-th percentile of JCT_j, s (linear interpolation between order statistics)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    jct = job_completion_times(df)
    return float(np.percentile(jct.to_numpy(), q)) if len(jct) else math.nan


def p95_jct(df: pd.DataFrame) -> float:
    """95th-percentile JCT, s."""
    return percentile_jct(df, 95.0)


def weighted_jct(df: pd.DataFrame) -> float:
    """Weighted average JCT = sum_j w_j JCT_j / sum_j w_j, s (w_j = 1 without a weight column)."""
    jct = job_completion_times(df)
    if not len(jct):
        return math.nan
    weights = (df.loc[jct.index, "weight"].astype(float) if "weight" in df.columns
               else pd.Series(1.0, index=jct.index))
    return float((weights * jct).sum() / weights.sum())


def total_weighted_jct(df: pd.DataFrame, finish: str = "finish") -> float:
    """Total weighted JCT = sum_j w_j (C_j - r_j), s (Hare's objective), with C_j the
    ``finish`` column and r_j ``arrival``; NaN when a job did not finish (a total over part
    of the jobs would not compare)."""
    _require(df, "arrival", finish, "weight")
    jct = df[finish].to_numpy() - df["arrival"].to_numpy()
    if np.isnan(jct).any():
        return math.nan
    return float(df["weight"].to_numpy() @ jct)


def makespan(df: pd.DataFrame) -> float:
    """Makespan = max_j f_j - min_j a_j, s: from the first arrival to the last finish."""
    done = _finished(df)
    if not len(done):
        return math.nan
    return float(done["finish"].max() - df["arrival"].min())


def gpu_utilization(df: pd.DataFrame, gpus: int, busy_gpu_seconds: float | None = None
                    ) -> float:
    """Utilization = busy GPU-seconds / (G x makespan), in [0, 1].

    Busy GPU-seconds: ``busy_gpu_seconds`` when given, else the run-level column
    ``run_busy_gpu_s`` when the table has it (the simulator's count, in which a GPU shared by a
    co-located pair counts once), else sum_j gpu_seconds_j (s_j GPUs x the seconds job j held
    them).  Idle GPUs and time before the first arrival do not count as busy.
    """
    if gpus <= 0:
        raise InputError(f"the cluster needs at least one GPU, got {gpus}")
    busy = busy_gpu_seconds
    if busy is None:
        busy = _run_value(df, RUN_BUSY_GPU_SECONDS)
    if busy is None:
        _require(df, "gpu_seconds")
        busy = float(df["gpu_seconds"].astype(float).sum())
    span = makespan(df)
    if not span or math.isnan(span):
        return math.nan
    return float(busy / (gpus * span))


def contention_factors(df: pd.DataFrame, gpus: int,
                       contention: Contention = "static") -> pd.Series:
    """c_j, the share of the cluster a job is entitled to, as in Shockwave (NSDI'23):
    :func:`schedlab.fairness.equal_share_contention` max(1, N / G) with

    - ``static`` (Shockwave's reported metric): N = number of jobs in the trace (rows of
      ``df``), the same for every job: in a cluster shared equally by N jobs, each gets G / N
      GPUs.
    - ``dynamic`` (Shockwave's "Themis" variant): N = n_j, the time-average number of jobs in
      the system (arrived, not finished) over [a_j, f_j]:
      n_j = (1 / JCT_j) integral_{a_j}^{f_j} n(t) dt, n(t) = #{i : a_i <= t < f_i}.

    Neither has the gang factor s_j of the ``themis`` policy's max(1, N s_j / G), whose N is
    the number of jobs active at the decision (:mod:`schedlab.fairness` lists the differences).
    """
    if gpus <= 0:
        raise InputError(f"the cluster needs at least one GPU, got {gpus}")
    done = _finished(df)
    if contention == "static":
        return pd.Series(equal_share_contention(len(df), gpus), index=done.index,
                         name="contention")
    if contention != "dynamic":
        raise ValueError(f"contention must be 'static' or 'dynamic', got {contention!r}")
    arrival = df["arrival"].astype(float).to_numpy()
    finish = df["finish"].astype(float).to_numpy()
    finish = np.where(np.isnan(finish), np.inf, finish)
    # n(t) is a step function; its integral A(t) is piecewise linear between event times,
    # so interpolating A at a_j and f_j is exact.
    events = np.unique(np.concatenate([arrival, finish[np.isfinite(finish)]]))
    active = (np.searchsorted(np.sort(arrival), events, side="right")
              - np.searchsorted(np.sort(finish), events, side="right"))
    steps = np.diff(events) * active[:-1]
    integral = np.concatenate([[0.0], np.cumsum(steps)])
    a = done["arrival"].astype(float).to_numpy()
    f = done["finish"].astype(float).to_numpy()
    area = np.interp(f, events, integral) - np.interp(a, events, integral)
    span = f - a
    mean_active = np.where(span > 0, area / np.where(span > 0, span, 1.0), 1.0)
    return pd.Series(equal_share_contention(mean_active, gpus), index=done.index,
                     name="contention")


def finish_time_fairness(df: pd.DataFrame, gpus: int,
                         contention: Contention = "static") -> pd.Series:
    """rho_j = JCT_j / (isolated_time_j x c_j), per finished job (Shockwave's definition;
    :func:`schedlab.fairness.rho_equal_share`, reference (b) of :mod:`schedlab.fairness`).

    isolated_time_j (column ``isolated_time_s``) is the job's run time alone on its own s_j
    GPUs (:func:`schedlab.fairness.exclusive_time`), and c_j (:func:`contention_factors`)
    stretches it to the finish time the job would have in an exclusive 1/N share of the
    cluster: rho_j > 1 means the job finished later than under an equal share.

    What the policies optimize differs: ``themis`` ranks by an estimate of this rho with
    c_j = max(1, N s_j / G) over the jobs active at each decision, and
    ``gavel.finish_time_fairness`` minimizes a rho against Gavel's isolated share (1/m of every
    pool, reference (a)); so a low worst rho here is a measurement, not their objective value.
    """
    _require(df, "isolated_time_s")
    jct = job_completion_times(df)
    isolated = df.loc[jct.index, "isolated_time_s"].astype(float)
    if (isolated <= 0).any():
        bad = df.loc[isolated[isolated <= 0].index[0]]
        raise InputError(f"isolated_time_s must be > 0 (job {bad.get('job', '?')!r} has "
                         f"{bad['isolated_time_s']})")
    factor = contention_factors(df, gpus, contention)
    return rho_equal_share(jct, isolated, factor).rename("rho")


def unfair_fraction(rho: pd.Series, threshold: float = DEFAULT_UNFAIR_THRESHOLD) -> float:
    """Unfair fraction = #{j : rho_j > threshold} / J, in [0, 1] (Shockwave: threshold 1.05)."""
    return float((rho > threshold).mean()) if len(rho) else math.nan


def worst_rho(rho: pd.Series) -> float:
    """Worst finish-time fairness = max_j rho_j."""
    return float(rho.max()) if len(rho) else math.nan


def total_preemptions(df: pd.DataFrame) -> int:
    """sum_j preemptions_j: rounds after which a running, unfinished job was not run again."""
    _require(df, "preemptions")
    return int(df["preemptions"].sum())


def total_migrations(df: pd.DataFrame) -> int:
    """sum_j migrations_j: times a job resumed on other GPUs than it last ran on."""
    _require(df, "migrations")
    return int(df["migrations"].sum())


def solver_time_per_decision(solver_time_s: float, decisions: int) -> float:
    """Solver seconds per scheduling decision = solver_time_s / decisions (0 without decisions)."""
    return solver_time_s / decisions if decisions > 0 else 0.0


def _run_value(df: pd.DataFrame, column: str) -> float | None:
    if column not in df.columns or not len(df):
        return None
    value = df[column].iloc[0]
    return None if pd.isna(value) else float(value)


def summarize(
    df: pd.DataFrame,
    gpus: int,
    *,
    solver_time_s: float | None = None,
    decisions: int | None = None,
    unfair_threshold: float = DEFAULT_UNFAIR_THRESHOLD,
    contention: Contention = "static",
) -> dict[str, float]:
    """Every metric of one run, in seconds (JCTs, makespan) and fractions.

    Keys: ``jobs``, ``finished``, ``avg_jct_s``, ``median_jct_s``, ``p95_jct_s``,
    ``weighted_jct_s``, ``makespan_s``, ``utilization``, ``unfair_fraction``, ``worst_rho``,
    ``preemptions``, ``migrations``, ``solver_time_s``, ``decisions``,
    ``solver_time_per_decision_s``.  Solver time and decisions default to the run-level
    columns ``run_solver_time_s`` and ``run_decisions`` when the table carries them (0
    otherwise).  Metrics whose column is absent are NaN.
    """
    out: dict[str, float] = {
        "jobs": float(len(df)),
        "finished": float(df["finish"].notna().sum()) if "finish" in df.columns else math.nan,
        "avg_jct_s": average_jct(df),
        "median_jct_s": median_jct(df),
        "p95_jct_s": p95_jct(df),
        "weighted_jct_s": weighted_jct(df),
        "makespan_s": makespan(df),
    }
    has_busy = "gpu_seconds" in df.columns or _run_value(df, RUN_BUSY_GPU_SECONDS) is not None
    out["utilization"] = gpu_utilization(df, gpus) if has_busy else math.nan
    if "isolated_time_s" in df.columns:
        rho = finish_time_fairness(df, gpus, contention)
        out["unfair_fraction"] = unfair_fraction(rho, unfair_threshold)
        out["worst_rho"] = worst_rho(rho)
    else:
        out["unfair_fraction"] = out["worst_rho"] = math.nan
    out["preemptions"] = (float(total_preemptions(df)) if "preemptions" in df.columns
                          else math.nan)
    out["migrations"] = float(total_migrations(df)) if "migrations" in df.columns else math.nan
    solver = solver_time_s if solver_time_s is not None else _run_value(df, RUN_SOLVER_TIME)
    count = decisions if decisions is not None else _run_value(df, RUN_DECISIONS)
    out["solver_time_s"] = float(solver or 0.0)
    out["decisions"] = float(count or 0)
    out["solver_time_per_decision_s"] = solver_time_per_decision(out["solver_time_s"],
                                                                 int(out["decisions"]))
    return out


#: Metrics shown by ``schedlab compare`` (key, label, scale, format): seconds become hours.
TABLE_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("avg_jct_s", "avg JCT (h)", 1 / 3600, ".2f"),
    ("p95_jct_s", "p95 JCT (h)", 1 / 3600, ".2f"),
    ("makespan_s", "makespan (h)", 1 / 3600, ".2f"),
    ("utilization", "utilization", 1.0, ".3f"),
    ("unfair_fraction", "unfair fraction", 1.0, ".3f"),
    ("worst_rho", "worst rho", 1.0, ".2f"),
    ("solver_time_per_decision_s", "solver s/decision", 1.0, ".4f"),
)


def mean_std(values: Mapping[str, Any] | pd.Series) -> tuple[float, float]:
    """(mean, sample standard deviation) of the finite values (std 0 for a single value)."""
    array = np.asarray(list(values.values()) if isinstance(values, Mapping) else values,
                       dtype=float)
    array = array[np.isfinite(array)]
    if not len(array):
        return math.nan, math.nan
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0
