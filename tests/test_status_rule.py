"""The status rule (schedlab.solution.settle_status) every solve ends with, and bounds that
are proven or absent, driven over every registered formulation at short time limits."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab.formulations.gavel import fast as gavel_fast
from schedlab.formulations.gavel.base import GavelPolicy
from schedlab.formulations.gavel.fast import solve_max_min_fast
from schedlab.instance import Instance
from schedlab.registry import formulations, get_formulation
from schedlab.solution import OPTIMAL_GAP_TOLERANCE, InstanceRef, Solution, Status, settle_status
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

ROOT = Path(__file__).parent.parent
NAMES = sorted(formulations())
#: Slack of the bound-side comparison, relative to max(1, |objective|).
SLACK = 1e-6

_examples: dict[str, Instance] = {}
_optima: dict[str, float | None] = {}


def example_of(name: str) -> Instance:
    if name not in _examples:
        _examples[name] = get_formulation(name).example_instance()
    return _examples[name]


def optimum_of(name: str) -> float | None:
    """The example's proven optimum (solved without a time limit), None when not proven."""
    if name not in _optima:
        sol = get_formulation(name).solve(example_of(name))
        _optima[name] = sol.objective if sol.status == Status.OPTIMAL else None
    return _optima[name]


def solution(status: Status, objective: float | None, bound: float | None,
             gap: float | None, **metrics: float) -> Solution:
    return Solution(instance=InstanceRef(name="x", hash="h"), formulation="f", status=status,
                    objective=objective, bound=bound, gap=gap, metrics=metrics)


def test_optimal_within_the_default_tolerance_stands() -> None:
    sol = settle_status(solution(Status.OPTIMAL, 1.0, 1.00005, 5e-5))
    assert sol.status == Status.OPTIMAL and not sol.diagnostics


def test_optimal_at_a_loose_requested_gap_is_feasible() -> None:
    sol = settle_status(solution(Status.OPTIMAL, 1.0, 1.09, 0.09, gap_tolerance=0.5))
    assert sol.status == Status.FEASIBLE
    assert sol.diagnostics == ["status: feasible, not optimal: gap 0.09 is not within the "
                               "optimality tolerance 0.0001; requested --mip-gap 0.5"]


def test_a_smaller_stated_tolerance_wins() -> None:
    sol = settle_status(solution(Status.OPTIMAL, 1.0, 1.00005, 5e-5, gap_tolerance=1e-6))
    assert sol.status == Status.FEASIBLE


def test_no_bound_no_gap_no_optimal() -> None:
    sol = settle_status(solution(Status.OPTIMAL, 1.0, None, 0.0))
    assert sol.status == Status.FEASIBLE and sol.gap is None
    sol = settle_status(solution(Status.TIME_LIMIT, 1.0, math.inf, 0.0))
    assert sol.bound is None and sol.gap is None


def judge(name: str, sol: Solution, optimum: float | None = None) -> None:
    """No optimal without a gap within tolerance; no bound on the wrong side of the objective
    nor of the proven ``optimum``; a gap only with a bound; a heuristic never optimal."""
    if sol.status == Status.OPTIMAL:
        assert sol.gap is not None and sol.gap <= OPTIMAL_GAP_TOLERANCE * (1 + 1e-9), sol
        assert sol.solver != "none", sol
    if sol.gap is not None:
        assert sol.bound is not None and sol.objective is not None, sol
    if sol.bound is None or sol.objective is None:
        return
    sense = get_formulation(name).objective_sense
    slack = SLACK * max(1.0, abs(sol.objective))
    best = sol.objective if optimum is None else optimum
    if sense == "maximize":
        assert sol.bound >= max(sol.objective, best) - slack, sol
    else:
        assert sense == "minimize", name
        assert sol.bound <= min(sol.objective, best) + slack, sol


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(log_limit=st.floats(min_value=-4.0, max_value=0.0))
@example(log_limit=-4.0)
def test_short_time_limits_never_overclaim(name: str, log_limit: float) -> None:
    # no exception of any kind: a sub-solve stopped by its time limit is a status, not a raise
    options = SolverOptions(time_limit_s=10.0**log_limit)
    sol = get_formulation(name).solve(example_of(name), options)
    judge(name, sol, optimum_of(name))


@pytest.mark.parametrize("name", ["gavel.max_min_fairness", "gavel.max_min_fairness_packed"])
def test_trace_1000_at_one_millisecond_invents_no_bound(name: str) -> None:
    """The optimum is 0.135: a bound of the primal value 0 with gap 0 would read as proven."""
    sol = schedlab.solve(ROOT / "instances" / "gavel" / "trace-1000.json.gz", name,
                         time_limit=1e-3, run_check=False)
    judge(name, sol, optimum=0.1351258)
    if sol.gap == 0:
        assert sol.status == Status.OPTIMAL


def _fast(name: str) -> tuple[GavelPolicy, Instance]:
    form = get_formulation(name, method="fast")
    assert isinstance(form, GavelPolicy)
    return form, example_of(name)


def test_fast_path_stopped_lp_bounds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class LP stopped at its time limit (with a primal point) proves no upper bound: the
    primal value is not one."""
    form, inst = _fast("gavel.max_min_fairness")
    original: Callable[..., SolveResult] = PersistentSolver.solve

    def stopped(self: PersistentSolver, model: Any, options: Any = None) -> SolveResult:
        result = original(self, model, options)
        return replace(result, status=Status.TIME_LIMIT, bound=None, gap=None,
                       message="stopped: time limit")

    monkeypatch.setattr(PersistentSolver, "solve", stopped)
    sol = solve_max_min_fast(form, inst, SolverOptions(), path="aggregated_lp")
    assert sol.status == Status.TIME_LIMIT and sol.objective is not None
    assert sol.bound is None and sol.gap is None


def test_fast_pair_master_stopped_keeps_a_true_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pair column generation stopped after its first master: the bound is the repaired
    duals' (valid in every iteration), never the primal value."""
    form, inst = _fast("gavel.max_min_fairness_packed")
    proven = solve_max_min_fast(form, inst, SolverOptions(), path="pair_column_generation")
    assert proven.status == Status.OPTIMAL and proven.objective is not None
    monkeypatch.setattr(gavel_fast, "_past", lambda deadline: True)
    sol = solve_max_min_fast(form, inst, SolverOptions(), path="pair_column_generation")
    judge("gavel.max_min_fairness_packed", settle_status(sol), proven.objective)
