"""The array paths (``ClusterState.arrays``, the engine's vectorized rounds) change no
result: every run here is compared with the reference path -- the same policy with
``uses_arrays`` off, so it decides from the ``JobState`` s alone -- job by job (rel 1e-9).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_simulator_streaming import assert_same_records, close, pools

from schedlab.policies.base import Policy
from schedlab.policies.fifo import Fifo
from schedlab.policies.gavel import GavelPolicy
from schedlab.policies.registry import get_policy
from schedlab.policies.state import (
    NEVER_RAN,
    Assignment,
    ClusterState,
    JobState,
    SlotPlan,
)
from schedlab.simulator import array_placement, simulate
from schedlab.simulator.engine import InvalidDecisionError


def without_arrays(policy: Policy) -> Policy:
    """The same policy on the reference path: it is handed no ``ClusterState.arrays`` and
    reads the JobStates, progress included."""
    policy.uses_arrays = False
    policy.reads_progress = True
    return policy


@st.composite
def workloads(draw: st.DrawFn) -> list[JobState]:
    """2-14 jobs on v100/k80 pools of 4: random (sometimes tied) arrivals, ids in or against
    admission order, gangs, speeds,
    switch overheads; some jobs handed over mid-life (ran before, on a type and GPUs)."""
    n = draw(st.integers(2, 14))
    ids_up = draw(st.booleans())  # tied arrivals admitted in id order, or against it
    jobs = []
    for i in range(n):
        scale = draw(st.sampled_from([1, 1, 2, 4]))
        v100 = draw(st.floats(0.5, 5.0))
        k80 = draw(st.one_of(st.just(0.0), st.floats(0.1, 2.0)))
        arrival = draw(st.one_of(st.floats(0.0, 3000.0), st.sampled_from([0.0, 600.0])))
        js = JobState(
            id=f"j{i if ids_up else n - i:02d}", arrival=arrival, scale_factor=scale,
            total_steps=draw(st.floats(50.0, 5000.0)), throughput={"v100": v100, "k80": k80},
            switch_overhead_s=draw(st.sampled_from([0.0, 0.0, 30.0])))
        if draw(st.integers(0, 5)) == 0:  # handed over while running on v100 GPUs 0..s-1
            js.last_accelerator = "v100"
            js.last_gpu_ids = tuple(range(scale))
            js.last_round_run = draw(st.sampled_from([-1, -3]))
        jobs.append(js)
    return jobs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([60.0, 360.0]), keep=st.booleans(),
       engine=st.sampled_from(["arrays", "reference"]))
def test_fifo_array_path_equals_the_reference(jobs: list[JobState], round_s: float,
                                              keep: bool, engine: str) -> None:
    """FIFO deciding from the columns gives the same run as FIFO walking the JobStates,
    under either engine."""
    cluster = pools(v100=4, k80=4)
    fast = simulate(jobs, cluster, get_policy("fifo"), round_s=round_s, keep_jobs=keep,
                    engine=engine)  # type: ignore[arg-type]
    slow = simulate(jobs, cluster, without_arrays(get_policy("fifo")), round_s=round_s,
                    keep_jobs=keep, engine=engine)  # type: ignore[arg-type]
    assert_same_records(fast.jobs, slow.jobs)
    assert fast.num_rounds == slow.num_rounds
    assert fast.num_job_rounds == slow.num_job_rounds


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([60.0, 360.0]), backfill=st.booleans(),
       engine=st.sampled_from(["arrays", "reference"]))
def test_fifo_queue_between_rounds_equals_the_reference(jobs: list[JobState], round_s: float,
                                                        backfill: bool, engine: str) -> None:
    """FIFO's queue kept between rounds (``schedlab.policies.fifo_queue``), strict FIFO
    included, on pools small enough that jobs wait and start round after round: the same
    runs as FIFO walking the JobStates."""
    cluster = pools(v100=4, k80=4)
    fast = simulate(jobs, cluster, Fifo(backfill=backfill), round_s=round_s,
                    engine=engine)  # type: ignore[arg-type]
    slow = simulate(jobs, cluster, without_arrays(Fifo(backfill=backfill)), round_s=round_s,
                    engine=engine)  # type: ignore[arg-type]
    assert_same_records(fast.jobs, slow.jobs)
    assert (fast.num_rounds, fast.num_job_rounds) == (slow.num_rounds, slow.num_job_rounds)


def test_arrays_match_the_job_states() -> None:
    """Every round, the columns a policy is handed equal what its JobStates say."""
    seen: list[int] = []

    class Checking(Fifo):
        def decide(self, state: ClusterState) -> list[Assignment]:
            arrays = state.arrays
            assert arrays is not None
            types = state.cluster.types
            assert len(arrays.rows) == len(state.active)
            for slot, js in zip(arrays.rows.tolist(), state.active, strict=True):
                assert arrays.arrival[slot] == js.arrival
                assert arrays.scale[slot] == js.scale_factor
                assert arrays.last_round[slot] == (NEVER_RAN if js.last_round_run is None
                                                   else js.last_round_run)
                assert arrays.last_type[slot] == (-1 if js.last_accelerator is None
                                                  else types.index(js.last_accelerator))
            seen.append(len(state.active))
            return super().decide(state)

    jobs = [JobState(id=f"j{i}", arrival=100.0 * i, scale_factor=1 + i % 2,
                     total_steps=500.0 + 300.0 * i, throughput={"v100": 1.0, "k80": 0.5})
            for i in range(10)]
    checking = Checking()
    assert checking.reads_progress  # a subclass with its own decide reads progress
    simulate(jobs, pools(v100=2, k80=2), checking, round_s=120.0, engine="arrays")
    assert max(seen) > 1


def assert_same_runs(fast: object, slow: object) -> None:
    """The same rounds, each with the same runs (job, type, GPUs, partner, overhead, end)."""
    rounds_a = fast.rounds  # type: ignore[attr-defined]
    rounds_b = slow.rounds  # type: ignore[attr-defined]
    assert len(rounds_a) == len(rounds_b)
    for a, b in zip(rounds_a, rounds_b, strict=True):
        assert (a.index, a.start, a.end) == (b.index, b.start, b.end)
        assert len(a.runs) == len(b.runs)
        for x, y in zip(a.runs, b.runs, strict=True):
            assert (x.job, x.accelerator, x.gpu_mask, x.partner) == (
                y.job, y.accelerator, y.gpu_mask, y.partner)
            assert close(x.overhead_s, y.overhead_s) and close(x.end, y.end)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), round_s=st.sampled_from([60.0, 360.0]),
       policy=st.sampled_from(["fifo", "fifo_agnostic", "srtf", "tiresias", "random",
                               "gavel.max_min_fairness", "gavel.max_min_fairness_agnostic",
                               "gavel.max_sum_throughput", "gavel.finish_time_fairness"]),
       early=st.booleans(), by_runs=st.booleans())
def test_array_engine_equals_the_reference_loop(jobs: list[JobState], round_s: float,
                                                policy: str, early: bool,
                                                by_runs: bool) -> None:
    """The array engine and the per-job reference loop: same rounds, runs and records;
    ``by_runs``: the array engine places the pools by runs (compiled when numba loads: the
    moved gangs' GPUs then kept as descriptions, not masks), not by bit masks."""
    old = array_placement.RUN_PLACEMENT_MIN_GPUS
    array_placement.RUN_PLACEMENT_MIN_GPUS = 0 if by_runs else old
    try:
        _same_as_reference(jobs, round_s, policy, early)
    finally:
        array_placement.RUN_PLACEMENT_MIN_GPUS = old


def _same_as_reference(jobs: list[JobState], round_s: float, policy: str,
                       early: bool) -> None:
    cluster = pools(v100=4, k80=4)
    try:  # handed-over jobs may claim more GPUs than exist: then both refuse the plan
        slow = simulate(jobs, cluster, get_policy(policy), round_s=round_s,
                        end_round_early=early, switch_overhead_s=10.0, engine="reference")
    except InvalidDecisionError as exc:
        with pytest.raises(InvalidDecisionError) as caught:
            simulate(jobs, cluster, get_policy(policy), round_s=round_s,
                     end_round_early=early, switch_overhead_s=10.0, engine="arrays")
        assert str(caught.value) == str(exc)
        return
    fast = simulate(jobs, cluster, get_policy(policy), round_s=round_s,
                    end_round_early=early, switch_overhead_s=10.0, engine="arrays")
    assert_same_records(fast.jobs, slow.jobs)
    assert_same_runs(fast, slow)
    assert fast.busy_gpu_s is not None and slow.busy_gpu_s is not None
    assert all(close(fast.busy_gpu_s[k], slow.busy_gpu_s[k]) for k in slow.busy_gpu_s)
    assert (fast.num_rounds, fast.num_job_rounds) == (slow.num_rounds, slow.num_job_rounds)


def test_policies_that_read_progress_see_the_same_job_states() -> None:
    """A policy reading progress sees, every round, the JobStates the reference loop shows
    (every field); one that does not still gets complete records."""

    class Snapshots(Policy):
        name = "snapshots"

        def __init__(self, inner: Policy) -> None:
            super().__init__()
            self.inner = inner
            self.reads_progress = True
            self.seen: list[list[tuple[object, ...]]] = []

        def reset(self) -> None:
            super().reset()
            self.inner.reset()

        def decide(self, state: ClusterState) -> list[Assignment]:
            self.seen.append([(js.id, js.steps_done, js.executed_s, js.attained_service_s,
                               dict(js.time_on), js.rounds_run, js.last_round_run,
                               js.start_time, js.last_accelerator, js.last_gpu_ids,
                               js.preemptions, js.migrations) for js in state.active])
            return self.inner.decide(state)

    jobs = [JobState(id=f"j{i}", arrival=250.0 * (i % 4), scale_factor=1 + i % 3,
                     total_steps=400.0 + 170.0 * i, throughput={"v100": 1.0 + i % 2, "k80": 0.5},
                     switch_overhead_s=20.0 * (i % 2)) for i in range(12)]
    cluster = pools(v100=4, k80=3)
    for name in ("gavel.max_min_fairness", "tiresias", "fifo"):
        fast, slow = Snapshots(get_policy(name)), Snapshots(get_policy(name))
        a = simulate(jobs, cluster, fast, round_s=200.0, engine="arrays")
        b = simulate(jobs, cluster, slow, round_s=200.0, engine="reference")
        assert fast.seen == slow.seen
        assert_same_records(a.jobs, b.jobs)
        lazy = get_policy(name)
        if name != "tiresias":
            assert lazy.reads_progress is False  # these two decide without progress
        assert_same_records(simulate(jobs, cluster, lazy, round_s=200.0,
                                     engine="arrays").jobs, b.jobs)


def test_gavel_slot_plans_describe_their_assignments() -> None:
    """The Gavel adapter's SlotPlan arrays name exactly its Assignments (slot -> job id via
    the columns' rows, type index -> cluster type), every round."""
    checked = 0

    class Checked(GavelPolicy):
        def decide(self, state: ClusterState) -> list[Assignment]:
            nonlocal checked
            plan = super().decide(state)
            assert isinstance(plan, SlotPlan) and state.arrays is not None
            slot_job = {slot: js.id for slot, js in zip(state.arrays.rows.tolist(),
                                                        state.active, strict=True)}
            types = state.cluster.types
            assert [(slot_job[s], types[k]) for s, k in zip(plan.slots.tolist(),
                                                            plan.types.tolist(), strict=True)
                    ] == [(a.job, a.accelerator) for a in plan]
            checked += len(plan)
            return plan

    jobs = [JobState(id=f"j{i}", arrival=90.0 * i, scale_factor=1 + i % 2,
                     total_steps=300.0 + 80.0 * i, throughput={"v100": 2.0, "k80": 0.5 + i % 3})
            for i in range(15)]
    a = simulate(jobs, pools(v100=3, k80=3), Checked("gavel.max_min_fairness"), round_s=120.0,
                 engine="arrays")
    b = simulate(jobs, pools(v100=3, k80=3), GavelPolicy("gavel.max_min_fairness"),
                 round_s=120.0, engine="reference")
    assert checked > 20
    assert_same_records(a.jobs, b.jobs)


class Overcommit(Policy):
    """Every active job on v100 as a SlotPlan, whatever fits: an invalid plan."""

    uses_arrays = True

    def decide(self, state: ClusterState) -> list[Assignment]:
        assert state.arrays is not None
        rows = state.arrays.rows
        return SlotPlan([Assignment(js.id, "v100") for js in state.active], rows,
                        np.zeros(len(rows), dtype=np.int64))


def test_invalid_slot_plan_gets_the_reference_error() -> None:
    """A SlotPlan failing the array checks is read as Assignments: the same error as the
    reference loop names."""
    jobs = [JobState(id=f"j{i}", arrival=0.0, scale_factor=2, total_steps=100.0,
                     throughput={"v100": 1.0}) for i in range(3)]
    with pytest.raises(InvalidDecisionError) as reference:
        simulate(jobs, pools(v100=4), Overcommit(), engine="reference")
    with pytest.raises(InvalidDecisionError) as fast:
        simulate(jobs, pools(v100=4), Overcommit(), engine="arrays")
    assert str(fast.value) == str(reference.value)
    assert "6 GPUs of v100" in str(fast.value)


def test_auto_engine_picks_arrays_on_large_clusters_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine="auto"``: the array loop from ARRAY_ENGINE_MIN_GPUS GPUs on, else the
    per-job loop; an unknown engine is an input error."""
    import schedlab.simulator.array_run as array_run
    from schedlab.errors import InputError
    from schedlab.simulator.engine import ARRAY_ENGINE_MIN_GPUS

    calls: list[int] = []
    real = array_run.run_arrays

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(array_run, "run_arrays", counting)
    jobs = [JobState(id="a", arrival=0.0, scale_factor=1, total_steps=10.0,
                     throughput={"v100": 1.0})]
    simulate(jobs, pools(v100=ARRAY_ENGINE_MIN_GPUS - 1), get_policy("fifo"))
    assert calls == []
    simulate(jobs, pools(v100=ARRAY_ENGINE_MIN_GPUS), get_policy("fifo"))
    assert calls == [1]
    with pytest.raises(InputError):
        simulate(jobs, pools(v100=4), get_policy("fifo"), engine="fast")  # type: ignore


def test_gavel_adapter_with_columns_follows_throughput_changes() -> None:
    """Dynamic jobs change throughput between rounds (the loop counts it in
    ``ActiveArrays.throughput_changes``): the adapter reading the columns re-reads their
    rows as the one walking the JobStates does -- the same records."""
    from schedlab.workloads.shockwave import generate_shockwave_instance

    dynamic = generate_shockwave_instance(12, {"v100": 8}, seed=5, mean_gap_s=300.0)
    with_columns = simulate(dynamic, policy=get_policy("gavel.max_min_fairness"))
    walking = simulate(dynamic, policy=without_arrays(get_policy("gavel.max_min_fairness")))
    assert_same_records(with_columns.jobs, walking.jobs)
    changes: list[int] = []

    class Counting(GavelPolicy):
        def decide(self, state: ClusterState) -> list[Assignment]:
            assert state.arrays is not None
            changes.append(state.arrays.throughput_changes)
            return super().decide(state)

    simulate(dynamic, policy=Counting("gavel.max_min_fairness"))
    assert changes[-1] > 0  # the workload does change batch sizes
