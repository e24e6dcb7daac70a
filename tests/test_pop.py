"""POP for the Gavel LPs (``schedlab.formulations.gavel.pop``): k = 1 is the exact solve, k = 2
matches two sub-problems built and solved by hand here, the checker accepts the concatenation,
bad k is one input error, and the backends agree."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from schedlab.api import solve
from schedlab.check import check
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.formulations.gavel.pop import pop_partition, solve_pop, split_gpus
from schedlab.instance import Instance, instance_from_dict, write_json_atomic
from schedlab.solution import Solution, Status
from schedlab.workloads.gavel import generate_gavel_instance

FAIR = "gavel.max_min_fairness"
PACKED = "gavel.max_min_fairness_packed"
CLUSTER = {"v100": 4, "p100": 4, "k80": 4}  # even counts: k = 2 halves them exactly


@pytest.fixture(scope="module")
def instance() -> Instance:
    """16 single-GPU Gavel jobs, every pair co-locatable, on 4 GPUs of each of 3 types."""
    return generate_gavel_instance(16, CLUSTER, 3, multi_gpu=False, colocation=True)


def hand_sub_instance(instance: Instance, job_ids: list[str]) -> Instance:
    """The sub-problem of ``job_ids`` written out from the instance's dict: those jobs, their
    partners cut to the same jobs, half of every GPU type."""
    document: dict[str, Any] = instance.to_dict()
    keep = set(job_ids)
    jobs = []
    for job in document["jobs"]:
        if job["id"] in keep:
            partners = {o: v for o, v in (job.get("colocated_throughput") or {}).items()
                        if o in keep}
            job["colocated_throughput"] = partners or None
            jobs.append(job)
    document["jobs"] = jobs
    document["cluster"] = {"accelerators": {acc: {"count": n // 2} for acc, n in
                                            CLUSTER.items()}}
    return instance_from_dict(document, source="hand")


def normalized_min(instance: Instance, solution: Solution) -> float:
    """min_j s_j thr_j / (w_j T_eq[j]) from the allocation, with the full cluster's T_eq,
    computed from the instance's fields alone."""
    counts = {acc: pool.count for acc, pool in instance.cluster.accelerators.items()}
    total = sum(counts.values())
    thr = {job.id: 0.0 for job in instance.jobs}
    jobs = {job.id: job for job in instance.jobs}
    for job_id, shares in solution.allocation.items():
        thr[job_id] += sum(share * jobs[job_id].throughput[acc] for acc, share in shares.items())
    for pair in solution.colocated_allocation:
        a, b = pair.jobs
        thr[a] += pair.fraction * (jobs[a].colocated_throughput or {})[b][pair.accelerator]
        thr[b] += pair.fraction * (jobs[b].colocated_throughput or {})[a][pair.accelerator]
    scores = []
    for job in instance.jobs:
        teq = sum(job.throughput.get(acc, 0.0) * n for acc, n in counts.items()) / total
        scores.append(job.scale_factor * thr[job.id] / (job.weight * teq))
    return min(scores)


@pytest.mark.parametrize("name", [FAIR, PACKED])
def test_one_partition_is_the_exact_solve(instance: Instance, name: str) -> None:
    exact = solve(instance, name, num_rounds=0)
    pop = solve_pop(instance, name, 1, seed=0, workers=1, num_rounds=0)
    assert exact.status == Status.OPTIMAL and pop.status == Status.OPTIMAL
    assert pop.objective == pytest.approx(exact.objective, rel=1e-6)
    assert pop.violations == []


@pytest.mark.parametrize("name", [FAIR, PACKED])
def test_two_partitions_match_the_sub_problems_solved_by_hand(instance: Instance,
                                                             name: str) -> None:
    exact = solve(instance, name, num_rounds=0)
    pop = solve_pop(instance, name, 2, seed=7, workers=1, num_rounds=0,
                    exact_objective=exact.objective)
    assert pop.status == Status.FEASIBLE  # a heuristic, never optimal
    assert pop.bound is None
    assert check(instance, pop) == [] and pop.violations == []
    assert exact.objective is not None and pop.objective is not None
    assert pop.objective <= exact.objective * (1 + 1e-9)
    assert pop.metrics["pop"]["ratio_to_exact"] == pytest.approx(
        pop.objective / exact.objective, rel=1e-12)

    parts = pop_partition(instance, 2, seed=7)
    assert sorted(parts[0] + parts[1]) == sorted(job.id for job in instance.jobs)
    subs = [solve(hand_sub_instance(instance, ids), name, num_rounds=0) for ids in parts]
    # halving every type keeps T_eq, so each sub-LP's optimum is its jobs' least normalized
    # throughput under the full problem's normalization too
    expected = min(sub.objective for sub in subs if sub.objective is not None)
    assert pop.objective == pytest.approx(expected, rel=1e-6)
    assert normalized_min(instance, pop) == pytest.approx(pop.objective, rel=1e-9)


def test_space_sharing_keeps_only_pairs_inside_a_part(instance: Instance) -> None:
    pop = solve_pop(instance, PACKED, 2, seed=7, workers=1, num_rounds=0)
    parts = [set(ids) for ids in pop_partition(instance, 2, seed=7)]
    n = len(instance.jobs)
    assert pop.metrics["pop"]["pairs_total"] == n * (n - 1) // 2
    assert pop.metrics["pop"]["pairs_kept"] == sum(len(p) * (len(p) - 1) // 2 for p in parts)
    for pair in pop.colocated_allocation:
        assert any(set(pair.jobs) <= part for part in parts)


def test_process_pool_gives_the_sequential_allocation(instance: Instance) -> None:
    one = solve_pop(instance, PACKED, 4, seed=1, workers=1, num_rounds=0)
    pool = solve_pop(instance, PACKED, 4, seed=1, workers=2, num_rounds=0)
    assert_same_allocation(one, pool)


def assert_same_allocation(a: Solution, b: Solution) -> None:
    assert a.status == b.status
    assert a.allocation.keys() == b.allocation.keys()
    for job, shares in a.allocation.items():
        assert shares.keys() == b.allocation[job].keys()
        for acc, share in shares.items():
            assert math.isclose(share, b.allocation[job][acc], rel_tol=1e-9, abs_tol=1e-12)
    pairs_a = {(p.jobs, p.accelerator): p.fraction for p in a.colocated_allocation}
    pairs_b = {(p.jobs, p.accelerator): p.fraction for p in b.colocated_allocation}
    assert pairs_a.keys() == pairs_b.keys()
    for key, fraction in pairs_a.items():
        assert math.isclose(fraction, pairs_b[key], rel_tol=1e-9, abs_tol=1e-12)


def test_ray_gives_the_sequential_allocation(instance: Instance,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = solve_pop(instance, FAIR, 2, seed=5, backend="ray", num_rounds=0)
    finally:
        ray.shutdown()
    assert_same_allocation(solve_pop(instance, FAIR, 2, seed=5, workers=1, num_rounds=0),
                           remote)


def test_ray_backend_without_ray_is_an_input_error(instance: Instance,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(InputError, match="Ray"):
        solve_pop(instance, FAIR, 2, seed=0, backend="ray")


def test_split_gpus_sums_back_and_balances() -> None:
    counts = {"v100": 10, "p100": 7, "k80": 3}
    parts = split_gpus(counts, 4)
    for acc, n in counts.items():
        assert sum(part[acc] for part in parts) == n
        assert {part[acc] for part in parts} <= {n // 4, n // 4 + 1}
    totals = [sum(part.values()) for part in parts]
    assert max(totals) - min(totals) <= 1


@pytest.mark.parametrize("k", ["0", "17"])
def test_bad_partition_count_is_one_input_error(instance: Instance, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                k: str) -> None:
    path = tmp_path / "inst.json"
    write_json_atomic(path, instance.to_dict())
    code = main(["solve", str(path), "-f", FAIR, "--partitions", k])
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--partitions" in lines[0]


def test_cli_partitions_solves_and_checks(instance: Instance, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "inst.json", tmp_path / "sol.json"
    write_json_atomic(path, instance.to_dict())
    code = main(["solve", str(path), "-f", FAIR, "--partitions", "2", "--workers", "1",
                 "--rounds", "0", "-q", "-o", str(out)])
    capsys.readouterr()
    assert code == 0
    saved = Solution.model_validate_json(out.read_text())
    assert saved.status == Status.FEASIBLE and saved.metrics["pop"]["partitions"] == 2
    assert check(instance, saved) == []


# ------------------------------------------------------------------ balanced partition


def two_type_instance(num_jobs: int) -> Instance:
    """``num_jobs`` single-GPU jobs alternating between type A (10 steps/s on a V100, 1 on a
    K80) and type B (1 and 10), weight 1; 4 GPUs of each type."""
    jobs = [{"id": f"j{i:02d}", "job_type": "A" if i % 2 == 0 else "B", "arrival": 0.0,
             "weight": 1.0, "scale_factor": 1, "total_steps": 1000.0,
             "throughput": {"v100": 10.0, "k80": 1.0} if i % 2 == 0
             else {"v100": 1.0, "k80": 10.0}} for i in range(num_jobs)]
    return instance_from_dict({"name": "two-types", "jobs": jobs, "cluster": {
        "accelerators": {"v100": {"count": 4}, "k80": {"count": 4}}}}, source="test")


@pytest.mark.parametrize(("k", "seed"), [(3, 0), (4, 1), (7, 2), (16, 3)])
def test_balanced_parts_have_equal_sizes_and_every_job_once(instance: Instance, k: int,
                                                            seed: int) -> None:
    parts = pop_partition(instance, k, seed, "balanced")
    n = len(instance.jobs)
    assert len(parts) == k
    assert all(abs(len(part) - n / k) < 1 for part in parts)
    assert sorted(job for part in parts for job in part) == sorted(j.id for j in instance.jobs)
    assert pop_partition(instance, k, seed, "balanced") == parts  # same seed, same parts


def test_balanced_partition_splits_two_job_types_evenly() -> None:
    # Jobs alternate A, B, A, B, ... and k = 2, so every round of two jobs (one per part)
    # draws both parts.  Round 1: A joins either empty part, B the other.  Then, while the
    # parts hold equal numbers of A and B (mean = the population's), the A of an odd round
    # joins either part and the B the other; in the next round the part that got an extra A
    # is moved away from the population mean by another A and back to it by a B, so A joins
    # the other part.  Hence after every even round each part holds equally many A and B:
    # 4 A and 4 B each with 16 jobs.  The sorted split (all A, then all B, cut in halves)
    # puts all 8 A in part 0.
    inst = two_type_instance(16)
    kind = {job.id: job.job_type for job in inst.jobs}
    target = 8 / 2
    for seed in range(5):
        parts = pop_partition(inst, 2, seed, "balanced")
        counts = [sum(kind[j] == "A" for j in part) for part in parts]
        assert counts == [4, 4]
    ids_by_type = sorted(inst.jobs, key=lambda job: job.job_type or "")
    sorted_split = [ids_by_type[:8], ids_by_type[8:]]
    sorted_counts = [sum(job.job_type == "A" for job in part) for part in sorted_split]
    assert sorted_counts == [8, 0]
    assert max(abs(c - target) for c in counts) < max(abs(c - target) for c in sorted_counts)


@pytest.mark.parametrize("name", [FAIR, PACKED])
def test_balanced_pop_passes_the_checker_and_stays_below_exact(instance: Instance,
                                                              name: str) -> None:
    exact = solve(instance, name, num_rounds=0)
    pop = solve_pop(instance, name, 2, seed=3, partition="balanced", workers=1, num_rounds=0,
                    exact_objective=exact.objective)
    assert pop.status == Status.FEASIBLE and pop.metrics["pop"]["partition"] == "balanced"
    assert check(instance, pop) == [] and pop.violations == []
    assert exact.objective is not None and pop.objective is not None
    assert pop.objective <= exact.objective * (1 + 1e-9)
    assert normalized_min(instance, pop) == pytest.approx(pop.objective, rel=1e-9)
    assert sorted(pop.metrics["pop"]["jobs"]) == [8, 8]


def test_unknown_partition_is_an_input_error(instance: Instance) -> None:
    with pytest.raises(InputError, match="partition"):
        pop_partition(instance, 2, 0, "sorted")  # type: ignore[arg-type]


def test_cli_balanced_partition(instance: Instance, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "inst.json", tmp_path / "sol.json"
    write_json_atomic(path, instance.to_dict())
    code = main(["solve", str(path), "-f", FAIR, "--partitions", "4", "--pop-partition",
                 "balanced", "--workers", "1", "--rounds", "0", "-q", "-o", str(out)])
    capsys.readouterr()
    assert code == 0
    saved = Solution.model_validate_json(out.read_text())
    assert saved.metrics["pop"]["partition"] == "balanced"
    assert saved.metrics["pop"]["jobs"] == [4, 4, 4, 4]
    assert check(instance, saved) == []
