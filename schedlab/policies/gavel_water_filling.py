r"""Gavel's hierarchical policy (fairness inside entities) on one persistent LP over job classes.

The reference is :class:`~schedlab.formulations.gavel.hierarchical.Hierarchical` with
``hierarchy_within_entity = "fairness"``: every job j is a group of weight
omega_j = W_e w_j / sum_{i in e} w_i, with value v_j(X) = s_j thr_j(X) / T_eq[j], and
water-filling raises the levels:

1. ``level`` LP: max t s.t. v_g >= omega_g t (active g), v_g >= L_g (every frozen g);
2. L_g = omega_g t* for the bottlenecks of that level (the active groups that cannot rise
   above omega_g t* while every group keeps its floor), which are frozen; repeat until every
   group is frozen;
3. finally max sum_j v_j with every floor kept.

The values v_j this reaches are the weighted lexicographic max-min (leximin) vector of the
polytope {X >= 0: sum_k X_jk <= 1, sum_j s_j X_jk <= n_k}, which is unique.  Two consequences
give the same values with far fewer, smaller LPs:

* **Classes.** Jobs with the same s_j, throughput row and omega_j are interchangeable in every
  LP above, and the leximin vector is unique, so they have equal values.  The LP is kept over
  classes: one representative per class with per-job shares x_ck (sum_k x_ck <= 1) and
  capacity coefficients s_c m_c (m_c active jobs of the class all get x_c), which is the
  per-job LP restricted to symmetric allocations; averaging any per-job solution over the
  permutations of a class's jobs keeps every row of every LP above (they are symmetric in the
  class) and every objective used here, so each LP has the same optimal value over classes.
* **Bottlenecks from duals.** At the optimum t* of a level LP with dual values y_g >= 0 of the
  level rows (sum_g y_g omega_g = 1), duality gives sum_g y_g (v_g - omega_g t*) +
  sum_h z_h (v_h - L_h) <= 0 for every X of the polytope, so a group with y_g > 0 cannot rise
  above omega_g t* while the others keep their floors: it is a bottleneck, and at least one
  group has y_g > 0.  A group whose cap v_g^max / omega_g (the whole share on its best type)
  is <= t* is one as well.  Bottlenecks that the LP's duals do not show (degenerate LPs) stay
  active; the next level LP then returns the same t* and its duals name them.  Each level LP
  freezes at least one class, so a decision takes at most (classes + 1) LPs, in practice a
  few.  Should an LP's duals name none (numerical noise), the reference's test decides:
  maximize the sum of the undecided groups' values; a group that rises above its floor by more
  than the reference's margin (L_g (1 + 20 slack) + 20 slack) is no bottleneck; when none
  rises, all are; when every group rises, all are frozen (the reference's fallback, logged
  and counted in ``fallbacks``).

The floors (each level lowered by the relative ``slack``, raised tenfold after an LP that the
solver calls infeasible at the edge of its tolerance) are the reference's.

The model is a :class:`~schedlab.policies.gavel_job_lp.JobLeadLP` with floor rows whose slots
are classes: t is its column v, the level rows are its lead rows (c_j = omega_j / (s_j /
T_eq[j]) while g is active, 0 when frozen), a class's size m_c enters through
:meth:`~schedlab.policies.gavel_job_lp.JobLeadLP.set_multiplicity`, and the floors and
objectives are changed in place between the LPs of one decision and across decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

from schedlab.errors import SolverError
from schedlab.formulations.gavel.data import FloatArray, GavelData
from schedlab.formulations.gavel.hierarchical import _FLOOR_SLACK, _MAX_SLACK
from schedlab.policies.gavel_job_lp import JobLeadLP
from schedlab.solution import Status
from schedlab.solvers import SolverOptions

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class WaterFilling:
    """Hierarchical max-min fairness (fairness inside entities) on a persistent class LP
    (module docstring)."""

    def __init__(self, types: list[str], gpus: FloatArray, *, heterogeneity_aware: bool = True,
                 options: SolverOptions | None = None) -> None:
        self.lp = JobLeadLP(types, gpus, heterogeneity_aware=heterogeneity_aware,
                            floor_rows=True, options=options)
        #: LPs solved by the last :meth:`solve`, its levels t*, its number of classes
        self.lps = 0
        self.levels: list[float] = []
        self.classes = 0
        #: decisions (over the object's life) that froze every group without a bottleneck
        self.fallbacks = 0
        self._slack = _FLOOR_SLACK
        self._t = 0.0
        self._x = np.zeros((0, len(types)))
        #: the first level of the last decision at which a class froze below its cap
        #: (every class capped: inf), the next decision's guess
        self._pool_level = 0.0
        #: decisions whose guess of the capped classes held
        self.guessed = 0

    def solve(self, keys: Sequence[Hashable], data: GavelData, omega: FloatArray
              ) -> tuple[float, FloatArray]:
        """(min_g v_g / omega_g of the returned allocation -- the first level, X (n, K)) for
        the jobs of ``data`` with group weights ``omega`` (n,).  ``keys`` (the jobs' ids) is
        not read: the model's slots are classes, named by (s_j, throughput row, omega_j)."""
        del keys
        lp = self.lp
        n = data.num_jobs
        self.lps = 0
        self.levels = []
        if n == 0:
            self.classes = 0
            return 0.0, np.zeros((0, len(data.types)))
        teq = data.equal_share_throughput()
        coef_job = data.scale_factor / np.where(teq > 0, teq, 1.0)  # v_j = coef_j thr_j
        table = np.column_stack([data.scale_factor, data.throughput, omega])
        _, first, inverse, counts = np.unique(table, axis=0, return_index=True,
                                              return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        self.classes = len(first)
        class_keys = [tuple(row) for row in table[first].tolist()]
        thr = data.throughput[first]
        slots = lp.sync(class_keys, data.scale_factor[first], thr)
        lp.set_multiplicity(slots, counts.astype(float))
        coef = coef_job[first]
        weight = np.asarray(omega, dtype=float)[first]
        x_class = self._water_fill(slots, coef, weight, counts.astype(float), thr)
        x = x_class[inverse]
        # the reference's objective: min_g v_g / omega_g of the returned allocation
        value = coef_job * (data.throughput * x).sum(axis=1)
        weighted = omega > 0
        first_level = (float((value[weighted] / omega[weighted]).min()) if weighted.any()
                       else 0.0)
        return first_level, x

    def _water_fill(self, slots: IntArray, coef: FloatArray, omega: FloatArray,
                    counts: FloatArray, thr: FloatArray) -> FloatArray:
        """The levels of the classes (module docstring) and the final allocation x (per job
        of each class, (C, K))."""
        lp = self.lp
        num = len(slots)
        level = np.zeros(num)  # L_c reached so far (in v); 0 while active
        active = omega > 0
        self._slack = _FLOOR_SLACK

        def run(objective: FloatArray, v_cost: float, retry: bool = True) -> FloatArray:
            """Solve with the current floors (with ``retry``, relaxed tenfold while the solver
            calls them infeasible, up to the reference's limit); keeps t in ``self._t``."""
            lp.set_objective(slots, objective, v_cost)
            while True:
                slack = self._slack
                floor_v = level - slack * np.maximum(1.0, np.abs(level))
                lp.set_floor(slots, np.where(level > 0, floor_v / coef, -np.inf))
                try:
                    t, x = lp.solve(slots)
                except SolverError:
                    if not retry or slack >= _MAX_SLACK or lp.model.last is None \
                            or lp.model.last.status != Status.INFEASIBLE:
                        raise
                    self._slack = slack * 10
                    log.debug("water-filling: floors relaxed to %g (relative)", self._slack)
                    continue
                self.lps += 1
                self._t = t
                self._x = x
                return x

        vmax = coef * lp.best_rate(slots)
        cap = np.divide(vmax, omega, out=np.full(num, np.inf), where=omega > 0)
        zeros = np.zeros(num)
        # Guess: the classes whose caps lie below the last decision's first pool level sit
        # at their caps.  The level LP with them held there (floors at v^max) and the others
        # rising is kept when it proves the guess (module docstring), else undone.
        guess = active & (cap < self._pool_level)
        pending = False  # a level LP with the current floors and leads has been solved
        if guess.any() and (active & ~guess).any():
            level[guess] = vmax[guess]
            lp.set_lead(slots, np.where(active & ~guess, omega / coef, 0.0))
            try:
                run(zeros, 1.0, retry=False)
                pending = bool(cap[guess].max() <= self._t * (1 + 1e-9))
            except SolverError:
                last = lp.model.last
                if last is None or last.status != Status.INFEASIBLE:
                    raise
                pending = False  # the caps held together are infeasible: a wrong guess
            if pending:
                active &= ~guess
                self.guessed += 1
            else:
                level[guess] = 0.0
        pool_level: float | None = None
        while active.any():
            lead = np.where(active, omega / coef, 0.0)
            if not pending:
                lp.set_lead(slots, lead)
                run(zeros, 1.0)
            pending = False
            t_star = self._t
            fraction = np.abs(lp.lead_duals(slots)) * lead  # sums to 1 over the active
            at_cap = cap <= t_star * (1 + 1e-9)
            bottleneck = active & ((fraction > _DUAL_TOL) | at_cap)
            if not bottleneck.any():
                bottleneck = self._by_sum_test(run, slots, level, active, omega, coef, thr,
                                               t_star)
            if pool_level is None and (bottleneck & ~at_cap).any():
                pool_level = t_star
            if not self.levels or t_star != self.levels[-1]:
                self.levels.append(t_star)
            level[bottleneck] = omega[bottleneck] * t_star
            active &= ~bottleneck
        self._pool_level = pool_level if pool_level is not None else np.inf
        # The reference ends with max sum_j v_j with every floor kept; with every group
        # frozen no group can rise above its level, so the last LP's allocation (every floor
        # kept, each value at its level) is already an optimum of that LP.
        return self._x

    def _by_sum_test(self, run: Callable[[FloatArray, float], FloatArray], slots: IntArray,
                     level: FloatArray, active: BoolArray, omega: FloatArray, coef: FloatArray,
                     thr: FloatArray, t_star: float) -> BoolArray:
        """The bottlenecks of level t* by the reference's margin (module docstring), when no
        dual names one; ``level`` is left as it was."""
        saved = level.copy()
        level[active] = omega[active] * t_star
        undecided = active.copy()
        try:
            self.lp.set_lead(slots, np.zeros(len(level)))
            while undecided.any():
                x = run(np.where(undecided, coef, 0.0), 0.0)
                value = coef * (thr * x).sum(axis=1)
                margin = 20 * self._slack
                rose = undecided & (value > level * (1 + margin) + margin)
                if not rose.any():
                    return undecided
                undecided &= ~rose
        finally:
            level[:] = saved
        self.fallbacks += 1
        log.warning("water-filling: no bottleneck found at level %g; every remaining group "
                    "frozen there (the reference's fallback)", t_star)
        return active.copy()


#: A level row whose dual value (times its coefficient: the fractions sum to 1) exceeds
#: this names a bottleneck.
_DUAL_TOL = 1e-9
