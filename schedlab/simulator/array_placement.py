r"""Placement for the array engine (:mod:`schedlab.simulator.array_run`): the rule of
:meth:`schedlab.placement.PoolPlacer.place_moved`, decided without a walk over every gang.

The rule (docs/simulator.md, "Placement"), per type, over the round's gangs in plan order:
a gang that ran on this type the last time it ran keeps exactly its old GPUs when they are
all free (*sticky*); the others, largest first (ties in plan order), take the lowest run of
consecutive free GPUs of their size, else the lowest free GPUs.

Gangs placed on a type in one round hold disjoint GPU sets.  So the gangs of the plan that
ran on type k in the previous round (*kept*) keep their GPUs whatever their order, unless a
gang that held GPUs of k longer ago (*older*) comes earlier in the plan and takes one back.
Two implementations decide the same masks:

* :class:`_BitPlacement` (pools split into nodes) keeps the GPU sets as Python ``int`` bit
  masks and walks, in plan order, the older gangs and the kept gangs that share a GPU with
  one of them; the remaining gangs go through :meth:`PoolPlacer.place_rest`.
* :class:`_RunPlacement` (one-node pools, every generated and trace workload) describes a gang
  whose GPUs are one run by (first GPU, size), so coverage counts per GPU are two
  ``bincount`` s and a ``cumsum``:

  - a kept gang is *contested* when an older gang covers one of its GPUs;
  - among the older and contested gangs, one whose GPUs no other of them covers is decided
    alone (its GPUs are free at its turn: the others never take them); only the gangs that
    overlap another are walked in plan order with bit masks;
  - the rest is placed on a boolean free-GPU array by size, largest first: within a maximal
    stretch of L free GPUs the lowest-run rule gives gangs of size s the starts a, a + s, ...
    (floor(L / s) of them; the GPUs it takes never break a later run of the same size), and
    when no run of s is left the remaining gangs of that size take the lowest free GPUs, s
    at a time, in order.

  The free-GPU array is kept from round to round: the gangs that left a type free their
  GPUs, the older gangs that keep theirs take them, and up to ``_FEW`` gangs are placed by
  :meth:`PoolPlacer.place_rest` itself on a bit mask of the array.  A gang whose GPUs are
  not one run (the lowest-free-GPUs case, or a job handed over with scattered ids) is
  counted through its list of GPU ids.

Both are checked against ``PoolPlacer.place_moved``, round after round, by
``tests/test_array_placement.py``; ``tests/test_simulator_arrays.py`` and
``tests/test_engines_on_trace.py`` compare the whole engine with the reference loop, which
places with it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache, reduce
from operator import or_, xor
from typing import Any

import numpy as np
import numpy.typing as npt

from schedlab.lazy import load_compiled
from schedlab.placement import PoolPlacer, ids_mask, mask_ids

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Place one-node pools with the compiled loops (:mod:`placement_kernel`) when numba loads.
COMPILED_PLACEMENT = True

#: One-node pools of at least this many GPUs are placed by :class:`_RunPlacement`, smaller
#: ones by :class:`_BitPlacement` (same masks; which is faster depends on the pool's size,
#: measured in docs/simulator.md).
RUN_PLACEMENT_MIN_GPUS = 1000

_NONE = np.zeros(0, dtype=np.int64)  # the GPU ids of a gang that holds none
#: Up to this many gangs, free GPUs are updated and gangs placed one by one (array steps
#: cost more than that).
_FEW = 16


@cache
def _block(size: int) -> int:
    """The mask of GPUs 0 .. size - 1 (a gang of ``size`` GPUs from GPU 0)."""
    return (1 << size) - 1


#: GPU masks of a type's gangs by position in plan order: every gang's (a list), or only
#: those of the gangs that moved (a dict; the others hold what ``Placement.mask`` holds), or
#: None: the moved gangs' new GPUs are only described (first GPU, one run, ids; read them with
#: :meth:`Placement.mask_of` and :meth:`Placement.gpu_ids`), the compiled placement's way:
#: a mask of a pool of n GPUs is an n-bit Python int, slow to make for every move.
Masks = list[int] | dict[int, int] | None
#: One accelerator type of a round as placed: (type, its index, slots of its gangs in plan
#: order, their GPU masks (at least the moved gangs', or None), the positions of the gangs
#: whose mask differs from the one they held there the last time they ran there, or that had
#: not run there, the slots as an array).
SlotLayout = tuple[str, int, list[int] | IntArray, Masks, list[int], IntArray]


class Placement:
    """Placement of a round's checked slot groups on every type (module docstring)."""

    def __init__(self, types: list[str], placers: dict[str, PoolPlacer],
                 last_type: IntArray, mask: npt.NDArray[np.object_], *,
                 run_min_gpus: int | None = None) -> None:
        if run_min_gpus is None:
            run_min_gpus = RUN_PLACEMENT_MIN_GPUS
        self.types = types
        total = len(last_type)
        self.last_type = last_type
        self.mask = mask  # by slot: the GPUs it held the last time it ran (shared)
        self.scale = np.zeros(total, dtype=np.int64)  # by slot: GPUs per gang
        self.scale_list: list[int] = []
        self.first = np.zeros(total, dtype=np.int64)  # by slot: its lowest GPU id
        self.one_run = np.zeros(total, dtype=bool)  # by slot: its GPUs are one run of scale
        self.ids_of: dict[int, IntArray] = {}  # by slot, when not one run: its GPU ids
        # the same ids as a table for the compiled placement: row = slot, num_ids[slot] of them
        self.ids = np.zeros((total, 1), dtype=np.int64)
        self.num_ids = np.zeros(total, dtype=np.int64)
        # descriptions of this round's new GPUs, applied when every type is placed
        self._new_runs: list[tuple[IntArray, IntArray, bool | BoolArray]] = []
        self._new_ids: dict[int, IntArray] = {}
        self._new_masks: list[tuple[int, int]] = []
        self._mark = np.zeros(total, dtype=bool)  # scratch, by slot
        empty = np.zeros(0, dtype=np.int64)
        self.last_slots: list[IntArray] = [empty] * len(types)  # placed last round, per type
        self.pools: list[_BitPlacement | _RunPlacement] = [
            _RunPlacement(self, placers[k])
            if placers[k].single_node and placers[k].count >= run_min_gpus
            else _BitPlacement(self, placers[k]) for k in types]

    def admit(self, slot: int, scale: int) -> None:
        """A new slot, a gang of ``scale`` GPUs (its mask already in ``mask``)."""
        self.scale[slot] = scale
        self.scale_list.append(scale)
        self.note(slot, self.mask[slot])

    def forget(self, slots: list[int]) -> None:
        """Jobs that finished: their masks (up to count/8 bytes each) and GPU ids go (call it
        after the layout of the round after they finished, the last one that reads them)."""
        for slot in slots:
            self.mask[slot] = 0
            self._drop_ids(slot)

    def note(self, slot: int, mask: int) -> None:
        """``mask`` (a job's GPUs when it is handed over) becomes the GPUs of ``slot``, as the
        one-node pools describe them: first GPU, one run or not, else its ids."""
        low = mask & -mask
        first = low.bit_length() - 1 if mask else 0
        self.first[slot] = first
        one_run = bool(mask) and mask == ((1 << int(self.scale[slot])) - 1) << first
        self.one_run[slot] = one_run
        if one_run or not mask:  # no GPU held: no ids kept (readers take none for a miss)
            self._drop_ids(slot)
        else:
            self._keep_ids(slot, np.array(mask_ids(mask), dtype=np.int64))

    def mask_of(self, slot: int) -> int:
        """The GPUs of ``slot`` as its description says (one-node pools): the bit mask."""
        if self.one_run[slot]:
            return _block(int(self.scale[slot])) << int(self.first[slot])
        return ids_mask(self.gpu_ids(slot))

    def gpu_ids(self, slot: int) -> tuple[int, ...]:
        """The GPU ids of ``slot`` as its description says (one-node pools), ascending."""
        if self.one_run[slot]:
            first = int(self.first[slot])
            return tuple(range(first, first + int(self.scale[slot])))
        return tuple(self.ids[slot, :self.num_ids[slot]].tolist())

    def _keep_ids(self, slot: int, ids: IntArray) -> None:
        """``ids`` become the GPU ids of ``slot`` (in ``ids_of`` and in the table)."""
        self.ids_of[slot] = ids
        if len(ids) > self.ids.shape[1]:
            self.ids = np.pad(self.ids, ((0, 0), (0, len(ids) - self.ids.shape[1])))
        self.ids[slot, :len(ids)] = ids
        self.num_ids[slot] = len(ids)

    def _drop_ids(self, slot: int) -> None:
        """``slot`` keeps no GPU ids (one run, or none held)."""
        if self.ids_of.pop(slot, None) is not None:
            self.num_ids[slot] = 0

    def layout(self, groups: Sequence[list[int] | IntArray]) -> list[SlotLayout]:
        """Masks for every type's gangs (types without gangs left out), and the positions of
        the gangs whose mask changed (they move, or start); becomes the previous round.
        ``groups[k]``: the slots placed on type k, in plan order (a list or an array; the
        layout's slots are then the same object)."""
        out: list[SlotLayout] = []
        for k, slots in enumerate(groups):
            pool = self.pools[k]
            if not len(slots):
                self.last_slots[k] = np.zeros(0, dtype=np.int64)
                pool.clear()
                continue
            index = np.asarray(slots, dtype=np.int64)
            here = self.last_type[index] == k
            before = self.last_slots[k]
            mark = self._mark  # all False between calls
            if len(before):  # kept: placed here last round too; left: placed then, not now
                mark[before] = True
                kept = mark[index]
                mark[before] = False
                mark[index] = True
                left = before[~mark[before]]
                mark[index] = False
            else:
                kept = np.zeros(len(index), dtype=bool)
                left = before
            masks, moved = pool.place(slots, index, here, kept, left)
            self.last_slots[k] = index
            out.append((self.types[k], k, slots, masks, moved, index))
        # the new GPUs' descriptions, once every type is placed: a gang that moves from one
        # type to another leaves the old one, whose pool reads what it held there
        for slots_new, first, one_run in self._new_runs:
            self.first[slots_new] = first
            self.one_run[slots_new] = one_run
        self._new_runs = []
        for slot, mask in self._new_masks:
            self.note(slot, mask)
        self._new_masks = []
        for slot, ids in self._new_ids.items():
            self._keep_ids(slot, ids)
        self._new_ids = {}
        return out


class _BitPlacement:
    """One type's placement with bit masks: the walk over the older and contested gangs."""

    def __init__(self, owner: Placement, placer: PoolPlacer) -> None:
        self.owner = owner
        self.placer = placer
        self.union = 0  # GPUs of the gangs placed on this type in the previous round

    def clear(self) -> None:
        self.union = 0

    def place(self, slots: list[int] | IntArray, index: IntArray, here: BoolArray,
              kept: BoolArray, left: IntArray) -> tuple[list[int], list[int]]:
        if not isinstance(slots, list):
            slots = slots.tolist()  # the walk below reads them one by one
        owner = self.owner
        placer = self.placer
        mask = owner.mask
        num_kept = int(kept.sum())
        union = 0  # of the gangs that ran on k in the previous round
        if num_kept:
            if len(left) < num_kept:
                union = reduce(xor, mask[left].tolist(), self.union)
            else:
                union = reduce(or_, mask[index[kept]].tolist(), 0)
        all_free = placer.all_free
        scale = owner.scale_list
        older = np.flatnonzero(here & ~kept).tolist()  # held GPUs here longer ago
        sticky = kept
        if older:
            sticky = kept.copy()
            reach = reduce(or_, [mask[slots[j]] for j in older], 0)
            contested: list[int] = []
            if reach & union:
                held = index[kept]
                contested = [i for i, m in zip(np.flatnonzero(kept).tolist(),
                                               mask[held].tolist(), strict=True)
                             if m & reach]
            free = all_free
            gained = lost = 0  # masks of older gangs that keep theirs / kept gangs that lose
            for j in sorted(older + contested) if contested else older:
                prev = mask[slots[j]]
                if (prev & free) == prev and prev.bit_count() == scale[slots[j]]:
                    sticky[j] = True
                    free ^= prev
                    if not kept[j]:
                        gained |= prev
                elif kept[j]:  # a kept gang that lost a GPU to an older gang
                    sticky[j] = False
                    lost |= prev
            union = (union ^ lost) | gained
        masks: list[int] = mask[index].tolist()
        rest = np.flatnonzero(~sticky).tolist()  # start, or move: none gets its old mask
        free = all_free ^ union
        if rest:
            free = placer.place_rest({i: scale[slots[i]] for i in rest}, masks, rest, free)
        rest.sort()
        self.union = all_free ^ free
        return masks, rest


def _kernel() -> Any:
    """The compiled placement (:mod:`schedlab.simulator.placement_kernel`), or None when
    numba cannot load it (then the numpy operations place every pool)."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = load_compiled("schedlab.simulator.placement_kernel",
                                "the compiled placement", "using numpy") or False
    return _KERNEL or None


_KERNEL: Any = None


class _RunPlacement:
    """One one-node type's placement with coverage counts and a free-GPU array."""

    def __init__(self, owner: Placement, placer: PoolPlacer) -> None:
        self.owner = owner
        self.placer = placer
        self.count = placer.count
        self._bytes = (placer.count + 7) // 8
        #: GPUs no gang of the previous round holds here (kept up to date change by change)
        self.free = np.ones(placer.count, dtype=bool)
        self._scratch = np.zeros(placer.count, dtype=np.int64)  # the compiled step's, zeros

    def clear(self) -> None:
        self.free[:] = True

    def _set(self, slots: IntArray, value: bool) -> None:
        """Mark the GPUs of gangs ``slots`` (their last GPUs) free (True) or held (False):
        gang by gang when they are few, else by coverage counts."""
        if not len(slots):
            return
        free = self.free
        if len(slots) > _FEW:
            free[self._cover(slots) > 0] = value
            return
        owner = self.owner
        for slot, first, run in zip(slots.tolist(), owner.first[slots].tolist(),
                                    owner.one_run[slots].tolist(), strict=True):
            if run:
                free[first:first + int(owner.scale[slot])] = value
            else:
                free[owner.ids_of.get(slot, _NONE)] = value

    def _scattered(self, slots: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """The GPU ids of gangs that are not one run, concatenated; where each gang's ids
        start, and how many it has."""
        ids_of = self.owner.ids_of
        parts = [ids_of.get(slot, _NONE) for slot in slots.tolist()]
        sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        return np.concatenate(parts), np.cumsum(sizes) - sizes, sizes

    def _cover(self, slots: IntArray) -> IntArray:
        """How many of the gangs ``slots`` (their last GPUs) hold each GPU."""
        owner = self.owner
        count = self.count
        one_run = owner.one_run[slots]
        runs = slots[one_run]
        start = owner.first[runs]
        stop = start + owner.scale[runs]
        edge = (np.bincount(start, minlength=count + 1)
                - np.bincount(stop, minlength=count + 1))
        cover = np.cumsum(edge[:count])
        if len(runs) < len(slots):  # GPUs not one run: counted one by one
            ids, _, _ = self._scattered(slots[~one_run])
            cover += np.bincount(ids, minlength=count)
        return cover

    def _any_in(self, slots: IntArray, hit: BoolArray) -> BoolArray:
        """Per gang of ``slots``: does it hold a GPU where ``hit`` is true?"""
        owner = self.owner
        sums = np.zeros(self.count + 1, dtype=np.int64)
        np.cumsum(hit, out=sums[1:])
        one_run = owner.one_run[slots]
        out = np.zeros(len(slots), dtype=bool)
        start = owner.first[slots[one_run]]
        out[one_run] = sums[start + owner.scale[slots[one_run]]] > sums[start]
        if not one_run.all():
            ids, offsets, sizes = self._scattered(slots[~one_run])
            some = sizes > 0  # a gang that holds no GPU hits nothing
            if some.any():
                hits = np.add.reduceat(hit[ids].astype(np.int64), offsets[some])
                out[np.flatnonzero(~one_run)[some]] = hits > 0
        return out

    def place(self, slots: list[int] | IntArray, index: IntArray, here: BoolArray,
              kept: BoolArray, left: IntArray) -> tuple[Masks, list[int]]:
        kernel = _kernel() if COMPILED_PLACEMENT else None
        if kernel is not None:
            return self._place_compiled(kernel, index, here, kept, left)
        owner = self.owner
        mask = owner.mask
        scale = owner.scale
        self._set(left, True)  # the kept gangs hold what they held; those that left free theirs
        older = np.flatnonzero(here & ~kept)  # held GPUs here longer ago
        sticky = kept
        if len(older):
            sticky = kept.copy()
            older_cover = self._cover(index[older])
            kept_at = np.flatnonzero(kept)
            contested = kept_at[self._any_in(index[kept_at], older_cover > 0)]
            walk = np.union1d(older, contested)  # plan order
            cover = older_cover + self._cover(index[contested]) if len(contested) \
                else older_cover
            shared = self._any_in(index[walk], cover > 1)
            alone = walk[~shared]
            # alone: its GPUs are free at its turn whatever the others do; sticky when it
            # holds as many GPUs as its gang (a run of its size does by construction)
            whole = owner.one_run[index[alone]]
            split = np.flatnonzero(~whole)
            if len(split):
                held_by = index[alone[split]]
                whole[split] = [m.bit_count() == size for m, size in zip(
                    mask[held_by].tolist(), scale[held_by].tolist(), strict=True)]
            sticky[alone] = whole
            crowded = walk[shared]
            if len(crowded):  # the sticky rule in plan order, with bit masks, over these only
                free = (1 << self.count) - 1
                crowded_slots = index[crowded]
                for j, prev, size in zip(crowded.tolist(), mask[crowded_slots].tolist(),
                                         scale[crowded_slots].tolist(), strict=True):
                    if (prev & free) == prev and prev.bit_count() == size:
                        sticky[j] = True
                        free ^= prev
                    else:
                        sticky[j] = False
            # the kept gangs that lost a GPU free theirs; the older gangs that keep their GPUs
            # take them (some of those GPUs were the lost gangs')
            self._set(index[kept & ~sticky], True)
            self._set(index[older[sticky[older]]], False)
        masks: dict[int, int] = {}  # the moved gangs' only: the sticky ones keep ``mask``
        rest = np.flatnonzero(~sticky)
        if len(rest) > _FEW:
            self._place_rest(rest, index, masks, self.free)
        elif len(rest):  # a few: the rule as written, on a bit mask of the free GPUs
            self._place_few(rest, index, masks)
        return masks, rest.tolist()

    def _place_compiled(self, kernel: Any, index: IntArray, here: BoolArray, kept: BoolArray,
                        left: IntArray) -> tuple[Masks, list[int]]:
        """:meth:`place` by :func:`placement_kernel.place_pool` (the same steps in compiled
        loops); the moved gangs' descriptions made here from its starts and ids, and no
        masks (None: :data:`Masks`)."""
        owner = self.owner
        n = len(index)
        sticky = np.empty(n, dtype=bool)
        new_first = np.empty(n, dtype=np.int64)
        new_run = np.empty(n, dtype=bool)
        new_ids = np.empty((n, int(owner.scale[index].max())), dtype=np.int64)
        placed_here = kernel.place_pool(
            index, here, kept, np.asarray(left, dtype=np.int64), owner.first, owner.scale,
            owner.one_run, owner.ids, owner.num_ids, self.free, self._scratch, _FEW, sticky,
            new_first, new_run, new_ids)
        rest = np.flatnonzero(~sticky)
        order = rest.tolist()
        if placed_here < 0:  # a few: the rule as written (its masks become descriptions)
            if len(rest):
                self._place_few(rest, index, {})
            return None, order
        slots = index[rest]
        first = new_first[rest]
        run = new_run[rest]
        sizes = owner.scale[slots]
        for j in np.flatnonzero(~run).tolist():  # not one run: the ids
            owner._new_ids[int(slots[j])] = new_ids[order[j], :sizes[j]].copy()
        owner._new_runs.append((slots, first, run))
        return None, order

    def _place_few(self, rest: IntArray, index: IntArray, masks: dict[int, int]) -> None:
        """:meth:`_place_rest` by :meth:`PoolPlacer.place_rest` (the same rule) for a few
        gangs: the free array as a bit mask and back."""
        owner = self.owner
        packed = np.packbits(self.free, bitorder="little").tobytes()
        free = int.from_bytes(packed, "little")
        order = rest.tolist()
        left = self.placer.place_rest({i: owner.scale_list[slots_i] for i, slots_i
                                       in zip(order, index[rest].tolist(), strict=True)},
                                      masks, order, free)
        raw = np.frombuffer(left.to_bytes(self._bytes, "little"), dtype=np.uint8)
        self.free = np.unpackbits(raw, bitorder="little")[:self.count].astype(bool)
        owner._new_masks.extend((int(index[i]), masks[i]) for i in order)

    def _place_rest(self, rest: IntArray, index: IntArray, masks: dict[int, int],
                    free: BoolArray) -> None:
        """Gangs ``rest`` (plan positions) by size, largest first, ties in plan order: the
        lowest run of their size, else the lowest free GPUs (module docstring); writes
        ``masks`` and the gangs' descriptions (first GPU, one run, ids), and takes the GPUs
        from ``free``."""
        owner = self.owner
        size_of = owner.scale[index[rest]]
        order = np.argsort(-size_of, kind="stable")
        rest = rest[order]
        size_of = size_of[order]
        cuts = np.flatnonzero(np.diff(size_of)) + 1
        count = self.count
        for group, sizes in zip(np.split(rest, cuts), np.split(size_of, cuts), strict=True):
            size = int(sizes[0])
            need = len(group)
            edge = np.diff(free.view(np.int8), prepend=0, append=0)
            starts = np.flatnonzero(edge == 1)
            per = (np.flatnonzero(edge == -1) - starts) // size
            runs = int(per.sum())
            take = min(need, runs)
            gangs = group.tolist()
            if take:
                stretch = np.repeat(np.arange(len(starts)), per)[:take]
                before_stretch = np.cumsum(per) - per
                first = starts[stretch] + (np.arange(take) - before_stretch[stretch]) * size
                block = (1 << size) - 1
                for i, start in zip(gangs[:take], first.tolist(), strict=True):
                    masks[i] = block << start
                taken = (np.bincount(first, minlength=count + 1)
                         - np.bincount(first + size, minlength=count + 1))
                free &= np.cumsum(taken[:count]) == 0
                owner._new_runs.append((index[group[:take]], first, True))
            if need > take:  # no run of this size left: the lowest free GPUs, in order
                ids = np.flatnonzero(free)[:(need - take) * size]
                free[ids] = False
                rows = ids.reshape(-1, size)
                slots_scattered = index[group[take:]]
                # (a run of 1 always exists: these gangs have 2 GPUs or more)
                owner._new_runs.append((slots_scattered, rows[:, 0], False))
                new_ids = owner._new_ids
                for i, slot, row in zip(gangs[take:], slots_scattered.tolist(), rows,
                                        strict=True):
                    masks[i] = ids_mask(row.tolist())
                    new_ids[slot] = row
