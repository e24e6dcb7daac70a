r"""Titan's task speed model: a task's duration at any GPU count from its profile.

A Titan task carries ``duration_s = {gpus: seconds}``: how long the whole task takes on that
many GPUs (a merged pair's entry has the same form).  Between profiled counts the duration is
interpolated **linearly in 1/a**: for profiled counts a_i < a_{i+1} with durations d_i, d_{i+1}
and a_i <= a <= a_{i+1},

.. math::

    d(a) = d_i + (d_{i+1} - d_i) \frac{1/a - 1/a_i}{1/a_{i+1} - 1/a_i}.

Perfect scaling (d proportional to 1/a) is a straight line in 1/a, so two points of a
perfectly scaling task give it exactly, and a task that scales worse stays between its
measurements.  Outside the profile:

* above the largest profiled count the duration is held flat (more GPUs than were measured
  buy nothing);
* below the smallest profiled count a_1 the task keeps its GPU-seconds, d(a) = d_1 a_1 / a
  (the line in 1/a through the origin: the work of one GPU-second per GPU-second).

The throughput at a GPUs is 1 / d(a) tasks per second; with a fraction r of the work left the
predicted remaining time is T_rem(a) = r d(a).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: A duration profile: GPU count -> seconds of the whole task on that many GPUs.
Profile = Mapping[int, float]


def profile_from_field(field: Mapping[str, float]) -> dict[int, float]:
    """{gpus: seconds} with integer keys from an instance's ``duration_s`` (string keys,
    already checked to be positive integers by the Instance)."""
    return {int(key): float(value) for key, value in field.items()}


def duration_at(profile: Profile, gpus: npt.ArrayLike) -> FloatArray:
    """d(a) of the module docstring for every count in ``gpus`` (a > 0), seconds."""
    a = np.asarray(gpus, dtype=float)
    if not profile:
        raise ValueError("an empty duration profile")
    if a.size and not a.min() > 0:
        raise ValueError("a duration needs a positive GPU count")
    counts = sorted(profile)
    if len(counts) == 1:
        c = counts[0]
        return np.asarray(np.where(a < c, profile[c] * c / a, profile[c]), dtype=float)
    first, last = counts[0], counts[-1]
    inverse = [1.0 / c for c in reversed(counts)]  # increasing, as np.interp needs
    seconds = [profile[c] for c in reversed(counts)]
    inside = np.interp(1.0 / a, inverse, seconds)
    out = np.where(a < first, profile[first] * first / a,
                   np.where(a > last, profile[last], inside))
    return np.asarray(out, dtype=float)


def duration(profile: Profile, gpus: float) -> float:
    """d(a) at one count, seconds (the rule of :func:`duration_at`, in plain Python)."""
    if not profile:
        raise ValueError("an empty duration profile")
    if not gpus > 0:
        raise ValueError("a duration needs a positive GPU count")
    counts = sorted(profile)
    if gpus <= counts[0]:
        return profile[counts[0]] * counts[0] / gpus
    if gpus >= counts[-1]:
        return float(profile[counts[-1]])
    for lo, hi in itertools.pairwise(counts):
        if gpus <= hi:
            t = (1.0 / gpus - 1.0 / lo) / (1.0 / hi - 1.0 / lo)
            return profile[lo] + t * (profile[hi] - profile[lo])
    raise AssertionError("unreachable: gpus lies within the profile")


def largest_count(profile: Profile) -> int:
    """The largest profiled GPU count (a task's default ``max_gpus``)."""
    return max(profile)


def sum_profiles(first: Profile, second: Profile, factor: float = 1.0) -> dict[int, float]:
    """factor (d_1(a) + d_2(a)) as a profile on the union of both profiles' counts.

    Both durations are piecewise linear in 1/a with breakpoints at their own counts (flat
    above the largest, through the origin below the smallest), so their sum is piecewise
    linear in 1/a with breakpoints at the union: evaluated at the union, the profile
    interpolates to the sum exactly at every count."""
    counts = sorted(set(first) | set(second))
    total = duration_at(first, counts) + duration_at(second, counts)
    return {c: float(factor * v) for c, v in zip(counts, total, strict=True)}
