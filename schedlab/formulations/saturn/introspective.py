"""Saturn's introspective scheduling (``saturn.introspective``): plan on the estimates, then
execute with re-planning, and return the realized schedule.

Saturn (Nagrecha & Kumar, VLDB'24) plans SPASE (select a parallelism, allocate GPUs, schedule)
on *profiled* runtimes, which are estimates; while the plan runs, the scheduler learns how fast
each job really is and re-plans.  This formulation is a thin wrapper over three parts:

1. the static plan: the time-indexed MILP (``saturn.time_indexed``) on the estimates
   (``SaturnConfig.runtime_s``, s);
2. the world: :func:`schedlab.formulations.saturn.execution.simulate_nodes`, the simulator's
   node-level continuous mode, with the truth read from the instance: true runtime =
   ``runtime_s`` x ``Job.runtime_factor`` (None = 1), restart cost rho =
   ``Params.restart_cost_s`` s (None = 0); :func:`schedlab.workloads.saturn.with_runtime_noise`
   writes lognormal factors;
3. the decision: :class:`schedlab.formulations.saturn.introspection_policy.SaturnIntrospection`,
   asked at every boundary t = k ``interval_s`` (k = 1 .. ``max_resolves``).

**Output.**  ``schedule`` is the realized execution: one entry per job *segment* (``round`` =
segment index 0, 1, ...) with its configuration, node and [start, end) (s); a resumed segment's
first rho s restore the checkpoint.  ``objective`` = realized makespan (s); ``bound`` = the
analytic lower bound of the *true* runtimes (the static plan's proven bound when the
estimates are the truth).  ``status`` is the worst of the sub-solves' (the
static plan's and every re-solve's; a re-solve that returned no plan counts as ``feasible`` and
is named in ``diagnostics``), and ``optimal`` only when, besides, the estimates are the truth
(all factors 1), nothing restarted and the realized makespan is the proven plan's.  Metrics:
realized makespan, the static plan's realized makespan in the same world, the plan's makespan
on the estimates, re-solves, adopted plans, restarts, solver seconds, one line per re-solve;
``restart_cost_s`` is reported for information only (the checker reads the instance).  The
full model is in ``docs/formulations/saturn.md`` (section "Introspection").
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence

import pyomo.environ as pyo

from schedlab.errors import InputError
from schedlab.formulations.base import Formulation
from schedlab.formulations.saturn.baselines import saturn_example_instance
from schedlab.formulations.saturn.data import (
    SaturnData,
    lower_bound,
    makespan,
    saturn_data,
)
from schedlab.formulations.saturn.execution import (
    EPS,
    Execution,
    NodeWorld,
    estimated_runtime,
    execute,
    plan_from_schedule,
    predict,
    simulate_nodes,
)
from schedlab.formulations.saturn.introspection_policy import (
    Resolve,
    SaturnIntrospection,
    resolve_options,
)
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status, Timings, worst_status
from schedlab.solvers import SolveResult, SolverOptions


class Introspective(Formulation):
    """Saturn's introspective scheduling (see the module docstring).

    Args:
        interval_s: re-solve every this many seconds; None: 1/8 of the static plan's makespan
            predicted on the estimates.
        threshold: adopt a new plan only if its predicted makespan < (1 - threshold) x the
            current plan's (relative, >= 0).
        resolve_time_limit_s, resolve_mip_gap: limits of each re-solve (the solver options'
            time limit, when smaller, caps it).
        max_slots: grid slots over the current plan's remaining makespan in each re-solve.
        max_resolves: at most this many re-solves (later boundaries just run the plan).
    """

    description = ("Saturn introspective scheduling: re-solve on the remaining work every "
                   "interval, adopt clearly better plans (realized schedule in the instance's "
                   "true runtimes)")
    #: the re-solves are models of the remaining work, not the model build() returns
    accepts_extensions = False
    objective_sense = "minimize"

    def example_instance(self) -> Instance:
        """:func:`~schedlab.formulations.saturn.baselines.saturn_example_instance`."""
        return saturn_example_instance()

    def __init__(
        self,
        interval_s: float | None = None,
        threshold: float = 0.01,
        resolve_time_limit_s: float = 2.0,
        resolve_mip_gap: float = 0.01,
        max_slots: int = 40,
        max_resolves: int = 200,
    ) -> None:
        checks: dict[str, tuple[object, bool]] = {
            "interval_s": (interval_s, interval_s is None
                           or (math.isfinite(interval_s) and interval_s > 0)),
            "threshold": (threshold, math.isfinite(threshold) and 0 <= threshold < 1),
            "resolve_time_limit_s": (resolve_time_limit_s, resolve_time_limit_s > 0),
            "resolve_mip_gap": (resolve_mip_gap,
                                math.isfinite(resolve_mip_gap) and resolve_mip_gap >= 0),
            "max_slots": (max_slots, max_slots >= 1),
            "max_resolves": (max_resolves, max_resolves >= 0),
        }
        for name, (value, ok) in checks.items():
            if not ok:
                raise InputError(f"{name} out of range (got {value!r})", field=name)
        self.interval_s = interval_s
        self.threshold = threshold
        self.resolve_time_limit_s = resolve_time_limit_s
        self.resolve_mip_gap = resolve_mip_gap
        self.max_slots = max_slots
        self.max_resolves = max_resolves

    def data(self, instance: Instance) -> SaturnData:
        """Validated problem data on the estimates (dominant options)."""
        return saturn_data(instance, formulation=self.name or "saturn.introspective")

    def validate(self, instance: Instance) -> None:
        self.data(instance)

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The realized makespan = latest end of the executed segments, s (0 when empty)."""
        return makespan(solution.schedule)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The model of the initial (static) plan: the default time-indexed MILP."""
        return self._static_formulation().build(instance)

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        raise AssertionError("introspection produces its Solution in solve()")

    @staticmethod
    def _static_formulation() -> TimeIndexed:
        static = TimeIndexed()
        static.name = "saturn.time_indexed"
        return static

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Plan with the time-indexed MILP on the estimates, then run introspectively."""
        self.data(instance)
        static = self._static_formulation().solve(instance, options)
        return self.run(instance, static, options)

    def run(
        self, instance: Instance, static: Solution, options: SolverOptions | None = None
    ) -> Solution:
        """Execute ``static`` (a plan on the estimates, one entry per job; planners see only
        the estimates, so it may come from the instance without its truth) in the world of
        ``instance`` with introspection, and also statically.  The Solution refers to
        ``instance``."""
        t_start = time.perf_counter()
        opts = options or SolverOptions()
        data = self.data(instance)
        world = NodeWorld.of(instance, data)
        plan = plan_from_schedule(data, static.schedule)
        static_run = execute(world, plan)
        predicted0 = predict(Execution.start(data), plan, estimated_runtime, world.restart_cost)
        interval = self.interval_s or max(predicted0 / 8, EPS)
        policy = SaturnIntrospection(
            world.restart_cost, self.threshold, self.max_slots,
            resolve_options(opts, self.resolve_time_limit_s, self.resolve_mip_gap))
        ex = simulate_nodes(world, plan, policy, interval, self.max_resolves)
        solution = self._solution(instance, data, world, static, ex, static_run,
                                  policy.history, predicted0, interval)
        resolve_s = sum(r.solve_s for r in policy.history)
        solution.solver = opts.solver
        solution.timings = Timings(
            build_s=static.timings.build_s + policy.build_s,
            solve_s=static.timings.solve_s + resolve_s,
            extract_s=max(0.0, time.perf_counter() - t_start - policy.build_s - resolve_s),
        )
        solution.metrics["solver_time_s"] = static.timings.solve_s + resolve_s
        solution.metrics["resolve_time_s"] = resolve_s
        return solution

    def _solution(
        self,
        instance: Instance,
        data: SaturnData,
        world: NodeWorld,
        static: Solution,
        ex: Execution,
        static_run: Execution,
        history: Sequence[Resolve],
        predicted0: float,
        interval: float,
    ) -> Solution:
        """The realized schedule (segments) with metrics, honest status and bound."""
        count: dict[int, int] = defaultdict(int)
        schedule: list[ScheduleEntry] = []
        for seg in sorted(ex.segments, key=lambda s: (s.start, s.job)):
            node = data.nodes[seg.node]
            schedule.append(ScheduleEntry(
                job=data.job_ids[seg.job], start=seg.start, end=seg.end,
                accelerator=node.accelerator, node=node.name, gpus=seg.option.gpus,
                config=seg.option.technique, round=count[seg.job]))
            count[seg.job] += 1
        span = ex.makespan
        bound = lower_bound(world.true_data())
        restarts = sum(c - 1 for c in count.values())
        proven = (world.exact and restarts == 0 and static.objective is not None
                  and span <= static.objective + 1e-6)
        failed = [r for r in history if not r.status.has_solution]
        status = worst_status(
            Status.OPTIMAL if proven else Status.FEASIBLE,
            static.status if static.status.has_solution else Status.FEASIBLE,
            *(r.status if r.status.has_solution else Status.FEASIBLE for r in history),
        )
        if proven and static.bound is not None:
            # the truth is the estimate, so the static plan's proven bound bounds this run too
            bound = max(bound, static.bound)
        gap_tolerance = static.metrics.get("gap_tolerance")
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name or "saturn.introspective",
            status=status,
            objective=span,
            bound=bound,
            gap=(span - bound) / span if span > 0 else None,
            schedule=schedule,
            diagnostics=[f"re-solve at {r.at:.6g} s ended {r.status} without a plan; the "
                         "current plan was kept" for r in failed],
            metrics={
                "makespan_s": span,
                "static_makespan_s": static_run.makespan,
                "plan_makespan_s": static.objective,
                "plan_predicted_s": predicted0,
                "plan_status": str(static.status),
                "improvement_vs_static": ((static_run.makespan - span) / static_run.makespan
                                          if static_run.makespan > 0 else 0.0),
                "resolves": len(history),
                "adopted": sum(r.adopted for r in history),
                "restarts": restarts,
                "lower_bound_s": bound,
                "estimate_lower_bound_s": lower_bound(data),
                "interval_s": interval,
                "threshold": self.threshold,
                "restart_cost_s": world.restart_cost,
                "resolve_log": [r.as_dict() for r in history],
                **({"gap_tolerance": gap_tolerance} if gap_tolerance is not None else {}),
            },
        )
