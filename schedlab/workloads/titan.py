r"""Titan workloads: foundation-model fine-tuning tasks, their generator and example instances.

Titan (SoCC'22) schedules fine-tuning tasks of a few shared foundation models.  This module
follows the workload recipe of Titan's public code (github.com/gaow0007/TitanSched at f71cf44:
``trace/calibrate.py``, ``trace/all_trace_generation.sh``, ``client/job/foundation_model.py``,
``client/application/foundation_model.py``) with every rule as a table, and says where it
deviates (docs/workloads.md, "Titan").

**A task** fine-tunes a base model (:data:`BASE_MODELS`: ViT-B/L-like and RoBERTa-base/large-
like) on a dataset whose class labels are one of the label sets of the shipped concept
hierarchy (:func:`schedlab.world.concept_hierarchy.label_sets`).  Per task, in order:

1. **base model**: the ``model`` argument, or for ``"mixed"`` a draw from :data:`MODEL_MIX`
   (weights proportional to the code's per-model trace sizes: ViT-B 320, ViT-L 160,
   RoBERTa-base 120, RoBERTa-large 60 jobs per 32 GPUs at density 1);
2. **requested GPUs** g from :data:`GPU_MIX` (1: 39%, 2: 9%, 4: 6%, 8: 45%, 16: 1%, the
   requests of the code's twelve generated traces ``trace/main.zip``, pooled);
3. **duration** d at g GPUs: log-uniform on [5 min, 10 h] (the code's trace filter
   ``--min_time=300 --max_time=36000``), whole seconds;
4. **target batch size** B = base batch x gradient steps, the steps drawn from the model's
   :data:`GRADIENT_STEPS_MIX` (the same traces; base batch 48 for ViT, 16 for
   RoBERTa as in ``calibrate.py``); the task can use at most
   ``max_gpus`` = min(32, B / smallest local batch) GPUs and g is cut to that (as the code)
   and to the cluster's GPUs;
5. **dataset**: the tasks' GPU-time g d splits them at its 30th and 90th percentiles into
   small, medium and large (``calibrate.py``), and the dataset is drawn uniformly among the
   model family's datasets of that size class (:data:`DATASETS`);
6. **speed profile** ``duration_s`` {a: seconds} at every Titan GPU-count option a <=
   ``max_gpus`` (1, 2, 3, 4, 8, ..., 32): d(a) = d x thr(g) / thr(a), thr the model's
   samples/s at batch B on a GPUs (:data:`THROUGHPUT`, V100);
7. **arrival**: uniform over an 8-hour working day (the code keeps trace submissions between
   8:00 and 16:00), whole seconds, tasks in arrival order.

``total_steps`` = the task's work in samples, W = d thr(g), ``throughput`` {type: thr(g)}
(samples/s on its g GPUs) and ``scale_factor`` = g, so the fixed-gang simulator runs a task
at its request; ``params.round_s`` = 120 s (Titan's scheduling interval).

**How many tasks**: ``num_jobs``, else round(density x ``jobs_per_gpu`` x GPUs) with
``density`` 1, 1.5 or 2 (the code's densities) and :data:`DEFAULT_JOBS_PER_GPU` = 1.

**Deviations from the code** (none tuned towards the paper's numbers):

* no production trace: the code samples (duration, GPUs, submission) rows of a cluster trace
  (``BM``) it does not ship; here they are drawn from the distributions above;
* the drawn duration is the task's duration at its request.  In the code it only picks the
  dataset's size class, and the task then takes dataset size x epochs-to-target-accuracy
  (from hyper-parameter sweeps it does not ship) / profiled speed;
* the gradient steps are drawn independently of the dataset (the code takes each dataset's
  best hyper-parameters);
* datasets: label sets whose labels are WordNet nouns.  The code's text tasks are GLUE tasks
  (labels such as "entailment"), which no concept hierarchy holds, so text tasks here classify
  question types, emotions, news, encyclopedia and forum topics (TREC, Emotion, AG News,
  DBpedia-14, Yahoo Answers);
* one trace may mix the four base models (``model="mixed"``, the default); the code makes one
  trace per model.

:data:`THROUGHPUT` tabulates the code's speed model once: its V100 profiles
(``client/application/appinfo/fminfo/V100/<model>_placements.csv`` and
``_scalability.csv``, step and synchronisation time by placement and local batch size)
evaluated as ``FoundationModelJob.step`` does: g GPUs in nodes of 4, local batch ceil(B / g),
gradient accumulation above the largest profiled local batch, the step time interpolated as
``FoundationModelSpeed.get_throughput`` does, samples per iteration over iteration time.  The
profiles are not monotone: a small batch spread over more nodes syncs more than it computes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.atomic import write_bytes_atomic
from schedlab.errors import InputError
from schedlab.instance import INSTANCE_SCHEMA, MAX_JOBS, Instance, instance_from_dict
from schedlab.workloads.gavel import compact_instance_dict
from schedlab.workloads.precision import stated

log = logging.getLogger(__name__)

#: Titan's scheduling interval (``--scheduling_time_interval=120`` for titan), s.
TITAN_ROUND_S = 120.0
#: Length of the working day arrivals fall in, s (trace submissions 8:00-16:00).
DAY_S = 8 * 3600.0
#: Trace duration filter of the code, s (``--min_time=300 --max_time=36000``).
MIN_DURATION_S = 300.0
MAX_DURATION_S = 36000.0
#: GPUs per node (``--num_gpu_p_node=4``).
GPUS_PER_NODE = 4
#: The code's largest GPU count of a task (``max_num_gpus = 32``).
MAX_TASK_GPUS = 32
#: Tasks per GPU of the cluster at density 1 (this module's choice, docs/workloads.md).
DEFAULT_JOBS_PER_GPU = 1.0
#: The code's densities (``for density in 1 1.5 2``).
DENSITIES: tuple[float, ...] = (1.0, 1.5, 2.0)
#: Titan's GPU-count options up to 32 (1, 2, 3, then whole nodes of 4).
GPU_OPTIONS: tuple[int, ...] = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32)
#: Size-class cut points of the tasks' GPU-time (``calibrate.py``: 0.3 and 0.9 quantiles).
SIZE_QUANTILES: tuple[float, float] = (0.3, 0.9)


@dataclass(frozen=True)
class BaseModelSpec:
    """A base model: its ``family`` ("vision" or "text"), the batch of one gradient step
    (``base_batch``) and the smallest and largest profiled local batch sizes."""

    family: str
    base_batch: int
    min_local_batch: int
    max_local_batch: int


#: The four base models (the code's ``vit``, ``vit-large``, ``roberta-base``,
#: ``roberta-large``); local batch ranges from the V100 placement profiles.
BASE_MODELS: Mapping[str, BaseModelSpec] = {
    "vit-base": BaseModelSpec("vision", 48, 4, 256),
    "vit-large": BaseModelSpec("vision", 48, 4, 256),
    "roberta-base": BaseModelSpec("text", 16, 2, 52),
    "roberta-large": BaseModelSpec("text", 16, 2, 20),
}
#: P(base model) of a mixed trace: the code's trace sizes 320, 160, 120, 60 normalized.
MODEL_MIX: Mapping[str, float] = {
    "vit-base": 320 / 660, "vit-large": 160 / 660, "roberta-base": 120 / 660,
    "roberta-large": 60 / 660,
}
#: Requested GPUs, as counts (normalized when drawn): the 2970 tasks of the code's twelve
#: generated traces (trace/main.zip, FM-<density>-<model>/workload-0.csv) pooled; the 7 tasks
#: cut from 16 to 12 GPUs by their max_gpus count as 16.
GPU_MIX: Mapping[int, float] = {1: 1163, 2: 269, 4: 175, 8: 1333, 16: 30}
#: Gradient steps per model, as counts: the same twelve traces.
GRADIENT_STEPS_MIX: Mapping[str, Mapping[int, float]] = {
    "vit-base": {1: 511, 4: 151, 8: 187, 12: 591},
    "vit-large": {1: 230, 4: 284, 12: 206},
    "roberta-base": {1: 137, 4: 32, 8: 352, 12: 19},
    "roberta-large": {1: 52, 4: 16, 8: 91, 12: 111},
}
#: Samples/s of the code's speed model (module docstring) by model and gradient steps, at the
#: counts of :data:`GPU_OPTIONS` up to min(32, B / smallest local batch).
THROUGHPUT: Mapping[str, Mapping[int, tuple[float, ...]]] = {
    "vit-base": {
        1: (277.26, 439.07, 541.7, 595.92, 475.03, 412.51),
        4: (302.24, 564.51, 788.15, 974.06, 1211.57, 1230.44, 1160.36, 1036.18, 1025.28,
            788.87, 784.78),
        8: (302.24, 591.3, 850.08, 1097.55, 1622.83, 1850.45, 1882.44, 1825.6, 1756.19,
            1579.56, 1487.15),
        12: (302.24, 586.85, 881.4, 1138.53, 1843.79, 2219.79, 2378.99, 2371.41, 2367.79,
             2190.78, 2113.95),
    },
    "vit-large": {
        1: (144.35, 238.08, 302.71, 350.53, 275.55, 273.42),
        4: (170.38, 320.93, 453.1, 573.13, 699.1, 793.72, 835.27, 785.69, 788.62, 702.77,
            777.27),
        8: (170.38, 339.86, 495.6, 643.55, 950.39, 1168.42, 1288.96, 1364.29, 1418.65,
            1292.54, 1341.83),
        12: (170.38, 335.25, 512.22, 667.8, 1075.03, 1378.07, 1589.72, 1657.74, 1880.25,
             1808.48, 1782.11),
    },
    "roberta-base": {
        1: (84.78, 152.35, 202.93, 252.4, 255.03),
        4: (89.14, 177.7, 259.67, 336.46, 508.35, 590.94, 648.11, 628.02, 519.89, 562.5,
            599.35),
        8: (90.17, 177.83, 270.79, 358.38, 607.21, 776.94, 910.53, 964.61, 976.91, 915.38,
            997.53),
        12: (90.76, 182.48, 266.73, 362.54, 649.41, 882.23, 1055.21, 1125.35, 1210.32,
             1205.19, 1284.2),
    },
    "roberta-large": {
        1: (30.64, 57.0, 78.63, 100.35, 132.74),
        4: (30.64, 61.23, 88.49, 121.98, 215.72, 277.89, 328.08, 339.28, 317.13, 350.05,
            379.61),
        8: (30.97, 61.36, 91.25, 122.51, 237.07, 329.47, 409.86, 471.9, 508.07, 499.54,
            551.84),
        12: (31.11, 62.21, 91.94, 122.68, 234.21, 352.45, 444.55, 511.66, 604.14, 628.15,
             688.2),
    },
}


@dataclass(frozen=True)
class DatasetSpec:
    """A fine-tuning dataset: the label set of its classes (a name of the hierarchy's
    ``label_sets()``), its model ``family``, training samples and size class."""

    label_set: str
    family: str
    samples: int
    size: str  # "small", "medium" or "large"


#: The datasets tasks draw from, by name: vision sets with the code's sizes (``TaskScale``)
#: where it has them, else their training split's, and topic/intent classification sets
#: whose labels are nouns (training-split sizes); size classes by size within the family.
DATASETS: Mapping[str, DatasetSpec] = {
    "cat_vs_dog": DatasetSpec("cat_vs_dog", "vision", 8000, "small"),
    "imagenette": DatasetSpec("imagenette", "vision", 9469, "small"),
    "cifar10": DatasetSpec("cifar10", "vision", 50000, "medium"),
    "cifar100": DatasetSpec("cifar100", "vision", 50000, "medium"),
    "cifar100_coarse": DatasetSpec("cifar100_coarse", "vision", 50000, "medium"),
    "fashion_mnist": DatasetSpec("fashion_mnist", "vision", 60000, "medium"),
    "food101": DatasetSpec("food101", "vision", 75750, "large"),
    "trec_coarse": DatasetSpec("trec_coarse", "text", 5452, "small"),
    "emotion": DatasetSpec("emotion", "text", 16000, "small"),
    "ag_news": DatasetSpec("ag_news", "text", 120000, "medium"),
    "dbpedia14": DatasetSpec("dbpedia14", "text", 560000, "large"),
    "yahoo_answers": DatasetSpec("yahoo_answers", "text", 1400000, "large"),
}

_STREAMS = ("model", "gpus", "duration", "steps", "dataset", "arrival")


def _streams(seed: int) -> dict[str, np.random.Generator]:
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child)
            for name, child in zip(_STREAMS, children, strict=True)}


def _draw(rng: np.random.Generator, mix: Mapping[Any, float], size: int) -> list[Any]:
    keys = list(mix)
    p = np.asarray([mix[k] for k in keys], dtype=float)
    picks = rng.choice(len(keys), size=size, p=p / p.sum())
    return [keys[int(i)] for i in picks]


def max_gpus(model: str, gradient_steps: int) -> int:
    """min(32, B // smallest local batch), B = base batch x gradient steps (the code's
    ``max_num_gpus``)."""
    spec = BASE_MODELS[model]
    return min(MAX_TASK_GPUS, spec.base_batch * gradient_steps // spec.min_local_batch)


def throughput(model: str, gradient_steps: int) -> dict[int, float]:
    """{GPUs: samples/s} of :data:`THROUGHPUT` for the model at the gradient steps."""
    values = THROUGHPUT[model][gradient_steps]
    return dict(zip(GPU_OPTIONS[:len(values)], values, strict=True))


def label_set_classes(name: str) -> list[str]:
    """The class labels of the hierarchy's label set ``name`` (an InputError naming the known
    sets when it is not shipped)."""
    from schedlab.world.concept_hierarchy import label_sets

    sets = label_sets()
    if name not in sets:
        raise InputError(f"label set {name!r} is not in the concept hierarchy (known: "
                         f"{', '.join(sorted(sets))})", field="dataset")
    return [str(label) for label in sets[name]]


def size_classes(gpu_time: Sequence[float]) -> list[str]:
    """small / medium / large per task: GPU-time at or below the value of rank int(0.3 N)
    of the sorted GPU-times is small, at or below rank int(0.9 N) medium, else large (the
    code's ``small_thr`` / ``medium_thr``)."""
    ordered = sorted(gpu_time)
    n = len(ordered)
    small = ordered[min(int(n * SIZE_QUANTILES[0]), n - 1)]
    medium = ordered[min(int(n * SIZE_QUANTILES[1]), n - 1)]
    return ["small" if t <= small else "medium" if t <= medium else "large" for t in gpu_time]


def _datasets_by_class(family: str) -> dict[str, list[str]]:
    """Dataset names of a family per size class (every class has some)."""
    out: dict[str, list[str]] = {c: [] for c in ("small", "medium", "large")}
    for name, spec in DATASETS.items():
        if spec.family == family:
            out[spec.size].append(name)
    return out


def generate_titan_instance(
    num_jobs: int | None = None,
    *,
    gpus: int = 64,
    density: float = 1.0,
    jobs_per_gpu: float = DEFAULT_JOBS_PER_GPU,
    model: str = "mixed",
    seed: int = 0,
    gpus_per_node: int = GPUS_PER_NODE,
    day_s: float = DAY_S,
    min_duration_s: float = MIN_DURATION_S,
    max_duration_s: float = MAX_DURATION_S,
    round_s: float = TITAN_ROUND_S,
    accelerator: str = "v100",
    name: str | None = None,
    description: str | None = None,
) -> Instance:
    """A Titan workload (module docstring) on ``gpus`` GPUs of type ``accelerator`` in nodes
    of ``gpus_per_node``.

    Raises :class:`~schedlab.errors.InputError` for impossible arguments (no jobs, an unknown
    model, GPUs not a multiple of the node size, an empty duration range, ...).
    """
    if model != "mixed" and model not in BASE_MODELS:
        raise InputError(f"unknown base model {model!r} (mixed, {', '.join(BASE_MODELS)})",
                         field="model")
    if gpus < 1 or gpus_per_node < 1 or gpus % gpus_per_node:
        raise InputError(f"{gpus} GPUs do not make whole nodes of {gpus_per_node}",
                         field="gpus")
    if not (math.isfinite(density) and density > 0 and math.isfinite(jobs_per_gpu)
            and jobs_per_gpu > 0):
        raise InputError("density and jobs_per_gpu must be positive numbers", field="density")
    count = num_jobs if num_jobs is not None else round(density * jobs_per_gpu * gpus)
    if not 1 <= count <= MAX_JOBS:
        raise InputError(f"the workload needs 1 to {MAX_JOBS} jobs, got {count}",
                         field="num_jobs")
    if not (0 < min_duration_s <= max_duration_s and math.isfinite(max_duration_s)):
        raise InputError("durations need 0 < min_duration_s <= max_duration_s",
                         field="min_duration_s")
    if not (math.isfinite(day_s) and day_s > 0 and math.isfinite(round_s) and round_s > 0):
        raise InputError("day_s and round_s must be positive", field="day_s")

    rng = _streams(seed)
    models = ([model] * count if model != "mixed" else _draw(rng["model"], MODEL_MIX, count))
    requested = _draw(rng["gpus"], GPU_MIX, count)
    logs = rng["duration"].uniform(math.log(min_duration_s), math.log(max_duration_s), count)
    durations = [float(min(max(round(math.exp(v)), min_duration_s), max_duration_s))
                 for v in logs]
    steps = [_draw(rng["steps"], GRADIENT_STEPS_MIX[m], 1)[0] for m in models]
    sizes = size_classes([g * d for g, d in zip(requested, durations, strict=True)])
    dataset_rng = rng["dataset"]
    arrivals = sorted(float(int(v)) for v in rng["arrival"].uniform(0.0, day_s, count))

    classes_cache: dict[str, list[str]] = {}
    jobs: list[dict[str, Any]] = []
    for i in range(count):
        m = models[i]
        spec = BASE_MODELS[m]
        choices = _datasets_by_class(spec.family)[sizes[i]]
        dataset = choices[int(dataset_rng.integers(len(choices)))]
        label_set = DATASETS[dataset].label_set
        if label_set not in classes_cache:
            classes_cache[label_set] = label_set_classes(label_set)
        cap = max_gpus(m, steps[i])
        g = min(requested[i], cap, gpus)
        speed = throughput(m, steps[i])
        profile = {str(a): stated(durations[i] * speed[g] / speed[a])
                   for a in sorted(speed) if a <= cap}
        jobs.append({
            "id": f"{m}@{dataset}-{i}",
            "job_type": f"{m}@{dataset}",
            "arrival": arrivals[i],
            "scale_factor": g,
            "total_steps": stated(durations[i] * speed[g]),
            "throughput": {accelerator: speed[g]},
            "base_model": m,
            "dataset": dataset,
            "label_set": label_set,
            "classes": classes_cache[label_set],
            "duration_s": profile,
            "max_gpus": cap,
        })

    label = name or f"titan-{model}-{count}tasks-{gpus}gpus-seed{seed}"
    document = {
        "schema": INSTANCE_SCHEMA,
        "name": label,
        "description": description or (
            f"{count} Titan fine-tuning tasks from schedlab.workloads.generate_titan_instance("
            f"{count}, gpus={gpus}, model={model!r}, seed={seed}): requested GPUs from the "
            "code's traces, durations log-uniform in [5 min, 10 h] at the request, speed "
            "profiles from Titan's V100 measurements, arrivals uniform over an 8-hour day."),
        "cluster": {"accelerators": {accelerator: {
            "count": gpus, "nodes": gpus // gpus_per_node, "gpus_per_node": gpus_per_node}}},
        "jobs": jobs,
        "params": {"round_s": float(round_s)},
    }
    return instance_from_dict(document, source=label)


# -------------------------------------------------------------------------------- examples

#: Seed of the small example (10 ViT-B tasks on 16 GPUs).
SMALL_SEED = 3


def example_instances() -> dict[str, Instance]:
    """The example instances of ``instances/titan/``, by file name."""
    small = generate_titan_instance(
        10, gpus=16, model="vit-base", seed=SMALL_SEED, day_s=3600.0,
        name="small-10tasks-16gpus",
        description=(
            "Ten ViT-B fine-tuning tasks on 16 GPUs (4 nodes of 4) arriving within an hour, "
            "for quick runs of the Titan policies: generate_titan_instance(10, gpus=16, "
            "model='vit-base', seed=3, day_s=3600)."),
    )
    return {"small-10tasks-16gpus.json": small}


def save_titan_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` without default-valued fields, one task per line, atomically."""
    import json

    data = compact_instance_dict(instance)
    head = {k: v for k, v in data.items() if k != "jobs"}
    lines = ["{"]
    lines += [f" {json.dumps(k)}: {json.dumps(v, allow_nan=False)}," for k, v in head.items()]
    tasks = [json.dumps(job, allow_nan=False, separators=(",", ":")) for job in data["jobs"]]
    lines.append(' "jobs": [')
    lines += [f"  {task}," for task in tasks[:-1]] + [f"  {tasks[-1]}", " ]", "}"]
    write_bytes_atomic(Path(path), ("\n".join(lines) + "\n").encode("utf-8"))


def write_example_instances(folder: str | Path) -> list[Path]:
    """(Re)write ``instances/titan/`` into ``folder``; return the paths written
    (deterministic up to the last digits of the stated floats, docs/workloads.md)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, instance in example_instances().items():
        target = out / file_name
        save_titan_instance(instance, target)
        written.append(target)
        log.info("wrote %s", target)
    return written
