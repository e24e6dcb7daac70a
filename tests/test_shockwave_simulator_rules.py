"""Rules of Shockwave's simulator (uw-mad-dash/shockwave at 8a44f4a) that schedlab follows
under ``mechanism="gavel"``, each checked by hand (docs/simulator.md, "Shockwave's simulator")."""

from __future__ import annotations

import math

import pytest

from schedlab.errors import InputError
from schedlab.formulations.gavel.rounds import SHOCKWAVE_RESET_INTERVAL_S, GavelRoundState
from schedlab.instance import AcceleratorPool, Cluster
from schedlab.policies.allox import AlloX
from schedlab.policies.allox_gavel import allox_allocation
from schedlab.policies.base import Policy
from schedlab.policies.shockwave_steps_state import ShockwaveSteps, epoch_of, simulator_critical
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator import simulate
from schedlab.simulator.shockwave_steps import MAX_FAILED_RUNS, after_failed_run, after_run
from schedlab.workloads.shockwave import generate_shockwave_instance


class Everyone(Policy):
    """Runs every active job on v100 (the tests' clusters have room)."""

    name = "everyone"

    def decide(self, state: ClusterState) -> list[Assignment]:
        return [Assignment(js.id, "v100") for js in state.active]


def _lm_gns(total_steps: float = 134583.0) -> ShockwaveSteps:
    """Job 0 of the seed-25 trace: LM at b0 = 10, GNS, one GPU (94.91 steps/s at 10,
    68.05 at 20)."""
    return ShockwaveSteps(model="LM", adaptation="gns", initial_batch_size=10, scale_factor=1,
                          total_steps=total_steps,
                          steps_per_s={10: {"v100": 94.91094148}, 20: {"v100": 68.05405097},
                                       40: {"v100": 40.0}, 80: {"v100": 20.0}},
                          profile_s=1224.8)


def _job(rule: ShockwaveSteps, steps_done: float = 0.0) -> JobState:
    b = rule.batch_size
    return JobState(id="j", arrival=0.0, scale_factor=1, total_steps=rule.total_steps,
                    throughput=dict(rule.steps_per_s[b]), steps_done=steps_done,
                    shockwave_steps=rule)


def test_epochs_are_counted_as_started_epochs() -> None:
    # LM: N = 59675 samples, ceil(N / 10) = 5968 steps an epoch; e = ceil(S / 5968)
    assert epoch_of("LM", 10, 0) == 0
    assert epoch_of("LM", 10, 1) == 1
    assert epoch_of("LM", 10, 5968) == 1
    assert epoch_of("LM", 10, 5969) == 2


def test_simulators_accordion_critical_regimes() -> None:
    # no 30 % warm-up; Recommendation without the profile's 60-69 / 80-89 windows
    assert simulator_critical("LM", 10, 9) and not simulator_critical("LM", 10, 10)
    assert not simulator_critical("Recommendation", 4096, 65)
    assert simulator_critical("ResNet-18", 256, 19) and not simulator_critical("ResNet-18", 64, 19)
    assert simulator_critical("ResNet-50", 64, 601) and not simulator_critical("ResNet-50", 64, 615)


def test_gns_request_looks_one_epoch_ahead_and_switch_keeps_epochs() -> None:
    rule = _lm_gns()
    # LM b0 = 10, one GPU: the GNS pattern doubles from epoch 11.  After 5 rounds of
    # int(94.91094148 x 120) = 11389 steps, e = ceil(56945 / 5968) = 10 and g[11] = 20 > 10.
    assert rule.decide(5 * 11389.0) == "grow"
    assert rule.decide(4 * 11389.0) is None  # e = 8
    rule.request = "grow"
    # applied after the next run: 68334 steps -> ceil(68334 / 5968) = 12 epochs done, at
    # ceil(N / 20) = 2984 steps an epoch 35808; total ceil(134583 / 2) = 67292 keeps 23 epochs
    assert rule.rescale(134583.0, 68334.0, 20) == (67292.0, 12 * 2984.0)


def test_a_job_alone_runs_as_shockwaves_simulator_runs_it() -> None:
    """Job 0 of the seed-25 trace alone: 6 rounds of 11389 steps at batch size 10 (the
    switch asked for after round 5 is applied after round 6), then 67292 - 35808 = 31484
    steps at 68.05 steps/s: 68334 / 94.91094148 + 31484 / 68.05405097 = 1182.6125 s, the
    JCT of job 0 in Shockwave's published max-min fairness run (1182.612 s)."""
    instance = generate_shockwave_instance(120, {"v100": 32}, seed=25,
                                           throughputs="shockwave-tacc")
    alone = instance.model_copy(update={"jobs": [instance.jobs[0]]})
    result = simulate(alone, policy=Everyone(), mechanism="gavel", round_s=120.0)
    expected = 68334 / 94.91094148 + 31484 / 68.05405097
    assert result.jobs[0].finish == pytest.approx(expected, rel=1e-9)
    assert result.jobs[0].finish == pytest.approx(1182.612, abs=1e-3)
    # schedlab's own epoch walk (the profile's batch schedule) gives the profile's 1224.8 s
    walk = simulate(alone, policy=Everyone(), mechanism="gavel", round_s=120.0,
                    shockwave_steps=False)
    assert walk.jobs[0].finish == pytest.approx(walk.jobs[0].isolated_time_s, rel=1e-9)


def test_shockwave_steps_needs_gavels_mechanism() -> None:
    instance = generate_shockwave_instance(2, {"v100": 4}, seed=1, throughputs="shockwave-tacc")
    with pytest.raises(InputError, match="shockwave_steps"):
        simulate(instance, policy=Everyone(), mechanism="schedlab", shockwave_steps=True)


def test_deadline_finishes_a_job_after_one_and_a_half_profiles() -> None:
    rule = _lm_gns()
    rule.profile_s = 100.0  # int(1.5 x 100) = 150 s of useful run time
    js = _job(rule)
    assert after_run(js, 120.0, finished=False) is None
    assert after_run(js, 30.0, finished=False) is None  # 150 s: not over
    assert after_run(js, 1.0, finished=False) == "deadline"


def test_fifth_run_without_steps_removes_the_job() -> None:
    rule = _lm_gns()
    rule.adaptation = "static"  # no switch pending in between
    js = _job(rule, steps_done=rule.total_steps)
    outcomes = [after_failed_run(js) for _ in range(MAX_FAILED_RUNS)]
    assert outcomes[:-1] == [None] * (MAX_FAILED_RUNS - 1) and outcomes[-1] == "failed"


class Script(Policy):
    """Runs the listed jobs in each round."""

    name = "script"

    def __init__(self, script: dict[int, list[str]]) -> None:
        super().__init__()
        self.script = script

    def decide(self, state: ClusterState) -> list[Assignment]:
        active = {js.id for js in state.active}
        return [Assignment(j, "v100") for j in self.script.get(state.round_index, [])
                if j in active]


def test_resume_overhead_under_gavel_credits_a_share_of_the_steps() -> None:
    """T = 0.77 steps/s, L = 120 s.  Round 0: a runs int(92.4) = 92 steps (0-119.48 s).
    Round 1: b.  Round 2: a resumes: n = 92 steps, e = 92 / 0.77 = 119.48 s > 115 s, so it
    holds its GPU e seconds and is credited int(92 x (e - 20) / e) = 76 steps (schedlab's
    own rule would credit floor(0.77 x 100) = 77)."""
    jobs = [JobState(id="a", arrival=0.0, scale_factor=1, total_steps=1000.0,
                     throughput={"v100": 0.77}),
            JobState(id="b", arrival=0.0, scale_factor=1, total_steps=1000.0,
                     throughput={"v100": 0.77})]
    cluster = Cluster(accelerators={"v100": AcceleratorPool(count=1)})
    result = simulate(jobs, cluster, Script({0: ["a"], 1: ["b"], 2: ["a"]}), round_s=120.0,
                      resume_overhead_s=20.0, mechanism="gavel", max_rounds=3)
    rec = {r.job: r for r in result.jobs}
    e = 92 / 0.77
    assert rec["a"].steps == 92 + int(92 * ((e - 20) / e)) == 168
    assert rec["a"].overhead_s == 20.0
    assert result.rounds[2].end - result.rounds[2].start == pytest.approx(e)


def test_credited_time_excludes_the_resume_overhead() -> None:
    """GavelRoundState credits a job the seconds it ran less the overhead it paid."""
    rs = GavelRoundState(["v100"], [1], 120.0)
    a = JobState(id="a", arrival=0.0, scale_factor=1, total_steps=1e6,
                 throughput={"v100": 1.0})
    assert rs.observe(0.0, [a])
    rs.reset(0.0, {"a": [1.0]})
    rs.record(0.0, [(a, 0)])
    a.steps_done += 100.0  # credited 100 steps, held 120 s, 20 s of it overhead
    a.executed_s += 120.0
    a.overhead_s += 20.0
    rs.observe(120.0, [a])
    assert rs.job_time[0, 0] == pytest.approx(60.0 + 100.0)


def test_reset_interval_and_throughput_changes() -> None:
    rs = GavelRoundState(["v100"], [1], 120.0, reset_interval_s=SHOCKWAVE_RESET_INTERVAL_S,
                         reset_on_throughput_change=False)
    a = JobState(id="a", arrival=0.0, scale_factor=1, total_steps=1e6,
                 throughput={"v100": 1.0})
    b = JobState(id="b", arrival=0.0, scale_factor=1, total_steps=1e6,
                 throughput={"v100": 1.0})
    assert rs.observe(0.0, [a])
    rs.reset(0.0, {"a": [1.0]})
    assert rs.observe(120.0, [a, b])  # the last reset was at t = 0
    rs.reset(120.0, {"a": [0.5], "b": [0.5]})
    a.throughput = {"v100": 2.0}
    a.throughput_version += 1
    assert not rs.observe(2000.0, [a, b])  # a new throughput alone makes no reset due
    c = JobState(id="c", arrival=0.0, scale_factor=1, total_steps=1e6,
                 throughput={"v100": 1.0})
    assert not rs.observe(1119.0, [a, b, c])
    assert rs.observe(1120.0, [a, b, c])  # 120 + 1000 s


def _waiting(job_id: str, arrival: float, remaining: float, thr: float,
             scale: int = 1) -> JobState:
    return JobState(id=job_id, arrival=arrival, scale_factor=scale, total_steps=remaining,
                    throughput={"v100": thr})


def test_allox_allocation_by_hand() -> None:
    """Two GPUs, one held by kept job k (X = 1).  One worker left; unallocated: old (100 s
    of work), new (10 s), gang (4 s, 2 GPUs).  alpha = 1: all three enter; cost p x P:
    the matching puts the longest job at position 1 and the shortest at 3 -- the one that
    runs first: gang, which gets X = 1 / 2; the others keep their previous entries (0)."""
    jobs = [_waiting("k", 0.0, 50.0, 1.0), _waiting("old", 1.0, 100.0, 1.0),
            _waiting("new", 5.0, 10.0, 1.0), _waiting("gang", 6.0, 8.0, 2.0, scale=2)]
    previous = {"k": {"v100": 1.0}, "gang": {"v100": 0.0}}
    out = allox_allocation(jobs, ["v100"], {"v100": 2}, 10.0, previous, alpha=1.0)
    assert out == {"k": {"v100": 1.0}, "old": {"v100": 0.0}, "new": {"v100": 0.0},
                   "gang": {"v100": 0.5}}
    # alpha = 0.2: max(int(0.2 x 3), 1 worker) = 1 job, the oldest unallocated one
    out = allox_allocation(jobs, ["v100"], {"v100": 2}, 10.0, previous, alpha=0.2)
    assert out["old"] == {"v100": 1.0} and out["gang"] == {"v100": 0.0}


def test_allox_under_gavels_mechanism_is_non_preemptive() -> None:
    """One GPU: a (long) arrives first and gets X = 1; b (short) arrives later and waits,
    although it is shorter: the kept job is not preempted."""
    jobs = [JobState(id="a", arrival=0.0, scale_factor=1, total_steps=600.0,
                     throughput={"v100": 1.0}),
            JobState(id="b", arrival=10.0, scale_factor=1, total_steps=60.0,
                     throughput={"v100": 1.0})]
    cluster = Cluster(accelerators={"v100": AcceleratorPool(count=1)})
    policy = AlloX(mechanism="gavel", reset_interval_s=SHOCKWAVE_RESET_INTERVAL_S)
    result = simulate(jobs, cluster, policy, round_s=120.0)
    finish = {r.job: r.finish for r in result.jobs}
    assert finish["a"] == pytest.approx(600.0)
    assert finish["b"] == pytest.approx(660.0)
    assert math.isfinite(policy.solver_time_s)
