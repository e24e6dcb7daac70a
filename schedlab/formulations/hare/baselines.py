r"""Offline baselines of Hare's evaluation as list-scheduling heuristics (docs/formulations/
hare.md, "Baselines").

Both place whole jobs one after another in a priority order; a job's rounds are placed in
order, each round's tasks one by one, each task after the last task already given to its GPU
(list order, no backfilling).  A task of job j placed on GPU g of type k starts at

.. math:: \max(\text{ready}_j,\; \text{free}_g + \sigma[j,k]\,[\text{last}_g \ne j])

where ready_j is r_j for round 0 and the end of j's previous round after it (the gradient
barrier), free_g the end of g's last task, and the switch gap sigma is charged when g's last
task belongs to another job (or, with ``params.switch_on_first_task``, when g has none yet).
The task then runs its true p[j,k] seconds.

* ``hare.sched_homo`` (Sched_Homo, heterogeneity-oblivious): types are treated alike.  Jobs in
  weighted-shortest-processing-time order by the type-blind work w_j / (R_j m_j pbar_j), pbar_j
  the mean of p[j,k] over the usable types; each task goes to the usable GPU where it can
  *start* earliest (ties: type order, then GPU index), whatever its speed.
* ``hare.sched_allox`` (Sched_Allox, job-level heterogeneity-aware, AlloX-like): jobs in WSPT
  order by w_j / (R_j m_j min_k p[j,k]); each job runs on one GPU type only, the type on which
  its whole job (all rounds, placed as above on that type's GPUs alone) would end earliest;
  a round's tasks are never spread across types.  Inside the type each task goes to the GPU
  where it ends earliest.

Both are heuristics: status ``feasible``, no bound.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from schedlab.errors import InputError
from schedlab.formulations.base import Heuristic, ObjectiveSense
from schedlab.formulations.hare.model import (
    HareData,
    Task,
    hare_data,
    hare_solution,
    objective_of_schedule,
)
from schedlab.instance import Instance
from schedlab.solution import Solution, Status


@dataclass
class _Gpus:
    """Per-GPU state: end of the last task and its job (-1: none), by (type, index)."""

    free: list[list[float]]
    last: list[list[int]]

    @classmethod
    def empty(cls, data: HareData) -> _Gpus:
        return cls(free=[[0.0] * int(n) for n in data.gpus],
                   last=[[-1] * int(n) for n in data.gpus])

    def copy(self) -> _Gpus:
        return _Gpus(free=[list(f) for f in self.free], last=[list(x) for x in self.last])

    def start(self, data: HareData, j: int, k: int, g: int, ready: float) -> float:
        """Earliest start of a task of j on GPU (k, g) placed after its last task."""
        last = self.last[k][g]
        pays = last != j and (last != -1 or data.first_task_pays)
        return max(ready, self.free[k][g] + (float(data.switch[j, k]) if pays else 0.0))


def _place_job(data: HareData, state: _Gpus, j: int, types: list[int], *,
               by_end: bool) -> list[Task]:
    """Place all rounds of job j on GPUs of ``types`` (updating ``state``); each task on the
    GPU where it ends earliest (``by_end``) or starts earliest."""
    tasks: list[Task] = []
    ready = float(data.arrival[j])
    for q in range(int(data.rounds[j])):
        round_end = ready
        for i in range(int(data.tasks[j])):
            best: tuple[float, int, int, float] | None = None
            for k in types:
                p = float(data.seconds[j, k])
                for g in range(int(data.gpus[k])):
                    s = state.start(data, j, k, g, ready)
                    key = s + p if by_end else s
                    if best is None or key < best[0]:
                        best = (key, k, g, s)
            assert best is not None
            _, k, g, s = best
            e = s + float(data.seconds[j, k])
            state.free[k][g] = e
            state.last[k][g] = j
            tasks.append(Task(job=j, round=q, index=i, type=k, gpu=g, start=s, end=e))
            round_end = max(round_end, e)
        ready = round_end
    return tasks


def _wspt_order(data: HareData, seconds: np.ndarray) -> list[int]:
    """Jobs by w_j / (R_j m_j seconds_j) descending (ties: file order)."""
    ratio = data.weight / (data.rounds * data.tasks * seconds)
    return sorted(range(data.num_jobs), key=lambda j: (-float(ratio[j]), j))


def sched_homo_tasks(data: HareData) -> list[Task]:
    """Sched_Homo's schedule (module docstring)."""
    usable = [[k for k in range(data.num_types) if data.usable[j, k]]
              for j in range(data.num_jobs)]
    mean_p = np.array([float(np.mean(data.seconds[j, usable[j]]))
                       for j in range(data.num_jobs)])
    state = _Gpus.empty(data)
    tasks: list[Task] = []
    for j in _wspt_order(data, mean_p):
        tasks += _place_job(data, state, j, usable[j], by_end=False)
    return tasks


def sched_allox_tasks(data: HareData) -> list[Task]:
    """Sched_Allox's schedule (module docstring)."""
    state = _Gpus.empty(data)
    tasks: list[Task] = []
    for j in _wspt_order(data, data.min_seconds):
        best: tuple[float, int, _Gpus, list[Task]] | None = None
        for k in range(data.num_types):
            if not data.usable[j, k]:
                continue
            trial = state.copy()
            placed = _place_job(data, trial, j, [k], by_end=True)
            end = max(t.end for t in placed)
            if best is None or end < best[0]:
                best = (end, k, trial, placed)
        assert best is not None
        state = best[2]
        tasks += best[3]
    return tasks


class _Baseline(Heuristic):
    """Common part: read the data, schedule, make the Solution."""

    objective_sense: ClassVar[ObjectiveSense | None] = "minimize"

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """sum_j w_j C_j of the schedule, re-derived from the instance."""
        return objective_of_schedule(instance, solution)

    def validate(self, instance: Instance) -> None:
        """The Hare job fields must be present (InputError naming the first missing one)."""
        hare_data(instance, self.name)

    def example_instance(self) -> Instance:
        """The shipped small example (6 jobs on 4 GPUs)."""
        from schedlab.workloads.hare import example_instances

        return example_instances()["small-6jobs-4gpus.json"]

    @abstractmethod
    def schedule(self, data: HareData) -> list[Task]:
        """The baseline's task schedule of ``data``."""

    def run(self, instance: Instance) -> Solution:
        """The baseline's schedule as a Solution (status feasible, no bound)."""
        data = hare_data(instance, self.name)
        return hare_solution(instance, self.name, data, self.schedule(data),
                             status=Status.FEASIBLE)


class SchedHomo(_Baseline):
    """``hare.sched_homo``: heterogeneity-oblivious list scheduling."""

    name = "hare.sched_homo"

    def validate(self, instance: Instance) -> None:
        """As every baseline, and no ``params.one_type_per_round``: this heuristic spreads a
        round over whatever GPUs free first, of any type."""
        super().validate(instance)
        if instance.params.one_type_per_round:
            raise InputError(f"{self.name} spreads a round's tasks over GPU types; it does "
                             "not keep one type per round (use hare.greedy, hare.exact or "
                             "hare.sched_allox)", field="params.one_type_per_round")

    def schedule(self, data: HareData) -> list[Task]:
        return sched_homo_tasks(data)


class SchedAllox(_Baseline):
    """``hare.sched_allox``: one GPU type per job, chosen to end the job earliest."""

    name = "hare.sched_allox"

    def schedule(self, data: HareData) -> list[Task]:
        return sched_allox_tasks(data)
