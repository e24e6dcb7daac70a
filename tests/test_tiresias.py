"""Tiresias' queue lists (2D-LAS): tail insertion, jobs that got GPUs first, no preemption
within a queue.

The rule, from Tiresias' simulator (``dlas_sim_jobs`` in ``simulator/run_sim.py``): a new,
demoted or promoted job is appended to the tail of its queue; the queues are walked in list
order with backfill; after the walk the jobs that got GPUs are moved ahead of those that did
not, each group keeping its order.  Every expected value below is derived by hand in the
docstrings, with 100-s rounds of exactly 100 s (``end_round_early=False``) and 1 step/s per
job, so a 1-GPU job gains 100 GPU-s per round it runs and a 2-GPU job 200.
"""

from __future__ import annotations

import pytest

from schedlab.instance import Cluster
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.policies.tiresias import (
    TIRESIAS_CODE_THRESHOLDS_GPU_S,
    Tiresias,
)
from schedlab.simulator import simulate
from schedlab.simulator.engine import Progress
from schedlab.simulator.result import SimulationResult

ROUND_S = 100.0
LONG = 1e6  # steps: never finishes within a test


def cluster(gpus: int) -> Cluster:
    return Cluster.model_validate({"accelerators": {"v100": {"count": gpus}}})


def job(job_id: str, arrival: float, *, scale: int = 1, steps: float = LONG) -> JobState:
    return JobState(id=job_id, arrival=arrival, scale_factor=scale, total_steps=steps,
                    throughput={"v100": 1.0})


def run(
    policy: Tiresias, gpus: int, jobs: list[JobState], rounds: int | None = None
) -> tuple[SimulationResult, list[list[list[str]]]]:
    """Simulate with 100-s rounds; returns the result and the queue lists after each round."""
    snapshots: list[list[list[str]]] = []

    def snap(_: Progress) -> None:
        snapshots.append(policy.queues)

    result = simulate(jobs, cluster(gpus), policy, round_s=ROUND_S, end_round_early=False,
                      max_rounds=rounds, progress=snap)
    return result, snapshots


def ran(result: SimulationResult) -> list[set[str]]:
    """The jobs that ran in each round."""
    return [{r.job for r in rnd.runs} for rnd in result.rounds]


def test_early_gang_does_not_preempt_running_jobs_of_its_queue() -> None:
    """2 GPUs, one queue in effect (threshold 10^9 GPU-s).  x (1 GPU, 200 steps) arrives at
    0, big (2 GPUs, 100 steps) at 50, y (1 GPU, 500 steps) at 60, z (1 GPU, 300 steps) at 250.

    * t=0:   Q0 [x]                 -> x runs.
    * t=100: big, y appended         [x, big, y]: x (1 GPU), big needs 2 with 1 free: skipped,
      y takes the last GPU.  Partition: [x, y, big].
    * t=200: x finished.  [y, big]: y runs, big needs 2 with 1 free: skipped (FIFO by arrival
      would run big here and preempt y).  One GPU stays idle.
    * t=300: z appended              [y, big, z]: y runs, big skipped, z runs -> [y, z, big].
    * t=400, 500: [y, z, big]: y and z keep running; the earlier gang big never preempts them.
    * y ran 5 rounds (t=100..600), z 3 (t=300..600): both finish at 600.
    * t=600: [big]: big runs, finishes at 700.
    """
    jobs = [job("x", 0.0, steps=200.0), job("big", 50.0, scale=2, steps=100.0),
            job("y", 60.0, steps=500.0), job("z", 250.0, steps=300.0)]
    result, queues = run(Tiresias(thresholds_gpu_s=[1e9]), 2, jobs)
    assert ran(result) == [{"x"}, {"x", "y"}, {"y"}, {"y", "z"}, {"y", "z"}, {"y", "z"},
                           {"big"}]
    assert queues[1] == [["x", "y", "big"], []]
    assert queues[2] == [["y", "big"], []]
    assert queues[3] == [["y", "z", "big"], []]
    finish = {r.job: r.finish for r in result.jobs}
    assert finish == {"x": 200.0, "y": 600.0, "z": 600.0, "big": 700.0}
    by_job = {r.job: r for r in result.jobs}
    assert by_job["y"].preemptions == 0 and by_job["z"].preemptions == 0


def test_demoted_job_goes_to_the_tail_and_keeps_its_place_behind() -> None:
    """2 GPUs, threshold 150 GPU-s (two queues).  w (1 GPU, 200 steps) at 0, y (2 GPUs) at
    10, x (1 GPU) at 20.

    * t=0:   Q0 [w]: w runs (100 GPU-s).
    * t=100: Q0 [w, y, x]: w runs, y (2 GPUs, 1 free) skipped, x runs -> Q0 [w, x, y].
    * t=200: w finished (200 steps).  x has 100 < 150: Q0 [x, y]: x runs, y skipped
      (the earlier gang does not preempt x, which started first).
    * t=300: x has 200 >= 150: demoted, Q1 [x].  Q0 [y]: y runs on both GPUs (a higher
      queue preempts x).  y gains 200 GPU-s.
    * t=400: y has 200 >= 150: demoted to the *tail* of Q1: [x, y] although y arrived
      first.  x runs, y (2 GPUs, 1 free) skipped.
    * t=500: Q1 [x, y]: x runs again.
    """
    jobs = [job("w", 0.0, steps=200.0), job("y", 10.0, scale=2), job("x", 20.0)]
    result, queues = run(Tiresias(thresholds_gpu_s=[150.0]), 2, jobs, rounds=6)
    assert ran(result) == [{"w"}, {"w", "x"}, {"x"}, {"y"}, {"x"}, {"x"}]
    assert queues == [
        [["w"], []],
        [["w", "x", "y"], []],
        [["x", "y"], []],
        [["y"], ["x"]],
        [[], ["x", "y"]],
        [[], ["x", "y"]],
    ]


def test_promoted_job_goes_to_the_tail_of_q0() -> None:
    """1 GPU, threshold 100 GPU-s, PROMOTEKNOB P = 2.  l at 0, n at 50, m at 250, k at 350
    (1 GPU each, long).  waiting = now - (first start or promotion) - executed since then.

    * t=0:   Q0 [l]: l runs.
    * t=100: l (100) -> Q1 [l]; n appended to Q0 [n]: n runs.
    * t=200: n (100) -> Q1 tail [l, n]; Q0 empty; l runs (waiting 200-0-100 = 100 < 2x100).
    * t=300: m appended to Q0 [m]: m runs.  (l: 300-0-200 = 100 < 400; n: 300-100-100 = 100
      < 200.)
    * t=400: k appended first: Q0 [m, k]; then, by arrival: n waited 400-100-100 = 200 >=
      2x100: promoted to the tail, Q0 [m, k, n]; m (100) demoted to the tail of Q1 [l, m].
      Q0 [k, n]: k runs (not n, which arrived earlier).
    * t=500: k (100) -> Q1 [l, m, k]; Q0 [n]: n runs (0 GPU-s since its promotion).
      (l: 500-0-200 = 300 < 400; m: 500-300-100 = 100 < 200.)
    * t=600: by arrival: l waited 600-0-200 = 400 >= 2x200: promoted, Q0 [n, l]; n has 100
      GPU-s since its promotion: demoted, Q0 [l], Q1 [m, k, n]; m waited 600-300-100 = 200
      >= 2x100: promoted, Q0 [l, m], Q1 [k, n].  l runs.
    """
    jobs = [job("l", 0.0), job("n", 50.0), job("m", 250.0), job("k", 350.0)]
    result, queues = run(Tiresias(thresholds_gpu_s=[100.0], starvation_factor=2.0), 1, jobs,
                         rounds=7)
    assert ran(result) == [{"l"}, {"n"}, {"l"}, {"m"}, {"k"}, {"n"}, {"l"}]
    assert queues == [
        [["l"], []],
        [["n"], ["l"]],
        [[], ["l", "n"]],
        [["m"], ["l", "n"]],
        [["k", "n"], ["l", "m"]],
        [["n"], ["l", "m", "k"]],
        [["l", "m"], ["k", "n"]],
    ]


def test_jobs_that_got_gpus_move_ahead_each_group_in_order() -> None:
    """One decision, 3 GPUs, all in Q0 (fresh policy: jobs listed by arrival).  List
    [a (2), b (2), c (1), d (1)]: a runs, b (2 GPUs, 1 free) skipped, c runs, d skipped (no
    GPU left).  Partition: placed [a, c], then the others [b, d]."""
    jobs = [job("a", 0.0, scale=2), job("b", 1.0, scale=2), job("c", 2.0), job("d", 3.0)]
    state = ClusterState(now=10.0, round_index=0, round_s=ROUND_S, cluster=cluster(3),
                         active=jobs, finished=[])
    policy = Tiresias()
    assert policy.decide(state) == [Assignment("a", "v100"), Assignment("c", "v100")]
    assert policy.queues == [["a", "c", "b", "d"], []]


def test_gittins_sorts_by_index_and_keeps_list_order_on_ties() -> None:
    """2D-Gittins, 1 GPU, finished jobs attained {100, 200, 1000} GPU-s.  Indices by hand
    (G(a) = max over Delta = s - a of P(S - a <= Delta | S > a) / E[min(S - a, Delta) | S > a]):

    * G(0):   Delta 100: (1/3)/100 = 1/300; 200: (2/3)/((100+200+200)/3) = 1/250;
      1000: 1/(1300/3) = 3/1300.  G(0) = 1/250.
    * G(100): rest {100, 900}: Delta 100: (1/2)/100 = 1/200; 900: 1/500.  G(100) = 1/200.
    * G(150): rest {50, 850}: Delta 50: (1/2)/50 = 1/100; 850: 1/450.  G(150) = 1/100.

    Round 0: list [fresh (arrival 0, 0 GPU-s), half (arrival 10, 150 GPU-s)]: half has the
    higher index and runs; the list becomes [half, fresh].

    Then, with a new policy, round 0: b (arrival 0) alone runs.  Round 1: b has 100 GPU-s;
    a (arrival 0, 100 GPU-s, handed over mid-life, not running) is appended: [b, a].  Same
    index 1/200, same arrival: the list order decides, b runs (by id, a would)."""
    done = [job(f"f{i}", 0.0) for i in range(3)]
    for j, s in zip(done, (100.0, 200.0, 1000.0), strict=True):
        j.attained_service_s = s
    fresh, half = job("fresh", 0.0), job("half", 10.0)
    half.attained_service_s = 150.0
    policy = Tiresias(gittins=True)
    state = ClusterState(now=20.0, round_index=0, round_s=ROUND_S, cluster=cluster(1),
                         active=[fresh, half], finished=done)
    assert policy.decide(state) == [Assignment("half", "v100")]
    assert policy.queues == [["half", "fresh"], []]

    a, b = job("a", 0.0), job("b", 0.0)
    policy = Tiresias(gittins=True)
    state = ClusterState(now=0.0, round_index=0, round_s=ROUND_S, cluster=cluster(1),
                         active=[b], finished=done)
    assert policy.decide(state) == [Assignment("b", "v100")]
    a.attained_service_s = b.attained_service_s = 100.0
    state = ClusterState(now=100.0, round_index=1, round_s=ROUND_S, cluster=cluster(1),
                         active=[a, b], finished=done)
    assert policy.decide(state) == [Assignment("b", "v100")]
    assert policy.queues == [["b", "a"], []]


def test_a_new_run_starts_the_queues_afresh() -> None:
    """The same policy object run twice on the same jobs gives the same rounds (the second
    run does not inherit the first run's lists)."""
    jobs = [job("x", 0.0, steps=200.0), job("big", 50.0, scale=2, steps=100.0),
            job("y", 60.0, steps=500.0), job("z", 250.0, steps=300.0)]
    policy = Tiresias(thresholds_gpu_s=[1e9])
    first, _ = run(policy, 2, jobs)
    second, _ = run(policy, 2, jobs)
    assert ran(first) == ran(second)


def test_tiresias_code_thresholds_preset() -> None:
    """Tiresias' code: num_queue = 3, queue_limit [3250, 7200, ...]: 3249 -> Q0, 3250 -> Q1,
    7199 -> Q1, 7200 -> Q2."""
    policy = Tiresias(thresholds_gpu_s="tiresias_code")
    assert policy.thresholds_gpu_s == [3250.0, 7200.0] == list(TIRESIAS_CODE_THRESHOLDS_GPU_S)
    queues = [policy.queue_of(JobState(id="j", arrival=0.0, scale_factor=1, total_steps=1.0,
                                       throughput={"v100": 1.0}, attained_service_s=a))
              for a in (0.0, 3249.0, 3250.0, 7199.0, 7200.0)]
    assert queues == [0, 0, 1, 1, 2]
    assert len(policy.queues) == 3
    assert Tiresias(thresholds_gpu_s="paper").thresholds_gpu_s == [3200.0]
    with pytest.raises(ValueError, match="unknown preset"):
        Tiresias(thresholds_gpu_s="nope")
