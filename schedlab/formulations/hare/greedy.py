r"""``hare.greedy``: list scheduling in the LP order, each task on the GPU that ends it earliest.

Rounds are placed one at a time.  A round is *ready* when its job's previous round has been
placed (round 0: at once); its ready time t_u is the end of the previous round's last task
(the barrier), or r_j for round 0.  Among the ready rounds the one with the smallest priority

    pi_u = max(t_u, min(L_u, t_u + Delta))

is placed next (ties: job order of the LP, then job index), where L_u is the round's LP
completion time C[u] (:mod:`schedlab.formulations.hare.lp_bound`; without an LP, the trivial
r_j + (q+1) pmin_j) and Delta = ``max_wait_s``.  Its m_j tasks go one by one to the GPU g
(any type the job can use) that ends the task earliest:

    start = max(t_u, free_g + gap),  end = start + p[j, type(g)],

free_g = the end of the last task placed on g, gap = sigma[j, type(g)] when g's last task
belongs to another job (or g has none and ``params.switch_on_first_task``), else 0; ties go
to the lower type, then GPU index.  By default a task goes after the GPU's last task (list
order, no backfilling into earlier idle gaps).

**Backfilling** (``backfill=True``).  A task may also go into an idle gap of g between two
placed tasks a and b (or before g's first task b) when it fits entirely, moving no placed
task:

    start = max(t_u, end(a) + gap_in),   end = start + p[j, type(g)],
    end + gap_out <= start(b),

gap_in as above (sigma[j, type(g)] when a is another job's, 0 for the same job; no a: 0, or
sigma when the first task pays), gap_out = sigma[job(b), type(g)] when b is another job's,
else 0 (b now follows the new task and pays its switch from it).  On each GPU the first
slot that fits (gaps in time order, then after the last task) has the earliest start; the
task goes to the GPU whose earliest slot ends it earliest (ties as above).  The rounds are
placed in the same order, so a backfilled schedule is not always better: an earlier task
changes the later choices.

**One type per round** (``params.one_type_per_round``, or the option
``one_type_per_round=True``).  A round's tasks all go to one GPU type: for each type the job
can use, the round is placed as above on that type's GPUs alone (a trial, undone), and the
round is placed for real on the type whose trial ends the round earliest (ties: the lower
type).

**Starvation-freedom.**  pi_u lies in [t_u, t_u + Delta].  A round that becomes ready more
than Delta after round u has priority > t_u + Delta >= pi_u, so it is placed after u: no
round is overtaken by rounds that became ready more than Delta later, whatever their
weights or LP order (tests/test_hare_greedy.py checks it on the placement order).

**Reporting.**  Status ``feasible``; ``bound`` = the LP optimum when it was proven (the
objective is then >= it), ``metrics["bound_ratio"]`` = greedy / bound on sum_j w_j C_j,
``weighted_jct``, ``order`` (the placement order of the rounds as [job, round]).
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from typing import ClassVar

import numpy as np

from schedlab.errors import InputError
from schedlab.formulations.base import Method
from schedlab.formulations.hare.lp_bound import DEFAULT_EPS, example_instance, lp_relaxation
from schedlab.formulations.hare.model import (
    FloatArray,
    HareData,
    IntArray,
    Task,
    hare_data,
    hare_solution,
    objective_of_schedule,
)
from schedlab.instance import Instance
from schedlab.solution import Solution, Status, Timings
from schedlab.solvers import SolverOptions

#: Default Delta of the starvation rule, s (the seed's horizon: most jobs end in 25 min).
DEFAULT_MAX_WAIT_S = 1800.0


class GpuTimelines:
    """The tasks placed on every GPU, in time order: starts, ends and jobs per GPU (global
    GPU index), for the backfilling search of :meth:`earliest_gap_end`."""

    def __init__(self, num_gpus: int, switch_on: FloatArray, first_gap: float) -> None:
        self.starts: list[list[float]] = [[] for _ in range(num_gpus)]
        self.ends: list[list[float]] = [[] for _ in range(num_gpus)]
        self.jobs: list[list[int]] = [[] for _ in range(num_gpus)]
        self.switch_on = switch_on      # (J, G): sigma[j, type(g)]
        self.first_gap = first_gap      # 1.0 when a GPU's first task pays sigma

    def earliest_gap_end(self, g: int, j: int, ready: float, seconds: float,
                         limit: float) -> tuple[float, float, int] | None:
        """The first idle gap of GPU g (before its last task) that holds a task of job j of
        ``seconds`` s ready at ``ready`` (module docstring's gap_in and gap_out), as (start,
        end, insertion position); None when no gap holds it or its end would exceed
        ``limit`` (a slot ending later cannot win)."""
        starts, ends, jobs = self.starts[g], self.ends[g], self.jobs[g]
        sigma_j = float(self.switch_on[j, g])
        # position k = insert before task k; task k must start at or after ready + seconds
        for k in range(bisect.bisect_left(starts, ready + seconds), len(starts)):
            if k == 0:
                start = max(ready, self.first_gap * sigma_j)
            else:
                if ends[k - 1] + seconds > limit:
                    return None   # ends only grow along the GPU: no later gap can win
                start = max(ready, ends[k - 1] + (0.0 if jobs[k - 1] == j else sigma_j))
            end = start + seconds
            if end > limit:
                return None
            gap_out = 0.0 if jobs[k] == j else float(self.switch_on[jobs[k], g])
            if end + gap_out <= starts[k]:
                return start, end, k
        return None

    def copy(self, gpus: IntArray) -> GpuTimelines:
        """A copy whose GPUs ``gpus`` have their own lists (the others' are shared: a trial
        placement on ``gpus`` alone leaves this one unchanged)."""
        twin = GpuTimelines(0, self.switch_on, self.first_gap)
        twin.starts, twin.ends, twin.jobs = list(self.starts), list(self.ends), list(self.jobs)
        for g in gpus:
            twin.starts[g], twin.ends[g] = list(self.starts[g]), list(self.ends[g])
            twin.jobs[g] = list(self.jobs[g])
        return twin

    def insert(self, g: int, k: int, start: float, end: float, j: int) -> None:
        """Record a task of job j on GPU g at position k."""
        self.starts[g].insert(k, start)
        self.ends[g].insert(k, end)
        self.jobs[g].insert(k, j)


def greedy_schedule(data: HareData, round_keys: FloatArray, job_rank: IntArray,
                    max_wait_s: float, *, backfill: bool = False, one_type: bool = False,
                    ) -> tuple[list[Task], list[tuple[int, int]]]:
    """The module docstring's list schedule; returns the tasks and the placement order of
    the rounds as (job, round).  ``round_keys``: L_u in (job, round) order; ``job_rank``:
    each job's position in the LP order (ties); ``backfill``: also try the idle gaps;
    ``one_type``: each round on one GPU type (also when ``data.one_type_per_round``)."""
    starts = np.concatenate([[0], np.cumsum(data.rounds)])
    gpu_type = np.repeat(np.arange(data.num_types), data.gpus)
    gpu_local = np.concatenate([np.arange(n) for n in data.gpus]) if len(gpu_type) else \
        np.zeros(0, dtype=np.int64)
    free = np.zeros(len(gpu_type))
    last_job = np.full(len(gpu_type), -1)
    seconds_on = data.seconds[:, gpu_type]     # (J, G)
    switch_on = data.switch[:, gpu_type]       # (J, G)
    first_gap = 1.0 if data.first_task_pays else 0.0
    heap: list[tuple[float, int, int, int, float]] = []
    timelines = GpuTimelines(len(gpu_type), switch_on, first_gap) if backfill else None
    one_type = one_type or data.one_type_per_round

    def push(j: int, q: int, ready: float) -> None:
        key = float(round_keys[starts[j] + q])
        priority = max(ready, min(key, ready + max_wait_s))
        heapq.heappush(heap, (priority, int(job_rank[j]), j, q, ready))

    def place(j: int, ready: float, p: FloatArray, free: FloatArray, last_job: IntArray,
              timelines: GpuTimelines | None) -> list[tuple[int, float, float]]:
        """Place the m_j tasks of a round of j (GPUs with p = inf are never chosen),
        updating ``free``, ``last_job`` and ``timelines``; returns (GPU, start, end) each."""
        placed: list[tuple[int, float, float]] = []
        for _ in range(int(data.tasks[j])):
            gap = np.where(last_job == j, 0.0,
                           np.where(last_job < 0, first_gap, 1.0) * switch_on[j])
            start = np.maximum(ready, free + gap)
            end = start + p
            g = int(np.argmin(end))  # inf where the job cannot run; first minimum on ties
            task_start, task_end = float(start[g]), float(end[g])
            slot = None
            if timelines is not None:
                best, best_g, position = task_end, g, len(timelines.starts[g])
                for h in np.flatnonzero(ready + p <= best):   # usable, may beat the best
                    found = timelines.earliest_gap_end(int(h), j, ready, float(p[h]), best)
                    if found is not None and (found[1] < best
                                              or (found[1] == best and h < best_g)):
                        task_start, best, best_g, position = found[0], found[1], int(h), found[2]
                        slot = position
                g, task_end = best_g, best
                timelines.insert(g, position, task_start, task_end, j)
            placed.append((g, task_start, task_end))
            if slot is None:   # appended after g's last task
                free[g] = task_end
                last_job[g] = j
        return placed

    for j in range(data.num_jobs):
        push(j, 0, float(data.arrival[j]))
    tasks: list[Task] = []
    order: list[tuple[int, int]] = []
    while heap:
        _, _, j, q, ready = heapq.heappop(heap)
        order.append((j, q))
        p = seconds_on[j]
        if one_type:   # the type whose GPUs alone end the round earliest (ties: lower type)
            best_end, best_p = math.inf, p
            for k in np.flatnonzero(data.usable[j]):
                p_k = np.where(gpu_type == k, p, np.inf)
                trial = place(j, ready, p_k, free.copy(), last_job.copy(),
                              None if timelines is None
                              else timelines.copy(np.flatnonzero(gpu_type == k)))
                trial_end = max(e for _, _, e in trial)
                if trial_end < best_end:
                    best_end, best_p = trial_end, p_k
            p = best_p
        placed = place(j, ready, p, free, last_job, timelines)
        for index, (g, task_start, task_end) in enumerate(placed):
            tasks.append(Task(job=j, round=q, index=index, type=int(gpu_type[g]),
                              gpu=int(gpu_local[g]), start=task_start, end=task_end))
        round_end = max([ready] + [e for _, _, e in placed])
        if q + 1 < data.rounds[j]:
            push(j, q + 1, round_end)
    return tasks, order


class HareGreedy(Method):
    """``hare.greedy`` (module docstring).

    Args:
        use_lp: order by the LP's round completion times (False: by the trivial
            r_j + (q+1) pmin_j, no LP solved and no bound).
        max_wait_s: Delta of the starvation rule, s.
        eps: the LP grid's eps.
        backfill: also place a task in an idle gap between placed tasks when it fits
            (module docstring); default off: after the GPU's last task.
        one_type_per_round: run every round on one GPU type (module docstring, "One type
            per round"); always on when the instance sets ``params.one_type_per_round``.
    """

    name = "hare.greedy"
    description: ClassVar[str] = ("Hare: rounds in the LP order, each task on the GPU that "
                                  "ends it earliest (barriers, switch costs, arrivals)")
    objective_sense = "minimize"

    def __init__(self, *, use_lp: bool = True, max_wait_s: float = DEFAULT_MAX_WAIT_S,
                 eps: float = DEFAULT_EPS, backfill: bool = False,
                 one_type_per_round: bool = False) -> None:
        if not (max_wait_s >= 0 and not math.isnan(max_wait_s)):
            raise InputError(f"max_wait_s must be >= 0, got {max_wait_s}", field="max_wait_s")
        self.use_lp = use_lp
        self.max_wait_s = max_wait_s
        self.eps = eps
        self.backfill = backfill
        self.one_type_per_round = one_type_per_round

    def validate(self, instance: Instance) -> None:
        """Every job has rounds, tasks_per_round and task_seconds."""
        hare_data(instance, self.name)

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """LP (unless ``use_lp`` is off), then the list schedule."""
        data = hare_data(instance, self.name)
        t0 = time.perf_counter()
        job_of = np.repeat(np.arange(data.num_jobs), data.rounds)
        q_of = np.concatenate([np.arange(r) for r in data.rounds])
        keys = data.arrival[job_of] + (q_of + 1) * data.min_seconds[job_of]
        rank = np.arange(data.num_jobs)
        bound = None
        diagnostics: list[str] = []
        lp_s = 0.0
        if self.use_lp:
            lp = lp_relaxation(data, options, eps=self.eps)
            lp_s = time.perf_counter() - t0
            if lp.round_completion is not None:
                keys = lp.round_completion
                rank = np.empty(data.num_jobs, dtype=np.int64)
                rank[lp.order] = np.arange(data.num_jobs)
                bound = lp.bound
            else:
                diagnostics.append(f"LP not solved ({lp.result.status.value}: "
                                   f"{lp.result.message}); fallback: the trivial order")
        t1 = time.perf_counter()
        tasks, order = greedy_schedule(data, keys, rank, self.max_wait_s,
                                       backfill=self.backfill,
                                       one_type=self.one_type_per_round)
        solution = hare_solution(instance, self.name, data, tasks, status=Status.FEASIBLE,
                                 bound=bound)
        solution.solver = "none"  # a heuristic: the LP only orders it and bounds it
        solution.diagnostics += diagnostics
        solution.metrics.update(order=[[data.job_ids[j], q] for j, q in order],
                                trivial_bound=data.trivial_bound(), lp_s=lp_s,
                                greedy_s=time.perf_counter() - t1)
        solution.timings = Timings(build_s=0.0, solve_s=lp_s,
                                   extract_s=time.perf_counter() - t1)
        return solution

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """sum_j w_j C_j of the schedule."""
        return objective_of_schedule(instance, solution)

    def example_instance(self) -> Instance:
        """Four jobs on 2 V100 + 2 K80 (:func:`~schedlab.formulations.hare.lp_bound.
        example_instance`)."""
        return example_instance()
