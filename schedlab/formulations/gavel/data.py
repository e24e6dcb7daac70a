"""Arrays of a Gavel problem taken from an Instance, and the policy objectives evaluated on them.

Notation (docs/formulations/gavel.md): jobs j, accelerator types k, n_k GPUs of type k,
N = sum_k n_k, s_j scale factor, w_j weight, T[j,k] throughput (steps/s of the whole job on s_j
GPUs of type k), R_j remaining steps.  Space sharing adds co-located pairs p = {a, b} with
throughputs Tc[p,k] = (steps/s of a, steps/s of b) while they share max(s_a, s_b) GPUs of type k.

A job may run on type k only when it has a throughput there and its gang fits (s_j <= n_k);
elsewhere X[j,k] is fixed to 0 (``allowed``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from schedlab.fairness import isolated_share as isolated_share  # re-exported
from schedlab.fairness import isolated_throughput as fairness_isolated_throughput
from schedlab.instance import Instance
from schedlab.solution import PairShare

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class PairList(Sequence[tuple[int, int]]):
    """Co-located pairs (a, b) of job positions held as one (P, 2) int64 array.

    Behaves as the list of tuples it stands for (``len``, indexing, iteration, ``==`` with
    a list), and ``np.asarray`` of it is the array itself: code that reads the pairs as an
    array (:func:`pair_index`) pays nothing for the P Python tuples it never creates.
    """

    __slots__ = ("array",)

    def __init__(self, array: npt.ArrayLike) -> None:
        self.array: IntArray = np.asarray(array, dtype=np.int64).reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.array)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, index: slice) -> PairList: ...

    def __getitem__(self, index: int | slice) -> tuple[int, int] | PairList:
        if isinstance(index, slice):
            return PairList(self.array[index])
        a, b = self.array[index].tolist()
        return (a, b)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.array[:, 0].tolist(), self.array[:, 1].tolist(), strict=True)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> IntArray:
        if dtype is None or np.dtype(dtype) == self.array.dtype:
            return self.array.copy() if copy else self.array
        return self.array.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PairList):
            return bool(np.array_equal(self.array, other.array))
        if isinstance(other, Sequence):
            return list(self) == [tuple(pair) for pair in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PairList({len(self)} pairs)"


def pair_index(data: GavelData) -> IntArray:
    """``data.pairs`` as a (P, 2) int64 array of job positions (no copy for a PairList)."""
    return np.asarray(data.pairs, dtype=np.int64).reshape(-1, 2)


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
    pairs: Sequence[tuple[int, int]]  # (a, b) job positions, a < b (a PairList or a list)
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
        idx = pair_index(self)
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


#: The job fields :func:`gavel_data` reads, in the order it unpacks them.
_JOB_FIELDS = attrgetter("id", "scale_factor", "weight", "total_steps", "steps_done",
                         "time_in_system_s", "isolated_time_s", "throughput")


def gavel_data(instance: Instance, *, space_sharing: bool = False) -> GavelData:
    """Arrays of ``instance``; co-located pairs only when ``space_sharing``.

    The pairs come from the instance's columnar co-location entries
    (:meth:`~schedlab.instance.Instance.colocation`), in the order: first job position a, then
    the partner's id (as strings sort).  Tc[p,k] of a type that only one of the two jobs lists
    is read as 0 on the other side (validation forbids such a listing).
    """
    types = instance.types
    jobs = instance.jobs
    gpus = np.array([instance.cluster.accelerators[k].count for k in types], dtype=float)
    # one C-level pass over the jobs for every field read here (10^6 jobs: ~0.3 s)
    fields = [list(column) for column in zip(*map(_JOB_FIELDS, jobs), strict=True)] or [
        [] for _ in range(8)]
    ids, scales, weights, totals, done, in_system, isolated, rows = fields
    scale = np.array(scales, dtype=float)
    thr = np.zeros((len(jobs), len(types)))
    nan = math.nan
    for k, acc in enumerate(types):
        # no throughput listed becomes NaN
        thr[:, k] = np.array([row.get(acc, nan) for row in rows], dtype=float)
    has = ~np.isnan(thr)
    thr = np.where(has, thr, 0.0)
    allowed = has & (scale[:, None] <= gpus[None, :]) & (thr > 0)
    thr = np.where(allowed, thr, 0.0)
    pairs = PairList(np.zeros((0, 2), dtype=np.int64))
    pair_throughput = np.zeros((0, len(types), 2))
    pair_allowed = np.zeros((0, len(types)), dtype=bool)
    if space_sharing and any(job.colocated_throughput for job in jobs):
        pairs, pair_throughput = _pair_arrays(instance)
        idx = pairs.array
        need = np.maximum(scale[idx[:, 0]], scale[idx[:, 1]])
        fits = need[:, None] <= gpus[None, :]
        pair_throughput = np.where(fits[:, :, None], pair_throughput, 0.0)
        pair_allowed = fits & (pair_throughput.sum(axis=2) > 0)
    costs = [instance.cluster.accelerators[k].cost_per_hour for k in types]
    total = np.array(totals, dtype=float)  # None (unknown) becomes NaN
    remaining = np.where(np.isnan(total), 0.0,
                         np.maximum(total - np.array(done, dtype=float), 0.0))
    return GavelData(
        job_ids=ids,
        types=types,
        throughput=thr,
        allowed=allowed,
        scale_factor=scale,
        weight=np.array(weights, dtype=float),
        gpus=gpus,
        remaining_steps=remaining,
        pairs=pairs,
        pair_throughput=pair_throughput,
        pair_allowed=pair_allowed,
        prices=np.array(costs, dtype=float) if all(c for c in costs) else None,
        time_in_system=np.array(in_system, dtype=float),
        isolated_time=np.array(isolated, dtype=float),
    )


def _pair_arrays(instance: Instance) -> tuple[PairList, FloatArray]:
    """(pairs, Tc of shape (P, K, 2)) of the pairs that job a (the smaller position) lists,
    ordered by a, then by the partner's id."""
    coloc = instance.colocation()
    keep = coloc.present[:, 0]
    everything = bool(keep.all())
    first = coloc.first if everything else coloc.first[keep]
    second = coloc.second if everything else coloc.second[keep]
    throughput = coloc.throughput if everything else coloc.throughput[keep]
    ids = [job.id for job in instance.jobs]
    by_id = sorted(range(len(ids)), key=ids.__getitem__)
    if by_id == list(range(len(ids))):  # ids sort as positions: (a, b) order is id order
        return PairList(np.stack([first, second], axis=1)), throughput
    rank = np.empty(len(ids), dtype=np.int64)
    rank[by_id] = np.arange(len(ids))
    order = np.lexsort((rank[second], first))
    idx = np.stack([first[order], second[order]], axis=1)
    return PairList(idx), throughput[order]


# ---------------------------------------------------------------- allocations as arrays


def allocation_arrays(
    data: GavelData,
    allocation: dict[str, dict[str, float]],
    colocated: list[PairShare] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(X of shape (J,K), Y of shape (P,K)) from a Solution's allocation dicts (a pair share
    naming a pair ``data`` does not list, an unknown job or type is left out)."""
    jpos = {job: j for j, job in enumerate(data.job_ids)}
    kpos = {acc: k for k, acc in enumerate(data.types)}
    x = np.zeros((data.num_jobs, len(data.types)))
    for job, shares in allocation.items():
        for acc, value in shares.items():
            x[jpos[job], kpos[acc]] = value
    y = np.zeros((len(data.pairs), len(data.types)))
    known = [share for share in colocated or []
             if share.jobs[0] in jpos and share.jobs[1] in jpos and share.accelerator in kpos]
    if known and len(data.pairs):
        a = np.array([jpos[share.jobs[0]] for share in known], dtype=np.int64)
        b = np.array([jpos[share.jobs[1]] for share in known], dtype=np.int64)
        k = np.array([kpos[share.accelerator] for share in known], dtype=np.int64)
        fraction = np.array([share.fraction for share in known], dtype=float)
        p = find_pairs(data, a, b)
        found = p >= 0
        np.add.at(y, (p[found], k[found]), fraction[found])
    return x, y


def find_pairs(data: GavelData, a: IntArray, b: IntArray) -> IntArray:
    """Index in ``data.pairs`` of each pair {a[i], b[i]} (either order), -1 where unlisted."""
    idx = pair_index(data)
    size = max(data.num_jobs, 1)
    keys = np.minimum(idx[:, 0], idx[:, 1]) * size + np.maximum(idx[:, 0], idx[:, 1])
    order = np.argsort(keys, kind="stable")
    wanted = np.minimum(a, b) * size + np.maximum(a, b)
    if not len(keys):
        return np.full(len(wanted), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    return np.where(keys[order][pos] == wanted, order[pos], -1).astype(np.int64)


def allocation_dicts(
    data: GavelData, x: FloatArray, y: FloatArray | None = None, *, eps: float = 1e-9
) -> tuple[dict[str, dict[str, float]], list[PairShare]]:
    """Inverse of :func:`allocation_arrays`; shares below ``eps`` are dropped, tiny overshoots
    of [0, 1] from solver tolerances are clipped."""
    x = np.clip(x, 0.0, 1.0)
    # Rows grouped by which types they keep (at most 2^K patterns), each group's dicts made
    # by dict(zip(...)) over Python floats: the same dicts as a per-share loop, in job order.
    rows: list[dict[str, float]] = [{} for _ in range(len(data.job_ids))]
    if x.size:
        kept = x > eps
        num_types = kept.shape[1]
        if num_types <= 62:  # a row's pattern as the bits of one int64
            bits = np.arange(num_types, dtype=np.int64)
            codes, group = np.unique(kept @ (1 << bits), return_inverse=True)
            patterns = (codes[:, None] >> bits & 1).astype(bool)
        else:
            patterns, group = np.unique(kept, axis=0, return_inverse=True)
        for g, keep in enumerate(patterns):
            cols = np.flatnonzero(keep).tolist()
            if not cols:
                continue
            jobs = np.flatnonzero(group.ravel() == g)
            names = [data.types[k] for k in cols]
            columns = [x[jobs, k].tolist() for k in cols]
            for j, values in zip(jobs.tolist(), zip(*columns, strict=True), strict=True):
                rows[j] = dict(zip(names, values, strict=True))
    allocation = dict(zip(data.job_ids, rows, strict=True))
    pairs: list[PairShare] = []
    if y is not None and len(y):
        y = np.clip(y, 0.0, 1.0)
        idx = pair_index(data)
        for p, k in zip(*np.nonzero(y > eps), strict=True):  # in (pair, type) order
            a, b = idx[p]
            pairs.append(
                PairShare(
                    jobs=(data.job_ids[a], data.job_ids[b]),
                    accelerator=data.types[k],
                    fraction=float(y[p, k]),
                )
            )
    return allocation, pairs


# ------------------------------------------------------------- objectives, evaluated


def effective_throughput(data: GavelData, x: FloatArray, y: FloatArray | None = None) -> FloatArray:
    """thr_j = sum_k T[j,k] X[j,k] + sum_{p containing j} sum_k Tc[p,k,j] Y[p,k]  (steps/s)."""
    thr = (data.throughput * x).sum(axis=1)
    if y is not None and len(data.pairs):
        idx = pair_index(data)
        for side in (0, 1):
            gain = (data.pair_throughput[:, :, side] * y).sum(axis=1)
            thr += np.bincount(idx[:, side], weights=gain, minlength=data.num_jobs)
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
