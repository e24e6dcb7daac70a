"""``params.one_type_per_round`` ("no spread", docs/formulations/hare.md): the checker
rejects a round on two types, the MILP (hare.exact's :class:`Exact`) and the greedy keep each
round on one type, by hand and on random instances where the MILP equals the brute force of
tests/hare_brute.py; every schedule passes the checker."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hare_brute import brute_force_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hare_lp_switch import random_instance

from schedlab.check import check
from schedlab.formulations.hare.exact import Exact
from schedlab.formulations.hare.greedy import HareGreedy
from schedlab.formulations.hare.lp_bound import HareLpBound
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status

REL = 1e-7


def _instance(jobs: list[dict[str, Any]], gpus: dict[str, int], **params: Any) -> Instance:
    return instance_from_dict({
        "name": "t", "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs, "params": params})


def _one_type(instance: Instance) -> Instance:
    return instance.model_copy(update={"params": instance.params.model_copy(
        update={"one_type_per_round": True})})


def _types_per_round(solution: Solution) -> dict[tuple[str, int], set[str]]:
    out: dict[tuple[str, int], set[str]] = {}
    for e in solution.schedule:
        assert e.round is not None and e.accelerator is not None
        out.setdefault((e.job, e.round), set()).add(e.accelerator)
    return out


#: Two rounds of two tasks, v100 3 s, k80 5 s, one GPU of each: spread, each round ends at 5
#: (C = 10); one type per round, both tasks on the v100 end at 6 (C = 12).
SPREADS = [{"id": "a", "rounds": 2, "tasks_per_round": 2,
            "task_seconds": {"v100": 3.0, "k80": 5.0}}]


def test_checker_rejects_a_round_on_two_types() -> None:
    spread = _instance(SPREADS, {"v100": 1, "k80": 1})
    solution = Exact().solve(spread)
    assert solution.objective == pytest.approx(10.0, rel=REL)
    assert check(spread, solution) == []
    violations = check(_one_type(spread), solution)
    assert "job a: round 0 runs on k80, v100 (one_type_per_round: one GPU type per round)" \
        in violations
    assert "job a: round 1 runs on k80, v100 (one_type_per_round: one GPU type per round)" \
        in violations


def test_exact_keeps_each_round_on_one_type() -> None:
    inst = _instance(SPREADS, {"v100": 1, "k80": 1}, one_type_per_round=True)
    solution = Exact().solve(inst)
    assert solution.status == Status.OPTIMAL
    assert solution.objective == pytest.approx(12.0, rel=REL)
    assert check(inst, solution) == []
    assert all(len(t) == 1 for t in _types_per_round(solution).values())


def test_greedy_keeps_each_round_on_one_type() -> None:
    # the plain greedy spreads each round (task 2 ends at 5 on the k80, 6 on the v100);
    # with the param or the option: both on the v100 (trial ends 6 vs 10 on the k80)
    spread = _instance(SPREADS, {"v100": 1, "k80": 1})
    plain = HareGreedy().solve(spread)
    assert plain.objective == pytest.approx(10.0, rel=REL)
    inst = _one_type(spread)
    for solution in (HareGreedy().solve(inst), HareGreedy(one_type_per_round=True).solve(spread),
                     HareGreedy(backfill=True).solve(inst)):
        assert solution.objective == pytest.approx(12.0, rel=REL)
        assert check(inst, solution) == []
        assert _types_per_round(solution) == {("a", 0): {"v100"}, ("a", 1): {"v100"}}


def test_greedy_picks_the_type_that_ends_the_round_first() -> None:
    # b (w 10, v100 only) runs first on the v100 until 4; a arrives at 2 with a round of two
    # tasks: on the v100 after b they end 4 + 2 + 2 = 8, on the k80 2 + 2.5 + 2.5 = 7
    jobs = [{"id": "a", "arrival": 2.0, "rounds": 1, "tasks_per_round": 2,
             "task_seconds": {"v100": 2.0, "k80": 2.5}},
            {"id": "b", "weight": 10.0, "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 4.0}}]
    inst = _instance(jobs, {"v100": 1, "k80": 1}, one_type_per_round=True)
    solution = HareGreedy().solve(inst)
    assert check(inst, solution) == []
    assert _types_per_round(solution)[("a", 0)] == {"k80"}
    assert solution.metrics["completion_s"] == {"a": 7.0, "b": 4.0}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_instances_exact_equals_brute_force(seed: int) -> None:
    inst = _one_type(random_instance(random.Random(seed)))
    optimum, _ = brute_force_optimum(inst)
    exact = Exact().solve(inst)
    assert exact.status == Status.OPTIMAL
    assert exact.objective == pytest.approx(optimum, rel=REL)
    bound = HareLpBound().solve(inst).objective
    assert bound is not None and bound <= optimum * (1 + REL)
    for solution in (exact, HareGreedy().solve(inst), HareGreedy(backfill=True).solve(inst)):
        assert check(inst, solution) == []
        assert all(len(t) == 1 for t in _types_per_round(solution).values())
        assert solution.objective is not None and solution.objective >= optimum * (1 - REL)


def test_the_param_defaults_to_false_and_is_a_boolean() -> None:
    from schedlab.errors import InputError

    gpus = {"v100": 1, "k80": 1}
    assert _instance(SPREADS, gpus).params.one_type_per_round is False
    assert _instance(SPREADS, gpus, one_type_per_round=True).params.one_type_per_round
    with pytest.raises(InputError, match="one_type_per_round"):
        _instance(SPREADS, gpus, one_type_per_round="sometimes")
