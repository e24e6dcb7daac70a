r"""``hare.exact``: the Hare scheduling problem solved exactly as a MILP, for small instances.

**The problem** (docs/formulations/hare.md).  Job j has weight w_j, arrival r_j, R_j rounds
of m_j tasks; a task of j runs p[j,k] seconds on a GPU of type k (inf: it cannot run there);
the cluster has n_k GPUs of type k.  Every task runs once, without preemption, on one GPU of a
usable type; a GPU runs one task at a time; a task of round q+1 starts after every task of
round q of its job has ended; round-1 tasks start at or after r_j; when task b directly
follows task a on GPU g and the two belong to different jobs, b starts no earlier than
end(a) + sigma[job(b), type(g)] (a GPU's first task pays nothing, or sigma too with
``first_pays``).  Minimize sum_j w_j C_j, C_j the end of j's last task.

**The formulation: continuous time, individual GPUs, immediate successors.**  Tasks t
(job by job, round by round), GPUs g (type by type).  Variables

* x[t,g] in {0,1}: t runs on g (only usable pairs);
* h[t,g] in {0,1}: t is the first task on g (the head of g's sequence);
* y[a,b] in {0,1}: b runs directly after a on the same GPU (a != b, both usable on a common
  type; never from a later round of a job to an earlier one, nor against the start order of
  two tasks of one round, see the symmetry rows);
* S_t >= 0 the start of t, F[j,q] the end of round q of j (C_j = F[j, R_j - 1]).

Rows (e_t = S_t + sum_g p[t,g] x[t,g] is t's end):

* every task on one GPU: sum_g x[t,g] = 1;
* sequences: sum_a y[a,b] + sum_g h[b,g] = 1 (a predecessor or the head of a GPU);
  sum_b y[a,b] <= 1 (at most one successor); sum_t h[t,g] <= 1; h[t,g] <= x[t,g];
  a successor shares its predecessor's GPU: y[a,b] + x[a,g] - x[b,g] <= 1 and
  y[a,b] + x[b,g] - x[a,g] <= 1 for every GPU g;
* the switch gap between direct successors:
  S_b >= e_a + sum_g s[a,b,g] x[b,g] - M_ab (1 - y[a,b]) with s[a,b,g] = sigma[job(b),
  type(g)] when job(a) != job(b), else 0 (with ``first_pays``: S_b >= sum_g sigma[job(b),
  type(g)] h[b,g]);
* rounds: F[j,q] >= e_t for t in round q of j; S_t >= F[j,q-1] for q >= 1; S_t >= r_j
  (a column bound) in round 0;
* with ``params.one_type_per_round`` ("no spread"): z[j,q,k] in {0,1} per round and usable
  type, sum_k z[j,q,k] = 1 and x[t,g] <= z[j(t),q(t),type(g)]: the round's tasks run on
  its one chosen type;
* symmetry: the tasks of one round are alike, so they start in index order (S_t <= S_{t+1});
  the GPUs of one type are alike, so a GPU has a head only if the previous GPU of its type
  has one.

Objective: min sum_j w_j F[j, R_j - 1].

**Exact.**  A schedule gives a solution (x from the GPUs, h and y from each GPU's order, S
the starts, F the round ends); conversely in a solution every task has one predecessor (a
task or a GPU's head), at most one successor on its GPU, and S rises strictly along y (task
times are > 0), so there is no cycle and each GPU's tasks form one sequence in which the gap
applies exactly between direct successors; no two tasks of a GPU overlap since each starts
after its predecessor's end.  (Since the gap depends only on the incoming job and the GPU's
type, the same rule for every earlier task of another job on the GPU follows from it, so
pairwise order variables would be exact too; they would not be for sequence-dependent gaps.
docs/formulations/hare.md, "Exact model", has the argument.)

**Big-M from the data.**  A serial schedule (every job, by arrival, task after task on one
GPU of its fastest type, each job's first task after the job's gap) is feasible; its value U
bounds the optimum, so in every optimal schedule w_j C_j <= U - sum_{i != j} w_i L_i with
L_i = r_i + R_i min_k p[i,k].  This gives each job a horizon H_j, each task an interval for
S_t (from r_j + q min_k p[j,k] to H_j - (R_j - q) min_k p[j,k]) and each pair
M_ab = (latest end of a) + max_k sigma[job(b),k] - (earliest start of b).  The serial
schedule is also the solver's start.

**Limits.**  At most 6 jobs, 4 GPUs, 3 rounds and 24 tasks (larger inputs raise an
InputError naming the limit).  ``optimal`` only when HiGHS proved the optimum within its MIP
gap; a time limit (``params.time_limit_s``, default 60 s) gives the incumbent as
``time_limit`` with the gap from the solver's bound.  The reported schedule is the solver's
assignment and order retimed to the earliest starts, which is feasible exactly (no solver
tolerance inside) and never later than the solver's; the objective is re-derived from it.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo
import scipy.sparse as sp

from schedlab.errors import InputError
from schedlab.formulations.arrays import add_rows, linear_expression
from schedlab.formulations.base import Formulation
from schedlab.formulations.hare.model import (
    HareData,
    Task,
    hare_data,
    hare_solution,
    objective_of_schedule,
    reconcile_bound,
)
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions, matrix_model

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The sizes the exact model accepts.
MAX_JOBS = 6
MAX_GPUS = 4
MAX_ROUNDS = 3
MAX_TASKS = 24
#: Time limit of a solve when neither the options nor the instance give one, s.
DEFAULT_TIME_LIMIT_S = 60.0


# --------------------------------------------------------------------------- tasks, GPUs


@dataclass(frozen=True)
class TaskIndex:
    """Tasks t (job by job, round by round, index within the round) and GPUs g (type by
    type, index within the type) of a :class:`HareData`."""

    job: IntArray
    round: IntArray
    index: IntArray
    gpu_type: IntArray
    gpu_index: IntArray

    @classmethod
    def of(cls, data: HareData) -> TaskIndex:
        """The tasks and GPUs of ``data``."""
        per_job = data.rounds * data.tasks
        job = np.repeat(np.arange(data.num_jobs), per_job).astype(np.int64)
        rnd = np.concatenate([np.repeat(np.arange(r), m) for r, m in
                              zip(data.rounds, data.tasks, strict=True)] or [np.zeros(0, np.int64)])
        idx = np.concatenate([np.tile(np.arange(m), r) for r, m in
                              zip(data.rounds, data.tasks, strict=True)] or [np.zeros(0, np.int64)])
        gtype = np.repeat(np.arange(data.num_types), data.gpus).astype(np.int64)
        gidx = np.concatenate([np.arange(n) for n in data.gpus] or [np.zeros(0, np.int64)])
        return cls(job=job, round=rnd.astype(np.int64), index=idx.astype(np.int64),
                   gpu_type=gtype, gpu_index=gidx.astype(np.int64))

    @property
    def num_tasks(self) -> int:
        """n."""
        return len(self.job)

    @property
    def num_gpus(self) -> int:
        """G."""
        return len(self.gpu_type)


def check_limits(data: HareData, name: str = "hare.exact") -> None:
    """InputError naming the first limit (module docstring) that ``data`` exceeds, or the
    first job that can run on no GPU type present."""
    for what, value, limit, where in (
            ("jobs", data.num_jobs, MAX_JOBS, "jobs"),
            ("GPUs", int(data.gpus.sum()), MAX_GPUS, "cluster.accelerators"),
            ("rounds per job", int(data.rounds.max(initial=0)), MAX_ROUNDS, "jobs"),
            ("tasks in all", data.total_tasks, MAX_TASKS, "jobs")):
        if value > limit:
            raise InputError(f"{name} solves at most {limit} {what} exactly, got {value} "
                             "(hare.greedy and hare.lp_bound take larger instances)",
                             field=where)
    for j in np.flatnonzero(~data.usable.any(axis=1)):
        raise InputError(f"job {data.job_ids[j]!r} can run on no GPU type present",
                         field=f"jobs[{int(j)}].task_seconds")


# ---------------------------------------------------------------------- schedules


def earliest_starts(data: HareData, tasks: TaskIndex, gpu: IntArray,
                    order: list[list[int]]) -> FloatArray:
    """Earliest start of every task given its GPU ``gpu[t]`` (global index) and each GPU's
    task order ``order[g]``: the latest of its arrival (round 0), its previous round's end,
    and its GPU predecessor's end plus the switch gap (module docstring).  A ValueError when
    the orders and the round barriers form a cycle."""
    job, rnd, n = tasks.job, tasks.round, tasks.num_tasks
    seconds = data.seconds[job, tasks.gpu_type[gpu]]
    pred = np.full(n, -1, dtype=np.int64)
    for seq in order:
        for a, b in itertools.pairwise(seq):
            pred[b] = a
    start = np.full(n, np.nan)
    round_end: dict[tuple[int, int], float] = {}  # rounds whose every task is timed
    partial: dict[tuple[int, int], float] = {}
    left: dict[tuple[int, int], int] = {}
    for j_t, q_t in zip(job.tolist(), rnd.tolist(), strict=True):
        left[j_t, q_t] = left.get((j_t, q_t), 0) + 1
    done = np.zeros(n, dtype=bool)
    while not done.all():
        progressed = False
        for t in np.flatnonzero(~done):
            j, q, a = int(job[t]), int(rnd[t]), int(pred[t])
            if (q > 0 and (j, q - 1) not in round_end) or (a >= 0 and not done[a]):
                continue
            k = tasks.gpu_type[gpu[t]]
            s = data.arrival[j] if q == 0 else round_end[j, q - 1]
            if a >= 0:
                gap = data.switch[j, k] if job[a] != j else 0.0
                s = max(s, start[a] + seconds[a] + gap)
            elif data.first_task_pays:
                s = max(s, data.switch[j, k])
            start[t] = s
            done[t] = progressed = True
            partial[j, q] = max(partial.get((j, q), -math.inf), s + seconds[t])
            left[j, q] -= 1
            if left[j, q] == 0:
                round_end[j, q] = partial[j, q]
        if not progressed:
            raise ValueError("the GPU orders and the round barriers form a cycle")
    return start


def serial_schedule(data: HareData, tasks: TaskIndex) -> tuple[IntArray, FloatArray]:
    """(GPU, start) per task of the serial schedule (module docstring): jobs by arrival, each
    on the first GPU of its fastest type, one task at a time on the whole cluster, each job's
    first task after the job's switch gap."""
    best = np.argmin(np.where(data.usable, data.seconds, np.inf), axis=1)
    first_gpu = np.concatenate([[0], np.cumsum(data.gpus)[:-1]]).astype(np.int64)
    gpu = first_gpu[best[tasks.job]]
    start = np.zeros(tasks.num_tasks)
    clock = 0.0
    for j in sorted(range(data.num_jobs), key=lambda i: (data.arrival[i], i)):
        k = best[j]
        clock = max(clock + data.switch[j, k], data.arrival[j])
        for t in np.flatnonzero(tasks.job == j):
            start[t] = clock
            clock += data.seconds[j, k]
    return gpu, start


def to_tasks(data: HareData, tasks: TaskIndex, gpu: IntArray, start: FloatArray) -> list[Task]:
    """The model's :class:`Task` s of a timed assignment."""
    k = tasks.gpu_type[gpu]
    end = start + data.seconds[tasks.job, k]
    return [Task(job=int(tasks.job[t]), round=int(tasks.round[t]), index=int(tasks.index[t]),
                 type=int(k[t]), gpu=int(tasks.gpu_index[gpu[t]]), start=float(start[t]),
                 end=float(end[t])) for t in range(tasks.num_tasks)]


def gpu_orders(gpu: IntArray, start: FloatArray, num_gpus: int) -> list[list[int]]:
    """Each GPU's tasks by start time (ties: task index)."""
    return [sorted(np.flatnonzero(gpu == g).tolist(), key=lambda t: (start[t], t))
            for g in range(num_gpus)]


# ---------------------------------------------------------------------------- the MILP


class _Rows:
    """Blocks of rows lower <= A x <= upper gathered as COO entries."""

    def __init__(self) -> None:
        self.rows: list[IntArray] = []
        self.cols: list[IntArray] = []
        self.vals: list[FloatArray] = []
        self.lower: list[FloatArray] = []
        self.upper: list[FloatArray] = []
        self.count = 0

    def add(self, rows: npt.ArrayLike, cols: npt.ArrayLike, vals: npt.ArrayLike,
            lower: npt.ArrayLike, upper: npt.ArrayLike, count: int) -> None:
        """``count`` rows; ``rows`` 0..count-1 within the block."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.rows.append(r + self.count)
        self.cols.append(np.asarray(cols, dtype=np.int64).reshape(-1))
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), r.shape).copy())
        self.lower.append(np.broadcast_to(np.asarray(lower, dtype=float), (count,)).copy())
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=float), (count,)).copy())
        self.count += count

    def matrix(self, num_columns: int) -> tuple[sp.csr_matrix, FloatArray, FloatArray]:
        """(A, lower, upper)."""
        a = sp.csr_matrix((np.concatenate(self.vals),
                           (np.concatenate(self.rows), np.concatenate(self.cols))),
                          shape=(self.count, num_columns))
        a.sum_duplicates()
        return a, np.concatenate(self.lower), np.concatenate(self.upper)


@dataclass(frozen=True)
class ExactModel:
    """The MILP of the module docstring as arrays, with its column map.

    Columns: x (``pair_task``, ``pair_gpu``), then h (the same pairs), then y (``succ_from``,
    ``succ_to``), then S (one per task), then F (one per job and round, job by job), then,
    with ``one_type_per_round``, z (one per round and usable type, round by round).
    """

    data: HareData
    tasks: TaskIndex
    pair_task: IntArray
    pair_gpu: IntArray
    succ_from: IntArray
    succ_to: IntArray
    matrix: sp.csr_matrix
    row_lower: FloatArray
    row_upper: FloatArray
    col_lower: FloatArray
    col_upper: FloatArray
    cost: FloatArray
    integer: npt.NDArray[np.bool_]
    start: FloatArray
    upper_bound: float

    @property
    def num_pairs(self) -> int:
        """Usable (task, GPU) pairs P."""
        return len(self.pair_task)

    @property
    def s_offset(self) -> int:
        """First S column."""
        return 2 * self.num_pairs + len(self.succ_from)

    def schedule(self, values: FloatArray) -> tuple[IntArray, FloatArray]:
        """(GPU, earliest start) per task of a solution vector: the GPUs from x, each GPU's
        order from h and y, the times retimed by :func:`earliest_starts`."""
        n, num_gpus, pairs = self.tasks.num_tasks, self.tasks.num_gpus, self.num_pairs
        x = values[:pairs] > 0.5
        h = values[pairs:2 * pairs] > 0.5
        y = values[2 * pairs:self.s_offset] > 0.5
        gpu = np.full(n, -1, dtype=np.int64)
        gpu[self.pair_task[x]] = self.pair_gpu[x]
        succ = np.full(n, -1, dtype=np.int64)
        succ[self.succ_from[y]] = self.succ_to[y]
        order: list[list[int]] = [[] for _ in range(num_gpus)]
        for t, g in zip(self.pair_task[h], self.pair_gpu[h], strict=True):
            while t >= 0 and len(order[g]) <= n:
                order[g].append(int(t))
                t = int(succ[t])
        placed = sorted(t for seq in order for t in seq)
        if placed != list(range(n)) or np.any(gpu < 0) or any(
                np.any(gpu[seq] != g) for g, seq in enumerate(order)):
            raise ValueError("the solver's sequences do not cover every task once on its GPU")
        return gpu, earliest_starts(self.data, self.tasks, gpu, order)


def build_exact(data: HareData) -> ExactModel:
    """The MILP of the module docstring for ``data`` (limits checked by the caller)."""
    tasks = TaskIndex.of(data)
    job, rnd, gtype = tasks.job, tasks.round, tasks.gpu_type
    n, num_gpus = tasks.num_tasks, tasks.num_gpus
    usable = data.usable[job][:, gtype]                      # (n, G)
    p_tg = np.where(usable, data.seconds[job][:, gtype], 0.0)
    sigma_tg = data.switch[job][:, gtype]                    # sigma[job(t), type(g)]
    minp = data.min_seconds

    # horizons from the serial schedule
    s_gpu, s_start = serial_schedule(data, tasks)
    upper = objective_value(data, tasks, s_gpu, s_start)
    low = data.arrival + data.rounds * minp
    others = float(data.weight @ low) - data.weight * low
    horizon = (upper - others) / data.weight
    horizon = horizon * (1 + 1e-9) + 1e-6
    s_lo = data.arrival[job] + rnd * minp[job]
    s_hi = horizon[job] - (data.rounds[job] - rnd) * minp[job]
    e_hi = s_hi + minp[job]                                   # latest end of t's round

    # columns
    pair_task, pair_gpu = np.nonzero(usable)
    pairs = len(pair_task)
    xcol = np.full((n, num_gpus), -1, dtype=np.int64)
    xcol[pair_task, pair_gpu] = np.arange(pairs)
    hcol = np.where(xcol >= 0, xcol + pairs, -1)
    share = (usable.astype(np.int64) @ usable.T.astype(np.int64)) > 0
    a_idx, b_idx = np.nonzero(share)
    same_job = job[a_idx] == job[b_idx]
    keep = (a_idx != b_idx) & ~(same_job & (rnd[a_idx] > rnd[b_idx])) & ~(
        same_job & (rnd[a_idx] == rnd[b_idx]) & (a_idx > b_idx))
    a_idx, b_idx = a_idx[keep], b_idx[keep]
    other_job = job[a_idx] != job[b_idx]
    num_y = len(a_idx)
    ycol = 2 * pairs + np.arange(num_y)
    scol = 2 * pairs + num_y + np.arange(n)
    round_first = np.concatenate([[0], np.cumsum(data.rounds)[:-1]]).astype(np.int64)
    fcol_of = 2 * pairs + num_y + n + round_first[job] + rnd   # F[job(t), round(t)]
    num_f = int(data.rounds.sum())
    size = 2 * pairs + num_y + n + num_f
    f_job = np.repeat(np.arange(data.num_jobs), data.rounds)
    f_rnd = np.concatenate([np.arange(r) for r in data.rounds])
    f_lo = data.arrival[f_job] + (f_rnd + 1) * minp[f_job]
    f_hi = horizon[f_job] - (data.rounds[f_job] - 1 - f_rnd) * minp[f_job]

    col_lower = np.concatenate([np.zeros(2 * pairs + num_y), s_lo, f_lo])
    col_upper = np.concatenate([np.ones(2 * pairs + num_y), s_hi, f_hi])
    integer = np.concatenate([np.ones(2 * pairs + num_y, dtype=bool),
                              np.zeros(n + num_f, dtype=bool)])
    cost = np.zeros(size)
    last = 2 * pairs + num_y + n + round_first + data.rounds - 1
    cost[last] = data.weight

    rows = _Rows()
    tp = np.arange(pairs)
    rows.add(pair_task, tp, 1.0, 1.0, 1.0, n)                                   # assign
    rows.add(np.r_[b_idx, pair_task], np.r_[ycol, tp + pairs], 1.0, 1.0, 1.0, n)  # in-degree
    rows.add(a_idx, ycol, 1.0, 0.0, 1.0, n)                                     # out-degree
    rows.add(pair_gpu, tp + pairs, 1.0, 0.0, 1.0, num_gpus)                    # one head
    rows.add(np.r_[tp, tp], np.r_[tp + pairs, tp], np.r_[np.ones(pairs), -np.ones(pairs)],
             -np.inf, 0.0, pairs)                                              # h <= x
    for mine, other in ((a_idx, b_idx), (b_idx, a_idx)):                       # same GPU
        k, g = np.nonzero(usable[mine])
        m = len(k)
        other_col = xcol[other[k], g]
        has = other_col >= 0
        rr = np.arange(m)
        rows.add(np.r_[rr, rr, rr[has]], np.r_[ycol[k], xcol[mine[k], g], other_col[has]],
                 np.r_[np.ones(2 * m), -np.ones(int(has.sum()))], -np.inf, 1.0, m)
    # switch gap between direct successors
    big_m = np.maximum(
        e_hi[a_idx] + other_job * np.where(
            usable[b_idx], sigma_tg[b_idx], 0.0).max(axis=1) - s_lo[b_idx], 0.0)
    ka, ga = np.nonzero(usable[a_idx])
    kb, gb = np.nonzero(usable[b_idx] & (sigma_tg[b_idx] > 0)
                        & other_job[:, None])
    rr = np.arange(num_y)
    rows.add(np.r_[rr, rr, ka, kb, rr],
             np.r_[scol[b_idx], scol[a_idx], xcol[a_idx[ka], ga], xcol[b_idx[kb], gb], ycol],
             np.r_[np.ones(num_y), -np.ones(num_y), -p_tg[a_idx[ka], ga],
                   -sigma_tg[b_idx[kb], gb], -big_m],
             -big_m, np.inf, num_y)
    if data.first_task_pays:
        pays = sigma_tg[pair_task, pair_gpu] > 0
        rows.add(np.r_[np.arange(n), pair_task[pays]], np.r_[scol, tp[pays] + pairs],
                 np.r_[np.ones(n), -sigma_tg[pair_task, pair_gpu][pays]], 0.0, np.inf, n)
    # rounds: F >= end; S >= previous round's F
    tn = np.arange(n)
    rows.add(np.r_[tn, tn, pair_task], np.r_[fcol_of, scol, tp],
             np.r_[np.ones(n), -np.ones(n), -p_tg[pair_task, pair_gpu]], 0.0, np.inf, n)
    later = np.flatnonzero(rnd > 0)
    rl = np.arange(len(later))
    rows.add(np.r_[rl, rl], np.r_[scol[later], fcol_of[later] - 1],
             np.r_[np.ones(len(later)), -np.ones(len(later))], 0.0, np.inf, len(later))
    # symmetry: the tasks of a round start in index order; GPUs of a type used in order
    twin = np.flatnonzero((job[1:] == job[:-1]) & (rnd[1:] == rnd[:-1]))
    rt = np.arange(len(twin))
    rows.add(np.r_[rt, rt], np.r_[scol[twin + 1], scol[twin]],
             np.r_[np.ones(len(twin)), -np.ones(len(twin))], 0.0, np.inf, len(twin))
    alike = np.flatnonzero(gtype[1:] == gtype[:-1])
    hk, hg = np.nonzero(pair_gpu[None, :] == alike[:, None])
    jk, jg = np.nonzero(pair_gpu[None, :] == alike[:, None] + 1)
    rows.add(np.r_[hk, jk], np.r_[hg + pairs, jg + pairs],
             np.r_[np.ones(len(hk)), -np.ones(len(jk))], 0.0, np.inf, len(alike))
    # one type per round: z[j,q,k] = 1 for the round's type; sum_k z = 1; x[t,g] <= z
    if data.one_type_per_round:
        z_round, z_type = np.nonzero(data.usable[f_job])       # (round u, usable type k)
        num_z = len(z_round)
        zcol = np.full((num_f, data.num_types), -1, dtype=np.int64)
        zcol[z_round, z_type] = size + np.arange(num_z)
        size += num_z
        col_lower = np.r_[col_lower, np.zeros(num_z)]
        col_upper = np.r_[col_upper, np.ones(num_z)]
        integer = np.r_[integer, np.ones(num_z, dtype=bool)]
        cost = np.r_[cost, np.zeros(num_z)]
        rows.add(z_round, zcol[z_round, z_type], 1.0, 1.0, 1.0, num_f)
        pair_round = fcol_of[pair_task] - (2 * pairs + num_y + n)
        rows.add(np.r_[tp, tp], np.r_[tp, zcol[pair_round, gtype[pair_gpu]]],
                 np.r_[np.ones(pairs), -np.ones(pairs)], -np.inf, 0.0, pairs)
    matrix, row_lower, row_upper = rows.matrix(size)

    # the serial schedule as the solver's start
    start = np.zeros(size)
    start[xcol[tn, s_gpu]] = 1.0
    for seq in gpu_orders(s_gpu, s_start, num_gpus):
        if seq:
            start[hcol[seq[0], s_gpu[seq[0]]]] = 1.0
    succ_of = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(a_idx, b_idx, strict=True))}
    for seq in gpu_orders(s_gpu, s_start, num_gpus):
        for a, b in itertools.pairwise(seq):
            start[ycol[succ_of[a, b]]] = 1.0
    start[scol] = s_start
    ends = s_start + data.seconds[job, gtype[s_gpu]]
    f_start = np.full(num_f, -np.inf)
    np.maximum.at(f_start, fcol_of - (2 * pairs + num_y + n), ends)
    start[2 * pairs + num_y + n:2 * pairs + num_y + n + num_f] = f_start
    if data.one_type_per_round:   # the serial schedule runs each round on one type
        start[zcol[fcol_of - (2 * pairs + num_y + n), gtype[s_gpu]]] = 1.0
    return ExactModel(data=data, tasks=tasks, pair_task=pair_task.astype(np.int64),
                      pair_gpu=pair_gpu.astype(np.int64), succ_from=a_idx.astype(np.int64),
                      succ_to=b_idx.astype(np.int64), matrix=matrix, row_lower=row_lower,
                      row_upper=row_upper, col_lower=col_lower, col_upper=col_upper,
                      cost=cost, integer=integer, start=start, upper_bound=upper)


def objective_value(data: HareData, tasks: TaskIndex, gpu: IntArray,
                    start: FloatArray) -> float:
    """sum_j w_j C_j of a timed assignment."""
    end = start + data.seconds[tasks.job, tasks.gpu_type[gpu]]
    completion = np.full(data.num_jobs, -np.inf)
    np.maximum.at(completion, tasks.job, end)
    return float(data.weight @ completion)


# ------------------------------------------------------------------------- formulation


class Exact(Formulation):
    """``hare.exact``: the exact MILP (module docstring) on a small Hare instance.

    The Solution holds one schedule entry per task (the model's layout), ``objective``
    sum_j w_j C_j re-derived from the retimed schedule, the solver's ``bound`` and the gap
    from it; ``metrics`` add ``weighted_jct``, the model's size (``columns``, ``integers``,
    ``rows``, ``nonzeros``) and ``serial_upper_bound`` (the value of the start schedule).
    """

    name = "hare.exact_milp"
    description: ClassVar[str] = ("Hare: exact MILP for small instances (continuous time, "
                                  "immediate successors per GPU, switch gaps exact)")
    objective_sense = "minimize"

    def validate(self, instance: Instance) -> None:
        """The Hare fields on every job, and the size limits."""
        check_limits(hare_data(instance, self.name), self.name)

    def model(self, instance: Instance) -> ExactModel:
        """The MILP's arrays for ``instance``."""
        data = hare_data(instance, self.name)
        check_limits(data, self.name)
        return build_exact(data)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The Pyomo model of the same arrays: ``m.v[i]`` is column i of
        :class:`ExactModel` (x, h, y, S, F; ``m.exact`` holds the column map), so a user's
        constraint (:meth:`extend`) can name any of them."""
        arrays = self.model(instance)
        m = pyo.ConcreteModel(name=f"{self.name}:{instance.name}")
        m.exact = arrays
        size = len(arrays.cost)
        m.v = pyo.Var(range(size),
                      domain=lambda _, i: pyo.Binary if arrays.integer[i] else pyo.Reals,
                      bounds=lambda _, i: (arrays.col_lower[i], arrays.col_upper[i]))
        columns = [m.v[i] for i in range(size)]
        add_rows(m, "rows", arrays.matrix, columns,
                 np.where(np.isfinite(arrays.row_lower), arrays.row_lower, np.nan),
                 np.where(np.isfinite(arrays.row_upper), arrays.row_upper, np.nan))
        m.objective = pyo.Objective(expr=linear_expression(arrays.cost, columns),
                                    sense=pyo.minimize)
        return m

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """The matrix model with the serial schedule as its start; the Pyomo model of
        :meth:`build` when the user added constraints (they live on it)."""
        opts = options or SolverOptions()
        params = instance.params
        opts = replace(opts, time_limit_s=opts.time_limit_s or params.time_limit_s
                       or DEFAULT_TIME_LIMIT_S,
                       mip_gap=opts.mip_gap if opts.mip_gap is not None else params.mip_gap)
        t0 = time.perf_counter()
        if self.extensions:
            model = self.extend_model(self.build(instance), instance)
            t_built = time.perf_counter()
            result = PersistentSolver(opts).solve(model)
            t1 = time.perf_counter()
            solution = self.extract(model, instance, result)
        else:
            arrays = self.model(instance)
            mm = matrix_model(opts)
            mm.add_columns(arrays.col_lower, arrays.col_upper, arrays.cost,
                           integer=arrays.integer)
            a = arrays.matrix
            mm.add_rows(arrays.row_lower, arrays.row_upper, starts=a.indptr,
                        columns=a.indices, values=a.data)
            mm.set_start(arrays.start)
            t_built = time.perf_counter()
            result = mm.solve()
            t1 = time.perf_counter()
            values = mm.values() if result.status.has_solution else None
            solution = self._solution(instance, arrays, result, values)
        solution.solver = opts.solver
        solution.timings = Timings(build_s=t_built - t0, solve_s=t1 - t_built,
                                   extract_s=time.perf_counter() - t1)
        return solution

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        """Read the Pyomo model's columns into the Solution."""
        arrays: ExactModel = model.exact
        values = None
        if result.status.has_solution:
            values = np.array([pyo.value(model.v[i]) or 0.0 for i in range(len(model.v))])
        return self._solution(instance, arrays, result, values)

    def _solution(self, instance: Instance, arrays: ExactModel, result: SolveResult,
                  values: FloatArray | None) -> Solution:
        size = dict(columns=len(arrays.cost), integers=int(arrays.integer.sum()),
                    rows=int(arrays.matrix.shape[0]), nonzeros=int(arrays.matrix.nnz),
                    serial_upper_bound=arrays.upper_bound)
        if values is None:
            sol = self.empty_solution(instance, result)
            sol.diagnostics.append(f"solver: {result.message}")
            sol.metrics.update(size)
            return sol
        gpu, start = arrays.schedule(values)
        tasks = to_tasks(arrays.data, arrays.tasks, gpu, start)
        bound = result.bound
        objective = objective_value(arrays.data, arrays.tasks, gpu, start)
        bound, status, note = reconcile_bound(bound, objective, result.status)
        sol = hare_solution(instance, self.name, arrays.data, tasks, status=status,
                            bound=bound, solver="highs")
        sol.diagnostics.extend([note] if note else [])
        sol.metrics.update(size)
        if result.gap_tolerance is not None:
            sol.metrics["gap_tolerance"] = result.gap_tolerance
        return sol

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """sum_j w_j C_j of the solution's schedule."""
        return objective_of_schedule(instance, solution)

    def example_instance(self) -> Instance:
        """Three jobs on a V100 and a K80: two rounds each, switch costs, one late arrival."""
        return example_instance()


def example_instance() -> Instance:
    """The example of :meth:`Exact.example_instance` (solved in well under a second)."""
    return instance_from_dict({
        "name": "hare-exact-example",
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [
            {"id": "a", "weight": 2.0, "rounds": 2, "tasks_per_round": 2,
             "task_seconds": {"v100": 3.0, "k80": 7.0}, "switch_seconds": 1.0},
            {"id": "b", "weight": 1.0, "rounds": 2, "tasks_per_round": 1,
             "task_seconds": {"v100": 4.0, "k80": 5.0},
             "switch_seconds": {"v100": 0.5, "k80": 2.0}},
            {"id": "c", "weight": 3.0, "arrival": 4.0, "rounds": 1, "tasks_per_round": 2,
             "task_seconds": {"v100": 2.0}, "switch_seconds": 1.5},
        ],
    })
