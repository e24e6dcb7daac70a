"""What a policy of goodput jobs sees each round, and what it answers (docs/goodput.md).

A policy sees, per active job, what the authors' policies see (Pollux ``simulator.py``
321-336, Sia ``cluster.py`` 373-432): the job's *fitted* goodput model on each GPU type it
has run on (None elsewhere), its age, attained service, restarts, the replica limit the
simulator grants it and its current allocation; never the profile tables.  It answers a
:data:`Decision`: per job that should run, its GPU type and the node (within that type)
of each of its GPUs.  A job left out gets no GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from schedlab.world.goodput import GoodputModel

#: job name -> (GPU type, node index within the type of each GPU, ascending)
Decision = dict[str, tuple[str, tuple[int, ...]]]


@dataclass(frozen=True)
class GoodputJobInfo:
    """One active job as a policy sees it.

    ``models[t]``: the fitted goodput model on type t (None before the job ran there);
    ``max_batch_size[t]`` and ``atomic_bsz_range[t]``: the arguments of the job's speedup
    function on t (Sia: the trace's batch request as the maximum, its ``job.py`` 249;
    Pollux: the application's maximum); ``max_replicas[t]``: the simulator's limit, twice
    the largest replica count profiled so far, at most 64 and max_batch / min_local (NCF: 1
    in Pollux's simulator); ``one_gpu_throughput[t]``: Sia's x_t of the application,
    samples/s; ``allocation``: the current (type, node of each GPU) or None;
    ``scaling_underway``: a checkpoint-restore is still being paid; ``throughput[t]``
    (fixed-batch jobs only): progress per second on its requested GPUs of type t, packed,
    at its current epoch, which policies of fixed gangs see; ``progress`` and
    ``total_progress``: done and needed, in iterations at M0.  Times in s,
    ``attained_service`` in GPU-seconds.
    """

    name: str
    application: str
    submission_time: float
    age: float
    attained_service: float
    num_restarts: int
    models: Mapping[str, GoodputModel | None]
    max_batch_size: Mapping[str, int]
    atomic_bsz_range: Mapping[str, tuple[int, int]]
    tune_bsz: bool
    max_replicas: Mapping[str, int]
    min_replicas: Mapping[str, int]
    one_gpu_throughput: Mapping[str, float]
    category: str
    target_replicas: int | None
    target_batch_size: int | None
    allocation: tuple[str, tuple[int, ...]] | None
    scaling_underway: bool
    throughput: Mapping[str, float]
    progress: float
    total_progress: float


@dataclass(frozen=True)
class GoodputState:
    """The cluster and its active jobs at ``now`` (s): ``nodes[t]`` nodes of
    ``gpus_per_node[t]`` GPUs per type, types in cluster order; ``jobs`` in workload
    order."""

    now: float
    nodes: Mapping[str, int]
    gpus_per_node: Mapping[str, int]
    jobs: tuple[GoodputJobInfo, ...]

    @property
    def types(self) -> tuple[str, ...]:
        """GPU types in cluster order."""
        return tuple(self.nodes)


class GoodputPolicy(Protocol):
    """A policy of goodput jobs: ``decide`` is called once a round, in time order.  A
    policy whose ``fixed_jobs`` attribute is true runs every job as a fixed gang of its
    request (the papers' "TunedJobs" baselines)."""

    name: str

    def decide(self, state: GoodputState) -> Decision:
        """The allocation of the coming round."""
        ...
