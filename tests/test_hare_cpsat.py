"""hare.exact on CP-SAT: its optimum equals the brute-force enumerator of tests/hare_brute.py
and hare.exact_milp (where the MILP proves optimality) on random small instances (arrivals,
per-type switch costs, both first-task rules, with and without one type per round), lies
between hare.lp_bound and hare.greedy, passes the checker; hand-solved cases; the time scale
and its rounding; the anytime behaviour under tiny limits; the one line without OR-Tools."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hare_brute import brute_force_optimum
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from schedlab.check import check
from schedlab.cli import main
from schedlab.errors import InputError, SolverUnavailableError
from schedlab.formulations.hare import exact_cpsat
from schedlab.formulations.hare.exact import Exact
from schedlab.formulations.hare.exact_cpsat import ExactCpsat, Sequenced, to_ticks
from schedlab.formulations.hare.model import hare_data
from schedlab.instance import Instance, instance_from_dict
from schedlab.registry import get_formulation
from schedlab.solution import Status
from schedlab.solvers import SolverOptions

ROOT = Path(__file__).resolve().parents[1]
#: Relative tolerance of optimum comparisons (exact data: float rounding only).
REL = 1e-9
#: One CP-SAT worker: the search is deterministic and the 2-core machine is shared.
ONE = SolverOptions(threads=1, time_limit_s=60.0)


def _instance(jobs: list[dict[str, Any]], gpus: dict[str, int], *, first_pays: bool = False,
              one_type: bool = False, name: str = "t") -> Instance:
    return instance_from_dict({
        "name": name,
        "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs,
        "params": {"switch_on_first_task": first_pays, "one_type_per_round": one_type},
    })


def _job(name: str, seconds: dict[str, float], *, weight: float = 1.0, rounds: int = 1,
         tasks: int = 1, arrival: float = 0.0, switch: Any = None) -> dict[str, Any]:
    job: dict[str, Any] = {"id": name, "weight": weight, "arrival": arrival, "rounds": rounds,
                           "tasks_per_round": tasks, "task_seconds": seconds}
    if switch is not None:
        job["switch_seconds"] = switch
    return job


def _solve(instance: Instance, options: SolverOptions = ONE, **kwargs: Any) -> Any:
    solution = ExactCpsat(**kwargs).solve(instance, options)
    assert check(instance, solution) == [], solution.diagnostics
    assert solution.objective is not None
    if solution.bound is not None:
        assert solution.bound <= solution.objective * (1 + 1e-12)
    return solution


# ------------------------------------------------------------------------ random instances


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    """2-6 jobs, 2-4 GPUs of up to 3 types, up to 3 rounds and 14 tasks; arrivals, per-type
    switch costs, both first-task rules, with and without one type per round."""
    num_types = draw(st.integers(1, 3))
    types = ["v100", "p100", "k80"][:num_types]
    total = draw(st.integers(max(2, num_types), 4))
    counts = {k: 1 for k in types}
    for _ in range(total - num_types):
        counts[draw(st.sampled_from(types))] += 1
    num_jobs = draw(st.integers(2, 6))
    # mostly small (the brute force's reach), sometimes up to 14 tasks
    budget = max(num_jobs, draw(st.sampled_from([5, 6, 8, 9, 10, 11, 12, 14])))
    seconds = st.one_of(st.integers(1, 9).map(float),
                        st.sampled_from([0.5, 1.5, 2.25, 3.125, 4.75]))
    jobs: list[dict[str, Any]] = []
    for j in range(num_jobs):
        left = budget - (num_jobs - j - 1)          # each later job keeps one task
        rounds = draw(st.sampled_from([1, 2, 2, 3, 3]))
        per = draw(st.sampled_from([1, 2, 2, 3, 4]))
        while rounds * per > left:
            if per > 1:
                per -= 1
            else:
                rounds -= 1
        budget -= rounds * per
        usable = draw(st.lists(st.sampled_from(types), min_size=1, unique=True))
        switch: Any = draw(st.one_of(
            st.just(None), st.sampled_from([0.5, 2.0]),
            st.fixed_dictionaries({k: st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0])
                                   for k in types})))
        jobs.append(_job(f"j{j}", {k: draw(seconds) for k in usable},
                         weight=draw(st.sampled_from([1.0, 2.0, 0.5, 3.7])), rounds=rounds,
                         tasks=per, arrival=draw(st.sampled_from([0.0, 0.0, 1.0, 2.5, 6.0])),
                         switch=switch))
    return _instance(jobs, counts, first_pays=draw(st.booleans()), one_type=draw(st.booleans()))


#: Search nodes the brute force may spend on one example (beyond: compared with the MILP).
BRUTE_NODES = 400_000
#: The MILP is tried (2 s) up to this many tasks; above, its proofs take minutes.
MILP_TASKS = 7


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instances(), st.booleans())
def test_cpsat_equals_brute_force_and_milp(instance: Instance, per_type: bool) -> None:
    solution = _solve(instance, per_type=per_type)
    assert solution.status == Status.OPTIMAL, (solution.metrics, solution.diagnostics)
    assert solution.metrics["exact_scaling"] and solution.gap == pytest.approx(0.0, abs=1e-12)
    optimum = solution.objective
    compared = 0
    tasks = hare_data(instance, "t").total_tasks
    try:
        brute, _ = brute_force_optimum(instance, max_nodes=BRUTE_NODES)
    except RuntimeError:
        pass
    else:
        assert optimum == pytest.approx(brute, rel=REL)
        compared += 1
    if tasks <= MILP_TASKS:
        milp = get_formulation("hare.exact_milp").solve(
            instance, SolverOptions(time_limit_s=2.0, threads=1))
        if milp.status == Status.OPTIMAL:
            assert milp.objective == pytest.approx(optimum, rel=1e-7)
            compared += 1
    assert compared, "neither the brute force nor the MILP proved this example"
    event(f"{tasks} tasks, {compared} comparison(s)")
    lower = get_formulation("hare.lp_bound").solve(instance)
    greedy = get_formulation("hare.greedy").solve(instance)
    assert lower.objective is not None and greedy.objective is not None
    assert lower.objective <= optimum * (1 + 1e-7)
    if not instance.params.one_type_per_round or _one_type(greedy.schedule):
        assert check(instance, greedy) == []
        assert optimum <= greedy.objective * (1 + 1e-9)


def _one_type(schedule: list[Any]) -> bool:
    """Every round of the schedule on one GPU type."""
    types: dict[tuple[str, int | None], set[str | None]] = {}
    for e in schedule:
        types.setdefault((e.job, e.round), set()).add(e.accelerator)
    return all(len(v) == 1 for v in types.values())


# ---------------------------------------------------------------------- hand-solved cases


def test_switch_costs_on_one_gpu_by_hand() -> None:
    """a (2 s, sigma 1) and b (3 s, sigma 0.5) on one V100.  a then b: C_a = 2, b waits its
    0.5 s gap: C_b = 5.5, total 7.5; b then a: 3 + (3 + 1 + 2) = 9.  With the first-task
    option the first task pays too: a first 3 + 6.5 = 9.5, b first 3.5 + 6.5 = 10."""
    jobs = [_job("a", {"v100": 2.0}, switch=1.0), _job("b", {"v100": 3.0}, switch=0.5)]
    assert _solve(_instance(jobs, {"v100": 1})).objective == pytest.approx(7.5)
    solution = _solve(_instance(jobs, {"v100": 1}, first_pays=True))
    assert solution.status == Status.OPTIMAL and solution.objective == pytest.approx(9.5)


def test_same_job_back_to_back_pays_nothing() -> None:
    """a: two rounds of one 2 s task, weight 3; b: one 1 s task; sigma 5 for both on one GPU.
    a, a, b: 3 * 4 + (4 + 5 + 1) = 22 (a's second round follows its own task: no gap);
    b, a, a: 1 + 3 * (1 + 5 + 4) = 31; a, b, a: 3 * 15 + 8 = 53.  Optimum 22."""
    jobs = [_job("a", {"v100": 2.0}, weight=3.0, rounds=2, switch=5.0),
            _job("b", {"v100": 1.0}, switch=5.0)]
    solution = _solve(_instance(jobs, {"v100": 1}))
    assert solution.status == Status.OPTIMAL and solution.objective == pytest.approx(22.0)


def test_gap_overlaps_the_arrival_wait() -> None:
    """a (2 s) at 0; b (1 s, sigma 3) arrives at 5: b starts max(5, 2 + 3) = 5, total 2 + 6;
    with sigma 4 it starts at 6: 2 + 7."""
    for sigma, value in ((3.0, 8.0), (4.0, 9.0)):
        jobs = [_job("a", {"v100": 2.0}), _job("b", {"v100": 1.0}, arrival=5.0, switch=sigma)]
        assert _solve(_instance(jobs, {"v100": 1})).objective == pytest.approx(value)


def test_one_type_per_round_by_hand() -> None:
    """One round of two tasks, 2 s on the V100 and 3 s on the K80 (one GPU each): spread,
    C = 3; on one type, both on the V100 one after the other: C = 4."""
    jobs = [_job("a", {"v100": 2.0, "k80": 3.0}, tasks=2)]
    assert _solve(_instance(jobs, {"v100": 1, "k80": 1})).objective == pytest.approx(3.0)
    solution = _solve(_instance(jobs, {"v100": 1, "k80": 1}, one_type=True))
    assert solution.objective == pytest.approx(4.0)
    assert len({e.accelerator for e in solution.schedule}) == 1


def test_barrier_by_hand() -> None:
    """a: two rounds of two tasks (1 s on V100, 4 s on K80), weight 1; one GPU of each.  Round
    0 spread would end at 4: better both on the V100 (end 2), round 1 the same (end 4)."""
    jobs = [_job("a", {"v100": 1.0, "k80": 4.0}, rounds=2, tasks=2)]
    solution = _solve(_instance(jobs, {"v100": 1, "k80": 1}))
    assert solution.objective == pytest.approx(4.0)
    assert {e.accelerator for e in solution.schedule} == {"v100"}


# --------------------------------------------------------------------------- time in ticks


def test_decimal_data_are_scaled_exactly() -> None:
    jobs = [_job("a", {"v100": 1.25, "k80": 2.5}, switch={"v100": 0.125}, arrival=0.5),
            _job("b", {"v100": 0.2}, weight=0.25)]
    ticks = to_ticks(hare_data(_instance(jobs, {"v100": 1, "k80": 1}), "t"), 100.0)
    assert ticks.exact and ticks.error == 0.0 and ticks.weight_ratio == 1.0
    assert ticks.scale == 40 and ticks.weight_scale == 4.0
    assert np.array_equal(ticks.data.seconds, [[50.0, 100.0], [8.0, np.inf]])


def test_irrational_data_are_rounded_up_with_an_honest_bound() -> None:
    """Durations like 1/3 and sqrt(2) have no exact tick: they are rounded up, the schedule is
    retimed in true seconds (so it matches the brute force's optimum to the rounding), and
    the bound subtracts the rounding error: still <= the true optimum."""
    jobs = [_job("a", {"v100": 1 / 3, "k80": math.sqrt(2)}, rounds=2, tasks=2,
                 switch={"v100": math.pi / 10, "k80": 0.0}),
            _job("b", {"v100": math.e, "k80": 1 / 7}, weight=math.sqrt(3), arrival=0.1)]
    instance = _instance(jobs, {"v100": 1, "k80": 1})
    brute, _ = brute_force_optimum(instance)
    solution = _solve(instance)
    assert not solution.metrics["exact_scaling"] and solution.metrics["rounding_error_s"] > 0
    assert solution.bound is not None and solution.bound <= brute * (1 + 1e-12)
    assert brute <= solution.objective <= brute * (1 + 1e-5)
    assert solution.status == Status.OPTIMAL      # the rounding gap is within 1e-4


def test_hint_is_feasible_in_the_model() -> None:
    """The canonical hint satisfies every constraint (the search may start from it)."""
    instance = ExactCpsat().example_instance()
    model = ExactCpsat().build(instance, ONE)
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(model.model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    hinted = model.hint
    assert isinstance(hinted, Sequenced) and hinted.source in ("greedy", "serial")


# ------------------------------------------------------------------------------- anytime


def test_a_tiny_deterministic_limit_returns_a_checked_incumbent() -> None:
    """Stopped almost at once: a schedule that passes the checker, a bound below the
    proven optimum, and no optimal status."""
    instance = _instance([_job(f"j{i}", {"v100": 1.0 + i, "k80": 2.0 + 2 * i}, rounds=2,
                               tasks=2, switch=0.5, weight=1.0 + i % 2) for i in range(3)],
                         {"v100": 2, "k80": 1})
    proven = _solve(instance)
    assert proven.status == Status.OPTIMAL
    stopped = _solve(instance, SolverOptions(threads=1, extra={"max_deterministic_time": 1e-6}))
    assert stopped.status in (Status.TIME_LIMIT, Status.FEASIBLE)
    assert stopped.objective is not None and stopped.objective >= proven.objective * (1 - 1e-12)
    assert stopped.bound is None or stopped.bound <= proven.objective * (1 + 1e-12)


@pytest.mark.parametrize("limit", [1e-6, 1e-3, 0.2])
def test_short_time_limits_never_error(limit: float) -> None:
    instance = Exact().example_instance()
    optimum = _solve(instance).objective
    solution = _solve(instance, SolverOptions(time_limit_s=limit, threads=1))
    assert solution.status in (Status.OPTIMAL, Status.TIME_LIMIT, Status.FEASIBLE)
    if solution.status != Status.OPTIMAL:
        assert solution.bound is None or solution.bound <= optimum * (1 + 1e-12)
    if solution.metrics.get("fallback"):
        assert solution.status == Status.FEASIBLE


def test_a_model_too_large_falls_back_to_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exact_cpsat, "MAX_ARCS", 10)
    instance = Exact().example_instance()
    solution = _solve(instance)
    assert solution.status == Status.FEASIBLE
    assert "model too large" in solution.metrics["fallback"]


def test_an_unknown_cpsat_parameter_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no_such_parameter"):
        ExactCpsat().solve(Exact().example_instance(),
                           SolverOptions(threads=1, extra={"no_such_parameter": 1}))


# ------------------------------------------------------------------- names and dependency


def test_registered_names() -> None:
    assert isinstance(get_formulation("hare.exact"), ExactCpsat)
    milp = get_formulation("hare.exact_milp")
    assert isinstance(milp, Exact) and milp.name == "hare.exact_milp"


def test_no_input_cap() -> None:
    """Past the MILP's limits (7 jobs, 25 tasks): solved (or stopped) without an error."""
    jobs = [_job(f"j{i}", {"v100": 1.0 + i % 3}, tasks=1, rounds=1) for i in range(25)]
    solution = _solve(_instance(jobs, {"v100": 5}), SolverOptions(threads=1, time_limit_s=2))
    assert solution.status in (Status.OPTIMAL, Status.TIME_LIMIT)
    with pytest.raises(InputError, match="at most 6 jobs"):
        Exact().solve(_instance(jobs, {"v100": 5}))


def _hide_ortools(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ortools", "ortools.sat", "ortools.sat.python", "ortools.sat.python.cp_model"):
        monkeypatch.setitem(sys.modules, name, None)


def test_without_ortools_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_ortools(monkeypatch)
    with pytest.raises(SolverUnavailableError, match=r'pip install "schedlab\[cpsat\]"'):
        ExactCpsat().solve(Exact().example_instance())


def test_without_ortools_the_cli_exits_2(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _hide_ortools(monkeypatch)
    path = ROOT / "instances" / "hare" / "exact-3jobs-2gpus.json"
    assert main(["solve", str(path), "--formulation", "hare.exact"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "schedlab[cpsat]"' in err[0]
