r"""Shockwave's profile calibration: scale a job's profiled epoch times when what it ran
differs from what its profile predicts by more than 40%.

Shockwave's ``JobMetaData.calibrate_profiled_epoch_duration`` (``scheduler/JobMetaData.py``,
lines 225-288 at commit 8a44f4a) is called before every use of a job's epoch times (the
finish-time targets, ``interpolate_epoch_duration`` and the remaining-time predictor,
``scheduler/shockwave.py`` lines 101, 323 and 863).  It reads the job's throughput timeline --
one entry per round r the job ran, keyed by the global round index -- and compares:

* **measured**: each entry stands for the rounds since the previous entry (the first for the
  r rounds since round 0), at the throughput it recorded:
  sum_i (r_i - r_{i-1}) x (what the job ran in round r_i), r_0 = 0;
* **profiled**: what the profile says the job runs in the same L r_last seconds: whole epochs
  t_0, t_1, ... while they fit, then the fraction (L r_last - their sum) / t_i of the next
  one (of the last one when every epoch fits), t_i the *current* (possibly calibrated) time.

The code counts samples (batch size x steps against the epoch's sample count); here both sides
are in epochs (an epoch is the dataset once), the same ratio.  When measured and profiled are
both positive and differ by more than 40% of profiled, every epoch time becomes its profiled
(uncalibrated) value times profiled / measured; otherwise the current times stay as they are
(a calibration made earlier is kept).  This module returns that factor; the policy records
the timeline (:class:`~schedlab.policies.shockwave.Shockwave`) and the window problem scales
d_j and Rem_j by it (``NashWelfare(duration_scale=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

#: Relative deviation above which the profile is rescaled (``<= 0.4`` keeps it).
CALIBRATION_THRESHOLD = 0.4


def calibrated_scale(profile_s: npt.ArrayLike, timeline: Sequence[tuple[int, float]],
                     round_s: float, current: float = 1.0) -> float:
    """The factor on the profiled epoch times after Shockwave's calibration (module
    docstring).

    Args:
        profile_s: t_e, the profiled (uncalibrated) seconds of every epoch, in order.
        timeline: (global round index, epochs the job ran in that round), rounds ascending.
        round_s: L, seconds per round.
        current: the factor in force now (the result of the last calibration, 1 at first).

    Returns:
        profiled / measured when they differ by more than 40%, else ``current``.
    """
    seconds = np.asarray(profile_s, dtype=float)
    if not timeline or seconds.size == 0:
        return current
    measured = 0.0
    previous = 0
    for round_index, epochs in timeline:
        measured += epochs * (round_index - previous)
        previous = round_index
    horizon = round_s * timeline[-1][0]
    ends = np.cumsum(seconds)
    whole = int(np.searchsorted(ends, horizon, side="right"))  # epochs that fit entirely
    done_s = float(ends[whole - 1]) if whole else 0.0
    profiled = float(whole)
    deficit = horizon - done_s
    if deficit > 0:
        at = min(whole, seconds.size - 1)  # the code's loop variable after the loop
        profiled += deficit / (seconds[at] * current)
    if measured <= 0 or profiled <= 0 or abs(measured - profiled) / profiled <= \
            CALIBRATION_THRESHOLD:
        return current
    return profiled / measured


__all__ = ["CALIBRATION_THRESHOLD", "calibrated_scale"]
