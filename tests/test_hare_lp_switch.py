"""hare.lp_bound with round lengths, the first-task release and switch-gap rows
(docs/formulations/hare.md, ``hare.lp_bound``): hand-solved cases, and on random small
instances (switch costs, arrivals, both first-task rules, ``one_type_per_round``) the bound
never exceeds the brute-force optimum of tests/hare_brute.py and never falls below the
earlier LP (``tightened=False``) nor the trivial bound.

Run as a script (``python tests/test_hare_lp_switch.py [N]``) it prints bound / optimum over
N seeded random instances (default 400) for both LPs: the numbers of docs/formulations/hare.md.
"""

from __future__ import annotations

import random
import statistics
import sys
from typing import Any

import pytest
from hare_brute import brute_force_optimum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.formulations.hare.lp_bound import HareLpBound, lp_relaxation, round_seconds
from schedlab.formulations.hare.model import hare_data
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Status

#: Relative slack of the comparisons (HiGHS' tolerances).
REL = 1e-7


def _instance(jobs: list[dict[str, Any]], gpus: dict[str, int], **params: Any) -> Instance:
    return instance_from_dict({
        "name": "t", "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs, "params": params})


def random_instance(rng: random.Random) -> Instance:
    """1-3 GPUs of 1-2 types, 2-7 tasks in all, jobs of 1-3 rounds of 1-3 tasks, arrivals
    0-3 s, task times 1-6 s, switch costs 0-4 s, either first-task rule, one type per round
    one time in four."""
    layout = rng.choice([{"v100": 1}, {"v100": 2}, {"v100": 3}, {"v100": 1, "k80": 1},
                         {"v100": 2, "k80": 1}])
    types = list(layout)
    left = rng.randint(2, 7)
    jobs: list[dict[str, Any]] = []
    while left > 0:
        rounds, per = rng.randint(1, 3), rng.randint(1, 3)
        while rounds * per > left:
            if per > 1:
                per -= 1
            else:
                rounds -= 1
        left -= rounds * per
        usable = rng.sample(types, rng.randint(1, len(types)))
        jobs.append({
            "id": f"j{len(jobs)}", "weight": rng.choice([0.5, 1.0, 2.0, 3.0]),
            "arrival": rng.choice([0.0, 0.0, 1.0, 3.0]), "rounds": rounds,
            "tasks_per_round": per,
            "task_seconds": {k: rng.choice([1.0, 2.0, 3.0, 4.5, 6.0]) for k in usable},
            "switch_seconds": {k: rng.choice([0.0, 0.5, 1.0, 2.5, 4.0]) for k in types}})
    return _instance(jobs, layout, switch_on_first_task=rng.random() < 0.5,
                     one_type_per_round=rng.random() < 0.25)


def bounds(instance: Instance) -> tuple[float, float]:
    """(this LP's optimum, the earlier LP's), both proven optimal."""
    data = hare_data(instance, "hare.lp_bound")
    new, old = lp_relaxation(data), lp_relaxation(data, tightened=False)
    assert new.bound is not None and old.bound is not None
    return new.bound, old.bound


# ------------------------------------------------------------------------------ by hand


def _one_task(name: str, seconds: float, sigma: float, **extra: Any) -> dict[str, Any]:
    return {"id": name, "rounds": 1, "tasks_per_round": 1, "task_seconds": {"v100": seconds},
            "switch_seconds": sigma, **extra}


def test_first_task_rule_releases_a_job_at_its_switch_time() -> None:
    # one job, one 0.5 s task, sigma 4, the first task pays: C = 4.5 (the earlier LP: 0.5)
    inst = _instance([_one_task("a", 0.5, 4.0)], {"v100": 1}, switch_on_first_task=True)
    new, old = bounds(inst)
    assert new == pytest.approx(4.5, rel=REL)
    assert old == pytest.approx(0.5, rel=REL)


def test_a_job_that_heads_no_gpu_waits_for_a_task_and_its_gap() -> None:
    # one GPU, two 1 s jobs with sigma 10: one heads the GPU (C = 1), the other waits
    # (1 + 10 + 1 = 12): optimum 13.  The bound: sum hd <= 1, so the two C's sum to at
    # least 2 + 11 (2 - sum hd) >= 13 -- the optimum.
    inst = _instance([_one_task("a", 1.0, 10.0), _one_task("b", 1.0, 10.0)], {"v100": 1})
    new, old = bounds(inst)
    assert brute_force_optimum(inst)[0] == pytest.approx(13.0)
    assert new == pytest.approx(13.0, rel=REL)
    assert old < 4.0


def test_round_seconds() -> None:
    jobs = [{"id": "a", "rounds": 2, "tasks_per_round": 3,
             "task_seconds": {"v100": 2.0, "k80": 3.0}},
            {"id": "b", "rounds": 1, "tasks_per_round": 1, "task_seconds": {"k80": 5.0}},
            {"id": "c", "rounds": 1, "tasks_per_round": 4, "task_seconds": {"v100": 1.5}}]
    # a: T = 4 fits 2 tasks on the v100 and 1 on the k80 (T = 3: 1 + 1); b: one task;
    # c: 4 tasks on one v100 GPU, 6 s
    spread = hare_data(_instance(jobs, {"v100": 1, "k80": 1}), "x")
    assert round_seconds(spread).tolist() == [4.0, 5.0, 6.0]
    # one type per round: a's round on the v100 alone, 3 x 2 = 6 s (k80: 9 s)
    alone = hare_data(_instance(jobs, {"v100": 1, "k80": 1}, one_type_per_round=True), "x")
    assert round_seconds(alone).tolist() == [6.0, 5.0, 6.0]


def test_a_round_of_several_tasks_on_one_gpu_lasts_their_sum() -> None:
    # one GPU, 2 rounds of 3 tasks of 2 s: C = 12 (the earlier LP saw rounds of 2 s)
    inst = _instance([{"id": "a", "rounds": 2, "tasks_per_round": 3,
                       "task_seconds": {"v100": 2.0}}], {"v100": 1})
    new, old = bounds(inst)
    assert new == pytest.approx(12.0, rel=REL)
    assert old < 10.0


def test_without_switch_costs_or_multi_task_rounds_it_is_the_earlier_lp() -> None:
    # no sigma and one task per round: L_j = pmin_j and no gap rows, the same LP
    inst = _instance([_one_task("a", 1.0, 0.0), _one_task("b", 2.0, 0.0, arrival=0.5)],
                     {"v100": 1})
    new, old = bounds(inst)
    assert new == pytest.approx(old, rel=1e-12)
    assert HareLpBound().solve(inst).status == Status.OPTIMAL


# ------------------------------------------------------------------------ random instances


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_bound_is_valid_and_at_least_the_earlier_one(seed: int) -> None:
    instance = random_instance(random.Random(seed))
    new, old = bounds(instance)
    optimum, _ = brute_force_optimum(instance)
    trivial = hare_data(instance, "x").trivial_bound()
    assert new <= optimum * (1 + REL)
    assert new >= old * (1 - REL)
    assert new >= trivial * (1 - REL)


def _ratios(count: int) -> None:
    """Print bound / optimum statistics of both LPs over ``count`` seeded instances."""
    new, old = [], []
    for seed in range(count):
        instance = random_instance(random.Random(seed))
        optimum, _ = brute_force_optimum(instance)
        b_new, b_old = bounds(instance)
        new.append(b_new / optimum)
        old.append(b_old / optimum)
    for name, values in (("earlier LP", old), ("this LP", new)):
        print(f"{name}: bound / optimum worst {min(values):.3f} mean "
              f"{statistics.mean(values):.3f} over {count} instances")


if __name__ == "__main__":
    _ratios(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
