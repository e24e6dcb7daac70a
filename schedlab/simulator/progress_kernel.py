r"""Compiled (numba) progress step of the array engine: one round, every placed gang at once.

:func:`advance` is the per-type block of :func:`schedlab.simulator.array_run.run_arrays` run
over the gangs of every type in one loop: for gang i (slot s on type k, throughput T = thr[s,
k] steps/s, overhead o_i s, round length L s)

.. math::

    \text{steps} = T (L - o_i), \quad R = \text{total}_s - \text{done}_s, \quad
    \text{fin}_i = R - \text{steps} \le \text{ftol} \cdot \text{total}_s, \quad
    \text{held}_i = \begin{cases} \min(o_i + R / T,\; L) & \text{fin}_i \\ L & \text{else}
    \end{cases}

then ``done[s]`` (``total[s]`` when finished, else ``done[s] + steps``), ``time_on[s, k]``,
``executed[s]`` and ``attained[s]`` (``+= held * scale[s]``) grow, ``rounds_run[s]`` counts the
round, and ``last_round[s]`` / ``last_type[s]`` record it.  ``busy[k]`` returns the GPU-seconds
of type k summed in gang order from 0 (what ``np.cumsum(gpu)[-1]`` gives), ``fresh[i]`` whether
gang i starts for the first time (``started`` is then set).

Every value is the numpy path's: the same IEEE operations on the same operands in the same
order per element (numba contracts no multiply-add into an FMA without ``fastmath``), a slot
appears once per round, and the per-type sums keep the gang order.  ``tests/
test_progress_kernel.py`` compares the two bit for bit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True, nogil=True)
def advance(
    index: npt.NDArray[np.int64],
    kind: npt.NDArray[np.int64],
    overhead: npt.NDArray[np.float64],
    length: float,
    round_index: int,
    ftol: float,
    thr: npt.NDArray[np.float64],
    total: npt.NDArray[np.float64],
    done: npt.NDArray[np.float64],
    time_on: npt.NDArray[np.float64],
    executed: npt.NDArray[np.float64],
    attained: npt.NDArray[np.float64],
    rounds_run: npt.NDArray[np.int64],
    last_round: npt.NDArray[np.int64],
    last_type: npt.NDArray[np.int64],
    scale: npt.NDArray[np.int64],
    started: npt.NDArray[np.bool_],
    held: npt.NDArray[np.float64],
    fin: npt.NDArray[np.bool_],
    fresh: npt.NDArray[np.bool_],
    busy: npt.NDArray[np.float64],
) -> int:
    """One round's progress of the gangs (``index[i]`` on type ``kind[i]``); fills ``held``,
    ``fin``, ``fresh`` (per gang) and ``busy`` (per type, zeroed here); returns the number of
    gangs that finished."""
    busy[:] = 0.0
    finished = 0
    for i in range(len(index)):
        s = index[i]
        k = kind[i]
        o = overhead[i]
        t = thr[s, k]
        steps = t * (length - o)
        whole = total[s]
        left = whole - done[s]
        if left - steps <= ftol * whole:
            h = o + left / t
            if h > length:
                h = length
            done[s] = whole
            fin[i] = True
            finished += 1
        else:
            h = length
            done[s] = done[s] + steps
            fin[i] = False
        held[i] = h
        time_on[s, k] += h
        executed[s] += h
        gpu = h * scale[s]
        attained[s] += gpu
        rounds_run[s] += 1
        last_round[s] = round_index
        last_type[s] = k
        busy[k] += gpu
        fresh[i] = not started[s]
        started[s] = True
    return finished


@njit(cache=True, nogil=True)
def advance_quiet(
    index: npt.NDArray[np.int64],
    kind: npt.NDArray[np.int64],
    length: float,
    now: float,
    round_index: int,
    stop_round: int,
    next_arrival: float,
    ftol: float,
    thr: npt.NDArray[np.float64],
    total: npt.NDArray[np.float64],
    done: npt.NDArray[np.float64],
    time_on: npt.NDArray[np.float64],
    executed: npt.NDArray[np.float64],
    attained: npt.NDArray[np.float64],
    rounds_run: npt.NDArray[np.int64],
    last_round: npt.NDArray[np.int64],
    scale: npt.NDArray[np.int64],
    busy: npt.NDArray[np.float64],
    round_busy: npt.NDArray[np.float64],
) -> tuple[int, float]:
    """Quiet rounds of a fixed-point plan: the same gangs on the same GPUs (no overhead),
    round after round, from round ``round_index`` starting at ``now`` (s), for as long as no
    job arrives (a round starts before ``next_arrival``), ``stop_round`` is not reached and
    no gang would finish in the round (those rounds are left to the caller, undone).  Each
    round is :func:`advance` with o = 0 and held = L: ``done += T L``, ``time_on``,
    ``executed += L``, ``attained += L scale``, ``rounds_run += 1``, ``last_round``; the
    round's GPU-seconds per type, summed from 0 in gang order, are added to ``busy[k]``, and
    the next round starts at ``now + L``.  Returns (rounds run, the next round's start)."""
    n = len(index)
    rounds = 0
    while round_index < stop_round and not next_arrival <= now:
        for i in range(n):
            s = index[i]
            whole = total[s]
            if (whole - done[s]) - thr[s, kind[i]] * length <= ftol * whole:
                return rounds, now
        round_busy[:] = 0.0
        for i in range(n):
            s = index[i]
            k = kind[i]
            done[s] = done[s] + thr[s, k] * length
            time_on[s, k] += length
            executed[s] += length
            gpu = length * scale[s]
            attained[s] += gpu
            rounds_run[s] += 1
            last_round[s] = round_index
            round_busy[k] += gpu
        for k in range(len(busy)):
            busy[k] += round_busy[k]
        now = now + length
        round_index += 1
        rounds += 1
    return rounds, now
