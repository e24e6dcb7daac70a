r"""The convex window problem solved exactly: water-filling over one capacity row, a concave
search over the longest remaining time, and a Lagrangian certificate.

The convex mode of :class:`~schedlab.formulations.shockwave.nash.NashWelfare` maximizes

.. math::

    f(p) = \sum_j c_j \log\frac{e_j + p_j}{E_j} - k z, \qquad
    z = \max\bigl(0, \max_j (Rem_j - d_j p_j)\bigr),

over the plan's epochs p_j, where the shares are eliminated exactly: job j needs a share
a_j = d_j p_j / (L W) of the window (the least that runs p_j epochs; a_j <= 1), so with
w_j = s_j d_j / (L W) GPUs per planned epoch and P_j = min(E_j - e_j, L W / d_j),

.. math::

    \sum_j w_j p_j \le G, \qquad lo_j \le p_j \le P_j,

where lo_j = max(0, (Rem_j - cap_j) / d_j) holds the finish-time row u_j <= cap_j (infinite
cap: lo_j = 0).  For a fixed z, the jobs also need p_j >= (Rem_j - z) / d_j, and what is left
is a separable concave program with one row: its optimum is the water level
p_j(mu) = clip(c_j / (mu w_j) - e_j, l_j(z), P_j), with mu >= 0 the row's price, found by
bisection on log mu (mu = 0 when every P_j fits).  Its value V(z) is concave in z (a convex
program whose right-hand side moves linearly with z), so F(z) = V(z) - k z is maximized by a
golden-section search over the feasible z.

**The certificate.**  With the final mu, and nu_j = max(0, (mu w_j - c_j / (e_j + p_j)) / d_j)
for the jobs held up by z (their p_j sits on (Rem_j - z) / d_j), scaled so that sum nu <= k,
the Lagrangian dual

.. math::

    g(\mu, \nu) = \mu G - \sum_j \nu_j Rem_j
        + \sum_j \max_{lo_j \le p \le P_j} \Bigl(c_j \log\frac{e_j + p}{E_j}
        - (\mu w_j - \nu_j d_j) p\Bigr)

bounds f from above (weak duality: only the capacity row and the rows z >= Rem_j - d_j p_j
are relaxed; z >= 0 with sum nu <= k adds nothing).  The gap g - f(p) is summed term by term
(each term is >= 0), so it is not lost to cancellation between large numbers.

**What ``optimal`` proves.**  The log part of f is strongly concave in q_j = (e_j + p_j)/E_j
with modulus c_j / Q_j^2 on the plans' range q_j <= Q_j = (e_j + P_j) / E_j (log'' = -1/q^2),
and f is concave, so at the optimum p* every plan p has
f(p*) - f(p) >= sum_j c_j (q_j - q*_j)^2 / (2 Q_j^2), hence

.. math::

    |p_j - p^*_j| \le (e_j + P_j) \sqrt{2 (g - f(p)) / c_j}.

(Per job, the Lagrangian's own maximizer gives the same bound, or the linear gap / |s| where
that maximizer sits at an end of its box with outward slope s; :func:`_epoch_error`.)
The mode says ``optimal`` only when this bound is at most ``epoch_tolerance`` (1e-4) times
max(p_j, 1) for every job: the planned epochs are then proven within that relative
tolerance of the exact optimum, whatever the objective's scale.  Otherwise ``feasible``,
with the bound in the diagnostics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Planned epochs are proven within this relative tolerance (of max(p_j, 1)) for ``optimal``.
EPOCH_TOLERANCE = 1e-4
#: Bisection steps on log mu and golden-section steps on z (each halves / shrinks by 0.618
#: its interval: 200 and 120 steps reach float64 resolution on any range that occurs).
_MU_STEPS = 200
_Z_STEPS = 120
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass
class ExactWindow:
    """The exact convex optimum of one window (module docstring)."""

    feasible: bool
    planned: FloatArray = field(default_factory=lambda: np.zeros(0))  # p_j, epochs
    longest_left_s: float = 0.0  # z, s
    objective: float = -math.inf  # f(p)
    bound: float = math.inf  # g(mu, nu)
    epoch_error_bound: FloatArray = field(default_factory=lambda: np.zeros(0))  # |p - p*| <=
    reason: str = ""


def _levels(c: FloatArray, e: FloatArray, w: FloatArray, lower: FloatArray,
            upper: FloatArray, gpus: float) -> tuple[FloatArray, float]:
    """max sum c_j log(e_j + p_j) s.t. sum w_j p_j <= G, lower <= p <= upper (feasible):
    (p, mu)."""
    if float(w @ upper) <= gpus:
        return upper.copy(), 0.0

    def at(mu: float) -> FloatArray:
        return np.clip(c / (mu * w) - e, lower, upper)

    # every job at its upper end for mu <= c / (w (e + upper)); at its lower end above
    # c / (w (e + lower)) (e + lower = 0: the log barrier keeps such a job above 0)
    with np.errstate(divide="ignore"):
        top_mu = c / (w * (e + upper))
        low_mu = c / (w * np.maximum(e + lower, 0.0))
    lo = min(math.log(max(float(top_mu.min()), 1e-300)), 690.0)
    finite = low_mu[np.isfinite(low_mu)]
    hi = math.log(float(finite.max())) if finite.size else lo + 1.0
    hi = min(max(hi, lo) + 1.0, 700.0)
    while float(w @ at(math.exp(hi))) > gpus and hi < 700.0:
        hi = min(hi + 10.0, 700.0)
    for _ in range(_MU_STEPS):
        mid = 0.5 * (lo + hi)
        if float(w @ at(math.exp(mid))) > gpus:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(hi)):
            break
    mu = math.exp(hi)  # the side that fits
    return at(mu), mu


def solve_exact(c: FloatArray, epochs: FloatArray, done: FloatArray, scale: FloatArray,
                sec_per_epoch: FloatArray, remaining_s: FloatArray, round_s: float,
                rounds: int, gpus: int, k: float, cap: FloatArray | None,
                epoch_tolerance: float = EPOCH_TOLERANCE) -> ExactWindow:
    """The convex window problem's exact optimum and its certificate (module docstring).

    Args:
        c: c_j > 0, the weight of job j's log term (budget x priority / (W sum B)).
        epochs, done: E_j and e_j (epochs).
        scale: s_j, GPUs per gang.
        sec_per_epoch: d_j > 0, s.
        remaining_s: Rem_j, s.
        round_s, rounds, gpus: L (s), W, G.
        k: weight of the longest remaining time, per second.
        cap: u_j <= cap_j (s) from the finish-time rows; None or inf: no row.
        epoch_tolerance: the relative tolerance ``optimal`` proves on p.
    """
    n = len(c)
    if n == 0:
        return ExactWindow(True, objective=0.0, bound=0.0)
    horizon = round_s * rounds
    upper = np.maximum(np.minimum(epochs - done, horizon / sec_per_epoch), 0.0)
    w = scale * sec_per_epoch / horizon
    lower = np.zeros(n)
    if cap is not None:
        fin = np.isfinite(cap)
        if np.any(fin & (cap < 0)):
            j = int(np.flatnonzero(fin & (cap < 0))[0])
            return ExactWindow(False, reason=f"job {j}: its finish-time row needs more than "
                               "the whole window (cap < 0)")
        lower = np.where(fin, np.maximum(0.0, (remaining_s - np.where(fin, cap, 0.0))
                                         / sec_per_epoch), 0.0)
    short = lower > upper * (1 + 1e-12) + 1e-12
    if np.any(short):
        j = int(np.flatnonzero(short)[0])
        return ExactWindow(False, reason=f"job {j}: its finish-time row needs "
                           f"{lower[j]:.6g} epochs in the window, it can run {upper[j]:.6g}")
    lower = np.minimum(lower, upper)

    def floor_at(z: float) -> FloatArray:
        return np.minimum(np.maximum(lower, (remaining_s - z) / sec_per_epoch), upper)

    def fits(z: float) -> bool:
        return bool(float(w @ floor_at(z)) <= gpus * (1 + 1e-12))

    z_hi = max(0.0, float(remaining_s.max()))
    # below max_j (Rem_j - d_j P_j) some job cannot reach its floor
    z_lo = max(0.0, float((remaining_s - sec_per_epoch * upper).max()))
    if not fits(z_hi):
        return ExactWindow(False, reason="the finish-time rows need more GPUs than the "
                           "cluster has in the window")
    if not fits(z_lo):
        a, b = z_lo, z_hi
        for _ in range(_MU_STEPS):
            mid = 0.5 * (a + b)
            a, b = (a, mid) if fits(mid) else (mid, b)
            if b - a <= 1e-13 * max(1.0, b):
                break
        z_lo = b

    def solve_at(z: float) -> tuple[float, FloatArray, float]:
        """(V(z) - k z, p, mu): concave in z (the plan's own longest remaining time may be
        below z, so its objective is not the search's function)."""
        p, mu = _levels(c, done, w, floor_at(z), upper, float(gpus))
        return _value(c, done, epochs, p, remaining_s, sec_per_epoch, 0.0) - k * z, p, mu

    best = solve_at(z_lo)
    if k > 0 and z_hi > z_lo:
        a, b = z_lo, z_hi
        x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        f1, f2 = solve_at(x1), solve_at(x2)
        for _ in range(_Z_STEPS):
            if f1[0] >= f2[0]:
                b, x2, f2 = x2, x1, f1
                x1 = b - _GOLDEN * (b - a)
                f1 = solve_at(x1)
            else:
                a, x1, f1 = x1, x2, f2
                x2 = a + _GOLDEN * (b - a)
                f2 = solve_at(x2)
            if b - a <= 1e-13 * max(1.0, z_hi):
                break
        for cand in (f1, f2, solve_at(z_hi)):
            if cand[0] > best[0]:
                best = cand
    elif k <= 0:
        best = solve_at(z_hi)
    _, p, mu = best
    value = _value(c, done, epochs, p, remaining_s, sec_per_epoch, k)
    left = float(max(0.0, (remaining_s - sec_per_epoch * p).max()))
    gap, price, nu = _dual_gap(c, done, w, p, mu, remaining_s, sec_per_epoch, lower, upper,
                               float(gpus), k, left)
    error = _epoch_error(c, done, w, p, price, nu, sec_per_epoch, lower, upper, max(gap, 0.0))
    return ExactWindow(True, planned=p, longest_left_s=left, objective=value,
                       bound=value + max(gap, 0.0), epoch_error_bound=error)


def _epoch_error(c: FloatArray, done: FloatArray, w: FloatArray, p: FloatArray, mu: float,
                 nu: FloatArray, sec_per_epoch: FloatArray, lower: FloatArray,
                 upper: FloatArray, gap: float) -> FloatArray:
    """A bound on |p_j - p*_j| per job from the certificate (module docstring).

    The Lagrangian of (mu, nu) is a sum of one-job terms phi_j(p) = c_j log(e_j + p) -
    beta_j p (beta_j = mu w_j - nu_j d_j), maximized by p^_j over the box, and its maximum is
    the bound g.  At the optimum p*, g - L(p*) <= g - f(p*) <= gap, and every job's share of
    g - L(p*) is >= 0, so phi_j(p^_j) - phi_j(p*_j) <= gap for each j.  phi_j is strongly
    concave (modulus c_j / (e_j + P_j)^2), which gives |p*_j - p^_j| <= (e_j + P_j)
    sqrt(2 gap / c_j); when p^_j is an end of the box where phi_j still rises outwards with
    slope s, concavity gives the tighter |p*_j - p^_j| <= gap / |s|.  Add |p_j - p^_j|, and
    keep the plan's own bound (e_j + P_j) sqrt(2 gap / c_j) where it is tighter."""
    beta = mu * w - nu * sec_per_epoch
    positive = beta > 0
    best = np.where(positive, np.clip(c / np.where(positive, beta, 1.0) - done, lower,
                                      upper), upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = c / (done + best) - beta
        curved = (done + upper) * np.sqrt(2.0 * gap / c)
        low_end, top_end = _at_ends(best, lower, upper)
        outward = np.where(low_end & (slope < 0), -slope,
                           np.where(top_end & (slope > 0), slope, 0.0))
        linear = np.where(outward > 0, gap / np.where(outward > 0, outward, 1.0), np.inf)
    # the plan's own bound (strong concavity of f around p*, module docstring) or the
    # Lagrangian maximizer's, whichever is tighter: both hold
    return np.minimum(curved, np.abs(p - best) + np.minimum(curved, linear))


def _value(c: FloatArray, done: FloatArray, epochs: FloatArray, p: FloatArray,
           remaining_s: FloatArray, sec_per_epoch: FloatArray, k: float) -> float:
    """f(p): the window objective of planned epochs p."""
    with np.errstate(divide="ignore"):
        logs = np.log((done + p) / epochs)
    left = max(0.0, float((remaining_s - sec_per_epoch * p).max()))
    return float(c @ logs - k * left)


def _exp(x: float) -> float:
    """exp(x), inf above float range."""
    return math.exp(x) if x < 709.0 else math.inf


def _gap_at(c: FloatArray, done: FloatArray, w: FloatArray, p: FloatArray, mu: float,
            nu: FloatArray, remaining_s: FloatArray, sec_per_epoch: FloatArray,
            lower: FloatArray, upper: FloatArray, gpus: float, k: float,
            left: float) -> float:
    """g(mu, nu) - f(p), summed as non-negative terms (module docstring): per job, the best
    of c_j log - beta_j p over the box less its value at p_j; the capacity row's slack times
    mu; k left - sum nu_j (Rem_j - d_j p_j)."""
    beta = mu * w - nu * sec_per_epoch
    positive = beta > 0
    best = np.where(positive, np.clip(c / np.where(positive, beta, 1.0) - done, lower,
                                      upper), upper)
    base = done + p
    with np.errstate(divide="ignore", invalid="ignore"):
        log_gain = np.where(base > 0, c * np.log1p((best - p) / np.where(base > 0, base, 1.0)),
                            np.inf)
    gap = float((log_gain - beta * (best - p)).sum()) + mu * (gpus - float(w @ p))
    # k left - sum nu_j (Rem_j - d_j p_j), as sum nu_j (left - slack_j) + (k - sum nu) left:
    # every term >= 0, none the difference of two large numbers
    slack = remaining_s - sec_per_epoch * p
    return gap + float(nu @ (left - slack)) + (k - float(nu.sum())) * left


#: A plan's p_j within this much (times max(1, P_j)) of an end of its box sits at that end.
_END_TOLERANCE = 1e-9


def _at_ends(p: FloatArray, lower: FloatArray, upper: FloatArray
             ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """(p_j at its lower end, p_j at its upper end), to :data:`_END_TOLERANCE`."""
    slack = _END_TOLERANCE * np.maximum(1.0, upper)
    return p <= lower + slack, p >= upper - slack


def _kkt_multipliers(slope: FloatArray, w: FloatArray, sec_per_epoch: FloatArray,
                     p: FloatArray, lower: FloatArray, upper: FloatArray,
                     attains: npt.NDArray[np.bool_], gpus: float, k: float,
                     left: float) -> tuple[float, FloatArray] | None:
    """(mu, nu) closest (in the L1 norm of the violations) to the KKT conditions at p, by a
    small LP: per job slope_j - mu w_j + nu_j d_j is 0 strictly between its ends, <= 0 at its
    lower end, >= 0 at its upper end; nu >= 0 only on the attaining jobs, sum nu = k when
    ``left`` > 0 (else <= k); mu >= 0, and 0 when the capacity row is slack.  None when the
    LP solver fails (the other candidates still bound)."""
    from scipy.optimize import linprog

    n = len(p)
    idx = np.flatnonzero(attains)
    m = len(idx)
    at_low, at_up = _at_ends(p, lower, upper)
    # columns: mu, nu (m), violation up (n), violation down (n)
    size = 1 + m + 2 * n
    a = np.zeros((n, size))
    a[:, 0] = -w
    a[idx, 1 + np.arange(m)] = sec_per_epoch[idx]
    a[:, 1 + m: 1 + m + n] = np.eye(n)
    a[:, 1 + m + n:] = -np.eye(n)
    # slope - mu w + nu d + up - down == 0, with up allowed only where the job is at its upper
    # end for free (>= 0 side: residual may be > 0 ... expressed through free bounds below)
    cost = np.r_[0.0, np.zeros(m), np.ones(n), np.ones(n)]
    bounds: list[tuple[float | None, float | None]] = []
    slack = gpus - float(w @ p) > 1e-9 * max(1.0, gpus)
    bounds.append((0.0, 0.0) if slack else (0.0, None))
    bounds += [(0.0, None)] * m
    # a job at its lower end may have residual < 0 (free "up" slack), at its upper end > 0
    bounds += [(0.0, None)] * n
    bounds += [(0.0, None)] * n
    free_up = at_low & ~at_up  # residual <= 0 allowed: "up" costs nothing
    free_down = at_up & ~at_low
    both = at_low & at_up
    cost[1 + m: 1 + m + n][free_up | both] = 0.0
    cost[1 + m + n:][free_down | both] = 0.0
    a_eq = [a]
    b_eq = [-slope]
    a_ub: list[FloatArray] = []
    b_ub: list[float] = []
    if m:
        row = np.zeros(size)
        row[1: 1 + m] = 1.0
        if left > 0:
            a_eq.append(row[None, :])
            b_eq.append(np.array([k]))
        else:
            a_ub.append(row)
            b_ub.append(k)
    try:
        res = linprog(cost, A_ub=np.array(a_ub) if a_ub else None,
                      b_ub=np.array(b_ub) if b_ub else None, A_eq=np.vstack(a_eq),
                      b_eq=np.concatenate(b_eq), bounds=bounds, method="highs")
    except ValueError:
        return None
    if res.status != 0 or res.x is None:
        return None
    nu = np.zeros(n)
    nu[idx] = np.maximum(res.x[1: 1 + m], 0.0)
    total = float(nu.sum())
    if total > k > 0:
        nu *= k / total
    return max(float(res.x[0]), 0.0), nu


def _dual_gap(c: FloatArray, done: FloatArray, w: FloatArray, p: FloatArray, mu: float,
              remaining_s: FloatArray, sec_per_epoch: FloatArray, lower: FloatArray,
              upper: FloatArray, gpus: float, k: float,
              left: float) -> tuple[float, float, FloatArray]:
    """The smallest g(mu, nu) - f(p) found and its (mu, nu) (module docstring); any mu >= 0
    and nu >= 0 with
    sum nu <= k bounds f, so the search only decides how tight the certificate is.

    nu lives on the jobs whose Rem_j - d_j p_j attains ``left`` (complementary slackness).
    Prices mu are tried from the KKT conditions at p: the water level's; each job strictly
    between its ends that does not attain ``left`` (c_j / ((e_j + p_j) w_j)); and the price
    that makes the stationarity needs nu_j = (mu w_j - c_j / (e_j + p_j)) / d_j of the
    attaining jobs strictly between their ends sum to k.  For each, nu is those needs (scaled
    to sum <= k, the rest of k given to attaining jobs at their upper end, where it costs
    nothing), and mu is refined by a golden-section search on log mu (g is convex in mu)."""
    slope = c / np.maximum(done + p, 1e-300)  # c_j / (e_j + p_j)
    low_end, top_end = _at_ends(p, lower, upper)
    inside = ~low_end & ~top_end
    attains = (remaining_s - sec_per_epoch * p >= left - 1e-9 * max(1.0, left)) & (k > 0)
    at_top = attains & top_end
    count = max(int(attains.sum()), 1)
    prices = [mu]
    free = inside & ~attains
    if np.any(free):
        prices.append(float(np.median((slope / w)[free])))
    held = inside & attains
    if np.any(held):
        prices.append(float((k + (slope / sec_per_epoch)[held].sum())
                            / (w / sec_per_epoch)[held].sum()))
    if np.any(attains):  # all of k on the attaining jobs, held at their ends
        prices.append(float(((slope + k * sec_per_epoch / count) / w)[attains].max()))
    even = np.where(attains, k / count, 0.0)
    def nu_for(m: float) -> FloatArray:
        need = np.where(attains, np.maximum(0.0, (m * w - slope) / sec_per_epoch), 0.0)
        total = float(need.sum())
        if total > k:
            return need * (k / total)
        if np.any(at_top):
            need = need + np.where(at_top, (k - total) / int(at_top.sum()), 0.0)
        return need

    def gap(m: float, nu: FloatArray) -> float:
        if not math.isfinite(m):
            return math.inf
        return _gap_at(c, done, w, p, m, nu, remaining_s, sec_per_epoch, lower, upper, gpus,
                       k, left)

    best = (gap(0.0, even), 0.0, even)

    def keep(value: float, m: float, nu: FloatArray) -> None:
        nonlocal best
        if value < best[0]:
            best = (value, m, nu)

    tries = [(price, nu) for price in dict.fromkeys(prices)
             if price > 0 and math.isfinite(price) for nu in (nu_for(price), even)]
    kkt = _kkt_multipliers(slope, w, sec_per_epoch, p, lower, upper, attains, gpus, k, left)
    if kkt is not None:
        keep(gap(*kkt), *kkt)
        if kkt[0] > 0:
            tries.insert(0, kkt)
    for price, nu in tries:
        keep(gap(price, nu), price, nu)
        a, b = math.log(price) - 1.0, math.log(price) + 1.0
        x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        g1, g2 = gap(_exp(x1), nu), gap(_exp(x2), nu)
        for _ in range(_Z_STEPS):
            if g1 <= g2:
                b, x2, g2 = x2, x1, g1
                x1 = b - _GOLDEN * (b - a)
                g1 = gap(_exp(x1), nu)
            else:
                a, x1, g1 = x1, x2, g2
                x2 = a + _GOLDEN * (b - a)
                g2 = gap(_exp(x2), nu)
            if b - a <= 1e-14:
                break
        keep(g1, _exp(x1), nu)
        keep(g2, _exp(x2), nu)
    return best


__all__ = ["EPOCH_TOLERANCE", "ExactWindow", "solve_exact"]
