r"""``hare.lp_bound``: an interval-indexed LP whose optimum is a lower bound on sum_j w_j C_j.

Notation of :mod:`schedlab.formulations.hare.model`; rounds u = (j, q), q = 0..R_j-1;
pmin_j = min_k p[j,k].  Interval boundaries b_0 = 0, b_1 = tau_0, b_i = tau_0 (1+eps)^{i-1}
(i = 1..I-1) and b_I = +inf: intervals i = (b_i, b_{i+1}], the last one open.
tau_0 = min_j (r_j + pmin_j) (no task ends earlier) and b_{I-1} >= a serial schedule's
makespan (the last finite boundary only decides how fine the grid is; the open last interval
keeps the LP valid whatever it is).  L_j = :func:`round_seconds` >= pmin_j is the shortest
time one round of j can take on the cluster alone; r'_j = r_j, or with
``params.switch_on_first_task`` min_k max(r_j, sigma[j,k]) over usable k.  The earliest end of
a task of round q of j on type k is e[u,k] = max(r'_j + q L_j, s[j,k]) + p[j,k], with
s[j,k] = sigma[j,k] under the first-task rule and 0 otherwise.

Columns: x[u,k,i] >= 0 = tasks of round u that *end* in interval i on type k (only where k is
usable by j and b_{i+1} >= e[u,k]); C[u] = the round's (fractional) completion time;
F[u,i] = tasks of u ended by b_{i+1}; W[k,i] = GPU-seconds of the tasks on type k ended by
b_{i+1} (i < I-1).  Rows:

* each task ends somewhere:   sum_{k,i} x[u,k,i] = m_j;
* completion:                 C[u] >= (1/m_j) sum_{k,i} max(b_i, e[u,k]) x[u,k,i];
* round chain (valid rows):   C[j,q] >= C[j,q-1] + L_j,  C[j,0] >= max(r'_j + L_j,
  min_k e[(j,0),k]), hence C[j,R_j-1] >= r_j + R_j pmin_j;
* round precedence:           F[(j,q),i] <= F[(j,q-1),i]  (no task of round q ends by b_{i+1}
  unless all of round q-1 has: the fraction done can only trail the previous round's);
* per-type capacity:          W[k,i] <= n_k b_{i+1};
* cumulative definitions:     F[u,i] = F[u,i-1] + sum_k x[u,k,i],
  W[k,i] = W[k,i-1] + sum_u p[j,k] x[u,k,i].

**Switch gaps** (rows present when some sigma > 0).  Columns Z[k,i] = sum over round-0
tasks of type k ended by b_{i+1} of sigma[j,k] / m_j (cumulative like W) and, without the
first-task rule, hd[j,k] in [0,1] for usable (j,k) (j's task heads a GPU of type k).  Rows:

* gap capacity:   W[k,i] + Z[k,i] - sum_j sigma[j,k] hd[j,k] <= n_k b_{i+1};
* heads:          sum_j hd[j,k] <= n_k;
* a job that heads no GPU waits for another job's task and its gap:
  C[j,0] >= r_j + pmin_j + D_j (1 - sum_k hd[j,k]), D_j = min_k (max(r_j, tau[j,k] +
  sigma[j,k]) + p[j,k]) - r_j - pmin_j where tau[j,k] = min over other jobs i of r_i + p[i,k]
  (where D_j > 0); a job that shares no type with another job heads a GPU:
  sum_k hd[j,k] >= 1.

Objective: minimize sum_j w_j C[j, R_j-1].  Validity (docs/formulations/hare.md): a feasible
schedule gives x (each task counted in the interval of its end), C[u] = the round's real end,
F, W, Z accordingly and hd[j,k] = 1 when j heads a GPU of type k; every row holds, so the LP
optimum is <= the schedule's sum_j w_j C_j.  ``lp_relaxation(..., tightened=False)`` builds
the earlier LP (L_j = pmin_j, r'_j = r_j, no switch rows), a relaxation of this one.

**Reporting.**  The Solution has no schedule: ``objective`` = the LP optimum and ``bound`` =
the solver's bound (equal for an LP proven optimal), status the LP's; ``metrics`` hold
``lp_completion_s`` {job: C_j}, ``round_completion_s`` {job: [C_jq]}, ``order`` (jobs by LP
completion, ties by file order), ``trivial_bound`` and ``intervals``.  :func:`lp_relaxation`
returns the same as :class:`LpBound` for the greedy.

**Scaling.**  The LP is built with every time (r_j, p, b_i, C) divided by the unit
s = b_{I-1} / 50 (about 1000 s at 300 jobs on 160 GPUs) and its optimum, bound and C values
multiplied back by s: the same LP in other units (every row divided or multiplied by s), so
the same optimum up to rounding (relative differences ~1e-15 measured at 100 and 300 jobs).
Without it the capacity rows hold GPU-seconds up to ~3e6 and HiGHS warns that the LP is
badly scaled; with it interior point took about 8% less time at 100 jobs (several paired
runs) and 11% at 300.  Solver: dual simplex below ``IPM_COLUMNS`` columns, interior point
with crossover above (profiled at 300 jobs: build 0.1 s; interior point ~25 s over 54
iterations, crossover ~1.5 s; simplex about 5x slower at 100 jobs; crossover off needed
more iterations and saved nothing; presolve off took 45 s).  The reported bound is the
objective of an LP HiGHS proves optimal (primal and dual feasible within its tolerances),
never an unproven value.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from schedlab.errors import InputError
from schedlab.formulations.base import Method
from schedlab.formulations.hare.model import FloatArray, HareData, IntArray, hare_data
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Solution, Status, Timings
from schedlab.solvers import SolveResult, SolverOptions, matrix_model

#: Default eps of the geometric grid (b_{i+1} = (1 + eps) b_i).
DEFAULT_EPS = 0.25
#: Above this many columns the LP is solved by interior point (simplex below).
IPM_COLUMNS = 20_000
#: The LP measures time in units of b_{I-1} / TIME_UNITS (module docstring, Scaling).
TIME_UNITS = 50.0


@dataclass(frozen=True)
class LpBound:
    """The LP's answer: ``result`` (status, objective, bound), ``round_completion`` C[u] per
    round in (job, round) order, ``completion`` C_j (J,), ``order`` (job indices by C_j),
    ``boundaries`` b_0..b_{I-1}, ``build_s``."""

    result: SolveResult
    round_completion: FloatArray | None
    completion: FloatArray | None
    order: IntArray
    boundaries: FloatArray
    build_s: float

    @property
    def bound(self) -> float | None:
        """The proven lower bound on sum_j w_j C_j (None without a proof)."""
        if self.result.status != Status.OPTIMAL:
            return None
        return self.result.bound if self.result.bound is not None else self.result.objective


def boundaries(data: HareData, eps: float = DEFAULT_EPS) -> FloatArray:
    """b_0 = 0, b_1 = tau_0, ..., b_{I-1} >= the serial makespan (module docstring)."""
    tau0 = float(np.min(data.arrival + data.min_seconds))
    fastest = np.argmin(data.seconds, axis=1)
    rows = np.arange(data.num_jobs)
    per_round = data.seconds[rows, fastest] * np.ceil(data.tasks / data.gpus[fastest])
    horizon = float(data.arrival.max() + (data.rounds * (per_round + data.switch.max(axis=1)))
                    .sum())
    count = max(1, math.ceil(math.log(max(horizon / tau0, 1.0)) / math.log1p(eps)))
    return np.concatenate([[0.0], tau0 * (1.0 + eps) ** np.arange(count + 1)])


def lp_relaxation(data: HareData, options: SolverOptions | None = None, *,
                  eps: float = DEFAULT_EPS, tightened: bool = True) -> LpBound:
    """Build and solve the LP of the module docstring from arrays.  ``tightened=False``:
    the earlier LP (rounds at least pmin_j long, no switch gaps, no first-task release),
    whose optimum is never above this one's (kept for comparisons and tests)."""
    t0 = time.perf_counter()
    b_s = boundaries(data, eps)
    unit = float(b_s[-1]) / TIME_UNITS if b_s[-1] > 0 else 1.0  # s per LP time unit
    b = b_s / unit
    arrival, seconds = data.arrival / unit, data.seconds / unit
    min_seconds = data.min_seconds / unit
    span = round_seconds(data) / unit if tightened else min_seconds     # L_j
    sigma = np.where(data.usable, data.switch, 0.0) / unit                 # (J, K)
    n_int = len(b)  # intervals (b_i, b_{i+1}], the last open
    upper = np.append(b[1:], np.inf)
    job_of = np.repeat(np.arange(data.num_jobs), data.rounds)
    q_of = np.concatenate([np.arange(r) for r in data.rounds])
    n_rounds = len(job_of)
    m = data.tasks[job_of].astype(float)
    release = arrival
    first_pays = data.first_task_pays and tightened
    if first_pays:   # every task of j on type k starts >= sigma[j,k]
        release = np.where(data.usable, np.maximum(arrival[:, None], sigma), np.inf).min(axis=1)
    begin = (release[job_of] + q_of * span[job_of])[:, None] + np.zeros(data.num_types)
    if first_pays:
        begin = np.maximum(begin, sigma[job_of])                         # (U, K)
    earliest = begin + seconds[job_of]                                   # (U, K), inf
    allowed = np.isfinite(earliest)[:, :, None] & (upper[None, None, :]
                                                   >= earliest[:, :, None])
    xu, xk, xi = np.nonzero(allowed)
    n_x = len(xu)
    p_x = seconds[job_of[xu], xk]
    left_x = np.maximum(b[xi], earliest[xu, xk])
    n_cum = n_int - 1  # F and W exist for the finite intervals
    c_col = n_x + np.arange(n_rounds)
    f_col = n_x + n_rounds + np.arange(n_rounds * n_cum).reshape(n_rounds, n_cum)
    w_col = n_x + n_rounds + n_rounds * n_cum + np.arange(data.num_types * n_cum) \
        .reshape(data.num_types, n_cum)
    n_cols = n_x + n_rounds + n_rounds * n_cum + data.num_types * n_cum
    # switch gaps (module docstring): Z[k,i] = gap shares of the round-0 tasks on type k
    # ended by b_{i+1}; hd[j,k] = 1 when j's task heads a GPU of type k (no first-task rule)
    gaps = tightened and bool((sigma > 0).any())
    n_z = data.num_types * n_cum if gaps else 0
    z_col = n_cols + np.arange(n_z).reshape(-1, n_cum)
    hj, hk = np.nonzero(data.usable) if gaps and not data.first_task_pays else \
        (np.zeros(0, np.int64), np.zeros(0, np.int64))
    n_hd = len(hj)
    hd_col = n_cols + n_z + np.arange(n_hd)
    n_cols += n_z + n_hd
    first = np.r_[True, job_of[1:] != job_of[:-1]]
    last = np.r_[job_of[1:] != job_of[:-1], True]
    lower = np.zeros(n_cols)
    lower[c_col[first]] = np.maximum(earliest[first].min(axis=1), release + span)
    col_upper = np.full(n_cols, np.inf)
    col_upper[hd_col] = 1.0
    col_upper[f_col] = m[:, None]
    w_cap = (data.gpus[:, None] * b[1:n_int][None, :]).astype(float)
    col_upper[w_col] = w_cap
    cost = np.zeros(n_cols)
    cost[c_col[last]] = data.weight[job_of[last]]

    blocks: list[tuple[sp.coo_matrix, FloatArray, FloatArray]] = []

    def block(rows: IntArray, cols: IntArray, vals: FloatArray, n: int, lo: FloatArray,
              up: FloatArray) -> None:
        blocks.append((sp.coo_matrix((vals, (rows, cols)), shape=(n, n_cols)), lo, up))

    # each task ends somewhere: sum x = m_j
    block(xu, xk * 0 + np.arange(n_x), np.ones(n_x), n_rounds, m, m)
    # completion: C[u] - sum left/m x >= 0
    block(np.r_[np.arange(n_rounds), xu], np.r_[c_col, np.arange(n_x)],
          np.r_[np.ones(n_rounds), -left_x / m[xu]], n_rounds, np.zeros(n_rounds),
          np.full(n_rounds, np.inf))
    # chain: C[u] - C[u-1] >= pmin_j for q >= 1
    later = np.nonzero(~first)[0]
    n_chain = len(later)
    block(np.r_[np.arange(n_chain), np.arange(n_chain)], np.r_[c_col[later], c_col[later - 1]],
          np.r_[np.ones(n_chain), -np.ones(n_chain)], n_chain,
          span[job_of[later]], np.full(n_chain, np.inf))
    # F[u,i] - F[u,i-1] - sum_k x[u,k,i] = 0 for finite i
    fin = xi < n_cum
    rows_f = (np.arange(n_rounds)[:, None] * n_cum + np.arange(n_cum)[None, :]).ravel()
    prev_u, prev_i = np.nonzero(np.ones((n_rounds, n_cum), bool)[:, 1:])
    block(np.r_[rows_f, (prev_u * n_cum + prev_i + 1), xu[fin] * n_cum + xi[fin]],
          np.r_[f_col.ravel(), f_col[prev_u, prev_i], np.nonzero(fin)[0]],
          np.r_[np.ones(len(rows_f)), -np.ones(len(prev_u)), -np.ones(int(fin.sum()))],
          n_rounds * n_cum, np.zeros(n_rounds * n_cum), np.zeros(n_rounds * n_cum))
    # precedence: F[u,i] - F[u-1,i] <= 0
    pu = np.repeat(later, n_cum)
    pi = np.tile(np.arange(n_cum), n_chain)
    n_prec = len(pu)
    block(np.r_[np.arange(n_prec), np.arange(n_prec)], np.r_[f_col[pu, pi], f_col[pu - 1, pi]],
          np.r_[np.ones(n_prec), -np.ones(n_prec)], n_prec, np.full(n_prec, -np.inf),
          np.zeros(n_prec))
    # W[k,i] - W[k,i-1] - sum p x[.,k,i] = 0
    kk, ii = np.nonzero(np.ones((data.num_types, n_cum), bool))
    wk, wi = np.nonzero(np.ones((data.num_types, n_cum), bool)[:, 1:])
    block(np.r_[kk * n_cum + ii, wk * n_cum + wi + 1, xk[fin] * n_cum + xi[fin]],
          np.r_[w_col[kk, ii], w_col[wk, wi], np.nonzero(fin)[0]],
          np.r_[np.ones(len(kk)), -np.ones(len(wk)), -p_x[fin]],
          data.num_types * n_cum, np.zeros(data.num_types * n_cum),
          np.zeros(data.num_types * n_cum))
    if gaps:
        # Z[k,i] - Z[k,i-1] - sum (sigma[j,k] / m_j) x[(j,0),k,i] = 0 (round-0 tasks);
        # W[k,i] + Z[k,i] - sum_j sigma[j,k] hd[j,k] <= n_k b_{i+1}
        zero = fin & (q_of[xu] == 0)
        gap_x = sigma[job_of[xu[zero]], xk[zero]] / m[xu[zero]]
        block(np.r_[kk * n_cum + ii, wk * n_cum + wi + 1, xk[zero] * n_cum + xi[zero]],
              np.r_[z_col[kk, ii], z_col[wk, wi], np.nonzero(zero)[0]],
              np.r_[np.ones(len(kk)), -np.ones(len(wk)), -gap_x],
              n_z, np.zeros(n_z), np.zeros(n_z))
        hr = np.repeat(hk * n_cum, n_cum) + np.tile(np.arange(n_cum), n_hd)
        block(np.r_[kk * n_cum + ii, kk * n_cum + ii, hr],
              np.r_[w_col[kk, ii], z_col[kk, ii], np.repeat(hd_col, n_cum)],
              np.r_[np.ones(2 * len(kk)), -np.repeat(sigma[hj, hk], n_cum)],
              n_z, np.full(n_z, -np.inf), w_cap.ravel())
    if n_hd:
        head_rows(block, data, hj, hk, hd_col, c_col[first], arrival, seconds, sigma,
                  min_seconds)

    matrix = sp.vstack([blk for blk, _, _ in blocks]).tocsr()
    row_lo = np.concatenate([lo for _, lo, _ in blocks])
    row_up = np.concatenate([up for _, _, up in blocks])
    opts = (options or SolverOptions()).with_method("ipm" if n_cols > IPM_COLUMNS
                                                    else "simplex")
    model = matrix_model(opts)
    model.add_columns(lower, col_upper, cost)
    model.add_rows(row_lo, row_up, starts=matrix.indptr, columns=matrix.indices,
                   values=matrix.data)
    build_s = time.perf_counter() - t0
    result = in_seconds(model.solve(), unit)
    round_c = completion = None
    order = np.arange(data.num_jobs)
    if result.status.has_solution:
        values = model.values()
        round_c = values[c_col] * unit
        completion = round_c[last]
        order = np.lexsort((np.arange(data.num_jobs), completion))
    return LpBound(result=result, round_completion=round_c, completion=completion,
                   order=order, boundaries=b_s, build_s=build_s)


def head_rows(block: Callable[[IntArray, IntArray, FloatArray, int, FloatArray, FloatArray],
                              None],
              data: HareData, hj: IntArray, hk: IntArray, hd_col: IntArray, c0_col: IntArray,
              arrival: FloatArray, seconds: FloatArray, sigma: FloatArray,
              min_seconds: FloatArray) -> None:
    """The rows of the heads hd[j,k] (module docstring, "Switch gaps"), times in LP units:
    sum_j hd[j,k] <= n_k; C[j,0] >= r_j + pmin_j + D_j (1 - sum_k hd[j,k]) where D_j > 0;
    sum_k hd[j,k] >= 1 for a job no other job shares a type with."""
    n_jobs, n_types = data.num_jobs, data.num_types
    n_hd = len(hj)
    block(hk, hd_col, np.ones(n_hd), n_types, np.full(n_types, -np.inf),
          data.gpus.astype(float))
    # tau[j,k]: earliest end of another job's task on type k (inf: no other job uses k)
    ends = np.where(data.usable, arrival[:, None] + seconds, np.inf)       # (J, K)
    order = np.argsort(ends, axis=0, kind="stable")
    lowest = np.take_along_axis(ends, order[:1], axis=0)[0]
    second = np.take_along_axis(ends, order[1:2], axis=0)[0] if n_jobs > 1 else \
        np.full(n_types, np.inf)
    tau = np.where(np.arange(n_jobs)[:, None] == order[0][None, :], second[None, :],
                   lowest[None, :])
    late = np.where(data.usable, np.maximum(arrival[:, None], tau + sigma) + seconds, np.inf)
    first_end = late.min(axis=1)                  # the first task's end when it is no head
    base = arrival + min_seconds
    delay = first_end - base
    forced = ~np.isfinite(first_end)              # no predecessor of another job possible
    for j in np.flatnonzero(forced):
        cols = hd_col[hj == j]
        block(np.zeros(len(cols), np.int64), cols, np.ones(len(cols)), 1, np.ones(1),
              np.full(1, np.inf))
    for j in np.flatnonzero(~forced & (delay > 0)):
        cols = hd_col[hj == j]
        block(np.zeros(len(cols) + 1, np.int64), np.r_[c0_col[j], cols],
              np.r_[1.0, np.full(len(cols), delay[j])], 1, np.full(1, base[j] + delay[j]),
              np.full(1, np.inf))


def round_seconds(data: HareData) -> FloatArray:
    """L_j (J,): the shortest time in which the m_j tasks of one round of j can run on the
    cluster alone, the smallest T with sum_k n_k floor(T / p[j,k]) >= m_j (a GPU of type k
    runs at most floor(T / p[j,k]) whole tasks in T seconds); with ``one_type_per_round``,
    min_k ceil(m_j / n_k) p[j,k].  L_j >= min_k p[j,k]; counts are rounded up by 1e-9 so
    that rounding never makes L_j too large."""
    out = np.array(data.min_seconds, dtype=float)
    for j in range(data.num_jobs):
        m = int(data.tasks[j])
        types = np.flatnonzero(data.usable[j])
        p, n = data.seconds[j, types], data.gpus[types]
        alone = np.ceil(m / n) * p            # the round on one type only
        if data.one_type_per_round or m <= 1:
            out[j] = alone.min() if m >= 1 else 0.0
            continue
        cap = alone.min()
        candidates = np.unique(np.concatenate(
            [p[i] * np.arange(1, int(np.ceil(m / n[i])) + 1) for i in range(len(types))]))
        for t in candidates[candidates <= cap]:
            if (n * np.floor(t / p + 1e-9)).sum() >= m:
                out[j] = t
                break
    return out


def in_seconds(result: SolveResult, unit: float) -> SolveResult:
    """``result`` with objective and bound multiplied by ``unit`` (s per LP time unit); the
    relative gap is unchanged."""
    return replace(result,
                   objective=None if result.objective is None else result.objective * unit,
                   bound=None if result.bound is None else result.bound * unit)


class HareLpBound(Method):
    """``hare.lp_bound`` (module docstring).

    Args:
        eps: the geometric grid's ratio - 1 (smaller: a finer grid, a tighter bound, a
            larger LP).
    """

    name = "hare.lp_bound"
    description: ClassVar[str] = ("Hare: interval-indexed LP lower bound on the total "
                                  "weighted completion time")
    objective_sense = "minimize"

    def __init__(self, *, eps: float = DEFAULT_EPS) -> None:
        if not (math.isfinite(eps) and eps > 0):
            raise InputError(f"eps must be finite and > 0, got {eps}", field="eps")
        self.eps = eps

    def validate(self, instance: Instance) -> None:
        """Every job has rounds, tasks_per_round and task_seconds."""
        hare_data(instance, self.name)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Solve the LP; the Solution carries its optimum as objective and bound."""
        data = hare_data(instance, self.name)
        t0 = time.perf_counter()
        lp = lp_relaxation(data, options, eps=self.eps)
        solution = lp_solution(instance, self.name, data, lp)
        solution.solver = (options or SolverOptions()).solver
        solution.timings = Timings(build_s=lp.build_s, solve_s=lp.result.solve_s,
                                   extract_s=time.perf_counter() - t0 - lp.build_s
                                   - lp.result.solve_s)
        return solution

    def example_instance(self) -> Instance:
        """Four jobs on 2 V100 + 2 K80 (see :func:`example_instance`)."""
        return example_instance()


def lp_solution(instance: Instance, name: str, data: HareData, lp: LpBound) -> Solution:
    """The Solution of the LP (module docstring, Reporting)."""
    result = lp.result
    solution = Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                        formulation=name, status=result.status, objective=result.objective,
                        bound=result.bound, gap=result.gap)
    solution.metrics.update(trivial_bound=data.trivial_bound(),
                            intervals=len(lp.boundaries))
    if lp.completion is not None and lp.round_completion is not None:
        starts = np.concatenate([[0], np.cumsum(data.rounds)])
        solution.metrics.update(
            lp_completion_s=dict(zip(data.job_ids, lp.completion.tolist(), strict=True)),
            round_completion_s={job: lp.round_completion[starts[j]:starts[j + 1]].tolist()
                                for j, job in enumerate(data.job_ids)},
            order=[data.job_ids[j] for j in lp.order])
        solution.diagnostics.append(
            "objective = the LP relaxation's optimum, a lower bound on sum_j w_j C_j of every "
            "feasible schedule; no schedule")
    else:
        solution.diagnostics.append(f"solver: {result.message}")
    return solution


def example_instance() -> Instance:
    """Four jobs (weights 1-3, one arriving at 2 s, switch costs) on 2 V100 + 2 K80."""
    from schedlab.instance import instance_from_dict

    return instance_from_dict({
        "name": "hare-example",
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 2}}},
        "jobs": [
            {"id": "a", "weight": 3.0, "rounds": 2, "tasks_per_round": 2,
             "task_seconds": {"v100": 2.0, "k80": 5.0}, "switch_seconds": {"v100": 0.5}},
            {"id": "b", "weight": 1.0, "rounds": 3, "tasks_per_round": 1,
             "task_seconds": {"v100": 3.0, "k80": 4.0}, "switch_seconds": 0.25},
            {"id": "c", "weight": 2.0, "arrival": 2.0, "rounds": 1, "tasks_per_round": 4,
             "task_seconds": {"k80": 3.0}},
            {"id": "d", "weight": 1.0, "rounds": 2, "tasks_per_round": 2,
             "task_seconds": {"v100": 1.0, "k80": 1.5}, "switch_seconds": 1.0},
        ],
    })
