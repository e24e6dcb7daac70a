"""Dynamic-adaptation jobs in the simulator: progress in epochs whose seconds follow the job's
batch-size schedule; policies see the current batch size through ``throughput``.

Expected values are worked out by hand from the schedules in each test."""

from __future__ import annotations

import math
from typing import Any

import pytest

from schedlab.errors import InputError
from schedlab.instance import instance_from_dict
from schedlab.policies.base import Policy
from schedlab.policies.registry import get_policy
from schedlab.policies.state import Assignment, ClusterState
from schedlab.simulator import simulate
from schedlab.workloads.shockwave import generate_shockwave_instance


def dynamic_instance(jobs: list[dict[str, Any]], gpus: dict[str, int],
                     round_s: float = 120.0) -> Any:
    return instance_from_dict({
        "cluster": {"accelerators": {k: {"count": n} for k, n in gpus.items()}},
        "jobs": jobs, "params": {"round_s": round_s}}, source="test")


def job(job_id: str, schedule: list[int], regimes: dict[str, float],
        throughput: dict[str, float] | None = None, arrival: float = 0.0) -> dict[str, Any]:
    return {"id": job_id, "arrival": arrival, "epochs": len(schedule),
            "batch_schedule": schedule, "regimes": regimes,
            "throughput": throughput or {"v100": 1.0}, "adaptation": "gns"}


class Greedy(Policy):
    """Runs every active job on the first type where its gang fits; records what it saw."""

    name = "greedy"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, str, dict[str, float], float, int]] = []

    def decide(self, state: ClusterState) -> list[Assignment]:
        self.decisions += 1
        free = dict(state.gpus)
        out = []
        for js in state.active:
            self.seen.append((state.now, js.id, dict(js.throughput), js.steps_done,
                              state.job_set_version))
            for k in free:
                if js.throughput.get(k, 0) > 0 and js.scale_factor <= free[k]:
                    free[k] -= js.scale_factor
                    out.append(Assignment(js.id, k))
                    break
        return out


def test_epochs_follow_the_schedule_across_rounds() -> None:
    # epochs 100 s, 100 s (batch 32) then 60 s (batch 64): 260 s alone; rounds of 120 s:
    # round 0 runs epoch 0 and 0.2 of epoch 1, round 1 the rest of epoch 1 (80 s) and
    # 40/60 of epoch 2, round 2 the last 20 s: finish at 260 s.
    inst = dynamic_instance([job("a", [32, 32, 64], {"32": 100.0, "64": 60.0})], {"v100": 1})
    policy = Greedy()
    res = simulate(inst, policy=policy)
    rec = res.jobs[0]
    assert rec.finish == pytest.approx(260.0, rel=1e-12)
    assert rec.total_steps == 3 and rec.steps == 3  # steps count epochs
    assert rec.isolated_time_s == pytest.approx(260.0, rel=1e-12)
    # what the policy saw at each round start: epochs done and epochs/s at the batch size
    seen = [(now, thr["v100"], done) for now, _, thr, done, _ in policy.seen]
    assert seen[0] == (0.0, pytest.approx(1 / 100), 0.0)
    assert seen[1][0] == 120.0 and seen[1][2] == pytest.approx(1.2)
    assert seen[1][1] == pytest.approx(1 / 100)
    assert seen[2][0] == 240.0 and seen[2][2] == pytest.approx(2 + 40 / 60)
    assert seen[2][1] == pytest.approx(1 / 60)  # the new batch size's speed
    # the batch-size change in round 1 bumped the job-set version (policies re-solve)
    assert policy.seen[2][4] > policy.seen[1][4] == policy.seen[0][4]


def test_slower_type_stretches_every_epoch_by_the_initial_ratio() -> None:
    # throughput 2 on v100, 1 on k80: every epoch takes twice as long on k80.
    inst = dynamic_instance(
        [job("a", [8, 16], {"8": 50.0, "16": 30.0}, {"v100": 2.0, "k80": 1.0})],
        {"v100": 0, "k80": 1})
    res = simulate(inst, policy=Greedy())
    assert res.jobs[0].finish == pytest.approx(2 * (50.0 + 30.0), rel=1e-12)
    # T_excl uses the fastest type with room: only k80 exists here
    assert res.jobs[0].isolated_time_s == pytest.approx(160.0, rel=1e-12)


def test_epochs_done_resume_mid_schedule() -> None:
    data = job("a", [32, 32, 64], {"32": 100.0, "64": 60.0})
    data["epochs_done"] = 2
    res = simulate(dynamic_instance([data], {"v100": 1}), policy=Greedy())
    assert res.jobs[0].finish == pytest.approx(60.0, rel=1e-12)


def test_gavel_mechanism_runs_dynamic_jobs() -> None:
    # two identical jobs on one GPU under Gavel's own mechanism: both finish, total work 2 x
    # 260 s, so the last finish is at 520 s at the earliest (one GPU, no idle time).
    jobs = [job(x, [32, 32, 64], {"32": 100.0, "64": 60.0}) for x in ("a", "b")]
    res = simulate(dynamic_instance(jobs, {"v100": 1}),
                   policy=get_policy("gavel.max_min_fairness"))
    assert all(r.finish is not None for r in res.jobs)
    assert max(r.finish for r in res.jobs if r.finish is not None) >= 520.0 - 1e-6
    gpu_seconds = sum(r.gpu_seconds for r in res.jobs)
    assert gpu_seconds == pytest.approx(520.0, rel=1e-9)


@pytest.mark.parametrize("policy_name", ["fifo", "themis", "allox", "gandiva_fair",
                                         "gavel.max_min_fairness", "gavel.min_makespan"])
def test_every_policy_finishes_a_shockwave_trace(policy_name: str) -> None:
    inst = generate_shockwave_instance(8, {"v100": 4}, seed=3)
    res = simulate(inst, policy=get_policy(policy_name))
    assert res.complete
    for rec, spec in zip(res.jobs, inst.jobs, strict=True):
        assert spec.regimes is not None and spec.batch_schedule is not None
        alone = math.fsum(spec.regimes[str(b)] for b in spec.batch_schedule)
        assert rec.isolated_time_s == pytest.approx(alone, rel=1e-12)
        assert rec.jct is not None and rec.jct >= alone * (1 - 1e-9)
        # the seconds it ran add up to its epochs' seconds (no overhead configured)
        assert rec.executed_s == pytest.approx(alone, rel=1e-9)


def test_bad_dynamic_job_is_one_clear_error() -> None:
    data = job("a", [32, 48], {"32": 100.0})
    with pytest.raises(InputError) as err:
        simulate(dynamic_instance([data], {"v100": 1}), policy=Greedy())
    assert "48" in str(err.value) and "regimes" in str(err.value)
