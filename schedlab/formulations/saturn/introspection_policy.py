"""Saturn's introspection as a policy of the node-level simulator: re-solve the remaining work
at every boundary and adopt the new plan only when it is clearly better.

Saturn (Nagrecha & Kumar, VLDB'24) plans on *estimated* runtimes; while the plan runs, the
scheduler learns how fast each job really is and re-plans.  :class:`SaturnIntrospection` is
the deciding half of that loop; the world it runs in (true runtimes, restarts, time) is
:func:`schedlab.formulations.saturn.execution.simulate_nodes` (the simulator's node-level mode).
The model and its choices are described in ``docs/formulations/saturn.md`` (section
"Introspection").  It lives with Saturn's formulations, not with the round-based policies,
because the ``saturn.introspective`` formulation runs it and formulations never import the
policies (docs/architecture.md, "Layers").

**What the policy knows.**  The estimates r[j,o] (s), the restart cost rho (s), the state at
the boundary t (progress phi_j, running segments, checkpoints) and the observed factor f_j of
every job that has made progress; a job that has not run is estimated at f^_j = 1.  Estimated
runtime: f^_j r[j,o] (s); remaining: (1 - phi_j) f^_j r[j,o].

**Decision at t.**

1. predicted(current) = the makespan (s) of the current plan run from the state at t by the
   simulator's dispatch rule on the estimates
   (:func:`~schedlab.formulations.saturn.execution.predict`);
2. the re-planning MILP (:func:`~schedlab.formulations.saturn.replan.build_replan`) on a grid
   of delta = (predicted(current) - t) / ``max_slots`` s, warm-started from the current plan
   (running jobs kept at slot 0, the others in the current plan's order at their earliest
   slot), solved with the re-solve options (time limit, MIP gap, HiGHS presolve off);
3. predicted(new) = the MILP's plan evaluated the same way (grid rounding does not enter the
   decision), with the running jobs it does not keep checkpointed at t;
4. adopt when predicted(new) < (1 - ``threshold``) predicted(current) - 1e-7 s.

With exact estimates (all f_j = 1) each adoption lowers an exact prediction, so the run never
ends later than the static plan.  Every re-solve is recorded (:class:`Resolve`,
:attr:`SaturnIntrospection.history`) with its solver status.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from schedlab.formulations.saturn.data import Option
from schedlab.formulations.saturn.execution import (
    EPS,
    Execution,
    Plan,
    PlanItem,
    Replan,
    Runtime,
    predict,
)
from schedlab.formulations.saturn.replan import (
    Move,
    build_replan,
    grid_list_schedule,
    replan_moves,
)
from schedlab.solution import Status
from schedlab.solvers import PersistentSolver, SolverOptions

#: The module's name before it moved here: log lines keep their logger name.
log = logging.getLogger("schedlab.policies.saturn_introspection")


@dataclass
class Resolve:
    """One re-solve at ``at`` s: predicted makespans of the current and the new plan (s), the
    decision, the solver's seconds and status, and the model's binaries."""

    at: float
    current_s: float
    new_s: float | None
    adopted: bool
    solve_s: float
    status: Status
    binaries: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"at_s": self.at, "current_plan_s": self.current_s, "new_plan_s": self.new_s,
                "adopted": self.adopted, "solve_s": self.solve_s, "status": str(self.status),
                "binaries": self.binaries}


def resolve_options(
    options: SolverOptions | None, time_limit_s: float, mip_gap: float
) -> SolverOptions:
    """The options of each re-solve: ``options`` with time limit min(``time_limit_s``, its own),
    ``mip_gap``, warm start, and (HiGHS) presolve off: HiGHS's presolve (probing above all)
    on these models runs ~10 s past a 1 s time limit, and re-solves are short and
    warm-started."""
    opts = options or SolverOptions()
    extra = dict(opts.extra)
    if opts.solver == "highs":
        extra.setdefault("presolve", "off")
    return replace(
        opts,
        time_limit_s=min(time_limit_s, opts.time_limit_s or math.inf),
        mip_gap=mip_gap,
        warm_start=True,
        extra=extra,
    )


class SaturnIntrospection:
    """The re-planning decision of Saturn's introspection (see the module docstring); a
    :class:`~schedlab.formulations.saturn.execution.NodePolicy`.

    Args:
        restart_cost_s: rho, seconds to resume a checkpointed job (known to the scheduler).
        threshold: adopt only if predicted(new) < (1 - threshold) predicted(current).
        max_slots: grid slots over the current plan's remaining predicted makespan.
        options: the solver options of each re-solve (:func:`resolve_options`).
    """

    def __init__(
        self, restart_cost_s: float, threshold: float, max_slots: int, options: SolverOptions
    ) -> None:
        self.restart_cost_s = restart_cost_s
        self.threshold = threshold
        self.max_slots = max_slots
        self.options = options
        #: every re-solve, in time order
        self.history: list[Resolve] = []
        #: seconds spent building re-plan models
        self.build_s = 0.0

    def decide(
        self, state: Execution, plan: Plan, observed: Sequence[float | None]
    ) -> Replan | None:
        """Re-solve at ``state.now``; the new plan when adopted, else None."""

        def estimate(j: int, option: Option) -> float:
            factor = observed[j]
            return option.runtime * (factor if factor is not None else 1.0)

        record, new_plan, keep, built = self._resolve(state, plan, estimate)
        self.build_s += built
        self.history.append(record)
        if record.adopted and new_plan is not None:
            return Replan(new_plan, frozenset(keep))
        return None

    def _resolve(
        self, ex: Execution, plan: Plan, estimate: Runtime
    ) -> tuple[Resolve, Plan | None, set[int], float]:
        """One re-solve at ``ex.now``: (record, new plan or None, jobs kept running, build s)."""
        data = ex.data
        rho = self.restart_cost_s
        current = predict(ex, plan, estimate, rho)
        t0 = time.perf_counter()
        moves = replan_moves(ex, estimate, rho)
        delta = max((current - ex.now) / self.max_slots, EPS)
        release = {j: max(0, math.ceil((data.release[j] - ex.now) / delta - 1e-9))
                   for j in ex.unfinished()}
        slots = {m: max(1, math.ceil(m.duration / delta - 1e-9)) for m in moves}
        by_key = {(m.job, m.option.config, m.node, m.keep): m for m in moves}
        order = [by_key[j, r.option.config, r.node, True] for j, r in sorted(ex.running.items())]
        queued = sorted((j for j in ex.unfinished() if j not in ex.running),
                        key=lambda j: (plan[j].start, j))
        for j in queued:
            key = (j, plan[j].option.config, plan[j].node, False)
            if key not in by_key:  # a dominated option in the plan: allow it too
                phi = ex.progress[j]
                by_key[key] = Move(j, plan[j].option, plan[j].node,
                                   (rho if ex.closed[j] else 0.0)
                                   + (1 - phi) * estimate(j, plan[j].option), False)
                moves.append(by_key[key])
                slots[by_key[key]] = max(1, math.ceil(by_key[key].duration / delta - 1e-9))
            order.append(by_key[key])
        start = grid_list_schedule(moves, order, data.nodes, release, slots)
        model = build_replan(data, moves, delta, release, start)
        built = time.perf_counter() - t0
        result = PersistentSolver(self.options).solve(model)
        record = Resolve(ex.now, current, None, False, result.solve_s, result.status,
                         len(model.x))
        if not result.status.has_solution:
            log.info("re-solve at %.1f s: %s, keeping the current plan", ex.now, result.status)
            return record, None, set(), built
        new_plan: Plan = {}
        keep: set[int] = set()
        for (k, t), value in model.x.extract_values().items():
            if value is not None and value > 0.5:
                m = model.moves[k]
                new_plan[m.job] = PlanItem(m.option, m.node, ex.now + t * delta)
                if m.keep:
                    keep.add(m.job)
        trial = copy.deepcopy(ex)
        for j in sorted(trial.running):
            if j not in keep:
                trial.stop(j, estimate)
        record.new_s = predict(trial, new_plan, estimate, rho)
        record.adopted = record.new_s < current * (1 - self.threshold) - EPS
        log.info("re-solve at %.1f s: current plan %.1f s, new plan %.1f s -> %s", ex.now,
                 current, record.new_s, "adopt" if record.adopted else "keep")
        return record, new_plan, keep, built
