r"""Gavel's hierarchical policy (fairness inside entities) on one persistent per-job LP.

The reference is :class:`~schedlab.formulations.gavel.hierarchical.Hierarchical` with
``hierarchy_within_entity = "fairness"``: every job j is a group of weight
omega_j = W_e w_j / sum_{i in e} w_i, with value v_j(X) = s_j thr_j(X) / T_eq[j], and
water-filling raises the levels:

1. ``level`` LP: max t s.t. v_g >= omega_g t (active g), v_g >= L_g (every g);
2. L_g = omega_g t* for the active groups; a group that cannot rise above L_g while every
   group keeps its floor is a bottleneck and is frozen; repeat until every group is frozen;
3. finally max sum_j v_j with every floor kept.

The reference finds the bottlenecks of a level with one LP per active group (max v_g).  Here
the same set comes from fewer LPs: max the sum of v_g over the undecided groups U (every
floor kept); a group that rises above its floor by more than the reference's test
(L_g (1 + 20 slack) + 20 slack) can rise, so it is no bottleneck and leaves U; when no group
of U rises, none can rise alone either (it would raise the sum), so all of U are bottlenecks.
The floors (each level lowered by the relative ``slack``, raised tenfold after an LP that the
solver calls infeasible at the edge of its tolerance) are the reference's.

The model is a :class:`~schedlab.policies.gavel_job_lp.JobLeadLP` with floor rows: t is its
column v, the level rows are its lead rows (c_j = omega_j / (s_j / T_eq[j]) while g is
active, 0 when frozen), and the floors and objectives are changed in place between the LPs
of one decision and across decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt

from schedlab.errors import SolverError
from schedlab.formulations.gavel.data import FloatArray, GavelData
from schedlab.formulations.gavel.hierarchical import _FLOOR_SLACK, _MAX_SLACK
from schedlab.policies.gavel_job_lp import JobLeadLP
from schedlab.solution import Status
from schedlab.solvers import SolverOptions

log = logging.getLogger(__name__)


class WaterFilling:
    """Hierarchical max-min fairness (fairness inside entities) on a persistent per-job LP."""

    def __init__(self, types: list[str], gpus: FloatArray, *, heterogeneity_aware: bool = True,
                 options: SolverOptions | None = None) -> None:
        self.lp = JobLeadLP(types, gpus, heterogeneity_aware=heterogeneity_aware,
                            floor_rows=True, options=options)
        #: LPs solved by the last :meth:`solve`, and its levels t*
        self.lps = 0
        self.levels: list[float] = []

    def solve(self, keys: Sequence[Hashable], data: GavelData, omega: FloatArray
              ) -> tuple[float, FloatArray]:
        """(min_g v_g / omega_g of the returned allocation -- the first level, X (n, K)) for
        the jobs of ``data`` with group weights ``omega`` (n,)."""
        lp = self.lp
        slots = lp.sync(keys, data.scale_factor, data.throughput)
        n = len(slots)
        teq = data.equal_share_throughput()
        coef = data.scale_factor / np.where(teq > 0, teq, 1.0)  # v_j = coef_j thr_j
        level = np.zeros(n)  # L_g reached so far (in v)
        active = np.ones(n, dtype=bool)
        self.lps = 0
        self.levels = []
        slack = _FLOOR_SLACK

        def run(objective: FloatArray, v_cost: float, retry: bool = True
                ) -> tuple[float, FloatArray]:
            nonlocal slack
            lp.set_objective(slots, objective, v_cost)
            while True:
                floor_v = level - slack * np.maximum(1.0, np.abs(level))
                lp.set_floor(slots, np.where(level > 0, floor_v / coef, -np.inf))
                try:
                    value, x = lp.solve(slots)
                except SolverError:
                    if not retry or slack >= _MAX_SLACK or lp.model.last is None \
                            or lp.model.last.status != Status.INFEASIBLE:
                        raise
                    slack *= 10
                    log.debug("water-filling: floors relaxed to %g (relative)", slack)
                    continue
                self.lps += 1
                return value, x

        x = np.zeros((n, len(data.types)))
        # v_g alone at its best (share 1 on its best column): the level t = cap_g at which
        # g stops rising whatever the others get
        vmax = coef * lp.best_rate(slots)
        cap = np.divide(vmax, omega, out=np.full(n, np.inf), where=omega > 0)

        def level_lp(capped: npt.NDArray[np.int64], rising: npt.NDArray[np.bool_]
                     ) -> tuple[float, FloatArray] | None:
            """max t with the ``capped`` groups held at their caps, v_g >= omega_g t for the
            ``rising`` ones and every frozen group at its floor (None: infeasible)."""
            saved = level[capped].copy()
            level[capped] = vmax[capped]
            lp.set_lead(slots, np.where(rising, omega / coef, 0.0))
            try:
                return run(np.zeros(n), 1.0, retry=False)
            except SolverError:
                return None
            finally:
                level[capped] = saved

        while active.any():
            # Bottlenecks by caps first: in the reference's order, groups whose caps lie below
            # the level the shared pools allow freeze one level each, at their caps; the
            # first i (groups by increasing cap) after which the level stays below the next
            # cap is found by bisection on i, each trial one LP.
            order = np.flatnonzero(active)[np.argsort(cap[active], kind="stable")]
            low, high = 0, len(order)
            found: dict[int, tuple[float, FloatArray] | None] = {}
            while low < high:
                mid = (low + high) // 2
                rising = active.copy()
                rising[order[:mid]] = False
                found[mid] = level_lp(order[:mid], rising)
                outcome = found[mid]
                if outcome is not None and outcome[0] >= cap[order[mid]] * (1 - 1e-9):
                    low = mid + 1
                else:
                    high = mid
            capped = order[:low]
            level[capped] = vmax[capped]
            active[capped] = False
            if not active.any():
                self.levels.append(float(cap[capped[-1]]))
                break
            outcome = found.get(low)
            if outcome is None:
                outcome = level_lp(np.zeros(0, dtype=np.int64), active)
                if outcome is None:
                    outcome = (run(np.zeros(n), 1.0)[0], x)
            t_star = outcome[0]
            self.levels.append(t_star)
            level[active] = omega[active] * t_star
            lp.set_lead(slots, np.zeros(n))
            undecided = active.copy()
            while True:
                _, x = run(np.where(undecided, coef, 0.0), 0.0)
                value = coef * (data.throughput * x).sum(axis=1)
                rose = undecided & (value > level * (1 + 20 * slack) + 20 * slack)
                if not rose.any():
                    break
                undecided &= ~rose
            active &= ~undecided
        _, x = run(coef, 0.0)
        # the reference's objective: min_g v_g / omega_g of the returned allocation
        value = coef * (data.throughput * x).sum(axis=1)
        weighted = omega > 0
        first = float((value[weighted] / omega[weighted]).min()) if weighted.any() else 0.0
        return first, x
