"""What a policy of the elastic mode sees and returns (policies own this interface; the
elastic simulator, :mod:`schedlab.simulator.elastic`, fills it).

Titan's world (docs/simulator.md, "Elastic mode"): fine-tuning *tasks* that may run on any
number of GPUs up to their ``max_gpus`` and may be merged in pairs.  What runs is a *unit*
(:class:`UnitState`): one task alone, or a merged pair trained jointly; a unit has done a
fraction of its work (``done``) and runs at 1 / d(a) of it per second on a GPUs, d its duration
profile.  A policy reads an :class:`ElasticState` and returns :class:`Grant` s.  Units:
seconds, GPUs, fractions of work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.speed import duration
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.instance import Cluster


@dataclass(frozen=True)
class TaskSpec:
    """One task of the run: its Titan description (``task``: base model, classes, profile,
    ``max_gpus``, work), the GPUs it requested (the instance's ``scale_factor``), its
    ``job_type`` and its position in the instance (``order``)."""

    task: TitanTask
    requested_gpus: int
    job_type: str | None
    order: int

    @property
    def id(self) -> str:
        """The task's id."""
        return self.task.id


@dataclass(slots=True)
class UnitState:
    """A unit (one task alone, or a merged pair) and its progress; ``gpus``/``mask`` are what
    it held in the round it last ran (``last_round_run``)."""

    id: str
    members: tuple[str, ...]
    base_model: str
    profile: dict[int, float]
    max_gpus: int
    arrival: float
    done: float = 0.0
    gpus: int = 0
    mask: int = 0
    last_round_run: int | None = None
    overhead_left: float = 0.0
    start_time: float | None = None
    finish_time: float | None = None
    executed_s: float = 0.0
    gpu_seconds: float = 0.0
    overhead_s: float = 0.0
    switches: int = 0
    preemptions: int = 0
    rounds_run: int = 0

    @property
    def merged(self) -> bool:
        """True for a merged pair."""
        return len(self.members) > 1

    @property
    def started(self) -> bool:
        """True once the unit has held GPUs (a started task never merges)."""
        return self.start_time is not None

    @property
    def remaining(self) -> float:
        """Fraction of the unit's work left, r = 1 - phi."""
        return max(1.0 - self.done, 0.0)

    def seconds_left(self, gpus: int) -> float:
        """r d(a): seconds to finish on ``gpus`` GPUs without switches."""
        return self.remaining * duration(self.profile, gpus)


@dataclass
class ElasticState:
    """What a policy sees at the start of round ``round_index`` (time ``now``, s): the active
    ``units`` in arrival order, every task of the run by id (``tasks``), the ids of finished
    tasks in finish order, the cluster (``gpus`` of one type ``accelerator`` in nodes of
    ``gpus_per_node``), the instance's merge rule (``merge_rule``: similarity threshold and
    pair entries, with a similarity cache shared by the run's rounds), whether the run
    charges the pipelined switch (``pipelined``), a ``version`` that increases whenever a
    task arrives, units merge or finish, and the run's ``seed``."""

    now: float
    round_index: int
    round_s: float
    cluster: Cluster
    accelerator: str
    gpus: int
    gpus_per_node: int | None
    units: list[UnitState]
    tasks: Mapping[str, TaskSpec]
    finished: list[str]
    merge_rule: MergeRule
    pipelined: bool
    version: int = 0
    seed: int = 0


@dataclass(frozen=True)
class Grant:
    """Run the unit of ``members`` on ``gpus`` GPUs in the coming round: one task, an existing
    merged pair (its two members, in any order), or two unmerged tasks to merge now."""

    members: tuple[str, ...]
    gpus: int


class ElasticPolicy(Protocol):
    """A policy of the elastic mode: ``plan`` returns the round's grants; ``reset`` starts a
    run afresh.  Counters ``solver_time_s``, ``solves``, ``decisions``, ``failed_solves`` are
    read when present."""

    name: str

    def reset(self) -> None: ...

    def plan(self, state: ElasticState) -> list[Grant]: ...
