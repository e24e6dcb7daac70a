r"""Exact max-min fairness without co-location, by prices on the K capacity rows.

The class LP of :mod:`schedlab.formulations.gavel.fast` without pairs (C classes c of m_c
interchangeable jobs, patterns r with normalized throughput A[c,r] and GPU use U[c,r,k]):

.. math::

   \max t \;\text{s.t.}\; \sum_r A_{cr} z_{cr} \ge t,\; \sum_r z_{cr} \le 1,\;
   \sum_{c,r} m_c U_{crk} z_{cr} \le n_k,\; z \ge 0

and its dual, per job of class c (lambda_c: fairness, mu_c: job share, pi_k: capacity):

.. math::

   \min \sum_c m_c \mu_c + n \cdot \pi \;\text{s.t.}\; \sum_c m_c \lambda_c \ge 1,\;
   \mu_c + \pi \cdot U_{cr} \ge \lambda_c A_{cr}\;\forall (c,r),\; \lambda,\mu,\pi \ge 0.

**Fixed segments.**  At prices pi a job's cheapest way to reach level t is on the lower convex
hull of the origin and the points (A[c,r], pi . U[c,r]) (:func:`~.fast.cost_hull`): the two
hull vertices L, R around t, mixed as z_L = (A_R - t)/(A_R - A_L), z_R = (t - A_L)/(A_R - A_L).
Along that segment its GPU use is affine in t, and the supporting line of the segment gives
its duals: lambda_c = (c_R - c_L)/(A_R - A_L) (the hull's slope), mu_c = lambda_c A_L - c_L
(c = pi . U).  If every job of a set F keeps its segment, the LP restricted to
"jobs of F on their segments, the other classes W free" is

.. math::

   \max t \;\text{s.t.}\; \text{rows of } W,\;
   \sum_{w \in W, r} m_w U_{wrk} z_{wr} + U^0_k + t\,U^1_k \le n_k,\;
   \max_{F} A_L \le t \le \min_{F} A_R

with U^0 = sum_F m_c (U_L A_R - U_R A_L)/(A_R - A_L), U^1 = sum_F m_c (U_R - U_L)/(A_R - A_L).
It is a restriction, so its optimum is a lower bound.  Its dual (lambda_W, mu_W, pi), with
lambda_c, mu_c of every fixed class computed from its segment at *those* pi, satisfies
sum_c m_c lambda_c = 1 and gives the same objective (pi . U^1 = sum_F m_c lambda_c,
-pi . U^0 = sum_F m_c mu_c) whenever neither t bound is active; it is feasible for the full
dual exactly when every fixed class's segment is still a lower-hull segment at pi
(mu_c + pi . U[c,r] >= lambda_c A[c,r] for all r, lambda_c, mu_c >= 0).  Then primal value =
dual value: optimal.  Classes that fail join W and the small LP is solved again; W only
grows, so this ends.

**Where the first prices come from** (:func:`solve_by_prices`): the class LP on a random
sample of :data:`SAMPLE_CLASSES` classes (multiplicities scaled to the job count) gives a
first (t, pi); quasi-Newton steps on the market-clearing equations D(t, pi) = n (priced types),
sum_c m_c lambda_c = 1 bring it close on all classes (:func:`newton_prices`); the fixed-segment
loop then starts with the classes within :data:`BAND_MARGIN` of changing segment free (at least
:data:`MIN_FREE`).  When t* sits at the slowest job's best level while capacities bind, the
prices are not pinned by those equations and :func:`solve_price_path` hands the instance to the
capacity master instead (docs/fast_paths.md, section 3b).

**Certificate** (:func:`certify`): the primal (z clipped, rescaled to the capacities) and the
dual (mu recomputed as max(0, max_r lambda A - pi . U), everything divided by
sum m lambda) are made exactly feasible in numpy; the reported bound is the dual objective
and the gap (bound - t) / t.  ``optimal`` only when that gap is at most
:data:`GAP_TOLERANCE`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from schedlab.formulations.gavel.data import BoolArray, FloatArray
from schedlab.formulations.gavel.fast import JobClasses, _Outcome, solve_capacity_master
from schedlab.lazy import LazyModule
from schedlab.solution import Status
from schedlab.solvers import SolverOptions
from schedlab.solvers.matrix import matrix_model

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported at the first use (schedlab.lazy)
    sp = LazyModule("scipy.sparse")


log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]

#: Status ``optimal`` when the certified relative duality gap is at most this.
GAP_TOLERANCE = 1e-9
#: Up to this many classes the class LP is solved directly (every class free).
DIRECT_MAX_CLASSES = 300
#: Classes in the random sample whose class LP gives the first (t, pi).
SAMPLE_CLASSES = 300
#: Relative margin (level inside its segment, dual slack of the other patterns) under which
#: a class starts free in the fixed-segment loop.
BAND_MARGIN = 1e-4
#: ... and at least this many classes start free (the closest to changing segment).
MIN_FREE = 200
#: A fixed class whose relative dual slack or level margin is below minus this is freed.
VIOLATION = 1e-12
#: Rounds of the fixed-segment loop before giving up.
MAX_ROUNDS = 40
#: Free classes beyond which the fixed-segment loop gives up (its LP would be slow).
MAX_FREE = 20_000
#: Newton steps on the market-clearing equations, their stopping residual, and the relative
#: forward-difference step of the Jacobian.
NEWTON_ITERATIONS = 12
NEWTON_TOLERANCE = 1e-7
FD_STEP = 1e-5
#: ... at least this many classes over the class count (D moves in steps of ~1/C).
FD_CLASSES = 30.0
#: Rounds of Newton with the set of priced types adjusted in between.
ACTIVE_ROUNDS = 4
#: Relative margin within which Newton re-prices a class at every step (the others keep
#: their segment and enter as an affine total).
NEWTON_BAND = 0.02
#: Classes in the random sample whose forward differences give Newton's Jacobian.
JACOBIAN_SAMPLE = 20_000
#: HiGHS feasibility tolerances of the LPs here (at most).
LP_TOLERANCE = 1e-10
#: Seed of the sample (the result does not depend on it, only the work).
SAMPLE_SEED = 0


#: Why the price path hands an instance to the capacity master.
TOP_LEVEL = ("the optimum is held at the slowest job's best level while capacities bind, "
             "where the market equations do not pin the prices")


@dataclass
class _Point:
    """A level t and capacity prices pi."""

    level: float
    prices: FloatArray


@dataclass(frozen=True)
class Segments:
    """Per class, the hull segment around a level at given prices.

    ``left``/``right``: pattern of the segment's end vertices (-1: the origin); ``a_left``,
    ``a_right``: their normalized throughputs; ``reach``: False where the class cannot reach
    the level at all.
    """

    left: IntArray
    right: IntArray
    a_left: FloatArray
    a_right: FloatArray
    reach: BoolArray


@dataclass
class PriceOutcome:
    """What :func:`solve_by_prices` found (class level)."""

    status: Status
    z: FloatArray  # (C, R) per-job pattern shares, exactly feasible
    value: float  # min_c A_c . z_c
    bound: float  # certified dual objective
    prices: FloatArray  # (K,)
    rounds: int  # fixed-segment LP solves
    free_classes: int  # |W| of the last solve
    message: str = ""


def pattern_costs(classes: JobClasses, prices: FloatArray) -> FloatArray:
    """c[c,r] = pi . U[c,r] (per job, per unit of time)."""
    cost = np.zeros(classes.usage.shape[:2])
    for k in np.flatnonzero(prices):  # K is small: K axpys beat a skinny BLAS product
        cost += classes.usage[:, :, k] * prices[k]
    return cost


def total_use(classes: JobClasses, count: FloatArray, z: FloatArray) -> FloatArray:
    """sum_c m_c sum_r z[c,r] U[c,r,:] (K,)."""
    weight = count[:, None] * z
    return np.array([float((weight * classes.usage[:, :, k]).sum())
                     for k in range(classes.usage.shape[2])])


def _candidates(num_patterns: int) -> tuple[IntArray, IntArray]:
    """(low, high) positions, in a class's patterns sorted by A (position R: idle time), of
    every vertex of {z >= 0 : A . z >= t, sum z <= 1}: a pattern alone mixed with idle time,
    or a slower pattern with a faster one filling the whole time (A_low < t <= A_high)."""
    low = [num_patterns] * num_patterns
    high = list(range(num_patterns))
    for r in range(num_patterns):
        for q in range(r + 1, num_patterns):
            low.append(r)
            high.append(q)
    return np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)


@dataclass(frozen=True)
class Vertices:
    """The vertex candidates of every class (they depend on A only, not on the prices).

    Each class's patterns are sorted by A (``order``); candidate v mixes sorted position
    ``low_pos[v]`` (R: idle time) with ``high_pos[v]``.  ``low``, ``high`` (C, V) are the
    same as pattern indices (-1: idle), ``a_low``, ``a_high`` their normalized throughputs,
    ``valid`` where both are allowed and a_low < a_high.
    """

    order: IntArray
    low_pos: IntArray
    high_pos: IntArray
    low: npt.NDArray[np.int16]
    high: npt.NDArray[np.int16]
    a_low: FloatArray
    a_high: FloatArray
    width: FloatArray
    valid: BoolArray


def vertices(classes: JobClasses) -> Vertices:
    """:class:`Vertices` of ``classes``."""
    fair = np.where(classes.ok, classes.fair, 0.0)
    num_classes, num_patterns = fair.shape
    order = np.argsort(fair, axis=1, kind="stable")
    low_pos, high_pos = _candidates(num_patterns)
    idle = np.full((num_classes, 1), -1, dtype=np.int64)
    pattern = np.concatenate([order, idle], axis=1)
    pad_fair = np.concatenate([np.take_along_axis(fair, order, 1),
                               np.zeros((num_classes, 1))], axis=1)
    pad_ok = np.concatenate([np.take_along_axis(classes.ok, order, 1),
                             np.ones((num_classes, 1), dtype=bool)], axis=1)
    a_low, a_high = pad_fair[:, low_pos], pad_fair[:, high_pos]
    valid = pad_ok[:, low_pos] & pad_ok[:, high_pos] & (a_high > 0) & (a_high > a_low)
    return Vertices(order=order, low_pos=low_pos, high_pos=high_pos,
                    low=pattern[:, low_pos].astype(np.int16),
                    high=pattern[:, high_pos].astype(np.int16), a_low=a_low, a_high=a_high,
                    width=np.where(valid, a_high - a_low, 1.0), valid=valid)


def cheapest(
    vert: Vertices, cost: FloatArray, level: float
) -> tuple[IntArray, BoolArray, FloatArray, FloatArray]:
    """Per class, the cheapest vertex at ``level``: (flat index c * V + v into the (C, V)
    arrays of ``vert``, reach, c_low, c_high of it).  The cheapest way to reach t,
    min c . z s.t. A . z >= t, sum z <= 1, z >= 0, is attained at a vertex: a pattern r for
    t/A_r of the time (A_r >= t), or patterns r, q with A_r < t <= A_q for the whole time;
    the first of equally cheap ones is kept."""
    num_classes = cost.shape[0]
    pad_cost = np.concatenate([np.take_along_axis(cost, vert.order, 1),
                               np.zeros((num_classes, 1))], axis=1)
    c_low, c_high = pad_cost[:, vert.low_pos], pad_cost[:, vert.high_pos]
    usable = vert.valid & (vert.a_high >= level) & (vert.a_low < level)
    price = c_high - c_low
    price *= level - vert.a_low
    price /= vert.width
    price += c_low
    price[~usable] = np.inf
    best = np.argmin(price, axis=1)
    flat = np.arange(num_classes) * price.shape[1] + best
    reach = np.isfinite(price.ravel()[flat])
    return flat, reach, c_low.ravel()[flat], c_high.ravel()[flat]


def segments_at(
    classes: JobClasses, cost: FloatArray, level: float, vert: Vertices | None = None
) -> Segments:
    """The cheapest segment of every class at ``level`` for pattern costs ``cost``: the two
    ends of the cheapest vertex (:func:`cheapest`), i.e. the lower-hull segment around t."""
    vert = vert or vertices(classes)
    flat, reach, _, _ = cheapest(vert, cost, level)
    return Segments(left=np.where(reach, vert.low.ravel()[flat], -1).astype(np.int64),
                    right=np.where(reach, vert.high.ravel()[flat], -1).astype(np.int64),
                    a_left=np.where(reach, vert.a_low.ravel()[flat], 0.0),
                    a_right=np.where(reach, vert.a_high.ravel()[flat], 0.0), reach=reach)


def _pick(values: FloatArray, pattern: IntArray) -> FloatArray:
    """values[c, pattern[c]], 0 where pattern is -1 (the origin)."""
    picked = np.take_along_axis(values, np.maximum(pattern, 0)[:, None], axis=1)[:, 0]
    return np.where(pattern >= 0, picked, 0.0)


def segment_duals(seg: Segments, cost: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(lambda, mu) of every class from its segment: the slope and minus the intercept of
    the line through the segment's ends."""
    c_left, c_right = _pick(cost, seg.left), _pick(cost, seg.right)
    width = seg.a_right - seg.a_left
    lam = np.divide(c_right - c_left, width, out=np.zeros_like(width), where=width > 0)
    mu = lam * seg.a_left - c_left
    return lam, mu


def relative_slack(
    classes: JobClasses, seg: Segments, cost: FloatArray, lam: FloatArray, mu: FloatArray
) -> FloatArray:
    """min over the class's other patterns (and the origin) of the dual slack
    mu + c[r] - lambda A[r], relative to lambda A_R + c_R + mu (negative: a violation)."""
    slack = mu[:, None] + cost - lam[:, None] * classes.fair
    slack = np.where(classes.ok, slack, np.inf)
    rows = np.arange(classes.num_classes)
    for end in (seg.left, seg.right):
        on = end >= 0
        slack[rows[on], end[on]] = np.inf
    worst = slack.min(axis=1)
    worst = np.where(seg.left >= 0, np.minimum(worst, mu), worst)  # the origin, off the segment
    worst = np.where(lam < 0, np.minimum(worst, lam), worst)
    scale = np.abs(lam) * seg.a_right + np.abs(_pick(cost, seg.right)) + np.abs(mu)
    # all costs zero (pi = 0 on the class's types): every pattern ties, none is at risk
    return np.asarray(np.where(scale > 0, worst / np.where(scale > 0, scale, 1.0), np.inf))


def position_margin(seg: Segments, level: float) -> FloatArray:
    """How far ``level`` is inside its segment, relative to the level."""
    gap = np.minimum(level - seg.a_left, seg.a_right - level)
    gap = np.where(seg.left >= 0, gap, seg.a_right - level)
    return np.asarray(np.where(seg.reach, gap / max(level, 1e-300), -np.inf))


# --------------------------------------------------------------------- the restricted LP


@dataclass
class _Restricted:
    """Solution of the fixed-segment LP: level, z of the free classes, duals."""

    ok: bool
    level: float
    z_free: FloatArray  # (|W|, R)
    lam_free: FloatArray
    mu_free: FloatArray
    prices: FloatArray
    at_bound: bool
    message: str = ""


def restricted_lp(
    classes: JobClasses,
    count: FloatArray,
    gpus: FloatArray,
    free: BoolArray,
    seg: Segments,
    options: SolverOptions,
) -> _Restricted:
    """Solve the LP with the classes ``~free`` fixed on their segments ``seg``.

    ``count`` are the multiplicities used (the sample's scaled ones).  Columns: t, then
    z[w, r] for the free classes' allowed patterns; rows: fairness and job share of every free
    class, then the K capacity rows (right-hand side n - U^0, t coefficient U^1).
    """
    num_types = len(gpus)
    fixed = ~free
    usage = classes.usage
    rows_f = np.flatnonzero(fixed)
    width = (seg.a_right - seg.a_left)[rows_f]
    u_left = np.where((seg.left[rows_f] >= 0)[:, None],
                      usage[rows_f, np.maximum(seg.left[rows_f], 0)], 0.0)
    u_right = usage[rows_f, seg.right[rows_f]]
    m = count[rows_f][:, None]
    base = (m * (u_left * seg.a_right[rows_f, None] - u_right * seg.a_left[rows_f, None])
            / width[:, None]).sum(axis=0)
    slope = (m * (u_right - u_left) / width[:, None]).sum(axis=0)
    t_low = float(seg.a_left[rows_f].max(initial=0.0))
    t_high = float(seg.a_right[rows_f].min(initial=np.inf))

    w = np.flatnonzero(free)
    sub_ok = classes.ok[w]
    wc, wr = np.nonzero(sub_ok)
    nz = len(wc)
    nw = len(w)
    col = 1 + np.arange(nz)
    fair = classes.fair[w[wc], wr]
    use = count[w[wc], None] * usage[w[wc], wr, :]  # (nz, K)
    uk_rows, uk_cols = np.nonzero(use)
    rows = np.concatenate([wc, np.arange(nw), nw + wc, 2 * nw + uk_cols,
                           2 * nw + np.arange(num_types)])
    cols = np.concatenate([col, np.zeros(nw, dtype=np.int64), col, col[uk_rows],
                           np.zeros(num_types, dtype=np.int64)])
    vals = np.concatenate([fair, -np.ones(nw), np.ones(nz), use[uk_rows, uk_cols], slope])
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(2 * nw + num_types, 1 + nz))
    matrix.eliminate_zeros()
    model = matrix_model(options)
    model.set_sense("maximize")
    # objective (sum_c m_c) t: the duals come out multiplied by the job count, so those of
    # single jobs (lambda ~ 1 / J) are O(1) and HiGHS's absolute tolerances stay relative
    jobs = float(count.sum())
    model.add_columns(np.concatenate([[t_low], np.zeros(nz)]),
                      np.concatenate([[t_high], np.ones(nz)]),
                      np.concatenate([[jobs], np.zeros(nz)]))
    lower = np.concatenate([np.zeros(nw), np.full(nw + num_types, -np.inf)])
    upper = np.concatenate([np.full(nw, np.inf), np.ones(nw), gpus - base])
    model.add_rows(lower, upper, starts=matrix.indptr, columns=matrix.indices,
                   values=matrix.data)
    result = model.solve()
    empty = np.zeros(0)
    if result.status != Status.OPTIMAL or result.objective is None:
        return _Restricted(False, 0.0, np.zeros((nw, classes.fair.shape[1])), empty, empty,
                           np.zeros(num_types), False, f"restricted LP: {result.message}")
    x = model.values()
    duals = model.row_duals() / jobs
    z_free = np.zeros((nw, classes.fair.shape[1]))
    z_free[wc, wr] = np.clip(x[1:], 0.0, None)
    level = float(x[0])
    span = max(abs(level), 1e-12)
    at_bound = (level <= t_low + 1e-12 * span and t_low > 0) or level >= t_high - 1e-12 * span
    # the rows are per class; one job's duals are the class's divided by its size
    size = count[w]
    return _Restricted(True, level, z_free, np.clip(-duals[:nw], 0.0, None) / size,
                       np.clip(duals[nw:2 * nw], 0.0, None) / size,
                       np.clip(duals[2 * nw:], 0.0, None), bool(at_bound))


# ------------------------------------------------------------------------- certificate


def shares_on_segments(classes: JobClasses, seg: Segments, level: float) -> FloatArray:
    """z (C, R) of every class at ``level`` on its segment."""
    z = np.zeros(classes.fair.shape)
    rows = np.arange(classes.num_classes)
    width = seg.a_right - seg.a_left
    theta = np.clip(np.divide(level - seg.a_left, width, out=np.ones_like(width),
                              where=width > 0), 0.0, 1.0)
    on = seg.right >= 0
    z[rows[on], seg.right[on]] += theta[on]
    left = seg.left >= 0
    z[rows[left], seg.left[left]] += 1.0 - theta[left]
    return z


def certify(
    classes: JobClasses, gpus: FloatArray, z: FloatArray, lam: FloatArray, prices: FloatArray
) -> tuple[FloatArray, float, float]:
    """(z made exactly feasible, its value t, a dual bound) for max-min over the classes.

    Primal: z >= 0, each row scaled to a total share <= 1, then all of z scaled by
    min_k n_k / use_k when a capacity is exceeded; t = min_c A_c . z_c.  Dual: pi >= 0,
    lambda >= 0, mu_c = max(0, max_r lambda_c A[c,r] - pi . U[c,r]) (feasible by
    construction), divided by s = sum_c m_c lambda_c so that the t column's row holds; the
    bound is (sum_c m_c mu_c + n . pi) / s (weak duality: every feasible t is below it).
    """
    z = np.where(classes.ok, np.clip(z, 0.0, None), 0.0)
    total = z.sum(axis=1)
    z = z / np.maximum(total, 1.0)[:, None]
    use = total_use(classes, classes.count, z)
    over = np.divide(gpus, use, out=np.ones_like(use), where=use > gpus)
    z = z * min(1.0, float(over.min(initial=1.0)))
    value = float((classes.fair * z).sum(axis=1).min(initial=np.inf))
    pi = np.clip(prices, 0.0, None)
    lam = np.clip(lam, 0.0, None)
    cost = pattern_costs(classes, pi)
    reach = np.where(classes.ok, lam[:, None] * classes.fair - cost, 0.0).max(axis=1)
    mu = np.maximum(reach, 0.0)
    weight = float(classes.count @ lam)
    bound = (float(classes.count @ mu) + float(gpus @ pi)) / weight if weight > 0 else np.inf
    return z, value, bound


# ------------------------------------------------------------------ market clearing (Newton)


def market(
    classes: JobClasses, count: FloatArray, level: float, prices: FloatArray,
    vert: Vertices | None = None,
) -> tuple[FloatArray, float]:
    """(D, Lambda) at (t, pi): every class on its cheapest segment at level t, D its total GPU
    use per type, Lambda = sum_c m_c lambda_c (lambda_c: the hull's slope there).

    At the optimum D_k = n_k where pi_k > 0 (D_k <= n_k elsewhere) and Lambda = 1 (the dual's
    t row); D does not depend on the scale of pi, Lambda is proportional to it.
    """
    vert = vert or vertices(classes)
    num_classes, num_patterns = classes.fair.shape
    flat, reach, c_low, c_high = cheapest(vert, pattern_costs(classes, prices), level)
    width = vert.width.ravel()[flat]
    theta = np.where(reach, (level - vert.a_low.ravel()[flat]) / width, 0.0)
    lam = np.where(reach, (c_high - c_low) / width, 0.0)
    # weight of each (class, pattern) in the GPU use; index R (the padding) is idle time
    slots = np.arange(num_classes) * (num_patterns + 1)
    size = num_classes * (num_patterns + 1)
    weight = np.bincount(slots + vert.low.ravel()[flat] % (num_patterns + 1),
                         weights=count * (1.0 - theta), minlength=size)
    weight += np.bincount(slots + vert.high.ravel()[flat], weights=count * theta,
                          minlength=size)
    shares = np.asarray(weight, dtype=float).reshape(num_classes, num_patterns + 1)
    use = total_use(classes, np.ones(num_classes), shares[:, :num_patterns])
    return np.asarray(use), float(count @ lam)


@dataclass(frozen=True)
class _Split:
    """The classes split at a point (t, pi): ``band`` (within :data:`NEWTON_BAND` of changing
    segment) and the rest, kept on their segments, whose total GPU use U0 + t U1 is affine
    in t and whose sum_c m_c lambda_c = pi . U1 is linear in pi."""

    level: float
    prices: FloatArray
    band: IntArray
    classes: JobClasses  # the band's classes
    base: FloatArray  # U0 (K,)
    slope: FloatArray  # U1 (K,)


def fixed_use(
    classes: JobClasses, count: FloatArray, seg: Segments, rows: IntArray
) -> tuple[FloatArray, FloatArray]:
    """(U0, U1) of the classes ``rows`` on their segments: their GPU use at level t is
    U0 + t U1 (U0 = sum m (U_L A_R - U_R A_L)/(A_R - A_L), U1 = sum m (U_R - U_L)/(A_R - A_L));
    and sum m lambda = pi . U1 at any prices."""
    width = (seg.a_right - seg.a_left)[rows]
    u_left = np.where((seg.left[rows] >= 0)[:, None],
                      classes.usage[rows, np.maximum(seg.left[rows], 0)], 0.0)
    u_right = classes.usage[rows, seg.right[rows]]
    m = (count[rows] / width)[:, None]
    base = (m * (u_left * seg.a_right[rows, None] - u_right * seg.a_left[rows, None])).sum(0)
    return np.asarray(base), np.asarray((m * (u_right - u_left)).sum(axis=0))


def _split(classes: JobClasses, count: FloatArray, vert: Vertices, level: float,
           prices: FloatArray) -> _Split:
    cost = pattern_costs(classes, prices)
    seg = segments_at(classes, cost, level, vert)
    lam, mu = segment_duals(seg, cost)
    risk = np.minimum(position_margin(seg, level), relative_slack(classes, seg, cost, lam, mu))
    band = np.flatnonzero(risk < NEWTON_BAND)
    base, slope = fixed_use(classes, count, seg, np.flatnonzero(risk >= NEWTON_BAND))
    return _Split(level, prices.copy(), band.astype(np.int64), _subset(classes, band), base,
                  slope)


def newton_prices(
    classes: JobClasses, count: FloatArray, gpus: FloatArray, start: _Point,
    iterations: int = NEWTON_ITERATIONS, vert: Vertices | None = None,
) -> _Point:
    """:func:`_newton_once` with the priced types adjusted: a type without a price whose
    capacity the result overruns gets one (level / its GPUs, Newton rescales it), a type
    whose price collapsed (below 1e-6 of the largest) while its capacity is slack loses it;
    then Newton again, at most :data:`ACTIVE_ROUNDS` times."""
    vert = vert or vertices(classes)
    point = start
    for _ in range(ACTIVE_ROUNDS):
        point = _newton_once(classes, count, gpus, point, iterations, vert)
        use, _ = market(classes, count, point.level, point.prices, vert)
        priced = point.prices > 0
        over = ~priced & (gpus > 0) & (use > gpus * (1 + 1e-9))
        top = float(point.prices.max(initial=0.0))
        collapsed = priced & (point.prices < 1e-6 * top) & (use < gpus)
        if not over.any() and not collapsed.any():
            break
        prices = point.prices.copy()
        prices[over] = point.level / gpus[over] / max(1, int(over.sum() + priced.sum()))
        prices[collapsed] = 0.0
        log.debug("newton: types %s get a price, %s lose theirs", np.flatnonzero(over),
                  np.flatnonzero(collapsed))
        point = _Point(point.level, prices)
    return point


def _newton_once(
    classes: JobClasses, count: FloatArray, gpus: FloatArray, start: _Point,
    iterations: int = NEWTON_ITERATIONS, vert: Vertices | None = None,
) -> _Point:
    """Approximate (t, pi) with D(t, pi) = n on the priced types and Lambda = 1.

    D and Lambda are step functions (one tiny step per class whose segment changes), so this
    only gets close; the fixed-segment LP makes it exact.  Quasi-Newton: the Jacobian is a
    forward difference on a random sample of at most :data:`JACOBIAN_SAMPLE` classes
    (multiplicities scaled), computed at the sample's own solution (found by Newton on the
    sample), then updated by Broyden's rule along damped steps on the full residual until it
    is below :data:`NEWTON_TOLERANCE` or stops falling.  The full residual is evaluated
    exactly but cheaply: only the classes within :data:`NEWTON_BAND` of changing segment at
    the last split point are re-priced, the others add U0 + t U1 and pi . U1
    (:func:`fixed_use`); the split is redone when a step moves t or a price by more than
    half the band.  Types with pi_k = 0 at the start keep it.
    """
    num_classes = classes.num_classes
    top = float(np.where(classes.ok, classes.fair, 0.0).max(axis=1).min(initial=np.inf))
    active = start.prices > 0
    if not active.any() or not np.isfinite(top):
        return start
    if num_classes > JACOBIAN_SAMPLE:
        keep = np.sort(np.random.default_rng(SAMPLE_SEED + 1).permutation(num_classes)
                       [:JACOBIAN_SAMPLE])
        small = _subset(classes, keep)
        small_count = count[keep] * (count.sum() / count[keep].sum())
    else:
        small, small_count = classes, count
    small_vert = vertices(small)
    full_vert = vert or (vertices(classes) if small is not classes else small_vert)
    ceiling = top * (1 - 1e-9)

    def unpack(x: FloatArray) -> tuple[float, FloatArray]:
        prices = start.prices.copy()
        prices[active] = x[1:]
        return min(float(x[0]), ceiling), prices

    def pack(use: FloatArray, lam: float) -> FloatArray:
        return np.concatenate([use[active] / gpus[active] - 1.0, [lam - 1.0]])

    def sampled(x: FloatArray) -> FloatArray:
        level, prices = unpack(x)
        return pack(*market(small, small_count, level, prices, small_vert))

    split: list[_Split] = []

    def full(x: FloatArray) -> FloatArray:
        level, prices = unpack(x)
        last = split[-1] if split else None
        if last is None or abs(level - last.level) > NEWTON_BAND / 2 * last.level or np.any(
                np.abs(prices - last.prices) > NEWTON_BAND / 4 * last.prices):
            last = _split(classes, count, full_vert, level, prices)
            split.append(last)
            log.debug("newton split at level %.10g: %d of %d classes re-priced", level,
                      len(last.band), num_classes)
        use, lam = market(last.classes, count[last.band], level, prices)
        return pack(use + last.base + level * last.slope, lam + float(prices @ last.slope))

    def jacobian(x: FloatArray, base: FloatArray) -> FloatArray:
        fd = max(FD_STEP, FD_CLASSES / small.num_classes)
        jac = np.zeros((len(x), len(x)))
        for i in range(len(x)):
            shifted = x.copy()
            shifted[i] += fd * abs(x[i])
            jac[:, i] = (sampled(shifted) - base) / (fd * abs(x[i]))
        return jac

    def steps(residual: Any, x: FloatArray, tolerance: float, fresh: bool,
              jac: FloatArray | None = None) -> tuple[FloatArray, FloatArray | None]:
        res = residual(x)
        for step in range(iterations):
            log.debug("newton %s %d: level %.10g, residual %.3g",
                      "sample" if residual is sampled else "full", step, x[0],
                      np.abs(res).max())
            if np.abs(res).max() <= tolerance:
                break
            if jac is None or fresh:
                jac = jacobian(x, res if residual is sampled else sampled(x))
            try:
                delta = np.linalg.solve(jac, -res)
            except np.linalg.LinAlgError:
                break
            scale = 1.0
            for _ in range(6):
                trial = x + scale * delta
                trial[0] = min(max(trial[0], 0.5 * x[0]), ceiling)
                trial[1:] = np.maximum(trial[1:], 0.1 * x[1:])
                new = residual(trial)
                if np.abs(new).max() < np.abs(res).max():
                    if not fresh:  # Broyden's update, in relative units of x
                        move = (trial - x) / np.abs(x)
                        scaled = jac * np.abs(x)[None, :]
                        scaled += np.outer(new - res - scaled @ move, move) / (move @ move)
                        jac = scaled / np.abs(trial)[None, :]
                    x, res = trial, new
                    break
                scale /= 2
            else:
                break
        return x, jac

    x = np.concatenate([[min(start.level, ceiling)], start.prices[active]])
    jac: FloatArray | None = None
    if small is not classes:  # the sample's own solution first (cheap evaluations)
        x, jac = steps(sampled, x, FD_CLASSES / small.num_classes, True)
    x, _ = steps(full, x, max(NEWTON_TOLERANCE, FD_CLASSES / num_classes / 10), False, jac)
    level, prices = unpack(x)
    return _Point(level, prices)


# ---------------------------------------------------------------------------- the driver


def _solve_fixed(
    classes: JobClasses, count: FloatArray, gpus: FloatArray, start: _Point | None,
    margin: float, options: SolverOptions, vert: Vertices | None = None,
) -> tuple[_Restricted, BoolArray, Segments, int]:
    """Exact solve by fixed segments from ``start`` (None: everything free, the plain class
    LP).  Returns the last restricted solve, the free mask, the segments and the LP count."""
    num_classes = classes.num_classes
    risk: FloatArray | None = None
    if start is None:
        free = np.ones(num_classes, dtype=bool)
        seg = segments_at(classes, np.zeros(classes.fair.shape), 0.0)
    else:
        cost = pattern_costs(classes, start.prices)
        seg = segments_at(classes, cost, start.level, vert or vertices(classes))
        lam, mu = segment_duals(seg, cost)
        risk = np.minimum(position_margin(seg, start.level),
                          relative_slack(classes, seg, cost, lam, mu))
        free = risk < margin
        if int(free.sum()) < MIN_FREE:  # enough free classes to pin the prices
            free[np.argsort(risk, kind="stable")[:MIN_FREE]] = True
    rounds = 0
    while True:
        rounds += 1
        if int(free.sum()) > MAX_FREE:
            return (_Restricted(False, 0.0, np.zeros((0, classes.fair.shape[1])), np.zeros(0),
                                np.zeros(0), np.zeros(len(gpus)), False,
                                f"{int(free.sum())} classes left free (limit {MAX_FREE})"),
                    free, seg, rounds)
        result = restricted_lp(classes, count, gpus, free, seg, options)
        if not result.ok and risk is not None and rounds < MAX_ROUNDS and not free.all():
            # the fixed classes alone overrun a capacity (a poor start): free twice as many
            more = min(len(risk), 2 * int(free.sum()))
            log.debug("fixed-segment LP %d failed (%s); freeing %d classes", rounds,
                      result.message, more)
            free[np.argsort(risk, kind="stable")[:more]] = True
            continue
        if not result.ok:
            return result, free, seg, rounds
        cost = pattern_costs(classes, result.prices)
        lam, mu = segment_duals(seg, cost)
        bad = ~free & ((relative_slack(classes, seg, cost, lam, mu) < -VIOLATION)
                       | (position_margin(seg, result.level) < -VIOLATION))
        if result.at_bound:  # t stopped at a fixed class's vertex: free the classes there
            span = max(abs(result.level), 1e-12)
            bad |= ~free & ((np.abs(seg.a_left - result.level) <= 1e-9 * span)
                            | (np.abs(seg.a_right - result.level) <= 1e-9 * span))
        log.debug("fixed-segment LP %d: %d classes, %d free, level %.12g, %d to free%s",
                  rounds, num_classes, int(free.sum()), result.level, int(bad.sum()),
                  " (t at a bound)" if result.at_bound else "")
        if not bad.any():
            return result, free, seg, rounds
        free |= bad
        if rounds >= MAX_ROUNDS:
            result.ok = False
            result.message = f"fixed-segment loop did not settle in {MAX_ROUNDS} rounds"
            return result, free, seg, rounds


def _subset(classes: JobClasses, keep: IntArray) -> JobClasses:
    """The classes ``keep`` (only the fields the solver reads)."""
    return replace(classes, count=classes.count[keep], fair=classes.fair[keep],
                   ok=classes.ok[keep], usage=classes.usage[keep],
                   direction=classes.direction[keep])


def _tolerances(options: SolverOptions) -> SolverOptions:
    """HiGHS with primal and dual feasibility tolerances of at most 1e-10: the certificate
    recomputes both sides from the LP's solution, and its gap is about these tolerances."""
    if options.solver != "highs":
        return options
    extra = dict(options.extra)
    for name in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        extra[name] = min(float(extra.get(name, LP_TOLERANCE)), LP_TOLERANCE)
    return replace(options, extra=extra)


def solve_by_prices(
    classes: JobClasses, gpus: FloatArray, options: SolverOptions, *,
    direct_max: int | None = None, sample: int | None = None, margin: float | None = None,
) -> PriceOutcome:
    """Exact max-min fairness over ``classes`` (no pairs); module docstring.

    Up to ``direct_max`` classes: the class LP with every class free.  Beyond: a random
    sample of ``sample`` classes (multiplicities scaled to the full job count) solved as the
    class LP gives a first (t, pi); Newton steps on the market-clearing equations refine it on
    all classes; the fixed-segment loop, started with the classes within ``margin`` of
    changing segment free, makes it exact.  Simplex LPs with the caller's solver.  None takes
    :data:`DIRECT_MAX_CLASSES`, :data:`SAMPLE_CLASSES`, :data:`BAND_MARGIN`.
    """
    direct_max = DIRECT_MAX_CLASSES if direct_max is None else direct_max
    sample = SAMPLE_CLASSES if sample is None else sample
    margin = BAND_MARGIN if margin is None else margin
    opts = _tolerances(options.with_method("simplex"))
    num_classes = classes.num_classes
    count = classes.count
    start: _Point | None = None
    vert: Vertices | None = None
    newton_s = 0.0
    if num_classes > direct_max:
        keep = np.sort(np.random.default_rng(SAMPLE_SEED).permutation(num_classes)[:sample])
        sub = _subset(classes, keep)
        first, _, _, _ = _solve_fixed(sub, sub.count * (count.sum() / sub.count.sum()), gpus,
                                      None, 0.0, opts)
        top = float(np.where(classes.ok, classes.fair, 0.0).max(axis=1).min())
        if first.ok and first.level >= top * (1 - 1e-9):
            vert = vertices(classes)
            use, _ = market(classes, count, top * (1 - 1e-9), first.prices, vert)
            if np.any(use > gpus * (1 + 1e-9)):
                return PriceOutcome(Status.ERROR, np.zeros(classes.fair.shape), 0.0, np.inf,
                                    np.zeros(len(gpus)), 0, 0, TOP_LEVEL)
        if first.ok:
            began = time.perf_counter()
            vert = vert or vertices(classes)
            start = newton_prices(classes, count, gpus, _Point(first.level, first.prices),
                                  vert=vert)
            newton_s = time.perf_counter() - began
            use, _ = market(classes, count, start.level, start.prices, vert)
            if start.level >= top * (1 - 1e-9) and np.any(use > gpus * (1 + 1e-9)):
                # t is held at the slowest job's best level while capacities bind: the
                # market equations do not pin the prices there (see docs/fast_paths.md)
                return PriceOutcome(Status.ERROR, np.zeros(classes.fair.shape), 0.0, np.inf,
                                    np.zeros(len(gpus)), 0, 0, TOP_LEVEL)
    result, free, seg, rounds = _solve_fixed(classes, count, gpus, start, margin, opts, vert)
    if not result.ok:
        return PriceOutcome(Status.ERROR, np.zeros(classes.fair.shape), 0.0, np.inf,
                            np.zeros(len(gpus)), rounds, int(free.sum()), result.message)
    z = shares_on_segments(classes, seg, result.level)
    lam, _ = segment_duals(seg, pattern_costs(classes, result.prices))
    w = np.flatnonzero(free)
    z[w] = result.z_free
    lam[w] = result.lam_free
    z, value, bound = certify(classes, gpus, z, lam, result.prices)
    gap = (bound - value) / max(abs(value), 1e-12)
    status = Status.OPTIMAL if gap <= GAP_TOLERANCE else Status.FEASIBLE
    message = "" if status == Status.OPTIMAL else f"certified gap {gap:.3g} above tolerance"
    log.debug("prices: %d classes, %d free, %d LPs, newton %.3f s, gap %.3g", num_classes,
              len(w), rounds, newton_s, gap)
    return PriceOutcome(status, z, value, bound, result.prices, rounds, len(w), message)


def solve_price_path(
    classes: JobClasses, gpus: FloatArray, options: SolverOptions,
    deadline: float | None = None,
) -> _Outcome:
    """:func:`solve_by_prices` as a fast-path outcome (``iterations`` = fixed-segment LPs,
    ``columns`` = classes left free in the last one).  If it ends without a certificate, the
    Dantzig-Wolfe capacity master (:func:`~.fast.solve_capacity_master`) solves instead, and
    the message says so."""
    found = solve_by_prices(classes, gpus, options)
    if found.status == Status.OPTIMAL:
        return _Outcome(found.status, found.z, np.zeros((0, len(gpus))), found.value,
                        found.bound, found.rounds, found.free_classes)
    if found.message == TOP_LEVEL:
        why = f"price path: {TOP_LEVEL}; solved by the capacity master"
        log.info("%s", why)
    else:
        why = (f"price path ended {found.status.value} ({found.message}); fell back to the "
               "capacity master")
        log.warning("%s", why)
    outcome = solve_capacity_master(classes, gpus, options, deadline)
    outcome.message = f"{why}. {outcome.message}".strip()
    return outcome
