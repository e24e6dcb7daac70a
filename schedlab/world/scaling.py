"""Runtime estimates calibrated to published multi-GPU speed-ups (Saturn's configurations).

The analytic cost model (:mod:`schedlab.world.parallelism`) predicts near-linear
speed-ups. A :class:`ScalingProfile` replaces, for each technique it covers, the runtime on
g GPUs by

    r(t, g) = steps x T_1 / S_t(g)        [s]

where T_1 = B c P s / F is the analytic one-GPU compute time of one optimizer step (technique
``single``'s step time, s) and S_t(g) the speed-up of technique t on g GPUs, interpolated
**linearly in g** between the profile's points (S_t(1) = 1 always). Where g is above the
largest point of t, or t has no points, the analytic runtime is kept. Memory, feasibility and
which (technique, g) pairs exist are the analytic model's.

:func:`published_profile` builds the profile from :mod:`schedlab.world.scaling_data`
(sources in ``docs/saturn-calibration.md``). :data:`SCALINGS` names the two choices callers
offer: ``"analytic"`` (the cost model, the default of :func:`estimate_configs`) and
``"published"``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from schedlab.errors import InputError
from schedlab.instance import SaturnConfig
from schedlab.world.parallelism import (
    DEFAULT_GPU_COUNTS,
    TECHNIQUES,
    Estimate,
    GpuSpec,
    JobSpec,
    ParallelismTechnique,
    Single,
    estimate_configs,
    get_gpu,
    get_technique,
)
from schedlab.world.scaling_data import PUBLISHED_FIGURES

#: Names of the runtime models a caller can choose.
SCALINGS: tuple[str, ...] = ("analytic", "published")


def _points(technique: str, raw: Sequence[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    points = sorted({1: 1.0, **{int(g): float(s) for g, s in raw}}.items())
    for g, s in points:
        if g < 1 or not (math.isfinite(s) and s > 0):
            raise InputError(f"scaling of {technique!r}: bad point (g={g}, S={s})")
    return tuple(points)


@dataclass(frozen=True)
class ScalingProfile:
    """Speed-up curves per technique: ``speedups[t]`` = ((g, S_t(g)), ...) in increasing g,
    starting at (1, 1.0) (added when missing)."""

    speedups: Mapping[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)
    name: str = "custom"

    def __post_init__(self) -> None:
        object.__setattr__(self, "speedups",
                           {t: _points(t, pts) for t, pts in self.speedups.items()})

    def speedup(self, technique: str, gpus: int) -> float | None:
        """S_t(g), linear in g between points; None when t has no curve or g lies above its
        largest point (the caller keeps the analytic runtime then)."""
        points = self.speedups.get(technique)
        if not points or gpus > points[-1][0]:
            return None
        for (g0, s0), (g1, s1) in itertools.pairwise(points):
            if g0 <= gpus <= g1:
                return s0 + (s1 - s0) * (gpus - g0) / (g1 - g0)
        return points[0][1] if gpus == points[0][0] else None

    def estimate(self, technique: str | ParallelismTechnique, job: JobSpec, gpus: int,
                 gpu: str | GpuSpec) -> Estimate | None:
        """The analytic estimate with its runtime replaced by steps x T_1 / S_t(g) where the
        profile covers (t, g); None where the technique does not apply."""
        tech = get_technique(technique)
        spec = get_gpu(gpu)
        analytic = tech.estimate(job, gpus, spec)
        if analytic is None:
            return None
        s = self.speedup(tech.name, gpus)
        if s is None:
            return analytic
        runtime = job.steps * Single().step_time(job, 1, spec).total_s / s
        return replace(analytic, runtime_s=runtime, compute_s=runtime, communication_s=0.0)


def published_profile() -> ScalingProfile:
    """The profile of every published figure marked ``used``
    (:data:`~schedlab.world.scaling_data.PUBLISHED_FIGURES`)."""
    return ScalingProfile({f.technique: f.speedups for f in PUBLISHED_FIGURES if f.used},
                          name="published")


def configs_for(
    job: JobSpec,
    gpu: str | GpuSpec,
    gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS,
    techniques: Sequence[str | ParallelismTechnique] | None = None,
    *,
    scaling: str | ScalingProfile = "analytic",
    digits: int | None = 1,
) -> list[SaturnConfig]:
    """``Job.configs`` as :func:`~schedlab.world.parallelism.estimate_configs` lists them
    (sorted by GPUs then technique, infeasible ones kept, rounded to ``digits``), with
    runtimes from ``scaling``: ``"analytic"``, ``"published"`` or a :class:`ScalingProfile`."""
    if isinstance(scaling, str):
        if scaling not in SCALINGS:
            raise InputError(f"unknown scaling {scaling!r} (known: {list(SCALINGS)})",
                             field="scaling")
        if scaling == "analytic":
            return estimate_configs(job, gpu, gpu_counts, techniques, digits=digits)
        scaling = published_profile()
    spec = get_gpu(gpu)
    chosen = [get_technique(t) for t in (techniques if techniques is not None else TECHNIQUES)]
    out: list[SaturnConfig] = []
    for tech in chosen:
        for g in sorted(set(gpu_counts)):
            estimate = scaling.estimate(tech, job, g, spec)
            if estimate is not None:
                out.append(estimate.to_config(digits=digits))
    return sorted(out, key=lambda c: (c.gpus, c.technique))
