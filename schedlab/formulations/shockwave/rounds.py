r"""Turning a window plan into rounds: Shockwave's re-placement step and its idle-GPU fill.

Both act on whole gangs y[j,t] in {0, 1} (job j runs on its s_j GPUs in round t of the
window), as Shockwave's ``rank_in_schedule_jobs`` and ``construct_schedules`` do.

**Re-placement** (:func:`rerank_rounds`, only after Shockwave's relaxed re-solve): keep each
job's number of planned rounds n_j = sum_t y[j,t] and move them so that high-priority jobs run
early -- a MILP over binaries y'

.. math::

    \min \sum_{j: n_j > 0} \frac{\pi_j}{n_j} \sum_{t=0}^{W-1} t\, y'_{jt}
    \quad\text{s.t.}\quad \sum_t y'_{jt} = n_j,\qquad \sum_j s_j y'_{jt} \le G .

The objective is handed to the solver as it stands, as Shockwave's code does (no rescaling:
dividing by the largest pi_j / n_j pushed every other job's weight below the solver's
tolerances).  The input plan is feasible, so the MILP always has a solution: it is handed to the
solver as its first incumbent (a start changes where the search begins, not what it may
return).  MIP gap 1e-3 and time limit 15 s unless the options set them, as Shockwave's code
solves this MILP with the window problem's settings.  If the solver still returns no
solution, the input plan is kept (as Shockwave's code does).

**Idle-GPU fill** (:func:`fill_idle_gpus`, after every solve): in each round, the jobs the plan
leaves out are taken by descending predicted remaining seconds Rem_j (ties: job order), each
when its gang fits in the GPUs still idle, until none is idle.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from schedlab.solution import Status
from schedlab.solvers import SolveResult, SolverOptions
from schedlab.solvers.matrix import matrix_model

FloatArray = npt.NDArray[np.float64]
#: Shockwave's solver settings for the re-placement MILP (those of its window problem).
RERANK_MIP_GAP = 1e-3
RERANK_TIME_LIMIT_S = 15.0


def rerank_rounds(gangs: FloatArray, scale: FloatArray, gpus: int, priority: FloatArray,
                  options: SolverOptions | None = None) -> tuple[FloatArray, SolveResult]:
    """Shockwave's re-placement MILP (module docstring).

    Args:
        gangs: y[j,t] in {0, 1}, shape (J, W), within capacity.
        scale: s_j, GPUs per gang.
        gpus: G.
        priority: pi_j > 0.
        options: solver options (time limit, MIP gap; default 15 s and 1e-3).

    Returns:
        (the re-placed y', the solve's result); y' is ``gangs`` itself when the solve found no
        solution.
    """
    y = np.asarray(gangs, dtype=float)
    n_jobs, n_rounds = y.shape
    if n_jobs == 0 or n_rounds == 0:
        return y, SolveResult(Status.OPTIMAL, 0.0, 0.0, 0.0, 0.0, "nothing to place")
    counts = np.round(y.sum(axis=1))
    t = np.arange(n_rounds, dtype=float)
    per_job = np.divide(priority, counts, out=np.zeros(n_jobs), where=counts > 0)
    cost = (per_job[:, None] * t[None, :]).reshape(-1)
    opts = options or SolverOptions()
    opts = replace(opts, mip_gap=RERANK_MIP_GAP if opts.mip_gap is None else opts.mip_gap,
                   time_limit_s=opts.time_limit_s or RERANK_TIME_LIMIT_S)
    if opts.solver == "highs":  # priorities as they stand (HiGHS reads >= 1e20 as infinite)
        opts = replace(opts, extra={"infinite_cost": math.inf, **opts.extra})
    model = matrix_model(opts)
    model.add_columns(np.zeros(n_jobs * n_rounds), np.ones(n_jobs * n_rounds), cost,
                      integer=True)
    cols = np.arange(n_jobs * n_rounds, dtype=np.int64)
    # sum_t y'[j,t] = n_j: row j holds columns j*W .. j*W + W - 1
    model.add_rows(counts, counts, starts=np.arange(0, n_jobs * n_rounds + 1, n_rounds),
                   columns=cols, values=np.ones(n_jobs * n_rounds))
    # sum_j s_j y'[j,t] <= G: row t holds columns j*W + t
    by_round = cols.reshape(n_jobs, n_rounds).T.reshape(-1)
    gang = np.repeat(np.asarray(scale, dtype=float), n_rounds).reshape(n_jobs, n_rounds)
    model.add_rows(np.full(n_rounds, -np.inf), np.full(n_rounds, float(gpus)),
                   starts=np.arange(0, n_jobs * n_rounds + 1, n_jobs), columns=by_round,
                   values=gang.T.reshape(-1))
    model.set_start(y.reshape(-1))
    result = model.solve()
    if not result.status.has_solution:
        return y, result
    placed = np.where(model.values() > 0.5, 1.0, 0.0)
    return placed.reshape(n_jobs, n_rounds), result


def fill_idle_gpus(gangs: FloatArray, scale: FloatArray, gpus: int,
                   remaining_s: FloatArray) -> FloatArray:
    """y with each round's idle GPUs filled (module docstring): left-out jobs by descending
    Rem_j (stable), each taken when s_j fits in the idle GPUs."""
    y = np.array(gangs, dtype=float)
    order = np.argsort(-np.asarray(remaining_s, dtype=float), kind="stable")
    for t in range(y.shape[1]):
        idle = gpus - float(scale @ y[:, t])
        for j in order:
            if idle <= 0:
                break
            if y[j, t] < 0.5 and scale[j] <= idle:
                y[j, t] = 1.0
                idle -= scale[j]
    return y


__all__ = ["fill_idle_gpus", "rerank_rounds"]
