"""Compiled (numba) loops of Gavel's round rule: the greedy walk over one sorted piece of
candidates, and the candidates' static order when the shares' ranks are known.

:meth:`schedlab.formulations.gavel.rounds.PriorityCandidates.pick` walks the (unit, type)
candidates in priority order and places unit u on type k when u is not placed yet and k still
has ``gang[u]`` free GPUs; the walk stops when fewer GPUs are left in all than the smallest
gang, or every unit is placed.  :func:`walk_piece` is that loop over one sorted piece, with
the walk's state (GPUs left per type, placed units, GPUs left in all, units unplaced) carried
from piece to piece by the caller -- the same choices as the Python loop, one candidate at a
time, without the interpreter.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True, nogil=True)
def walk_piece(
    piece: npt.NDArray[np.int64],
    unit: npt.NDArray[np.int64],
    acc: npt.NDArray[np.int64],
    gang: npt.NDArray[np.int64],
    left: npt.NDArray[np.int64],
    placed: npt.NDArray[np.uint8],
    state: npt.NDArray[np.int64],
    chosen: npt.NDArray[np.int64],
) -> bool:
    """Walk ``piece`` (candidate indices, in order); ``state`` = [GPUs left in all, units not
    placed, smallest gang, candidates chosen so far], the chosen appended to ``chosen``.
    Returns True when the walk is over (no GPU left for the smallest gang, or every unit
    placed)."""
    total_left = state[0]
    unplaced = state[1]
    smallest = state[2]
    count = state[3]
    over = False
    for i in range(len(piece)):
        c = piece[i]
        u = unit[c]
        if placed[u]:
            continue
        g = gang[u]
        k = acc[c]
        if g > left[k]:
            continue
        placed[u] = 1
        unplaced -= 1
        left[k] -= g
        total_left -= g
        chosen[count] = c
        count += 1
        if total_left < smallest or unplaced == 0:
            over = True
            break
    state[0] = total_left
    state[1] = unplaced
    state[3] = count
    return over


@njit(cache=True, nogil=True)
def static_candidates(
    rows: npt.NDArray[np.int64],
    runnable: npt.NDArray[np.bool_],
    class_share: npt.NDArray[np.float64],
    row_class: npt.NDArray[np.int64],
    min_share: float,
    class_rank: npt.NDArray[np.int64],
    arrival: npt.NDArray[np.float64],
    unit: npt.NDArray[np.int64],
    acc: npt.NDArray[np.int64],
    share: npt.NDArray[np.float64],
    static: npt.NDArray[np.int64],
    flat: npt.NDArray[np.int64],
    since: npt.NDArray[np.float64],
) -> int:
    """The candidates of the round rule in their static order, for shares with known ranks.

    Candidate i, in ascending (unit, type) order, is (u, k) with ``runnable[rows[u], k]``; its
    share X = ``class_share[row_class[u], k]`` (the class LP's share of u's class) when above
    ``min_share``, else 0.  The static order is
    the stable sort by -X: the candidates with X > 0 by their rank
    ``class_rank[row_class[u], k]`` (0 for the largest share; equal shares, equal ranks), ties
    in candidate order, then those with X = 0 in candidate order -- a counting sort.  Writes,
    per position of that order, the unit, type, X, the candidate index (``static``), the flat
    index ``rows[u] * types + k`` and ``arrival[rows[u]]``; returns the number of candidates."""
    num_types = runnable.shape[1]
    num_classes = class_rank.shape[0]
    num_ranks = 0
    for c in range(num_classes):
        for k in range(num_types):
            if class_rank[c, k] + 1 > num_ranks:
                num_ranks = class_rank[c, k] + 1
    # per class and type: the bucket of its candidates (the rank; num_ranks: X = 0)
    bucket_of = np.empty((num_classes, num_types), dtype=np.int64)
    for c in range(num_classes):
        for k in range(num_types):
            bucket_of[c, k] = class_rank[c, k] if class_share[c, k] > min_share else num_ranks
    n = len(rows)
    bucket = np.empty(n * num_types, dtype=np.int64)  # per (unit, type); -1: not runnable
    start = np.zeros(num_ranks + 1, dtype=np.int64)
    total = 0
    for u in range(n):
        r = rows[u]
        c = row_class[u]
        for k in range(num_types):
            if runnable[r, k]:
                b = bucket_of[c, k]
                bucket[u * num_types + k] = b
                start[b] += 1
                total += 1
            else:
                bucket[u * num_types + k] = -1
    at = 0
    for b in range(num_ranks + 1):  # counts to first positions
        count = start[b]
        start[b] = at
        at += count
    i = 0
    for u in range(n):
        r = rows[u]
        c = row_class[u]
        t = arrival[r]
        for k in range(num_types):
            b = bucket[u * num_types + k]
            if b >= 0:
                p = start[b]
                start[b] = p + 1
                unit[p] = u
                acc[p] = k
                share[p] = class_share[c, k] if b < num_ranks else 0.0
                static[p] = i
                flat[p] = r * num_types + k
                since[p] = t
                i += 1
    return total
