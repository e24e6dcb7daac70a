r"""Finish-time fairness: the two isolated references and the rho built on each.

Finish-time fairness (Themis, NSDI'20) compares a job's finish time in the shared cluster with
its finish time in an *isolated* cluster of its own, rho = T_shared / T_isolated: rho = 1 is
exactly fair, larger is worse.  Papers and code disagree on what "isolated" means, and this
project uses two references.  Each has its own name here; nothing else in schedlab defines one.

**(a) Gavel's isolated share** (Gavel's ``IsolatedPolicy``, the reference of its Themis policy
``FinishTimeFairnessPolicyWithPerf``; optimized by ``gavel.finish_time_fairness``): 1/m of every
accelerator pool, m = the number of active jobs.  With n_k GPUs of type k and scale factor s_j:

.. math::

    X^{iso}_{jk} = \frac{n_k}{m s_j} \Big/ \max\Bigl(1, \sum_k \frac{n_k}{m s_j}\Bigr),\qquad
    T^{iso}_j = \sum_k T_{jk} X^{iso}_{jk}\ \text{(steps/s)}

    \rho_j(X) = \frac{t_j + R_j / \mathrm{thr}_j(X)}{t^{iso}_j + R_j / T^{iso}_j}

t_j = time in the system so far (s), t^iso_j = isolated time accumulated so far (s), R_j the
remaining steps, thr_j(X) the job's throughput under allocation X (steps/s):
:func:`isolated_share`, :func:`isolated_throughput`, :func:`shared_finish_time`,
:func:`isolated_finish_time`, :func:`rho_isolated_share`.

**(b) An exclusive equal share of the cluster** (Shockwave, NSDI'23, for its metric; the Themis
paper's wording; schedlab's ``themis`` policy): the job alone on its own s_j GPUs of its
fastest type takes T_excl_j = S_j / max_k T[j,k] seconds (S_j total steps); a 1/N share of a
cluster of G GPUs holds G/N GPUs, so the job's finish time there is T_excl_j c_j with the
contention factor c_j = max(1, N s_j / G) (a gang of s_j > G/N GPUs runs only (G/N)/s_j of the
time), and

.. math::

    \rho_j = \frac{F_j}{T^{excl}_j \, c_j}

with F_j the job's (realized or estimated) time from arrival to finish, s:
:func:`exclusive_time`, :func:`equal_share_contention`, :func:`rho_equal_share`.

**Where the policies and the metrics differ** (docs/fairness.md):

* ``gavel.finish_time_fairness`` minimizes max_j rho_j of (a) at every re-solve: the reference
  is 1/m of each pool with m the jobs active *now* (it changes as jobs come and go, and t^iso_j
  accumulates Gavel's way, :class:`schedlab.policies.gavel.GavelPolicy`).
* ``themis`` ranks jobs by rho of (b) with N = the jobs active now, c_j = max(1, N s_j / G) and
  F_j estimated as (now - arrival) + R_j / T[j, k*] (k* its fastest type with room).
* The reported metric (:func:`schedlab.analysis.metrics.finish_time_fairness`, Shockwave's
  tables) is rho of (b) with the realized JCT as F_j, N = all jobs of the trace (``static``) or
  the time-average number of jobs in the system over the job's life (``dynamic``), and
  c_j = max(1, N / G), *without* the gang factor s_j: for 1-GPU jobs and a constant N the
  metric and ``themis``' rule coincide; for gangs, and for (a), they measure different things.
"""

from __future__ import annotations

from typing import TypeVar, overload

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: a float, a numpy array or a pandas Series: the arithmetic below works on any of them
Number = TypeVar("Number")


# ---------------------------------------------------------------- (a) Gavel's isolated share


def isolated_share(gpus: FloatArray, scale_factor: FloatArray) -> FloatArray:
    """Gavel's isolated share X_iso (m, K): 1/m of every accelerator pool, m = number of jobs.

    X_iso[j,k] = n_k / (m s_j), then each row divided by max(1, sum_k X_iso[j,k]) so that a
    job never gets more than all of its time.  Every type of the cluster counts in the row sum,
    as in Gavel's ``IsolatedPolicy``.  ``gpus`` = n_k per type (K,), ``scale_factor`` = s_j per
    job (m,).  Empty (0, K) when m = 0.
    """
    m = scale_factor.shape[0]
    if m == 0:
        return np.zeros((0, gpus.shape[0]))
    x = gpus[None, :] / (m * scale_factor[:, None])
    row = np.maximum(x.sum(axis=1), 1.0)
    return x / row[:, None]


def isolated_throughput(throughput: FloatArray, gpus: FloatArray,
                        scale_factor: FloatArray) -> FloatArray:
    """T_iso[j] = sum_k T[j,k] X_iso[j,k] (steps/s) under :func:`isolated_share`.

    ``throughput`` (m, K) is 0 where the job cannot run: such a type adds no throughput but
    still takes its part of the share, as in Gavel's code.
    """
    return (throughput * isolated_share(gpus, scale_factor)).sum(axis=1)


def isolated_finish_time(isolated_time_s: FloatArray, remaining_steps: FloatArray,
                         isolated_thr: FloatArray) -> FloatArray:
    """D_j = t_iso_j + R_j / T_iso[j], s: the finish time on the isolated share (inf where
    T_iso[j] = 0)."""
    return isolated_time_s + np.divide(remaining_steps, isolated_thr,
                                       out=np.full_like(isolated_thr, np.inf),
                                       where=isolated_thr > 0)


def shared_finish_time(time_in_system_s: FloatArray, remaining_steps: FloatArray,
                       throughput: FloatArray) -> FloatArray:
    """F_j = t_j + R_j / thr_j, s: the finish time in the shared cluster at throughput thr_j
    (steps/s); inf for a job with work left and no throughput, t_j for a job with none left."""
    finish = time_in_system_s + np.divide(remaining_steps, throughput,
                                          out=np.full_like(throughput, np.inf),
                                          where=throughput > 0)
    return np.where(remaining_steps > 0, finish, time_in_system_s)


def rho_isolated_share(time_in_system_s: FloatArray, remaining_steps: FloatArray,
                       throughput: FloatArray, isolated_finish: FloatArray) -> FloatArray:
    """rho_j = F_j / D_j of reference (a): :func:`shared_finish_time` over
    :func:`isolated_finish_time` (dimensionless)."""
    return shared_finish_time(time_in_system_s, remaining_steps, throughput) / isolated_finish


# ------------------------------------------------------------ (b) an exclusive equal share


def exclusive_time(total_steps: float, best_throughput: float) -> float:
    """T_excl = S / T_best, s: the job alone on its own s_j GPUs of its fastest type
    (``best_throughput`` = max_k T[j,k] > 0, steps/s of the whole gang)."""
    return total_steps / best_throughput


@overload
def equal_share_contention(num_jobs: float, gpus: float, scale_factor: float = 1) -> float: ...


@overload
def equal_share_contention(num_jobs: FloatArray, gpus: float,
                           scale_factor: float = 1) -> FloatArray: ...


def equal_share_contention(num_jobs: float | FloatArray, gpus: float,
                           scale_factor: float = 1) -> float | FloatArray:
    """c = max(1, N s / G): how much longer than alone a gang of s GPUs takes in a 1/N share of
    a cluster of G GPUs (the share holds G/N GPUs; a gang needing more runs (G/N)/s of the
    time).  N may be an array (one value per job)."""
    share = num_jobs * scale_factor / gpus
    if isinstance(share, np.ndarray):
        return np.maximum(1.0, share)
    return max(1.0, share)


def rho_equal_share(finish_s: Number, exclusive_s: Number, contention: Number) -> Number:
    """rho = F / (T_excl c) of reference (b): time from arrival to finish over the finish time
    in an exclusive 1/N share (dimensionless; floats, arrays or Series alike)."""
    return finish_s / (exclusive_s * contention)  # type: ignore[operator]
