"""An exact brute-force optimum of a small Hare instance, independent of schedlab's solvers.

:func:`brute_force_optimum` returns min sum_j w_j C_j and one optimal schedule, read from the
Instance alone (weights, arrivals, rounds, tasks per round, ``task_seconds``,
``switch_seconds``, the pools' GPU counts, ``params.switch_on_first_task`` and
``params.one_type_per_round``); the rules are those of docs/formulations/hare.md.

**Why the search is exact.**  Fix a *sequence*: which GPU runs each task and in which order.
Every start rule has the form start(b) >= max(...) of earlier ends plus constants (arrival,
barrier = end of every task of the previous round, previous task on the GPU + sigma[job(b),
type] when its job differs, sigma from time 0 for a GPU's first task with the first-task
option), so among the schedules with that sequence the *earliest-start* one (every task at
the max of its rules) ends every task earliest, and sum_j w_j C_j is nondecreasing in the
ends: some sequence's earliest-start schedule is optimal.  Delay-free ("active") schedules
need not suffice (a GPU may best idle for a job that is not ready yet), so we do not restrict
to them.

An earliest-start schedule can be rebuilt by placing its tasks in order of (start, global
GPU index): a task's predecessors (the previous task on its GPU, the previous round's tasks)
start strictly earlier because task times are > 0, so each is placed before it, and each
placement computes exactly its earliest start.  The search therefore builds schedules task by
task, each new task appended to a GPU's sequence and timed at its earliest start, and only
in strictly increasing (start, GPU) order: every earliest-start schedule is built exactly once
along one path (sequences that deadlock -- a GPU order against the barriers -- are never
built, since no task is placed before its predecessors).  Symmetry cuts, each keeping at
least one optimal schedule:

* tasks of one round are interchangeable: the search picks a *round* and gives its next task
  index (indices 0, 1, ... in placement order);
* GPUs of one type are interchangeable: a task goes to an unused GPU of a type only when it
  is the type's first unused one (relabel each type's GPUs by the start of their first task:
  then the (start, GPU) order uses them in index order);
* jobs with identical data (weight, arrival, rounds, tasks, times, switch costs) are
  interchangeable: a job starts only after its identical predecessor in file order has;
* branch and bound: a partial schedule is dropped when a lower bound on its value is >= the
  best value found.  The bound is sum over finished jobs of w_j C_j plus the larger of two
  sums over the unfinished ones (T = the last placed start: later tasks start no earlier):
  (a) per job, w_j times [max(its round's latest placed end, T_j + ceil(rest / n_j) pmin_j,
  the earliest end of its next task after some usable GPU's last task and switch gap) +
  (its later rounds) ceil(m_j / n_j) pmin_j], with T_j = max(T, its ready time), rest = its
  round's unplaced tasks and n_j its usable GPUs; (b) the fluid bound: the remaining work
  W_j = (unplaced tasks) pmin_j on one machine n_gpus times faster from T, preemptive, in
  Smith's order W_j / w_j (any schedule's work, done in its time order there, ends each job
  no later, and Smith's order is optimal for that machine).

``params.one_type_per_round``: a round's later tasks may use only the type of its first.

**Reach** (measured on the 2-core development machine): 8 tasks on 4 GPUs in < 0.6 s; 10
tasks on 4 GPUs in 0.01-15 s (slowest: ten one-task jobs of different times and weights,
no switch costs); 12 such tasks pass ``max_nodes``.  The node count grows roughly like
(GPUs x unfinished jobs)^tasks; ``max_nodes`` (default 2 000 000, roughly 10-25 s) stops the
search with a RuntimeError rather than run for minutes.
"""

from __future__ import annotations

import math
from typing import Any

from schedlab.instance import Instance

#: Default limit on the search nodes (placements tried).
MAX_NODES = 2_000_000


def brute_force_optimum(instance: Instance, *, max_nodes: int = MAX_NODES,
                        ) -> tuple[float, list[dict[str, Any]]]:
    """(min sum_j w_j C_j, an optimal schedule) of a small Hare instance (module docstring).

    The schedule is a list of dicts like a Solution's entries: ``job`` (id), ``round``,
    ``task``, ``accelerator``, ``gpu_ids`` ([g], g within the type), ``start``, ``end``,
    sorted by (start, GPU).  Task times are > 0 (the Instance's rule).  Raises RuntimeError
    past ``max_nodes`` nodes."""
    jobs = instance.jobs
    n_jobs = len(jobs)
    gpus = [(acc, i) for acc, pool in instance.cluster.accelerators.items()
            for i in range(pool.count)]
    n_gpus = len(gpus)
    first_pays = instance.params.switch_on_first_task
    one_type = bool(getattr(instance.params, "one_type_per_round", False))
    weight = [job.weight for job in jobs]
    arrival = [job.arrival for job in jobs]
    rounds = [int(job.rounds or 0) for job in jobs]
    per = [int(job.tasks_per_round or 0) for job in jobs]
    # p[j][g]: seconds of j's task on GPU g (None: unusable); sigma[j][g]
    p: list[list[float | None]] = [
        [(job.task_seconds or {}).get(acc) for acc, _ in gpus] for job in jobs]
    sigma = [[job.switch_seconds_on(acc) for acc, _ in gpus] for job in jobs]
    usable = [[g for g in range(n_gpus) if p[j][g] is not None] for j in range(n_jobs)]
    for j in range(n_jobs):
        if rounds[j] * per[j] > 0 and not usable[j]:
            raise ValueError(f"job {jobs[j].id} can use no GPU")
    pmin = [min((x for x in p[j] if x is not None), default=math.inf) for j in range(n_jobs)]
    n_usable = [max(1, len(usable[j])) for j in range(n_jobs)]
    # previous GPU of the same type (None for a type's GPU 0): the symmetry cut
    same_type_prev = [g - 1 if g > 0 and gpus[g - 1][0] == gpus[g][0] else None
                      for g in range(n_gpus)]

    # state
    free = [0.0] * n_gpus
    last = [-1] * n_gpus
    cur = [0] * n_jobs                 # round being placed (rounds[j]: done)
    placed = [0] * n_jobs              # tasks of round cur[j] placed
    ready = list(arrival)              # ready time of round cur[j]
    round_end = [0.0] * n_jobs         # latest end of round cur[j]'s placed tasks
    round_gpu = [-1] * n_jobs          # a GPU of round cur[j]'s first task (one type)
    done = [0.0] * n_jobs              # C_j of finished jobs
    path: list[tuple[int, int, int, int, float, float]] = []   # (j, q, index, g, s, e)
    best_value = math.inf
    best_path: list[tuple[int, int, int, int, float, float]] = []
    nodes = 0
    # twin[j]: the previous job with the same data (interchangeable: start it first)
    signature = [(weight[j], arrival[j], rounds[j], per[j], tuple(p[j]), tuple(sigma[j]))
                 for j in range(n_jobs)]
    twin = [max((i for i in range(j) if signature[i] == signature[j]), default=-1)
            for j in range(n_jobs)]
    for j in range(n_jobs):
        if rounds[j] * per[j] == 0:
            cur[j] = rounds[j]
            done[j] = arrival[j]

    def bound(t_now: float) -> float:
        total = fixed = 0.0
        work: list[tuple[float, float, float]] = []    # (W_j / w_j, W_j, w_j)
        for j in range(n_jobs):
            if cur[j] >= rounds[j]:
                fixed += weight[j] * done[j]
                continue
            pj, nj = pmin[j], n_usable[j]
            rest = per[j] - placed[j]
            begin = max(ready[j], t_now)
            end = begin + math.ceil(rest / nj) * pj
            first = math.inf            # the next task: after some usable GPU's last task
            for g in usable[j]:
                if last[g] < 0:
                    gap = sigma[j][g] if first_pays else 0.0
                else:
                    gap = 0.0 if last[g] == j else sigma[j][g]
                first = min(first, max(begin, free[g] + gap) + p[j][g])  # type: ignore[operator]
            end = max(end, first)
            if placed[j]:
                end = max(end, round_end[j])
            end += (rounds[j] - cur[j] - 1) * math.ceil(per[j] / nj) * pj
            total += weight[j] * end
            left = (rest + (rounds[j] - cur[j] - 1) * per[j]) * pj
            work.append((left / weight[j], left, weight[j]))
        if len(work) > 1:   # the fluid bound: all the rest on one machine n_gpus times faster
            work.sort()
            clock, fluid = t_now, 0.0
            for _, left, w in work:
                clock += left / n_gpus
                fluid += w * clock
            total = max(total, fluid)
        return fixed + total

    def search(t_last: float, g_last: int, remaining: int) -> None:
        nonlocal best_value, best_path, nodes
        if remaining == 0:
            value = sum(weight[j] * done[j] for j in range(n_jobs))
            if value < best_value:
                best_value, best_path = value, list(path)
            return
        children: list[tuple[float, float, int, int]] = []
        for j in range(n_jobs):
            if cur[j] >= rounds[j]:
                continue
            i = twin[j]
            if i >= 0 and cur[j] == placed[j] == 0 and cur[i] == placed[i] == 0:
                continue                    # its twin i has not started yet
            for g in usable[j]:
                if last[g] < 0:
                    prev = same_type_prev[g]
                    if prev is not None and last[prev] < 0:
                        continue            # not its type's first unused GPU
                if one_type and placed[j] and gpus[g][0] != gpus[round_gpu[j]][0]:
                    continue
                if last[g] < 0:
                    gap = sigma[j][g] if first_pays else 0.0
                    start = max(ready[j], gap)
                else:
                    gap = 0.0 if last[g] == j else sigma[j][g]
                    start = max(ready[j], free[g] + gap)
                if start < t_last or (start == t_last and g <= g_last):
                    continue
                duration = p[j][g]
                assert duration is not None
                children.append((start + duration, start, j, g))
        children.sort()
        for end, start, j, g in children:
            nodes += 1
            if nodes > max_nodes:
                raise RuntimeError(f"brute force: more than {max_nodes} nodes")
            saved = (free[g], last[g], cur[j], placed[j], ready[j], round_end[j],
                     round_gpu[j], done[j])
            path.append((j, cur[j], placed[j], g, start, end))
            free[g], last[g] = end, j
            if placed[j] == 0:
                round_gpu[j] = g
                round_end[j] = end
            else:
                round_end[j] = max(round_end[j], end)
            placed[j] += 1
            if placed[j] == per[j]:
                ready[j] = round_end[j]
                cur[j] += 1
                placed[j] = 0
                if cur[j] == rounds[j]:
                    done[j] = round_end[j]
            if bound(start) < best_value:
                search(start, g, remaining - 1)
            path.pop()
            (free[g], last[g], cur[j], placed[j], ready[j], round_end[j], round_gpu[j],
             done[j]) = saved

    total_tasks = sum(r * m for r, m in zip(rounds, per, strict=True))
    search(-math.inf, -1, total_tasks)
    if total_tasks == 0:
        best_value = sum(weight[j] * done[j] for j in range(n_jobs))
    best_path.sort(key=lambda x: (x[4], gpus[x[3]]))
    schedule: list[dict[str, Any]] = [
        {"job": jobs[j].id, "round": q, "task": index, "accelerator": gpus[g][0],
         "gpu_ids": [gpus[g][1]], "start": s, "end": e}
        for j, q, index, g, s, e in best_path]
    return best_value, schedule
