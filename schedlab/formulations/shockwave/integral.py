r"""The integral window problem (Shockwave's MILP): round counts first, else one matrix model.

The columns and rows are those of :func:`~schedlab.formulations.shockwave.nash.window_lp`
(x[j,t] binary, one column per job and round) plus Shockwave's piecewise-linear log of the
progress q_j = (e_j + p_j) / E_j through the breakpoints b_0 < ... < b_m
(:data:`~schedlab.formulations.shockwave.nash.LOG_BREAKPOINTS`, log 0 read as log 1e-6).

**The log as an epigraph.**  The breakpoints' log values rise with slopes
m_s = (log b_{s+1} - log b_s) / (b_{s+1} - b_s) that strictly fall (log is concave, and so
is its interpolation), so the interpolation is the minimum of its segments' lines:

.. math::

    \mathrm{pwl}(q) = \min_s \; \log b_s + m_s (q - b_s), \qquad q \in [0, 1].

The objective maximizes sum_j c_j v_j with every c_j > 0 (budgets and priorities are
positive), so the rows v_j <= log b_s + m_s (q_j - b_s), one per segment, give
v_j = pwl(q_j) at every optimum, and for every x and p the best v is the same as under the
SOS2 form (weights lambda on adjacent breakpoints chosen by segment binaries) that
:meth:`~schedlab.formulations.shockwave.nash.NashWelfare.build` writes.  The two models have
the same optimal value and the same optimal (x, p); this one has no binaries but x, and its
LP relaxation is the same (the SOS2 weights of a concave function's interpolation are at
best on adjacent breakpoints).  Per job: m rows instead of m + 5 rows, m + 1 weights and
m binaries.

**Round counts first.**  The objective reads x only through n_j = sum_t x[j,t], the rounds
job j runs.  Every plan's counts meet sum_j s_j n_j <= G W and 0 <= n_j <= W, so the problem
over integer n_j with that one capacity row (the one-share LP of ``window_lp(per_round=
False)`` with n_j = W a_j integer, and the epigraph above) is a relaxation: its bound bounds
the MILP, and if it is infeasible so is the MILP.  Its counts are then packed into rounds by
:func:`pack_rounds` (largest gang first, each into its n_j least-loaded rounds).  When that
succeeds, the packing is a plan of the MILP with the same objective as the relaxation's
solution, so it is optimal within the relaxation's gap, with the relaxation's bound as proof.
The counts do not always pack (three 2-GPU gangs on 3 GPUs over 2 rounds: 6 GPU-rounds fit
the one row, two gangs fit the rounds); then, or when the relaxation stops without an
optimum, the full MILP below is solved in the time left.  This model has J integer columns
instead of J W binaries with W! equivalent orderings of the rounds: on the windows of a
120-job run where the full MILP used more than 9 s of CPU without closing a 1e-3 gap, it
closed it in 0.2-0.4 s.

**The start.**  For the full MILP, the LP relaxation (x in [0, 1]) is solved first.
Infeasible: so is the MILP (its feasible set is a subset), and that is the answer, proven.
Otherwise its x is rounded to whole gangs by
:func:`~schedlab.formulations.shockwave.nash.round_gangs` (the rule of the convex mode) and,
with p_j as large as those rounds allow and u, z and v at their best values, handed to the
solver as its first incumbent (HiGHS checks it and drops it when it breaks a row, e.g. a
finish-time row).  A start changes where the search begins, not what it may return: the
answer is still the solver's best within the MIP gap and time limit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from schedlab.solution import Status
from schedlab.solvers import SolveResult, SolverOptions, matrix_model
from schedlab.solvers.matrix import MatrixModel

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def log_segments(breakpoints: FloatArray, origin: float) -> tuple[FloatArray, FloatArray,
                                                                     FloatArray]:
    """(b_s, log b_s, m_s) for each segment s of the interpolated log (log 0 := log
    ``origin``); :class:`ValueError` unless the slopes strictly fall (the epigraph form is
    exact only for a concave interpolation)."""
    b = np.asarray(breakpoints, dtype=float)
    values = np.log(np.where(b > 0, b, origin))
    slopes = np.diff(values) / np.diff(b)
    if not np.all(np.diff(slopes) < 0):
        raise ValueError("the piecewise-linear log is not concave at these breakpoints")
    return b[:-1], values[:-1], slopes


def pwl_log_epigraph(epochs: FloatArray, done: FloatArray, p: IntArray,
                     v: IntArray, size: int, breakpoints: FloatArray,
                     origin: float) -> tuple[tuple[IntArray, IntArray, FloatArray],
                                             FloatArray]:
    """Rows v_j - (m_s / E_j) p_j <= log b_s + m_s (e_j / E_j - b_s), job-major, as CSR
    arrays (starts, columns, values) over ``size`` columns, and their upper bounds."""
    base, logs, slopes = log_segments(breakpoints, origin)
    n, m = len(epochs), len(slopes)
    job = np.repeat(np.arange(n), m)
    seg = np.tile(np.arange(m), n)
    starts = np.arange(0, 2 * n * m + 1, 2, dtype=np.int64)
    columns = np.column_stack([v[job], p[job]]).reshape(-1)
    values = np.column_stack([np.ones(n * m), -slopes[seg] / epochs[job]]).reshape(-1)
    upper = logs[seg] + slopes[seg] * (done[job] / epochs[job] - base[seg])
    if columns.size and columns.max() >= size:
        raise ValueError("a log row names a column beyond the model")
    return (starts, columns, values), upper


def start_values(lower: FloatArray, x_cols: IntArray, gangs: FloatArray,
                 planned: FloatArray, p: IntArray, u: IntArray,
                 z: int, v: IntArray, remaining_s: FloatArray,
                 sec_per_epoch: FloatArray, logs: FloatArray) -> FloatArray:
    """A value for every column from whole gangs y[j,t]: x = y, p_j = ``planned`` (the most
    the rounds allow), u_j = max(0, Rem_j - d_j p_j), z = max_j u_j, v_j = ``logs`` (the
    interpolated log of q_j); columns not named here start at their lower bound or 0."""
    values = np.where(np.isfinite(lower), lower, 0.0).astype(float)
    values[x_cols.reshape(-1)] = gangs.reshape(-1)
    values[p] = planned
    left = np.maximum(0.0, remaining_s - sec_per_epoch * planned)
    values[u] = left
    values[z] = float(left.max()) if len(left) else 0.0
    values[v] = logs
    return values


def pack_rounds(counts: FloatArray, scale: FloatArray, gpus: int,
                rounds: int) -> FloatArray | None:
    """Whole gangs y[j,t] with sum_t y[j,t] = n_j (``counts``) and sum_j s_j y[j,t] <= G in
    every round, or None when this rule finds none: gangs by decreasing size s_j (ties: job
    order), each job's n_j rounds the n_j least-loaded ones (ties: earlier round)."""
    n = np.round(np.asarray(counts, dtype=float)).astype(np.int64)
    if (n < 0).any() or (n > rounds).any():
        return None
    load = np.zeros(rounds)
    y = np.zeros((len(n), rounds))
    for j in np.argsort(-np.asarray(scale, dtype=float), kind="stable"):
        if n[j] == 0:
            continue
        chosen = np.argsort(load, kind="stable")[: n[j]]
        if (load[chosen] + scale[j] > gpus + 1e-9).any():
            return None
        y[j, chosen] = 1.0
        load[chosen] += scale[j]
    return y


def solve_with_start(model: MatrixModel, integer_columns: IntArray,
                     make_start: Callable[[FloatArray], FloatArray],
                     options: SolverOptions) -> tuple[SolveResult, SolveResult | None]:
    """LP relaxation, then the MIP from ``make_start(lp_values)`` (module docstring).

    ``model`` holds the MILP's columns with ``integer_columns`` still continuous.  Returns
    (the MIP's result, the LP's result); when the LP is infeasible the MIP is not solved and
    the LP's result (status ``infeasible``) is returned twice."""
    relaxed = model.solve(time_limit_s=options.time_limit_s)
    if relaxed.status is Status.INFEASIBLE:
        return relaxed, relaxed
    start: FloatArray | None = None
    if relaxed.status.has_solution:
        start = make_start(model.values())
    model.set_integer(integer_columns, True)
    if start is not None:
        model.set_start(start)
    remaining = None
    if options.time_limit_s is not None:
        remaining = max(1e-3, options.time_limit_s - relaxed.solve_s)
    return model.solve(time_limit_s=remaining, mip_gap=options.mip_gap), relaxed


__all__ = ["log_segments", "matrix_model", "pack_rounds", "pwl_log_epigraph",
           "solve_with_start", "start_values"]
