"""The one problem schema shared by every paper: a cluster, a list of jobs and parameters.

An instance file is JSON (YAML accepted) carrying ``"schema": "schedlab/instance@1"``.
Every paper-specific field is optional; each formulation states which fields it needs and
rejects an instance that lacks them with an :class:`~schedlab.errors.InputError` naming the
field.

Units: times in seconds, throughputs in steps per second **of the whole job on its
``scale_factor`` GPUs**, counts in GPUs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from schedlab.atomic import write_bytes_atomic
from schedlab.atomic import write_json_atomic as write_json_atomic  # re-exported
from schedlab.colocation import Colocation, ColocationError, colocation_of
from schedlab.defaults import ROUND_S, UNFAIR_THRESHOLD
from schedlab.documents import MAX_FILE_BYTES as MAX_FILE_BYTES  # re-exported
from schedlab.documents import read_document
from schedlab.errors import InputError
from schedlab.gcpause import gc_paused

INSTANCE_SCHEMA = "schedlab/instance@1"

#: Bounds checked before anything is allocated from a file's sizes and counts (the file's
#: own bounds, MAX_FILE_BYTES and the nesting and literal limits, are in schedlab.documents).
MAX_GPUS_PER_TYPE = 1_000_000
MAX_JOBS = 2_000_000
#: Co-location entries from which validation checks them on arrays (fewer: per entry).
_COLOCATION_ARRAY_MIN_ENTRIES = 2048

#: Largest time a file may give, in seconds (every ``*_s`` / ``*_seconds`` field, ``arrival``,
#: ``regimes``, ``duration_s``, ``task_seconds``, ``switch_seconds``; ``time_limit_s`` is a
#: solver hint and exempt).  At 1e9 s (~32 years) a float64 resolves 1.2e-7 s, below the
#: checker's 1e-6 s, so ``start + duration`` keeps every duration; at 1e30 a 100 s job
#: ``1e30 + 100 == 1e30`` ran for 0 s.  Give times relative to the trace's start.
MAX_SECONDS = 1e9
#: Largest throughput (``throughput``, ``colocated_throughput``), steps/s.  HiGHS refuses
#: constraint coefficients of 1e15 or more (``large_matrix_value``) and reads costs of 1e20 or
#: more as infinite; Gavel's rows scale a throughput by s_j / (w_j T_eq[j]), and a share below
#: 1e-9 is dropped from an allocation, so a throughput ~1e12 times its job's others already
#: needs a share too small to report.  1e9 steps/s (a step per nanosecond) is beyond any job.
MAX_THROUGHPUT = 1e9

NonNegFloat = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
PosFloat = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
NonNegSeconds = Annotated[float, Field(ge=0.0, le=MAX_SECONDS, allow_inf_nan=False)]
PosSeconds = Annotated[float, Field(gt=0.0, le=MAX_SECONDS, allow_inf_nan=False)]
Throughput = Annotated[float, Field(ge=0.0, le=MAX_THROUGHPUT, allow_inf_nan=False)]
GpuCount = Annotated[int, Field(ge=0, le=MAX_GPUS_PER_TYPE)]
PosInt = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_TYPE)]


class _Strict(BaseModel):
    """Base: unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class AcceleratorPool(_Strict):
    """GPUs of one accelerator type.  ``count`` GPUs in all, optionally split into nodes."""

    count: GpuCount
    nodes: PosInt | None = None
    gpus_per_node: PosInt | None = None
    cost_per_hour: NonNegFloat | None = Field(default=None, description="price in $ per GPU-hour")

    @model_validator(mode="after")
    def _nodes_match_count(self) -> AcceleratorPool:
        if self.nodes is not None and self.gpus_per_node is not None:
            if self.nodes * self.gpus_per_node != self.count:
                raise ValueError(
                    f"nodes x gpus_per_node = {self.nodes * self.gpus_per_node} "
                    f"but count = {self.count}"
                )
        return self


class Node(_Strict):
    """One machine: ``gpus`` GPUs of type ``accelerator`` (placement-aware problems)."""

    name: str = Field(min_length=1)
    accelerator: str
    gpus: PosInt


class Cluster(_Strict):
    """Accelerator pools by type, and optionally explicit nodes."""

    accelerators: dict[str, AcceleratorPool] = Field(min_length=1)
    nodes: list[Node] | None = None

    @property
    def types(self) -> list[str]:
        """Accelerator type names in file order."""
        return list(self.accelerators)

    @property
    def total_gpus(self) -> int:
        """N = sum_k n_k."""
        return sum(p.count for p in self.accelerators.values())


class SaturnConfig(_Strict):
    """One candidate execution configuration of a Saturn job (technique on ``gpus`` GPUs)."""

    technique: str = Field(min_length=1)
    gpus: PosInt
    runtime_s: NonNegSeconds
    feasible: bool = True
    memory_gb: NonNegFloat | None = None
    reason: str | None = Field(default=None, description="why the configuration is "
                               "infeasible (e.g. the profiler's out-of-memory message)")


class Job(_Strict):
    """A training job.  Only ``id`` is required; each formulation states what else it needs."""

    id: str = Field(min_length=1)
    job_type: str | None = Field(default=None, description="model and batch size, a label")
    arrival: NonNegSeconds = Field(default=0.0, description="arrival time, s")
    weight: PosFloat = Field(default=1.0, description="priority / budget weight w_j")
    scale_factor: PosInt = Field(default=1, description="GPUs the job uses at once, s_j")
    total_steps: PosFloat | None = Field(default=None, description="steps to run in all")
    steps_done: NonNegFloat = Field(default=0.0, description="steps already run")
    throughput: dict[str, Throughput] = Field(
        default_factory=dict,
        description="steps/s of the whole job on scale_factor GPUs of each accelerator type",
    )
    # Gavel space sharing: steps/s of *this* job when co-located with another job.
    colocated_throughput: dict[str, dict[str, Throughput]] | None = Field(
        default=None, description="{other job id: {accelerator: steps/s of this job}}"
    )
    # Gavel policies with extra inputs.
    entity: str | None = Field(default=None, description="owner for hierarchical fairness")
    slo_s: PosSeconds | None = Field(default=None, description="must finish within this many s")
    time_in_system_s: NonNegSeconds = Field(
        default=0.0, description="seconds since arrival (finish-time fairness, t_j)"
    )
    isolated_time_s: NonNegSeconds = Field(
        default=0.0,
        description="seconds the job would have run so far on its equal share (t_iso_j)",
    )
    switch_overhead_s: NonNegSeconds | None = Field(
        default=None, description="seconds lost when the job's placement changes"
    )
    user: str | None = None
    # Shockwave
    epochs: PosInt | None = None
    epochs_done: Annotated[int, Field(ge=0)] = 0
    batch_schedule: list[PosInt] | None = None
    regimes: dict[str, PosSeconds] | None = Field(
        default=None, description="{batch size: seconds per epoch}"
    )
    adaptation: Literal["static", "gns", "accordion"] | None = None
    # Saturn
    configs: list[SaturnConfig] | None = None
    runtime_factor: PosFloat | None = Field(
        default=None, description="true runtime / estimate of every configuration of the job "
        "(the world an execution meets; planners see only the estimates); None means 1"
    )
    # Titan
    base_model: str | None = None
    dataset: str | None = None
    classes: list[str] | None = None
    duration_s: dict[str, PosSeconds] | None = Field(
        default=None, description="{gpus: seconds} for Titan tasks"
    )
    label_set: str | None = Field(
        default=None, description="the known label set the classes come from (Titan)"
    )
    max_gpus: PosInt | None = Field(
        default=None, description="most GPUs the Titan task can use (none: the largest "
        "GPU count in duration_s)"
    )
    # Goodput jobs (Pollux, Sia): docs/goodput.md
    application: str | None = Field(
        default=None, description="goodput job: the profiled application it trains "
        "(bert, cifar10, deepspeech2, imagenet, ncf, yolov3)")
    batch_size: PosInt | None = Field(
        default=None, description="goodput job: the batch size the trace requests, samples "
        "(Sia's policy-side cap; rigid and scale-gpus jobs keep it)")
    category: Literal["adaptive", "scale-gpus", "rigid"] | None = Field(
        default=None, description="goodput job: what the scheduler may change (Sia): "
        "batch and GPUs (adaptive, the default), GPUs only, or only the GPU type")
    # Hare
    rounds: PosInt | None = Field(default=None, description="training rounds R_j (Hare)")
    tasks_per_round: PosInt | None = Field(
        default=None, description="data-parallel tasks per round m_j (Hare)")
    task_seconds: dict[str, PosSeconds] | None = Field(
        default=None, description="{accelerator: seconds of one task} p[j,k]; a type "
        "absent here is one the job cannot run on (Hare)")
    switch_seconds: float | dict[str, float] | None = Field(
        default=None, description="{accelerator: idle seconds a GPU of that type spends "
        "before this job's task when it follows another job's} sigma[j,k]; a number means "
        "the same on every type; absent: 0 (Hare)")
    model_memory_gb: PosFloat | None = Field(
        default=None, description="GPU memory the job's model occupies, GB (Hare's switch "
        "models)")

    @field_validator("switch_seconds", mode="before")
    @classmethod
    def _switch_seconds_valid(cls, value: Any) -> Any:
        """A finite number in [0, MAX_SECONDS], or a map of them keyed by accelerator type."""
        if value is None:
            return value
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for acc, seconds in items:
            on = "" if acc is None else f" on {acc}"
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                    or not math.isfinite(seconds) or seconds < 0:
                raise ValueError(f"switch seconds{on} must be a finite number >= 0, "
                                 f"got {seconds!r}")
            if seconds > MAX_SECONDS:
                raise ValueError(f"switch seconds{on} must be at most {MAX_SECONDS:g} s, "
                                 f"got {seconds!r} (docs/instance-format.md, Limits)")
        return value

    def switch_seconds_on(self, accelerator: str) -> float:
        """sigma[j,k]: the switch seconds of this job on ``accelerator`` (0 when unset)."""
        if self.switch_seconds is None:
            return 0.0
        if isinstance(self.switch_seconds, dict):
            return float(self.switch_seconds.get(accelerator, 0.0))
        return float(self.switch_seconds)

    @property
    def remaining_steps(self) -> float:
        """R_j = total_steps - steps_done (0 when total_steps is unknown)."""
        if self.total_steps is None:
            return 0.0
        return max(self.total_steps - self.steps_done, 0.0)


class MergeEntry(_Strict):
    """A Titan pair's joint fine-tuning: its measured duration profile ``duration_s``
    ({gpus: seconds} of the merged task, like a task's) or the joint-epoch factor of the
    default merged-duration model (docs/formulations/titan.md)."""

    tasks: list[str] = Field(min_length=2, max_length=2)
    duration_s: dict[str, PosSeconds] | None = Field(
        default=None, description="{gpus: seconds} of the two tasks trained jointly"
    )
    joint_epoch_factor: PosFloat | None = Field(
        default=None, description="epochs each member needs jointly / alone"
    )


class Params(_Strict):
    """Scheduling parameters shared by formulations (each documents which it reads)."""

    round_s: PosSeconds = Field(default=ROUND_S, description="round length, s")
    num_rounds: Annotated[int, Field(ge=0, le=100_000)] = Field(
        default=20, description="rounds produced by the round mechanism (0: none)"
    )
    window_rounds: PosInt | None = Field(default=None, description="planning window (Shockwave)")
    time_limit_s: PosFloat | None = None
    mip_gap: NonNegFloat | None = None
    unfair_threshold: PosFloat = UNFAIR_THRESHOLD
    fairness_tolerance: PosFloat = Field(
        default=1e-6, description="relative tolerance of bisection-based formulations"
    )
    hierarchy_within_entity: Literal["fairness", "fifo"] = "fairness"
    entity_weights: dict[str, PosFloat] | None = None
    now_s: NonNegSeconds = 0.0
    restart_cost_s: NonNegSeconds | None = Field(
        default=None, description="seconds to resume a checkpointed job on a new "
        "configuration (no progress meanwhile); None means 0"
    )
    switch_on_first_task: bool = Field(
        default=False, description="Hare: a GPU's first task also waits its job's switch "
        "seconds (default: the first task pays nothing)")
    one_type_per_round: bool = Field(
        default=False, description="Hare: all tasks of one round of a job run on one GPU "
        "type (no round spread over types; default: a round may spread)")
    similarity_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        default=None, description="Titan: least task similarity of a merged pair (None: "
        "the Titan default)"
    )


class Instance(_Strict):
    """A scheduling problem: ``cluster`` + ``jobs`` + ``params``."""

    schema_: Literal["schedlab/instance@1"] = Field(default="schedlab/instance@1", alias="schema")
    name: str = "unnamed"
    description: str | None = None
    cluster: Cluster
    jobs: list[Job] = Field(max_length=MAX_JOBS)
    params: Params = Field(default_factory=Params)
    merges: list[MergeEntry] | None = Field(
        default=None, description="Titan pair entries (measured joint durations)"
    )
    _content_hash: str | None = PrivateAttr(default=None)
    _colocation: tuple[tuple[Any, ...], Colocation] | None = PrivateAttr(default=None)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _cross_checks(self) -> Instance:
        types = set(self.cluster.accelerators)
        if self.cluster.total_gpus == 0:
            raise _FieldError("cluster.accelerators", "the cluster has zero GPUs in all")
        if self.cluster.nodes is not None and not self.cluster.nodes:
            raise _FieldError("cluster.nodes", "is empty: list the nodes, or leave the field "
                              "out to split each accelerator pool into its nodes x "
                              "gpus_per_node")
        for n, node in enumerate(self.cluster.nodes or []):
            if node.accelerator not in types:
                raise _FieldError(
                    f"cluster.nodes[{n}].accelerator",
                    f"unknown accelerator {node.accelerator!r} (cluster has {sorted(types)})",
                )
        seen: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if job.id in seen:
                raise _FieldError(
                    f"jobs[{i}].id", f"duplicate job id {job.id!r} (also jobs[{seen[job.id]}])"
                )
            seen[job.id] = i
            for acc in job.throughput:
                if acc not in types:
                    raise _FieldError(
                        f"jobs[{i}].throughput.{acc}",
                        f"unknown accelerator {acc!r} (cluster has {sorted(types)})",
                    )
            _check_hare_job(i, job, self.cluster)
            if job.total_steps is not None and job.steps_done > job.total_steps:
                raise _FieldError(
                    f"jobs[{i}].steps_done",
                    f"steps_done {job.steps_done} exceeds total_steps {job.total_steps}",
                )
            _check_epochs(i, job)
            _check_gpu_keys(f"jobs[{i}].duration_s", job.duration_s)
        _check_merges(self.merges, seen)
        self._check_colocation(seen, types)
        return self

    def _check_colocation(self, seen: dict[str, int], types: set[str]) -> None:
        """Co-location entries name known jobs other than their own and known types, and
        every pair is listed on both jobs for the same types.  Many entries are checked on
        the arrays of :func:`~schedlab.colocation.colocation_of` (kept for
        :meth:`colocation`); few, or any problem, by the per-entry walk that names the
        first offending field."""
        entries = sum(len(job.colocated_throughput or ()) for job in self.jobs)
        if entries == 0:
            return
        if entries < _COLOCATION_ARRAY_MIN_ENTRIES:
            _check_colocation_entries(self.jobs, seen, types)
            return
        try:
            if self.colocation().symmetric():
                return
        except ColocationError:
            pass
        _check_colocation_entries(self.jobs, seen, types)  # names the first problem
        raise _FieldError("jobs", "co-location entries are inconsistent")  # pragma: no cover

    # ------------------------------------------------------------------ helpers
    @property
    def types(self) -> list[str]:
        """Accelerator types, in file order."""
        return self.cluster.types

    def job_index(self) -> dict[str, int]:
        """Job id -> position in ``jobs``."""
        return {job.id: i for i, job in enumerate(self.jobs)}

    def content_hash(self) -> str:
        """sha256 of the canonical form of this instance (free of dict key order and
        whitespace): every field's value, the order of lists (jobs, merges, nodes) included.

        The digest is fed, in this order (``docs/instance-format.md``, "Content hash"):

        1. a version tag, then the JSON of :meth:`to_dict` *without* ``jobs``, with sorted
           keys and no whitespace;
        2. the jobs list in pydantic's JSON (fields in the :class:`Job` model's order, unset
           optional fields omitted) without the dict-valued fields of
           :data:`_JOB_DICT_FIELDS`;
        3. ``throughput`` column-wise: the sorted names of every type any job lists, then
           one little-endian float64 column per name (NaN where a job does not list it);
        4. ``regimes``, ``duration_s``, ``task_seconds`` and ``switch_seconds``: for each,
           the JSON (sorted keys) of the [job index, value] pairs of the jobs that set it;
        5. ``colocated_throughput``: which jobs set it (one byte each) and the canonical bytes
           of :meth:`colocation` (:meth:`Colocation.update_digest
           <schedlab.colocation.Colocation.update_digest>`).

        Steps 2-3 keep the cost at C speed: at 10^6 jobs the JSON of every job dumped as
        Python dicts and sorted took ~6.5 s, this takes ~1 s.  Any change of a value, a listed
        type or a partner changes the hash; the order in which a dict lists its keys does not.

        Computed once and cached: treat an Instance as a value (``model_copy(update=...)``
        to change one) once its hash has been taken.
        """
        if self._content_hash is None:
            with gc_paused():
                self._content_hash = self._compute_content_hash()
        return self._content_hash

    def _compute_content_hash(self) -> str:
        """The digest of :meth:`content_hash`, computed."""
        digest = hashlib.sha256(b"schedlab/instance-hash@2\x00")
        rest = self.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude={"jobs"})
        digest.update(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
        digest.update(b"\x00jobs\x00")
        digest.update(self.__pydantic_serializer__.to_json(
            self, include={"jobs"}, by_alias=True, exclude_none=True,
            exclude={"jobs": {"__all__": set(_JOB_DICT_FIELDS)}}))
        if _digest_job_dicts(self.jobs, digest):
            self.colocation().update_digest(digest)
        return "sha256:" + digest.hexdigest()

    def colocation(self) -> Colocation:
        """The co-location entries of every job as arrays (:mod:`schedlab.colocation`), over
        this instance's types.

        Built once and cached; the cache is rebuilt when a job, its ``colocated_throughput``
        dict or that dict's length changes (a value changed inside a dict is not noticed:
        treat an Instance as a value, as for :meth:`content_hash`).  Raises
        :class:`~schedlab.colocation.ColocationError` on entries naming unknown jobs or types
        (which validation rejects).
        """
        key = _colocation_key(self)
        cached = getattr(self, "_colocation", None)  # absent in an Instance pickled before it
        if cached is not None and cached[0] == key:
            return cached[1]
        arrays = colocation_of([job.id for job in self.jobs],
                               [job.colocated_throughput for job in self.jobs], self.types)
        self._colocation = (key, arrays)
        return arrays

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Instance:
        """A copy (see pydantic); the copy computes its own content hash."""
        copy = super().model_copy(update=update, deep=deep)
        copy._content_hash = None
        copy._colocation = None
        return copy

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the ``schema`` key, omitting unset optional fields (``None``).

        See :func:`schedlab.workloads.gavel.compact_instance_dict` for a leaner form.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def require(self, field: str, *, formulation: str) -> None:
        """Raise an :class:`InputError` unless every job sets ``field`` (non-empty)."""
        values = list(map(attrgetter(field), self.jobs))
        if all(values):  # C-level: every value set and non-empty (the usual case)
            return
        for i, value in enumerate(values):
            if value is None or (isinstance(value, dict | list) and not value):
                raise InputError(
                    f"formulation {formulation} needs '{field}' on every job",
                    file=self.name,
                    field=f"jobs[{i}].{field}",
                )


#: Job fields holding dicts, hashed outside the jobs' JSON (:meth:`Instance.content_hash`)
#: so that their key order does not matter.
_JOB_DICT_FIELDS = ("throughput", "colocated_throughput", "regimes", "duration_s",
                    "task_seconds", "switch_seconds")
#: Of those, the ones hashed as JSON of the (job index, value) pairs of jobs that set them.
_SPARSE_JOB_FIELDS = ("regimes", "duration_s", "task_seconds", "switch_seconds")


def _digest_job_dicts(jobs: list[Job], digest: Any) -> bool:
    """Feed steps 3-5 of :meth:`Instance.content_hash` (the jobs' dict-valued fields, up to
    the co-location arrays) to ``digest``, each in a form free of key order; True when some
    job sets ``colocated_throughput`` (its arrays come next)."""
    fields = ("throughput", "colocated_throughput", *_SPARSE_JOB_FIELDS)
    values = list(map(attrgetter(*fields), jobs))  # one C-level pass over the jobs
    throughputs = [row[0] for row in values]
    names = sorted(set().union(*throughputs)) if throughputs else []
    digest.update(b"\x00throughput\x00")
    digest.update(json.dumps(names, separators=(",", ":")).encode())
    nan = math.nan
    for name in names:
        column = np.array([row.get(name, nan) for row in throughputs], dtype="<f8")
        digest.update(column.tobytes())
    unset = (None,) * len(_SPARSE_JOB_FIELDS)
    sparse = [(j, row[2:]) for j, row in enumerate(values) if row[2:] != unset]
    for f, field in enumerate(_SPARSE_JOB_FIELDS):
        present = [[j, row[f]] for j, row in sparse if row[f] is not None]
        digest.update(f"\x00{field}\x00".encode())
        digest.update(json.dumps(present, sort_keys=True, separators=(",", ":")).encode())
    digest.update(b"\x00colocated_throughput\x00")
    listed = bytes(row[1] is not None for row in values)
    digest.update(listed)
    return any(listed)


def _colocation_key(instance: Instance) -> tuple[Any, ...]:
    """What :meth:`Instance.colocation`'s cache is valid for: the types, and each job with
    its co-location dict and that dict's length (compared by identity first, so cheap)."""
    jobs = instance.jobs
    dicts = tuple(job.colocated_throughput for job in jobs)
    return (tuple(instance.types), tuple(jobs), dicts, tuple(len(d or ()) for d in dicts))


def _check_colocation_entries(jobs: list[Job], seen: dict[str, int], types: set[str]) -> None:
    """The per-entry co-location check; raises a :class:`_FieldError` at the first problem."""
    for i, job in enumerate(jobs):
        for other, by_acc in (job.colocated_throughput or {}).items():
            where = f"jobs[{i}].colocated_throughput.{other}"
            if other not in seen:
                raise _FieldError(where, f"unknown job id {other!r}")
            if other == job.id:
                raise _FieldError(where, "a job cannot be co-located with itself")
            for acc in by_acc:
                if acc not in types:
                    raise _FieldError(f"{where}.{acc}", f"unknown accelerator {acc!r}")
            partner = jobs[seen[other]]
            back = (partner.colocated_throughput or {}).get(job.id)
            if back is None or set(back) != set(by_acc):
                raise _FieldError(
                    where,
                    f"co-location must be listed on both jobs for the same accelerators "
                    f"(job {other!r} lacks the entry for {job.id!r})",
                )


class _FieldError(ValueError):
    """A cross-field error that knows the path of the offending field."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def _check_epochs(i: int, job: Job) -> None:
    """A Shockwave job's epoch fields agree: epochs_done <= epochs, one batch size per epoch
    in batch_schedule, regimes keyed by positive integer batch sizes (at least one) that
    cover every batch size of the schedule."""
    where = f"jobs[{i}]"
    if job.epochs is not None and job.epochs_done > job.epochs:
        raise _FieldError(f"{where}.epochs_done",
                          f"epochs_done {job.epochs_done} exceeds epochs {job.epochs}")
    if job.batch_schedule is not None and job.epochs is not None \
            and len(job.batch_schedule) != job.epochs:
        raise _FieldError(f"{where}.batch_schedule",
                          f"has {len(job.batch_schedule)} entries for {job.epochs} epochs "
                          "(one batch size per epoch)")
    if job.regimes is None:
        return
    if not job.regimes:
        raise _FieldError(f"{where}.regimes",
                          "is empty: list the seconds per epoch of each batch size")
    for key in job.regimes:
        if not (key.isascii() and key.isdigit() and int(key) > 0):
            raise _FieldError(f"{where}.regimes.{key}",
                              f"keys must be batch sizes (positive integers), got {key!r}")
    sizes = {int(key) for key in job.regimes}
    for e, size in enumerate(job.batch_schedule or []):
        if size not in sizes:
            raise _FieldError(f"{where}.batch_schedule[{e}]",
                              f"batch size {size} has no entry in regimes (regimes lists "
                              f"{sorted(sizes)})")


def _check_hare_job(i: int, job: Job, cluster: Cluster) -> None:
    """A Hare job's types exist, one of them with GPUs it can use, and its switch costs name
    known types."""
    types = cluster.accelerators
    if job.task_seconds is not None:
        for acc in job.task_seconds:
            if acc not in types:
                raise _FieldError(f"jobs[{i}].task_seconds.{acc}",
                                  f"unknown accelerator {acc!r} (cluster has {sorted(types)})")
        if not any(types[acc].count > 0 for acc in job.task_seconds):
            raise _FieldError(
                f"jobs[{i}].task_seconds",
                f"the job's tasks can run on no GPU type present (task_seconds lists "
                f"{sorted(job.task_seconds)}; the cluster has GPUs of "
                f"{sorted(k for k, p in types.items() if p.count > 0)})")
    if isinstance(job.switch_seconds, dict):
        for acc in job.switch_seconds:
            if acc not in types:
                raise _FieldError(f"jobs[{i}].switch_seconds.{acc}",
                                  f"switch cost for unknown accelerator {acc!r} (cluster has "
                                  f"{sorted(types)})")


def _check_gpu_keys(where: str, profile: dict[str, float] | None) -> None:
    """A {gpus: seconds} profile is keyed by positive integer GPU counts."""
    for key in profile or {}:
        if not (key.isascii() and key.isdigit() and int(key) > 0):
            raise _FieldError(f"{where}.{key}",
                              f"keys must be GPU counts (positive integers), got {key!r}")


def _check_merges(merges: list[MergeEntry] | None, seen: dict[str, int]) -> None:
    """Titan pair entries: two distinct known tasks, a GPU-keyed profile that is not empty,
    one entry per pair, the duration profile or the joint-epoch factor (not both)."""
    pairs: dict[frozenset[str], int] = {}
    for m, entry in enumerate(merges or []):
        where = f"merges[{m}]"
        for k, task in enumerate(entry.tasks):
            if task not in seen:
                raise _FieldError(f"{where}.tasks[{k}]", f"unknown task {task!r}")
        if entry.tasks[0] == entry.tasks[1]:
            raise _FieldError(f"{where}.tasks", f"names task {entry.tasks[0]!r} twice")
        key = frozenset(entry.tasks)
        if key in pairs:
            raise _FieldError(f"{where}.tasks", f"pair {entry.tasks} also in "
                              f"merges[{pairs[key]}]")
        pairs[key] = m
        if entry.duration_s is not None and entry.joint_epoch_factor is not None:
            raise _FieldError(where, "give duration_s or joint_epoch_factor, not both")
        if entry.duration_s is None and entry.joint_epoch_factor is None:
            raise _FieldError(where, "give duration_s (measured) or joint_epoch_factor")
        if entry.duration_s is not None and not entry.duration_s:
            raise _FieldError(f"{where}.duration_s", "is empty: list {gpus: seconds}")
        _check_gpu_keys(f"{where}.duration_s", entry.duration_s)


# ---------------------------------------------------------------------- reading


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _describe(error: Any) -> tuple[str, str]:
    """(field path, reason) of one pydantic error, in words a user can act on."""
    loc = tuple(p for p in error.get("loc", ()) if p not in ("function-after",))
    ctx = error.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, _FieldError):
        return inner.path, inner.reason
    reason = str(error.get("msg", "invalid"))
    if reason.startswith("Value error, "):
        reason = reason[len("Value error, ") :]
    value = error.get("input")
    numeric = {"finite_number", "greater_than_equal", "greater_than", "less_than_equal"}
    if error.get("type") == "less_than_equal" and ctx.get("le") in (MAX_SECONDS,
                                                                    MAX_THROUGHPUT):
        return _format_loc(loc), _above_limit(loc, value)
    if error.get("type") in numeric:
        reason = f"{reason} (got {value!r})"
    if error.get("type") == "extra_forbidden":
        reason = "unknown field"
    return _format_loc(loc), reason


def _above_limit(loc: tuple[int | str, ...], value: Any) -> str:
    """Why a time or a throughput above its limit is refused (the module's constants)."""
    if any(part in ("throughput", "colocated_throughput") for part in loc):
        return (f"{value!r} steps/s is above the limit {MAX_THROUGHPUT:g} steps/s (the LP "
                "solvers cannot hold larger coefficients beside ordinary ones; "
                "docs/instance-format.md, Limits)")
    return (f"{value!r} s is above the limit {MAX_SECONDS:g} s (beyond it float64 times "
            "lose short durations: t + d == t; give times relative to the trace's start; "
            "docs/instance-format.md, Limits)")


def instance_from_dict(data: Any, *, source: str = "<dict>") -> Instance:
    """Validate a parsed document; raise one :class:`InputError` naming source, field, reason."""
    if not isinstance(data, dict):
        raise InputError("top level must be an object with 'cluster' and 'jobs'", file=source)
    schema = data.get("schema", INSTANCE_SCHEMA)
    if schema != INSTANCE_SCHEMA:
        raise InputError(
            f"unsupported schema {schema!r} (expected {INSTANCE_SCHEMA!r})", file=source,
            field="schema",
        )
    _bound_sizes(data, source)
    try:
        return Instance.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        field, reason = _describe(errors[0])
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(reason + more, file=source, field=field or None) from None


def _bound_sizes(data: dict[str, Any], source: str) -> None:
    """Reject absurd sizes before pydantic allocates anything from them."""
    jobs = data.get("jobs")
    if isinstance(jobs, list) and len(jobs) > MAX_JOBS:
        raise InputError(f"{len(jobs)} jobs exceed the limit {MAX_JOBS}", file=source, field="jobs")


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file (``.json``, ``.yaml``, ``.yml``, optionally ``.gz``)."""
    data = read_document(path)
    instance = instance_from_dict(data, source=str(path))
    if instance.name == "unnamed":
        instance.name = Path(path).name.split(".")[0]
    return instance


def save_instance(instance: Instance, path: str | Path) -> None:
    """Write an instance as JSON (or YAML for ``.yaml``/``.yml``), atomically."""
    target = Path(path)
    if target.suffix.lower() in {".yaml", ".yml"}:
        text = yaml.safe_dump(instance.to_dict(), sort_keys=False)
        write_bytes_atomic(target, text.encode("utf-8"))
        return
    write_json_atomic(target, instance.to_dict())


def instance_json_schema() -> dict[str, Any]:
    """JSON Schema of the instance file format."""
    schema = Instance.model_json_schema(by_alias=True)
    schema["$id"] = INSTANCE_SCHEMA
    return schema
