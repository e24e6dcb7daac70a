"""The checker's array screen of rounds finds exactly what checking every round finds.

:func:`schedlab.check.check_rounds` runs the four per-round checks only on the rounds that
:func:`schedlab.check._rounds_to_inspect` flags (numpy over all placements).  The reference
below is the checker as it was before the screen: the same four checks on every round.  On
valid round schedules of random instances and on thousands of deliberately broken copies of
them (unknown jobs and types, broken gangs, bad or shared GPU ids, jobs placed twice, rounds
over capacity, broken pairs), both must give the same violations in the same order.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from schedlab.check import (
    _check_round_capacity,
    _check_round_gpu_ids,
    _check_round_partners,
    _check_round_placements,
    check,
    check_rounds,
)
from schedlab.formulations.gavel.rounds import schedule_rounds
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import InstanceRef, PairShare, Placement, Solution, Status


def reference_check_rounds(instance: Instance, solution: Solution) -> list[str]:
    """The four per-round checks on every round, in round order (the pre-screen checker)."""
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    for r, placements in enumerate(solution.rounds):
        out += _check_round_placements(instance, jobs, r, placements)
        out += _check_round_partners(instance, r, placements)
        out += _check_round_gpu_ids(instance, r, placements)
        out += _check_round_capacity(instance, r, placements)
    return out


def with_rounds(instance: Instance, rounds: list[list[Placement]]) -> Solution:
    return Solution(instance=InstanceRef(name=instance.name, hash="x"), formulation="test",
                    status=Status.FEASIBLE, rounds=rounds)


def random_case(rng: np.random.Generator) -> tuple[Instance, list[list[Placement]]]:
    """2 types (one in nodes of 2), 3-10 jobs of gangs 1/2/4, some co-locatable pairs; the
    rounds of a feasible allocation (every job 1/(2 n) of each type it can run on)."""
    counts = {"v100": int(rng.choice([2, 4, 6])), "k80": int(rng.choice([1, 3, 4]))}
    num_jobs = int(rng.integers(3, 11))
    jobs: list[dict[str, Any]] = []
    for i in range(num_jobs):
        scale = int(rng.choice([1, 1, 2, 4]))
        throughput = {acc: 1.0 for acc in counts if rng.random() < 0.8} or {"v100": 1.0}
        jobs.append({"id": f"j{i}", "scale_factor": scale, "throughput": throughput})
    pairs: list[PairShare] = []
    for _ in range(int(rng.integers(0, 3))):
        a, b = (int(x) for x in rng.choice(num_jobs, size=2, replace=False))
        for x, y in ((a, b), (b, a)):
            jobs[x].setdefault("colocated_throughput", {})[f"j{y}"] = {"v100": 0.5}
        pairs.append(PairShare(jobs=(f"j{a}", f"j{b}"), accelerator="v100", fraction=0.1))
    instance = instance_from_dict({"cluster": {"accelerators": {
        "v100": {"count": counts["v100"], "gpus_per_node": 2},
        "k80": {"count": counts["k80"]}}}, "jobs": jobs})
    allocation = {job["id"]: {acc: 1 / (2 * num_jobs) for acc in job["throughput"]}
                  for job in jobs}
    return instance, schedule_rounds(instance, allocation, 6, colocated=pairs,
                                     work_conserving=True)


def mutate(rng: np.random.Generator, instance: Instance,
           rounds: list[list[Placement]]) -> list[list[Placement]]:
    """A copy of ``rounds`` with 1-3 random defects in random rounds."""
    out = copy.deepcopy(rounds)
    ids = [job.id for job in instance.jobs]
    for _ in range(int(rng.integers(1, 4))):
        r = int(rng.integers(len(out)))
        placements = out[r]
        kind = int(rng.integers(11))
        if not placements or kind == 0:  # an extra placement, maybe of a job already placed
            job = instance.jobs[int(rng.integers(len(ids)))]
            acc = str(rng.choice(["v100", "k80"]))
            gpu_ids = [int(g) for g in rng.choice(4, size=job.scale_factor)]
            placements.append(Placement(job=job.id, accelerator=acc, gpus=job.scale_factor,
                                        gpu_ids=gpu_ids))
            continue
        p = placements[int(rng.integers(len(placements)))]
        if kind == 1:
            p.job = "zz"
        elif kind == 2:
            p.accelerator = str(rng.choice(["v100", "k80", "a100"]))
        elif kind == 3:
            p.gpus = max(1, p.gpus + int(rng.choice([-1, 1])))
        elif kind == 4 and p.gpu_ids:
            p.gpu_ids = [*p.gpu_ids[:-1], p.gpu_ids[0]]  # a repeat (or the same for one id)
        elif kind == 5:
            p.gpu_ids = [int(g) for g in rng.integers(-1, 7, size=p.gpus)]
        elif kind == 6:
            p.gpu_ids = None
        elif kind == 7:
            p.partner = str(rng.choice([*ids, p.job]))
        elif kind == 8:
            p.partner = None
        elif kind == 9:
            placements.append(p.model_copy(update={"job": str(rng.choice(ids))}))
        else:
            placements.remove(p)
    return out


def test_screen_finds_what_every_round_finds() -> None:
    """300 random valid schedules (clean for both) and 6 broken copies of each: the same
    violation lists; most broken copies do violate something, so the comparison bites."""
    rng = np.random.default_rng(16)
    broken = violated = 0
    for _ in range(300):
        instance, rounds = random_case(rng)
        solution = with_rounds(instance, rounds)
        assert check_rounds(instance, solution) == reference_check_rounds(instance, solution)
        assert reference_check_rounds(instance, solution) == []
        for _ in range(6):
            bad = with_rounds(instance, mutate(rng, instance, rounds))
            expected = reference_check_rounds(instance, bad)
            assert check_rounds(instance, bad) == expected
            broken += 1
            violated += bool(expected)
    assert violated > broken // 2


@pytest.mark.parametrize("defect", ["shared", "over", "twice"])
def test_screen_catches_defects_of_a_clean_looking_round(defect: str) -> None:
    """Defects that only show across placements: two strangers on one GPU (ids 0 and 0),
    three gangs of 1 on a 2-GPU type (ids None, so only the count tells), a job placed twice
    on different types.  Worked out by hand: one violation each, in round 1 only."""
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 2}}},
        "jobs": [{"id": j, "throughput": {"v100": 1.0, "k80": 1.0}} for j in "abc"]})
    clean = [Placement(job="a", accelerator="v100", gpus=1, gpu_ids=[0]),
             Placement(job="b", accelerator="v100", gpus=1, gpu_ids=[1])]
    if defect == "shared":
        second = [clean[0], clean[1].model_copy(update={"gpu_ids": [0]})]
        message = "round 1: v100 GPU 0 used by both a and b, which are not co-located partners"
    elif defect == "over":
        second = [Placement(job=j, accelerator="v100", gpus=1) for j in "abc"]
        message = "round 1: accelerator v100: 3 GPUs placed > 2 available"
    else:
        second = [*clean, Placement(job="a", accelerator="k80", gpus=1, gpu_ids=[0])]
        message = "round 1: job a placed 2 times"
    solution = with_rounds(instance, [clean, second, clean])
    assert check_rounds(instance, solution) == [message]
    assert check(instance, solution) == [message]
