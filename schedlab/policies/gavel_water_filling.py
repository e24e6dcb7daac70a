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
        """(the first level t*, X (n, K)) for the jobs of ``data`` with group weights
        ``omega`` (n,)."""
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

        def run(objective: FloatArray, v_cost: float) -> tuple[float, FloatArray]:
            nonlocal slack
            lp.set_objective(slots, objective, v_cost)
            while True:
                floor_v = level - slack * np.maximum(1.0, np.abs(level))
                lp.set_floor(slots, np.where(level > 0, floor_v / coef, -np.inf))
                try:
                    value, x = lp.solve(slots)
                except SolverError:
                    if slack >= _MAX_SLACK or lp.model.last is None \
                            or lp.model.last.status != Status.INFEASIBLE:
                        raise
                    slack *= 10
                    log.debug("water-filling: floors relaxed to %g (relative)", slack)
                    continue
                self.lps += 1
                return value, x

        x = np.zeros((n, len(data.types)))
        while active.any():
            lp.set_lead(slots, np.where(active, omega / coef, 0.0))
            t_star, x = run(np.zeros(n), 1.0)
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
        return (self.levels[0] if self.levels else 0.0), x
