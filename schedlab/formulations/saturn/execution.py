"""Node-level continuous mode: SPASE jobs executed on whole nodes in continuous time.

The round-based engine (:mod:`schedlab.simulator.engine`) moves gangs between accelerator
*types* every round.  This mode simulates what a Saturn plan (select a parallelism, allocate
GPUs, schedule) meets when it runs: each job runs in one *option* (a feasible configuration:
technique on g GPUs) on one node at a time, in continuous time, at its *true* speed, and may be
checkpointed and resumed at interval boundaries.  The full model is in
``docs/formulations/saturn.md`` (section "Introspection").  All times are in seconds.

It lives with Saturn's formulations because the introspective formulation
(:mod:`schedlab.formulations.saturn.introspective`) and its re-planning MILP run it, and
formulations never import the simulator (docs/architecture.md, "Layers");
:mod:`schedlab.simulator.nodes` re-exports it as the simulator's node-level mode.

**The world (the truth, from the Instance).**  Job j's true runtime on option o is
r_true[j,o] = f_j r[j,o], with r[j,o] the instance's estimate (``SaturnConfig.runtime_s``)
and f_j = ``Job.runtime_factor`` (None = 1, :func:`runtime_factors`).  Progress is the
fraction phi_j in [0, 1] of the job's work (steps done / total steps), whatever the option:
running option o for d productive seconds adds d / r_true[j,o].  Resuming a checkpointed job
costs rho = ``Params.restart_cost_s`` seconds (None = 0, :func:`restart_cost`) without
progress, in whatever option and node it resumes; a job that keeps running pays nothing.
:class:`NodeWorld` holds the three (estimates, f, rho) for one run.

**Dispatch (:func:`advance`).**  A *plan* gives every unfinished job an option, a node and a
planned start.  Each node runs its jobs in the order of their planned starts (ties: job index):
the head starts as soon as it has arrived and its g GPUs are free; nothing overtakes it and the
executor needs no runtimes to decide.  Run with the estimates instead of the truth, the same
executor is a *predictor* (:func:`predict`): with f = 1 a prediction is exactly what happens.

**Driving a policy (:func:`simulate_nodes`).**  At every boundary t = k ``interval_s``
(k = 1, ..., ``max_decisions``) the clock stops, the policy sees the state at t
(:class:`Execution`: progress, running segments, checkpoints, completions; no runtimes) and
what has been *observed*: f_j for every job that has made progress (phi_j > 0; exact, because
the noise is one factor per job: f_j = productive seconds / (phi_j r[j,o])), None for the
others.  It may return a new plan and the running jobs to keep; every other running job is
checkpointed at t and the new plan's queues take over.  After the last boundary the current
plan runs to the end.  :func:`execute` is the static run: the plan from t = 0 to the end,
never re-planned.

**Output.**  The :class:`Execution` at the end: completions ``done[j]`` and closed
:class:`Segment` s (option, node, [start, end), restart overhead at its beginning).
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from schedlab.errors import InputError
from schedlab.formulations.saturn.data import Option, SaturnData
from schedlab.instance import Instance
from schedlab.solution import ScheduleEntry

#: Times closer than this (s) are the same instant.
EPS = 1e-7

#: runtime(job, option) -> seconds for the whole job on that option.
Runtime = Callable[[int, Option], float]


# ------------------------------------------------------------------------------ truth


def runtime_factors(instance: Instance) -> list[float]:
    """f_j = true runtime / estimate of every job, in job order (``Job.runtime_factor``,
    None = 1)."""
    return [job.runtime_factor if job.runtime_factor is not None else 1.0
            for job in instance.jobs]


def restart_cost(instance: Instance) -> float:
    """rho = seconds to resume a checkpointed job (``Params.restart_cost_s``, None = 0)."""
    return instance.params.restart_cost_s or 0.0


def estimated_runtime(j: int, option: Option) -> float:
    """r[j,o]: the estimate (the instance's ``runtime_s``), s."""
    return option.runtime


def scaled_runtime(factors: Sequence[float]) -> Runtime:
    """runtime(j, o) = r[j,o] f_j, s (the truth when ``factors`` are the true f_j)."""

    def runtime(j: int, option: Option) -> float:
        return option.runtime * factors[j]

    return runtime


def scaled_data(data: SaturnData, factors: Sequence[float]) -> SaturnData:
    """The same problem with every runtime of job j multiplied by f_j (the true problem)."""
    return replace(data, options=[
        [replace(o, runtime=o.runtime * f) for o in opts]
        for opts, f in zip(data.options, factors, strict=True)
    ])


@dataclass(frozen=True)
class NodeWorld:
    """What an execution meets: the problem on the estimates (``data``), the true factors f_j
    (job order) and the restart cost rho (s)."""

    data: SaturnData
    factors: tuple[float, ...]
    restart_cost: float

    @classmethod
    def of(cls, instance: Instance, data: SaturnData) -> NodeWorld:
        """The world of ``instance`` (``data`` = its problem data, same job order)."""
        factors = tuple(runtime_factors(instance))
        if len(factors) != data.num_jobs:
            raise InputError(f"instance has {len(factors)} jobs, its data {data.num_jobs}")
        return cls(data, factors, restart_cost(instance))

    @property
    def exact(self) -> bool:
        """True when every estimate is the truth (all f_j = 1)."""
        return all(f == 1.0 for f in self.factors)

    @property
    def runtime(self) -> Runtime:
        """The true runtime r[j,o] f_j, s."""
        return scaled_runtime(self.factors)

    def true_data(self) -> SaturnData:
        """The problem with the true runtimes."""
        return scaled_data(self.data, self.factors)


# ------------------------------------------------------------------------------ plans


@dataclass(frozen=True)
class PlanItem:
    """One job's place in a plan: ``option`` on node ``node`` (index), planned ``start`` (s)."""

    option: Option
    node: int
    start: float


#: job index -> its plan item (unfinished jobs).
Plan = dict[int, PlanItem]


def plan_from_schedule(data: SaturnData, schedule: Sequence[ScheduleEntry]) -> Plan:
    """The plan behind a one-entry-per-job schedule (e.g. a MILP's or a baseline's Solution).

    The entry's (config, gpus) is matched among ``data.options`` (build ``data`` with
    ``dominance=False`` for schedules that may use a dominated configuration) and its node by
    name (else the first node of its type that fits).
    """
    index = {job: j for j, job in enumerate(data.job_ids)}
    node_index = {node.name: n for n, node in enumerate(data.nodes)}
    plan: Plan = {}
    for e in schedule:
        j = index.get(e.job)
        if j is None:
            raise InputError(f"schedule names unknown job {e.job!r}")
        choices = [o for o in data.options[j] if o.technique == e.config and o.gpus == e.gpus]
        if not choices:
            raise InputError(f"job {e.job}: configuration {e.config} x{e.gpus} is not one of "
                             "its options")
        if e.node is not None and e.node in node_index:
            n = node_index[e.node]
        else:
            n = next(k for k, nd in enumerate(data.nodes)
                     if nd.accelerator == e.accelerator and nd.gpus >= e.gpus)
        plan[j] = PlanItem(choices[0], n, e.start)
    missing = [data.job_ids[j] for j in range(data.num_jobs) if j not in plan]
    if missing:
        raise InputError(f"schedule leaves jobs unplanned: {missing}")
    return plan


# -------------------------------------------------------------------------- execution


@dataclass
class Running:
    """A running segment.  Progress at time t >= anchor_time is
    anchor_progress + max(0, t - max(anchor_time, overhead_until)) / r  (r = runtime, s)."""

    option: Option
    node: int
    seg_start: float  # s, start of the segment (schedule entry)
    overhead: float  # s, restart cost at the segment's beginning
    anchor_time: float
    anchor_progress: float

    @property
    def overhead_until(self) -> float:
        """End of the restart overhead, s."""
        return self.seg_start + self.overhead

    def progress_at(self, t: float, runtime: float) -> float:
        """Fraction of the job done at time t (s) at ``runtime`` s per whole job."""
        worked = max(0.0, t - max(self.anchor_time, self.overhead_until))
        if runtime <= 0:
            return 1.0 if t >= self.overhead_until else self.anchor_progress
        return min(1.0, self.anchor_progress + worked / runtime)

    def finish(self, runtime: float) -> float:
        """Completion time, s, at ``runtime`` s per whole job."""
        return max(self.anchor_time, self.overhead_until) + (
            1.0 - self.anchor_progress) * max(runtime, 0.0)


@dataclass(frozen=True)
class Segment:
    """A closed segment of job ``job``: ``option`` on ``node`` over [start, end), s; the first
    ``overhead`` s restore a checkpoint."""

    job: int
    option: Option
    node: int
    start: float
    end: float
    overhead: float


@dataclass
class Execution:
    """The state of a run at time ``now``: progress of waiting jobs, running segments,
    completions and closed segments.  It holds no runtimes: :meth:`advance` and the progress
    queries take the runtime function (the truth, or the estimates when predicting)."""

    data: SaturnData
    now: float = 0.0
    progress: list[float] = field(default_factory=list)
    running: dict[int, Running] = field(default_factory=dict)
    done: dict[int, float] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)  # closed segments per job

    @classmethod
    def start(cls, data: SaturnData) -> Execution:
        """Nothing run yet, at t = 0."""
        return cls(data=data, progress=[0.0] * data.num_jobs, closed=[0] * data.num_jobs)

    @property
    def finished(self) -> bool:
        """True when every job is complete."""
        return len(self.done) == self.data.num_jobs

    @property
    def makespan(self) -> float:
        """Latest completion so far, s."""
        return max(self.done.values(), default=0.0)

    def unfinished(self) -> list[int]:
        """Jobs not complete, in index order."""
        return [j for j in range(self.data.num_jobs) if j not in self.done]

    def current_progress(self, j: int, runtime: Runtime) -> float:
        """phi_j at ``now``."""
        run = self.running.get(j)
        if run is None:
            return self.progress[j]
        return run.progress_at(self.now, runtime(j, run.option))

    def rebase(self, runtime: Runtime) -> None:
        """Anchor every running segment's progress at ``now`` (exact at ``runtime``), so later
        advances may use another runtime function (the estimates)."""
        for j, run in self.running.items():
            run.anchor_progress = run.progress_at(self.now, runtime(j, run.option))
            run.anchor_time = self.now

    def begin(self, j: int, item: PlanItem, restart_cost: float) -> None:
        """Start (or resume, paying ``restart_cost`` s) job j now."""
        overhead = restart_cost if self.closed[j] > 0 else 0.0
        self.running[j] = Running(item.option, item.node, self.now, overhead, self.now,
                                  self.progress[j])

    def stop(self, j: int, runtime: Runtime) -> None:
        """Checkpoint running job j now (a zero-length segment leaves no trace)."""
        run = self.running.pop(j)
        self.progress[j] = run.progress_at(self.now, runtime(j, run.option))
        if self.now > run.seg_start + EPS:
            self.segments.append(Segment(j, run.option, run.node, run.seg_start, self.now,
                                         run.overhead))
            self.closed[j] += 1

    def complete(self, j: int, at: float) -> None:
        """Job j finished at ``at`` s."""
        run = self.running.pop(j)
        self.segments.append(Segment(j, run.option, run.node, run.seg_start, at, run.overhead))
        self.closed[j] += 1
        self.progress[j] = 1.0
        self.done[j] = at


def advance(
    ex: Execution,
    plan: Plan,
    runtime: Runtime,
    restart_cost: float,
    until: float = math.inf,
) -> None:
    """Run ``plan`` from ``ex.now`` until every job is done or time ``until`` (s).

    Dispatch rule: each node takes its queued jobs in order of planned start (ties: job
    index); the head starts once it has arrived and its GPUs are free; nothing overtakes it.
    At ``until`` completions due then are recorded, and nothing new is started (the caller
    may re-plan first).
    """
    data = ex.data
    queues: dict[int, list[int]] = defaultdict(list)
    for j in sorted(plan, key=lambda k: (plan[k].start, k)):
        if j not in ex.done and j not in ex.running:
            queues[plan[j].node].append(j)
    while True:
        used = [0] * len(data.nodes)
        for run in ex.running.values():
            used[run.node] += run.option.gpus
        for n, queue in queues.items():
            while queue:
                j = queue[0]
                item = plan[j]
                if data.release[j] > ex.now + EPS:
                    break
                if used[n] + item.option.gpus > data.nodes[n].gpus:
                    break
                ex.begin(j, item, restart_cost)
                used[n] += item.option.gpus
                queue.pop(0)
        if ex.finished:
            return
        ends = {j: run.finish(runtime(j, run.option)) for j, run in ex.running.items()}
        waiting = [data.release[q[0]] for q in queues.values()
                   if q and data.release[q[0]] > ex.now + EPS]
        t_next = min(min(ends.values(), default=math.inf), min(waiting, default=math.inf),
                     until)
        if not math.isfinite(t_next):
            stuck = [data.job_ids[q[0]] for q in queues.values() if q]
            raise AssertionError(f"plan cannot proceed at t={ex.now} (queue heads {stuck})")
        ex.now = max(ex.now, t_next)
        for j, end in sorted(ends.items(), key=lambda item: item[1]):
            if end <= ex.now + EPS:
                ex.complete(j, end)
        if ex.now >= until - EPS:
            return


def predict(ex: Execution, plan: Plan, runtime: Runtime, restart_cost: float) -> float:
    """Makespan (s) of running ``plan`` from ``ex`` (copied) to the end at ``runtime``."""
    trial = copy.deepcopy(ex)
    advance(trial, plan, runtime, restart_cost)
    return trial.makespan


def execute(world: NodeWorld, plan: Plan) -> Execution:
    """The static run: ``plan`` executed from t = 0 in ``world``, never re-planned."""
    ex = Execution.start(world.data)
    advance(ex, plan, world.runtime, world.restart_cost)
    return ex


# ------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class Replan:
    """A policy's decision at a boundary: follow ``plan`` from now on; the running jobs in
    ``keep`` continue their segments, every other running job is checkpointed now."""

    plan: Plan
    keep: frozenset[int]


class NodePolicy(Protocol):
    """What :func:`simulate_nodes` asks at every boundary."""

    def decide(
        self, state: Execution, plan: Plan, observed: Sequence[float | None]
    ) -> Replan | None:
        """A new plan, or None to keep ``plan``.  ``state`` is the run at ``state.now``
        (running segments anchored there; read it, do not change it); ``observed[j]`` is f_j
        once job j has made progress, else None."""
        ...


def simulate_nodes(
    world: NodeWorld,
    plan: Plan,
    policy: NodePolicy,
    interval_s: float,
    max_decisions: int,
) -> Execution:
    """Execute ``plan`` in ``world``, asking ``policy`` at t = k ``interval_s`` (s) for
    k = 1 .. ``max_decisions`` (see the module docstring).  Returns the finished run."""
    if not (interval_s > 0 and max_decisions >= 0):
        raise InputError(f"interval_s must be > 0 and max_decisions >= 0 (got {interval_s!r}, "
                         f"{max_decisions!r})")
    true_runtime = world.runtime
    ex = Execution.start(world.data)
    k = 1
    while True:
        last = k > max_decisions
        advance(ex, plan, true_runtime, world.restart_cost,
                until=math.inf if last else k * interval_s)
        if ex.finished:
            break
        ex.rebase(true_runtime)
        observed = [world.factors[j] if ex.current_progress(j, true_runtime) > 0 else None
                    for j in range(world.data.num_jobs)]
        decision = policy.decide(ex, plan, observed)
        if decision is not None:
            for j in sorted(ex.running):
                if j not in decision.keep:
                    ex.stop(j, true_runtime)
            plan = decision.plan
        k += 1
    return ex
