"""Arrays of a Gavel problem taken from an Instance, and the policy objectives evaluated on them.

Notation (docs/formulations/gavel.md): jobs j, accelerator types k, n_k GPUs of type k,
N = sum_k n_k, s_j scale factor, w_j weight, T[j,k] throughput (steps/s of the whole job on s_j
GPUs of type k), R_j remaining steps.  Space sharing adds co-located pairs p = {a, b} with
throughputs Tc[p,k] = (steps/s of a, steps/s of b) while they share max(s_a, s_b) GPUs of type k.

A job may run on type k only when it has a throughput there and its gang fits (s_j <= n_k);
elsewhere X[j,k] is fixed to 0 (``allowed``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from schedlab.fairness import isolated_share as isolated_share  # re-exported
from schedlab.fairness import isolated_throughput as fairness_isolated_throughput
from schedlab.instance import Instance
from schedlab.solution import PairShare

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class GavelData:
    """Dense arrays of one Gavel problem (J jobs, K types, P co-located pairs)."""

    job_ids: list[str]
    types: list[str]
    throughput: FloatArray  # (J, K) steps/s, 0 where not allowed
    allowed: BoolArray  # (J, K)
    scale_factor: FloatArray  # (J,)
    weight: FloatArray  # (J,)
    gpus: FloatArray  # (K,) n_k
    remaining_steps: FloatArray  # (J,)
    pairs: list[tuple[int, int]]  # (a, b) job positions, a < b
    pair_throughput: FloatArray  # (P, K, 2) steps/s of (a, b) together on k
    pair_allowed: BoolArray  # (P, K)
    prices: FloatArray | None = None  # (K,) $ per GPU-hour, when every type has one
    time_in_system: FloatArray | None = None  # (J,) t_j, s
    isolated_time: FloatArray | None = None  # (J,) t_iso_j, s
    #: GPUs per type that define the equal share (default: ``gpus``).  Holding it fixed
    #: makes scores of two cluster sizes comparable: T_eq itself grows with the cluster.
    equal_share_gpus: FloatArray | None = None

    @property
    def num_jobs(self) -> int:
        """J."""
        return len(self.job_ids)

    @property
    def total_gpus(self) -> float:
        """N = sum_k n_k."""
        return float(self.gpus.sum())

    @property
    def pair_scale_factor(self) -> FloatArray:
        """GPUs a pair occupies: max(s_a, s_b)."""
        if not self.pairs:
            return np.zeros(0)
        idx = np.array(self.pairs)
        return np.maximum(self.scale_factor[idx[:, 0]], self.scale_factor[idx[:, 1]])

    def equal_share_throughput(self) -> FloatArray:
        """T_eq[j] = sum_k T[j,k] n_k / N: throughput under an equal time share of every type.

        T[j,k] is 0 where the job cannot run, so T_eq counts only types the job can use.
        """
        n = self.gpus if self.equal_share_gpus is None else self.equal_share_gpus
        return (self.throughput * n[None, :]).sum(axis=1) / float(n.sum())

    def best_throughput(self) -> FloatArray:
        """max_k T[j,k] over allowed types (0 when none)."""
        return self.throughput.max(axis=1) if self.throughput.size else np.zeros(self.num_jobs)


def isolated_throughput(data: GavelData) -> FloatArray:
    """T_iso[j] = sum_k T[j,k] X_iso[j,k] (steps/s) under Gavel's isolated share
    (:func:`schedlab.fairness.isolated_share`: 1/m of every pool, m = number of jobs).

    A type where the job cannot run (no throughput, or its gang does not fit) adds no
    throughput but still takes its part of the share, as in Gavel's code.
    """
    return fairness_isolated_throughput(data.throughput, data.gpus, data.scale_factor)


def gavel_data(instance: Instance, *, space_sharing: bool = False) -> GavelData:
    """Arrays of ``instance``; co-located pairs only when ``space_sharing``."""
    types = instance.types
    jobs = instance.jobs
    index = {job.id: j for j, job in enumerate(jobs)}
    gpus = np.array([instance.cluster.accelerators[k].count for k in types], dtype=float)
    scale = np.array([job.scale_factor for job in jobs], dtype=float)
    thr = np.zeros((len(jobs), len(types)))
    has = np.zeros((len(jobs), len(types)), dtype=bool)
    for j, job in enumerate(jobs):
        for k, acc in enumerate(types):
            value = job.throughput.get(acc)
            if value is not None:
                thr[j, k] = value
                has[j, k] = True
    allowed = has & (scale[:, None] <= gpus[None, :]) & (thr > 0)
    thr = np.where(allowed, thr, 0.0)
    pairs: list[tuple[int, int]] = []
    pair_throughput = np.zeros((0, len(types), 2))
    pair_allowed = np.zeros((0, len(types)), dtype=bool)
    if space_sharing:
        kpos = {acc: k for k, acc in enumerate(types)}
        entries: list[tuple[int, int, float, float]] = []  # (pair, type, T_a, T_b)
        for a, job in enumerate(jobs):
            for other, by_acc in sorted((job.colocated_throughput or {}).items()):
                b = index[other]
                if b <= a:
                    continue
                back = (jobs[b].colocated_throughput or {})[job.id]
                p = len(pairs)
                pairs.append((a, b))
                entries.extend((p, kpos[acc], value, back[acc]) for acc, value in by_acc.items())
        pair_throughput = np.zeros((len(pairs), len(types), 2))
        if entries:
            cols = np.array(entries)
            rows_p, rows_k = cols[:, 0].astype(np.int64), cols[:, 1].astype(np.int64)
            pair_throughput[rows_p, rows_k, 0] = cols[:, 2]
            pair_throughput[rows_p, rows_k, 1] = cols[:, 3]
        idx = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        need = np.maximum(scale[idx[:, 0]], scale[idx[:, 1]]) if pairs else np.zeros(0)
        fits = need[:, None] <= gpus[None, :]
        pair_throughput = np.where(fits[:, :, None], pair_throughput, 0.0)
        pair_allowed = fits & (pair_throughput.sum(axis=2) > 0)
    costs = [instance.cluster.accelerators[k].cost_per_hour for k in types]
    return GavelData(
        job_ids=[job.id for job in jobs],
        types=types,
        throughput=thr,
        allowed=allowed,
        scale_factor=scale,
        weight=np.array([job.weight for job in jobs], dtype=float),
        gpus=gpus,
        remaining_steps=np.array([job.remaining_steps for job in jobs], dtype=float),
        pairs=pairs,
        pair_throughput=pair_throughput,
        pair_allowed=pair_allowed,
        prices=np.array(costs, dtype=float) if all(c for c in costs) else None,
        time_in_system=np.array([job.time_in_system_s for job in jobs], dtype=float),
        isolated_time=np.array([job.isolated_time_s for job in jobs], dtype=float),
    )


# ---------------------------------------------------------------- allocations as arrays


def allocation_arrays(
    data: GavelData,
    allocation: dict[str, dict[str, float]],
    colocated: list[PairShare] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(X of shape (J,K), Y of shape (P,K)) from a Solution's allocation dicts."""
    jpos = {job: j for j, job in enumerate(data.job_ids)}
    kpos = {acc: k for k, acc in enumerate(data.types)}
    x = np.zeros((data.num_jobs, len(data.types)))
    for job, shares in allocation.items():
        for acc, value in shares.items():
            x[jpos[job], kpos[acc]] = value
    y = np.zeros((len(data.pairs), len(data.types)))
    if colocated:
        ppos = {(data.job_ids[a], data.job_ids[b]): p for p, (a, b) in enumerate(data.pairs)}
        for share in colocated:
            a_id, b_id = share.jobs
            p = ppos.get((a_id, b_id), ppos.get((b_id, a_id)))
            if p is not None:
                y[p, kpos[share.accelerator]] += share.fraction
    return x, y


def allocation_dicts(
    data: GavelData, x: FloatArray, y: FloatArray | None = None, *, eps: float = 1e-9
) -> tuple[dict[str, dict[str, float]], list[PairShare]]:
    """Inverse of :func:`allocation_arrays`; shares below ``eps`` are dropped, tiny overshoots
    of [0, 1] from solver tolerances are clipped."""
    x = np.clip(x, 0.0, 1.0)
    allocation: dict[str, dict[str, float]] = {}
    for j, job in enumerate(data.job_ids):
        allocation[job] = {
            acc: float(x[j, k]) for k, acc in enumerate(data.types) if x[j, k] > eps
        }
    pairs: list[PairShare] = []
    if y is not None:
        y = np.clip(y, 0.0, 1.0)
        for p, (a, b) in enumerate(data.pairs):
            for k, acc in enumerate(data.types):
                if y[p, k] > eps:
                    pairs.append(
                        PairShare(
                            jobs=(data.job_ids[a], data.job_ids[b]),
                            accelerator=acc,
                            fraction=float(y[p, k]),
                        )
                    )
    return allocation, pairs


# ------------------------------------------------------------- objectives, evaluated


def effective_throughput(data: GavelData, x: FloatArray, y: FloatArray | None = None) -> FloatArray:
    """thr_j = sum_k T[j,k] X[j,k] + sum_{p containing j} sum_k Tc[p,k,j] Y[p,k]  (steps/s)."""
    thr = (data.throughput * x).sum(axis=1)
    if y is not None and data.pairs:
        for p, (a, b) in enumerate(data.pairs):
            thr[a] += float((data.pair_throughput[p, :, 0] * y[p]).sum())
            thr[b] += float((data.pair_throughput[p, :, 1] * y[p]).sum())
    return thr


def normalized_throughput(
    data: GavelData, x: FloatArray, y: FloatArray | None = None
) -> FloatArray:
    """s_j thr_j(X) / (w_j T_eq[j]): the max-min fairness score of each job.

    The scale factor multiplies because T is the whole job's throughput on s_j GPUs while
    T_eq is measured against one equal share of the cluster: a job needing s_j GPUs would get
    s_j equal shares' worth under space-proportional sharing, so a higher s_j deserves more.
    """
    teq = data.equal_share_throughput()
    thr = effective_throughput(data, x, y)
    return np.divide(
        data.scale_factor * thr, data.weight * teq, out=np.zeros_like(thr), where=teq > 0
    )


def max_min_value(data: GavelData, x: FloatArray, y: FloatArray | None = None) -> float:
    """min_j s_j thr_j(X) / (w_j T_eq[j]) over jobs that can run somewhere."""
    runnable = data.equal_share_throughput() > 0
    if not runnable.any():
        return 0.0
    return float(normalized_throughput(data, x, y)[runnable].min())


def sum_throughput_coefficients(
    data: GavelData, prices: FloatArray | None = None, normalize: str = "none"
) -> FloatArray:
    """Coefficient of X[j,k] in the sum-of-throughputs objective, (J, K).

    ``normalize="none"`` (Gavel's code): T[j,k] / c_k, c_k the price of type k ($/GPU-hour)
    or 1 without prices.  ``normalize="best_type"``: T[j,k] / (T_best[j] [* s_j c_k]).
    """
    coef = data.throughput.copy()
    if normalize == "best_type":
        best = data.best_throughput()
        coef = np.divide(coef, best[:, None], out=np.zeros_like(coef), where=best[:, None] > 0)
        if prices is not None:
            coef = coef / data.scale_factor[:, None]
    elif normalize != "none":
        raise ValueError(f"unknown normalization {normalize!r}")
    if prices is not None:
        coef = np.divide(coef, prices[None, :], out=np.zeros_like(coef),
                         where=prices[None, :] > 0)
    return coef


def sum_throughput_value(
    data: GavelData, x: FloatArray, prices: FloatArray | None = None, normalize: str = "none"
) -> float:
    """sum_j sum_k coef[j,k] X[j,k] with :func:`sum_throughput_coefficients`."""
    return float((sum_throughput_coefficients(data, prices, normalize) * x).sum())


def makespan_value(data: GavelData, x: FloatArray) -> float:
    """max_j R_j / thr_j(X) over jobs with remaining work (inf if one gets nothing), s."""
    thr = effective_throughput(data, x)
    busy = data.remaining_steps > 0
    if not busy.any():
        return 0.0
    if np.any(thr[busy] <= 0):
        return float("inf")
    return float((data.remaining_steps[busy] / thr[busy]).max())
