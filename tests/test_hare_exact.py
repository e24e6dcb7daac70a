"""hare.exact: its optimum equals an independent brute-force enumerator on random small
instances (with and without switch costs, arrivals and the first-task option), hand-solved
cases (switch gaps only between direct successors, the first-task option), the size limits
and the checker on every solution."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.check import check
from schedlab.errors import InputError
from schedlab.formulations.hare.exact import Exact
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Status

REL = 1e-9


def _instance(jobs: list[dict[str, Any]], gpus: dict[str, int], *,
              first_pays: bool = False, name: str = "t") -> Instance:
    return instance_from_dict({
        "name": name,
        "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs,
        "params": {"switch_on_first_task": first_pays},
    })


# ------------------------------------------------------------------ brute-force enumerator


def brute_force(instance: Instance) -> float:
    """min sum_j w_j C_j over every assignment of tasks to GPUs and every order on each GPU,
    each timed at its earliest starts (a regular objective: the earliest starts of a fixed
    order are optimal for that order).  Written from the model's rules alone."""
    gpus = [(acc, i) for acc, pool in instance.cluster.accelerators.items()
            for i in range(pool.count)]
    tasks = [(j, q) for j, job in enumerate(instance.jobs)
             for q in range(job.rounds or 0) for _ in range(job.tasks_per_round or 0)]
    first_pays = instance.params.switch_on_first_task
    best = math.inf
    usable = [[g for g, (acc, _) in enumerate(gpus)
               if acc in (instance.jobs[j].task_seconds or {})] for j, _ in tasks]
    for assignment in itertools.product(*usable):
        on_gpu = [[t for t in range(len(tasks)) if assignment[t] == g] for g in range(len(gpus))]
        for orders in itertools.product(*(itertools.permutations(s) for s in on_gpu)):
            value = _earliest_value(instance, tasks, gpus, assignment, orders, first_pays)
            best = min(best, value)
    return best


def _earliest_value(instance: Instance, tasks: list[tuple[int, int]],
                    gpus: list[tuple[str, int]], assignment: tuple[int, ...],
                    orders: tuple[tuple[int, ...], ...], first_pays: bool) -> float:
    """sum w C of the earliest-start schedule of one assignment and order (inf when the
    orders contradict the barriers), by repeated relaxation of every start rule."""
    jobs = instance.jobs
    n = len(tasks)
    dur = [jobs[j].task_seconds[gpus[assignment[t]][0]]  # type: ignore[index]
           for t, (j, _) in enumerate(tasks)]
    start = [0.0] * n
    for _ in range(n + 2):
        new = []
        for t, (j, q) in enumerate(tasks):
            s = jobs[j].arrival
            for u, (j2, q2) in enumerate(tasks):
                if j2 == j and q2 == q - 1:
                    s = max(s, start[u] + dur[u])
            acc = gpus[assignment[t]][0]
            seq = orders[assignment[t]]
            pos = seq.index(t)
            gap = jobs[j].switch_seconds_on(acc)
            if pos > 0:
                a = seq[pos - 1]
                s = max(s, start[a] + dur[a] + (gap if tasks[a][0] != j else 0.0))
            elif first_pays:
                s = max(s, gap)
            new.append(s)
        if new == start:
            break
        start = new
    else:
        return math.inf  # still rising after n + 2 rounds of relaxation: a cycle
    completion = [0.0] * len(jobs)
    for t, (j, _) in enumerate(tasks):
        completion[j] = max(completion[j], start[t] + dur[t])
    return sum(job.weight * c for job, c in zip(jobs, completion, strict=True))


# ------------------------------------------------------------------------ random instances


@st.composite
def small_instances(draw: st.DrawFn, *, switching: bool, arrivals: bool) -> Instance:
    """<= 3 jobs x 2 GPUs x 2 rounds, <= 6 tasks in all; whole or fractional seconds."""
    layout = draw(st.sampled_from([{"v100": 1, "k80": 1}, {"v100": 2}, {"v100": 1},
                                   {"v100": 2, "k80": 0}]))
    types = [k for k, n in layout.items() if n > 0]
    num_jobs = draw(st.integers(1, 3))
    seconds = st.one_of(st.integers(1, 9).map(float),
                        st.floats(0.5, 9.0, allow_nan=False).map(lambda x: round(x, 3)))
    jobs: list[dict[str, Any]] = []
    budget = 6
    for j in range(num_jobs):
        rounds = draw(st.integers(1, 2))
        per = draw(st.integers(1, 2))
        if rounds * per > budget - (num_jobs - j - 1):
            rounds, per = 1, 1
        budget -= rounds * per
        usable = draw(st.lists(st.sampled_from(types), min_size=1, unique=True))
        job: dict[str, Any] = {
            "id": f"j{j}", "weight": draw(st.sampled_from([1.0, 2.0, 0.5, 3.7])),
            "rounds": rounds, "tasks_per_round": per,
            "task_seconds": {k: draw(seconds) for k in usable}}
        if "k80" in layout and layout["k80"] == 0 and draw(st.booleans()):
            job["task_seconds"]["k80"] = 1.0  # a type with no GPU: never used
        if switching:
            job["switch_seconds"] = {k: draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0]))
                                     for k in types}
        if arrivals:
            job["arrival"] = draw(st.sampled_from([0.0, 1.0, 2.5, 6.0]))
        jobs.append(job)
    first_pays = switching and draw(st.booleans())
    return _instance(jobs, layout, first_pays=first_pays)


def _solve_checked(instance: Instance) -> float:
    solution = Exact().solve(instance)
    assert solution.status == Status.OPTIMAL
    assert check(instance, solution) == []
    assert solution.objective is not None and solution.bound is not None
    assert solution.bound <= solution.objective * (1 + 1e-9)
    return solution.objective


_SETTINGS = settings(max_examples=12, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(small_instances(switching=False, arrivals=False))
def test_exact_equals_brute_force_plain(instance: Instance) -> None:
    assert _solve_checked(instance) == pytest.approx(brute_force(instance), rel=REL)


@_SETTINGS
@given(small_instances(switching=True, arrivals=False))
def test_exact_equals_brute_force_with_switch_costs(instance: Instance) -> None:
    assert _solve_checked(instance) == pytest.approx(brute_force(instance), rel=REL)


@_SETTINGS
@given(small_instances(switching=True, arrivals=True))
def test_exact_equals_brute_force_with_switch_costs_and_arrivals(instance: Instance) -> None:
    assert _solve_checked(instance) == pytest.approx(brute_force(instance), rel=REL)


# ------------------------------------------------------------------------------ by hand


def test_two_jobs_on_one_gpu_pay_the_incoming_jobs_gap() -> None:
    # a (p 2, sigma 5) and b (p 3, sigma 1), weights 1: a then b = 2 + (2 + 1 + 3) = 8;
    # b then a = 3 + (3 + 5 + 2) = 13.
    inst = _instance([
        {"id": "a", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": 2.0},
         "switch_seconds": 5.0},
        {"id": "b", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": 3.0},
         "switch_seconds": 1.0}], {"v100": 1})
    assert _solve_checked(inst) == pytest.approx(8.0, rel=REL)


def test_gaps_follow_the_order_on_one_gpu() -> None:
    # One GPU.  a: 2 rounds of 1 task (p 1, sigma 10); b: 1 task (p 1, sigma 10); c: arrives
    # at 30 (p 1, sigma 0); weights 1.  c goes last (it ends at 31 whatever precedes it).
    # a0 a1 b: C_a = 2 (same job back to back: no gap), C_b = 2 + 10 + 1 = 13 -> 46;
    # b a0 a1: C_b = 1, C_a = 1 + 10 + 2 = 13 -> 45;  a0 b a1: C_b = 12, C_a = 23 -> 66.
    inst = _instance([
        {"id": "a", "rounds": 2, "tasks_per_round": 1, "task_seconds": {"v100": 1.0},
         "switch_seconds": 10.0},
        {"id": "b", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": 1.0},
         "switch_seconds": 10.0},
        {"id": "c", "arrival": 30.0, "rounds": 1, "tasks_per_round": 1,
         "task_seconds": {"v100": 1.0}}], {"v100": 1})
    assert _solve_checked(inst) == pytest.approx(45.0, rel=REL)


def test_a_gap_may_overlap_the_wait_for_an_arrival() -> None:
    # One GPU.  a (p 4, sigma 6) then b (arrives at 5, p 2, sigma 3): b starts at
    # max(5, 4 + 3) = 7, so 4 + 9 = 13; b first: C_b = 7, a starts at 7 + 6, C_a = 17 -> 24.
    inst = _instance([
        {"id": "a", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": 4.0},
         "switch_seconds": 6.0},
        {"id": "b", "arrival": 5.0, "rounds": 1, "tasks_per_round": 1,
         "task_seconds": {"v100": 2.0}, "switch_seconds": 3.0}], {"v100": 1})
    assert _solve_checked(inst) == pytest.approx(13.0, rel=REL)


def test_first_task_option() -> None:
    jobs = [{"id": "a", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": 2.0},
             "switch_seconds": 1.0}]
    assert _solve_checked(_instance(jobs, {"v100": 1})) == pytest.approx(2.0, rel=REL)
    assert _solve_checked(_instance(jobs, {"v100": 1}, first_pays=True)) == pytest.approx(
        3.0, rel=REL)


def test_a_round_spreads_across_types_behind_its_barrier() -> None:
    # Two rounds of two tasks, v100 3 s, k80 5 s, one GPU each: each round on both GPUs
    # ends at 5, so C = 10 (all on the v100: 12).
    inst = _instance([{"id": "a", "rounds": 2, "tasks_per_round": 2,
                       "task_seconds": {"v100": 3.0, "k80": 5.0}}], {"v100": 1, "k80": 1})
    assert _solve_checked(inst) == pytest.approx(10.0, rel=REL)


# ------------------------------------------------------------------------------ limits


def _chain(jobs: int, rounds: int = 1, per: int = 1) -> list[dict[str, Any]]:
    return [{"id": f"j{i}", "rounds": rounds, "tasks_per_round": per,
             "task_seconds": {"v100": 1.0}} for i in range(jobs)]


@pytest.mark.parametrize(("jobs", "gpus", "limit"), [
    (_chain(7), {"v100": 1}, "at most 6 jobs"),
    (_chain(1), {"v100": 5}, "at most 4 GPUs"),
    (_chain(1, rounds=4), {"v100": 1}, "at most 3 rounds per job"),
    (_chain(5, rounds=1, per=5), {"v100": 1}, "at most 24 tasks in all"),
])
def test_beyond_the_limits_is_an_input_error(jobs: list[dict[str, Any]], gpus: dict[str, int],
                                             limit: str) -> None:
    with pytest.raises(InputError, match=limit):
        Exact().solve(_instance(jobs, gpus))


def test_a_time_limit_is_not_optimal() -> None:
    # the largest allowed size stopped at once: whatever comes back is not a proven optimum
    jobs = [{"id": f"j{i}", "weight": 1.0 + i, "rounds": 2, "tasks_per_round": 2,
             "task_seconds": {"v100": 1.0 + i, "k80": 2.5 + 0.5 * i},
             "switch_seconds": 0.5} for i in range(6)]
    inst = _instance(jobs, {"v100": 2, "k80": 2}).model_copy(
        update={"params": _instance(jobs, {"v100": 2, "k80": 2}).params.model_copy(
            update={"time_limit_s": 0.05})})
    solution = Exact().solve(inst)
    assert solution.status in (Status.TIME_LIMIT, Status.OPTIMAL)
    if solution.status == Status.TIME_LIMIT:
        assert check(inst, solution) == []
        assert solution.bound is None or solution.bound <= solution.objective  # type: ignore[operator]
