"""Compiled (numba) greedy walk of Gavel's round rule over one sorted piece of candidates.

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
