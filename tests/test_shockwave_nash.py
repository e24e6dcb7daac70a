"""Shockwave's window problem (shockwave.nash_welfare, shockwave.nash_welfare_convex).

Hand-made windows of 2-3 static jobs over 2 rounds, where every input is read off the
instance by hand: a static job of E epochs at t seconds each has d = t and, with the oracle
predictor, Rem = (E - e) t.  The integral optimum is found by enumerating every 0/1 plan in
the test; the convex optimum by an independent cvxpy model (exponential cone, Clarabel).
Objectives are compared to rel 1e-6 and planned epochs to 1e-4 (x is not unique).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.check import check
from schedlab.formulations.shockwave.integral import log_segments, pack_rounds
from schedlab.formulations.shockwave.nash import NashWelfare
from schedlab.instance import Instance, instance_from_dict
from schedlab.registry import get_formulation
from schedlab.solution import Status
from schedlab.solvers import SolverOptions
from schedlab.testing import check_formulation

K = 1e-3
BREAKS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
LOG_BREAKS = [math.log(1e-6)] + [math.log(b) for b in BREAKS[1:]]


def window(jobs: list[tuple[int, int, int, float]], gpus: int, rounds: int = 2,
           round_s: float = 120.0, weights: list[float] | None = None) -> Instance:
    """Static jobs (s, E, e, t seconds per epoch) on ``gpus`` V100s."""
    docs: list[dict[str, Any]] = []
    for i, (s, epochs, done, t) in enumerate(jobs):
        docs.append({"id": f"j{i}", "scale_factor": s, "epochs": epochs, "epochs_done": done,
                     "batch_schedule": [32] * epochs, "regimes": {"32": t},
                     "throughput": {"v100": 1.0},
                     "weight": 1.0 if weights is None else weights[i]})
    return instance_from_dict({
        "name": "hand-window",
        "cluster": {"accelerators": {"v100": {"count": gpus}}},
        "params": {"round_s": round_s, "window_rounds": rounds},
        "jobs": docs})


def by_hand(jobs: list[tuple[int, int, int, float]], rounds_run: np.ndarray, rounds: int,
            round_s: float, pwl: bool, weights: np.ndarray | None = None) -> tuple[float,
                                                                                   np.ndarray]:
    """The objective and p of running job j n_j rounds, written out for the test."""
    _scale, e_total, done, t = (np.array(c, dtype=float) for c in zip(*jobs, strict=True))
    b = np.ones(len(jobs)) if weights is None else weights
    p = np.minimum(e_total - done, round_s * rounds_run / t)
    q = (done + p) / e_total
    logs = np.interp(q, BREAKS, LOG_BREAKS) if pwl else np.log(q)
    left = np.maximum(0.0, (e_total - done) * t - t * p)
    return float(b @ logs / (rounds * b.sum()) - K * left.max()), p


def enumerate_integral(jobs: list[tuple[int, int, int, float]], gpus: int, rounds: int,
                       round_s: float) -> tuple[float, list[np.ndarray]]:
    """Best PWL objective over every 0/1 plan within capacity, and every p attaining it."""
    n = len(jobs)
    scale = np.array([j[0] for j in jobs])
    best, argbest = -math.inf, []
    for bits in itertools.product((0, 1), repeat=n * rounds):
        x = np.array(bits).reshape(n, rounds)
        if (scale @ x > gpus).any():
            continue
        value, p = by_hand(jobs, x.sum(axis=1).astype(float), rounds, round_s, pwl=True)
        if value > best + 1e-12:
            best, argbest = value, [p]
        elif abs(value - best) <= 1e-12:
            argbest.append(p)
    return best, argbest


def clarabel_convex(jobs: list[tuple[int, int, int, float]], gpus: int, rounds: int,
                    round_s: float) -> tuple[float, np.ndarray]:
    """The convex window problem as an exponential-cone program, solved by Clarabel."""
    s, e_total, done, t = (np.array(c, dtype=float) for c in zip(*jobs, strict=True))
    n = len(jobs)
    x = cp.Variable((n, rounds))
    p = cp.Variable(n)
    left = cp.pos((e_total - done) * t - cp.multiply(t, p))
    objective = cp.sum(cp.log(cp.multiply(done + p, 1 / e_total))) / (rounds * n) \
        - K * cp.max(left)
    rows = [x >= 0, x <= 1, p >= 0, p <= e_total - done, s @ x <= gpus,
            cp.multiply(t, p) <= round_s * cp.sum(x, axis=1)]
    problem = cp.Problem(cp.Maximize(objective), rows)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11,
                  tol_feas=1e-11)
    assert problem.status == cp.OPTIMAL
    return float(problem.value), np.asarray(p.value)


CASES = [
    ([(1, 10, 2, 60.0), (2, 5, 0, 120.0), (1, 8, 4, 30.0)], 2),
    ([(1, 6, 1, 100.0), (1, 4, 0, 200.0)], 1),
    ([(1, 20, 5, 40.0), (1, 3, 1, 90.0), (1, 12, 0, 50.0)], 2),
]


def no_extra_rows(model: Any, instance: Instance) -> None:
    """A user extension that adds nothing: it sends either mode to the Pyomo model."""


def oracle(mode: str, oa_tolerance: float = 1e-7) -> NashWelfare:
    form = NashWelfare(mode, predictor="oracle",  # type: ignore[arg-type]
                       oa_tolerance=oa_tolerance)
    form.name = "shockwave.nash_welfare" + ("_convex" if mode == "convex" else "")
    return form


@pytest.mark.parametrize("interface", ["matrix", "pyomo"])
@pytest.mark.parametrize(("jobs", "gpus"), CASES)
def test_integral_optimum_matches_enumeration(jobs: list[tuple[int, int, int, float]],
                                              gpus: int, interface: str) -> None:
    """Both integral models -- the matrix model with the log as an epigraph (default) and
    the Pyomo model with SOS2 weights (taken when the user extends the formulation) -- reach
    the enumerated optimum."""
    inst = window(jobs, gpus)
    best, argbest = enumerate_integral(jobs, gpus, 2, 120.0)
    form = oracle("integral")
    if interface == "pyomo":
        form.extend(no_extra_rows)
    sol = form.solve(inst, SolverOptions(mip_gap=0.0))
    assert sol.status == Status.OPTIMAL
    assert sol.objective == pytest.approx(best, rel=1e-6)
    p = np.array([sol.metrics["planned_epochs"][f"j{i}"] for i in range(len(jobs))])
    assert any(np.allclose(p, q, atol=1e-4) for q in argbest)
    assert sol.bound is not None and sol.bound >= best - 1e-6 * max(1.0, abs(best))


@pytest.mark.parametrize("interface", ["exact", "matrix", "pyomo"])
@pytest.mark.parametrize(("jobs", "gpus"), CASES)
def test_convex_optimum_matches_clarabel(jobs: list[tuple[int, int, int, float]],
                                         gpus: int, interface: str) -> None:
    """The exact method (default) proves p within 1e-4 relative and says optimal; the outer
    approximation (matrix model, or the Pyomo model under user rows) closes its objective gap
    but may only say feasible: its gap does not pin p to 1e-4 (docs)."""
    inst = window(jobs, gpus)
    value, p_ref = clarabel_convex(jobs, gpus, 2, 120.0)
    form = oracle("convex", oa_tolerance=1e-10)
    if interface != "exact":
        form.convex_method = "outer_approximation"
    if interface == "pyomo":
        form.extend(no_extra_rows)
    sol = form.solve(inst)
    assert sol.objective == pytest.approx(value, rel=1e-6)
    p = np.array([sol.metrics["planned_epochs"][f"j{i}"] for i in range(len(jobs))])
    assert sol.bound is not None and sol.bound >= sol.objective
    if interface == "exact":
        assert sol.status == Status.OPTIMAL
        assert sol.metrics["convex_method"] == "exact"
        # Clarabel's own accuracy (~1e-8) is the limit of this comparison
        np.testing.assert_allclose(p, p_ref, rtol=1e-6, atol=1e-6)
    else:
        assert sol.metrics["oa_model"] == interface
        assert sol.status in (Status.OPTIMAL, Status.FEASIBLE)
        np.testing.assert_allclose(p, p_ref, atol=1e-3)
        assert sol.metrics["oa_iterations"] >= 1


@pytest.mark.parametrize(("jobs", "gpus"), CASES)
def test_convex_optimum_bounds_the_integral_plan_in_true_log(
        jobs: list[tuple[int, int, int, float]], gpus: int) -> None:
    inst = window(jobs, gpus)
    integral = oracle("integral").solve(inst)
    convex = oracle("convex").solve(inst)
    rounds_run = np.array([integral.allocation[f"j{i}"]["v100"] * 2 for i in range(len(jobs))])
    true_log, _ = by_hand(jobs, rounds_run, 2, 120.0, pwl=False)
    assert convex.objective is not None
    assert convex.objective >= true_log - 1e-9


def test_budgets_weight_the_logs() -> None:
    jobs = [(1, 6, 1, 100.0), (1, 4, 0, 200.0)]
    inst = window(jobs, 1, weights=[3.0, 1.0])
    sol = oracle("integral").solve(inst, SolverOptions(mip_gap=0.0))
    n = np.array([sol.allocation[f"j{i}"]["v100"] * 2 for i in range(2)])
    value, _ = by_hand(jobs, n, 2, 120.0, pwl=True, weights=np.array([3.0, 1.0]))
    assert sol.objective == pytest.approx(value, rel=1e-9)


def test_finish_time_rows_bind() -> None:
    """Job j0 (Rem = 5 x 100 s) with phi = min(1, 1/2), L W = 240 s: target FT gives
    u_0 <= (FT - 240) / 2.  FT = 600: u_0 <= 180, p_0 >= 3.2 > 2.4 epochs (two whole rounds
    at 100 s per epoch): infeasible.  FT = 840: u_0 <= 300, p_0 >= 2, which the plan without
    the row does not give (j1's 800 s dominate the max term)."""
    jobs = [(1, 6, 1, 100.0), (1, 4, 0, 200.0)]
    inst = window(jobs, 1)

    def with_target(target: float | None) -> NashWelfare:
        targets = None if target is None else {"j0": target}
        form = NashWelfare("convex", predictor="oracle", finish_time_targets=targets)
        form.name = "shockwave.nash_welfare_convex"
        return form

    assert with_target(600.0).solve(inst).status == Status.INFEASIBLE
    free = with_target(None).solve(inst)
    assert free.metrics["planned_epochs"]["j0"] < 2.0 - 1e-3
    bound = with_target(840.0).solve(inst)
    assert bound.status == Status.OPTIMAL
    assert bound.metrics["planned_epochs"]["j0"] >= 2.0 - 1e-6


def test_log_epigraph_is_the_interpolation() -> None:
    """The minimum of the segments' lines equals np.interp through Shockwave's breakpoints
    (log 0 read as log 1e-6) everywhere on [0, 1], breakpoints included."""
    base, logs, slopes = log_segments(np.array(BREAKS), 1e-6)
    q = np.r_[np.linspace(0.0, 1.0, 2001), BREAKS]
    lines = logs[:, None] + slopes[:, None] * (q[None, :] - base[:, None])
    np.testing.assert_allclose(lines.min(axis=0), np.interp(q, BREAKS, LOG_BREAKS),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="not concave"):
        log_segments(np.array([0.0, 0.5, 0.6, 1.0]), 0.55)  # log 0 above log 0.5


def test_integral_finish_time_rows_infeasible_by_relaxation() -> None:
    """The case of test_finish_time_rows_bind in the integral mode: FT = 600 asks
    p_0 >= 3.2 epochs, more than two rounds give (2.4): a relaxation is infeasible already,
    which proves the MILP infeasible.  FT = 840 asks p_0 >= 2: two rounds."""
    jobs = [(1, 6, 1, 100.0), (1, 4, 0, 200.0)]
    inst = window(jobs, 1)

    def with_target(target: float) -> NashWelfare:
        form = NashWelfare("integral", predictor="oracle", finish_time_targets={"j0": target})
        return form

    infeasible = with_target(600.0).solve(inst)
    assert infeasible.status == Status.INFEASIBLE
    assert any("relaxation is infeasible" in d for d in infeasible.diagnostics)
    bound = with_target(840.0).solve(inst, SolverOptions(mip_gap=0.0))
    assert bound.status == Status.OPTIMAL
    assert bound.metrics["planned_epochs"]["j0"] >= 2.0 - 1e-6


def test_pack_rounds_by_hand() -> None:
    """Largest gang first into the least-loaded rounds: s = (2, 2, 1), n = (1, 1, 2), G = 3,
    W = 2 -> job 0 in round 0, job 1 in round 1 (round 0 holds 2), job 2 in both (3, 3).
    With s = (2, 1, 1) and n = (2, 1, 1) on G = 2 job 0 fills both rounds: no packing."""
    y = pack_rounds(np.array([1.0, 1.0, 2.0]), np.array([2.0, 2.0, 1.0]), 3, 2)
    assert y is not None
    np.testing.assert_array_equal(y, [[1, 0], [0, 1], [1, 1]])
    assert pack_rounds(np.array([2.0, 1.0, 1.0]), np.array([2.0, 1.0, 1.0]), 2, 2) is None


def test_integral_falls_back_when_round_counts_do_not_pack() -> None:
    """Three 2-GPU jobs on 3 GPUs over 2 rounds: the round counts allow 2 x 3 = 6 GPU-rounds
    (one round each), but a round holds one 2-GPU gang, so only two job-rounds fit.  The
    full MILP runs and reaches the enumerated optimum (two jobs run one round each)."""
    jobs = [(2, 4, 1, 60.0), (2, 4, 1, 60.0), (2, 4, 1, 60.0)]
    inst = window(jobs, 3)
    best, _ = enumerate_integral(jobs, 3, 2, 120.0)
    sol = oracle("integral").solve(inst, SolverOptions(mip_gap=0.0))
    assert sol.status == Status.OPTIMAL
    assert "round_count_relaxation" not in sol.metrics
    assert sol.objective == pytest.approx(best, rel=1e-6)
    assert sum(len(r) for r in sol.rounds or []) == 2


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(1, 12), st.integers(0, 3),
                          st.sampled_from([20.0, 60.0, 150.0])), min_size=1, max_size=5),
       st.integers(1, 6), st.integers(1, 4))
def test_rounded_gangs_never_exceed_capacity(jobs: list[tuple[int, int, int, float]],
                                             gpus: int, rounds: int) -> None:
    jobs = [(min(s, gpus), e, min(d, e), t) for s, e, d, t in jobs]
    inst = window(jobs, gpus, rounds=rounds)
    # the registered formulation (Shockwave's predictor), which the checker re-derives with
    sol = get_formulation("shockwave.nash_welfare_convex").solve(inst)
    assert sol.status.has_solution
    scale = {f"j{i}": j[0] for i, j in enumerate(jobs)}
    assert len(sol.rounds) == rounds
    for placements in sol.rounds:
        assert sum(scale[p.job] for p in placements) <= gpus
        assert all(p.gpus == scale[p.job] for p in placements)
    assert check(inst, sol) == []


@pytest.mark.parametrize("name", ["shockwave.nash_welfare_convex", "shockwave.nash_welfare"])
def test_check_formulation(name: str) -> None:
    report = check_formulation(name)
    assert "checker" in report.passed and "status" in report.passed


def test_reported_optimal_without_a_proof_is_feasible() -> None:
    """A solver's "optimal" whose bound is far from the plan's own objective (its gap test
    used absolute tolerances) proves nothing: the window solution, settled by the status rule
    every solve ends with, says feasible; a bound within the gap tolerance keeps optimal."""
    from schedlab.solution import settle_status
    from schedlab.solvers import SolveResult

    inst = window([(1, 4, 0, 60.0), (2, 4, 1, 90.0)], gpus=2)
    form = oracle("integral")
    data = form.window_data(inst)
    x = np.zeros((2, data.rounds))
    x[0, 0] = 1.0  # job 0 runs round 0: a feasible plan
    value = data.objective(x.sum(axis=1), "integral")
    for bound, expected in ((value + 0.5 * abs(value), Status.FEASIBLE),
                            (value + 1e-5 * abs(value), Status.OPTIMAL)):
        result = SolveResult(status=Status.OPTIMAL, objective=value,
                             bound=bound, gap=0.0, solve_s=0.0,
                             gap_tolerance=1e-3)
        sol = settle_status(form._integral_solution(data, inst, result, x))
        assert sol.status == expected
        assert sol.gap == pytest.approx(abs(bound - value) / abs(value), rel=1e-9)
        assert ("feasible, not optimal" in " ".join(sol.diagnostics)) == (
            expected == Status.FEASIBLE)
