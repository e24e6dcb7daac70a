"""Compiled (numba) placement of one one-node pool for the array engine: the rule of
:class:`schedlab.simulator.array_placement._RunPlacement` in loops over GPUs and gangs.

A gang's last GPUs are described per slot as in :class:`~schedlab.simulator.array_placement.
Placement`: one run (``one_run[s]``: GPUs ``first[s]`` .. ``first[s] + scale[s] - 1``), else
the ``num_ids[s]`` ids in ``ids[s]`` (none for a gang that holds no GPU).  ``free`` (one entry
per GPU of the pool) is the pool's free-GPU array, kept from round to round.  For one round's
gangs (``index``, slots in plan order; ``here``: it held GPUs of this pool the last time it
ran; ``kept``: it ran here in the previous round; ``left``: the slots that ran here in the
previous round and not now):

1. the GPUs of the gangs that left are freed;
2. a kept gang keeps its GPUs (is *sticky*) unless an older gang (``here`` and not ``kept``)
   covers one of them; the older gangs and those *contested* kept gangs are decided alone when
   no other of them covers one of their GPUs (sticky when they hold as many GPUs as their
   gang), else in plan order: sticky when every GPU is still untaken by an earlier sticky one
   and the gang holds as many GPUs as its size; the kept gangs that lost free their GPUs, the
   sticky older gangs take theirs;
3. the other gangs (*rest*) by size, largest first, ties in plan order: within each maximal
   stretch of L free GPUs, sizes s get the starts a, a + s, ... (floor(L / s) of them), in
   stretch order; the gangs of a size that find no run take the lowest free GPUs, s at a time.

Step 3 runs here only for more than ``few`` rest gangs (the caller places a few with the rule
as written).  The same operations as the numpy path decide the same GPUs; the tests compare
both with :meth:`schedlab.placement.PoolPlacer.place_moved` round after round.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@njit(cache=True, nogil=True, inline="always")
def _mark(slot: int, first: IntArray, scale: IntArray, one_run: BoolArray, ids: IntArray,
          num_ids: IntArray, free: BoolArray, value: bool) -> None:
    """Set ``free`` to ``value`` on every GPU the gang of ``slot`` last held."""
    if one_run[slot]:
        start = first[slot]
        for g in range(start, start + scale[slot]):
            free[g] = value
    else:
        for i in range(num_ids[slot]):
            free[ids[slot, i]] = value


@njit(cache=True, nogil=True, inline="always")
def _add_cover(slot: int, first: IntArray, scale: IntArray, one_run: BoolArray,
               ids: IntArray, num_ids: IntArray, cover: IntArray, by: int) -> None:
    """Add ``by`` to the coverage count of every GPU the gang of ``slot`` last held."""
    if one_run[slot]:
        start = first[slot]
        for g in range(start, start + scale[slot]):
            cover[g] += by
    else:
        for i in range(num_ids[slot]):
            cover[ids[slot, i]] += by


@njit(cache=True, nogil=True, inline="always")
def _hits(slot: int, first: IntArray, scale: IntArray, one_run: BoolArray, ids: IntArray,
          num_ids: IntArray, cover: IntArray, above: int) -> bool:
    """Does the gang of ``slot`` hold a GPU whose coverage count exceeds ``above``?"""
    if one_run[slot]:
        start = first[slot]
        for g in range(start, start + scale[slot]):
            if cover[g] > above:
                return True
    else:
        for i in range(num_ids[slot]):
            if cover[ids[slot, i]] > above:
                return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _whole(slot: int, scale: IntArray, one_run: BoolArray, num_ids: IntArray) -> bool:
    """Does the gang of ``slot`` hold as many GPUs as its size?  (A run does by
    construction; its ids are distinct.)"""
    return bool(one_run[slot]) or num_ids[slot] == scale[slot]


@njit(cache=True, nogil=True)
def place_pool(
    index: IntArray,
    here: BoolArray,
    kept: BoolArray,
    left: IntArray,
    first: IntArray,
    scale: IntArray,
    one_run: BoolArray,
    ids: IntArray,
    num_ids: IntArray,
    free: BoolArray,
    cover: IntArray,
    few: int,
    sticky: BoolArray,
    new_first: IntArray,
    new_run: BoolArray,
    new_ids: IntArray,
) -> int:
    """Steps 1-3 of the module docstring for one round of one pool.  Writes ``sticky`` (per
    gang of ``index``) and, for each rest gang i when step 3 ran here, its new GPUs:
    ``new_first[i]``, ``new_run[i]`` and, when not one run, its ids in ``new_ids[i]``;
    updates ``free``.  ``cover`` is scratch (one zero per GPU; left zero).  Returns the
    number of rest gangs, negated when step 3 is left to the caller (at most ``few``)."""
    n = len(index)
    for s in left:
        _mark(s, first, scale, one_run, ids, num_ids, free, True)
    num_older = 0
    for i in range(n):
        sticky[i] = kept[i]
        if here[i] and not kept[i]:
            num_older += 1
    if num_older:
        for i in range(n):
            if here[i] and not kept[i]:
                _add_cover(index[i], first, scale, one_run, ids, num_ids, cover, 1)
        # walk: the older gangs and the kept gangs an older one covers (plan order)
        walk = np.empty(n, dtype=np.int64)
        num_walk = 0
        for i in range(n):
            if here[i] and not kept[i]:
                walk[num_walk] = i
                num_walk += 1
            elif kept[i] and _hits(index[i], first, scale, one_run, ids, num_ids, cover, 0):
                walk[num_walk] = i
                num_walk += 1
        for w in range(num_walk):
            i = walk[w]
            if kept[i]:  # contested: its GPUs count too
                _add_cover(index[i], first, scale, one_run, ids, num_ids, cover, 1)
        shared = np.zeros(num_walk, dtype=np.bool_)
        for w in range(num_walk):
            shared[w] = _hits(index[walk[w]], first, scale, one_run, ids, num_ids, cover, 1)
        for w in range(num_walk):  # the scratch back to zero
            i = walk[w]
            slot = index[i]
            if one_run[slot]:
                start = first[slot]
                for g in range(start, start + scale[slot]):
                    cover[g] = 0
            else:
                for j in range(num_ids[slot]):
                    cover[ids[slot, j]] = 0
        # alone: sticky when whole; crowded: in plan order, GPUs not taken by an earlier one
        # (``cover`` marks the taken GPUs, then goes back to zero)
        for w in range(num_walk):
            i = walk[w]
            slot = index[i]
            if not shared[w]:
                sticky[i] = _whole(slot, scale, one_run, num_ids)
            elif _whole(slot, scale, one_run, num_ids) and not _hits(
                    slot, first, scale, one_run, ids, num_ids, cover, 0):
                sticky[i] = True
                _add_cover(slot, first, scale, one_run, ids, num_ids, cover, 1)
            else:
                sticky[i] = False
        for w in range(num_walk):
            i = walk[w]
            if shared[w] and sticky[i]:
                _add_cover(index[i], first, scale, one_run, ids, num_ids, cover, -1)
        # the kept gangs that lost a GPU free theirs; the older ones that keep theirs take them
        for i in range(n):
            if kept[i] and not sticky[i]:
                _mark(index[i], first, scale, one_run, ids, num_ids, free, True)
        for i in range(n):
            if here[i] and not kept[i] and sticky[i]:
                _mark(index[i], first, scale, one_run, ids, num_ids, free, False)
    num_rest = 0
    for i in range(n):
        if not sticky[i]:
            num_rest += 1
    if num_rest <= few:
        return -num_rest
    _place_rest(index, scale, sticky, num_rest, free, new_first, new_run, new_ids)
    return num_rest


@njit(cache=True, nogil=True)
def _place_rest(index: IntArray, scale: IntArray, sticky: BoolArray, num_rest: int,
                free: BoolArray, new_first: IntArray, new_run: BoolArray,
                new_ids: IntArray) -> None:
    """Step 3: the rest gangs by size, largest first (ties in plan order), on ``free``."""
    rest = np.empty(num_rest, dtype=np.int64)
    sizes = np.empty(num_rest, dtype=np.int64)
    r = 0
    for i in range(len(index)):
        if not sticky[i]:
            rest[r] = i
            sizes[r] = scale[index[i]]
            r += 1
    order = np.argsort(-sizes, kind="mergesort")  # stable: ties in plan order
    count = len(free)
    at = 0
    while at < num_rest:
        size = sizes[order[at]]
        stop = at
        while stop < num_rest and sizes[order[stop]] == size:
            stop += 1
        # the runs of this size, stretch by stretch (starts found before any is taken)
        g = 0
        while g < count and at < stop:
            if not free[g]:
                g += 1
                continue
            end = g
            while end < count and free[end]:
                end += 1
            start = g
            while start + size <= end and at < stop:
                i = rest[order[at]]
                new_first[i] = start
                new_run[i] = True
                for x in range(start, start + size):
                    free[x] = False
                start += size
                at += 1
            g = end
        # no run of this size left: the lowest free GPUs, ``size`` at a time, in order
        g = 0
        while at < stop:
            i = rest[order[at]]
            taken = 0
            while taken < size:
                while g < count and not free[g]:
                    g += 1
                if g == count:
                    raise ValueError("fewer free GPUs than the gangs to place need")
                free[g] = False
                new_ids[i, taken] = g
                taken += 1
                g += 1
            new_first[i] = new_ids[i, 0]
            new_run[i] = False
            at += 1
