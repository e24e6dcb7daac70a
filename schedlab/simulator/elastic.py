r"""Elastic mode: Titan's world of fine-tuning tasks with elastic GPU counts, merged pairs and
context-switch costs (docs/simulator.md, "Elastic mode").

The round-based engine (:mod:`schedlab.simulator.engine`) runs every job as a fixed gang of
``scale_factor`` GPUs and charges a switch only when a job moves.  Titan's tasks differ on
three counts, so they get this separate path (the engine is untouched):

* a task may run on any number of GPUs up to its ``max_gpus``, at the speed of its profile
  ``duration_s`` {a: seconds of the whole task on a GPUs}, interpolated linearly in 1/a
  (:mod:`schedlab.formulations.titan.speed`);
* two tasks that have not started may be merged: from then on they run as one *unit*, trained
  jointly, whose profile is the pair's merged duration (a pair entry of the instance, else the
  default model of :class:`~schedlab.formulations.titan.merge.MergeRule`), and both finish
  when it finishes;
* every reallocation costs a context switch (:mod:`schedlab.simulator.switch`).

**Units.**  What runs is a unit: one task alone, or a merged pair.  A unit has done a fraction
phi of its work; on a GPUs it does 1 / d(a) of it per second, d its profile.

**The loop** (times in s, rounds of length L on a fixed grid t = k L, as Titan's simulator
steps its ``scheduling_time_interval``):

.. code-block:: text

    t = the first grid point at or after the first arrival
    loop:
        admit every task with arrival <= t (a unit of its own)
        no unit active: t = the first grid point >= the next arrival, continue (stop if none)
        grants = policy.plan(ElasticState at t)          [(members, GPUs), ...]
        check the grants                                  InvalidDecisionError
        a grant of two unmerged tasks merges them into a new unit
        choose GPU ids (nodes of gpus_per_node; sticky, then packed: schedlab/placement.py)
        advance every granted unit through [t, t + L)
        t = t + L

**Switches.**  A granted unit pays o = c + \ell(m, a) (checkpoint plus exposed parameter
load of its base model m on a GPUs, pipelined or not: :class:`~schedlab.simulator.switch.
SwitchModel`) in a round where it did not run in the previous round (a first start, a resume
after waiting) or runs on another number of GPUs than then; a unit that keeps its count keeps
its GPUs and pays nothing.  As in Titan's simulator (``FoundationModelJob.step``) the switch is
paid first and an overhead longer than the round carries into the next round while the unit
keeps running; a unit taken off its GPUs forgets what it still owed (its next start pays a
whole switch again).  Which switch a run charges, pipelined or not, is the ``pipelined``
argument of :func:`simulate_elastic` (default: the policy's ``pipelined_switch`` attribute,
else False).

**Progress.**  A unit with remaining fraction r = 1 - phi on a GPUs, paying p = min(owed, L)
this round, finishes at t + p + r d(a) when r d(a) <= L - p (a shortfall below 1e-9 counts as
done), else advances phi by (L - p) / d(a).  Its GPUs stay idle until the next round once it
finishes (no backfill).  A unit that ran in the previous round and gets no grant (before
finishing) counts a preemption.

**What is checked** (:class:`~schedlab.simulator.engine.InvalidDecisionError` naming the
policy, the round and the reason): members are active tasks, each task in at most one grant,
a task of a merged pair only through its pair, a new pair of two tasks that have never run and
fine-tune the same base model, 1 <= GPUs <= the unit's maximum (a pair's: the sum of its
members'), and at most the cluster's GPUs in all.  The similarity threshold and the merge
benefit are the policy's rules, not the world's.

**Records** (:class:`~schedlab.simulator.result.SimulationResult`, one JobRecord per task in
arrival order): a merged task's start and finish are its pair's; its ``gpu_seconds`` are half
the pair's, its ``executed_s`` and ``overhead_s`` the pair's wall seconds; ``scale_factor`` is
the task's request and ``isolated_time_s`` = d(request), the task alone on the GPUs it asked
for; ``migrations`` counts its paid switches after the first start.  A round's RunRecords name
both members of a pair, each with the other as ``partner`` and the pair's GPU mask.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from schedlab.errors import InputError
from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.speed import duration
from schedlab.formulations.titan.tasks import TitanTask, titan_tasks
from schedlab.instance import Cluster, Instance
from schedlab.placement import PoolPlacer, gpus_per_node
from schedlab.policies.elastic_state import (
    ElasticPolicy,
    ElasticState,
    Grant,
    TaskSpec,
    UnitState,
)
from schedlab.simulator.engine import InvalidDecisionError, SimulationStalledError
from schedlab.simulator.result import JobRecord, RoundRecord, RunRecord, SimulationResult
from schedlab.simulator.switch import SwitchModel

log = logging.getLogger(__name__)

#: A remaining fraction below this counts as done (float dust).
FINISH_TOLERANCE = 1e-9

#: merged profile of two tasks (the first is the earlier one in the instance): {GPUs: s}.
MergedProfile = Callable[[TitanTask, TitanTask], Mapping[int, float]]


# --------------------------------------------------------------------------- set-up


def task_specs(instance: Instance) -> list[TaskSpec]:
    """The instance's tasks (Titan fields checked by
    :func:`~schedlab.formulations.titan.tasks.titan_tasks`), in instance order; a request
    above ``max_gpus`` is an :class:`~schedlab.errors.InputError`."""
    tasks = titan_tasks(instance, "the elastic simulator")
    out = []
    for i, (task, job) in enumerate(zip(tasks, instance.jobs, strict=True)):
        if job.scale_factor > task.max_gpus:
            raise InputError(f"task {job.id!r} requests {job.scale_factor} GPUs but can use "
                             f"at most {task.max_gpus}", file=instance.name,
                             field=f"jobs[{i}].scale_factor")
        out.append(TaskSpec(task=task, requested_gpus=job.scale_factor, job_type=job.job_type,
                            order=i))
    return out


def _single(spec: TaskSpec) -> UnitState:
    task = spec.task
    return UnitState(id=task.id, members=(task.id,), base_model=task.base_model,
                     profile=dict(task.duration_s), max_gpus=task.max_gpus,
                     arrival=task.arrival, done=1.0 - task.remaining)


# --------------------------------------------------------------------------- the loop


def simulate_elastic(
    instance: Instance,
    policy: ElasticPolicy,
    *,
    switch: SwitchModel | None = None,
    pipelined: bool | None = None,
    merged_profile: MergedProfile | None = None,
    round_s: float | None = None,
    seed: int = 0,
    max_rounds: int | None = None,
    stall_rounds: int = 1000,
) -> SimulationResult:
    """Simulate ``policy`` on the Titan tasks of ``instance`` (module docstring).

    Args:
        instance: Titan tasks (``base_model``, ``classes``, ``duration_s``, optional
            ``max_gpus``; ``scale_factor`` = the request) on one accelerator type.
        policy: an :class:`ElasticPolicy` (a fixed-gang policy runs through
            :class:`~schedlab.simulator.elastic_gangs.FixedGangs`).
        switch: the context-switch model (default :meth:`SwitchModel.defaults`).
        pipelined: charge the pipelined switch (default: ``policy.pipelined_switch``, else
            False).
        merged_profile: the truth of joint training (default: the instance's merge rule,
            :meth:`MergeRule.for_instance` -- its pair entries, else the default model).
        round_s: round length L (default ``params.round_s``).
        seed: handed to the policy in the state.
        max_rounds: stop after this many rounds (unfinished tasks keep ``finish`` None).
        stall_rounds: raise :class:`SimulationStalledError` after this many rounds in which
            units wait, none can arrive any more and the policy grants nothing.
    """
    specs = task_specs(instance)
    accelerator, pool = next(iter(instance.cluster.accelerators.items()))
    length = float(round_s if round_s is not None else instance.params.round_s)
    if not (math.isfinite(length) and length > 0):
        raise InputError(f"round_s must be positive, got {round_s!r}", field="round_s")
    model = switch or SwitchModel.defaults()
    for spec in specs:
        model.cost(spec.task.base_model, 1)  # an unknown base model fails before the run
    charge_pipelined = (bool(getattr(policy, "pipelined_switch", False)) if pipelined is None
                        else pipelined)
    rule = MergeRule.for_instance(instance)
    world = _World(
        specs=specs, cluster=instance.cluster, accelerator=accelerator, gpus=pool.count,
        per_node=gpus_per_node(pool), length=length, switch=model,
        pipelined=charge_pipelined, rule=rule,
        merged_profile=merged_profile or rule.merged_profile, seed=seed)
    policy.reset()
    name = getattr(policy, "name", "") or type(policy).__name__
    log.info("elastic simulation of %s: %d tasks, %d GPUs, round %.6g s, %s switch", name,
             len(specs), pool.count, length, "pipelined" if charge_pipelined else "plain")
    return world.run(policy, name, max_rounds, stall_rounds)


@dataclass
class _World:
    specs: list[TaskSpec]
    cluster: Cluster
    accelerator: str
    gpus: int
    per_node: int | None
    length: float
    switch: SwitchModel
    pipelined: bool
    rule: MergeRule
    merged_profile: MergedProfile
    seed: int
    units: list[UnitState] = field(default_factory=list)
    every_unit: list[UnitState] = field(default_factory=list)
    unit_of: dict[str, UnitState] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    version: int = 0

    def run(self, policy: ElasticPolicy, name: str, max_rounds: int | None,
            stall_rounds: int) -> SimulationResult:
        wall0 = time.perf_counter()
        counters0 = _counters(policy)
        by_id = {spec.id: spec for spec in self.specs}
        pending = sorted(self.specs, key=lambda s: (s.task.arrival, s.order))
        placer = PoolPlacer(self.gpus, self.per_node)
        rounds: list[RoundRecord] = []
        nxt = 0
        length = self.length
        now = _grid(pending[0].task.arrival, length) if pending else 0.0
        k = round(now / length)
        idle = 0
        decide_s = 0.0
        stopped = "all jobs finished"
        while True:
            while nxt < len(pending) and pending[nxt].task.arrival <= now:
                unit = _single(pending[nxt])
                self.units.append(unit)
                self.every_unit.append(unit)
                self.unit_of[unit.id] = unit
                nxt += 1
                self.version += 1
            if not self.units:
                if nxt >= len(pending):
                    break
                now = _grid(pending[nxt].task.arrival, length)
                k = round(now / length)
                continue
            if max_rounds is not None and len(rounds) >= max_rounds:
                stopped = "max_rounds"
                break
            state = ElasticState(
                now=now, round_index=k, round_s=length, cluster=self.cluster,
                accelerator=self.accelerator, gpus=self.gpus, gpus_per_node=self.per_node,
                units=list(self.units), tasks=by_id, finished=list(self.finished),
                merge_rule=self.rule, pipelined=self.pipelined, version=self.version,
                seed=self.seed)
            t0 = time.perf_counter()
            grants = list(policy.plan(state))
            decide_s += time.perf_counter() - t0
            chosen = self._resolve(grants, by_id, name, k)
            runs = self._advance(chosen, placer, now, k)
            rounds.append(RoundRecord(k, now, now + length, tuple(runs)))
            ran = {unit.id for unit, _ in chosen}
            for unit in self.units:
                if unit.id not in ran:
                    if unit.last_round_run == k - 1 and unit.finish_time is None:
                        unit.preemptions += 1
                    unit.overhead_left = 0.0
            done = [unit for unit in self.units if unit.finish_time is not None]
            if done:
                done.sort(key=lambda u: (u.finish_time, u.id))
                for unit in done:
                    self.finished.extend(unit.members)
                    for member in unit.members:
                        self.unit_of.pop(member, None)
                    self.unit_of.pop(unit.id, None)
                self.units = [u for u in self.units if u.finish_time is None]
                self.version += 1
            if chosen or nxt < len(pending):
                idle = 0
            else:
                idle += 1
                if idle >= stall_rounds:
                    raise SimulationStalledError(
                        f"policy {name!r} granted nothing for {idle} rounds while "
                        f"{len(self.units)} unit(s) wait and no task can arrive any more; "
                        f"stopping at t = {now:.6g} s")
            now += length
            k += 1
        wall = time.perf_counter() - wall0
        counters = _counters(policy)
        records = self._records(pending)
        log.info("%s: %d rounds, %d/%d tasks finished, %.3f s wall (%.3f s deciding)", name,
                 len(rounds), len(self.finished), len(self.specs), wall, decide_s)
        return SimulationResult(
            policy=name, mode="continuous", round_s=length, gpus={self.accelerator: self.gpus},
            jobs=records, rounds=rounds,
            solver_time_s=counters[0] - counters0[0],
            solves=int(counters[1] - counters0[1]),
            decisions=int(counters[2] - counters0[2]),
            failed_solves=int(counters[3] - counters0[3]),
            decide_time_s=decide_s, wall_s=wall, end_time=now, stopped=stopped)

    # ----------------------------------------------------------------- decisions
    def _resolve(self, grants: Sequence[Grant], by_id: Mapping[str, TaskSpec], name: str,
                 k: int) -> list[tuple[UnitState, int]]:
        """The grants as (unit, GPUs), new pairs merged; InvalidDecisionError if one breaks
        a rule of the module docstring."""

        def bad(reason: str) -> InvalidDecisionError:
            return InvalidDecisionError(f"policy {name!r}, round {k}: {reason}")

        seen: set[str] = set()
        out: list[tuple[UnitState, int]] = []
        total = 0
        for grant in grants:
            members = tuple(grant.members)
            if not 1 <= len(members) <= 2 or len(set(members)) != len(members):
                raise bad(f"a grant names one task or two different tasks, got {members}")
            if not isinstance(grant.gpus, int) or grant.gpus < 1:
                raise bad(f"grant {members}: GPUs must be a positive integer, got "
                          f"{grant.gpus!r}")
            for member in members:
                if member in seen:
                    raise bad(f"task {member!r} is granted twice")
                if member not in self.unit_of:
                    raise bad(f"task {member!r} is unknown or not active")
                seen.add(member)
            units = {self.unit_of[m].id: self.unit_of[m] for m in members}
            if len(units) == 1:
                unit = next(iter(units.values()))
                if set(unit.members) != set(members):
                    raise bad(f"task {members[0]!r} runs in merged pair {unit.id!r}: grant "
                              "the pair")
            else:
                unit = self._merge(members, by_id, bad)
            if grant.gpus > unit.max_gpus:
                raise bad(f"unit {unit.id!r} can use at most {unit.max_gpus} GPUs, granted "
                          f"{grant.gpus}")
            total += grant.gpus
            out.append((unit, grant.gpus))
        if total > self.gpus:
            raise bad(f"{total} GPUs granted but the cluster has {self.gpus}")
        for unit, _ in out:
            if unit.id not in self.unit_of:
                self._adopt(unit)
        return out

    def _merge(self, members: tuple[str, ...], by_id: Mapping[str, TaskSpec],
               bad: Callable[[str], InvalidDecisionError]) -> UnitState:
        """A new unit for two unmerged tasks that have never run, same base model."""
        first, second = sorted((by_id[m] for m in members), key=lambda s: s.order)
        for spec in (first, second):
            unit = self.unit_of[spec.id]
            if unit.merged:
                raise bad(f"task {spec.id!r} is already in merged pair {unit.id!r}")
            if unit.started or unit.done > 0:
                raise bad(f"task {spec.id!r} has started; only tasks that never ran merge")
        if first.task.base_model != second.task.base_model:
            raise bad(f"tasks {first.id!r} and {second.id!r} fine-tune different base models "
                      f"({first.task.base_model}, {second.task.base_model})")
        profile = {int(a): float(s)
                   for a, s in self.merged_profile(first.task, second.task).items()}
        if not profile or any(not (math.isfinite(s) and s > 0) for s in profile.values()):
            raise InputError(f"merged profile of {first.id!r} and {second.id!r} must be "
                             f"positive seconds, got {profile}")
        return UnitState(
            id=f"{first.id}+{second.id}", members=(first.id, second.id),
            base_model=first.task.base_model, profile=profile,
            max_gpus=first.task.max_gpus + second.task.max_gpus,
            arrival=min(first.task.arrival, second.task.arrival))

    def _adopt(self, pair: UnitState) -> None:
        """Replace the pair's members' single units by the pair."""
        members = set(pair.members)
        self.units = [u for u in self.units if not (set(u.members) & members)] + [pair]
        self.units.sort(key=lambda u: u.arrival)
        self.every_unit.append(pair)
        for member in pair.members:
            self.unit_of[member] = pair
        self.unit_of[pair.id] = pair
        self.version += 1

    # ------------------------------------------------------------------ progress
    def _advance(self, chosen: Sequence[tuple[UnitState, int]], placer: PoolPlacer,
                 now: float, k: int) -> list[RunRecord]:
        length = self.length
        gangs = [gpus for _, gpus in chosen]
        previous = [unit.mask if unit.last_round_run == k - 1 and unit.gpus == gpus else 0
                    for unit, gpus in chosen]
        masks = placer.place(gangs, previous)
        runs: list[RunRecord] = []
        for (unit, gpus), mask in zip(chosen, masks, strict=True):
            keeps = unit.last_round_run == k - 1 and unit.gpus == gpus
            if keeps:
                owed = unit.overhead_left
            else:
                owed = self.switch.overhead_s(unit.base_model, gpus, self.pipelined)
                unit.switches += 1
            pay = min(owed, length)
            unit.overhead_left = owed - pay
            seconds = duration(unit.profile, gpus)
            need = unit.remaining * seconds
            available = length - pay
            if need - available <= FINISH_TOLERANCE * seconds:
                held = min(pay + need, length)
                unit.done = 1.0
                unit.finish_time = now + held
                unit.overhead_left = 0.0
            else:
                held = length
                unit.done += available / seconds
            if unit.start_time is None:
                unit.start_time = now
            unit.executed_s += held
            unit.gpu_seconds += held * gpus
            unit.overhead_s += pay
            unit.rounds_run += 1
            unit.gpus = gpus
            unit.mask = mask
            unit.last_round_run = k
            end = now + held
            for member in unit.members:
                mate = next((m for m in unit.members if m != member), None)
                runs.append(RunRecord(member, self.accelerator, mask, mate, pay, end))
        return runs

    # ------------------------------------------------------------------- records
    def _records(self, pending: Sequence[TaskSpec]) -> list[JobRecord]:
        """One JobRecord per task, arrival order (module docstring, "Records")."""
        parts: dict[str, list[UnitState]] = {}
        for unit in self.every_unit:  # a task's own unit first, then its pair if it merged
            for member in unit.members:
                parts.setdefault(member, []).append(unit)
        records = []
        for spec in pending:
            task = spec.task
            units = parts.get(task.id, [])
            last = units[-1] if units else None
            work = task.work if task.work is not None else 1.0
            switches = sum(u.switches for u in units)
            executed = sum(u.executed_s for u in units)
            records.append(JobRecord(
                job=task.id, arrival=task.arrival,
                start=next((u.start_time for u in units if u.start_time is not None), None),
                finish=last.finish_time if last is not None else None,
                scale_factor=spec.requested_gpus, weight=task.weight,
                job_type=spec.job_type, user=None, total_steps=work,
                steps=work * min(last.done, 1.0) if last is not None else 0.0,
                preemptions=sum(u.preemptions for u in units),
                migrations=max(switches - 1, 0),
                rounds_run=sum(u.rounds_run for u in units),
                gpu_seconds=sum(u.gpu_seconds / len(u.members) for u in units),
                executed_s=executed, overhead_s=sum(u.overhead_s for u in units),
                isolated_time_s=duration(task.duration_s, spec.requested_gpus),
                time_on={self.accelerator: executed}))
        return records


def _grid(t: float, length: float) -> float:
    """The first grid point k L at or after t."""
    k = math.ceil(t / length - 1e-12)
    return max(k, 0) * length


def _counters(policy: object) -> tuple[float, float, float, float]:
    return (float(getattr(policy, "solver_time_s", 0.0)), float(getattr(policy, "solves", 0)),
            float(getattr(policy, "decisions", 0)), float(getattr(policy, "failed_solves", 0)))


__all__ = [
    "ElasticPolicy",
    "ElasticState",
    "Grant",
    "TaskSpec",
    "UnitState",
    "simulate_elastic",
    "task_specs",
]
