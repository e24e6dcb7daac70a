r"""Gavel LPs whose rows read each job's remaining work, kept per job in one persistent model.

Min-makespan and finish-time fairness read every job's remaining steps R_j (and finish-time
fairness its time in system t_j and isolated time), so no two jobs are interchangeable and the
model stays per job.  :class:`JobLeadLP` holds, for the active jobs j (one slot each),

.. math::

    \max v \quad\text{s.t.}\quad
    \text{lead}_j:\; c_j v - \mathrm{thr}_j(X) \le 0,\qquad
    \text{share}_j:\; \sum_k X_{jk} \le 1,\qquad
    \text{capacity}_k:\; \sum_j s_j X_{jk} \le n_k,\qquad 0 \le v \le \bar v

with thr_j(X) = sum_k T_jk X_jk (steps/s).  Between decisions only the changes reach the
solver: an arriving job adds its rows and columns, a leaving one is retired in place (columns
fixed to 0, rows freed; the model is rebuilt without retired slots when they outnumber the
active ones by :data:`_SPARE_SLOTS`), and the coefficients c_j are changed in place; HiGHS
re-solves from its last basis.  The heterogeneity-agnostic variant has one column x_j per job
whose time lands on the allowed types in proportion to n_k (the type-blind rows of
:mod:`schedlab.formulations.gavel.base` with X eliminated).

* :class:`MakespanLP` -- ``gavel.min_makespan``: c_j = R_j, v = y = 1 / makespan
  (:class:`~schedlab.formulations.gavel.models.MinMakespan`);
* :class:`FinishTimeSearch` -- ``gavel.finish_time_fairness``: c_j = r_j(rho) =
  R_j / (rho D_j - t_j), v = z in [0, 2], the same feasibility test z >= 1 as
  :class:`~schedlab.formulations.gavel.models.FinishTimeFairness`, searched from the last
  decision's rho with Dinkelbach steps (module of that class for rho, D_j and the bounds).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from schedlab.fairness import rho_isolated_share
from schedlab.formulations.gavel.data import GavelData, effective_throughput
from schedlab.formulations.gavel.models import FinishTimeFairness
from schedlab.solvers import SolverOptions
from schedlab.solvers.matrix import MatrixModel, matrix_model

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Retired job slots the model keeps (beyond the number of active jobs) before a rebuild.
_SPARE_SLOTS = 64


class JobLeadLP:
    """The per-job LP of the module docstring in one persistent solver model.

    Args:
        types: accelerator types, in the order of the throughput columns.
        gpus: n_k per type.
        heterogeneity_aware: one column per (job, allowed type); False: one per job.
        v_upper: the upper bound of v (inf: none).
        options: solver options (time limit dropped: a warm re-solve takes milliseconds).
    """

    def __init__(self, types: list[str], gpus: FloatArray, *, heterogeneity_aware: bool = True,
                 v_lower: float = 0.0, v_upper: float = np.inf, floor_rows: bool = False,
                 options: SolverOptions | None = None) -> None:
        self.floor_rows = floor_rows
        self.types = types
        self.gpus = np.asarray(gpus, dtype=float)
        self.aware = heterogeneity_aware
        self.v_lower = v_lower
        self.v_upper = v_upper
        opts = replace(options or SolverOptions(), time_limit_s=None)
        if opts.solver == "highs" and "simplex_strategy" not in opts.extra:
            # primal simplex: every decision changes a column of coefficients (c_j), after
            # which HiGHS' primal simplex re-solved trace-1000's LPs in about half the time
            # of its dual simplex (same optima)
            opts = replace(opts, extra={**opts.extra, "simplex_strategy": 4})
        self.options = opts
        self._slot_of: dict[Hashable, int] = {}
        self._reset_model()

    # model ----------------------------------------------------------------------------------
    def _reset_model(self) -> None:
        model: MatrixModel = matrix_model(self.options, presolve=False)
        model.add_columns([self.v_lower], [self.v_upper], [1.0])  # v
        model.set_sense("maximize")
        model.add_rows(np.full(len(self.types), -np.inf), self.gpus)  # capacity_k
        self.model = model
        self._share_row = np.zeros(0, dtype=np.int64)  # per slot
        self._lead_row = np.zeros(0, dtype=np.int64)
        self._floor_row = np.zeros(0, dtype=np.int64)  # per slot, with ``floor_rows``
        self._floor = np.zeros(0)  # the floor rows' lower bounds, per slot
        self._col_thr = np.zeros(0)  # thr_j per unit of each X column
        self._cost = np.ones(1)  # objective coefficient of every column (v first: 1)
        self._lead = np.zeros(0)  # c_j in the model, per slot
        self._upper = np.zeros(0)  # the lead row's upper bound, per slot
        self._alive = np.zeros(0, dtype=bool)
        self._col_slot = np.zeros(0, dtype=np.int64)  # per X column (column i + 1)
        self._col_direction = np.zeros((0, len(self.types)))  # X per unit of the column
        self._scale = np.zeros(0)  # s_j per slot
        self._multiplicity = np.zeros(0)  # m_j per slot (capacity coefficients s_j m_j X)
        self._slot_cols: list[IntArray] = []

    def _add_slots(self, scales: FloatArray, thr: FloatArray) -> None:
        """Rows and columns of new slots (throughput rows ``thr`` (n, K), 0 where not allowed;
        c_j = 0 until set)."""
        model = self.model
        n, num_types = thr.shape
        if n == 0:
            return
        first_slot = len(self._alive)
        per = 3 if self.floor_rows else 2
        rows = model.add_rows(np.full(per * n, -np.inf), np.tile([1.0, 0.0, np.inf][:per], n))
        share, lead = rows[0::per], rows[1::per]
        floor = rows[2::per] if self.floor_rows else np.zeros(0, dtype=np.int64)
        allowed = (thr > 0) & (scales[:, None] <= self.gpus[None, :])
        starts = [0]
        index: list[float] = []
        values: list[float] = []
        col_slot: list[int] = []
        col_thr: list[float] = []
        directions: list[FloatArray] = []
        first_col = model.num_columns
        slot_cols: list[IntArray] = []
        for i in range(n):
            ks = np.flatnonzero(allowed[i])
            slot = first_slot + i
            if self.aware:
                made = 0
                for k in ks.tolist():
                    index += [k, share[i], lead[i]]
                    values += [scales[i], 1.0, -thr[i, k]]
                    if self.floor_rows:
                        index.append(floor[i])
                        values.append(thr[i, k])
                    col_thr.append(float(thr[i, k]))
                    starts.append(len(index))
                    col_slot.append(slot)
                    directions.append(np.eye(num_types)[k])
                    made += 1
            elif len(ks):
                pool = float(self.gpus[ks].sum())
                direction = np.zeros(num_types)
                direction[ks] = self.gpus[ks] / pool
                index += [*ks.tolist(), share[i], lead[i]]
                rate = float((thr[i] * direction).sum())
                values += [*(scales[i] * direction[ks]).tolist(), 1.0, -rate]
                if self.floor_rows:
                    index.append(floor[i])
                    values.append(rate)
                col_thr.append(rate)
                starts.append(len(index))
                col_slot.append(slot)
                directions.append(direction)
                made = 1
            else:
                made = 0
            slot_cols.append(np.arange(first_col + len(col_slot) - made,
                                       first_col + len(col_slot), dtype=np.int64))
        width = len(col_slot)
        if width:
            model.add_columns(np.zeros(width), np.ones(width), 0.0, starts=starts, rows=index,
                              values=values)
        self._share_row = np.concatenate([self._share_row, share])
        self._lead_row = np.concatenate([self._lead_row, lead])
        self._floor_row = np.concatenate([self._floor_row, floor])
        self._floor = np.concatenate([self._floor, np.full(n, -np.inf)])
        self._col_thr = np.concatenate([self._col_thr, np.asarray(col_thr, dtype=float)])
        self._cost = np.concatenate([self._cost, np.zeros(width)])
        self._lead = np.concatenate([self._lead, np.zeros(n)])
        self._upper = np.concatenate([self._upper, np.zeros(n)])
        self._alive = np.concatenate([self._alive, np.ones(n, dtype=bool)])
        self._scale = np.concatenate([self._scale, np.asarray(scales, dtype=float)])
        self._multiplicity = np.concatenate([self._multiplicity, np.ones(n)])
        self._col_slot = np.concatenate([self._col_slot, np.asarray(col_slot, dtype=np.int64)])
        self._col_direction = np.vstack([self._col_direction,
                                         np.asarray(directions).reshape(-1, num_types)])
        self._slot_cols.extend(slot_cols)

    def _retire(self, slots: list[int]) -> None:
        """Columns fixed to 0 and rows freed for slots whose jobs left."""
        if not slots:
            return
        cols = np.concatenate([self._slot_cols[s] for s in slots])
        if len(cols):
            self.model.set_column_bounds(cols, 0.0, 0.0)
        rows = np.concatenate([self._share_row[slots], self._lead_row[slots],
                               self._floor_row[slots] if self.floor_rows else []]
                              ).astype(np.int64)
        self.model.set_row_bounds(rows, -np.inf, np.inf)
        if len(cols):
            self.set_column_costs(cols, np.zeros(len(cols)))
        self._alive[slots] = False

    def sync(self, keys: Sequence[Hashable], scales: FloatArray, thr: FloatArray) -> IntArray:
        """Make the model's jobs those of ``keys`` (a key names a job and its throughput row:
        a job whose row changes needs a new key); returns their slots in ``keys`` order.
        ``scales`` (n,) and ``thr`` (n, K) are read for new keys only."""
        slot_of = self._slot_of
        present = set(keys)
        gone = [s for key, s in slot_of.items() if key not in present]
        alive = len(keys)
        if len(self._alive) - alive + sum(1 for key in keys if key not in slot_of) \
                > alive + _SPARE_SLOTS and gone:
            self._rebuild(keys, scales, thr)
            return np.asarray([self._slot_of[key] for key in keys], dtype=np.int64)
        self._retire(gone)
        for key in [key for key, s in slot_of.items() if not self._alive[s]]:
            del slot_of[key]
        new = [i for i, key in enumerate(keys) if key not in slot_of]
        if new:
            first = len(self._alive)
            for offset, i in enumerate(new):
                slot_of[keys[i]] = first + offset
            self._add_slots(np.asarray(scales, dtype=float)[new],
                            np.asarray(thr, dtype=float)[new])
        return np.asarray([slot_of[key] for key in keys], dtype=np.int64)

    def _rebuild(self, keys: Sequence[Hashable], scales: FloatArray, thr: FloatArray) -> None:
        """A fresh model with the slots of ``keys`` only (the basis is lost once)."""
        self._slot_of = {key: i for i, key in enumerate(keys)}
        self._reset_model()
        self._add_slots(np.asarray(scales, dtype=float), np.asarray(thr, dtype=float))

    def set_lead(self, slots: IntArray, coefficients: FloatArray,
                 upper: FloatArray | None = None) -> None:
        """c_j of the given slots and, when given, the lead rows' upper bounds (instead of 0:
        c_j v - thr_j <= upper_j); only the values that differ reach the solver."""
        coefficients = np.asarray(coefficients, dtype=float)
        changed = np.flatnonzero(self._lead[slots] != coefficients)
        if len(changed):
            self.model.set_coefficients(self._lead_row[slots[changed]], 0,
                                        coefficients[changed])
            self._lead[slots[changed]] = coefficients[changed]
        if upper is not None:
            upper = np.asarray(upper, dtype=float)
            moved = np.flatnonzero(self._upper[slots] != upper)
            if len(moved):
                self.model.set_row_bounds(self._lead_row[slots[moved]], -np.inf, upper[moved])
                self._upper[slots[moved]] = upper[moved]

    def set_multiplicity(self, slots: IntArray, multiplicity: FloatArray) -> None:
        """Let slot j stand for m_j identical jobs that all get its X (a class of jobs): its
        capacity coefficients become s_j m_j (times the column's direction); only the slots
        whose m_j changed reach the solver."""
        multiplicity = np.asarray(multiplicity, dtype=float)
        changed = np.flatnonzero(self._multiplicity[slots] != multiplicity)
        if not len(changed):
            return
        rows: list[int] = []
        cols: list[int] = []
        values: list[float] = []
        for i in changed.tolist():
            slot = int(slots[i])
            factor = self._scale[slot] * multiplicity[i]
            for col in self._slot_cols[slot].tolist():
                direction = self._col_direction[col - 1]
                for k in np.flatnonzero(direction).tolist():
                    rows.append(k)
                    cols.append(col)
                    values.append(factor * float(direction[k]))
            self._multiplicity[slot] = multiplicity[i]
        if rows:
            self.model.set_coefficients(rows, cols, values)

    def lead_duals(self, slots: IntArray) -> FloatArray:
        """The dual values of the given slots' lead rows after the last solve."""
        return self.model.row_duals()[self._lead_row[slots]]

    def best_rate(self, slots: IntArray) -> FloatArray:
        """max over a slot's columns of thr_j per unit of the column (its throughput with
        the whole share on its best column; 0 without columns), per slot."""
        best = np.zeros(len(self._alive))
        if len(self._col_slot):
            np.maximum.at(best, self._col_slot, self._col_thr)
        return best[slots]

    def set_floor(self, slots: IntArray, lower: FloatArray) -> None:
        """Lower bounds of the floor rows thr_j(X) >= lower_j (``floor_rows`` only)."""
        lower = np.asarray(lower, dtype=float)
        moved = np.flatnonzero(self._floor[slots] != lower)
        if len(moved):
            self.model.set_row_bounds(self._floor_row[slots[moved]], lower[moved], np.inf)
            self._floor[slots[moved]] = lower[moved]

    def set_column_costs(self, columns: IntArray, costs: FloatArray) -> None:
        """Objective coefficients of the given columns (0 is v); only changes are sent."""
        changed = np.flatnonzero(self._cost[columns] != costs)
        if len(changed):
            self.model.set_costs(columns[changed], costs[changed])
            self._cost[columns[changed]] = costs[changed]

    def set_objective(self, slots: IntArray, thr_weight: FloatArray, v_cost: float) -> None:
        """Objective v_cost v + sum_j thr_weight_j thr_j(X) over the given slots (every other
        column's cost 0)."""
        weight = np.zeros(len(self._alive))
        weight[slots] = thr_weight
        costs = np.concatenate([[v_cost], weight[self._col_slot] * self._col_thr])
        self.set_column_costs(np.arange(len(costs), dtype=np.int64), costs)

    # solve ----------------------------------------------------------------------------------
    def solve(self, slots: IntArray) -> tuple[float, FloatArray]:
        """(v*, X (n, K) of the given slots) from a warm re-solve (from scratch when the warm
        one ends without a proof); a SolverError when that fails too."""
        model = self.model
        model.solve_proven("the per-job LP")
        values = model.values()
        x = np.zeros((len(self._alive), len(self.types)))
        if len(self._col_slot):
            np.add.at(x, self._col_slot, np.maximum(values[1:], 0.0)[:, None]
                      * self._col_direction)
        return float(values[0]), np.minimum(x[slots], 1.0)


# ----------------------------------------------------------------------------- policies


class MakespanLP:
    r"""Min-makespan as one LP in y = 1 / makespan: max y s.t. thr_j(X) >= R_j y for jobs with
    R_j > 0 (a job with none left has c_j = 0, so its row always holds, as the reference
    leaves it out).

    Scaled: :class:`JobLeadLP` holds v = S y with S = max_j R_j, so c_j = R_j / S <= 1 and v is
    of the order of the throughputs.  Unscaled (the reference's form), y is ~1e-6 /s for jobs
    of 1e6-1e7 steps, a 1% better makespan moves the objective by ~1e-8, below the simplex
    method's optimality tolerance, and HiGHS stops up to ~1% short of the optimum."""

    def __init__(self, types: list[str], gpus: FloatArray, *, heterogeneity_aware: bool = True,
                 options: SolverOptions | None = None) -> None:
        self.lp = JobLeadLP(types, gpus, heterogeneity_aware=heterogeneity_aware,
                            options=options)

    def solve(self, keys: Sequence[Hashable], data: GavelData) -> tuple[float, FloatArray]:
        """(makespan 1/y* in s (inf when y* = 0), X (n, K)) for the jobs of ``data``."""
        slots = self.lp.sync(keys, data.scale_factor, data.throughput)
        remaining = np.maximum(data.remaining_steps, 0.0)
        scale = float(remaining.max()) if len(remaining) else 0.0
        if scale <= 0:
            scale = 1.0
        self.lp.set_lead(slots, remaining / scale)
        v, x = self.lp.solve(slots)
        return (scale / v if v > 0 else float("inf")), x


@dataclass
class SearchStats:
    """Counters of the last :meth:`FinishTimeSearch.solve`: LPs solved, the proven lower
    bound and the attained upper bound on min max rho, and why it stopped early (if so)."""

    steps: int = 0
    lower: float = 0.0
    upper: float = 0.0
    stopped: str | None = None


class FinishTimeSearch:
    r"""Finish-time fairness: min over X of max_j rho_j(X), on a persistent
    :class:`JobLeadLP`.

    rho_j(X) = (t_j thr_j(X) + R_j) / (D_j thr_j(X)) is a ratio of two affine functions of X
    (D_j, t_j, R_j and rho from :class:`~schedlab.formulations.gavel.models.FinishTimeFairness`:
    its ``terms``, ``rho`` and ``start_allocation`` are called, so every quantity is the
    reference's own).  Minimizing the largest ratio is a generalized fractional program,
    solved by the Dinkelbach-type method of Crouzeix, Ferland and Schaible (1985): at a trial
    value lambda and with weights w_j > 0,

    .. math::

        F(\lambda) = \max_{X,v} v \quad\text{s.t.}\quad
        (\lambda D_j - t_j)\,\mathrm{thr}_j(X) - R_j \ge w_j v \quad (R_j > 0)

    (in the model: c_j = w_j / a_j, a_j = lambda D_j - t_j, upper bound -R_j / a_j).
    F(lambda) >= 0 exactly when some X has max rho <= lambda.  Each LP's X is an allocation,
    so max rho(X) is an upper bound (hi); the next trial is lambda = hi with
    w_j = D_j thr_j(X) (superlinear convergence).  F(lambda) < 0 proves lambda < lambda*, and
    more: lambda* >= lambda - F(lambda) / max_j(D_j T_best,j / w_j) (a lower bound lo).
    When an iteration no longer lowers hi by tol / 2 (relative), the trial is a *probe*
    hi (1 - tol / 2): F < 0 there closes the bracket.  The search starts from the last
    decision's optimum when it lies in the first bracket (the reference's: hi = max rho of
    Gavel's isolated allocation, lo = max rho of every job alone on its best type), and stops
    by the reference's rule, hi - lo <= tol hi (``params.fairness_tolerance``), so the result's
    max rho is within that relative tolerance of the optimum, as the reference's bisection is.
    After :data:`_CFS_STEPS` trials without closing, trials alternate with the bisection
    midpoint (the bracket then halves every two trials).
    """

    #: most LPs per decision (as the reference's cap on bisection steps)
    max_steps = FinishTimeFairness.max_steps

    def __init__(self, formulation: FinishTimeFairness, types: list[str], gpus: FloatArray, *,
                 options: SolverOptions | None = None) -> None:
        self.form = formulation
        self.lp = JobLeadLP(types, gpus, heterogeneity_aware=formulation.heterogeneity_aware,
                            v_lower=-np.inf, options=options)
        self.last_rho: float | None = None
        self.stats = SearchStats()

    def solve(self, keys: Sequence[Hashable], data: GavelData, tolerance: float
              ) -> tuple[float, FloatArray]:
        """(max rho of the returned allocation, X (n, K)) for the jobs of ``data``."""
        form = self.form
        slots = self.lp.sync(keys, data.scale_factor, data.throughput)
        t_in, denom = form.terms(data)
        remaining = data.remaining_steps
        busy = remaining > 0
        best_x = form.start_allocation(data)
        stats = SearchStats()
        self.stats = stats
        if not busy.any():
            return 0.0, best_x

        def rho_of(x: FloatArray) -> tuple[float, FloatArray]:
            thr = effective_throughput(data, x)
            return float(rho_isolated_share(t_in, remaining, thr, denom)[busy].max()), thr

        hi, thr_best = rho_of(best_x)
        best_thr = data.best_throughput()
        lo = float(rho_isolated_share(t_in, remaining, best_thr, denom)[busy].max())
        weights = np.where(busy, denom * np.maximum(thr_best, 1e-12), 1.0)
        trial = hi
        if self.last_rho is not None and lo < self.last_rho < hi:
            trial = self.last_rho
        bisect = False
        while hi - lo > tolerance * hi:
            if stats.steps >= self.max_steps:
                stats.stopped = f"search stopped at its cap of {self.max_steps} LPs"
                break
            scale = trial * denom - t_in  # > 0 for busy jobs: trial > lo >= t_j / D_j
            coef = np.where(busy, weights / np.where(busy, scale, 1.0), 0.0)
            upper = np.where(busy, -remaining / np.where(busy, scale, 1.0), np.inf)
            self.lp.set_lead(slots, coef, upper)
            value, x = self.lp.solve(slots)
            stats.steps += 1
            if value < 0.0:  # proven: no allocation reaches max rho <= trial
                bound = float(np.max(np.where(busy, denom * best_thr / weights, 0.0)))
                lo = max(lo, trial - value / bound if bound > 0 else trial)
            before = hi
            rho_x, thr_x = rho_of(x)
            if rho_x < hi:
                hi, best_x = rho_x, x
                weights = np.where(busy, denom * np.maximum(thr_x, 1e-12), 1.0)
            if stats.steps >= _CFS_STEPS:
                bisect = not bisect
            if bisect:
                trial = 0.5 * (lo + hi)
            elif before - hi > 0.5 * tolerance * hi:
                trial = hi  # a Dinkelbach step
            else:
                trial = hi * (1.0 - 0.5 * tolerance)  # a probe
            if not lo < trial <= hi:
                trial = 0.5 * (lo + hi)
        stats.lower, stats.upper = lo, hi
        self.last_rho = hi
        return hi, best_x


#: Trials of the Dinkelbach-type iteration before they alternate with bisection.
_CFS_STEPS = 12
