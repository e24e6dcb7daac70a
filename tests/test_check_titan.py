"""The checker on Titan schedules (schedlab/check_titan.py): durations from the speed model at
the entry's GPUs (the task's or the merged pair's), GPU counts within what a task can use, a
one-round plan judged by its GPUs only, and no false alarm on any shipped Titan instance
solved by any Titan formulation.

Solutions are made here by solving ``instances/titan/case-1.json`` with ``titan.merge_offline``
and mutating them; the expected durations are re-derived from the instances."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import schedlab
from schedlab.check import check
from schedlab.cli import main
from schedlab.errors import InputError
from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.speed import duration
from schedlab.formulations.titan.tasks import titan_tasks
from schedlab.instance import Instance, instance_from_dict, load_instance
from schedlab.registry import formulations, get_formulation
from schedlab.solution import ScheduleEntry, Solution

TITAN = Path(__file__).resolve().parent.parent / "instances" / "titan"


def case(number: int) -> Instance:
    return load_instance(TITAN / f"case-{number}.json")


def merged_case_1() -> Solution:
    """case-1 solved by titan.merge_offline: A and B merged, run together from 0 s."""
    solution = schedlab.solve(case(1), "titan.merge_offline")
    assert solution.violations == [] and solution.groups == [["A", "B"]]
    return solution


def merged_seconds(instance: Instance, gpus: int) -> float:
    """The merged pair's duration in ``instance`` at ``gpus`` GPUs, s."""
    first, second = titan_tasks(instance)
    return duration(MergeRule.for_instance(instance).merged_profile(first, second), gpus)


def test_shortened_schedule_fails_naming_both_tasks(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Entries cut to end at 1 s, the objective made to agree: only the durations are wrong."""
    instance, solution = case(1), merged_case_1()
    for entry in solution.schedule:
        entry.end = 1.0
    formulation = get_formulation(solution.formulation)
    solution.objective = formulation.objective_of(instance, solution)
    violations = check(instance, solution)
    need = merged_seconds(instance, solution.schedule[0].gpus)
    assert len(violations) == 2
    for task, partner in (("A", "B"), ("B", "A")):
        assert (f"task {task} (merged with {partner}): runs 1 s on 8 GPUs but the merged pair "
                f"takes {need:.9g} s there") in "\n".join(violations)
    path = tmp_path / "short.json"
    solution.save(path)
    assert main(["check", str(TITAN / "case-1.json"), str(path)]) == 1
    assert "task A (merged with B): runs 1 s" in capsys.readouterr().out


def test_case_1_schedule_against_case_3_names_the_tasks() -> None:
    """case-3's pair takes longer: the case-1 schedule ends it too early."""
    solution, other = merged_case_1(), case(3)
    runs = solution.schedule[0].end - solution.schedule[0].start
    need = merged_seconds(other, solution.schedule[0].gpus)
    assert need > runs
    durations = [v for v in check(other, solution) if not v.startswith("objective")]
    assert sorted(durations) == sorted(
        f"task {t} (merged with {p}): runs {runs:.9g} s on 8 GPUs but the merged pair takes "
        f"{need:.9g} s there (1 of its work left)" for t, p in (("A", "B"), ("B", "A")))


def test_more_gpus_than_a_task_can_use() -> None:
    """case-2 runs A and B alone; A on one GPU more than its profile's largest count."""
    instance = case(2)
    solution = schedlab.solve(instance, "titan.merge_offline")
    assert solution.violations == [] and solution.groups == []
    entry = next(e for e in solution.schedule if e.job == "A")
    entry.gpus += 1
    assert f"task A: on {entry.gpus} GPUs at t={entry.start:.9g} s, more than the 8 it can use " \
        "(no duration there)" in check(instance, solution)


def test_fewer_gpus_take_longer() -> None:
    """On 4 GPUs the pair keeps its GPU-seconds (below the profile): twice its 8-GPU time."""
    instance, solution = case(1), merged_case_1()
    for entry in solution.schedule:
        entry.gpus = 4
    need = merged_seconds(instance, 4)
    assert need == pytest.approx(2 * merged_seconds(instance, 8))
    assert sum(f"takes {need:.9g} s there" in v for v in check(instance, solution)) == 2


def test_split_entries_that_cover_the_task_pass() -> None:
    """B alone in two pieces on 8 then 4 GPUs, half its work in each, passes; one second
    less of the second piece does not."""
    instance = case(2)
    solution = schedlab.solve(instance, "titan.merge_offline")
    b = next(e for e in solution.schedule if e.job == "B")
    tasks = {t.id: t for t in titan_tasks(instance)}
    half_8 = duration(tasks["B"].duration_s, 8) / 2
    half_4 = duration(tasks["B"].duration_s, 4) / 2
    end = b.start + half_8 + half_4
    solution.schedule = [e for e in solution.schedule if e.job != "B"] + [
        ScheduleEntry(job="B", start=b.start, end=b.start + half_8, accelerator="v100", gpus=8),
        ScheduleEntry(job="B", start=b.start + half_8, end=end, accelerator="v100", gpus=4)]
    solution.objective = None
    assert check(instance, solution) == []
    solution.schedule[-1].end = end - 1.0
    (message,) = check(instance, solution)
    assert message.startswith("task B: its 2 entries do ")


def test_a_round_plan_is_judged_by_its_gpus() -> None:
    """titan.round_ilp's entries span the round, not the task: clean; a pair member on more
    GPUs than the pair can use is named."""
    from schedlab.formulations.titan.examples import round_example

    instance = round_example()
    solution = schedlab.solve(instance, "titan.round_ilp")
    assert solution.violations == [] and solution.groups
    a, b = solution.groups[0]
    tasks = {t.id: t for t in titan_tasks(instance)}
    most = tasks[a].max_gpus + tasks[b].max_gpus
    entry = next(e for e in solution.schedule if e.job == a)
    entry.gpus = most + 1
    assert any(v.startswith(f"task {a} (merged with {b}): on {most + 1} GPUs")
               and f"more than the {most} the pair can use" in v
               for v in check(instance, solution))


def titan_solutions() -> list[tuple[str, str]]:
    """(instance file, formulation) for every shipped Titan instance and Titan formulation."""
    names = sorted(n for n in formulations() if n.startswith("titan."))
    assert {"titan.merge_offline", "titan.round_ilp"} <= set(names)
    return [(path.name, name) for path in sorted(TITAN.glob("*.json")) for name in names]


@pytest.mark.parametrize(("file", "name"), titan_solutions())
def test_no_false_alarm_on_shipped_instances(file: str, name: str) -> None:
    instance = load_instance(TITAN / file)
    try:
        solution = schedlab.solve(copy.deepcopy(instance), name)
    except InputError as exc:  # e.g. merge_offline refuses arrivals after 0 s
        pytest.skip(f"{name} refuses {file}: {exc}")
    assert solution.status.has_solution
    assert check(instance, solution) == []


def test_no_false_alarm_offline_on_many_profiled_counts() -> None:
    """small-10tasks-16gpus with every arrival at 0: 11 profiled counts, max_gpus above the
    pool, merged pairs from the default model."""
    document = load_instance(TITAN / "small-10tasks-16gpus.json").model_dump(
        mode="json", by_alias=True, exclude_none=True)
    for job in document["jobs"]:
        job["arrival"] = 0.0
    instance = instance_from_dict(document)
    solution = schedlab.solve(instance, "titan.merge_offline")
    assert solution.violations == [] and len(solution.schedule) == 10
