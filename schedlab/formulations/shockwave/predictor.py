"""Shockwave's remaining-runtime predictor and its seconds-per-epoch estimate d_j.

A job has E epochs, a batch size b_e for each epoch e (``batch_schedule``) and profiled
seconds per epoch for each batch size (``regimes``).  Shockwave's scheduler reads the
profile in whole seconds: t_e = max(1, round(regimes[b_e])) (``JobMetaData.
convert_epoch_duration_in_seconds``; :func:`epoch_seconds`).  With e = ``epochs_done``
(the epoch about to run, Shockwave's ``epoch_progress``):

**Shockwave** (``mode="shockwave"``, the default; ``JobMetaData.
dirichlet_posterior_remaining_runtime`` of github.com/uw-mad-dash/shockwave, commit 8a44f4a):

1. regimes R = the distinct batch sizes of the whole schedule, ascending;
2. prior alpha_b = E / |R| for each b in R;
3. posterior alpha_b += 1 for each epoch of b_0 .. b_e (e + 1 epochs: the epoch about to run
   counts; all E when e = E);
4. rebase: beta_b = E alpha_b / sum(alpha);
5. for each of those observed epochs of batch size b: beta_b -= 1 while beta_b >= 1;
6. inflated = max(int(sum(beta) + 1), E - e);
7. remaining = sum_b beta_b mu_b x (E - e) / inflated, where mu_b is the mean of t_e over the
   epochs of the whole schedule that run b; 1.0 when E - e <= 0.

The floating-point operations run in the code's order (sums over R ascending, one addition or
subtraction per epoch), so ``int(sum(beta) + 1)`` (a sum that is an integer up to rounding)
floors the same way.  Shockwave's calibration of the profile against measured throughputs
(``calibrate_profiled_epoch_duration``) and its optional noise are not modelled: with no
measurements the calibration leaves the profile as it is, and the noise is 0 by default.

This default looks at the true schedule three times (docs/formulations/shockwave.md): R is
the set of batch sizes the job *will* use; the epoch about to run is counted before it runs;
mu_b averages over future epochs too.

**Non-peeking** (``mode="non_peeking"``): R = the batch sizes the job *can* use (the keys of
``regimes``, :func:`~schedlab.workloads.shockwave_adaptation.usable_batch_sizes` for
generated jobs); only the e completed epochs b_0 .. b_{e-1} update the posterior and are
subtracted; mu_b is the mean of t over the completed epochs of b, or the profiled seconds
max(1, round(regimes[b])) for a batch size not yet run; step 6 becomes
inflated = max(sum(beta), E - e).  Shockwave's + 1 in step 6 stands for the epoch about to
run, which its posterior counts and subtracts as if it had run; without that peek sum(beta)
already counts every remaining epoch (it is E - e whenever every subtraction succeeds), and
int(sum(beta) + 1) would shrink the prediction by (E - e) / (E - e + 1), or not, depending on
the last bit of a sum that is mathematically an integer.  Steps 2, 4 and 7 are unchanged.

**Oracle** (``mode="oracle"``): the true remaining seconds sum_{k >= e} t_k (0 when e = E).

**d_j** (:func:`seconds_per_epoch_estimate`): Shockwave's ``interpolate_epoch_duration``,
mean(t_0 .. t_e) (the epoch about to run included: a peek); non-peeking: mean(t_0 .. t_{e-1}),
or t at the initial batch size when no epoch has run (b_0 is the job's initial batch size,
known at submission).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from schedlab.errors import InputError
from schedlab.instance import Job

PredictorMode = Literal["shockwave", "non_peeking", "oracle"]
PREDICTOR_MODES: tuple[PredictorMode, ...] = ("shockwave", "non_peeking", "oracle")


@dataclass(frozen=True)
class EpochProfile:
    """A job's epochs as the predictor reads them.

    ``schedule[e]``: batch size of epoch e; ``seconds[e]``: t_e, seconds of epoch e;
    ``usable``: the batch sizes the job can use, ascending; ``usable_seconds[b]``: profiled
    seconds per epoch at b (the same rounding as ``seconds``).
    """

    schedule: np.ndarray
    seconds: np.ndarray
    usable: tuple[int, ...]
    usable_seconds: Mapping[int, float]

    @property
    def epochs(self) -> int:
        """E."""
        return len(self.schedule)


def whole_seconds(seconds: np.ndarray | float) -> np.ndarray:
    """max(1, round(t)) elementwise (round half to even, as Python's ``round``)."""
    return np.maximum(1.0, np.round(np.asarray(seconds, dtype=float)))


def epoch_profile(job: Job, *, rounded: bool = True) -> EpochProfile:
    """The :class:`EpochProfile` of a Shockwave job (``epochs``, ``batch_schedule``,
    ``regimes``); ``rounded`` applies :func:`whole_seconds` as Shockwave's scheduler does.

    Raises an :class:`InputError` naming the field when one is missing or inconsistent.
    """
    who = f"job {job.id!r}"
    if job.epochs is None:
        raise InputError(f"{who}: the Shockwave predictor needs 'epochs'", field="epochs")
    if not job.batch_schedule:
        raise InputError(f"{who}: the Shockwave predictor needs 'batch_schedule'",
                         field="batch_schedule")
    if len(job.batch_schedule) != job.epochs:
        raise InputError(f"{who}: batch_schedule has {len(job.batch_schedule)} entries for "
                         f"{job.epochs} epochs", field="batch_schedule")
    if not job.regimes:
        raise InputError(f"{who}: the Shockwave predictor needs 'regimes'", field="regimes")
    try:
        by_size = {int(b): float(t) for b, t in job.regimes.items()}
    except ValueError:
        raise InputError(f"{who}: regimes keys must be batch sizes (integers), got "
                         f"{sorted(job.regimes)}", field="regimes") from None
    schedule = np.asarray(job.batch_schedule, dtype=np.int64)
    unknown = sorted(set(schedule.tolist()) - set(by_size))
    if unknown:
        raise InputError(f"{who}: batch size(s) {unknown} of batch_schedule have no entry in "
                         "regimes", field="regimes")
    usable = tuple(sorted(by_size))
    raw = np.array([by_size[b] for b in usable])
    per_size = whole_seconds(raw) if rounded else raw
    usable_seconds = {b: float(t) for b, t in zip(usable, per_size, strict=True)}
    seconds = np.array([usable_seconds[b] for b in schedule.tolist()])
    return EpochProfile(schedule=schedule, seconds=seconds, usable=usable,
                        usable_seconds=usable_seconds)


def _check_done(epochs_done: int, epochs: int) -> int:
    if isinstance(epochs_done, bool) or not isinstance(epochs_done, int | np.integer) \
            or not 0 <= epochs_done <= epochs:
        raise InputError(f"epochs_done must be an integer in [0, {epochs}], got "
                         f"{epochs_done!r}", field="epochs_done")
    return int(epochs_done)


def dirichlet_remaining_seconds(regimes: Sequence[int], observed: Sequence[int], epochs: int,
                                epochs_done: int, mean_seconds: Mapping[int, float], *,
                                counts_next_epoch: bool = True) -> float:
    """Steps 2-7 of the module docstring for given regimes, observed epochs and means.

    ``regimes``: the batch sizes R (any order; used ascending); ``observed``: the batch size
    of every observed epoch, in epoch order; ``mean_seconds[b]``: mu_b.
    ``counts_next_epoch``: step 6 as Shockwave's code, int(sum(beta) + 1), whose + 1 stands
    for the epoch about to run that ``observed`` includes; False: the non-peeking step 6,
    max(sum(beta), E - e).  Returns seconds, or 1.0 when nothing remains.
    """
    sizes = sorted(set(int(b) for b in regimes))
    if not sizes:
        return 1.0
    posterior = {b: epochs / len(sizes) for b in sizes}
    seen = [int(b) for b in observed]
    for b in seen:
        posterior[b] += 1
    total = sum(list(posterior.values()))
    rebased = {b: epochs * alpha / total for b, alpha in posterior.items()}
    for b in seen:
        if rebased[b] >= 1:
            rebased[b] -= 1
    remaining = epochs - epochs_done
    beta_sum = sum(list(rebased.values()))
    inflated = max(int(beta_sum + 1) if counts_next_epoch else beta_sum, remaining)
    if inflated <= 0 or remaining <= 0:
        return 1.0
    seconds = 0.0
    for b, beta in rebased.items():
        seconds += beta * mean_seconds[b]
    seconds *= remaining / inflated
    return seconds


def _mean_by_size(schedule: np.ndarray, seconds: np.ndarray) -> dict[int, float]:
    return {int(b): float(np.mean(seconds[schedule == b])) for b in np.unique(schedule)}


def shockwave_remaining_seconds(profile: EpochProfile, epochs_done: int) -> float:
    """Shockwave's prediction (the module docstring's steps 1-7, peeks included)."""
    e = _check_done(epochs_done, profile.epochs)
    return dirichlet_remaining_seconds(
        np.unique(profile.schedule).tolist(), profile.schedule[: e + 1].tolist(),
        profile.epochs, e, _mean_by_size(profile.schedule, profile.seconds))


def non_peeking_remaining_seconds(profile: EpochProfile, epochs_done: int) -> float:
    """The prediction from what is known after ``epochs_done`` completed epochs only."""
    e = _check_done(epochs_done, profile.epochs)
    done = profile.schedule[:e]
    means = dict(profile.usable_seconds)
    means.update(_mean_by_size(done, profile.seconds[:e]))
    return dirichlet_remaining_seconds(profile.usable, done.tolist(), profile.epochs, e, means,
                                       counts_next_epoch=False)


def oracle_remaining_seconds(profile: EpochProfile, epochs_done: int) -> float:
    """The true remaining seconds sum_{k >= e} t_k."""
    e = _check_done(epochs_done, profile.epochs)
    return float(sum(profile.seconds[e:].tolist()))


def remaining_seconds(job: Job, epochs_done: int | None = None, *,
                      mode: PredictorMode = "shockwave", rounded: bool = True) -> float:
    """Predicted seconds job ``job`` still runs after ``epochs_done`` epochs (default: the
    job's ``epochs_done``), on its ``scale_factor`` GPUs, by ``mode`` (module docstring)."""
    profile = epoch_profile(job, rounded=rounded)
    e = job.epochs_done if epochs_done is None else epochs_done
    if mode == "shockwave":
        return shockwave_remaining_seconds(profile, e)
    if mode == "non_peeking":
        return non_peeking_remaining_seconds(profile, e)
    if mode == "oracle":
        return oracle_remaining_seconds(profile, e)
    raise InputError(f"unknown predictor mode {mode!r} (known: {list(PREDICTOR_MODES)})",
                     field="mode")


def seconds_per_epoch_estimate(job: Job, epochs_done: int | None = None, *,
                               peek: bool = True, rounded: bool = True) -> float:
    """d_j: Shockwave's seconds per epoch, mean(t_0 .. t_e) (``peek``), or without the peek
    mean(t_0 .. t_{e-1}) (t at the initial batch size b_0 before any epoch has run)."""
    profile = epoch_profile(job, rounded=rounded)
    e = _check_done(job.epochs_done if epochs_done is None else epochs_done, profile.epochs)
    if peek:
        return float(np.mean(profile.seconds[: e + 1]))
    if e == 0:
        return profile.usable_seconds[int(profile.schedule[0])]
    return float(np.mean(profile.seconds[:e]))
