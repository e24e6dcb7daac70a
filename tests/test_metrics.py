"""Metrics on a hand-made three-job run (every expected value worked out by hand).

G = 2 GPUs.  Jobs (arrival, finish, weight, isolated time, GPU-seconds):
a = (0, 100, 1, 50, 100), b = (0, 300, 3, 100, 200), c = (100, 200, 1, 100, 100).
JCT = 100, 300, 100.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from schedlab.analysis import metrics
from schedlab.errors import InputError

G = 2


def run() -> pd.DataFrame:
    return pd.DataFrame({
        "job": ["a", "b", "c"],
        "arrival": [0.0, 0.0, 100.0],
        "finish": [100.0, 300.0, 200.0],
        "weight": [1.0, 3.0, 1.0],
        "scale_factor": [1, 1, 1],
        "isolated_time_s": [50.0, 100.0, 100.0],
        "gpu_seconds": [100.0, 200.0, 100.0],
        "preemptions": [0, 1, 0],
        "migrations": [0, 1, 2],
    })


def test_jct_statistics() -> None:
    df = run()
    assert metrics.job_completion_times(df).tolist() == [100.0, 300.0, 100.0]
    assert metrics.average_jct(df) == pytest.approx(500 / 3)
    assert metrics.median_jct(df) == 100.0
    # sorted (100, 100, 300): position 0.95 x 2 = 1.9 -> 100 + 0.9 x 200
    assert metrics.p95_jct(df) == pytest.approx(280.0)
    assert metrics.weighted_jct(df) == pytest.approx((100 + 3 * 300 + 100) / 5)
    assert metrics.makespan(df) == 300.0
    assert metrics.gpu_utilization(df, G) == pytest.approx(400 / (2 * 300))


def test_finish_time_fairness_static() -> None:
    # Shockwave: c = max(1, N / G) = 3 / 2; rho = JCT / (isolated x c)
    rho = metrics.finish_time_fairness(run(), G)
    assert rho.tolist() == pytest.approx([100 / 75, 300 / 150, 100 / 150])
    assert metrics.unfair_fraction(rho) == pytest.approx(2 / 3)
    assert metrics.unfair_fraction(rho, threshold=1.5) == pytest.approx(1 / 3)
    assert metrics.worst_rho(rho) == pytest.approx(2.0)
    # Many GPUs: c = max(1, 3 / 100) = 1, rho = JCT / isolated
    assert metrics.finish_time_fairness(run(), 100).tolist() == pytest.approx([2.0, 3.0, 1.0])


def test_finish_time_fairness_dynamic() -> None:
    # n(t) = 2 on [0, 200) (a, b then b, c), 1 on [200, 300); G = 1:
    # a: mean 2 -> rho 100 / (50 x 2) = 1; b: (200 + 200 + 100) / 300 = 5/3 -> 300 / (100 x 5/3)
    # = 1.8; c: mean 2 -> 100 / (100 x 2) = 0.5
    rho = metrics.finish_time_fairness(run(), 1, contention="dynamic")
    assert rho.tolist() == pytest.approx([1.0, 1.8, 0.5])
    factors = metrics.contention_factors(run(), 1, contention="dynamic")
    assert factors.tolist() == pytest.approx([2.0, 5 / 3, 2.0])


def test_counts_and_solver_time() -> None:
    assert metrics.total_preemptions(run()) == 1
    assert metrics.total_migrations(run()) == 3
    assert metrics.solver_time_per_decision(2.0, 4) == 0.5
    assert metrics.solver_time_per_decision(2.0, 0) == 0.0


def test_summarize() -> None:
    summary = metrics.summarize(run(), G, solver_time_s=2.0, decisions=4)
    assert summary["jobs"] == 3 and summary["finished"] == 3
    assert summary["avg_jct_s"] == pytest.approx(500 / 3)
    assert summary["p95_jct_s"] == pytest.approx(280.0)
    assert summary["makespan_s"] == 300.0
    assert summary["utilization"] == pytest.approx(2 / 3)
    assert summary["unfair_fraction"] == pytest.approx(2 / 3)
    assert summary["worst_rho"] == pytest.approx(2.0)
    assert summary["preemptions"] == 1 and summary["migrations"] == 3
    assert summary["solver_time_per_decision_s"] == 0.5
    # Run-level columns (as sweep result files carry them) are read when not given.
    df = run().assign(run_solver_time_s=3.0, run_decisions=6)
    assert metrics.summarize(df, G)["solver_time_per_decision_s"] == 0.5


def test_unfinished_jobs_are_counted_but_not_in_jct() -> None:
    df = pd.concat([run(), pd.DataFrame({
        "job": ["d"], "arrival": [50.0], "finish": [math.nan], "weight": [1.0],
        "scale_factor": [1], "isolated_time_s": [10.0], "gpu_seconds": [0.0],
        "preemptions": [0], "migrations": [0]})], ignore_index=True)
    summary = metrics.summarize(df, G)
    assert summary["jobs"] == 4 and summary["finished"] == 3
    assert summary["avg_jct_s"] == pytest.approx(500 / 3)
    # static contention counts every job of the trace: c = 4 / 2
    assert summary["worst_rho"] == pytest.approx(300 / (100 * 2))


def test_errors_and_empty_tables() -> None:
    with pytest.raises(InputError, match=r"lacks column\(s\) gpu_seconds"):
        metrics.gpu_utilization(run().drop(columns="gpu_seconds"), G)
    with pytest.raises(InputError, match="isolated_time_s must be > 0"):
        metrics.finish_time_fairness(run().assign(isolated_time_s=0.0), G)
    with pytest.raises(ValueError, match="percentile"):
        metrics.percentile_jct(run(), 101)
    empty = run().iloc[0:0]
    assert math.isnan(metrics.average_jct(empty))
    assert math.isnan(metrics.makespan(empty))


def test_mean_std() -> None:
    assert metrics.mean_std(pd.Series([1.0, 3.0])) == pytest.approx((2.0, math.sqrt(2)))
    assert metrics.mean_std(pd.Series([5.0])) == (5.0, 0.0)
    assert all(math.isnan(v) for v in metrics.mean_std(pd.Series([math.nan])))
