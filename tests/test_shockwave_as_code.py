"""Shockwave as its code computes it, by hand: no rescaling under huge priorities, the re-plan
counter, the resume overhead of the simulator, and gangs larger than the cluster.

Every expected number below is worked out in the test's comments from the rules in
docs/formulations/shockwave.md and docs/simulator.md, not read off the code's output.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schedlab.formulations.shockwave.nash import NashWelfare
from schedlab.formulations.shockwave.rounds import rerank_rounds
from schedlab.instance import Cluster, Instance, instance_from_dict
from schedlab.policies.base import Policy
from schedlab.policies.shockwave import Shockwave
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator.engine import RESUME_GRACE_S, simulate


def window(jobs: list[tuple[int, int, int, float]], gpus: int, rounds: int,
           round_s: float = 120.0) -> Instance:
    """Static jobs (s GPUs, E epochs, e done, t s per epoch) on ``gpus`` V100s."""
    return instance_from_dict({
        "name": "hand-window", "cluster": {"accelerators": {"v100": {"count": gpus}}},
        "params": {"round_s": round_s, "window_rounds": rounds},
        "jobs": [{"id": f"j{i}", "scale_factor": s, "epochs": e, "epochs_done": d,
                  "batch_schedule": [32] * e, "regimes": {"32": t},
                  "throughput": {"v100": 1.0}} for i, (s, e, d, t) in enumerate(jobs)]})


# ------------------------------------------------------------- priorities 1e30 apart


@pytest.mark.parametrize(("mode", "low_epochs"), [("integral", 3.0), ("convex", 3.5)])
@pytest.mark.parametrize("high", [1.0e6, 1.0e15, 1.0e30])
def test_a_low_priority_job_keeps_its_optimal_share(mode: str, low_epochs: float,
                                                    high: float) -> None:
    """One GPU, 4 rounds of 120 s.  j0 has 1 epoch of 60 s left (9 of 10 done) and priority
    ``high``; j1 has 10 epochs of 120 s, none done, priority 1.  j0's term is largest at
    q = 1, which takes 60 s: 1 whole round (integral) or a share 60 / 480 (convex).  The rest
    of the window is j1's: 3 rounds = 3 epochs, or 420 s = 3.5 epochs.  Dividing the objective
    by the largest priority (the old rescaling) left j1's weight 1 / (8 high) below the
    solver's tolerances, and its share was arbitrary."""
    inst = window([(1, 10, 9, 60.0), (1, 10, 0, 120.0)], gpus=1, rounds=4)
    sol = NashWelfare(mode, predictor="oracle",  # type: ignore[arg-type]
                      priorities={"j0": high, "j1": 1.0}).solve(inst)
    assert sol.status.has_solution, sol.diagnostics
    planned = sol.metrics["planned_epochs"]
    assert planned["j0"] == pytest.approx(1.0, abs=1e-6)
    assert planned["j1"] == pytest.approx(low_epochs, abs=1e-6)


def test_replacement_orders_low_priority_jobs_under_a_huge_one() -> None:
    """Re-placement on 1 GPU, 3 rounds, one round each: pi = (1e30, 2, 1).  The cost
    sum_j pi_j t_j is least with the 1e30 job first, then pi = 2, then pi = 1 (2*1 + 1*2 = 4
    against 2*2 + 1*1 = 5).  With the cost divided by 1e30 the last two weigh ~1e-30 and
    their order was the solver's whim."""
    gangs = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    placed, result = rerank_rounds(gangs, np.ones(3), 1, np.array([1e30, 2.0, 1.0]))
    assert result.status.has_solution
    np.testing.assert_array_equal(placed, np.eye(3))


def test_overflowing_priority_is_a_failed_solve_not_a_reweighting() -> None:
    """A priority rho^100 above float64's range is not capped: the relaxed re-solve counts as
    failed (``overflowed_priorities``) and the round plan is the idle-GPU fill alone."""
    from schedlab.formulations.shockwave.nash import WindowData

    policy = Shockwave()
    policy.reset()
    ids = ["a", "b"]
    data = WindowData(ids=ids, accelerator="v100", gpus=1, rounds=2, round_s=120.0,
                      epochs=np.array([2.0, 2.0]), done=np.array([1.0, 0.0]),
                      scale=np.ones(2), budget=np.ones(2), sec_per_epoch=np.full(2, 60.0),
                      remaining_s=np.array([10.0, 120.0]), k=1e-3, ftf_cap=None)
    state = ClusterState(now=1e7, round_index=5, round_s=120.0,
                         cluster=Cluster.model_validate(
                             {"accelerators": {"v100": {"count": 1}}}), active=[], finished=[])
    # rho_a = (1e7 + 10) / 1e-3 ~ 1e10 and Rem_a < L: 1e10^100 overflows
    placed = policy._relaxed(window([(1, 2, 1, 60.0), (1, 2, 0, 60.0)], 1, 2), data,
                             {"a": 1e-3, "b": 1e9}, state)
    assert policy.overflowed_priorities == 1 and policy.failed_solves == 1
    assert not placed.any()


# ------------------------------------------------------------------ re-plan counter


class _Counting(Shockwave):
    """Shockwave that records the rounds at which it re-plans."""

    def reset(self) -> None:
        super().reset()
        self.replans: list[int] = []

    def _replan(self, state: ClusterState, acc: str, gpus: int) -> None:
        self.replans.append(state.round_index)
        super()._replan(state, acc, gpus)


def _counter_instance() -> Instance:
    """Two GPUs; at 0 s a 1-epoch job of 150 s (done in round 1) and two 40-epoch jobs of
    120 s each.  Every job arrives at 0 s, so after round 0 only the completion and the
    counter can trigger a re-plan."""
    return instance_from_dict({
        "name": "counter", "cluster": {"accelerators": {"v100": {"count": 2}}},
        "params": {"round_s": 120.0, "window_rounds": 4},
        "jobs": [{"id": "short", "epochs": 1, "batch_schedule": [32], "regimes": {"32": 150.0},
                  "throughput": {"v100": 1.0}},
                 *({"id": f"long{i}", "epochs": 40, "batch_schedule": [32] * 40,
                    "regimes": {"32": 120.0}, "throughput": {"v100": 1.0}} for i in range(2))]})


def test_replan_counter_is_reset_only_when_it_fires() -> None:
    """Shockwave's ``_iround_reopt`` counts every round and is reset only at 8: re-plans at
    round 0 (arrivals), at the round after the short job completes (``remove_metadata`` sets
    ``resolve``) and then at rounds 8, 16, 24 -- not 8 rounds after the completion."""
    policy = _Counting()
    result = simulate(_counter_instance(), policy=policy, max_rounds=26)
    short = next(r for r in result.jobs if r.job == "short")
    assert short.finish is not None
    done_round = math.ceil(short.finish / 120.0)  # the round whose decision sees it gone
    assert 0 < done_round < 8
    assert policy.replans[:5] == [0, done_round, 8, 16, 24]


def test_replan_counter_reset_on_completion_is_an_option() -> None:
    policy = _Counting(reset_counter_on_completion=True)
    result = simulate(_counter_instance(), policy=policy, max_rounds=26)
    short = next(r for r in result.jobs if r.job == "short")
    assert short.finish is not None
    done_round = math.ceil(short.finish / 120.0)
    assert policy.replans[:4] == [0, done_round, done_round + 8, done_round + 16]


# ------------------------------------------------------------------ resume overhead


class _Script(Policy):
    """Runs the jobs named for each round (round index -> ids) on the one GPU type."""

    def __init__(self, script: dict[int, list[str]]) -> None:
        super().__init__()
        self.name = "script"
        self.script = script

    def decide(self, state: ClusterState) -> list[Assignment]:
        active = {js.id for js in state.active}
        return [Assignment(j, "v100") for j in self.script.get(state.round_index, [])
                if j in active]


def _jobs() -> list[JobState]:
    """a: 250 s of work, b: 100 s of work (1 step/s) on one V100."""
    return [JobState(id=j, arrival=0.0, scale_factor=1, total_steps=work,
                     throughput={"v100": 1.0}) for j, work in (("a", 250.0), ("b", 100.0))]


def test_resume_overhead_by_hand() -> None:
    """Rounds of 120 s, 20 s resume overhead.  Round 0: a runs 120 s (the run's first round
    is never charged).  Round 1: b starts (it did not run in round 0), but its 100 s of work
    fit in 120 - 5 s: not charged, it ends at 120 + 100 = 220 s -- the round ends early at
    220 s (every job of the round finished).  Round 2 (t = 220): a resumes after missing
    round 1 with 130 s left (> 115 s): charged 20 s, runs 100 s, 30 s left.  Round 3
    (t = 340): a ran in round 2, no charge, finishes at 340 + 30 = 370 s."""
    script = {0: ["a"], 1: ["b"], 2: ["a"], 3: ["a"]}
    cl = Cluster.model_validate({"accelerators": {"v100": {"count": 1}}})
    result = simulate(_jobs(), cl, _Script(script), round_s=120.0, resume_overhead_s=20.0)
    rec = {r.job: r for r in result.jobs}
    assert rec["b"].finish == pytest.approx(220.0)
    assert rec["a"].finish == pytest.approx(370.0)
    assert rec["a"].overhead_s == pytest.approx(20.0) and rec["b"].overhead_s == 0.0
    # without the overhead: a has 130 s left at 220 s, runs 120, then 10 s: 350 s
    plain = simulate(_jobs(), cl, _Script(script), round_s=120.0)
    assert {r.job: r.finish for r in plain.jobs}["a"] == pytest.approx(350.0)
    assert RESUME_GRACE_S == 5.0


def test_resume_overhead_under_gavels_mechanism() -> None:
    """The same script under ``mechanism="gavel"`` (whole steps; a round lasts until its last
    job has run its steps): round 0 a runs 120 steps (0-120 s); round 1 b runs 100 steps
    (120-220 s, not charged); round 2 a is charged 20 s and runs int(1 x 100) = 100 steps
    (220-340 s); round 3 a runs its last 30 steps (340-370 s)."""
    script = {0: ["a"], 1: ["b"], 2: ["a"], 3: ["a"]}
    cl = Cluster.model_validate({"accelerators": {"v100": {"count": 1}}})
    result = simulate(_jobs(), cl, _Script(script), round_s=120.0, resume_overhead_s=20.0,
                      mechanism="gavel")
    assert {r.job: r.finish for r in result.jobs} == pytest.approx({"a": 370.0, "b": 220.0})


def test_resume_overhead_must_be_a_number_of_seconds() -> None:
    from schedlab.errors import InputError

    cl = Cluster.model_validate({"accelerators": {"v100": {"count": 1}}})
    with pytest.raises(InputError, match="resume_overhead_s"):
        simulate(_jobs(), cl, _Script({}), resume_overhead_s=-1.0)


# ------------------------------------------------------------ gang larger than cluster


@pytest.mark.parametrize("formulation", ["shockwave.nash_welfare",
                                         "shockwave.nash_welfare_convex"])
def test_gang_larger_than_the_cluster_exits_2_with_one_line(tmp_path: Path,
                                                            formulation: str) -> None:
    """An 8-GPU gang on 4 GPUs can never run: one error line naming the job, exit 2."""
    from schedlab.workloads.shockwave import save_shockwave_instance

    path = tmp_path / "big.json"
    save_shockwave_instance(window([(8, 10, 0, 60.0), (1, 10, 0, 120.0)], 4, 4), path)
    proc = subprocess.run([sys.executable, "-m", "schedlab", "solve", str(path), "-f",
                           formulation], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "jobs[0].scale_factor" in lines[0] and "'j0'" in lines[0] and str(path) in lines[0]


# -------------------------------------------------------------- profile calibration


@pytest.mark.parametrize(("profile", "timeline", "current", "expected"), [
    # rounds 1 and 2 ran half an epoch each: measured 0.5 + 0.5 = 1 epoch; the profile does
    # 200 s = 2 epochs of 100 s; |1 - 2| / 2 = 0.5 > 0.4: the times scale by 2 / 1
    ([100.0] * 4, [(1, 0.5), (2, 0.5)], 1.0, 2.0),
    # 0.8 + 0.8 = 1.6 against 2: within 40%, the factor in force stays
    ([100.0] * 4, [(1, 0.8), (2, 0.8)], 1.0, 1.0),
    ([100.0] * 4, [(1, 0.8), (2, 0.8)], 1.7, 1.7),
    # a first run in round 0 stands for 0 rounds, over 0 s: nothing to compare
    ([100.0] * 4, [(0, 1.0)], 1.0, 1.0),
    # one entry at round 3 stands for rounds 1-3: 3 x 1 epoch against 300 s = 3 epochs
    ([100.0] * 4, [(3, 1.0)], 1.0, 1.0),
    # 200 s: epoch 0 (100 s) fits, then 100 s of epoch 1's 300 s at the current factor:
    # 1 + 100 / 300 = 4/3 against 2 x 0.25 = 0.5 -> (4/3) / 0.5; at factor 2: 1 + 100 / 600
    ([100.0, 300.0], [(2, 0.25)], 1.0, (4.0 / 3.0) / 0.5),
    ([100.0, 300.0], [(2, 0.25)], 2.0, (7.0 / 6.0) / 0.5),
    # every epoch fits in 200 s (100 s): the last one's time measures the rest, 100 / 50
    ([50.0, 50.0], [(2, 0.2)], 1.0, (2.0 + 100.0 / 50.0) / 0.4),
])
def test_profile_calibration_by_hand(profile: list[float], timeline: list[tuple[int, float]],
                                     current: float, expected: float) -> None:
    from schedlab.formulations.shockwave.calibration import calibrated_scale

    assert calibrated_scale(profile, timeline, 100.0, current) == pytest.approx(expected)


def test_calibration_scales_the_window_inputs() -> None:
    """``duration_scale`` multiplies d_j and Rem_j (both linear in the epoch times)."""
    inst = window([(1, 10, 2, 60.0), (1, 10, 0, 120.0)], gpus=1, rounds=4)
    plain = NashWelfare("integral", predictor="oracle").window_data(inst)
    scaled = NashWelfare("integral", predictor="oracle",
                         duration_scale={"j0": 2.0}).window_data(inst)
    assert scaled.sec_per_epoch.tolist() == [120.0, 120.0]
    assert scaled.remaining_s.tolist() == [2 * plain.remaining_s[0], plain.remaining_s[1]]


def test_the_policy_reads_whole_epochs() -> None:
    """Shockwave's scheduler sets a job's progress to floor(steps / ceil(N / b)) whole epochs
    (``scheduler.py`` line 2334).  One job of 10 epochs of 48 s on one GPU, rounds of 120 s:
    after round 0 it has run 2.5 epochs, after round 1 five; the windows of rounds 1 and 2
    see 2 and 5 epochs done."""
    inst = instance_from_dict({
        "name": "floor", "cluster": {"accelerators": {"v100": {"count": 1}}},
        "params": {"round_s": 120.0, "window_rounds": 2},
        "jobs": [{"id": "a", "epochs": 10, "batch_schedule": [32] * 10,
                  "regimes": {"32": 48.0}, "throughput": {"v100": 1.0}}]})
    seen: list[int] = []

    class Every(Shockwave):
        def _solve(self, formulation: NashWelfare, window: Instance) -> Any:
            seen.append(window.jobs[0].epochs_done)
            return super()._solve(formulation, window)

    simulate(inst, policy=Every(reopt_rounds=1, finish_time_rows=False), max_rounds=3)
    assert seen[:3] == [0, 2, 5]


def test_convex_mode_proves_the_canonical_window_against_clarabel() -> None:
    """The shipped 120-job window: the exact convex mode says optimal (planned epochs proven
    within 1e-4), and an independent exponential-cone model of the same program (cvxpy +
    Clarabel, written here from ``window_data``) reaches the same objective and epochs."""
    import cvxpy as cp

    from schedlab.instance import load_instance

    root = Path(__file__).resolve().parent.parent
    inst = load_instance(root / "instances" / "shockwave" / "canonical-120jobs-32gpus.json")
    form = NashWelfare("convex")
    sol = form.solve(inst)
    assert sol.status.value == "optimal", sol.diagnostics
    d = form.window_data(inst)
    horizon = d.round_s * d.rounds
    reach = np.minimum(d.epochs - d.done, horizon / d.sec_per_epoch)
    q = cp.Variable(len(d.ids))  # progress fraction; p = E q - e
    p = cp.multiply(d.epochs, q) - d.done
    left = cp.pos(d.remaining_s - cp.multiply(d.sec_per_epoch, p))
    problem = cp.Problem(
        cp.Maximize(d.weights @ cp.log(q) - d.k * cp.max(left)),
        [p >= 0, p <= reach,
         cp.sum(cp.multiply(d.scale * d.sec_per_epoch / horizon, p)) <= d.gpus])
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12,
                  tol_feas=1e-12, tol_ktratio=1e-10, max_iter=500)
    assert sol.objective >= problem.value - 1e-9  # ours is the optimum's value, or above
    assert sol.objective == pytest.approx(problem.value, rel=1e-9)
    # the objective is flat at its optimum: Clarabel's epochs are only good to ~3e-4 here;
    # the outer approximation run to a 1e-14 gap (200 LPs, another method) pins them closer
    ours = np.array([sol.metrics["planned_epochs"][j] for j in d.ids])
    np.testing.assert_allclose(ours, d.epochs * q.value - d.done, rtol=1e-3, atol=1e-3)
    oa = NashWelfare("convex", convex_method="outer_approximation",
                     oa_tolerance=1e-14).solve(inst)
    theirs = np.array([oa.metrics["planned_epochs"][j] for j in d.ids])
    assert np.max(np.abs(ours - theirs) / np.maximum(ours, 1.0)) <= 1e-4
