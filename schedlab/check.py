"""Independent feasibility checker: Solution x Instance -> list of violated constraints.

Every constraint is re-derived from the Instance; the Pyomo model is never consulted.  Each
violation is one human-readable line with the numbers involved.  Tolerance ``tol`` is absolute
on shares, GPU counts and seconds; durations are also allowed a relative error of 1e-6.

Constraint families, one function each, dispatched by :func:`check` on the parts the solution
fills:

* :func:`check_allocation` - Gavel time shares X[j,k] and co-located pair shares Y[p,k];
* :func:`check_rounds` - per-round placements of the round-based mechanism;
* :func:`check_schedule` - timed schedules (Saturn configurations and nodes, Hare rounds and
  barriers, capacity at every instant);
* :func:`check_groups` - merged Titan task groups (same base model, not started, task
  similarity at least the threshold, members start together);
* :func:`schedlab.check_titan.check_titan_schedule` - Titan entries: GPU counts within what
  the task (or its merged pair) can use, durations from the speed model (the task's or the
  merged pair's profile at the entry's GPUs), members of a merged pair run as one job;
* :func:`check_objective` - the claimed ``objective`` against the one re-derived from the
  allocation or schedule by the formulation's own
  :meth:`~schedlab.formulations.base.Formulation.objective_of` (plain numpy, never the
  solution's ``metrics``), within a relative tolerance ``OBJECTIVE_REL_TOL``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from schedlab.check_titan import check_titan_schedule
from schedlab.errors import UnknownNameError
from schedlab.instance import Instance, Job, SaturnConfig
from schedlab.registry import get_formulation
from schedlab.solution import Placement, ScheduleEntry, Solution

#: Relative tolerance on durations (runtime of a Saturn configuration, Hare task time).
REL_TOL = 1e-6
#: At most this many job names are listed in one capacity violation.
_MAX_NAMES = 8
#: Relative tolerance on the objective: |claimed - re-derived| <= OBJECTIVE_REL_TOL x
#: max(1, |claimed|, |re-derived|).  It absorbs solver round-off and shares below 1e-9 that
#: a formulation leaves out of its allocation (its objective was evaluated with them).
OBJECTIVE_REL_TOL = 1e-6


def check(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """All violations of ``solution`` against ``instance`` (empty list: feasible)."""
    violations: list[str] = []
    if solution.allocation or solution.colocated_allocation:
        violations += check_allocation(instance, solution, tol=tol)
    if solution.rounds:
        violations += check_rounds(instance, solution, tol=tol)
    if solution.schedule:
        violations += check_schedule(instance, solution, tol=tol)
        violations += check_titan_schedule(instance, solution, tol=tol)
    if solution.groups:
        violations += check_groups(instance, solution, tol=tol)
    violations += check_objective(instance, solution)
    return violations


# ------------------------------------------------------------------------- objective


def check_objective(instance: Instance, solution: Solution) -> list[str]:
    """The claimed objective equals the one re-derived from the allocation or schedule.

    The formulation is looked up by ``solution.formulation`` in the registry and its
    :meth:`~schedlab.formulations.base.Formulation.objective_of` recomputes the objective from
    ``instance`` and the solution's allocation / schedule.  Nothing is compared (no violation)
    when the solution claims no objective or has no usable solution (``infeasible``, ``error``,
    ...), when the name is not registered, or when the formulation declares no objective.
    Claimed c and re-derived d agree when both are the same infinity or
    |c - d| <= ``OBJECTIVE_REL_TOL`` max(1, |c|, |d|); a NaN never agrees.
    """
    claimed = solution.objective
    if claimed is None or not solution.status.has_solution:
        return []
    try:
        formulation = get_formulation(solution.formulation)
    except UnknownNameError:
        return []
    derived = formulation.objective_of(instance, solution)
    if derived is None or _objectives_agree(claimed, derived):
        return []
    return [f"objective: {solution.formulation} claims {claimed:.12g} but its allocation or "
            f"schedule gives {derived:.12g} (relative tolerance {OBJECTIVE_REL_TOL:g})"]


def _objectives_agree(claimed: float, derived: float) -> bool:
    """Same infinity, or within ``OBJECTIVE_REL_TOL`` relative (at least 1 unit) of each other."""
    if math.isinf(claimed) or math.isinf(derived):
        return claimed == derived
    scale = max(1.0, abs(claimed), abs(derived))
    return abs(claimed - derived) <= OBJECTIVE_REL_TOL * scale


def check_allocation(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """Time-share allocation X[j,k] (plus co-located pair shares Y[{j,j'},k]).

    * 0 <= X[j,k] <= 1, finite; job and accelerator exist;
    * X[j,k] > 0 only where the job has a throughput entry for k (it can run there);
    * per job: sum_k X[j,k] + sum_{pairs p containing j} sum_k Y[p,k] <= 1;
    * per type k: sum_j s_j X[j,k] + sum_p max(s_a, s_b) Y[p,k] <= n_k.
    """
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    pools = instance.cluster.accelerators
    job_total: dict[str, float] = defaultdict(float)
    gpus_used: dict[str, float] = defaultdict(float)
    for job_id, shares in solution.allocation.items():
        job = jobs.get(job_id)
        if job is None:
            out.append(f"allocation names unknown job {job_id!r}")
            continue
        for acc, x in shares.items():
            if acc not in pools:
                out.append(f"job {job_id}: unknown accelerator {acc!r}")
                continue
            if not math.isfinite(x) or x < -tol or x > 1 + tol:
                out.append(f"job {job_id} on {acc}: share {x} outside [0, 1]")
                continue
            if x > tol and acc not in job.throughput:
                out.append(f"job {job_id} on {acc}: share {x:.6g} but no throughput there")
            job_total[job_id] += x
            gpus_used[acc] += job.scale_factor * x
    for pair in solution.colocated_allocation:
        a, b = pair.jobs
        y, acc = pair.fraction, pair.accelerator
        if a not in jobs or b not in jobs:
            out.append(f"co-located pair {a}+{b} names an unknown job")
            continue
        if acc not in pools:
            out.append(f"co-located pair {a}+{b}: unknown accelerator {acc!r}")
            continue
        if not math.isfinite(y) or y < -tol or y > 1 + tol:
            out.append(f"co-located pair {a}+{b} on {acc}: share {y} outside [0, 1]")
            continue
        coloc = (jobs[a].colocated_throughput or {}).get(b, {})
        if y > tol and acc not in coloc:
            out.append(f"co-located pair {a}+{b} on {acc}: share {y:.6g} but no co-location "
                       "throughput given")
        job_total[a] += y
        job_total[b] += y
        gpus_used[acc] += max(jobs[a].scale_factor, jobs[b].scale_factor) * y
    for job_id, total in job_total.items():
        if total > 1 + tol:
            out.append(f"job {job_id}: shares sum to {total:.9g} > 1")
    for acc, used in gpus_used.items():
        cap = pools[acc].count
        if used > cap + tol * max(1.0, cap):
            out.append(f"accelerator {acc}: {used:.9g} GPUs allocated > {cap} available")
    return out


# ---------------------------------------------------------------------------- rounds


def check_rounds(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """Per-round placements (Gavel's round-based mechanism), round by round.

    In every round r, with P_r its placements:

    * each placement's job and accelerator exist; the job appears at most once in P_r;
    * whole gangs: gpus = s_j; ``gpu_ids`` (when given) are len = gpus distinct ids in
      0..n_k-1;
    * the job can run there: T[j,k] > 0 solo, or a co-location throughput with its partner on k;
    * space sharing: partners name each other and sit on the same type; the smaller gang's ids
      are a subset of the larger's; a GPU carries at most 2 jobs, and 2 only if they are
      partners;
    * capacity: sum of solo gangs + sum over pairs of max(s_a, s_b) <= n_k.

    ``tol`` is unused (GPU counts are integers); it is accepted for a uniform signature.
    """
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    for r in _rounds_to_inspect(instance, solution.rounds):
        placements = solution.rounds[r]
        out += _check_round_placements(instance, jobs, r, placements)
        out += _check_round_partners(instance, r, placements)
        out += _check_round_gpu_ids(instance, r, placements)
        out += _check_round_capacity(instance, r, placements)
    return out


def _rounds_to_inspect(instance: Instance, rounds: Sequence[Sequence[Placement]]) -> list[int]:
    """Rounds that may violate something, found with numpy over all placements at once.

    A round is clean -- the four per-round checks find nothing -- when every placement names
    a known job and type, has no partner, gpus = s_j, T[j,k] > 0, ``gpu_ids`` (when given)
    len = gpus ids in 0..n_k-1; no job is placed twice; no (type, GPU id) is held twice (a
    repeat inside one placement included); and sum of gangs <= n_k per type.  Every other
    round (co-located pairs included) is returned, ascending, for the exact per-round checks,
    so the violations and their order are those of checking every round one by one; a clean
    10^4-job round costs a few array operations instead of a Python walk over its GPU ids.
    """
    num_rounds = len(rounds)
    flat = [p for placements in rounds for p in placements]
    if not flat:
        return []
    job_index = instance.job_index()
    types = instance.types
    acc_index = {acc: k for k, acc in enumerate(types)}
    pools = instance.cluster.accelerators
    capacity = np.array([pools[acc].count for acc in types], dtype=np.int64)
    scale = np.array([job.scale_factor for job in instance.jobs] + [0], dtype=np.int64)
    runs = np.array([[job.throughput.get(acc, 0.0) > 0.0 for acc in types]
                     for job in instance.jobs] + [[False] * len(types)], dtype=bool)
    lengths = np.array([len(placements) for placements in rounds], dtype=np.int64)
    rnd = np.repeat(np.arange(num_rounds, dtype=np.int64), lengths)
    job = np.array([job_index.get(p.job, -1) for p in flat], dtype=np.int64)
    acc = np.array([acc_index.get(p.accelerator, -1) for p in flat], dtype=np.int64)
    gpus = np.array([p.gpus for p in flat], dtype=np.int64)
    id_lists = [p.gpu_ids for p in flat]
    bad = (job < 0) | (acc < 0) | np.array([p.partner is not None for p in flat], dtype=bool)
    bad |= gpus != scale[job]
    bad |= ~runs[job, acc]
    num_ids = np.array([-1 if ids is None else len(ids) for ids in id_lists], dtype=np.int64)
    bad |= (num_ids >= 0) & (num_ids != gpus)
    flagged = np.zeros(num_rounds, dtype=bool)
    flagged[rnd[bad]] = True
    # a job twice in one round
    num_jobs = max(len(job_index), 1)
    flagged[_repeated(rnd[job >= 0] * num_jobs + job[job >= 0]) // num_jobs] = True
    # GPU ids: in range, and no (round, type, id) held twice
    given = num_ids > 0
    owner = np.repeat(np.flatnonzero(given), num_ids[given])
    listed = itertools.chain.from_iterable(
        id_lists[i] or [] for i in np.flatnonzero(given).tolist())
    ids = np.fromiter(listed, dtype=np.int64, count=len(owner))
    ids_acc = np.maximum(acc[owner], 0)
    outside = (ids < 0) | (ids >= capacity[ids_acc])
    flagged[rnd[owner[outside]]] = True
    slots = max(int(capacity.max(initial=0)), 1)
    inside = ~outside
    held = (rnd[owner[inside]] * len(types) + ids_acc[inside]) * slots + ids[inside]
    flagged[_repeated(held) // (len(types) * slots)] = True
    # capacity per (round, type)
    known = acc >= 0
    used = np.bincount(rnd[known] * len(types) + acc[known], weights=gpus[known],
                       minlength=num_rounds * len(types)).reshape(num_rounds, len(types))
    flagged |= (used > capacity).any(axis=1)
    return np.flatnonzero(flagged).tolist()


def _repeated(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The values that occur more than once in ``keys`` (int64), each once or more."""
    ordered = np.sort(keys)
    return ordered[1:][ordered[1:] == ordered[:-1]]


def _check_round_placements(
    instance: Instance, jobs: dict[str, Job], r: int, placements: list[Placement]
) -> list[str]:
    """Each placement alone: job, accelerator, gang size, ids, throughput; once per round."""
    out: list[str] = []
    pools = instance.cluster.accelerators
    for job_id, times in Counter(p.job for p in placements).items():
        if times > 1:
            out.append(f"round {r}: job {job_id} placed {times} times")
    for p in placements:
        job = jobs.get(p.job)
        if job is None:
            out.append(f"round {r}: placement names unknown job {p.job!r}")
            continue
        if p.accelerator not in pools:
            out.append(f"round {r}: job {p.job}: unknown accelerator {p.accelerator!r}")
            continue
        where = f"round {r}: job {p.job} on {p.accelerator}"
        if p.gpus != job.scale_factor:
            out.append(f"{where}: gang of {p.gpus} GPUs but scale factor {job.scale_factor}")
        if p.gpu_ids is not None:
            out += _check_gpu_id_list(where, p, pools[p.accelerator].count)
        if p.partner is None and job.throughput.get(p.accelerator, 0.0) <= 0.0:
            out.append(f"{where}: no positive throughput there")
        if p.partner is not None:
            coloc = (job.colocated_throughput or {}).get(p.partner, {})
            if p.accelerator not in coloc:
                out.append(f"{where}: no co-location throughput with partner {p.partner}")
    return out


def _check_gpu_id_list(where: str, p: Placement, count: int) -> list[str]:
    """``gpu_ids`` of one placement: gpus of them, distinct, within 0..count-1."""
    ids = p.gpu_ids or []
    out: list[str] = []
    if len(ids) != p.gpus:
        out.append(f"{where}: {len(ids)} gpu_ids for a gang of {p.gpus} GPUs")
    if len(set(ids)) != len(ids):
        out.append(f"{where}: repeated gpu_ids {sorted(ids)}")
    bad = sorted(i for i in ids if not 0 <= i < count)
    if bad:
        out.append(f"{where}: gpu_ids {bad} outside 0..{count - 1}")
    return out


def _mutual_pairs(placements: list[Placement]) -> dict[str, Placement]:
    """Job -> its partner's placement, for partners that name each other on the same type."""
    by_job = {p.job: p for p in placements}
    out: dict[str, Placement] = {}
    for p in placements:
        q = by_job.get(p.partner) if p.partner is not None else None
        if q is not None and q.partner == p.job and q.accelerator == p.accelerator and q is not p:
            out[p.job] = q
    return out


def _check_round_partners(instance: Instance, r: int, placements: list[Placement]) -> list[str]:
    """Co-located partners name each other, share a type, and share GPUs (subset rule)."""
    out: list[str] = []
    mutual = _mutual_pairs(placements)
    for p in placements:
        if p.partner is None:
            continue
        where = f"round {r}: job {p.job} on {p.accelerator}"
        if p.partner == p.job:
            out.append(f"{where}: names itself as co-location partner")
            continue
        q = mutual.get(p.job)
        if q is None:
            out.append(
                f"{where}: names partner {p.partner} but {p.partner} is not placed on "
                f"{p.accelerator} naming {p.job} as its partner"
            )
            continue
        if p.job > q.job:  # report each pair once
            continue
        if (p.gpu_ids is None) != (q.gpu_ids is None):
            out.append(f"{where}: gpu_ids given for only one of the pair {p.job}+{q.job}")
        elif p.gpu_ids is not None and q.gpu_ids is not None:
            small, large = sorted((set(p.gpu_ids), set(q.gpu_ids)), key=len)
            if not small <= large:
                out.append(
                    f"{where}: co-located pair {p.job}+{q.job} does not share GPUs "
                    f"({sorted(p.gpu_ids)} vs {sorted(q.gpu_ids)})"
                )
    return out


def _check_round_gpu_ids(instance: Instance, r: int, placements: list[Placement]) -> list[str]:
    """A GPU carries at most two jobs in a round, and two only if they are partners."""
    out: list[str] = []
    mutual = _mutual_pairs(placements)
    holders: dict[tuple[str, int], list[str]] = defaultdict(list)
    for p in placements:
        for gpu in set(p.gpu_ids or []):
            holders[(p.accelerator, gpu)].append(p.job)
    for (acc, gpu), names in sorted(holders.items()):
        if len(names) > 2:
            out.append(f"round {r}: {acc} GPU {gpu} used by {len(names)} jobs ({_names(names)})")
        elif len(names) == 2:
            a, b = names
            partner = mutual.get(a)
            if partner is None or partner.job != b:
                out.append(
                    f"round {r}: {acc} GPU {gpu} used by both {a} and {b}, "
                    "which are not co-located partners"
                )
    return out


def _check_round_capacity(instance: Instance, r: int, placements: list[Placement]) -> list[str]:
    """sum of solo gangs + sum over partner pairs of max(s_a, s_b) <= n_k, per type k."""
    pools = instance.cluster.accelerators
    mutual = _mutual_pairs(placements)
    used: dict[str, int] = defaultdict(int)
    for p in placements:
        q = mutual.get(p.job)
        if q is None:
            used[p.accelerator] += p.gpus
        elif p.job < q.job:  # a pair counts once, at its larger gang
            used[p.accelerator] += max(p.gpus, q.gpus)
    return [
        f"round {r}: accelerator {acc}: {n} GPUs placed > {pools[acc].count} available"
        for acc, n in used.items()
        if acc in pools and n > pools[acc].count
    ]


def _names(names: Iterable[str]) -> str:
    """Comma-separated, at most ``_MAX_NAMES`` names."""
    items = list(names)
    shown = ", ".join(items[:_MAX_NAMES])
    return shown + (f", ... ({len(items)} in all)" if len(items) > _MAX_NAMES else "")


# -------------------------------------------------------------------------- schedule


def check_schedule(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """Timed schedule entries [start, end) of jobs on GPUs.

    * each entry: the job exists; arrival_j <= start <= end; gpus >= 1; its accelerator and
      node exist and agree (node n holds GPUs of one type).  ``node`` is read only when the
      cluster lists ``nodes``; an entry's type is its accelerator, else its node's, else the
      cluster's only type;
    * capacity at every instant t: on each node, sum of gpus of entries on it with
      start <= t < end is <= G_n; on each accelerator type, the same sum is <= n_k; the
      members of a merged group (``solution.groups``) are one job: their entries with the
      same start, end, GPUs, accelerator and node count once;
    * Saturn jobs (``configs`` set): scheduled exactly once (one configuration, one node: a job
      never spans nodes); the entry's (config, gpus) is one of the job's feasible configurations
      and end - start = runtime_s;
    * segmented Saturn jobs (entries carry ``round`` = segment index; e.g. introspective
      scheduling, which checkpoints and resumes jobs): indices 0..K-1 once each; segment k+1
      starts after segment k ends; each segment has a node and a feasible configuration; the
      segments cover the job exactly: sum_k max(0, end_k - start_k - o_k) / r_k = 1, with
      o_0 = 0 and o_k = ``metrics["restart_cost_s"]`` (seconds to resume; 0 when absent) for
      k >= 1, and r_k the configuration's true runtime ``metrics["true_runtime_s"][job]
      ["technique:gpus"]`` when the solution records it (a measured execution), else its
      ``runtime_s``;
    * Hare jobs (``rounds`` / ``tasks_per_round`` set): every entry has a round index in
      0..R_j-1 (0-based); round r holds m_j tasks; barrier: every task of round r+1 starts
      after every task of round r ended; a task on type k lasts task_seconds[k] (exactly);
      with task indices (``task``), each (round, index) in 0..m_j-1 appears exactly once;
    * Hare GPUs (:func:`_check_hare_gpus`): a task names its GPU within its type
      (``gpu_ids = [g]``, 0 <= g < n_k; implicit on a type of one GPU); a GPU runs one task at
      a time; a task that follows another job's task on its GPU starts at least
      sigma[job, type] after that task ended (``switch_seconds``); a GPU's first task pays
      sigma only when ``params.switch_on_first_task``;
    * with ``params.one_type_per_round``: the tasks of each round of a Hare job run on one GPU
      type.
    """
    out = _check_schedule_entries(instance, solution.schedule, tol)
    running = _one_entry_per_group(solution)
    out += _check_node_capacity(instance, running, tol)
    out += _check_type_capacity(instance, running, tol)
    by_job: dict[str, list[ScheduleEntry]] = defaultdict(list)
    for entry in solution.schedule:
        by_job[entry.job].append(entry)
    for job in instance.jobs:
        entries = by_job.get(job.id, [])
        if job.configs is not None and any(e.round is not None for e in entries):
            out += _check_saturn_segments(instance, solution, job, entries, tol)
        elif job.configs is not None:
            out += _check_saturn_job(instance, job, entries, tol)
        if job.rounds is not None or job.tasks_per_round is not None:
            out += _check_hare_job(job, by_job.get(job.id, []), tol)
            if instance.params.one_type_per_round:
                out += _check_hare_round_types(instance, job, entries)
    out += _check_hare_gpus(instance, solution.schedule, tol)
    return out


def _one_entry_per_group(solution: Solution) -> list[ScheduleEntry]:
    """The schedule with the entries of each merged group's members that share start, end,
    GPUs, accelerator and node kept once (a merged group runs as one job)."""
    group_of = {task: g for g, group in enumerate(solution.groups) for task in group}
    seen: set[tuple[object, ...]] = set()
    out: list[ScheduleEntry] = []
    for e in solution.schedule:
        g = group_of.get(e.job)
        if g is not None:
            key = (g, e.start, e.end, e.gpus, e.accelerator, e.node)
            if key in seen:
                continue
            seen.add(key)
        out.append(e)
    return out


def _duration_tol(seconds: float, tol: float) -> float:
    """Allowed error on a duration: relative REL_TOL plus absolute ``tol``."""
    return REL_TOL * abs(seconds) + tol


def _check_schedule_entries(
    instance: Instance, schedule: Sequence[ScheduleEntry], tol: float
) -> list[str]:
    """Each entry alone: job, times, GPU count, accelerator and node."""
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    pools = instance.cluster.accelerators
    nodes = {node.name: node for node in instance.cluster.nodes or []}
    for i, e in enumerate(schedule):
        where = f"schedule[{i}] job {e.job}"
        job = jobs.get(e.job)
        if job is None:
            out.append(f"schedule[{i}] names unknown job {e.job!r}")
            continue
        if not (math.isfinite(e.start) and math.isfinite(e.end)):
            out.append(f"{where}: start {e.start} / end {e.end} not finite")
            continue
        if e.start < job.arrival - tol:
            out.append(f"{where}: starts at {e.start:.9g} s before its arrival {job.arrival:.9g} s")
        if e.end < e.start - tol:
            out.append(f"{where}: ends at {e.end:.9g} s before it starts at {e.start:.9g} s")
        if e.gpus < 1:
            out.append(f"{where}: {e.gpus} GPUs (must be >= 1)")
        if e.accelerator is not None and e.accelerator not in pools:
            out.append(f"{where}: unknown accelerator {e.accelerator!r}")
        if e.node is not None and instance.cluster.nodes is not None:
            node = nodes.get(e.node)
            if node is None:
                out.append(f"{where}: unknown node {e.node!r}")
            elif e.accelerator is not None and e.accelerator != node.accelerator:
                out.append(
                    f"{where}: accelerator {e.accelerator} but node {e.node} holds "
                    f"{node.accelerator} GPUs"
                )
        if e.accelerator is None and e.node is None and len(pools) > 1:
            out.append(f"{where}: names neither an accelerator nor a node (cluster has "
                       f"{len(pools)} types)")
    return out


def _entry_type(instance: Instance, e: ScheduleEntry) -> str | None:
    """Accelerator type an entry runs on: its own, its node's, or the cluster's only type."""
    pools = instance.cluster.accelerators
    if e.accelerator is not None:
        return e.accelerator if e.accelerator in pools else None
    if e.node is not None and instance.cluster.nodes is not None:
        for node in instance.cluster.nodes:
            if node.name == e.node:
                return node.accelerator
    return next(iter(pools)) if len(pools) == 1 else None


@dataclass(frozen=True)
class _Peak:
    """Highest GPU use of one resource: ``gpus`` in use at time ``at`` by ``jobs``."""

    gpus: int
    at: float
    jobs: tuple[str, ...]


def _peak_use(entries: Iterable[ScheduleEntry], cap: int, tol: float) -> _Peak | None:
    """Sweep over start/end events of half-open intervals [start, end).

    Ends are moved ``tol`` earlier, so a start within ``tol`` after an end does not overlap it;
    at equal times ends are processed before starts.  Returns the peak use when it exceeds
    ``cap``, else None.
    """
    events: list[tuple[float, int, int]] = []
    items = [e for e in entries if e.end - e.start > tol and math.isfinite(e.end)]
    for k, e in enumerate(items):
        events.append((e.start, 1, k))
        events.append((e.end - tol, 0, k))
    events.sort()
    active: dict[int, ScheduleEntry] = {}
    in_use = 0
    peak: _Peak | None = None
    for at, is_start, k in events:
        e = items[k]
        if not is_start:
            in_use -= e.gpus
            active.pop(k, None)
            continue
        in_use += e.gpus
        active[k] = e
        if in_use > cap and (peak is None or in_use > peak.gpus):
            peak = _Peak(in_use, at, tuple(x.job for x in active.values()))
    return peak


def _check_node_capacity(
    instance: Instance, schedule: Sequence[ScheduleEntry], tol: float
) -> list[str]:
    """At every instant, GPUs in use on node n <= G_n."""
    out: list[str] = []
    by_node: dict[str, list[ScheduleEntry]] = defaultdict(list)
    for e in schedule:
        if e.node is not None:
            by_node[e.node].append(e)
    for node in instance.cluster.nodes or []:
        peak = _peak_use(by_node.get(node.name, []), node.gpus, tol)
        if peak is not None:
            out.append(
                f"node {node.name}: {peak.gpus} GPUs in use at t={peak.at:.9g} s > "
                f"{node.gpus} available (jobs {_names(peak.jobs)})"
            )
    return out


def _check_type_capacity(
    instance: Instance, schedule: Sequence[ScheduleEntry], tol: float
) -> list[str]:
    """At every instant, GPUs in use of type k <= n_k."""
    out: list[str] = []
    by_type: dict[str, list[ScheduleEntry]] = defaultdict(list)
    for e in schedule:
        acc = _entry_type(instance, e)
        if acc is not None:
            by_type[acc].append(e)
    for acc, entries in by_type.items():
        cap = instance.cluster.accelerators[acc].count
        peak = _peak_use(entries, cap, tol)
        if peak is not None:
            out.append(
                f"accelerator {acc}: {peak.gpus} GPUs in use at t={peak.at:.9g} s > "
                f"{cap} available (jobs {_names(peak.jobs)})"
            )
    return out


def _check_saturn_job(
    instance: Instance, job: Job, entries: list[ScheduleEntry], tol: float
) -> list[str]:
    """One entry, one node, one feasible configuration, lasting exactly its runtime."""
    if not entries:
        return [f"job {job.id}: not scheduled (a Saturn job runs exactly once)"]
    out: list[str] = []
    if len(entries) > 1:
        out.append(
            f"job {job.id}: {len(entries)} schedule entries (a Saturn job runs once, with one "
            "configuration, on one node)"
        )
    for e in entries:
        where = f"job {job.id}"
        if instance.cluster.nodes is not None and e.node is None:
            out.append(f"{where}: no node given (cluster has nodes)")
        if e.config is None:
            out.append(f"{where}: no configuration given")
            continue
        match = [c for c in job.configs or [] if c.technique == e.config and c.gpus == e.gpus]
        if not match:
            offered = ", ".join(f"{c.technique}x{c.gpus}" for c in job.configs or [])
            out.append(
                f"{where}: configuration {e.config} on {e.gpus} GPUs is not one of its "
                f"configurations ({offered})"
            )
            continue
        config = match[0]
        if not config.feasible:
            out.append(f"{where}: configuration {e.config} on {e.gpus} GPUs is infeasible")
        runs = e.end - e.start
        if abs(runs - config.runtime_s) > _duration_tol(config.runtime_s, tol):
            out.append(
                f"{where}: runs {runs:.9g} s but configuration {e.config} on {e.gpus} GPUs "
                f"takes {config.runtime_s:.9g} s"
            )
    return out


def _saturn_config(job: Job, e: ScheduleEntry, where: str) -> tuple[SaturnConfig | None,
                                                                     list[str]]:
    """The feasible configuration an entry names, or None with the violations."""
    if e.config is None:
        return None, [f"{where}: no configuration given"]
    match = [c for c in job.configs or [] if c.technique == e.config and c.gpus == e.gpus]
    if not match:
        offered = ", ".join(f"{c.technique}x{c.gpus}" for c in job.configs or [])
        return None, [f"{where}: configuration {e.config} on {e.gpus} GPUs is not one of its "
                      f"configurations ({offered})"]
    if not match[0].feasible:
        return None, [f"{where}: configuration {e.config} on {e.gpus} GPUs is infeasible"]
    return match[0], []


def _true_runtime(job: Job, config: SaturnConfig) -> float:
    """r = ``runtime_s`` x ``job.runtime_factor`` (None = 1): the configuration's true
    runtime, s, from the instance (never from the solution's metrics)."""
    factor = job.runtime_factor if job.runtime_factor is not None else 1.0
    return config.runtime_s * factor


def _check_saturn_segments(
    instance: Instance, solution: Solution, job: Job, entries: list[ScheduleEntry], tol: float
) -> list[str]:
    """Segments 0..K-1, in time order, feasible configurations, covering the job once:
    sum_k max(0, end_k - start_k - o_k) / r_k = 1 with r_k = :func:`_true_runtime` and
    o_0 = 0, o_k = ``instance.params.restart_cost_s`` (None = 0) for k >= 1.  Both come from
    the instance; what the solution's ``metrics`` report is not read."""
    out: list[str] = []
    restart = instance.params.restart_cost_s or 0.0
    if any(e.round is None for e in entries):
        out.append(f"job {job.id}: some entries have a segment index (round) and some not")
        return out
    indices = sorted(e.round for e in entries if e.round is not None)
    if indices != list(range(len(entries))):
        out.append(f"job {job.id}: segment indices {indices} are not 0..{len(entries) - 1} "
                   "once each")
        return out
    ordered = sorted(entries, key=lambda e: e.round or 0)
    for prev, nxt in pairwise(ordered):
        if nxt.start < prev.end - tol:
            out.append(f"job {job.id}: segment {nxt.round} starts at {nxt.start:.9g} s before "
                       f"segment {prev.round} ends at {prev.end:.9g} s")
    done = 0.0
    slack = REL_TOL
    for e in ordered:
        where = f"job {job.id} segment {e.round}"
        if instance.cluster.nodes is not None and e.node is None:
            out.append(f"{where}: no node given (cluster has nodes)")
        config, problems = _saturn_config(job, e, where)
        out += problems
        if config is None:
            continue
        runtime = _true_runtime(job, config)
        overhead = restart if e.round else 0.0
        worked = max(0.0, e.end - e.start - overhead)
        if runtime <= 0:
            done += 1.0 if worked > 0 or e.end - e.start >= overhead - tol else 0.0
            continue
        done += worked / runtime
        slack += _duration_tol(runtime, tol) / runtime
    if abs(done - 1.0) > slack:
        out.append(f"job {job.id}: segments cover {done:.9g} of the job (must be 1: "
                   "sum of (duration - restart cost) / true runtime)")
    return out


def _check_hare_job(job: Job, entries: list[ScheduleEntry], tol: float) -> list[str]:
    """Round indices, m_j tasks per round, barriers between rounds, task durations."""
    out: list[str] = []
    by_round: dict[int, list[ScheduleEntry]] = defaultdict(list)
    for e in entries:
        if e.round is None:
            out.append(f"job {job.id}: task at t={e.start:.9g} s has no round index")
        elif e.round < 0 or (job.rounds is not None and e.round >= job.rounds):
            out.append(f"job {job.id}: round index {e.round} outside 0..{(job.rounds or 1) - 1}")
        else:
            by_round[e.round].append(e)
        out += _check_hare_task_time(job, e, tol)
    if job.tasks_per_round is not None:
        expected = range(job.rounds) if job.rounds is not None else sorted(by_round)
        for r in expected:
            n = len(by_round.get(r, []))
            if n != job.tasks_per_round:
                out.append(f"job {job.id}: round {r} has {n} tasks, expected "
                           f"{job.tasks_per_round}")
    out += _check_hare_task_indices(job, by_round)
    present = sorted(by_round)
    for r, nxt in pairwise(present):
        ended = max(e.end for e in by_round[r])
        starts = min(e.start for e in by_round[nxt])
        if starts < ended - tol:
            out.append(
                f"job {job.id}: round {nxt} starts at {starts:.9g} s before round {r} "
                f"ends at {ended:.9g} s (barrier)"
            )
    return out


def _check_hare_round_types(instance: Instance, job: Job,
                            entries: list[ScheduleEntry]) -> list[str]:
    """With ``params.one_type_per_round``: all tasks of a round on one GPU type."""
    types: dict[int, set[str]] = defaultdict(set)
    for e in entries:
        acc = _entry_type(instance, e)
        if e.round is not None and acc is not None:
            types[e.round].add(acc)
    return [f"job {job.id}: round {r} runs on {', '.join(sorted(used))} (one_type_per_round: "
            "one GPU type per round)"
            for r, used in sorted(types.items()) if len(used) > 1]


def _check_hare_task_time(job: Job, e: ScheduleEntry, tol: float) -> list[str]:
    """A task on type k lasts at least task_seconds[k], and k is one the job can use."""
    if job.task_seconds is None or e.accelerator is None:
        return []
    need = job.task_seconds.get(e.accelerator)
    if need is None:
        return [f"job {job.id}: task on {e.accelerator}, which has no task_seconds"]
    runs = e.end - e.start
    if runs < need - _duration_tol(need, tol):
        return [f"job {job.id}: task on {e.accelerator} runs {runs:.9g} s < its task time "
                f"{need:.9g} s"]
    if runs > need + _duration_tol(need, tol):
        return [f"job {job.id}: task on {e.accelerator} runs {runs:.9g} s > its task time "
                f"{need:.9g} s (a task runs exactly its task time)"]
    return []


def _check_hare_task_indices(job: Job, by_round: dict[int, list[ScheduleEntry]]) -> list[str]:
    """With task indices given: each (round, index), index in 0..m_j-1, appears once."""
    out: list[str] = []
    for r, entries in sorted(by_round.items()):
        indices = Counter(e.task for e in entries if e.task is not None)
        for index, times in sorted(indices.items()):
            if job.tasks_per_round is not None and not 0 <= index < job.tasks_per_round:
                out.append(f"job {job.id}: round {r} task index {index} outside "
                           f"0..{job.tasks_per_round - 1}")
            elif times > 1:
                out.append(f"job {job.id}: round {r} task {index} runs {times} times "
                           "(every task runs exactly once)")
    return out


def _hare_gpu(instance: Instance, e: ScheduleEntry) -> tuple[str, int] | str | None:
    """(type, GPU index) of a Hare task entry; a violation message when the entry names no
    GPU where it must or one outside the pool; None when its type is unknown (reported
    elsewhere)."""
    acc = _entry_type(instance, e)
    if acc is None:
        return None
    count = instance.cluster.accelerators[acc].count
    if e.gpu_ids is None:
        if count == 1:
            return acc, 0
        return (f"job {e.job}: task at t={e.start:.9g} s on {acc} names no GPU (gpu_ids; the "
                f"type has {count} GPUs)")
    if len(e.gpu_ids) != 1 or not 0 <= e.gpu_ids[0] < count:
        return (f"job {e.job}: task at t={e.start:.9g} s on {acc} has gpu_ids {e.gpu_ids} "
                f"(one index in 0..{count - 1})")
    return acc, e.gpu_ids[0]


def _check_hare_gpus(instance: Instance, schedule: Sequence[ScheduleEntry],
                     tol: float) -> list[str]:
    """Per GPU, tasks of Hare jobs in start order: no overlap, switch gaps, first task."""
    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    on_gpu: dict[tuple[str, int], list[ScheduleEntry]] = defaultdict(list)
    for e in schedule:
        job = jobs.get(e.job)
        if job is None or (job.rounds is None and job.tasks_per_round is None):
            continue
        gpu = _hare_gpu(instance, e)
        if isinstance(gpu, str):
            out.append(gpu)
        elif gpu is not None:
            on_gpu[gpu].append(e)
    first_pays = instance.params.switch_on_first_task
    for (acc, g), entries in sorted(on_gpu.items()):
        entries.sort(key=lambda e: (e.start, e.end))
        first = entries[0]
        need = jobs[first.job].switch_seconds_on(acc)
        if first_pays and first.start < need - tol:
            out.append(f"{acc} GPU {g}: first task (job {first.job}) starts at "
                       f"{first.start:.9g} s < its switch time {need:.9g} s "
                       "(switch_on_first_task)")
        for a, b in pairwise(entries):
            if b.start < a.end - tol:
                out.append(f"{acc} GPU {g}: tasks of {a.job} [{a.start:.9g}, {a.end:.9g}) and "
                           f"{b.job} [{b.start:.9g}, {b.end:.9g}) overlap")
                continue
            if a.job == b.job:
                continue
            need = jobs[b.job].switch_seconds_on(acc)
            if b.start < a.end + need - tol:
                out.append(f"{acc} GPU {g}: task of {b.job} starts at {b.start:.9g} s, "
                           f"{b.start - a.end:.9g} s after {a.job}'s task ended; the switch "
                           f"needs {need:.9g} s")
    return out


# ---------------------------------------------------------------------- merged groups


def check_groups(instance: Instance, solution: Solution, *, tol: float = 1e-6) -> list[str]:
    """Merged Titan task groups (``solution.groups``), re-derived from the instance:

    * a group has at least two tasks, all known, and a task is in at most one group;
    * its tasks fine-tune the same base model and none had started (``steps_done`` = 0);
    * every two of its tasks have task similarity S >= ``params.similarity_threshold`` (the
      Titan default when unset), S from the class labels on the concept hierarchy;
    * its tasks are scheduled and start together (their first entries' starts within
      ``tol``).
    """
    from schedlab.formulations.titan.merge import (
        DEFAULT_SIMILARITY_THRESHOLD,
        hierarchy_similarity,
    )

    out: list[str] = []
    jobs = {job.id: job for job in instance.jobs}
    threshold = instance.params.similarity_threshold
    if threshold is None:
        threshold = DEFAULT_SIMILARITY_THRESHOLD
    starts: dict[str, float] = {}
    for e in solution.schedule:
        starts[e.job] = min(starts.get(e.job, math.inf), e.start)
    owner: dict[str, int] = {}
    for g, group in enumerate(solution.groups):
        if len(group) < 2:
            out.append(f"group {g}: {len(group)} task(s) (a merged group has at least 2)")
        known = []
        for task in group:
            if task not in jobs:
                out.append(f"group {g}: unknown task {task!r}")
                continue
            if task in owner:
                out.append(f"task {task} is in groups {owner[task]} and {g}")
            owner[task] = g
            known.append(jobs[task])
            if jobs[task].steps_done > 0:
                out.append(f"group {g}: task {task} had started (steps_done "
                           f"{jobs[task].steps_done:.9g})")
        for a, b in itertools.combinations(known, 2):
            if a.base_model is None or a.base_model != b.base_model:
                out.append(f"group {g}: {a.id} and {b.id} fine-tune different base models "
                           f"({a.base_model} vs {b.base_model})")
                continue
            s = hierarchy_similarity(a.classes or [], b.classes or [], a.label_set,
                                     b.label_set)
            if s < threshold - 1e-12:
                out.append(f"group {g}: task similarity of {a.id} and {b.id} is {s:.6g} < "
                           f"threshold {threshold:.6g}")
        scheduled = [job for job in known if job.id in starts]
        for job in known:
            if job.id not in starts:
                out.append(f"group {g}: task {job.id} has no schedule entry")
        for job in scheduled[1:]:
            first = scheduled[0]
            if abs(starts[job.id] - starts[first.id]) > tol:
                out.append(f"group {g}: {job.id} starts at {starts[job.id]:.9g} s but "
                           f"{first.id} at {starts[first.id]:.9g} s")
    return out
