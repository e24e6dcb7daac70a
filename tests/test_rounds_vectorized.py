"""The vectorized round mechanism makes exactly the per-job reference's decisions.

:class:`ReferenceRoundMechanism` below is the round mechanism as it was written before it was
vectorized (one Python object per (unit, type) candidate, a tuple sort, per-GPU-id sets):
slow at 10^4 jobs but easy to read against docs/rounds.md.  The tests run both on random
small instances (hypothesis: gangs of 1/2/4, nodes, co-located pairs, work-conserving or not,
an update of the job set half-way) and on the shipped Gavel examples, and assert the same
placements, round by round: same jobs, types, GPU ids and partners.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.formulations.gavel.rounds import (
    RoundMechanism,
    Unit,
    _gpus_per_node,
    _unit_targets,
    pick_gpu_ids,
    schedule_rounds,
)
from schedlab.instance import Instance, instance_from_dict, load_instance
from schedlab.solution import PairShare, Placement

_ELIGIBLE_EPS = 1e-9
log = logging.getLogger(__name__)
EXAMPLES = Path(__file__).resolve().parent.parent / "instances" / "gavel"


# ------------------------------------------------------------- the per-job reference


@dataclass(frozen=True)
class _Candidate:
    """One (unit, accelerator) option of a round with its sort key."""

    unit: Unit
    accelerator: str
    key: tuple[float, float, float, int, int]
    eligible: bool


class ReferenceRoundMechanism:
    """Stateful round-by-round mechanism (one call of :meth:`next_round` per round).

    ``allocation`` is X[j,k] = {job: {accelerator: share}}; ``colocated`` the pair shares of
    space sharing.  The simulator may step it round by round; :func:`schedule_rounds` runs it
    for a fixed number of rounds.
    """

    def __init__(
        self,
        instance: Instance,
        allocation: Mapping[str, Mapping[str, float]],
        colocated: Sequence[PairShare] = (),
        *,
        work_conserving: bool = False,
        min_share: float = 1e-6,
    ) -> None:
        self.instance = instance
        self.work_conserving = work_conserving
        self.min_share = min_share
        self._jobs = {job.id: job for job in instance.jobs}
        self._job_order = instance.job_index()
        self._acc_order = {acc: i for i, acc in enumerate(instance.types)}
        self.targets: dict[Unit, dict[str, float]] = _unit_targets(instance, allocation, colocated)
        self.gang: dict[Unit, int] = {
            u: max(self._jobs[j].scale_factor for j in u) for u in self.targets
        }
        self._unit_rank = {u: r for r, u in enumerate(sorted(self.targets, key=self._unit_key))}
        self.received: dict[Unit, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.rounds_done = 0
        #: round in which each unit joined (0 for the units of the first allocation)
        self._born: dict[Unit, int] = dict.fromkeys(self.targets, 0)
        self._last: dict[str, Placement] = {}
        self._options = self._placeable_options()

    # ----------------------------------------------------------------- setup
    def _unit_key(self, unit: Unit) -> tuple[int, ...]:
        """Instance order of a unit: (i,) for job i, (i, i') for a pair; (0,) < (0, 1) < (1,)."""
        return tuple(self._job_order[j] for j in unit)

    def _can_run(self, unit: Unit, acc: str) -> bool:
        """T[j,k] > 0 for a job; both co-location throughputs on k > 0 for a pair."""
        if len(unit) == 1:
            return self._jobs[unit[0]].throughput.get(acc, 0.0) > 0.0
        a, b = unit
        tput_a = (self._jobs[a].colocated_throughput or {}).get(b, {}).get(acc, 0.0)
        tput_b = (self._jobs[b].colocated_throughput or {}).get(a, {}).get(acc, 0.0)
        return tput_a > 0.0 and tput_b > 0.0

    def _placeable_options(self) -> list[tuple[Unit, str, float]]:
        """(unit, accelerator, X) with X > 0 that can ever be placed; warn about the rest."""
        pools = self.instance.cluster.accelerators
        options: list[tuple[Unit, str, float]] = []
        for unit, shares in self.targets.items():
            for acc, share in shares.items():
                if share <= self.min_share:
                    continue
                if self.gang[unit] > pools[acc].count:
                    log.warning("%s: gang of %d GPUs exceeds the %d %s GPUs; share %.3g "
                                "is never placed", "+".join(unit), self.gang[unit],
                                pools[acc].count, acc, share)
                elif not self._can_run(unit, acc):
                    log.warning("%s: no positive throughput on %s; share %.3g is never placed",
                                "+".join(unit), acc, share)
                else:
                    options.append((unit, acc, share))
        return options

    def update(
        self,
        instance: Instance,
        allocation: Mapping[str, Mapping[str, float]],
        colocated: Sequence[PairShare] = (),
    ) -> None:
        """Change the job set and the allocation between rounds (jobs arrive or finish).

        Units still present keep their received counts c[u,k], the round they joined (so
        their age t_u, the rounds since they joined, keeps growing) and their jobs' last
        placements (sticky ids); new units start with c = 0 and age 0; units that left are
        forgotten.  Priorities then use each unit's own age:
        priority[u,k] = X[u,k] t_u / c[u,k].  Without updates every t_u equals the rounds done,
        so the rule is unchanged.
        """
        self.instance = instance
        self._jobs = {job.id: job for job in instance.jobs}
        self._job_order = instance.job_index()
        self._acc_order = {acc: i for i, acc in enumerate(instance.types)}
        self.targets = _unit_targets(instance, allocation, colocated)
        self.gang = {u: max(self._jobs[j].scale_factor for j in u) for u in self.targets}
        self._unit_rank = {u: r for r, u in enumerate(sorted(self.targets, key=self._unit_key))}
        self._born = {u: self._born.get(u, self.rounds_done) for u in self.targets}
        kept: dict[Unit, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for unit in self.targets:
            if unit in self.received:
                kept[unit] = self.received[unit]
        self.received = kept
        self._last = {j: p for j, p in self._last.items() if j in self._jobs}
        self._options = self._placeable_options()

    # ----------------------------------------------------------------- rounds
    def next_round(self) -> list[Placement]:
        """Decide one round: choose units by priority, then assign GPU ids; update history."""
        chosen = self._choose_units(self._candidates())
        placements: list[Placement] = []
        for acc in self.instance.types:
            on_acc = [u for u, k in chosen if k == acc]
            placements += self._place_on(acc, on_acc)
        placements.sort(key=lambda p: self._job_order[p.job])
        for unit, acc in chosen:
            self.received[unit][acc] += 1
        self._last = {p.job: p for p in placements}
        self.rounds_done += 1
        return placements

    def _candidates(self) -> list[_Candidate]:
        """All placeable (unit, k), sorted by priority, deficit, share, job and type order."""
        out: list[_Candidate] = []
        for unit, acc, share in self._options:
            t = self.rounds_done - self._born[unit]
            got = self.received[unit][acc]
            priority = math.inf if got == 0 else share * t / got
            deficit = share * t - got
            key = (-priority, -deficit, -share, self._unit_rank[unit], self._acc_order[acc])
            eligible = got < share * (t + 1) - _ELIGIBLE_EPS
            out.append(_Candidate(unit, acc, key, eligible))
        out.sort(key=lambda c: c.key)
        return out

    def _choose_units(self, candidates: list[_Candidate]) -> list[tuple[Unit, str]]:
        """Greedy over the sorted candidates: whole gangs, each job once, within n_k."""
        free = {acc: pool.count for acc, pool in self.instance.cluster.accelerators.items()}
        placed_jobs: set[str] = set()
        chosen: list[tuple[Unit, str]] = []
        passes = [True, False] if self.work_conserving else [True]
        for eligible_only in passes:
            for c in candidates:
                if eligible_only and not c.eligible:
                    continue
                gang = self.gang[c.unit]
                if gang > free[c.accelerator] or placed_jobs.intersection(c.unit):
                    continue
                free[c.accelerator] -= gang
                placed_jobs.update(c.unit)
                chosen.append((c.unit, c.accelerator))
        return chosen

    def _sticky_ids(self, unit: Unit, acc: str) -> list[int] | None:
        """The ids ``unit`` held on ``acc`` last round, if it ran there as the same unit."""
        held: set[int] = set()
        for job_id in unit:
            last = self._last.get(job_id)
            partners = [j for j in unit if j != job_id]
            if last is None or last.accelerator != acc or last.gpu_ids is None:
                return None
            if last.partner != (partners[0] if partners else None):
                return None
            held.update(last.gpu_ids)
        return sorted(held)

    def _place_on(self, acc: str, units: list[Unit]) -> list[Placement]:
        """GPU ids on one type: sticky units keep their ids, the rest are packed."""
        pool = self.instance.cluster.accelerators[acc]
        per_node = _gpus_per_node(pool.count, pool.nodes, pool.gpus_per_node)
        free = set(range(pool.count))
        ids: dict[Unit, list[int]] = {}
        for unit in units:  # units arrive in priority order
            sticky = self._sticky_ids(unit, acc)
            if sticky is not None and len(sticky) == self.gang[unit] and free.issuperset(sticky):
                ids[unit] = sticky
                free.difference_update(sticky)
        rest = [u for u in units if u not in ids]
        rest.sort(key=lambda u: -self.gang[u])  # stable: priority order within a gang size
        for unit in rest:
            ids[unit] = pick_gpu_ids(free, self.gang[unit], pool.count, per_node)
            free.difference_update(ids[unit])
        return [p for unit in units for p in self._unit_placements(unit, acc, ids[unit])]

    def _unit_placements(self, unit: Unit, acc: str, ids: list[int]) -> list[Placement]:
        """One Placement per job; a pair's smaller gang takes the first s_j of the ids."""
        if len(unit) == 1:
            job = self._jobs[unit[0]]
            return [Placement(job=job.id, accelerator=acc, gpus=job.scale_factor, gpu_ids=ids)]
        a, b = unit
        return [
            Placement(
                job=j,
                accelerator=acc,
                gpus=self._jobs[j].scale_factor,
                gpu_ids=ids[: self._jobs[j].scale_factor],
                partner=other,
            )
            for j, other in ((a, b), (b, a))
        ]




# -------------------------------------------------------------------------- comparison


def assert_same_rounds(
    fast: RoundMechanism, reference: ReferenceRoundMechanism, rounds: int
) -> None:
    """Both mechanisms give equal placements (job, type, gpus, ids, partner) every round."""
    for r in range(rounds):
        expected = reference.next_round()
        got = fast.next_round()
        assert got == expected, f"round {r} differs"


@st.composite
def round_cases(draw: Any) -> tuple[Instance, dict[str, dict[str, float]], list[PairShare]]:
    """A small cluster (1-3 types, some in nodes), 1-9 jobs of gangs 1/2/4, shares drawn
    from a coarse grid (so priorities and deficits tie often), some co-located pairs, some
    shares below the minimum and some on types where the job cannot run."""
    num_types = draw(st.integers(1, 3))
    types = ["v100", "p100", "k80"][:num_types]
    accelerators: dict[str, dict[str, int]] = {}
    for acc in types:
        count = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
        pool = {"count": count}
        if count in (4, 6, 8) and draw(st.booleans()):
            pool["gpus_per_node"] = 2
        accelerators[acc] = pool
    num_jobs = draw(st.integers(1, 9))
    grid = st.sampled_from([0.0, 1e-9, 0.125, 0.25, 1 / 3, 0.5, 0.75, 1.0])
    jobs: list[dict[str, Any]] = []
    allocation: dict[str, dict[str, float]] = {}
    for i in range(num_jobs):
        scale = draw(st.sampled_from([1, 1, 2, 4]))
        throughput = {acc: 1.0 + i for acc in types if draw(st.integers(0, 4)) > 0}
        jobs.append({"id": f"j{i}", "scale_factor": scale, "throughput": throughput})
        shares = {acc: draw(grid) for acc in types if draw(st.booleans())}
        total = sum(shares.values())
        allocation[f"j{i}"] = {a: x / total for a, x in shares.items()} if total > 1 else shares
    colocated: list[PairShare] = []
    for _ in range(draw(st.integers(0, 3)) if num_jobs >= 2 else 0):
        a, b = draw(st.lists(st.integers(0, num_jobs - 1), min_size=2, max_size=2,
                             unique=True))
        acc = draw(st.sampled_from(types))
        for x, y in ((a, b), (b, a)):
            jobs[x].setdefault("colocated_throughput", {})[f"j{y}"] = {acc: 0.5}
        colocated.append(PairShare(jobs=(f"j{a}", f"j{b}"), accelerator=acc,
                                   fraction=draw(st.sampled_from([0.125, 0.25, 0.5]))))
    instance = instance_from_dict({"cluster": {"accelerators": accelerators}, "jobs": jobs})
    return instance, allocation, colocated


@settings(max_examples=150, deadline=None)
@given(round_cases(), st.booleans())
def test_same_rounds_as_the_per_job_reference(
    case: tuple[Instance, dict[str, dict[str, float]], list[PairShare]], work_conserving: bool
) -> None:
    """Random small instances (ties, gangs, nodes, pairs): 25 equal rounds.  The allocation
    need not be feasible: the mechanism's decisions are compared, not its guarantees."""
    instance, allocation, colocated = case
    fast = RoundMechanism(instance, allocation, colocated, work_conserving=work_conserving)
    reference = ReferenceRoundMechanism(instance, allocation, colocated,
                                        work_conserving=work_conserving)
    assert_same_rounds(fast, reference, 25)


@settings(max_examples=100, deadline=None)
@given(round_cases(), st.booleans(), st.sampled_from([1, 2, 3, 5]))
def test_same_rounds_with_small_greedy_blocks(
    case: tuple[Instance, dict[str, dict[str, float]], list[PairShare]], work_conserving: bool,
    block: int,
) -> None:
    """The greedy pass takes blocks of candidates at once when they all fit; with blocks of
    1-5 candidates (instead of 2048) small instances go through both branches -- blocks
    taken whole and blocks walked one by one -- and the rounds stay the reference's."""
    instance, allocation, colocated = case
    fast = RoundMechanism(instance, allocation, colocated, work_conserving=work_conserving)
    fast._block = block
    reference = ReferenceRoundMechanism(instance, allocation, colocated,
                                        work_conserving=work_conserving)
    assert_same_rounds(fast, reference, 25)


@settings(max_examples=60, deadline=None)
@given(round_cases(), round_cases())
def test_same_rounds_after_an_update(
    first: tuple[Instance, dict[str, dict[str, float]], list[PairShare]],
    second: tuple[Instance, dict[str, dict[str, float]], list[PairShare]],
) -> None:
    """:meth:`update` half-way (the odd jobs leave, the second draw's jobs join under new ids,
    the second draw's cluster replaces the first's): equal rounds before and after, so the
    counts, ages and sticky GPU ids carried over agree too."""
    instance, allocation, colocated = first
    fast = RoundMechanism(instance, allocation, colocated)
    reference = ReferenceRoundMechanism(instance, allocation, colocated)
    assert_same_rounds(fast, reference, 7)
    other, other_alloc, _ = second
    keep = [j for i, j in enumerate(instance.jobs) if i % 2 == 0]
    kept = {j.id for j in keep}
    new_jobs = [j.model_copy(update={"id": "n" + j.id, "colocated_throughput": None})
                for j in other.jobs]
    merged = instance.model_copy(update={"jobs": keep + new_jobs, "cluster": other.cluster})
    types = set(merged.types)
    merged_alloc = {j: {a: x for a, x in s.items() if a in types}
                    for j, s in allocation.items() if j in kept}
    merged_alloc.update({"n" + j: s for j, s in other_alloc.items()})
    merged_pairs = [p for p in colocated if set(p.jobs) <= kept and p.accelerator in types]
    fast.update(merged, merged_alloc, merged_pairs)
    reference.update(merged, merged_alloc, merged_pairs)
    assert_same_rounds(fast, reference, 8)


@pytest.mark.parametrize("name", ["small-6jobs.json", "small-4jobs.yaml",
                                  "colocation-24jobs.json", "cluster-108gpus-300jobs.json"])
def test_same_rounds_on_the_shipped_examples(name: str) -> None:
    """The shipped Gavel instances with the max-min fairness allocation (with pair shares
    for the co-location example): the instance's own number of rounds, equal placements."""
    import schedlab

    instance = load_instance(EXAMPLES / name)
    formulation = ("gavel.max_min_fairness_packed" if "colocation" in name
                   else "gavel.max_min_fairness")
    solution = schedlab.solve(instance, formulation, num_rounds=0, run_check=False)
    assert solution.status.has_solution
    rounds = instance.params.num_rounds
    for work_conserving in (False, True):
        fast = RoundMechanism(instance, solution.allocation, solution.colocated_allocation,
                              work_conserving=work_conserving)
        reference = ReferenceRoundMechanism(instance, solution.allocation,
                                            solution.colocated_allocation,
                                            work_conserving=work_conserving)
        assert_same_rounds(fast, reference, rounds)
    assert schedule_rounds(instance, solution.allocation, 3,
                           colocated=solution.colocated_allocation) != [] or rounds == 0


def test_reference_and_picker_agree_on_a_fragmented_pool() -> None:
    """The bit-mask packing the mechanism uses and :func:`pick_gpu_ids` (the reference's
    picker) choose the same ids on a pool fragmented by sticky gangs: 40 GPUs in nodes of 8,
    jobs of gangs 1/2/4 whose shares change every few rounds, so gangs move and leave holes."""
    jobs = [{"id": f"j{i}", "scale_factor": [1, 2, 4][i % 3], "throughput": {"v100": 1.0}}
            for i in range(30)]
    for per_node in (None, 8):
        pool: dict[str, int] = {"count": 40}
        if per_node is not None:
            pool["gpus_per_node"] = per_node
        instance = instance_from_dict({"cluster": {"accelerators": {"v100": pool}},
                                       "jobs": jobs})
        allocation = {f"j{i}": {"v100": [0.2, 0.5, 0.3, 0.9][i % 4]} for i in range(30)}
        fast = RoundMechanism(instance, allocation)
        reference = ReferenceRoundMechanism(instance, allocation)
        assert_same_rounds(fast, reference, 30)
    assert pick_gpu_ids({0, 1, 3, 4, 5}, 3, 8, None) == [3, 4, 5]


def reference_place(count: int, gangs: list[int], previous: list[list[int] | None],
                    per_node: int | None) -> list[list[int]]:
    """The reference's GPU-id step for one pool: sticky ids when all free, then the others,
    largest gang first, each by :func:`pick_gpu_ids`."""
    free = set(range(count))
    out: list[list[int]] = [[] for _ in gangs]
    for i, (size, ids) in enumerate(zip(gangs, previous, strict=True)):
        if ids is not None and len(ids) == size and free.issuperset(ids):
            out[i] = ids
            free.difference_update(ids)
    rest = sorted((i for i, ids in enumerate(out) if not ids), key=lambda i: -gangs[i])
    for i in rest:
        out[i] = pick_gpu_ids(free, gangs[i], count, per_node)
        free.difference_update(out[i])
    return out


@pytest.mark.parametrize("per_node", [None, 4])
def test_placers_match_pick_gpu_ids_on_fragmented_pools(per_node: int | None) -> None:
    """Random pools of 8-64 GPUs, gangs of 1-8 filling them, half with previous ids (some
    clashing, some out of range): the placer the mechanism uses gives the reference's ids,
    runs, lowest-id fallbacks and node choices included."""
    from schedlab.formulations.gavel.rounds import _placer

    rng = np.random.default_rng(5)
    for _ in range(400):
        count = int(rng.integers(8, 65))
        gangs: list[int] = []
        while sum(gangs) < count * 0.9:
            gangs.append(int(rng.choice([1, 1, 2, 3, 4, 8])))
        while sum(gangs) > count:
            gangs.pop()
        previous: list[list[int] | None] = []
        for size in gangs:
            if rng.random() < 0.5:
                start = int(rng.integers(0, count + 2))
                previous.append(list(range(start, start + size)))
            else:
                previous.append(None)
        expected = reference_place(count, gangs, previous, per_node)
        assert _placer(count, per_node).place(gangs, previous) == expected
