r"""Hare's data in arrays, a task schedule, and the objective: the pieces every Hare method shares.

**The model** (docs/formulations/hare.md).  Jobs j = 0..J-1 with weight w_j > 0, arrival
r_j >= 0, R_j rounds of m_j tasks; GPU types k = 0..K-1 with n_k GPUs; p[j,k] = seconds of one
task of j on type k (``inf``: j cannot use k, or k has no GPU); sigma[j,k] = switch seconds
(the idle gap a GPU of type k keeps before a task of j that follows another job's task).
Every task runs once, unpreempted, on one GPU of a usable type, for exactly p[j,k] seconds; a
GPU runs one task at a time; round q+1 of a job starts after every task of its round q ended;
round 0 starts at or after r_j.  C_j = end of j's last task.  Objective: minimize
sum_j w_j C_j; the weighted JCT sum_j w_j (C_j - r_j) is reported beside it.

**API** (stable; ``hare.exact``, the policies and the checker build on it)::

    from schedlab.formulations.hare.model import (
        HareData, Task, hare_data, hare_solution, tasks_from_schedule, weighted_completion)

    data = hare_data(instance, "hare.greedy")   # InputError naming the missing field
    data.weight, data.arrival, data.rounds, data.tasks    # (J,) arrays; rounds/tasks int
    data.seconds, data.switch                             # (J, K): p[j,k] (inf: unusable),
                                                          # sigma[j,k]
    data.gpus                                             # (K,) n_k; data.types, data.job_ids
    data.usable                                           # (J, K) bool: p finite
    data.min_seconds                                      # (J,) min_k p[j,k]
    data.trivial_bound()        # sum_j w_j (r_j + R_j min_k p[j,k])
    data.first_task_pays        # params.switch_on_first_task
    data.one_type_per_round     # params.one_type_per_round: a round's tasks on one type

    task = Task(job=j, round=q, index=i, type=k, gpu=g, start=s, end=e)  # g within type k
    C = completion_times(data, tasks)               # (J,) end of each job's last task
    weighted_completion(data, C), weighted_jct(data, C)
    solution = hare_solution(instance, "hare.exact", data, tasks, status=..., bound=...)
    tasks = tasks_from_schedule(data, solution.schedule)  # None when an entry is not a task

A Solution of a Hare method carries one :class:`~schedlab.solution.ScheduleEntry` per task
(``job``, ``round``, ``task``, ``accelerator``, ``gpu_ids=[g]``, ``start``, ``end``); its
``objective`` is sum_j w_j C_j and its ``metrics`` hold ``weighted_completion``,
``weighted_jct`` and ``completion_s`` per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from schedlab.instance import Instance
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Job fields every Hare method needs.
REQUIRED_FIELDS = ("rounds", "tasks_per_round", "task_seconds")


@dataclass(frozen=True)
class HareData:
    """An Instance read into arrays (module docstring); jobs and types in file order."""

    job_ids: list[str]
    types: list[str]
    gpus: IntArray
    weight: FloatArray
    arrival: FloatArray
    rounds: IntArray
    tasks: IntArray
    seconds: FloatArray
    switch: FloatArray
    first_task_pays: bool = False
    one_type_per_round: bool = False
    usable: BoolArray = field(init=False)
    min_seconds: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "usable", np.isfinite(self.seconds))
        object.__setattr__(self, "min_seconds", self.seconds.min(axis=1))

    @property
    def num_jobs(self) -> int:
        """J."""
        return len(self.job_ids)

    @property
    def num_types(self) -> int:
        """K."""
        return len(self.types)

    @property
    def total_tasks(self) -> int:
        """sum_j R_j m_j."""
        return int((self.rounds * self.tasks).sum())

    def trivial_bound(self) -> float:
        """sum_j w_j (r_j + R_j min_k p[j,k]): every round lasts at least one fastest task."""
        return float(self.weight @ (self.arrival + self.rounds * self.min_seconds))


@dataclass(frozen=True)
class Task:
    """One placed task: round ``round`` (0-based) task ``index`` of job ``job`` on GPU ``gpu``
    (its index within type ``type``) over [start, end), seconds."""

    job: int
    round: int
    index: int
    type: int
    gpu: int
    start: float
    end: float


def hare_data(instance: Instance, formulation: str) -> HareData:
    """Read ``instance``; an :class:`InputError` names the first job field a Hare method needs
    and lacks (``rounds``, ``tasks_per_round``, ``task_seconds``).  A type with no GPU is
    unusable for everyone (p = inf there)."""
    for name in REQUIRED_FIELDS:
        instance.require(name, formulation=formulation)
    types = instance.types
    pools = instance.cluster.accelerators
    gpus = np.array([pools[k].count for k in types], dtype=np.int64)
    jobs = instance.jobs
    seconds = np.full((len(jobs), len(types)), np.inf)
    switch = np.zeros((len(jobs), len(types)))
    for j, job in enumerate(jobs):
        assert job.task_seconds is not None
        for k, acc in enumerate(types):
            p = job.task_seconds.get(acc)
            if p is not None and gpus[k] > 0:
                seconds[j, k] = p
            switch[j, k] = job.switch_seconds_on(acc)
    return HareData(
        job_ids=[job.id for job in jobs], types=list(types), gpus=gpus,
        weight=np.array([job.weight for job in jobs], dtype=float),
        arrival=np.array([job.arrival for job in jobs], dtype=float),
        rounds=np.array([job.rounds for job in jobs], dtype=np.int64),
        tasks=np.array([job.tasks_per_round for job in jobs], dtype=np.int64),
        seconds=seconds, switch=switch,
        first_task_pays=instance.params.switch_on_first_task,
        one_type_per_round=instance.params.one_type_per_round)


def completion_times(data: HareData, tasks: Sequence[Task]) -> FloatArray:
    """C_j = max end of job j's tasks (its arrival when it has none)."""
    completion = data.arrival.copy()
    if tasks:
        jobs = np.fromiter((t.job for t in tasks), dtype=np.int64, count=len(tasks))
        ends = np.fromiter((t.end for t in tasks), dtype=float, count=len(tasks))
        np.maximum.at(completion, jobs, ends)
    return completion


def weighted_completion(data: HareData, completion: FloatArray) -> float:
    """sum_j w_j C_j (the quantity the solvers minimize and bounds bound)."""
    return float(data.weight @ completion)


def weighted_jct(data: HareData, completion: FloatArray) -> float:
    """sum_j w_j (C_j - r_j) (the seed's metric; tables compare policies on it)."""
    return float(data.weight @ (completion - data.arrival))


def schedule_entries(data: HareData, tasks: Sequence[Task]) -> list[ScheduleEntry]:
    """One ScheduleEntry per task, sorted by (start, type, gpu)."""
    ordered = sorted(tasks, key=lambda t: (t.start, t.type, t.gpu, t.job, t.round, t.index))
    return [ScheduleEntry(job=data.job_ids[t.job], start=t.start, end=t.end,
                          accelerator=data.types[t.type], gpus=1, round=t.round, task=t.index,
                          gpu_ids=[t.gpu])
            for t in ordered]


def tasks_from_schedule(data: HareData, schedule: Sequence[ScheduleEntry]) -> list[Task] | None:
    """The tasks of a schedule; None when an entry is not a Hare task (unknown job or type,
    no round, task index or single GPU index)."""
    jobs = {job: j for j, job in enumerate(data.job_ids)}
    types = {acc: k for k, acc in enumerate(data.types)}
    out: list[Task] = []
    for e in schedule:
        j, k = jobs.get(e.job), types.get(e.accelerator or "")
        if (j is None or k is None or e.round is None or e.task is None
                or e.gpu_ids is None or len(e.gpu_ids) != 1):
            return None
        out.append(Task(job=j, round=e.round, index=e.task, type=k, gpu=e.gpu_ids[0],
                        start=e.start, end=e.end))
    return out


def objective_of_schedule(instance: Instance, solution: Solution) -> float | None:
    """sum_j w_j C_j of the solution's schedule re-derived from the instance (None when the
    solution has no schedule or an entry is not a task)."""
    if not solution.schedule:
        return None
    data = hare_data(instance, solution.formulation)
    tasks = tasks_from_schedule(data, solution.schedule)
    if tasks is None:
        return None
    return weighted_completion(data, completion_times(data, tasks))


#: Relative excess of a solver's bound over the re-timed schedule's value that is put down to
#: the solver's tolerances (the schedule is re-timed from the solver's order and GPUs).
BOUND_EXCESS_TOLERANCE = 1e-6


def reconcile_bound(bound: float | None, objective: float, status: Status
                    ) -> tuple[float | None, Status, str | None]:
    """A lower bound above the value of a feasible schedule is impossible.  Within
    :data:`BOUND_EXCESS_TOLERANCE` (relative) it is the solver's tolerances and the bound is
    set to the value; beyond, nothing proves either number, so no bound is claimed and an
    ``optimal`` status becomes ``feasible``.  Returns (bound, status, a note or None)."""
    if bound is None or bound <= objective:
        return bound, status, None
    if bound <= objective + BOUND_EXCESS_TOLERANCE * max(1.0, abs(objective)):
        return objective, status, (f"the solver's bound {bound!r} exceeds the retimed "
                                   f"schedule's value {objective!r} within its tolerances: "
                                   "bound set to that value")
    return None, Status.FEASIBLE if status == Status.OPTIMAL else status, (
        f"the solver's bound {bound!r} exceeds the retimed schedule's value {objective!r} "
        "beyond its tolerances: no bound is claimed")


def hare_solution(instance: Instance, formulation: str, data: HareData, tasks: Sequence[Task],
                  *, status: Status, bound: float | None = None,
                  solver: str = "none") -> Solution:
    """A Solution carrying ``tasks``: objective sum_j w_j C_j, ``bound`` and the gap from it,
    metrics ``weighted_completion``, ``weighted_jct``, ``completion_s`` {job: C_j} and, with
    a bound, ``bound_ratio`` = objective / bound."""
    completion = completion_times(data, tasks)
    objective = weighted_completion(data, completion)
    gap = None if bound is None else abs(objective - bound) / max(abs(objective), 1e-10)
    solution = Solution(
        instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
        formulation=formulation, solver=solver, status=status, objective=objective,
        bound=bound, gap=gap, schedule=schedule_entries(data, tasks))
    solution.metrics.update(
        weighted_completion=objective, weighted_jct=weighted_jct(data, completion),
        completion_s=dict(zip(data.job_ids, completion.tolist(), strict=True)))
    if bound is not None and bound > 0:
        solution.metrics["bound_ratio"] = objective / bound
    return solution
