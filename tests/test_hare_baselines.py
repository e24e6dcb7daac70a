"""Hare's offline baselines (schedlab.formulations.hare.baselines): schedules by hand, the
checker on generated workloads."""

from __future__ import annotations

from typing import Any

import pytest

from schedlab.check import check
from schedlab.formulations.hare.baselines import SchedAllox, SchedHomo
from schedlab.instance import instance_from_dict
from schedlab.solution import Status
from schedlab.testing import check_formulation
from schedlab.workloads.hare import example_instances, generate_hare_instance


def two_jobs() -> dict[str, Any]:
    """1 V100 + 1 K80; a: 1 round of 2 tasks (1 s on V100, 3 s on K80); b: 2 rounds of 1
    task (2 s on either), switch 0.5 s, weight 2."""
    return {
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [
            {"id": "a", "weight": 1.0, "rounds": 1, "tasks_per_round": 2,
             "task_seconds": {"v100": 1.0, "k80": 3.0}},
            {"id": "b", "weight": 2.0, "rounds": 2, "tasks_per_round": 1,
             "task_seconds": {"v100": 2.0, "k80": 2.0}, "switch_seconds": 0.5},
        ],
    }


def spans(solution: Any) -> set[tuple[str, int, str, float, float]]:
    return {(e.job, e.round, e.accelerator, e.start, e.end) for e in solution.schedule}


def test_sched_homo_by_hand() -> None:
    # Type-blind WSPT: b 2/(2 x 1 x 2) = 0.5 before a 1/(1 x 2 x 2) = 0.25.  b's rounds take
    # the V100 (ties: type order) 0-2, 2-4; a's tasks start earliest on the idle K80 (0, then
    # 3; the V100 would start at 4 + 0.5) although the V100 is 3x faster: C = (6, 4).
    inst = instance_from_dict(two_jobs())
    sol = SchedHomo().solve(inst)
    assert sol.status == Status.FEASIBLE and sol.bound is None
    assert spans(sol) == {("b", 0, "v100", 0.0, 2.0), ("b", 1, "v100", 2.0, 4.0),
                          ("a", 0, "k80", 0.0, 3.0), ("a", 0, "k80", 3.0, 6.0)}
    assert sol.objective == pytest.approx(1 * 6 + 2 * 4, rel=1e-12)
    assert check(inst, sol) == []


def test_sched_allox_by_hand() -> None:
    # WSPT on the fastest type: a 1/(1 x 2 x 1) = 0.5 ties b 2/(2 x 1 x 2) = 0.5, a first.
    # a on the V100 ends at 2 (on the K80 alone: 6); b on the V100 would pay the switch and
    # end at 6.5, on the K80 it ends at 4: C = (2, 4).
    inst = instance_from_dict(two_jobs())
    sol = SchedAllox().solve(inst)
    assert spans(sol) == {("a", 0, "v100", 0.0, 1.0), ("a", 0, "v100", 1.0, 2.0),
                          ("b", 0, "k80", 0.0, 2.0), ("b", 1, "k80", 2.0, 4.0)}
    assert sol.objective == pytest.approx(1 * 2 + 2 * 4, rel=1e-12)
    assert sol.metrics["weighted_jct"] == pytest.approx(10.0, rel=1e-12)
    assert check(inst, sol) == []


def test_first_task_pays_switch_when_asked() -> None:
    doc = two_jobs()
    doc["params"] = {"switch_on_first_task": True}
    inst = instance_from_dict(doc)
    # Allox: a (no switch cost) as before; b on the K80 now starts at 0.5: ends 4.5.
    sol = SchedAllox().solve(inst)
    assert ("b", 1, "k80", 2.5, 4.5) in spans(sol)
    assert check(inst, sol) == []


@pytest.mark.parametrize("method", [SchedHomo, SchedAllox])
def test_checker_accepts_generated_schedules(method: type) -> None:
    for inst in (example_instances()["small-6jobs-4gpus.json"],
                 generate_hare_instance(60, seed=4, arrivals="poisson",
                                        cluster={"k80": 6, "p100": 4, "v100": 4}),
                 generate_hare_instance(40, seed=5, switch="default",
                                        cluster={"k80": 3, "v100": 2})):
        sol = method().solve(inst)
        assert check(inst, sol) == []
        assert len(sol.schedule) == sum(j.rounds * j.tasks_per_round for j in inst.jobs)


def test_allox_never_spreads_a_job_across_types() -> None:
    inst = generate_hare_instance(60, seed=6, cluster={"k80": 6, "p100": 4, "v100": 4})
    sol = SchedAllox().solve(inst)
    types: dict[str, set[str | None]] = {}
    for e in sol.schedule:
        types.setdefault(e.job, set()).add(e.accelerator)
    assert all(len(t) == 1 for t in types.values())


@pytest.mark.parametrize("name", ["hare.sched_homo", "hare.sched_allox"])
def test_conformance_kit(name: str) -> None:
    report = check_formulation(name)
    assert {"solve", "checker", "objective", "status", "json"} <= set(report.passed)
