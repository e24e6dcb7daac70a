"""The checker on Titan solutions (real concept hierarchy): merged groups only of compatible
tasks, members starting together, a merged group's GPUs counted once, and the objective
re-derived from the schedule; on random rounds of tasks over the shipped label sets."""

from __future__ import annotations

import random
from typing import Any

import pytest

import schedlab
from schedlab.check import check
from schedlab.formulations.titan.merge import DEFAULT_SIMILARITY_THRESHOLD
from schedlab.formulations.titan.round_ilp import RoundIlp
from schedlab.instance import instance_from_dict
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status
from schedlab.world.concept_hierarchy import label_sets, task_similarity

LABEL_SETS = ["cifar10", "cifar100", "fashion_mnist", "cat_vs_dog", "imagenette", "ag_news",
              "yahoo_answers", "food101"]


def random_round(seed: int) -> dict[str, Any]:
    """A round of 3-9 tasks over the shipped label sets on 4-16 GPUs."""
    rng = random.Random(seed)
    gpus = rng.choice([4, 8, 12, 16])
    jobs = []
    for i in range(rng.randint(3, 9)):
        label_set = rng.choice(LABEL_SETS)
        base = rng.uniform(600, 1200)
        job: dict[str, Any] = {
            "id": f"t{i}", "base_model": rng.choice(["vit-base", "vit-base", "roberta-base"]),
            "dataset": f"{label_set}-{i}", "label_set": label_set,
            "classes": list(label_sets()[label_set]),
            "duration_s": {"1": base * 8, "8": base * rng.uniform(1.0, 1.6)}}
        if rng.random() < 0.2:
            job.update(total_steps=100.0, steps_done=rng.uniform(1, 90))
        jobs.append(job)
    return {"name": f"round-{seed}", "cluster": {"accelerators": {"v100": {"count": gpus}}},
            "jobs": jobs, "params": {"round_s": 120.0}}


@pytest.mark.parametrize("seed", range(25))
def test_round_solutions_pass_the_checker(seed: int) -> None:
    instance = instance_from_dict(random_round(seed))
    solution = schedlab.solve(instance, "titan.round_ilp")
    assert solution.status == Status.OPTIMAL
    assert solution.violations == []
    jobs = {j.id: j for j in instance.jobs}
    for a, b in solution.groups:  # compatible, re-derived here
        ja, jb = jobs[a], jobs[b]
        assert ja.base_model == jb.base_model and ja.steps_done == 0 == jb.steps_done
        assert task_similarity(ja.classes or [], jb.classes or [], ja.label_set,
                               jb.label_set) >= DEFAULT_SIMILARITY_THRESHOLD
    used = {e.job: e.gpus for e in solution.schedule}
    grouped = {t for g in solution.groups for t in g}
    total = sum(a for t, a in used.items() if t not in grouped)
    total += sum(used[g[0]] for g in solution.groups)
    assert total <= instance.cluster.total_gpus


def test_some_random_round_merges() -> None:
    """The property above is not vacuous: rounds with merged groups occur."""
    merged = sum(bool(schedlab.solve(instance_from_dict(random_round(s)),
                                     "titan.round_ilp").groups) for s in range(25))
    assert merged >= 5


def test_merging_not_worse_on_real_labels() -> None:
    for seed in range(10):
        instance = instance_from_dict(random_round(seed))
        merged = RoundIlp().solve(instance)
        alone = RoundIlp(merging=False).solve(instance)
        assert merged.objective is not None and alone.objective is not None
        assert merged.objective <= alone.objective * (1 + 1e-4)  # within HiGHS' MIP gap


def _pair_solution(groups: list[list[str]], b_start: float = 0.0) -> tuple[Any, Solution]:
    document = {
        "cluster": {"accelerators": {"v100": {"count": 8}}},
        "jobs": [{"id": job, "base_model": "vit-base", "label_set": ls, "dataset": ls,
                  "classes": list(label_sets()[ls]), "duration_s": {"8": 20.0}}
                 for job, ls in (("a", "cifar10"), ("b", "cat_vs_dog"))],
        "merges": [{"tasks": ["a", "b"], "duration_s": {"8": 25.0}}],
    }
    instance = instance_from_dict(document)
    solution = Solution(instance=InstanceRef(name="x", hash=instance.content_hash()),
                        formulation="test", status=Status.FEASIBLE, groups=groups,
                        schedule=[ScheduleEntry(job="a", start=0, end=25, accelerator="v100",
                                                gpus=8),
                                  ScheduleEntry(job="b", start=b_start, end=25,
                                                accelerator="v100", gpus=8)])
    return instance, solution


def test_a_merged_pair_holds_its_gpus_once() -> None:
    instance, merged = _pair_solution([["a", "b"]])
    assert check(instance, merged) == []
    instance, apart = _pair_solution([])  # two jobs of 8 GPUs at once on 8 GPUs
    assert check(instance, apart) == [  # alone, each task takes its own 20 s
        "accelerator v100: 16 GPUs in use at t=0 s > 8 available (jobs a, b)",
        "task a: runs 25 s on 8 GPUs but it takes 20 s there (1 of its work left)",
        "task b: runs 25 s on 8 GPUs but it takes 20 s there (1 of its work left)"]
    instance, late = _pair_solution([["a", "b"]], b_start=1.0)
    assert set(check(instance, late)) == {
        "group 0: b starts at 1 s but a at 0 s",
        "accelerator v100: 16 GPUs in use at t=1 s > 8 available (jobs a, b)",
        "task b (merged with a): runs 24 s on 8 GPUs but the merged pair takes 25 s there "
        "(1 of its work left)"}


def test_round_objective_is_rederived_from_the_schedule() -> None:
    from schedlab.formulations.titan.examples import round_example

    instance = round_example()
    solution = schedlab.solve(instance, "titan.round_ilp")
    assert solution.violations == [] and solution.groups
    a, b = solution.groups[0]
    for entry in solution.schedule:  # the pair on one GPU more: not what was claimed
        if entry.job in (a, b):
            entry.gpus += 1
    (message,) = [v for v in check(instance, solution) if v.startswith("objective")]
    assert "titan.round_ilp claims" in message


def test_a_user_constraint_reaches_the_round_model() -> None:
    """Forbid every pair column (candidates after the tasks in ``model.round_problem``): the
    round ILP then merges nothing and its objective is no better than before."""
    import pyomo.environ as pyo

    from schedlab.formulations.titan.examples import round_example

    def no_pairs(model: pyo.ConcreteModel, instance: object) -> None:
        problem = model.round_problem
        columns = [i for i, c in enumerate(problem.column_candidate)
                   if c >= problem.num_tasks and problem.column_gpus[i] > 0]
        model.user_no_pairs = pyo.Constraint(expr=sum(model.v[i] for i in columns) == 0)

    instance = round_example()
    plain = schedlab.solve(instance, "titan.round_ilp")
    assert plain.groups
    solution = schedlab.solve(instance, "titan.round_ilp", extend=[no_pairs])
    assert solution.status == Status.OPTIMAL and solution.violations == []
    assert solution.groups == []
    assert plain.objective is not None and solution.objective is not None
    assert solution.objective >= plain.objective * (1 - 1e-7)
    alone = RoundIlp(merging=False).solve(instance)
    assert solution.objective == pytest.approx(alone.objective, rel=1e-4)
