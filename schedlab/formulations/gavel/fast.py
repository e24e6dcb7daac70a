r"""Exact fast paths for Gavel's max-min fairness LP (docs/fast_paths.md).

The reference model (:class:`~schedlab.formulations.gavel.MaxMinFairness` with
``method="pyomo"``) has one variable per (job, type) and per (co-located pair, type) and one
Pyomo call per element; at 10^4 jobs, or at 10^3 jobs with every pair co-locatable (10^6
pair variables), building and loading it dominates.  This module reaches the *same optimum*
(to solver tolerance) by three exact devices, chosen by :func:`solve_max_min_fast`:

1. **Aggregation** (:func:`classify_jobs`).  With a_j = s_j / (w_j T_eq[j]) the LP is

   .. math::

      \max t \quad\text{s.t.}\quad
      a_j \Bigl(\sum_r T_{jr} z_{jr} + \sum_{p \ni j,k} Tc_{p,k,j} Y_{pk}\Bigr) \ge t,\;
      \sum_r z_{jr} + \sum_{p \ni j,k} Y_{pk} \le 1,\;
      \sum_{j,r} U_{jrk} z_{jr} + \sum_p g_p Y_{pk} \le n_k

   where the *patterns* r of a job are its accelerator types (U_{jrk} = s_j [r = k]) or, for
   the heterogeneity-agnostic (type-blind) variant, the single pattern that spreads its time
   over its types in proportion to n_k (U_{j0k} = s_j n_k / N_j).  Jobs with identical
   (a_j T_j, allowed patterns, U_j) rows -- and identical co-location rows towards every other
   class -- are interchangeable: permuting them maps the LP onto itself, so averaging any
   optimum over the permutations (the LP is convex) gives an optimum in which they get equal
   shares.  The LP over classes c with multiplicities m_c (capacity rows count m_c U_c z_c)
   is therefore exact, and its solution is broadcast to the members.

2. **Dantzig-Wolfe over the K capacity rows** (:func:`solve_capacity_master`, no pairs).
   The set S = {(t, z): a_j T_j z_j >= t, sum_r z_jr <= 1, z >= 0} is convex and only the K
   capacity rows couple the jobs, so the LP equals the master

   .. math:: \max \sum_i \lambda_i t_i \;\text{s.t.}\; \sum_i \lambda_i u_i \le n,\;
             \sum_i \lambda_i = 1,\; \lambda \ge 0

   over points (t_i, z_i) of S with GPU use u_i.  A column is priced exactly in numpy: for
   capacity prices pi the Lagrangian subproblem max_{(t,z) in S} t - pi . u(z) separates per
   class into phi_c(t), the cheapest cost of reaching normalized throughput t (the lower convex
   hull of the points (A_cr, pi . U_cr)), and max_t t - sum_c m_c phi_c(t) is found by a sweep
   over the hull breakpoints.  The master is solved in its dual (cutting-plane) form on a
   persistent Pyomo model with K + 1 variables; L(pi) = max(...) + pi . n is an upper bound,
   the master value a lower bound, and we stop when they meet.

3. **Column generation over co-located pairs** (:func:`solve_pair_master`).  Solo columns
   are all present; a pair column (q, k) enters when its reduced cost

   .. math:: \bar c_{qk} = \sum_{c \in q} \rho_{qc} (\lambda_c B_{qkc} - \mu_c) - g_q \pi_k

   is positive (lambda: fairness duals, mu: job_share duals, pi: capacity duals, rho_qc: the
   share one job of class c receives per unit of the class pair's total Y).  All candidates
   are priced at once in numpy; the master is again solved in dual form (new columns are new
   rows, which persistent solvers add with a warm-started dual simplex; rows slack for
   :data:`CUT_MAX_AGE` iterations are dropped).  When nothing prices out, the restricted
   primal over the columns tight in the master is solved once for X and Y.

See ``docs/fast_paths.md`` for the derivations and the choice between the paths.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from schedlab.formulations.arrays import add_rows
from schedlab.formulations.gavel.base import GavelPolicy, unrunnable_jobs, unrunnable_reason
from schedlab.formulations.gavel.data import (
    BoolArray,
    FloatArray,
    GavelData,
    PairList,
    pair_index,
)
from schedlab.instance import Instance
from schedlab.lazy import LazyModule
from schedlab.solution import Solution, Status, Timings, worst_status
from schedlab.solvers import PersistentSolver, SolveResult, SolverOptions
from schedlab.solvers.matrix import MatrixModel, matrix_model

if TYPE_CHECKING:
    import pyomo.environ as pyo
    import scipy.sparse as sp
    from pyomo.core.expr import numeric_expr
else:  # imported at the first use (schedlab.lazy)
    pyo = LazyModule("pyomo.environ")
    sp = LazyModule("scipy.sparse")
    numeric_expr = LazyModule("pyomo.core.expr.numeric_expr")


log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]

#: Low mantissa bits ignored when comparing coefficients (2^-40 ~ 1e-12 relative).
_KEY_DROP_BITS = 12
#: Stop when (upper bound - lower bound) <= this x upper bound.
GAP_TOLERANCE = 1e-9
#: A pair column enters when its reduced cost exceeds this x the master value.
PRICING_TOLERANCE = 1e-10
#: Iterations a generated pair column may stay slack in the master before it is dropped.
CUT_MAX_AGE = 3
#: Pair columns each class may bring into the master per column-generation iteration.
ENTERING_PER_CLASS = 2
#: HiGHS options of the fast path's LPs (the caller's ``extra`` options win).
HIGHS_TOLERANCES: dict[str, float] = {
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
}
#: Classes up to which the class LP is solved directly (no pairs); beyond, Dantzig-Wolfe.
CLASS_LP_MAX_CLASSES = 300
#: Pair columns up to which the class LP with every pair column is solved directly.
FULL_PAIR_COLUMNS_MAX = 4000
#: Cutting-plane / column-generation iterations before giving up (honest time_limit status).
MAX_ITERATIONS = 500


# ------------------------------------------------------------------------- job classes


@dataclass(frozen=True)
class JobClasses:
    """Interchangeable jobs grouped into classes c (C classes, R patterns, K types).

    A pattern r of class c is one way of spending a unit of a job's time: ``fair[c, r]`` is
    the normalized throughput a_j T it yields, ``usage[c, r, k]`` the GPUs of type k it holds
    and ``direction[c, r, k]`` = usage / s its time share on type k (X[j,k] per unit).
    """

    of_job: IntArray  # (J,) class of each job
    count: FloatArray  # (C,) m_c
    order: IntArray  # (J,) jobs sorted by class (stable)
    start: IntArray  # (C + 1,) class c's members are order[start[c]:start[c + 1]]
    fair: FloatArray  # (C, R)
    ok: BoolArray  # (C, R)
    usage: FloatArray  # (C, R, K)
    direction: FloatArray  # (C, R, K)

    @property
    def num_classes(self) -> int:
        """C."""
        return len(self.count)

    def members(self, c: int) -> IntArray:
        """Job positions of class c, in instance order."""
        return self.order[self.start[c] : self.start[c + 1]]

    def broadcast(self, z: FloatArray) -> FloatArray:
        """X (J, K) from per-job pattern shares z (C, R): X[j,k] = sum_r z[c(j),r] dir[c,r,k]."""
        x_class = np.einsum("cr,crk->ck", z, self.direction)
        return np.asarray(x_class[self.of_job], dtype=float)


def fairness_coefficients(data: GavelData) -> FloatArray:
    """a_j = s_j / (w_j T_eq[j]) (T_eq = 0 replaced by 1, as in the reference model)."""
    teq = data.equal_share_throughput()
    return np.asarray(data.scale_factor / (data.weight * np.where(teq > 0, teq, 1.0)))


def job_patterns(
    data: GavelData, heterogeneity_aware: bool
) -> tuple[FloatArray, BoolArray, FloatArray, FloatArray]:
    """Per job: (fair (J,R), ok (J,R), usage (J,R,K), direction (J,R,K)).

    Aware: one pattern per type, usage s_j on that type.  Type-blind (agnostic): one pattern,
    X[j,k] = x_j n_k / N_j on the allowed types (the ``type_blind`` rows of the reference).
    """
    coef = fairness_coefficients(data)
    num_jobs, num_types = data.throughput.shape
    if heterogeneity_aware:
        direction = np.broadcast_to(np.eye(num_types), (num_jobs, num_types, num_types)).copy()
        direction *= data.allowed[:, :, None]
        ok = data.allowed.copy()
        fair = coef[:, None] * data.throughput
    else:
        pool = (data.allowed * data.gpus[None, :]).sum(axis=1)
        share = np.divide(
            data.allowed * data.gpus[None, :], pool[:, None],
            out=np.zeros((num_jobs, num_types)), where=pool[:, None] > 0,
        )
        direction = share[:, None, :]
        ok = (pool > 0)[:, None]
        fair = coef[:, None] * (data.throughput * share).sum(axis=1, keepdims=True)
    usage = data.scale_factor[:, None, None] * direction
    return np.where(ok, fair, 0.0), ok, usage, direction


def _quantize(values: FloatArray) -> IntArray:
    """Bit patterns of float64 values with the lowest mantissa bits dropped (for grouping)."""
    bits = np.ascontiguousarray(np.asarray(values, dtype=np.float64) + 0.0).view(np.int64)
    return np.asarray(bits & ~np.int64((1 << _KEY_DROP_BITS) - 1), dtype=np.int64)


#: Odd 64-bit multiplier of the row digest in :func:`_group_rows` (from splitmix64).
_ROW_DIGEST_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)


def _group_rows(keys: IntArray) -> tuple[IntArray, IntArray]:
    """(inverse, counts) of the distinct rows of ``keys`` (J, W): class ids 0..C-1 in order
    of first appearance."""
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = np.ascontiguousarray(keys, dtype=np.int64)
    # Group by a 64-bit digest of each row first (sorting 8-byte integers is several times
    # faster than sorting W*8-byte rows: 10^6 x 15 keys 0.1 s instead of ~0.8 s), then check
    # that every row equals its group's first row; any collision of the digest falls back to
    # sorting the rows themselves, so the groups are always the rows' distinct values.
    digest = np.zeros(rows.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in rows.view(np.uint64).T:
            digest = (digest ^ column) * _ROW_DIGEST_MULTIPLIER
            digest ^= digest >> np.uint64(29)
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(rows, rows[first[inverse]]):
        flat = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    # renumber by first appearance, so class ids follow instance order
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    ids = rank[inverse.reshape(-1)]
    return ids, np.bincount(ids)


def _classes_from_ids(
    ids: IntArray, fair: FloatArray, ok: BoolArray, usage: FloatArray, direction: FloatArray
) -> JobClasses:
    """JobClasses for class ids 0..C-1 (the first member of each class represents it)."""
    counts = np.bincount(ids).astype(float)
    order = np.argsort(ids, kind="stable").astype(np.int64)
    start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    rep = order[start[:-1]]
    return JobClasses(
        of_job=ids.astype(np.int64),
        count=counts,
        order=order,
        start=start,
        fair=fair[rep],
        ok=ok[rep],
        usage=usage[rep],
        direction=direction[rep],
    )


def classify_jobs(
    data: GavelData, heterogeneity_aware: bool = True, *, aggregate: bool = True
) -> JobClasses:
    """Group jobs whose solo LP rows coincide (to ~1e-12 relative); ``aggregate=False``
    makes every job its own class."""
    fair, ok, usage, direction = job_patterns(data, heterogeneity_aware)
    num_jobs = fair.shape[0]
    if not aggregate:
        return _classes_from_ids(np.arange(num_jobs, dtype=np.int64), fair, ok, usage, direction)
    keys = np.concatenate(
        [_quantize(fair), ok.astype(np.int64), _quantize(usage.reshape(num_jobs, -1))], axis=1
    )
    ids, _ = _group_rows(keys)
    return _classes_from_ids(ids, fair, ok, usage, direction)


# ------------------------------------------------------------------------ class pairs


@dataclass(frozen=True)
class ClassPairs:
    """Co-located pairs grouped by class pair q = (first, second), first <= second.

    Variable Y[q,k] is the *total* share of all concrete pairs of q on type k.  One job of
    class ``first`` receives ``rho_first[q] * Y[q,k]`` of it (1/m_first, or 2/m for a
    same-class pair, where each job sits in m-1 of the m(m-1)/2 pairs), one job of
    ``second`` receives ``rho_second[q] * Y[q,k]`` (0 for a same-class pair).
    """

    first: IntArray  # (Q,)
    second: IntArray  # (Q,)
    fair: FloatArray  # (Q, K, 2) a_j Tc per unit share of one pair, job of first / second
    ok: BoolArray  # (Q, K)
    gpus: FloatArray  # (Q,) g_q = max(s_a, s_b)
    rho_first: FloatArray  # (Q,)
    rho_second: FloatArray  # (Q,)
    size: IntArray  # (Q,) concrete pairs E_q
    concrete: IntArray  # (Q,) the concrete pair index when E_q == 1, else -1

    @property
    def num_pairs(self) -> int:
        """Q."""
        return len(self.first)

    def same_class(self) -> BoolArray:
        """Pairs of two jobs of one class."""
        return np.asarray(self.first == self.second)


def _pair_arrays(data: GavelData, coef: FloatArray) -> tuple[IntArray, FloatArray, BoolArray]:
    """(pairs (P, 2), normalized pair fairness (P, K, 2), ok (P, K))."""
    idx = pair_index(data)
    if not len(idx):
        num_types = len(data.types)
        return idx, np.zeros((0, num_types, 2)), np.zeros((0, num_types), dtype=bool)
    fair = data.pair_throughput * coef[idx][:, None, :]
    ok = data.pair_allowed
    return idx, np.where(ok[:, :, None], fair, 0.0), ok


def _pair_groups(
    ids: IntArray, counts: IntArray, idx: IntArray, fair: FloatArray, ok: BoolArray,
    gpus: FloatArray,
) -> tuple[IntArray, IntArray, IntArray, FloatArray, IntArray]:
    """Group concrete pairs by class pair.

    Returns (group of each pair, first class, second class, oriented fair, bad classes): a
    class is *bad* when one of its class pairs is listed only partly, is not uniform, or (a
    same-class pair) is not symmetric.
    """
    ca, cb = ids[idx[:, 0]], ids[idx[:, 1]]
    swap = ca > cb
    first, second = np.where(swap, cb, ca), np.where(swap, ca, cb)
    oriented = np.where(swap[:, None, None], fair[:, :, ::-1], fair)
    num_classes = len(counts)
    rep, group = _first_of_groups(first * num_classes + second)
    # a pair differs from its group's first pair in its rows (to ~1e-12 relative) or its GPUs
    bits = _quantize(oriented)
    leader = rep[group]
    differs = (bits != bits[leader]).any(axis=(1, 2))
    differs |= (ok != ok[leader]).any(axis=1)
    gbits = _quantize(gpus)
    differs |= gbits != gbits[leader]
    same = first == second
    asym = same & (bits[:, :, 0] != bits[:, :, 1]).any(axis=1)
    size = np.bincount(group)
    m1, m2 = counts[first[rep]], counts[second[rep]]
    expected = np.where(first[rep] == second[rep], m1 * (m1 - 1) // 2, m1 * m2)
    incomplete = size < expected
    bad_pair = differs | asym | incomplete[group]
    bad = np.unique(np.concatenate([first[bad_pair], second[bad_pair]]))
    return group, first, second, oriented, bad.astype(np.int64)


def _first_of_groups(keys: IntArray) -> tuple[IntArray, IntArray]:
    """(index of the first element of each distinct key, in key order; group of each
    element): ``np.unique(keys, return_index=True, return_inverse=True)[1:]`` by one stable
    argsort (fast on the nearly sorted keys of a listing)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    group = np.empty(len(keys), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    return order[new].astype(np.int64), group


def classify_with_pairs(
    data: GavelData, heterogeneity_aware: bool = True, *, aggregate: bool = True
) -> tuple[JobClasses, ClassPairs]:
    """Job classes that are also interchangeable in their co-location rows, and class pairs.

    Starting from :func:`classify_jobs`, every class taking part in a class pair that is only
    partly listed (not every member of c can pair with every member of d), or whose pairs
    differ in their rows, is split into single jobs; the remaining aggregated class pairs are
    complete and uniform, so the permutation argument holds (see the module docstring).
    """
    fair_j, ok_j, usage_j, dir_j = job_patterns(data, heterogeneity_aware)
    coef = fairness_coefficients(data)
    idx, pfair, pok = _pair_arrays(data, coef)
    keep = np.asarray(pok.any(axis=1), dtype=bool)
    concrete_index = np.flatnonzero(keep).astype(np.int64)
    idx, pfair, pok = idx[keep], pfair[keep], pok[keep]
    pgpus = data.pair_scale_factor[keep] if keep.size else np.zeros(0)
    base = classify_jobs(data, heterogeneity_aware, aggregate=aggregate)
    ids = base.of_job
    for _ in range(3):
        counts = np.bincount(ids, minlength=int(ids.max(initial=-1)) + 1)
        group, first, second, oriented, bad = _pair_groups(ids, counts, idx, pfair, pok, pgpus)
        if len(bad) == 0:
            break
        split = np.isin(ids, bad)
        num = int(ids.max(initial=-1)) + 1
        ids, _ = _group_rows(np.where(split, num + np.arange(len(ids)), ids)[:, None])
    else:  # pragma: no cover - splitting converges in one round (see docstring)
        ids = np.arange(len(ids), dtype=np.int64)
        counts = np.ones(len(ids), dtype=np.int64)
        group, first, second, oriented, bad = _pair_groups(ids, counts, idx, pfair, pok, pgpus)
    classes = _classes_from_ids(ids, fair_j, ok_j, usage_j, dir_j)
    num_groups = int(group.max(initial=-1)) + 1
    rep = np.full(num_groups, -1, dtype=np.int64)
    rep[group[::-1]] = np.arange(len(group) - 1, -1, -1)  # first pair of each group
    q_first, q_second = first[rep], second[rep]
    m1, m2 = classes.count[q_first], classes.count[q_second]
    same = q_first == q_second
    size = np.bincount(group, minlength=num_groups).astype(np.int64)
    pairs = ClassPairs(
        first=q_first,
        second=q_second,
        fair=oriented[rep],
        ok=pok[rep],
        gpus=pgpus[rep],
        rho_first=np.where(same, 2.0 / m1, 1.0 / m1),
        rho_second=np.where(same, 0.0, 1.0 / m2),
        size=size,
        concrete=np.where(size == 1, concrete_index[rep], -1),
    )
    return classes, pairs


# ------------------------------------------------------------ disaggregation of pairs


def _pair_lookup(data: GavelData) -> tuple[IntArray, IntArray, int]:
    """(sorted keys a * J + b of the listed pairs (a < b), their pair indices, J)."""
    num_jobs = data.num_jobs
    idx = pair_index(data)
    keys = idx[:, 0] * num_jobs + idx[:, 1]
    order = np.argsort(keys, kind="stable").astype(np.int64)
    return keys[order], order, num_jobs


def _find_pairs(lookup: tuple[IntArray, IntArray, int], a: IntArray, b: IntArray) -> IntArray:
    """Index in ``data.pairs`` of each pair {a[i], b[i]} (which must be listed)."""
    keys, order, num_jobs = lookup
    wanted = np.minimum(a, b) * num_jobs + np.maximum(a, b)
    pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    if len(wanted) and not np.array_equal(keys[pos], wanted):
        raise RuntimeError("disaggregation chose a pair the instance does not list")
    return np.asarray(order[pos], dtype=np.int64)


def northwest_corner(rows: int, cols: int) -> tuple[IntArray, IntArray, IntArray]:
    """Transport a total of rows * cols units from ``rows`` sources holding ``cols`` units
    each to ``cols`` sinks needing ``rows`` units each (the north-west-corner rule).

    Returns (source, sink, amount) of the rows + cols - gcd(rows, cols) nonzero cells: each
    cell covers one piece of [0, rows * cols) cut at the multiples of ``cols`` (sources) and
    of ``rows`` (sinks).  Each amount is at most min(rows, cols).
    """
    cuts = np.union1d(np.arange(0, rows * cols + 1, cols), np.arange(0, rows * cols + 1, rows))
    left, right = cuts[:-1], cuts[1:]
    return (
        (left // cols).astype(np.int64),
        (left // rows).astype(np.int64),
        (right - left).astype(np.int64),
    )


def disaggregate_pairs(
    data: GavelData, classes: JobClasses, pairs: ClassPairs, y_class: FloatArray
) -> FloatArray:
    """Y (P, K) over the instance's pairs from class-pair totals ``y_class`` (Q, K).

    Exact: every job of class c receives rho_qc * Y[q,k] from class pair q on type k, as in
    the class LP, through O(m_c + m_d) concrete pairs:

    * c != d: the north-west-corner transport of the m_c x m_d complete bipartite listing;
      pair (i, j) gets amount x Y / (m_c m_d) <= Y / max(m_c, m_d) <= 1;
    * c == d, m = 2: the one pair gets Y;
    * c == d, m >= 3: the Hamilton cycle 0-1-...-(m-1)-0 of the class's members, each edge
      Y / m (each job lies on two edges: 2 Y / m, as in the class LP; Y / m <= 1/2).
    """
    y = np.zeros((len(data.pairs), len(data.types)))
    used = np.flatnonzero((y_class > 0).any(axis=1))
    lookup = _pair_lookup(data)
    for q in used:
        amount = y_class[q]
        if pairs.concrete[q] >= 0:
            y[pairs.concrete[q]] += amount
            continue
        c, d = int(pairs.first[q]), int(pairs.second[q])
        mc, md = classes.members(c), classes.members(d)
        if c != d:
            src, dst, units = northwest_corner(len(mc), len(md))
            p = _find_pairs(lookup, mc[src], md[dst])
            y[p] += units[:, None] * amount[None, :] / (len(mc) * len(md))
        else:
            m = len(mc)
            nxt = np.roll(mc, -1)
            edges = 1 if m == 2 else m
            p = _find_pairs(lookup, mc[:edges], nxt[:edges])
            y[p] += amount[None, :] / edges
    return y


# -------------------------------------------------------------------- Pyomo helpers


def _values(var: Any, size: int) -> FloatArray:
    """Values of an indexed variable 0..size-1 (0 where it has none)."""
    out = np.zeros(size)
    for i, value in var.extract_values().items():
        out[i] = value or 0.0
    return out


@dataclass
class _Outcome:
    """What a fast solve produced, at class level."""

    status: Status
    z: FloatArray  # (C, R) per-job pattern shares
    y: FloatArray  # (Q, K) class-pair totals
    value: float | None  # the LP value found (lower bound)
    bound: float | None  # proven upper bound
    iterations: int = 0
    columns: int = 0
    message: str = ""


# ---------------------------------------------------------------- the class LP (primal)


def _solo_columns(classes: JobClasses) -> tuple[IntArray, IntArray]:
    """(class, pattern) of every allowed solo column."""
    c, r = np.nonzero(classes.ok)
    return c.astype(np.int64), r.astype(np.int64)


def class_lp(
    classes: JobClasses,
    gpus: FloatArray,
    pairs: ClassPairs | None = None,
    pair_columns: tuple[IntArray, IntArray] | None = None,
) -> tuple[pyo.ConcreteModel, tuple[IntArray, IntArray], tuple[IntArray, IntArray]]:
    """The LP over classes (and the given class-pair columns (q, k)), built from arrays.

    ``z[i]`` per-job share of solo column i, ``y[i]`` class-pair total of pair column i:

    * ``fairness[c]``: sum_r A[c,r] z[c,r] + sum_{(q,k), c in q} rho_qc B[q,k,c] Y[q,k] - t >= 0
    * ``job_share[c]``: sum_r z[c,r] + sum_{(q,k), c in q} rho_qc Y[q,k] <= 1
    * ``capacity[k]``: sum_{c,r} m_c U[c,r,k] z[c,r] + sum_q g_q Y[q,k] <= n_k
    """
    num_classes, num_types = classes.num_classes, len(gpus)
    sc, sr = _solo_columns(classes)
    if pairs is None or pair_columns is None:
        pq, pk = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    else:
        pq, pk = pair_columns
    ns, npair = len(sc), len(pq)
    m = pyo.ConcreteModel(name="gavel.max_min_fairness.class_lp")
    m.z = pyo.Var(range(ns), bounds=(0.0, 1.0))
    m.y = pyo.Var(range(npair), bounds=(0.0, None))
    m.t = pyo.Var(bounds=(0.0, None))
    variables = [m.z[i] for i in range(ns)] + [m.y[i] for i in range(npair)] + [m.t]
    col_s = np.arange(ns)
    col_p = ns + np.arange(npair)
    rows_f, cols_f, vals_f = [sc], [col_s], [classes.fair[sc, sr]]
    rows_s, cols_s, vals_s = [sc], [col_s], [np.ones(ns)]
    use = classes.count[sc, None] * classes.usage[sc, sr, :]  # (ns, K)
    rows_c, cols_c, vals_c = [np.nonzero(use)[1]], [col_s[np.nonzero(use)[0]]], [use[use != 0]]
    if pairs is not None and npair:
        for side, cls, rho in ((0, pairs.first, pairs.rho_first),
                               (1, pairs.second, pairs.rho_second)):
            live = rho[pq] > 0
            rows_f.append(cls[pq][live])
            cols_f.append(col_p[live])
            vals_f.append((rho[pq] * pairs.fair[pq, pk, side])[live])
            rows_s.append(cls[pq][live])
            cols_s.append(col_p[live])
            vals_s.append(rho[pq][live])
        rows_c.append(pk)
        cols_c.append(col_p)
        vals_c.append(pairs.gpus[pq])
    rows_f.append(np.arange(num_classes))
    cols_f.append(np.full(num_classes, ns + npair))
    vals_f.append(-np.ones(num_classes))
    width = ns + npair + 1

    def csr(rows: list[Any], cols: list[Any], vals: list[Any], height: int) -> sp.csr_matrix:
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(height, width),
        )

    add_rows(m, "fairness", csr(rows_f, cols_f, vals_f, num_classes), variables,
             np.zeros(num_classes), None)
    add_rows(m, "job_share", csr(rows_s, cols_s, vals_s, num_classes), variables,
             None, np.ones(num_classes))
    add_rows(m, "capacity", csr(rows_c, cols_c, vals_c, num_types), variables, None, gpus)
    m.objective = pyo.Objective(expr=m.t, sense=pyo.maximize)
    return m, (sc, sr), (pq, pk)


def class_levels(
    classes: JobClasses, z: FloatArray, pairs: ClassPairs | None = None,
    y: FloatArray | None = None,
) -> FloatArray:
    """Normalized throughput of one job of each class under (z, y), from the arrays."""
    level = (classes.fair * z).sum(axis=1)
    if pairs is not None and y is not None and len(y):
        for side, cls, rho in ((0, pairs.first, pairs.rho_first),
                               (1, pairs.second, pairs.rho_second)):
            np.add.at(level, cls, rho * (pairs.fair[:, :, side] * y).sum(axis=1))
    return np.asarray(level)


def solve_class_lp(
    classes: JobClasses,
    gpus: FloatArray,
    options: SolverOptions,
    pairs: ClassPairs | None = None,
    pair_columns: tuple[IntArray, IntArray] | None = None,
) -> _Outcome:
    """Build and solve :func:`class_lp` (dual simplex unless the caller chose).

    The solution is verified on the arrays: HiGHS judges feasibility on its scaled model, and
    the class rows (coefficients m_c and 1/m_c side by side) can leave an unscaled fairness
    residual near 1e-7.  When the worst class falls short of t by more than 1e-9 relative, the
    persistent model is re-solved without scaling, and the better solution is kept; ``value``
    is always the verified min over classes, never above what the allocation achieves.
    """
    m, (sc, sr), (pq, pk) = class_lp(classes, gpus, pairs, pair_columns)
    opts = options.with_method("simplex")
    solver = PersistentSolver(opts)
    num_pairs = pairs.num_pairs if pairs is not None else 0
    best: _Outcome | None = None
    attempts = [opts]
    if opts.solver == "highs" and "simplex_scale_strategy" not in opts.extra:
        attempts.append(replace(opts, extra={**opts.extra, "simplex_scale_strategy": 0}))
    for attempt in attempts:
        result = solver.solve(m, attempt)
        z = np.zeros(classes.fair.shape)
        y = np.zeros((num_pairs, len(gpus)))
        outcome = _Outcome(status=result.status, z=z, y=y, value=result.objective,
                           bound=result.bound, columns=len(sc) + len(pq),
                           message=result.message)
        if not result.status.has_solution or result.objective is None:
            return best or outcome
        z[sc, sr] = np.clip(_values(m.z, len(sc)), 0.0, None)
        if len(pq):
            np.add.at(y, (pq, pk), np.clip(_values(m.y, len(pq)), 0.0, None))
        achieved = float(class_levels(classes, z, pairs, y).min())
        outcome.value = min(result.objective, achieved)
        if best is None or (best.value or 0.0) < outcome.value:
            best = outcome
        if achieved >= result.objective * (1 - 1e-9):
            break
        log.debug("class LP: verified %.12g < solver's %.12g; re-solving unscaled", achieved,
                  result.objective)
    assert best is not None
    return best


# ------------------------------------------------ Dantzig-Wolfe over the capacity rows


def _past(deadline: float | None) -> bool:
    """True once ``deadline`` (a perf_counter value) has passed."""
    return deadline is not None and time.perf_counter() > deadline


@dataclass(frozen=True)
class CostHull:
    """Per class, the cheapest cost of reaching normalized throughput t as a convex
    piecewise-linear function phi_c(t) on [0, max_r A[c,r]]: segment i ends at ``ends[c,i]``
    (at the vertex 'pattern ``vertex[c,i]`` for the whole time'), slope ``slopes[c,i]``."""

    ends: FloatArray  # (C, R), +inf after the last segment
    slopes: FloatArray  # (C, R)
    vertex: IntArray  # (C, R), -1 after the last segment
    segments: IntArray  # (C,)


def cost_hull(fair: FloatArray, cost: FloatArray, ok: BoolArray) -> CostHull:
    """Lower convex hull of {(0, 0)} and {(A[c,r], cost[c,r]) : ok} (gift wrapping, at most R
    steps, vectorized over classes).

    From the current vertex (a, q) the next is the point with a' > a of least slope
    (cost' - q) / (a' - a); slopes are non-decreasing (mediant property), so phi_c is convex,
    and a point dominated by a cheaper faster one is never a vertex.
    """
    num_classes, num_patterns = fair.shape
    ends = np.full((num_classes, num_patterns), np.inf)
    slopes = np.zeros((num_classes, num_patterns))
    vertex = np.full((num_classes, num_patterns), -1, dtype=np.int64)
    segments = np.zeros(num_classes, dtype=np.int64)
    cur_a = np.zeros(num_classes)
    cur_q = np.zeros(num_classes)
    rows = np.arange(num_classes)
    for i in range(num_patterns):
        cand = ok & (fair > cur_a[:, None])
        run = np.where(cand, fair - cur_a[:, None], 1.0)
        slope = np.where(cand, (cost - cur_q[:, None]) / run, np.inf)
        best = np.argmin(slope, axis=1)
        has = np.isfinite(slope[rows, best])
        if not has.any():
            break
        live, b = rows[has], best[has]
        ends[live, i] = fair[live, b]
        slopes[live, i] = slope[live, b]
        vertex[live, i] = b
        cur_a[live] = fair[live, b]
        cur_q[live] = cost[live, b]
        segments[live] += 1
    return CostHull(ends=ends, slopes=slopes, vertex=vertex, segments=segments)


def best_level(hull: CostHull, count: FloatArray) -> float:
    """argmax_t of t - sum_c m_c phi_c(t): the first breakpoint after which the total slope
    sum_c m_c phi_c'(t) reaches 1, or the largest feasible t = min_c max_r A[c,r]."""
    last = hull.ends[np.arange(len(count)), hull.segments - 1]
    top = float(last.min()) if len(last) else 0.0
    slope0 = float((count * hull.slopes[:, 0]).sum())
    if slope0 >= 1.0:
        return 0.0
    steps = hull.slopes[:, 1:] - hull.slopes[:, :-1]
    at = hull.ends[:, :-1]
    inner = np.isfinite(hull.ends[:, 1:]) & (at < top)
    pos = at[inner]
    inc = (count[:, None] * steps)[inner]
    order = np.argsort(pos, kind="stable")
    total = slope0 + np.cumsum(inc[order])
    hit = np.flatnonzero(total >= 1.0)
    return float(pos[order][hit[0]]) if len(hit) else top


def shares_at_level(hull: CostHull, level: float, num_patterns: int) -> FloatArray:
    """Per-job pattern shares z (C, R) reaching normalized throughput ``level`` at least cost:
    a convex combination of the two hull vertices around ``level``."""
    num_classes = len(hull.segments)
    z = np.zeros((num_classes, num_patterns))
    if level <= 0.0 or num_classes == 0:
        return z
    rows = np.arange(num_classes)
    seg = np.argmax(hull.ends >= level, axis=1)
    right = hull.ends[rows, seg]
    left = np.where(seg > 0, hull.ends[rows, np.maximum(seg - 1, 0)], 0.0)
    theta = np.clip((level - left) / (right - left), 0.0, 1.0)
    z[rows, hull.vertex[rows, seg]] += theta
    prev = seg > 0
    z[rows[prev], hull.vertex[rows[prev], seg[prev] - 1]] += 1.0 - theta[prev]
    return z


@dataclass(frozen=True)
class _Column:
    """A point of S: level t, GPU use u (K,), and how to rebuild its shares."""

    level: float
    use: FloatArray
    prices: FloatArray | None  # None: the zero column


def price_capacity(
    classes: JobClasses, prices: FloatArray
) -> tuple[float, FloatArray, FloatArray]:
    """Exact pricing at capacity prices pi: (t*, z*, u*) maximizing t - pi . u(z) over S."""
    cost = np.einsum("crk,k->cr", classes.usage, prices)
    hull = cost_hull(classes.fair, cost, classes.ok)
    level = best_level(hull, classes.count)
    z = shares_at_level(hull, level, classes.fair.shape[1])
    use = np.einsum("c,cr,crk->k", classes.count, z, classes.usage)
    return level, z, use


def _column_shares(classes: JobClasses, column: _Column) -> FloatArray:
    if column.prices is None:
        return np.zeros(classes.fair.shape)
    return price_capacity(classes, column.prices)[1]


def solve_capacity_master(
    classes: JobClasses,
    gpus: FloatArray,
    options: SolverOptions,
    deadline: float | None = None,
) -> _Outcome:
    """Dantzig-Wolfe / Kelley over the K capacity rows (no co-located pairs).

    Dual master (persistent, K + 1 variables):  min sigma + n . pi  s.t.
    sigma + u_i . pi >= t_i for every column i, pi >= 0.  Each iteration prices at its pi,
    giving the upper bound L(pi) = t* - pi . u* + n . pi; the master value is the lower bound.
    At the end the primal master  max sum_i lambda_i t_i  s.t.  sum_i lambda_i u_i <= n,
    sum_i lambda_i = 1  is solved once for the weights, and z = sum_i lambda_i z_i.
    """
    opts = options.with_method("simplex")
    num_types = len(gpus)
    active = np.flatnonzero(gpus > 0)
    master = pyo.ConcreteModel(name="gavel.max_min_fairness.capacity_master")
    master.pi = pyo.Var(range(num_types), bounds=(0.0, None))
    for k in range(num_types):
        if k not in active:
            master.pi[k].fix(0.0)
    master.sigma = pyo.Var()
    master.objective = pyo.Objective(
        expr=master.sigma + sum(float(gpus[k]) * master.pi[k] for k in active)
    )
    master.cuts = pyo.ConstraintList()
    columns: list[_Column] = []

    def add(column: _Column) -> None:
        columns.append(column)
        expr = numeric_expr.LinearExpression(
            linear_coefs=[1.0, *(float(column.use[k]) for k in active)],
            linear_vars=[master.sigma, *(master.pi[k] for k in active)],
        )
        master.cuts.add(expr >= column.level)

    add(_Column(0.0, np.zeros(num_types), None))
    solver = PersistentSolver(opts)
    upper = np.inf
    lower = 0.0
    # optimal until a sub-solve says otherwise (worst_status below); the loop ends proven
    # only when the master's bound meets the priced column's value (GAP_TOLERANCE)
    status = Status.OPTIMAL
    iterations = 0
    while True:
        result = solver.solve(master)
        if not result.status.has_solution or result.objective is None:
            return _Outcome(Status.ERROR, np.zeros(classes.fair.shape), np.zeros((0, num_types)),
                            None, None, iterations, len(columns), result.message)
        if result.status != Status.OPTIMAL:  # an unproven master value bounds nothing
            status = worst_status(status, result.status)
        lower = result.objective
        prices = np.maximum(_values(master.pi, num_types), 0.0)
        level, _, use = price_capacity(classes, prices)
        upper = min(upper, level - float(prices @ use) + float(prices @ gpus))
        iterations += 1
        if upper - lower <= GAP_TOLERANCE * max(abs(upper), 1e-12):
            break
        if iterations >= MAX_ITERATIONS or _past(deadline):
            status = Status.TIME_LIMIT
            break
        add(_Column(level, use, prices))
    weights, primal = _primal_master(columns, gpus, opts)
    if weights is None:
        return _Outcome(Status.ERROR, np.zeros(classes.fair.shape), np.zeros((0, num_types)),
                        None, None, iterations, len(columns),
                        f"primal master failed: {primal.message}")
    status = worst_status(status, primal.status)
    z = np.zeros(classes.fair.shape)
    for column, weight in zip(columns, weights, strict=True):
        if weight > 0:
            z += weight * _column_shares(classes, column)
    return _Outcome(status, z, np.zeros((0, num_types)), float(primal.objective or 0.0), upper,
                    iterations, len(columns))


def _primal_master(
    columns: list[_Column], gpus: FloatArray, options: SolverOptions
) -> tuple[FloatArray | None, SolveResult]:
    """Weights lambda of  max sum lambda_i t_i  s.t.  sum lambda_i u_i <= n, sum lambda = 1,
    and the solve's result (weights None when the solve found no solution)."""
    m = pyo.ConcreteModel(name="gavel.max_min_fairness.capacity_primal")
    m.lam = pyo.Var(range(len(columns)), bounds=(0.0, None))
    m.capacity = pyo.Constraint(
        range(len(gpus)),
        rule=lambda model, k: sum(float(c.use[k]) * model.lam[i] for i, c in enumerate(columns)
                                  if c.use[k] != 0) <= float(gpus[k])
        if any(c.use[k] != 0 for c in columns) else pyo.Constraint.Skip,
    )
    m.convexity = pyo.Constraint(expr=sum(m.lam[i] for i in range(len(columns))) == 1.0)
    m.objective = pyo.Objective(
        expr=sum(c.level * m.lam[i] for i, c in enumerate(columns)), sense=pyo.maximize
    )
    result = PersistentSolver(options).solve(m)
    if not result.status.has_solution or result.objective is None:
        return None, result
    weights = np.clip(_values(m.lam, len(columns)), 0.0, None)
    total = weights.sum()
    if total > 0:
        weights /= total
    return weights, result


# -------------------------------------------------- column generation over pair columns


def pair_reduced_costs(
    pairs: ClassPairs, fairness_dual: FloatArray, share_dual: FloatArray, prices: FloatArray
) -> FloatArray:
    """rc[q,k] = sum_{c in q} rho_qc (lambda_c B[q,k,c] - mu_c) - g_q pi_k (-inf where not
    allowed)."""
    f, s = pairs.first, pairs.second
    rc = pairs.rho_first[:, None] * (fairness_dual[f, None] * pairs.fair[:, :, 0]
                                     - share_dual[f, None])
    rc += pairs.rho_second[:, None] * (fairness_dual[s, None] * pairs.fair[:, :, 1]
                                       - share_dual[s, None])
    rc -= pairs.gpus[:, None] * prices[None, :]
    return np.where(pairs.ok, rc, -np.inf)


def solve_pair_master(
    classes: JobClasses,
    pairs: ClassPairs,
    gpus: FloatArray,
    options: SolverOptions,
    deadline: float | None = None,
) -> _Outcome:
    """Column generation over the pair columns, the master in dual form.

    Dual master (persistent):  min sum_c mu_c + n . pi  s.t.  sum_c lambda_c >= 1,
    mu_c + m_c U[c,r] . pi - A[c,r] lambda_c >= 0 for every solo column, and
    sum_{c in q} rho_qc (mu_c - B[q,k,c] lambda_c) + g_q pi_k >= 0 for the generated pair
    columns; lambda, mu, pi >= 0.  Its optimum is the restricted primal's; when no pair
    column has a positive reduced cost it is dual feasible for the whole LP, hence optimal.

    The master is a :func:`~schedlab.solvers.matrix.matrix_model` built from arrays (columns
    lambda, mu, pi; rows added in blocks, re-solved warm by dual simplex); a pair row dropped
    after :data:`CUT_MAX_AGE` slack iterations is made free (bounds -inf..inf), which removes
    it from the LP without renumbering the others.
    """
    opts = options.with_method("simplex")
    num_classes, num_types = classes.num_classes, len(gpus)
    lam0, mu0, pi0 = 0, num_classes, 2 * num_classes  # first column of each block
    width = 2 * num_classes + num_types
    master = matrix_model(opts)
    master.add_columns(np.zeros(width), np.full(width, np.inf),
                       np.concatenate([np.zeros(num_classes), np.ones(num_classes), gpus]))
    master.add_row(1.0, np.inf, np.arange(num_classes), np.ones(num_classes))
    sc, sr = _solo_columns(classes)
    use = classes.count[sc, None] * classes.usage[sc, sr, :]
    ri, rk = np.nonzero(use)
    solo = np.arange(len(sc))
    _add_master_rows(master, len(sc),
                     np.concatenate([solo, ri, solo]),
                     np.concatenate([mu0 + sc, pi0 + rk, lam0 + sc]),
                     np.concatenate([np.ones(len(sc)), use[ri, rk], -classes.fair[sc, sr]]))
    added = np.zeros(pairs.ok.shape, dtype=bool)
    live_row = np.zeros(0, dtype=np.int64)  # master rows of the live pair columns
    live_q = np.zeros(0, dtype=np.int64)
    live_k = np.zeros(0, dtype=np.int64)
    age = np.zeros(0, dtype=np.int64)
    generated = 0
    # optimal until a sub-solve says otherwise (worst_status below); proven only when no
    # column prices out (PRICING_TOLERANCE) after an optimal master
    status = Status.OPTIMAL
    iterations = 0
    bound = np.inf
    while True:
        result = master.solve()
        iterations += 1
        if not result.status.has_solution or result.objective is None:
            return _Outcome(Status.ERROR, np.zeros(classes.fair.shape),
                            np.zeros((pairs.num_pairs, num_types)), None, None, iterations,
                            generated, result.message)
        value = result.objective
        duals = master.values()
        lam_v = duals[lam0:mu0]
        mu_v = duals[mu0:pi0]
        pi_v = duals[pi0:]
        rc = pair_reduced_costs(pairs, lam_v, mu_v, pi_v)
        rc[added] = -np.inf
        tol = PRICING_TOLERANCE * max(abs(value), 1e-12)
        # the master's duals, raised to cover every column that still prices out, are feasible
        # for the whole dual: a valid upper bound in every iteration
        bound = min(bound, value + _repair_bound(pairs, rc, num_classes))
        log.debug("pair master iteration %d: value %.12g, bound %.12g, %d live pair columns, "
                  "%.3f s", iterations, value, bound, len(live_q), result.solve_s)
        if not (rc > tol).any():
            break
        if iterations >= MAX_ITERATIONS or _past(deadline):
            status = Status.TIME_LIMIT
            break
        # Drop columns whose master row has been slack for CUT_MAX_AGE iterations: their primal
        # value is 0, so the master's optimum stays optimal without them; they may re-enter.
        if len(live_q):
            slack = pair_row_activity(pairs, live_q, live_k, lam_v, mu_v, pi_v)
            age = np.where(slack > 1e-6 * max(abs(value), 1e-12), age + 1, 0)
            stale = age >= CUT_MAX_AGE
            if stale.any():
                master.set_row_bounds(live_row[stale], -np.inf, np.inf)
                added[live_q[stale], live_k[stale]] = False
                live_row, live_q, live_k = live_row[~stale], live_q[~stale], live_k[~stale]
                age = age[~stale]
        entering_q, entering_k = _entering_columns(pairs, rc, tol)
        rows = _add_pair_rows(master, pairs, entering_q, entering_k, lam0, mu0, pi0)
        added[entering_q, entering_k] = True
        live_row = np.concatenate([live_row, rows])
        live_q = np.concatenate([live_q, entering_q])
        live_k = np.concatenate([live_k, entering_k])
        age = np.concatenate([age, np.zeros(len(entering_q), dtype=np.int64)])
        generated += len(entering_q)
    # Complementary slackness: an optimal restricted primal uses only columns whose master row
    # is tight at the master's optimum, so the final primal gets just those (a few per class).
    slack = pair_row_activity(pairs, live_q, live_k, lam_v, mu_v, pi_v)
    tight = slack <= 1e-7 * max(abs(value), 1e-12)
    outcome = solve_class_lp(classes, gpus, opts, pairs, (live_q[tight], live_k[tight]))
    if outcome.value is None or outcome.value < value - 1e-9 * max(abs(value), 1e-12):
        log.debug("tight columns gave %s < %s; solving with all live columns",
                  outcome.value, value)
        outcome = solve_class_lp(classes, gpus, opts, pairs, (live_q, live_k))
    outcome.iterations = iterations
    outcome.columns = generated
    # the repaired duals bound the LP in every iteration, proven or not; no finite repair,
    # no bound (the primal value bounds nothing from above)
    outcome.bound = float(bound) if np.isfinite(bound) else None
    if status != Status.OPTIMAL and outcome.status.has_solution:
        outcome.status = status
    return outcome


def _add_master_rows(master: MatrixModel, height: int, rows: IntArray, columns: IntArray,
                     values: FloatArray) -> IntArray:
    """Add ``height`` rows ``>= 0`` with entries (rows, columns, values) (COO, no duplicate
    (row, column)); returns their indices in the master."""
    matrix = sp.csr_matrix((values, (rows, columns)), shape=(height, master.num_columns))
    matrix.eliminate_zeros()  # a 0 coefficient is no term (as in Pyomo's algebra)
    matrix.sort_indices()
    return master.add_rows(np.zeros(height), np.full(height, np.inf), starts=matrix.indptr,
                           columns=matrix.indices, values=matrix.data)


def _add_pair_rows(master: MatrixModel, pairs: ClassPairs, q: IntArray, k: IntArray,
                   lam0: int, mu0: int, pi0: int) -> IntArray:
    """The dual master's rows of pair columns (q, k):
    sum_{c in q} rho_qc (mu_c - B[q,k,c] lambda_c) + g_q pi_k >= 0."""
    f, s = pairs.first[q], pairs.second[q]
    rf, rs = pairs.rho_first[q], pairs.rho_second[q]
    two = rs > 0  # a same-class pair has rho_second = 0: one class only
    n = len(q)
    row = np.arange(n)
    rows = np.concatenate([row, row, row, row[two], row[two]])
    columns = np.concatenate([mu0 + f, lam0 + f, pi0 + k, mu0 + s[two], lam0 + s[two]])
    values = np.concatenate([rf, -rf * pairs.fair[q, k, 0], pairs.gpus[q], rs[two],
                             -rs[two] * pairs.fair[q[two], k[two], 1]])
    return _add_master_rows(master, n, rows, columns, values)


def pair_row_activity(
    pairs: ClassPairs, q: IntArray, k: IntArray, fairness_dual: FloatArray,
    share_dual: FloatArray, prices: FloatArray,
) -> FloatArray:
    """Slack of the master's rows for pair columns (q, k): minus their reduced cost."""
    f, s = pairs.first[q], pairs.second[q]
    rc = pairs.rho_first[q] * (fairness_dual[f] * pairs.fair[q, k, 0] - share_dual[f])
    rc += pairs.rho_second[q] * (fairness_dual[s] * pairs.fair[q, k, 1] - share_dual[s])
    rc -= pairs.gpus[q] * prices[k]
    return np.asarray(-rc)


def _entering_columns(
    pairs: ClassPairs, rc: FloatArray, tol: float, per_class: int | None = None
) -> tuple[IntArray, IntArray]:
    """Columns to add: for every class, the ``per_class`` best-pricing pair columns it takes
    part in (each at its best type), so one iteration adds at most ``per_class`` x C columns
    spread over all classes rather than the globally best ones, which crowd on a few."""
    per_class = ENTERING_PER_CLASS if per_class is None else per_class
    best_k = np.argmax(rc, axis=1)
    best = rc[np.arange(len(best_k)), best_k]
    cand = np.flatnonzero(best > tol)
    ranked = cand[np.argsort(-best[cand], kind="stable")]
    touched = np.concatenate([pairs.first[ranked], pairs.second[ranked]])
    column = np.concatenate([ranked, ranked])
    position = np.concatenate([np.arange(len(ranked)), np.arange(len(ranked))])
    order = np.lexsort((position, touched))
    cls = touched[order]
    starts = np.flatnonzero(np.concatenate(([True], cls[1:] != cls[:-1])))
    rank_in_class = np.arange(len(cls)) - np.repeat(starts, np.diff(np.append(starts, len(cls))))
    chosen = np.unique(column[order][rank_in_class < per_class])
    return chosen.astype(np.int64), best_k[chosen].astype(np.int64)


def _repair_bound(pairs: ClassPairs, rc: FloatArray, num_classes: int) -> float:
    """sum_c delta_c with delta_c = max over violated columns touching c of
    rc / (rho_first + rho_second): raising mu by delta makes the master's duals feasible
    for every column, so master value + this is a valid upper bound."""
    best = np.max(rc, axis=1)
    bad = best > 0
    raise_by = best[bad] / (pairs.rho_first[bad] + pairs.rho_second[bad])
    delta = np.zeros(num_classes)
    np.maximum.at(delta, pairs.first[bad], raise_by)
    np.maximum.at(delta, pairs.second[bad], raise_by)
    return float(delta.sum())


# ---------------------------------------------------------------------- entry point


def _tight_tolerances(options: SolverOptions) -> SolverOptions:
    """HiGHS with feasibility tolerances 1e-9 (default 1e-7) unless the caller set them:
    pricing compares reduced costs near 1e-10 x the objective, so the masters' duals must be
    that accurate."""
    if options.solver != "highs":
        return options
    extra = {**HIGHS_TOLERANCES, **options.extra}
    return replace(options, extra=extra)


def _with_pairs(data: GavelData, keep: IntArray) -> GavelData:
    """``data`` restricted to the pairs ``keep`` (in that order)."""
    return replace(
        data,
        pairs=PairList(pair_index(data)[keep]),
        pair_throughput=data.pair_throughput[keep],
        pair_allowed=data.pair_allowed[keep],
    )


#: The paths of :func:`solve_max_min_fast`.
FAST_PATHS = ("aggregated_lp", "prices", "capacity_master", "pair_column_generation")


def choose_path(classes: JobClasses, pairs: ClassPairs | None) -> str:
    """The path :func:`solve_max_min_fast` takes when none is forced."""
    if pairs is None:
        return "aggregated_lp" if classes.num_classes <= CLASS_LP_MAX_CLASSES else "prices"
    if int(pairs.ok.sum()) <= FULL_PAIR_COLUMNS_MAX:
        return "aggregated_lp"
    return "pair_column_generation"


def solve_max_min_fast(
    formulation: GavelPolicy,
    instance: Instance,
    options: SolverOptions,
    *,
    path: str | None = None,
    aggregate: bool = True,
) -> Solution:
    """Solve max-min fairness exactly by the fastest applicable path.

    Paths (``path=None`` chooses by :func:`choose_path`):

    * ``"aggregated_lp"``: the class LP with every column, solved once (no pairs and at most
      :data:`CLASS_LP_MAX_CLASSES` classes, or at most :data:`FULL_PAIR_COLUMNS_MAX` pair
      columns);
    * ``"prices"``: fixed segments at capacity prices (no pairs, many classes;
      :mod:`~schedlab.formulations.gavel.prices`);
    * ``"capacity_master"``: Dantzig-Wolfe over the capacity rows (no pairs; forced only);
    * ``"pair_column_generation"``: column generation over the pair columns.

    ``aggregate=False`` makes every job its own class (for tests and benchmarks).  The
    Solution has the same form as the reference's (``finish``); ``metrics`` adds ``fast_path``,
    ``jobs``, ``classes``, ``pair_classes``, ``columns`` (columns of the one LP, Dantzig-Wolfe
    columns, or generated pair columns) and ``iterations``.  ``bound`` is a proven upper bound
    (the LP's dual value, the Lagrangian bound, or the repaired master duals) and ``gap`` =
    (bound - objective) / objective.  Timings: ``build`` = arrays and classes, ``solve`` = the
    Pyomo models built and solved, ``extract`` = broadcast, disaggregation and ``finish``.
    """
    if path is not None and path not in FAST_PATHS:
        raise ValueError(f"unknown fast path {path!r} (known: {', '.join(FAST_PATHS)})")
    start = time.perf_counter()
    data, true = formulation.policy_data(instance)
    if formulation.needs_every_job:
        stuck = unrunnable_jobs(true)
        if stuck:
            return formulation.infeasible_solution(instance, unrunnable_reason(instance, stuck))
    if data.num_jobs == 0:
        return GavelPolicy.solve(formulation, instance, options)
    deadline = start + options.time_limit_s if options.time_limit_s is not None else None
    options = _tight_tolerances(options)
    aware = formulation.heterogeneity_aware
    with_pairs = formulation.space_sharing and bool(data.pairs) and bool(data.pair_allowed.any())
    metrics: dict[str, Any] = {"jobs": data.num_jobs}
    pairs: ClassPairs | None = None
    if with_pairs:
        classes, pairs = classify_with_pairs(data, aware, aggregate=aggregate)
        metrics["pair_classes"] = pairs.num_pairs
    else:
        classes = classify_jobs(data, aware, aggregate=aggregate)
    metrics["classes"] = classes.num_classes
    chosen = path or choose_path(classes, pairs)
    built = time.perf_counter()
    if chosen in ("capacity_master", "prices"):
        if pairs is not None:
            raise ValueError(f"the {chosen} path has no co-located pairs; use another path")
        if chosen == "prices":
            from schedlab.formulations.gavel.prices import solve_price_path

            outcome = solve_price_path(classes, data.gpus, options, deadline)
        else:
            outcome = solve_capacity_master(classes, data.gpus, options, deadline)
    elif chosen == "pair_column_generation":
        if pairs is None:
            raise ValueError("pair column generation needs co-located pairs")
        outcome = solve_pair_master(classes, pairs, data.gpus, options, deadline)
    elif pairs is None:
        outcome = solve_class_lp(classes, data.gpus, options)
    else:
        q, k = np.nonzero(pairs.ok)
        outcome = solve_class_lp(classes, data.gpus, options, pairs,
                                 (q.astype(np.int64), k.astype(np.int64)))
    solved = time.perf_counter()
    metrics.update(fast_path=chosen, iterations=outcome.iterations, columns=outcome.columns)
    log.info("max-min fairness fast path %s: %d jobs in %d classes, %d columns, %d iterations",
             chosen, data.num_jobs, classes.num_classes, outcome.columns, outcome.iterations)
    solution = formulation.new_solution(instance, outcome.status)
    solution.solver = options.solver
    if not outcome.status.has_solution:
        solution.diagnostics = [f"solver: {outcome.message}"]
        solution.metrics.update(metrics)
        solution.timings = Timings(build_s=built - start, solve_s=solved - built)
        return solution
    x = classes.broadcast(outcome.z)
    if pairs is not None:
        y = disaggregate_pairs(data, classes, pairs, outcome.y)
    else:
        y = np.zeros(data.pair_allowed.shape)
    # Only pairs with a share matter to the allocation, objective and metrics; handing finish()
    # just those keeps its per-pair Python loops off the (up to J^2/2) unused pairs.
    used = np.flatnonzero((y > 0).any(axis=1)) if len(y) else np.zeros(0, dtype=np.int64)
    formulation.finish(solution, instance, _with_pairs(data, used), _with_pairs(true, used),
                       x, y[used])
    solution.metrics.update(metrics)
    if chosen == "prices" and outcome.message:  # it fell back to the capacity master
        solution.diagnostics.append(outcome.message)
    objective = solution.objective if solution.objective is not None else 0.0
    # the primal value is a bound only when the LP is proven optimal (strong duality)
    bound = outcome.bound
    if bound is None and outcome.status == Status.OPTIMAL:
        bound = outcome.value
    if bound is not None and outcome.status == Status.OPTIMAL:
        bound = max(bound, objective)  # the LP optimum; the recomputed objective may be 1e-15 up
    solution.bound = bound
    if bound is not None:
        solution.gap = max(bound - objective, 0.0) / max(abs(objective), 1e-12)
    done = time.perf_counter()
    solution.timings = Timings(build_s=built - start, solve_s=solved - built,
                               extract_s=done - solved)
    return solution
