r"""Sia's goodput matrix G (jobs x configurations), its row normalisation, and the
re-allocation factor that discounts a move.

Written from the authors' code, read and run (siasosp23/artifacts at aaf7a0d,
``sia-simulator/sia.py``: ``get_restart_penalty`` 23-35, ``_compute_goodputs_v2`` 423-507,
the matrix in ``optimize_mip`` 576-748; ``cluster.py`` 227-303 for the 1-GPU throughputs
x_t).  Data-parallel jobs only: every scale unit is 1 (no pipeline-parallel jobs).

**Raw goodputs.**  Row i starts at :data:`ZERO_ALLOC_GAIN` = 1e-4 in every column (float32,
as the code).  The replica range is per type, or with ``share_max_replicas`` the same on
every type: maxR = max_t max_replicas[t], minR = min_t min_replicas[t]; then
minR, maxR <- max(1, .).  Per type t:

1. no goodput function on t, and projection off or no function on any type: t is *unknown*;
2. valid columns: minR <= gpus <= maxR (none: t is unknown);
3. g(n, K) = goodput_t(n, K) (samples/s, the best over batch sizes) with a function on t;
   without one (projection on), from the first type d in cluster order that has one:
   g(n, K) = (x_t / x_d) goodput_d(ceil(K / R_d), K), the nodes recomputed with d's R_d.

**Normalisation.**  g_min = the smallest entry > 1e-4 in the known types' columns (1 when
there is none); the whole row is multiplied by 1 / g_min; an unknown type's 1-GPU column is
set to 1; every entry <= 1e-4 becomes 1e-4.  So

.. math::

    G_{ic} = \frac{g_i(c)}{\min_{c'} g_i(c')} \text{ (valid, known)},\qquad
    G_{ic} = 1 \text{ at (t, 1, 1) of an unknown type},\qquad
    G_{ic} = 10^{-4} \text{ elsewhere}

(unitless).  A job that never ran has G = 1 at every type's 1-GPU column.  The arithmetic is
float32 where the code's is (numpy 1.23, which casts a scalar to the array's float32 first):
each goodput is rounded to float32, the projection multiplies by float32(x_t / x_d), the
normalisation by float32(1 / g_min); the default-path corner where a row's 1e-4 entries end up
above 1e-4 (g_min < 1 samples/s) is kept too.  One deliberate difference: a known type whose
valid columns all have goodput <= 1e-4 is left out of g_min (the code's ``np.min`` of an empty
array raises there).

**Re-allocation factor** (``sia.py`` 721-748, the Pollux form, ``sia_use_pollux_realloc_factor``):

.. math::

    r_i = \frac{\max(T_i - N_i S_i, 0)}{T_i + S_i}, \qquad r_i = 1 \text{ if } T_i < S_i

with T_i the job's age (s), N_i its restarts and S_i its restart penalty (s,
:func:`restart_penalty_s`).  The ILP multiplies G by r_i in every column but the job's
previous one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from schedlab.formulations.sia.configs import ConfigSet
from schedlab.world.goodput import GoodputModel

Float32Array = npt.NDArray[np.float32]

#: A goodput function: (nodes, GPUs) -> samples/s at the best batch size.
GoodputFn = Callable[[int, int], float]

#: G's floor: the value of a column the job cannot use (``sia.py`` 19).
ZERO_ALLOC_GAIN = 1e-4
_ZERO32 = np.float32(ZERO_ALLOC_GAIN)

#: Restart penalties (s) of the policy, by substring of the job name, first match wins
#: (``sia.py`` 23-35; measured on the authors' cluster; not the simulator's restart delays).
RESTART_PENALTY_S: tuple[tuple[str, float], ...] = (
    ("deepspeech", 25.0), ("imagenet", 250.0), ("cifar", 30.0), ("bert", 120.0),
    ("yolov3", 45.0))
#: The penalty of any other job (s).
DEFAULT_RESTART_PENALTY_S = 30.0


@dataclass(frozen=True)
class AdaptiveJob:
    """What Sia's policy knows of an adaptive job (``JobInfo`` of ``cluster.py`` 373-432).

    Args:
        name: the job's name (the restart penalty and the tie-break weights read it).
        goodput: type -> goodput function (samples/s) or None (no model on that type yet);
            a type not in the mapping has none.
        max_replicas: per type (or one value for all), at most 64 in the authors' runs.
        min_replicas: per type (or one value), 0 in the authors' runs (raised to 1).
        one_gpu_throughput: x_t per type, samples/s of one GPU (the authors' ``max
            local_bsz / max step_time`` over the 1-replica profiles); needed only to project
            a model onto a type without one.
    """

    name: str
    goodput: Mapping[str, GoodputFn | None]
    max_replicas: int | Mapping[str, int]
    min_replicas: int | Mapping[str, int] = 0
    one_gpu_throughput: Mapping[str, float] = field(default_factory=dict)

    def replicas(self, types: Sequence[str]) -> tuple[list[int], list[int]]:
        """(min, max) replicas of each of ``types`` (a ValueError for a missing type)."""
        return (_per_type(self.min_replicas, types, self.name, "min_replicas"),
                _per_type(self.max_replicas, types, self.name, "max_replicas"))


def _per_type(value: int | Mapping[str, int], types: Sequence[str], job: str,
              what: str) -> list[int]:
    if isinstance(value, Mapping):
        missing = [t for t in types if t not in value]
        if missing:
            raise ValueError(f"job {job!r}: {what} has no value for type(s) {missing}")
        return [int(value[t]) for t in types]
    return [int(value)] * len(types)


def goodput_matrix(jobs: Sequence[AdaptiveJob], configs: ConfigSet, *,
                   share_max_replicas: bool = True,
                   project_throughputs: bool = True) -> Float32Array:
    """G, shape (len(jobs), len(configs)), float32, normalised row by row (module docstring).

    Defaults are the paper's runs (``--project_throughputs --share_max_replicas``);
    projection turns ``share_max_replicas`` on, as the code does (``sia.py`` 72-74).
    """
    share = share_max_replicas or project_throughputs
    n_jobs, n_cols = len(jobs), len(configs)
    raw = np.full((n_jobs, n_cols), _ZERO32, dtype=np.float32)
    known = np.zeros((n_jobs, n_cols), dtype=bool)
    one_gpu_unknown = np.zeros((n_jobs, n_cols), dtype=bool)
    by_type = [configs.columns(t) for t in configs.types]
    for i, job in enumerate(jobs):
        fns = [job.goodput.get(t) for t in configs.types]
        lows, highs = job.replicas(configs.types)
        if share:
            lows, highs = [min(lows)] * len(lows), [max(highs)] * len(highs)
        models = [t for t, fn in enumerate(fns) if fn is not None]
        for t, cols in enumerate(by_type):
            low, high = max(1, lows[t]), max(1, highs[t])
            gpus = configs.column_gpus[cols]
            valid = cols[(gpus >= low) & (gpus <= high)]
            if (fns[t] is None and (not project_throughputs or not models)) or not len(valid):
                one_gpu_unknown[i, cols[configs.column_gpus[cols] == 1]] = True
                continue
            raw[i, valid] = _raw_goodputs(job, configs, t, models[0] if models else t, valid)
            known[i, cols] = True
    # g_min: smallest entry above the floor among the known types' columns (1 if none)
    candidates = np.where(known & (raw > _ZERO32), raw, np.float32(np.inf))
    smallest = candidates.min(axis=1) if n_cols else np.ones(n_jobs, dtype=np.float32)
    smallest = np.where(np.isfinite(smallest), smallest, np.float32(1.0))
    scale = (1.0 / smallest.astype(np.float64)).astype(np.float32)
    matrix = raw * scale[:, None]
    matrix[one_gpu_unknown] = np.float32(1.0)
    matrix[matrix <= _ZERO32] = _ZERO32
    return matrix


def _raw_goodputs(job: AdaptiveJob, configs: ConfigSet, t: int, model: int,
                  columns: npt.NDArray[np.int64]) -> Float32Array:
    """Goodputs (samples/s, float32) of ``columns`` of type t: its own function, or the
    projection from type ``model`` (``_compute_goodputs_v2``, ``sia.py`` 423-507)."""
    nodes, gpus = configs.column_nodes[columns], configs.column_gpus[columns]
    own = job.goodput.get(configs.types[t])
    if own is not None:
        return np.array([own(int(n), int(g)) for n, g in zip(nodes, gpus, strict=True)],
                        dtype=np.float32)
    source, target = configs.types[model], configs.types[t]
    fn = job.goodput[source]
    assert fn is not None
    try:
        ratio = job.one_gpu_throughput[target] / job.one_gpu_throughput[source]
    except KeyError as missing:
        raise ValueError(f"job {job.name!r}: projecting its {source} model onto {target} "
                         f"needs one_gpu_throughput of {missing}") from None
    per_node = configs.gpus_per_node[model]
    values = np.array([fn(math.ceil(int(g) / per_node), int(g)) for g in gpus],
                      dtype=np.float32)
    return values * np.float32(ratio)


def restart_penalty_s(job_name: str) -> float:
    """The policy's restart penalty S (s) of a job: the first of :data:`RESTART_PENALTY_S`
    whose key is in the name (``cifar10-3`` -> 30 s), else 30 s (``get_restart_penalty``,
    ``sia.py`` 23-35)."""
    for key, seconds in RESTART_PENALTY_S:
        if key in job_name:
            return seconds
    return DEFAULT_RESTART_PENALTY_S


def realloc_factor(age_s: float, num_restarts: int, penalty_s: float) -> float:
    """r = max(T - N S, 0) / (T + S), and 1 while T < S (module docstring), unitless."""
    if age_s < penalty_s:
        return 1.0
    return max(age_s - num_restarts * penalty_s, 0.0) / (age_s + penalty_s)


def model_goodput_fn(model: GoodputModel, max_batch_size: float,
                     atomic_bsz_range: tuple[int, int], *, tune_bsz: bool = True) -> GoodputFn:
    """The goodput function of a fitted model (the authors' ``UncachedSpeedupFunction
    .get_goodput``, ``speedup.py`` 93-125): (N, K) -> the best goodput over batch sizes,
    samples/s.  ``max_batch_size`` is the job's requested batch size when it has one (the
    authors' runs), else the application's maximum."""

    def goodput(nodes: int, gpus: int) -> float:
        return model.optimize(nodes, gpus, max_batch_size, atomic_bsz_range,
                              tune_bsz=tune_bsz).goodput

    return goodput


__all__ = ["DEFAULT_RESTART_PENALTY_S", "RESTART_PENALTY_S", "ZERO_ALLOC_GAIN", "AdaptiveJob",
           "GoodputFn", "goodput_matrix", "model_goodput_fn", "realloc_factor",
           "restart_penalty_s"]
