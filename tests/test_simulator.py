"""The cluster simulator: hand-computed runs, conservation properties, modes, determinism,
decision checking and placement.

Every expected time below is derived by hand in the test's docstring (round length L).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.errors import InputError, SchedlabError
from schedlab.instance import Cluster, instance_from_dict
from schedlab.placement import PoolPlacer, ids_mask, mask_ids
from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator import (
    InvalidDecisionError,
    JobRecord,
    Progress,
    SimulationResult,
    SimulationStalledError,
    simulate,
)

# ----------------------------------------------------------------------------- helpers


def cluster(**counts: int) -> Cluster:
    """A cluster with ``counts`` GPUs per type, e.g. cluster(k80=1)."""
    return Cluster.model_validate({"accelerators": {k: {"count": n} for k, n in counts.items()}})


def job(job_id: str, steps: float, arrival: float = 0.0, scale: int = 1, **thr: float) -> JobState:
    """A JobState with ``steps`` total steps and throughputs ``thr`` (steps/s)."""
    return JobState(id=job_id, arrival=arrival, scale_factor=scale, total_steps=steps,
                    throughput=dict(thr))


class InOrder(Policy):
    """Test policy: every round, walk the active jobs in ``order`` (default: arrival order)
    and run each on the first type in ``types`` (default: cluster order) with room."""

    def __init__(self, order: Sequence[str] | None = None,
                 types: Callable[[ClusterState, JobState], list[str]] | None = None) -> None:
        super().__init__()
        self.order = list(order) if order is not None else None
        self.types = types

    def decide(self, state: ClusterState) -> list[Assignment]:
        self.decisions += 1
        free = dict(state.gpus)
        rank = {j: i for i, j in enumerate(self.order or [])}
        jobs = sorted(state.active, key=lambda j: rank.get(j.id, len(rank)))
        out = []
        for js in jobs:
            options = self.types(state, js) if self.types else list(free)
            for k in options:
                if js.throughput.get(k, 0.0) > 0 and free[k] >= js.scale_factor:
                    free[k] -= js.scale_factor
                    out.append(Assignment(js.id, k))
                    break
        return out


class Fixed(Policy):
    """Test policy: returns ``plan(state)``."""

    def __init__(self, plan: Callable[[ClusterState], list[Assignment]]) -> None:
        super().__init__()
        self.name = "fixed-test-policy"
        self.plan = plan

    def decide(self, state: ClusterState) -> list[Assignment]:
        return self.plan(state)


def constant(plan: list[Assignment]) -> Callable[[ClusterState], list[Assignment]]:
    """A plan function that always returns ``plan``."""
    return lambda state: plan


class RandomValid(Policy):
    """Test policy: a random subset of the active jobs, each on a random type with room,
    drawn from a generator seeded by (state.seed, round index)."""

    def decide(self, state: ClusterState) -> list[Assignment]:
        rng = random.Random(state.seed * 1_000_003 + state.round_index)
        free = dict(state.gpus)
        out = []
        jobs = list(state.active)
        rng.shuffle(jobs)
        for js in jobs:
            if rng.random() < 0.2:
                continue  # leave it waiting
            options = [k for k, v in js.throughput.items()
                       if v > 0 and free[k] >= js.scale_factor]
            if options:
                k = rng.choice(options)
                free[k] -= js.scale_factor
                out.append(Assignment(js.id, k))
        return out


def finish(result: SimulationResult, job_id: str) -> float | None:
    return next(j.finish for j in result.jobs if j.job == job_id)


def record(result: SimulationResult, job_id: str) -> JobRecord:
    return next(j for j in result.jobs if j.job == job_id)


# ------------------------------------------------------------------ hand-computed runs


def test_two_jobs_one_gpu_fifo_order() -> None:
    """One K80, L = 360 s, A = 720 steps and B = 360 steps at 1 step/s, both at t = 0, A first.

    Round 0 [0, 360): A runs 360 steps (360 left).  Round 1 [360, 720): A runs its last 360
    steps and finishes at 360 + 360/1 = 720.  Round 2 [720, 1080): B runs 360 steps, finishes
    at 720 + 360 = 1080.  JCT_A = 720 s, JCT_B = 1080 s; nobody is preempted.
    """
    result = simulate([job("A", 720, k80=1.0), job("B", 360, k80=1.0)], cluster(k80=1),
                      InOrder(["A", "B"]), round_s=360.0)
    assert finish(result, "A") == pytest.approx(720.0, rel=1e-12)
    assert finish(result, "B") == pytest.approx(1080.0, rel=1e-12)
    assert [len(r.runs) for r in result.rounds] == [1, 1, 1]
    assert record(result, "A").preemptions == 0 and record(result, "B").preemptions == 0
    assert record(result, "B").start == 720.0
    df = result.to_dataframe()
    assert list(df["jct"]) == pytest.approx([720.0, 1080.0])
    assert result.average_jct() == pytest.approx(900.0)


def test_switch_overhead_is_paid_on_each_migration() -> None:
    """Two types with one GPU each, 1 step/s on both, overhead o = 60 s, L = 360 s; the policy
    alternates A between t0 (even rounds) and t1 (odd rounds).

    Round 0 on t0: first start, no overhead: 360 steps (360 left).  Round 1 on t1: pays 60 s,
    runs 300 s: 300 steps (60 left).  Round 2 on t0: pays 60 s, runs 60 s: finishes at
    720 + 60 + 60 = 840.  JCT = 720 / 1 + 2 x 60 = 840 s; 2 migrations, 120 s of overhead.
    """
    a = job("A", 720, t0=1.0, t1=1.0)
    a.switch_overhead_s = 60.0

    def alternate(state: ClusterState, js: JobState) -> list[str]:
        return ["t0"] if state.round_index % 2 == 0 else ["t1"]

    result = simulate([a], cluster(t0=1, t1=1), InOrder(types=alternate), round_s=360.0)
    rec = record(result, "A")
    assert rec.finish == pytest.approx(840.0, rel=1e-12)
    assert rec.migrations == 2
    assert rec.overhead_s == pytest.approx(120.0)
    assert [r.runs[0].overhead_s for r in result.rounds] == [0.0, 60.0, 60.0]
    assert a.steps_done == 0.0, "the caller's JobState must not change"


def test_overhead_default_from_the_simulator_for_instance_jobs() -> None:
    """Same as above with an Instance whose job sets no overhead: ``switch_overhead_s=60`` of
    simulate() applies, and the JCT is again 720 + 2 x 60 = 840 s."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"t0": {"count": 1}, "t1": {"count": 1}}},
        "jobs": [{"id": "A", "total_steps": 720, "throughput": {"t0": 1.0, "t1": 1.0}}],
    })

    def alternate(state: ClusterState, js: JobState) -> list[str]:
        return ["t0"] if state.round_index % 2 == 0 else ["t1"]

    result = simulate(instance, policy=InOrder(types=alternate), round_s=360.0,
                      switch_overhead_s=60.0)
    assert finish(result, "A") == pytest.approx(840.0)


def test_resume_on_the_same_gpus_is_free() -> None:
    """One GPU, A and B of 720 steps at 1 step/s, overhead 60 s, round robin (A, B, A, B).

    Each job always resumes on GPU 0 of the same type: no migration, no overhead.  A finishes
    at the end of round 2 (720 s of its own running: rounds 0 and 2) = 1080, B at 1440.  Each
    was preempted once (A after round 0, B after round 1).
    """
    a, b = job("A", 720, k80=1.0), job("B", 720, k80=1.0)
    a.switch_overhead_s = b.switch_overhead_s = 60.0

    def robin(state: ClusterState) -> list[Assignment]:
        ids = [js.id for js in state.active]
        pick = ids[state.round_index % len(ids)] if len(ids) == 2 else ids[0]
        return [Assignment(pick, "k80")]

    result = simulate([a, b], cluster(k80=1), Fixed(robin), round_s=360.0)
    assert finish(result, "A") == pytest.approx(1080.0)
    assert finish(result, "B") == pytest.approx(1440.0)
    assert record(result, "A").migrations == 0 and record(result, "B").migrations == 0
    assert record(result, "A").preemptions == 1
    assert record(result, "B").preemptions == 1


def test_mid_round_finish_is_exact_and_round_ends_early() -> None:
    """One GPU, L = 360 s.  A = 500 steps at 2 steps/s finishes at 500 / 2 = 250 s; every job
    of round 0 is done, so round 1 starts at 250 (``end_round_early``) and B = 100 steps at
    1 step/s finishes at 250 + 100 = 350.  Without early round ends B starts at 360 and
    finishes at 460."""
    jobs = [job("A", 500, k80=2.0), job("B", 100, k80=1.0)]
    result = simulate(jobs, cluster(k80=1), InOrder(["A", "B"]), round_s=360.0)
    assert finish(result, "A") == pytest.approx(250.0, rel=1e-12)
    assert finish(result, "B") == pytest.approx(350.0, rel=1e-12)
    assert result.rounds[0].end == pytest.approx(250.0)
    fixed = simulate(jobs, cluster(k80=1), InOrder(["A", "B"]), round_s=360.0,
                     end_round_early=False)
    assert finish(fixed, "A") == pytest.approx(250.0)
    assert finish(fixed, "B") == pytest.approx(460.0)


def test_no_backfill_within_a_round() -> None:
    """Two GPUs.  A (250 steps at 1/s) and C (720 steps at 1/s) run in round 0; B waits.  A
    finishes at 250 and frees its GPU, but B starts only at the next round (360): C still runs,
    so the round is not cut.  B (100 steps) finishes at 460, C at 720."""
    jobs = [job("A", 250, k80=1.0), job("C", 720, k80=1.0), job("B", 100, k80=1.0)]
    result = simulate(jobs, cluster(k80=2), InOrder(["A", "C", "B"]), round_s=360.0)
    assert finish(result, "A") == pytest.approx(250.0)
    assert finish(result, "B") == pytest.approx(460.0)
    assert finish(result, "C") == pytest.approx(720.0)
    busy = result.rounds[0].busy_gpu_seconds()
    assert busy["k80"] == pytest.approx(250.0 + 360.0)


def test_co_located_pair_progresses_at_its_colocated_throughputs() -> None:
    """One V100 shared by A and B (space sharing): A runs 0.6 steps/s, B 0.5 steps/s together.
    A = 216 steps finishes at 216 / 0.6 = 360; B = 360 steps does 180 in round 0 and runs alone
    in round 1 at 1 step/s: 180 more steps, done at 360 + 180 = 540."""
    a = job("A", 216, v100=1.0)
    b = job("B", 360, v100=1.0)
    a.colocated_throughput = {"B": {"v100": 0.6}}
    b.colocated_throughput = {"A": {"v100": 0.5}}

    def plan(state: ClusterState) -> list[Assignment]:
        ids = {js.id for js in state.active}
        if ids == {"A", "B"}:
            return [Assignment("A", "v100", partner="B")]
        return [Assignment(i, "v100") for i in sorted(ids)]

    result = simulate([a, b], cluster(v100=1), Fixed(plan), round_s=360.0)
    assert finish(result, "A") == pytest.approx(360.0)
    assert finish(result, "B") == pytest.approx(540.0)
    first = result.rounds[0]
    assert {r.partner for r in first.runs} == {"A", "B"}
    assert first.busy_gpu_seconds()["v100"] == pytest.approx(360.0)  # the GPU counts once


# ------------------------------------------------------------------ modes and arrivals


def test_continuous_idle_jump_and_static_mode() -> None:
    """A (360 steps) arrives at 100 s, B (360 steps) at 5000 s, 1 step/s, one GPU.

    Continuous: the clock jumps to 100, A runs [100, 460); nothing is active, so the clock
    jumps to 5000 and B runs [5000, 5360): JCTs 360 and 360.  Static: both arrive at 0; A runs
    [0, 360), B [360, 720): finishes 360 and 720.
    """
    jobs = [job("A", 360, arrival=100.0, k80=1.0), job("B", 360, arrival=5000.0, k80=1.0)]
    cont = simulate(jobs, cluster(k80=1), InOrder(), mode="continuous")
    assert finish(cont, "A") == pytest.approx(460.0)
    assert finish(cont, "B") == pytest.approx(5360.0)
    assert [r.start for r in cont.rounds] == pytest.approx([100.0, 5000.0])
    stat = simulate(jobs, cluster(k80=1), InOrder(), mode="static")
    assert [j.arrival for j in stat.jobs] == [0.0, 0.0]
    assert finish(stat, "A") == pytest.approx(360.0)
    assert finish(stat, "B") == pytest.approx(720.0)


def test_arrival_inside_a_round_waits_for_the_next_round() -> None:
    """A (1000 steps) at 0 s and B (10 steps) at 10 s, two GPUs, L = 360 s: B is admitted at
    the next round start, 360 s, and finishes at 370 (JCT 360)."""
    jobs = [job("A", 1000, k80=1.0), job("B", 10, arrival=10.0, k80=1.0)]
    result = simulate(jobs, cluster(k80=2), InOrder(), round_s=360.0)
    assert record(result, "B").start == 360.0
    assert finish(result, "B") == pytest.approx(370.0)


def test_max_rounds_and_progress_callback() -> None:
    seen: list[Progress] = []
    result = simulate([job("A", 10_000, k80=1.0)], cluster(k80=1), InOrder(), max_rounds=3,
                      progress=seen.append)
    assert result.stopped == "max_rounds" and not result.complete
    assert len(result.rounds) == 3 and finish(result, "A") is None
    assert [p.round_index for p in seen] == [1, 2, 3]
    assert record(result, "A").steps == pytest.approx(3 * 360.0)
    assert result.to_dataframe()["finish"].isna().all()


def test_a_plan_list_changed_in_place_is_not_taken_for_a_repeat() -> None:
    """The engine reuses last round's placement when the decision repeats; a policy that
    returns the same list object with new contents must still get its new plan (hand
    computed below)."""
    plan: list[Assignment] = []

    def alternate(state: ClusterState) -> list[Assignment]:
        ids = [js.id for js in state.active]
        turn = ids[state.round_index % len(ids)]
        plan[:] = [Assignment(turn, "v100")]  # the same list object every round
        return plan

    result = simulate([job("a", 1000.0, v100=1.0), job("b", 1000.0, v100=1.0)], cluster(v100=1),
                      Fixed(alternate), round_s=360.0)
    ran = [r.runs[0].job for r in result.rounds]
    # a, b alternate while both are active: a needs rounds 0, 2, 4 (1080 steps >= 1000), so a
    # finishes in round 4 at 4 x 360 + (1000 - 720) = 1720 s; b then runs alone
    assert ran[:5] == ["a", "b", "a", "b", "a"]
    assert finish(result, "a") == pytest.approx(1720.0)
    # round 4 held only a, which finished, so it ends at 1720 s; b ran rounds 1 and 3 (720
    # steps) and needs 280 s more from 1720 s
    assert finish(result, "b") == pytest.approx(1720.0 + 280.0)


def test_determinism_for_a_seed() -> None:
    jobs = [job(str(i), 200 + 97 * i, arrival=50.0 * i, scale=1 + i % 2, a=1.0 + i % 3, b=2.0)
            for i in range(8)]
    one = simulate(jobs, cluster(a=2, b=3), RandomValid(), seed=7).to_dataframe()
    two = simulate(jobs, cluster(a=2, b=3), RandomValid(), seed=7).to_dataframe()
    assert one.equals(two)
    other = simulate(jobs, cluster(a=2, b=3), RandomValid(), seed=8).to_dataframe()
    assert not one.equals(other)


def test_interrupt_propagates_and_leaves_inputs_untouched() -> None:
    class Interrupting(Policy):
        def decide(self, state: ClusterState) -> list[Assignment]:
            if state.round_index == 2:
                raise KeyboardInterrupt
            return [Assignment(state.active[0].id, "k80")]

    a = job("A", 10_000, k80=1.0)
    with pytest.raises(KeyboardInterrupt):
        simulate([a], cluster(k80=1), Interrupting())
    assert a.steps_done == 0.0 and a.time_on == {} and a.finish_time is None


# ------------------------------------------------------------------- checked decisions


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([Assignment("Z", "k80")], "unknown or not active"),
        ([Assignment("A", "k80"), Assignment("A", "v100")], "assigned twice"),
        ([Assignment("A", "k80"), Assignment("B", "k80")], "2 GPUs of k80"),
        ([Assignment("C", "k80")], "needs 2 GPUs but the k80 pool has 1"),
        ([Assignment("A", "tpu")], "unknown accelerator"),
        ([Assignment("D", "k80")], "no throughput on k80"),
        ([Assignment("A", "v100", partner="B")], "no co-located throughput"),
        ([Assignment("A", "v100", partner="B"), Assignment("B", "v100")], "assigned twice"),
    ],
)
def test_invalid_decisions_raise_naming_the_policy(plan: list[Assignment], message: str) -> None:
    jobs = [job("A", 100, k80=1.0, v100=1.0), job("B", 100, k80=1.0, v100=1.0),
            job("C", 100, scale=2, k80=1.0, v100=1.0), job("D", 100, v100=1.0)]
    with pytest.raises(InvalidDecisionError, match=message) as info:
        simulate(jobs, cluster(k80=1, v100=2), Fixed(lambda state: plan))
    assert "fixed-test-policy" in str(info.value)
    assert info.value.exit_code == 1


def test_a_pair_counts_once_against_capacity() -> None:
    """A pair of two 1-GPU jobs fits on a 1-GPU pool (written once or mirrored)."""
    a, b = job("A", 100, v100=1.0), job("B", 100, v100=1.0)
    a.colocated_throughput = {"B": {"v100": 0.5}}
    b.colocated_throughput = {"A": {"v100": 0.5}}
    for plan in ([Assignment("A", "v100", partner="B")],
                 [Assignment("A", "v100", partner="B"), Assignment("B", "v100", partner="A")]):
        result = simulate([a, b], cluster(v100=1), Fixed(constant(plan)), max_rounds=1)
        assert sorted(r.job for r in result.rounds[0].runs) == ["A", "B"]


def test_bad_workloads_are_input_errors() -> None:
    with pytest.raises(InputError, match="cannot run anywhere"):
        simulate([job("A", 10, scale=4, k80=1.0)], cluster(k80=2), InOrder())
    with pytest.raises(InputError, match="duplicate job id"):
        simulate([job("A", 10, k80=1.0), job("A", 10, k80=1.0)], cluster(k80=2), InOrder())
    with pytest.raises(InputError, match="unknown accelerator"):
        simulate([job("A", 10, tpu=1.0)], cluster(k80=2), InOrder())
    with pytest.raises(InputError, match="mode"):
        simulate([job("A", 10, k80=1.0)], cluster(k80=2), InOrder(), mode="batch")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="total_steps"):
        simulate(instance_from_dict({"cluster": {"accelerators": {"k80": {"count": 1}}},
                                     "jobs": [{"id": "A", "throughput": {"k80": 1.0}}]}),
                 policy=InOrder())


def test_a_policy_that_never_runs_anything_is_stopped() -> None:
    with pytest.raises(SimulationStalledError, match="placed no job for 5 rounds"):
        simulate([job("A", 10, k80=1.0)], cluster(k80=1), Fixed(lambda s: []), stall_rounds=5)
    assert issubclass(SimulationStalledError, SchedlabError)


# ------------------------------------------------------------------------- placement


def test_pool_placer_is_sticky_and_consolidates_on_nodes() -> None:
    placer = PoolPlacer(8, per_node=4)
    masks = placer.place([1, 4, 2], [0, 0, 0])
    ids = [mask_ids(m) for m in masks]
    assert ids[1] in ((0, 1, 2, 3), (4, 5, 6, 7)), "a 4-GPU gang takes one whole node"
    assert set(ids[2]) <= {4, 5, 6, 7} - set(ids[0]) or set(ids[2]) <= {0, 1, 2, 3} - set(ids[0])
    assert len({g for i in ids for g in i}) == 7
    again = placer.place([2, 1], [masks[2], masks[0]])
    assert again == [masks[2], masks[0]], "previous ids are kept when free"
    clash = placer.place([2, 2], [ids_mask([0, 1]), ids_mask([1, 2])])
    assert mask_ids(clash[0]) == (0, 1) and mask_ids(clash[1]) != (1, 2)
    spread = PoolPlacer(8, per_node=4).place([2, 2, 4], [ids_mask([0, 1]), ids_mask([4, 5]), 0])
    assert mask_ids(spread[2]) == (2, 3, 6, 7), "a gang that fits no node spans the emptiest"


def test_simulated_gangs_stay_on_one_node_when_they_can() -> None:
    pool = Cluster.model_validate({"accelerators": {"v100": {"count": 8, "gpus_per_node": 4}}})
    jobs = [job("s", 10_000, v100=1.0), job("g", 10_000, scale=4, v100=4.0)]
    result = simulate(jobs, pool, InOrder(), max_rounds=2)
    gang = next(r for r in result.rounds[0].runs if r.job == "g")
    assert gang.gpu_ids in ((0, 1, 2, 3), (4, 5, 6, 7))
    assert [r.gpu_mask for r in result.rounds[1].runs] == [r.gpu_mask
                                                           for r in result.rounds[0].runs]


# ---------------------------------------------------------------- conservation (hypothesis)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[JobState], Cluster, float]:
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    types = [f"t{i}" for i in range(len(counts))]
    jobs = []
    for i in range(draw(st.integers(1, 7))):
        scale = draw(st.sampled_from([s for s in (1, 2, 4) if s <= max(counts)]))
        thr = {k: draw(st.floats(0.1, 10.0)) for k, n in zip(types, counts, strict=True)
               if n >= scale and draw(st.booleans())}
        if not thr:
            k = max(zip(counts, types, strict=True))[1]
            thr = {k: 1.0}
        js = job(str(i), draw(st.floats(1.0, 5000.0)), arrival=draw(st.floats(0.0, 2000.0)),
                 scale=scale, **thr)
        js.switch_overhead_s = draw(st.sampled_from([0.0, 0.0, 5.0, 30.0]))
        jobs.append(js)
    clus = cluster(**dict(zip(types, counts, strict=True)))
    return jobs, clus, draw(st.sampled_from([60.0, 360.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.integers(0, 3), st.sampled_from(["continuous", "static"]))
def test_conservation_on_random_workloads(
    case: tuple[list[JobState], Cluster, float], seed: int, mode: str
) -> None:
    jobs, clus, round_s = case
    result = simulate(jobs, clus, RandomValid(), round_s=round_s, seed=seed,
                      mode=mode)  # type: ignore[arg-type]
    assert result.complete
    by_id = {js.id: js for js in jobs}
    counts = {k: p.count for k, p in clus.accelerators.items()}
    steps: dict[str, float] = defaultdict(float)
    for r in result.rounds:
        assert r.end <= r.start + round_s + 1e-9
        used: dict[str, int] = defaultdict(int)
        for run in r.runs:
            assert used[run.accelerator] & run.gpu_mask == 0, "a GPU holds one job"
            used[run.accelerator] |= run.gpu_mask
            assert len(run.gpu_ids) == by_id[run.job].scale_factor
            steps[run.job] += by_id[run.job].throughput[run.accelerator] * (
                run.end - r.start - run.overhead_s)
        for acc, mask in used.items():
            assert mask.bit_count() <= counts[acc] and mask < (1 << counts[acc])
    total_gpu_s = 0.0
    total_work = 0.0
    for rec in result.jobs:
        js = by_id[rec.job]
        assert rec.steps == js.total_steps
        # finish time consistent with throughput: the runs account for exactly the steps
        assert steps[rec.job] == pytest.approx(js.total_steps, rel=1e-9)
        assert rec.finish is not None and rec.start is not None
        assert rec.finish >= rec.arrival + rec.isolated_time_s * (1 - 1e-9)
        assert rec.start >= rec.arrival
        total_gpu_s += rec.gpu_seconds
        total_work += js.scale_factor * rec.isolated_time_s
        assert rec.gpu_seconds >= js.scale_factor * rec.isolated_time_s * (1 - 1e-9)
    assert total_gpu_s >= total_work * (1 - 1e-9)
    busy = sum(result.busy_gpu_seconds().values())
    assert busy == pytest.approx(total_gpu_s, rel=1e-9)


def test_job_table_by_column_equals_the_rows() -> None:
    """``to_dataframe`` builds the table column by column; the frame pandas makes from one
    dict per row, each written here from the record (NaN start/finish/jct when missing, 0 s
    on a type the job never ran on), is the same; :func:`job_row` gives those rows."""
    import pandas as pd

    from schedlab.simulator.result import JOB_COLUMNS, job_columns, job_row

    result = simulate([job("A", 720, k80=1.0), job("B", 3600, k80=1.0, v100=2.0)],
                      cluster(k80=1, v100=1), InOrder(["A", "B"]), round_s=360.0,
                      max_rounds=2)
    nan = float("nan")
    by_hand = []
    for j in result.jobs:
        row = {name: getattr(j, name) for name in JOB_COLUMNS
               if name not in ("start", "finish", "jct")}
        row["start"] = nan if j.start is None else j.start
        row["finish"] = nan if j.finish is None else j.finish
        row["jct"] = nan if j.finish is None else j.finish - j.arrival
        row.update({f"time_on_{acc}": j.time_on.get(acc, 0.0) for acc in result.gpus})
        by_hand.append(row)
    columns = job_columns(result.gpus)
    rows = pd.DataFrame(by_hand, columns=columns)
    frame = result.to_dataframe()
    assert frame["finish"].isna().any()
    pd.testing.assert_frame_equal(frame, rows)
    pd.testing.assert_frame_equal(
        pd.DataFrame([job_row(j, result.gpus) for j in result.jobs], columns=columns), rows)


@settings(max_examples=300, deadline=None)
@given(ids=st.sets(st.integers(0, 4000), max_size=40), run=st.tuples(st.integers(0, 4000),
                                                                      st.integers(0, 64)))
def test_mask_ids_lists_the_set_bits(ids: set[int], run: tuple[int, int]) -> None:
    """mask_ids (a run of ids at a time) against reading the bits one by one, on scattered
    ids and on a run of consecutive ids; ids_mask is its inverse."""
    start, length = run
    for wanted in (sorted(ids), list(range(start, start + length))):
        mask = ids_mask(wanted)
        assert mask_ids(mask) == tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
        assert list(mask_ids(mask)) == wanted
