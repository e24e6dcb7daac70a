"""Saturn lower bounds (``saturn_bounds`` and the time-indexed model's bound) are valid: never
above the optimum found by the independent brute-force enumerator of ``test_saturn``, on small
instances with arbitrary (not grid-aligned) runtimes."""

from __future__ import annotations

import math
from typing import Any

import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_saturn import brute_force_makespan, make

from schedlab.check import check
from schedlab.formulations.saturn.baselines import greedy_placements, local_search, to_schedule
from schedlab.formulations.saturn.bounds import (
    assignment_bound,
    assignment_model,
    energetic_bound,
    energetic_model,
    min_overlap,
)
from schedlab.formulations.saturn.data import lower_bound, makespan, saturn_data
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance
from schedlab.solution import Status
from schedlab.solvers import PersistentSolver, SolverOptions
from schedlab.workloads.saturn import THREE_JOB_OPTIMUM_S, three_job_instance


@st.composite
def rough_instances(draw: st.DrawFn) -> Instance:
    """1-4 jobs, runtimes at 0.1 s resolution, on [4], [4, 4] or [8, 4] GPUs."""
    nodes = draw(st.sampled_from([[4], [4, 4], [8, 4]]))
    num_jobs = draw(st.integers(1, 4 if len(nodes) == 1 else 3))
    jobs: list[dict[str, Any]] = []
    for j in range(num_jobs):
        base = draw(st.floats(20, 400))
        alpha = draw(st.floats(0.3, 1.0))
        gpus = draw(st.sets(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=3))
        gpus = {g for g in gpus if g <= max(nodes)} or {1}
        configs = [{"technique": "ddp", "gpus": g, "runtime_s": round(base / g**alpha, 1)}
                   for g in sorted(gpus)]
        jobs.append({"id": f"j{j}", "configs": configs})
    return make(jobs, nodes)


BOUNDS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@BOUNDS
@given(inst=rough_instances())
def test_bounds_never_exceed_the_optimum(inst: Instance) -> None:
    optimum = brute_force_makespan(inst)
    data = saturn_data(inst)
    assign = assignment_bound(data)
    assert lower_bound(data) - 1e-6 <= assign <= optimum + 1e-6
    raised = energetic_bound(data, assign, 2 * optimum + 1, tolerance=1e-4)
    assert assign - 1e-9 <= raised <= optimum + 1e-6
    # a coarse grid exercises the rounded-down bound model
    sol = TimeIndexed(max_slots=6, polish_moves=200).solve(inst)
    assert check(inst, sol) == []
    assert sol.objective is not None and sol.bound is not None
    assert sol.bound <= optimum + 1e-6
    assert sol.objective >= optimum - 1e-6
    if sol.status == Status.OPTIMAL:  # within the default target_gap of 1e-4
        assert sol.objective == pytest.approx(optimum, rel=1e-4, abs=1e-6)


@BOUNDS
@given(inst=rough_instances())
def test_rows_keep_the_optimum_feasible(inst: Instance) -> None:
    """The energetic rows at T = optimum, and the assignment model with C = optimum, accept
    the optimal schedule's choices: neither model is infeasible there."""
    optimum = brute_force_makespan(inst)
    data = saturn_data(inst)
    model = energetic_model(data, optimum + 1e-6)
    assert model is not None
    assert PersistentSolver(SolverOptions()).solve(model).status != Status.INFEASIBLE
    fixed = assignment_model(data)
    fixed.C.fix(optimum + 1e-6)
    assert PersistentSolver(SolverOptions()).solve(fixed).status != Status.INFEASIBLE


def test_energetic_model_rejects_too_short_deadlines() -> None:
    inst = three_job_instance()
    data = saturn_data(inst)
    assert energetic_model(data, 90.0) is None  # job A needs >= 100 s
    assert assignment_bound(data) <= THREE_JOB_OPTIMUM_S + 1e-6
    assert energetic_bound(data, assignment_bound(data), 230.0) <= THREE_JOB_OPTIMUM_S + 1e-6


def test_clique_row_sees_full_node_jobs() -> None:
    """Two jobs that each need the whole 4-GPU node plus a 2-GPU job: the analytic bound is
    the energy (4*100 + 4*100 + 2*50) / 4 = 225 s; the clique row gives 100 + 100 + 50 =
    250 s, which is the optimum."""
    inst = make([
        {"id": "a", "configs": [{"technique": "ddp", "gpus": 4, "runtime_s": 100.0}]},
        {"id": "b", "configs": [{"technique": "ddp", "gpus": 4, "runtime_s": 100.0}]},
        {"id": "c", "configs": [{"technique": "ddp", "gpus": 2, "runtime_s": 50.0}]},
    ], [4])
    data = saturn_data(inst)
    assert lower_bound(data) == pytest.approx(225.0)
    assert assignment_bound(data) == pytest.approx(250.0, abs=1e-3)
    assert brute_force_makespan(inst) == pytest.approx(250.0)


def test_min_overlap() -> None:
    # window [0, 100], 60 s job: runs at least 20 s inside [40, 60] (either extreme)
    assert min_overlap(0.0, 60.0, 100.0, 40.0, 60.0) == pytest.approx(20.0)
    # a short job can avoid the interval
    assert min_overlap(0.0, 30.0, 100.0, 40.0, 60.0) == 0.0
    # compulsory part [40, 60) of a 60 s job in [0, 100] covers [45, 55] entirely
    assert min_overlap(0.0, 60.0, 100.0, 45.0, 55.0) == pytest.approx(10.0)


def test_local_search_never_worsens() -> None:
    inst = make([
        {"id": f"j{j}", "configs": [{"technique": "ddp", "gpus": g, "runtime_s": r / g**0.8}
                                    for g in (1, 2, 4)]}
        for j, r in enumerate([300.0, 250.0, 170.0, 90.0, 60.0])
    ], [4, 4])
    data = saturn_data(inst)
    start = greedy_placements(data)
    polished = local_search(data, start, math.inf, max_moves=500)
    assert makespan(to_schedule(data, polished)) <= makespan(to_schedule(data, start)) + 1e-9
    assert sorted(j for j, *_ in polished) == list(range(data.num_jobs))


def test_time_limit_is_honoured_overall() -> None:
    """All phases (bounds, grid model, polish, rounded-down model) share one limit."""
    from schedlab.workloads.saturn import random_saturn_instance

    inst = random_saturn_instance(12, nodes=2, gpus_per_node=8, seed=3)
    sol = TimeIndexed().solve(inst, SolverOptions(time_limit_s=4.0))
    total = sol.timings.build_s + sol.timings.solve_s + sol.timings.extract_s
    assert total <= 4.0 + 2.5  # model building and HiGHS's own overshoot
    assert sol.status in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT)
    assert sol.bound is not None and sol.objective is not None
    assert sol.gap == pytest.approx((sol.objective - sol.bound) / sol.objective)
    assert check(inst, sol) == []


def test_pyomo_models_are_plain() -> None:
    """The bound models can be extended by a user before solving (build-from-data)."""
    data = saturn_data(three_job_instance())
    m = assignment_model(data)
    assert isinstance(m, pyo.ConcreteModel) and hasattr(m, "bound_clique")
