r"""The simulator's loop with the active jobs' progress held in numpy columns.

:func:`run_arrays` is :func:`schedlab.simulator.engine._run` for the common case -- schedlab's
round mechanism (``mechanism="schedlab"``), no dynamic-adaptation job, no job with co-location
throughputs (so every gang is one job) -- with the same rules, the same floating-point
operations in the same order, and so the same results bit for bit; ``_run`` stays the
reference (``simulate(..., reference_path=True)``, and the tests compare the two).

What changes is where a job's progress lives.  Every job gets a *slot* (its index in admission
order) in run-wide arrays: remaining work (``total_steps``, ``steps_done``), ``executed_s``,
``attained_service_s``, seconds per type (``time_on``), ``rounds_run``, ``last_round_run``, and
its throughput per type.  A round's progress (docs/simulator.md, "Progress"), for the gangs
placed on type k with throughputs T (steps/s), overheads o (s) and round length L, is then a
handful of array operations over those gangs:

.. math::

    s = T (L - o), \quad R = \text{total} - \text{done}, \quad
    \text{finished} = R - s \le 10^{-9}\,\text{total}, \quad
    \text{held} = \begin{cases} \min(o + R / T,\; L) & \text{finished} \\ L & \text{else}
    \end{cases}

and ``time_on[k] += held``, ``executed += held``, ``attained += held x scale_factor``, busy
GPU-seconds ``+= sum(scale_factor x held)`` (summed in gang order, as ``_run`` does:
``np.cumsum`` adds sequentially).  Python work per gang is left for what needs Python objects:
mapping the policy's Assignments to slots, placement (GPU bit masks), and the jobs that move
(switch overhead, ``last_gpu_ids``), start or finish.

The :class:`~schedlab.policies.state.JobState` s a policy sees are brought up to date from the
arrays after every round -- unless the policy says it does not read their progress
(``reads_progress`` false: FIFO and the Gavel adapter on its class-LP path read the columns of
``ClusterState.arrays`` instead); then only ``last_accelerator`` and ``start_time`` are kept
current, and a job's whole state (``last_gpu_ids``, ``migrations`` and ``preemptions`` too) is
written back when it finishes, when the run ends, and before any round whose policy does read
progress.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from schedlab.instance import Cluster
from schedlab.lazy import load_compiled
from schedlab.placement import cluster_placers, ids_mask, mask_ids
from schedlab.policies.base import Policy
from schedlab.policies.state import (
    NEVER_RAN,
    ActiveArrays,
    ActiveJobs,
    Assignment,
    ClusterState,
    JobState,
    SlotPlan,
)
from schedlab.simulator.array_placement import Masks, Placement, SlotLayout
from schedlab.simulator.engine import (
    FINISH_TOLERANCE,
    InvalidDecisionError,
    Mode,
    Progress,
    RunTotals,
    SimulationStalledError,
    _check_decision,
    _counters,
    _job_record,
    _Sinks,
    close_run,
)
from schedlab.simulator.result import JobRecord, RoundRecord, RunRecord, SimulationResult

log = logging.getLogger(__name__)

_NO_SLOTS = np.zeros(0, dtype=np.int64)
_NO_STOP = 2**62  # a round index no run reaches

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]



def can_run_arrays(jobs: Sequence[JobState], mechanism: str) -> bool:
    """Whether :func:`run_arrays` covers a run: schedlab's mechanism, every job static (no
    batch-size schedule) and none with co-location throughputs."""
    return mechanism == "schedlab" and all(
        js.batch_schedule is None and not js.colocated_throughput for js in jobs)


class _Progress:
    """Per-slot progress columns of a run (module docstring) and the write-back to JobStates."""

    def __init__(self, total: int, types: list[str], view: ActiveArrays) -> None:
        num_types = len(types)
        self.types = types
        self.view = view
        self.total = np.zeros(total)
        self.done = np.zeros(total)
        self.executed = np.zeros(total)
        self.attained = np.zeros(total)
        self.time_on = np.zeros((total, num_types))
        self.rounds_run = np.zeros(total, dtype=np.int64)
        self.thr = np.zeros((total, num_types))
        self.started = np.zeros(total, dtype=bool)
        # moves: switch overhead (s), whether it ran before (a move then migrates), the
        # migrations, the overhead paid in this run (s), whether it moved in this run
        self.switch = np.zeros(total)
        self.ran_before = np.zeros(total, dtype=bool)
        self.migrations = np.zeros(total, dtype=np.int64)
        self.paid = np.zeros(total)
        self.moved = np.zeros(total, dtype=bool)
        #: by slot: rounds after which it ran, then waited (``JobState.preemptions``)
        self.preemptions = np.zeros(total, dtype=np.int64)
        #: by slot: the GPUs it holds or last held (a bit mask, a Python int), unless
        #: ``described``: then the placement's description of it says (:meth:`gpu_mask`)
        self.mask: npt.NDArray[np.object_] = np.zeros(total, dtype=object)
        self.described = np.zeros(total, dtype=bool)
        self.placement: Placement | None = None  # set by the run, before any move

    def fill(self, pending: Sequence[JobState], type_index: dict[str, int]) -> None:
        """The columns of every job of a run, slot i for ``pending[i]`` (the order they
        will be admitted in), filled column by column from lists at the start: a job's
        columns are read only once it is admitted, and nothing changes a pending JobState,
        so they hold what its JobState says at admission (``time_on`` 0 for a type it has
        no entry for, ``mask`` 0 for no GPUs)."""
        n = len(pending)
        if not n:
            return
        view = self.view
        types = self.types
        view.arrival[:n] = [js.arrival for js in pending]
        view.scale[:n] = [js.scale_factor for js in pending]
        view.last_round[:n] = [NEVER_RAN if js.last_round_run is None else js.last_round_run
                               for js in pending]
        view.last_type[:n] = [-1 if js.last_accelerator is None
                              else type_index.get(js.last_accelerator, -1) for js in pending]
        self.total[:n] = [js.total_steps for js in pending]
        self.done[:n] = [js.steps_done for js in pending]
        self.executed[:n] = [js.executed_s for js in pending]
        self.attained[:n] = [js.attained_service_s for js in pending]
        self.time_on[:n] = [[js.time_on.get(k, 0.0) for k in types] for js in pending]
        self.rounds_run[:n] = [js.rounds_run for js in pending]
        self.thr[:n] = [[js.throughput.get(k, 0.0) for k in types] for js in pending]
        self.started[:n] = [js.start_time is not None for js in pending]
        self.switch[:n] = [js.switch_overhead_s for js in pending]
        self.ran_before[:n] = [js.last_accelerator is not None for js in pending]
        self.migrations[:n] = [js.migrations for js in pending]
        self.preemptions[:n] = [js.preemptions for js in pending]
        self.mask[:n] = [ids_mask(js.last_gpu_ids) if js.last_gpu_ids else 0
                         for js in pending]

    def move(self, jobs: list[JobState], slots: list[int] | IntArray, moved: list[int],
             masks: Masks, acc: str, k: int, length: float, eager: bool) -> FloatArray:
        """The gangs at positions ``moved`` of ``slots`` run on new GPUs ``masks[i]`` of
        ``acc`` (type index ``k``; called before the round's step sets ``last_type``):
        returns their switch overheads, min(o_j, L) for a job that ran before (a migration)
        and 0 at its first start, as ``engine._move``; counts the migrations and overheads.
        ``last_accelerator`` is set at once (on the jobs whose last type was another one);
        ``last_gpu_ids`` and ``migrations`` too when ``eager``, else at the next full
        write-back."""
        index = np.asarray(slots, dtype=np.int64)[moved]
        had = self.ran_before[index]
        overhead = np.where(had, np.minimum(self.switch[index], length), 0.0)
        self.migrations[index] += had
        self.paid[index] += overhead
        self.ran_before[index] = True
        self.moved[index] = True
        if masks is None:  # described by the placement only (array_placement.Masks)
            self.described[index] = True
        else:
            self.mask[index] = [masks[i] for i in moved]
            self.described[index] = False
        # ``last_accelerator`` is the name of ``last_type`` (both set at each run), so only
        # the jobs that come from another type (or none) need it set
        for slot in index[self.view.last_type[index] != k].tolist():
            jobs[slot].last_accelerator = acc
        if eager:
            for slot, count in zip(index.tolist(), self.migrations[index].tolist(),
                                   strict=True):
                js = jobs[slot]
                js.last_gpu_ids = self.gpu_ids(slot)
                js.migrations = count
        return overhead

    def gpu_mask(self, slot: int) -> int:
        """The GPUs ``slot`` holds or last held, as a bit mask."""
        if self.described[slot]:
            assert self.placement is not None
            self.mask[slot] = self.placement.mask_of(slot)
            self.described[slot] = False
        held: int = self.mask[slot]
        return held

    def gpu_ids(self, slot: int) -> tuple[int, ...]:
        """The ids of the GPUs ``slot`` holds or last held, ascending."""
        if self.described[slot]:
            assert self.placement is not None
            return self.placement.gpu_ids(slot)
        return mask_ids(self.mask[slot])

    def write_back(self, jobs: Sequence[JobState], slots: Sequence[int],
                   full: bool = True) -> None:
        """Copy the progress columns of ``slots`` into their JobStates (``jobs[i]`` is the
        JobState of ``slots[i]``); ``full`` also ``migrations``, ``preemptions`` and
        ``last_gpu_ids``."""
        if not slots:
            return
        index = np.asarray(slots, dtype=np.int64)
        if full:
            for js, slot, count, waits, moved in zip(
                    jobs, slots, self.migrations[index].tolist(),
                    self.preemptions[index].tolist(), self.moved[index].tolist(), strict=True):
                js.migrations = count
                js.preemptions = waits
                if moved:
                    js.last_gpu_ids = self.gpu_ids(slot)
        last_round = self.view.last_round[index].tolist()
        types = self.types
        for js, done, executed, attained, rounds, last, on in zip(
                jobs, self.done[index].tolist(), self.executed[index].tolist(),
                self.attained[index].tolist(), self.rounds_run[index].tolist(), last_round,
                self.time_on[index].tolist(), strict=True):
            js.steps_done = done
            js.executed_s = executed
            js.attained_service_s = attained
            js.rounds_run = rounds
            js.last_round_run = None if last == NEVER_RAN else last
            time_on = js.time_on
            for k, value in zip(types, on, strict=True):
                time_on[k] = value


def _slot_groups(
    decision: Sequence[Assignment],
    fits: dict[str, tuple[int, dict[str, float]]],
    scale: list[int],
    counts: dict[str, int],
) -> list[list[int]] | None:
    """The slots of a plan of single jobs per type (cluster order), in plan order, checked as
    ``engine._solo_layout`` checks them; None when a check fails (the caller names the
    error).  ``fits[job]`` is (slot, the types where the job may run alone: positive
    throughput, a pool at least as large as its gang)."""
    groups: dict[str, list[int]] = {acc: [] for acc in counts}
    for a in decision:
        entry = fits.get(a.job)
        if entry is None or a.partner is not None:
            return None
        acc = a.accelerator
        if acc not in entry[1]:
            return None
        groups[acc].append(entry[0])
    if len({a.job for a in decision}) != len(decision):
        return None
    for acc, slots in groups.items():
        if sum(map(scale.__getitem__, slots)) > counts[acc]:
            return None
    return list(groups.values())


def _plan_groups(
    plan: SlotPlan,
    admitted: int,
    gone: npt.NDArray[np.bool_],
    fit: npt.NDArray[np.bool_],
    scale: IntArray,
    capacity: IntArray,
    seen: IntArray,
    kernel: Any = None,
) -> list[IntArray] | None:
    """The slots of a :class:`~schedlab.policies.state.SlotPlan` per type index, in plan
    order, after the checks of :func:`_slot_layout` done on its arrays: each slot an active
    job's, named once, on a type where it may run alone (``fit[slot, k]``), no pool
    over-committed.  None when a check fails or the arrays do not match the plan's length
    (the caller then reads the Assignments).  ``seen`` is scratch space, one entry per slot.
    With ``kernel`` (:mod:`schedlab.simulator.plan_kernel`) the checks and the grouping are
    one compiled pass; without, numpy operations."""
    slots = np.asarray(plan.slots, dtype=np.int64)
    kinds = np.asarray(plan.types, dtype=np.int64)
    num_types = len(capacity)
    if len(slots) != len(plan) or len(kinds) != len(plan):
        return None
    if not len(slots):
        return [_NO_SLOTS] * num_types
    if kernel is not None:
        out = np.empty(len(slots), dtype=np.int64)
        first = np.empty(num_types + 1, dtype=np.int64)
        if not kernel.group_plan(slots, kinds, admitted, gone, fit, scale, capacity, seen,
                                 out, first):
            return None
        bounds = first.tolist()
        return [out[bounds[k]:bounds[k + 1]] for k in range(num_types)]
    if (slots.min() < 0 or slots.max() >= admitted or kinds.min() < 0
            or kinds.max() >= num_types):
        return None
    if gone[slots].any() or not fit[slots, kinds].all():
        return None
    order = np.arange(len(slots))
    seen[slots] = order  # a slot named twice keeps its last position only
    if not np.array_equal(seen[slots], order):
        return None
    used = np.bincount(kinds, weights=scale[slots], minlength=num_types)
    if (used > capacity).any():
        return None
    if num_types == 1:
        return [slots]
    return [slots[kinds == k] for k in range(num_types)]


def progress_kernel() -> Any:
    """The compiled progress step (:mod:`schedlab.simulator.progress_kernel`), or None when
    numba cannot load it (then the same step runs as numpy operations per type)."""
    return _compiled()[0]


def plan_kernel() -> Any:
    """The compiled plan check (:mod:`schedlab.simulator.plan_kernel`), or None when numba
    cannot load it (then :func:`_plan_groups` checks the plan with numpy operations)."""
    return _compiled()[1]


def _compiled() -> tuple[Any, Any]:
    global _KERNEL
    if _KERNEL is None:
        progress = load_compiled("schedlab.simulator.progress_kernel",
                                 "the compiled progress step", "using numpy")
        plan = load_compiled("schedlab.simulator.plan_kernel", "the compiled plan check",
                             "using numpy") if progress is not None else None
        _KERNEL = (progress, plan) if plan is not None else False
    return _KERNEL or (None, None)


_KERNEL: Any = None


class _FlatLayout:
    """A round's layout as flat arrays over every type's gangs (in layout order), kept while
    the same layout repeats, with the scratch arrays of :func:`progress_kernel.advance`."""

    def __init__(self, layout: list[SlotLayout], num_types: int) -> None:
        sizes = [len(entry[2]) for entry in layout]
        self.start = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64).tolist()
        self.index = (np.concatenate([entry[5] for entry in layout]) if layout
                      else _NO_SLOTS)
        self.kind = np.repeat(np.array([entry[1] for entry in layout], dtype=np.int64),
                              sizes)
        n = len(self.index)
        self.held = np.zeros(n)
        self.fin = np.zeros(n, dtype=bool)
        self.fresh = np.zeros(n, dtype=bool)
        self.busy = np.zeros(num_types)  # per type, scratch

    def advance(self, kernel: Any, cols: _Progress, jobs: list[JobState],
                layout: list[SlotLayout], now: float, length: float, round_index: int,
                eager: bool, done_now: list[int], done_end: list[float],
                busy: dict[str, float], runs: list[RunRecord] | None) -> tuple[IntArray, float]:
        """The round's moves and progress (the per-type numpy block of :func:`run_arrays`,
        compiled); appends the finished slots and their end times; returns the slots that go
        on and the latest end time of a finished gang (``now`` if none)."""
        overhead = np.zeros(len(self.index))
        for (acc, k, slots, masks, moved, _), first in zip(layout, self.start, strict=False):
            if moved:  # new GPUs: a migration, unless it is the job's first start
                at = np.asarray(moved, dtype=np.int64) + first
                overhead[at] = cols.move(jobs, slots, moved, masks, acc, k, length, eager)
        view = cols.view
        finished = kernel.advance(
            self.index, self.kind, overhead, length, round_index, FINISH_TOLERANCE, cols.thr,
            cols.total, cols.done, cols.time_on, cols.executed, cols.attained, cols.rounds_run,
            view.last_round, view.last_type, view.scale, cols.started, self.held, self.fin,
            self.fresh, self.busy)
        part = self.busy.tolist()
        for acc, k, *_ in layout:
            busy[acc] += part[k]  # in gang order, as engine._run adds
        if self.fresh.any():
            for slot in self.index[self.fresh].tolist():
                jobs[slot].start_time = now
        end = now + self.held
        last_end = now
        if finished:
            fin_at = np.flatnonzero(self.fin)
            ends = end[fin_at].tolist()
            done_now.extend(self.index[fin_at].tolist())
            done_end.extend(ends)
            last_end = max(last_end, max(ends))
            still = self.index[~self.fin]
        else:
            still = self.index
        if runs is not None:
            round_end = now + length
            ends_all = end.tolist()
            fin_all = self.fin.tolist()
            for (acc, _, slots, _, _, _), first in zip(layout, self.start, strict=False):
                for i, slot in enumerate(np.asarray(slots).tolist()):
                    runs.append(RunRecord(jobs[slot].id, acc, cols.gpu_mask(slot), None,
                                          float(overhead[first + i]),
                                          ends_all[first + i] if fin_all[first + i]
                                          else round_end))
        return still, last_end


def _advance_by_type(cols: _Progress, jobs: list[JobState], layout: list[SlotLayout],
                     now: float, length: float, round_index: int, eager: bool,
                     done_now: list[int], done_end: list[float], busy: dict[str, float],
                     runs: list[RunRecord] | None) -> tuple[IntArray, float]:
    """:meth:`_FlatLayout.advance` as numpy operations, type by type (when numba is missing;
    the reference the compiled step is tested against): the same floating-point operations
    on the same operands, so the same values."""
    view = cols.view
    thr_a, total_a, done_a, time_on_a = cols.thr, cols.total, cols.done, cols.time_on
    executed_a, attained_a, rounds_a, started_a = (cols.executed, cols.attained,
                                                   cols.rounds_run, cols.started)
    scale_a, last_round_a, last_type_a = view.scale, view.last_round, view.last_type
    ftol = FINISH_TOLERANCE
    last_end = now
    round_end = now + length
    still_parts: list[IntArray] = []  # per type: the slots that ran and go on
    for acc, k, slots, masks, moved, index in layout:
        overhead = np.zeros(len(slots))
        if moved:  # new GPUs: a migration, unless it is the job's first start
            overhead[moved] = cols.move(jobs, slots, moved, masks, acc, k, length, eager)
        thr = thr_a[index, k]
        steps = thr * (length - overhead)  # (L - 0.0) is L: the kept-placement case too
        total_steps = total_a[index]
        left = total_steps - done_a[index]
        fin = left - steps <= ftol * total_steps
        held = np.where(fin, np.minimum(overhead + left / thr, length), length)
        done_a[index] = np.where(fin, total_steps, done_a[index] + steps)
        time_on_a[index, k] += held
        executed_a[index] += held
        gpu = held * scale_a[index]
        attained_a[index] += gpu
        rounds_a[index] += 1
        last_round_a[index] = round_index
        last_type_a[index] = k
        busy[acc] += float(np.cumsum(gpu)[-1])  # in gang order, as engine._run adds
        fresh = np.flatnonzero(~started_a[index])
        if len(fresh):
            started_a[index[fresh]] = True
            for i in fresh.tolist():
                jobs[slots[i]].start_time = now
        end = now + held
        if fin.any():
            fin_at = np.flatnonzero(fin)
            ends = end[fin_at].tolist()
            done_now.extend(index[fin_at].tolist())
            done_end.extend(ends)
            last_end = max(last_end, max(ends))
            still_parts.append(index[~fin])
        else:
            still_parts.append(index)
        if runs is not None:
            ends_all = end.tolist()
            for i, slot in enumerate(np.asarray(slots).tolist()):  # GPUs: moved ones' set
                runs.append(RunRecord(jobs[slot].id, acc, cols.gpu_mask(slot), None,
                                      float(overhead[i]), ends_all[i] if fin[i]
                                      else round_end))
    still = (still_parts[0] if len(still_parts) == 1 else
             np.concatenate(still_parts) if still_parts else _NO_SLOTS)
    return still, last_end


def run_arrays(
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
    sinks: _Sinks,
) -> SimulationResult:
    """The loop of :func:`~schedlab.simulator.engine.simulate` over ``pending`` (JobStates by
    arrival; consumed) with progress in arrays (module docstring); same arguments and result
    as ``engine._run``."""
    wall0 = time.perf_counter()
    counters0 = _counters(policy)
    counts = {k: p.count for k, p in cluster.accelerators.items()}
    types = list(counts)
    type_index = {k: i for i, k in enumerate(types)}
    placers = cluster_placers(cluster)
    total = len(pending)
    view = ActiveArrays(
        rows=np.zeros(0, dtype=np.int64),
        arrival=np.zeros(total),
        scale=np.zeros(total, dtype=np.int64),
        last_round=np.full(total, NEVER_RAN, dtype=np.int64),
        last_type=np.full(total, -1, dtype=np.int64),
    )
    cols = _Progress(total, types, view)
    cols.fill(pending, type_index)  # slot i is pending[i]: admission follows that order
    give_arrays = bool(getattr(policy, "uses_arrays", False))
    jobs: list[JobState] = []  # by slot (finished jobs' entries are set to None... kept)
    scale: list[int] = []  # by slot
    admitted = 0
    finished_count = 0
    job_rounds = 0
    busy = dict.fromkeys(counts, 0.0)
    records: list[JobRecord | None] = [None] * total if sinks.job_records else []
    # the active jobs are ``job_of[active_index]`` (slots in admission order)
    job_of = np.empty(total, dtype=object)  # by slot: its JobState (None once finished)
    active_index = np.zeros(0, dtype=np.int64)  # active_slots as an array
    gone = np.zeros(total, dtype=bool)  # finished, by slot
    view.finished = gone
    by_id: dict[str, JobState] = {}
    finished: list[JobState] = []
    last_mask: dict[str, int] = {}
    fits: dict[str, tuple[int, dict[str, float]]] = {}
    rounds: list[RoundRecord] = []
    previous = _NO_SLOTS  # slots of the jobs that ran in the round just simulated
    forget: list[int] = []  # slots of the jobs that finished in the round just simulated
    repeat_layout: list[SlotLayout] | None = None
    repeat_of: list[Assignment] = []
    # the last plan when it was a SlotPlan: a policy handing back that very object promises it
    # unchanged (FIFO at a fixed point), and the comparison with ``repeat_of`` is skipped
    repeat_plan: SlotPlan | None = None
    repeat_version = -1
    kernel = progress_kernel()
    plan_check = plan_kernel()
    flat: _FlatLayout | None = None  # the layout's gangs as flat arrays (compiled step)
    now = pending[0].arrival if pending else 0.0
    round_index = 0
    version = 0
    idle = 0
    decide_s = 0.0
    stopped = "all jobs finished"
    zero_time = dict.fromkeys(counts, 0.0)
    keep_runs = sinks.rounds
    lagging = False  # some active JobState's progress is behind the arrays
    ftol = FINISH_TOLERANCE
    done_a = cols.done
    total_a = cols.total
    executed_a = cols.executed
    attained_a = cols.attained
    time_on_a = cols.time_on
    rounds_a = cols.rounds_run
    thr_a = cols.thr
    capacity = np.array([counts[k] for k in types], dtype=np.int64)
    placement = Placement(types, placers, view.last_type, cols.mask)
    cols.placement = placement
    seen = np.zeros(total, dtype=np.int64)  # scratch of _plan_groups
    # may run alone on k: positive throughput and a pool at least as large as the gang
    fit_a = cols.thr > 0.0
    fit_a &= view.scale[:, None] <= capacity[None, :]
    scale_a = view.scale
    last_round_a = view.last_round

    while True:
        arrived = False
        first_new = admitted
        while pending and pending[0].arrival <= now:
            js = pending.popleft()
            js.time_on = {**zero_time, **js.time_on}
            job_of[admitted] = js
            by_id[js.id] = js
            jobs.append(js)
            scale.append(js.scale_factor)
            fits[js.id] = (admitted, {acc: thr for acc, thr in js.throughput.items()
                                      if thr > 0.0 and js.scale_factor <= counts[acc]})
            last_mask[js.id] = 0  # (only _check_decision reads it, to name an error)
            placement.admit(admitted, js.scale_factor)  # (its columns: cols.fill)
            admitted += 1
            arrived = True
        if arrived:
            version += 1
            active_index = np.concatenate(
                [active_index, np.arange(first_new, admitted, dtype=np.int64)])
        if not len(active_index):
            if not pending:
                break
            now = pending[0].arrival  # idle jump to the next arrival
            previous = _NO_SLOTS
            continue
        if max_rounds is not None and round_index >= max_rounds:
            stopped = "max_rounds"
            break

        reads = bool(getattr(policy, "reads_progress", True))
        if reads and lagging:
            cols.write_back(job_of[active_index].tolist(), active_index.tolist())
            lagging = False
        arrays = None
        if give_arrays:
            arrays = view
            view.rows = active_index
        state = ClusterState(now=now, round_index=round_index, round_s=length,
                             cluster=cluster, active=ActiveJobs(job_of, active_index),
                             finished=finished,
                             job_set_version=version, seed=seed, arrays=arrays)
        t0 = time.perf_counter()
        decision = policy.decide(state)
        decide_s += time.perf_counter() - t0
        runs: list[RunRecord] | None = [] if keep_runs else None
        if repeat_layout is not None and version == repeat_version and (
                (decision is repeat_plan and isinstance(decision, SlotPlan))
                or decision == repeat_of):
            # the last round's plan again under the same job set: same checks, same GPUs
            layout: list[SlotLayout] = [(acc, k, slots, masks, [], index)
                                        for acc, k, slots, masks, _, index in repeat_layout]
        else:
            flat = None  # a new layout: its flat form is made when the round runs
            groups: Sequence[list[int] | IntArray] | None = None
            if isinstance(decision, SlotPlan):
                groups = _plan_groups(decision, admitted, gone, fit_a, scale_a, capacity,
                                      seen, plan_check)
            if groups is None:
                groups = _slot_groups(decision, fits, scale, counts)
            found = None if groups is None else placement.layout(groups)
            if found is None:  # names the first error (a valid plan is never refused here)
                _check_decision(decision, by_id, counts, last_mask, name, round_index)
                raise InvalidDecisionError(f"policy {name!r}, round {round_index}: a plan "
                                           "the array path cannot run")
            layout = found
            repeat_of = list(decision)
            repeat_plan = decision if isinstance(decision, SlotPlan) else None
        repeat_layout = layout
        repeat_version = version
        if forget:  # jobs finished in the previous round: no placement reads their GPUs now
            placement.forget(forget)
            forget = []

        done_now: list[int] = []
        done_end: list[float] = []
        if kernel is not None:
            if flat is None:
                flat = _FlatLayout(layout, len(types))
            still, last_end = flat.advance(
                kernel, cols, jobs, layout, now, length, round_index, reads, done_now,
                done_end, busy, runs)
        else:
            still, last_end = _advance_by_type(cols, jobs, layout, now, length, round_index,
                                               reads, done_now, done_end, busy, runs)
        if reads:  # the policy reads progress: its JobStates follow every round
            still_list = still.tolist()
            cols.write_back([jobs[s] for s in still_list], still_list, full=False)
        else:
            lagging = True

        if len(previous):  # ran last round, waits now (slots named once: ``still``)
            waiting = previous[last_round_a[previous] != round_index]
            cols.preemptions[waiting] += 1
            if reads:  # the JobStates follow at once; else at the next full write-back
                for s in waiting.tolist():
                    jobs[s].preemptions += 1
        ran = len(still) + len(done_now)
        job_rounds += ran
        if ran and not len(still) and end_round_early:
            end_of_round = last_end
        else:
            end_of_round = now + length
        if runs is not None:
            rounds.append(RoundRecord(round_index, now, end_of_round, tuple(runs)))
        if done_now:
            order = sorted(range(len(done_now)), key=done_end.__getitem__)  # stable
            ordered = [done_now[i] for i in order]
            done_jobs = [jobs[s] for s in ordered]
            cols.write_back(done_jobs, ordered)
            for i, js in zip(order, done_jobs, strict=True):
                js.steps_done = js.total_steps
                js.finish_time = done_end[i]
            for slot_of_job, js in zip(ordered, done_jobs, strict=True):
                job_id = js.id
                del by_id[job_id]
                del fits[job_id]
                del last_mask[job_id]
                record = _job_record(js, cluster, float(cols.paid[slot_of_job]))
                if sinks.job_records:
                    records[slot_of_job] = record
                if sinks.on_job_done is not None:
                    sinks.on_job_done(record)
                jobs[slot_of_job] = None  # type: ignore[call-overload]  # forgotten
            finished_count += len(done_now)
            forget = ordered  # their GPU masks (up to count/8 bytes each) go after the next layout
            if sinks.finished_states:
                finished.extend(done_jobs)
            gone[ordered] = True
            keep = ~gone[active_index]
            active_index = active_index[keep]
            job_of[ordered] = None
            version += 1
            repeat_layout = None
            repeat_plan = None
            # nothing of this round may keep a finished job alive (the loop's names too)
            state = decision = None  # type: ignore[assignment]
            done_jobs = []
            del js
        previous = still

        if ran or pending:
            idle = 0
        else:
            idle += 1
            if idle >= stall_rounds:
                raise SimulationStalledError(
                    f"policy {name!r} placed no job for {idle} rounds while "
                    f"{len(active_index)} job(s) wait and none can arrive any more (first "
                    f"waiting: {job_of[active_index[0]].id!r}); stopping at t = {now:.6g} s")
        now = end_of_round
        round_index += 1
        if progress is not None:
            progress(Progress(round_index, now, len(active_index), finished_count, total,
                              job_rounds))
        if (flat is not None and ran and not done_now and runs is None and not reads
                and isinstance(decision, SlotPlan) and decision.on_repeat is not None):
            # a fixed point, and nothing finished: the same plan on the same GPUs until a job
            # arrives or a gang would finish -- those rounds in one compiled loop
            busy_a = np.array([busy[acc] for acc in types])
            quiet, quiet_now = kernel.advance_quiet(
                flat.index, flat.kind, length, now, round_index,
                max_rounds if max_rounds is not None else _NO_STOP,
                pending[0].arrival if pending else math.inf, ftol, thr_a, total_a, done_a,
                time_on_a, executed_a, attained_a, rounds_a, last_round_a, scale_a, busy_a,
                flat.busy)
            if quiet:
                for acc, value in zip(types, busy_a.tolist(), strict=True):
                    busy[acc] = value
                decision.on_repeat(quiet, round_index + quiet - 1)
                for _ in range(quiet):
                    job_rounds += ran
                    now += length
                    round_index += 1
                    if progress is not None:
                        progress(Progress(round_index, now, len(active_index), finished_count,
                                          total, job_rounds))
                assert now == quiet_now

    wall = time.perf_counter() - wall0
    if lagging:
        cols.write_back(job_of[active_index].tolist(), active_index.tolist())
    for js, slot_of_job in zip(job_of[active_index].tolist(), active_index.tolist(),
                               strict=True):
        record = _job_record(js, cluster, float(cols.paid[slot_of_job]))
        if sinks.job_records:
            records[slot_of_job] = record
        else:
            records.append(record)
    return close_run(
        RunTotals(name=name, mode=mode, round_s=length, gpus=counts, rounds=rounds,
                  decide_s=decide_s, wall_s=wall, end_time=now, stopped=stopped, busy=busy,
                  num_rounds=round_index, job_rounds=job_rounds, finished=finished_count,
                  total=total),
        policy, counters0, cluster, pending, records, sinks, admitted, zero_time)
