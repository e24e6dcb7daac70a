"""``titan.merge_offline``: the seed's case table, exactly, and an enumerator on random
batches (every partition into singletons and allowed pairs, every order)."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest

import schedlab
from schedlab.check import check
from schedlab.formulations.titan.examples import case_document, round_document
from schedlab.formulations.titan.merge import DEFAULT_SIMILARITY_THRESHOLD, explain_pair
from schedlab.formulations.titan.offline import MergeOffline
from schedlab.instance import instance_from_dict, load_instance
from schedlab.solution import Status
from schedlab.solvers import SolverOptions
from schedlab.world.concept_hierarchy import task_similarity

INSTANCES = Path(__file__).resolve().parents[1] / "instances" / "titan"

#: The seed's table: case -> (merge?, average JCT merged or not, SRTF's average JCT).
SEED_TABLE = {1: (True, 25.0, 30.0), 2: (False, 20.0, 20.0), 3: (False, 55.0, 55.0)}


def test_shipped_files_are_the_builders_output() -> None:
    for case in (1, 2, 3):
        on_disk = json.loads((INSTANCES / f"case-{case}.json").read_text())
        assert on_disk == case_document(case)
    assert json.loads((INSTANCES / "round-6tasks.json").read_text()) == round_document()


def test_the_seed_example_may_merge_under_the_default_threshold() -> None:
    """Fashion-MNIST + CIFAR-100, the seed's example of a pair that gains from merging."""
    s = task_similarity(case_document(1)["jobs"][0]["classes"],
                        case_document(1)["jobs"][1]["classes"], "fashion_mnist", "cifar100")
    assert s >= DEFAULT_SIMILARITY_THRESHOLD


@pytest.mark.parametrize("case", [1, 2, 3])
def test_seed_case_table(case: int) -> None:
    merges, average, srtf = SEED_TABLE[case]
    instance = load_instance(INSTANCES / f"case-{case}.json")
    solution = schedlab.solve(instance, "titan.merge_offline")
    assert solution.status == Status.OPTIMAL and solution.violations == []
    assert solution.groups == ([["A", "B"]] if merges else [])
    assert solution.metrics["average_jct_s"] == pytest.approx(average, rel=1e-12)
    assert solution.metrics["srtf_average_jct_s"] == pytest.approx(srtf, rel=1e-12)
    assert solution.objective == pytest.approx(2 * average, rel=1e-12)
    ends = {e.job: e.end for e in solution.schedule}
    if merges:  # both finish together at the merged duration
        assert ends == {"A": 25.0, "B": 25.0}
    else:  # back to back, shortest first
        a, b = case_document(case)["jobs"][0]["duration_s"]["8"], case_document(case)[
            "jobs"][1]["duration_s"]["8"]
        assert sorted(ends.values()) == pytest.approx([min(a, b), a + b])


@pytest.mark.parametrize("case", [1, 2, 3])
def test_the_ilp_alone_makes_the_same_decision(case: int) -> None:
    """With the benefit rule off the pair is offered in every case; the ILP merges only in
    case 1 (total JCT 50 vs 60; 42 vs 40; 204 vs 110)."""
    merges, average, _ = SEED_TABLE[case]
    instance = load_instance(INSTANCES / f"case-{case}.json")
    solution = MergeOffline(benefit_base=0.0).solve(instance)
    assert solution.metrics["candidates"] == [["A", "B"]]
    assert bool(solution.groups) is merges
    assert solution.metrics["average_jct_s"] == pytest.approx(average, rel=1e-12)
    assert check(instance, solution) == []


@pytest.mark.parametrize(("case", "needle"), [
    (2, "benefit 0.9524 < 1.1 at 8 GPUs (average JCT back to back shortest first 20 s, "
        "merged 21 s)"),
    (3, "benefit 0.5392 < 1.1 at 8 GPUs (average JCT back to back shortest first 55 s, "
        "merged 102 s)"),
])
def test_rejected_cases_are_explained(case: int, needle: str) -> None:
    verdict = explain_pair(load_instance(INSTANCES / f"case-{case}.json"), "A", "B")
    assert verdict.reasons == (needle,)
    assert explain_pair(load_instance(INSTANCES / "case-1.json"), "B", "A").may_merge


def test_round_example_solves_offline() -> None:
    instance = load_instance(INSTANCES / "round-6tasks.json")
    solution = schedlab.solve(instance, "titan.merge_offline")
    assert solution.status == Status.OPTIMAL and solution.violations == []


# ---------------------------------------------------------------- against an enumerator


def random_batch(seed: int) -> tuple[dict[str, object], dict[frozenset[str], float]]:
    rng = random.Random(seed)
    gpus = rng.choice([2, 4, 8])
    n = rng.randint(2, 5)
    jobs = []
    for i in range(n):
        base = rng.uniform(50, 150)
        jobs.append({"id": f"t{i}", "base_model": rng.choice(["vit", "vit", "vit", "bert"]),
                     "classes": [f"c{i}"], "dataset": f"d{i}",
                     "weight": rng.choice([1.0, 1.0, 2.0, 0.5]),
                     "duration_s": {"1": base * gpus, str(gpus): base * rng.uniform(1, 1.5)}})
    merges = []
    for a, b in itertools.combinations(range(n), 2):
        if rng.random() < 0.5:
            merges.append({"tasks": [f"t{a}", f"t{b}"],
                           "duration_s": {str(gpus): rng.uniform(60, 250)}})
    document = {"cluster": {"accelerators": {"v100": {"count": gpus}}}, "jobs": jobs,
                "merges": merges, "params": {"similarity_threshold": 0.5}}
    similarity = {frozenset((f"t{a}", f"t{b}")): rng.random()
                  for a, b in itertools.combinations(range(n), 2)}
    return document, similarity


def enumerate_batch(document: dict[str, object], similarity: dict[frozenset[str], float],
                    phi: float) -> float:
    """Least sum of w_j C_j over every partition into singletons and allowed pairs and every
    order of its groups (written from the definitions)."""
    jobs = {j["id"]: j for j in document["jobs"]}  # type: ignore[attr-defined,index]
    gpus = document["cluster"]["accelerators"]["v100"]["count"]  # type: ignore[index]
    entries = {frozenset(m["tasks"]): m["duration_s"][str(gpus)]
               for m in document["merges"]}  # type: ignore[attr-defined]

    def alone(j: str) -> float:
        return float(jobs[j]["duration_s"][str(gpus)])

    allowed: dict[frozenset[str], float] = {}
    for a, b in itertools.combinations(sorted(jobs), 2):
        pair = frozenset((a, b))
        if jobs[a]["base_model"] != jobs[b]["base_model"] or similarity[pair] < 0.5:
            continue
        merged = entries.get(pair, phi * (alone(a) + alone(b)))
        ma, mb = alone(a), alone(b)
        if (ma + mb + min(ma, mb)) / (2 * merged) >= 1.1:
            allowed[pair] = merged

    def partitions(rest: list[str]) -> list[list[tuple[list[str], float]]]:
        if not rest:
            return [[]]
        first, others = rest[0], rest[1:]
        out = [[([first], alone(first)), *p] for p in partitions(others)]
        for k, other in enumerate(others):
            pair = frozenset((first, other))
            if pair in allowed:
                out += [[([first, other], allowed[pair]), *p]
                        for p in partitions(others[:k] + others[k + 1:])]
        return out

    best = math.inf
    for partition in partitions(sorted(jobs)):
        for order in itertools.permutations(partition):
            t, total = 0.0, 0.0
            for members, seconds in order:
                t += seconds
                total += sum(jobs[m]["weight"] * t for m in members)
            best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_offline_optimum_equals_enumeration(seed: int) -> None:
    document, similarity = random_batch(seed)

    def lookup(x: list[str], y: list[str], *_: object) -> float:
        return similarity[frozenset((f"t{x[0][1:]}", f"t{y[0][1:]}"))]

    instance = instance_from_dict(document)
    solution = MergeOffline(similarity=lookup, joint_epoch_factor=0.7).solve(
        instance, SolverOptions(mip_gap=1e-9))
    assert solution.status == Status.OPTIMAL
    assert solution.objective == pytest.approx(enumerate_batch(document, similarity, 0.7),
                                               rel=1e-9)
    # members of a group start and end together; groups never share a task
    grouped = [t for g in solution.groups for t in g]
    assert len(grouped) == len(set(grouped))
    by_job = {e.job: e for e in solution.schedule}
    for a, b in solution.groups:
        assert (by_job[a].start, by_job[a].end) == (by_job[b].start, by_job[b].end)


def test_a_user_constraint_reaches_the_model() -> None:
    """Forbid the merged group of case 1 (y of group 2, after the two singletons): the tasks
    run back to back, total JCT 20 + 40 = 60 instead of 50."""
    import pyomo.environ as pyo

    def no_merge(model: pyo.ConcreteModel, instance: object) -> None:
        pairs = [g for g, members in enumerate(model.groups.members) if len(members) == 2]
        model.user_no_merge = pyo.Constraint(expr=sum(model.y[g] for g in pairs) == 0)

    instance = load_instance(INSTANCES / "case-1.json")
    solution = schedlab.solve(instance, "titan.merge_offline", extend=[no_merge])
    assert solution.status == Status.OPTIMAL and solution.violations == []
    assert solution.groups == [] and solution.objective == pytest.approx(60.0, rel=1e-12)
