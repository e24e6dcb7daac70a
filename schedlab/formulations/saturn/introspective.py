"""Saturn's introspective scheduling: execute a plan, re-solve on the remaining work every
interval, adopt the new plan only when it is clearly better.

Saturn (Nagrecha & Kumar, VLDB'24) plans SPASE (select a parallelism, allocate GPUs, schedule)
on *profiled* runtimes, which are estimates.  While the plan runs, the scheduler learns how
fast each job really is and re-plans.  This module models that loop; the full model with its
assumptions is in ``docs/formulations/saturn.md`` (section "Introspection").

**Runtimes.**  Each job j has one hidden speed factor f_j: its true runtime on any option o is
r_true[j,o] = f_j r[j,o] (r = the instance's estimate, s).  ``noise_sigma`` = sigma draws
f_j = exp(sigma z_j), z_j ~ N(0,1) from ``numpy.random.default_rng(seed)``, i.e.
f_j ~ lognormal(0, sigma); ``runtime_factors`` sets f_j by hand (scripted cases).  Progress is a
fraction phi_j in [0, 1] of the job's work (steps done / total steps), whatever the option:
running option o for d seconds adds d / r_true[j,o].

**Observation.**  The scheduler sees phi_j.  Once job j has made progress (phi_j > 0) it knows
f_j exactly, f_j = (seconds of progress) / (phi_j r[j,o]), because the noise is one factor per
job; a job that has not run yet is estimated at f_j = 1.  The estimated remaining runtime on
option o is therefore (1 - phi_j) f^_j r[j,o] with f^_j = f_j or 1.

**Execution (the same rule for the static and the introspective run).**  A plan gives every
unfinished job an option, a node and a planned start.  Each node runs its jobs in the order of
their planned starts: the next job starts as soon as it has arrived and its g GPUs are free
(strict order per node, no overtaking, no look-ahead: the executor does not know the true
runtimes).  The predictor is this executor run on the estimated runtimes, so with sigma = 0 a
prediction is exactly what will happen.

**Checkpoints and restarts.**  At every interval boundary (t = k ``interval_s``) a running job
may be checkpointed (stopped).  Resuming a checkpointed job costs ``restart_cost_s`` seconds
(restore, warm-up) with no progress, in whatever option and node it resumes - also when they are
the same; a job that simply keeps running pays nothing.

**Re-planning.**  At each boundary t: re-estimate, then solve a time-indexed MILP over the
remaining work (:func:`build_replan`; jobs may *keep* running at t, or restart in any option on
any node after the restart cost, or start for the first time), warm-started from the current
plan.  Both the current plan and the MILP's plan are evaluated with the predictor from the state
at t, and the new one is adopted only when its predicted makespan is below
(1 - ``threshold``) x the current one's.  With sigma = 0 this makes the introspective run never
end later than the static run (each adoption lowers the exactly predicted makespan).

**Output.**  ``schedule`` is the realized execution: one entry per job *segment*
(``round`` = segment index 0, 1, ...), each with its option, node and [start, end); a resumed
segment begins with the restart cost.  ``metrics["true_runtime_s"]`` records r_true per job and
configuration (``"technique:gpus"``) and ``metrics["restart_cost_s"]`` the cost, so the checker
verifies that the segments' progress sums to one whole job.  Other metrics: realized makespan,
the static plan's realized makespan under the same noise, the plan's makespan on the estimates,
re-solves, adopted plans, restarts, solver seconds, and one line per re-solve.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyomo.environ as pyo

from schedlab.errors import InputError
from schedlab.formulations.base import Formulation
from schedlab.formulations.saturn.data import (
    NodeSpec,
    Option,
    SaturnData,
    lower_bound,
    makespan,
    saturn_data,
)
from schedlab.formulations.saturn.models import TimeIndexed
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions

log = logging.getLogger(__name__)

#: Times closer than this (s) are the same instant.
EPS = 1e-7

#: runtime(job, option) -> seconds for the whole job on that option.
Runtime = Callable[[int, Option], float]


def config_key(technique: str, gpus: int) -> str:
    """Key of a configuration in ``metrics["true_runtime_s"][job]``: ``"technique:gpus"``."""
    return f"{technique}:{gpus}"


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
    completions and closed segments."""

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


def execute(
    data: SaturnData, plan: Plan, runtime: Runtime, restart_cost: float = 0.0
) -> Execution:
    """The static run: ``plan`` executed from t = 0 at ``runtime``, never re-planned."""
    ex = Execution.start(data)
    advance(ex, plan, runtime, restart_cost)
    return ex


def runtime_factors(
    data: SaturnData, sigma: float, seed: int, given: Mapping[str, float] | None = None
) -> list[float]:
    """f_j = exp(sigma z_j), z_j ~ N(0,1) from ``default_rng(seed)`` (job order), or the
    factors ``given`` by job id (others 1)."""
    if given is not None:
        unknown = sorted(set(given) - set(data.job_ids))
        if unknown:
            raise InputError(f"runtime_factors name unknown jobs {unknown}",
                             field="runtime_factors")
        bad = {k: v for k, v in given.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise InputError(f"runtime_factors must be positive, got {bad}",
                             field="runtime_factors")
        return [float(given.get(job, 1.0)) for job in data.job_ids]
    if sigma == 0:
        return [1.0] * data.num_jobs
    z = np.random.default_rng(seed).standard_normal(data.num_jobs)
    return [float(v) for v in np.exp(sigma * z)]


def scaled_data(data: SaturnData, factors: Sequence[float]) -> SaturnData:
    """The same problem with every runtime of job j multiplied by f_j (the true problem)."""
    return replace(data, options=[
        [replace(o, runtime=o.runtime * f) for o in opts]
        for opts, f in zip(data.options, factors, strict=True)
    ])


# ------------------------------------------------------------------------------ re-plan


@dataclass(frozen=True)
class Move:
    """A way to run job ``job`` from now: ``option`` on node ``node`` for ``duration`` s
    (restart cost included); ``keep`` = continue the running segment (only at slot 0)."""

    job: int
    option: Option
    node: int
    duration: float
    keep: bool


def replan_moves(
    ex: Execution, estimate: Runtime, restart_cost: float
) -> list[Move]:
    """Every move of every unfinished job at ``ex.now`` (after :meth:`Execution.rebase`).

    Keep: remaining restart overhead + (1 - phi) r^ on the running option and node.  Other
    moves: (1 - phi) r^[o] plus the restart cost when the job has a checkpoint (it ran before,
    or it is running now and would be stopped).
    """
    data = ex.data
    moves: list[Move] = []
    for j in ex.unfinished():
        run = ex.running.get(j)
        phi = ex.current_progress(j, estimate)
        if run is not None:
            left = max(0.0, run.overhead_until - ex.now)
            moves.append(Move(j, run.option, run.node,
                              left + (1 - phi) * estimate(j, run.option), True))
        restore = ex.closed[j] > 0 or (run is not None and run.seg_start < ex.now - EPS)
        for option in data.options[j]:
            for n, node in enumerate(data.nodes):
                if option.gpus <= node.gpus:
                    moves.append(Move(j, option, n,
                                      (restart_cost if restore else 0.0)
                                      + (1 - phi) * estimate(j, option), False))
    return moves


def grid_list_schedule(
    moves: Sequence[Move], order: Sequence[Move], nodes: Sequence[NodeSpec],
    release_slots: Mapping[int, int], slots: Mapping[Move, int],
) -> dict[int, tuple[Move, int]]:
    """Serial schedule on the grid: each move of ``order`` at its earliest slot >= its job's
    release slot where its GPUs are free for its ``slots`` (keep moves at slot 0)."""
    usage: dict[int, list[int]] = {n: [] for n in range(len(nodes))}
    placed: dict[int, tuple[Move, int]] = {}
    for move in order:
        p = slots[move]
        use = usage[move.node]
        t = 0 if move.keep else release_slots[move.job]
        while True:
            need = t + p
            if len(use) < need:
                use.extend([0] * (need - len(use)))
            if all(use[tau] + move.option.gpus <= nodes[move.node].gpus
                   for tau in range(t, need)):
                break
            assert not move.keep, "running jobs fit together at slot 0"
            t += 1
        for tau in range(t, t + p):
            use[tau] += move.option.gpus
        placed[move.job] = (move, t)
    return placed


def build_replan(
    data: SaturnData,
    moves: Sequence[Move],
    delta: float,
    release_slots: Mapping[int, int],
    start: Mapping[int, tuple[Move, int]],
) -> pyo.ConcreteModel:
    """The re-planning MILP on a grid of ``delta`` s slots from now (t = 0 is now).

    p_m = ceil(duration_m / delta) slots; horizon T = makespan of the warm start ``start``
    (the current plan on the grid, so an optimum fits).  Binaries x[m,t] = 1 when move m
    starts at slot t (keep moves: t = 0 only; others t >= release slot, t + p_m <= T):

    * ``one_start[j]``:    sum_{m of j, t} x[m,t] = 1
    * ``capacity[n,tau]``: sum_{m on n, t <= tau < t + p_m} g_m x[m,t] <= G_n
    * ``finish[j]``:       C >= sum_{m of j, t} (t + p_m) x[m,t]
    * ``energy[n]``:       G_n C >= sum_{m on n, t} g_m p_m x[m,t];  ``energy_all`` the same
      summed over nodes
    * objective: C + eps sum_{restarting moves of running jobs} x, eps = 1/(2(J+1)), so that
      among plans of equal makespan (in slots) the one stopping fewer running jobs wins.
    """
    slots = {m: max(1, math.ceil(m.duration / delta - 1e-9)) for m in moves}
    horizon = max(t + slots[m] for m, t in start.values())
    index: list[tuple[int, int]] = []
    for k, m in enumerate(moves):
        if m.keep:
            index.append((k, 0))
        else:
            index += [(k, t) for t in range(release_slots[m.job], horizon - slots[m] + 1)]
    model = pyo.ConcreteModel(name="saturn.introspective.replan")
    model.START = pyo.Set(initialize=index, dimen=2, ordered=True)
    model.x = pyo.Var(model.START, domain=pyo.Binary)
    by_job: dict[int, list[Any]] = defaultdict(list)
    finish: dict[int, list[Any]] = defaultdict(list)
    usage: dict[tuple[int, int], list[Any]] = defaultdict(list)
    work: dict[int, list[Any]] = defaultdict(list)
    restarts: list[Any] = []
    running = {m.job for m in moves if m.keep}
    for k, t in index:
        m, x = moves[k], model.x[k, t]
        p, g = slots[m], m.option.gpus
        by_job[m.job].append(x)
        finish[m.job].append((t + p) * x)
        work[m.node].append(g * p * x)
        for tau in range(t, t + p):
            usage[m.node, tau].append(g * x)
        if m.job in running and not m.keep:
            restarts.append(x)
    jobs = sorted(by_job)
    model.J = pyo.Set(initialize=jobs)
    model.one_start = pyo.Constraint(model.J, rule=lambda mm, j: pyo.quicksum(by_job[j]) == 1)
    model.NT = pyo.Set(initialize=sorted(usage), dimen=2)
    model.capacity = pyo.Constraint(
        model.NT, rule=lambda mm, n, tau: pyo.quicksum(usage[n, tau]) <= data.nodes[n].gpus)
    model.C = pyo.Var(bounds=(0, horizon))
    model.finish = pyo.Constraint(
        model.J, rule=lambda mm, j: mm.C >= pyo.quicksum(finish[j]))
    model.N = pyo.Set(initialize=sorted(work))
    model.energy = pyo.Constraint(
        model.N, rule=lambda mm, n: data.nodes[n].gpus * mm.C >= pyo.quicksum(work[n]))
    total = sum(data.nodes[n].gpus for n in work)
    model.energy_all = pyo.Constraint(
        expr=total * model.C >= pyo.quicksum(t for n in work for t in work[n]))
    eps = 1.0 / (2 * (len(jobs) + 1))
    model.obj = pyo.Objective(expr=model.C + eps * pyo.quicksum(restarts))
    # Warm start: the current plan on the grid.
    position = {m: k for k, m in enumerate(moves)}
    chosen = {(position[m], t) for m, t in start.values()}
    for key in index:
        model.x[key].value = 1.0 if key in chosen else 0.0
    model.C.value = horizon
    model.moves = list(moves)
    model.slots = slots
    model.delta = delta
    model.horizon_slots = horizon
    return model


@dataclass
class Resolve:
    """One re-solve at ``at`` s: predicted makespans of the current and the new plan (s)."""

    at: float
    current_s: float
    new_s: float | None
    adopted: bool
    solve_s: float
    status: str
    binaries: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"at_s": self.at, "current_plan_s": self.current_s, "new_plan_s": self.new_s,
                "adopted": self.adopted, "solve_s": self.solve_s, "status": self.status,
                "binaries": self.binaries}


# ------------------------------------------------------------------------ formulation


class Introspective(Formulation):
    """Saturn's introspective scheduling (see the module docstring).

    Args:
        interval_s: re-solve every this many seconds; None: 1/8 of the static plan's makespan.
        threshold: adopt a new plan only if its predicted makespan < (1 - threshold) x the
            current plan's (relative, >= 0).
        restart_cost_s: seconds to resume a checkpointed job (no progress meanwhile).
        noise_sigma, seed: true runtime = estimate x lognormal(0, sigma), one factor per job.
        runtime_factors: f_j by job id (overrides ``noise_sigma``); jobs not named get 1.
        resolve_time_limit_s, resolve_mip_gap: limits of each re-solve (the solver options'
            time limit, when smaller, caps it).
        max_slots: grid slots over the current plan's remaining makespan in each re-solve.
        max_resolves: at most this many re-solves (later boundaries just run the plan).
    """

    description = ("Saturn introspective scheduling: re-solve on the remaining work every "
                   "interval, adopt clearly better plans (realized schedule under noise)")

    def __init__(
        self,
        interval_s: float | None = None,
        threshold: float = 0.01,
        restart_cost_s: float = 60.0,
        noise_sigma: float = 0.0,
        seed: int = 0,
        runtime_factors: Mapping[str, float] | None = None,
        resolve_time_limit_s: float = 2.0,
        resolve_mip_gap: float = 0.01,
        max_slots: int = 40,
        max_resolves: int = 200,
    ) -> None:
        checks: dict[str, tuple[object, bool]] = {
            "interval_s": (interval_s, interval_s is None
                           or (math.isfinite(interval_s) and interval_s > 0)),
            "threshold": (threshold, math.isfinite(threshold) and 0 <= threshold < 1),
            "restart_cost_s": (restart_cost_s,
                               math.isfinite(restart_cost_s) and restart_cost_s >= 0),
            "noise_sigma": (noise_sigma, math.isfinite(noise_sigma) and noise_sigma >= 0),
            "resolve_time_limit_s": (resolve_time_limit_s, resolve_time_limit_s > 0),
            "max_slots": (max_slots, max_slots >= 1),
            "max_resolves": (max_resolves, max_resolves >= 0),
        }
        for name, (value, ok) in checks.items():
            if not ok:
                raise InputError(f"{name} out of range (got {value!r})", field=name)
        self.interval_s = interval_s
        self.threshold = threshold
        self.restart_cost_s = restart_cost_s
        self.noise_sigma = noise_sigma
        self.seed = seed
        self.runtime_factors = dict(runtime_factors) if runtime_factors is not None else None
        self.resolve_time_limit_s = resolve_time_limit_s
        self.resolve_mip_gap = resolve_mip_gap
        self.max_slots = max_slots
        self.max_resolves = max_resolves

    def data(self, instance: Instance) -> SaturnData:
        """Validated problem data (dominant options)."""
        return saturn_data(instance, formulation=self.name or "saturn.introspective")

    def validate(self, instance: Instance) -> None:
        self.data(instance)

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The realized makespan = latest end of the executed segments, s (0 when empty)."""
        return makespan(solution.schedule)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The model of the initial (static) plan: the default time-indexed MILP."""
        return self._static_formulation().build(instance)

    def extract(
        self, model: pyo.ConcreteModel, instance: Instance, result: SolveResult
    ) -> Solution:
        raise AssertionError("introspection produces its Solution in solve()")

    @staticmethod
    def _static_formulation() -> TimeIndexed:
        static = TimeIndexed()
        static.name = "saturn.time_indexed"
        return static

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """Plan with the time-indexed MILP on the estimates, then run introspectively."""
        self.data(instance)
        static = self._static_formulation().solve(instance, options)
        return self.run(instance, static, options)

    def run(
        self, instance: Instance, static: Solution, options: SolverOptions | None = None
    ) -> Solution:
        """Execute ``static`` (a plan solved on the estimates, one entry per job) with
        introspection, and also statically, under the same true runtimes."""
        t_start = time.perf_counter()
        opts = options or SolverOptions()
        data = self.data(instance)
        factors = runtime_factors(data, self.noise_sigma, self.seed, self.runtime_factors)
        true_rt: Runtime = lambda j, o: o.runtime * factors[j]  # noqa: E731
        plan = plan_from_schedule(data, static.schedule)
        static_run = execute(data, plan, true_rt, self.restart_cost_s)
        predicted0 = predict(Execution.start(data), plan, lambda j, o: o.runtime,
                             self.restart_cost_s)
        interval = self.interval_s or max(predicted0 / 8, EPS)
        extra = dict(opts.extra)
        if opts.solver == "highs":
            # HiGHS's presolve (probing above all) on these models runs ~10 s past a 1 s
            # time limit; re-solves are short and warm-started, so skip presolve.
            extra.setdefault("presolve", "off")
        resolve_opts = replace(
            opts,
            time_limit_s=min(self.resolve_time_limit_s, opts.time_limit_s or math.inf),
            mip_gap=self.resolve_mip_gap,
            warm_start=True,
            extra=extra,
        )
        ex = Execution.start(data)
        history: list[Resolve] = []
        build_s = 0.0
        k = 1
        while True:
            last = k > self.max_resolves
            advance(ex, plan, true_rt, self.restart_cost_s,
                    until=math.inf if last else k * interval)
            if ex.finished:
                break
            ex.rebase(true_rt)
            record, new_plan, keep, spent = self._resolve(ex, plan, factors, resolve_opts)
            build_s += spent
            history.append(record)
            if record.adopted and new_plan is not None:
                for j in sorted(ex.running):
                    if j not in keep:
                        ex.stop(j, true_rt)
                plan = new_plan
            k += 1
        solution = self._solution(instance, data, static, ex, static_run, factors, history,
                                  predicted0, interval)
        resolve_s = sum(r.solve_s for r in history)
        solution.solver = opts.solver
        solution.timings = Timings(
            build_s=static.timings.build_s + build_s,
            solve_s=static.timings.solve_s + resolve_s,
            extract_s=max(0.0, time.perf_counter() - t_start - build_s - resolve_s),
        )
        solution.metrics["solver_time_s"] = static.timings.solve_s + resolve_s
        solution.metrics["resolve_time_s"] = resolve_s
        return solution

    def _resolve(
        self, ex: Execution, plan: Plan, factors: Sequence[float], options: SolverOptions
    ) -> tuple[Resolve, Plan | None, set[int], float]:
        """One re-solve at ``ex.now``: (record, new plan or None, jobs kept running, build s)."""
        data = ex.data
        observed = [ex.current_progress(j, lambda jj, o: o.runtime) > 0 for j in
                    range(data.num_jobs)]
        estimate: Runtime = lambda j, o: o.runtime * (factors[j] if observed[j] else 1.0)  # noqa: E731
        current = predict(ex, plan, estimate, self.restart_cost_s)
        t0 = time.perf_counter()
        moves = replan_moves(ex, estimate, self.restart_cost_s)
        delta = max((current - ex.now) / self.max_slots, EPS)
        release = {j: max(0, math.ceil((data.release[j] - ex.now) / delta - 1e-9))
                   for j in ex.unfinished()}
        slots = {m: max(1, math.ceil(m.duration / delta - 1e-9)) for m in moves}
        by_key = {(m.job, m.option.config, m.node, m.keep): m for m in moves}
        order = [by_key[j, r.option.config, r.node, True] for j, r in sorted(ex.running.items())]
        queued = sorted((j for j in ex.unfinished() if j not in ex.running),
                        key=lambda j: (plan[j].start, j))
        for j in queued:
            key = (j, plan[j].option.config, plan[j].node, False)
            if key not in by_key:  # a dominated option in the plan: allow it too
                phi = ex.progress[j]
                by_key[key] = Move(j, plan[j].option, plan[j].node,
                                   (self.restart_cost_s if ex.closed[j] else 0.0)
                                   + (1 - phi) * estimate(j, plan[j].option), False)
                moves.append(by_key[key])
                slots[by_key[key]] = max(1, math.ceil(by_key[key].duration / delta - 1e-9))
            order.append(by_key[key])
        start = grid_list_schedule(moves, order, data.nodes, release, slots)
        model = build_replan(data, moves, delta, release, start)
        built = time.perf_counter() - t0
        result = PersistentSolver(options).solve(model)
        record = Resolve(ex.now, current, None, False, result.solve_s, str(result.status),
                         len(model.x))
        if not result.status.has_solution:
            log.info("re-solve at %.1f s: %s, keeping the current plan", ex.now, result.status)
            return record, None, set(), built
        new_plan: Plan = {}
        keep: set[int] = set()
        for (k, t), value in model.x.extract_values().items():
            if value is not None and value > 0.5:
                m = model.moves[k]
                new_plan[m.job] = PlanItem(m.option, m.node, ex.now + t * delta)
                if m.keep:
                    keep.add(m.job)
        trial = copy.deepcopy(ex)
        for j in sorted(trial.running):
            if j not in keep:
                trial.stop(j, estimate)
        record.new_s = predict(trial, new_plan, estimate, self.restart_cost_s)
        record.adopted = record.new_s < current * (1 - self.threshold) - EPS
        log.info("re-solve at %.1f s: current plan %.1f s, new plan %.1f s -> %s", ex.now,
                 current, record.new_s, "adopt" if record.adopted else "keep")
        return record, new_plan, keep, built

    def _solution(
        self,
        instance: Instance,
        data: SaturnData,
        static: Solution,
        ex: Execution,
        static_run: Execution,
        factors: Sequence[float],
        history: Sequence[Resolve],
        predicted0: float,
        interval: float,
    ) -> Solution:
        """The realized schedule (segments) with metrics, honest status and bound."""
        count: dict[int, int] = defaultdict(int)
        schedule: list[ScheduleEntry] = []
        for seg in sorted(ex.segments, key=lambda s: (s.start, s.job)):
            node = data.nodes[seg.node]
            schedule.append(ScheduleEntry(
                job=data.job_ids[seg.job], start=seg.start, end=seg.end,
                accelerator=node.accelerator, node=node.name, gpus=seg.option.gpus,
                config=seg.option.technique, round=count[seg.job]))
            count[seg.job] += 1
        span = ex.makespan
        true_data = scaled_data(data, factors)
        bound = lower_bound(true_data)
        restarts = sum(c - 1 for c in count.values())
        exact_plan = all(f == 1.0 for f in factors) and restarts == 0
        optimal = (exact_plan and static.status == Status.OPTIMAL
                   and static.objective is not None and span <= static.objective + 1e-6)
        everything = saturn_data(instance, dominance=False, formulation=self.name)
        true_runtime = {
            job: {config_key(o.technique, o.gpus): o.runtime * f for o in opts}
            for job, opts, f in zip(data.job_ids, everything.options, factors, strict=True)
        }
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name or "saturn.introspective",
            status=Status.OPTIMAL if optimal else Status.FEASIBLE,
            objective=span,
            bound=bound,
            gap=(span - bound) / span if span > 0 else None,
            schedule=schedule,
            metrics={
                "makespan_s": span,
                "static_makespan_s": static_run.makespan,
                "plan_makespan_s": static.objective,
                "plan_predicted_s": predicted0,
                "plan_status": str(static.status),
                "improvement_vs_static": ((static_run.makespan - span) / static_run.makespan
                                          if static_run.makespan > 0 else 0.0),
                "resolves": len(history),
                "adopted": sum(r.adopted for r in history),
                "restarts": restarts,
                "lower_bound_s": bound,
                "estimate_lower_bound_s": lower_bound(data),
                "interval_s": interval,
                "threshold": self.threshold,
                "restart_cost_s": self.restart_cost_s,
                "noise_sigma": self.noise_sigma if self.runtime_factors is None else None,
                "seed": self.seed,
                "runtime_factor": dict(zip(data.job_ids, factors, strict=True)),
                "true_runtime_s": true_runtime,
                "resolve_log": [r.as_dict() for r in history],
            },
        )
