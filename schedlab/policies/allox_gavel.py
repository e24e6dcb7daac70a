r"""AlloX as an allocation for Gavel's round mechanism, as Gavel's and Shockwave's code run it.

Shockwave's baseline "allox" (``scheduler/policies/allox.py`` of uw-mad-dash/shockwave at
8a44f4a, ``AlloXPolicy.get_allocation``, Gavel's policy unchanged) is not a scheduler of its
own: it returns a time-fraction allocation X[j, k] that Gavel's round mechanism
(:class:`~schedlab.formulations.gavel.rounds.GavelRoundState`) realises by priorities, and it
is recomputed only at the mechanism's allocation resets.  At a reset (allox.py:27-179):

1. *Kept*: a job whose previous allocation sums to exactly 1 over the types (a 1-GPU job
   that was given a GPU) keeps it and its GPU -- AlloX is non-preemptive; every other job
   (new, never matched, or multi-GPU: its entry is 1/s_j) is *unallocated*.
2. *Workers*: n = the GPUs of each type less one per kept job with X = 1 there, listed type
   by type.  The unallocated jobs, oldest first (largest time since arrival), are cut to the
   first max(floor(alpha m), n) of them.
3. *Matching*: cost q[i, (p, w)] = p x R_i / T[i, type(w)] + (now - arrival_i) for the
   positions p = 1..m of every worker w (T = 1e-10 where it is 0; R the remaining steps, T
   the throughput of the job's whole gang: a multi-GPU job is matched to *one* worker),
   solved by :func:`scipy.optimize.linear_sum_assignment`.
4. *Allocation*: every job starts from its previous entry (0 for new jobs); the job with the
   largest position on each worker (the one that runs first) gets X[j, type(w)] = 1 / s_j.
   So a multi-GPU job keeps its 1/s_j after it stops being first.

All active jobs are in the allocation (X = 0 included), so the greedy walk may still run a
job with X = 0 on GPUs left over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from schedlab.policies.state import JobState

#: Processing rate used where a job's throughput is 0 (allox.py: ``throughput = 1e-10``).
ZERO_THROUGHPUT = 1e-10


def allox_allocation(
    jobs: Sequence[JobState],
    types: Sequence[str],
    gpus: Mapping[str, int],
    now: float,
    previous: Mapping[str, Mapping[str, float]],
    alpha: float = 1.0,
) -> dict[str, dict[str, float]]:
    """AlloX's allocation X[j][k] of the active ``jobs`` (arrival order) at time ``now`` (s),
    given the ``previous`` allocation (module docstring, steps 1-4)."""
    unallocated: list[JobState] = []
    kept: list[JobState] = []
    for js in jobs:
        before = previous.get(js.id)
        if before is not None and sum(before.get(k, 0.0) for k in types) == 1.0:
            kept.append(js)
        else:
            unallocated.append(js)
    worker_type: list[str] = []
    for k in types:
        taken = sum(1 for js in kept if previous[js.id].get(k, 0.0) == 1.0)
        worker_type += [k] * max(gpus[k] - taken, 0)
    n = len(worker_type)
    m = len(unallocated)
    unallocated.sort(key=lambda js: -(now - js.arrival))  # oldest first (stable)
    unallocated = unallocated[: max(int(alpha * m), n)]
    m = len(unallocated)

    allocation = {js.id: dict.fromkeys(types, 0.0) for js in jobs}
    for js in jobs:
        if js.id in previous:
            allocation[js.id] = {k: float(previous[js.id].get(k, 0.0)) for k in types}
    if m == 0 or n == 0:
        return allocation
    # q = [q_base, 2 q_base, ..., m q_base] + d: position p of worker w is column (p-1) n + w
    q_base = np.array([[js.remaining_steps / (js.throughput.get(k, 0.0) or ZERO_THROUGHPUT)
                        for k in worker_type] for js in unallocated])
    positions = np.arange(1, m + 1, dtype=float)
    q = (q_base[:, None, :] * positions[None, :, None]).reshape(m, m * n)
    q = q + np.array([now - js.arrival for js in unallocated])[:, None]
    rows, cols = linear_sum_assignment(q)
    first: dict[int, tuple[int, int]] = {}  # worker -> (position index, job row) run first
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        w, p = c % n, c // n
        if w not in first or p > first[w][0]:
            first[w] = (p, r)
    for w in range(n):
        if w in first:
            js = unallocated[first[w][1]]
            allocation[js.id][worker_type[w]] = 1.0 / js.scale_factor
    return allocation
