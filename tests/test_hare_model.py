"""Hare's instance fields and shared model (schedlab.formulations.hare.model), by hand."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from schedlab.errors import InputError
from schedlab.formulations.hare.model import (
    Task,
    completion_times,
    hare_data,
    hare_solution,
    objective_of_schedule,
    tasks_from_schedule,
    weighted_completion,
    weighted_jct,
)
from schedlab.instance import instance_from_dict
from schedlab.solution import Status


def document() -> dict[str, Any]:
    """Two jobs on 1 V100 + 2 K80 (+ an empty T4 pool)."""
    return {
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 2},
                                     "t4": {"count": 0}}},
        "jobs": [
            {"id": "a", "weight": 2.0, "rounds": 2, "tasks_per_round": 2,
             "task_seconds": {"v100": 1.0, "k80": 3.0, "t4": 0.5},
             "switch_seconds": {"k80": 0.25}},
            {"id": "b", "arrival": 1.0, "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"k80": 2.0}, "switch_seconds": 0.5, "model_memory_gb": 1.5},
        ],
    }


def test_arrays_read_by_hand() -> None:
    data = hare_data(instance_from_dict(document()), "hare.test")
    assert data.types == ["v100", "k80", "t4"]
    assert data.gpus.tolist() == [1, 2, 0]
    # t4 has no GPU: unusable even where task_seconds lists it
    assert data.seconds[0].tolist() == [1.0, 3.0, np.inf]
    assert data.seconds[1].tolist() == [np.inf, 2.0, np.inf]
    assert data.switch.tolist() == [[0.0, 0.25, 0.0], [0.5, 0.5, 0.5]]
    assert data.min_seconds.tolist() == [1.0, 2.0]
    # 2 (0 + 2 x 1) + 1 (1 + 1 x 2) = 7
    assert data.trivial_bound() == pytest.approx(7.0, rel=1e-12)
    assert data.total_tasks == 5


def test_scalar_switch_seconds_means_every_type() -> None:
    job = instance_from_dict(document()).jobs[1]
    assert [job.switch_seconds_on(k) for k in ("v100", "k80", "t4")] == [0.5, 0.5, 0.5]
    assert instance_from_dict(document()).to_dict()["jobs"][1]["switch_seconds"] == 0.5


def test_missing_field_is_named() -> None:
    doc = document()
    del doc["jobs"][1]["tasks_per_round"]
    with pytest.raises(InputError) as err:
        hare_data(instance_from_dict(doc), "hare.test")
    assert err.value.field == "jobs[1].tasks_per_round"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"switch_seconds": -1.0}, "jobs[0].switch_seconds", ">= 0"),
    ({"switch_seconds": {"v100": -2.0}}, "jobs[0].switch_seconds", "on v100"),
    ({"switch_seconds": {"a100": 1.0}}, "jobs[0].switch_seconds.a100", "unknown accelerator"),
    ({"task_seconds": {"t4": 1.0}}, "jobs[0].task_seconds", "no GPU type present"),
    ({"rounds": 0}, "jobs[0].rounds", "greater than or equal to 1"),
    ({"weight": -1.0}, "jobs[0].weight", "greater than 0"),
    ({"task_seconds": {"v100": -1.0}}, "jobs[0].task_seconds.v100", "greater than 0"),
    ({"model_memory_gb": -1.0}, "jobs[0].model_memory_gb", "greater than 0"),
])
def test_bad_hare_fields(change: dict[str, Any], field: str, words: str) -> None:
    doc = copy.deepcopy(document())
    doc["jobs"][0].update(change)
    with pytest.raises(InputError) as err:
        instance_from_dict(doc, source="h.json")
    assert err.value.field == field
    assert words in str(err.value)


def test_solution_of_tasks_by_hand() -> None:
    instance = instance_from_dict(document())
    data = hare_data(instance, "hare.test")
    tasks = [Task(0, 0, 0, 0, 0, 0.0, 1.0), Task(0, 0, 1, 1, 0, 0.0, 3.0),
             Task(1, 0, 0, 1, 1, 1.0, 3.0),
             Task(0, 1, 0, 0, 0, 3.0, 4.0), Task(0, 1, 1, 0, 0, 4.0, 5.0)]
    completion = completion_times(data, tasks)
    assert completion.tolist() == [5.0, 3.0]
    assert weighted_completion(data, completion) == pytest.approx(2 * 5 + 3, rel=1e-12)
    assert weighted_jct(data, completion) == pytest.approx(2 * 5 + 2, rel=1e-12)
    solution = hare_solution(instance, "hare.test", data, tasks, status=Status.FEASIBLE,
                             bound=6.5)
    assert solution.objective == pytest.approx(13.0, rel=1e-12)
    assert solution.metrics["bound_ratio"] == pytest.approx(2.0, rel=1e-12)
    assert solution.gap == pytest.approx(0.5, rel=1e-12)
    assert len(solution.schedule) == 5
    back = tasks_from_schedule(data, solution.schedule)
    assert back is not None and sorted(back, key=lambda t: (t.job, t.round, t.index)) \
        == sorted(tasks, key=lambda t: (t.job, t.round, t.index))
    assert objective_of_schedule(instance, solution) == pytest.approx(13.0, rel=1e-12)


def test_a_bound_above_a_feasible_value_is_reconciled_or_dropped() -> None:
    from schedlab.formulations.hare.model import reconcile_bound
    from schedlab.solution import Status

    # below the value: kept as it is
    assert reconcile_bound(99.0, 100.0, Status.OPTIMAL) == (99.0, Status.OPTIMAL, None)
    # 1e-8 relative above: the solver's tolerances, set to the value, noted
    bound, status, note = reconcile_bound(100.000001, 100.0, Status.OPTIMAL)
    assert (bound, status) == (100.0, Status.OPTIMAL) and note and "within" in note
    # 1% above: impossible for a valid bound; none claimed, optimal not claimed either
    bound, status, note = reconcile_bound(101.0, 100.0, Status.OPTIMAL)
    assert (bound, status) == (None, Status.FEASIBLE) and note and "beyond" in note
    assert reconcile_bound(101.0, 100.0, Status.TIME_LIMIT)[1] == Status.TIME_LIMIT
