r"""Titan's per-round ILP (the public code's ``titan.py`` + ``titan_solver.py``), and the
``titan.round_ilp`` formulation.

**One round.**  The runnable tasks (pending and running) are sorted by their predicted
remaining time on one GPU, T_rem(t, 1), shortest first, and at most G of them (the pool's
GPUs) enter the round; the rest wait (``left_out``).  Merge candidates are the pairs of
runnable tasks that pass the merge rule (:mod:`schedlab.formulations.titan.merge`), pairs
taken in the order the tasks were given.  Each candidate c (a task or a pair) has the options

    A_c = {0} u {a in {1, 2, 3} u {4, 8, ..., 4 floor(G/4)} : a <= max_gpus_c},

and a pair keeps only the non-zero options at which its benefit beta_c(a) passes the
threshold in force when the pair is considered.  Binaries x[c, a]; rows

* one option per candidate: sum_{a in A_c} x[c, a] = 1 (the 0 option included);
* capacity: sum_{c, a} a x[c, a] <= G;
* per task t: sum_{a != 0} x[t, a] + sum_{pairs p containing t} sum_{a != 0} x[p, a]
  + left_t = 1, with left_t in [0, 1]: t runs alone, inside one chosen pair, or is left out.

Objective (minimize), the per-task form:

.. math::

    \sum_{c, a \ne 0} \mathrm{cost}(c, a)\, x[c, a] + U \sum_t \mathrm{left}_t, \qquad
    \mathrm{cost}(c, a) = \frac{\max(T_\mathrm{rem}(c, a), \Delta)}{T_\mathrm{fair}(c)\,
    \beta_c(a)}

with beta = 1 for a task, T_fair(c) = max(T_rem(c, min(f, max_gpus_c)), Delta),
f = max(1, floor(G / n)) for n runnable tasks in the round, Delta = ``params.round_s`` and U
the penalty (default 1e4).  The public code instead gives every candidate a 0 option of cost
U / ``base_weight_scale`` (U for a task, 2U for a pair) and no left_t; since
x[c, 0] = 1 - sum_{a != 0} x[c, a], its objective is this one plus the constant 2U P for P
pair candidates (docs/formulations/titan.md has the proof; ``code_objective`` reports it).

**API for online policies** (stable)::

    from schedlab.formulations.titan import MergeRule, TitanTask, solve_round

    decision = solve_round(tasks, gpus=G, round_s=120.0, rule=MergeRule(...))  # rule=None:
    decision.gpus[task_id]      # GPUs the task runs on alone (0: not alone)   no merging
    decision.pairs[(a, b)]      # GPUs of each chosen merged pair
    decision.allocated(task_id) # GPUs the task runs on, alone or merged
    decision.status, decision.objective, decision.bound, decision.gap, decision.solve_s

``tasks`` are the runnable :class:`~schedlab.formulations.titan.tasks.TitanTask` s (their
``remaining`` fraction and ``started`` flag from the policy's state); ``round_problem``
exposes the arrays, ``RoundProblem.objective`` values any assignment.

**Statuses**: ``optimal`` only when HiGHS proved it within its MIP gap (``gap`` from its
bound); a time limit (default 30 s, the code's ``max_seconds``) gives ``time_limit`` with the
incumbent and its gap.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo
import scipy.sparse as sp

from schedlab.errors import InputError
from schedlab.formulations.arrays import add_rows, csr_from_entries, linear_expression
from schedlab.formulations.base import Formulation
from schedlab.formulations.titan.merge import (
    JOINT_EPOCH_FACTOR,
    MergeRule,
    Similarity,
    benefit_threshold,
    code_first,
)
from schedlab.formulations.titan.speed import duration_at
from schedlab.formulations.titan.tasks import TitanTask, titan_tasks
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, ScheduleEntry, Solution, Status, Timings
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions, matrix_model

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: U: the cost of a runnable task that runs neither alone nor in a chosen pair.
DEFAULT_PENALTY = 1e4
#: The public code's ``max_seconds`` of one round's solve.
DEFAULT_TIME_LIMIT_S = 30.0


def gpu_options(gpus: int) -> IntArray:
    """{1, 2, 3} u {4, 8, ..., 4 floor(G/4)}, none above G (the 0 option excluded)."""
    small = [a for a in (1, 2, 3) if a <= gpus]
    return np.array(small + list(range(4, gpus + 1, 4)), dtype=np.int64)


@dataclass(frozen=True)
class MergeCandidate:
    """A pair that passed the merge rule in this round: its merged profile, GPU maximum,
    and the non-zero options it keeps with their benefit beta(a)."""

    tasks: tuple[str, str]
    duration_s: Mapping[int, float]
    max_gpus: int
    options: tuple[int, ...]
    benefit: tuple[float, ...]


@dataclass(frozen=True)
class RoundProblem:
    """The round's ILP as arrays (module docstring).  Candidates are the tasks (0..n-1, in
    ``task_ids`` order) then the pairs (n..n+P-1); columns list every (candidate, option),
    the 0 options included, then left_t per task."""

    task_ids: list[str]
    left_out: list[str]
    pairs: list[MergeCandidate]
    gpus: int
    round_s: float
    penalty: float
    fair_share: int
    t_fair: FloatArray            # T_fair per candidate, s
    column_candidate: IntArray    # candidate of each x column
    column_gpus: IntArray         # its option a
    column_cost: FloatArray       # cost(c, a) (0 for a = 0)
    pair_members: IntArray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    @property
    def num_tasks(self) -> int:
        """n: runnable tasks in the round."""
        return len(self.task_ids)

    @property
    def num_x(self) -> int:
        """Columns x[c, a]."""
        return len(self.column_candidate)

    @property
    def code_constant(self) -> float:
        """2 U P: the public code's objective minus this one."""
        return 2.0 * self.penalty * len(self.pairs)

    def lower_upper_cost(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Column bounds, costs and integrality (x binary, left_t continuous)."""
        n, k = self.num_tasks, self.num_x
        lower = np.zeros(k + n)
        upper = np.ones(k + n)
        cost = np.r_[self.column_cost, np.full(n, self.penalty)]
        integer = np.r_[np.ones(k), np.zeros(n)]
        return lower, upper, cost, integer

    def rows(self) -> list[tuple[str, sp.csr_matrix, FloatArray, FloatArray]]:
        """(name, matrix, lower, upper) of the three row blocks, columns as in
        :meth:`lower_upper_cost`."""
        n, k = self.num_tasks, self.num_x
        size = k + n
        cand = self.column_candidate
        cols = np.arange(k)
        num_cand = n + len(self.pairs)
        assign = csr_from_entries(cand, cols, np.ones(k), (num_cand, size))
        capacity = csr_from_entries(np.zeros(k, dtype=np.int64), cols,
                                    self.column_gpus.astype(float), (1, size))
        running = self.column_gpus > 0
        alone = running & (cand < n)
        task_rows = [cand[alone]]
        task_cols = [cols[alone]]
        if len(self.pairs):
            paired = running & (cand >= n)
            members = self.pair_members[cand[paired] - n]
            task_rows += [members[:, 0], members[:, 1]]
            task_cols += [cols[paired], cols[paired]]
        task_rows.append(np.arange(n))
        task_cols.append(k + np.arange(n))
        rr, cc = np.concatenate(task_rows), np.concatenate(task_cols)
        per_task = csr_from_entries(rr, cc, np.ones(len(rr)), (n, size))
        return [("assign", assign, np.ones(num_cand), np.ones(num_cand)),
                ("capacity", capacity, np.array([-math.inf]), np.array([float(self.gpus)])),
                ("per_task", per_task, np.ones(n), np.ones(n))]

    def objective(self, alone: Mapping[str, int], pairs: Mapping[tuple[str, str], int]) -> float:
        """The per-task objective of an assignment: ``alone`` GPUs per task, ``pairs`` GPUs
        per chosen pair (0 or missing: not chosen).  inf when it uses an option the round
        does not offer or breaks a row (capacity, a task both alone and merged)."""
        index = {(int(c), int(a)): i for i, (c, a) in
                 enumerate(zip(self.column_candidate, self.column_gpus, strict=True))}
        position = {t: i for i, t in enumerate(self.task_ids)}
        pair_index = {p.tasks: self.num_tasks + i for i, p in enumerate(self.pairs)}
        total, used = 0.0, 0
        runs = np.zeros(self.num_tasks)
        chosen = [(position.get(t), a) for t, a in alone.items() if a > 0]
        for pair, a in pairs.items():
            if a <= 0:
                continue
            key = pair if pair in pair_index else (pair[1], pair[0])
            chosen.append((pair_index.get(key), a))
        for cand, a in chosen:
            column = index.get((cand, a)) if cand is not None else None
            if cand is None or column is None:
                return math.inf
            total += float(self.column_cost[column])
            used += a
            if cand < self.num_tasks:
                runs[cand] += 1
            else:
                runs[self.pair_members[cand - self.num_tasks]] += 1
        if used > self.gpus or np.any(runs > 1):
            return math.inf
        return total + self.penalty * float(np.sum(1.0 - runs))


@dataclass
class RoundDecision:
    """What one round's ILP decided (module docstring)."""

    gpus: dict[str, int]
    pairs: dict[tuple[str, str], int]
    status: Status
    objective: float | None
    bound: float | None
    gap: float | None
    solve_s: float
    build_s: float
    runnable: list[str]
    left_out: list[str]
    candidates: list[tuple[str, str]]
    code_objective: float | None
    message: str = ""
    gap_tolerance: float | None = None

    def allocated(self, task: str) -> int:
        """GPUs ``task`` runs on this round, alone or inside a chosen pair."""
        if self.gpus.get(task, 0) > 0:
            return self.gpus[task]
        for pair, a in self.pairs.items():
            if task in pair:
                return a
        return 0


# ------------------------------------------------------------------------------ building


def order_runnable(tasks: Sequence[TitanTask], gpus: int) -> tuple[list[TitanTask],
                                                                  list[TitanTask]]:
    """(in the round, left out): shortest T_rem(t, 1) first, at most G in the round (ties:
    the given order)."""
    one = [t.remaining_s(1.0) for t in tasks]
    order = sorted(range(len(tasks)), key=lambda i: (one[i], i))
    inside = [tasks[i] for i in order[:gpus]]
    return inside, [tasks[i] for i in order[gpus:]]


def merge_candidates(tasks: Sequence[TitanTask], gpus: int, rule: MergeRule,
                     rejected: Counter[str] | None = None) -> list[MergeCandidate]:
    """The pairs of ``tasks`` that pass ``rule`` in one round, pairs (i < j) in the given
    order, the first member the earlier task.  Each keeps its non-zero options a <= min(G,
    max_gpus_A + max_gpus_B) with beta(a) >= the threshold in force (:func:`~schedlab.
    formulations.titan.merge.benefit_threshold` of the rows of the pairs accepted before,
    when ``rule.row_rule``).  Vectorized over pairs; the similarity is computed only for
    pairs that pass everything else.

    ``rejected``, when given, counts the pairs turned down by the first rule each fails, in
    the order checked: ``started`` (a member has run), ``model`` (different base models),
    ``dataset`` (the same dataset), ``benefit`` (below the threshold in force), ``labels``
    (a member without class labels), ``similarity`` (below the threshold)."""
    n = len(tasks)
    if n < 2:
        return []
    options = gpu_options(gpus)
    eligible = np.array([not t.started for t in tasks])
    models = _codes([t.base_model for t in tasks])
    datasets = _codes([t.dataset if t.dataset is not None else f"\0{i}"
                       for i, t in enumerate(tasks)])
    unstarted = np.flatnonzero(eligible)
    first, second = (unstarted[k] for k in np.triu_indices(len(unstarted), k=1))
    same_model = models[first] == models[second]
    keep = same_model & (datasets[first] != datasets[second])
    if rejected is not None:
        u = len(unstarted)
        rejected["started"] += n * (n - 1) // 2 - u * (u - 1) // 2
        rejected["model"] += int((~same_model).sum())
        rejected["dataset"] += int((same_model & ~keep).sum())
    first, second = first[keep], second[keep]
    if not len(first):
        return []
    beta, limit = _pair_benefits(tasks, first, second, options, rule)
    best = np.where(options[None, :] <= limit[:, None], beta, -np.inf).max(axis=1)
    out: list[MergeCandidate] = []
    rows = 0
    passing = np.flatnonzero(best >= rule.benefit_base)
    if rejected is not None:
        rejected["benefit"] += len(first) - len(passing)
    for k in passing:
        need = benefit_threshold(rows, rule.benefit_base) if rule.row_rule else rule.benefit_base
        if best[k] < need:
            if rejected is not None:
                rejected["benefit"] += 1
            continue
        a, b = tasks[first[k]], tasks[second[k]]
        if not rule.code_quirks:  # the code compares no labels (MergeRule.code_quirks)
            failed = ("labels" if not (a.classes and b.classes)
                      else "similarity" if rule.similarity_of(a, b) < rule.threshold
                      else None)
            if failed is not None:
                if rejected is not None:
                    rejected[failed] += 1
                continue
        ok = (options <= limit[k]) & (beta[k] >= need)
        out.append(MergeCandidate(
            tasks=(a.id, b.id), duration_s=rule.merged_profile(a, b),
            max_gpus=int(limit[k]) if rule.code_quirks else rule.pair_max_gpus(a, b),
            options=tuple(int(x) for x in options[ok]),
            benefit=tuple(float(x) for x in beta[k][ok])))
        rows += 1 + int(ok.sum())
    return out


def _codes(values: Sequence[str]) -> IntArray:
    """Integer codes of string values (equal values, equal codes)."""
    table: dict[str, int] = {}
    return np.array([table.setdefault(v, len(table)) for v in values], dtype=np.int64)


def _pair_benefits(tasks: Sequence[TitanTask], first: IntArray, second: IntArray,
                   options: IntArray, rule: MergeRule) -> tuple[FloatArray, IntArray]:
    """beta[k, o] of pair k at option o, and each pair's most usable GPUs min(G, max_A +
    max_B) (options above it are masked by the caller)."""
    opts = options.astype(float)
    full = np.array([duration_at(t.duration_s, opts) for t in tasks])
    maxg = np.array([t.max_gpus for t in tasks], dtype=float)
    capped = np.array([duration_at(t.duration_s, np.minimum(opts, m))
                       for t, m in zip(tasks, maxg, strict=True)])
    alone_a, alone_b = capped[first], capped[second]
    works = np.array([np.nan if t.work is None else t.work for t in tasks])
    phi = np.full(len(first), rule.joint_epoch_factor)
    measured: list[int] = []
    for k, (i, j) in enumerate(zip(first, second, strict=True) if rule.entries else ()):
        entry = rule.entries.get(frozenset((tasks[i].id, tasks[j].id)))
        if entry is not None:
            profile, factor = entry
            if profile is not None:
                measured.append(k)
            elif factor is not None:
                phi[k] = factor
    with_work = ~np.isnan(works[first]) & ~np.isnan(works[second])
    ratio = np.where(with_work, works[second] / np.where(with_work, works[first], 1.0), 0.0)
    merged = np.where(with_work[:, None], (phi * (1.0 + ratio))[:, None] * full[first],
                      phi[:, None] * (full[first] + full[second]))
    if rule.code_quirks:  # the code's first member trains alone (MergeRule.code_quirks)
        leader = np.array([code_first(tasks[i], tasks[j]) is tasks[j]
                           for i, j in zip(first, second, strict=True)], dtype=bool)
        merged = np.where(leader[:, None], full[second], full[first])
    for k in measured:
        merged[k] = duration_at(rule.merged_profile(tasks[first[k]], tasks[second[k]]), opts)
    beta = (alone_a + alone_b + np.minimum(alone_a, alone_b)) / (2.0 * merged)
    limit = np.minimum(maxg[first] + maxg[second], options[-1] if len(options) else 0)
    if rule.code_quirks:  # the stale loop variable: the last never-started task's cap
        stale = next((t.max_gpus for t in reversed(tasks) if not t.started), 0)
        limit = np.minimum(limit, stale)
    return beta, limit.astype(np.int64)


def round_problem(tasks: Sequence[TitanTask], gpus: int, round_s: float, *,
                  rule: MergeRule | None = None, penalty: float = DEFAULT_PENALTY,
                  candidates: Sequence[MergeCandidate] | None = None,
                  rejected: Counter[str] | None = None) -> RoundProblem:
    """The arrays of one round (module docstring).  ``tasks``: the runnable tasks;
    ``rule=None`` and no ``candidates``: no merging; ``candidates`` given: used as they are
    (their tasks must be in the round); ``rejected``: counts the pairs the rule turns down
    (:func:`merge_candidates`)."""
    if gpus < 1:
        raise InputError(f"a round needs at least one GPU, got {gpus}", field="gpus")
    if not round_s > 0:
        raise InputError(f"the round length must be > 0 s, got {round_s}", field="round_s")
    inside, outside = order_runnable(tasks, gpus)
    n = len(inside)
    fair = max(1, gpus // n) if n else 1
    options = gpu_options(gpus)
    if candidates is None:
        given = {t.id: i for i, t in enumerate(tasks)}
        in_order = sorted(inside, key=lambda t: given[t.id])
        candidates = (merge_candidates(in_order, gpus, rule, rejected) if rule is not None
                      else [])
    position = {t.id: i for i, t in enumerate(inside)}
    cand_cols: list[IntArray] = []
    gpu_cols: list[IntArray] = []
    cost_cols: list[FloatArray] = []
    t_fair = np.zeros(n + len(candidates))
    for i, task in enumerate(inside):
        opts = options[options <= task.max_gpus]
        t_fair[i] = max(task.remaining_s(min(fair, task.max_gpus)), round_s)
        rem = task.remaining * duration_at(task.duration_s, opts.astype(float))
        cand_cols.append(np.full(len(opts) + 1, i, dtype=np.int64))
        gpu_cols.append(np.r_[0, opts].astype(np.int64))
        cost_cols.append(np.r_[0.0, np.maximum(rem, round_s) / t_fair[i]])
    members = np.zeros((len(candidates), 2), dtype=np.int64)
    for p, pair in enumerate(candidates):
        c = n + p
        try:
            members[p] = [position[pair.tasks[0]], position[pair.tasks[1]]]
        except KeyError:
            raise InputError(f"merge candidate {pair.tasks} names a task outside the round",
                             field="candidates") from None
        t_fair[c] = max(float(duration_at(pair.duration_s, [min(fair, pair.max_gpus)])[0]),
                        round_s)
        opts = np.array(pair.options, dtype=np.int64)
        merged = duration_at(pair.duration_s, opts.astype(float))
        cand_cols.append(np.full(len(opts) + 1, c, dtype=np.int64))
        gpu_cols.append(np.r_[0, opts].astype(np.int64))
        cost_cols.append(np.r_[0.0, np.maximum(merged, round_s) / t_fair[c]
                               / np.array(pair.benefit, dtype=float)])
    empty_i = np.zeros(0, dtype=np.int64)
    return RoundProblem(
        task_ids=[t.id for t in inside], left_out=[t.id for t in outside],
        pairs=list(candidates), gpus=gpus, round_s=round_s, penalty=penalty, fair_share=fair,
        t_fair=t_fair,
        column_candidate=np.concatenate(cand_cols) if cand_cols else empty_i,
        column_gpus=np.concatenate(gpu_cols) if gpu_cols else empty_i,
        column_cost=np.concatenate(cost_cols) if cost_cols else np.zeros(0),
        pair_members=members)


# ------------------------------------------------------------------------------- solving


def solve_problem(problem: RoundProblem, options: SolverOptions | None = None) -> RoundDecision:
    """Solve a :class:`RoundProblem` on a matrix model (HiGHS by default)."""
    opts = options or SolverOptions()
    t0 = time.perf_counter()
    lower, upper, cost, integer = problem.lower_upper_cost()
    model = matrix_model(opts)
    model.add_columns(lower, upper, cost, integer=integer.astype(bool))
    for _, matrix, lo, up in problem.rows():
        model.add_rows(lo, up, starts=matrix.indptr, columns=matrix.indices,
                       values=matrix.data)
    build_s = time.perf_counter() - t0
    limit = opts.time_limit_s if opts.time_limit_s is not None else DEFAULT_TIME_LIMIT_S
    result = model.solve(time_limit_s=limit)
    values = model.values() if result.status.has_solution else None
    return _decision(problem, result, values, build_s)


def _decision(problem: RoundProblem, result: SolveResult, values: FloatArray | None,
              build_s: float) -> RoundDecision:
    """Read x into GPU counts per task and pair."""
    gpus = dict.fromkeys(problem.task_ids, 0)
    pairs: dict[tuple[str, str], int] = {}
    if values is not None:
        x = values[: problem.num_x] > 0.5
        n = problem.num_tasks
        for cand, a in zip(problem.column_candidate[x], problem.column_gpus[x], strict=True):
            if a == 0:
                continue
            if cand < n:
                gpus[problem.task_ids[cand]] = int(a)
            else:
                pairs[problem.pairs[cand - n].tasks] = int(a)
    objective = result.objective
    if values is not None:  # the value of the rounded assignment, exactly
        objective = problem.objective(gpus, pairs)
    code = None if objective is None else objective + problem.code_constant
    return RoundDecision(
        gpus=gpus, pairs=pairs, status=result.status, objective=objective,
        bound=result.bound, gap=_gap(objective, result.bound), solve_s=result.solve_s,
        build_s=build_s, runnable=list(problem.task_ids), left_out=list(problem.left_out),
        candidates=[p.tasks for p in problem.pairs], code_objective=code,
        message=result.message, gap_tolerance=result.gap_tolerance)


def _gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not math.isfinite(objective):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-10)


def solve_round(tasks: Sequence[TitanTask], gpus: int, round_s: float, *,
                rule: MergeRule | None = None, penalty: float = DEFAULT_PENALTY,
                options: SolverOptions | None = None,
                candidates: Sequence[MergeCandidate] | None = None,
                rejected: Counter[str] | None = None,
                offered: list[int] | None = None) -> RoundDecision:
    """One round of Titan (module docstring): cap, candidates, ILP, decision.
    ``rejected`` counts the pairs the merge rule turns down (:func:`merge_candidates`);
    ``offered``, when given, gets the number of merge candidates appended."""
    t0 = time.perf_counter()
    problem = round_problem(tasks, gpus, round_s, rule=rule, penalty=penalty,
                            candidates=candidates, rejected=rejected)
    if offered is not None:
        offered.append(len(problem.pairs))
    prepared = time.perf_counter() - t0
    decision = solve_problem(problem, options)
    decision.build_s += prepared
    return decision


# --------------------------------------------------------------------------- formulation


class RoundIlp(Formulation):
    """``titan.round_ilp``: one round of Titan on an instance (module docstring).

    The runnable tasks are the jobs that have arrived by ``params.now_s`` with work left;
    Delta = ``params.round_s``; G = the one accelerator type's count.  The Solution's
    ``schedule`` holds one entry per running task over [now, now + Delta) on its GPUs (both
    members of a merged pair with the pair's GPUs); ``groups`` lists the chosen pairs;
    ``objective`` is the per-task objective; ``metrics`` hold ``code_objective``, the
    candidates, the runnable set and who was left out by the G cap.

    Args:
        merging: offer merge candidates (False: Titan without the merger).
        penalty: U.
        similarity: S(A, B) for the merge rule (default: the concept hierarchy).
        joint_epoch_factor: phi of the default merged-duration model.
    """

    name = "titan.round_ilp"
    description: ClassVar[str] = "Titan: one round's ILP (GPU counts per task or merged pair)"
    objective_sense = "minimize"

    def __init__(self, *, merging: bool = True, penalty: float = DEFAULT_PENALTY,
                 similarity: Similarity | None = None,
                 joint_epoch_factor: float = JOINT_EPOCH_FACTOR) -> None:
        if not (math.isfinite(penalty) and penalty > 0):
            raise InputError(f"penalty must be finite and > 0, got {penalty}", field="penalty")
        self.merging = merging
        self.penalty = penalty
        self.similarity = similarity
        self.joint_epoch_factor = joint_epoch_factor

    def validate(self, instance: Instance) -> None:
        """Titan fields on every job, one accelerator type."""
        titan_tasks(instance, self.name)

    def problem(self, instance: Instance) -> RoundProblem:
        """The round's arrays for ``instance``."""
        tasks = titan_tasks(instance, self.name)
        now = instance.params.now_s
        runnable = [t for t in tasks if t.arrival <= now and t.remaining > 0]
        rule = (MergeRule.for_instance(instance, similarity=self.similarity,
                                       joint_epoch_factor=self.joint_epoch_factor)
                if self.merging else None)
        return round_problem(runnable, instance.cluster.total_gpus, instance.params.round_s,
                             rule=rule, penalty=self.penalty)

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        """The Pyomo model of the round, rows from :meth:`RoundProblem.rows`: ``m.v[i]`` for
        i < ``num_x`` is x[c, a] with c = ``m.round_problem.column_candidate[i]`` (tasks
        0..n-1 in ``task_ids`` order, then the pairs) and a = ``column_gpus[i]``; then
        left_t per task.  A user's constraints (:meth:`extend`) go on this model."""
        problem = self.problem(instance)
        lower, _, cost, integer = problem.lower_upper_cost()
        m = pyo.ConcreteModel(name=f"{self.name}:{instance.name}")
        m.round_problem = problem
        size = len(lower)
        m.v = pyo.Var(range(size), bounds=(0, 1),
                      domain=lambda _, i: pyo.Binary if integer[i] else pyo.Reals)
        columns = [m.v[i] for i in range(size)]
        for name, matrix, lo, up in problem.rows():
            add_rows(m, name, matrix, columns, lo, up)
        m.objective = pyo.Objective(expr=linear_expression(cost, columns), sense=pyo.minimize)
        return m

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        """The matrix model of the round; the Pyomo model of :meth:`build` when the user
        added constraints (they live on it)."""
        opts = options or SolverOptions()
        params = instance.params
        opts = replace(opts, time_limit_s=opts.time_limit_s or params.time_limit_s
                       or DEFAULT_TIME_LIMIT_S,
                       mip_gap=opts.mip_gap if opts.mip_gap is not None else params.mip_gap)
        self.validate(instance)
        t0 = time.perf_counter()
        if not self.extensions:
            problem = self.problem(instance)
            decision = solve_problem(problem, opts)
            t1 = time.perf_counter()
            solution = self._solution(instance, problem, decision)
            build_s = t1 - t0 - decision.solve_s
            solve_s = decision.solve_s
        else:
            model = self.extend_model(self.build(instance), instance)
            t_built = time.perf_counter()
            result = PersistentSolver(opts).solve(model)
            t1 = time.perf_counter()
            solution = self.extract(model, instance, result)
            build_s, solve_s = t_built - t0, t1 - t_built
        solution.solver = opts.solver
        solution.timings = Timings(build_s=build_s, solve_s=solve_s,
                                   extract_s=time.perf_counter() - t1)
        return solution

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        """Read the Pyomo model's x into the Solution."""
        problem: RoundProblem = model.round_problem
        values = None
        if result.status.has_solution:
            values = np.array([pyo.value(model.v[i]) or 0.0 for i in range(len(model.v))])
        return self._solution(instance, problem, _decision(problem, result, values, 0.0))

    def _solution(self, instance: Instance, problem: RoundProblem,
                  decision: RoundDecision) -> Solution:
        (acc,) = instance.cluster.accelerators
        sol = Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                       formulation=self.name, status=decision.status,
                       objective=decision.objective, bound=decision.bound, gap=decision.gap)
        if not decision.status.has_solution:
            sol.diagnostics.append(f"solver: {decision.message}")
            return sol
        now, end = instance.params.now_s, instance.params.now_s + problem.round_s
        if not decision.runnable:
            waiting = [t for t in titan_tasks(instance, self.name) if t.remaining > 0]
            first = min((t.arrival for t in waiting), default=None)
            sol.diagnostics.append(
                "nothing to schedule this round: " + (
                    f"no task has arrived by params.now_s = {now:g} s (the first arrives at "
                    f"{first:g} s; set params.now_s to plan a later round)"
                    if first is not None else "every task's work is done"))
        running = {t: a for t, a in decision.gpus.items() if a > 0}
        for pair, a in decision.pairs.items():
            running.update(dict.fromkeys(pair, a))
        sol.schedule = [ScheduleEntry(job=t, start=now, end=end, accelerator=acc, gpus=a)
                        for t, a in running.items()]
        sol.groups = [list(pair) for pair in decision.pairs]
        sol.metrics.update(
            code_objective=decision.code_objective, fair_share=problem.fair_share,
            runnable=decision.runnable, left_out=decision.left_out,
            candidates=[list(p) for p in decision.candidates],
            gpus={t: decision.allocated(t) for t in decision.runnable})
        if decision.gap_tolerance is not None:
            sol.metrics["gap_tolerance"] = decision.gap_tolerance
        return sol

    def objective_of(self, instance: Instance, solution: Solution) -> float | None:
        """The per-task objective of the schedule: each group's GPUs (the entries of its
        members), each other task's entry alone; tasks without an entry are left out."""
        problem = self.problem(instance)
        gpus_of = {e.job: e.gpus for e in solution.schedule}
        pairs: dict[tuple[str, str], int] = {}
        grouped: set[str] = set()
        for group in solution.groups:
            if len(group) != 2:
                return math.inf
            pairs[(group[0], group[1])] = gpus_of.get(group[0], 0)
            grouped.update(group)
        alone = {t: a for t, a in gpus_of.items() if t not in grouped}
        return problem.objective(alone, pairs)

    def example_instance(self) -> Instance:
        """Six tasks on 8 GPUs, two of them mergeable (instances/titan/round-6tasks)."""
        from schedlab.formulations.titan.examples import round_example

        return round_example()
