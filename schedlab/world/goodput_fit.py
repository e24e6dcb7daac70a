"""Fitting Pollux's throughput model (:class:`schedlab.world.goodput.PerfParams`) to the step
times a job has observed, as the Pollux (OSDI'21) and Sia (SOSP'23) agents do after every
profiled configuration.

Written from the authors' code, read and run: Pollux, petuum/adaptdl branch
``osdi21-artifact`` at c793c70, ``simulator/goodput.py`` (``fit_perf_params`` 148-207,
``_rmse`` 209-210, ``_obj_fn`` 213-229, the time terms 232-257); Sia's copy,
siasosp23/artifacts ``sia-simulator/goodput.py`` 149-208, differs only by ``tol=1e-5``.  The
authors differentiate the objective with ``autograd``; here its gradient is written out.

For observations i = 1..n of (N_i nodes, K_i replicas, atomic batch m_i) with measured
accumulation-step time A_i (step time minus sync time, s) and optimiser-step time O_i (the
step time, s), and parameters theta = (alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r,
gamma):

* P_i = alpha_c + beta_c m_i (T_grad), S_i = T_sync(N_i, K_i) (the model's, with its 1e-8
  terms for one replica), L_i = log(P_i^gamma + S_i^gamma) / gamma (log T_optim);
* objective f = RMSE(log P, log A) + RMSE(L, log O) + 1e-3 (gamma - 1)^2
  + 1e-2 ((beta_n / alpha_n)^2 + (beta_r / alpha_r)^2), RMSE(u, v) = sqrt(mean((u - v)^2));
* start (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001), bounds [1e-8, inf) for the six alphas and
  betas and [1, 10] for gamma (``keep_feasible``); a parameter is fixed by equal bounds:
  alpha_c at mean(A) / 2 when one atomic batch size was observed, alpha_n and beta_n at 1e-8
  without a multi-node observation, alpha_r and beta_r at 1e-8 without a one-node multi-GPU
  one, beta_n and beta_r at 1e-8 without one on more than 2 GPUs;
* ``scipy.optimize.minimize`` (L-BFGS-B, bounded) with the exact gradient; then, without a
  multi-node observation, the prior alpha_n >= 1.1 alpha_r, beta_n >= 1.1 beta_r.

The gradient: with r_i = log P_i - log A_i, e1 = RMSE(log P, log A) and w_i = r_i / (n e1),
d e1 / d alpha_c = sum w_i / P_i and d e1 / d beta_c = sum w_i m_i / P_i; with q_i = L_i -
log O_i, e2 = RMSE(L, log O), v_i = q_i / (n e2), D_i = P_i^gamma + S_i^gamma:
dL/dP = P^(gamma-1) / D, dL/dS = S^(gamma-1) / D, dL/dgamma = (P^gamma log P + S^gamma log S)
/ (gamma D) - log D / gamma^2, and dS_i / d(alpha_n, beta_n) = (1, max(K_i - 2, 1e-8)) where
N_i > 1, dS_i / d(alpha_r, beta_r) the same where N_i = 1 < K_i.  An RMSE of exactly 0 makes
its w (or v) NaN, as autograd's sqrt does (L-BFGS-B then stops; spec 0.3's note).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.optimize

from schedlab.world.goodput import PerfParams

#: The start point (alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma).
INITIAL = (1e-1, 1e-2, 1e-1, 1e-2, 1e-1, 1e-2, 1.0 + 1e-3)
#: Lower bounds: a 1e-8 floor for the alphas and betas (numerical slack), 1 for gamma.
LOWER = (1e-8, 1e-8, 1e-8, 1e-8, 1e-8, 1e-8, 1.0)
#: Upper bounds.
UPPER = (np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, 10.0)
#: Sia's tolerance (``sia-simulator/goodput.py`` 200-201); Pollux passes none.
SIA_TOL = 1e-5


def _network_time(theta: np.ndarray, nodes: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """T_sync per observation (Pollux ``_predict_network_time``, 243-257)."""
    conds = [nodes > 1, replicas > 1]
    bottleneck = np.select(conds, [theta[2], theta[4]], 1e-8)
    retrogress = np.select(conds, [theta[3], theta[5]], 1e-8)
    return bottleneck + retrogress * np.maximum(replicas - 2, 1e-8)


def objective(theta: Any, nodes: Any, replicas: Any, atomic_bsz: Any, accum_step_time: Any,
              optim_step_time: Any) -> float:
    """The fit's objective f(theta) (module docstring; Pollux ``_obj_fn`` 214-231)."""
    return _objective_and_gradient(np.asarray(theta, dtype=float), *_arrays(
        nodes, replicas, atomic_bsz, accum_step_time, optim_step_time))[0]


def gradient(theta: Any, nodes: Any, replicas: Any, atomic_bsz: Any, accum_step_time: Any,
             optim_step_time: Any) -> np.ndarray:
    """The exact gradient of :func:`objective` in theta (module docstring)."""
    return _objective_and_gradient(np.asarray(theta, dtype=float), *_arrays(
        nodes, replicas, atomic_bsz, accum_step_time, optim_step_time))[1]


def _arrays(*columns: Any) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.asarray(c) for c in columns)
    sizes = {a.shape for a in arrays}
    if len(sizes) != 1 or arrays[0].ndim != 1 or arrays[0].size == 0:
        raise ValueError(f"need five 1-D arrays of one non-zero length, got shapes {sizes}")
    return arrays


def _objective_and_gradient(theta: np.ndarray, nodes: np.ndarray, replicas: np.ndarray,
                            atomic_bsz: np.ndarray, accum: np.ndarray,
                            optim: np.ndarray) -> tuple[float, np.ndarray]:
    alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma = theta
    n = len(nodes)
    pred_accum = alpha_c + beta_c * atomic_bsz
    pred_network = _network_time(theta, nodes, replicas)
    power_accum, power_network = pred_accum ** gamma, pred_network ** gamma
    total = power_accum + power_network
    pred_log_optim = np.log(total) / gamma
    res1 = np.log(pred_accum) - np.log(accum)
    res2 = pred_log_optim - np.log(optim)
    err1 = np.sqrt((res1 ** 2).mean())
    err2 = np.sqrt((res2 ** 2).mean())
    reg1 = 1e-3 * (gamma - 1) ** 2
    reg2 = 1e-2 * ((beta_n / alpha_n) ** 2 + (beta_r / alpha_r) ** 2)
    value = float(err1 + err2 + reg1 + reg2)

    with np.errstate(divide="ignore", invalid="ignore"):
        w1 = res1 / (n * err1)  # d err1 / d log P_i (NaN when err1 == 0, as autograd's)
        w2 = res2 / (n * err2)  # d err2 / d L_i
    d_pred_accum = w1 / pred_accum + w2 * power_accum / (pred_accum * total)
    d_pred_network = w2 * power_network / (pred_network * total)
    d_gamma_terms = w2 * ((power_accum * np.log(pred_accum)
                           + power_network * np.log(pred_network)) / (gamma * total)
                          - np.log(total) / gamma ** 2)
    inter = nodes > 1
    intra = ~inter & (replicas > 1)
    spread = np.maximum(replicas - 2, 1e-8)
    grad = np.array([
        d_pred_accum.sum(),
        (d_pred_accum * atomic_bsz).sum(),
        np.where(inter, d_pred_network, 0.0).sum() - 2e-2 * beta_n ** 2 / alpha_n ** 3,
        np.where(inter, d_pred_network * spread, 0.0).sum() + 2e-2 * beta_n / alpha_n ** 2,
        np.where(intra, d_pred_network, 0.0).sum() - 2e-2 * beta_r ** 2 / alpha_r ** 3,
        np.where(intra, d_pred_network * spread, 0.0).sum() + 2e-2 * beta_r / alpha_r ** 2,
        d_gamma_terms.sum() + 2e-3 * (gamma - 1),
    ], dtype=float)
    return value, grad


def fit_perf_params(nodes: Any, replicas: Any, atomic_bsz: Any, accum_step_time: Any,
                    optim_step_time: Any, *, tol: float | None = None) -> PerfParams:
    """The :class:`PerfParams` that minimise the objective on the observations (arrays of one
    length: node count, replica count, atomic batch, accumulation-step time s, optimiser-step
    time s), as Pollux's ``fit_perf_params`` (``tol=None``, scipy's default tolerances) or
    Sia's (``tol=SIA_TOL``); see the module docstring for the fixing rules and the prior."""
    nodes, replicas, atomic_bsz, accum, optim = _arrays(
        nodes, replicas, atomic_bsz, accum_step_time, optim_step_time)
    atomic_bsz = atomic_bsz.astype(float)
    accum, optim = accum.astype(float), optim.astype(float)
    params = list(INITIAL)
    lower = list(LOWER)
    upper = list(UPPER)
    if len(np.unique(atomic_bsz)) == 1:
        # one atomic batch size seen: alpha_c fixed at half the mean accumulation time
        params[0] = upper[0] = lower[0] = float(np.mean(accum)) / 2
    if not np.any(nodes > 1):
        params[2] = upper[2] = lower[2]
        params[3] = upper[3] = lower[3]
    if not np.any((nodes == 1) & (replicas > 1)):
        params[4] = upper[4] = lower[4]
        params[5] = upper[5] = lower[5]
    if not np.any(replicas > 2):
        params[3] = upper[3] = lower[3]
        params[5] = upper[5] = lower[5]
    bounds = scipy.optimize.Bounds(lower, upper, keep_feasible=True)
    args = (nodes, replicas, atomic_bsz, accum, optim)
    result = scipy.optimize.minimize(_objective_and_gradient, params, args=args, jac=True,
                                     bounds=bounds, tol=tol)
    fitted = [float(v) for v in result.x]
    if not np.any(nodes > 1):
        # prior: inter-node links are no faster than intra-node ones
        fitted[2] = max(fitted[2], fitted[4] * 1.1)
        fitted[3] = max(fitted[3], fitted[5] * 1.1)
    return PerfParams(*fitted)


__all__ = ["INITIAL", "LOWER", "SIA_TOL", "UPPER", "fit_perf_params", "gradient", "objective"]
