r"""``titan.merge_offline``: which tasks to merge and in what order, as one exact ILP.

The seed's setting: a batch of tasks, all present at time 0, runs on a pool of G GPUs (the
instance's one accelerator type), one group after another, each group on as many GPUs as it
can use, a_g = min(G, max_gpus_g).  Groups are the singletons and the pairs that pass the
merge rule (:mod:`schedlab.formulations.titan.merge`, the benefit rule at a_g; the round
ILP's log10 row rule belongs to rounds and is not applied here).  A group g runs
p_g = r_g d_g(a_g) seconds (r the fraction of work left; a pair has not started, r = 1) and
carries the weight W_g = sum of its members' ``weight``.  Members of a merged pair start and
finish together.  Minimize the total weighted JCT sum_j w_j C_j.

Variables y_g in {0, 1} (group g is chosen) and z_gh in [0, 1] for every two groups g < h
with no task in common.  Rows: every task is in exactly one chosen group,
sum_{g containing t} y_g = 1; and z_gh >= y_g + y_h - 1.  Objective

.. math::

    \min \sum_g W_g p_g\, y_g + \sum_{g<h} \min(W_g p_h,\; W_h p_g)\, z_{gh}.

**Exact.**  For a fixed choice of groups, z_gh = 1 exactly for the chosen pairs of groups (its
cost is positive, so z sits at its lower bound max(0, y_g + y_h - 1)), and the objective is
sum_g W_g p_g + sum over chosen pairs of min(W_g p_h, W_h p_g).  In any sequence of the
chosen groups, W_g C_g sums W_g p_g plus, for each pair, the weight of the later group
times the length of the earlier one; choosing the smaller of the two for every pair at once
is possible because Smith's rule (ascending p_g / W_g) makes every pair's cheaper choice --
so the ILP's objective is the optimum over sequences, and Smith's order attains it.  The
solution's schedule is the chosen groups in Smith's order (ties: the first member's place
in the instance).

The model has one z per two compatible groups: meant for small batches (tens of tasks).

Solution: ``schedule`` (one entry per task: the group's start, end and GPUs), ``groups`` (the
merged pairs), ``objective`` = sum_j w_j (C_j - arrival_j) re-derived from the schedule;
``metrics``: ``average_jct_s``, ``srtf_average_jct_s`` (every task alone, back to back,
shortest first: the seed's SRTF column), ``candidates`` (pairs offered to the ILP).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

from schedlab.errors import InputError
from schedlab.formulations.arrays import add_rows, csr_from_entries, linear_expression
from schedlab.formulations.base import Formulation
from schedlab.formulations.titan.merge import JOINT_EPOCH_FACTOR, MergeRule, Similarity
from schedlab.formulations.titan.speed import duration
from schedlab.formulations.titan.tasks import TitanTask, titan_tasks
from schedlab.instance import Instance
from schedlab.solution import ScheduleEntry, Solution
from schedlab.solvers import SolveResult

FloatArray = npt.NDArray[np.float64]


class OfflineGroups:
    """The groups of one batch: members (task positions), GPUs, duration and weight."""

    def __init__(self, tasks: list[TitanTask], gpus: int, rule: MergeRule | None) -> None:
        self.tasks = tasks
        self.members: list[tuple[int, ...]] = []
        self.gpus: list[int] = []
        self.seconds: list[float] = []
        for i, task in enumerate(tasks):
            a = min(gpus, task.max_gpus)
            self.members.append((i,))
            self.gpus.append(a)
            self.seconds.append(task.remaining * duration(task.duration_s, a))
        self.candidates: list[tuple[str, str]] = []
        if rule is None:
            return
        for i, first in enumerate(tasks):
            for j in range(i + 1, len(tasks)):
                second = tasks[j]
                a = min(gpus, rule.pair_max_gpus(first, second))
                if not rule.verdict(first, second, a).may_merge:
                    continue
                self.members.append((i, j))
                self.gpus.append(a)
                self.seconds.append(duration(rule.merged_profile(first, second), a))
                self.candidates.append((first.id, second.id))

    @property
    def weight(self) -> FloatArray:
        """W_g."""
        w = np.array([t.weight for t in self.tasks])
        return np.array([w[list(m)].sum() for m in self.members])

    def compatible_pairs(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(g, h), g < h, of groups with no task in common."""
        sets = [set(m) for m in self.members]
        g, h = np.triu_indices(len(sets), k=1)
        keep = np.array([not (sets[a] & sets[b]) for a, b in zip(g, h, strict=True)],
                        dtype=bool)
        return g[keep], h[keep]

    def smith_order(self, chosen: list[int]) -> list[int]:
        """Chosen groups by ascending p_g / W_g (ties: first member's place)."""
        weight = self.weight
        return sorted(chosen, key=lambda g: (self.seconds[g] / weight[g], self.members[g][0]))


class MergeOffline(Formulation):
    """``titan.merge_offline`` (module docstring).

    Args:
        merging: offer merged pairs (False: every task alone, the SRTF / Smith baseline).
        similarity: S(A, B) for the merge rule (default: the concept hierarchy).
        joint_epoch_factor: phi of the default merged-duration model.
        benefit_base: the least benefit ratio of a merge (default 1.1; 0 offers every pair
            that passes the other rules, to show the ILP's own choice).
    """

    name = "titan.merge_offline"
    description: ClassVar[str] = ("Titan: merge compatible tasks and order the groups on the "
                                  "pool, min total weighted JCT (exact ILP)")
    objective_sense = "minimize"

    def __init__(self, *, merging: bool = True, similarity: Similarity | None = None,
                 joint_epoch_factor: float = JOINT_EPOCH_FACTOR,
                 benefit_base: float | None = None) -> None:
        self.merging = merging
        self.similarity = similarity
        self.joint_epoch_factor = joint_epoch_factor
        self.benefit_base = benefit_base

    def validate(self, instance: Instance) -> None:
        """Titan fields, one accelerator type, every task present at time 0."""
        titan_tasks(instance, self.name)
        for i, job in enumerate(instance.jobs):
            if job.arrival > 0:
                raise InputError(f"task {job.id!r} arrives at {job.arrival:g} s: "
                                 f"{self.name} plans a batch present at time 0 (the online "
                                 "round ILP handles arrivals)",
                                 field=f"jobs[{i}].arrival")

    def rule(self, instance: Instance) -> MergeRule | None:
        """The merge rule of ``instance`` with this formulation's parameters."""
        if not self.merging:
            return None
        rule = MergeRule.for_instance(instance, similarity=self.similarity,
                                      joint_epoch_factor=self.joint_epoch_factor,
                                      row_rule=False)
        if self.benefit_base is not None:
            rule.benefit_base = self.benefit_base
        return rule

    def groups(self, instance: Instance) -> OfflineGroups:
        """The groups of ``instance``."""
        self.validate(instance)
        return OfflineGroups(titan_tasks(instance, self.name), instance.cluster.total_gpus,
                             self.rule(instance))

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """y_g, z_gh, the partition rows and z_gh >= y_g + y_h - 1 (module docstring).
        ``m.groups`` holds the groups (``members[g]``: task positions; singletons first, in
        instance order, then the pairs), so a user's constraint can name ``m.y[g]``."""
        groups = self.groups(instance)
        num_groups, n = len(groups.members), len(groups.tasks)
        g, h = groups.compatible_pairs()
        weight, seconds = groups.weight, np.array(groups.seconds)
        m = pyo.ConcreteModel(name=f"{self.name}:{instance.name}")
        m.groups = groups
        m.y = pyo.Var(range(num_groups), domain=pyo.Binary)
        m.z = pyo.Var(range(len(g)), bounds=(0, 1))
        columns = [m.y[i] for i in range(num_groups)] + [m.z[k] for k in range(len(g))]
        size = len(columns)
        rows = [t for grp in groups.members for t in grp]
        cols = [i for i, grp in enumerate(groups.members) for _ in grp]
        add_rows(m, "partition", csr_from_entries(rows, cols, np.ones(len(rows)), (n, size)),
                 columns, 1.0, 1.0)
        pairs = np.arange(len(g))
        both = csr_from_entries(np.r_[pairs, pairs, pairs], np.r_[g, h, num_groups + pairs],
                                np.r_[np.ones(2 * len(g)), -np.ones(len(g))], (len(g), size))
        add_rows(m, "both_chosen", both, columns, None, 1.0)
        cost = np.r_[weight * seconds,
                     np.minimum(weight[g] * seconds[h], weight[h] * seconds[g])]
        m.objective = pyo.Objective(expr=linear_expression(cost, columns), sense=pyo.minimize)
        return m

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        """The chosen groups in Smith's order as a schedule (module docstring)."""
        sol = self.empty_solution(instance, result)
        if not result.status.has_solution:
            return sol
        groups: OfflineGroups = model.groups
        chosen = [g for g in range(len(groups.members)) if (pyo.value(model.y[g]) or 0) > 0.5]
        (acc,) = instance.cluster.accelerators
        start = 0.0
        for g in groups.smith_order(chosen):
            end = start + groups.seconds[g]
            for t in groups.members[g]:
                sol.schedule.append(ScheduleEntry(job=groups.tasks[t].id, start=start,
                                                  end=end, accelerator=acc,
                                                  gpus=groups.gpus[g]))
            if len(groups.members[g]) > 1:
                sol.groups.append([groups.tasks[t].id for t in groups.members[g]])
            start = end
        sol.objective = self.objective_of(instance, sol)
        if sol.bound is not None and sol.objective is not None:
            sol.gap = abs(sol.objective - sol.bound) / max(abs(sol.objective), 1e-10)
        ends = {e.job: e.end for e in sol.schedule}
        sol.metrics.update(
            average_jct_s=float(np.mean([ends[t.id] - t.arrival for t in groups.tasks])),
            srtf_average_jct_s=_back_to_back_average(groups),
            candidates=[list(p) for p in groups.candidates])
        return sol

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """sum_j w_j (C_j - arrival_j), C_j the latest end of j's entries (inf when a task
        has none)."""
        ends: dict[str, float] = {}
        for e in solution.schedule:
            ends[e.job] = max(ends.get(e.job, -math.inf), e.end)
        total = 0.0
        for job in instance.jobs:
            if job.id not in ends:
                return math.inf
            total += job.weight * (ends[job.id] - job.arrival)
        return total

    def example_instance(self) -> Instance:
        """The seed's first case: two 20 s tasks that merge into 25 s."""
        from schedlab.formulations.titan.examples import case_instance

        return case_instance(1)


def _back_to_back_average(groups: OfflineGroups) -> float:
    """Average JCT with every task alone, one after another, shortest first, s."""
    n = len(groups.tasks)
    alone = sorted(groups.seconds[:n])
    return float(np.mean(np.cumsum(alone))) if n else 0.0
