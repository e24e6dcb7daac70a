"""tests/hare_brute.py: the brute-force optimum on hand-derived cases, against the plain
exhaustive enumerator of test_hare_exact (every assignment and every order) on random
instances, with ``one_type_per_round`` too; every schedule it returns passes the checker and
has the value it reports."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hare_brute import brute_force_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hare_exact import _earliest_value, small_instances

from schedlab.check import check
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status

REL = 1e-9


def _instance(jobs: list[dict[str, Any]], gpus: dict[str, int], **params: Any) -> Instance:
    return instance_from_dict({
        "name": "t", "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs, "params": params})


def _job(name: str, seconds: dict[str, float], *, rounds: int = 1, per: int = 1,
         **extra: Any) -> dict[str, Any]:
    return {"id": name, "rounds": rounds, "tasks_per_round": per, "task_seconds": seconds,
            **extra}


def optimum_checked(instance: Instance) -> float:
    """The brute-force optimum, its schedule checked and re-valued."""
    value, schedule = brute_force_optimum(instance)
    solution = Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                        formulation="brute", status=Status.OPTIMAL, objective=value,
                        schedule=[ScheduleEntry(gpus=1, **entry) for entry in schedule])
    assert check(instance, solution) == []
    ends = {job.id: job.arrival for job in instance.jobs}
    for entry in schedule:
        ends[entry["job"]] = max(ends[entry["job"]], entry["end"])
    assert sum(job.weight * ends[job.id] for job in instance.jobs) == pytest.approx(value,
                                                                                   rel=REL)
    assert len(schedule) == sum((job.rounds or 0) * (job.tasks_per_round or 0)
                                for job in instance.jobs)
    return value


def exhaustive(instance: Instance) -> float:
    """Every assignment (rounds on one type with ``one_type_per_round``) and every order on
    each GPU, timed at earliest starts (test_hare_exact's enumerator plus that filter)."""
    gpus = [(acc, i) for acc, pool in instance.cluster.accelerators.items()
            for i in range(pool.count)]
    tasks = [(j, q) for j, job in enumerate(instance.jobs)
             for q in range(job.rounds or 0) for _ in range(job.tasks_per_round or 0)]
    usable = [[g for g, (acc, _) in enumerate(gpus)
               if acc in (instance.jobs[j].task_seconds or {})] for j, _ in tasks]
    best = math.inf
    for assignment in itertools.product(*usable):
        if instance.params.one_type_per_round:
            types: dict[tuple[int, int], set[str]] = {}
            for t, g in enumerate(assignment):
                types.setdefault(tasks[t], set()).add(gpus[g][0])
            if any(len(s) > 1 for s in types.values()):
                continue
        on_gpu = [[t for t in range(len(tasks)) if assignment[t] == g] for g in range(len(gpus))]
        for orders in itertools.product(*(itertools.permutations(s) for s in on_gpu)):
            best = min(best, _earliest_value(instance, tasks, gpus, assignment, orders,
                                             instance.params.switch_on_first_task))
    return best


# ------------------------------------------------------------------------------ by hand


def test_incoming_job_pays_the_gap() -> None:
    # one GPU: a (2 s, sigma 5) then b (3 s, sigma 1): 2 + 6 = 8; b then a: 3 + 10 = 13
    inst = _instance([_job("a", {"v100": 2.0}, switch_seconds=5.0),
                      _job("b", {"v100": 3.0}, switch_seconds=1.0)], {"v100": 1})
    assert optimum_checked(inst) == pytest.approx(8.0, rel=REL)


def test_first_task_rule_both_ways() -> None:
    jobs = [_job("a", {"v100": 2.0}, switch_seconds=1.0)]
    assert optimum_checked(_instance(jobs, {"v100": 1})) == pytest.approx(2.0, rel=REL)
    assert optimum_checked(_instance(jobs, {"v100": 1}, switch_on_first_task=True)) == \
        pytest.approx(3.0, rel=REL)


def test_the_optimum_may_keep_a_gpu_idle() -> None:
    # one GPU: a (arrives 0, 10 s, w 1), b (arrives 1, 1 s, w 100).  The only delay-free
    # schedule runs a at 0: 10 + 100 * 11 = 1110.  Waiting for b: 100 * 2 + 12 = 212.
    inst = _instance([_job("a", {"v100": 10.0}),
                      _job("b", {"v100": 1.0}, weight=100.0, arrival=1.0)], {"v100": 1})
    assert optimum_checked(inst) == pytest.approx(212.0, rel=REL)


def test_a_gap_overlaps_the_wait_for_an_arrival() -> None:
    # a (4 s, sigma 6) then b (arrives 5, 2 s, sigma 3): b at max(5, 4 + 3) = 7 -> 4 + 9 = 13
    inst = _instance([_job("a", {"v100": 4.0}, switch_seconds=6.0),
                      _job("b", {"v100": 2.0}, arrival=5.0, switch_seconds=3.0)], {"v100": 1})
    assert optimum_checked(inst) == pytest.approx(13.0, rel=REL)


def test_same_job_back_to_back_pays_nothing_and_jobs_interleave_badly() -> None:
    # one GPU, sigma 10 each: a0 a1 b -> 2 + 13 = 15; b a0 a1 -> 1 + 13 = 14 (a waits its gap
    # once, b none as the first task); a0 b a1 -> 23 + 12 = 35.  Optimum 14.
    inst = _instance([_job("a", {"v100": 1.0}, rounds=2, switch_seconds=10.0),
                      _job("b", {"v100": 1.0}, switch_seconds=10.0)], {"v100": 1})
    assert optimum_checked(inst) == pytest.approx(14.0, rel=REL)


def test_a_round_spreads_unless_one_type_per_round() -> None:
    # two rounds of two tasks, v100 3 s, k80 5 s, one GPU each: spread, each round ends at 5
    # (C = 10); one type per round: both tasks on the v100 end at 6 (C = 12; on the k80: 20)
    jobs = [_job("a", {"v100": 3.0, "k80": 5.0}, rounds=2, per=2)]
    assert optimum_checked(_instance(jobs, {"v100": 1, "k80": 1})) == pytest.approx(10.0)
    assert optimum_checked(_instance(jobs, {"v100": 1, "k80": 1}, one_type_per_round=True)) \
        == pytest.approx(12.0, rel=REL)


def test_one_type_per_round_may_change_type_between_rounds() -> None:
    # a: 2 rounds of 2 tasks, v100 2 s, k80 3 s; b (w 10): one 4 s task, v100 only; one GPU
    # of each type.  b runs first on the v100 (0-4, 40).  One type per round: a's round 0 on
    # the k80 (0-3, 3-6), round 1 on the v100 (6-8, 8-10): 40 + 10 = 50 (round 1 on the k80
    # ends at 12).  Spread: round 0 ends at 6, round 1 on v100 6-8 and k80 6-9: 40 + 9 = 49.
    jobs = [_job("a", {"v100": 2.0, "k80": 3.0}, rounds=2, per=2),
            _job("b", {"v100": 4.0}, weight=10.0)]
    assert optimum_checked(_instance(jobs, {"v100": 1, "k80": 1}, one_type_per_round=True)) \
        == pytest.approx(50.0, rel=REL)
    assert optimum_checked(_instance(jobs, {"v100": 1, "k80": 1})) == pytest.approx(49.0)


def test_interchangeable_jobs_and_gpus() -> None:
    # 5 equal one-task jobs (2 s) on 2 GPUs: ends 2, 2, 4, 4, 6 -> 18
    jobs = [_job(f"j{i}", {"v100": 2.0}) for i in range(5)]
    assert optimum_checked(_instance(jobs, {"v100": 2})) == pytest.approx(18.0, rel=REL)


def test_a_type_without_gpus_is_never_used() -> None:
    jobs = [_job("a", {"v100": 3.0, "k80": 1.0})]
    assert optimum_checked(_instance(jobs, {"v100": 1, "k80": 0})) == pytest.approx(3.0)


def test_node_limit() -> None:
    jobs = [_job(f"j{i}", {"v100": 1.0 + i}) for i in range(6)]
    with pytest.raises(RuntimeError, match="nodes"):
        brute_force_optimum(_instance(jobs, {"v100": 2}), max_nodes=3)


# ------------------------------------------------------------------------ random instances

_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(small_instances(switching=True, arrivals=True), st.booleans())
def test_equals_the_exhaustive_enumerator(instance: Instance, one_type: bool) -> None:
    instance = instance.model_copy(update={"params": instance.params.model_copy(
        update={"one_type_per_round": one_type})})
    assert optimum_checked(instance) == pytest.approx(exhaustive(instance), rel=REL)
