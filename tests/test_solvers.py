"""The solver layer: statuses, persistent re-solves, time limits, Gurobi and unknown solvers."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

import schedlab
from schedlab.errors import SolverUnavailableError, UnknownNameError
from schedlab.instance import load_instance
from schedlab.registry import get_formulation
from schedlab.solution import Status
from schedlab.solvers import PersistentSolver, SolverOptions, available_solvers, solve_model


def small_lp() -> pyo.ConcreteModel:
    """max x0 + 2 x1 + 3 x2, sum x <= 1.5, x in [0,1]: optimum 3 + 2 * 0.5 = 4 by hand."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0, 1))
    m.c = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) <= 1.5)
    m.o = pyo.Objective(expr=sum((i + 1) * m.x[i] for i in range(3)), sense=pyo.maximize)
    return m


def market_split(seed: int) -> pyo.ConcreteModel:
    """A market-split MILP (Cornuejols-Dawande, 4 rows x 30 binaries): hard for branch and
    bound, so short time limits stop it with an incumbent and an open gap."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(4, 30))
    d = a.sum(axis=1) // 2
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(30), domain=pyo.Binary)
    m.up = pyo.Var(range(4), bounds=(0, None))
    m.down = pyo.Var(range(4), bounds=(0, None))
    m.c = pyo.Constraint(
        range(4),
        rule=lambda m, i: sum(int(a[i, j]) * m.x[j] for j in range(30)) + m.up[i] - m.down[i]
        == int(d[i]),
    )
    m.o = pyo.Objective(expr=sum(m.up[i] + m.down[i] for i in range(4)))
    return m


@pytest.mark.parametrize("method", ["simplex", "ipm", "auto"])
def test_lp_methods_agree_on_a_hand_solved_lp(method: str) -> None:
    m = small_lp()
    result = solve_model(m, SolverOptions(lp_method=method))  # type: ignore[arg-type]
    assert result.status == Status.OPTIMAL
    assert result.objective == pytest.approx(4.0)
    assert result.gap == 0.0
    assert [pyo.value(m.x[i]) for i in range(3)] == pytest.approx([0, 0.5, 1])


def test_persistent_resolve_after_adding_a_row_and_infeasible_status() -> None:
    m = small_lp()
    solver = PersistentSolver()
    assert solver.solve(m).objective == pytest.approx(4.0)
    m.cap = pyo.Constraint(expr=m.x[2] <= 0.2)  # now 0.2*3 + 1*2 + 0.3*1 = 2.9
    assert solver.solve(m).objective == pytest.approx(2.9)
    m.bad = pyo.Constraint(expr=m.x[0] >= 2)
    result = solver.solve(m)
    assert result.status == Status.INFEASIBLE and result.objective is None


def test_time_limit_returns_incumbent_and_gap() -> None:
    """A market-split MILP (Cornuejols-Dawande), hard for branch and bound: 0.3 s is far
    too short to prove optimality, but HiGHS finds an incumbent."""
    m = market_split(seed=1)
    result = solve_model(m, SolverOptions(time_limit_s=0.3))
    assert result.status == Status.TIME_LIMIT
    assert result.objective is not None and result.bound is not None
    assert result.bound <= result.objective
    assert result.gap is not None and result.gap > 0


def test_unknown_solver_is_a_clear_error() -> None:
    with pytest.raises(UnknownNameError, match="unknown solver 'cplexx'"):
        solve_model(small_lp(), SolverOptions(solver="cplexx"))


def test_highs_is_available() -> None:
    assert available_solvers()["highs"] is True




def test_gurobi_agrees_with_highs_as_a_second_solver() -> None:
    pytest.importorskip("gurobipy")
    inst = load_instance("instances/gavel/small-6jobs.json")
    by_highs = schedlab.solve(inst, "gavel.max_min_fairness")
    by_gurobi = schedlab.solve(inst, "gavel.max_min_fairness", solver="gurobi")
    assert by_gurobi.solver == "gurobi"
    assert by_gurobi.objective == pytest.approx(by_highs.objective, rel=1e-7)


def test_gurobi_size_limited_licence_is_said_plainly() -> None:
    pytest.importorskip("gurobipy")
    inst = load_instance("instances/gavel/trace-1000.json.gz")  # 3000 variables > 2000
    form = get_formulation("gavel.max_min_fairness", method="pyomo", num_rounds=0)
    try:
        form.solve(inst, SolverOptions(solver="gurobi"))
    except SolverUnavailableError as exc:
        assert "size-limited licence" in str(exc) and "--solver highs" in str(exc)
    else:  # a full licence is installed on this machine: nothing to check
        pytest.skip("Gurobi solved a 3000-variable model: an unrestricted licence is present")


def test_mip_start_is_used_as_first_incumbent() -> None:
    """Solve a hard MILP briefly, keep the incumbent's values in the model, then re-solve
    with a much shorter limit and warm_start: the start is feasible, so HiGHS's incumbent
    can only be as good or better."""
    m = market_split(seed=2)
    first = solve_model(m, SolverOptions(time_limit_s=0.5))
    assert first.objective is not None
    again = solve_model(m, SolverOptions(time_limit_s=0.01, warm_start=True))
    assert again.objective is not None and again.objective <= first.objective + 1e-9


def knapsack(n: int = 40, seed: int = 3) -> pyo.ConcreteModel:
    """max sum v x  s.t.  sum w x <= W/2, x binary: a MILP with an LP relaxation gap."""
    rng = np.random.default_rng(seed)
    v = rng.integers(10, 100, size=n)
    w = rng.integers(10, 100, size=n)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), domain=pyo.Binary)
    m.c = pyo.Constraint(expr=sum(int(w[i]) * m.x[i] for i in range(n)) <= int(w.sum()) // 2)
    m.o = pyo.Objective(expr=sum(int(v[i]) * m.x[i] for i in range(n)), sense=pyo.maximize)
    return m


def test_gap_comes_from_the_solvers_bound_and_the_tolerance_is_recorded() -> None:
    """With a loose MIP gap the solver may stop before closing it: the reported gap is
    |bound - objective| / |objective| from the solver's own bound, never a blanket 0."""
    result = solve_model(knapsack(), SolverOptions(mip_gap=0.5))
    assert result.status == Status.OPTIMAL and result.gap_tolerance == 0.5
    assert result.objective is not None and result.bound is not None
    assert result.bound >= result.objective - 1e-9  # a maximization's bound is above
    assert result.gap == pytest.approx(abs(result.bound - result.objective) / result.objective)
    assert result.gap <= 0.5 + 1e-9
    exact = solve_model(knapsack(), SolverOptions(mip_gap=0.0))
    assert exact.gap == pytest.approx(0.0, abs=1e-9) and exact.gap_tolerance == 0.0
