"""Saturn (SPASE) workloads: model-selection grids, a hand-checkable case, random instances.

SPASE (Nagrecha & Kumar, VLDB'24): each job lists configurations (technique, g GPUs,
runtime); a scheduler picks one configuration, one node and a start time per job.

- :func:`model_selection_instance`: a grid models x learning rates x batch sizes of
  fine-tuning jobs; configurations come from the analytic estimator
  (:func:`schedlab.profiler.estimate_configs`).  The learning rate does **not** change the
  estimated runtime (only the batch size does), so jobs differing only in the learning rate
  have equal configurations unless ``noise`` > 0.
- :func:`three_job_instance`: 3 jobs on 1 node x 4 GPUs whose optimal makespan (180 s) is
  derived by hand (:data:`THREE_JOB_DESCRIPTION`, docs/parallelism.md).
- :func:`random_saturn_instance`: seeded random jobs with sub-linear speed-ups, for tests
  and benchmarks.
- :func:`write_example_instances`: the files of ``instances/saturn/``.
- :func:`with_runtime_noise`, :func:`with_runtime_factors`, :func:`with_restart_cost`: the
  execution's truth written into an instance (``Job.runtime_factor`` = true runtime /
  estimate of every configuration of the job; ``Params.restart_cost_s`` = seconds to resume a
  checkpointed job), read by the node-level simulator and the checker; planners see only the
  estimates ``runtime_s``.  Both generators take ``runtime_noise`` / ``runtime_seed`` /
  ``restart_cost_s`` to write them directly.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, Instance, instance_from_dict, write_json_atomic
from schedlab.workloads.gavel import compact_instance_dict
from schedlab.world.parallelism import (
    DEFAULT_GPU_COUNTS,
    GpuSpec,
    JobSpec,
    ModelSpec,
    ParallelismTechnique,
    get_gpu,
    get_model,
)
from schedlab.world.scaling import ScalingProfile, configs_for

log = logging.getLogger(__name__)

#: Tokens per epoch of the default fine-tuning set (WikiText-2's training split is about
#: 2.1M words, about 2.4M GPT-2 BPE tokens).
DEFAULT_TOKENS_PER_EPOCH = 2.4e6
#: Default epochs of a model-selection job.
DEFAULT_EPOCHS = 10

_STREAMS = ("speedup", "configs", "infeasible")


def _cluster(nodes: int, gpus_per_node: int, accelerator: str) -> dict[str, Any]:
    """An accelerator pool of ``nodes`` x ``gpus_per_node`` and the explicit node list."""
    return {
        "accelerators": {accelerator: {"count": nodes * gpus_per_node, "nodes": nodes,
                                       "gpus_per_node": gpus_per_node}},
        "nodes": [{"name": f"node{n}", "accelerator": accelerator, "gpus": gpus_per_node}
                  for n in range(nodes)],
    }


def _check_count(value: Any, what: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def learning_rate_label(lr: float) -> str:
    """Short, exact label of a learning rate: 3e-05 -> "3e-05", 2.5e-05 -> "2.5e-05"."""
    short = f"{lr:.0e}"
    return short if float(short) == lr else f"{lr:.6g}"


def model_selection_instance(
    models: Sequence[str | ModelSpec] = ("gpt2-1.5b", "gptj-6b"),
    learning_rates: Sequence[float] = (1e-5, 3e-5, 1e-4),
    batch_sizes: Sequence[int] = (16, 32),
    nodes: int = 1,
    gpus_per_node: int = 8,
    gpu: str | GpuSpec = "a100-80gb",
    epochs: int = DEFAULT_EPOCHS,
    seed: int = 0,
    noise: float = 0.0,
    *,
    tokens_per_epoch: float = DEFAULT_TOKENS_PER_EPOCH,
    micro_batch_size: int = 1,
    gpu_counts: Sequence[int] = DEFAULT_GPU_COUNTS,
    techniques: Sequence[str | ParallelismTechnique] | None = None,
    name: str | None = None,
    description: str | None = None,
    runtime_noise: float = 0.0,
    runtime_seed: int | None = None,
    restart_cost_s: float | None = None,
    scaling: str | ScalingProfile = "analytic",
) -> Instance:
    """A model-selection workload: one fine-tuning job per (model, learning rate, batch size).

    Job ids read ``"<model>_lr<lr>_bs<batch>"`` (e.g. ``"gptj-6b_lr3e-05_bs32"``), all
    arriving at 0 s with weight 1.  Each job's ``configs`` are
    :func:`~schedlab.profiler.estimate_configs` for GPU counts in ``gpu_counts`` that fit a
    node (<= ``gpus_per_node``), including infeasible ones (``feasible: false``); runtimes
    in s and memory in GB, rounded to 0.1.

    Args:
        models: model names of :data:`~schedlab.profiler.MODELS` or ModelSpecs.
        learning_rates: labels only; the estimator's runtime does not depend on them.
        batch_sizes: global batch sizes B (samples per optimizer step).
        nodes, gpus_per_node: cluster of identical nodes ``node0``, ``node1``, ...
        gpu: GPU name of :data:`~schedlab.profiler.GPUS` (the accelerator type) or a GpuSpec.
        epochs: E, passes over ``tokens_per_epoch`` tokens.
        seed, noise: with ``noise`` = sigma > 0 every runtime is multiplied by
            exp(sigma z), z ~ N(0, 1) drawn per (job, configuration) from
            ``numpy.random.default_rng(seed)`` (profiling noise); 0 keeps the estimates.
        micro_batch_size: b of every job.
        techniques: technique names (default: every registered technique).
        runtime_noise, runtime_seed, restart_cost_s: the execution's truth (see
            :func:`with_execution_truth`; ``runtime_seed`` None = ``seed``).  Unlike ``noise``,
            which changes the estimates every planner sees, these leave the estimates alone.
        scaling: runtimes from the analytic cost model (``"analytic"``, the default), from
            published multi-GPU speed-ups (``"published"``, :mod:`schedlab.world.scaling`,
            docs/saturn-calibration.md) or from a given :class:`ScalingProfile`.
    """
    nodes = _check_count(nodes, "nodes")
    gpus_per_node = _check_count(gpus_per_node, "gpus_per_node")
    if not (math.isfinite(noise) and noise >= 0):
        raise InputError(f"noise must be a finite number >= 0, got {noise!r}")
    if not learning_rates or not batch_sizes or not models:
        raise InputError("models, learning_rates and batch_sizes must be non-empty")
    gpu_spec = get_gpu(gpu)
    specs = [get_model(m) for m in models]
    counts = [g for g in gpu_counts if g <= gpus_per_node]
    rng = np.random.default_rng(seed)
    jobs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for model in specs:
        for lr in learning_rates:
            if not (math.isfinite(lr) and lr > 0):
                raise InputError(f"learning rates must be positive, got {lr!r}")
            for batch in batch_sizes:
                job_id = f"{model.name}_lr{learning_rate_label(lr)}_bs{batch}"
                if job_id in seen:
                    raise InputError(f"duplicate job {job_id!r} in the grid")
                seen.add(job_id)
                spec = JobSpec(model, batch_size=batch, micro_batch_size=micro_batch_size,
                               tokens_per_epoch=tokens_per_epoch, epochs=epochs,
                               learning_rate=lr)
                configs = [c.model_dump(exclude_none=True)
                           for c in configs_for(spec, gpu_spec, counts, techniques,
                                                scaling=scaling)]
                if noise > 0:
                    for c in configs:
                        c["runtime_s"] = round(c["runtime_s"] * math.exp(noise * rng.normal()),
                                               1)
                if not any(c["feasible"] for c in configs):
                    log.warning("job %s has no feasible configuration on %s", job_id,
                                gpu_spec.name)
                jobs.append({"id": job_id,
                             "job_type": f"{model.name} fine-tuning, batch {batch}, lr {lr:g}",
                             "configs": configs})
    label = name or f"model-selection-{nodes}x{gpus_per_node}"
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": description or (
            f"Model selection: {len(jobs)} fine-tuning jobs = models {[m.name for m in specs]}"
            f" x learning rates {list(learning_rates)} x batch sizes {list(batch_sizes)}, "
            f"{epochs} epochs of {tokens_per_epoch:g} tokens, micro-batch {micro_batch_size}, "
            f"on {nodes} node(s) x {gpus_per_node} {gpu_spec.name}. Configurations from "
            "schedlab.profiler.estimate_configs (analytic cost model, docs/parallelism.md)"
            + ("" if scaling == "analytic" else
               f"; runtimes calibrated to {_scaling_label(scaling)} multi-GPU speed-ups "
               # the module's name before it moved to schedlab.world.scaling, kept so that
               # generated instance files do not change
               "(schedlab.profiler.scaling, docs/saturn-calibration.md)")
            + "; the learning rate does not change the estimated runtime"
            + (f"; runtimes x exp({noise:g} z), z ~ N(0,1), seed {seed}" if noise > 0 else "")
            + "."
        ),
        "cluster": _cluster(nodes, gpus_per_node, gpu_spec.name),
        "jobs": jobs,
    }
    return with_execution_truth(instance_from_dict(document, source=label), runtime_noise,
                                seed if runtime_seed is None else runtime_seed, restart_cost_s)


def _scaling_label(scaling: str | ScalingProfile) -> str:
    return scaling if isinstance(scaling, str) else f"the {scaling.name!r} profile's"


# --------------------------------------------------------------------------- three jobs

#: The optimal makespan of :func:`three_job_instance`, s.
THREE_JOB_OPTIMUM_S = 180.0

THREE_JOB_DESCRIPTION = (
    "Hand-checkable SPASE case (docs/parallelism.md derives it): 1 node x 4 GPUs, 3 jobs "
    "released at 0 s. A: fsdp 4 GPUs 100 s | fsdp 2 GPUs 180 s (single 1 GPU infeasible, "
    "out of memory). B: ddp 4 GPUs 70 s | ddp 2 GPUs 100 s | pipeline 2 GPUs 120 s | single "
    "1 GPU 190 s. C: ddp 4 GPUs 60 s | ddp 2 GPUs 80 s | single 1 GPU 150 s. Optimal "
    "makespan 180 s: A on 2 GPUs over [0, 180) beside B (ddp, 2 GPUs) and C (ddp, 2 GPUs) "
    "one after the other on the other 2 GPUs (B then C or C then B). Why nothing does "
    "better: if A takes 4 GPUs it holds the whole node for 100 s; B and C then need at least "
    "(190 + 150) / 4 = 85 s more (their least GPU-seconds over 4 GPUs), so >= 185 s. If A "
    "takes 2 GPUs it alone lasts 180 s. Hence >= 180 s. The configuration choice is unique: "
    "at 180 s B and C must fit beside A on 2 GPUs within [0, 180) (B on 1 GPU lasts 190 s; "
    "C on 1 GPU cannot overlap B's 2 GPUs, 100 + 150 > 180), so both use ddp on 2 GPUs, "
    "100 + 80 = 180. The simple bound max(max_j min_c r, sum_j min_c g r / 4) is only 175 s. "
    "Current practice (every job on all 4 GPUs, one after another) takes 100 + 70 + 60 = 230 s."
)


def three_job_instance() -> Instance:
    """3 jobs on 1 node x 4 GPUs with optimal makespan :data:`THREE_JOB_OPTIMUM_S` = 180 s
    (derivation in :data:`THREE_JOB_DESCRIPTION`)."""

    def cfg(technique: str, gpus: int, runtime: float, feasible: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"technique": technique, "gpus": gpus, "runtime_s": runtime}
        if not feasible:
            out["feasible"] = False
        return out

    jobs = [
        {"id": "A", "job_type": "large model (does not fit one GPU)",
         "configs": [cfg("single", 1, 340.0, feasible=False), cfg("fsdp", 2, 180.0),
                     cfg("fsdp", 4, 100.0)]},
        {"id": "B", "job_type": "medium model",
         "configs": [cfg("single", 1, 190.0), cfg("ddp", 2, 100.0), cfg("pipeline", 2, 120.0),
                     cfg("ddp", 4, 70.0)]},
        {"id": "C", "job_type": "medium model",
         "configs": [cfg("single", 1, 150.0), cfg("ddp", 2, 80.0), cfg("ddp", 4, 60.0)]},
    ]
    return instance_from_dict({
        "schema": INSTANCE_SCHEMA,
        "name": "three-jobs",
        "description": THREE_JOB_DESCRIPTION,
        "cluster": _cluster(1, 4, "a100-80gb"),
        "jobs": jobs,
    }, source="three-jobs")


# --------------------------------------------------------------------------- random

#: Per-technique slowdown ranges against the job's ideal curve r1 / g^alpha (uniform draws).
RANDOM_TECHNIQUE_SLOWDOWN: dict[str, tuple[float, float]] = {
    "single": (1.0, 1.0),
    "spilling": (1.5, 2.5),
    "ddp": (1.0, 1.0),
    "fsdp": (1.0, 1.15),
    "pipeline": (1.05, 1.3),
}


def random_saturn_instance(
    num_jobs: int,
    nodes: int = 1,
    gpus_per_node: int = 8,
    seed: int = 0,
    *,
    accelerator: str = "a100-80gb",
    runtime_range_s: tuple[float, float] = (600.0, 7200.0),
    alpha_range: tuple[float, float] = (0.6, 0.95),
    infeasible_probability: float = 0.15,
    name: str | None = None,
    runtime_noise: float = 0.0,
    runtime_seed: int | None = None,
    restart_cost_s: float | None = None,
) -> Instance:
    """Random SPASE jobs (ids "j0", "j1", ...), deterministic per ``seed``.

    Per job: a one-GPU runtime r1 log-uniform in ``runtime_range_s`` (s) and a speed-up
    exponent alpha ~ U(``alpha_range``); candidate configurations are ``single`` and
    ``spilling`` on 1 GPU and ``ddp``, ``fsdp``, ``pipeline`` on g in {2, 4, 8} with
    g <= ``gpus_per_node``; 2 to 5 of them are drawn, each with runtime
    r(g) = r1 / g^alpha x slowdown (:data:`RANDOM_TECHNIQUE_SLOWDOWN`), rounded to 0.1 s.
    Each drawn configuration is infeasible with probability ``infeasible_probability``
    (as if out of memory), but every job keeps at least one feasible configuration.
    Each purpose (speed-up curves, configuration draws, infeasibility) has its own
    Generator spawned from ``numpy.random.SeedSequence(seed)``.  ``runtime_noise``,
    ``runtime_seed`` (None = ``seed``) and ``restart_cost_s`` write the execution's truth
    (:func:`with_execution_truth`).
    """
    num_jobs = _check_count(num_jobs, "num_jobs", minimum=0)
    nodes = _check_count(nodes, "nodes")
    gpus_per_node = _check_count(gpus_per_node, "gpus_per_node")
    low, high = runtime_range_s
    if not (0 < low <= high and math.isfinite(high)):
        raise InputError(f"runtime_range_s must satisfy 0 < low <= high, got {runtime_range_s}")
    if not 0 <= alpha_range[0] <= alpha_range[1] <= 1:
        raise InputError(f"alpha_range must lie in [0, 1], got {alpha_range}")
    if not 0 <= infeasible_probability < 1:
        raise InputError(f"infeasible_probability must be in [0, 1), got "
                         f"{infeasible_probability}")
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    rng = {k: np.random.default_rng(c) for k, c in zip(_STREAMS, children, strict=True)}
    candidates = [(t, 1) for t in ("single", "spilling")] + [
        (t, g) for g in (2, 4, 8) if g <= gpus_per_node for t in ("ddp", "fsdp", "pipeline")
    ]
    jobs: list[dict[str, Any]] = []
    for j in range(num_jobs):
        r1 = math.exp(rng["speedup"].uniform(math.log(low), math.log(high)))
        alpha = rng["speedup"].uniform(*alpha_range)
        slowdown = {t: rng["speedup"].uniform(lo, hi)
                    for t, (lo, hi) in RANDOM_TECHNIQUE_SLOWDOWN.items()}
        k = int(rng["configs"].integers(2, min(5, len(candidates)) + 1))
        picked = sorted(rng["configs"].choice(len(candidates), size=k, replace=False))
        configs: list[dict[str, Any]] = []
        for index in picked:
            technique, g = candidates[int(index)]
            runtime = round(r1 / g**alpha * slowdown[technique], 1)
            configs.append({"technique": technique, "gpus": g, "runtime_s": runtime,
                            "feasible": True})
        flags = rng["infeasible"].random(k) < infeasible_probability
        if flags.all():
            flags[int(np.argmin([c["runtime_s"] for c in configs]))] = False
        for c, off in zip(configs, flags, strict=True):
            c["feasible"] = not bool(off)
        configs.sort(key=lambda c: (c["gpus"], c["technique"]))
        jobs.append({"id": f"j{j}", "job_type": f"random (r1 {r1:.0f} s, alpha {alpha:.2f})",
                     "configs": configs})
    label = name or f"random-{num_jobs}jobs-{nodes}x{gpus_per_node}-seed{seed}"
    instance = instance_from_dict({
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": (
            f"{num_jobs} random SPASE jobs on {nodes} node(s) x {gpus_per_node} {accelerator} "
            f"from schedlab.workloads.saturn.random_saturn_instance({num_jobs}, {nodes}, "
            f"{gpus_per_node}, seed={seed}): 2-5 configurations per job, runtime r1 / g^alpha "
            f"x technique slowdown, r1 log-uniform in {list(runtime_range_s)} s, alpha ~ "
            f"U{tuple(alpha_range)}, each configuration infeasible with probability "
            f"{infeasible_probability} (at least one feasible per job)."
        ),
        "cluster": _cluster(nodes, gpus_per_node, accelerator),
        "jobs": jobs,
    }, source=label)
    return with_execution_truth(instance, runtime_noise,
                                seed if runtime_seed is None else runtime_seed, restart_cost_s)


# ------------------------------------------------------------------- execution's truth


def runtime_noise_factors(num_jobs: int, sigma: float, seed: int) -> list[float]:
    """f_j = exp(sigma z_j), z_j ~ N(0, 1) drawn in job order from
    ``numpy.random.default_rng(seed)`` (``standard_normal(num_jobs)``), i.e.
    f_j ~ lognormal(0, sigma) with E[f] = exp(sigma^2 / 2); all 1 when sigma = 0."""
    if not (math.isfinite(sigma) and sigma >= 0):
        raise InputError(f"runtime noise sigma must be a finite number >= 0, got {sigma!r}",
                         field="runtime_noise")
    if sigma == 0:
        return [1.0] * num_jobs
    z = np.random.default_rng(seed).standard_normal(num_jobs)
    return [float(v) for v in np.exp(sigma * z)]


def with_runtime_factors(instance: Instance, factors: Mapping[str, float]) -> Instance:
    """A copy of ``instance`` whose jobs named in ``factors`` get ``runtime_factor`` = the
    given f (true runtime / estimate of every configuration); other jobs keep theirs."""
    known = {job.id for job in instance.jobs}
    unknown = sorted(set(factors) - known)
    if unknown:
        raise InputError(f"runtime factors name unknown jobs {unknown}", file=instance.name,
                         field="runtime_factor")
    bad = {k: v for k, v in factors.items() if not (math.isfinite(v) and v > 0)}
    if bad:
        raise InputError(f"runtime factors must be finite and > 0, got {bad}",
                         file=instance.name, field="runtime_factor")
    jobs = [job.model_copy(update={"runtime_factor": float(factors[job.id])})
            if job.id in factors else job for job in instance.jobs]
    return instance.model_copy(update={"jobs": jobs})


def with_runtime_noise(instance: Instance, sigma: float, seed: int) -> Instance:
    """A copy of ``instance`` in which every job's true runtime is its estimate x f_j:
    ``runtime_factor`` f_j = exp(sigma z_j), z ~ N(0, 1) from ``default_rng(seed)`` in job
    order (:func:`runtime_noise_factors`).  Every job's factor is (re)written, 1 when
    sigma = 0; the description notes the draw."""
    factors = runtime_noise_factors(len(instance.jobs), sigma, seed)
    noisy = with_runtime_factors(instance, dict(zip((job.id for job in instance.jobs), factors,
                                                    strict=True)))
    note = (f"True runtimes: estimate x runtime_factor, lognormal(0, {sigma:g}) per job from "
            f"default_rng({seed}).")
    return noisy.model_copy(update={
        "description": f"{instance.description} {note}" if instance.description else note})


def with_restart_cost(instance: Instance, seconds: float | None) -> Instance:
    """A copy of ``instance`` with ``params.restart_cost_s`` = ``seconds`` (s to resume a
    checkpointed job, no progress meanwhile; None = 0)."""
    if seconds is not None and not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"restart cost must be a finite number >= 0 s, got {seconds!r}",
                         file=instance.name, field="restart_cost_s")
    params = instance.params.model_copy(update={"restart_cost_s": seconds})
    return instance.model_copy(update={"params": params})


def with_execution_truth(
    instance: Instance, runtime_noise: float, seed: int, restart_cost_s: float | None
) -> Instance:
    """``instance`` with :func:`with_runtime_noise` (when ``runtime_noise`` > 0) and
    :func:`with_restart_cost` (when ``restart_cost_s`` is not None) applied; unchanged when
    neither is asked."""
    if runtime_noise != 0:
        instance = with_runtime_noise(instance, runtime_noise, seed)
    if restart_cost_s is not None:
        instance = with_restart_cost(instance, restart_cost_s)
    return instance


# --------------------------------------------------------------------------- examples


def example_instances() -> dict[str, Instance]:
    """The example instances of ``instances/saturn/``, by file name."""
    return {
        "three-jobs.json": three_job_instance(),
        "model-selection-1x8.json": model_selection_instance(
            nodes=1, gpus_per_node=8, name="model-selection-1x8"),
        "model-selection-2x8.json": model_selection_instance(
            nodes=2, gpus_per_node=8, name="model-selection-2x8"),
        "random-16jobs-2x8.json": random_saturn_instance(
            16, nodes=2, gpus_per_node=8, seed=0, name="random-16jobs-2x8"),
    }


def compact_saturn_dict(instance: Instance) -> dict[str, Any]:
    """The instance as a plain dict without default-valued fields: each job writes its ``id``
    first, then what differs from the defaults (a configuration omits ``feasible`` when it is
    true)."""
    return compact_instance_dict(instance, job_keys=("id",))


def write_example_instances(folder: str | Path) -> list[Path]:
    """(Re)write the example instances into ``folder``; return the paths written.

    Each file is written atomically (temporary file in the same folder, then rename).
    Deterministic: the same call reproduces the shipped ``instances/saturn/`` (to relative
    1e-9 on any machine; byte for byte where library versions match).
    """
    out = Path(folder)
    written: list[Path] = []
    for file_name, instance in example_instances().items():
        target = out / file_name
        write_json_atomic(target, compact_saturn_dict(instance), indent=1)
        written.append(target)
        log.info("wrote %s", target)
    return written
