"""The Gavel adapter: the array LP against the reference model, snapshots, re-solves, the
time-based round rule against RoundMechanism, and heterogeneity-awareness in simulation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab.errors import InputError, UnknownNameError
from schedlab.formulations.gavel.rounds import RoundMechanism, choose_by_priority
from schedlab.instance import AcceleratorPool, Cluster, Instance, instance_from_dict
from schedlab.policies.gavel import GavelPolicy, MaxMinClassLP
from schedlab.policies.registry import get_policy, policies
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.registry import FORMULATIONS, formulations, register
from schedlab.simulator import jobs_from_instance, simulate
from schedlab.workloads.gavel import generate_gavel_instance, small_six_jobs_instance

# ------------------------------------------------------------------ array LP = reference


@st.composite
def job_sets(draw: st.DrawFn) -> dict[str, Any]:
    """A cluster and jobs drawn from a few throughput rows, so some jobs share a class."""
    counts = draw(st.lists(st.integers(1, 6), min_size=2, max_size=3))
    types = [f"t{i}" for i in range(len(counts))]
    rows = [
        {k: draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0])) for k in types}
        for _ in range(draw(st.integers(1, 3)))
    ]
    jobs = []
    for i in range(draw(st.integers(1, 9))):
        row = dict(draw(st.sampled_from(rows)))
        scale = draw(st.sampled_from([1, 1, 2, 4]))
        if not any(v > 0 and scale <= n for v, n in zip(row.values(), counts, strict=True)):
            scale, row[types[0]] = 1, 1.0
        jobs.append({"id": f"j{i}", "total_steps": 1000.0, "scale_factor": scale,
                     "weight": draw(st.sampled_from([1.0, 1.0, 2.0])),
                     "throughput": {k: v for k, v in row.items() if v > 0}})
    return {"cluster": {"accelerators": {k: {"count": n} for k, n in
                                         zip(types, counts, strict=True)}},
            "jobs": jobs, "params": {"num_rounds": 0}}


def class_lp_optimum(doc: dict[str, Any], aware: bool) -> tuple[float, dict[str, np.ndarray]]:
    """t* and X per job from :class:`MaxMinClassLP`, fed straight from the raw document."""
    types = list(doc["cluster"]["accelerators"])
    gpus = np.array([doc["cluster"]["accelerators"][k]["count"] for k in types], dtype=float)
    lp = MaxMinClassLP(types, gpus, heterogeneity_aware=aware)
    classes = [lp.class_of(j["scale_factor"], j["weight"],
                           np.array([j["throughput"].get(k, 0.0) for k in types]))
               for j in doc["jobs"]]
    t, per_job = lp.solve(np.bincount(classes, minlength=lp.num_classes))
    return t, {j["id"]: per_job[c] for j, c in zip(doc["jobs"], classes, strict=True)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_sets(), st.booleans())
def test_array_lp_reaches_the_reference_optimum(doc: dict[str, Any], aware: bool) -> None:
    name = "gavel.max_min_fairness" if aware else "gavel.max_min_fairness_agnostic"
    reference = schedlab.solve(instance_from_dict(doc), name)
    t, x = class_lp_optimum(doc, aware)
    assert reference.objective is not None
    assert t == pytest.approx(reference.objective, rel=1e-6, abs=1e-9)
    # the class LP's allocation is feasible and every job reaches t
    types = list(doc["cluster"]["accelerators"])
    gpus = np.array([doc["cluster"]["accelerators"][k]["count"] for k in types], dtype=float)
    used = np.zeros(len(types))
    teq_norm = gpus.sum()
    for j in doc["jobs"]:
        xj = x[j["id"]]
        thr = np.array([j["throughput"].get(k, 0.0) if j["scale_factor"] <= n else 0.0
                        for k, n in zip(types, gpus, strict=True)])
        assert xj.sum() <= 1 + 1e-7 and (xj[thr == 0] <= 1e-9).all()
        used += j["scale_factor"] * xj
        teq = (thr * gpus).sum() / teq_norm
        score = j["scale_factor"] * (thr * xj).sum() / (j["weight"] * teq)
        assert score >= t * (1 - 1e-6) - 1e-9
    assert (used <= gpus + 1e-6).all()


# ------------------------------------------------------------------------- snapshots


def snapshot(instance: Instance, now: float = 0.0) -> ClusterState:
    return ClusterState(now=now, round_index=0, round_s=instance.params.round_s,
                        cluster=instance.cluster, active=jobs_from_instance(instance),
                        finished=[], job_set_version=1)


def test_adapter_allocation_equals_the_lp_on_a_snapshot() -> None:
    """docs/workloads.md derives small-6jobs: t* = 10/13, X[A,v100] = 6/13 (unique), the B
    jobs share 14/13 V100 and both K80: 7/26 and 1/2 each in the symmetric split the class LP
    returns.  The agnostic optimum is 2/3."""
    instance = small_six_jobs_instance()
    reference = schedlab.solve(instance, "gavel.max_min_fairness")
    policy = GavelPolicy("gavel.max_min_fairness")
    plan = policy.decide(snapshot(instance))
    allocation = policy.allocation()
    assert policy.path == "array" and policy.solves == 1
    assert policy.last_objective == pytest.approx(reference.objective, rel=1e-7)
    assert policy.last_objective == pytest.approx(10 / 13, rel=1e-7)
    for a in ("A1", "A2"):
        assert allocation[a] == pytest.approx(reference.allocation[a], rel=1e-6)
        assert allocation[a] == pytest.approx({"v100": 6 / 13}, rel=1e-6)
    for b in ("B1", "B2", "B3", "B4"):
        assert allocation[b] == pytest.approx({"v100": 7 / 26, "k80": 0.5}, rel=1e-6)
    ref_b = {k: sum(reference.allocation[b].get(k, 0.0) for b in ("B1", "B2", "B3", "B4"))
             for k in ("v100", "k80")}
    assert ref_b == pytest.approx({"v100": 14 / 13, "k80": 2.0}, rel=1e-6)
    assert sum(1 for a in plan if a.accelerator == "v100") <= 2
    generic = GavelPolicy("gavel.max_min_fairness", method="generic")
    generic.decide(snapshot(instance))
    assert generic.path == "generic"
    assert generic.last_objective == pytest.approx(10 / 13, rel=1e-6)
    agnostic = GavelPolicy("gavel.max_min_fairness_agnostic")
    agnostic.decide(snapshot(instance))
    assert agnostic.last_objective == pytest.approx(2 / 3, rel=1e-7)


def test_instance_from_state_carries_progress() -> None:
    instance = small_six_jobs_instance()
    state = snapshot(instance, now=720.0)
    state.active[0].steps_done = 100.0
    snap = GavelPolicy("gavel.min_makespan").instance_from_state(state)
    assert [j.id for j in snap.jobs] == [j.id for j in instance.jobs]
    assert snap.jobs[0].steps_done == 100.0 and snap.jobs[0].remaining_steps == 35900.0
    assert snap.jobs[0].time_in_system_s == 720.0
    assert snap.params.now_s == 720.0


# ---------------------------------------------------------------- re-solves, bookkeeping


class Watching(GavelPolicy):
    """Records the job-set version of every decision and checks the adapter's received times
    against the simulator's JobState.time_on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.versions: list[int] = []
        self.checked = 0

    def decide(self, state: ClusterState) -> list[Assignment]:
        self.versions.append(state.job_set_version)
        plan = super().decide(state)
        received = self.received_time()
        for js in state.active:
            for k in self.types:
                assert received[js.id][k] == pytest.approx(js.time_on.get(k, 0.0), abs=1e-6)
                self.checked += 1
        return plan


def small_busy() -> Instance:
    return generate_gavel_instance(30, {"v100": 4, "p100": 4, "k80": 4}, seed=1,
                                   jobs_per_hour=6)


@pytest.mark.parametrize("resolve_every", [None, 3])
def test_resolves_follow_job_set_changes(resolve_every: int | None) -> None:
    policy = Watching("gavel.max_min_fairness", resolve_every=resolve_every)
    result = simulate(small_busy(), policy=policy)
    assert result.complete and policy.checked > 0
    expected = 0
    last: int | None = None
    since = 0
    for version in policy.versions:
        if version != last or (resolve_every is not None and since >= resolve_every):
            expected += 1
            since = 0
        last = version
        since += 1
    changes = len(set(policy.versions))
    assert result.solves == expected
    if resolve_every is None:
        assert result.solves == changes
    else:
        assert result.solves > changes


def test_heterogeneity_awareness_lowers_average_jct() -> None:
    """30 Gavel jobs (seed 1, 6 jobs/h) on 4 V100 + 4 P100 + 4 K80, measured: average JCT
    about 15.9 h heterogeneity-aware vs 21.7 h agnostic.  The aware LP moves jobs to the types
    where they are relatively fastest, so every job progresses faster at the same fairness."""
    instance = small_busy()
    aware = simulate(instance, policy=get_policy("gavel.max_min_fairness"))
    agnostic = simulate(instance, policy=get_policy("gavel.max_min_fairness_agnostic"))
    assert aware.complete and agnostic.complete
    assert aware.average_jct() < 0.9 * agnostic.average_jct()


def test_generic_path_runs_other_formulations() -> None:
    instance = generate_gavel_instance(6, {"v100": 2, "k80": 2}, seed=3, jobs_per_hour=12)
    policy = get_policy("gavel.min_makespan", method="generic")
    assert isinstance(policy, GavelPolicy) and policy.path == "generic"
    result = simulate(instance, policy=policy)
    assert result.complete and result.solves >= 1
    assert result.solver_time_s > 0


def test_packed_policy_runs_co_located_pairs() -> None:
    instance = generate_gavel_instance(4, {"v100": 1, "k80": 1}, seed=1, multi_gpu=False,
                                       colocation=True)
    result = simulate(instance, policy=get_policy("gavel.max_min_fairness_packed"),
                      mode="static")
    assert result.complete
    assert any(run.partner is not None for r in result.rounds for run in r.runs)


# ------------------------------------------------------- the round rule, in seconds


@st.composite
def fixed_allocations(draw: st.DrawFn) -> tuple[Instance, dict[str, dict[str, float]]]:
    counts = draw(st.lists(st.integers(1, 6), min_size=2, max_size=3))
    types = [f"t{i}" for i in range(len(counts))]
    jobs: list[dict[str, Any]] = []
    raw: dict[str, dict[str, float]] = {}
    for i in range(draw(st.integers(1, 8))):
        scale = draw(st.sampled_from([s for s in (1, 2) if s <= max(counts)]))
        ok = [k for k, n in zip(types, counts, strict=True) if n >= scale]
        jobs.append({"id": f"j{i}", "scale_factor": scale, "total_steps": 1.0,
                     "throughput": dict.fromkeys(ok, 1.0)})
        raw[f"j{i}"] = {k: draw(st.floats(0.0, 1.0)) for k in ok}
    for job_id, shares in raw.items():  # each job's total <= 1
        total = sum(shares.values())
        if total > 1:
            raw[job_id] = {k: v / total for k, v in shares.items()}
    gangs = {j["id"]: j["scale_factor"] for j in jobs}
    for k, n in zip(types, counts, strict=True):  # capacity
        use = sum(gangs[j] * s.get(k, 0.0) for j, s in raw.items())
        if use > n:
            for s in raw.values():
                if k in s:
                    s[k] *= n / use * (1 - 1e-9)
    instance = instance_from_dict({
        "cluster": {"accelerators": {k: {"count": n} for k, n in zip(types, counts,
                                                                     strict=True)}},
        "jobs": jobs})
    return instance, raw


def array_round(
    instance: Instance,
    allocation: dict[str, dict[str, float]],
    received: dict[str, dict[str, float]],
    age: dict[str, float],
) -> set[tuple[str, str]]:
    """One round of choose_by_priority with rounds of L = 1 s (seconds = rounds)."""
    ids = [j.id for j in instance.jobs]
    types = instance.types
    target = np.array([[allocation[j].get(k, 0.0) for k in types] for j in ids])
    got = np.array([[received[j].get(k, 0.0) for k in types] for j in ids])
    runnable = np.array([[k in job.throughput for k in types] for job in instance.jobs])
    gang = np.array([job.scale_factor for job in instance.jobs], dtype=np.int64)
    free = [instance.cluster.accelerators[k].count for k in types]
    chosen = choose_by_priority(target, got, np.array([age[j] for j in ids]), runnable, gang,
                                free, round_s=1.0)
    return {(ids[u], types[k]) for u, k in chosen}


@settings(max_examples=40, deadline=None)
@given(fixed_allocations(), fixed_allocations())
def test_time_based_rule_matches_round_mechanism(
    first: tuple[Instance, dict[str, dict[str, float]]],
    second: tuple[Instance, dict[str, dict[str, float]]],
) -> None:
    """received = c L and age = t L with L = 1: the array rule picks exactly the units of
    RoundMechanism, also after :meth:`RoundMechanism.update` replaces the job set (jobs of the
    second draw join under new ids, the odd jobs of the first leave)."""
    instance, allocation = first
    mechanism = RoundMechanism(instance, allocation)
    received: dict[str, dict[str, float]] = {j.id: {} for j in instance.jobs}
    age = {j.id: 0.0 for j in instance.jobs}
    for _ in range(12):
        expected = {(p.job, p.accelerator) for p in mechanism.next_round()}
        assert array_round(instance, allocation, received, age) == expected
        for job_id, acc in expected:
            received[job_id][acc] = received[job_id].get(acc, 0.0) + 1.0
        age = {j: a + 1.0 for j, a in age.items()}
    # change the job set: keep the even jobs of the first draw, add the second draw's jobs
    other, other_alloc = second
    if set(other.types) != set(instance.types):
        return
    keep = [j for i, j in enumerate(instance.jobs) if i % 2 == 0]
    new_jobs = [j.model_copy(update={"id": "n" + j.id}) for j in other.jobs]
    merged = instance.model_copy(update={"jobs": keep + new_jobs})
    merged_alloc = {j.id: allocation[j.id] for j in keep}
    merged_alloc.update({"n" + j: s for j, s in other_alloc.items()})
    scale = {j.id: j.scale_factor for j in merged.jobs}
    for k in merged.types:  # the merged allocation must respect capacity again
        use = sum(scale[j] * s.get(k, 0.0) for j, s in merged_alloc.items())
        n = merged.cluster.accelerators[k].count
        if use > n:
            for s in merged_alloc.values():
                if k in s:
                    s[k] *= n / use * (1 - 1e-9)
    mechanism.update(merged, merged_alloc)
    received = {j.id: received.get(j.id, {}) for j in merged.jobs}
    age = {j.id: age.get(j.id, 0.0) for j in merged.jobs}
    for _ in range(8):
        expected = {(p.job, p.accelerator) for p in mechanism.next_round()}
        assert array_round(merged, merged_alloc, received, age) == expected
        for job_id, acc in expected:
            received[job_id][acc] = received[job_id].get(acc, 0.0) + 1.0
        age = {j: a + 1.0 for j, a in age.items()}


# ------------------------------------------------------------------------- registry


def test_every_gavel_formulation_is_a_policy() -> None:
    names = policies()
    gavel = [n for n, e in formulations().items() if n.startswith("gavel.")]
    assert gavel and set(gavel) <= set(names)
    for name in ("gavel.max_min_fairness", "gavel.max_min_fairness_agnostic"):
        policy = get_policy(name)
        assert isinstance(policy, GavelPolicy) and policy.path == "array"
        assert policy.name == name
    assert get_policy("gavel.hierarchical_fifo").path == "array"  # type: ignore[attr-defined]
    with FORMULATIONS.scoped():  # space sharing without a class LP: the reference model only
        register("testing.sum_packed", "schedlab.formulations.gavel.models:MaxSumThroughput",
                 space_sharing=True)
        assert GavelPolicy("testing.sum_packed").path == "generic"


def test_unknown_names_are_clear_errors() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown policy 'nope'.*gavel\.max_min") as info:
        get_policy("nope")
    assert info.value.exit_code == 2
    with pytest.raises(UnknownNameError, match="unknown Gavel formulation"):
        GavelPolicy("gavel.nope")
    with pytest.raises(InputError, match="not a Gavel formulation"):
        GavelPolicy("saturn.time_indexed")
    with FORMULATIONS.scoped(), pytest.raises(InputError, match="no array path"):
        register("testing.sum_packed", "schedlab.formulations.gavel.models:MaxSumThroughput",
                 space_sharing=True)
        GavelPolicy("testing.sum_packed", method="array")
    with pytest.raises(InputError, match="resolve_every"):
        GavelPolicy(resolve_every=0)


def test_a_policy_object_can_run_twice() -> None:
    instance = generate_gavel_instance(8, {"v100": 2, "k80": 2}, seed=5, jobs_per_hour=20)
    policy = get_policy("gavel.max_min_fairness")
    first = simulate(instance, policy=policy)
    second = simulate(instance, policy=policy)
    assert first.to_dataframe().equals(second.to_dataframe())
    assert first.solves == second.solves and first.decisions == second.decisions


def test_isolated_time_accumulates_as_gavel_does() -> None:
    # Cluster 2 v100 + 1 k80 (N = 3).  a: s = 1, T = (4, 2); b: s = 2, T = (6, -) (its gang
    # does not fit the single k80).  Gavel's isolated share, m = 2 jobs:
    #   a: n_k / (m s) = (1, 0.5), row sum 1.5 -> (2/3, 1/3): T_iso = 4 (2/3) + 2 (1/3) = 10/3
    #   b: (0.5, 0.25), row sum 0.75 <= 1: T_iso = 6 (0.5) = 3   (the old T_eq min(1, N/S)
    #      gave 6 (2/3) = 4 for b)
    # Decision 1 (t = 0): both new, t_iso = 0.  Then a runs 20 steps, b 12.
    # Decision 2: a 0 + 20 / (10/3) = 6 s; b 0 + 12 / 3 = 4 s.  b finishes; a runs 10 more.
    # Decision 3 (a alone, m = 1: share (2, 1) / 3 -> T_iso = 10/3): a 6 + 10 / (10/3) = 9 s.
    cluster = Cluster(accelerators={"v100": AcceleratorPool(count=2),
                                    "k80": AcceleratorPool(count=1)})
    a = JobState(id="a", arrival=0.0, scale_factor=1, total_steps=1000.0,
                 throughput={"v100": 4.0, "k80": 2.0})
    b = JobState(id="b", arrival=0.0, scale_factor=2, total_steps=1000.0,
                 throughput={"v100": 6.0})

    def state(now: float, active: list[JobState]) -> ClusterState:
        return ClusterState(now=now, round_index=0, round_s=360.0, cluster=cluster,
                            active=active, finished=[])

    policy = GavelPolicy("gavel.finish_time_fairness")
    first = state(0.0, [a, b])
    assert policy.isolated_throughputs(first) == pytest.approx({"a": 10 / 3, "b": 3.0})
    policy._advance_isolated_time(first)
    assert [j.isolated_time_s for j in policy.instance_from_state(first).jobs] == [0.0, 0.0]
    a.steps_done, b.steps_done = 20.0, 12.0
    second = state(360.0, [a, b])
    policy._advance_isolated_time(second)
    iso = {j.id: j.isolated_time_s for j in policy.instance_from_state(second).jobs}
    assert iso == pytest.approx({"a": 6.0, "b": 4.0})
    a.steps_done = 30.0
    third = state(720.0, [a])
    assert policy.isolated_throughputs(third) == pytest.approx({"a": 10 / 3})
    policy._advance_isolated_time(third)
    assert policy.instance_from_state(third).jobs[0].isolated_time_s == pytest.approx(9.0)
