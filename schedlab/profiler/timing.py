"""Timing training steps: warm-up, then timed steps until the confidence interval is tight.

The stopping rule (:func:`time_steps`).  After ``warmup_steps`` untimed steps, step ``i`` is
timed as ``d_i`` seconds (the device is synchronized before the clock is read, so queued
CUDA work is counted).  With ``n`` timed steps, mean ``m`` and sample standard deviation
``s``, the confidence interval of the mean step time at level ``c`` is

    m +- h,   h = t_{(1+c)/2, n-1} * s / sqrt(n)      (Student t with n-1 degrees of freedom)

and timing stops at the first of

* ``n >= min_steps`` and ``h / m <= target_relative_halfwidth`` ("precision"),
* ``n >= max_steps`` ("max_steps"),
* ``n >= 2`` and the timed phase has lasted ``max_seconds`` ("max_seconds"; a CI needs two
  steps, so a step slower than ``max_seconds`` still gets two).

Steps per second is ``1 / m``; its interval is the inverse of the step-time interval,
``(1 / (m + h), 1 / (m - h))`` (``1/x`` is decreasing, so the coverage is the same); when
``m - h <= 0`` the upper end is unbounded and the interval is reported as ``None``.

Peak memory.  On CUDA: ``torch.cuda.max_memory_allocated`` of the device after the timed
steps (the allocator's peak since the job was built; statistics are reset first).  On CPU:
the growth of the process's peak resident set from just before the job is built to the end
of the timed steps, in a fresh worker process (:mod:`schedlab.profiler.workers`); on Linux
without file-backed pages (see :class:`PeakMemory`).  It counts everything the process
touched (weights, optimizer state, activations, allocator caches), not just tensors.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from schedlab.profiler.matrix import Settings

StopReason = Literal["precision", "max_steps", "max_seconds"]

AGREE_EVERY = 8
"""A data-parallel group agrees on its stop decision after every ``AGREE_EVERY``-th timed
step, not after each: the agreement is a collective, and one per step of a small model (a
few ms) cost a gloo DDP pair on two CPU cores about a third of its steps per second
(recommender/tiny@16: 380 steps/s without, 240 with a scalar all-reduce after every step).
A decision between two agreements waits for the next one (at most ``AGREE_EVERY - 1`` more
timed steps, which only add samples)."""


@dataclass(frozen=True)
class StepTiming:
    """What :func:`time_steps` measured: per-step seconds and why it stopped."""

    durations_s: tuple[float, ...]
    stopped_by: StopReason

    @property
    def steps_timed(self) -> int:
        return len(self.durations_s)


@dataclass(frozen=True)
class Summary:
    """Mean step time with its CI, and the derived steps/s and samples/s."""

    step_s: float
    step_s_halfwidth: float
    steps_timed: int
    steps_per_s: float
    steps_per_s_ci: tuple[float, float] | None
    samples_per_s: float


@functools.lru_cache(maxsize=1024)
def t_quantile(confidence: float, degrees_of_freedom: int) -> float:
    """``t_{(1+c)/2, dof}``: the two-sided Student t critical value at level ``c``."""
    from scipy.stats import t as student_t

    return float(student_t.ppf((1.0 + confidence) / 2.0, degrees_of_freedom))


def mean_halfwidth(samples: Sequence[float], confidence: float) -> tuple[float, float]:
    """Mean of ``samples`` and the half-width of its Student-t confidence interval."""
    n = len(samples)
    if n < 2:
        raise ValueError("a confidence interval needs at least two samples")
    mean = math.fsum(samples) / n
    variance = math.fsum((x - mean) ** 2 for x in samples) / (n - 1)
    return mean, t_quantile(confidence, n - 1) * math.sqrt(variance / n)


def summarize(durations_s: Sequence[float], confidence: float,
              samples_per_step: int) -> Summary:
    """Steps/s (and its inverted CI) and samples/s from per-step seconds."""
    mean, half = mean_halfwidth(durations_s, confidence)
    ci = (1.0 / (mean + half), 1.0 / (mean - half)) if mean - half > 0 else None
    return Summary(step_s=mean, step_s_halfwidth=half, steps_timed=len(durations_s),
                   steps_per_s=1.0 / mean, steps_per_s_ci=ci,
                   samples_per_s=samples_per_step / mean)


def _should_stop(durations: Sequence[float], elapsed_s: float,
                 settings: Settings) -> StopReason | None:
    n = len(durations)
    if n >= settings.max_steps:
        return "max_steps"
    if n >= settings.min_steps:
        mean, half = mean_halfwidth(durations, settings.confidence)
        if mean > 0 and half / mean <= settings.target_relative_halfwidth:
            return "precision"
    if n >= 2 and elapsed_s >= settings.max_seconds:
        return "max_seconds"
    return None


def time_steps(step: Callable[[], object], settings: Settings, *,
               sync: Callable[[], None] | None = None,
               clock: Callable[[], float] = time.perf_counter,
               agree: Callable[[StopReason | None], StopReason | None] | None = None,
               ) -> StepTiming:
    """Run ``settings.warmup_steps`` untimed steps, then timed steps until the stopping rule
    of the module docstring holds.

    ``sync`` is called after every step before the clock is read (``torch.cuda.synchronize``
    on CUDA).  ``agree`` turns this process's decision into the decision of all processes of
    a data-parallel group (rank 0's, broadcast), so every rank runs the same number of steps;
    it is called outside the timed interval, after every ``AGREE_EVERY``-th timed step (the
    same steps on every rank), and a decision taken in between waits for the next call.
    """
    for _ in range(settings.warmup_steps):
        step()
        if sync is not None:
            sync()
    durations: list[float] = []
    started = clock()
    while True:
        before = clock()
        step()
        if sync is not None:
            sync()
        after = clock()
        durations.append(after - before)
        decision = _should_stop(durations, after - started, settings)
        if agree is not None:
            decision = agree(decision) if len(durations) % AGREE_EVERY == 0 else None
        if decision is not None:
            return StepTiming(tuple(durations), decision)


def _proc_status_kib() -> dict[str, int]:
    """The ``kB`` fields of ``/proc/self/status`` (Linux), empty elsewhere."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                parts = value.split()
                if len(parts) == 2 and parts[1] == "kB":
                    fields[name] = int(parts[0])
    except OSError:
        return {}
    return fields


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes (``ru_maxrss``: KiB on Linux,
    bytes on macOS)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def _reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux >= 4.0: write 5 to
    ``/proc/self/clear_refs``); a forked worker otherwise inherits its parent's peak."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """Peak memory of a cell (module docstring): the CUDA allocator's peak, or on CPU the
    growth of the peak resident set.  ``start()`` before building the job, ``bytes()`` after
    the timed steps.

    On Linux the peak is reset at ``start()`` (``/proc/self/clear_refs``; a forked worker
    inherits its parent's) and the figure leaves out file-backed pages (shared libraries,
    paged in the first time a kernel runs, which are not the job's memory):
    ``(VmHWM - RssFile - RssShmem)`` at the end minus ``RssAnon`` at the start, from
    ``/proc/self/status``.  Elsewhere it is the growth of ``ru_maxrss``.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self._baseline = 0
        self._proc = False

    def start(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)
            return
        status = _proc_status_kib()
        self._proc = (all(k in status for k in ("VmHWM", "RssAnon", "RssFile", "RssShmem"))
                      and _reset_peak_rss())
        self._baseline = status["RssAnon"] * 1024 if self._proc else peak_rss_bytes()

    def bytes(self) -> int:
        if self.device.startswith("cuda"):
            import torch

            return int(torch.cuda.max_memory_allocated(self.device))
        if self._proc:
            status = _proc_status_kib()
            peak = (status["VmHWM"] - status["RssFile"] - status["RssShmem"]) * 1024
            return max(0, peak - self._baseline)
        return max(0, peak_rss_bytes() - self._baseline)


def device_sync(device: str) -> Callable[[], None] | None:
    """``torch.cuda.synchronize`` of ``device`` on CUDA, None on CPU."""
    if not device.startswith("cuda"):
        return None
    import torch

    def sync() -> None:
        torch.cuda.synchronize(device)

    return sync
