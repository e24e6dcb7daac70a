"""Compiled (numba) check and grouping of a :class:`~schedlab.policies.state.SlotPlan` for
the array engine: :func:`group_plan` is ``array_run._plan_groups``'s numpy checks in one pass.

A plan (``slots[i]`` on type ``kinds[i]``) is valid when every slot is an admitted job's
(0 <= slot < ``admitted``), not finished (``gone``), named once, on a type index in range where
the job may run alone (``fit[slot, k]``), and no type's gangs, summed (``scale``), exceed its
``capacity``.  Valid plans come back grouped by type, each group in plan order, in ``out``
(``first[k]`` .. ``first[k + 1]`` is type k's group).  The checks are the numpy path's, in one
loop instead of a dozen array passes; ``tests/test_progress_kernel.py`` compares the two.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True, nogil=True)
def group_plan(
    slots: npt.NDArray[np.int64],
    kinds: npt.NDArray[np.int64],
    admitted: int,
    gone: npt.NDArray[np.bool_],
    fit: npt.NDArray[np.bool_],
    scale: npt.NDArray[np.int64],
    capacity: npt.NDArray[np.int64],
    seen: npt.NDArray[np.int64],
    out: npt.NDArray[np.int64],
    first: npt.NDArray[np.int64],
) -> bool:
    """Check the plan and group its slots by type into ``out`` (``first``: the groups'
    starts, one more entry than types); False (``out`` undefined) when a check fails.
    ``seen`` is scratch, one entry per slot."""
    n = len(slots)
    num_types = len(capacity)
    for i in range(n):
        s = slots[i]
        k = kinds[i]
        if s < 0 or s >= admitted or k < 0 or k >= num_types:
            return False
        if gone[s] or not fit[s, k]:
            return False
        seen[s] = i  # a slot named twice keeps its last position only
    used = np.zeros(num_types, dtype=np.int64)
    for i in range(n):
        s = slots[i]
        if seen[s] != i:
            return False
        used[kinds[i]] += scale[s]
    first[0] = 0
    for k in range(num_types):
        if used[k] > capacity[k]:
            return False
        used[k] = 0
    for i in range(n):
        used[kinds[i]] += 1
    for k in range(num_types):
        first[k + 1] = first[k] + used[k]
        used[k] = first[k]
    for i in range(n):
        k = kinds[i]
        out[used[k]] = slots[i]
        used[k] += 1
    return True
