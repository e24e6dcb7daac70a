r"""Checker family for Titan schedules: GPU counts, durations, merged groups run as one job.

A Titan task j (a job with ``duration_s``) has the duration d_j(a) on a GPUs of the speed
model (:mod:`schedlab.formulations.titan.speed`: the profile interpolated linearly in 1/a,
GPU-seconds kept below the smallest profiled count, flat above the largest) and can use at
most ``max_gpus`` GPUs (none given: the largest profiled count); a fraction
r_j = 1 - min(steps_done / total_steps, 1) of its work is left (1 without ``total_steps``).
A merged pair {A, B} (``solution.groups``, A the earlier in the instance) runs with the
merged profile M_AB of :meth:`~schedlab.formulations.titan.merge.MergeRule.merged_profile`:
the instance's ``merges`` entry when it gives ``duration_s``, else the default model with
phi = the entry's ``joint_epoch_factor``, else 1/1.55; it has not started (r = 1) and can use
at most max_gpus_A + max_gpus_B GPUs.  Everything is re-derived from the Instance.

Rules, for the entries of Titan tasks:

* GPUs: 1 <= a <= the most the task (or its pair) can use; a count above has no duration;
* a schedule that is one round (every Titan entry is [now_s, now_s + round_s), the round
  ILP's plan for the round) says which tasks run this round on how many GPUs: only the GPU
  counts are checked, since a task may finish inside the round or run on after it;
* any other schedule runs tasks to completion: a task with one entry on a GPUs runs exactly
  end - start = r d(a) (d = M_AB for a merged member); with several entries they cover the
  work left exactly, sum_e (end_e - start_e) / d(a_e) = r;
* a merged group is a pair (no merged duration is defined for more tasks), and its members
  run as one job: the same (start, end, GPUs) entries (their first starts are compared by
  :func:`schedlab.check.check_groups`; here the rest, once the starts agree).

Durations get the checker's tolerance: |runs - need| <= 1e-6 |need| + ``tol``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.speed import Profile, duration, largest_count, profile_from_field
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.instance import Instance, Job
from schedlab.solution import ScheduleEntry, Solution

#: Relative tolerance on durations (the checker's ``REL_TOL``).
REL_TOL = 1e-6


@dataclass(frozen=True)
class _Runs:
    """How one task's entries are judged: its profile, the most GPUs it may use, the
    fraction of work left and, for a merged member, its partner."""

    profile: Profile
    most_gpus: int
    left: float
    partner: str | None = None

    def who(self, task_id: str) -> str:
        """``task A``, or ``task A (merged with B)`` for a merged member."""
        if self.partner is None:
            return f"task {task_id}"
        return f"task {task_id} (merged with {self.partner})"


def check_titan_schedule(instance: Instance, solution: Solution, *,
                         tol: float = 1e-6) -> list[str]:
    """All violations of the Titan rules of the module docstring (empty: none)."""
    tasks = {job.id: _titan_task(job) for job in instance.jobs if job.duration_s}
    if not tasks:
        return []
    by_task: dict[str, list[ScheduleEntry]] = defaultdict(list)
    for e in solution.schedule:
        if e.job in tasks and math.isfinite(e.start) and math.isfinite(e.end):
            by_task[e.job].append(e)
    out: list[str] = []
    runs, skipped = _how_tasks_run(instance, solution, tasks, out)
    one_round = _is_one_round(instance, by_task, tol)
    for task_id, entries in by_task.items():
        if task_id in skipped:
            continue
        judged = runs[task_id]
        out += _check_gpu_counts(task_id, judged, entries)
        if not one_round:
            out += _check_durations(task_id, judged, entries, tol)
    out += _check_groups_run_together(solution, by_task, tol)
    return out


def _titan_task(job: Job) -> TitanTask:
    """``job`` as a :class:`TitanTask` (what the merged-duration model reads); fields that the
    formulations require but the checker does not read may be missing."""
    profile = profile_from_field(job.duration_s or {})
    done = min(job.steps_done / job.total_steps, 1.0) if job.total_steps else 0.0
    return TitanTask(
        id=job.id, base_model=job.base_model or "", classes=tuple(job.classes or ()),
        duration_s=profile,
        max_gpus=job.max_gpus if job.max_gpus is not None else largest_count(profile),
        label_set=job.label_set, dataset=job.dataset, remaining=1.0 - done,
        started=job.steps_done > 0, weight=job.weight, work=job.total_steps,
        arrival=job.arrival)


def _how_tasks_run(instance: Instance, solution: Solution, tasks: dict[str, TitanTask],
                   out: list[str]) -> tuple[dict[str, _Runs], set[str]]:
    """Each task's :class:`_Runs` (alone, or as a member of a merged pair) and the tasks not
    judged: members of a group that names a non-Titan or unknown task (reported by
    ``check_groups``) or of a group of more than two (reported here, into ``out``)."""
    runs = {t.id: _Runs(t.duration_s, t.max_gpus, t.remaining) for t in tasks.values()}
    skipped: set[str] = set()
    order = {job.id: i for i, job in enumerate(instance.jobs)}
    rule = MergeRule.for_instance(instance)
    for g, group in enumerate(solution.groups):
        if len(group) < 2:
            continue  # not a merge (check_groups reports it); the task runs alone
        if any(task not in tasks for task in group):
            skipped.update(group)
            continue
        if len(group) > 2:
            out.append(f"group {g}: {len(group)} tasks ({', '.join(group)}); a merged "
                       "duration is defined only for pairs")
            skipped.update(group)
            continue
        first, second = sorted((tasks[t] for t in group), key=lambda t: order[t.id])
        merged = rule.merged_profile(first, second)
        most = rule.pair_max_gpus(first, second)
        runs[first.id] = _Runs(merged, most, 1.0, second.id)
        runs[second.id] = _Runs(merged, most, 1.0, first.id)
    return runs, skipped


def _is_one_round(instance: Instance, by_task: dict[str, list[ScheduleEntry]],
                  tol: float) -> bool:
    """True when every Titan entry is the round [now_s, now_s + round_s)."""
    now, end = instance.params.now_s, instance.params.now_s + instance.params.round_s
    entries = [e for es in by_task.values() for e in es]
    return bool(entries) and all(abs(e.start - now) <= tol and abs(e.end - end) <= tol
                                 for e in entries)


def _check_gpu_counts(task_id: str, judged: _Runs, entries: list[ScheduleEntry]) -> list[str]:
    """1 <= a <= the most GPUs the task (or its pair) can use; a < 1 is reported by the
    schedule's entry check."""
    whose = "the pair" if judged.partner is not None else "it"
    return [f"{judged.who(task_id)}: on {e.gpus} GPUs at t={e.start:.9g} s, more than "
            f"the {judged.most_gpus} {whose} can use (no duration there)"
            for e in entries if e.gpus > judged.most_gpus]


def _check_durations(task_id: str, judged: _Runs, entries: list[ScheduleEntry],
                     tol: float) -> list[str]:
    """One entry: end - start = r d(a); several: sum_e (end_e - start_e) / d(a_e) = r."""
    usable = [e for e in entries if 1 <= e.gpus <= judged.most_gpus]
    if len(usable) != len(entries):
        return []  # a GPU count without a duration, reported by _check_gpu_counts
    what = "the merged pair" if judged.partner is not None else "it"
    if len(entries) == 1:
        (e,) = entries
        need = judged.left * duration(judged.profile, e.gpus)
        runs = e.end - e.start
        if abs(runs - need) <= REL_TOL * abs(need) + tol:
            return []
        return [f"{judged.who(task_id)}: runs {runs:.9g} s on {e.gpus} GPUs but "
                f"{what} takes {need:.9g} s there ({judged.left:.6g} of its work left)"]
    done = 0.0
    slack = 0.0
    for e in entries:
        seconds = duration(judged.profile, e.gpus)
        done += (e.end - e.start) / seconds
        slack += (REL_TOL * seconds + tol) / seconds
    if abs(done - judged.left) <= slack:
        return []
    return [f"{judged.who(task_id)}: its {len(entries)} entries do {done:.9g} of the "
            f"work but {judged.left:.6g} is left (sum of seconds / duration at their GPUs)"]


def _spans(entries: Sequence[ScheduleEntry]) -> str:
    """``[0, 25) on 8 GPUs, ...`` in start order."""
    return ", ".join(f"[{e.start:.9g}, {e.end:.9g}) on {e.gpus} GPUs" for e in entries)


def _check_groups_run_together(solution: Solution, by_task: dict[str, list[ScheduleEntry]],
                               tol: float) -> list[str]:
    """The members of a merged group have the same (start, end, GPUs) entries, when their
    first starts agree (otherwise ``check_groups`` reports the starts)."""
    out: list[str] = []
    for g, group in enumerate(solution.groups):
        members = [(t, sorted(by_task[t], key=lambda e: (e.start, e.end)))
                   for t in group if by_task.get(t)]
        if len(members) < 2:
            continue
        first, theirs = members[0]
        for task_id, mine in members[1:]:
            if abs(mine[0].start - theirs[0].start) > tol:
                continue
            same = len(mine) == len(theirs) and all(
                abs(a.start - b.start) <= tol and abs(a.end - b.end) <= tol
                and a.gpus == b.gpus for a, b in zip(mine, theirs, strict=True))
            if not same:
                out.append(f"group {g}: {task_id} runs {_spans(mine)} but {first} runs "
                           f"{_spans(theirs)} (a merged group runs as one job)")
    return out
