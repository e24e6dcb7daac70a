r"""From a throughput file to an Instance of each paper: ``schedlab profile-instance``.

The profiler's measurements (:mod:`schedlab.profiler.matrix`) are turned into the instance a
paper's formulations read, with jobs drawn the way that paper's workload generator draws them
(:mod:`schedlab.workloads`), but over the *measured* zoo jobs and with the *measured* numbers.
Every job's ``job_type`` is its zoo job name (``model/size@batch``): the executor reads it to
know what to run.  The mapping, field by field, is in docs/profile-to-instance.md; in short,
with T[j, s, k] the measured steps/s of zoo job j on s devices labelled k (global steps):

* **gavel**: scale factor s from Gavel's mix (1/2/4/8 w.p. 0.70/0.10/0.15/0.05, renormalized
  over the measured scale factors that fit the cluster), job uniform over the jobs measured
  at s, duration d from Gavel's mix (10^U(1.5, 3) min w.p. 0.8, else 10^U(3, 4) min) on the
  job's fastest type r; ``total_steps`` = round(d x T[j, s, r]); ``throughput[k]`` =
  T[j, s, k] for every measured type k of the cluster (no measurement: the job cannot run
  there); ``colocated_throughput`` from co-located cells of two single-device jobs;
  ``switch_overhead_s`` = the largest measured warm switch over the cluster's types.
* **shockwave**: template (model, b0) uniform over the measured regimes, duration from
  Shockwave's grid (0.2-5 h, slices w.p. 0.72/0.20/0.05/0.03), mode from its mix
  (accordion / gns w.p. 1/2 each; accordion under 1000 s becomes static); E = ceil(d / t(b0))
  epochs with t(b) the measured seconds per epoch at batch size b; ``regimes`` = {b: t(b)}
  for the batch sizes the job can use; ``batch_schedule`` by this module's rules over the
  measured batch sizes (:func:`adapted_schedule`).
* **saturn**: job uniform over the jobs with a feasible technique cell; runtime r of its
  reference configuration (fewest devices, then fastest) log-uniform in [600, 7200] s;
  ``total_steps`` = round(r / step_s(reference)); ``configs`` = one per technique cell,
  ``runtime_s`` = total_steps x step_s, infeasible cells with their reason.
* **titan**: job uniform over the measured jobs, requested devices g from Titan's mix (over the
  measured scale factors), duration d log-uniform in [300, 36000] s at g; ``duration_s[a]`` =
  d x (a' T[j, g, k] g) / (T[j, a, k] a) -- the same samples on a devices (a global step on a
  devices holds a batches); ``switch_overhead_s`` = measured pipelined switch (else warm).
* **hare**: job uniform over the jobs measured on one device, tasks per round from
  {1, 2, 4, 8}, rounds uniform in 2..10, a task's seconds tau on the job's fastest type r
  log-uniform in [10, 60] s; steps per task n = round(tau x T[j, 1, r]); ``task_seconds[k]``
  = n / T[j, 1, k]; ``switch_seconds[k]`` from the measured switch of the chosen kind;
  ``model_memory_gb`` = measured peak memory / 1e9.

Randomness: each purpose draws from its own ``numpy.random.Generator`` spawned from
``numpy.random.SeedSequence(seed)``, so the same file and options give the same instance.
The instance's ``description`` names the throughput file and its sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, MAX_JOBS, Instance, instance_from_dict
from schedlab.profiler.matrix import (
    ColocatedMeasurement,
    Measurement,
    RegimeMeasurement,
    SwitchMeasurement,
    TechniqueMeasurement,
    ThroughputFile,
    load_throughputs,
)
from schedlab.workloads.precision import stated, whole_steps

log = logging.getLogger(__name__)

PAPERS: tuple[str, ...] = ("gavel", "shockwave", "saturn", "titan", "hare")
#: The formulation each paper's instance is meant for (and tested with).
DEFAULT_FORMULATION: Mapping[str, str] = {
    "gavel": "gavel.max_min_fairness", "shockwave": "shockwave.nash_welfare",
    "saturn": "saturn.time_indexed", "titan": "titan.round_ilp", "hare": "hare.greedy",
}
#: Hare switch kinds -> the measured switch kinds they read, in order of preference
#: ("hare": min(resident, pipelined), as Hare's switch model; "default": cold restarts).
HARE_SWITCH_KINDS: Mapping[str, tuple[str, ...]] = {
    "hare": ("resident", "pipelined"), "pipelined": ("pipelined",), "default": ("cold",),
    "none": (),
}
#: Zoo models that are image classifiers (Titan's vision datasets); the rest are text.
VISION_MODELS: frozenset[str] = frozenset({"resnet18", "resnet50"})
#: Zoo models Shockwave's adaptation leaves at their initial batch size (its Transformer).
STATIC_MODELS: frozenset[str] = frozenset({"transformer"})

_SOLO_CELL = "solo measurement (status ok, with steps/s)"
_REGIME_CELL = "regime cell (status ok, with seconds per epoch per batch size)"
_TECHNIQUE_CELL = "technique cell (status ok, with step_s)"

_STREAMS = ("scale_factor", "job", "duration", "mode", "tasks", "rounds", "weight",
            "arrival", "dataset")


@dataclass(frozen=True)
class InstanceOptions:
    """What ``schedlab profile-instance`` was asked for.

    ``devices``: {label: count}, None = every label of the file with the largest count it was
    measured at; ``arrival_rate``: jobs per hour of a Poisson process (first job at 0 s),
    None = the paper's default; ``duration_s``: (low, high) seconds replacing the paper's
    duration distribution by a log-uniform one (Hare: a task's seconds; Shockwave: the
    grid's ends); ``round_s``: None = the paper's round; ``switch``: Hare's switch kind.
    """

    paper: str
    jobs: int
    seed: int = 0
    devices: Mapping[str, int] | None = None
    arrival_rate: float | None = None
    duration_s: tuple[float, float] | None = None
    round_s: float | None = None
    switch: str = "hare"
    name: str | None = None


@dataclass(frozen=True)
class _Context:
    """The measurements and options one paper's builder reads."""

    measured: ThroughputFile
    options: InstanceOptions
    source: str
    digest: str
    rng: Mapping[str, np.random.Generator]
    cells: Mapping[str, Any]

    def missing(self, what: str) -> InputError:
        """The one-line error for a file without a usable cell for the paper."""
        return InputError(f"no usable {what} for --paper {self.options.paper}",
                          file=self.source)


def _streams(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child)
            for name, child in zip(_STREAMS, children, strict=True)}


def _normalized(mix: Mapping[Any, float]) -> tuple[list[Any], np.ndarray]:
    keys = list(mix)
    p = np.asarray([float(mix[k]) for k in keys])
    return keys, p / p.sum()


def _log_uniform(rng: np.random.Generator, low: float, high: float, size: int) -> np.ndarray:
    """exp(U(ln low, ln high)), ``size`` draws."""
    return np.exp(rng.uniform(math.log(low), math.log(high), size=size))


def _arrivals(rng: np.random.Generator, n: int, jobs_per_hour: float | None) -> list[float]:
    """0 for all, or a Poisson process: the first job at 0 s, gaps ~ Exp(mean 3600 / rate)."""
    if jobs_per_hour is None or n == 0:
        return [0.0] * n
    gaps = rng.exponential(3600.0 / jobs_per_hour, size=n)
    return [stated(float(t)) for t in np.concatenate(([0.0], np.cumsum(gaps[:-1])))]


def base_model(job: str) -> str:
    """``"resnet18/tiny@32"`` -> ``"resnet18/tiny"`` (Titan's base model, Shockwave's model)."""
    return job.split("@", 1)[0]


def model_family(job: str) -> str:
    """``"resnet18/tiny@32"`` -> ``"resnet18"``."""
    return base_model(job).split("/", 1)[0]


# -------------------------------------------------------------------------------- cluster


def device_counts(measured: ThroughputFile) -> dict[str, int]:
    """{label: count} of every device label in the file, in order of first appearance; the
    count is the most devices of that label any cell used (its scale factor, GPUs or 1): the
    measuring host had at least that many."""
    counts: dict[str, int] = {}
    for cell in measured.cells:
        used = 1
        if isinstance(cell, Measurement):
            used = cell.scale_factor
        elif isinstance(cell, TechniqueMeasurement):
            used = cell.gpus
        counts[cell.device] = max(counts.get(cell.device, 1), used)
    return counts


def _cluster(ctx: _Context) -> dict[str, int]:
    known = device_counts(ctx.measured)
    if ctx.options.devices is None:
        if not known:
            raise ctx.missing("cell (the file has no measurements)")
        return known
    for label in ctx.options.devices:
        if label not in known:
            raise InputError(f"--devices names {label!r}, which has no measurement (measured: "
                             f"{', '.join(known) or 'none'})", file=ctx.source)
    return dict(ctx.options.devices)


def _single_device(ctx: _Context, usable: Mapping[str, int], what: str) -> tuple[str, int]:
    """The one device type of a single-type paper: the one of ``--devices``, else the label
    with the most usable cells (``usable``: {label: cells}; none: the error names ``what``)."""
    cluster = _cluster(ctx)
    if ctx.options.devices is not None:
        if len(cluster) != 1:
            raise InputError(f"--paper {ctx.options.paper} needs one device type, --devices "
                             f"gives {len(cluster)}", file=ctx.source)
        label = next(iter(cluster))
        return label, cluster[label]
    candidates = {k: n for k, n in usable.items() if n > 0 and k in cluster}
    if not candidates:
        raise ctx.missing(what)
    label = max(candidates, key=lambda k: (candidates[k], -list(cluster).index(k)))
    if len(candidates) > 1:
        log.info("--paper %s uses one device type: %s (most cells); pick another with "
                 "--devices", ctx.options.paper, label)
    return label, cluster[label]


def _pools(cluster: Mapping[str, int]) -> dict[str, Any]:
    return {"accelerators": {k: {"count": int(n)} for k, n in cluster.items()}}


def _solo(measured: ThroughputFile) -> dict[tuple[str, int], dict[str, float]]:
    """{(job, scale factor): {device: steps/s}} of the solo cells measured ok (> 0 steps/s)."""
    table: dict[tuple[str, int], dict[str, float]] = {}
    for cell in measured.solo():
        if cell.status == "ok" and cell.steps_per_s is not None and cell.steps_per_s > 0:
            table.setdefault((cell.job, cell.scale_factor), {})[cell.device] = cell.steps_per_s
    return table


def _switch(ctx: _Context, job: str, device: str, kind: str) -> float | None:
    cell = ctx.cells.get(f"switch:{job}:{device}:{kind}")
    if isinstance(cell, SwitchMeasurement) and cell.status == "ok":
        return cell.seconds
    return None


def _fastest(throughput: Mapping[str, float]) -> str:
    """The type with the most steps/s (first in order on ties): durations are defined there,
    as Gavel defines them on its fastest type, the V100."""
    return max(throughput, key=lambda k: (throughput[k], -list(throughput).index(k)))


# ---------------------------------------------------------------------------------- gavel

GAVEL_SCALE_FACTOR_MIX: Mapping[int, float] = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}


def _gavel(ctx: _Context) -> dict[str, Any]:
    from schedlab.workloads.gavel import (
        GAVEL_LONG_JOB_FRACTION,
        GAVEL_ROUND_S,
        LONG_LOG10_MINUTES,
        SHORT_LOG10_MINUTES,
    )

    cluster = _cluster(ctx)
    solo = _solo(ctx.measured)
    types_by_sf: dict[int, list[str]] = {}
    for (name, sf), by_device in solo.items():
        here = {k: v for k, v in by_device.items() if k in cluster}
        if sf in GAVEL_SCALE_FACTOR_MIX and any(cluster[k] >= sf for k in here):
            types_by_sf.setdefault(sf, []).append(name)
    if not types_by_sf:
        raise ctx.missing(f"{_SOLO_CELL} on {sorted(cluster)} at a scale factor of 1, 2, 4 or 8 "
                          "that fits the devices")
    sf_values, sf_probs = _normalized({s: p for s, p in GAVEL_SCALE_FACTOR_MIX.items()
                                       if s in types_by_sf})
    n = ctx.options.jobs
    rng = ctx.rng
    scale_factors = rng["scale_factor"].choice(np.array(sf_values), size=n, p=sf_probs)
    picks = rng["job"].random(n)
    if ctx.options.duration_s is None:
        long_job = rng["duration"].random(n) < GAVEL_LONG_JOB_FRACTION
        lo = np.where(long_job, LONG_LOG10_MINUTES[0], SHORT_LOG10_MINUTES[0])
        hi = np.where(long_job, LONG_LOG10_MINUTES[1], SHORT_LOG10_MINUTES[1])
        durations = 60.0 * 10.0 ** (lo + (hi - lo) * rng["duration"].random(n))
    else:
        durations = _log_uniform(rng["duration"], *ctx.options.duration_s, n)
    arrivals = _arrivals(rng["arrival"], n, ctx.options.arrival_rate)
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        sf = int(scale_factors[i])
        candidates = sorted(types_by_sf[sf])
        job_type = candidates[min(int(picks[i] * len(candidates)), len(candidates) - 1)]
        throughput = {k: solo[(job_type, sf)][k] for k in cluster if k in solo[(job_type, sf)]}
        reference = _fastest(throughput)
        job: dict[str, Any] = {
            "id": str(i), "job_type": job_type, "arrival": arrivals[i], "scale_factor": sf,
            "total_steps": whole_steps(float(durations[i]) * throughput[reference]),
            "throughput": throughput,
        }
        warm = [s for k in cluster if (s := _switch(ctx, job_type, k, "warm"))
                is not None]
        if warm:
            job["switch_overhead_s"] = max(warm)
        jobs.append(job)
    _add_colocation(ctx, jobs, cluster)
    return {"cluster": _pools(cluster), "jobs": jobs,
            "params": {"round_s": ctx.options.round_s or GAVEL_ROUND_S}}


def _colocated(ctx: _Context, a: str, b: str, device: str) -> tuple[float, float] | None:
    """(steps/s of a, steps/s of b) while sharing ``device``, from either cell order."""
    for first, second, flip in ((a, b, False), (b, a, True)):
        cell = ctx.cells.get(f"colocated:{first}+{second}:{device}")
        if isinstance(cell, ColocatedMeasurement) and cell.status == "ok" \
                and cell.steps_per_s is not None:
            x, y = cell.steps_per_s
            return (y, x) if flip else (x, y)
    return None


def _add_colocation(ctx: _Context, jobs: list[dict[str, Any]],
                    cluster: Mapping[str, int]) -> None:
    """``colocated_throughput`` for every pair of single-device jobs whose types were measured
    sharing a device type of the cluster (both jobs list the pair for the same types)."""
    if not any(isinstance(c, ColocatedMeasurement) for c in ctx.measured.cells):
        return
    single = [job for job in jobs if job["scale_factor"] == 1]
    for a, b in itertools.combinations(single, 2):
        for k in cluster:
            pair = _colocated(ctx, a["job_type"], b["job_type"], k)
            if pair is None:
                continue
            a.setdefault("colocated_throughput", {}).setdefault(b["id"], {})[k] = pair[0]
            b.setdefault("colocated_throughput", {}).setdefault(a["id"], {})[k] = pair[1]


# ------------------------------------------------------------------------------ shockwave


def adapted_schedule(initial: int, sizes: Sequence[int], epochs: int, mode: str,
                     family: str) -> list[int]:
    """The batch size of each epoch of a job starting at ``initial`` with the measured batch
    sizes ``sizes`` of its model (Shockwave's modes, over the sizes that were measured):

    * static (and every mode of a Transformer, as Shockwave's code): ``initial`` throughout;
    * accordion: the largest measured size B in every epoch e > 0.3 E (Accordion's warm-up
      rule; its per-model critical regimes are not carried over), ``initial`` before;
    * gns: the measured sizes above ``initial``, b_1 < ... < b_m, taken in turn: epoch e runs
      b_i from e >= floor(E i / (m + 1)) on (GNS grows the batch as the gradient noise grows).
    """
    schedule = [initial] * epochs
    larger = sorted(b for b in set(sizes) if b > initial)
    if mode == "static" or family in STATIC_MODELS or not larger:
        return schedule
    if mode == "accordion":
        return [larger[-1] if e > epochs * 0.3 else initial for e in range(epochs)]
    m = len(larger)
    for i, size in enumerate(larger, start=1):
        for e in range(epochs * i // (m + 1), epochs):
            schedule[e] = size
    return schedule


def usable_sizes(initial: int, sizes: Sequence[int], mode: str, family: str) -> list[int]:
    """The batch sizes the job can run (what ``regimes`` lists): ``initial``, and for accordion
    the largest measured size, for gns every measured size above ``initial``."""
    larger = sorted(b for b in set(sizes) if b > initial)
    if mode == "static" or family in STATIC_MODELS or not larger:
        return [initial]
    return [initial, larger[-1]] if mode == "accordion" else [initial, *larger]


def _regimes(ctx: _Context) -> dict[str, dict[tuple[str, int], dict[int, float]]]:
    """{device: {(model, samples per epoch): {batch size: seconds per epoch}}} (ok cells)."""
    out: dict[str, dict[tuple[str, int], dict[int, float]]] = {}
    for cell in ctx.measured.cells:
        if isinstance(cell, RegimeMeasurement) and cell.status == "ok" \
                and cell.seconds_per_epoch is not None:
            group = out.setdefault(cell.device, {})
            group.setdefault((cell.model, cell.samples_per_epoch), {})[cell.batch_size] = \
                cell.seconds_per_epoch
    return out


def _shockwave(ctx: _Context) -> dict[str, Any]:
    from schedlab.workloads.shockwave import (
        ACCORDION_MIN_DURATION_S,
        DURATION_GRID_H,
        DURATION_SLICE_ENDS,
        DURATION_SLICE_PROBS,
        SHOCKWAVE_MEAN_GAP_S,
        SHOCKWAVE_MODE_MIX,
        SHOCKWAVE_ROUND_S,
        SHOCKWAVE_WINDOW_ROUNDS,
    )

    regimes = _regimes(ctx)
    device, count = _single_device(ctx, {k: sum(map(len, v.values()))
                                         for k, v in regimes.items()}, _REGIME_CELL)
    groups = regimes.get(device)
    if not groups:
        raise ctx.missing(f"{_REGIME_CELL} on {device!r}")
    templates = [(model, samples, b) for (model, samples), by_size in sorted(groups.items())
                 for b in sorted(by_size)]
    n = ctx.options.jobs
    rng = ctx.rng
    low_s, high_s = ctx.options.duration_s or (3600.0 * DURATION_GRID_H[0],
                                                3600.0 * DURATION_GRID_H[1])
    grid = np.linspace(low_s, high_s, DURATION_GRID_H[2])
    ends = [round(len(grid) * f) for f in DURATION_SLICE_ENDS[:-1]] + [len(grid)]
    bounds = list(zip([0, *ends[:-1]], ends, strict=True))
    modes, mode_p = _normalized({m: p for m, p in SHOCKWAVE_MODE_MIX.items() if p > 0})
    rate = ctx.options.arrival_rate
    mean_gap = SHOCKWAVE_MEAN_GAP_S if rate is None else 3600.0 / rate
    clock = 0.0
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        model, samples, b0 = templates[int(rng["job"].integers(len(templates)))]
        lo, hi = bounds[int(rng["duration"].choice(len(bounds), p=DURATION_SLICE_PROBS))]
        duration = float(round(grid[lo + int(rng["duration"].integers(hi - lo))]))
        mode = str(modes[int(rng["mode"].choice(len(modes), p=mode_p))])
        if mode == "accordion" and duration < ACCORDION_MIN_DURATION_S:
            mode = "static"
        if i > 0:
            clock += float(rng["arrival"].exponential(mean_gap))
        by_size = groups[(model, samples)]
        family = model_family(model)
        epochs = max(1, math.ceil(duration / by_size[b0]))
        steps_per_epoch = math.ceil(samples / b0)  # the profiler's epoch: ceil(N / b) steps
        jobs.append({
            "id": str(i), "job_type": f"{model}@{b0}", "arrival": float(math.floor(clock)),
            "scale_factor": 1,
            "total_steps": float(epochs * steps_per_epoch),
            "throughput": {device: stated(steps_per_epoch / by_size[b0])},
            "epochs": epochs,
            "batch_schedule": adapted_schedule(b0, list(by_size), epochs, mode, family),
            "regimes": {str(b): by_size[b]
                        for b in usable_sizes(b0, list(by_size), mode, family)},
            "adaptation": mode,
        })
    return {"cluster": _pools({device: count}), "jobs": jobs,
            "params": {"round_s": ctx.options.round_s or SHOCKWAVE_ROUND_S,
                       "window_rounds": SHOCKWAVE_WINDOW_ROUNDS}}


# --------------------------------------------------------------------------------- saturn

SATURN_RUNTIME_S: tuple[float, float] = (600.0, 7200.0)


def _saturn(ctx: _Context) -> dict[str, Any]:
    cells = [c for c in ctx.measured.cells if isinstance(c, TechniqueMeasurement)]

    def feasible(cell: TechniqueMeasurement) -> bool:
        return cell.status == "ok" and cell.step_s is not None

    usable: dict[str, int] = {}
    for cell in cells:
        usable[cell.device] = usable.get(cell.device, 0) + int(feasible(cell))
    device, count = _single_device(ctx, usable, _TECHNIQUE_CELL)
    by_job: dict[str, list[TechniqueMeasurement]] = {}
    for cell in cells:
        if cell.device == device and cell.gpus <= count:
            by_job.setdefault(cell.job, []).append(cell)
    eligible = sorted(j for j, cs in by_job.items() if any(map(feasible, cs)))
    if not eligible:
        raise ctx.missing(f"{_TECHNIQUE_CELL} on {device!r} using at most {count} devices")
    n = ctx.options.jobs
    rng = ctx.rng
    picks = rng["job"].integers(len(eligible), size=n)
    runtimes = _log_uniform(rng["duration"], *(ctx.options.duration_s or SATURN_RUNTIME_S), n)
    arrivals = _arrivals(rng["arrival"], n, ctx.options.arrival_rate)
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        job_type = eligible[int(picks[i])]
        job_cells = sorted(by_job[job_type], key=lambda c: (c.gpus, c.technique))
        reference = min((c for c in job_cells if feasible(c)),
                        key=lambda c: (c.gpus, c.step_s or 0.0))
        assert reference.step_s is not None
        steps = whole_steps(float(runtimes[i]) / reference.step_s)
        configs: list[dict[str, Any]] = []
        for cell in job_cells:
            config: dict[str, Any] = {
                "technique": cell.technique, "gpus": cell.gpus, "feasible": feasible(cell),
                "runtime_s": stated(steps * cell.step_s) if cell.step_s is not None else 0.0,
            }
            if cell.peak_memory_bytes is not None:
                config["memory_gb"] = stated(cell.peak_memory_bytes / 1e9)
            if not feasible(cell):
                config["reason"] = cell.reason or f"status {cell.status}"
            configs.append(config)
        jobs.append({"id": str(i), "job_type": job_type, "arrival": arrivals[i],
                     "total_steps": steps, "configs": configs})
    cluster = {"accelerators": {device: {"count": count, "nodes": 1, "gpus_per_node": count}},
               "nodes": [{"name": "node0", "accelerator": device, "gpus": count}]}
    params: dict[str, Any] = {}
    if ctx.options.round_s is not None:
        params["round_s"] = ctx.options.round_s
    return {"cluster": cluster, "jobs": jobs, "params": params}


# ---------------------------------------------------------------------------------- titan


def _titan(ctx: _Context) -> dict[str, Any]:
    from schedlab.workloads.titan import (
        DATASETS,
        DAY_S,
        GPU_MIX,
        MAX_DURATION_S,
        MIN_DURATION_S,
        TITAN_ROUND_S,
        label_set_classes,
        size_classes,
    )

    solo = _solo(ctx.measured)
    usable: dict[str, int] = {}
    for by_device in solo.values():
        for k in by_device:
            usable[k] = usable.get(k, 0) + 1
    device, count = _single_device(ctx, usable, _SOLO_CELL)
    profiles: dict[str, dict[int, float]] = {}
    for (name, sf), by_device in sorted(solo.items()):
        if device in by_device and sf <= count:
            profiles.setdefault(name, {})[sf] = by_device[device]
    if not profiles:
        raise ctx.missing(f"{_SOLO_CELL} on {device!r} at a scale factor of at most {count}")
    eligible = sorted(profiles)
    n = ctx.options.jobs
    rng = ctx.rng
    picks = rng["job"].integers(len(eligible), size=n)
    requested: list[int] = []
    for i in range(n):
        measured_sfs = profiles[eligible[int(picks[i])]]
        mix = {g: p for g, p in GPU_MIX.items() if g in measured_sfs} \
            or dict.fromkeys(measured_sfs, 1.0)
        keys, p = _normalized(mix)
        requested.append(int(keys[int(rng["scale_factor"].choice(len(keys), p=p))]))
    low, high = ctx.options.duration_s or (MIN_DURATION_S, MAX_DURATION_S)
    durations = [float(max(1, round(d))) for d in _log_uniform(rng["duration"], low, high, n)]
    if ctx.options.arrival_rate is None:
        arrivals = sorted(float(int(v)) for v in rng["arrival"].uniform(0.0, DAY_S, n))
    else:
        arrivals = _arrivals(rng["arrival"], n, ctx.options.arrival_rate)
    sizes = size_classes([g * d for g, d in zip(requested, durations, strict=True)])
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        job_type = eligible[int(picks[i])]
        thr = profiles[job_type]
        g = requested[i]
        family = "vision" if model_family(job_type) in VISION_MODELS else "text"
        choices = sorted(name for name, spec in DATASETS.items()
                         if spec.family == family and spec.size == sizes[i])
        dataset = choices[int(rng["dataset"].integers(len(choices)))]
        label_set = DATASETS[dataset].label_set
        job: dict[str, Any] = {
            "id": str(i), "job_type": job_type, "arrival": arrivals[i], "scale_factor": g,
            "total_steps": whole_steps(durations[i] * thr[g]),
            "throughput": {device: thr[g]},
            "base_model": base_model(job_type), "dataset": dataset, "label_set": label_set,
            "classes": label_set_classes(label_set),
            "duration_s": {str(a): stated(durations[i] * thr[g] * g / (thr[a] * a))
                           for a in sorted(thr)},
            "max_gpus": max(thr),
        }
        for kind in ("pipelined", "warm"):
            seconds = _switch(ctx, job_type, device, kind)
            if seconds is not None:
                job["switch_overhead_s"] = seconds
                break
        jobs.append(job)
    return {"cluster": _pools({device: count}), "jobs": jobs,
            "params": {"round_s": ctx.options.round_s or TITAN_ROUND_S}}


# ----------------------------------------------------------------------------------- hare


def _hare(ctx: _Context) -> dict[str, Any]:
    from schedlab.workloads.hare import (
        DEFAULT_ROUNDS,
        DEFAULT_TASK_S,
        TASKS_PER_ROUND_MIX,
        WEIGHT_RANGE,
    )

    if ctx.options.switch not in HARE_SWITCH_KINDS:
        raise InputError(f"unknown switch kind {ctx.options.switch!r} (known: "
                         f"{', '.join(HARE_SWITCH_KINDS)})", field="switch")
    cluster = _cluster(ctx)
    solo = _solo(ctx.measured)
    speeds = {name: {k: v for k, v in by_device.items() if k in cluster and cluster[k] > 0}
              for (name, sf), by_device in solo.items() if sf == 1}
    eligible = sorted(name for name, by_device in speeds.items() if by_device)
    if not eligible:
        raise ctx.missing(f"{_SOLO_CELL} on one device of {sorted(cluster)}")
    n = ctx.options.jobs
    rng = ctx.rng
    picks = rng["job"].integers(len(eligible), size=n)
    counts, p = _normalized(TASKS_PER_ROUND_MIX)
    tasks = [int(counts[int(i)]) for i in rng["tasks"].choice(len(counts), size=n, p=p)]
    rounds = rng["rounds"].integers(DEFAULT_ROUNDS[0], DEFAULT_ROUNDS[1] + 1, size=n)
    tau = _log_uniform(rng["duration"], *(ctx.options.duration_s or DEFAULT_TASK_S), n)
    weights = rng["weight"].integers(WEIGHT_RANGE[0], WEIGHT_RANGE[1] + 1, size=n)
    arrivals = _arrivals(rng["arrival"], n, ctx.options.arrival_rate)
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        job_type = eligible[int(picks[i])]
        thr = {k: speeds[job_type][k] for k in cluster if k in speeds[job_type]}
        steps = whole_steps(float(tau[i]) * thr[_fastest(thr)])
        job: dict[str, Any] = {
            "id": str(i), "job_type": job_type, "arrival": arrivals[i],
            "weight": float(weights[i]), "rounds": int(rounds[i]),
            "tasks_per_round": tasks[i], "total_steps": steps * tasks[i] * int(rounds[i]),
            "throughput": thr,
            "task_seconds": {k: stated(steps / v) for k, v in thr.items()},
        }
        switch = _hare_switch(ctx, job_type, list(thr))
        if switch:
            job["switch_seconds"] = switch
        peaks = [c.peak_memory_bytes for c in ctx.measured.solo()
                 if c.job == job_type and c.scale_factor == 1 and c.device in thr
                 and c.status == "ok" and c.peak_memory_bytes]
        if peaks:
            job["model_memory_gb"] = stated(max(peaks) / 1e9)
        jobs.append(job)
    return {"cluster": _pools(cluster), "jobs": jobs,
            "params": {"round_s": ctx.options.round_s} if ctx.options.round_s else {}}


def _hare_switch(ctx: _Context, job: str, types: Sequence[str]) -> dict[str, float]:
    """{type: seconds} of the chosen switch kind: the least of its measured kinds (Hare's own
    switch is min(resident, pipelined): it can always fall back to a pipelined load)."""
    out: dict[str, float] = {}
    for k in types:
        seconds = [s for kind in HARE_SWITCH_KINDS[ctx.options.switch]
                   if (s := _switch(ctx, job, k, kind)) is not None]
        if seconds:
            out[k] = min(seconds)
    return out


# ------------------------------------------------------------------------------- building

_BUILDERS: Mapping[str, Callable[[_Context], dict[str, Any]]] = {
    "gavel": _gavel, "shockwave": _shockwave, "saturn": _saturn, "titan": _titan,
    "hare": _hare,
}


def _check_options(options: InstanceOptions) -> None:
    if options.paper not in PAPERS:
        raise InputError(f"unknown paper {options.paper!r} (known: {', '.join(PAPERS)})",
                         field="paper")
    if isinstance(options.jobs, bool) or not 1 <= options.jobs <= MAX_JOBS:
        raise InputError(f"--jobs must be in [1, {MAX_JOBS}], got {options.jobs!r}",
                         field="jobs")
    if options.duration_s is not None:
        low, high = options.duration_s
        if not (math.isfinite(high) and 0 < low <= high):
            raise InputError(f"--duration-s needs 0 < LOW <= HIGH, got {low:g},{high:g}",
                             field="duration_s")
    rate = options.arrival_rate
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise InputError(f"--arrival-rate must be a positive number, got {rate!r}",
                         field="arrival_rate")
    for label, count in (options.devices or {}).items():
        if count < 1:
            raise InputError(f"device {label!r} needs a count >= 1, got {count}",
                             field="devices")


def instance_from_throughputs(measured: ThroughputFile, options: InstanceOptions, *,
                              source: str = "<throughputs>",
                              digest: str | None = None) -> Instance:
    """The ``options.paper`` instance drawn from ``measured`` (module docstring).

    ``source`` names the file in errors and in the description; ``digest`` is its sha256
    (computed from the file's canonical JSON when None).  Raises :class:`InputError` (exit
    code 2) naming the file when it has no usable cell for the paper.
    """
    _check_options(options)
    if digest is None:
        canonical = json.dumps(measured.to_dict(), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).hexdigest()
    ctx = _Context(measured=measured, options=options, source=source, digest=digest,
                   rng=_streams(options.seed),
                   cells={cell.key: cell for cell in measured.cells})
    body = _BUILDERS[options.paper](ctx)
    label = options.name or f"{options.paper}-{Path(source).stem}-{options.jobs}jobs-" \
        f"seed{options.seed}"
    describe = [f"seed={options.seed}"]
    for key in ("devices", "arrival_rate", "duration_s", "round_s"):
        value = getattr(options, key)
        if value is not None:
            describe.append(f"{key}={dict(value) if key == 'devices' else value}")
    if options.paper == "hare":
        describe.append(f"switch={options.switch}")
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": (
            f"{options.jobs} {options.paper} jobs drawn from the measurements in {source} "
            f"(sha256:{digest}) by schedlab profile-instance --paper {options.paper} "
            f"({', '.join(describe)}); job_type is the zoo job to run "
            "(docs/profile-to-instance.md)."),
        **body,
    }
    return instance_from_dict(document, source=label)


def instance_from_file(path: str | Path, options: InstanceOptions) -> Instance:
    """Read the throughput file at ``path`` and build the instance (its sha256 recorded)."""
    measured = load_throughputs(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return instance_from_throughputs(measured, options, source=str(path), digest=digest)


# ------------------------------------------------------------------------------------ CLI


def _devices_arg(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        label, sep, count = part.partition("=")
        if not sep or not label or not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: expected LABEL=COUNT, e.g. cpu=2")
        out[label.strip()] = int(count)
    if not out:
        raise argparse.ArgumentTypeError("expected LABEL=COUNT[,LABEL=COUNT...]")
    return out


def _range_arg(text: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LOW,HIGH seconds") from None
    if not (math.isfinite(high) and 0 < low <= high):
        raise argparse.ArgumentTypeError(f"{text!r}: needs 0 < LOW <= HIGH")
    return low, high


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return int(text)


def add_profile_instance_command(sub: Any, common: argparse.ArgumentParser,
                                 parser_class: type) -> None:
    """Register ``profile-instance`` on the top-level subparsers ``sub``."""
    cmd = sub.add_parser(
        "profile-instance", parents=[common],
        help="build a paper's instance from a throughput file",
        description="Draw a paper's instance from measured throughputs "
        "(docs/profile-to-instance.md).")
    cmd.add_argument("file", metavar="FILE", help="throughput file (schedlab profile --out)")
    cmd.add_argument("--paper", required=True, choices=PAPERS)
    cmd.add_argument("--jobs", required=True, type=_count, metavar="N")
    cmd.add_argument("--seed", type=int, default=0, metavar="S")
    cmd.add_argument("--devices", type=_devices_arg, metavar="LABEL=COUNT,...",
                     help="cluster (default: every measured label, with the most devices "
                     "it was measured on)")
    cmd.add_argument("--arrival-rate", type=_positive_number, metavar="JOBS_PER_HOUR",
                     help="Poisson arrivals (default: the paper's)")
    cmd.add_argument("--duration-s", type=_range_arg, metavar="LOW,HIGH",
                     help="log-uniform job durations in seconds instead of the paper's "
                     "(hare: a task's seconds)")
    cmd.add_argument("--round-s", type=_positive_number, metavar="S",
                     help="round length (default: the paper's)")
    cmd.add_argument("--switch", choices=list(HARE_SWITCH_KINDS), default="hare",
                     help="hare: which measured switch gives switch_seconds (default hare: "
                     "min(resident, pipelined))")
    cmd.add_argument("--name", help="instance name (default: paper, file, jobs, seed)")
    cmd.add_argument("--out", required=True, metavar="INSTANCE.json")
    cmd.set_defaults(handler=_cmd_profile_instance)


def _cmd_profile_instance(args: argparse.Namespace) -> int:
    from rich.console import Console

    from schedlab.workloads.gavel import save_instance_compact

    options = InstanceOptions(
        paper=args.paper, jobs=args.jobs, seed=args.seed, devices=args.devices,
        arrival_rate=args.arrival_rate, duration_s=args.duration_s, round_s=args.round_s,
        switch=args.switch, name=args.name)
    instance = instance_from_file(args.file, options)
    out = Path(args.out)
    try:
        save_instance_compact(instance, out)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=str(out)) from None
    types = ", ".join(f"{k}={p.count}" for k, p in instance.cluster.accelerators.items())
    Console(file=sys.stdout, highlight=False, soft_wrap=True, markup=False).print(
        f"wrote {out}: {len(instance.jobs)} {args.paper} jobs on {types}; solve with "
        f"schedlab solve {out} --formulation {DEFAULT_FORMULATION[args.paper]}", markup=False)
    return 0
