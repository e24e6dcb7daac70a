"""The matrix-level solver layer (``schedlab.solvers.matrix``) on both backends.

Every optimum is derived by hand (the LP below, by its two active constraints) or by an
independent method written here (brute-force enumeration of the 0/1 vectors of a small MIP,
a fresh model built from the final data for the incremental changes).  The Gurobi cases run
within the pip package's size-limited licence and are skipped when gurobipy is missing.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import numpy as np
import pytest
from test_saturn import brute_force_makespan, make

from schedlab.check import check
from schedlab.errors import SolverError, SolverUnavailableError
from schedlab.formulations.saturn.data import lower_bound, saturn_data
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.formulations.saturn.nodes import benders_makespan
from schedlab.policies.gavel import GavelPolicy
from schedlab.policies.state import ClusterState
from schedlab.simulator import jobs_from_instance
from schedlab.solution import Status
from schedlab.solvers import GurobiUnavailableError, MatrixModel, SolverOptions, matrix_model
from schedlab.workloads.gavel import small_six_jobs_instance


@pytest.fixture(params=["highs", "gurobi"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "gurobi":
        pytest.importorskip("gurobipy")
    return str(request.param)


def new_model(backend: str, **kwargs: Any) -> MatrixModel:
    model = matrix_model(SolverOptions(solver=backend), **kwargs)
    assert model.backend == backend
    return model


# ----------------------------------------------------------------------------- a hand LP
#
#   max x + y  s.t.  r0: x + 2y <= 4,  r1: 3x + y <= 6,  x, y >= 0.
# Both rows are active at the optimum: x = 8/5, y = 6/5, objective 14/5.  The duals u solve
# A_active^T u = c: u0 + 3 u1 = 1, 2 u0 + u1 = 1, so u = (2/5, 1/5).


def hand_lp(backend: str) -> MatrixModel:
    model = new_model(backend)
    model.add_columns([0.0, 0.0], [np.inf, np.inf], [1.0, 1.0])
    model.set_sense("maximize")
    model.add_rows([-np.inf, -np.inf], [4.0, 6.0], starts=[0, 2, 4], columns=[0, 1, 0, 1],
                   values=[1.0, 2.0, 3.0, 1.0])
    return model


def test_hand_lp_optimum_and_duals(backend: str) -> None:
    model = hand_lp(backend)
    result = model.solve()
    assert result.status == Status.OPTIMAL
    assert result.objective == pytest.approx(14 / 5, rel=1e-9)
    assert result.bound == pytest.approx(14 / 5, rel=1e-9)  # an LP's bound: strong duality
    assert result.gap == pytest.approx(0.0, abs=1e-12)
    assert model.values() == pytest.approx([8 / 5, 6 / 5], rel=1e-9)
    assert model.row_duals() == pytest.approx([2 / 5, 1 / 5], rel=1e-9)


def test_duals_are_the_objective_rate_of_the_row_bounds(backend: str) -> None:
    """The dual of a row is d(optimum)/d(its active bound): raising r0's bound by h raises
    the optimum by 2h/5 (the active set stays the same for small h)."""
    model = hand_lp(backend)
    base = model.solve().objective
    dual = model.row_duals()[0]
    model.set_row_bounds([0], -np.inf, 4.1)
    moved = model.solve().objective
    assert base is not None and moved is not None
    assert (moved - base) / 0.1 == pytest.approx(dual, rel=1e-9)
    assert dual == pytest.approx(2 / 5, rel=1e-9)


def fresh_lp(backend: str, upper: list[float], coefs: list[list[float]], row_lo: list[float],
             row_up: list[float], cost: list[float], sense: str) -> MatrixModel:
    """The same LP built at once from its final data (the independent reference)."""
    model = new_model(backend)
    model.add_columns(np.zeros(len(upper)), upper, cost)
    model.set_sense(sense)  # type: ignore[arg-type]
    matrix = np.array(coefs, dtype=float)
    rows, cols = np.nonzero(matrix)
    starts = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=len(matrix)))))
    model.add_rows(row_lo, row_up, starts=starts, columns=cols, values=matrix[rows, cols])
    return model


def test_incremental_changes_match_fresh_models(backend: str) -> None:
    """Each change re-solved warm gives the optimum of the changed LP built from scratch, and
    the first ones match the hand-derived vertices."""
    model = hand_lp(backend)
    model.solve()
    # x <= 1: r0 binds, y = 3/2, objective 5/2
    model.set_column_bounds([0], 0.0, 1.0)
    result = model.solve()
    assert result.objective == pytest.approx(5 / 2, rel=1e-9)
    assert model.values() == pytest.approx([1.0, 3 / 2], rel=1e-9)
    # A[0, 1] = 4: y <= (4 - x)/4, so x = 1, y = 3/4, objective 7/4
    model.set_coefficients([0], [1], [4.0])
    result = model.solve()
    assert result.objective == pytest.approx(7 / 4, rel=1e-9)
    # a new row x + y >= 2 cuts (1, 3/4) off: x = 1 stays, y >= 1 breaks r0 (1 + 4y <= 4),
    # so the LP becomes infeasible; relax r0 to 8: x = 1, y = 7/4, objective 11/4
    model.add_row(2.0, np.inf, [0, 1], [1.0, 1.0])
    assert model.solve().status == Status.INFEASIBLE
    model.set_row_bounds([0], -np.inf, 8.0)
    result = model.solve()
    assert result.objective == pytest.approx(11 / 4, rel=1e-9)
    # a new column z in [0, 3] with cost 1/2, entries in r1 (1) and the new row (1)
    model.add_columns([0.0], [3.0], [0.5], starts=[0, 2], rows=[1, 2], values=[1.0, 1.0])
    model.set_costs([1], [2.0])
    model.set_sense("minimize")
    result = model.solve()
    fresh = fresh_lp(backend, [1.0, np.inf, 3.0],
                     [[1.0, 4.0, 0.0], [3.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
                     [-np.inf, -np.inf, 2.0], [8.0, 6.0, np.inf], [1.0, 2.0, 0.5], "minimize")
    expected = fresh.solve()
    assert result.status == expected.status == Status.OPTIMAL
    assert result.objective == pytest.approx(expected.objective, rel=1e-9)
    # by hand: min x + 2y + z/2 with x + y + z >= 2 (the other rows slack): z is the
    # cheapest way to cover it, z = 2, x = y = 0, objective 1, and only that row has a dual:
    # raising its bound by h costs h/2
    assert result.objective == pytest.approx(1.0, rel=1e-9)
    assert model.values() == pytest.approx([0.0, 0.0, 2.0], abs=1e-9)
    assert fresh.values() == pytest.approx([0.0, 0.0, 2.0], abs=1e-9)
    assert model.row_duals() == pytest.approx([0.0, 0.0, 0.5], abs=1e-9)


def test_a_ranged_row_and_its_changes(backend: str) -> None:
    """A row with two finite bounds, moved to one-sided and back."""
    model = new_model(backend)
    model.add_columns([0.0, 0.0], [10.0, 10.0], [1.0, 1.0])
    model.add_row(3.0, 5.0, [0, 1], [1.0, 2.0])  # min x + y: y = 3/2 (2y = 3 cheapest)
    assert model.solve().objective == pytest.approx(1.5, rel=1e-9)
    model.set_sense("maximize")  # x + 2y <= 5 binds: x = 5, y = 0
    assert model.solve().objective == pytest.approx(5.0, rel=1e-9)
    model.set_row_bounds([0], 3.0, np.inf)  # unbounded above now, up to the column bounds
    assert model.solve().objective == pytest.approx(20.0, rel=1e-9)
    model.set_row_bounds([0], 4.0, 4.0)  # equality: x = 4, y = 0
    assert model.solve().objective == pytest.approx(4.0, rel=1e-9)
    model.set_row_bounds([0], 1.0, 2.0)  # ranged again: x = 2
    assert model.solve().objective == pytest.approx(2.0, rel=1e-9)
    assert model.row_duals() == pytest.approx([1.0], rel=1e-9)


# ------------------------------------------------------------------------------ a small MIP


def knapsack_data(seed: int = 3, n: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    value = rng.integers(5, 40, n).astype(float)
    weight = rng.integers(3, 20, (2, n)).astype(float)
    capacity = np.floor(weight.sum(axis=1) / 3)
    return value, weight, capacity


def brute_force_knapsack(value: np.ndarray, weight: np.ndarray,
                         capacity: np.ndarray) -> tuple[float, np.ndarray]:
    """Best value over every 0/1 vector that fits both capacities."""
    best, best_x = -math.inf, np.zeros(len(value))
    for bits in itertools.product((0.0, 1.0), repeat=len(value)):
        x = np.array(bits)
        if np.all(weight @ x <= capacity) and value @ x > best:
            best, best_x = float(value @ x), x
    return best, best_x


def knapsack_model(backend: str, value: np.ndarray, weight: np.ndarray,
                   capacity: np.ndarray, **kwargs: Any) -> MatrixModel:
    model = new_model(backend, **kwargs)
    n = len(value)
    model.add_columns(np.zeros(n), np.ones(n), value, integer=True)
    model.set_sense("maximize")
    rows, cols = np.nonzero(weight)
    model.add_rows(np.full(2, -np.inf), capacity, starts=[0, n, 2 * n], columns=cols,
                   values=weight[rows, cols])
    return model


def test_mip_optimum_against_enumeration(backend: str) -> None:
    value, weight, capacity = knapsack_data()
    expected, _ = brute_force_knapsack(value, weight, capacity)
    model = knapsack_model(backend, value, weight, capacity, save_solutions=True)
    model.set_start(np.zeros(len(value)))  # feasible, and worse than the optimum
    result = model.solve(mip_gap=0.0)
    assert model.is_mip
    assert result.status == Status.OPTIMAL
    assert result.objective == pytest.approx(expected, rel=1e-9)
    assert result.bound is not None and result.bound >= expected - 1e-6
    x = model.values()
    assert np.all(weight @ np.round(x) <= capacity) and value @ np.round(x) == expected
    saved = model.saved_solutions()
    assert saved and value @ np.round(saved[0]) == pytest.approx(expected)
    for other in saved:  # every kept solution is feasible and no better than the optimum
        assert np.all(weight @ np.round(other) <= capacity + 1e-9)
        assert value @ np.round(other) <= expected + 1e-9
    with pytest.raises(SolverError, match="no row duals"):
        model.row_duals()


def test_mip_reoptimized_after_a_change(backend: str) -> None:
    """Fix the best item out and tighten a capacity: the re-solve equals enumeration."""
    value, weight, capacity = knapsack_data(seed=5)
    model = knapsack_model(backend, value, weight, capacity)
    model.solve(mip_gap=0.0)
    banned = int(np.argmax(value))
    model.set_column_bounds([banned], 0.0, 0.0)
    model.set_row_bounds([1], -np.inf, capacity[1] - 5)
    result = model.solve(mip_gap=0.0)
    keep = np.arange(len(value)) != banned
    tighter = capacity - np.array([0.0, 5.0])
    expected, _ = brute_force_knapsack(value[keep], weight[:, keep], tighter)
    assert result.status == Status.OPTIMAL
    assert result.objective == pytest.approx(expected, rel=1e-9)


def market_split(backend: str, seed: int = 1, rows: int = 4) -> MatrixModel:
    """A Cornuejols-Dawande market-split MIP: min sum |a_i x - b_i| over 0/1 x; hard for
    branch and bound (every LP bound is 0), easy to find incumbents for (x = 0 is one)."""
    rng = np.random.default_rng(seed)
    n = 10 * (rows - 1)
    a = rng.integers(0, 100, (rows, n)).astype(float)
    b = np.floor(a.sum(axis=1) / 2)
    model = new_model(backend)
    model.add_columns(np.zeros(n), np.ones(n), 0.0, integer=True)
    model.add_columns(np.zeros(2 * rows), np.full(2 * rows, np.inf), 1.0)  # up, down
    matrix = np.hstack([a, np.eye(rows), -np.eye(rows)])
    r, c = np.nonzero(matrix)
    model.add_rows(b, b, starts=np.arange(0, len(r) + 1, n + 2), columns=c,
                   values=matrix[r, c])
    return model


def test_a_mip_stopped_by_its_time_limit_is_not_optimal(backend: str) -> None:
    model = market_split(backend)
    result = model.solve(time_limit_s=0.3)
    assert result.status != Status.OPTIMAL
    assert result.status in (Status.TIME_LIMIT, Status.ERROR)
    if result.status == Status.TIME_LIMIT:  # an incumbent: usable, with its honest gap
        assert result.objective is not None and result.bound is not None
        assert result.bound <= result.objective + 1e-9
        assert result.gap is not None and result.gap > 0
        assert len(model.values()) == model.num_columns
    else:
        with pytest.raises(SolverError):
            model.values()


def test_infeasible_and_unbounded_are_told_apart(backend: str) -> None:
    bad = new_model(backend)
    bad.add_columns([0.0, 0.0], [np.inf, np.inf], [1.0, 1.0])
    bad.add_row(-np.inf, -1.0, [0, 1], [1.0, 1.0])  # x + y <= -1 with x, y >= 0
    result = bad.solve()
    assert result.status == Status.INFEASIBLE and result.objective is None
    with pytest.raises(SolverError, match="without a solution"):
        bad.values()
    free = new_model(backend)
    free.add_columns([0.0, 0.0], [np.inf, np.inf], [1.0, 1.0])
    free.set_sense("maximize")
    free.add_row(-np.inf, 3.0, [0, 1], [1.0, -1.0])  # x - y <= 3: x = y grows forever
    assert free.solve().status == Status.UNBOUNDED
    empty_mip = new_model(backend)
    empty_mip.add_columns([0.0, 0.0], [1.0, 1.0], [1.0, 1.0], integer=True)
    empty_mip.add_row(0.5, 0.7, [0, 1], [1.0, 1.0])  # no integer point in [0.5, 0.7]
    assert empty_mip.solve().status == Status.INFEASIBLE


def test_bad_arguments_are_errors() -> None:
    model = new_model("highs")
    model.add_columns([0.0], [1.0])
    with pytest.raises(ValueError, match="starts"):
        model.add_rows([0.0], [1.0], starts=[0, 2], columns=[0], values=[1.0])
    with pytest.raises(IndexError):
        model.add_row(0.0, 1.0, [3], [1.0])
    with pytest.raises(ValueError, match="lower bound exceeds"):
        model.add_row(2.0, 1.0, [0], [1.0])
    with pytest.raises(ValueError, match="start needs 1"):
        model.set_start([0.0, 1.0])
    with pytest.raises(SolverError, match="not been solved"):
        model.values()


# ---------------------------------------------------------------------------- Gurobi only


def test_gurobi_missing_is_a_plain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gurobipy", None)  # import gurobipy -> ImportError
    with pytest.raises(GurobiUnavailableError, match="not installed") as caught:
        matrix_model(SolverOptions(solver="gurobi"))
    assert isinstance(caught.value, SolverError)
    assert isinstance(caught.value, SolverUnavailableError)  # the CLI's exit code 2


def test_gurobi_size_limited_licence_is_a_plain_error() -> None:
    pytest.importorskip("gurobipy")
    model = matrix_model(SolverOptions(solver="gurobi"))
    model.add_columns(np.zeros(2001), np.ones(2001), 1.0)
    model.set_sense("maximize")
    try:
        result = model.solve()
    except GurobiUnavailableError as exc:
        assert "size-limited licence" in str(exc) and "2001 variables" in str(exc)
        assert isinstance(exc, SolverError)
    else:
        assert result.objective == pytest.approx(2001.0)
        pytest.skip("this Gurobi licence is not size-limited")


# -------------------------------------------------------------- the user's solver is reached


def snapshot() -> ClusterState:
    instance = small_six_jobs_instance()
    return ClusterState(now=0.0, round_index=0, round_s=instance.params.round_s,
                        cluster=instance.cluster, active=jobs_from_instance(instance),
                        finished=[], job_set_version=1)


@pytest.mark.parametrize(("formulation", "optimum"), [
    ("gavel.max_min_fairness", 10 / 13),  # derived in docs/workloads.md
    ("gavel.max_min_fairness_agnostic", 2 / 3),
])
def test_simulator_class_lp_runs_in_the_chosen_solver(backend: str, formulation: str,
                                                      optimum: float) -> None:
    policy = GavelPolicy(formulation, solver=backend)
    policy.decide(snapshot())
    assert policy.path == "array"
    assert policy.class_lp is not None and policy.class_lp.backend == backend
    assert policy.last_objective == pytest.approx(optimum, rel=1e-7)


def test_benders_master_runs_in_the_chosen_solver(backend: str) -> None:
    """4 jobs on one 4-GPU node, runtimes off the grid (brute-force optimum 313.5 s): the
    Benders master runs in the chosen solver and the phase proves the optimum."""
    def job(name: str, *configs: tuple[int, float]) -> dict[str, Any]:
        return {"id": name, "configs": [{"technique": "ddp", "gpus": g, "runtime_s": r}
                                        for g, r in configs]}

    inst = make([job("j0", (2, 170.9), (4, 347.2)), job("j1", (4, 77.6)),
                 job("j2", (1, 80.6), (2, 383.8), (4, 36.3)), job("j3", (2, 199.6))], [4])
    expected = brute_force_makespan(inst)
    data = saturn_data(inst)
    out = benders_makespan(data, floor=lower_bound(data), upper=math.inf, deadline=None,
                           options=SolverOptions(solver=backend))
    assert out.solver == backend and out.finished and not out.stopped
    assert out.bound <= expected + 1e-6
    assert out.makespan == pytest.approx(expected, rel=2e-4)
    sol = TimeIndexed(max_slots=8).solve(inst, SolverOptions(solver=backend))
    assert sol.metrics["benders_solver"] == backend and sol.metrics["benders_iterations"] >= 1
    assert sol.objective == pytest.approx(expected, abs=1e-6)
    assert sol.status == "optimal" and check(inst, sol) == []



def test_a_failing_benders_master_ends_the_phase_with_a_diagnostic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """When the master's solver fails part way (as Gurobi's size-limited licence does when
    cuts accumulate), Benders keeps the valid bound and schedule it has and says why."""
    from schedlab.formulations.saturn import nodes

    inst = make([{"id": f"j{i}", "configs": [{"technique": "ddp", "gpus": g, "runtime_s": r}]}
                 for i, (g, r) in enumerate([(2, 170.9), (4, 77.6), (1, 80.6), (2, 199.6),
                                             (3, 123.4)])], [4, 4])
    expected = brute_force_makespan(inst)
    original = nodes._Master.solve
    calls = []

    def failing(self: Any, time_limit: float, gap: float = 1e-6) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise GurobiUnavailableError("the licence refuses this model", field="--solver")
        return original(self, time_limit, gap)

    monkeypatch.setattr(nodes._Master, "solve", failing)
    data = saturn_data(inst)
    out = benders_makespan(data, floor=lower_bound(data), upper=math.inf, deadline=None,
                           improve_s=0.0)
    # (unpatched, this instance takes two master solves: the first one's assignment is cut)
    assert "licence refuses" in out.stopped and len(calls) == 2 and not out.finished
    assert out.bound <= expected + 1e-6  # still a valid bound
    assert out.placements is None or out.makespan >= expected - 1e-6

# ------------------------------------------------------------- Pyomo rows from the arrays


def test_pyomo_rows_from_csr_arrays() -> None:
    """add_rows / add_expressions give the rows written out by hand, skip empty rows that
    hold, and refuse an empty row that cannot hold."""
    import pyomo.environ as pyo
    import scipy.sparse as sp

    from schedlab.formulations.arrays import add_expressions, add_rows
    from schedlab.solvers import solve_model

    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(0, None))
    matrix = sp.csr_matrix(np.array([[1.0, 2.0], [3.0, 1.0], [0.0, 0.0]]))
    add_rows(m, "cap", matrix, list(m.x.values()), None, np.array([4.0, 6.0, 1.0]))
    add_expressions(m, "lhs", matrix, list(m.x.values()), index=["a", "b", "c"])
    assert list(m.cap) == [0, 1]  # the empty row 2 (0 <= 1) is skipped
    assert str(m.cap[0].body) == "x[0] + 2.0*x[1]" and m.cap[1].upper == 6.0
    assert pyo.value(m.lhs["c"]) == 0.0
    m.obj = pyo.Objective(expr=m.x[0] + m.x[1], sense=pyo.maximize)
    assert solve_model(m).objective == pytest.approx(14 / 5, rel=1e-9)  # the hand LP
    with pytest.raises(ValueError, match="empty"):
        add_rows(m, "bad", matrix, list(m.x.values()), 1.0, None)


def test_solve_proven_returns_an_optimum_or_names_what_failed(backend: str) -> None:
    model = hand_lp(backend)
    result = model.solve_proven("the hand LP")
    assert result.status == Status.OPTIMAL
    assert result.objective == pytest.approx(14 / 5, rel=1e-9)
    # x + 2y <= 4 and x + 2y >= 5: infeasible, warm and from scratch
    model.add_rows([5.0], [np.inf], starts=[0, 2], columns=[0, 1], values=[1.0, 2.0])
    with pytest.raises(SolverError, match="the hand LP"):
        model.solve_proven("the hand LP")
