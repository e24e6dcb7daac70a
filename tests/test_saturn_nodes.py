"""The exact one-node scheduler and the Benders decomposition of ``saturn_nodes`` against the
independent brute-force enumerator of ``test_saturn`` (every configuration, node and order,
serial earliest start), on small instances with runtimes at 0.1 s resolution (off any coarse
grid): the node optimum is exact, the Benders bound is never above the optimum, and when the
loop finishes its schedule is optimal."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_saturn import brute_force_makespan, make

from schedlab.check import check
from schedlab.formulations.saturn.baselines import to_schedule
from schedlab.formulations.saturn.data import lower_bound, makespan, saturn_data
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.formulations.saturn.nodes import (
    benders_applicable,
    benders_makespan,
    node_makespan,
)
from schedlab.instance import Instance

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

runtimes = st.integers(200, 4000).map(lambda tenths: tenths / 10)


@st.composite
def node_jobs(draw: st.DrawFn) -> tuple[int, list[tuple[int, float]]]:
    """(capacity, 1-6 jobs (gpus, runtime s)) on one node of 4 or 8 GPUs."""
    capacity = draw(st.sampled_from([4, 8]))
    sizes = [g for g in (1, 2, 3, 4, 8) if g <= capacity]
    jobs = draw(st.lists(st.tuples(st.sampled_from(sizes), runtimes), min_size=1, max_size=6))
    if draw(st.booleans()) and len(jobs) > 1:  # a twin
        jobs.append(jobs[0])
    return capacity, jobs


def one_node_instance(capacity: int, jobs: list[tuple[int, float]]) -> Instance:
    return make([{"id": f"j{i}", "configs": [{"technique": "ddp", "gpus": g, "runtime_s": r}]}
                 for i, (g, r) in enumerate(jobs)], [capacity])


def valid_node_schedule(capacity: int, jobs: list[tuple[int, float]], starts: list[float]) -> bool:
    """At every start time the GPUs in use are <= capacity."""
    for s0 in starts:
        used = sum(g for (g, r), s in zip(jobs, starts, strict=True)
                   if s <= s0 + 1e-9 and s + r > s0 + 1e-9)
        if used > capacity:
            return False
    return True


@FAST
@given(case=node_jobs())
def test_node_makespan_matches_brute_force(case: tuple[int, list[tuple[int, float]]]) -> None:
    capacity, jobs = case
    expected = brute_force_makespan(one_node_instance(capacity, jobs))
    res = node_makespan(jobs, capacity)
    assert res.proven
    assert res.makespan == pytest.approx(expected, abs=1e-6)
    assert res.bound == pytest.approx(expected, abs=1e-6)
    assert max(s + r for (_, r), s in zip(jobs, res.starts, strict=True)) == pytest.approx(
        res.makespan, abs=1e-6)
    assert valid_node_schedule(capacity, jobs, res.starts)
    # the yes/no question "is there a schedule shorter than ...?"
    shorter = node_makespan(jobs, capacity, upper=expected + 1.0, first=True)
    assert shorter.starts and shorter.makespan < expected + 1.0
    none = node_makespan(jobs, capacity, upper=expected, first=True)
    assert not none.starts and none.proven and none.bound >= expected - 1e-6


@FAST
@given(case=node_jobs())
def test_node_limit_keeps_a_valid_bound(case: tuple[int, list[tuple[int, float]]]) -> None:
    capacity, jobs = case
    exact = node_makespan(jobs, capacity)
    cut = node_makespan(jobs, capacity, node_limit=2)
    assert cut.bound <= exact.makespan + 1e-6
    if cut.starts:
        assert cut.makespan >= exact.makespan - 1e-6


@st.composite
def search_cases(draw: st.DrawFn) -> tuple[int, list[tuple[int, float]], dict[str, Any]]:
    """(capacity, 1-9 jobs, keyword arguments of node_makespan: upper, first, node_limit)."""
    capacity = draw(st.sampled_from([4, 8]))
    sizes = [g for g in (1, 2, 3, 4, 8) if g <= capacity]
    jobs = draw(st.lists(st.tuples(st.sampled_from(sizes), runtimes), min_size=1, max_size=9))
    jobs += jobs[:draw(st.integers(0, 2))]  # twins
    kwargs: dict[str, Any] = {}
    if draw(st.booleans()):
        kwargs["upper"] = draw(st.floats(0.3, 1.0)) * sum(r for _, r in jobs)
        kwargs["first"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["node_limit"] = draw(st.integers(1, 300))
    return capacity, jobs, kwargs


@FAST
@given(case=search_cases())
def test_compiled_search_visits_the_same_nodes_as_the_python_search(
        case: tuple[int, list[tuple[int, float]], dict[str, Any]]) -> None:
    """The numba kernel is the Python search, node for node: same nodes visited, same
    schedule, same bound, with and without an incumbent, a yes/no question or a node limit."""
    capacity, jobs, kwargs = case
    python = node_makespan(jobs, capacity, compiled=False, **kwargs)
    compiled = node_makespan(jobs, capacity, compiled=True, **kwargs)
    assert (compiled.nodes, compiled.proven) == (python.nodes, python.proven)
    assert compiled.makespan == python.makespan and compiled.bound == python.bound
    assert compiled.starts == python.starts


@st.composite
def two_node_instances(draw: st.DrawFn) -> Instance:
    """2-3 jobs with 1-3 configurations each on two identical nodes of 4 GPUs."""
    jobs: list[dict[str, Any]] = []
    for j in range(draw(st.integers(2, 3))):
        configs = [{"technique": "ddp", "gpus": g, "runtime_s": draw(runtimes)}
                   for g in sorted(draw(st.sets(st.sampled_from([1, 2, 4]), min_size=1,
                                                max_size=3)))]
        jobs.append({"id": f"j{j}", "configs": configs})
    return make(jobs, [4, 4])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=two_node_instances())
def test_benders_bound_and_schedule_against_brute_force(inst: Instance) -> None:
    expected = brute_force_makespan(inst)
    data = saturn_data(inst)
    assert benders_applicable(data)
    out = benders_makespan(data, floor=lower_bound(data), upper=math.inf, deadline=None)
    assert out.finished
    assert out.bound <= expected * (1 + 1e-7) + 1e-6
    assert out.placements is not None
    assert out.makespan == pytest.approx(makespan(to_schedule(data, out.placements)), abs=1e-6)
    assert out.makespan == pytest.approx(expected, rel=2e-4)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=two_node_instances())
def test_benders_in_pure_python_from_a_tiny_node_limit(inst: Instance) -> None:
    """Without numba (the Python search) and with node searches cut short at one node: the
    loop raises the limit when no cut comes and still ends at the brute-force optimum."""
    from schedlab.formulations.saturn import nodes as saturn_nodes

    expected = brute_force_makespan(inst)
    data = saturn_data(inst)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saturn_nodes, "_KERNEL", False)
        out = benders_makespan(data, floor=lower_bound(data), upper=math.inf, deadline=None,
                               node_limit=1)
    # the bound comes from HiGHS solves with feasibility tolerance 1e-7: it may exceed the
    # optimum by that relative amount (seen: 150.800003 for 150.8)
    assert out.finished and out.bound <= expected * (1 + 1e-7) + 1e-6
    assert out.makespan == pytest.approx(expected, rel=2e-4)


def test_benders_needs_identical_nodes_and_one_release() -> None:
    inst = make([{"id": "a", "configs": [{"technique": "ddp", "gpus": 2, "runtime_s": 10.0}]}],
                [4, 2])
    assert not benders_applicable(saturn_data(inst))
    with pytest.raises(ValueError):
        benders_makespan(saturn_data(inst), floor=0.0, upper=math.inf, deadline=None)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=two_node_instances())
def test_time_indexed_with_benders_phase_is_optimal(inst: Instance) -> None:
    expected = brute_force_makespan(inst)
    sol = TimeIndexed(max_slots=8).solve(inst)
    assert check(inst, sol) == []
    assert sol.bound is not None and sol.bound <= expected * (1 + 1e-7) + 1e-6
    assert sol.objective == pytest.approx(expected, rel=2e-4)
    assert sol.status == "optimal"


def test_benders_phase_proves_a_one_node_case() -> None:
    """4 jobs on one 4-GPU node, runtimes off the 8-slot grid: the rounded grid alone leaves
    a gap, the Benders phase closes it (brute-force optimum 313.5 s)."""
    def job(name: str, *configs: tuple[int, float]) -> dict[str, Any]:
        return {"id": name, "configs": [{"technique": "ddp", "gpus": g, "runtime_s": r}
                                        for g, r in configs]}

    inst = make([job("j0", (2, 170.9), (4, 347.2)), job("j1", (4, 77.6)),
                 job("j2", (1, 80.6), (2, 383.8), (4, 36.3)), job("j3", (2, 199.6))], [4])
    expected = brute_force_makespan(inst)
    sol = TimeIndexed(max_slots=8).solve(inst)
    assert sol.metrics["benders_iterations"] >= 1
    assert sol.objective == pytest.approx(expected, abs=1e-6) == 313.5
    assert sol.status == "optimal" and check(inst, sol) == []
    off = TimeIndexed(max_slots=8, benders=False).solve(inst)
    assert "benders_iterations" not in off.metrics
    assert off.bound is not None and sol.bound is not None
    assert off.bound <= expected * (1 + 1e-7) + 1e-6
