r"""The round-based, event-driven cluster simulator (docs/simulator.md).

The simulator owns time and state; a policy only decides; placement is its own step.  One
call of :func:`simulate` runs one policy over one workload:

.. code-block:: text

    t = first arrival
    loop:
        admit every job with arrival <= t                       (admission)
        no active job:  t = next arrival (idle jump), continue  (or stop when none is left)
        plan = policy.decide(ClusterState at t)                 (decision)
        check the plan                                          (InvalidDecisionError)
        choose GPU ids per type                                 (schedlab/placement.py)
        advance every placed job through the round [t, t + L)   (progress, exact finishes)
        t = end of the round

**Progress.**  Job j placed on type k with throughput T[j,k] (steps/s of the whole gang) for
a round of length L starting at t pays its switch overhead o_j first when its placement
changed (see below), then runs at T[j,k]:

.. math::

    \text{steps in the round} = \min\bigl(R_j,\; T_{jk} (L - o_j)\bigr), \qquad
    \text{finish}_j = t + o_j + R_j / T_{jk} \quad\text{if } R_j \le T_{jk} (L - o_j)

where R_j is the remaining steps (a shortfall below 1e-9 total_steps counts as done, so
floating-point dust never costs a round).  A co-located pair (space sharing) holds
max(s_a, s_b) GPUs and each job progresses at its ``colocated_throughput`` with the partner.

**Decisions taken** (docs/simulator.md discusses them):

* *Switch overhead.*  A job pays ``switch_overhead_s`` at the start of a round in which its
  accelerator type or its set of GPU ids differs from the last time it ran (counted as a
  migration).  Its first start and a resume on the same GPUs after waiting are free.  The
  overhead is capped at the round length.  Per-job values come from the job
  (``Job.switch_overhead_s`` / ``JobState.switch_overhead_s``); Instance jobs without one get
  ``switch_overhead_s`` of :func:`simulate` (default 0).
* *Resume overhead* (``resume_overhead_s``, default 0, off).  Shockwave's simulator
  (``scheduler.py``, the round loop of ``simulate``: ``preemption_overhead = 20``) charges a
  job that runs in a round after not running in the round before -- its first start
  included, the run's first round excepted -- a checkpoint/resume overhead, but only when
  the job's work would fill more than the round less 5 s (:data:`RESUME_GRACE_S`; a job about
  to finish is not charged).  With ``resume_overhead_s`` set, every policy is simulated with
  that rule: the job loses that many seconds of the round (added to any switch overhead,
  capped at the round length; counted in the record's ``overhead_s``).
* *Mid-round finishes.*  A job that finishes inside a round records its exact finish time
  and frees its GPUs at that instant; nothing is started on them before the next round (no
  backfill).  When *every* job that ran in a round has finished before its end, the round ends
  at the last finish (``end_round_early``, as Gavel's simulator does), so waiting jobs do not
  sit behind idle GPUs; otherwise rounds last exactly L.
* *Arrivals* inside a round are admitted at the next round start.  When no job is active the
  clock jumps straight to the next arrival (not aligned to a round grid, as in Gavel).
* *Preemption* is counted when a job ran in the previous round and does not run in this one
  (before finishing).
* *Static mode* sets every arrival to 0 s; continuous mode keeps each job's arrival.

Determinism: the simulator has no randomness of its own; ``seed`` is handed to policies in
:attr:`~schedlab.policies.state.ClusterState.seed`, so a seeded policy gives the same result
for the same seed.  The engine writes no files; an interrupt (Ctrl-C) propagates unchanged
(the records of jobs finished by then have gone to ``on_job_done`` already).

**Two loops, one result.**  :func:`_run` below advances job by job; on large clusters
(``engine="auto"``) runs under schedlab's mechanism without dynamic jobs or co-location
throughputs go to :func:`schedlab.simulator.array_run.run_arrays`, which keeps the active
jobs' progress in numpy columns and gives the same results bit for bit (docs/simulator.md,
"The array engine"); ``_run`` stays the reference.

**Memory** (docs/simulator.md, "Production-size traces").  A job is held in the arrival
queue, then while active (its JobState and a few dict entries keyed by its id), and after it
finishes only as its :class:`JobRecord` (``keep_jobs``, or handed to ``on_job_done``) and, for
policies that read them, in ``ClusterState.finished``.  Per-round records
(``keep_rounds``) are optional; busy GPU-seconds, rounds and job-rounds are running sums, so
nothing is recomputed over the history.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Literal, NamedTuple

import numpy as np

from schedlab.defaults import ROUND_S
from schedlab.errors import InputError, SchedlabError
from schedlab.instance import Cluster, Instance
from schedlab.placement import (
    PoolPlacer,
    cluster_placers,
    ids_mask,
    lowest_bits,
    mask_ids,
)
from schedlab.policies.base import Policy
from schedlab.policies.shockwave_steps_state import from_profile, model_of
from schedlab.policies.state import (
    NEVER_RAN,
    ActiveArrays,
    Assignment,
    ClusterState,
    JobState,
)
from schedlab.simulator.result import JobRecord, RoundRecord, RunRecord, SimulationResult
from schedlab.simulator.shockwave_steps import after_failed_run, after_run, count_in_steps

log = logging.getLogger(__name__)

_job_of = attrgetter("job")
_arrival_of = attrgetter("arrival")

Mode = Literal["continuous", "static"]
#: How rounds advance jobs (docs/simulator.md): schedlab's own rules or Gavel's simulator's.
Mechanism = Literal["schedlab", "gavel"]

#: Which loop runs a simulation (:func:`simulate`'s ``engine``).
Engine = Literal["auto", "arrays", "reference"]
#: ``engine="auto"`` takes the array loop on clusters with at least this many GPUs.  Measured
#: by ``benchmarks/array_engine_threshold.py`` (2026-12-06; docs/simulator.md): with the
#: compiled steps the array loop is faster for fifo from 108 GPUs on (1.5x; 2.9x at 1,080),
#: for max-min fairness from ~250 (108 GPUs: 0.90x, 216: 0.98x, 324: 1.12x, 1,080: 1.41x).
ARRAY_ENGINE_MIN_GPUS = 300
#: A job whose remaining work fits in the round less this many seconds pays no resume
#: overhead (Shockwave's simulator: ``self._time_per_iteration - 5 < execution_time``).
RESUME_GRACE_S = 5.0
#: Remaining steps below this fraction of total_steps count as done (float dust).
FINISH_TOLERANCE = 1e-9
#: Default round length, s (Gavel's).
DEFAULT_ROUND_S = ROUND_S


class InvalidDecisionError(SchedlabError):
    """A policy returned an impossible plan (a bug in the policy).  Exit code 1."""

    exit_code = 1


class SimulationStalledError(SchedlabError):
    """Jobs wait, none can arrive any more, and the policy has placed nothing for a long time."""

    exit_code = 1


class Progress(NamedTuple):
    """Handed to the ``progress`` callback after every round."""

    round_index: int
    now: float  # s, end of the round just simulated
    active: int
    finished: int
    total: int
    job_rounds: int = 0  # jobs run, summed over the rounds so far


# ------------------------------------------------------------------------------- workload


def jobs_from_instance(instance: Instance, switch_overhead_s: float = 0.0) -> list[JobState]:
    """JobStates of an Instance's jobs (``total_steps`` and ``throughput`` required).

    ``user`` is the job's ``user``, else its ``entity``; ``switch_overhead_s`` is the job's
    value, else the given default.
    """
    out: list[JobState] = []
    for i, job in enumerate(instance.jobs):
        if job.batch_schedule is not None:
            out.append(_dynamic_job(instance, i, switch_overhead_s))
            continue
        if job.total_steps is None:
            raise InputError("the simulator needs total_steps on every job", file=instance.name,
                             field=f"jobs[{i}].total_steps")
        out.append(
            JobState(
                id=job.id,
                arrival=job.arrival,
                scale_factor=job.scale_factor,
                total_steps=job.total_steps,
                throughput=dict(job.throughput),
                weight=job.weight,
                job_type=job.job_type,
                user=job.user if job.user is not None else job.entity,
                switch_overhead_s=(job.switch_overhead_s if job.switch_overhead_s is not None
                                   else switch_overhead_s),
                colocated_throughput=(None if job.colocated_throughput is None
                                      else copy.deepcopy(job.colocated_throughput)),
                steps_done=job.steps_done,
            )
        )
    return out


def _dynamic_job(instance: Instance, i: int, switch_overhead_s: float) -> JobState:
    """The JobState of a dynamic-adaptation job (``batch_schedule`` set): progress in epochs.

    ``regimes`` give seconds per epoch on the job's gang of its fastest type (largest
    ``throughput``, the throughputs being at the initial batch size); on type k an epoch takes
    regimes[b] x max_k' T[j,k'] / T[j,k] -- the initial batch size's speed ratio between types
    applies to every batch size (docs/simulator.md)."""
    job = instance.jobs[i]
    where = f"jobs[{i}]"
    schedule = tuple(int(b) for b in job.batch_schedule or ())
    if job.epochs is None or len(schedule) != job.epochs:
        raise InputError(f"job {job.id}: batch_schedule has {len(schedule)} entries for "
                         f"{job.epochs} epochs", file=instance.name,
                         field=f"{where}.batch_schedule")
    try:
        regimes = {int(b): float(t) for b, t in (job.regimes or {}).items()}
    except ValueError:
        raise InputError(f"job {job.id}: regimes keys must be batch sizes (integers)",
                         file=instance.name, field=f"{where}.regimes") from None
    missing = sorted(set(schedule) - set(regimes))
    if missing:
        raise InputError(f"job {job.id}: batch size(s) {missing} of batch_schedule have no "
                         "entry in regimes", file=instance.name, field=f"{where}.regimes")
    fastest = max(job.throughput.values(), default=0.0)
    if fastest <= 0:
        raise InputError(f"job {job.id}: a dynamic job needs a positive throughput on some "
                         "type (its speed ratio between types)", file=instance.name,
                         field=f"{where}.throughput")
    if job.epochs_done >= job.epochs:
        raise InputError(f"job {job.id}: epochs_done {job.epochs_done} must be below epochs "
                         f"{job.epochs}", file=instance.name, field=f"{where}.epochs_done")
    js = JobState(
        id=job.id,
        arrival=job.arrival,
        scale_factor=job.scale_factor,
        total_steps=float(job.epochs),
        throughput={},
        weight=job.weight,
        job_type=job.job_type,
        user=job.user if job.user is not None else job.entity,
        switch_overhead_s=(job.switch_overhead_s if job.switch_overhead_s is not None
                           else switch_overhead_s),
        batch_schedule=schedule,
        regimes=regimes,
        type_speed={k: v / fastest for k, v in job.throughput.items()},
        steps_done=float(job.epochs_done),
    )
    js.throughput = js.current_throughput()
    model = model_of(job.job_type)
    if (job.adaptation in ("static", "accordion", "gns") and model is not None
            and job.total_steps is not None):
        js.shockwave_steps = from_profile(model, job.adaptation, job.scale_factor,
                                          job.total_steps, job.throughput, regimes, schedule)
    return js


def _fresh_copies(jobs: Sequence[JobState], mode: Mode) -> list[JobState]:
    """Copies the run may change (the caller's objects stay untouched)."""
    out = []
    for js in jobs:
        out.append(replace(
            js,
            arrival=0.0 if mode == "static" else js.arrival,
            throughput=dict(js.throughput),
            colocated_throughput=copy.deepcopy(js.colocated_throughput),
            time_on=dict(js.time_on),
            shockwave_steps=None if js.shockwave_steps is None else js.shockwave_steps.copy(),
        ))
        if js.batch_schedule is not None:  # throughput at the epoch the job is in
            out[-1].throughput = out[-1].current_throughput()
    return out


def _prepared(jobs: list[JobState], mode: Mode) -> list[JobState]:
    """The run's own JobStates (made from an Instance by :func:`jobs_from_instance`, held by
    no caller) set up in place as :func:`_fresh_copies` sets up its copies: arrival 0 in
    static mode, a dynamic job's throughput at the epoch it is in.  Copying 10^5 of them
    took ~1.5 s."""
    for js in jobs:
        if mode == "static":
            js.arrival = 0.0
        if js.batch_schedule is not None:
            js.throughput = js.current_throughput()
    return jobs


def _validate_jobs(jobs: Sequence[JobState], cluster: Cluster, round_s: float) -> None:
    """One clear InputError for a workload the simulator cannot run."""
    counts = {k: p.count for k, p in cluster.accelerators.items()}
    seen: set[str] = set()
    for i, js in enumerate(jobs):
        where = f"jobs[{i}]"
        if js.id in seen:
            raise InputError(f"duplicate job id {js.id!r}", field=f"{where}.id")
        seen.add(js.id)
        if not (math.isfinite(js.arrival) and js.arrival >= 0):
            raise InputError(f"job {js.id}: arrival must be a finite number >= 0 s",
                             field=f"{where}.arrival")
        if not (math.isfinite(js.total_steps) and js.total_steps > 0):
            raise InputError(f"job {js.id}: total_steps must be a finite number > 0",
                             field=f"{where}.total_steps")
        if not 0 <= js.steps_done < js.total_steps:
            raise InputError(f"job {js.id}: steps_done must be in [0, total_steps)",
                             field=f"{where}.steps_done")
        if js.scale_factor < 1:
            raise InputError(f"job {js.id}: scale_factor must be >= 1",
                             field=f"{where}.scale_factor")
        if js.batch_schedule is not None:
            _validate_dynamic(js, where)
        if not (math.isfinite(js.switch_overhead_s) and js.switch_overhead_s >= 0):
            raise InputError(f"job {js.id}: switch_overhead_s must be >= 0",
                             field=f"{where}.switch_overhead_s")
        for acc, value in js.throughput.items():
            if acc not in counts:
                raise InputError(f"job {js.id}: unknown accelerator {acc!r} "
                                 f"(cluster has {sorted(counts)})",
                                 field=f"{where}.throughput.{acc}")
            if not (math.isfinite(value) and value >= 0):
                raise InputError(f"job {js.id}: throughput on {acc} must be >= 0",
                                 field=f"{where}.throughput.{acc}")
        if not any(v > 0 and js.scale_factor <= counts[k] for k, v in js.throughput.items()):
            raise InputError(
                f"job {js.id} cannot run anywhere: scale factor {js.scale_factor} with "
                f"positive throughput on {sorted(k for k, v in js.throughput.items() if v > 0)}"
                f" but pools {counts}", field=where)
        if js.switch_overhead_s >= round_s:
            log.warning("job %s: switch overhead %.6g s >= round length %.6g s; a migrating "
                        "round makes no progress", js.id, js.switch_overhead_s, round_s)


def _validate_dynamic(js: JobState, where: str) -> None:
    """A dynamic job's schedule, regimes and speeds are consistent (one clear error)."""
    schedule = js.batch_schedule or ()
    if len(schedule) != js.total_steps:
        raise InputError(f"job {js.id}: a dynamic job's total_steps counts epochs: "
                         f"{js.total_steps} for {len(schedule)} scheduled epochs",
                         field=f"{where}.batch_schedule")
    regimes = js.regimes or {}
    missing = sorted(set(schedule) - set(regimes))
    if missing:
        raise InputError(f"job {js.id}: batch size(s) {missing} have no regime",
                         field=f"{where}.regimes")
    if not all(math.isfinite(t) and t > 0 for t in regimes.values()):
        raise InputError(f"job {js.id}: seconds per epoch must be finite and > 0",
                         field=f"{where}.regimes")
    if not all(math.isfinite(v) and v >= 0 for v in (js.type_speed or {}).values()):
        raise InputError(f"job {js.id}: type speeds must be finite and >= 0",
                         field=f"{where}.type_speed")


# ------------------------------------------------------------------------------- checking


#: One gang of a round: (job, its throughput there in steps/s, co-located partner or None).
Unit = tuple[JobState, float, JobState | None]


class _TypePlan(NamedTuple):
    """The gangs a plan puts on one accelerator type, with what placement needs."""

    units: list[Unit]
    gangs: list[int]  # GPUs of each gang
    previous: list[int]  # GPU mask the gang's holder had there the last time it ran (0: none)


def _check_decision(
    decision: Sequence[Assignment],
    by_id: dict[str, JobState],
    counts: dict[str, int],
    last_mask: dict[str, int],
    policy_name: str,
    round_index: int,
) -> dict[str, _TypePlan]:
    """The plan's gangs per accelerator type, in plan order (pairs after single jobs).

    Raises :class:`InvalidDecisionError` when the plan names an unknown or finished job, a job
    twice, an unknown accelerator, a type where the job has no throughput, a gang larger than
    its pool, or more GPUs of a type than exist (a co-located pair counts once, with
    max(s_a, s_b) GPUs).  A pair is one Assignment naming ``partner``, or two mirrored ones.
    """

    def bad(reason: str) -> InvalidDecisionError:
        return InvalidDecisionError(f"policy {policy_name!r}, round {round_index}: {reason}")

    plans = {acc: _TypePlan([], [], []) for acc in counts}
    used = dict.fromkeys(counts, 0)
    named = {a.job for a in decision}
    if len(named) != len(decision):
        seen: set[str] = set()
        for a in decision:
            if a.job in seen:
                raise bad(f"job {a.job!r} is assigned twice")
            seen.add(a.job)
    pairs: list[Assignment] = []
    for a in decision:
        job_id = a.job
        acc = a.accelerator
        try:
            js = by_id[job_id]
            cap = counts[acc]
            thr = js.throughput[acc] if a.partner is None else 1.0
        except KeyError:
            thr = 0.0
            if job_id not in by_id:
                raise bad(f"job {job_id!r} is unknown or not active (not arrived or finished)"
                          ) from None
            if acc not in counts:
                raise bad(f"job {job_id!r} on unknown accelerator {acc!r} (cluster has "
                          f"{sorted(counts)})") from None
        scale = js.scale_factor
        if scale > cap:
            raise bad(f"job {job_id!r} needs {scale} GPUs but the {acc} pool has {cap}")
        if a.partner is not None:
            pairs.append(a)
            continue
        if thr <= 0.0:
            raise bad(f"job {job_id!r} has no throughput on {acc}")
        used[acc] += scale
        plan = plans[acc]
        plan.units.append((js, thr, None))
        plan.gangs.append(scale)
        plan.previous.append(last_mask[job_id] if js.last_accelerator == acc else 0)
    if pairs:
        _check_pairs(decision, pairs, by_id, counts, used, last_mask, plans, bad)
    for acc, n in used.items():
        if n > counts[acc]:
            raise bad(f"{n} GPUs of {acc} assigned but the cluster has {counts[acc]}")
    return plans


def _check_pairs(
    decision: Sequence[Assignment],
    pairs: list[Assignment],
    by_id: dict[str, JobState],
    counts: dict[str, int],
    used: dict[str, int],
    last_mask: dict[str, int],
    plans: dict[str, _TypePlan],
    bad: Callable[[str], InvalidDecisionError],
) -> None:
    """Check the co-located pairs of a plan and add them to ``plans`` and ``used``."""
    by_job = {a.job: a for a in decision}
    done: set[str] = set()
    for a in pairs:
        if a.job in done:
            continue
        partner_id = a.partner
        assert partner_id is not None
        other = by_job.get(partner_id)
        if partner_id == a.job:
            raise bad(f"job {a.job!r} is co-located with itself")
        if other is not None and (other.partner != a.job or other.accelerator != a.accelerator):
            raise bad(f"job {partner_id!r} is assigned twice (as {a.job!r}'s partner and on "
                      "its own)")
        if partner_id in done:
            raise bad(f"job {partner_id!r} is assigned twice (in two pairs)")
        first = by_id[a.job]
        second = by_id.get(partner_id)
        if second is None:
            raise bad(f"partner {partner_id!r} of job {a.job!r} is unknown or not active")
        acc = a.accelerator
        thr: list[float] = []
        for js, mate in ((first, second), (second, first)):
            thr.append((js.colocated_throughput or {}).get(mate.id, {}).get(acc, 0.0))
            if thr[-1] <= 0.0:
                raise bad(f"job {js.id!r} has no co-located throughput with {mate.id!r} on "
                          f"{acc}")
        gang = max(first.scale_factor, second.scale_factor)
        if gang > counts[acc]:
            raise bad(f"pair {a.job!r}+{partner_id!r} needs {gang} GPUs but the {acc} pool "
                      f"has {counts[acc]}")
        used[acc] += gang
        done.update((a.job, partner_id))
        holder = second if second.scale_factor > first.scale_factor else first
        plan = plans[acc]
        plan.units.append((first, thr[0], second))
        plan.gangs.append(gang)
        plan.previous.append(last_mask[holder.id] if holder.last_accelerator == acc else 0)
    solo = {js.id for plan in plans.values() for js, _, mate in plan.units if mate is None}
    both = done & solo
    if both:
        raise bad(f"job {sorted(both)[0]!r} is assigned twice (solo and in a pair)")


def _solo_units(js: JobState, counts: dict[str, int]) -> dict[str, Unit]:
    """The unit (job, throughput, None) of ``js`` on every type a plan may put it on alone:
    positive throughput and a pool at least as large as its gang (built once, at admission)."""
    scale = js.scale_factor
    return {acc: (js, thr, None) for acc, thr in js.throughput.items()
            if thr > 0.0 and scale <= counts[acc]}


#: One accelerator type of a round as placed: (type, units, GPU mask of each unit, the mask
#: each unit held there the last time it ran there, 0 if it did not).
TypeLayout = tuple[str, list[Unit], list[int], list[int]]


def _solo_layout(
    decision: Sequence[Assignment],
    fits: dict[str, dict[str, Unit]],
    counts: dict[str, int],
    last_mask: dict[str, int],
    placers: dict[str, PoolPlacer],
) -> list[TypeLayout] | None:
    """A plan of single jobs checked and placed, per type in cluster order (types without
    gangs left out); None when the plan has a co-located pair or fails a check (the caller
    then runs :func:`_checked_layout`, which handles pairs and names the first error).

    Same checks and placement as :func:`_check_decision` + :meth:`PoolPlacer.place`, in
    fewer Python steps: one pass groups the units per type, the gangs and previous masks
    are list comprehensions per type."""
    groups: dict[str, list[Unit]] = {acc: [] for acc in counts}
    for a in decision:
        options = fits.get(a.job)
        if options is None or a.partner is not None:
            return None
        acc = a.accelerator
        unit = options.get(acc)
        if unit is None:
            return None
        groups[acc].append(unit)
    if len(set(map(_job_of, decision))) != len(decision):
        return None
    layout: list[TypeLayout] = []
    for acc, units in groups.items():
        if not units:
            continue
        gangs = [unit[0].scale_factor for unit in units]
        if sum(gangs) > counts[acc]:
            return None
        previous = [last_mask[js.id] if js.last_accelerator == acc else 0
                    for js, _, _ in units]
        layout.append((acc, units, placers[acc].place(gangs, previous), previous))
    return layout


def _checked_layout(
    decision: Sequence[Assignment],
    by_id: dict[str, JobState],
    counts: dict[str, int],
    last_mask: dict[str, int],
    placers: dict[str, PoolPlacer],
    policy_name: str,
    round_index: int,
) -> list[TypeLayout]:
    """Any plan (pairs too) checked by :func:`_check_decision` and placed, per type in cluster
    order; a co-located pair is split into its two jobs (:func:`_pair_members`)."""
    plans = _check_decision(decision, by_id, counts, last_mask, policy_name, round_index)
    layout: list[TypeLayout] = []
    for acc, plan in plans.items():
        if not plan.units:
            continue
        # placement: GPU ids per type, sticky first
        masks = placers[acc].place(plan.gangs, plan.previous)
        units: list[Unit] = plan.units
        before = plan.previous
        if any(mate is not None for _, _, mate in units):
            units, masks = _pair_members(units, masks, plan.gangs, acc)
            before = [last_mask.get(js.id, 0) if js.last_accelerator == acc else 0
                      for js, _, _ in units]
        layout.append((acc, units, masks, before))
    return layout


def _advance(
    units: Sequence[Unit],
    masks: list[int],
    previous: Sequence[int],
    acc: str,
    now: float,
    length: float,
    round_index: int,
    last_mask: dict[str, int],
    overhead_paid: dict[str, float],
    runs: list[RunRecord] | None,
    still: list[JobState],
    done_now: list[JobState],
    last_end: float,
    changed: list[JobState],
    busy: dict[str, float],
    resume_s: float = 0.0,
) -> float:
    """Progress of the jobs placed on ``acc`` through the round; returns the latest finish
    so far (a dynamic job whose throughput changed is added to ``changed``).
    ``previous[i]`` is unit i's mask the last time it ran on ``acc`` (0 if it did not: masks
    are never 0), so a changed placement is ``previous != mask``.  ``busy[acc]`` gains the
    round's busy GPU-seconds on ``acc`` (:func:`_add_busy`); ``runs`` (None: not kept) gains
    one :class:`RunRecord` per job."""
    ftol = FINISH_TOLERANCE
    new_run = tuple.__new__
    add_run = runs.append if runs is not None else None
    add_still = still.append
    round_end = now + length
    gpu_s = 0.0  # busy GPU-seconds of the single jobs (a pair's are summed per GPU after)
    shared: list[tuple[int, float]] = []  # (mask, release) of co-located jobs
    for (js, thr, mate), job_mask, prev in zip(units, masks, previous, strict=True):
        # prev is the job's last mask when it last ran on acc, else 0 (masks are never 0)
        if prev == job_mask:
            overhead = 0.0
            steps = thr * length
        else:  # new GPUs: a migration, unless it is the job's first start
            overhead = _move(js, acc, job_mask, length, last_mask, overhead_paid)
            steps = thr * (length - overhead)
        if resume_s and js.last_round_run != round_index - 1 and round_index > 0:
            overhead = _charge_resume(js, thr, acc, length, resume_s, overhead, overhead_paid)
            steps = thr * (length - overhead)
        if js.batch_schedule is not None:  # dynamic adaptation: walk the epochs
            held, finished = _advance_epochs(js, acc, overhead, length, changed)
            if not finished:
                held = length
                end = round_end
                add_still(js)
            else:
                end = js.finish_time = now + held
                done_now.append(js)
                if end > last_end:
                    last_end = end
            _credit(js, acc, held, now, round_index)
            if mate is None:
                gpu_s += js.scale_factor * held
            else:
                shared.append((job_mask, end))
            if add_run is not None:
                add_run(new_run(RunRecord, (js.id, acc, job_mask, None if mate is None
                                            else mate.id, overhead, end)))
            continue
        total_steps = js.total_steps
        left = total_steps - js.steps_done
        if left - steps <= ftol * total_steps:  # finishes in the round
            held = overhead + left / thr
            if held > length:
                held = length
            end = now + held
            js.steps_done = total_steps
            js.finish_time = end
            done_now.append(js)
            if end > last_end:
                last_end = end
        else:
            held = length
            end = round_end
            js.steps_done += steps
            add_still(js)
        # credit (as _credit, inlined: this loop runs once per job and round)
        js.time_on[acc] += held
        js.executed_s += held
        js.attained_service_s += held * js.scale_factor
        js.rounds_run += 1
        if js.start_time is None:
            js.start_time = now
        js.last_round_run = round_index
        if mate is None:
            gpu_s += js.scale_factor * held
        else:
            shared.append((job_mask, end))
        if add_run is not None:
            add_run(new_run(RunRecord, (js.id, acc, job_mask, None if mate is None
                                        else mate.id, overhead, end)))
    _add_busy(busy, acc, gpu_s, shared, now)
    return last_end


def _add_busy(busy: dict[str, float], acc: str, solo_gpu_s: float,
              shared: list[tuple[int, float]], now: float) -> None:
    """Add one round's busy GPU-seconds on ``acc`` to ``busy[acc]``: ``solo_gpu_s`` (single
    jobs: s_j x seconds held, their GPUs being disjoint) plus, for the GPUs of co-located
    pairs (``shared``: each member's GPU mask and release time), sum over those GPUs of
    (last release on the GPU - round start ``now``), so a shared GPU counts once -- the same
    sum as :meth:`~schedlab.simulator.result.RoundRecord.busy_gpu_seconds`."""
    if shared:
        last: dict[int, float] = {}
        for mask, end in shared:
            for gpu in mask_ids(mask):
                last[gpu] = max(last.get(gpu, now), end)
        solo_gpu_s += sum(end - now for end in last.values())
    busy[acc] += solo_gpu_s


def _advance_epochs(js: JobState, acc: str, overhead: float, length: float,
                    changed: list[JobState]) -> tuple[float, bool]:
    """Run dynamic job ``js`` on ``acc`` for the round: after the overhead, epoch e takes
    :meth:`~schedlab.policies.state.JobState.epoch_seconds` (its batch size's seconds), so
    progress is piecewise linear across epoch boundaries.  Returns (seconds from the round
    start to the job's last epoch's end, whether it finished); unfinished, the first is
    ``length``.  A job that enters an epoch of another batch size gets its new
    ``throughput`` and joins ``changed``.
    """
    schedule = js.batch_schedule
    assert schedule is not None
    epochs = len(schedule)
    done = js.steps_done
    before = schedule[min(int(done + 1e-9), epochs - 1)]
    avail = length - overhead
    used = 0.0
    while used < avail:
        e = int(done + 1e-9)
        if e >= epochs:
            break
        per_epoch = js.epoch_seconds(e, acc)
        need = (e + 1 - done) * per_epoch
        if used + need <= avail * (1.0 + FINISH_TOLERANCE):
            used += need
            done = float(e + 1)
        else:
            done += (avail - used) / per_epoch
            used = avail
    js.steps_done = min(done, float(epochs))
    if js.steps_done >= epochs - FINISH_TOLERANCE * epochs:
        js.steps_done = float(epochs)
        return overhead + min(used, avail), True
    if schedule[int(js.steps_done + 1e-9)] != before:
        js.throughput = js.current_throughput()
        js.throughput_version += 1
        changed.append(js)
    return length, False


def _resume_overhead(js: JobState, thr: float, acc: str, length: float,
                     resume_s: float) -> float:
    """The resume overhead of ``js``, which did not run in the previous round: ``resume_s``
    when its remaining work takes more than ``length - RESUME_GRACE_S`` seconds on ``acc``
    (Shockwave's rule, module docstring), else 0."""
    if js.batch_schedule is not None:
        epochs = len(js.batch_schedule)
        done = js.steps_done
        e = int(done + 1e-9)
        work = 0.0
        while e < epochs and work <= length:
            work += (e + 1 - max(done, float(e))) * js.epoch_seconds(e, acc)
            e += 1
    else:
        work = (js.total_steps - js.steps_done) / thr if thr > 0 else math.inf
    return resume_s if work > length - RESUME_GRACE_S else 0.0


def _charge_resume(js: JobState, thr: float, acc: str, length: float, resume_s: float,
                   overhead: float, overhead_paid: dict[str, float]) -> float:
    """The round's overhead once ``js``, which did not run in the previous round, has paid
    its resume overhead (:func:`_resume_overhead`; the sum capped at the round length),
    which is also added to what the job has paid."""
    extra = _resume_overhead(js, thr, acc, length, resume_s)
    if not extra:
        return overhead
    extra = min(extra, length - overhead)
    overhead_paid[js.id] = overhead_paid.get(js.id, 0.0) + extra
    js.overhead_s += extra
    return overhead + extra


def _move(js: JobState, acc: str, job_mask: int, length: float, last_mask: dict[str, int],
          overhead_paid: dict[str, float]) -> float:
    """Record that ``js`` runs on new GPUs ``job_mask`` of ``acc``; returns the switch
    overhead it pays this round (0 at its first start, else a migration)."""
    overhead = 0.0
    job_id = js.id
    if js.last_accelerator is not None:
        overhead = min(js.switch_overhead_s, length)
        js.migrations += 1
        overhead_paid[job_id] = overhead_paid.get(job_id, 0.0) + overhead
        js.overhead_s += overhead
    js.last_accelerator = acc
    js.last_gpu_ids = mask_ids(job_mask)
    last_mask[job_id] = job_mask
    return overhead


def _credit(js: JobState, acc: str, held: float, now: float, round_index: int) -> None:
    """Account ``held`` seconds on ``acc`` to ``js`` in the round that started at ``now``."""
    js.time_on[acc] += held
    js.executed_s += held
    js.attained_service_s += held * js.scale_factor
    js.rounds_run += 1
    if js.start_time is None:
        js.start_time = now
    js.last_round_run = round_index


def _advance_gavel(
    units: Sequence[Unit],
    masks: list[int],
    previous: Sequence[int],
    acc: str,
    now: float,
    length: float,
    round_index: int,
    last_mask: dict[str, int],
    overhead_paid: dict[str, float],
    runs: list[RunRecord] | None,
    still: list[JobState],
    done_now: list[JobState],
    last_end: float,
    changed: list[JobState],
    busy: dict[str, float],
    resume_s: float = 0.0,
) -> float:
    """:func:`_advance` with Gavel's step accounting (``_get_num_steps``,
    ``_get_job_steps_and_finish_times``): a job placed for a round runs ``min(int(T (L -
    o)), R)`` whole steps and holds its GPUs until it has run them, ``o + steps / T`` s
    after the round start, whether or not it finished; returns the latest release so far
    (the round ends there)."""
    gpu_s = 0.0
    shared: list[tuple[int, float]] = []
    for (js, thr, mate), job_mask, prev in zip(units, masks, previous, strict=True):
        overhead = 0.0
        if prev != job_mask:
            overhead = _move(js, acc, job_mask, length, last_mask, overhead_paid)
        resumed = bool(resume_s) and js.last_round_run != round_index - 1 and round_index > 0
        rule = js.shockwave_steps
        if js.batch_schedule is not None:  # dynamic: epochs as in _advance (no whole steps)
            if resumed:
                overhead = _charge_resume(js, thr, acc, length, resume_s, overhead,
                                          overhead_paid)
            held, finished = _advance_epochs(js, acc, overhead, length, changed)
        else:
            if rule is not None:  # its steps/s change with its batch size
                thr = js.throughput[acc]
            left = js.total_steps - js.steps_done
            if rule is not None and left <= 0:  # a switch left no steps: a failed run
                held = overhead
                outcome = after_failed_run(js)
                finished = outcome == "failed"
                if finished:  # removed, finished at the run's end: left / T <= 0 s
                    held = max(overhead + left / thr, 0.0)
                    js.steps_done = js.total_steps
                elif outcome == "switched":
                    changed.append(js)
            else:
                # whole steps (at least one, so a job slower than a step a round still moves)
                steps = min(max(float(math.floor(thr * (length - overhead))), 1.0), left)
                held = overhead + steps / thr
                charged = 0.0
                if resumed and steps / thr > length - RESUME_GRACE_S:
                    # Shockwave (scheduler.py:1936-1968): the job keeps its GPUs for the
                    # steps it was given, s / T seconds, and is credited
                    # int(s (s/T - o_r) / (s/T)) of them
                    charged = min(resume_s, steps / thr)
                    run_s = steps / thr
                    steps = float(int(steps * ((run_s - charged) / run_s)))
                    overhead_paid[js.id] = overhead_paid.get(js.id, 0.0) + charged
                    js.overhead_s += charged
                js.steps_done += steps
                finished = steps >= left
                if rule is not None:
                    outcome = after_run(js, held - overhead - charged, finished)
                    finished = finished or outcome == "deadline"
                    if outcome == "switched":
                        changed.append(js)
                    elif outcome is not None and finished:
                        js.steps_done = js.total_steps
        end = now + held
        if finished:
            js.steps_done = js.total_steps
            js.finish_time = end
            done_now.append(js)
        else:
            still.append(js)
        if end > last_end:
            last_end = end
        _credit(js, acc, held, now, round_index)
        if mate is None:
            gpu_s += js.scale_factor * held
        else:
            shared.append((job_mask, end))
        if runs is not None:
            runs.append(RunRecord(js.id, acc, job_mask, None if mate is None else mate.id,
                                  overhead, end))
    _add_busy(busy, acc, gpu_s, shared, now)
    return last_end


# ------------------------------------------------------------------------------- the loop


def simulate(
    jobs: Sequence[JobState] | Instance,
    cluster: Cluster | None = None,
    policy: Policy | None = None,
    *,
    round_s: float | None = None,
    mode: Mode = "continuous",
    seed: int = 0,
    max_rounds: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    switch_overhead_s: float = 0.0,
    end_round_early: bool = True,
    stall_rounds: int = 1000,
    mechanism: Mechanism | None = None,
    resume_overhead_s: float = 0.0,
    keep_rounds: bool = True,
    keep_jobs: bool = True,
    on_job_done: Callable[[JobRecord], None] | None = None,
    engine: Engine = "auto",
    shockwave_steps: bool | None = None,
) -> SimulationResult:
    """Simulate ``policy`` on ``jobs`` (JobStates, or an Instance) over ``cluster``.

    Args:
        jobs: the workload; JobStates are copied, never changed.  An Instance supplies its
            cluster (when ``cluster`` is None) and its ``params.round_s`` (when ``round_s`` is
            None).
        cluster: accelerator pools (GPUs per type, optional nodes for consolidation).
        policy: decides every round (:class:`~schedlab.policies.base.Policy`).
        round_s: round length L, s (default: the instance's, else 360).
        mode: ``continuous`` (jobs arrive at their ``arrival``) or ``static`` (all at 0 s).
        seed: handed to the policy in ``ClusterState.seed``.
        max_rounds: stop after this many rounds (unfinished jobs keep ``finish`` None).
        progress: called with a :class:`Progress` after every round.
        switch_overhead_s: overhead of Instance jobs that set none, s.
        resume_overhead_s: seconds a job loses in a round it runs after not running in the
            previous one (Shockwave's simulator charges 20 s; module docstring); 0 (default):
            none.  Runs on the per-job loop.
        end_round_early: end a round at the last finish when every job of the round finished
            before its end (Gavel's behaviour); False keeps every round exactly L long.
        stall_rounds: raise :class:`SimulationStalledError` after this many consecutive rounds
            in which jobs wait, none can arrive any more and the policy places nothing.
        mechanism: ``"schedlab"`` (the rules above) or ``"gavel"`` (Gavel's simulator's step
            accounting: ``total_steps`` truncated to whole steps, ``min(int(T L), R)`` whole
            steps a round, every round ends when its last job has run its steps, a round
            that places nothing jumps to the next arrival; ``end_round_early`` is then
            ignored).  None (default): the policy's ``mechanism`` attribute when it has one,
            else ``"schedlab"``.  docs/simulator.md lists the differences.
        keep_rounds: keep a :class:`RoundRecord` (every job's run) per round in
            ``result.rounds``.  False keeps none -- memory then does not grow with the
            job-rounds (10^7 at 10^5 jobs); busy GPU-seconds, rounds and job-rounds are
            counted while the run goes either way (``result.busy_gpu_s``, ``num_rounds``,
            ``num_job_rounds``).
        keep_jobs: keep every job's record in ``result.jobs``.  False: ``result.jobs`` holds
            only the jobs unfinished at the end; a finished job's record goes to
            ``on_job_done`` only, and the engine forgets the job (its JobState stays in
            ``ClusterState.finished`` only for a policy whose ``uses_finished_jobs`` is true).
        on_job_done: called with each job's :class:`JobRecord` when it finishes (stream it
            to a file); on an interrupt the records of finished jobs have gone out already.
        engine: ``"arrays"`` keeps the active jobs' progress in numpy columns
            (:mod:`schedlab.simulator.array_run`; runs under schedlab's mechanism without
            dynamic jobs or co-location throughputs, others take the loop), ``"reference"``
            the per-job loop, ``"auto"`` (default) the arrays on clusters of at least
            :data:`ARRAY_ENGINE_MIN_GPUS` GPUs, where rounds run enough jobs to repay the
            arrays' fixed cost per round.  The results are the same (the tests compare the
            two).
        shockwave_steps: run the jobs of a Shockwave trace (dynamic jobs with
            ``shockwave_steps`` set: an ``adaptation``, a known model, ``total_steps``) as
            Shockwave's simulator does -- in whole steps at the current batch size, which
            changes by its own rule, not by ``batch_schedule``
            (:mod:`schedlab.simulator.shockwave_steps`).  None (default): on under
            ``mechanism="gavel"`` unless the policy reads batch schedules
            (``reads_batch_schedule``, Shockwave's own policy); requires ``"gavel"``.

    Returns:
        A :class:`~schedlab.simulator.result.SimulationResult`.

    Raises:
        InputError: a workload the simulator cannot run (a job that fits no pool, ...).
        InvalidDecisionError: the policy returned an impossible plan (message names it).
    """
    if policy is None:
        raise TypeError("simulate() needs a policy")
    if mode not in ("continuous", "static"):
        raise InputError(f"mode must be 'continuous' or 'static', got {mode!r}", field="mode")
    if mechanism is None:
        mechanism = getattr(policy, "mechanism", "schedlab")
    if engine not in ("auto", "arrays", "reference"):
        raise InputError(f"engine must be 'auto', 'arrays' or 'reference', got {engine!r}",
                         field="engine")
    if mechanism not in ("schedlab", "gavel"):
        raise InputError(f"mechanism must be 'schedlab' or 'gavel', got {mechanism!r}",
                         field="mechanism")
    own = isinstance(jobs, Instance)  # JobStates made here: nobody else holds them
    if isinstance(jobs, Instance):
        cluster = cluster if cluster is not None else jobs.cluster
        round_s = round_s if round_s is not None else jobs.params.round_s
        workload = jobs_from_instance(jobs, switch_overhead_s)
    else:
        workload = list(jobs)
    if cluster is None:
        raise InputError("simulate() needs a cluster (or an Instance that carries one)")
    length = DEFAULT_ROUND_S if round_s is None else float(round_s)
    if not (math.isfinite(length) and length > 0):
        raise InputError(f"round_s must be a positive number of seconds, got {round_s!r}",
                         field="round_s")
    if max_rounds is not None and max_rounds < 0:
        raise InputError(f"max_rounds must be >= 0, got {max_rounds}", field="max_rounds")
    if not (isinstance(resume_overhead_s, int | float) and math.isfinite(resume_overhead_s)
            and 0 <= resume_overhead_s):
        raise InputError(f"must be a number of seconds >= 0, got {resume_overhead_s!r}",
                         field="resume_overhead_s")
    _validate_jobs(workload, cluster, length)
    all_jobs = _prepared(workload, mode) if own else _fresh_copies(workload, mode)
    del workload  # the run's copies are all it needs (from an Instance: ~1 kB a job)
    if shockwave_steps is None:
        shockwave_steps = (mechanism == "gavel"
                           and not getattr(policy, "reads_batch_schedule", False))
    elif shockwave_steps and mechanism != "gavel":
        raise InputError("shockwave_steps runs under mechanism='gavel' (Shockwave's simulator "
                         "is Gavel's)", field="shockwave_steps")
    if shockwave_steps:
        for js in all_jobs:
            if js.shockwave_steps is not None and js.batch_schedule is not None:
                count_in_steps(js)
    if mechanism == "gavel":  # Gavel reads whole steps (int(total_steps))
        for js in all_jobs:
            js.total_steps = max(float(math.floor(js.total_steps)), 1.0)
            js.steps_done = min(float(math.floor(js.steps_done)), js.total_steps - 1.0)
    pending = deque(sorted(all_jobs, key=_arrival_of))  # stable: ties keep input order
    del all_jobs  # the run holds each job in ``pending``, then while active, then not at all
    policy.reset()  # a run starts afresh: counters and the policy's memory of earlier runs
    name = policy.name or type(policy).__name__
    log.info("simulating %s: %d jobs, %s GPUs, round %.6g s, %s", name, len(pending),
             {k: p.count for k, p in cluster.accelerators.items()}, length, mode)
    sinks = _Sinks(keep_rounds, keep_jobs or bool(getattr(policy, "uses_finished_jobs", True)),
                   keep_jobs, on_job_done)
    from schedlab.simulator.array_run import can_run_arrays, run_arrays

    try:
        with _fewer_gc_passes():
            use_arrays = engine == "arrays" or (
                engine == "auto"
                and sum(p.count for p in cluster.accelerators.values()) >= ARRAY_ENGINE_MIN_GPUS)
            if use_arrays and not resume_overhead_s and can_run_arrays(pending, mechanism):
                return run_arrays(pending, cluster, policy, name, length, mode, seed,
                                  max_rounds, progress, end_round_early, stall_rounds, sinks)
            return _run(pending, cluster, policy, name, length, mode, seed, max_rounds,
                        progress, end_round_early, stall_rounds, mechanism, sinks,
                        float(resume_overhead_s))
    except KeyboardInterrupt:
        log.warning("simulation of %s interrupted; %s", name,
                    "no result" if on_job_done is None
                    else "the finished jobs' records were handed to on_job_done")
        raise


#: Allocations between young-generation collections while a simulation runs (CPython's
#: default is 700).  A run allocates millions of short-lived, mostly acyclic objects (run
#: records, plans, numpy temporaries); with the default, the collector's passes over the
#: growing history cost ~10-15% of a 1000-job run.  Collection still happens, only rarer.
_GC_YOUNG_THRESHOLD = 100_000
#: Young collections between middle-generation collections (default 10): a middle collection
#: walks every record the run has kept so far (~13 ms late in a 1000-job run).
_GC_MIDDLE_THRESHOLD = 50


@contextlib.contextmanager
def _fewer_gc_passes() -> Iterator[None]:
    """Raise the young-generation threshold of the cyclic garbage collector for the run,
    restoring the caller's thresholds afterwards (also on errors and interrupts)."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], _GC_YOUNG_THRESHOLD), max(old[1], _GC_MIDDLE_THRESHOLD),
                     *old[2:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


class _Sinks(NamedTuple):
    """What a run keeps of its history (see :func:`simulate`)."""

    rounds: bool  # RoundRecords
    finished_states: bool  # finished JobStates, for ClusterState.finished
    job_records: bool  # every JobRecord in result.jobs
    on_job_done: Callable[[JobRecord], None] | None


class _Columns:
    """The :class:`~schedlab.policies.state.ActiveArrays` of a run, kept up to date by the
    loop: one entry per slot (admission index), written at admission and after every round
    for the jobs that ran (their ``last_round_run`` and ``last_accelerator``)."""

    def __init__(self, total: int, types: Sequence[str]) -> None:
        self.type_index = {k: i for i, k in enumerate(types)}
        self.view = ActiveArrays(
            rows=np.zeros(0, dtype=np.int64),
            arrival=np.zeros(total, dtype=np.float64),
            scale=np.zeros(total, dtype=np.int64),
            last_round=np.full(total, NEVER_RAN, dtype=np.int64),
            last_type=np.full(total, -1, dtype=np.int64),
        )

    def admit(self, slot: int, js: JobState) -> None:
        """Columns of a job admitted into ``slot``."""
        view = self.view
        view.arrival[slot] = js.arrival
        view.scale[slot] = js.scale_factor
        if js.last_round_run is not None:
            view.last_round[slot] = js.last_round_run
        if js.last_accelerator is not None:
            view.last_type[slot] = self.type_index.get(js.last_accelerator, -1)

    def ran(self, slots: list[int], acc: str, round_index: int) -> None:
        """The jobs in ``slots`` ran on ``acc`` in round ``round_index``."""
        view = self.view
        view.last_round[slots] = round_index
        view.last_type[slots] = self.type_index[acc]


def _run(
    pending: deque[JobState],
    cluster: Cluster,
    policy: Policy,
    name: str,
    length: float,
    mode: Mode,
    seed: int,
    max_rounds: int | None,
    progress: Callable[[Progress], None] | None,
    end_round_early: bool,
    stall_rounds: int,
    mechanism: Mechanism = "schedlab",
    sinks: _Sinks | None = None,
    resume_s: float = 0.0,
) -> SimulationResult:
    """The loop of :func:`simulate` over ``pending`` (JobStates by arrival; consumed)."""
    wall0 = time.perf_counter()
    if sinks is None:
        sinks = _Sinks(True, True, True, None)
    counters0 = _counters(policy)
    counts = {k: p.count for k, p in cluster.accelerators.items()}
    placers = cluster_placers(cluster)
    total = len(pending)
    admitted = 0
    finished_count = 0
    job_rounds = 0
    busy = dict.fromkeys(counts, 0.0)
    records: list[JobRecord | None] = [None] * total if sinks.job_records else []
    slot: dict[str, int] = {}  # active job -> its place in arrival order
    active: list[JobState] = []
    by_id: dict[str, JobState] = {}
    finished: list[JobState] = []
    last_mask: dict[str, int] = {}
    fits: dict[str, dict[str, Unit]] = {}  # per active job: its valid solo unit per type
    overhead_paid: dict[str, float] = {}
    rounds: list[RoundRecord] = []
    previous: list[JobState] = []  # jobs that ran in the round just simulated
    # the last solo plan as placed, the decision it came from and the job-set version then: a
    # round whose decision repeats it reuses the placement
    repeat_layout: list[TypeLayout] | None = None
    repeat_of: list[Assignment] = []
    repeat_version = -1
    now = pending[0].arrival if pending else 0.0
    round_index = 0
    version = 0
    idle = 0
    decide_s = 0.0
    stopped = "all jobs finished"
    gavel = mechanism == "gavel"
    advance = _advance_gavel if gavel else _advance
    zero_time = dict.fromkeys(counts, 0.0)
    keep_runs = sinks.rounds
    # array columns of the active jobs, for a policy that reads them (ClusterState.arrays)
    columns = _Columns(total, list(counts)) if getattr(policy, "uses_arrays", False) else None
    active_slots: list[int] = []  # with columns: slot of each active job

    while True:
        arrived = False
        while pending and pending[0].arrival <= now:
            js = pending.popleft()
            active.append(js)
            by_id[js.id] = js
            fits[js.id] = _solo_units(js, counts)
            # jobs handed over mid-life keep their last placement
            last_mask[js.id] = ids_mask(js.last_gpu_ids or ())
            js.time_on = {**zero_time, **js.time_on}
            slot[js.id] = admitted
            if columns is not None:
                columns.admit(admitted, js)
                active_slots.append(admitted)
            admitted += 1
            arrived = True
        if arrived:
            version += 1
        if not active:
            if not pending:
                break
            now = pending[0].arrival  # idle jump to the next arrival
            previous = []
            continue
        if max_rounds is not None and round_index >= max_rounds:
            stopped = "max_rounds"
            break

        arrays = None
        if columns is not None:
            arrays = columns.view
            arrays.rows = np.array(active_slots, dtype=np.int64)
        state = ClusterState(now=now, round_index=round_index, round_s=length,
                             cluster=cluster, active=list(active), finished=finished,
                             job_set_version=version, seed=seed, arrays=arrays)
        t0 = time.perf_counter()
        decision = policy.decide(state)
        decide_s += time.perf_counter() - t0
        runs: list[RunRecord] | None = [] if keep_runs else None
        still: list[JobState] = []  # ran this round, not finished
        done_now: list[JobState] = []
        changed: list[JobState] = []  # dynamic jobs whose throughput changed
        last_end = now
        if repeat_layout is not None and version == repeat_version and decision == repeat_of:
            # The plan of the last round again, and no job arrived or finished since: it
            # passed the checks then, and every gang finds its GPUs free (sticky placement).
            for acc, same_units, same_masks, _ in repeat_layout:
                last_end = advance(same_units, same_masks, same_masks, acc, now, length,
                                   round_index, last_mask, overhead_paid, runs, still,
                                   done_now, last_end, changed, busy, resume_s)
                if columns is not None:
                    columns.ran([slot[u[0].id] for u in same_units], acc, round_index)
            same_units = []
        else:
            layout = _solo_layout(decision, fits, counts, last_mask, placers)
            repeat_layout = layout
            if layout is None:  # pairs, or a plan to reject: the full check
                layout = _checked_layout(decision, by_id, counts, last_mask, placers, name,
                                         round_index)
            for acc, units, masks, before in layout:
                last_end = advance(units, masks, before, acc, now, length, round_index,
                                   last_mask, overhead_paid, runs, still, done_now, last_end,
                                   changed, busy, resume_s)
                if columns is not None:
                    columns.ran([slot[u[0].id] for u in units], acc, round_index)
            repeat_of = list(decision)  # a copy: a policy may reuse its list
            layout = None  # drop this round's references to its jobs
            units = []
        repeat_version = version

        for js in previous:
            if js.last_round_run != round_index:  # ran last round, waits now
                js.preemptions += 1
        ran = len(still) + len(done_now)  # every placed job is in one of the two
        job_rounds += ran
        if gavel:  # ends when its last job has run its steps; an empty round waits for jobs
            end_of_round = (last_end if ran else pending[0].arrival
                            if pending else now + length)
        elif ran and not still and end_round_early:
            end_of_round = last_end
        else:
            end_of_round = now + length
        if runs is not None:
            rounds.append(RoundRecord(round_index, now, end_of_round, tuple(runs)))
        if done_now:
            done_now.sort(key=_finish_key)
            for js in done_now:
                job_id = js.id
                del by_id[job_id]
                del fits[job_id]
                del last_mask[job_id]
                record = _job_record(js, cluster, overhead_paid.pop(job_id, 0.0))
                place = slot.pop(job_id)
                if sinks.job_records:
                    records[place] = record
                if sinks.on_job_done is not None:
                    sinks.on_job_done(record)
            finished_count += len(done_now)
            if sinks.finished_states:
                finished.extend(done_now)
            if columns is not None:
                active_slots = [s for s, js in zip(active_slots, active, strict=True)
                                if js.finish_time is None]
            active = [js for js in active if js.finish_time is None]
            version += 1
            # nothing of this round may keep a finished job alive: a changed job set never
            # repeats the last layout, and the loop's own names are rebound
            repeat_layout = None
            done_now = []
            state = decision = None  # type: ignore[assignment]
            del js
        if changed:  # a batch size changed: policies that re-solve on changes see it
            version += 1
            for js in changed:  # a job counted in steps runs at its new steps/s
                if js.shockwave_steps is not None and js.id in fits:
                    fits[js.id] = _solo_units(js, counts)
                    repeat_layout = None
            if columns is not None:
                columns.view.throughput_changes += len(changed)
        previous = still

        if ran or pending:
            idle = 0
        else:
            idle += 1
            if idle >= stall_rounds:
                raise SimulationStalledError(
                    f"policy {name!r} placed no job for {idle} rounds while {len(active)} "
                    f"job(s) wait and none can arrive any more (first waiting: "
                    f"{active[0].id!r}); stopping at t = {now:.6g} s")
        now = end_of_round
        round_index += 1
        if progress is not None:
            progress(Progress(round_index, now, len(active), finished_count, total,
                              job_rounds))

    wall = time.perf_counter() - wall0
    for js in active:  # unfinished jobs, then those that never arrived (max_rounds)
        record = _job_record(js, cluster, overhead_paid.get(js.id, 0.0))
        if sinks.job_records:
            records[slot[js.id]] = record
        else:
            records.append(record)
    return close_run(
        RunTotals(name=name, mode=mode, round_s=length, gpus=counts, rounds=rounds,
                  decide_s=decide_s, wall_s=wall, end_time=now, stopped=stopped, busy=busy,
                  num_rounds=round_index, job_rounds=job_rounds, finished=finished_count,
                  total=total),
        policy, counters0, cluster, pending, records, sinks, admitted, zero_time)


class RunTotals(NamedTuple):
    """What a finished run's loop hands to :func:`close_run`."""

    name: str
    mode: Mode
    round_s: float
    gpus: dict[str, int]
    rounds: list[RoundRecord]
    decide_s: float
    wall_s: float
    end_time: float
    stopped: str
    busy: dict[str, float]
    num_rounds: int
    job_rounds: int
    finished: int
    total: int


def close_run(totals: RunTotals, policy: Policy, counters0: tuple[float, float, float, float],
              cluster: Cluster, pending: deque[JobState], records: list[JobRecord | None],
              sinks: _Sinks, admitted: int, zero_time: dict[str, float]) -> SimulationResult:
    """The :class:`SimulationResult` of a run (either loop), once the records of its active
    jobs are in ``records``: the jobs that never arrived (``max_rounds``) get theirs after
    them, the policy's counters are taken as differences from ``counters0``, and failed
    solves are reported."""
    for js in pending:
        js.time_on = {**zero_time, **js.time_on}
    tail = [_job_record(js, cluster, 0.0) for js in pending]
    if sinks.job_records:
        records[admitted:] = tail
    else:
        records.extend(tail)
    log.info("%s: %d rounds, %d/%d jobs finished, %.3f s wall (%.3f s deciding)", totals.name,
             totals.num_rounds, totals.finished, totals.total, totals.wall_s, totals.decide_s)
    solver_s, solves, decisions, failed = _counters(policy)
    result = SimulationResult(
        policy=totals.name,
        mode=totals.mode,
        round_s=totals.round_s,
        gpus=totals.gpus,
        jobs=[r for r in records if r is not None],
        rounds=totals.rounds,
        solver_time_s=solver_s - counters0[0],
        solves=int(solves - counters0[1]),
        decisions=int(decisions - counters0[2]),
        failed_solves=int(failed - counters0[3]),
        decide_time_s=totals.decide_s,
        wall_s=totals.wall_s,
        end_time=totals.end_time,
        stopped=totals.stopped,
        busy_gpu_s=totals.busy,
        num_rounds=totals.num_rounds,
        num_job_rounds=totals.job_rounds,
    )
    if result.failed_solves:
        log.warning("%s: %d of %d solves found no solution; the policy fell back then",
                    totals.name, result.failed_solves, result.solves)
    return result


def _pair_members(
    units: list[Unit], masks: list[int], gangs: list[int], acc: str
) -> tuple[list[Unit], list[int]]:
    """Units and masks with every co-located pair split into its two jobs: each with its
    co-located throughput and its partner; the larger gang holds all the pair's GPUs, the
    smaller the lowest s_j of them."""
    out_units: list[Unit] = []
    out_masks: list[int] = []
    for (first, first_thr, second), mask, gang in zip(units, masks, gangs, strict=True):
        if second is None:
            out_units.append((first, first_thr, None))
            out_masks.append(mask)
            continue
        second_thr = (second.colocated_throughput or {})[first.id][acc]
        for js, thr, mate in ((first, first_thr, second), (second, second_thr, first)):
            out_units.append((js, thr, mate))
            out_masks.append(mask if js.scale_factor >= gang
                             else lowest_bits(mask, js.scale_factor))
    return out_units, out_masks


def _counters(policy: Policy) -> tuple[float, float, float, float]:
    """(solver seconds, solves, decisions, failed solves) of a policy so far (a run reports
    its own share)."""
    return (float(getattr(policy, "solver_time_s", 0.0)), float(getattr(policy, "solves", 0)),
            float(getattr(policy, "decisions", 0)), float(getattr(policy, "failed_solves", 0)))


def _finish_key(js: JobState) -> float:
    return js.finish_time if js.finish_time is not None else math.inf


def _job_record(js: JobState, cluster: Cluster, overhead: float) -> JobRecord:
    """The run's record of one job; ``isolated_time_s`` = T_excl, the job alone on its gang
    of its fastest type with room: total_steps / T, or for a dynamic job the sum of its
    epochs' seconds there (its whole batch-size schedule)."""
    fits = {k for k, p in cluster.accelerators.items() if js.scale_factor <= p.count}
    best = max((v for k, v in js.throughput.items() if v > 0 and k in fits), default=0.0)
    isolated = js.total_steps / best if best > 0 else math.inf
    if js.batch_schedule is not None and js.regimes is not None:
        speed = max((v for k, v in (js.type_speed or {}).items() if k in fits), default=0.0)
        regimes = js.regimes
        isolated = (math.fsum(regimes[b] for b in js.batch_schedule) / speed if speed > 0
                    else math.inf)
    elif js.shockwave_steps is not None:  # counted in steps: the same profile seconds
        speed = max((v for k, v in (js.type_speed or {}).items() if k in fits), default=0.0)
        isolated = js.shockwave_steps.profile_s / speed if speed > 0 else math.inf
    return JobRecord(
        job=js.id,
        arrival=js.arrival,
        start=js.start_time,
        finish=js.finish_time,
        scale_factor=js.scale_factor,
        weight=js.weight,
        job_type=js.job_type,
        user=js.user,
        total_steps=js.total_steps,
        steps=js.steps_done,
        preemptions=js.preemptions,
        migrations=js.migrations,
        rounds_run=js.rounds_run,
        gpu_seconds=js.attained_service_s,
        executed_s=js.executed_s,
        overhead_s=overhead,
        isolated_time_s=isolated,
        time_on=dict(js.time_on),
    )
