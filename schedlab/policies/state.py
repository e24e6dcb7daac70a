"""What the simulator knows at the start of a round, as policies see it (policies own this
interface; the simulator fills it).

The simulator owns time and state; a policy only reads a :class:`ClusterState` and returns
:class:`Assignment` s for the coming round.  Units: seconds, steps, GPUs.

**Dynamic-adaptation jobs** (Shockwave's GNS and Accordion jobs, whose batch size follows a
schedule) count progress in *epochs*: ``total_steps`` = E, ``steps_done`` = epochs run
(fractional inside an epoch), and ``throughput[k]`` = epochs/s *at the current epoch's batch
size*, which the simulator updates whenever the job enters an epoch of another batch size
(and then bumps ``throughput_version`` and the state's ``job_set_version``).  So every policy
sees the change the same way, through ``throughput``: remaining_steps / throughput is the
remaining time if the current batch size were kept.  ``batch_schedule`` and ``regimes`` are the
simulator's truth; only Shockwave's policy reads them, as Shockwave's code does
(docs/formulations/shockwave.md names its peeks).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from schedlab.instance import Cluster

if TYPE_CHECKING:
    from schedlab.policies.shockwave_steps_state import ShockwaveSteps

#: ``ActiveArrays.last_round`` of a job that has not run.
NEVER_RAN = -(2**62)


@dataclass(slots=True)
class JobState:
    """One job's description and its progress so far."""

    id: str
    arrival: float  # s
    scale_factor: int  # GPUs per gang
    total_steps: float
    throughput: dict[str, float]  # steps/s of the whole job on its gang, per type
    weight: float = 1.0
    job_type: str | None = None
    user: str | None = None
    switch_overhead_s: float = 0.0  # s lost when the placement changes
    colocated_throughput: dict[str, dict[str, float]] | None = None
    # dynamic adaptation (Shockwave): progress counted in epochs -------------------------
    batch_schedule: tuple[int, ...] | None = None  # batch size of each epoch (the truth)
    regimes: dict[int, float] | None = None  # {batch size: s per epoch on the fastest type}
    type_speed: dict[str, float] | None = None  # epochs run k times as fast as on the fastest
    throughput_version: int = 0  # increases whenever ``throughput`` changes
    # Shockwave's simulator's rule for the job (jobs of a Shockwave trace): the simulator
    # counts the job in steps with it under mechanism="gavel" (simulator/shockwave_steps.py)
    shockwave_steps: ShockwaveSteps | None = None
    # progress ---------------------------------------------------------------------------
    steps_done: float = 0.0
    attained_service_s: float = 0.0  # GPU-seconds received (Tiresias' 2D age: GPUs x time)
    executed_s: float = 0.0  # wall seconds spent running
    overhead_s: float = 0.0  # of those, seconds lost to switch and resume overheads
    time_on: dict[str, float] = field(default_factory=dict)  # s run on each type
    rounds_run: int = 0
    start_time: float | None = None  # first time it ran
    finish_time: float | None = None
    last_accelerator: str | None = None  # where it ran last time it ran
    last_gpu_ids: tuple[int, ...] | None = None
    last_round_run: int | None = None
    preemptions: int = 0  # was running last round, not this round (before finishing)
    migrations: int = 0  # resumed on other GPUs than last time

    @property
    def remaining_steps(self) -> float:
        """R_j = total_steps - steps_done (>= 0)."""
        return max(self.total_steps - self.steps_done, 0.0)

    @property
    def dynamic(self) -> bool:
        """True for a job whose batch size follows ``batch_schedule`` (progress in epochs)."""
        return self.batch_schedule is not None

    @property
    def epochs_done(self) -> int:
        """Whole epochs completed (a dynamic job's ``steps_done`` counts epochs)."""
        return int(self.steps_done + 1e-9)

    def epoch_seconds(self, epoch: int, accelerator: str) -> float:
        """Seconds epoch ``epoch`` takes on the job's gang of ``accelerator`` (dynamic jobs):
        regimes[batch_schedule[epoch]] / type_speed[accelerator]."""
        assert self.batch_schedule is not None and self.regimes is not None
        speed = (self.type_speed or {}).get(accelerator, 0.0)
        return self.regimes[self.batch_schedule[epoch]] / speed if speed > 0 else math.inf

    def current_throughput(self) -> dict[str, float]:
        """A dynamic job's epochs/s per type at its current epoch (0 on types it cannot use);
        what :attr:`throughput` shows a policy between rounds."""
        assert self.batch_schedule is not None and self.regimes is not None
        epoch = min(self.epochs_done, len(self.batch_schedule) - 1)
        per_epoch = self.regimes[self.batch_schedule[epoch]]
        return {k: v / per_epoch for k, v in (self.type_speed or {}).items()}

    @property
    def done(self) -> bool:
        """True once every step has run."""
        return self.finish_time is not None

    @property
    def jct(self) -> float | None:
        """Job completion time = finish - arrival (s), None while running."""
        return None if self.finish_time is None else self.finish_time - self.arrival


@dataclass(frozen=True)
class Assignment:
    """Run ``job`` as one gang on ``accelerator`` during the coming round.

    ``partner`` names the job sharing the same GPUs (space sharing).  GPU ids are chosen by
    the simulator's placement step, not by the policy.
    """

    job: str
    accelerator: str
    partner: str | None = None


@dataclass(eq=False)
class ActiveArrays:
    """Array columns of the active jobs, kept by the simulator for policies that ask for
    them (``Policy.uses_arrays``); the :class:`JobState` s in ``ClusterState.active`` stay the
    reference and carry the same values.

    ``rows[i]`` is the *slot* of ``ClusterState.active[i]``: its index in the run's admission
    order, fixed for the whole run; ``rows`` ascends (the active jobs in admission order). The
    other arrays are indexed by slot (read a column of the active jobs as ``column[rows]``);
    they are the simulator's own arrays, valid while the round is decided (read them, never
    write them). One object serves a whole run, so a policy may key caches on its identity.
    """

    rows: npt.NDArray[np.int64]  # slot of each active job, in the order of ``active``
    arrival: npt.NDArray[np.float64]  # s
    scale: npt.NDArray[np.int64]  # GPUs per gang (scale_factor)
    last_round: npt.NDArray[np.int64]  # last_round_run; NEVER_RAN when it has not run
    #: index in ``cluster.types`` of ``last_accelerator``; -1 when None or not a cluster type
    last_type: npt.NDArray[np.int64]
    #: how many times the simulator changed a job's ``throughput`` (and bumped its
    #: ``throughput_version``) in this run so far: while it stays, no version moved
    throughput_changes: int = 0
    #: by slot: the job has finished (None when the simulator does not keep it; a finished
    #: slot is no longer in ``rows``)
    finished: npt.NDArray[np.bool_] | None = None

    def __eq__(self, other: object) -> bool:
        """Equal columns (element by element) and counts: a copy taken before ``decide``
        equals the state after it unless something wrote into the arrays."""
        if not isinstance(other, ActiveArrays):
            return NotImplemented
        return (self.throughput_changes == other.throughput_changes
                and all(np.array_equal(getattr(self, name), getattr(other, name))
                        for name in ("rows", "arrival", "scale", "last_round", "last_type")))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


class SlotPlan(list[Assignment]):
    """A decision (the list of Assignments, as always) that also gives its array form:
    ``slots[i]`` is the :class:`ActiveArrays` slot of ``self[i].job`` and ``types[i]`` the index
    in ``cluster.types`` of ``self[i].accelerator`` (single jobs only: no ``partner``).

    A policy that reads ``state.arrays`` may return one; the simulator's array path then checks
    and groups the plan on the two arrays instead of reading every Assignment.  The arrays
    must describe exactly the Assignments (the tests compare such runs with the reference
    loop, which reads the Assignments).

    ``on_repeat`` marks a *fixed point*: the policy promises that, while no job arrives or
    finishes, every later round's decision is this plan again (FIFO when it kept every running
    job and started none).  The simulator may then run such rounds without asking the policy,
    and calls ``on_repeat(rounds, last_round_index)`` after running ``rounds`` of them (the
    policy counts them as decisions and remembers the plan as of the last one).  Handing back
    the very object of the previous round also promises it unchanged.
    """

    def __init__(self, assignments: list[Assignment], slots: npt.NDArray[np.int64],
                 types: npt.NDArray[np.int64],
                 on_repeat: Callable[[int, int], None] | None = None) -> None:
        super().__init__(assignments)
        self.slots = slots
        self.types = types
        self.on_repeat = on_repeat


class ActiveJobs(Sequence[JobState]):
    """The active jobs of a round as the array engine holds them: ``jobs[rows[i]]``.

    Reading one job (``active[i]``) or the count costs nothing; the first iteration, slice or
    comparison makes the list once (O(active jobs)), so a policy that reads a few jobs by
    position (FIFO on the columns) does not pay a copy of the whole queue every round."""

    __slots__ = ("_jobs", "_list", "_rows")

    def __init__(self, jobs: npt.NDArray[Any], rows: npt.NDArray[np.int64]) -> None:
        self._jobs = jobs  # object array: JobState by slot
        self._rows = rows
        self._list: list[JobState] | None = None

    def as_list(self) -> list[JobState]:
        """The jobs as a list (made at the first need, then kept)."""
        if self._list is None:
            self._list = self._jobs[self._rows].tolist()
        return self._list

    def __len__(self) -> int:
        return len(self._rows)

    def at_slot(self, slot: int) -> JobState:
        """The active job of ``slot`` (``ActiveArrays.rows`` holds the slots), read directly."""
        job: JobState = self._jobs[slot]
        return job

    @overload
    def __getitem__(self, i: int) -> JobState: ...

    @overload
    def __getitem__(self, i: slice) -> list[JobState]: ...

    def __getitem__(self, i: int | slice) -> JobState | list[JobState]:
        if isinstance(i, slice):
            return self.as_list()[i]
        if self._list is not None:
            return self._list[i]
        job: JobState = self._jobs[self._rows[i]]
        return job

    def __iter__(self) -> Iterator[JobState]:
        return iter(self.as_list())

    def __reversed__(self) -> Iterator[JobState]:
        return reversed(self.as_list())

    def __contains__(self, job: object) -> bool:
        return job in self.as_list()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ActiveJobs):
            other = other.as_list()
        return self.as_list() == other

    __hash__ = None  # type: ignore[assignment]  # mutable view, as a list

    def __repr__(self) -> str:
        return f"ActiveJobs({self.as_list()!r})"


@dataclass
class ClusterState:
    """The simulator's state at the start of round ``round_index`` (time ``now``, s)."""

    now: float
    round_index: int
    round_s: float
    cluster: Cluster
    #: arrived and not finished, in arrival order (a list, or the simulator's
    #: :class:`ActiveJobs` view: indexing and ``len`` need no copy, anything else reads a list
    #: made once)
    active: Sequence[JobState]
    #: in finish order; the simulator's own list, read it during ``decide`` only (it is not
    #: copied each round, and a streaming run whose policy has ``uses_finished_jobs`` false
    #: leaves it empty)
    finished: list[JobState]
    job_set_version: int = 0  # increases whenever a job arrives, finishes or changes throughput
    seed: int = 0  # the run's seed: policies that draw random numbers derive them from it
    #: array columns of ``active`` (see :class:`ActiveArrays`); the simulator fills them for
    #: a policy whose ``uses_arrays`` is true, else None
    arrays: ActiveArrays | None = None

    @property
    def gpus(self) -> dict[str, int]:
        """GPUs per accelerator type."""
        return {k: p.count for k, p in self.cluster.accelerators.items()}

    def job(self, job_id: str) -> JobState:
        """The active job with this id."""
        for j in self.active:
            if j.id == job_id:
                return j
        raise KeyError(job_id)
