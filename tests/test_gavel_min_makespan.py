"""``gavel.min_makespan`` on jobs with very long remaining work, where 1/makespan is far below
the solver's tolerances: the LP's optimum against Gavel's own method, a bisection on the
makespan M with one feasibility LP per step (scipy), written in the test."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

import schedlab
from schedlab.instance import Instance, instance_from_dict

TYPES = ("v100", "p100", "k80")


def _instance(rng: np.random.Generator, jobs: int) -> Instance:
    gpus = {k: int(rng.integers(1, 5)) for k in TYPES}
    rows: list[dict[str, Any]] = []
    for j in range(jobs):
        base = float(rng.uniform(0.5, 5.0))
        rows.append({"id": f"j{j}", "scale_factor": int(rng.choice([1, 2])),
                     "throughput": {k: base * float(rng.uniform(1, 4)) for k in TYPES},
                     "total_steps": float(rng.uniform(1e7, 1e9))})
    return instance_from_dict({"name": "long", "jobs": rows, "params": {"num_rounds": 0},
                               "cluster": {"accelerators": {k: {"count": n}
                                                            for k, n in gpus.items()}}})


def _feasible(instance: Instance, makespan: float) -> bool:
    """Is there X with sum_k T X >= R_j / M, sum_k X_jk <= 1, sum_j s_j X_jk <= n_k?"""
    t = np.array([[job.throughput[k] for k in TYPES] for job in instance.jobs])
    s = np.array([job.scale_factor for job in instance.jobs], float)
    n = np.array([instance.cluster.accelerators[k].count for k in TYPES], float)
    remaining = np.array([job.total_steps for job in instance.jobs], float)
    t = np.where(s[:, None] <= n[None, :], t, 0.0)
    jobs, kinds = t.shape
    rows, rhs = [], []
    for j in range(jobs):  # -(T_j . X_j) * M / R_j <= -1 (scaled to O(1))
        row = np.zeros(jobs * kinds)
        row[j * kinds:(j + 1) * kinds] = -t[j] * makespan / remaining[j]
        rows.append(row)
        rhs.append(-1.0)
        share = np.zeros(jobs * kinds)
        share[j * kinds:(j + 1) * kinds] = 1.0
        rows.append(share)
        rhs.append(1.0)
    for k in range(kinds):
        cap = np.zeros(jobs * kinds)
        cap[k::kinds] = s
        rows.append(cap)
        rhs.append(n[k])
    res = linprog(np.zeros(jobs * kinds), A_ub=np.array(rows), b_ub=np.array(rhs),
                  bounds=(0, 1), method="highs")
    return bool(res.status == 0)


def _bisected_makespan(instance: Instance) -> float:
    lo, hi = 1.0, 1.0
    while not _feasible(instance, hi):
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if _feasible(instance, mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("seed", range(6))
def test_min_makespan_matches_a_bisection_on_long_jobs(seed: int) -> None:
    instance = _instance(np.random.default_rng(seed), jobs=int(4 + seed))
    solution = schedlab.solve(instance, "gavel.min_makespan")
    assert solution.status == "optimal"
    expected = _bisected_makespan(instance)
    assert solution.objective == pytest.approx(expected, rel=1e-6)
    assert solution.bound == pytest.approx(expected, rel=1e-6)
    assert solution.metrics["inverse_makespan_per_s"] == pytest.approx(1.0 / expected, rel=1e-6)
