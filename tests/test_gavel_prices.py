"""The price path (``schedlab.formulations.gavel.prices``) reaches the reference optimum.

Families of distinct job rows (so nothing aggregates): the generator's rows, noisy rows, wide
speed-up ratios, scale factors 1..8, weights, a cluster so large that no capacity binds, a type
nobody needs, and the heterogeneity-agnostic variant.  Each is solved by the plain Pyomo model
and by the price path with its thresholds lowered so that the sample, the Newton steps and the
fixed-segment loop all run on a small instance; optima agree to 1e-6 relative, the certificate
gap is within tolerance and the checker finds nothing.  Larger cases compare with an LP
written here with scipy (HiGHS), and the certificate's bounds are checked against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from schedlab.check import check
from schedlab.formulations.gavel import fast, prices
from schedlab.formulations.gavel.data import GavelData
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions
from schedlab.workloads.gavel import generate_gavel_instance

TYPES = ("v100", "p100", "k80")
REL_TOL = 1e-6


# ------------------------------------------------------------------------ instances


def _instance(rows: np.ndarray, scale: np.ndarray, weight: np.ndarray,
              counts: dict[str, int]) -> Instance:
    jobs: list[dict[str, Any]] = []
    for j, row in enumerate(rows):
        jobs.append({
            "id": f"j{j}", "scale_factor": int(scale[j]), "weight": float(weight[j]),
            "throughput": {k: float(v) for k, v in zip(TYPES, row, strict=True) if v > 0},
        })
    return instance_from_dict({
        "schema": "schedlab/instance@1", "name": "prices-test",
        "cluster": {"accelerators": {k: {"count": n} for k, n in counts.items()}},
        "jobs": jobs, "params": {"num_rounds": 0},
    }, source="test")


def family(name: str, num_jobs: int = 80, seed: int = 0) -> Instance:
    """A small instance of one family (every job row distinct)."""
    rng = np.random.default_rng(seed)
    base = generate_gavel_instance(num_jobs, {k: max(8, num_jobs // 6) for k in TYPES}, seed)
    rows = np.array([[job.throughput.get(k, 0.0) for k in TYPES] for job in base.jobs])
    scale = np.array([job.scale_factor for job in base.jobs])
    weight = np.ones(num_jobs)
    per_type = max(8, num_jobs // 6)
    counts = dict.fromkeys(TYPES, per_type)
    if name == "generator":  # the generator's rows, one tiny factor each to keep them apart
        rows = rows * (1 + 1e-3 * rng.random((num_jobs, 1)))
    elif name == "noisy":
        rows = rows * rng.uniform(0.8, 1.2, rows.shape)
    elif name == "wide":
        rows = rows * rng.uniform(1.0, 4.0, rows.shape)
        scale = rng.choice([1, 2, 4], num_jobs)
    elif name == "scale_1_8":
        rows = rows * rng.uniform(0.5, 2.0, rows.shape)
        scale = rng.integers(1, 9, num_jobs)
    elif name == "weights":
        rows = rows * rng.uniform(0.5, 2.0, rows.shape)
        weight = rng.choice([1.0, 1.25, 1.5], num_jobs)  # 5 would make it top_level
    elif name == "no_binding":  # so many GPUs that every job reaches its best level alone
        rows = rows * rng.uniform(0.5, 2.0, rows.shape)
        counts = dict.fromkeys(TYPES, 4 * num_jobs)
    elif name == "top_level":  # J/3 GPUs per type: t* = the slowest job's best level
        rows = rows * rng.uniform(0.8, 1.2, rows.shape)
        counts = dict.fromkeys(TYPES, max(8, num_jobs // 3))
    elif name == "spare_type":  # k80 plentiful: its price is zero
        rows = rows * rng.uniform(0.5, 2.0, rows.shape)
        counts = {"v100": per_type, "p100": per_type, "k80": 8 * num_jobs}
    elif name == "missing":  # some jobs cannot use some types
        rows = rows * rng.uniform(0.5, 2.0, rows.shape)
        rows[rng.random(rows.shape) < 0.25] = 0.0
        rows[rows.max(axis=1) == 0, 0] = 1.0
    else:
        raise ValueError(name)
    return _instance(rows, scale, weight, counts)


FAMILIES = ("generator", "noisy", "wide", "scale_1_8", "weights", "no_binding",
            "spare_type", "missing")


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the price path use its sample, Newton steps and fixed segments on tiny inputs
    (and leave only a few classes free at first, so the loop must free violators)."""
    monkeypatch.setattr(prices, "DIRECT_MAX_CLASSES", 0)
    monkeypatch.setattr(prices, "SAMPLE_CLASSES", 15)
    monkeypatch.setattr(prices, "MIN_FREE", 3)
    monkeypatch.setattr(prices, "JACOBIAN_SAMPLE", 40)


def reference(instance: Instance, **kwargs: Any) -> Solution:
    return MaxMinFairness(method="pyomo", num_rounds=0, **kwargs).solve(instance)


def price_solution(instance: Instance, **kwargs: Any) -> Solution:
    formulation = MaxMinFairness(method="fast", num_rounds=0, **kwargs)
    formulation.name = "gavel.max_min_fairness"
    return fast.solve_max_min_fast(formulation, instance, SolverOptions(), path="prices",
                                   aggregate=False)


def assert_same_optimum(instance: Instance, ref: Solution, got: Solution) -> None:
    assert ref.status == Status.OPTIMAL
    assert got.status == Status.OPTIMAL, got.diagnostics
    assert got.metrics["fast_path"] == "prices"
    assert got.diagnostics == []  # no fallback
    assert ref.objective is not None and got.objective is not None
    assert got.objective == pytest.approx(ref.objective, rel=REL_TOL)
    assert got.bound is not None and got.bound >= got.objective
    assert got.gap is not None and got.gap <= prices.GAP_TOLERANCE
    assert check(instance, got) == []


# ------------------------------------------------------------------ against the reference


@pytest.mark.usefixtures("small_thresholds")
@pytest.mark.parametrize("name", FAMILIES)
def test_families_match_reference(name: str) -> None:
    instance = family(name)
    ref = reference(instance)
    got = price_solution(instance)
    assert_same_optimum(instance, ref, got)
    assert got.metrics["classes"] == len(instance.jobs)


@pytest.mark.usefixtures("small_thresholds")
@pytest.mark.parametrize("name", ["wide", "weights"])
def test_agnostic_variant_matches_reference(name: str) -> None:
    instance = family(name, seed=3)
    ref = reference(instance, heterogeneity_aware=False)
    got = price_solution(instance, heterogeneity_aware=False)
    assert_same_optimum(instance, ref, got)


@pytest.mark.usefixtures("small_thresholds")
@pytest.mark.parametrize("seed", [1, 2])
def test_other_seeds_match_reference(seed: int) -> None:
    instance = family("wide", num_jobs=120, seed=seed)
    assert_same_optimum(instance, reference(instance), price_solution(instance))


@pytest.mark.usefixtures("small_thresholds")
def test_aggregated_classes_match_reference() -> None:
    """Repeated jobs (the generator's rows, classes of many jobs each) on the price path."""
    instance = generate_gavel_instance(150, dict.fromkeys(TYPES, 25), 4)
    formulation = MaxMinFairness(method="fast", num_rounds=0)
    formulation.name = "gavel.max_min_fairness"
    got = fast.solve_max_min_fast(formulation, instance, SolverOptions(), path="prices")
    assert got.metrics["classes"] < len(instance.jobs)
    assert_same_optimum(instance, reference(instance), got)


def test_default_path_for_many_distinct_jobs() -> None:
    """No pairs and more classes than the class-LP limit: the price path is chosen."""
    instance = family("noisy", num_jobs=fast.CLASS_LP_MAX_CLASSES + 20)
    formulation = MaxMinFairness(method="fast", num_rounds=0)
    got = formulation.solve(instance)
    assert got.metrics["fast_path"] == "prices"
    assert got.objective == pytest.approx(reference(instance).objective, rel=REL_TOL)
    assert check(instance, got) == []


@pytest.mark.usefixtures("small_thresholds")
def test_top_level_goes_to_the_capacity_master() -> None:
    """t* is the slowest job's best level while capacities bind: the price path hands over
    to the capacity master, says so, and the optimum is the reference's."""
    instance = family("top_level", num_jobs=120)
    data = gavel_data_of(instance)
    top = float((fast.fairness_coefficients(data)[:, None] * data.throughput).max(axis=1).min())
    ref = reference(instance)
    assert ref.objective == pytest.approx(top, rel=1e-9)  # the case this test is about
    got = price_solution(instance)
    assert got.status == Status.OPTIMAL
    assert any("solved by the capacity master" in d for d in got.diagnostics)
    assert got.objective == pytest.approx(ref.objective, rel=REL_TOL)
    assert check(instance, got) == []


def gavel_data_of(instance: Instance) -> GavelData:
    from schedlab.formulations.gavel.data import gavel_data

    return gavel_data(instance)


def test_fallback_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the fixed-segment loop gives up, the capacity master solves and the diagnostics
    say so; the optimum is still the reference's."""
    monkeypatch.setattr(prices, "DIRECT_MAX_CLASSES", 0)
    monkeypatch.setattr(prices, "SAMPLE_CLASSES", 15)
    monkeypatch.setattr(prices, "MAX_FREE", 0)
    instance = family("wide", num_jobs=40)
    got = price_solution(instance)
    assert got.status == Status.OPTIMAL
    assert any("fell back to the capacity master" in d for d in got.diagnostics)
    assert got.objective == pytest.approx(reference(instance).objective, rel=REL_TOL)


# ------------------------------------------------------------ larger, against scipy's LP


def wide_data(num_jobs: int, seed: int, per_type: int) -> GavelData:
    """Wide-ratio rows as arrays: base rows in [1, 10] times U(1, 4) per type, s in {1,2,4}."""
    rng = np.random.default_rng(seed)
    thr = rng.uniform(1.0, 10.0, (num_jobs, 1)) * rng.uniform(1.0, 4.0, (num_jobs, 3))
    scale = rng.choice([1.0, 2.0, 4.0], num_jobs)
    gpus = np.full(3, float(per_type))
    return GavelData(
        job_ids=[str(j) for j in range(num_jobs)], types=list(TYPES), throughput=thr,
        allowed=np.ones((num_jobs, 3), dtype=bool), scale_factor=scale,
        weight=np.ones(num_jobs), gpus=gpus, remaining_steps=np.ones(num_jobs), pairs=[],
        pair_throughput=np.zeros((0, 3, 2)), pair_allowed=np.zeros((0, 3), dtype=bool),
    )


def scipy_optimum(data: GavelData) -> float:
    """max t over X (J, K) >= 0: a_j T_j . X_j >= t, sum_k X_jk <= 1, sum_j s_j X_jk <= n_k,
    written here independently of the package (a_j = s_j / (w_j T_eq[j]))."""
    num_jobs, num_types = data.throughput.shape
    teq = data.throughput @ data.gpus / data.gpus.sum()
    coef = data.scale_factor / (data.weight * teq)
    n_x = num_jobs * num_types
    jj = np.repeat(np.arange(num_jobs), num_types)
    kk = np.tile(np.arange(num_types), num_jobs)
    from scipy.sparse import coo_matrix, vstack

    fair = coo_matrix((np.concatenate([-(coef[:, None] * data.throughput).ravel(),
                                       np.ones(num_jobs)]),
                       (np.concatenate([jj, np.arange(num_jobs)]),
                        np.concatenate([np.arange(n_x), np.full(num_jobs, n_x)]))),
                      shape=(num_jobs, n_x + 1))
    share = coo_matrix((np.ones(n_x), (jj, np.arange(n_x))), shape=(num_jobs, n_x + 1))
    cap = coo_matrix((data.scale_factor[jj], (kk, np.arange(n_x))), shape=(num_types, n_x + 1))
    cost = np.zeros(n_x + 1)
    cost[-1] = -1.0
    result = linprog(cost, A_ub=vstack([fair, share, cap]).tocsr(),
                     b_ub=np.concatenate([np.zeros(num_jobs), np.ones(num_jobs), data.gpus]),
                     bounds=(0, None), method="highs")
    assert result.status == 0
    return float(-result.fun)


@pytest.mark.parametrize(("num_jobs", "per_type"), [(3000, 500), (1500, 2000)])
def test_default_thresholds_match_scipy(num_jobs: int, per_type: int) -> None:
    """With the default thresholds (sample of 300, Newton on all classes): the certified
    optimum equals an LP solved here by scipy; the capacity binds at 500 GPUs per type and
    not at 2000."""
    data = wide_data(num_jobs, 7, per_type)
    classes = fast.classify_jobs(data, aggregate=False)
    found = prices.solve_by_prices(classes, data.gpus, SolverOptions())
    expected = scipy_optimum(data)
    assert found.status == Status.OPTIMAL, found.message
    assert found.value == pytest.approx(expected, rel=REL_TOL)
    assert found.value <= found.bound <= found.value * (1 + prices.GAP_TOLERANCE)
    # the returned shares are feasible on their own
    levels = (classes.fair * found.z).sum(axis=1)
    assert levels.min() == pytest.approx(found.value, rel=1e-12)
    assert np.all(found.z.sum(axis=1) <= 1 + 1e-12)
    assert np.all(prices.total_use(classes, classes.count, found.z) <= data.gpus * (1 + 1e-12))


def test_certificate_bounds_any_point() -> None:
    """certify() turns arbitrary shares and duals into a feasible value and a valid bound:
    value <= optimum <= bound (weak duality), checked against scipy's optimum."""
    data = wide_data(400, 11, 60)
    classes = fast.classify_jobs(data, aggregate=False)
    optimum = scipy_optimum(data)
    rng = np.random.default_rng(0)
    for _ in range(5):
        z = rng.random(classes.fair.shape)
        lam = rng.random(classes.num_classes)
        pi = rng.random(3) * 1e-2
        _, value, bound = prices.certify(classes, data.gpus, z, lam, pi)
        assert value <= optimum * (1 + 1e-9)
        assert bound >= optimum * (1 - 1e-9)


def test_cheapest_segment_by_hand() -> None:
    """One class, patterns A = (1, 3) at costs (1, 5): reaching t = 2 costs 3 by mixing them
    half and half (slope 2); t = 0.5 costs 0.5 by pattern 0 alone (slope 1); t = 4 is out of
    reach."""
    classes = fast.classify_jobs(GavelData(
        job_ids=["a"], types=["x", "y"], throughput=np.array([[1.0, 3.0]]),
        allowed=np.ones((1, 2), dtype=bool), scale_factor=np.ones(1), weight=np.ones(1),
        gpus=np.array([2.0, 2.0]), remaining_steps=np.ones(1), pairs=[],
        pair_throughput=np.zeros((0, 2, 2)), pair_allowed=np.zeros((0, 2), dtype=bool),
    ), aggregate=False)
    # a = s / (w T_eq) = 1 / 2, so A = (0.5, 1.5); costs chosen to give (1, 5) at A scale
    cost = np.array([[1.0, 5.0]])
    seg = prices.segments_at(classes, cost, 1.0)
    assert (seg.left[0], seg.right[0]) == (0, 1)
    lam, mu = prices.segment_duals(seg, cost)
    assert lam[0] == pytest.approx(4.0)  # (5 - 1) / (1.5 - 0.5)
    assert mu[0] == pytest.approx(1.0)  # 4 * 0.5 - 1
    z = prices.shares_on_segments(classes, seg, 1.0)
    assert z[0].tolist() == pytest.approx([0.5, 0.5])
    low = prices.segments_at(classes, cost, 0.25)
    assert (low.left[0], low.right[0]) == (-1, 0)
    assert not prices.segments_at(classes, cost, 2.0).reach[0]
