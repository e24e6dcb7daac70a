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
    for s in left:  # step 1 (the GPUs of each gang written out: no helper calls per gang)
        if one_run[s]:
            for g in range(first[s], first[s] + scale[s]):
                free[g] = True
        else:
            for x in range(num_ids[s]):
                free[ids[s, x]] = True
    num_older = 0
    for i in range(n):
        sticky[i] = kept[i]
        if here[i] and not kept[i]:
            num_older += 1
    if num_older:
        # the plan's gangs' last GPUs, flat: gang i's are gpus[at[i]:at[i + 1]]; ``whole``:
        # it holds as many GPUs as its size (a run does; ids are distinct)
        at = np.empty(n + 1, dtype=np.int64)
        whole = np.empty(n, dtype=np.bool_)
        at[0] = 0
        for i in range(n):
            s = index[i]
            count = scale[s] if one_run[s] else num_ids[s]
            at[i + 1] = at[i] + count
            whole[i] = one_run[s] or count == scale[s]
        gpus = np.empty(at[n], dtype=np.int64)
        for i in range(n):
            s = index[i]
            if one_run[s]:
                for x in range(scale[s]):
                    gpus[at[i] + x] = first[s] + x
            else:
                for x in range(num_ids[s]):
                    gpus[at[i] + x] = ids[s, x]
        for i in range(n):  # coverage of the older gangs
            if here[i] and not kept[i]:
                for p in range(at[i], at[i + 1]):
                    cover[gpus[p]] += 1
        # walk: the older gangs and the kept gangs an older one covers (plan order)
        walk = np.empty(n, dtype=np.int64)
        num_walk = 0
        for i in range(n):
            if here[i] and not kept[i]:
                walk[num_walk] = i
                num_walk += 1
            elif kept[i]:
                for p in range(at[i], at[i + 1]):
                    if cover[gpus[p]] > 0:
                        walk[num_walk] = i
                        num_walk += 1
                        break
        for w in range(num_walk):
            i = walk[w]
            if kept[i]:  # contested: its GPUs count too
                for p in range(at[i], at[i + 1]):
                    cover[gpus[p]] += 1
        shared = np.zeros(num_walk, dtype=np.bool_)
        for w in range(num_walk):
            i = walk[w]
            for p in range(at[i], at[i + 1]):
                if cover[gpus[p]] > 1:
                    shared[w] = True
                    break
        for w in range(num_walk):  # the scratch back to zero
            i = walk[w]
            for p in range(at[i], at[i + 1]):
                cover[gpus[p]] = 0
        # alone: sticky when whole; crowded: in plan order, GPUs not taken by an earlier one
        # (``cover`` marks the taken GPUs, then goes back to zero)
        for w in range(num_walk):
            i = walk[w]
            if not shared[w]:
                sticky[i] = whole[i]
                continue
            taken = False
            for p in range(at[i], at[i + 1]):
                if cover[gpus[p]] > 0:
                    taken = True
                    break
            sticky[i] = whole[i] and not taken
            if sticky[i]:
                for p in range(at[i], at[i + 1]):
                    cover[gpus[p]] = 1
        for w in range(num_walk):
            i = walk[w]
            if shared[w] and sticky[i]:
                for p in range(at[i], at[i + 1]):
                    cover[gpus[p]] = 0
        # the kept gangs that lost a GPU free theirs; the older ones that keep theirs take them
        for i in range(n):
            if kept[i] and not sticky[i]:
                for p in range(at[i], at[i + 1]):
                    free[gpus[p]] = True
        for i in range(n):
            if here[i] and not kept[i] and sticky[i]:
                for p in range(at[i], at[i + 1]):
                    free[gpus[p]] = False
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
