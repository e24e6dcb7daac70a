"""hare.lp_bound and hare.greedy: cases by hand, the checker on random instances, the bound
chain trivial <= LP <= greedy, and the starvation rule on the placement order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedlab.check import check
from schedlab.formulations.hare.greedy import HareGreedy
from schedlab.formulations.hare.lp_bound import HareLpBound
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
