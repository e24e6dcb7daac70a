r"""Gavel LPs over job classes, kept in one persistent solver model between decisions.

Jobs with the same scale factor s_c, weight w_c and throughput row T_c (the only job data the
LPs below read) form a class c with m_c active jobs.  For an LP whose objective and rows are
the same for every job of a class (max-min fairness, the sum of throughputs), an optimum
exists in which a class's jobs get equal shares (average any optimum over the permutations of
a class's jobs: the LP is convex and symmetric in them), so the LP over classes -- one column
Z_ck per class and type holding the class's *total* share, the class size m_c in its rows --
has the optimum of the per-job LP, and X_jk = Z_ck / m_c is one of its optimal allocations
(``docs/fast_paths.md`` gives the argument for max-min fairness).  A change of the job set
changes m_c: two numbers per class (max-min fairness) or one (sum of throughputs), and the
model is re-solved from its last basis.

* :class:`MaxMinClassLP` -- Gavel's weighted max-min fairness (``gavel.max_min_fairness``);
* :class:`SumThroughputClassLP` -- the sum of throughputs (``gavel.max_sum_throughput``, its
  cost and best-type-normalized variants, ``gavel.min_cost``), without SLO rows (an SLO row
  reads a job's remaining steps, so such jobs are no class: the adapter solves decisions with
  SLO jobs by the reference model).

Heterogeneity-agnostic variants (one column Z_c whose time lands on the allowed types in
proportion to n_k) are the type-blind rows of :mod:`schedlab.formulations.gavel.base` with
X eliminated: X_ck = Z_c n_k / N_c, N_c = sum of n_k over the allowed types.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from schedlab.solvers import SolverOptions
from schedlab.solvers.matrix import matrix_model

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Classes without active jobs the persistent LP keeps before it is rebuilt without them.
_MAX_IDLE_CLASSES = 64


# ------------------------------------------------------------------ max-min fairness


class MaxMinClassLP:
    r"""Gavel's max-min fairness LP over job classes, kept in one persistent LP.

    Class c (jobs with equal s_c, w_c and throughput row T_c) has m_c active jobs and
    a_c = s_c / (w_c T_eq[c]), T_eq[c] = sum_k T_ck n_k / N.  Variables: t and, per class,
    Z_ck = the class's *total* share on type k (heterogeneity-aware: one column per allowed
    type; agnostic: one column Z_c whose time lands on the allowed types in proportion to
    n_k, X_ck = Z_c n_k / N_c, N_c = sum of n_k over the allowed types).

    .. math::

        \max t \quad\text{s.t.}\quad
        \text{fair}_c:\; a_c \sum_k T_{ck} Z_{ck} - m_c t \ge 0,\qquad
        \text{share}_c:\; \sum_k Z_{ck} \le m_c,\qquad
        \text{capacity}_k:\; \sum_c s_c Z_{ck} \le n_k

    Each job of class c gets X_jk = Z_ck / m_c.  Only ``fair_c``'s coefficient of t and
    ``share_c``'s bound depend on m_c, so a change of the job set changes two numbers per
    class and the model is re-solved from its last basis.  A class with m_c = 0 is inert
    (its Z is forced to 0 and its row holds trivially); when more than
    :data:`_MAX_IDLE_CLASSES` classes are idle the model is rebuilt without them.

    The model is a :class:`~schedlab.solvers.matrix.MatrixModel` of the solver ``options``
    name (HiGHS by default, presolve off: the warm re-solves are a few dual simplex
    iterations), with the options' threads, LP method and seed and no time limit.
    """

    def __init__(
        self,
        types: list[str],
        gpus: FloatArray,
        *,
        heterogeneity_aware: bool = True,
        threads: int | None = None,
        options: SolverOptions | None = None,
    ) -> None:
        self.types = types
        self.gpus = np.asarray(gpus, dtype=float)
        self.aware = heterogeneity_aware
        # no time limit: a warm re-solve takes a fraction of a millisecond, and a limit
        # could only turn it into a failed decision
        opts = replace(options or SolverOptions(), time_limit_s=None)
        if threads is not None:
            opts = replace(opts, threads=threads)
        self.options = opts
        self._keys: dict[tuple[float, float, bytes], int] = {}
        self._rows: list[tuple[float, float, FloatArray]] = []  # (s, w, T) per class
        self._reset_model()

    @property
    def backend(self) -> str:
        """The solver holding the model (``highs``, ``gurobi``)."""
        return self.model.backend

    # model --------------------------------------------------------------------------
    def _reset_model(self) -> None:
        model = matrix_model(self.options, presolve=False)
        model.add_columns([0.0], [np.inf], [1.0])  # t
        model.set_sense("maximize")
        model.add_rows(np.full(len(self.types), -np.inf), self.gpus)  # capacity_k, filled later
        self.model = model
        self._fair_row: list[int] = []
        self._share_row: list[int] = []
        self._col_class: list[int] = []
        self._col_direction: list[FloatArray] = []  # X per unit of Z, per type
        self._scatter: tuple[IntArray, IntArray, FloatArray] | None = None
        self._counts = np.zeros(0)
        for c in range(len(self._rows)):
            self._add_to_model(c)

    def _add_to_model(self, c: int) -> None:
        """Rows fair_c, share_c and the columns Z_c of class c (count 0)."""
        model = self.model
        scale, weight, thr = self._rows[c]
        n = self.gpus
        allowed = (thr > 0) & (scale <= n)
        thr = np.where(allowed, thr, 0.0)
        teq = float((thr * n).sum() / n.sum())
        a = scale / (weight * teq) if teq > 0 else 0.0
        fair, share = model.add_rows([0.0, -np.inf], [np.inf, 0.0]).tolist()
        self._fair_row.append(fair)
        self._share_row.append(share)
        num_types = len(self.types)
        if self.aware:
            ks = np.flatnonzero(allowed)
            width = len(ks)
            rows = np.column_stack([np.full(width, fair), np.full(width, share), ks])
            values = np.column_stack([a * thr[ks], np.ones(width), np.full(width, scale)])
            model.add_columns(np.zeros(width), np.full(width, np.inf), 0.0,
                              starts=np.arange(0, 3 * width + 1, 3), rows=rows.reshape(-1),
                              values=values.reshape(-1))
            self._col_class.extend([c] * width)
            self._col_direction.extend(np.eye(num_types)[ks])
        elif allowed.any():
            pool = float(n[allowed].sum())
            direction = np.where(allowed, n / pool, 0.0)
            ks = np.flatnonzero(allowed)
            rows = np.concatenate(([fair, share], ks))
            values = np.concatenate(([a * float((thr * direction).sum()), 1.0],
                                     scale * direction[ks]))
            model.add_columns([0.0], [np.inf], 0.0, starts=[0, len(rows)], rows=rows,
                              values=values)
            self._col_class.append(c)
            self._col_direction.append(direction)
        self._counts = np.append(self._counts, 0.0)
        self._scatter = None

    def _scatter_arrays(self) -> tuple[IntArray, IntArray, FloatArray]:
        """(class, type and X per unit of Z per type (ncols, K)) of each Z column, cached."""
        if self._scatter is None:
            num_types = len(self.types)
            direction = np.asarray(self._col_direction, dtype=float).reshape(-1, num_types)
            self._scatter = (
                np.asarray(self._col_class, dtype=np.int64),
                np.argmax(direction, axis=1).astype(np.int64),
                direction,
            )
        return self._scatter

    def class_of(self, scale: float, weight: float, throughput: FloatArray) -> int:
        """The class id of a job (a new class is added to the model when needed)."""
        thr = np.asarray(throughput, dtype=float)
        key = (float(scale), float(weight), thr.tobytes())
        c = self._keys.get(key)
        if c is None:
            c = len(self._rows)
            self._keys[key] = c
            self._rows.append((float(scale), float(weight), thr.copy()))
            self._add_to_model(c)
        return c

    @property
    def num_classes(self) -> int:
        """Classes in the model (with or without active jobs)."""
        return len(self._rows)

    def compact(self, counts: IntArray) -> IntArray | None:
        """Rebuild without idle classes when too many are idle; returns old -> new class ids
        (-1: dropped), or None when nothing changed."""
        idle = self.num_classes - int(np.count_nonzero(counts[: self.num_classes]))
        if idle <= _MAX_IDLE_CLASSES:
            return None
        keep = np.flatnonzero(counts[: self.num_classes] > 0)
        remap = np.full(self.num_classes, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        self._rows = [self._rows[c] for c in keep]
        self._keys = {k: int(remap[c]) for k, c in self._keys.items() if remap[c] >= 0}
        self._reset_model()
        return remap

    # solve ----------------------------------------------------------------------------
    def solve(self, counts: IntArray) -> tuple[float, FloatArray]:
        """(t*, X per job of each class (C, K)) for class sizes ``counts`` (C,)."""
        model = self.model
        num_classes = self.num_classes
        m = counts[:num_classes].astype(float)
        if len(m) < num_classes:
            m = np.concatenate([m, np.zeros(num_classes - len(m))])
        changed = np.flatnonzero(m != self._counts)
        if len(changed):
            sizes = m[changed]
            model.set_coefficients(np.asarray(self._fair_row)[changed], 0, -sizes)
            model.set_row_bounds(np.asarray(self._share_row)[changed], -np.inf, sizes)
        self._counts = m
        num_types = len(self.types)
        total = np.zeros((num_classes, num_types))
        if not m.any():
            return 0.0, total
        model.solve_proven("the max-min fairness LP")
        values = model.values()
        t = float(values[0])
        z = np.maximum(values[1:], 0.0)
        col_class, col_type, direction = self._scatter_arrays()
        if self.aware:  # one column per (class, type)
            total[col_class, col_type] = z
        elif len(z):  # one column per class
            total[col_class] = z[:, None] * direction
        per_job = np.divide(total, m[:, None], out=total, where=m[:, None] > 0)
        return t, np.minimum(per_job, 1.0, out=per_job)


# ------------------------------------------------------------------ sum of throughputs


def sum_throughput_row(
    throughput: FloatArray,
    scale: float,
    prices: FloatArray | None,
    normalize: str,
) -> FloatArray:
    """The objective's coefficient of X[j,k] for one job (K,), as
    :func:`schedlab.formulations.gavel.data.sum_throughput_coefficients`: T[j,k] / c_k
    (c_k = 1 without prices); with ``normalize="best_type"`` T[j,k] / (T_best [* s_j c_k]).
    ``throughput`` is 0 on the types the job cannot use."""
    coef = np.asarray(throughput, dtype=float).copy()
    if normalize == "best_type":
        best = float(coef.max()) if coef.size else 0.0
        coef = coef / best if best > 0 else np.zeros_like(coef)
        if prices is not None:
            coef = coef / scale
    elif normalize != "none":
        raise ValueError(f"unknown normalization {normalize!r}")
    if prices is not None:
        coef = np.divide(coef, prices, out=np.zeros_like(coef), where=prices > 0)
    return coef


class SumThroughputClassLP(MaxMinClassLP):
    r"""The sum of throughputs (Gavel's ``ThroughputSumWithPerf``; per dollar:
    ``ThroughputNormalizedByCostSumWithPerfSLOs`` without SLOs) over job classes.

    .. math::

        \max \sum_c \sum_k \mathrm{coef}_{ck} Z_{ck} \quad\text{s.t.}\quad
        \text{share}_c:\; \sum_k Z_{ck} \le m_c,\qquad
        \text{capacity}_k:\; \sum_c s_c Z_{ck} \le n_k

    coef_ck from :func:`sum_throughput_row` (``prices`` = c_k in $/GPU-hour for the cost
    variants, ``normalize`` = ``none`` or ``best_type``).  The per-job LP's objective and rows
    are sums over jobs of the same terms, so Z_ck = sum of X_jk over the class's jobs maps
    optima onto optima and X_jk = Z_ck / m_c is optimal for the per-job LP.  Only
    ``share_c``'s bound depends on m_c.
    """

    def __init__(
        self,
        types: list[str],
        gpus: FloatArray,
        *,
        prices: FloatArray | None = None,
        normalize: str = "none",
        heterogeneity_aware: bool = True,
        threads: int | None = None,
        options: SolverOptions | None = None,
    ) -> None:
        self.prices = None if prices is None else np.asarray(prices, dtype=float)
        self.normalize = normalize
        super().__init__(types, gpus, heterogeneity_aware=heterogeneity_aware, threads=threads,
                         options=options)

    def _reset_model(self) -> None:
        model = matrix_model(self.options, presolve=False)
        model.set_sense("maximize")
        model.add_rows(np.full(len(self.types), -np.inf), self.gpus)  # capacity_k
        self.model = model
        self._fair_row: list[int] = []
        self._share_row: list[int] = []
        self._col_class: list[int] = []
        self._col_direction: list[FloatArray] = []
        self._scatter: tuple[IntArray, IntArray, FloatArray] | None = None
        self._counts = np.zeros(0)
        for c in range(len(self._rows)):
            self._add_to_model(c)

    def _add_to_model(self, c: int) -> None:
        """Row share_c and the columns Z_c of class c (count 0)."""
        model = self.model
        scale, _, thr = self._rows[c]
        n = self.gpus
        allowed = (thr > 0) & (scale <= n)
        thr = np.where(allowed, thr, 0.0)
        coef = sum_throughput_row(thr, scale, self.prices, self.normalize)
        share = int(model.add_rows([-np.inf], [0.0])[0])
        self._share_row.append(share)
        num_types = len(self.types)
        if self.aware:
            ks = np.flatnonzero(allowed)
            width = len(ks)
            rows = np.column_stack([np.full(width, share), ks])
            values = np.column_stack([np.ones(width), np.full(width, scale)])
            model.add_columns(np.zeros(width), np.full(width, np.inf), coef[ks],
                              starts=np.arange(0, 2 * width + 1, 2), rows=rows.reshape(-1),
                              values=values.reshape(-1))
            self._col_class.extend([c] * width)
            self._col_direction.extend(np.eye(num_types)[ks])
        elif allowed.any():
            pool = float(n[allowed].sum())
            direction = np.where(allowed, n / pool, 0.0)
            ks = np.flatnonzero(allowed)
            rows = np.concatenate(([share], ks))
            values = np.concatenate(([1.0], scale * direction[ks]))
            model.add_columns([0.0], [np.inf], [float((coef * direction).sum())],
                              starts=[0, len(rows)], rows=rows, values=values)
            self._col_class.append(c)
            self._col_direction.append(direction)
        self._counts = np.append(self._counts, 0.0)
        self._scatter = None

    def solve(self, counts: IntArray) -> tuple[float, FloatArray]:
        """(the optimal sum, X per job of each class (C, K)) for class sizes ``counts``."""
        model = self.model
        num_classes = self.num_classes
        m = counts[:num_classes].astype(float)
        if len(m) < num_classes:
            m = np.concatenate([m, np.zeros(num_classes - len(m))])
        changed = np.flatnonzero(m != self._counts)
        if len(changed):
            model.set_row_bounds(np.asarray(self._share_row)[changed], -np.inf, m[changed])
        self._counts = m
        num_types = len(self.types)
        total = np.zeros((num_classes, num_types))
        if not m.any() or model.num_columns == 0:
            return 0.0, total
        result = model.solve_proven("the sum-of-throughputs LP")
        z = np.maximum(model.values(), 0.0)
        col_class, col_type, direction = self._scatter_arrays()
        if self.aware:
            total[col_class, col_type] = z
        elif len(z):
            total[col_class] = z[:, None] * direction
        per_job = np.divide(total, m[:, None], out=total, where=m[:, None] > 0)
        return float(result.objective or 0.0), np.minimum(per_job, 1.0, out=per_job)
