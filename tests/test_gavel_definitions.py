"""Every ``gavel.*`` LP policy computes Gavel's definition: hand-derived cases, and independent
cvxpy + Clarabel models written here from the definitions (docs/formulations/gavel.md), never
from our Pyomo models.

Definitions (Gavel's policy code):

* max_sum_throughput: maximize sum_j sum_k T[j,k] X[j,k] / c_k (c_k = 1 without prices);
  ``min_cost`` divides by the price per GPU-hour c_k.
* finish_time_fairness: minimize max_j (t_j + R_j / thr_j(X)) / (t_iso_j + R_j / T_iso[j]),
  T_iso[j] = sum_k T[j,k] X_iso[j,k], X_iso[j,k] = n_k / (m s_j) with each row scaled down to
  sum <= 1 (m = number of jobs).
* max_min_fairness: maximize min_j s_j thr_j(X) / (w_j T_eq[j]), T_eq[j] = sum_k T[j,k] n_k / N.
* min_makespan: minimize max_j R_j / thr_j(X).
* ``_agnostic``: X[j,k] = x_j n_k / N_j over the types j may use (a type-blind placement).
"""

from __future__ import annotations

from typing import Any

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab.check import check
from schedlab.instance import Instance, instance_from_dict

TYPES = ["v100", "p100", "k80"]
PRICES = {"v100": 2.48, "p100": 1.46, "k80": 0.45}


def make(jobs: list[dict[str, Any]], gpus: dict[str, int], prices: dict[str, float] | None = None,
         **params: Any) -> Instance:
    pools: dict[str, dict[str, Any]] = {k: {"count": n} for k, n in gpus.items()}
    for k, price in (prices or {}).items():
        if k in pools:
            pools[k]["cost_per_hour"] = price
    return instance_from_dict({"name": "t", "cluster": {"accelerators": pools}, "jobs": jobs,
                               "params": {"num_rounds": 0, **params}})


# ------------------------------------------------------------------- hand cases


def two_jobs_two_types(prices: dict[str, float] | None = None) -> Instance:
    """a: (v100 10, k80 8); b: (v100 2, k80 1); one GPU of each type, scale factor 1."""
    return make(
        [{"id": "a", "total_steps": 100, "throughput": {"v100": 10, "k80": 8}},
         {"id": "b", "total_steps": 100, "throughput": {"v100": 2, "k80": 1}}],
        {"v100": 1, "k80": 1}, prices,
    )


def test_max_sum_throughput_by_hand() -> None:
    """Rows and columns sum to <= 1 and every coefficient is positive, so an optimum is a
    perfect matching (the 2x2 assignment polytope has integral vertices):
    a->v100, b->k80: 10 + 1 = 11;  a->k80, b->v100: 8 + 2 = 10.  Raw throughput: 11.
    (Dividing each job by its best type, the old objective, would pick the other matching:
    1 + 0.5 = 1.5 < 0.8 + 1 = 1.8.)"""
    sol = schedlab.solve(two_jobs_two_types(), "gavel.max_sum_throughput")
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(11.0, abs=1e-6)
    assert sol.allocation["a"].get("v100", 0.0) == pytest.approx(1.0, abs=1e-6)
    assert sol.allocation["b"].get("k80", 0.0) == pytest.approx(1.0, abs=1e-6)
    normalized = schedlab.solve(two_jobs_two_types(), "gavel.max_sum_throughput_normalized")
    assert normalized.objective == pytest.approx(1.8, abs=1e-6)
    assert normalized.allocation["a"].get("k80", 0.0) == pytest.approx(1.0, abs=1e-6)


def test_min_cost_by_hand() -> None:
    """Prices v100 $4/h, k80 $1/h.  Per dollar: a 10/4 = 2.5 and 8/1 = 8; b 2/4 = 0.5 and 1.
    a->v100, b->k80: 2.5 + 1 = 3.5;  a->k80, b->v100: 8 + 0.5 = 8.5.  Optimum 8.5.
    The normalized option divides by T_best[j] s_j c_k: a 10/40 = 0.25, 8/10 = 0.8;
    b 2/8 = 0.25, 1/2 = 0.5: matchings 0.75 and 1.05."""
    inst = two_jobs_two_types({"v100": 4.0, "k80": 1.0})
    sol = schedlab.solve(inst, "gavel.min_cost")
    assert sol.objective == pytest.approx(8.5, abs=1e-6)
    assert sol.allocation["a"].get("k80", 0.0) == pytest.approx(1.0, abs=1e-6)
    assert sol.allocation["b"].get("v100", 0.0) == pytest.approx(1.0, abs=1e-6)
    normalized = schedlab.solve(inst, "gavel.min_cost_normalized")
    assert normalized.objective == pytest.approx(1.05, abs=1e-6)


def test_finish_time_fairness_isolated_share_by_hand() -> None:
    """v100: 2 GPUs, k80: 1 GPU (N = 3); m = 2 jobs.

    a: s = 2, 6 steps/s on two v100s (its gang does not fit the one k80), R = 300.
       X_iso = (2/(2*2), 1/(2*2)) = (0.5, 0.25), sum 0.75 <= 1: T_iso = 0.5 * 6 = 3, D_a = 100 s.
       (The old share T_eq min(1, N/S) = (2*6/3) * 1 = 4 would give D_a = 75 s.)
    b: s = 1, (v100 3, k80 1.5), R = 250.  X_iso = (1, 0.5), sum 1.5 -> (2/3, 1/3):
       T_iso = 2 + 0.5 = 2.5, D_b = 100 s.
    With t = t_iso = 0:  rho_a = 300 / (6 x_a) / 100 = 0.5 / x_a,  rho_b = 2.5 / thr_b.
    b uses its whole time: thr_b = 3 v + 1.5 (1 - v) = 1.5 (1 + v), the k80 is b's alone, and
    a takes the rest of the v100s: x_a = (2 - v) / 2.  Equal rhos:
    0.75 (1 + v) = 2.5 (1 - v/2)  ->  v = 0.875, x_a = 0.5625, rho = 0.5 / 0.5625 = 8/9.
    """
    inst = make(
        [{"id": "a", "scale_factor": 2, "total_steps": 300, "throughput": {"v100": 6}},
         {"id": "b", "total_steps": 250, "throughput": {"v100": 3, "k80": 1.5}}],
        {"v100": 2, "k80": 1}, fairness_tolerance=1e-9,
    )
    sol = schedlab.solve(inst, "gavel.finish_time_fairness")
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(8 / 9, abs=1e-6)
    assert sol.metrics["isolated_throughput"] == pytest.approx({"a": 3.0, "b": 2.5}, abs=1e-12)
    assert sol.allocation["a"]["v100"] == pytest.approx(0.5625, abs=1e-6)
    assert sol.allocation["b"]["v100"] == pytest.approx(0.875, abs=1e-6)
    assert sol.bound is not None and sol.bound <= 8 / 9 + 1e-9
    assert check(inst, sol) == []


# ------------------------------------------------- independent cvxpy + Clarabel models


def arrays(inst: Instance) -> dict[str, np.ndarray]:
    types = inst.types
    n = np.array([inst.cluster.accelerators[k].count for k in types], float)
    s = np.array([j.scale_factor for j in inst.jobs], float)
    t = np.array([[j.throughput.get(k, 0.0) for k in types] for j in inst.jobs])
    allowed = (t > 0) & (s[:, None] <= n[None, :])
    return {
        "n": n, "s": s, "t": np.where(allowed, t, 0.0), "allowed": allowed.astype(float),
        "w": np.array([j.weight for j in inst.jobs], float),
        "r": np.array([j.remaining_steps for j in inst.jobs], float),
        "t_in": np.array([j.time_in_system_s for j in inst.jobs], float),
        "t_iso": np.array([j.isolated_time_s for j in inst.jobs], float),
    }


def cvxpy_policy(inst: Instance, policy: str, aware: bool, prices: bool = False) -> float:
    """The optimum of ``policy`` written from its definition (module docstring)."""
    a = arrays(inst)
    n, s, t, allowed = a["n"], a["s"], a["t"], a["allowed"]
    x = cp.Variable(t.shape, nonneg=True)
    cons = [cp.sum(x, axis=1) <= 1, s @ x <= n, x <= allowed]
    if not aware:
        total = cp.Variable(t.shape[0], nonneg=True)
        pool = allowed @ n
        cons.append(x == cp.multiply(cp.reshape(total, (t.shape[0], 1), order="C"),
                                     allowed * n[None, :] / pool[:, None]))
    thr = cp.sum(cp.multiply(t, x), axis=1)
    if policy == "max_sum_throughput":
        c = np.array([inst.cluster.accelerators[k].cost_per_hour or 1.0 for k in inst.types])
        coef = t / c[None, :] if prices else t
        prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(coef, x))), cons)
    elif policy == "max_min_fairness":
        teq = t @ n / n.sum()
        prob = cp.Problem(cp.Maximize(cp.min(cp.multiply(s / (a["w"] * teq), thr))), cons)
    elif policy == "min_makespan":
        prob = cp.Problem(cp.Minimize(cp.max(cp.multiply(a["r"], cp.inv_pos(thr)))), cons)
    elif policy == "finish_time_fairness":
        m = len(s)
        x_iso = n[None, :] / (m * s[:, None])
        x_iso = x_iso / np.maximum(x_iso.sum(axis=1), 1.0)[:, None]
        t_iso_thr = (t * x_iso).sum(axis=1)
        denom = a["t_iso"] + a["r"] / t_iso_thr
        rho = cp.multiply(1 / denom, a["t_in"] + cp.multiply(a["r"], cp.inv_pos(thr)))
        prob = cp.Problem(cp.Minimize(cp.max(rho)), cons)
    else:
        raise AssertionError(policy)
    # Clarabel at 1e-9 sometimes stops "optimal_inaccurate" on degenerate draws: loosen to
    # 1e-8, then 1e-7 (still ten times tighter than the 1e-6 comparison) before giving up.
    for tol in (1e-9, 1e-8, 1e-7):
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
        if prob.status == cp.OPTIMAL:
            break
    assert prob.status == cp.OPTIMAL, prob.status
    return float(prob.value)


@st.composite
def instances(draw: st.DrawFn, with_prices: bool = False, history: bool = False) -> Instance:
    types = TYPES[: draw(st.integers(2, 3))]
    gpus = {k: draw(st.integers(1, 4)) for k in types}
    jobs = []
    for j in range(draw(st.integers(1, 5))):
        job: dict[str, Any] = {
            "id": f"j{j}",
            "scale_factor": min(draw(st.sampled_from([1, 1, 2])), max(gpus.values())),
            "weight": float(draw(st.sampled_from([1, 1, 2]))),
            "total_steps": float(draw(st.integers(10, 1000))),
            "throughput": {k: float(draw(st.integers(1, 20))) for k in types},
        }
        if history:
            job["time_in_system_s"] = float(draw(st.integers(0, 300)))
            job["isolated_time_s"] = float(draw(st.integers(0, 300)))
        jobs.append(job)
    return make(jobs, gpus, PRICES if with_prices else None, fairness_tolerance=1e-9)


DEFINITIONS = settings(max_examples=12, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow])

CASES = [
    ("gavel.max_sum_throughput", "max_sum_throughput", True, False),
    ("gavel.max_sum_throughput_agnostic", "max_sum_throughput", False, False),
    ("gavel.min_cost", "max_sum_throughput", True, True),
    ("gavel.max_min_fairness", "max_min_fairness", True, False),
    ("gavel.max_min_fairness_agnostic", "max_min_fairness", False, False),
    ("gavel.min_makespan", "min_makespan", True, False),
    ("gavel.min_makespan_agnostic", "min_makespan", False, False),
    ("gavel.finish_time_fairness", "finish_time_fairness", True, False),
    ("gavel.finish_time_fairness_agnostic", "finish_time_fairness", False, False),
]


@pytest.mark.parametrize(("name", "policy", "aware", "prices"), CASES,
                         ids=[c[0] for c in CASES])
@DEFINITIONS
@given(data=st.data())
def test_policy_equals_its_definition_in_cvxpy(
    name: str, policy: str, aware: bool, prices: bool, data: st.DataObject
) -> None:
    inst = data.draw(instances(with_prices=prices, history=policy == "finish_time_fairness"))
    sol = schedlab.solve(inst, name)
    assert sol.status == "optimal", sol.diagnostics
    assert check(inst, sol) == []
    assert sol.objective == pytest.approx(cvxpy_policy(inst, policy, aware, prices),
                                          rel=1e-6, abs=1e-8)
