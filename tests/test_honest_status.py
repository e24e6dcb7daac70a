"""Statuses never overclaim: iterative methods whose sub-solve fails or hits a time limit on
purpose report the worst status they met, say why, and publish no bound that a failed
sub-solve would have "proved"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import schedlab
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Status
from schedlab.solvers import PersistentSolver, SolveResult


def instance() -> Instance:
    """Three jobs on one v100 and one k80 with different speed-ups and entities."""
    jobs = [
        {"id": "a", "total_steps": 900, "entity": "e0", "throughput": {"v100": 6, "k80": 2}},
        {"id": "b", "total_steps": 400, "entity": "e1", "throughput": {"v100": 3, "k80": 2}},
        {"id": "c", "total_steps": 500, "entity": "e1", "throughput": {"v100": 4, "k80": 1}},
    ]
    return instance_from_dict({
        "name": "honest", "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": jobs, "params": {"num_rounds": 0, "fairness_tolerance": 1e-6},
    })


def sabotage(monkeypatch: pytest.MonkeyPatch, call: int, status: Status) -> list[int]:
    """Make the ``call``-th PersistentSolver.solve (1-based) report ``status``; returns the
    running call count."""
    original: Callable[..., SolveResult] = PersistentSolver.solve
    calls = [0]

    def solve(self: PersistentSolver, model: Any, options: Any = None) -> SolveResult:
        result = original(self, model, options)
        calls[0] += 1
        if calls[0] == call:
            return replace(result, status=status, message=f"sabotaged: {status.value}")
        return result

    monkeypatch.setattr(PersistentSolver, "solve", solve)
    return calls


def test_finish_time_fairness_is_optimal_when_every_step_is_proven() -> None:
    sol = schedlab.solve(instance(), "gavel.finish_time_fairness")
    assert sol.status == Status.OPTIMAL
    assert sol.gap is not None and sol.gap <= 1e-6


@pytest.mark.parametrize("status", [Status.TIME_LIMIT, Status.ERROR])
def test_finish_time_fairness_stops_at_a_failed_step(
    monkeypatch: pytest.MonkeyPatch, status: Status
) -> None:
    """A failed bisection step proves nothing: no lower bound from it, status feasible."""
    honest = schedlab.solve(instance(), "gavel.finish_time_fairness")
    sabotage(monkeypatch, 2, status)
    sol = schedlab.solve(instance(), "gavel.finish_time_fairness")
    assert sol.status == Status.FEASIBLE
    assert any("proves nothing" in d for d in sol.diagnostics)
    assert sol.bound is not None and honest.objective is not None
    assert sol.bound <= honest.objective * (1 + 1e-6)  # still a valid lower bound
    assert sol.metrics["bisection_steps"] == 2
    assert sol.gap == pytest.approx((sol.objective - sol.bound) / sol.objective)


def test_finish_time_fairness_step_cap_is_not_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    from schedlab.formulations.gavel.models import FinishTimeFairness

    monkeypatch.setattr(FinishTimeFairness, "max_steps", 2)
    sol = schedlab.solve(instance(), "gavel.finish_time_fairness")
    assert sol.status == Status.FEASIBLE
    assert any("cap of 2 steps" in d for d in sol.diagnostics)
    assert sol.gap is not None and sol.gap > 1e-6


@pytest.mark.parametrize("name", ["gavel.hierarchical", "gavel.hierarchical_fifo"])
def test_hierarchical_time_limited_level_is_not_optimal(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    assert schedlab.solve(instance(), name).status == Status.OPTIMAL
    sabotage(monkeypatch, 1, Status.TIME_LIMIT)
    sol = schedlab.solve(instance(), name)
    assert sol.status == Status.FEASIBLE
    assert any("time_limit" in d for d in sol.diagnostics)


def test_hierarchical_gap_is_computed_from_the_first_level_bound() -> None:
    sol = schedlab.solve(instance(), "gavel.hierarchical")
    assert sol.bound is not None and sol.objective is not None
    assert sol.gap == pytest.approx(abs(sol.bound - sol.objective) / sol.objective)
    assert sol.gap <= 1e-6


def test_capacity_master_failed_primal_solve_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Dantzig-Wolfe path ends with a primal master for the weights; when that solve
    fails, the result is an error, never a zero allocation that the checker would accept."""
    from schedlab.formulations.gavel import fast as gavel_fast
    from schedlab.formulations.gavel.models import MaxMinFairness
    from schedlab.solvers import SolverOptions
    from schedlab.workloads import generate_gavel_instance

    inst = generate_gavel_instance(40, {"v100": 4, "p100": 4, "k80": 4}, seed=5)
    form = MaxMinFairness(method="fast")
    good = gavel_fast.solve_max_min_fast(form, inst, SolverOptions(), path="capacity_master")
    assert good.status == Status.OPTIMAL
    original = gavel_fast._primal_master

    def failing(*args: Any, **kwargs: Any) -> Any:
        _, result = original(*args, **kwargs)
        return None, replace(result, status=Status.ERROR, message="sabotaged")

    monkeypatch.setattr(gavel_fast, "_primal_master", failing)
    bad = gavel_fast.solve_max_min_fast(form, inst, SolverOptions(), path="capacity_master")
    assert bad.status == Status.ERROR and not bad.allocation
    assert any("primal master failed" in d for d in bad.diagnostics)


def test_saturn_failed_milp_returns_the_greedy_schedule_as_a_stated_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    from schedlab.instance import load_instance

    inst = load_instance(Path(__file__).parent.parent / "instances" / "saturn" / "three-jobs.json")
    original: Callable[..., SolveResult] = PersistentSolver.solve

    def failing(self: PersistentSolver, model: Any, options: Any = None) -> SolveResult:
        result = original(self, model, options)
        return replace(result, status=Status.ERROR, objective=None, bound=None, gap=None,
                       message="sabotaged")

    monkeypatch.setattr(PersistentSolver, "solve", failing)
    sol = schedlab.solve(inst, "saturn.disjunctive")
    assert sol.status == Status.FEASIBLE
    assert any(d.startswith("fallback:") and "greedy" in d for d in sol.diagnostics)
    assert sol.metrics["returned"] == "greedy"


def test_no_solver_log_lines_between_solves(capfd: pytest.CaptureFixture[str]) -> None:
    """Water-filling zeroes coefficients of a loaded model between solves; HiGHS' warnings
    about them must not reach stdout or stderr (no solver chatter without --verbose)."""
    from pathlib import Path

    from schedlab.instance import load_instance

    inst = load_instance(Path(__file__).parent / "data" / "hierarchical-fifo-snapshot.json")
    capfd.readouterr()
    schedlab.solve(inst, "gavel.hierarchical_fifo")
    out, err = capfd.readouterr()
    assert "HiGHS" not in out + err and "changeCoeff" not in out + err


def test_simulation_counts_failed_solves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gavel LP policy whose solve finds nothing falls back to priority order; the run
    counts every such solve instead of hiding it."""
    from schedlab.formulations.gavel.models import FinishTimeFairness
    from schedlab.policies.registry import get_policy
    from schedlab.simulator.engine import simulate

    inst = instance()
    honest = simulate(inst, policy=get_policy("gavel.finish_time_fairness"))
    assert honest.failed_solves == 0 and honest.solves > 0

    def nothing(self: FinishTimeFairness, instance: Instance, options: Any = None) -> Any:
        return self.infeasible_solution(instance, "sabotaged")

    monkeypatch.setattr(FinishTimeFairness, "solve", nothing)
    # the reference model (the array path's failures: tests/test_gavel_policy_fast.py)
    result = simulate(inst, policy=get_policy("gavel.finish_time_fairness", method="generic"))
    assert result.failed_solves == result.solves > 0
    assert result.summary()["failed_solves"] == result.failed_solves
