"""Replay plans and the prediction on them, against values worked out by hand."""

from __future__ import annotations

import pytest

from schedlab.errors import InputError
from schedlab.executor.plan import build_plan, parse_device_map
from schedlab.executor.predict import predict
from schedlab.instance import instance_from_dict
from schedlab.solution import Solution


def _instance(**job_a: object) -> dict:
    a = {"id": "a", "job_type": "lstm/tiny@4", "total_steps": 150, "throughput": {"cpu": 10},
         "switch_overhead_s": 2.0} | job_a
    b = {"id": "b", "job_type": "recommender@8", "total_steps": 30, "throughput": {"cpu": 5}}
    return {"schema": "schedlab/instance@1", "cluster": {"accelerators": {"cpu": {"count": 2}}},
            "jobs": [a, b], "params": {"round_s": 10, "num_rounds": 3}}


def _rounds(*rounds: list[tuple[str, list[int]]]) -> Solution:
    return Solution.model_validate({
        "instance": {"name": "t", "hash": ""}, "formulation": "f", "status": "feasible",
        "rounds": [[{"job": j, "accelerator": "cpu", "gpus": len(ids), "gpu_ids": ids}
                    for j, ids in r] for r in rounds]})


PLAN = ([("a", [0]), ("b", [1])], [("a", [1])], [("a", [1])])


def test_rounds_become_segments_on_slots() -> None:
    plan = build_plan(_rounds(*PLAN), instance_from_dict(_instance()))
    assert plan.kind == "rounds"
    assert plan.slots == [("cpu", 0), ("cpu", 1)]
    assert [(s.job, s.slots, s.start_s, s.end_s) for s in plan.segments] == [
        ("a", (("cpu", 0),), 0.0, 10.0), ("b", (("cpu", 1),), 0.0, 10.0),
        ("a", (("cpu", 1),), 10.0, 20.0), ("a", (("cpu", 1),), 20.0, 30.0)]
    assert plan.jobs["b"].spec.name == "recommender/tiny@8"
    assert plan.jobs["a"].work_steps == 150


def test_prediction_by_hand_time_scale_1() -> None:
    plan = build_plan(_rounds(*PLAN), instance_from_dict(_instance()))
    out = predict(plan, 1.0)
    # round 0: a runs 10 steps/s x 10 s = 100 (50 left); b needs 30 / 5 = 6 s -> JCT 6.
    # round 1: a moved from cpu:0 to cpu:1 -> pays 2 s, then 50 steps take 5 s -> 17.
    assert out.segment_steps == {0: 100.0, 1: 30.0, 2: 50.0, 3: 0.0}
    assert out.segment_overhead_s[2] == 2.0
    assert out.finish_s["b"] == pytest.approx(6.0, rel=1e-12)
    assert out.finish_s["a"] == pytest.approx(17.0, rel=1e-12)
    assert out.whole_steps(plan) == {0: 100, 1: 30, 2: 50, 3: 0}


def test_prediction_by_hand_time_scale_2() -> None:
    plan = build_plan(_rounds(*PLAN), instance_from_dict(_instance()))
    out = predict(plan, 2.0)
    # 5 steps per instance second: round 0 -> 50; round 1 (moved) -> 5 x 8 = 40; round 2
    # (same slot: no overhead) -> 50; 140 < 150: not finished.  b: 2.5 x 10 = 25 < 30.
    assert out.steps["a"] == pytest.approx(140.0, rel=1e-12)
    assert out.steps["b"] == pytest.approx(25.0, rel=1e-12)
    assert out.finish_s == {"a": None, "b": None}


def test_scale_work_gives_the_instance_own_jcts() -> None:
    """--scale-work at X = 2: a runs ceil(150 / 2) = 75 real steps, b 15, at T/X per instance
    second: the JCTs are the time-scale-1 ones worked out above (b 6 s, a 17 s)."""
    plan = build_plan(_rounds(*PLAN), instance_from_dict(_instance()), work_scale=2.0)
    assert (plan.jobs["a"].work_steps, plan.jobs["b"].work_steps) == (75, 15)
    out = predict(plan, 2.0)
    assert out.finish_s["b"] == pytest.approx(6.0, rel=1e-12)
    assert out.finish_s["a"] == pytest.approx(17.0, rel=1e-12)
    # a work that does not divide: 151 steps -> ceil(75.5) = 76
    odd = build_plan(_rounds(*PLAN), instance_from_dict(_instance(total_steps=151)),
                     work_scale=2.0)
    assert odd.jobs["a"].work_steps == 76


def test_schedule_entries_become_segments() -> None:
    solution = Solution.model_validate({
        "instance": {"name": "t", "hash": ""}, "formulation": "f", "status": "feasible",
        "schedule": [{"job": "b", "start": 4, "end": 12, "accelerator": "cpu", "gpus": 1,
                      "gpu_ids": [0]},
                     {"job": "a", "start": 0, "end": 4, "accelerator": "cpu", "gpus": 2}]})
    plan = build_plan(solution, instance_from_dict(_instance()))
    assert plan.kind == "schedule" and plan.round_s is None
    assert [(s.job, s.slots, s.start_s) for s in plan.segments] == [
        ("a", (("cpu", 0), ("cpu", 1)), 0.0), ("b", (("cpu", 0),), 4.0)]
    out = predict(plan, 1.0)
    assert out.finish_s["b"] == pytest.approx(10.0, rel=1e-12)  # 4 + 30 / 5


@pytest.mark.parametrize(("job_a", "field"), [
    ({"job_type": None}, "jobs[0].job_type"),
    ({"job_type": "alexnet@3"}, "jobs[0].job_type"),
    ({"job_type": "lstm/huge@3"}, "jobs[0].job_type"),
    ({"total_steps": None}, "jobs[0].total_steps"),
])
def test_bad_jobs_name_file_and_field(job_a: dict, field: str) -> None:
    with pytest.raises(InputError) as caught:
        build_plan(_rounds(*PLAN), instance_from_dict(_instance(**job_a)),
                   instance_file="inst.json")
    assert caught.value.file == "inst.json"
    assert caught.value.field == field


def test_bad_placements_name_the_field() -> None:
    instance = instance_from_dict(_instance())
    with pytest.raises(InputError, match="gpu_ids") as caught:
        build_plan(_rounds([("a", [2])]), instance, solution_file="s.json")
    assert caught.value.field == "rounds[0][0].gpu_ids"
    with pytest.raises(InputError, match="used twice"):
        build_plan(_rounds([("a", [0]), ("b", [0])]), instance)
    with pytest.raises(InputError, match="unknown job"):
        build_plan(_rounds([("zz", [0])]), instance)
    empty = Solution.model_validate({"instance": {"name": "t", "hash": ""},
                                     "formulation": "f", "status": "feasible"})
    with pytest.raises(InputError, match="neither rounds"):
        build_plan(empty, instance)


def test_device_map() -> None:
    assert parse_device_map("h100=cuda:0,h100:1=cuda:1") == {("h100", 0): "cuda:0",
                                                            ("h100", 1): "cuda:1"}
    assert parse_device_map(None) == {}
    with pytest.raises(InputError, match="LABEL"):
        parse_device_map("h100=gpu0")
