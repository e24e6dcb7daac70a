"""hare.lp_bound and hare.greedy: cases by hand, the checker on random instances, the bound
chain trivial <= LP <= greedy, the starvation rule on the placement order, and backfilling
(a gap used by hand, a gap too small for the switch gaps left alone, the checker on random
instances)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.check import check
from schedlab.formulations.hare.greedy import HareGreedy, greedy_schedule
from schedlab.formulations.hare.lp_bound import HareLpBound
from schedlab.formulations.hare.model import hare_data, hare_solution
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Status

TYPES = ("v100", "p100", "k80")


def random_instance(seed: int, *, jobs: int = 6, switch: bool = True, arrivals: bool = True,
                    first_pays: bool = False) -> Instance:
    """Jobs with 1-3 rounds of 1-4 tasks, 1-10 s per task on a random non-empty set of types
    (1-3 GPUs each), weights 1-5, optional arrivals in [0, 10) s and switch costs in [0, 2) s."""
    rng = np.random.default_rng(seed)
    counts = {k: int(rng.integers(1, 4)) for k in TYPES}
    docs: list[dict[str, Any]] = []
    for j in range(jobs):
        usable = [k for k in TYPES if rng.random() < 0.7] or [TYPES[int(rng.integers(3))]]
        job: dict[str, Any] = {
            "id": f"j{j}", "weight": float(rng.integers(1, 6)),
            "rounds": int(rng.integers(1, 4)), "tasks_per_round": int(rng.integers(1, 5)),
            "task_seconds": {k: float(rng.uniform(1, 10)) for k in usable}}
        if arrivals:
            job["arrival"] = float(rng.uniform(0, 10))
        if switch:
            job["switch_seconds"] = {k: float(rng.uniform(0, 2)) for k in TYPES}
        docs.append(job)
    return instance_from_dict({
        "name": f"hare-random-{seed}",
        "cluster": {"accelerators": {k: {"count": n} for k, n in counts.items()}},
        "jobs": docs, "params": {"switch_on_first_task": first_pays}})


def one_gpu_two_jobs() -> Instance:
    return instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 1}}},
        "jobs": [{"id": "a", "weight": 2.0, "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 1.0}},
                 {"id": "b", "weight": 1.0, "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 2.0}, "switch_seconds": 0.5}]})


def test_two_jobs_on_one_gpu_by_hand() -> None:
    """a (w 2, 1 s) first, then b pays its 0.5 s switch: a [0, 1), b [1.5, 3.5);
    sum w C = 2 x 1 + 1 x 3.5 = 5.5; weighted JCT the same (arrivals 0)."""
    instance = one_gpu_two_jobs()
    solution = HareGreedy().solve(instance)
    assert solution.status == Status.FEASIBLE
    assert solution.objective == pytest.approx(5.5, rel=1e-9)
    assert solution.metrics["weighted_jct"] == pytest.approx(5.5, rel=1e-9)
    ends = {e.job: (e.start, e.end) for e in solution.schedule}
    assert ends == {"a": (0.0, 1.0), "b": (1.5, 3.5)}
    assert check(instance, solution) == []


def test_first_task_pays_option_by_hand() -> None:
    """With switch_on_first_task, b first would start at 0.5; a (no switch) still first:
    a [0, 1), b [1.5, 3.5)."""
    document = one_gpu_two_jobs().to_dict()
    document["params"] = {"switch_on_first_task": True}
    document["jobs"][0]["switch_seconds"] = 0.25
    instance = instance_from_dict(document)
    solution = HareGreedy().solve(instance)
    ends = {e.job: (e.start, e.end) for e in solution.schedule}
    assert ends == {"a": (0.25, 1.25), "b": (1.75, 3.75)}
    assert check(instance, solution) == []


def test_single_task_bound_is_exact() -> None:
    """One job, one round, one task, arrival 3: every schedule has C = 3 + 2 (the fastest
    type), and the LP's optimum equals it: w C = 4 x 5 = 20."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [{"id": "a", "weight": 4.0, "arrival": 3.0, "rounds": 1,
                  "tasks_per_round": 1, "task_seconds": {"v100": 2.0, "k80": 7.0}}]})
    lp = HareLpBound().solve(instance)
    assert lp.status == Status.OPTIMAL
    assert lp.objective == pytest.approx(20.0, rel=1e-7)
    greedy = HareGreedy().solve(instance)
    assert greedy.objective == pytest.approx(20.0, rel=1e-9)


def test_two_round_chain_in_seconds_by_hand() -> None:
    """One job of two rounds of one 2 s task, arrival 3: the chain forces C_1 >= 3 + 2 + 2 = 7
    and a schedule reaches it, so the LP (built in its own time unit) reports C = 7 s and
    w C = 4 x 7 = 28 in seconds."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 1}}},
        "jobs": [{"id": "a", "weight": 4.0, "arrival": 3.0, "rounds": 2,
                  "tasks_per_round": 1, "task_seconds": {"v100": 2.0}}]})
    lp = HareLpBound().solve(instance)
    assert lp.status == Status.OPTIMAL
    assert lp.objective == pytest.approx(28.0, rel=1e-7)
    assert lp.metrics["lp_completion_s"]["a"] == pytest.approx(7.0, rel=1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_bound_scales_with_the_time_unit(seed: int) -> None:
    """Every time (arrivals, task and switch seconds) times 1000: the grid, every row and the
    optimum scale by 1000 (the LP is homogeneous in time)."""
    instance = random_instance(seed)
    document = instance.to_dict()
    for job in document["jobs"]:
        job["arrival"] = 1000.0 * job.get("arrival", 0.0)
        job["task_seconds"] = {k: 1000.0 * v for k, v in job["task_seconds"].items()}
        job["switch_seconds"] = {k: 1000.0 * v for k, v in job["switch_seconds"].items()}
    small = HareLpBound().solve(instance)
    large = HareLpBound().solve(instance_from_dict(document))
    assert small.objective is not None and large.objective is not None
    assert large.objective == pytest.approx(1000.0 * small.objective, rel=1e-6)


def test_bound_below_one_type_optimum() -> None:
    """One job of one round of 5 tasks of 3 s on 2 GPUs: the optimum is ceil(5/2) x 3 = 9;
    the bound is at most that and at least the trivial 3."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 2}}},
        "jobs": [{"id": "a", "rounds": 1, "tasks_per_round": 5,
                  "task_seconds": {"v100": 3.0}}]})
    lp = HareLpBound().solve(instance)
    assert lp.objective is not None and 3.0 - 1e-9 <= lp.objective <= 9.0 + 1e-6
    assert HareGreedy().solve(instance).objective == pytest.approx(9.0, rel=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_random_chain_and_checker(seed: int) -> None:
    instance = random_instance(seed, switch=seed % 2 == 0, arrivals=seed % 3 != 0,
                               first_pays=seed % 4 == 1)
    lp = HareLpBound().solve(instance)
    greedy = HareGreedy().solve(instance)
    assert check(instance, greedy) == []
    assert lp.status == Status.OPTIMAL and lp.objective is not None
    trivial = lp.metrics["trivial_bound"]
    assert trivial <= lp.objective * (1 + 1e-7) + 1e-7
    assert greedy.objective is not None
    assert lp.objective <= greedy.objective * (1 + 1e-7) + 1e-7
    assert greedy.bound == pytest.approx(lp.objective, rel=1e-9)
    assert greedy.metrics["bound_ratio"] >= 1 - 1e-7
    # weighted JCT re-derived from the schedule: sum w (C - r)
    ends: dict[str, float] = {}
    for e in greedy.schedule:
        ends[e.job] = max(ends.get(e.job, 0.0), e.end)
    wjct = sum(job.weight * (ends[job.id] - job.arrival) for job in instance.jobs)
    assert greedy.metrics["weighted_jct"] == pytest.approx(wjct, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_no_round_overtaken_by_rounds_ready_delta_later(seed: int) -> None:
    """Starvation rule: in the placement order, a round placed before round X became ready
    at most Delta after X did (ready = arrival for round 0, else the previous round's last
    end, both read from the schedule)."""
    delta = 3.0
    instance = random_instance(100 + seed, jobs=10)
    solution = HareGreedy(max_wait_s=delta).solve(instance)
    assert check(instance, solution) == []
    arrival = {job.id: job.arrival for job in instance.jobs}
    round_end: dict[tuple[str, int], float] = {}
    for e in solution.schedule:
        assert e.round is not None
        key = (e.job, e.round)
        round_end[key] = max(round_end.get(key, 0.0), e.end)

    def ready(job: str, q: int) -> float:
        return arrival[job] if q == 0 else round_end[(job, q - 1)]

    order = [(job, q) for job, q in solution.metrics["order"]]
    assert sorted(order) == sorted(round_end)
    for x_pos, x in enumerate(order):
        for z in order[:x_pos]:
            assert ready(*z) <= ready(*x) + delta + 1e-9, (z, x)


def test_starvation_rule_lets_a_light_job_through() -> None:
    """A light job (weight 1, 50 s tasks) among heavy short jobs: with Delta = 0 rounds go in
    ready-time order; every round 0 is ready at 0 and the LP order breaks the tie, so the
    light job follows the four heavy round-0s (8 tasks of 1 s on 2 GPUs) and starts at 4 s,
    before any heavy round 1 (ready at 1 s or later); with no aging (Delta = inf) the LP order
    puts it behind every heavy round (24 tasks of 1 s on 2 GPUs: at 12 s or later)."""
    jobs = [{"id": "light", "weight": 1.0, "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 50.0}}]
    jobs += [{"id": f"h{i}", "weight": 5.0, "rounds": 3, "tasks_per_round": 2,
              "task_seconds": {"v100": 1.0}} for i in range(4)]
    instance = instance_from_dict({"cluster": {"accelerators": {"v100": {"count": 2}}},
                                   "jobs": jobs})
    aged = HareGreedy(max_wait_s=0.0).solve(instance)
    plain = HareGreedy(max_wait_s=float("inf")).solve(instance)
    start = {s: min(e.start for e in sol.schedule if e.job == "light")
             for s, sol in (("aged", aged), ("plain", plain))}
    assert start["aged"] == 4.0
    assert start["plain"] >= 12.0  # 4 heavy jobs x 3 rounds x 2 tasks x 1 s on 2 GPUs
    assert check(instance, aged) == [] and check(instance, plain) == []


def backfill_instance(b_switch: float) -> Instance:
    """One V100; c (1 s, arrival 0), a (2 s, arrival 4, sigma 1), b (1 s, arrival 0, weight 2,
    sigma ``b_switch``)."""
    return instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 1}}},
        "jobs": [{"id": "a", "weight": 1.0, "arrival": 4.0, "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 2.0}, "switch_seconds": 1.0},
                 {"id": "b", "weight": 2.0, "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 1.0}, "switch_seconds": b_switch},
                 {"id": "c", "weight": 1.0, "rounds": 1, "tasks_per_round": 1,
                  "task_seconds": {"v100": 1.0}}]})


def hand_ordered(instance: Instance, backfill: bool) -> tuple[dict[str, tuple[float, float]],
                                                               float]:
    """The list schedule with keys a 1, b 5, c 0 and no aging (Delta = inf): priorities
    max(ready, key) = a 4, b 5, c 0, so c, a, b are placed in that order.  Returns each job's
    (start, end) and the checked solution's objective."""
    data = hare_data(instance, "hare.greedy")
    tasks, order = greedy_schedule(data, np.array([1.0, 5.0, 0.0]), np.arange(3),
                                   float("inf"), backfill=backfill)
    assert order == [(2, 0), (0, 0), (1, 0)]
    solution = hare_solution(instance, "hare.greedy", data, tasks, status=Status.FEASIBLE)
    assert check(instance, solution) == []
    assert solution.objective is not None
    return {data.job_ids[t.job]: (t.start, t.end) for t in tasks}, solution.objective


def test_backfill_fills_a_gap_by_hand() -> None:
    """c [0, 1); a waits for its arrival: start max(4, 1 + sigma_a) = 4, a [4, 6).  b (sigma 1):
    list order appends it at 6 + 1 = 7, b [7, 8): sum w C = 1 + 6 + 2 x 8 = 23.  Backfilled,
    b goes into the gap [1, 4): start 1 + sigma_b = 2, end 3, and a still has its switch gap:
    3 + sigma_a = 4 <= 4; b [2, 3): sum w C = 1 + 6 + 2 x 3 = 13."""
    instance = backfill_instance(1.0)
    plain, plain_objective = hand_ordered(instance, backfill=False)
    filled, filled_objective = hand_ordered(instance, backfill=True)
    assert plain == {"c": (0.0, 1.0), "a": (4.0, 6.0), "b": (7.0, 8.0)}
    assert filled == {"c": (0.0, 1.0), "a": (4.0, 6.0), "b": (2.0, 3.0)}
    assert plain_objective == pytest.approx(23.0, rel=1e-9)
    assert filled_objective == pytest.approx(13.0, rel=1e-9)


def test_backfill_skips_a_gap_too_small_for_the_switches() -> None:
    """As above with sigma_b = 1.5: in the gap b would run [2.5, 3.5) and a needs
    3.5 + sigma_a = 4.5 > 4, so b is appended at 6 + 1.5: b [7.5, 8.5) either way;
    sum w C = 1 + 6 + 2 x 8.5 = 24."""
    instance = backfill_instance(1.5)
    for backfill in (False, True):
        ends, objective = hand_ordered(instance, backfill=backfill)
        assert ends == {"c": (0.0, 1.0), "a": (4.0, 6.0), "b": (7.5, 8.5)}
        assert objective == pytest.approx(24.0, rel=1e-9)


def test_backfill_option_reaches_the_method() -> None:
    """HareGreedy(backfill=True) on the hand instance (its own order): a valid schedule, and
    with backfill off the same schedule as before the option existed (the default)."""
    instance = backfill_instance(1.0)
    assert check(instance, HareGreedy(backfill=True).solve(instance)) == []
    default = HareGreedy().solve(instance)
    off = HareGreedy(backfill=False).solve(instance)
    assert [(e.job, e.start, e.end) for e in default.schedule] == \
        [(e.job, e.start, e.end) for e in off.schedule]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), switch=st.booleans(), arrivals=st.booleans(),
       first_pays=st.booleans(), use_lp=st.booleans(),
       max_wait_s=st.sampled_from([0.0, 2.0, float("inf")]))
def test_backfill_schedules_pass_the_checker(seed: int, switch: bool, arrivals: bool,
                                             first_pays: bool, use_lp: bool,
                                             max_wait_s: float) -> None:
    """Random small instances: the backfilled schedule passes the checker and runs every
    task of every round once (the checker counts them)."""
    instance = random_instance(seed, switch=switch, arrivals=arrivals, first_pays=first_pays)
    solution = HareGreedy(backfill=True, use_lp=use_lp, max_wait_s=max_wait_s).solve(instance)
    assert solution.status == Status.FEASIBLE
    assert check(instance, solution) == []
