"""Gavel's FIFO: one implementation behind ``fifo_agnostic`` and ``gavel.fifo_agnostic``, the
intended policy by default and Gavel's code as written with ``gavel_code_quirks=True``."""

from __future__ import annotations

import random

import pytest

from schedlab.errors import InputError
from schedlab.instance import AcceleratorPool, Cluster
from schedlab.policies.fifo import Fifo
from schedlab.policies.registry import get_policy, policies
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.simulator import simulate

TYPES = ("v100", "p100", "k80")


def tiny_state() -> ClusterState:
    """2 GPUs of each type; j0, j1, j2 need 1 GPU, j3 needs 2; throughput 1 everywhere."""
    cluster = Cluster(accelerators={k: AcceleratorPool(count=2) for k in TYPES})
    jobs = [JobState(id=f"j{i}", arrival=float(i), scale_factor=s, total_steps=1e6,
                     throughput=dict.fromkeys(TYPES, 1.0))
            for i, s in enumerate((1, 1, 1, 2))]
    return ClusterState(now=10.0, round_index=0, round_s=360.0, cluster=cluster,
                        active=jobs, finished=[])


def test_fifo_agnostic_and_gavel_fifo_agnostic_are_one_policy() -> None:
    entries = policies()
    ours, gavels = entries["fifo_agnostic"], entries["gavel.fifo_agnostic"]
    assert ours.factory == gavels.factory == "schedlab.policies.fifo:Fifo"
    assert ours.defaults == gavels.defaults == {"heterogeneity_aware": False}
    a, b = get_policy("fifo_agnostic"), get_policy("gavel.fifo_agnostic")
    assert isinstance(a, Fifo) and isinstance(b, Fifo)
    assert vars(a).keys() == vars(b).keys()
    assert (a.heterogeneity_aware, a.backfill, a.gavel_code_quirks, a.mechanism) == (
        b.heterogeneity_aware, b.backfill, b.gavel_code_quirks, b.mechanism) == (
        False, False, False, "schedlab")
    state = tiny_state()
    assert a.decide(state) == b.decide(tiny_state())


def test_intended_fifo_draws_a_type_with_room() -> None:
    # Types by name: [k80, p100, v100], 2 free each; random.Random(0) draws, in order,
    # randrange(3) = 1, randrange(3) = 1, randrange(2) = 0:
    #   j0 -> p100 (1 left); j1 -> p100 (0 left: p100 leaves the list -> [k80, v100]);
    #   j2 -> k80 (1 left); j3 (2 GPUs): only v100 has room -> v100.
    rng = random.Random(0)
    assert (rng.randrange(3), rng.randrange(3), rng.randrange(2)) == (1, 1, 0)
    plan = Fifo(heterogeneity_aware=False).decide(tiny_state())
    assert sorted(plan, key=lambda a: a.job) == [
        Assignment("j0", "p100"), Assignment("j1", "p100"), Assignment("j2", "k80"),
        Assignment("j3", "v100")]


def test_gavel_code_quirks_put_every_job_on_the_last_type() -> None:
    # Gavel's FIFOPolicy (base mode, seed 0), run on this case outside the project, allocates
    # all four jobs to v100.  By hand: the drawn index is unused and the job goes to the last
    # type by name with a free GPU, v100, gang or no gang:
    #   j0 -> v100 (1 left); j1 -> v100 (0 left: the *drawn* type, index 1 = p100, leaves
    #   the list -> [k80, v100]); j2, j3 -> v100 (-1, then -3 left).
    # Gavel's round mechanism then time-shares v100: after the reset every job has priority
    # 1 / (180 / (4 x 180)) = 4, deficit 0, so arrival order: j0 and j1 fill the 2 v100s and
    # the p100s and k80s idle.
    policy = Fifo(heterogeneity_aware=False, gavel_code_quirks=True)
    assert policy.mechanism == "gavel"
    plan = policy.decide(tiny_state())
    assert plan == [Assignment("j0", "v100"), Assignment("j1", "v100")]
    assert set(policy._allocation.values()) == {"v100"} and len(policy._allocation) == 4
    with pytest.raises(InputError):
        Fifo(heterogeneity_aware=False, gavel_code_quirks=True, mechanism="schedlab")
    with pytest.raises(InputError):
        Fifo(heterogeneity_aware=True, gavel_code_quirks=True)


def test_head_of_line_blocking_and_the_freed_type_goes_to_the_head() -> None:
    # Two v100s, rounds of 360 s, T = 1 step/s, all jobs at t = 0 in the order a, big, c.
    #   t = 0: a (1 GPU, 720 steps) takes a v100; big (2 GPUs) does not fit and blocks the
    #          queue: c (1 GPU) waits although a GPU is free.
    #   t = 360: the same.  t = 720: a finished; its type goes to the head of the queue, big,
    #          which fits now: big runs [720, 1080).  t = 1080: c runs [1080, 1440).
    # With backfill (the built-in aware ``fifo``'s default) c starts at 0 and ends at 360.
    cluster = Cluster(accelerators={"v100": AcceleratorPool(count=2)})
    jobs = [JobState(id=n, arrival=0.0, scale_factor=s, total_steps=steps,
                     throughput={"v100": 1.0})
            for n, s, steps in (("a", 1, 720.0), ("big", 2, 360.0), ("c", 1, 360.0))]
    res = simulate(jobs, cluster, Fifo(heterogeneity_aware=False), round_s=360.0)
    assert {j.job: j.finish for j in res.jobs} == pytest.approx(
        {"a": 720.0, "big": 1080.0, "c": 1440.0})
    res = simulate(jobs, cluster, Fifo(heterogeneity_aware=False, backfill=True),
                   round_s=360.0)
    assert {j.job: j.finish for j in res.jobs} == pytest.approx(
        {"a": 720.0, "big": 1080.0, "c": 360.0})
