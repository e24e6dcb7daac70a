"""The plan a replay runs: a Solution's rounds or timed schedule as segments on device slots.

A *segment* is one job holding a set of device slots for an interval of instance time:

* ``rounds``: round ``r`` covers instance time ``[r L, (r + 1) L)`` with ``L = params.round_s``;
  each :class:`~schedlab.solution.Placement` of the round is one segment on the slots
  ``(accelerator, gpu_id)`` of its ``gpu_ids`` (the lowest ids of the pool when the solution
  names none);
* ``schedule``: each timed :class:`~schedlab.solution.ScheduleEntry` is one segment
  ``[start, end)``.

A *slot* is one device: ``(accelerator label, index within the pool)``.  Its backend is
``cuda:N`` when ``--device-map`` maps the label's index to a CUDA device, else ``cpu``.

Each job's zoo job comes from its ``job_type`` (``model/size@batch``, parsed by
:func:`schedlab.profiler.zoo.parse_job_name`); its work is ``total_steps - steps_done`` whole
steps (rounded up); its seed is its index in the instance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from schedlab.errors import InputError, SchedlabError
from schedlab.instance import Instance
from schedlab.profiler.zoo import JobSpec, parse_job_name
from schedlab.solution import Solution

Slot = tuple[str, int]


def slot_name(slot: Slot) -> str:
    """``"cpu:1"``: the slot's label in logs, reports and file names."""
    return f"{slot[0]}:{slot[1]}"


@dataclass(frozen=True)
class Segment:
    """``job`` on ``slots`` during instance time ``[start_s, end_s)``; ``round`` is the round
    index (rounds) or the index of the barrier group (schedule: segments sharing a start)."""

    index: int
    round: int
    job: str
    accelerator: str
    slots: tuple[Slot, ...]
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        """Instance seconds of the segment."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class PlannedJob:
    """A job as the replay runs it: its zoo spec, seed, whole steps of work and the
    instance's throughput (steps/s of the whole gang per accelerator type)."""

    id: str
    spec: JobSpec
    seed: int
    work_steps: int
    scale_factor: int
    throughput: dict[str, float]
    switch_overhead_s: float
    arrival_s: float = 0.0


@dataclass
class Plan:
    """Segments in start order (grouped by round), the jobs, the slots and the round length
    (None for a timed schedule)."""

    kind: str
    segments: list[Segment]
    jobs: dict[str, PlannedJob]
    slots: list[Slot]
    round_s: float | None
    rounds: list[list[Segment]] = field(default_factory=list)

    @property
    def end_s(self) -> float:
        """Instance time at which the plan ends."""
        return max((s.end_s for s in self.segments), default=0.0)


def _jobs(instance: Instance, instance_file: str,
          work_scale: float = 1.0) -> dict[str, PlannedJob]:
    jobs: dict[str, PlannedJob] = {}
    for i, job in enumerate(instance.jobs):
        where = f"jobs[{i}].job_type"
        if job.job_type is None:
            raise InputError("missing: replay needs a zoo job name MODEL[/SIZE]@BATCH",
                             file=instance_file, field=where)
        try:
            spec = parse_job_name(job.job_type)
        except InputError as exc:
            raise InputError(exc.reason, file=instance_file, field=where) from None
        if job.total_steps is None:
            raise InputError("missing: replay needs the job's steps",
                             file=instance_file, field=f"jobs[{i}].total_steps")
        # work_scale W > 1 (``--scale-work``): one real step stands for W of the instance's
        work = max(math.ceil((job.total_steps - job.steps_done) / work_scale - 1e-9), 0)
        jobs[job.id] = PlannedJob(job.id, spec, i, work, job.scale_factor,
                                  dict(job.throughput),
                                  float(job.switch_overhead_s or 0.0), float(job.arrival))
    return jobs


def _slots_of(instance: Instance, accelerator: str, gpus: int, gpu_ids: list[int] | None,
              where: str, solution_file: str) -> tuple[Slot, ...]:
    pool = instance.cluster.accelerators.get(accelerator)
    if pool is None:
        raise InputError(f"unknown accelerator {accelerator!r} (instance has "
                         f"{', '.join(instance.cluster.accelerators)})",
                         file=solution_file, field=f"{where}.accelerator")
    ids = list(gpu_ids) if gpu_ids is not None else list(range(gpus))
    if len(ids) != gpus or len(set(ids)) != gpus or any(not 0 <= g < pool.count for g in ids):
        raise InputError(f"gpu_ids {ids} do not name {gpus} distinct GPUs of {accelerator!r} "
                         f"(0..{pool.count - 1})", file=solution_file, field=f"{where}.gpu_ids")
    return tuple((accelerator, g) for g in ids)


def build_plan(solution: Solution, instance: Instance, *, solution_file: str = "<solution>",
               instance_file: str = "<instance>", work_scale: float = 1.0) -> Plan:
    """The replay plan of ``solution`` on ``instance`` (one :class:`InputError` naming the
    file and field of anything the replay cannot run).  Each job's work is
    ``ceil((total_steps - steps_done) / work_scale)`` real steps (``work_scale`` = the time
    scale under ``--scale-work``, else 1)."""
    jobs = _jobs(instance, instance_file, work_scale)
    slots = [(acc, g) for acc, pool in instance.cluster.accelerators.items()
             for g in range(pool.count)]
    segments: list[Segment] = []
    rounds: list[list[Segment]] = []
    if solution.rounds:
        kind = "rounds"
        length = float(instance.params.round_s)
        for r, placements in enumerate(solution.rounds):
            group: list[Segment] = []
            used: set[Slot] = set()
            for p_index, placement in enumerate(placements):
                where = f"rounds[{r}][{p_index}]"
                if placement.job not in jobs:
                    raise InputError(f"unknown job {placement.job!r}", file=solution_file,
                                     field=f"{where}.job")
                if placement.partner is not None:
                    raise InputError("space sharing (a co-located partner) is not replayed",
                                     file=solution_file, field=f"{where}.partner")
                on = _slots_of(instance, placement.accelerator, placement.gpus,
                               placement.gpu_ids, where, solution_file)
                if used & set(on):
                    raise InputError(f"GPU {on} used twice in round {r}", file=solution_file,
                                     field=f"{where}.gpu_ids")
                used |= set(on)
                segment = Segment(len(segments), r, placement.job, placement.accelerator, on,
                                  r * length, (r + 1) * length)
                segments.append(segment)
                group.append(segment)
            rounds.append(group)
        return Plan(kind, segments, jobs, slots, length, rounds)
    if solution.schedule:
        entries = sorted(enumerate(solution.schedule), key=lambda e: (e[1].start, e[0]))
        starts: dict[float, int] = {}
        for e_index, entry in entries:
            where = f"schedule[{e_index}]"
            if entry.job not in jobs:
                raise InputError(f"unknown job {entry.job!r}", file=solution_file,
                                 field=f"{where}.job")
            if entry.accelerator is None:
                raise InputError("missing: replay needs the entry's accelerator",
                                 file=solution_file, field=f"{where}.accelerator")
            if not entry.end > entry.start:
                raise InputError("end must be after start", file=solution_file,
                                 field=f"{where}.end")
            on = _slots_of(instance, entry.accelerator, entry.gpus, entry.gpu_ids, where,
                           solution_file)
            group_index = starts.setdefault(entry.start, len(starts))
            segment = Segment(len(segments), group_index, entry.job, entry.accelerator, on,
                              float(entry.start), float(entry.end))
            segments.append(segment)
            if group_index == len(rounds):
                rounds.append([])
            rounds[group_index].append(segment)
        _check_overlaps(segments, solution_file)
        return Plan("schedule", segments, jobs, slots, None, rounds)
    raise InputError("the solution has neither rounds nor a timed schedule to replay",
                     file=solution_file, field="rounds")


def _check_overlaps(segments: list[Segment], solution_file: str) -> None:
    last_end: dict[Slot, float] = {}
    for segment in sorted(segments, key=lambda s: s.start_s):
        for slot in segment.slots:
            if last_end.get(slot, -math.inf) > segment.start_s + 1e-9:
                raise InputError(f"slot {slot_name(slot)} holds two entries at "
                                 f"{segment.start_s} s", file=solution_file,
                                 field=f"schedule[{segment.index}]")
            last_end[slot] = segment.end_s


def parse_device_map(text: str | None) -> dict[Slot, str]:
    """``"h100=cuda:0,h100:1=cuda:1"`` -> {("h100", 0): "cuda:0", ("h100", 1): "cuda:1"}.

    ``LABEL=cuda:N`` maps index 0 of the label's pool; ``LABEL:I=cuda:N`` maps index I.
    """
    mapping: dict[Slot, str] = {}
    if not text:
        return mapping
    for item in text.split(","):
        left, eq, right = item.strip().partition("=")
        label, colon, index = left.partition(":")
        if not eq or not label or not right.startswith("cuda") or (colon and not index.isdigit()):
            raise InputError(f"bad device map item {item!r}: expected LABEL[:INDEX]=cuda:N",
                             field="--device-map")
        mapping[(label, int(index) if colon else 0)] = right
    return mapping


class PlanError(SchedlabError):
    """A plan the backend cannot run (e.g. a CUDA slot without CUDA)."""
