"""Saturn (SPASE) problem data taken from an Instance: nodes, per-job options, bounds.

SPASE = Select a Parallelism, Allocate resources, SchedulE (Nagrecha & Kumar, VLDB'24).
Each job j lists configurations c = (technique, g GPUs, runtime r[j,c] seconds, feasible).
Jobs run on exactly one node n with G_n GPUs, never spanning nodes; at every instant the GPUs
in use on a node are at most G_n.

An *option* is a feasible configuration that fits some node.  With ``dominance=True`` only
the fastest technique per GPU count is kept: for makespan (and weighted completion) a slower
technique on the same number of GPUs occupies the same resources for longer, so swapping it
for the fastest one never hurts any schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.errors import InputError
from schedlab.instance import Instance
from schedlab.solution import ScheduleEntry


@dataclass(frozen=True)
class Option:
    """A feasible configuration of one job: ``technique`` on ``gpus`` GPUs for ``runtime`` s."""

    config: int  # index into job.configs
    technique: str
    gpus: int
    runtime: float


@dataclass(frozen=True)
class NodeSpec:
    """A node: ``gpus`` GPUs of type ``accelerator``."""

    name: str
    accelerator: str
    gpus: int


@dataclass(frozen=True)
class SaturnData:
    """Jobs (ids, release times, weights), nodes, and each job's options."""

    job_ids: list[str]
    release: list[float]  # arrival, s
    weight: list[float]
    nodes: list[NodeSpec]
    options: list[list[Option]]

    @property
    def num_jobs(self) -> int:
        """J."""
        return len(self.job_ids)

    @property
    def total_gpus(self) -> int:
        """sum_n G_n."""
        return sum(n.gpus for n in self.nodes)

    def fits(self, option: Option, node: NodeSpec) -> bool:
        """True when the option's GPUs fit on the node."""
        return option.gpus <= node.gpus


def cluster_nodes(instance: Instance) -> list[NodeSpec]:
    """``cluster.nodes`` when given, else nodes derived from each accelerator pool
    (``nodes`` x ``gpus_per_node``; one node holding the whole pool when unsplit)."""
    if instance.cluster.nodes:
        return [NodeSpec(n.name, n.accelerator, n.gpus) for n in instance.cluster.nodes]
    nodes: list[NodeSpec] = []
    for acc, pool in instance.cluster.accelerators.items():
        if pool.count == 0:
            continue
        per_node = pool.gpus_per_node or (pool.count // pool.nodes if pool.nodes else pool.count)
        count = pool.count // per_node
        nodes += [NodeSpec(f"{acc}-{i}", acc, per_node) for i in range(count)]
    return nodes


def dominant(options: list[Option]) -> list[Option]:
    """Keep the fastest option per GPU count (ties: technique name), sorted by GPUs."""
    best: dict[int, Option] = {}
    for opt in options:
        cur = best.get(opt.gpus)
        if cur is None or (opt.runtime, opt.technique) < (cur.runtime, cur.technique):
            best[opt.gpus] = opt
    return [best[g] for g in sorted(best)]


def saturn_data(
    instance: Instance, *, dominance: bool = True, formulation: str = "saturn"
) -> SaturnData:
    """Validate Saturn's fields and collect the options.

    Errors (one :class:`InputError`, naming the job): no ``configs``; no feasible
    configuration; a feasible configuration needing more GPUs than the largest node.
    """
    nodes = cluster_nodes(instance)
    largest = max((n.gpus for n in nodes), default=0)
    options: list[list[Option]] = []
    for i, job in enumerate(instance.jobs):
        if not job.configs:
            raise InputError(
                f"formulation {formulation} needs 'configs' on every job (job {job.id} has none)",
                file=instance.name,
                field=f"jobs[{i}].configs",
            )
        opts: list[Option] = []
        for c, cfg in enumerate(job.configs):
            if not cfg.feasible:
                continue
            if cfg.gpus > largest:
                raise InputError(
                    f"job {job.id}: configuration {cfg.technique} needs {cfg.gpus} GPUs but the "
                    f"largest node has {largest}",
                    file=instance.name,
                    field=f"jobs[{i}].configs[{c}].gpus",
                )
            opts.append(Option(c, cfg.technique, cfg.gpus, cfg.runtime_s))
        if not opts:
            raise InputError(
                f"job {job.id} has no feasible configuration",
                file=instance.name,
                field=f"jobs[{i}].configs",
            )
        options.append(dominant(opts) if dominance else opts)
    return SaturnData(
        job_ids=[job.id for job in instance.jobs],
        release=[job.arrival for job in instance.jobs],
        weight=[job.weight for job in instance.jobs],
        nodes=nodes,
        options=options,
    )


def lower_bound(data: SaturnData) -> float:
    """Makespan lower bound, s:  max( max_j (a_j + min_c r[j,c]),
    sum_j min_c g[j,c] r[j,c] / sum_n G_n ).  (Work is at least the least GPU-seconds of
    each job; no job finishes before its fastest run.)"""
    fastest = [min(o.runtime for o in opts) for opts in data.options]
    longest = max((a + r for a, r in zip(data.release, fastest, strict=True)), default=0.0)
    work = sum(min(o.gpus * o.runtime for o in opts) for opts in data.options)
    return max(longest, work / max(data.total_gpus, 1))


def makespan(schedule: list[ScheduleEntry]) -> float:
    """max end time of a schedule, s (0 when empty)."""
    return max((e.end for e in schedule), default=0.0)


def weighted_completion(schedule: list[ScheduleEntry], data: SaturnData) -> float:
    """sum_j w_j C_j, C_j = end time of job j, s."""
    weight = dict(zip(data.job_ids, data.weight, strict=True))
    return sum(weight[e.job] * e.end for e in schedule)


def entry(
    data: SaturnData, job: int, option: Option, node: NodeSpec, start: float
) -> ScheduleEntry:
    """A schedule entry for ``job`` running ``option`` on ``node`` from ``start`` (s)."""
    return ScheduleEntry(
        job=data.job_ids[job],
        start=start,
        end=start + option.runtime,
        accelerator=node.accelerator,
        node=node.name,
        gpus=option.gpus,
        config=option.technique,
    )


class NodeTimeline:
    """GPUs in use on each node over time, for serial (list) schedule generation.

    ``earliest(node, gpus, duration, ready)`` is the first time t >= ready at which ``gpus``
    GPUs stay free on the node for the whole half-open interval [t, t + duration).  Candidate
    starts are ``ready`` and the end times of placed jobs (usage only drops there).
    """

    def __init__(self, nodes: list[NodeSpec]) -> None:
        self.capacity = {n.name: n.gpus for n in nodes}
        self.busy: dict[str, list[tuple[float, float, int]]] = {n.name: [] for n in nodes}

    #: overlaps shorter than this (s) are solver round-off, not conflicts
    tol = 1e-4

    def _peak(self, node: str, start: float, end: float) -> int:
        """Largest GPUs in use at any instant of [start, end) (ignoring overlaps < tol)."""
        intervals = [
            (s, e, g) for s, e, g in self.busy[node] if s < end - self.tol and e > start + self.tol
        ]
        points = {start} | {s for s, _, _ in intervals if s > start}
        return max(
            (sum(g for s, e, g in intervals if s <= p < e) for p in points), default=0
        )

    def earliest(self, node: str, gpus: int, duration: float, ready: float) -> float:
        """Earliest feasible start >= ready for ``gpus`` GPUs during ``duration`` s."""
        cap = self.capacity[node]
        candidates = sorted({ready} | {e for _, e, _ in self.busy[node] if e > ready})
        for t in candidates:
            if self._peak(node, t, t + duration) + gpus <= cap:
                return t
        raise AssertionError("unreachable: after the last end time the node is empty")

    def place(self, node: str, gpus: int, start: float, duration: float) -> None:
        """Record ``gpus`` GPUs busy on ``node`` during [start, start + duration)."""
        self.busy[node].append((start, start + duration, gpus))
