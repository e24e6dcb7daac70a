"""Online policies on hand-built cluster states (no simulator needed).

``run_rounds`` is a tiny test-local round loop: it advances each assigned job by its throughput
for one round and updates the progress fields the policies read.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.instance import AcceleratorPool, Cluster
from schedlab.policies.allox import AlloX, first_to_run, min_completion_matching
from schedlab.policies.base import Policy
from schedlab.policies.builtin import BUILTIN_POLICIES
from schedlab.policies.fifo import Fifo, RandomOrder
from schedlab.policies.gandiva import GandivaFair, GandivaTimeSlicing, _Placer, packing_gain
from schedlab.policies.registry import get_policy, policies
from schedlab.policies.srtf import Srtf
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.policies.themis import Themis, finish_time_fairness
from schedlab.policies.tiresias import Tiresias, gittins_index

ROUND_S = 100.0


def make_state(
    gpus: dict[str, int],
    jobs: Sequence[JobState],
    *,
    now: float = 0.0,
    round_index: int = 0,
    finished: Sequence[JobState] = (),
) -> ClusterState:
    cluster = Cluster(accelerators={k: AcceleratorPool(count=n) for k, n in gpus.items()})
    active = sorted(jobs, key=lambda j: (j.arrival, j.id))
    return ClusterState(now=now, round_index=round_index, round_s=ROUND_S, cluster=cluster,
                        active=active, finished=list(finished))


def job(
    job_id: str,
    *,
    arrival: float = 0.0,
    scale: int = 1,
    steps: float = 1e9,
    thr: dict[str, float] | None = None,
    **progress: object,
) -> JobState:
    j = JobState(id=job_id, arrival=arrival, scale_factor=scale, total_steps=steps,
                 throughput=dict(thr or {"v100": 1.0}))
    for key, value in progress.items():
        setattr(j, key, value)
    return j


def running(j: JobState, accelerator: str, round_index: int) -> JobState:
    """Mark ``j`` as having run on ``accelerator`` in round ``round_index - 1``."""
    j.last_round_run = round_index - 1
    j.last_accelerator = accelerator
    j.start_time = j.start_time if j.start_time is not None else 0.0
    return j


def check_valid(state: ClusterState, plan: list[Assignment]) -> None:
    """No more GPUs than exist per type; whole gangs; each active job at most once; partners
    name each other on the same type; a job runs only where it has a throughput."""
    names = [a.job for a in plan]
    assert len(names) == len(set(names)), f"a job placed twice: {names}"
    by_job = {a.job: a for a in plan}
    used: Counter[str] = Counter()
    for a in plan:
        j = state.job(a.job)
        assert a.accelerator in state.gpus
        if a.partner is None:
            assert j.throughput.get(a.accelerator, 0.0) > 0.0
            used[a.accelerator] += j.scale_factor
        else:
            b = by_job[a.partner]
            assert b.partner == a.job and b.accelerator == a.accelerator
            assert (j.colocated_throughput or {}).get(a.partner, {}).get(a.accelerator, 0) > 0
            if a.job < a.partner:
                used[a.accelerator] += max(j.scale_factor, state.job(a.partner).scale_factor)
    for k, n in used.items():
        assert n <= state.gpus[k], f"{k}: {n} GPUs used > {state.gpus[k]}"


def run_rounds(
    policy: Policy,
    gpus: dict[str, int],
    jobs: list[JobState],
    rounds: int,
    on_round: Callable[[int, list[Assignment]], None] | None = None,
) -> list[JobState]:
    """Tiny round loop: decide, check, advance by one round of throughput.  Returns the
    finished jobs."""
    finished: list[JobState] = []
    pending = sorted(jobs, key=lambda j: j.arrival)
    for r in range(rounds):
        now = r * ROUND_S
        active = [j for j in pending if j.arrival <= now and not j.done]
        state = make_state(gpus, active, now=now, round_index=r, finished=finished)
        plan = policy.decide(state)
        check_valid(state, plan)
        if on_round is not None:
            on_round(r, plan)
        for a in plan:
            j = state.job(a.job)
            thr = (j.throughput[a.accelerator] if a.partner is None
                   else (j.colocated_throughput or {})[a.partner][a.accelerator])
            j.steps_done = min(j.steps_done + thr * ROUND_S, j.total_steps)
            j.attained_service_s += j.scale_factor * ROUND_S
            j.executed_s += ROUND_S
            j.rounds_run += 1
            j.start_time = now if j.start_time is None else j.start_time
            j.last_round_run, j.last_accelerator = r, a.accelerator
            if j.steps_done >= j.total_steps:
                j.finish_time = now + ROUND_S
                finished.append(j)
    return finished


# the policies for any job with throughputs (Shockwave's, for dynamic jobs on one type, has
# its own tests and the kit's Shockwave workload)
POLICY_IDS = [name for name, _, _, _ in BUILTIN_POLICIES
              if get_policy(name).workload_kind == "gavel"]
ALL_POLICIES: list[Callable[[], Policy]] = [partial(get_policy, name) for name in POLICY_IDS]


# ---------------------------------------------------------------------------- random states


@st.composite
def cluster_states(draw: st.DrawFn) -> tuple[dict[str, int], list[JobState], int]:
    """A cluster (1-3 types), up to 10 jobs with random progress; some ran last round on a
    set of GPUs that fits (so non-preemptive policies can keep them)."""
    n_types = draw(st.integers(1, 3))
    types = ["k80", "p100", "v100"][:n_types]
    gpus = {k: draw(st.integers(0, 6)) for k in types}
    if sum(gpus.values()) == 0:
        gpus[types[0]] = 1
    round_index = draw(st.integers(1, 20))
    n_jobs = draw(st.integers(0, 10))
    free = dict(gpus)
    jobs: list[JobState] = []
    for i in range(n_jobs):
        runnable = draw(st.lists(st.sampled_from(types), min_size=1, unique=True))
        thr = {k: draw(st.floats(0.5, 10.0)) for k in runnable}
        scale = draw(st.sampled_from([1, 1, 1, 2, 4]))
        steps = draw(st.floats(100.0, 1e5))
        j = job(f"j{i}", arrival=draw(st.floats(0.0, round_index * ROUND_S)), scale=scale,
                steps=steps, thr=thr)
        j.steps_done = draw(st.floats(0.0, 0.9)) * steps
        j.executed_s = j.steps_done / max(thr.values())
        j.attained_service_s = j.executed_s * scale
        if j.steps_done > 0:
            j.start_time = j.arrival
        last = draw(st.sampled_from(runnable))
        if draw(st.booleans()) and free.get(last, 0) >= scale:
            free[last] -= scale
            running(j, last, round_index)
        jobs.append(j)
    return gpus, jobs, round_index


@pytest.mark.parametrize("make_policy", ALL_POLICIES, ids=POLICY_IDS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cluster_states())
def test_decisions_are_valid(
    make_policy: Callable[[], Policy], case: tuple[dict[str, int], list[JobState], int]
) -> None:
    gpus, jobs, round_index = case
    policy = make_policy()
    state = make_state(gpus, jobs, now=round_index * ROUND_S, round_index=round_index)
    check_valid(state, policy.decide(state))


@pytest.mark.parametrize("make_policy", ALL_POLICIES, ids=POLICY_IDS)
def test_round_loop_finishes_everything(make_policy: Callable[[], Policy]) -> None:
    """Over a short run with gangs, two types and co-location data, every decision is valid
    and every job finishes."""
    rng = np.random.default_rng(7)
    jobs = []
    for i in range(12):
        j = job(f"j{i:02d}", arrival=float(rng.integers(0, 5)) * ROUND_S,
                scale=int(rng.choice([1, 1, 2, 4])), steps=float(rng.integers(1, 8)) * 100,
                thr={"k80": 1.0, "v100": float(rng.uniform(1.0, 3.0))},
                user=f"u{i % 3}")
        jobs.append(j)
    for a, b in [(0, 1), (2, 3)]:
        if jobs[a].scale_factor == 1 and jobs[b].scale_factor == 1:
            jobs[a].colocated_throughput = {jobs[b].id: {"v100": 0.8, "k80": 0.6}}
            jobs[b].colocated_throughput = {jobs[a].id: {"v100": 0.8, "k80": 0.6}}
    finished = run_rounds(make_policy(), {"k80": 4, "v100": 4}, jobs, 200)
    assert len(finished) == len(jobs)


# ---------------------------------------------------------------------------- FIFO


@settings(max_examples=60, deadline=None)
@given(case=cluster_states(), aware=st.booleans(), backfill=st.booleans())
def test_fifo_never_starts_a_later_job_before_an_earlier_one_that_fits(
    case: tuple[dict[str, int], list[JobState], int], aware: bool, backfill: bool
) -> None:
    """For every waiting job E left waiting while a later job L starts: when E's turn came
    (after the kept jobs and the jobs started before E), no type E can run on had room."""
    gpus, jobs, round_index = case
    state = make_state(gpus, jobs, now=round_index * ROUND_S, round_index=round_index)
    plan = Fifo(heterogeneity_aware=aware, backfill=backfill).decide(state)
    check_valid(state, plan)
    placed = {a.job: a.accelerator for a in plan}
    order = sorted(state.active, key=lambda j: (j.arrival, j.id))
    kept = [j for j in order if j.last_round_run == round_index - 1]
    # non-preemptive: every job that ran last round keeps its type
    for j in kept:
        assert placed.get(j.id) == j.last_accelerator
    started = [j for j in order if j.id in placed and j not in kept]
    waiting = [j for j in order if j.id not in placed]
    for e in waiting:
        if not any((lj.arrival, lj.id) > (e.arrival, e.id) for lj in started):
            continue
        free = dict(gpus)
        for j in kept + [s for s in started if (s.arrival, s.id) < (e.arrival, e.id)]:
            free[placed[j.id]] -= j.scale_factor
        assert all(free[k] < e.scale_factor for k in e.throughput if k in free), (
            f"{e.id} would fit but a later job started"
        )


def test_fifo_is_non_preemptive_and_fastest_first() -> None:
    late = running(job("late", arrival=50.0, thr={"k80": 1.0, "v100": 2.0}), "k80", 3)
    early = job("early", arrival=0.0, thr={"k80": 1.0, "v100": 2.0})
    state = make_state({"k80": 1, "v100": 1}, [late, early], round_index=3)
    plan = Fifo().decide(state)
    assert set(plan) == {Assignment("late", "k80"), Assignment("early", "v100")}
    state = make_state({"k80": 1}, [late, early], round_index=3)
    assert Fifo().decide(state) == [Assignment("late", "k80")]  # keeps its GPU
    # agnostic: Gavel's FIFO draws the type among those with room (types by name) with
    # random.Random(seed); it used to take the cluster's first type, which is not what Gavel's
    # FIFOPolicy does.  Random(0).randrange(2) = 1 -> "v100" (sorted: k80, v100).
    a = job("a", thr={"k80": 1.0, "v100": 2.0})
    state = make_state({"k80": 1, "v100": 1}, [a])
    assert random.Random(0).randrange(2) == 1
    assert Fifo(heterogeneity_aware=False).decide(state) == [Assignment("a", "v100")]
    assert Fifo(heterogeneity_aware=True).decide(state) == [Assignment("a", "v100")]
    # only one type with room: no choice
    state = make_state({"k80": 1, "v100": 0}, [a])
    assert Fifo(heterogeneity_aware=False).decide(state) == [Assignment("a", "k80")]


def test_fifo_backfill_versus_strict() -> None:
    big = job("big", arrival=0.0, scale=4)
    small = job("small", arrival=1.0)
    state = make_state({"v100": 2}, [big, small])
    assert Fifo(backfill=True).decide(state) == [Assignment("small", "v100")]
    assert Fifo(backfill=False).decide(state) == []


def test_random_order_is_seeded() -> None:
    jobs = [job(f"j{i}") for i in range(8)]
    plans = [RandomOrder(seed=3).decide(make_state({"v100": 3}, jobs)) for _ in range(2)]
    assert plans[0] == plans[1] and len(plans[0]) == 3
    # default: the run's seed from the state
    state = make_state({"v100": 3}, jobs)
    state.seed = 3
    assert RandomOrder().decide(state) == plans[0]


def test_builtin_policies_are_registered() -> None:
    registered = policies()
    for name, _, _, _ in BUILTIN_POLICIES:
        assert name in registered
        policy = get_policy(name)
        assert policy.name == name and registered[name].description
    assert get_policy("fifo_agnostic").heterogeneity_aware is False  # type: ignore[attr-defined]
    assert get_policy("tiresias", starvation_factor=2.0).starvation_factor == 2.0  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- SRTF


def test_srtf_picks_the_shortest_remaining() -> None:
    # remaining time = remaining / best throughput: a 500 s, b 100 s, c 250 s, d 50 s (2 GPUs)
    a = job("a", steps=1000, thr={"v100": 2.0}, steps_done=0.0)
    b = job("b", steps=1000, thr={"k80": 1.0, "v100": 9.0}, steps_done=100.0)
    c = job("c", steps=500, thr={"v100": 2.0})
    d = job("d", scale=2, steps=100, thr={"v100": 2.0})
    plan = Srtf().decide(make_state({"v100": 3, "k80": 1}, [a, b, c, d]))
    assert {x.job for x in plan} == {"d", "b"}  # d takes 2 v100, b the last v100
    assert Assignment("b", "v100") in plan
    plan = Srtf().decide(make_state({"v100": 1, "k80": 1}, [a, b, c]))
    assert plan == [Assignment("b", "v100")]  # a and c cannot run on the k80


# ---------------------------------------------------------------------------- Tiresias


def test_tiresias_demotes_at_the_thresholds() -> None:
    """Scripted: thresholds 3200 and 10000 GPU-s (three queues).  Attained service
    a = 3199 -> Q0, 3200 -> Q1 (demoted when it *reaches* the threshold), 9999 -> Q1,
    10000 -> Q2."""
    policy = Tiresias(thresholds_gpu_s=[3200.0, 10000.0])
    queues = [policy.queue_of(job("x", attained_service_s=a))
              for a in (0.0, 3199.0, 3200.0, 9999.0, 10000.0, 1e9)]
    assert queues == [0, 0, 1, 1, 2, 2]
    # In a 4-GPU cluster: old (2 GPUs, 3300 GPU-s, Q1) loses to young (4 GPUs, 3100, Q0)
    # though it arrived first; within Q1 arrival order decides.
    old = job("old", arrival=0.0, scale=2, attained_service_s=3300.0)
    older = job("older", arrival=-1.0, scale=2, attained_service_s=9000.0)
    young = job("young", arrival=5.0, scale=4, attained_service_s=3100.0)
    plan = Tiresias().decide(make_state({"v100": 4}, [old, older, young]))
    assert plan == [Assignment("young", "v100")]
    plan = Tiresias().decide(make_state({"v100": 6}, [old, older, young]))
    assert [a.job for a in plan] == ["young", "older"]


def test_tiresias_demotion_over_rounds() -> None:
    """Two 1-GPU jobs on 1 GPU, threshold 250 GPU-s, rounds of 100 s: a runs rounds 0-2
    (attained 300 >= 250 -> Q1), then b (Q0) takes over for rounds 3-5, then FIFO in Q1."""
    a = job("a", arrival=0.0)
    b = job("b", arrival=50.0)
    log: list[str] = []
    run_rounds(Tiresias(thresholds_gpu_s=[250.0]), {"v100": 1}, [a, b], 8,
               on_round=lambda r, plan: log.append(plan[0].job))
    # round 0: only a arrived; rounds 1-2: a is still in Q0 and first by arrival
    assert log == ["a", "a", "a", "b", "b", "b", "a", "a"]


def test_tiresias_starvation_knob_promotes() -> None:
    """Threshold 100 GPU-s, P = 2: a long job demoted after one round waits behind a stream
    of new Q0 jobs; after waiting 2 x 100 s it is promoted back to Q0 and runs."""

    def scenario(policy: Tiresias) -> list[str]:
        jobs = [job("long", arrival=0.0)] + [
            job(f"n{i}", arrival=100.0 * i + 50.0, steps=100.0) for i in range(6)]
        log: list[str] = []
        run_rounds(policy, {"v100": 1}, jobs, 7,
                   on_round=lambda r, plan: log.append(plan[0].job))
        return log

    # round 0 long (then Q1); rounds 1-2 newcomers; at t=300 long waited 200 s >= 2 x 100 s
    # and is promoted to the *tail* of Q0, behind n2 (arrived at 250), as Tiresias'
    # dlas_sim_jobs appends a promoted job to queues[0] (this test used to expect long first,
    # by arrival: Tiresias does not re-sort a queue by arrival); n2 runs, and at t=400
    # (n2 done) long heads Q0 and runs.
    promoted = scenario(Tiresias(thresholds_gpu_s=[100.0], starvation_factor=2.0))
    assert promoted[:5] == ["long", "n0", "n1", "n2", "long"]
    starved = scenario(Tiresias(thresholds_gpu_s=[100.0]))
    assert starved == ["long", "n0", "n1", "n2", "n3", "n4", "n5"]


def test_gittins_index_by_hand() -> None:
    """Samples {1, 2, 10} (see gittins_index's docstring): G(0) = 2/5 at Delta = 2,
    G(1.5) = 1 at Delta = 0.5, and G(a) = 0 beyond the largest sample."""
    assert gittins_index([1.0, 2.0, 10.0], 0.0) == pytest.approx(0.4)
    assert gittins_index([1.0, 2.0, 10.0], 1.5) == pytest.approx(1.0)
    # a = 5: only {10} left, Delta = 5: 1 / 5
    assert gittins_index([10.0, 1.0, 2.0], 5.0) == pytest.approx(0.2)
    assert gittins_index([1.0, 2.0, 10.0], 10.0) == 0.0


def test_gittins_index_against_a_dense_grid() -> None:
    """The maximum over a dense grid of Delta (plus the support points) is the index: no
    Delta between support points does better."""
    rng = np.random.default_rng(0)
    samples = rng.exponential(5.0, size=12)
    for a in [0.0, 1.0, 3.0]:
        rest = samples[samples > a] - a
        grid = np.concatenate([np.linspace(1e-6, 2 * rest.max(), 5001), rest])
        prob = (rest[None, :] <= grid[:, None]).mean(axis=1)
        expected = np.minimum(rest[None, :], grid[:, None]).mean(axis=1)
        assert gittins_index(samples, a) == pytest.approx(float(np.max(prob / expected)),
                                                          rel=1e-12)


def test_tiresias_gittins_orders_within_a_queue() -> None:
    """Finished jobs attained {100, 200, 1000} GPU-s, the hand example scaled by 100: in Q0 a
    job at 150 GPU-s (G = 1/100 per GPU-s, likely to finish soon) beats a fresh job at 0
    (G = 2/5 / 100 = 1/250), which LAS would run first."""
    done = [job(f"f{i}", attained_service_s=s) for i, s in enumerate([100.0, 200.0, 1000.0])]
    fresh = job("fresh", arrival=0.0, attained_service_s=0.0)
    half = job("half", arrival=10.0, attained_service_s=150.0)
    state = make_state({"v100": 1}, [fresh, half], finished=done)
    assert Tiresias(gittins=True).decide(state) == [Assignment("half", "v100")]
    assert Tiresias(gittins=False).decide(state) == [Assignment("fresh", "v100")]
    # before any job finished, the prior decides, and stays valid
    state = make_state({"v100": 1}, [fresh, half])
    check_valid(state, Tiresias(gittins=True).decide(state))


def test_tiresias_rejects_bad_thresholds() -> None:
    with pytest.raises(ValueError, match="increasing"):
        Tiresias(thresholds_gpu_s=[10.0, 5.0])


# ---------------------------------------------------------------------------- AlloX


def brute_force_total_completion(proc: np.ndarray, slot_types: list[int]) -> float:
    """Enumerate every job -> slot map; run each slot's jobs shortest first (optimal on one
    machine) and sum the completion times."""
    n = proc.shape[0]
    best = math.inf
    for choice in itertools.product(range(len(slot_types)), repeat=n):
        total = 0.0
        for s, k in enumerate(slot_types):
            times = sorted(proc[j, k] for j in range(n) if choice[j] == s)
            clock = 0.0
            for t in times:  # shortest first: completion times accumulate
                clock += t
                total += clock
        best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_allox_matching_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_jobs = int(rng.integers(1, 5))
    if seed % 2:
        slots, slot_types = [2], [0, 0]  # one type, two slots
    else:
        slots, slot_types = [1, 1], [0, 1]  # two types, one slot each
    proc = rng.integers(1, 20, size=(n_jobs, len(slots))).astype(float)
    matches, cost = min_completion_matching(proc, slots)
    assert len(matches) == n_jobs
    assert cost == pytest.approx(brute_force_total_completion(proc, slot_types))
    # the cost reported is the cost of the matches
    assert cost == pytest.approx(sum(m.position * proc[m.job, m.type] for m in matches))
    # positions on each slot are 1..q
    for key in {(m.type, m.slot) for m in matches}:
        pos = sorted(m.position for m in matches if (m.type, m.slot) == key)
        assert pos == list(range(1, len(pos) + 1))


def test_allox_starts_the_first_of_each_machine() -> None:
    """One free k80 and one free v100, 4x faster.  Remaining steps 400, 100, 200: P on the
    v100 100, 25, 50; on the k80 400, 100, 200.  All three on the v100, shortest first, cost
    3*25 + 2*50 + 1*100 = 275; moving the 100-step job to the k80 costs 100 + (2*50 + 100)
    = 300, anything else more.  So only the 100-step job starts (on the v100); the k80 idles."""
    jobs = [job(f"j{i}", arrival=float(i), steps=s, thr={"k80": 1.0, "v100": 4.0})
            for i, s in enumerate([400.0, 100.0, 200.0])]
    state = make_state({"k80": 1, "v100": 1}, jobs)
    assert AlloX().decide(state) == [Assignment("j1", "v100")]
    proc = np.array([[400.0, 100.0], [100.0, 25.0], [200.0, 50.0]])
    matches, cost = min_completion_matching(proc, [1, 1])
    assert cost == pytest.approx(275.0)
    assert [(m.job, m.type) for m in first_to_run(matches)] == [(1, 1)]


def test_allox_is_non_preemptive_and_places_gangs() -> None:
    r = running(job("r", steps=1e6), "v100", 2)
    gang = job("gang", scale=2, steps=10.0)
    short = job("short", steps=1.0)
    plan = AlloX().decide(make_state({"v100": 4}, [r, gang, short], round_index=2))
    assert set(plan) == {Assignment("r", "v100"), Assignment("gang", "v100"),
                         Assignment("short", "v100")}


# ---------------------------------------------------------------------------- Themis


def themis_jobs() -> list[JobState]:
    """now = 100, one type, 1-GPU jobs, throughput 10 steps/s, N = 3.
    a: arrived 0, 1000 of 1000 steps left:  T_sh = 100 + 100 = 200, T_iso = 100 c
    b: arrived 50, 100 of 200 steps left:   T_sh = 50 + 10 = 60,    T_iso = 20 c
    c: arrived 100, 50 of 50 steps left:    T_sh = 0 + 5 = 5,       T_iso = 5 c
    with c = max(1, N/G)."""
    return [
        job("a", arrival=0.0, steps=1000.0, thr={"v100": 10.0}),
        job("b", arrival=50.0, steps=200.0, thr={"v100": 10.0}, steps_done=100.0),
        job("c", arrival=100.0, steps=50.0, thr={"v100": 10.0}),
    ]


def test_themis_rho_by_hand_and_worst_first() -> None:
    jobs = themis_jobs()
    state = make_state({"v100": 2}, jobs, now=100.0)  # c = 1.5
    rho = {j.id: finish_time_fairness(j, state, state.gpus) for j in jobs}
    assert rho == pytest.approx({"a": 200 / 150, "b": 60 / 30, "c": 5 / 7.5})
    plan = Themis().decide(state)
    assert [x.job for x in plan] == ["b", "a"]
    state = make_state({"v100": 1}, jobs, now=100.0)  # c = 3: rho a 2/3, b 1, c 1/3
    assert finish_time_fairness(jobs[1], state, state.gpus) == pytest.approx(1.0)
    assert Themis().decide(state) == [Assignment("b", "v100")]
    # SRTF and FIFO disagree with Themis here
    assert Srtf().decide(state) == [Assignment("c", "v100")]
    assert Fifo().decide(state) == [Assignment("a", "v100")]


def test_themis_rho_uses_the_fastest_free_type() -> None:
    j = job("g", arrival=0.0, scale=2, steps=1000.0, thr={"k80": 1.0, "v100": 10.0})
    state = make_state({"k80": 2, "v100": 2}, [j], now=0.0)
    assert finish_time_fairness(j, state, {"k80": 2, "v100": 2}) == pytest.approx(1.0)
    assert finish_time_fairness(j, state, {"k80": 2, "v100": 1}) == pytest.approx(10.0)


def test_themis_leases_hold_for_lease_rounds() -> None:
    policy = Themis(lease_rounds=3)
    jobs = themis_jobs()
    state = make_state({"v100": 1}, jobs, now=100.0, round_index=0)
    assert policy.decide(state) == [Assignment("b", "v100")]
    # next round c looks far worse off, but b's lease runs through round 2
    jobs[2].arrival = -10_000.0
    for r in (1, 2):
        assert policy.decide(make_state({"v100": 1}, jobs, now=100.0, round_index=r)) == [
            Assignment("b", "v100")]
    assert policy.decide(make_state({"v100": 1}, jobs, now=100.0, round_index=3)) == [
        Assignment("c", "v100")]


# ---------------------------------------------------------------------------- Gandiva


@pytest.mark.parametrize(("n_jobs", "n_gpus", "rounds"), [(5, 2, 10), (7, 3, 14), (4, 3, 8)])
def test_gandiva_rotates_fairly(n_jobs: int, n_gpus: int, rounds: int) -> None:
    """N equal 1-GPU jobs on G GPUs for K rounds: each runs K G / N rounds (+-1)."""
    jobs = [job(f"j{i}", arrival=0.0) for i in range(n_jobs)]
    run_rounds(GandivaTimeSlicing(), {"v100": n_gpus}, jobs, rounds)
    share = rounds * n_gpus / n_jobs
    assert all(abs(j.rounds_run - share) <= 1 for j in jobs), [j.rounds_run for j in jobs]
    assert sum(j.rounds_run for j in jobs) == rounds * n_gpus


def colocated(a: JobState, b: JobState, thr_a: float, thr_b: float) -> None:
    a.colocated_throughput = {b.id: {"v100": thr_a}}
    b.colocated_throughput = {a.id: {"v100": thr_b}}


def test_gandiva_packs_only_when_the_pair_gains() -> None:
    a, b, c = (job(x, arrival=float(i), thr={"v100": 1.0}) for i, x in enumerate("abc"))
    colocated(a, c, 0.7, 0.5)  # normalized sum 1.2 > 1
    plan = GandivaTimeSlicing().decide(make_state({"v100": 2}, [a, b, c]))
    assert set(plan) == {Assignment("a", "v100", "c"), Assignment("c", "v100", "a"),
                         Assignment("b", "v100")}
    assert packing_gain(a, c, "v100") == pytest.approx(1.2)
    colocated(a, c, 0.5, 0.4)  # 0.9: packing would lose work
    plan = GandivaTimeSlicing().decide(make_state({"v100": 2}, [a, b, c]))
    assert {x.job for x in plan} == {"a", "b"} and all(x.partner is None for x in plan)
    assert {x.job for x in GandivaTimeSlicing(packing=False).decide(
        make_state({"v100": 2}, [a, b, c]))} == {"a", "b"}


def test_gandiva_consolidates_gangs_and_migrates_to_defragment() -> None:
    # consolidation: a 2-GPU gang goes to the type with the most free GPUs
    g = job("g", scale=2, thr={"a": 1.0, "b": 1.0})
    plan = GandivaTimeSlicing().decide(make_state({"a": 2, "b": 3}, [g]))
    assert plan == [Assignment("g", "b")]
    # migration: x sticks to a, y to b; the gang fits only if x moves from a to b
    x = running(job("x", arrival=0.0, thr={"a": 1.0, "b": 1.0}), "a", 5)
    y = running(job("y", arrival=1.0, thr={"a": 1.0, "b": 1.0}), "b", 5)
    g = running(job("g", arrival=2.0, scale=2, thr={"a": 1.0, "b": 1.0}), "a", 5)
    state = make_state({"a": 2, "b": 2}, [x, y, g], round_index=5)
    plan = GandivaTimeSlicing().decide(state)
    check_valid(state, plan)
    assert set(plan) == {Assignment("x", "b"), Assignment("y", "b"), Assignment("g", "a")}
    assert {a.job for a in GandivaTimeSlicing(migration=False).decide(state)} == {"x", "y"}
    placer = _Placer(state, heterogeneity_aware=False)
    assert placer.choose(g) == "a"  # alone, the gang keeps its type


def test_gandiva_fair_gives_users_equal_gpu_rounds() -> None:
    """User A has 4 jobs, B has 1, on 2 GPUs for 12 rounds: each user gets 12 GPU-rounds,
    and A's jobs share A's rounds round-robin (3 each)."""
    jobs = [job(f"a{i}", arrival=0.0, user="A") for i in range(4)] + [
        job("b0", arrival=0.0, user="B")]
    run_rounds(GandivaFair(), {"v100": 2}, jobs, 12)
    per_user = Counter({"A": 0, "B": 0})
    for j in jobs:
        per_user[j.user or ""] += j.rounds_run
    assert per_user == {"A": 12, "B": 12}
    assert [j.rounds_run for j in jobs[:4]] == [3, 3, 3, 3]


def test_gandiva_fair_three_users_and_tickets() -> None:
    jobs = [job(f"{u}{i}", arrival=0.0, user=u) for u in "ABC" for i in range(3)]
    run_rounds(GandivaFair(), {"v100": 2}, jobs, 15)
    per_user: Counter[str | None] = Counter()
    for j in jobs:
        per_user[j.user] += j.rounds_run
    assert all(abs(n - 10) <= 1 for n in per_user.values()), per_user
    # tickets 2:1:1 -> shares 1/2, 1/4, 1/4 of 2 x 16 GPU-rounds
    for j in jobs:
        j.rounds_run, j.last_round_run = 0, None
    run_rounds(GandivaFair(tickets={"A": 2.0}), {"v100": 2}, jobs, 16)
    per_user = Counter()
    for j in jobs:
        per_user[j.user] += j.rounds_run
    assert per_user == {"A": 16, "B": 8, "C": 8}


def test_gandiva_fair_jobs_without_user_are_their_own_user() -> None:
    g = job("gang", arrival=0.0, scale=2)
    s = job("single", arrival=0.0)
    counts: Counter[str] = Counter()

    def tally(r: int, plan: list[Assignment]) -> None:
        counts.update(a.job for a in plan)

    run_rounds(GandivaFair(), {"v100": 2}, [g, s], 9, on_round=tally)
    # stride: the gang costs 2 GPU-rounds per round, the single 1 -> single runs about twice
    # as often as the gang, and the GPU-rounds are equal
    assert abs(2 * counts["gang"] - counts["single"]) <= 2


@pytest.mark.parametrize("name", POLICY_IDS)
def test_policies_run_in_the_simulator(name: str) -> None:
    """Integration: every built-in policy drives the real simulator to completion (the engine
    checks each decision and raises InvalidDecisionError on a bad one)."""
    from schedlab.simulator import simulate

    rng = np.random.default_rng(3)
    jobs = [job(f"j{i:02d}", arrival=float(rng.integers(0, 4)) * 300.0,
                scale=int(rng.choice([1, 1, 2, 4])), steps=float(rng.integers(1, 10)) * 300,
                thr={"k80": 1.0, "v100": float(rng.uniform(1.0, 3.0))}, user=f"u{i % 3}",
                switch_overhead_s=5.0)
            for i in range(16)]
    ones = [j for j in jobs if j.scale_factor == 1]
    for a, b in zip(ones[0:4:2], ones[1:4:2], strict=True):
        a.colocated_throughput = {b.id: {"k80": 0.7, "v100": 1.2}}
        b.colocated_throughput = {a.id: {"k80": 0.6, "v100": 1.1}}
    cluster = Cluster(accelerators={"k80": AcceleratorPool(count=4),
                                    "v100": AcceleratorPool(count=4)})
    result = simulate(jobs, cluster, get_policy(name), round_s=ROUND_S, seed=1)
    df = result.to_dataframe()
    assert len(df) == len(jobs) and df["finish"].notna().all()
