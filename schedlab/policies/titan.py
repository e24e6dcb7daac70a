r"""Titan (Gao et al., SoCC'22) as an online policy: every round, one ILP chooses which tasks
run, on how many GPUs each, and which never-started pairs are merged.

Titan's scheduler (``alg/scheduler/titan.py`` in github.com/gaow0007/TitanSched,
``flush_runnable_jobs``) re-solves its round ILP at every scheduling interval; this policy does
the same with :func:`~schedlab.formulations.titan.round_ilp.solve_round`:

* the round's tasks are the active units of the elastic simulator
  (:mod:`schedlab.simulator.elastic`; the state: :mod:`schedlab.policies.elastic_state`): a
  task alone with the fraction of its work left, or a merged pair already running, which is
  one task to the ILP (its merged profile, its members' summed ``max_gpus``, started, so it
  never merges again);
* the ILP caps the runnable set at G (shortest T_rem at one GPU first), offers each candidate
  0, 1, 2, 3 or whole nodes of 4 GPUs up to its ``max_gpus`` (elastic: more or fewer GPUs
  than the task requested), merge candidates from the instance's merge rule
  (:class:`~schedlab.formulations.titan.merge.MergeRule`: same base model, never started,
  different datasets, similarity at least the threshold, the benefit rule), and minimizes
  the sum of max(T_rem, Delta) / T_fair, pairs divided by their benefit, plus U per task left
  out (docs/formulations/titan.md);
* every chosen task or pair becomes a :class:`~schedlab.simulator.elastic.Grant`; a chosen
  new pair is merged by the simulator.

Variants (registered names): ``titan`` (merging and the pipelined switch),
``titan_no_merge`` (no merge candidates: the ILP allocates GPUs only) and
``titan_no_pipeline`` (merging, but the run charges the non-pipelined switch).  The pipelined
switch is a property of Titan's runtime, so ``pipelined_switch`` only tells the simulator
which switch cost the run pays (:mod:`schedlab.simulator.switch`); the ILP, as the code's, does
not price switches.

**Honest fallback.**  A round whose solve ends without a solution (a solver error, a time
limit without incumbent) counts in ``failed_solves``, is logged, and the round runs the units
shortest remaining time first (T_rem at one GPU), each on its requested GPUs, while they fit.

**In the fixed-gang engine** (:func:`schedlab.simulator.simulate`, the conformance kit,
``schedlab simulate``) jobs cannot change their GPU count or merge: :meth:`Titan.decide` solves
the same ILP with each job's options cut to {0, s_j} (its gang), no merge candidates, each
job's duration d(s_j) = total_steps / its best throughput, and places the chosen jobs on their
fastest type with room.  Titan's experiments run in the elastic mode
(``schedlab tables titan``).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import replace

import numpy as np

from schedlab.errors import SolverError
from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.round_ilp import (
    DEFAULT_PENALTY,
    DEFAULT_TIME_LIMIT_S,
    RoundDecision,
    round_problem,
    solve_problem,
    solve_round,
)
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.policies.base import Policy
from schedlab.policies.elastic_state import ElasticState, Grant, UnitState
from schedlab.policies.fifo import FreeGpus, best_throughput, place_in_order, type_preference
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.solvers import SolverOptions

log = logging.getLogger(__name__)


class Titan(Policy):
    """Titan's round ILP every round (module docstring).

    Args:
        merging: offer merge candidates (False: ``titan_no_merge``).
        pipelined_switch: the run charges Titan's pipelined switch (False:
            ``titan_no_pipeline``).
        penalty: U, the cost of a runnable task left out.
        time_limit_s: time limit of one round's solve (the code's 30 s).
        rule: the merge rule (default: the one the elastic state carries, the instance's
            threshold and pair entries).
        code_quirks: merge as TitanSched's code does where it departs from its design
            (:attr:`~schedlab.formulations.titan.merge.MergeRule.code_quirks`; registered as
            ``titan_code_quirks``).  Off by default.
    """

    name = "titan"
    description = "Titan: per-round ILP over elastic GPU counts and task merges"
    workload_kind = "titan"

    def __init__(self, *, merging: bool = True, pipelined_switch: bool = True,
                 penalty: float = DEFAULT_PENALTY,
                 time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                 rule: MergeRule | None = None, code_quirks: bool = False) -> None:
        super().__init__()
        self.merging = merging
        self.code_quirks = code_quirks
        self.pipelined_switch = pipelined_switch
        self.penalty = penalty
        self.options = SolverOptions(time_limit_s=time_limit_s)
        self.rule = rule
        self.merges = 0  # pairs merged in the run so far
        #: merge candidates offered to the ILP, one entry per solved round
        self.merge_candidates: list[int] = []
        #: pairs the merge rule turned down, by the first rule each failed
        self.merge_rejections: Counter[str] = Counter()

    def reset(self) -> None:
        """Counters, the merge count and the merge accounting to zero."""
        super().reset()
        self.merges = 0
        self.merge_candidates = []
        self.merge_rejections = Counter()

    def merge_accounting(self) -> dict[str, object]:
        """What the merger saw in the run: rounds solved, merge candidates offered (total,
        rounds with any, most in one round), pairs merged, and the pairs the rule turned
        down by the first rule each failed (started, model, dataset, benefit, labels,
        similarity; :func:`~schedlab.formulations.titan.round_ilp.merge_candidates`)."""
        offered = self.merge_candidates
        return {"rounds": len(offered), "candidates": sum(offered),
                "rounds_with_candidates": sum(1 for c in offered if c),
                "most_candidates": max(offered, default=0), "merged_pairs": self.merges,
                "rejected": dict(sorted(self.merge_rejections.items()))}

    # ------------------------------------------------------------------ elastic mode
    def plan(self, state: ElasticState) -> list[Grant]:
        """The round's grants: the ILP's GPU counts per unit and the new pairs it merges."""
        self.decisions += 1
        units = {unit.id: unit for unit in state.units}
        tasks = [self._task(unit, state) for unit in state.units]
        rule = (self.rule or state.merge_rule) if self.merging else None
        if rule is not None and self.code_quirks and not rule.code_quirks:
            rule = replace(rule, code_quirks=True)
        decision = self._solve(lambda: solve_round(tasks, state.gpus, state.round_s,
                                                   rule=rule, penalty=self.penalty,
                                                   options=self.options,
                                                   rejected=self.merge_rejections,
                                                   offered=self.merge_candidates))
        if decision is None:
            return self._fallback(state)
        grants = [Grant(units[uid].members, gpus)
                  for uid, gpus in decision.gpus.items() if gpus > 0]
        for pair, gpus in decision.pairs.items():
            grants.append(Grant(tuple(pair), gpus))
            self.merges += 1
        return grants

    @staticmethod
    def _task(unit: UnitState, state: ElasticState) -> TitanTask:
        """The ILP's view of a unit: a task with its remaining fraction, or a running pair."""
        if not unit.merged:
            return replace(state.tasks[unit.id].task, remaining=unit.remaining,
                           started=unit.started)
        members = [state.tasks[m].task for m in unit.members]
        classes = tuple(dict.fromkeys(c for t in members for c in t.classes))
        return TitanTask(id=unit.id, base_model=unit.base_model, classes=classes,
                         duration_s=unit.profile, max_gpus=unit.max_gpus,
                         remaining=unit.remaining, started=True,
                         weight=sum(t.weight for t in members), arrival=unit.arrival)

    def _fallback(self, state: ElasticState) -> list[Grant]:
        """Shortest T_rem(1) first, each unit on its requested GPUs (a pair: its members'
        sum), while they fit."""
        free = state.gpus
        grants = []
        for unit in sorted(state.units, key=lambda u: (u.seconds_left(1), u.arrival, u.id)):
            want = min(sum(state.tasks[m].requested_gpus for m in unit.members), unit.max_gpus)
            if want <= free:
                grants.append(Grant(unit.members, want))
                free -= want
        return grants

    def _solve(self, solve: object) -> RoundDecision | None:
        """Run one solve, count it; None (and a failed solve) when it gave no solution."""
        self.solves += 1
        try:
            decision: RoundDecision = solve()  # type: ignore[operator]
        except SolverError as exc:
            self.failed_solves += 1
            log.warning("%s: the round ILP failed (%s); falling back to SRTF on requests",
                        self.name, exc)
            return None
        self.solver_time_s += decision.solve_s
        if not decision.status.has_solution:
            self.failed_solves += 1
            log.warning("%s: the round ILP ended %s without a solution; falling back to SRTF "
                        "on requests", self.name, decision.status.value)
            return None
        return decision

    # --------------------------------------------------------------- fixed-gang mode
    def decide(self, state: ClusterState) -> list[Assignment]:
        """The fixed-gang engine's round (module docstring)."""
        self.decisions += 1
        types = state.cluster.types
        jobs = {js.id: js for js in state.active}
        tasks = [self._gang_task(js, types) for js in state.active
                 if best_throughput(js, types) > 0]
        if not tasks:
            return []
        total = sum(state.gpus.values())
        problem = round_problem(tasks, total, state.round_s, penalty=self.penalty)
        keep = (problem.column_gpus == 0) | (
            problem.column_gpus == np.array([jobs[problem.task_ids[c]].scale_factor
                                             for c in problem.column_candidate]))
        gangs = replace(problem, column_candidate=problem.column_candidate[keep],
                        column_gpus=problem.column_gpus[keep],
                        column_cost=problem.column_cost[keep])
        decision = self._solve(lambda: solve_problem(gangs, self.options))
        if decision is None:
            chosen = sorted(jobs.values(), key=lambda js: (_remaining_s(js, types),
                                                           js.arrival, js.id))
        else:
            chosen = [jobs[t] for t in decision.runnable if decision.gpus.get(t, 0) > 0]

        def preference(job: JobState) -> list[str]:
            return type_preference(job, state, heterogeneity_aware=True)

        return place_in_order(chosen, FreeGpus(state), preference)

    @staticmethod
    def _gang_task(js: JobState, types: list[str]) -> TitanTask:
        """A job as a task on exactly its gang: d(s_j) = total_steps / best throughput."""
        seconds = js.total_steps / best_throughput(js, types)
        return TitanTask(id=js.id, base_model=js.job_type or "", classes=(),
                         duration_s={js.scale_factor: seconds}, max_gpus=js.scale_factor,
                         remaining=js.remaining_steps / js.total_steps,
                         started=js.start_time is not None, weight=js.weight,
                         arrival=js.arrival)


def _remaining_s(js: JobState, types: list[str]) -> float:
    best = best_throughput(js, types)
    return js.remaining_steps / best if best > 0 else math.inf
