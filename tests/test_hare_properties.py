"""Hare's three methods agree on random small instances (the random instances of
test_hare_exact: <= 3 jobs x 2 GPUs x 2 rounds, with and without switch costs and arrivals):
hare.lp_bound <= hare.exact_milp (proven optimal) <= hare.greedy, the bound is never below the
trivial one sum_j w_j (r_j + R_j min_k p[j,k]), and every schedule passes the checker.
(hare.exact, the CP-SAT model, is held to the same in tests/test_hare_cpsat.py.)"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from test_hare_exact import small_instances

from schedlab.check import check
from schedlab.formulations.hare.model import hare_data
from schedlab.instance import Instance
from schedlab.registry import get_formulation
from schedlab.solution import Status

#: Relative slack of the comparisons (solver tolerances; the values come from different
#: solvers' arithmetic).
REL = 1e-7


def bound_exact_greedy(instance: Instance) -> tuple[float, float, float]:
    """(lp_bound, exact optimum, greedy) on ``instance``, each solution checked."""
    bound = get_formulation("hare.lp_bound").solve(instance)
    exact = get_formulation("hare.exact_milp").solve(instance)
    greedy = get_formulation("hare.greedy").solve(instance)
    assert bound.status == Status.OPTIMAL and exact.status == Status.OPTIMAL
    assert greedy.status == Status.FEASIBLE
    for solution in (exact, greedy):
        assert check(instance, solution) == []
    assert bound.objective is not None and exact.objective is not None
    assert greedy.objective is not None
    return bound.objective, exact.objective, greedy.objective


def _assert_ordered(instance: Instance) -> None:
    lower, optimum, heuristic = bound_exact_greedy(instance)
    trivial = hare_data(instance, "hare.lp_bound").trivial_bound()
    assert trivial <= lower * (1 + REL)
    assert lower <= optimum * (1 + REL)
    assert optimum <= heuristic * (1 + REL)


_SETTINGS = settings(max_examples=10, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(small_instances(switching=False, arrivals=False))
def test_bound_exact_greedy_plain(instance: Instance) -> None:
    _assert_ordered(instance)


@_SETTINGS
@given(small_instances(switching=True, arrivals=False))
def test_bound_exact_greedy_with_switch_costs(instance: Instance) -> None:
    _assert_ordered(instance)


@_SETTINGS
@given(small_instances(switching=True, arrivals=True))
def test_bound_exact_greedy_with_switch_costs_and_arrivals(instance: Instance) -> None:
    _assert_ordered(instance)


def test_exact_on_a_mip_that_presolve_solves_returns_the_optimum_it_reports() -> None:
    """Two one-task jobs on 2 V100s (a K80 pool of 0): j1 (3 s, arrives at 0) and j0 (1 s,
    arrives at 1) run side by side, sum_j C_j = 3 + 2 = 5 by hand.  HiGHS 1.16 solved this
    MIP in presolve and reported 5 while handing back the serial start (j0 after j1: 7); the
    matrix model notices the mismatch and solves again without presolve."""
    from schedlab.instance import instance_from_dict

    jobs = [{"id": "j0", "arrival": 1.0, "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 1.0}, "switch_seconds": {"v100": 0.0}},
            {"id": "j1", "arrival": 0.0, "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 3.0}, "switch_seconds": {"v100": 0.0}}]
    instance = instance_from_dict({
        "schema": "schedlab/instance@1", "name": "presolved",
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 0}}},
        "jobs": jobs})
    lower, optimum, heuristic = bound_exact_greedy(instance)
    assert optimum == 5.0 and lower <= 5.0 and heuristic == 5.0
