r"""Gavel's round-based mechanism: turn time shares X into per-round placements.

A policy's allocation says which share of wall-clock time each job (or co-located pair) should
run on each accelerator type.  The mechanism realises it in rounds of equal length: in each
round every scheduling unit u (a single job, or a pair {a, b} under space sharing) either runs
as a whole gang on one accelerator type or waits.

Notation: units u with gang size g_u (s_j for a job, max(s_a, s_b) for a pair), target share
X[u,k] (``allocation`` for jobs, ``PairShare.fraction`` for pairs), t rounds already done, and
c[u,k] rounds u has received on k so far, so its received fraction is f[u,k] = c[u,k] / t.

Each round:

1. Priority of every (u, k) with X[u,k] > 0 (Gavel's rule)::

       priority[u,k] = X[u,k] / f[u,k] = X[u,k] t / c[u,k]      (+inf when c[u,k] = 0)

   Units with X[u,k] <= ``min_share`` (default 1e-6, so LP noise such as 1e-12 is not
   scheduled) count as X[u,k] = 0: priority 0, never placed on k.  Ties are broken by the
   larger deficit d[u,k] = X[u,k] t - c[u,k], then the larger X[u,k], then job order in the
   instance (a job's solo unit before its pairs), then accelerator order.
2. Greedy, in priority order: place u on k when k still has g_u free GPUs, no job of u is placed
   yet this round, and u can run on k (T[j,k] > 0, or a co-location throughput for a pair).
   By default only units *behind* their target are eligible,

       c[u,k] < X[u,k] (t + 1),

   so that every received fraction stays below X[u,k] + 1/(t+1) and, when the gangs pack,
   converges to X[u,k].  With ``work_conserving=True`` a second pass offers the GPUs still free
   to every unit with X[u,k] > 0 in the same order, as Gavel does; units then receive more than
   their share when the allocation leaves GPUs idle.
3. GPU ids (0..n_k-1 within a type; with ``gpus_per_node`` g, node i holds ids i g..i g+g-1).
   Sticky placement first: a unit that ran on k last round keeps the same ids when they are all
   free.  The other units, largest gang first, take ids in one node when some node has enough
   free (the node with the fewest free ids that fits: best fit), the lowest contiguous run
   there if any, else the lowest free ids; a gang that fits in no node takes the nodes with
   most free GPUs first.
4. A pair's two placements name each other as ``partner``; the larger job holds all g_u ids and
   the smaller one the first s_j of them (both run on the same GPUs).

Guarantee (checked by the tests): placements never exceed n_k, place each job at most once per
round and keep whole gangs.  When the allocation is feasible and every gang fits (e.g. all
scale factors 1), f[u,k] -> X[u,k] as rounds accumulate; with larger gangs fragmentation can
leave GPUs idle and f may fall short of X.

Cost: :class:`RoundMechanism` keeps the (unit, type) options and the counts c[u,k] in numpy
arrays (one ``lexsort`` per round, the greedy pass in blocks, GPU ids from free-id
intervals), so 20 rounds of 10^4 jobs take about half a second of CPU; the tests hold it to
the round schedules of the per-job implementation it replaced (docs/rounds.md).
"""

from __future__ import annotations

import logging
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from schedlab.errors import InputError
from schedlab.gcpause import gc_paused
from schedlab.instance import Instance
from schedlab.lazy import load_compiled
from schedlab.placement import PoolPlacer, ids_mask, mask_ids
from schedlab.solution import PairShare, Placement, Solution

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: A scheduling unit: one job id, or a co-located pair of job ids in instance order.
Unit = tuple[str, ...]

#: Slack on the eligibility test c < X (t + 1), so rounding never drops a due round.
_ELIGIBLE_EPS = 1e-9


class RoundMechanism:
    """Stateful round-by-round mechanism (one call of :meth:`next_round` per round).

    ``allocation`` is X[j,k] = {job: {accelerator: share}}; ``colocated`` the pair shares of
    space sharing.  The simulator may step it round by round; :func:`schedule_rounds` runs it
    for a fixed number of rounds.

    The state lives in arrays over the placeable (unit, type) options -- unit index, type
    index, X -- and a (units x types) matrix of round counts c[u,k]; units are numbered in
    instance order, so a unit's index is its tie-break rank.  A round is one ``np.lexsort``
    of the options by (-priority, -deficit, -X, unit, type), the greedy pass over the sorted
    options (sequential in principle -- each pick changes the free GPUs -- but taken in
    blocks of options that all fit, :class:`_SoloGreedy`), and the GPU ids by the packing
    rule of :func:`pick_gpu_ids` (:func:`_placer`).
    """

    #: candidates the greedy pass takes in one array step when they all fit (_SoloGreedy)
    _block = 2048

    def __init__(
        self,
        instance: Instance,
        allocation: Mapping[str, Mapping[str, float]],
        colocated: Sequence[PairShare] = (),
        *,
        work_conserving: bool = False,
        min_share: float = 1e-6,
    ) -> None:
        self.work_conserving = work_conserving
        self.min_share = min_share
        self.rounds_done = 0
        self._setup(instance, allocation, colocated, previous=None)

    # ----------------------------------------------------------------- setup
    def _setup(
        self,
        instance: Instance,
        allocation: Mapping[str, Mapping[str, float]],
        colocated: Sequence[PairShare],
        previous: _History | None,
    ) -> None:
        """Arrays of units and options for ``instance``; ``previous`` carries history over."""
        self.instance = instance
        self._jobs = {job.id: job for job in instance.jobs}
        self._job_order = instance.job_index()
        self._types = list(instance.types)
        self._acc_order = {acc: i for i, acc in enumerate(self._types)}
        self.targets: dict[Unit, dict[str, float]] = _unit_targets(instance, allocation, colocated)
        self.gang: dict[Unit, int] = {
            u: max(self._jobs[j].scale_factor for j in u) for u in self.targets
        }
        order = self._job_order
        self._units: list[Unit] = sorted(self.targets, key=lambda u: tuple(order[j] for j in u))
        self._unit_index = {u: i for i, u in enumerate(self._units)}
        self._members = [tuple(order[j] for j in u) for u in self._units]
        self._gangs = [self.gang[u] for u in self._units]
        self._solo = all(len(u) == 1 for u in self._units)
        self._solo_ids = [u[0] for u in self._units]  # read only when every unit is solo
        self._solo_scales = [self._jobs[u[0]].scale_factor for u in self._units]
        pools = instance.cluster.accelerators
        self._capacity = [pools[acc].count for acc in self._types]
        self._placers = [_placer(pools[acc].count, _gpus_per_node(
            pools[acc].count, pools[acc].nodes, pools[acc].gpus_per_node)) for acc in self._types]
        options = self._placeable_options()
        index = self._unit_index
        self._opt_unit = np.array([index[u] for u, _, _ in options], dtype=np.int64)
        self._opt_acc = np.array([self._acc_order[a] for _, a, _ in options], dtype=np.int64)
        self._opt_share = np.array([x for _, _, x in options], dtype=np.float64)
        num_units, num_types = len(self._units), len(self._types)
        self._counts = np.zeros((num_units, num_types), dtype=np.int64)
        self._born = np.zeros(num_units, dtype=np.int64)
        #: type index and GPU ids of each unit that ran in the last round (-1, None: none)
        self._last_acc = [-1] * num_units
        self._last_ids: list[list[int] | None] = [None] * num_units
        if previous is None:
            return
        for u, unit in enumerate(self._units):
            self._born[u] = previous.born.get(unit, self.rounds_done)
            for acc, got in previous.received.get(unit, {}).items():
                if acc in self._acc_order:
                    self._counts[u, self._acc_order[acc]] = got
            last = previous.last.get(unit)
            if last is not None and last[0] in self._acc_order:
                self._last_acc[u] = self._acc_order[last[0]]
                self._last_ids[u] = last[1]

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
        count = {acc: pool.count for acc, pool in pools.items()}
        jobs, gang, min_share = self._jobs, self.gang, self.min_share
        options: list[tuple[Unit, str, float]] = []
        for unit, shares in self.targets.items():
            for acc, share in shares.items():
                if share <= min_share:
                    continue
                if gang[unit] > count[acc]:
                    log.warning("%s: gang of %d GPUs exceeds the %d %s GPUs; share %.3g "
                                "is never placed", "+".join(unit), self.gang[unit],
                                pools[acc].count, acc, share)
                elif not (jobs[unit[0]].throughput.get(acc, 0.0) > 0.0 if len(unit) == 1
                          else self._can_run(unit, acc)):
                    log.warning("%s: no positive throughput on %s; share %.3g is never placed",
                                "+".join(unit), acc, share)
                else:
                    options.append((unit, acc, share))
        return options

    def _history(self) -> _History:
        """Counts, birth rounds and last placements keyed by unit (survives a re-index)."""
        received = self.received
        born = {u: int(self._born[i]) for i, u in enumerate(self._units)}
        last = {u: (self._types[self._last_acc[i]], self._last_ids[i] or [])
                for i, u in enumerate(self._units) if self._last_acc[i] >= 0}
        return _History(received, born, last)

    @property
    def received(self) -> dict[Unit, dict[str, int]]:
        """c[u,k]: rounds each unit received on each type (every unit, every type)."""
        counts = self._counts.tolist()
        return {u: dict(zip(self._types, row, strict=True))
                for u, row in zip(self._units, counts, strict=True)}

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
        self._setup(instance, allocation, colocated, previous=self._history())

    # ----------------------------------------------------------------- rounds
    def next_round(self) -> list[Placement]:
        """Decide one round: choose units by priority, then assign GPU ids; update history."""
        chosen = self._choose()
        units = self._opt_unit[chosen].tolist()
        accs = self._opt_acc[chosen].tolist()
        by_type: list[list[int]] = [[] for _ in self._types]
        for u, k in zip(units, accs, strict=True):
            by_type[k].append(u)
        last_acc = [-1] * len(self._units)
        last_ids: list[list[int] | None] = [None] * len(self._units)
        for k, on_type in enumerate(by_type):
            if not on_type:
                continue
            previous = [self._last_ids[u] if self._last_acc[u] == k else None for u in on_type]
            placed = self._placers[k].place([self._gangs[u] for u in on_type], previous)
            for u, ids in zip(on_type, placed, strict=True):
                last_acc[u] = k
                last_ids[u] = ids
        self._counts[self._opt_unit[chosen], self._opt_acc[chosen]] += 1
        self._last_acc, self._last_ids = last_acc, last_ids
        self.rounds_done += 1
        units.sort()  # unit order = job order of the first member
        if self._solo:  # one placement per unit, already in job order
            job_ids, scales, types = self._solo_ids, self._solo_scales, self._types
            return [Placement(job=job_ids[u], accelerator=types[last_acc[u]], gpus=scales[u],
                              gpu_ids=last_ids[u]) for u in units]
        placements: list[tuple[int, Placement]] = []
        for u in units:
            placements += self._unit_placements(u, self._types[last_acc[u]], last_ids[u] or [])
        placements.sort(key=lambda item: item[0])
        return [p for _, p in placements]

    def _choose(self) -> npt.NDArray[np.intp]:
        """Greedy over the options in priority order: whole gangs, each job once, within n_k.

        Returns the chosen option indices.  The sort keys are the per-job rule's, computed
        with the same float operations (so ties stay ties): priority X t / c (+inf at c = 0),
        deficit X t - c, then X, unit rank and type order; eligible: c < X (t + 1) - eps.
        """
        unit, acc, share = self._opt_unit, self._opt_acc, self._opt_share
        if len(unit) == 0:
            return np.zeros(0, dtype=np.intp)
        age = self.rounds_done - self._born[unit]
        got = self._counts[unit, acc]
        weighted = share * age
        priority = np.full(len(unit), np.inf)
        np.divide(weighted, got, out=priority, where=got != 0)
        deficit = weighted - got
        order = np.lexsort((acc, unit, -share, -deficit, -priority))
        eligible = got < share * (age + 1) - _ELIGIBLE_EPS
        passes = [order[eligible[order]]]
        if self.work_conserving:
            passes.append(order)
        free = list(self._capacity)
        total_free = sum(free)
        gangs = self._gangs
        smallest = min(gangs)
        units = unit.tolist()
        accs = acc.tolist()
        chosen: list[int] = []
        if self._solo:  # unit u is a single job: placed once means unit placed
            state = _SoloGreedy(unit, acc, np.array(gangs, dtype=np.int64), self._capacity,
                                self._block)
            for candidates in passes:
                state.run(candidates)
            return np.array(state.chosen, dtype=np.intp)
        members = self._members
        placed = bytearray(len(self._job_order))
        for candidates in passes:
            for c in candidates.tolist():
                u = units[c]
                k = accs[c]
                g = gangs[u]
                if g > free[k] or any(placed[j] for j in members[u]):
                    continue
                for j in members[u]:
                    placed[j] = 1
                free[k] -= g
                total_free -= g
                chosen.append(c)
                if total_free < smallest:
                    break
        return np.array(chosen, dtype=np.intp)

    def _unit_placements(self, u: int, acc: str, ids: list[int]) -> list[tuple[int, Placement]]:
        """(job order, Placement) per job; a pair's smaller gang takes the first s_j ids."""
        unit = self._units[u]
        if len(unit) == 1:
            job = self._jobs[unit[0]]
            return [(self._members[u][0], Placement(job=job.id, accelerator=acc,
                                                    gpus=job.scale_factor, gpu_ids=ids))]
        a, b = unit
        return [
            (self._job_order[j], Placement(
                job=j,
                accelerator=acc,
                gpus=self._jobs[j].scale_factor,
                gpu_ids=ids[: self._jobs[j].scale_factor],
                partner=other,
            ))
            for j, other in ((a, b), (b, a))
        ]


class _Placer(Protocol):
    """GPU ids for one pool and one round (sticky ids first, then packed)."""

    def place(self, gangs: Sequence[int],
              previous: Sequence[list[int] | None]) -> list[list[int]]: ...


def _placer(count: int, per_node: int | None) -> _Placer:
    """:class:`_RunPlacer` for a pool that is one node, else the bit-mask placer per node."""
    if per_node is None or per_node >= count:
        return _RunPlacer(count)
    return _NodePlacer(count, per_node)


class _NodePlacer:
    """:class:`~schedlab.placement.PoolPlacer` (bit masks, nodes) with id lists."""

    def __init__(self, count: int, per_node: int) -> None:
        self._pool = PoolPlacer(count, per_node)

    def place(self, gangs: Sequence[int],
              previous: Sequence[list[int] | None]) -> list[list[int]]:
        masks = self._pool.place(list(gangs), [ids_mask(ids) if ids else 0 for ids in previous])
        return [list(mask_ids(mask)) for mask in masks]


class _RunPlacer:
    """GPU ids on a pool of ``count`` GPUs that is one node (no ``gpus_per_node``).

    The rule of :class:`~schedlab.placement.PoolPlacer` for one node, on free-id
    intervals instead of one bit mask of the whole pool: sticky gangs keep their ids when all
    are free; the others, largest first (ties in the given order), take the lowest run of
    consecutive free ids -- the start of the first maximal free interval at least as long as
    the gang -- else the lowest free ids.  Gangs only shrink intervals from the left, so one
    forward scan per gang size finds every run: O(intervals x sizes + ids) per round instead
    of O(gangs x count / 64) word operations of bit masks, which dominates at 10^5 jobs.
    """

    def __init__(self, count: int) -> None:
        self.count = count

    def place(self, gangs: Sequence[int], previous: Sequence[list[int] | None]) -> list[list[int]]:
        """Ids for gangs of ``gangs[i]`` GPUs in the policy's order; ``previous[i]`` the ids
        gang i held on this pool last round (None: none).  Raises ValueError when the gangs
        do not fit."""
        free = bytearray(b"\x01") * self.count
        out: list[list[int]] = [[] for _ in gangs]
        rest: list[int] = []
        for i, (size, ids) in enumerate(zip(gangs, previous, strict=True)):
            if (ids is not None and len(ids) == size
                    and all(0 <= g < self.count and free[g] for g in ids)):
                out[i] = ids
                for g in ids:
                    free[g] = 0
            else:
                rest.append(i)
        if not rest:
            return out
        rest.sort(key=gangs.__getitem__, reverse=True)  # stable: given order within a size
        mask = np.frombuffer(bytes(free), dtype=np.uint8)
        edges = np.diff(np.concatenate(([0], mask, [0])).astype(np.int8))
        starts = np.flatnonzero(edges == 1).tolist()
        ends = np.flatnonzero(edges == -1).tolist()
        left = sum(e - s for s, e in zip(starts, ends, strict=True))
        first = 0  # intervals before ``first`` are empty
        size = -1
        scan = 0
        for i in rest:
            if gangs[i] != size:
                size, scan = gangs[i], first
            if size > left:
                raise ValueError(f"{size} GPU ids requested but only {left} free")
            while scan < len(starts) and ends[scan] - starts[scan] < size:
                scan += 1
            if scan < len(starts):  # lowest run: the first interval that is long enough
                start = starts[scan]
                out[i] = list(range(start, start + size))
                starts[scan] = start + size
            else:  # no run: the lowest free ids, from the first intervals on
                lowest: list[int] = []
                while len(lowest) < size:
                    take = min(size - len(lowest), ends[first] - starts[first])
                    lowest += range(starts[first], starts[first] + take)
                    starts[first] += take
                    if starts[first] == ends[first]:
                        first += 1
                out[i] = lowest  # no run of this size now, so none later: scan stays at the end
            left -= size
            while first < len(starts) and starts[first] == ends[first]:
                first += 1
        return out


class _SoloGreedy:
    """The greedy pass of :meth:`RoundMechanism._choose` when every unit is one job.

    Walks candidates (option indices in priority order) and takes option c when its unit is
    not placed yet and its gang fits the free GPUs of its type -- exactly the scalar rule, in
    blocks of ``block`` candidates: first the candidates that can no longer fit (unit placed,
    gang > free GPUs now; free GPUs only shrink, so they would be refused at their turn) are
    dropped with numpy; when the first occurrences of the units left in the block fit their
    types all together, all of them are taken at once (a later occurrence of a unit is refused:
    its first one was taken); otherwise the block is walked one candidate at a time.
    ``chosen`` lists the taken options in the order taken.
    """

    def __init__(self, unit: npt.NDArray[np.int64], acc: npt.NDArray[np.int64],
                 gangs: npt.NDArray[np.int64], capacity: Sequence[int], block: int) -> None:
        self.unit, self.acc, self.gangs, self.block = unit, acc, gangs, block
        self.free = np.array(capacity, dtype=np.int64)
        self.placed = np.zeros(len(gangs), dtype=bool)
        self.smallest = int(gangs.min())
        self.chosen: list[int] = []

    def run(self, candidates: npt.NDArray[np.intp]) -> None:
        """One pass over ``candidates`` with the state left by earlier passes."""
        unit, acc, gangs, free, placed = self.unit, self.acc, self.gangs, self.free, self.placed
        for start in range(0, len(candidates), self.block):
            if int(free.sum()) < self.smallest:
                return
            block = candidates[start : start + self.block]
            u = unit[block]
            block = block[~placed[u] & (gangs[u] <= free[acc[block]])]
            if not len(block):
                continue
            u = unit[block]
            first = np.zeros(len(block), dtype=bool)
            first[np.unique(u, return_index=True)[1]] = True
            need = np.bincount(acc[block][first], weights=gangs[u][first], minlength=len(free))
            if np.all(need <= free):
                taken = block[first]
                placed[unit[taken]] = True
                free -= need.astype(np.int64)
                self.chosen += taken.tolist()
            else:
                self._walk(block)

    def _walk(self, block: npt.NDArray[np.intp]) -> None:
        """The scalar rule over one block."""
        free = self.free.tolist()
        total = sum(free)
        placed = self.placed
        units = self.unit[block].tolist()
        accs = self.acc[block].tolist()
        gangs = self.gangs[self.unit[block]].tolist()
        for c, u, k, g in zip(block.tolist(), units, accs, gangs, strict=True):
            if placed[u] or g > free[k]:
                continue
            placed[u] = True
            free[k] -= g
            total -= g
            self.chosen.append(c)
            if total < self.smallest:
                break
        self.free[:] = free


@dataclass(frozen=True)
class _History:
    """What :meth:`RoundMechanism.update` carries over, keyed by unit and type name."""

    received: dict[Unit, dict[str, int]]
    born: dict[Unit, int]
    #: (type, GPU ids) of the units that ran in the last round
    last: dict[Unit, tuple[str, list[int]]]


# --------------------------------------------------------------------------- helpers


def _unit_targets(
    instance: Instance,
    allocation: Mapping[str, Mapping[str, float]],
    colocated: Sequence[PairShare],
) -> dict[Unit, dict[str, float]]:
    """X[u,k] per unit; raises :class:`InputError` on unknown names or bad shares."""
    order = instance.job_index()
    pools = instance.cluster.accelerators
    targets: dict[Unit, dict[str, float]] = {}

    def add(unit: Unit, acc: str, share: float, where: str) -> None:
        if acc not in pools:
            raise InputError(f"unknown accelerator {acc!r}", field=where)
        if not math.isfinite(share) or share < 0.0:
            raise InputError(f"share {share} is not a finite number >= 0", field=where)
        shares = targets.setdefault(unit, {})
        shares[acc] = shares.get(acc, 0.0) + share

    isfinite = math.isfinite
    for job_id, shares in allocation.items():  # add() inlined: 10^5 jobs pass here
        if job_id not in order:
            raise InputError(f"unknown job {job_id!r}", field=f"allocation.{job_id}")
        if not shares:
            continue
        row: dict[str, float] = {}
        for acc, share in shares.items():
            if acc not in pools or not isfinite(share) or share < 0.0:
                add((job_id,), acc, share, f"allocation.{job_id}.{acc}")  # raises
            row[acc] = 0.0 + share
        targets[(job_id,)] = row
    for n, pair in enumerate(colocated):
        a, b = pair.jobs
        where = f"colocated_allocation[{n}]"
        if a not in order or b not in order or a == b:
            raise InputError(f"pair {a}+{b} must name two distinct known jobs", field=where)
        unit = (a, b) if order[a] < order[b] else (b, a)
        add(unit, pair.accelerator, pair.fraction, where)
    return targets


def _gpus_per_node(count: int, nodes: int | None, gpus_per_node: int | None) -> int | None:
    """GPUs per node of a pool, when the pool says (directly or as count / nodes)."""
    if gpus_per_node is not None:
        return gpus_per_node
    if nodes is not None and nodes > 0 and count % nodes == 0:
        return count // nodes
    return None


def pick_gpu_ids(free: Iterable[int], size: int, count: int, per_node: int | None) -> list[int]:
    """Choose ``size`` ids from ``free`` (ids 0..count-1), consolidated.

    Nodes are id blocks of ``per_node`` (one block when None).  If some node has >= size free
    ids, take the best-fitting one (fewest free ids, then lowest index) and there the lowest
    contiguous run of ``size`` ids, else its lowest free ids.  Otherwise take ids from the
    nodes with the most free ids first (fewest nodes spanned).  Raises ValueError when fewer
    than ``size`` ids are free.
    """
    block = per_node or max(count, 1)
    by_node: dict[int, list[int]] = defaultdict(list)
    for gpu in sorted(free):
        by_node[gpu // block].append(gpu)
    if sum(len(ids) for ids in by_node.values()) < size:
        raise ValueError(f"{size} GPU ids requested but only "
                         f"{sum(len(v) for v in by_node.values())} free")
    fitting = [n for n, ids in by_node.items() if len(ids) >= size]
    if fitting:
        best = min(fitting, key=lambda n: (len(by_node[n]), n))
        return _lowest_run(by_node[best], size)
    taken: list[int] = []
    for n in sorted(by_node, key=lambda n: (-len(by_node[n]), n)):
        taken += by_node[n][: size - len(taken)]
        if len(taken) == size:
            break
    return sorted(taken)


def _lowest_run(ids: list[int], size: int) -> list[int]:
    """Lowest run of ``size`` consecutive ids in sorted ``ids``, else the lowest ``size`` ids."""
    for start in range(len(ids) - size + 1):
        if ids[start + size - 1] - ids[start] == size - 1:
            return ids[start : start + size]
    return ids[:size]


# ------------------------------------------------------------------------ public API


def schedule_rounds(
    instance: Instance,
    allocation: Mapping[str, Mapping[str, float]],
    num_rounds: int | None = None,
    *,
    colocated: Sequence[PairShare] = (),
    work_conserving: bool = False,
    min_share: float = 1e-6,
) -> list[list[Placement]]:
    """Run the mechanism for ``num_rounds`` rounds (default ``instance.params.num_rounds``).

    ``allocation`` is X[j,k] = {job: {accelerator: share of time}}; ``colocated`` the pair
    shares Y[{a,b},k]; shares <= ``min_share`` are treated as 0.  Returns one list of
    :class:`Placement` per round (placements in instance job order).
    """
    rounds = instance.params.num_rounds if num_rounds is None else num_rounds
    if rounds < 0:
        raise InputError(f"num_rounds must be >= 0 (got {rounds})", field="num_rounds")
    with gc_paused():
        mechanism = RoundMechanism(
            instance, allocation, colocated, work_conserving=work_conserving,
            min_share=min_share,
        )
        return [mechanism.next_round() for _ in range(rounds)]


def with_rounds(
    instance: Instance,
    solution: Solution,
    num_rounds: int | None = None,
    *,
    work_conserving: bool = False,
    min_share: float = 1e-6,
) -> Solution:
    """A copy of ``solution`` whose ``rounds`` realise its allocation and pair shares."""
    rounds = schedule_rounds(
        instance,
        solution.allocation,
        num_rounds,
        colocated=solution.colocated_allocation,
        work_conserving=work_conserving,
        min_share=min_share,
    )
    return solution.model_copy(update={"rounds": rounds})


def job_targets(
    allocation: Mapping[str, Mapping[str, float]], colocated: Sequence[PairShare] = ()
) -> dict[str, dict[str, float]]:
    """Share of rounds each job should run on each type: X[j,k] + sum_{pairs p ∋ j} Y[p,k]."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for job_id, shares in allocation.items():
        for acc, share in shares.items():
            out[job_id][acc] += share
    for pair in colocated:
        for job_id in pair.jobs:
            out[job_id][pair.accelerator] += pair.fraction
    return {j: dict(shares) for j, shares in out.items()}


def received_shares(
    rounds: Sequence[Sequence[Placement]], instance: Instance
) -> dict[str, dict[str, float]]:
    """Fraction of ``rounds`` each job ran on each type (solo or co-located).

    received[j][k] = |{r : j placed on k in round r}| / len(rounds); every job of the instance
    and every type appear (0.0 when never placed; all 0.0 for no rounds).
    """
    counts = {job.id: dict.fromkeys(instance.types, 0) for job in instance.jobs}
    for placements in rounds:
        for p in placements:
            if p.job in counts and p.accelerator in counts[p.job]:
                counts[p.job][p.accelerator] += 1
    total = len(rounds)
    return {
        job: {acc: (n / total if total else 0.0) for acc, n in by_acc.items()}
        for job, by_acc in counts.items()
    }


def count_migrations(rounds: Sequence[Sequence[Placement]]) -> dict[str, int]:
    """Placement changes per job between consecutive rounds in which it runs.

    A migration is counted for job j at round r >= 1 when j runs in both rounds r-1 and r and
    its accelerator type or its set of GPU ids differs (ids compared only when both rounds give
    them).  A job that waits and resumes is not counted: it restores from a checkpoint anyway.
    Every job that appears in some round has an entry.
    """
    migrations: dict[str, int] = {}
    previous: dict[str, Placement] = {}
    for placements in rounds:
        current = {p.job: p for p in placements}
        for job_id, p in current.items():
            migrations.setdefault(job_id, 0)
            before = previous.get(job_id)
            if before is not None and _moved(before, p):
                migrations[job_id] += 1
        previous = current
    return migrations


def _moved(before: Placement, after: Placement) -> bool:
    """True when the accelerator or the GPU id set changed between two placements."""
    if before.accelerator != after.accelerator:
        return True
    if before.gpu_ids is None or after.gpu_ids is None:
        return False
    return set(before.gpu_ids) != set(after.gpu_ids)


# ---------------------------------------------------------------- array form (simulator)


def choose_by_priority(
    target: npt.NDArray[np.float64],
    received: npt.NDArray[np.float64],
    age: npt.NDArray[np.float64],
    runnable: npt.NDArray[np.bool_],
    gang: npt.NDArray[np.int64],
    free: Sequence[int],
    *,
    round_s: float,
    rank: npt.NDArray[np.int64] | None = None,
    members: Sequence[tuple[int, ...]] | None = None,
    work_conserving: bool = False,
    min_share: float = 1e-6,
) -> list[tuple[int, int]]:
    r"""One round of the mechanism's rule on arrays, with time in seconds (for simulators).

    Units u = 0..U-1 (rows), types k = 0..K-1 (columns).  ``target`` is X[u,k];
    ``received[u,k]`` the seconds u ran on k since it arrived and ``age[u]`` the seconds since
    it arrived, so its received fraction is f[u,k] = received / age -- the round counts of
    :class:`RoundMechanism` become times (c[u,k] = received / L, t_u = age / L for rounds of
    L = ``round_s`` seconds), and the priorities, deficits and sort order are the same:

    * priority[u,k] = X[u,k] age[u] / received[u,k] (+inf when nothing was received yet),
      ties by the larger deficit X[u,k] age[u] - received[u,k], then the larger X[u,k], then
      ``rank`` (lower first; default the row order), then the type order;
    * X[u,k] <= ``min_share`` counts as 0 (priority 0);
    * without ``work_conserving`` only units behind their target are candidates:
      received < X (age + L), as in :class:`RoundMechanism`; with it every runnable (u, k)
      is a candidate in one pass, those with X = 0 last -- Gavel's simulator, which keeps
      GPUs busy whenever some job can use them.

    Greedy in that order: u goes on k when k has ``gang[u]`` free GPUs (``free[k]`` at the
    start) and none of its ``members`` (default: unit u is job u alone) is placed yet.
    ``rank`` may be (U,) or (U, 2) (two tie-break columns, the first compared first).
    Returns the chosen (u, k) in the order chosen.  :class:`PriorityCandidates` is the same
    rule with the per-round work reduced to a few array operations.
    """
    num_units, num_types = target.shape
    if num_units == 0:
        return []
    share = np.where(target > min_share, target, 0.0)
    unit, acc = np.nonzero(runnable)
    if rank is None:
        ranks: list[npt.NDArray[np.int64]] = [unit]
    elif rank.ndim == 1:
        ranks = [rank[unit]]
    else:
        ranks = [rank[unit, 1], rank[unit, 0]]
    candidates = PriorityCandidates(unit, acc, share[unit, acc], ranks, num_types)
    return candidates.choose(
        received[unit, acc], age[unit], gang.tolist(), free, round_s=round_s,
        members=members, work_conserving=work_conserving)


#: Candidates :meth:`PriorityCandidates.pick`'s Python walk takes between two prunings of
#: the rest.
_PICK_CHUNK = 1024
#: Walk the sorted candidates with the compiled loop (:mod:`walk_kernel`) when numba loads,
#: from this many units (active jobs) on: below, the Python walk is as fast, and a process
#: does not pay numba's start (~0.5 s to import it and load the loop) for a short walk.
COMPILED_WALK = True
COMPILED_WALK_MIN_UNITS = 2000
#: The first piece of the walk's sort (:func:`_sorted_pieces`), candidates.
_SORT_PIECE = 16384


def _lexsort2(primary: npt.NDArray[np.float64], secondary: npt.NDArray[np.float64]
              ) -> npt.NDArray[np.intp]:
    """``np.lexsort((secondary, primary))``: one sort by ``primary``, then only the runs of
    equal ``primary`` (NaNs equal to each other, as the sort puts them) sorted by
    ``secondary``, then by position -- the stable order, so the sort itself need not be
    stable (numpy's default sort, several times faster than its stable one on floats)."""
    order = np.argsort(primary)
    ranked = primary[order]
    same = ranked[1:] == ranked[:-1]
    both_nan = np.isnan(ranked)
    same |= both_nan[1:] & both_nan[:-1]
    if not same.any():
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    run = np.cumsum(~np.concatenate(([False], same)))[at]  # which run of ties
    members = order[at]
    order[at] = members[np.lexsort((members, secondary[members], run))]
    return order


def _sorted_pieces(rest: npt.NDArray[np.int64], neg_priority: npt.NDArray[np.float64],
                   neg_deficit: npt.NDArray[np.float64]) -> Iterator[npt.NDArray[np.int64]]:
    """``rest`` (ascending candidate indices) in the order of the stable
    ``np.lexsort((neg_deficit[rest], neg_priority[rest]))``, in pieces of growing size: each
    piece holds the next candidates by -priority (at least ``_SORT_PIECE``, doubling, ties of
    the last key included), sorted.  Every candidate of a piece comes before every candidate
    of the next in the full order, so walking the pieces in turn is walking the full order,
    and a walk that ends early sorts a few thousand candidates, not all of them."""
    size = _SORT_PIECE
    while len(rest) > 2 * size:
        key = neg_priority[rest]
        cut = np.partition(key, size - 1)[size - 1]
        head = key <= cut  # NaN keys (sorted last) are never in a head
        if not head.any():
            break
        top = rest[head]
        yield top[_lexsort2(neg_priority[top], neg_deficit[top])]
        rest = rest[~head]
        size *= 2
    if len(rest):
        yield rest[_lexsort2(neg_priority[rest], neg_deficit[rest])]


def _walk_kernel() -> Any:
    """The compiled walk (:mod:`schedlab.formulations.gavel.walk_kernel`), or None when numba
    cannot load it."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = load_compiled("schedlab.formulations.gavel.walk_kernel",
                                "the compiled round-rule walk", "walking in Python") or False
    return _KERNEL or None


_KERNEL: Any = None


def round_kernel(units: int) -> Any:
    """The compiled loops of the round rule (:mod:`walk_kernel`) for a round of ``units``
    active units: None below ``COMPILED_WALK_MIN_UNITS``, when ``COMPILED_WALK`` is off, or
    when numba cannot load them."""
    if not COMPILED_WALK or units < COMPILED_WALK_MIN_UNITS:
        return None
    return _walk_kernel()


class PriorityCandidates:
    """The (unit, type) candidates of :func:`choose_by_priority` with their static sort keys.

    ``unit``, ``acc``, ``share`` (X, already 0 below the minimum share) are flat arrays over
    the candidates; ``ranks`` are tie-break keys (least significant first, compared after
    -share and before the type).  The static part of the order -- -X, then the ranks, then the
    type -- is computed once here: the candidates are kept sorted by it (``static`` maps that
    order to the caller's candidate indices), so that :meth:`choose` only sorts, stably, by the
    round's priorities and deficits.  A simulator keeps one instance while the job set and the
    allocation stay the same, and may pass its per-round arrays already in the static order
    (:meth:`pick`).  ``presorted=True`` promises that the candidates already come in the order
    of the tie-break keys (``np.lexsort((acc, *ranks))`` is the identity, as for ``np.nonzero``
    of a (unit, type) mask with ``ranks=[unit]``), so the static order is a stable sort by -X
    alone: the same permutation as the full lexsort, found faster.  ``share_rank`` (with
    ``presorted``) may give that order's key as small integers -- equal for equal shares,
    smaller for a larger share, below 2^16 -- when the caller knows the shares' few distinct
    values (a class LP): the stable sort is then a radix sort, the same permutation.
    """

    def __init__(
        self,
        unit: npt.NDArray[np.int64],
        acc: npt.NDArray[np.int64],
        share: npt.NDArray[np.float64],
        ranks: Sequence[npt.NDArray[np.int64]],
        num_types: int,
        *,
        presorted: bool = False,
        share_rank: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.num_types = num_types
        #: caller's candidate index of each candidate, in the static order
        if presorted and len(share) and bool(np.all(share >= 0)):
            # the stable sort by -X: the positive shares sorted, then the zeros in order
            positive_at = np.flatnonzero(share > 0)
            if share_rank is not None and len(share_rank) == len(share) and (
                    not len(positive_at) or int(share_rank[positive_at].max()) < 2**16):
                # the same permutation: ranks order the shares (equal shares, equal ranks)
                # and a stable sort of 16-bit keys is a radix sort, O(candidates)
                key: npt.NDArray[Any] = share_rank[positive_at].astype(np.uint16)
            else:
                key = -share[positive_at]
            self.static = np.concatenate([
                positive_at[np.argsort(key, kind="stable")],
                np.flatnonzero(share <= 0)])
        else:
            self.static = (np.argsort(-share, kind="stable") if presorted
                           else np.lexsort((acc, *ranks, -share)))
        self._in_order(unit[self.static], acc[self.static], share[self.static])

    @classmethod
    def in_static_order(
        cls,
        unit: npt.NDArray[np.int64],
        acc: npt.NDArray[np.int64],
        share: npt.NDArray[np.float64],
        static: npt.NDArray[np.int64],
        num_types: int,
    ) -> PriorityCandidates:
        """Candidates given already in their static order (``static[i]``: the caller's
        candidate index at position i), as the constructor would order them: the caller
        sorted them (:func:`walk_kernel.static_candidates`)."""
        out = cls.__new__(cls)
        out.num_types = num_types
        out.static = static
        out._in_order(unit, acc, share)
        return out

    def _in_order(self, unit: npt.NDArray[np.int64], acc: npt.NDArray[np.int64],
                  share: npt.NDArray[np.float64]) -> None:
        """Keep the candidates' unit, type and share, in the static order, and the sort
        keys made of the share."""
        self.unit = unit
        self.acc = acc
        self.share = share
        positive = self.share > 0
        self._positive = positive
        self._neg_share = -self.share
        # -priority when nothing was received yet: -inf with a share, else 0 (X = 0: always 0)
        self._neg_unreceived = np.where(positive, -np.inf, 0.0)
        self._lists: tuple[list[int], list[int]] | None = None  # unit, acc as lists
        self._gang_array: tuple[list[int], npt.NDArray[np.int64]] | None = None  # gang, as array

    def _unit_type_lists(self) -> tuple[list[int], list[int]]:
        """``unit`` and ``acc`` as Python lists (made at the first need: the solo walk
        reads only the chunks it walks)."""
        if self._lists is None:
            self._lists = (self.unit.tolist(), self.acc.tolist())
        return self._lists

    def choose(
        self,
        received: npt.NDArray[np.float64],
        age: npt.NDArray[np.float64],
        gang: list[int],
        free: Sequence[int],
        *,
        round_s: float,
        members: Sequence[tuple[int, ...]] | None = None,
        work_conserving: bool = False,
    ) -> list[tuple[int, int]]:
        """Greedy choice for one round (``received``, ``age`` per candidate, in the caller's
        candidate order; ``gang`` and ``members`` per unit)."""
        if len(self.unit) == 0:
            return []
        static = self.static
        picked = self.pick(received[static], age[static], gang, free, round_s=round_s,
                           members=members, work_conserving=work_conserving)
        units, types = self._unit_type_lists()
        return [(units[c], types[c]) for c in picked.tolist()]

    def _sorted_parts(
        self,
        neg_priority: npt.NDArray[np.float64],
        neg_deficit: npt.NDArray[np.float64],
        eligible: npt.NDArray[np.bool_] | None,
        placed: npt.NDArray[np.bool_] | npt.NDArray[np.uint8],
    ) -> Iterator[npt.NDArray[np.int64]]:
        """The candidates of the solo walk in the order ``np.lexsort((neg_deficit,
        neg_priority))`` (restricted to ``eligible``), in sorted pieces: first those with a
        negative key (some share: -priority < 0, -inf before anything was received), then the
        rest (-priority 0: no share, or no age yet; NaN last as lexsort puts it), which is
        sorted only when the walk asks for it and then without the candidates of the units
        ``placed`` (nonzero) by then (the walk starts with none placed)."""
        negative = neg_priority < 0
        for second, part in enumerate((negative, ~negative)):
            if eligible is not None:
                part = part & eligible
            rest = np.flatnonzero(part)
            if second and len(rest):
                rest = rest[placed[self.unit[rest]] == 0]
            if len(rest):
                # stable: ties of priority and deficit keep the static order
                yield from _sorted_pieces(rest, neg_priority, neg_deficit)

    def _walk_solo(
        self,
        neg_priority: npt.NDArray[np.float64],
        neg_deficit: npt.NDArray[np.float64],
        eligible: npt.NDArray[np.bool_] | None,
        gang: list[int] | IntArray,
        free: Sequence[int],
    ) -> IntArray:
        """:meth:`pick`'s greedy walk when every unit is one job, in the order
        ``np.lexsort((neg_deficit, neg_priority))`` (restricted to ``eligible``), found in
        sorted pieces (:meth:`_sorted_parts`): by the compiled loop from
        ``COMPILED_WALK_MIN_UNITS`` units on when numba loads, else one candidate at a time in
        Python -- the same choices."""
        if round_kernel(len(gang)) is not None:
            return self._walk_solo_compiled(neg_priority, neg_deficit, eligible, gang, free)
        return self._walk_solo_chunks(neg_priority, neg_deficit, eligible, gang, free)

    def _walk_solo_compiled(
        self,
        neg_priority: npt.NDArray[np.float64],
        neg_deficit: npt.NDArray[np.float64],
        eligible: npt.NDArray[np.bool_] | None,
        gang: list[int] | IntArray,
        free: Sequence[int],
    ) -> IntArray:
        """:meth:`_walk_solo_chunks` with each sorted piece walked by the compiled loop
        (:func:`walk_kernel.walk_piece`, no pruning needed): the same candidates in the same
        order, the same choices."""
        kernel = _walk_kernel()
        if isinstance(gang, np.ndarray):
            gang_a = np.ascontiguousarray(gang, dtype=np.int64)
        else:
            cached = self._gang_array
            if cached is None or cached[0] is not gang:
                cached = self._gang_array = (gang, np.asarray(gang, dtype=np.int64))
            gang_a = cached[1]
        left = np.array(free, dtype=np.int64)
        placed = np.zeros(len(gang_a), dtype=np.uint8)
        state = np.array([int(left.sum()), len(gang_a), int(gang_a.min()), 0], dtype=np.int64)
        chosen = np.empty(len(gang_a), dtype=np.int64)
        for piece in self._sorted_parts(neg_priority, neg_deficit, eligible, placed):
            if kernel.walk_piece(np.ascontiguousarray(piece, dtype=np.int64), self.unit,
                                 self.acc, gang_a, left, placed, state, chosen):
                break
        return chosen[:state[3]]

    def _walk_solo_chunks(
        self,
        neg_priority: npt.NDArray[np.float64],
        neg_deficit: npt.NDArray[np.float64],
        eligible: npt.NDArray[np.bool_] | None,
        gang: list[int] | IntArray,
        free: Sequence[int],
    ) -> IntArray:
        """The walk one candidate at a time in Python: each part sorted, then walked in
        chunks of ``_PICK_CHUNK``; after each, the candidates the walk would skip anyway are
        dropped from the rest (their unit placed, or their type with fewer GPUs left than the
        smallest gang)."""
        if isinstance(gang, np.ndarray):
            gang = gang.tolist()
        left = list(free)
        total_left = sum(left)
        smallest = min(gang)
        placed = bytearray(len(gang))
        placed_now = np.frombuffer(placed, dtype=np.uint8)  # a view: follows ``placed``
        unplaced = len(gang)
        chosen: list[int] = []
        for rest in self._sorted_parts(neg_priority, neg_deficit, eligible, placed_now):
            while len(rest):
                chunk = rest[:_PICK_CHUNK]
                rest = rest[_PICK_CHUNK:]
                for c, u, k in zip(chunk.tolist(), self.unit[chunk].tolist(),
                                   self.acc[chunk].tolist(), strict=True):
                    if placed[u]:
                        continue
                    g = gang[u]
                    if g > left[k]:
                        continue
                    placed[u] = 1
                    unplaced -= 1
                    left[k] -= g
                    total_left -= g
                    chosen.append(c)
                    if total_left < smallest or not unplaced:
                        return np.array(chosen, dtype=np.int64)
                if len(rest):
                    open_type = np.array(left) >= smallest
                    rest = rest[(placed_now[self.unit[rest]] == 0) & open_type[self.acc[rest]]]
        return np.array(chosen, dtype=np.int64)

    def pick(
        self,
        received: npt.NDArray[np.float64],
        age: npt.NDArray[np.float64],
        gang: list[int] | IntArray,
        free: Sequence[int],
        *,
        round_s: float,
        members: Sequence[tuple[int, ...]] | None = None,
        work_conserving: bool = False,
    ) -> IntArray:
        """:meth:`choose` with ``received`` and ``age`` in the static order (index i is
        candidate ``static[i]``); returns the chosen candidates' static indices in the order
        chosen."""
        if len(self.unit) == 0:
            return np.zeros(0, dtype=np.int64)
        # Sort keys, negated (IEEE negation is exact: -(a b) = (-a) b, -(a / b) = (-a) / b,
        # -(a - b) = b + (-a)): -priority = -X age / received where something was received,
        # else -inf (X > 0) or 0 (X = 0); -deficit = received - X age.
        neg_weighted = self._neg_share * age
        neg_priority = self._neg_unreceived.copy()
        np.divide(neg_weighted, received, out=neg_priority, where=received > 0)
        neg_deficit = received + neg_weighted
        eligible: npt.NDArray[np.bool_] | None = None
        if not work_conserving:
            share = self.share
            eligible = self._positive & (received < share * (age + round_s)
                                         - _ELIGIBLE_EPS * round_s)
        if members is None:
            return self._walk_solo(neg_priority, neg_deficit, eligible, gang, free)
        if isinstance(gang, np.ndarray):
            gang = gang.tolist()
        # stable: ties of priority and deficit keep the static order
        order = np.lexsort((neg_deficit, neg_priority))
        if eligible is not None:
            order = order[eligible[order]]
        units, types = self._unit_type_lists()
        left = list(free)
        total_left = sum(left)
        smallest = min(gang)
        placed = bytearray(len(gang) if members is None
                           else 1 + max(j for m in members for j in m))
        unplaced = len(gang)
        chosen: list[int] = []
        positions = order.tolist()
        for c in positions:
            u = units[c]
            k = types[c]
            g = gang[u]
            if g > left[k]:
                continue
            jobs = members[u]
            if any(placed[j] for j in jobs):
                continue
            for j in jobs:
                placed[j] = 1
            left[k] -= g
            total_left -= g
            chosen.append(c)
            if total_left < smallest or not unplaced:
                break
        return np.array(chosen, dtype=np.int64)


# --------------------------------------------------------------- Gavel's own mechanism


#: Gavel's ``minimum_time_between_allocation_resets`` (scheduler.py default), s.
GAVEL_RESET_INTERVAL_S = 1920.0
#: The same default in Shockwave's copy of Gavel's scheduler (scheduler.py:101 at 8a44f4a), s.
SHOCKWAVE_RESET_INTERVAL_S = 1000.0


class _JobLike(Protocol):
    """What :class:`GavelRoundState` reads of a job (``JobState`` has it)."""

    id: str
    scale_factor: int
    throughput: dict[str, float]
    steps_done: float
    executed_s: float
    overhead_s: float
    throughput_version: int


class GavelRoundState:
    r"""Gavel's round mechanism as its simulator runs it (``scheduler.py``, simulation mode).

    One object per simulated run; a policy calls :meth:`observe` at every round start, then
    :meth:`reset` with a fresh allocation when :meth:`observe` says one is due, then
    :meth:`choose`, then :meth:`record` with what it placed.  The rules, with Gavel's function
    names (docs/simulator.md discusses each against schedlab's own mechanism):

    * *Time received* (``_done_callback``): after a round, each job that ran on type k gets
      ``job_time[j,k] += finish_j - round_start`` and ``worker_time[k]`` the same, where
      ``finish_j`` is its own finish (start + steps / T) and ``round_start`` is Gavel's
      ``current_round_start_time``: the end of the previous round that ran jobs (0 s before
      the first), which after an idle gap lies before the real start.  A job's seconds are
      read back as (steps done in the round) / T, so switch overheads (Gavel has none) are
      not counted.
    * *Allocation and reset* (``_update_priorities`` -> ``_reset_time_run_so_far``,
      ``_compute_allocation``): the allocation is recomputed only at a reset, and a reset
      happens at a round start when a job arrived or finished since the last reset *and* at
      least ``reset_interval_s`` (1920 s) passed since it (or the last reset was at t = 0).
      A reset first adds to every job's deficit ``X_old[j,k] (now - last_reset) -
      (job_time[j,k] - L/2)``, then sets ``job_time[j,k] = L/2`` for every active job and
      ``worker_time[k] = L/2 x (active jobs)``.  A job that arrived after the last reset starts
      with ``job_time = L/2`` and is not in the allocation.  A job whose throughput changed
      (a new batch size) also makes a reset due, unless ``reset_on_throughput_change`` is
      False: Shockwave's copy of the scheduler sets its flag only on arrivals and finishes
      (``_scale_bs_and_iters`` clears the batch-size flags before ``_done_callback`` reads
      them, scheduler.py:4703-4715 at 8a44f4a).
    * *Priorities* (``_update_priorities``): ``X[j,k] / (job_time[j,k] / worker_time[k])``;
      0 when X = 0, when T[j,k] = 0, or when the job is not in the allocation; X 1e9 when
      worker_time[k] = 0.
    * *Order* (``_schedule_jobs_on_workers_helper``): one list per type, sorted by (priority,
      deficit, X) descending, ties in arrival order; the lists are concatenated in the type
      order (cluster order, shuffled every round by ``random.Random(seed + 5)`` when
      ``shuffle_types``, as Gavel does for policies without "Perf" in their name), not merged.
      Greedy: a job takes its whole gang on a type with room unless it was taken already or
      T[j,k] = 0 (and, with ``skip_zero_priority`` -- Gavel's FIFO -- unless its priority is
      0).
    * *Jobs outside the allocation* (``_schedule_jobs_on_workers``): a job picked by the greedy
      walk but absent from the allocation gets no workers; its GPUs stay idle this round.
    """

    def __init__(
        self,
        types: Sequence[str],
        gpus: Sequence[int],
        round_s: float,
        *,
        reset_interval_s: float = GAVEL_RESET_INTERVAL_S,
        shuffle_types: bool = False,
        seed: int = 0,
        skip_zero_priority: bool = False,
        reset_on_throughput_change: bool = True,
    ) -> None:
        self.types = list(types)
        self.reset_on_throughput_change = reset_on_throughput_change
        self.gpus = [int(n) for n in gpus]
        self.half_round = float(round_s) / 2.0
        self.reset_interval_s = float(reset_interval_s)
        self.skip_zero_priority = skip_zero_priority
        self._shuffler = random.Random(seed + 5) if shuffle_types else None
        num_types = len(self.types)
        self._slot: dict[str, int] = {}
        self._ids: list[str] = []
        size = 64
        self.job_time = np.zeros((size, num_types))
        self.deficit = np.zeros((size, num_types))
        self.allocation = np.zeros((size, num_types))
        self._in_allocation = np.zeros(size, dtype=bool)
        self._thr = np.zeros((size, num_types))
        self._gang: list[int] = []
        self._active = np.zeros(size, dtype=bool)
        self.worker_time = np.zeros(num_types)
        self.last_reset = 0.0
        self.need_update = False
        self.resets = 0
        # what ran last round: (job, type index, steps done, seconds run and overhead seconds
        # before the round)
        self._ran: list[tuple[_JobLike, int, float, float, float]] = []
        self._thr_version: dict[str, int] = {}  # throughput_version when _thr was read
        self._round_start = 0.0  # real start of the last round that ran jobs
        self._gavel_start = 0.0  # Gavel's current_round_start_time
        self._gavel_end: float | None = None  # Gavel's current_round_end_time

    # jobs ------------------------------------------------------------------------------
    def _grow(self) -> None:
        extra = len(self._active)
        for name in ("job_time", "deficit", "allocation", "_thr"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.zeros_like(old)]))
        self._in_allocation = np.concatenate([self._in_allocation, np.zeros(extra, bool)])
        self._active = np.concatenate([self._active, np.zeros(extra, bool)])

    def add(self, job: _JobLike) -> None:
        """A job arrived (``add_job``): job_time L/2 on every type, deficit 0."""
        slot = len(self._ids)
        if slot == len(self._active):
            self._grow()
        self._slot[job.id] = slot
        self._ids.append(job.id)
        self._gang.append(job.scale_factor)
        self._read_throughput(job, slot)
        self.job_time[slot] = self.half_round
        self._active[slot] = True
        self.need_update = True

    def _read_throughput(self, job: _JobLike, slot: int) -> None:
        self._thr[slot] = [job.throughput.get(k, 0.0) if job.scale_factor <= n else 0.0
                           for k, n in zip(self.types, self.gpus, strict=True)]
        self._thr_version[job.id] = job.throughput_version

    def remove(self, job_id: str) -> None:
        """A job finished (``_remove_job``)."""
        slot = self._slot.get(job_id)
        if slot is not None and self._active[slot]:
            self._active[slot] = False
            self._in_allocation[slot] = False
            self.need_update = True

    def credit(self, job_id: str, k: int, seconds: float) -> None:
        """Add ``seconds`` on type index ``k`` to the job's and the type's time received."""
        slot = self._slot.get(job_id)
        if slot is not None and self._active[slot]:
            self.job_time[slot, k] += seconds
            self.worker_time[k] += seconds

    @property
    def active_ids(self) -> list[str]:
        """Active jobs in arrival order."""
        return [self._ids[s] for s in np.flatnonzero(self._active[: len(self._ids)])]

    # rounds ----------------------------------------------------------------------------
    def observe(self, now: float, active: Sequence[_JobLike]) -> bool:
        """Round start at ``now`` with jobs ``active`` (arrival order): credit last round's
        time, drop finished jobs, add arrivals; returns True when a reset is due (the caller
        then computes an allocation for ``active`` and calls :meth:`reset`)."""
        if self._ran:
            # seconds each job held its GPUs (Gavel: steps / T, computed as Gavel does, so
            # exact ties stay ties) and the overhead seconds it lost in them, which Gavel's
            # copy in Shockwave does not credit (``execution_time -= preemption_overhead``)
            held: list[float] = []
            lost: list[float] = []
            for js, k, before, ran_s, overhead_s in self._ran:
                charged = js.overhead_s - overhead_s
                if charged == 0 and js.throughput_version == self._thr_version.get(js.id):
                    held.append((js.steps_done - before) / js.throughput[self.types[k]])
                else:  # its throughput changed during the round, or it paid an overhead
                    held.append(js.executed_s - ran_s)
                lost.append(charged)
            end = self._round_start + max(held)
            if self._gavel_end is not None:
                self._gavel_start = self._gavel_end
            self._gavel_end = end
            for (js, k, *_), seconds, charged in zip(self._ran, held, lost, strict=True):
                self.credit(js.id, k, self._round_start + seconds - self._gavel_start - charged)
            self._ran = []
        ids = {js.id for js in active}
        for job_id in self.active_ids:
            if job_id not in ids:
                self.remove(job_id)
        versions = self._thr_version
        for js in active:
            if js.id not in self._slot:
                self.add(js)
            elif js.throughput_version != versions[js.id]:  # e.g. a new batch size
                self._read_throughput(js, self._slot[js.id])
                if self.reset_on_throughput_change:
                    self.need_update = True
        return self.need_update and (now - self.last_reset >= self.reset_interval_s
                                     or self.last_reset == 0.0)

    def reset(self, now: float, allocation: Mapping[str, Sequence[float]]) -> None:
        """``_reset_time_run_so_far`` with the old allocation, then the new ``allocation``
        (X per type, in :attr:`types` order) for the active jobs it names."""
        n = len(self._ids)
        active = self._active[:n]
        old = np.where(self._in_allocation[:n, None], self.allocation[:n], 0.0)
        elapsed = now - self.last_reset
        self.deficit[:n][active] += (old * elapsed
                                     - (self.job_time[:n] - self.half_round))[active]
        self.job_time[:n][active] = self.half_round
        self.worker_time[:] = self.half_round * int(active.sum())
        self.allocation[:n] = 0.0
        self._in_allocation[:n] = False
        for job_id, row in allocation.items():
            slot = self._slot.get(job_id)
            if slot is not None and self._active[slot]:
                self.allocation[slot] = np.clip(np.asarray(row, dtype=float), 0.0, 1.0)
                self._in_allocation[slot] = True
        self.last_reset = now
        self.need_update = False
        self.resets += 1

    def priorities(self) -> tuple[IntArray, FloatArray]:
        """(active slots in arrival order, priority per slot and type) as Gavel computes them."""
        slots = np.flatnonzero(self._active[: len(self._ids)])
        x = np.where(self._in_allocation[slots, None], self.allocation[slots], 0.0)
        thr = self._thr[slots]
        wt = self.worker_time
        fraction = np.divide(self.job_time[slots], wt[None, :],
                             out=np.zeros((len(slots), len(wt))), where=wt[None, :] != 0)
        priority = x * 1e9
        ok = (fraction > 0) & (x > 0) & (thr > 0)
        np.divide(x, fraction, out=priority, where=ok)
        priority[(x <= 0) | (thr <= 0)] = 0.0
        return slots, priority

    def choose(self) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """This round's (job, type index) in the order taken, and the (job, type) picks that get
        no workers because the job is outside the allocation."""
        slots, priority = self.priorities()
        order = list(range(len(self.types)))
        if self._shuffler is not None:
            self._shuffler.shuffle(order)
        left = list(self.gpus)
        taken: set[int] = set()
        run: list[tuple[str, int]] = []
        lost: list[tuple[str, int]] = []
        if len(slots) == 0:
            return run, lost
        x = np.where(self._in_allocation[slots, None], self.allocation[slots], 0.0)
        deficit = self.deficit[slots]
        thr = self._thr[slots]
        rank = np.arange(len(slots))
        gang = self._gang
        ids = self._ids
        in_allocation = self._in_allocation
        for k in order:
            if left[k] == 0:
                continue
            p = priority[:, k]
            rows = np.lexsort((rank, -x[:, k], -deficit[:, k], -p))
            keep = thr[rows, k] > 0
            if self.skip_zero_priority:
                keep &= p[rows] > 0
            for r in rows[keep].tolist():
                slot = int(slots[r])
                if slot in taken or gang[slot] > left[k]:
                    continue
                taken.add(slot)
                left[k] -= gang[slot]
                (run if in_allocation[slot] else lost).append((ids[slot], k))
                if left[k] == 0:
                    break
        return run, lost

    def play(self, now: float, active: Sequence[_JobLike]) -> list[tuple[str, str]]:
        """This round's (job, type) as Gavel's greedy walk takes them (:meth:`choose`),
        recorded (:meth:`record`) to be credited at the next round start."""
        run, _ = self.choose()
        by_id = {js.id: js for js in active}
        self.record(now, [(by_id[job_id], k) for job_id, k in run])
        return [(job_id, self.types[k]) for job_id, k in run]

    def record(self, now: float, ran: Sequence[tuple[_JobLike, int]]) -> None:
        """The jobs placed in the round starting at ``now`` (to credit at the next round)."""
        self._ran = [(js, k, js.steps_done, js.executed_s, js.overhead_s) for js, k in ran]
        if ran:
            self._round_start = now
