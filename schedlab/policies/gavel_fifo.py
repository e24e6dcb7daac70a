r"""Gavel's one-shot FIFO allocation (``gavel.fifo``) on the adapter's arrays.

:class:`~schedlab.formulations.gavel.models.Fifo` (the reference) walks the jobs in arrival
order (ties by position) and gives each a whole gang, X_jk = 1, on the first type k of its
preference with n_k - (GPUs taken so far) >= s_j; the preference is the allowed types by
decreasing T_jk (a stable sort: ties in cluster order) when heterogeneity-aware, the allowed
types in cluster order otherwise.  :func:`fifo_allocation` is the same walk on plain arrays,
without the :class:`~schedlab.instance.Instance` and
:class:`~schedlab.solution.Solution` the reference builds around it (which took about 90% of
its time in the simulator), and it stops once no GPU pool can hold the smallest gang left
(no later job can be placed then, so X is unchanged).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def fifo_allocation(arrival: FloatArray, throughput: FloatArray, allowed: BoolArray,
                    scale: FloatArray, gpus: FloatArray, *, heterogeneity_aware: bool
                    ) -> FloatArray:
    """X (n, K), one 1 at most per row: jobs in order of (arrival, position), each on the
    first type of its preference (module docstring) with at least s_j free GPUs.

    Args:
        arrival: arrival time per job (n,).
        throughput: T_jk (n, K), read only where ``allowed``.
        allowed: (n, K), the types the job can run on.
        scale: s_j, GPUs per gang (n,).
        gpus: n_k per type (K,).
        heterogeneity_aware: preference by decreasing T_jk (else cluster order).
    """
    num_jobs, num_types = allowed.shape
    x = np.zeros((num_jobs, num_types))
    if num_jobs == 0:
        return x
    order = np.lexsort((np.arange(num_jobs), arrival))
    if heterogeneity_aware:  # per row: allowed types by -T, stable; disallowed last
        key = np.where(allowed, -throughput, np.inf)
        preference = np.argsort(key, axis=1, kind="stable")
    else:
        preference = np.argsort(~allowed, axis=1, kind="stable")
    counts = allowed.sum(axis=1).tolist()
    pref_rows = preference.tolist()
    scales = scale.tolist()
    free = [float(n) for n in gpus]
    smallest_left = np.minimum.accumulate(scale[order][::-1])[::-1].tolist()
    for position, j in enumerate(order.tolist()):
        if max(free) < smallest_left[position]:
            break
        need = scales[j]
        for k in pref_rows[j][:counts[j]]:
            if free[k] >= need:
                x[j, k] = 1.0
                free[k] -= need
                break
    return x
