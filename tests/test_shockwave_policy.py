"""Shockwave's online policy: its pieces against hand values and brute force, and its re-plan
rhythm and fallback in the simulator."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from schedlab.formulations.shockwave.rounds import fill_idle_gpus, rerank_rounds
from schedlab.instance import instance_from_dict
from schedlab.policies.registry import get_policy
from schedlab.policies.shockwave import Shockwave, momentum_finish_time, relaxed_priorities
from schedlab.simulator import simulate
from schedlab.solution import Status
from schedlab.solvers import SolverOptions


def test_momentum_finish_time_by_hand() -> None:
    # values 100 (rounds 0-3, 4 rounds) and 200 (rounds 4-9, 6 rounds) at round 10:
    # average (4 x 100 + 6 x 200) / 10 = 160; 0.9 x 160 + 0.1 x 200 = 164
    assert momentum_finish_time([(0, 100.0), (4, 200.0)], 10) == pytest.approx(164.0)
    # one record made this round: the record itself
    assert momentum_finish_time([(7, 50.0)], 7) == pytest.approx(50.0)
    # a record still in force: weight until now
    assert momentum_finish_time([(0, 10.0), (2, 40.0)], 3) == pytest.approx(
        0.9 * (2 * 10 + 1 * 40) / 3 + 0.1 * 40)


def test_relaxed_priorities_by_hand() -> None:
    # now 100 s, phi 0.5, L 120 s, rho_max 1, lambda 2:
    # job 0: (100 + 50/0.5)/400 = 0.5 -> 1;  job 1: (100 + 300/0.5)/350 = 2 -> 2^2 = 4;
    # job 2: Rem 60 < L, (100 + 60/0.5)/110 = 2 -> 2^100
    got = relaxed_priorities(100.0, np.array([50.0, 300.0, 60.0]),
                             np.array([400.0, 350.0, 110.0]), 0.5, 120.0, 1.0, 2.0)
    assert got.tolist() == pytest.approx([1.0, 4.0, 2.0 ** 100])
    # rho = 100 / 1e-5 = 1e7 and Rem < L: 1e700 overflows; never capped (inf: the caller
    # counts the relaxed re-solve as failed)
    huge = relaxed_priorities(0.0, np.array([100.0]), np.array([1e-5]), 1.0, 120.0, 1.0, 12.0)
    assert np.isinf(huge[0])


def brute_force_rerank(gangs: np.ndarray, scale: np.ndarray, gpus: int,
                       priority: np.ndarray) -> float:
    """min sum_j pi_j/n_j sum_t t y[j,t] over every placement keeping n_j and capacity."""
    n_rounds = gangs.shape[1]
    counts = gangs.sum(axis=1).astype(int)
    options = [list(itertools.combinations(range(n_rounds), int(c))) for c in counts]
    best = np.inf
    for choice in itertools.product(*options):
        load = np.zeros(n_rounds)
        for j, rounds in enumerate(choice):
            load[list(rounds)] += scale[j]
        if (load > gpus + 1e-9).any():
            continue
        value = sum(priority[j] / counts[j] * sum(rounds)
                    for j, rounds in enumerate(choice) if counts[j] > 0)
        best = min(best, value)
    return float(best)


@pytest.mark.parametrize("seed", range(6))
def test_rerank_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_jobs, n_rounds, gpus = 4, 4, 3
    scale = rng.choice([1.0, 2.0], size=n_jobs)
    # a feasible plan: fill rounds greedily at random
    gangs = np.zeros((n_jobs, n_rounds))
    for t in range(n_rounds):
        free = gpus
        for j in rng.permutation(n_jobs):
            if scale[j] <= free and rng.random() < 0.6:
                gangs[j, t] = 1
                free -= scale[j]
    priority = rng.choice([1.0, 3.0, 50.0], size=n_jobs)
    placed, result = rerank_rounds(gangs, scale, gpus, priority, SolverOptions(mip_gap=0.0))
    assert result.status is Status.OPTIMAL
    assert (placed.sum(axis=1) == gangs.sum(axis=1)).all()
    assert (scale @ placed <= gpus + 1e-9).all()
    counts = gangs.sum(axis=1)
    value = sum(priority[j] / counts[j] * float(np.arange(n_rounds) @ placed[j])
                for j in range(n_jobs) if counts[j] > 0)
    assert value == pytest.approx(brute_force_rerank(gangs, scale, gpus, priority),
                                  rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_rerank_default_settings_stay_within_shockwave_gap(seed: int) -> None:
    """Shockwave's settings (MIP gap 1e-3, started from the input plan): the placement's
    objective is within 1e-3 of the brute-force optimum, relative to the normalised
    objective (sum_j pi_j / n_j sum_t t y_jt divided by max_j pi_j / n_j)."""
    rng = np.random.default_rng(100 + seed)
    n_jobs, n_rounds, gpus = 4, 4, 3
    scale = rng.choice([1.0, 2.0], size=n_jobs)
    gangs = np.zeros((n_jobs, n_rounds))
    for t in range(n_rounds):  # every job that fits runs: a feasible, full plan
        free = gpus
        for j in rng.permutation(n_jobs):
            if scale[j] <= free:
                gangs[j, t] = 1
                free -= scale[j]
    priority = rng.choice([1.0, 3.0, 50.0], size=n_jobs)
    placed, result = rerank_rounds(gangs, scale, gpus, priority)
    assert result.status is Status.OPTIMAL
    counts = gangs.sum(axis=1)
    assert (placed.sum(axis=1) == counts).all()
    assert (scale @ placed <= gpus + 1e-9).all()
    per_job = np.divide(priority, counts, out=np.zeros(n_jobs), where=counts > 0)
    value = float(per_job @ (placed @ np.arange(n_rounds)))
    best = brute_force_rerank(gangs, scale, gpus, priority)
    assert value >= best - 1e-9
    assert value - best <= 1e-3 * max(value, 1e-9) * 1.0001 + 1e-9 * per_job.max()


def test_fill_idle_gpus_by_hand() -> None:
    # 3 GPUs idle; by descending Rem: job 1 (s=1), job 2 (s=1), job 0 (s=2, does not fit)
    filled = fill_idle_gpus(np.zeros((3, 2)), np.array([2.0, 1.0, 1.0]), 3,
                            np.array([5.0, 10.0, 7.0]))
    assert filled.tolist() == [[0, 0], [1, 1], [1, 1]]
    # a planned job keeps its GPUs: only 1 idle in round 0, taken by the longest left out
    plan = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    filled = fill_idle_gpus(plan, np.array([2.0, 1.0, 1.0]), 3, np.array([5.0, 7.0, 10.0]))
    assert filled[:, 0].tolist() == [1, 0, 1]
    assert filled[:, 1].tolist() == [0, 1, 1]


def long_job_instance(num_jobs: int = 1, gpus: int = 1) -> Any:
    # each job: 40 epochs of 100 s on one GPU (4000 s, 34 rounds of 120 s)
    jobs = [{"id": str(i), "epochs": 40, "batch_schedule": [32] * 40,
             "regimes": {"32": 100.0}, "throughput": {"v100": 1.0}} for i in range(num_jobs)]
    return instance_from_dict({"cluster": {"accelerators": {"v100": {"count": gpus}}},
                               "jobs": jobs, "params": {"round_s": 120.0}}, source="test")


def test_replans_every_eight_rounds_without_changes() -> None:
    # one job, no arrivals after round 0 and no completion before the end: plans at rounds
    # 0, 8, 16, 24, 32 (34 rounds in all) -- Shockwave's REOPT_ROUNDS rhythm
    policy = Shockwave(finish_time_rows=False)
    res = simulate(long_job_instance(), policy=policy)
    assert res.jobs[0].finish == pytest.approx(4000.0)
    assert res.solves == 5


def test_infeasible_targets_fall_back_to_priorities() -> None:
    # rho_max < 1 makes every finish-time target unreachable: every plan goes through the
    # relaxed re-solve and the re-placement, and the jobs still finish
    policy = Shockwave(rho_max=0.5)
    res = simulate(long_job_instance(num_jobs=3, gpus=2), policy=policy)
    assert res.complete and res.failed_solves == 0
    assert policy.relaxed_solves >= 1
    assert Status.INFEASIBLE in policy.statuses
    # work-conserving: 3 one-GPU jobs on 2 GPUs keep both GPUs busy until one job is left
    assert sum(r.gpu_seconds for r in res.jobs) == pytest.approx(3 * 4000.0)


@pytest.mark.parametrize("name", ["shockwave", "shockwave_convex"])
def test_registered_variants_finish_a_trace(name: str) -> None:
    from schedlab.workloads.shockwave import generate_shockwave_instance

    inst = generate_shockwave_instance(10, {"v100": 4}, seed=5)
    policy = get_policy(name)
    res = simulate(inst, policy=policy)
    assert res.complete and res.failed_solves == 0
    assert isinstance(policy, Shockwave)
    assert policy.mode == ("convex" if name.endswith("convex") else "integral")


def test_rounding_gives_a_finishing_job_its_last_round() -> None:
    from schedlab.formulations.shockwave.nash import round_gangs

    # job 0 needs 0.3 of a round to finish, job 1 1.6 rounds (not finishing); 1 GPU, 3 rounds:
    # job 0 is owed ceil(0.3) = 1 round, job 1 1.6 -> it runs first (urgency 1.6/3 > 1/3),
    # then job 0 (1/2 > 0.6/2), then job 1 owes 0.6 >= 1/2 and runs again
    x = np.array([[0.3, 0.0, 0.0], [0.6, 0.5, 0.5]])
    y = round_gangs(x, np.array([1.0, 1.0]), 1, np.array([True, False]))
    assert y.tolist() == [[0, 1, 0], [1, 0, 1]]
    # without the finishing flag, 0.3 of a round is never owed half a round: no round at all
    y = round_gangs(x, np.array([1.0, 1.0]), 1)
    assert y[0].sum() == 0


def test_huge_priorities_never_claim_a_proof_they_lack() -> None:
    from schedlab.formulations.shockwave.nash import NashWelfare
    from schedlab.workloads.shockwave import generate_shockwave_instance

    inst = generate_shockwave_instance(6, {"v100": 2}, seed=4, window_rounds=4)
    priorities = {j.id: (1e6 if i == 0 else 1.0) for i, j in enumerate(inst.jobs)}
    for mode in ("integral", "convex"):
        sol = NashWelfare(mode, priorities=priorities).solve(inst)  # type: ignore[arg-type]
        assert sol.status.has_solution
        # maximize: a reported bound is never below the reported objective
        if sol.bound is not None:
            assert sol.bound >= sol.objective - 1e-9 * max(1.0, abs(sol.objective))
        if sol.status is Status.OPTIMAL:
            assert sol.bound is not None


def test_lost_barrier_keeps_the_plan_and_claims_no_proof() -> None:
    from schedlab.formulations.shockwave.nash import NashWelfare
    from schedlab.workloads.shockwave import generate_shockwave_instance

    # priorities 1e30 apart, handed to the LP as they stand (no rescaling): the LP solver
    # may fail on them -- then the solution says so (no plan, a diagnostic naming the
    # weights' span) -- or return a plan, which must survive, unproven if a job with no epoch
    # done got no share (exact objective -inf)
    inst = generate_shockwave_instance(6, {"v100": 2}, seed=4, window_rounds=4)
    priorities = {j.id: (1e30 if i == 0 else 1.0) for i, j in enumerate(inst.jobs)}
    sol = NashWelfare("convex", priorities=priorities).solve(inst)
    if not sol.status.has_solution:
        assert not sol.rounds and any("span" in d for d in sol.diagnostics)
        return
    assert sol.rounds is not None and len(sol.rounds) == 4
    if sol.objective is None:  # the barrier was lost
        assert sol.status is not Status.OPTIMAL and sol.diagnostics


def test_priority_cap_is_an_explicit_option() -> None:
    from schedlab.errors import InputError

    with pytest.raises(InputError):
        Shockwave(priority_cap=0.5)
    policy = Shockwave(rho_max=0.5, priority_cap=10.0)
    res = simulate(long_job_instance(num_jobs=3, gpus=2), policy=policy)
    assert res.complete and policy.relaxed_solves >= 1
