"""The goodput model of Pollux (OSDI'21), which Sia (SOSP'23) reuses: a job's throughput on
a placement, its statistical efficiency at a batch size, and the batch size and gradient
accumulation that maximise their product.

Written from the authors' code, read and run (Pollux: petuum/adaptdl, branch
``osdi21-artifact`` at c793c70, ``simulator/goodput.py``: ``evaluate`` 65-69,
``throughput`` 71-79, ``efficiency`` 81-89, ``optimize`` 91-145, the time terms 232-257;
Sia's copy, siasosp23/artifacts ``sia-simulator/goodput.py`` 88-105, adds ``tune_bsz``).
For N nodes, K replicas (GPUs), an atomic (per-GPU) batch m and s extra accumulation steps,
so a total batch M = K m (s + 1) samples:

* T_grad(m) = alpha_c + beta_c m (s), one forward/backward pass;
* T_sync(N, K) = alpha_n + beta_n max(K - 2, 1e-8) when N > 1, alpha_r + beta_r max(K - 2,
  1e-8) when N = 1 < K, and 1e-8 + 1e-8 max(K - 2, 1e-8) (not 0) for one replica (s);
* T_optim = (T_grad^gamma + T_sync^gamma)^(1/gamma), the last step overlapping compute and
  all-reduce; T_iter = s T_grad + T_optim (s);
* throughput = M / T_iter (samples/s);
* efficiency(M) = gain / scale with scale = M / M0 and gain = (var + sqr) / (var / scale +
  sqr) (1 where that denominator is 0): (PGNS + M0) / (PGNS + M), PGNS = M0 var / sqr, from
  the latest gradient statistics (sqr, var) at the initial batch size M0;
* goodput = throughput x efficiency (samples/s of progress at batch M0).

:meth:`GoodputModel.optimize` searches 50 total batch sizes geometrically spaced from
max(M0, min_atomic K) to the maximum (only the maximum when batch tuning is off, Sia's
``tune_bsz=False``), splits each into (m, s) and keeps the best valid one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Tolerance of the floor/ceil operations of the batch-size search.
EPS = 1e-8
#: Total batch sizes the search tries per placement (numpy's ``geomspace`` default).
CANDIDATES = 50


@dataclass(frozen=True)
class PerfParams:
    """The throughput model's parameters (s, s per sample, s per replica, unitless gamma)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float


@dataclass(frozen=True)
class GradParams:
    """Gradient statistics at the initial batch size: squared norm ``sqr`` and variance
    ``var`` of the gradient."""

    sqr: float
    var: float


@dataclass(frozen=True)
class BatchChoice:
    """The best (goodput, atomic batch m, extra accumulation steps s) of a placement."""

    goodput: float
    atomic_bsz: int
    accum_steps: int

    def total(self, replicas: int) -> int:
        """The total batch K m (s + 1) on ``replicas`` GPUs."""
        return replicas * self.atomic_bsz * (self.accum_steps + 1)


@dataclass(frozen=True)
class GoodputModel:
    """One job's goodput model: ``perf`` (throughput), ``grad`` (efficiency) and the initial
    batch size ``init_batch_size`` (M0, samples)."""

    perf: PerfParams
    grad: GradParams
    init_batch_size: float

    def grad_time(self, atomic_bsz: Any) -> Any:
        """T_grad(m) = alpha_c + beta_c m, s."""
        return self.perf.alpha_c + self.perf.beta_c * np.asarray(atomic_bsz, dtype=float)

    def sync_time(self, nodes: Any, replicas: Any) -> Any:
        """T_sync(N, K), s: inter-node terms when N > 1, intra-node when N = 1 < K, 1e-8
        terms for one replica."""
        nodes, replicas = np.asarray(nodes), np.asarray(replicas)
        conditions = [nodes > 1, replicas > 1]
        alpha = np.select(conditions, [self.perf.alpha_n, self.perf.alpha_r], 1e-8)
        beta = np.select(conditions, [self.perf.beta_n, self.perf.beta_r], 1e-8)
        return alpha + beta * np.maximum(replicas - 2, 1e-8)

    def throughput(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any) -> Any:
        """M / (s T_grad + (T_grad^gamma + T_sync^gamma)^(1/gamma)), samples/s."""
        grad = self.grad_time(atomic_bsz)
        sync = self.sync_time(nodes, replicas)
        gamma = self.perf.gamma
        optim = np.exp(np.log(grad ** gamma + sync ** gamma) / gamma)
        steps = np.asarray(accum_steps)
        batch = np.asarray(replicas) * np.asarray(atomic_bsz) * (steps + 1)
        return batch / (steps * grad + optim)

    def efficiency(self, batch_size: Any) -> Any:
        """(PGNS + M0) / (PGNS + M) as gain / scale (module docstring), unitless."""
        scale = np.asarray(batch_size, dtype=float) / self.init_batch_size
        denominator = self.grad.var / scale + self.grad.sqr
        gain = np.where(denominator > 0, (self.grad.var + self.grad.sqr) / denominator, 1.0)
        return gain / scale

    def goodput(self, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any) -> Any:
        """throughput x efficiency(K m (s + 1)), samples/s."""
        batch = np.asarray(replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
        return (self.throughput(nodes, replicas, atomic_bsz, accum_steps)
                * self.efficiency(batch))

    def optimize(self, nodes: int, replicas: int, max_batch_size: float,
                 atomic_bsz_range: tuple[int, int], *, tune_bsz: bool = True) -> BatchChoice:
        """The best batch split on (``nodes``, ``replicas``): 50 total batches M spaced
        geometrically from max(M0, min_atomic K) to ``max_batch_size`` (only the maximum
        without ``tune_bsz``); local = M / K; s = ceil(local / max_atomic - 1e-8) - 1, at
        least 1 on one replica above M0; m = ceil(local / (s + 1) - 1e-8); goodput 0 where
        m is outside ``atomic_bsz_range``; the first best wins."""
        if not 1 <= nodes <= replicas:
            raise ValueError(f"need 1 <= nodes <= replicas, got {nodes}, {replicas}")
        if max_batch_size < self.init_batch_size:
            raise ValueError("the maximum batch size is below the initial batch size")
        low_atomic, high_atomic = atomic_bsz_range
        low = (max(self.init_batch_size, low_atomic * replicas) if tune_bsz
               else max_batch_size)
        batch = np.geomspace(low, max_batch_size, CANDIDATES)
        local = batch / replicas
        steps = np.ceil(local / high_atomic - EPS) - 1
        if replicas == 1:
            steps = np.where(local > self.init_batch_size + EPS, np.maximum(steps, 1), steps)
        steps = steps.astype(int)
        atomic = np.ceil(local / (steps + 1) - EPS).astype(int)
        values = self.goodput(nodes, replicas, atomic, steps)
        values = np.where((low_atomic <= atomic) & (atomic <= high_atomic), values, 0.0)
        best = int(np.argmax(values))
        return BatchChoice(float(values[best]), int(atomic[best]), int(steps[best]))


__all__ = ["CANDIDATES", "EPS", "BatchChoice", "GoodputModel", "GradParams", "PerfParams"]
