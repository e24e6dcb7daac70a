"""Titan tasks: the fields of an Instance's jobs that the Titan formulations read.

A Titan task fine-tunes ``base_model`` on ``dataset`` (a list of ``classes``, from the known
label set ``label_set`` when given) and takes ``duration_s[a]`` seconds on a GPUs (the speed
model: :mod:`schedlab.formulations.titan.speed`).  It can use at most ``max_gpus`` GPUs (none
given: the largest count of its profile).  Work done: when ``total_steps`` is given,
``steps_done / total_steps`` of the task is done (any unit of work, e.g. samples x epochs);
a task has *started* when some of it is done.  ``weight`` weighs its JCT.

:func:`titan_tasks` reads and checks them; :class:`TitanTask` is also what an online policy
builds from its own state to call the round ILP (:mod:`schedlab.formulations.titan.round_ilp`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schedlab.errors import InputError
from schedlab.formulations.titan.speed import duration, largest_count, profile_from_field
from schedlab.instance import Instance


@dataclass(frozen=True)
class TitanTask:
    """One fine-tuning task (module docstring).

    ``remaining`` is the fraction of the task's work left, in (0, 1]; ``started`` says
    whether it has run (a started task never merges).  ``work`` is the task's total work
    (``total_steps``; None when unknown), read by the default merged-duration model."""

    id: str
    base_model: str
    classes: tuple[str, ...]
    duration_s: Mapping[int, float]
    max_gpus: int
    label_set: str | None = None
    dataset: str | None = None
    remaining: float = 1.0
    started: bool = False
    weight: float = 1.0
    work: float | None = None
    arrival: float = 0.0

    def remaining_s(self, gpus: float) -> float:
        """T_rem(a) = remaining x d(a), seconds (a <= max_gpus is the caller's business)."""
        return self.remaining * duration(self.duration_s, gpus)


def require_titan_fields(instance: Instance, formulation: str) -> None:
    """Raise an :class:`InputError` naming the field unless every job is a Titan task:
    ``base_model`` and ``duration_s``; and the cluster has one accelerator type.  ``classes``
    may be absent: the similarity rule never merges a task without class labels (its
    verdict says so), as for datasets whose labels no concept hierarchy holds."""
    if len(instance.cluster.accelerators) != 1:
        raise InputError(f"formulation {formulation} needs exactly one accelerator type",
                         field="cluster.accelerators")
    for i, job in enumerate(instance.jobs):
        if not job.base_model:
            raise InputError(f"task {job.id!r} has no base model: {formulation} merges only "
                             "tasks that fine-tune the same base model",
                             field=f"jobs[{i}].base_model")
        if not job.duration_s:
            raise InputError(f"task {job.id!r} has no duration_s ({{gpus: seconds}})",
                             field=f"jobs[{i}].duration_s")
    named = {job.label_set for job in instance.jobs if job.label_set is not None}
    if named:
        from schedlab.world.concept_hierarchy import label_sets

        known = label_sets()
        for i, job in enumerate(instance.jobs):
            if job.label_set is not None and job.label_set not in known:
                raise InputError(f"task {job.id!r} names the unknown label set "
                                 f"{job.label_set!r} (known: {', '.join(sorted(known))})",
                                 field=f"jobs[{i}].label_set")


def titan_tasks(instance: Instance, formulation: str = "titan") -> list[TitanTask]:
    """The instance's jobs as :class:`TitanTask` s, in instance order (checked first)."""
    require_titan_fields(instance, formulation)
    tasks = []
    for job in instance.jobs:
        profile = profile_from_field(job.duration_s or {})
        done = 0.0
        if job.total_steps is not None:
            done = min(job.steps_done / job.total_steps, 1.0)
        tasks.append(TitanTask(
            id=job.id, base_model=job.base_model or "", classes=tuple(job.classes or ()),
            duration_s=profile,
            max_gpus=job.max_gpus if job.max_gpus is not None else largest_count(profile),
            label_set=job.label_set, dataset=job.dataset, remaining=1.0 - done,
            started=job.steps_done > 0, weight=job.weight, work=job.total_steps,
            arrival=job.arrival))
    return tasks
