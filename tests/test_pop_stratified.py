"""The stratified POP partition (``partition="stratified"``, docs/pop.md).

Its properties are checked against strata grouped here from the instance's fields (not with
``job_strata``): part sizes within one, every stratum split as evenly as possible, the same
parts for the same seed.  The concatenation passes the checker.  And the scaling argument:
when k divides every class's size and every GPU count, each part's LP is the full LP scaled
by 1/k, so POP's objective equals the exact optimum -- here checked against a max-min LP
written out below for scipy (fairness) and against the reference Pyomo model (space sharing).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from schedlab.api import solve
from schedlab.check import check
from schedlab.cli import main
from schedlab.formulations.gavel.pop import pop_partition, solve_pop
from schedlab.instance import Instance, instance_from_dict, write_json_atomic
from schedlab.solution import Solution, Status
from schedlab.workloads.gavel import generate_gavel_instance

FAIR = "gavel.max_min_fairness"
PACKED = "gavel.max_min_fairness_packed"


@pytest.fixture(scope="module")
def mixed() -> Instance:
    """60 Gavel jobs with the 1/2/4/8-GPU mix and the priority mix, 16 GPUs of each type."""
    return generate_gavel_instance(60, {"v100": 16, "p100": 16, "k80": 16}, 4,
                                   priority_mix=True)


def strata_of(instance: Instance) -> dict[str, tuple[Any, ...]]:
    """Each job's class: what the max-min LP reads of it (scale factor, weight, job type,
    throughputs)."""
    return {job.id: (job.scale_factor, job.weight, job.job_type,
                     tuple(sorted(job.throughput.items()))) for job in instance.jobs}


@pytest.mark.parametrize(("k", "seed"), [(2, 0), (3, 1), (5, 2), (8, 3), (60, 4)])
def test_parts_are_even_in_size_and_in_every_stratum(mixed: Instance, k: int,
                                                     seed: int) -> None:
    parts = pop_partition(mixed, k, seed, "stratified")
    n = len(mixed.jobs)
    assert len(parts) == k
    assert sorted(job for part in parts for job in part) == sorted(j.id for j in mixed.jobs)
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n
    stratum = strata_of(mixed)
    totals = Counter(stratum.values())
    assert len(totals) > 5  # the mix has many classes, some smaller than k
    for cls, total in totals.items():
        shares = [sum(stratum[job] == cls for job in part) for part in parts]
        assert set(shares) <= {total // k, -(-total // k)}, (cls, shares)
    assert pop_partition(mixed, k, seed, "stratified") == parts  # deterministic for a seed


def test_seed_moves_jobs_but_not_the_class_counts(mixed: Instance) -> None:
    stratum = strata_of(mixed)
    a = pop_partition(mixed, 4, 0, "stratified")
    b = pop_partition(mixed, 4, 1, "stratified")
    assert a != b
    count = sorted(sorted(Counter(stratum[j] for j in part).items()) for part in a)
    assert count == sorted(sorted(Counter(stratum[j] for j in part).items()) for part in b)


@pytest.mark.parametrize("name", [FAIR, PACKED])
def test_stratified_pop_passes_the_checker(name: str) -> None:
    instance = generate_gavel_instance(24, {"v100": 4, "p100": 4, "k80": 4}, 2,
                                       multi_gpu=False, colocation=True)
    exact = solve(instance, name, num_rounds=0)
    pop = solve_pop(instance, name, 3, seed=1, partition="stratified", workers=1,
                    num_rounds=0, exact_objective=exact.objective)
    assert pop.status == Status.FEASIBLE and pop.metrics["pop"]["partition"] == "stratified"
    assert check(instance, pop) == [] and pop.violations == []
    assert exact.objective is not None and pop.objective is not None
    assert pop.objective <= exact.objective * (1 + 1e-9)


# ------------------------------------------------------------- divisible: POP is exact


def job(job_id: str, job_type: str, scale: int, weight: float,
        throughput: dict[str, float]) -> dict[str, Any]:
    return {"id": job_id, "job_type": job_type, "arrival": 0.0, "weight": weight,
            "scale_factor": scale, "total_steps": 1000.0, "throughput": throughput}


def divisible_instance() -> Instance:
    """Three classes (4 single-GPU jobs fast on V100, 4 single-GPU jobs nearly as fast on
    K80, 4 two-GPU jobs of weight 2) on 8 V100 + 8 K80: k = 2 and k = 4 divide every class
    and every count, and a part's 2 GPUs of a type still fit the 2-GPU gang."""
    jobs = ([job(f"a{i}", "A", 1, 1.0, {"v100": 10.0, "k80": 2.0}) for i in range(4)]
            + [job(f"b{i}", "B", 1, 1.0, {"v100": 3.0, "k80": 2.5}) for i in range(4)]
            + [job(f"c{i}", "C", 2, 2.0, {"v100": 12.0, "k80": 4.0}) for i in range(4)])
    order = [4, 0, 8, 1, 9, 5, 2, 10, 6, 3, 11, 7]  # classes interleaved in the file
    return instance_from_dict({"name": "three-classes", "jobs": [jobs[i] for i in order],
                               "cluster": {"accelerators": {"v100": {"count": 8},
                                                            "k80": {"count": 8}}}},
                              source="test")


def max_min_by_scipy(instance: Instance) -> float:
    """max t s.t. s_j sum_k T[j,k] X[j,k] / (w_j T_eq[j]) >= t, sum_k X[j,k] <= 1,
    sum_j s_j X[j,k] <= n_k, X >= 0 (X[j,k] = 0 where s_j > n_k), written out per job."""
    types = list(instance.cluster.accelerators)
    counts = np.array([instance.cluster.accelerators[a].count for a in types], dtype=float)
    num_jobs, num_types = len(instance.jobs), len(types)
    width = num_jobs * num_types + 1  # X row-major, then t
    cost = np.zeros(width)
    cost[-1] = -1.0
    rows, rhs = [], []
    for j, item in enumerate(instance.jobs):
        thr = np.array([item.throughput.get(a, 0.0) for a in types])
        teq = float(thr @ counts) / counts.sum()
        fair = np.zeros(width)
        fair[j * num_types:(j + 1) * num_types] = -item.scale_factor * thr / (item.weight * teq)
        fair[-1] = 1.0
        share = np.zeros(width)
        share[j * num_types:(j + 1) * num_types] = 1.0
        rows += [fair, share]
        rhs += [0.0, 1.0]
    for k in range(num_types):
        capacity = np.zeros(width)
        for j, item in enumerate(instance.jobs):
            capacity[j * num_types + k] = item.scale_factor
        rows.append(capacity)
        rhs.append(counts[k])
    bounds = [(0.0, 0.0 if item.scale_factor > counts[k] else None)
              for item in instance.jobs for k in range(num_types)] + [(0.0, None)]
    result = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds,
                     method="highs")
    assert result.status == 0
    return float(-result.fun)


@pytest.mark.parametrize("k", [2, 4])
def test_divisible_classes_make_pop_exact(k: int) -> None:
    instance = divisible_instance()
    optimum = max_min_by_scipy(instance)
    exact = solve(instance, FAIR, num_rounds=0)
    assert exact.objective == pytest.approx(optimum, rel=1e-6)
    pop = solve_pop(instance, FAIR, k, seed=3, partition="stratified", workers=1,
                    num_rounds=0)
    assert pop.violations == [] and pop.objective is not None
    assert pop.objective == pytest.approx(optimum, rel=1e-6)
    for part in pop_partition(instance, k, 3, "stratified"):  # an exact 1/k replica
        assert sorted(Counter(name[0] for name in part).values()) == [4 // k] * 3


def test_divisible_classes_with_space_sharing_make_pop_exact() -> None:
    """Two job types, 4 single-GPU jobs each, every pair co-locatable with throughputs set by
    the two types; 2 GPUs of each type.  k = 2: each part has 2 jobs of each type (so every
    class pair, same-type ones included, still exists in it) and 1 GPU of each type."""
    solo = {"A": {"v100": 10.0, "k80": 2.0}, "B": {"v100": 3.0, "k80": 2.5}}
    keeps = {("A", "A"): 0.55, ("A", "B"): 0.8, ("B", "A"): 0.7, ("B", "B"): 0.6}
    kinds = {f"{t}{i}": t for t in "AB" for i in range(4)}
    jobs = []
    for name, kind in kinds.items():
        entry = job(name, kind, 1, 1.0, solo[kind])
        entry["colocated_throughput"] = {
            other: {acc: keeps[(kind, partner)] * value for acc, value in solo[kind].items()}
            for other, partner in kinds.items() if other != name}
        jobs.append(entry)
    instance = instance_from_dict({"name": "two-types-packed", "jobs": jobs, "cluster": {
        "accelerators": {"v100": {"count": 2}, "k80": {"count": 2}}}}, source="test")
    exact = solve(instance, PACKED, num_rounds=0)  # 8 jobs: the reference Pyomo model
    assert exact.status == Status.OPTIMAL and exact.objective is not None
    assert exact.colocated_allocation  # sharing matters at the optimum
    pop = solve_pop(instance, PACKED, 2, seed=0, partition="stratified", workers=1,
                    num_rounds=0)
    assert pop.violations == [] and pop.objective is not None
    assert pop.objective == pytest.approx(exact.objective, rel=1e-6)


def test_cli_stratified_partition(mixed: Instance, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "inst.json", tmp_path / "sol.json"
    write_json_atomic(path, mixed.to_dict())
    # k = 2: a part's 8 GPUs of a type still fit the mix's 8-GPU gangs
    code = main(["solve", str(path), "-f", FAIR, "--partitions", "2", "--pop-partition",
                 "stratified", "--workers", "1", "--rounds", "0", "-q", "-o", str(out)])
    capsys.readouterr()
    assert code == 0
    saved = Solution.model_validate_json(out.read_text())
    assert saved.metrics["pop"]["partition"] == "stratified"
    assert saved.metrics["pop"]["jobs"] == [30, 30]
    assert check(mixed, saved) == []
