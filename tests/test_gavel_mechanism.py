"""Gavel's own round mechanism (``mechanism="gavel"``): hand-derived cases.

Every expected number below is worked out by hand in the comments from the rules of Gavel's
``scheduler.py`` (simulation mode), as :class:`schedlab.formulations.gavel.rounds.GavelRoundState`
and :func:`schedlab.simulator.simulate` document them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from schedlab.errors import InputError
from schedlab.formulations.gavel.rounds import GavelRoundState
from schedlab.instance import AcceleratorPool, Cluster
from schedlab.policies.base import Policy
from schedlab.policies.gavel import GavelPolicy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator import simulate


@dataclass
class FakeJob:
    """What GavelRoundState reads of a job."""

    id: str
    throughput: dict[str, float]
    scale_factor: int = 1
    steps_done: float = 0.0
    time_on: dict[str, float] = field(default_factory=dict)
    executed_s: float = 0.0
    overhead_s: float = 0.0
    throughput_version: int = 0


def one_gpu_cluster() -> Cluster:
    return Cluster(accelerators={"v100": AcceleratorPool(count=1)})


# ------------------------------------------------------------------------- the simulator


class Newest(Policy):
    """Runs the most recently arrived active job on the single v100."""

    name = "newest"

    def decide(self, state: ClusterState) -> list[Assignment]:
        return [Assignment(state.active[-1].id, "v100")]


def test_gavel_rounds_run_whole_steps_and_end_at_the_last_job() -> None:
    # Round length L = 5 s; job a: T = 1.5 steps/s, 22.9 steps (Gavel reads int: 22 steps).
    # Gavel: a round runs int(1.5 x 5) = 7 steps = 7 / 1.5 = 14/3 s and ends then.
    #   round 1 [0, 14/3): a 7 steps.  b (3 steps, T = 1, arrival 4.8 > 14/3) not admitted.
    #   round 2 [14/3, 28/3): a 14 steps.  b arrives inside.
    #   round 3 [28/3, 28/3 + 3): b admitted at 28/3, runs its 3 steps: finish 37/3.
    #   round 4: a runs 7 steps: 21 steps, ends 37/3 + 14/3 = 17.
    #   round 5: a's last step, 1 / 1.5 = 2/3 s: finish 17 + 2/3 = 53/3.
    a = JobState(id="a", arrival=0.0, scale_factor=1, total_steps=22.9,
                 throughput={"v100": 1.5})
    b = JobState(id="b", arrival=4.8, scale_factor=1, total_steps=3.0,
                 throughput={"v100": 1.0})
    res = simulate([a, b], one_gpu_cluster(), Newest(), round_s=5.0, mechanism="gavel")
    finish = {j.job: j.finish for j in res.jobs}
    assert finish["b"] == pytest.approx(37 / 3)
    assert finish["a"] == pytest.approx(53 / 3)
    assert [r.end for r in res.rounds[:2]] == pytest.approx([14 / 3, 28 / 3])
    assert {j.job: j.steps for j in res.jobs} == {"a": 22.0, "b": 3.0}
    # schedlab's own rules: rounds of exactly 5 s, fractional steps.  b arrives at 4.8 <= 5,
    # runs [5, 8); a: 7.5 steps in [0, 5), then from 8: 15.4 steps left / 1.5 = 10.2667 s.
    res = simulate([a, b], one_gpu_cluster(), Newest(), round_s=5.0)
    finish = {j.job: j.finish for j in res.jobs}
    assert finish["b"] == pytest.approx(8.0)
    assert finish["a"] == pytest.approx(8.0 + 15.4 / 1.5)


def test_mechanism_is_read_from_the_policy_and_checked() -> None:
    a = JobState(id="a", arrival=0.0, scale_factor=1, total_steps=22.9,
                 throughput={"v100": 1.5})
    policy = Newest()
    policy.mechanism = "gavel"  # type: ignore[attr-defined]
    res = simulate([a], one_gpu_cluster(), policy, round_s=5.0)
    assert res.jobs[0].steps == 22.0  # whole steps: Gavel's accounting
    with pytest.raises(InputError):
        simulate([a], one_gpu_cluster(), Newest(), mechanism="other")  # type: ignore[arg-type]


# ------------------------------------------------------------------ GavelRoundState


def test_reset_timing_follows_gavel() -> None:
    # A reset is due when the job set changed and (1920 s passed since the last reset, or the
    # last reset was at t = 0).
    rs = GavelRoundState(["v100"], [1], 360.0)
    a = FakeJob("a", {"v100": 1.0})
    assert rs.observe(0.0, [a])  # first arrival: reset at 0
    rs.reset(0.0, {"a": [1.0]})
    b = FakeJob("b", {"v100": 1.0})
    assert rs.observe(360.0, [a, b])  # last reset at t = 0: due at once
    rs.reset(360.0, {"a": [0.5], "b": [0.5]})
    c = FakeJob("c", {"v100": 1.0})
    assert not rs.observe(720.0, [a, b, c])  # 360 s since the last reset
    assert not rs.observe(2279.0, [a, b, c])
    assert rs.observe(2280.0, [a, b, c])  # 360 + 1920


def test_priorities_deficits_and_time_credit_by_hand() -> None:
    # One v100, a and b with X = 0.5 each, L = 360 s, T = 1 step/s (a round = 360 steps).
    rs = GavelRoundState(["v100"], [1], 360.0)
    a, b = FakeJob("a", {"v100": 1.0}), FakeJob("b", {"v100": 1.0})
    assert rs.observe(0.0, [a, b])
    rs.reset(0.0, {"a": [0.5], "b": [0.5]})
    # job_time = 180 each, worker_time = 360: fraction 0.5, priority 1.0 both; deficit 0,
    # X equal -> arrival order: a.
    run, lost = rs.choose()
    assert run == [("a", 0)] and lost == []
    rs.record(0.0, [(a, 0)])
    a.steps_done += 360.0  # ran [0, 360)
    assert not rs.observe(360.0, [a, b])  # credit: a 180 + 360 = 540, worker_time 720
    assert rs.job_time[0, 0] == 540.0 and rs.worker_time[0] == 720.0
    # a: 0.5 / (540/720) = 2/3; b: 0.5 / (180/720) = 2 -> b
    assert rs.choose()[0] == [("b", 0)]
    rs.record(360.0, [(b, 0)])
    b.steps_done += 360.0
    rs.observe(720.0, [a, b])  # b 540, worker_time 1080: priorities 1.0 and 1.0 -> a
    assert rs.choose()[0] == [("a", 0)]
    # a reset at t = 2280 (1920 s after 360) with a at 540 s received since the last reset:
    # deficit_a += 0.5 (2280 - 360) - (540 - 180) = 960 - 360 = 600; b likewise 600.
    c = FakeJob("c", {"v100": 1.0})
    assert rs.observe(2280.0, [a, b, c])
    rs.reset(2280.0, {"a": [0.3], "b": [0.3], "c": [0.4]})
    assert list(rs.deficit[:3, 0]) == [780.0, 780.0, 0.0]
    assert list(rs.job_time[:3, 0]) == [180.0, 180.0, 180.0] and rs.worker_time[0] == 540.0


def test_per_type_queues_are_concatenated_not_merged() -> None:
    # v100 and k80, one GPU each; after a reset every fraction is 180/360 = 0.5, so priority =
    # 2 X.  a: X = (0.45, 0.55) -> priorities (0.9, 1.1); b: X = (0.4, 0) -> (0.8, 0).
    # Gavel walks v100's list first: a (0.9) beats b (0.8) on v100; then k80: a is taken, b has
    # priority 0 there but max-min fairness still schedules it: a -> v100, b -> k80.
    # (A single list merged by priority would give a -> k80 (1.1), then b -> v100.)
    rs = GavelRoundState(["v100", "k80"], [1, 1], 360.0)
    a = FakeJob("a", {"v100": 1.0, "k80": 1.0})
    b = FakeJob("b", {"v100": 1.0, "k80": 1.0})
    rs.observe(0.0, [a, b])
    rs.reset(0.0, {"a": [0.45, 0.55], "b": [0.4, 0.0]})
    assert rs.choose()[0] == [("a", 0), ("b", 1)]


def test_job_outside_the_allocation_holds_gpus_it_cannot_use() -> None:
    # Two v100s.  a (X = 1) was allocated at the reset at 0; c arrives at 360 while the
    # allocation is not recomputed (it is, at once, only when the last reset was at t = 0 --
    # so this test resets at 100 first).  c has priority 0, the walk picks it for the second
    # GPU, and Gavel gives it no workers: the GPU idles.
    rs = GavelRoundState(["v100"], [2], 360.0)
    a = FakeJob("a", {"v100": 1.0})
    rs.observe(100.0, [a])
    rs.reset(100.0, {"a": [1.0]})
    c = FakeJob("c", {"v100": 1.0})
    assert not rs.observe(460.0, [a, c])
    run, lost = rs.choose()
    assert run == [("a", 0)] and lost == [("c", 0)]


def test_time_after_an_idle_gap_counts_from_the_last_busy_round() -> None:
    # Gavel's round start is the end of the previous round that ran jobs.  a runs [0, 200)
    # and finishes (200 steps at 1 step/s); the cluster idles; b arrives at 1000 and runs a
    # whole round [1000, 1360).  Gavel credits b with 1360 - 200 = 1160 s, not 360 s.
    rs = GavelRoundState(["v100"], [1], 360.0)
    a = FakeJob("a", {"v100": 1.0})
    rs.observe(0.0, [a])
    rs.reset(0.0, {"a": [1.0]})
    rs.record(0.0, [(a, 0)])
    a.steps_done = 200.0
    b = FakeJob("b", {"v100": 1.0})
    rs.observe(1000.0, [b])  # a finished: removed
    rs.reset(1000.0, {"b": [1.0]})
    rs.record(1000.0, [(b, 0)])
    b.steps_done = 360.0
    rs.observe(1360.0, [b])
    assert rs.job_time[1, 0] == 180.0 + 1160.0


def test_shuffled_type_order_uses_gavels_stream() -> None:
    # shuffle_types: the type order of every round is random.Random(seed + 5).shuffle of the
    # cluster order.  With seed 0 the first shuffle of [0, 1, 2] leaves it unchanged and the
    # second gives [1, 0, 2] (random.Random(5)); with one GPU per type and three jobs with
    # equal priorities, the first job in arrival order goes to the first type of the order.
    import random

    rng = random.Random(5)
    orders = []
    for _ in range(2):
        order = [0, 1, 2]
        rng.shuffle(order)
        orders.append(order)
    rs = GavelRoundState(["v100", "p100", "k80"], [1, 1, 1], 360.0, shuffle_types=True)
    jobs = [FakeJob(n, {"v100": 1.0, "p100": 1.0, "k80": 1.0}) for n in "abc"]
    rs.observe(0.0, jobs)
    rs.reset(0.0, {j.id: [1 / 3] * 3 for j in jobs})
    for order in orders:
        run, _ = rs.choose()
        assert [k for _, k in run] == order and run[0][0] == "a"


def test_adapter_rejects_gavel_mechanism_with_space_sharing() -> None:
    with pytest.raises(InputError):
        GavelPolicy("gavel.max_min_fairness_packed", mechanism="gavel")
    with pytest.raises(InputError):
        GavelPolicy("gavel.max_min_fairness", mechanism="other")  # type: ignore[arg-type]


def test_adapter_gavel_mechanism_solves_only_at_resets() -> None:
    # Jobs arrive every 100 s on one v100 (each needs 10 rounds).  Resets: t = 0, then at
    # once at 100 (the last reset was at 0), then not before 100 + 1920 = 2020, i.e. at the
    # first round start >= 2020 (rounds of 100 s, all jobs have T = 1: 2100).  So 3 solves in
    # the first 22 rounds, where schedlab's rule solves at every arrival.
    jobs = [JobState(id=f"j{i}", arrival=100.0 * i, scale_factor=1, total_steps=1000.0,
                     throughput={"v100": 1.0}) for i in range(5)]
    policy = GavelPolicy("gavel.max_min_fairness", mechanism="gavel")
    simulate(jobs, one_gpu_cluster(), policy, round_s=100.0, max_rounds=22)
    assert policy.solves == 3
    policy = GavelPolicy("gavel.max_min_fairness")
    simulate(jobs, one_gpu_cluster(), policy, round_s=100.0, max_rounds=22)
    assert policy.solves >= 5
